//! List and map semantics of object fields, taken from the API definitions: the OpenAPI
//! schemas of the built-in types (with the `x-kubernetes-*` extensions kube-apiserver
//! publishes) and the structural schemas of custom resources.
//!
//! Strategic merge patch reads the patch strategy and merge key of each field
//! (`x-kubernetes-patch-strategy`, `x-kubernetes-patch-merge-key`); server-side apply and
//! managedFields read the list type (`x-kubernetes-list-type`, `x-kubernetes-list-map-keys`,
//! falling back to the patch strategy as structured-merge-diff does) and atomic structs and
//! maps (`x-kubernetes-map-type: atomic`).
//!
//! Schemas are compiled once into an [`Index`]: an arena of type nodes in which `$ref`s are
//! resolved to node ids. The built-in index is built lazily on first use; a custom resource
//! version's index is built when first needed and kept with the CRD's schema data.

use crate::registry::ResourceDef;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::LazyLock;

const REF_PREFIX: &str = "#/components/schemas/";
const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const SCALE: &str = "io.k8s.api.autoscaling.v1.Scale";

type NodeId = usize;

/// How a list's items are identified (structured-merge-diff's element relationship).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListType {
    /// The list is owned and replaced as a whole.
    Atomic,
    /// A set of scalars: items are identified by value (`v:<json>`).
    Set,
    /// A map-list: items are identified by their key fields (`k:{...}`).
    Map,
}

/// The strategic merge patch metadata of a field.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PatchMeta {
    /// `merge` is among the strategies.
    pub merge: bool,
    /// `retainKeys` is among the strategies.
    pub retain_keys: bool,
    /// The strategy is `replace`.
    pub replace: bool,
    /// `x-kubernetes-patch-merge-key`.
    pub merge_key: Option<String>,
}

#[derive(Clone, Debug)]
struct Field {
    node: NodeId,
    patch: PatchMeta,
    /// The property itself is marked `x-kubernetes-map-type: atomic`.
    atomic: bool,
    /// The property's `default`.
    default: Option<Value>,
    /// The property is in its struct's `required` list.
    required: bool,
    /// A Go non-pointer `omitempty` scalar: dropped when `""`, `0` or `false`.
    omit_zero: bool,
    /// What Go writes for the field when it is unset (a non-pointer scalar without
    /// `omitempty`: `""`, `0`, `false`; a time: `null`).
    unset: Option<Value>,
}

#[derive(Clone, Debug)]
enum Node {
    /// A struct (`properties`) and/or a map (`additionalProperties`).
    Object {
        fields: HashMap<String, Field>,
        values: Option<NodeId>,
        atomic: bool,
    },
    List {
        items: NodeId,
        list_type: ListType,
        keys: Vec<String>,
    },
    Scalar,
    /// No usable schema: lists are atomic, maps are walked without semantics.
    Any,
    /// A built-in definition referenced from another index (a custom resource's metadata).
    Builtin(&'static str),
    /// A placeholder while compiling.
    Pending,
}

/// Compiled schemas.
#[derive(Clone, Debug, Default)]
pub struct Index {
    nodes: Vec<Node>,
    defs: HashMap<String, NodeId>,
    root: Option<NodeId>,
}

/// A position in an index: the type of a value.
#[derive(Clone, Copy, Debug)]
pub struct Ty<'a> {
    idx: &'a Index,
    id: NodeId,
}

/// A field of a struct (or a value of a map) and its patch metadata.
#[derive(Clone, Copy, Debug)]
pub struct FieldTy<'a> {
    /// The field's type.
    pub ty: Ty<'a>,
    /// Its patch strategy and merge key (default for map values and unknown fields).
    pub patch: &'a PatchMeta,
    atomic: bool,
}

static NO_PATCH: PatchMeta = PatchMeta {
    merge: false,
    retain_keys: false,
    replace: false,
    merge_key: None,
};

