//! Field paths and the `FieldsV1` trie used by managedFields and server-side apply.

use crate::registry::schema::{self, ListType, Ty};
use serde_json::{Map, Value};
use std::collections::BTreeSet;

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// One step of a field path.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Step {
    /// A map field: `f:<name>`.
    Field(String),
    /// A list item by its keys: `k:{"name":"x"}` (JSON text of the key object).
    Key(String),
    /// A set item by value: `v:<json>`.
    Value(String),
}

/// A path from the object root.
pub type Path = Vec<Step>;

/// The key step (`k:{...}`) of an item of a map-list with `keys`: the key fields in name
/// order, an omitted key taking its schema default. `None` when the item is not an object
/// or omits a key that has no default.
pub fn item_key(item: &Value, item_ty: Ty<'_>, keys: &[String]) -> Option<Step> {
    let obj = item.as_object()?;
    let mut m = Map::new();
    for k in keys {
        let v = obj.get(k).or_else(|| item_ty.field_default(k))?;
        m.insert(k.clone(), v.clone());
    }
    Some(Step::Key(key_text(&m)))
}

/// The JSON text of a key object with its fields sorted by name, as structured-merge-diff
/// writes it.
fn key_text(m: &Map<String, Value>) -> String {
    let mut names: Vec<&String> = m.keys().collect();
    names.sort();
    let mut s = String::from("{");
    for (i, n) in names.into_iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&Value::String(n.clone()).to_string());
        s.push(':');
        s.push_str(&m[n].to_string());
    }
    s.push('}');
    s
}

/// The first item of a map-list that omits a key field without a default, as an error
/// message (`.spec.ports: element 0: ...`), anywhere in `v`.
pub fn missing_key(v: &Value, ty: Option<Ty<'_>>, at: &mut String) -> Option<String> {
    let ty = ty?;
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                let Some(f) = ty.field(k) else { continue };
                let len = at.len();
                at.push('.');
                at.push_str(k);
                let found = missing_key(child, Some(f.ty), at);
                at.truncate(len);
                if found.is_some() {
                    return found;
                }
            }
            None
        }
        Value::Array(items) => {
            let (item_ty, lt, keys) = ty.list()?;
            for (i, item) in items.iter().enumerate() {
                if lt == ListType::Map {
                    if !item.is_object() {
                        return Some(format!(
                            "{at}: element {i}: associative list with keys may not have non-map elements"
                        ));
                    }
                    for k in keys {
                        if item.get(k).is_none() && item_ty.field_default(k).is_none() {
                            return Some(format!(
                                "{at}: element {i}: associative list with keys has an element that omits key field {k:?} (and doesn't have default value)"
                            ));
                        }
                    }
                }
                let len = at.len();
                at.push_str(&format!("[{i}]"));
                let found = missing_key(item, Some(item_ty), at);
                at.truncate(len);
                if found.is_some() {
                    return found;
                }
            }
            None
        }
        _ => None,
    }
}

