//! Visits the values of one protobuf type inside an object's JSON form, found through the
//! schema table: how the embedded API server finds the quantities it parses and
//! canonicalizes.

use crate::schema::{SCHEMA, Schema, Special, Target, Type};
use crate::{F_INLINE, F_REPEATED};
use serde_json::Value;

/// Where a quantity sits: alone, or as a value of a `map<string, Quantity>` (a Kubernetes
/// `ResourceList`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuantityIn {
    /// A field of type `Quantity`.
    Field,
    /// A value of a `ResourceList` (`map<string, Quantity>`).
    ResourceList {
        /// The map is a field of a `core/v1` message (container resources, quotas,
        /// limit ranges, capacities, also inside other groups' pod templates), which
        /// kube-apiserver's defaulting rounds up to milli; other groups' maps (a
        /// RuntimeClass's overhead) are not.
        core: bool,
    },
}

/// Calls `f` with every quantity of the JSON object `v` of `api_version`/`kind` (a built-in
/// kind or its list) and the JSON path to it (`spec.containers[0].resources.limits.cpu`).
/// The first error of `f` ends the walk. A kind the schema does not know has no
/// quantities. `f` sees the value as it is (a string, a number or anything else).
pub fn for_each_quantity<E>(
    api_version: &str,
    kind: &str,
    v: &mut Value,
    f: &mut dyn FnMut(&str, &mut Value, QuantityIn) -> Result<(), E>,
) -> Result<(), E> {
    let Ok(schema) = SCHEMA.as_ref() else {
        return Ok(());
    };
    let mut path = String::new();
    match schema.target(api_version, kind) {
        Some(Target::Message(m)) => walk(schema, m, v, &mut path, f, 0),
        Some(Target::List { item, .. }) => match v.get_mut("items") {
            Some(Value::Array(items)) => {
                for (i, it) in items.iter_mut().enumerate() {
                    path.clear();
                    path.push_str(&format!("items[{i}]"));
                    walk(schema, item, it, &mut path, f, 0)?;
                }
                Ok(())
            }
            _ => Ok(()),
        },
        None => Ok(()),
    }
}

/// Nesting deeper than this is not followed (the encoder refuses it anyway).
const MAX_DEPTH: usize = 100;

fn walk<E>(
    schema: &Schema,
    idx: usize,
    v: &mut Value,
    path: &mut String,
    f: &mut dyn FnMut(&str, &mut Value, QuantityIn) -> Result<(), E>,
    depth: usize,
) -> Result<(), E> {
    let msg = &schema.messages[idx];
    if msg.special == Special::Quantity {
        return f(path, v, QuantityIn::Field);
    }
    if msg.special != Special::None || depth > MAX_DEPTH {
        return Ok(());
    }
    let core = msg.name.starts_with("k8s.io.api.core.v1.");
    for field in &msg.fields {
        if field.flags & F_INLINE != 0 {
            if let Type::Message(m) = field.ty {
                walk(schema, m, v, path, f, depth + 1)?;
            }
            continue;
        }
        let Some(child) = v.get_mut(&field.json) else {
            continue;
        };
        let len = path.len();
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(&field.json);
        let r = match (&field.ty, child) {
            (Type::Message(m), Value::Array(items)) if field.flags & F_REPEATED != 0 => {
                let mut r = Ok(());
                for (i, it) in items.iter_mut().enumerate() {
                    let l = path.len();
                    path.push_str(&format!("[{i}]"));
                    r = walk(schema, *m, it, path, f, depth + 1);
                    path.truncate(l);
                    if r.is_err() {
                        break;
                    }
                }
                r
            }
            (Type::Message(m), child) => walk(schema, *m, child, path, f, depth + 1),
            (Type::Map(_, value_ty), Value::Object(map)) => match **value_ty {
                Type::Message(m) if schema.messages[m].special == Special::Quantity => {
                    let mut r = Ok(());
                    for (k, q) in map.iter_mut() {
                        let l = path.len();
                        path.push_str(&format!("[{k}]"));
                        r = f(path, q, QuantityIn::ResourceList { core });
                        path.truncate(l);
                        if r.is_err() {
                            break;
                        }
                    }
                    r
                }
                Type::Message(m) => {
                    let mut r = Ok(());
                    for (k, it) in map.iter_mut() {
                        let l = path.len();
                        path.push_str(&format!("[{k}]"));
                        r = walk(schema, m, it, path, f, depth + 1);
                        path.truncate(l);
                        if r.is_err() {
                            break;
                        }
                    }
                    r
                }
                _ => Ok(()),
            },
            _ => Ok(()),
        };
        path.truncate(len);
        r?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finds_fields_and_resource_lists() {
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "0.5", "memory": "1Gi"}}},
                {"name": "d", "resources": {"requests": {"cpu": 1}}}],
                "volumes": [{"name": "v", "emptyDir": {"sizeLimit": "1Mi"}}],
                "overhead": {"cpu": "10m"}}});
        let mut seen = Vec::new();
        for_each_quantity::<()>("v1", "Pod", &mut pod, &mut |path, v, kind| {
            seen.push((path.to_string(), v.clone(), kind));
            *v = json!("x");
            Ok(())
        })
        .unwrap();
        use QuantityIn::*;
        const CORE: QuantityIn = ResourceList { core: true };
        assert_eq!(
            seen,
            vec![
                (
                    "spec.volumes[0].emptyDir.sizeLimit".into(),
                    json!("1Mi"),
                    Field
                ),
                (
                    "spec.containers[0].resources.limits[cpu]".into(),
                    json!("0.5"),
                    CORE
                ),
                (
                    "spec.containers[0].resources.limits[memory]".into(),
                    json!("1Gi"),
                    CORE
                ),
                (
                    "spec.containers[1].resources.requests[cpu]".into(),
                    json!(1),
                    CORE
                ),
                ("spec.overhead[cpu]".into(), json!("10m"), CORE),
            ]
        );
        assert_eq!(pod["spec"]["overhead"]["cpu"], "x");
        // Lists, unknown kinds, and errors that stop the walk.
        let mut list = json!({"apiVersion": "v1", "kind": "ResourceQuotaList",
            "items": [{"spec": {"hard": {"pods": "1"}}}, {"spec": {"hard": {"pods": "2"}}}]});
        let mut n = 0;
        let r = for_each_quantity("v1", "ResourceQuotaList", &mut list, &mut |p, _, _| {
            n += 1;
            if p.starts_with("items[1]") {
                Err(p.to_string())
            } else {
                Ok(())
            }
        });
        assert_eq!(r, Err("items[1].spec.hard[pods]".to_string()));
        assert_eq!(n, 2);
        for_each_quantity::<()>(
            "example.com/v1",
            "Widget",
            &mut json!({"spec": {"q": "1"}}),
            &mut |_, _, _| panic!(),
        )
        .unwrap();
    }
}