static BUILTIN: LazyLock<Index> = LazyLock::new(|| {
    let defs = crate::openapi::builtin_definitions();
    let mut idx = Index::default();
    for name in defs.keys() {
        let id = idx.push(Node::Pending);
        idx.defs.insert(name.clone(), id);
    }
    for (name, schema) in defs {
        let node = idx.compile_node(schema);
        if let Some(&id) = idx.defs.get(name) {
            idx.nodes[id] = node;
        }
    }
    for (name, zero_dropped, always) in super::omitempty::GO_FIELDS {
        if let Some(&id) = idx.defs.get(*name)
            && let Node::Object { fields, .. } = &mut idx.nodes[id]
        {
            for f in *zero_dropped {
                if let Some(field) = fields.get_mut(*f) {
                    field.omit_zero = true;
                }
            }
            for (f, unset) in *always {
                if let Some(field) = fields.get_mut(*f) {
                    field.unset = serde_json::from_str(unset).ok();
                }
            }
        }
    }
    idx
});

/// The type of a resource's objects (or of its Scale view), when known.
pub fn for_resource<'a>(def: &'a ResourceDef, sub: Option<&str>) -> Option<Ty<'a>> {
    if sub == Some("scale") {
        return builtin_def(SCALE);
    }
    if let Some(crd) = &def.crd {
        return crd.type_index(&def.version).and_then(Index::root);
    }
    let name = crate::openapi::builtin_kind_definition(&def.group, &def.version, &def.kind)?;
    builtin_def(name)
}

/// A built-in definition by name.
pub fn builtin_def(name: &str) -> Option<Ty<'static>> {
    let idx: &'static Index = &BUILTIN;
    idx.defs.get(name).map(|&id| Ty { idx, id })
}

/// The list semantics structured-merge-diff derives from a list schema's extensions.
fn list_semantics(s: &Value) -> (ListType, Vec<String>) {
    let str_list = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    match s.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("set") => return (ListType::Set, vec![]),
        Some("map") => {
            let keys = str_list(s.get("x-kubernetes-list-map-keys"));
            if keys.is_empty() {
                return (ListType::Atomic, vec![]);
            }
            return (ListType::Map, keys);
        }
        Some(_) => return (ListType::Atomic, vec![]),
        None => {}
    }
    // No list type: `merge` (with or without retainKeys) makes the list associative, keyed
    // by the merge key, or a set without one.
    match s.get("x-kubernetes-patch-strategy").and_then(Value::as_str) {
        Some("merge" | "merge,retainKeys") => {
            match s
                .get("x-kubernetes-patch-merge-key")
                .and_then(Value::as_str)
            {
                Some(k) => (ListType::Map, vec![k.to_string()]),
                None => (ListType::Set, vec![]),
            }
        }
        _ => (ListType::Atomic, vec![]),
    }
}

fn patch_meta(s: &Value) -> PatchMeta {
    let mut p = PatchMeta {
        merge_key: s
            .get("x-kubernetes-patch-merge-key")
            .and_then(Value::as_str)
            .map(str::to_string),
        ..Default::default()
    };
    if let Some(strategy) = s.get("x-kubernetes-patch-strategy").and_then(Value::as_str) {
        for part in strategy.split(',').map(str::trim) {
            match part {
                "merge" => p.merge = true,
                "retainKeys" => p.retain_keys = true,
                "replace" => p.replace = true,
                _ => {}
            }
        }
    }
    p
}

fn type_is(s: &Value, t: &str) -> bool {
    match s.get("type") {
        Some(Value::String(x)) => x == t,
        Some(Value::Array(a)) => a.iter().any(|x| x == t),
        _ => false,
    }
}

impl Index {
    fn push(&mut self, n: Node) -> NodeId {
        self.nodes.push(n);
        self.nodes.len() - 1
    }

    /// Compiles a custom resource version's structural schema; `metadata` is ObjectMeta.
    pub fn for_crd(schema: Option<&Value>) -> Self {
        let mut idx = Index::default();
        let root = match schema {
            Some(s) => idx.compile(s),
            None => idx.push(Node::Any),
        };
        let meta = idx.push(Node::Builtin(OBJECT_META));
        match &mut idx.nodes[root] {
            Node::Object { fields, .. } => {
                fields.insert(
                    "metadata".into(),
                    Field {
                        node: meta,
                        patch: PatchMeta::default(),
                        atomic: false,
                        default: None,
                        required: false,
                        omit_zero: false,
                        unset: None,
                    },
                );
            }
            n @ Node::Any => {
                let mut fields = HashMap::new();
                fields.insert(
                    "metadata".into(),
                    Field {
                        node: meta,
                        patch: PatchMeta::default(),
                        atomic: false,
                        default: None,
                        required: false,
                        omit_zero: false,
                        unset: None,
                    },
                );
                *n = Node::Object {
                    fields,
                    values: None,
                    atomic: false,
                };
            }
            _ => {}
        }
        idx.root = Some(root);
        idx
    }