/// Metadata the field manager never tracks: identity and server-set fields.
const UNTRACKED_META: [&str; 10] = [
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "selfLink",
    "managedFields",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

fn tracked_meta(meta: &Map<String, Value>) -> Map<String, Value> {
    meta.iter()
        .filter(|(k, _)| !UNTRACKED_META.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The field paths set in `v` (of type `ty`), as structured-merge-diff computes a field set:
/// scalars, atomic lists, atomic structs and maps, empty maps and nulls are leaves; items
/// of map-lists (`k:`) and sets (`v:`) are members themselves. Server-set metadata (name,
/// uid, resourceVersion, ...) is not tracked.
pub fn paths_of(v: &Value, ty: Option<Ty<'_>>) -> BTreeSet<Path> {
    let mut out = BTreeSet::new();
    let Some(root) = v.as_object() else {
        return out;
    };
    let mut prefix = Vec::new();
    for (k, child) in root {
        if k == "apiVersion" || k == "kind" {
            continue;
        }
        if k == "metadata" {
            let Some(meta) = child.as_object() else {
                continue;
            };
            let tracked = tracked_meta(meta);
            if !tracked.is_empty() {
                prefix.push(Step::Field("metadata".into()));
                walk(
                    &Value::Object(tracked),
                    schema::builtin_def(OBJECT_META),
                    false,
                    &mut prefix,
                    &mut out,
                );
                prefix.pop();
            }
            continue;
        }
        let f = schema::field(ty, k);
        prefix.push(Step::Field(k.clone()));
        walk(
            child,
            f.map(|f| f.ty),
            f.is_some_and(|f| f.is_atomic_object()),
            &mut prefix,
            &mut out,
        );
        prefix.pop();
    }
    out
}

fn walk(v: &Value, ty: Option<Ty<'_>>, atomic: bool, prefix: &mut Path, out: &mut BTreeSet<Path>) {
    let leaf = |prefix: &Path, out: &mut BTreeSet<Path>| {
        if !prefix.is_empty() {
            out.insert(prefix.clone());
        }
    };
    if atomic {
        return leaf(prefix, out);
    }
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, child) in m {
                let f = schema::field(ty, k);
                prefix.push(Step::Field(k.clone()));
                walk(
                    child,
                    f.map(|f| f.ty),
                    f.is_some_and(|f| f.is_atomic_object()),
                    prefix,
                    out,
                );
                prefix.pop();
            }
        }
        Value::Array(items) => match ty.and_then(|t| t.list()) {
            Some((item_ty, ListType::Map, keys)) => {
                let steps: Option<Vec<Step>> =
                    items.iter().map(|i| item_key(i, item_ty, keys)).collect();
                // An item without its keys cannot be tracked: own the list as a whole.
                let Some(steps) = steps else {
                    return leaf(prefix, out);
                };
                for (item, step) in items.iter().zip(steps) {
                    prefix.push(step);
                    out.insert(prefix.clone());
                    walk(item, Some(item_ty), item_ty.is_atomic_object(), prefix, out);
                    prefix.pop();
                }
            }
            Some((_, ListType::Set, _)) => {
                for item in items {
                    prefix.push(Step::Value(item.to_string()));
                    out.insert(prefix.clone());
                    prefix.pop();
                }
            }
            // Atomic lists, and lists without a schema (structured-merge-diff's default).
            _ => leaf(prefix, out),
        },
        _ => leaf(prefix, out),
    }
}

/// Whether two JSON values are equal, numbers compared by value (`80` and `80.0`).
pub fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x == y || x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

/// Whether `item` has the key `k` (the JSON text of a key object).
fn matches_key(item: &Value, item_ty: Option<Ty<'_>>, key: &Map<String, Value>) -> bool {
    let Some(obj) = item.as_object() else {
        return false;
    };
    key.iter().all(|(kn, kv)| {
        obj.get(kn)
            .or_else(|| item_ty.and_then(|t| t.field_default(kn)))
            .is_some_and(|v| json_eq(v, kv))
    })
}

/// The item of `items` a path step designates, by key or by value.
fn find_item<'v>(
    items: &'v [Value],
    step: &Step,
    item_ty: Option<Ty<'_>>,
) -> Option<(usize, &'v Value)> {
    match step {
        Step::Key(k) => {
            let key: Map<String, Value> = serde_json::from_str(k).ok()?;
            items
                .iter()
                .enumerate()
                .find(|(_, i)| matches_key(i, item_ty, &key))
        }
        Step::Value(s) => {
            let want: Value = serde_json::from_str(s).ok()?;
            items.iter().enumerate().find(|(_, i)| json_eq(i, &want))
        }
        Step::Field(_) => None,
    }
}

fn step_ty<'a>(ty: Option<Ty<'a>>, step: &Step) -> Option<Ty<'a>> {
    match step {
        Step::Field(f) => schema::field(ty, f).map(|f| f.ty),
        Step::Key(_) | Step::Value(_) => ty.and_then(|t| t.list()).map(|l| l.0),
    }
}

/// The type of the first step of a path (metadata is always ObjectMeta).
fn root_ty<'a>(ty: Option<Ty<'a>>, path: &[Step]) -> Option<Ty<'a>> {
    match path.first() {
        Some(Step::Field(f)) if f == "metadata" => schema::builtin_def(OBJECT_META),
        Some(s) => step_ty(ty, s),
        None => ty,
    }
}

/// Looks up the value at a path.
pub fn get_path<'v>(v: &'v Value, path: &[Step], ty: Option<Ty<'_>>) -> Option<&'v Value> {
    let mut cur = v;
    let mut t = ty;
    for (i, step) in path.iter().enumerate() {
        let next_ty = if i == 0 {
            root_ty(ty, path)
        } else {
            step_ty(t, step)
        };
        cur = match (step, cur) {
            (Step::Field(f), Value::Object(m)) => m.get(f)?,
            (Step::Key(_) | Step::Value(_), Value::Array(items)) => {
                find_item(items, step, next_ty)?.1
            }
            _ => return None,
        };
        t = next_ty;
    }
    Some(cur)
}

