//! The type errors of Go's `encoding/json` (as kube-apiserver's decoder reports them)
//! for a built-in object whose JSON has a value of the wrong type:
//! `json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of
//! type int32`.
//!
//! The text names the JSON value's kind (`string`, `number`, `object`, `array`, `bool`;
//! a number that no integer type holds is `number 1.5`), the Go struct that holds the
//! field, the field's JSON path from the object's root (list indices and map keys left
//! out), and the field's Go type (`int32`, `[]v1.Container`, `map[string]string`,
//! `v1.PodSpec`; for a list item or map value, the item's type). Go reports the first
//! error in document order; this walks keys in sorted order, which agrees whenever one
//! field is wrong. Types with their own decoders say what they say: a Quantity's
//! pattern, an IntOrString's `int32`, a Time's `string`.

use serde_json::Value;
use std::collections::BTreeMap;

const REF_PREFIX: &str = "#/components/schemas/";
const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";
const QUANTITY_ERROR: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/// The error for the built-in definition `def` (e.g. `io.k8s.api.apps.v1.Deployment`)
/// and its JSON `obj`, if a value has the wrong type.
pub fn type_error(def: &str, obj: &Value) -> Option<String> {
    let defs = crate::openapi::builtin_definitions();
    let schema = defs.get(def)?;
    let mut path = Vec::new();
    walk_struct(defs, def, schema, obj, &mut path, 0)
}

fn short_name(def: &str) -> &str {
    def.rsplit('.').next().unwrap_or(def)
}

/// `v1.PodSpec` for `io.k8s.api.core.v1.PodSpec`.
fn go_name(def: &str) -> String {
    let mut parts = def.rsplit('.');
    let name = parts.next().unwrap_or(def);
    match parts.next() {
        Some(pkg) => format!("{pkg}.{name}"),
        None => name.to_string(),
    }
}

/// The definition a property refers to (`$ref`, or `allOf: [{$ref}]`).
fn reference(schema: &Value) -> Option<&str> {
    schema
        .get("$ref")
        .or_else(|| schema.pointer("/allOf/0/$ref"))
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix(REF_PREFIX))
}