    /// The root type (custom resources).
    pub fn root(&self) -> Option<Ty<'_>> {
        self.root.map(|id| Ty { idx: self, id })
    }

    fn compile(&mut self, s: &Value) -> NodeId {
        if let Some(id) = self.ref_target(s) {
            return id;
        }
        let n = self.compile_node(s);
        self.push(n)
    }

    /// A `$ref` (or a lone `allOf: [{$ref}]`) to a known definition.
    fn ref_target(&self, s: &Value) -> Option<NodeId> {
        let r = s.get("$ref").and_then(Value::as_str).or_else(|| {
            s.get("allOf")
                .and_then(Value::as_array)
                .filter(|a| a.len() == 1)
                .and_then(|a| a[0].get("$ref"))
                .and_then(Value::as_str)
        })?;
        self.defs.get(r.strip_prefix(REF_PREFIX)?).copied()
    }

    fn compile_node(&mut self, s: &Value) -> Node {
        if let Some(id) = self.ref_target(s) {
            // A definition that is only a reference: share the target's node.
            return self.nodes.get(id).cloned().unwrap_or(Node::Any);
        }
        if s.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
            return Node::Scalar;
        }
        if type_is(s, "array") || s.get("items").is_some() {
            let items = match s.get("items") {
                Some(i) => self.compile(i),
                None => self.push(Node::Any),
            };
            let (list_type, keys) = list_semantics(s);
            return Node::List {
                items,
                list_type,
                keys,
            };
        }
        let props = s.get("properties").and_then(Value::as_object);
        let addl = s.get("additionalProperties").filter(|a| a.is_object());
        if type_is(s, "object") || props.is_some() || addl.is_some() {
            let mut fields = HashMap::new();
            let required: Vec<&str> = s
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            for (name, ps) in props.into_iter().flatten() {
                let node = self.compile(ps);
                fields.insert(
                    name.clone(),
                    Field {
                        node,
                        patch: patch_meta(ps),
                        atomic: ps.get("x-kubernetes-map-type").and_then(Value::as_str)
                            == Some("atomic"),
                        default: ps.get("default").cloned(),
                        required: required.contains(&name.as_str()),
                        omit_zero: false,
                        unset: None,
                    },
                );
            }
            let values = addl.map(|a| self.compile(a));
            return Node::Object {
                fields,
                values,
                atomic: s.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic"),
            };
        }
        if ["string", "integer", "number", "boolean"]
            .iter()
            .any(|t| type_is(s, t))
        {
            return Node::Scalar;
        }
        Node::Any
    }
}

impl<'a> Ty<'a> {
    fn node(self) -> (Ty<'a>, &'a Node) {
        match &self.idx.nodes[self.id] {
            Node::Builtin(name) => match builtin_def(name) {
                Some(t) => (t, &t.idx.nodes[t.id]),
                None => (self, &Node::Any),
            },
            n => (self, n),
        }
    }