/// Removes the value at a path (a field, or a list item by key or value).
pub fn remove_path(v: &mut Value, path: &[Step], ty: Option<Ty<'_>>) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = v;
    let mut t = ty;
    for (i, step) in parents.iter().enumerate() {
        let next_ty = if i == 0 {
            root_ty(ty, path)
        } else {
            step_ty(t, step)
        };
        let next = match (step, cur) {
            (Step::Field(f), Value::Object(m)) => m.get_mut(f),
            (Step::Key(_) | Step::Value(_), Value::Array(items)) => {
                match find_item(items, step, next_ty).map(|(i, _)| i) {
                    Some(i) => items.get_mut(i),
                    None => None,
                }
            }
            _ => None,
        };
        match next {
            Some(n) => cur = n,
            None => return,
        }
        t = next_ty;
    }
    let last_ty = if parents.is_empty() {
        root_ty(ty, path)
    } else {
        step_ty(t, last)
    };
    match (last, cur) {
        (Step::Field(f), Value::Object(m)) => {
            m.remove(f);
        }
        (Step::Key(_) | Step::Value(_), Value::Array(items)) => {
            if let Some((i, _)) = find_item(items, last, last_ty) {
                items.remove(i);
            }
        }
        _ => {}
    }
}

/// Whether `p` is a member of `set` that also has children there (a list item or a map
/// that is compared by presence, not by value).
pub fn has_children(set: &BTreeSet<Path>, p: &Path) -> bool {
    set.range(p.clone()..)
        .nth(1)
        .is_some_and(|next| next.len() > p.len() && next.starts_with(p))
}

/// What an update changed, as structured-merge-diff's `Compare` reports it: the basis of
/// an `Update` operation's managed fields.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Comparison {
    /// Members present in the new object only: fields, and maps and list items with all
    /// their members (a map or item that has members too gets a `.` in FieldsV1).
    pub added: BTreeSet<Path>,
    /// Leaves whose value changed.
    pub modified: BTreeSet<Path>,
    /// Members present in the old object only.
    pub removed: BTreeSet<Path>,
}

impl Comparison {
    /// Added and modified members: what the writer now owns.
    pub fn changed(&self) -> BTreeSet<Path> {
        self.added.union(&self.modified).cloned().collect()
    }

    /// Keeps the members whose path `keep` accepts.
    pub fn retain(&mut self, mut keep: impl FnMut(&Path) -> bool) {
        for set in [&mut self.added, &mut self.modified, &mut self.removed] {
            set.retain(|p| keep(p));
        }
    }

    /// Keeps the members under `root` (`keep` true) or all others (`keep` false): the
    /// fields a subresource may write (`status`) or the main resource may (all but it).
    pub fn retain_root(&mut self, root: &str, keep: bool) {
        let under = |p: &Path| p.first() == Some(&Step::Field(root.to_string()));
        for set in [&mut self.added, &mut self.modified, &mut self.removed] {
            set.retain(|p| under(p) == keep);
        }
    }
}

/// The member names of two objects, sorted, each once.
pub(crate) fn member_names<'a>(
    a: &'a Map<String, Value>,
    b: &'a Map<String, Value>,
) -> Vec<&'a String> {
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    keys
}

/// Compares two versions of an object of type `ty` (`old` is
/// [`crate::registry::schema::zero_object`] for a create). A member counts as added when `old` lacks
/// its key (a `null` there is a value); a `null` in `new` counts as absent.
pub fn compare(old: &Value, new: &Value, ty: Option<Ty<'_>>) -> Comparison {
    let mut c = Comparison::default();
    let empty = Map::new();
    let (o, n) = (
        old.as_object().unwrap_or(&empty),
        new.as_object().unwrap_or(&empty),
    );
    let mut prefix = Vec::new();
    for k in member_names(o, n) {
        if k == "apiVersion" || k == "kind" {
            continue;
        }
        prefix.push(Step::Field(k.clone()));
        if k == "metadata" {
            // Every object has metadata: it is never added or removed itself.
            let m = |v: Option<&Value>| {
                Some(tracked_meta(v.and_then(Value::as_object).unwrap_or(&empty)))
            };
            let (om, nm) = (m(o.get(k)), m(n.get(k)));
            cmp(
                om.map(Value::Object).as_ref(),
                nm.map(Value::Object).as_ref(),
                schema::builtin_def(OBJECT_META),
                false,
                &mut prefix,
                &mut c,
            );
        } else {
            let f = schema::field(ty, k);
            cmp(
                o.get(k),
                n.get(k),
                f.map(|f| f.ty),
                f.is_some_and(|f| f.is_atomic_object()),
                &mut prefix,
                &mut c,
            );
        }
        prefix.pop();
    }
    c
}