/// What a property decodes as.
enum Shape<'a> {
    Struct(&'a str, &'a Value),
    List(&'a Value),
    Map(&'a Value),
    Int(&'static str),
    Float,
    Str {
        bytes: bool,
    },
    Bool,
    Quantity,
    IntOrString,
    Time,
    /// RawExtension, JSON, anything else: not checked.
    Any,
}

fn shape<'a>(defs: &'a BTreeMap<String, Value>, schema: &'a Value) -> Shape<'a> {
    if let Some(name) = reference(schema) {
        if name == QUANTITY {
            return Shape::Quantity;
        }
        let Some(target) = defs.get(name) else {
            return Shape::Any;
        };
        if target.get("x-kubernetes-int-or-string").is_some() {
            return Shape::IntOrString;
        }
        if target.get("properties").is_some() {
            return Shape::Struct(name, target);
        }
        return match target.get("type").and_then(Value::as_str) {
            // Time, MicroTime: a string in JSON.
            Some("string") if target.get("format").and_then(Value::as_str) == Some("date-time") => {
                Shape::Time
            }
            _ => Shape::Any,
        };
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("array") => schema.get("items").map_or(Shape::Any, Shape::List),
        Some("object") => schema
            .get("additionalProperties")
            .filter(|a| a.is_object())
            .map_or(Shape::Any, Shape::Map),
        Some("integer") => Shape::Int(match schema.get("format").and_then(Value::as_str) {
            Some("int32") => "int32",
            _ => "int64",
        }),
        Some("number") => Shape::Float,
        Some("string") => Shape::Str {
            bytes: schema.get("format").and_then(Value::as_str) == Some("byte"),
        },
        Some("boolean") => Shape::Bool,
        _ => Shape::Any,
    }
}

/// The Go type of a property.
fn go_type(defs: &BTreeMap<String, Value>, schema: &Value, depth: usize) -> String {
    if depth > 16 {
        return "interface {}".into();
    }
    match shape(defs, schema) {
        Shape::Struct(name, _) => go_name(name),
        Shape::List(items) => format!("[]{}", go_type(defs, items, depth + 1)),
        Shape::Map(values) => format!("map[string]{}", go_type(defs, values, depth + 1)),
        Shape::Int(t) => t.into(),
        Shape::Float => "float64".into(),
        Shape::Str { bytes: true } => "[]uint8".into(),
        Shape::Str { bytes: false } | Shape::Time => "string".into(),
        Shape::Bool => "bool".into(),
        Shape::IntOrString => "int32".into(),
        Shape::Quantity => "resource.Quantity".into(),
        Shape::Any => "interface {}".into(),
    }
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Object(_) => "object",
        Value::Array(_) => "array",
        Value::Bool(_) => "bool",
        Value::Null => "null",
    }
}

fn walk_struct(
    defs: &BTreeMap<String, Value>,
    name: &str,
    schema: &Value,
    obj: &Value,
    path: &mut Vec<String>,
    depth: usize,
) -> Option<String> {
    if depth > 64 {
        return None;
    }
    let props = schema.get("properties")?.as_object()?;
    let fields = obj.as_object()?;
    for (key, v) in fields {
        let Some(prop) = props.get(key) else {
            continue;
        };
        path.push(key.clone());
        let err = walk_value(defs, short_name(name), prop, v, path, depth + 1);
        path.pop();
        if err.is_some() {
            return err;
        }
    }
    None
}

/// Checks `v` against property `schema` of struct `owner` (the field at `path`).
fn walk_value(
    defs: &BTreeMap<String, Value>,
    owner: &str,
    schema: &Value,
    v: &Value,
    path: &mut Vec<String>,
    depth: usize,
) -> Option<String> {
    if v.is_null() || depth > 64 {
        return None;
    }
    let wrong = |what: String, ty: String, path: &[String]| {
        Some(format!(
            "json: cannot unmarshal {what} into Go struct field {owner}.{} of type {ty}",
            path.join(".")
        ))
    };
    let kind = || json_kind(v).to_string();
    match shape(defs, schema) {
        Shape::Struct(name, target) => match v {
            Value::Object(_) => walk_struct(defs, name, target, v, path, depth),
            _ => wrong(kind(), go_name(name), path),
        },
        Shape::List(items) => match v {
            Value::Array(list) => list
                .iter()
                .find_map(|item| walk_value(defs, owner, items, item, path, depth + 1)),
            _ => wrong(kind(), go_type(defs, schema, 0), path),
        },
        Shape::Map(values) => match v {
            Value::Object(m) => m
                .values()
                .find_map(|item| walk_value(defs, owner, values, item, path, depth + 1)),
            _ => wrong(kind(), go_type(defs, schema, 0), path),
        },
        Shape::Int(t) => int_error(v, t).and_then(|what| wrong(what, t.into(), path)),
        Shape::IntOrString => match v {
            Value::String(_) => None,
            _ => int_error(v, "int32").and_then(|what| wrong(what, "int32".into(), path)),
        },
        Shape::Float => (!v.is_number())
            .then(kind)
            .and_then(|what| wrong(what, "float64".into(), path)),
        Shape::Str { bytes } => (!v.is_string())
            .then(kind)
            .and_then(|what| wrong(what, if bytes { "[]uint8" } else { "string" }.into(), path)),
        Shape::Time => (!v.is_string())
            .then(kind)
            .and_then(|what| wrong(what, "string".into(), path)),
        Shape::Bool => (!v.is_boolean())
            .then(kind)
            .and_then(|what| wrong(what, "bool".into(), path)),
        Shape::Quantity => match v {
            Value::String(_) | Value::Number(_) => None,
            _ => Some(QUANTITY_ERROR.to_string()),
        },
        Shape::Any => None,
    }
}

/// Why `v` does not decode as an integer of Go type `t` (`string`, `number 1.5`).
fn int_error(v: &Value, t: &str) -> Option<String> {
    let Value::Number(n) = v else {
        return Some(json_kind(v).to_string());
    };
    let fits = match t {
        "int32" => n.as_i64().is_some_and(|i| i32::try_from(i).is_ok()),
        _ => n.as_i64().is_some(),
    };
    (!fits).then(|| format!("number {n}"))
}

/// Go decodes `null` as "leave the zero value": a null list item or map value of the
/// built-in definition `def`'s object becomes the zero of its type (`""`, `0`, `false`,
/// `{}` for a struct, `"0"` for a quantity), where a typed decode would refuse it
/// (`"data": {"a": null}` is `"a": ""` on kube-apiserver). A null struct field is
/// already an absent one.
pub fn nulls_to_zero(def: &str, obj: &mut Value) {
    let defs = crate::openapi::builtin_definitions();
    if let Some(schema) = defs.get(def) {
        zero_struct(defs, schema, obj, 0);
    }
}

fn zero_of(shape: Shape<'_>) -> Option<Value> {
    Some(match shape {
        Shape::Struct(..) => Value::Object(serde_json::Map::new()),
        Shape::Int(_) | Shape::Float | Shape::IntOrString => Value::from(0),
        Shape::Str { .. } => Value::String(String::new()),
        Shape::Bool => Value::Bool(false),
        Shape::Quantity => Value::String("0".into()),
        Shape::List(_) | Shape::Map(_) | Shape::Time | Shape::Any => return None,
    })
}

fn zero_struct(defs: &BTreeMap<String, Value>, target: &Value, v: &mut Value, depth: usize) {
    let (Value::Object(m), Some(props)) = (v, target.get("properties")) else {
        return;
    };
    for (k, child) in m.iter_mut() {
        if let Some(ps) = props.get(k) {
            zero_value(defs, ps, child, depth + 1);
        }
    }
}

fn zero_value(defs: &BTreeMap<String, Value>, schema: &Value, v: &mut Value, depth: usize) {
    if depth > 64 {
        return;
    }
    match shape(defs, schema) {
        Shape::Struct(_, target) => zero_struct(defs, target, v, depth),
        Shape::List(items) => {
            if let Value::Array(a) = v {
                for x in a {
                    zero_item(defs, items, x, depth);
                }
            }
        }
        Shape::Map(values) => {
            if let Value::Object(m) = v {
                for x in m.values_mut() {
                    zero_item(defs, values, x, depth);
                }
            }
        }
        _ => {}
    }
}

fn zero_item(defs: &BTreeMap<String, Value>, schema: &Value, item: &mut Value, depth: usize) {
    if item.is_null() {
        if let Some(z) = zero_of(shape(defs, schema)) {
            *item = z;
        }
    } else {
        zero_value(defs, schema, item, depth + 1);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn null_items_and_values_become_go_zeros() {
        let mut cm = serde_json::json!({"metadata": {"name": "c", "labels": {"x": null}},
            "data": {"a": null}, "binaryData": {"b": null}});
        nulls_to_zero("io.k8s.api.core.v1.ConfigMap", &mut cm);
        assert_eq!(cm["data"]["a"], "");
        assert_eq!(cm["metadata"]["labels"]["x"], "");
        assert_eq!(cm["binaryData"]["b"], "");
        let mut pod = serde_json::json!({"spec": {"containers": [null,
            {"name": "c", "args": [null, "x"], "resources": {"limits": {"cpu": null}}}]}});
        nulls_to_zero("io.k8s.api.core.v1.Pod", &mut pod);
        assert_eq!(pod["spec"]["containers"][0], serde_json::json!({}));
        assert_eq!(
            pod["spec"]["containers"][1]["args"],
            serde_json::json!(["", "x"])
        );
        assert_eq!(
            pod["spec"]["containers"][1]["resources"]["limits"]["cpu"],
            "0"
        );
    }

    use super::*;
    use serde_json::json;

    #[test]
    fn texts_are_gos() {
        let d = "io.k8s.api.apps.v1.Deployment";
        let dep =
            |spec: Value| json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": spec});
        assert_eq!(
            type_error(d, &dep(json!({"replicas": "3"}))).as_deref(),
            Some(
                "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32"
            )
        );
        assert_eq!(
            type_error(d, &dep(json!({"replicas": 1.5}))).as_deref(),
            Some(
                "json: cannot unmarshal number 1.5 into Go struct field DeploymentSpec.spec.replicas of type int32"
            )
        );
        let p = "io.k8s.api.core.v1.Pod";
        assert_eq!(
            type_error(p, &json!({"spec": {"containers": {"name": "c"}}})).as_deref(),
            Some(
                "json: cannot unmarshal object into Go struct field PodSpec.spec.containers of type []v1.Container"
            )
        );
        assert_eq!(
            type_error(p, &json!({"spec": {"containers": [{"name": "c", "ports": [{"containerPort": "80"}]}]}})).as_deref(),
            Some("json: cannot unmarshal string into Go struct field ContainerPort.spec.containers.ports.containerPort of type int32")
        );
        let cm = "io.k8s.api.core.v1.ConfigMap";
        assert_eq!(
            type_error(cm, &json!({"metadata": {"labels": ["a"]}})).as_deref(),
            Some(
                "json: cannot unmarshal array into Go struct field ObjectMeta.metadata.labels of type map[string]string"
            )
        );
        assert_eq!(
            type_error(cm, &json!({"binaryData": {"a": 1}})).as_deref(),
            Some(
                "json: cannot unmarshal number into Go struct field ConfigMap.binaryData of type []uint8"
            )
        );
        assert_eq!(
            type_error(cm, &json!({"data": {"a": "b"}, "metadata": {"name": "x"}})),
            None
        );
    }
}