    /// A field of a struct, or a value of a map.
    pub fn field(self, name: &str) -> Option<FieldTy<'a>> {
        let (t, n) = self.node();
        let Node::Object { fields, values, .. } = n else {
            return None;
        };
        if let Some(f) = fields.get(name) {
            return Some(FieldTy {
                ty: Ty {
                    idx: t.idx,
                    id: f.node,
                },
                patch: &f.patch,
                atomic: f.atomic,
            });
        }
        values.map(|id| FieldTy {
            ty: Ty { idx: t.idx, id },
            patch: &NO_PATCH,
            atomic: false,
        })
    }

    /// The list's items and semantics, for a list type.
    pub fn list(self) -> Option<(Ty<'a>, ListType, &'a [String])> {
        let (t, n) = self.node();
        match n {
            Node::List {
                items,
                list_type,
                keys,
            } => Some((
                Ty {
                    idx: t.idx,
                    id: *items,
                },
                *list_type,
                keys,
            )),
            _ => None,
        }
    }

    /// An atomic struct or map (`x-kubernetes-map-type: atomic`).
    pub fn is_atomic_object(self) -> bool {
        matches!(self.node().1, Node::Object { atomic: true, .. })
    }

    /// The default of a struct field (used for list-map keys an item omits).
    pub fn field_default(self, name: &str) -> Option<&'a Value> {
        match self.node().1 {
            Node::Object { fields, .. } => fields.get(name)?.default.as_ref(),
            _ => None,
        }
    }

    /// The struct's fields that an empty Go value still serialises: struct fields without
    /// a pointer (`default: {}`, with their types) and required fields (`None`: present
    /// as `null` or a zero value).
    fn zero_fields(self) -> Vec<(&'a str, Zero<'a>)> {
        let (t, n) = self.node();
        let Node::Object { fields, .. } = n else {
            return vec![];
        };
        let mut out: Vec<(&'a str, Zero<'a>)> = fields
            .iter()
            .filter_map(|(name, f)| {
                let ty = Ty {
                    idx: t.idx,
                    id: f.node,
                };
                if is_struct_default(f.default.as_ref()) {
                    Some((name.as_str(), Zero::Struct(ty)))
                } else if let Some(unset) = &f.unset {
                    Some((name.as_str(), Zero::Scalar(unset)))
                } else if f.required {
                    Some((name.as_str(), Zero::Scalar(&Value::Null)))
                } else {
                    None
                }
            })
            .collect();
        out.sort_by_key(|(n, _)| *n);
        out
    }
}