fn cmp(
    old: Option<&Value>,
    new: Option<&Value>,
    ty: Option<Ty<'_>>,
    atomic: bool,
    prefix: &mut Path,
    c: &mut Comparison,
) {
    let new = new.filter(|v| !v.is_null());
    match (old, new) {
        (None, None) => return,
        (None, Some(_)) => {
            c.added.insert(prefix.clone());
        }
        (Some(_), None) => {
            c.removed.insert(prefix.clone());
        }
        (Some(_), Some(_)) => {}
    }
    // A `null` was present (no `.` for what replaces it), but has no members.
    let present = old;
    let old = old.filter(|v| !v.is_null());
    let leaf = match (old, new) {
        _ if atomic => true,
        (Some(Value::Object(_)) | None, Some(Value::Object(_)) | None) => false,
        (Some(Value::Array(_)) | None, Some(Value::Array(_)) | None) => !ty
            .and_then(|t| t.list())
            .is_some_and(|(_, lt, _)| lt != ListType::Atomic),
        _ => true,
    };
    if leaf {
        if let (Some(a), Some(b)) = (present, new)
            && !json_eq(a, b)
        {
            c.modified.insert(prefix.clone());
        }
        return;
    }
    match (old, new) {
        (Some(Value::Array(_)) | None, Some(Value::Array(_)) | None) => {
            let Some((item_ty, lt, keys)) = ty.and_then(|t| t.list()) else {
                return;
            };
            let items = |v: Option<&Value>| -> Vec<(Step, Value)> {
                v.and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|i| {
                                let step = match lt {
                                    ListType::Map => item_key(i, item_ty, keys)?,
                                    _ => Step::Value(i.to_string()),
                                };
                                Some((step, i.clone()))
                            })
                            .collect()
                    })
                    .unwrap_or_default()
            };
            let (oi, ni) = (items(old), items(new));
            let mut steps: Vec<&Step> = oi.iter().chain(ni.iter()).map(|(s, _)| s).collect();
            steps.sort();
            steps.dedup();
            for step in steps {
                let a = oi.iter().find(|(s, _)| s == step).map(|(_, v)| v);
                let b = ni.iter().find(|(s, _)| s == step).map(|(_, v)| v);
                prefix.push(step.clone());
                if lt == ListType::Map {
                    cmp(a, b, Some(item_ty), item_ty.is_atomic_object(), prefix, c);
                } else {
                    // A set member is its value: added or removed, never modified.
                    match (a, b) {
                        (None, Some(_)) => {
                            c.added.insert(prefix.clone());
                        }
                        (Some(_), None) => {
                            c.removed.insert(prefix.clone());
                        }
                        _ => {}
                    }
                }
                prefix.pop();
            }
        }
        _ => {
            let empty = Map::new();
            let o = old.and_then(Value::as_object).unwrap_or(&empty);
            let n = new.and_then(Value::as_object).unwrap_or(&empty);
            let mut keys: Vec<&String> = o.keys().chain(n.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let f = schema::field(ty, k);
                prefix.push(Step::Field(k.clone()));
                cmp(
                    o.get(k),
                    n.get(k),
                    f.map(|f| f.ty),
                    f.is_some_and(|f| f.is_atomic_object()),
                    prefix,
                    c,
                );
                prefix.pop();
            }
        }
    }
}

fn step_key(s: &Step) -> String {
    match s {
        Step::Field(f) => format!("f:{f}"),
        Step::Key(k) => format!("k:{k}"),
        Step::Value(v) => format!("v:{v}"),
    }
}

