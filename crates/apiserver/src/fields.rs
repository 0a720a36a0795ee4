//! Field paths and the `FieldsV1` trie used by managedFields and server-side apply.

use serde_json::{Map, Value};
use std::collections::BTreeSet;

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

/// Keys that identify items of lists of objects, tried in order (built-in merge keys).
const LIST_KEYS: [&str; 6] = [
    "name",
    "containerPort",
    "mountPath",
    "devicePath",
    "ip",
    "type",
];

/// The key step of a list item, when the list is a map-list.
pub fn item_key(item: &Value) -> Option<Step> {
    let obj = item.as_object()?;
    for k in LIST_KEYS {
        if let Some(v) = obj.get(k).filter(|v| v.is_string() || v.is_number()) {
            let mut m = Map::new();
            m.insert(k.to_string(), v.clone());
            // A port list keys by (containerPort, protocol) in Kubernetes.
            if k == "containerPort"
                && let Some(p) = obj.get("protocol")
            {
                m.insert("protocol".into(), p.clone());
            }
            return Some(Step::Key(Value::Object(m).to_string()));
        }
    }
    None
}

/// Whether a list is treated as a map-list (every item has a key).
pub fn is_map_list(items: &[Value]) -> bool {
    !items.is_empty() && items.iter().all(|i| item_key(i).is_some())
}

/// Whether a list is a set of scalars.
pub fn is_set_list(items: &[Value]) -> bool {
    !items.is_empty()
        && items
            .iter()
            .all(|i| i.is_string() || i.is_number() || i.is_boolean())
}

/// Leaf paths (and item paths) set in `v`, excluding server-owned metadata.
pub fn paths_of(v: &Value) -> BTreeSet<Path> {
    let mut out = BTreeSet::new();
    walk(v, &mut Vec::new(), &mut out, true);
    out
}

fn walk(v: &Value, prefix: &mut Path, out: &mut BTreeSet<Path>, root: bool) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, child) in m {
                if root && (k == "apiVersion" || k == "kind") {
                    continue;
                }
                if root && k == "metadata" {
                    if let Some(meta) = child.as_object() {
                        for mk in ["labels", "annotations"] {
                            if let Some(Value::Object(lm)) = meta.get(mk) {
                                for lk in lm.keys() {
                                    out.insert(vec![
                                        Step::Field("metadata".into()),
                                        Step::Field(mk.into()),
                                        Step::Field(lk.clone()),
                                    ]);
                                }
                            }
                        }
                        if let Some(Value::Array(fs)) = meta.get("finalizers") {
                            for f in fs {
                                out.insert(vec![
                                    Step::Field("metadata".into()),
                                    Step::Field("finalizers".into()),
                                    Step::Value(f.to_string()),
                                ]);
                            }
                        }
                        if let Some(Value::Array(ors)) = meta.get("ownerReferences") {
                            for o in ors {
                                if let Some(uid) = o.get("uid") {
                                    out.insert(vec![
                                        Step::Field("metadata".into()),
                                        Step::Field("ownerReferences".into()),
                                        Step::Key(serde_json::json!({ "uid": uid }).to_string()),
                                    ]);
                                }
                            }
                        }
                    }
                    continue;
                }
                prefix.push(Step::Field(k.clone()));
                walk(child, prefix, out, false);
                prefix.pop();
            }
        }
        Value::Array(items) if is_map_list(items) => {
            for item in items {
                if let Some(key) = item_key(item) {
                    prefix.push(key);
                    out.insert(prefix.clone());
                    walk(item, prefix, out, false);
                    prefix.pop();
                }
            }
        }
        Value::Array(items) if is_set_list(items) => {
            for item in items {
                prefix.push(Step::Value(item.to_string()));
                out.insert(prefix.clone());
                prefix.pop();
            }
        }
        _ => {
            if !prefix.is_empty() {
                out.insert(prefix.clone());
            }
        }
    }
}

/// Looks up the value at a path.
pub fn get_path<'a>(v: &'a Value, path: &[Step]) -> Option<&'a Value> {
    let mut cur = v;
    for step in path {
        cur = match (step, cur) {
            (Step::Field(f), Value::Object(m)) => m.get(f)?,
            (Step::Key(k), Value::Array(items)) => items.iter().find(|i| {
                item_key(i)
                    .as_ref()
                    .is_some_and(|ik| *ik == Step::Key(k.clone()))
            })?,
            (Step::Value(s), Value::Array(items)) => items.iter().find(|i| i.to_string() == *s)?,
            _ => return None,
        };
    }
    Some(cur)
}

/// Paths whose value differs between `old` and `new` (present in `new`).
pub fn changed_paths(old: Option<&Value>, new: &Value) -> BTreeSet<Path> {
    let new_paths = paths_of(new);
    match old {
        None => new_paths,
        Some(old) => new_paths
            .into_iter()
            .filter(|p| get_path(old, p) != get_path(new, p))
            .collect(),
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
        for (i, step) in p.iter().enumerate() {
            let entry = cur
                .entry(step_key(step))
                .or_insert_with(|| Value::Object(Map::new()));
            if i + 1 < p.len()
                && matches!(step, Step::Key(_))
                && let Value::Object(m) = entry
            {
                m.entry(".").or_insert_with(|| Value::Object(Map::new()));
            }
            let Value::Object(next) = entry else { break };
            cur = next;
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

    #[test]
    fn trie_round_trip() {
        let obj = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "x", "labels": {"app": "a"}},
            "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}
        });
        let paths = paths_of(&obj);
        let trie = to_fields_v1(&paths);
        assert_eq!(trie["f:spec"]["f:replicas"], json!({}));
        assert_eq!(trie["f:metadata"]["f:labels"]["f:app"], json!({}));
        assert!(
            trie["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"c\"}"]["f:image"]
                .is_object()
        );
        assert_eq!(from_fields_v1(&trie), paths);
        let mut changed = obj.clone();
        changed["spec"]["replicas"] = json!(3);
        let diff = changed_paths(Some(&obj), &changed);
        assert_eq!(diff.len(), 1);
    }
}