/// What an empty Go struct serialises for one of its fields.
enum Zero<'a> {
    /// A struct without a pointer: `{}` and its own zero fields.
    Struct(Ty<'a>),
    /// A scalar Go always writes (`""`, `0`, `false`; a time's `null`), or a required
    /// field (`null`).
    Scalar(&'a Value),
}

fn is_struct_default(d: Option<&Value>) -> bool {
    d.and_then(Value::as_object).is_some_and(|m| m.is_empty())
}

/// The empty object of a type as Go serialises it, for comparing against (what
/// structured-merge-diff treats as present when an object is created): struct fields
/// without a pointer as objects, recursively, and required fields as `null`.
pub fn zero_object(ty: Option<Ty<'_>>) -> Value {
    fn build(ty: Ty<'_>, depth: usize) -> Value {
        let mut m = serde_json::Map::new();
        if depth > 24 {
            return Value::Object(m);
        }
        for (name, sub) in ty.zero_fields() {
            let v = match sub {
                Zero::Struct(t) => build(t, depth + 1),
                Zero::Scalar(v) => v.clone(),
            };
            m.insert(name.to_string(), v);
        }
        Value::Object(m)
    }
    match ty {
        Some(t) => build(t, 0),
        None => Value::Object(serde_json::Map::new()),
    }
}

/// Adds the struct fields Go always serialises (`{}` when empty: a Deployment's `status`,
/// a container's `resources`, a Service's `status.loadBalancer`) where `v` lacks them.
pub fn fill_struct_fields(v: &mut Value, ty: Option<Ty<'_>>) {
    let Some(ty) = ty else { return };
    match v {
        Value::Object(m) => {
            for (name, sub) in ty.zero_fields() {
                if matches!(sub, Zero::Struct(_)) && !m.contains_key(name) {
                    m.insert(name.to_string(), Value::Object(serde_json::Map::new()));
                }
            }
            for (k, child) in m.iter_mut() {
                if let Some(f) = ty.field(k) {
                    fill_struct_fields(child, Some(f.ty));
                }
            }
        }
        Value::Array(items) => {
            if let Some((item_ty, _, _)) = ty.list() {
                for item in items {
                    fill_struct_fields(item, Some(item_ty));
                }
            }
        }
        _ => {}
    }
}

/// Drops what kube-apiserver's decoding into Go structs drops, recursively: an optional
/// slice or map is `omitempty` there, so `[]` or `{}` sent for one is not stored, nor is
/// `""`, `0` or `false` in a non-pointer `omitempty` scalar (`registry/omitempty.rs`,
/// generated from the Go sources; a pointer field such as `activeDeadlineSeconds` keeps
/// its zero). Required fields stay, as do empty structs (a pointer to a struct is kept
/// when non-nil: `securityContext: {}`). Go's few optional lists without `omitempty` are
/// absent here and written as `null` by their kind's strategy
/// (`defaults::null_when_empty`); `keep` names them (top-level fields).
pub fn drop_empty_optional(v: &mut Value, ty: Option<Ty<'_>>, keep: &[&str]) {
    fn walk(v: &mut Value, ty: Ty<'_>, depth: usize, keep: &[&str]) {
        if depth > 64 {
            return;
        }
        let (t, n) = ty.node();
        match (v, n) {
            (Value::Object(m), Node::Object { fields, .. }) => {
                if !fields.is_empty() {
                    m.retain(|k, child| {
                        let Some(f) = fields.get(k) else { return true };
                        if f.omit_zero && is_go_zero(child) {
                            return false;
                        }
                        if f.required || keep.contains(&k.as_str()) {
                            return true;
                        }
                        let empty_collection = match child {
                            Value::Array(a) => a.is_empty(),
                            Value::Object(o) => {
                                o.is_empty()
                                    && matches!(
                                        (Ty { idx: t.idx, id: f.node }).node().1,
                                        Node::Object { fields, values: Some(_), .. } if fields.is_empty()
                                    )
                            }
                            _ => false,
                        };
                        !empty_collection
                    });
                }
                for (k, child) in m.iter_mut() {
                    if let Some(f) = t.field(k) {
                        walk(child, f.ty, depth + 1, &[]);
                    }
                }
            }
            (Value::Array(items), Node::List { .. }) => {
                if let Some((item_ty, _, _)) = t.list() {
                    for item in items {
                        walk(item, item_ty, depth + 1, &[]);
                    }
                }
            }
            _ => {}
        }
    }
    if let Some(ty) = ty {
        walk(v, ty, 0, keep);
    }
}

/// The first `MicroTime` value of `v` that Go's `metav1.MicroTime` would not decode, as
/// its error: it parses with exactly six fractional digits
/// (`2006-01-02T15:04:05.000000Z07:00`), where `Time` takes any RFC 3339 form.
pub fn micro_time_error(v: &Value, ty: Option<Ty<'_>>) -> Option<String> {
    const MICRO_TIME: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime";
    fn walk(v: &Value, ty: Ty<'_>, micro: NodeId, depth: usize) -> Option<String> {
        if depth > 64 {
            return None;
        }
        if std::ptr::eq(ty.idx, &*BUILTIN) && ty.id == micro {
            return match v {
                Value::String(s) => crate::registry::go_time::parse_micro_time(s).err(),
                _ => None,
            };
        }
        let (t, n) = ty.node();
        match (v, n) {
            (Value::Object(m), Node::Object { .. }) => m
                .iter()
                .find_map(|(k, child)| walk(child, t.field(k)?.ty, micro, depth + 1)),
            (Value::Array(items), Node::List { .. }) => {
                let (item_ty, _, _) = t.list()?;
                items
                    .iter()
                    .find_map(|item| walk(item, item_ty, micro, depth + 1))
            }
            _ => None,
        }
    }
    let ty = ty?;
    let micro = *BUILTIN.defs.get(MICRO_TIME)?;
    walk(v, ty, micro, 0)
}

/// Writes what Go's encoding writes for the unset fields of a built-in object's structs:
/// `""`, `0` or `false` for a non-pointer scalar without `omitempty`, `null` for a
/// non-pointer time (an Event's `eventTime`, a condition's `lastTransitionTime`).
pub fn fill_go_unset(v: &mut Value, ty: Option<Ty<'_>>) {
    fn walk(v: &mut Value, ty: Ty<'_>, depth: usize) {
        if depth > 64 {
            return;
        }
        let (t, n) = ty.node();
        match (v, n) {
            (Value::Object(m), Node::Object { fields, .. }) => {
                for (k, f) in fields {
                    if let Some(unset) = &f.unset
                        && !m.contains_key(k)
                    {
                        m.insert(k.clone(), unset.clone());
                    }
                }
                for (k, child) in m.iter_mut() {
                    if let Some(f) = t.field(k) {
                        walk(child, f.ty, depth + 1);
                    }
                }
            }
            (Value::Array(items), Node::List { .. }) => {
                if let Some((item_ty, _, _)) = t.list() {
                    for item in items {
                        walk(item, item_ty, depth + 1);
                    }
                }
            }
            _ => {}
        }
    }
    if let Some(ty) = ty {
        walk(v, ty, 0);
    }
}

/// `""`, `0` or `false`.
fn is_go_zero(v: &Value) -> bool {
    match v {
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        _ => false,
    }
}

impl FieldTy<'_> {
    /// The field is atomic: marked on the property or on its type.
    pub fn is_atomic_object(&self) -> bool {
        self.atomic || self.ty.is_atomic_object()
    }
}