fn parse_step(s: &str) -> Option<Step> {
    let (kind, rest) = s.split_at_checked(2)?;
    match kind {
        "f:" => Some(Step::Field(rest.into())),
        "k:" => Some(Step::Key(rest.into())),
        "v:" => Some(Step::Value(rest.into())),
        _ => None,
    }
}

/// Encodes a path set as a FieldsV1 trie.
pub fn to_fields_v1(paths: &BTreeSet<Path>) -> Value {
    let mut root = Map::new();
    for p in paths {
        let mut cur = &mut root;
        for step in p {
            let entry = cur
                .entry(step_key(step))
                .or_insert_with(|| Value::Object(Map::new()));
            let Value::Object(next) = entry else { break };
            cur = next;
        }
    }
    // A member that also has children carries a `.` marker.
    fn mark(node: &mut Map<String, Value>, steps: &[Step]) {
        match steps.split_first() {
            None => {
                node.insert(".".into(), Value::Object(Map::new()));
            }
            Some((step, rest)) => {
                if let Some(Value::Object(next)) = node.get_mut(&step_key(step)) {
                    mark(next, rest);
                }
            }
        }
    }
    for p in paths {
        if has_children(paths, p) {
            mark(&mut root, p);
        }
    }
    Value::Object(root)
}