/// `field` on an optional type.
pub fn field<'a>(ty: Option<Ty<'a>>, name: &str) -> Option<FieldTy<'a>> {
    ty.and_then(|t| t.field(name))
}

/// Fills list-map key fields an item omits with their schema defaults (e.g. a container
/// port's `protocol: TCP`), as kube-apiserver's defaulting does on every write.
pub fn default_keys(v: &mut Value, ty: Option<Ty<'_>>) {
    let Some(ty) = ty else { return };
    match v {
        Value::Object(m) => {
            for (k, child) in m.iter_mut() {
                if let Some(f) = ty.field(k) {
                    default_keys(child, Some(f.ty));
                }
            }
        }
        Value::Array(items) => {
            let Some((item_ty, list_type, keys)) = ty.list() else {
                return;
            };
            for item in items.iter_mut() {
                if list_type == ListType::Map
                    && let Some(m) = item.as_object_mut()
                {
                    for k in keys {
                        if !m.contains_key(k)
                            && let Some(d) = item_ty.field_default(k)
                        {
                            m.insert(k.clone(), d.clone());
                        }
                    }
                }
                default_keys(item, Some(item_ty));
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn empty_optional_lists_and_maps_are_dropped_as_go_drops_them() {
        let pod = builtin_def("io.k8s.api.core.v1.Pod");
        let mut v = json!({"metadata": {"name": "p", "labels": {}, "finalizers": []},
            "spec": {"containers": [], "volumes": [], "nodeSelector": {}, "securityContext": {},
                "initContainers": [{"name": "i", "args": [], "resources": {"limits": {}}}]}});
        drop_empty_optional(&mut v, pod, &[]);
        // Required lists, empty structs and non-empty values stay; nested items too.
        assert_eq!(
            v,
            json!({"metadata": {"name": "p"},
                "spec": {"containers": [], "securityContext": {},
                    "initContainers": [{"name": "i", "resources": {}}]}})
        );
        // Zero scalars: dropped from non-pointer omitempty fields, kept in pointer ones.
        let mut z = json!({"metadata": {"name": "p"}, "spec": {"hostname": "", "hostNetwork": false,
            "activeDeadlineSeconds": 0, "enableServiceLinks": false, "containers": [{"name": "c",
                "tty": false, "workingDir": "", "ports": [{"containerPort": 80, "hostPort": 0}]}]}});
        drop_empty_optional(&mut z, pod, &[]);
        assert_eq!(
            z,
            json!({"metadata": {"name": "p"}, "spec": {"activeDeadlineSeconds": 0, "enableServiceLinks": false,
                "containers": [{"name": "c", "ports": [{"containerPort": 80}]}]}})
        );
        let role = builtin_def("io.k8s.api.rbac.v1.Role");
        let mut r = json!({"metadata": {"annotations": {}}, "rules": []});
        drop_empty_optional(&mut r, role, &["rules"]);
        assert_eq!(r, json!({"metadata": {}, "rules": []}));
    }

    fn path<'a>(mut t: Ty<'a>, steps: &[&str]) -> Ty<'a> {
        for s in steps {
            t = match t.field(s) {
                Some(f) => f.ty,
                None => t.list().map(|l| l.0).unwrap().field(s).unwrap().ty,
            };
        }
        t
    }

    #[test]
    fn builtin_lists_follow_references() {
        let d = builtin_def("io.k8s.api.apps.v1.Deployment").unwrap();
        let containers = path(d, &["spec", "template", "spec", "containers"]);
        let (c, lt, keys) = containers.list().unwrap();
        assert_eq!((lt, keys), (ListType::Map, &["name".to_string()][..]));
        let env = c.field("env").unwrap();
        assert!(env.patch.merge);
        assert_eq!(env.patch.merge_key.as_deref(), Some("name"));
        let (port, lt, keys) = c.field("ports").unwrap().ty.list().unwrap();
        assert_eq!(lt, ListType::Map);
        assert_eq!(keys, ["containerPort", "protocol"]);
        assert_eq!(port.field_default("protocol"), Some(&json!("TCP")));
        let tol = path(d, &["spec", "template", "spec"])
            .field("tolerations")
            .unwrap();
        assert_eq!(tol.ty.list().unwrap().1, ListType::Atomic);
        assert!(!tol.patch.merge);
        let strategy = path(d, &["spec"]).field("strategy").unwrap();
        assert!(strategy.patch.retain_keys && !strategy.patch.merge);
        let fin = path(d, &["metadata"]).field("finalizers").unwrap();
        assert_eq!(fin.ty.list().unwrap().1, ListType::Set);
        assert!(fin.patch.merge && fin.patch.merge_key.is_none());
        let sel = path(d, &["spec"]).field("selector").unwrap();
        assert!(sel.is_atomic_object());
        let svc = builtin_def("io.k8s.api.core.v1.Service").unwrap();
        let ports = path(svc, &["spec"]).field("ports").unwrap();
        assert_eq!(ports.patch.merge_key.as_deref(), Some("port"));
        assert!(
            path(svc, &["spec"])
                .field("selector")
                .unwrap()
                .is_atomic_object()
        );
        // A map's values.
        let labels = path(d, &["metadata", "labels"]);
        assert!(labels.field("anything").is_some());
    }

    #[test]
    fn merge_key_without_list_type_is_a_map_list() {
        let s = json!({"type": "array", "items": {"type": "object"},
            "x-kubernetes-patch-strategy": "merge", "x-kubernetes-patch-merge-key": "k"});
        assert_eq!(list_semantics(&s), (ListType::Map, vec!["k".into()]));
        let s = json!({"type": "array", "items": {"type": "string"},
            "x-kubernetes-patch-strategy": "merge"});
        assert_eq!(list_semantics(&s).0, ListType::Set);
        let s = json!({"type": "array", "items": {"type": "string"}});
        assert_eq!(list_semantics(&s).0, ListType::Atomic);
        let s = json!({"type": "array", "x-kubernetes-list-type": "atomic",
            "x-kubernetes-patch-strategy": "merge", "x-kubernetes-patch-merge-key": "type"});
        assert_eq!(list_semantics(&s).0, ListType::Atomic);
    }

    #[test]
    fn crd_schemas_compile_with_object_meta() {
        let idx = Index::for_crd(Some(&json!({
            "type": "object",
            "properties": {"spec": {"type": "object", "properties": {
                "items": {"type": "array", "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["group", "name"],
                    "items": {"type": "object", "properties": {
                        "group": {"type": "string", "default": "g"},
                        "name": {"type": "string"}}}},
                "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}
        })));
        let root = idx.root().unwrap();
        let spec = root.field("spec").unwrap().ty;
        let (item, lt, keys) = spec.field("items").unwrap().ty.list().unwrap();
        assert_eq!((lt, keys.len()), (ListType::Map, 2));
        assert_eq!(item.field_default("group"), Some(&json!("g")));
        assert_eq!(
            spec.field("tags").unwrap().ty.list().unwrap().1,
            ListType::Set
        );
        let fin = root
            .field("metadata")
            .unwrap()
            .ty
            .field("finalizers")
            .unwrap();
        assert_eq!(fin.ty.list().unwrap().1, ListType::Set);
        let mut obj = json!({"spec": {"items": [{"name": "a"}]}});
        default_keys(&mut obj, Some(root));
        assert_eq!(obj["spec"]["items"][0]["group"], "g");
    }
}