/// Decodes a FieldsV1 trie into a path set (leaves and `.` markers).
pub fn from_fields_v1(v: &Value) -> BTreeSet<Path> {
    let mut out = BTreeSet::new();
    fn rec(v: &Value, prefix: &mut Path, out: &mut BTreeSet<Path>) {
        let Some(m) = v.as_object() else { return };
        if m.is_empty() && !prefix.is_empty() {
            out.insert(prefix.clone());
            return;
        }
        for (k, child) in m {
            if k == "." {
                out.insert(prefix.clone());
                continue;
            }
            if let Some(step) = parse_step(k) {
                prefix.push(step);
                rec(child, prefix, out);
                prefix.pop();
            }
        }
    }
    rec(v, &mut Vec::new(), &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment() -> Option<Ty<'static>> {
        schema::builtin_def("io.k8s.api.apps.v1.Deployment")
    }

    fn obj() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "x", "labels": {"app": "a"}, "finalizers": ["f1"]},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "a"}},
                "template": {"spec": {
                    "tolerations": [{"key": "k", "operator": "Exists"}],
                    "containers": [{"name": "c", "image": "i",
                        "env": [{"name": "A", "value": "1"}],
                        "ports": [{"containerPort": 80}]}]}}}
        })
    }

    #[test]
    fn trie_round_trip() {
        let obj = obj();
        let paths = paths_of(&obj, deployment());
        let trie = to_fields_v1(&paths);
        assert_eq!(trie["f:spec"]["f:replicas"], json!({}));
        assert_eq!(trie["f:metadata"]["f:labels"]["f:app"], json!({}));
        assert_eq!(trie["f:metadata"]["f:finalizers"]["v:\"f1\""], json!({}));
        assert!(trie["f:metadata"].get("f:name").is_none());
        // Atomic struct and list: owned as a whole.
        assert_eq!(trie["f:spec"]["f:selector"], json!({}));
        let pod = &trie["f:spec"]["f:template"]["f:spec"];
        assert_eq!(pod["f:tolerations"], json!({}));
        let c = &pod["f:containers"]["k:{\"name\":\"c\"}"];
        assert_eq!(c["."], json!({}));
        assert_eq!(c["f:image"], json!({}));
        assert_eq!(c["f:env"]["k:{\"name\":\"A\"}"]["f:value"], json!({}));
        // Two keys, sorted by name, the omitted protocol defaulted.
        let port = &c["f:ports"]["k:{\"containerPort\":80,\"protocol\":\"TCP\"}"];
        assert_eq!(port, &json!({".": {}, "f:containerPort": {}}));
        assert!(c["f:ports"].get(".").is_none());
        assert_eq!(from_fields_v1(&trie), paths);
        let mut changed = obj.clone();
        changed["spec"]["replicas"] = json!(3);
        let diff = compare(&obj, &changed, deployment());
        assert_eq!(diff.changed().len(), 1);
        assert!(diff.removed.is_empty());
    }

    #[test]
    fn lookups_by_key_use_defaults() {
        let mut obj = obj();
        let p: Path = vec![
            Step::Field("spec".into()),
            Step::Field("template".into()),
            Step::Field("spec".into()),
            Step::Field("containers".into()),
            Step::Key("{\"name\":\"c\"}".into()),
            Step::Field("ports".into()),
            Step::Key("{\"containerPort\":80,\"protocol\":\"TCP\"}".into()),
        ];
        assert_eq!(
            get_path(&obj, &p, deployment()),
            Some(&json!({"containerPort": 80}))
        );
        remove_path(&mut obj, &p, deployment());
        assert_eq!(
            obj["spec"]["template"]["spec"]["containers"][0]["ports"],
            json!([])
        );
        let fin: Path = vec![
            Step::Field("metadata".into()),
            Step::Field("finalizers".into()),
            Step::Value("\"f1\"".into()),
        ];
        assert!(get_path(&obj, &fin, deployment()).is_some());
        remove_path(&mut obj, &fin, deployment());
        assert_eq!(obj["metadata"]["finalizers"], json!([]));
    }

    #[test]
    fn updates_own_changed_leaves_and_added_items() {
        let old = obj();
        let mut new = old.clone();
        new["spec"]["template"]["spec"]["containers"][0]["env"] =
            json!([{"name": "A", "value": "2"}, {"name": "B", "value": "3"}]);
        let diff = to_fields_v1(&compare(&old, &new, deployment()).changed());
        let env =
            &diff["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"c\"}"]["f:env"];
        // A changed value: the leaf only; an added item: the item and its fields.
        assert_eq!(env["k:{\"name\":\"A\"}"], json!({"f:value": {}}));
        assert_eq!(
            env["k:{\"name\":\"B\"}"],
            json!({".": {}, "f:name": {}, "f:value": {}})
        );
    }

    #[test]
    fn creates_mark_maps_and_items_the_empty_object_lacks() {
        // As kube-apiserver records a create: `spec`, `strategy` and the template exist
        // in an empty Deployment (struct fields without a pointer); labels, rollingUpdate
        // and container items do not, so they carry a `.`.
        let ty = deployment();
        let obj = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "x", "generateName": "x-", "labels": {"a": "b"}},
            "spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}},
                "template": {"metadata": {"labels": {"a": "b"}}, "spec": {
                    "containers": [{"name": "c", "image": "i", "resources": {}}]}}}});
        let trie = to_fields_v1(&compare(&schema::zero_object(ty), &obj, ty).changed());
        assert_eq!(
            trie["f:metadata"],
            json!({"f:generateName": {}, "f:labels": {".": {}, "f:a": {}}})
        );
        let spec = &trie["f:spec"];
        assert!(spec.get(".").is_none() && spec["f:strategy"].get(".").is_none());
        assert_eq!(
            spec["f:strategy"]["f:rollingUpdate"],
            json!({".": {}, "f:maxSurge": {}})
        );
        let pod = &spec["f:template"]["f:spec"];
        assert!(pod["f:containers"].get(".").is_none());
        assert_eq!(
            pod["f:containers"]["k:{\"name\":\"c\"}"],
            json!({".": {}, "f:image": {}, "f:name": {}, "f:resources": {}})
        );
    }

    #[test]
    fn updates_report_removed_members() {
        let ty = schema::builtin_def("io.k8s.api.core.v1.ConfigMap");
        let old = json!({"data": {"a": "1", "b": "2"}});
        let new = json!({"data": {"a": "1", "c": "3"}});
        let c = compare(&old, &new, ty);
        let p = |k: &str| vec![Step::Field("data".into()), Step::Field(k.into())];
        assert_eq!(c.added, BTreeSet::from([p("c")]));
        assert_eq!(c.removed, BTreeSet::from([p("b")]));
        assert!(c.modified.is_empty());
    }

    #[test]
    fn without_a_schema_lists_are_atomic() {
        let v = json!({"spec": {"items": [{"name": "a"}], "tags": ["x"]}});
        let paths = paths_of(&v, None);
        let trie = to_fields_v1(&paths);
        assert_eq!(trie, json!({"f:spec": {"f:items": {}, "f:tags": {}}}));
    }

    #[test]
    fn missing_keys_are_reported() {
        let v = json!({"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}});
        let msg = missing_key(&v, deployment(), &mut String::new()).unwrap();
        assert!(
            msg.starts_with(".spec.template.spec.containers: element 0: associative list"),
            "{msg}"
        );
        assert!(missing_key(&obj(), deployment(), &mut String::new()).is_none());
    }
}
