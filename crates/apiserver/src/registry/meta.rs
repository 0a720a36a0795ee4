//! Object metadata helpers: names, timestamps, validation, generation and managed fields.

use crate::error::ApiError;
use crate::registry::ResourceDef;
use crate::registry::fields;
use kubewright_core::StatusCause;
use serde_json::{Map, Value, json};

/// `metadata` as a map, created when absent; a value that is not an object (as object
/// or as metadata) is replaced by an empty one, so this never fails.
pub fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    if !obj.get("metadata").is_some_and(Value::is_object)
        && let Some(o) = obj.as_object_mut()
    {
        o.insert("metadata".into(), Value::Object(Map::new()));
    }
    match obj.get_mut("metadata") {
        Some(Value::Object(m)) => m,
        _ => unreachable_meta(),
    }
}

#[allow(clippy::panic)]
fn unreachable_meta() -> ! {
    // Both levels were made objects just above.
    panic!("metadata is an object by construction")
}

/// A string field of `metadata`.
pub fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")?.get(field)?.as_str()
}

/// The string map at `ptr` (labels, annotations, a selector's `matchLabels`); a value
/// that is not a string reads as "".
pub fn string_map(obj: &Value, ptr: &str) -> std::collections::BTreeMap<String, String> {
    obj.pointer(ptr)
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// An object's labels.
pub fn labels(obj: &Value) -> std::collections::BTreeMap<String, String> {
    string_map(obj, "/metadata/labels")
}

/// Current time as RFC 3339 with seconds.
pub fn now_time() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Validates a DNS-1123 label (63 chars).
pub fn is_dns_label(s: &str) -> bool {
    s.len() <= 63 && dns_label_shape(s)
}

/// The DNS-1123 label pattern, `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, whatever the length.
pub fn dns_label_shape(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// Validates a DNS-1123 subdomain (253 chars).
pub fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_dns_label)
}

/// Validates the object name for a resource; returns the message of the failure.
pub fn validate_name(def: &ResourceDef, name: &str) -> Result<(), String> {
    if name == "." || name == ".." {
        return Err(format!("may not be '{name}'"));
    }
    if name.contains('/') || name.contains('%') {
        return Err("may not contain '/' or '%'".into());
    }
    let label_kinds = matches!(
        (def.group.as_str(), def.plural.as_str()),
        ("", "namespaces" | "services" | "replicationcontrollers")
            | (
                "apps",
                "deployments" | "statefulsets" | "daemonsets" | "replicasets"
            )
            | ("batch", "cronjobs")
    );
    if def.group == "rbac.authorization.k8s.io" {
        return Ok(());
    }
    if label_kinds {
        if !is_dns_label(name) {
            return Err(String::from(crate::error::DNS_LABEL_ERROR));
        }
    } else if !is_dns_subdomain(name) {
        return Err(String::from(crate::error::DNS_SUBDOMAIN_ERROR));
    }
    Ok(())
}

/// Validates labels, annotations and owner references.
pub fn validate_meta(def: &ResourceDef, obj: &Value) -> Result<(), ApiError> {
    let name = meta_str(obj, "name").unwrap_or("");
    let mut causes = Vec::new();
    if let Some(labels) = obj.pointer("/metadata/labels").and_then(Value::as_object) {
        // As kube-apiserver's ValidateLabels: a cause per problem, at `metadata.labels`.
        let invalid = |value: &str, msg: String| StatusCause {
            reason: "FieldValueInvalid".into(),
            message: format!("Invalid value: {}: {msg}", crate::error::go_quote(value)),
            field: "metadata.labels".into(),
        };
        for (k, v) in labels {
            for msg in crate::error::qualified_name_errors(k) {
                causes.push(invalid(k, msg));
            }
            let v = v.as_str().unwrap_or_default();
            for msg in crate::error::label_value_errors(v) {
                causes.push(invalid(v, msg));
            }
        }
    }
    if let Some(refs) = obj
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
    {
        let mut controllers = 0;
        for (i, r) in refs.iter().enumerate() {
            for f in ["apiVersion", "kind", "name", "uid"] {
                if r.get(f).and_then(Value::as_str).is_none_or(str::is_empty) {
                    causes.push(StatusCause {
                        reason: "FieldValueRequired".into(),
                        message: "Required value".into(),
                        field: format!("metadata.ownerReferences[{i}].{f}"),
                    });
                }
            }
            if r.get("controller").and_then(Value::as_bool) == Some(true) {
                controllers += 1;
            }
        }
        if controllers > 1 {
            causes.push(StatusCause {
                reason: "FieldValueInvalid".into(),
                message: "Invalid value: only one reference can have Controller set to true".into(),
                field: "metadata.ownerReferences".into(),
            });
        }
    }
    if let Some(fins) = obj
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        && fins.iter().any(|f| f == "orphan")
        && fins.iter().any(|f| f == "foregroundDeletion")
    {
        causes.push(StatusCause {
            reason: "FieldValueInvalid".into(),
            message: "Invalid value: finalizer orphan and foregroundDeletion cannot be both set"
                .into(),
            field: "metadata.finalizers".into(),
        });
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(def, name, causes))
    }
}

/// Compares two objects ignoring resourceVersion and managedFields timestamps.
pub fn semantically_equal(a: &Value, b: &Value) -> bool {
    let norm = |v: &Value| -> Value {
        let mut v = v.clone();
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
            if let Some(Value::Array(mf)) = m.get_mut("managedFields") {
                for e in mf {
                    if let Some(o) = e.as_object_mut() {
                        o.remove("time");
                    }
                }
            }
        }
        v
    };
    norm(a) == norm(b)
}

/// The object has managedFields entries.
pub fn has_managed_fields(obj: &Value) -> bool {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty())
}

/// Records an `Update` by `manager` as structured-merge-diff does: the manager keeps what
/// it owned less what the write removed, and gains what it added or modified, which the
/// other managers lose.
pub fn record_update(
    obj: &mut Value,
    manager: &str,
    api_version: &str,
    subresource: Option<&str>,
    cmp: &fields::Comparison,
) {
    record_managed(
        obj,
        manager,
        "Update",
        api_version,
        subresource,
        cmp.changed(),
        &cmp.removed,
        true,
    );
}

/// Records a write by `manager` in managedFields. `operation` is `Update` or `Apply`;
/// `owned` are the paths this write set, `removed` those it dropped (no longer owned by
/// an updater).
#[allow(clippy::too_many_arguments)]
pub fn record_managed(
    obj: &mut Value,
    manager: &str,
    operation: &str,
    api_version: &str,
    subresource: Option<&str>,
    owned: std::collections::BTreeSet<fields::Path>,
    removed: &std::collections::BTreeSet<fields::Path>,
    take_from_others: bool,
) {
    let mut entries: Vec<Value> = obj
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    // structured-merge-diff drops the entries it cannot convert to the written version:
    // those of another group (an `events.k8s.io` Event written through the core API,
    // and back, keeps only the writer's entry).
    let group = |v: &str| v.rsplit_once('/').map_or("", |(g, _)| g).to_string();
    let written = group(api_version);
    entries.retain(|e| {
        e.get("apiVersion")
            .and_then(Value::as_str)
            .is_none_or(|v| group(v) == written)
    });
    // The writer's entry, as kube-apiserver identifies it (`BuildManagerIdentifier`):
    // manager, operation and subresource, and for an Update the apiVersion too (an
    // applier has one entry whatever version it applies in).
    let is_me = |e: &Value| {
        e.get("manager").and_then(Value::as_str) == Some(manager)
            && e.get("operation").and_then(Value::as_str) == Some(operation)
            && e.get("subresource").and_then(Value::as_str) == subresource
            && (operation == "Apply"
                || e.get("apiVersion").and_then(Value::as_str) == Some(api_version))
    };
    let mut mine: std::collections::BTreeSet<fields::Path> = if operation == "Apply" {
        Default::default()
    } else {
        entries
            .iter()
            .find(|e| is_me(e))
            .and_then(|e| e.get("fieldsV1"))
            .map(fields::from_fields_v1)
            .unwrap_or_default()
    };
    mine.retain(|p| !removed.contains(p));
    mine.extend(owned.iter().cloned());
    let mut out = Vec::new();
    for e in entries.drain(..) {
        if is_me(&e) {
            continue;
        }
        if take_from_others {
            let theirs = e
                .get("fieldsV1")
                .map(fields::from_fields_v1)
                .unwrap_or_default();
            // What this write set is taken from the others, and an update's removals
            // leave everyone (structured-merge-diff's update).
            let left: std::collections::BTreeSet<_> = theirs
                .difference(&owned)
                .filter(|p| operation != "Update" || !removed.contains(*p))
                .cloned()
                .collect();
            if left.is_empty() {
                continue;
            }
            let mut e = e;
            e["fieldsV1"] = fields::to_fields_v1(&left);
            out.push(e);
        } else {
            out.push(e);
        }
    }
    if !mine.is_empty() {
        let mut entry = json!({
            "manager": manager,
            "operation": operation,
            "apiVersion": api_version,
            "time": now_time(),
            "fieldsType": "FieldsV1",
            "fieldsV1": fields::to_fields_v1(&mine),
        });
        // kube-apiserver's entries for the scale subresource carry no time (they are
        // converted from the Scale's own).
        if subresource == Some("scale")
            && let Some(o) = entry.as_object_mut()
        {
            o.remove("time");
        }
        if let Some(s) = subresource {
            entry["subresource"] = Value::String(s.into());
        }
        out.push(entry);
    }
    // kube-apiserver's order: by operation (Apply first), time, manager, apiVersion,
    // subresource.
    let key = |e: &Value| {
        ["operation", "time", "manager", "apiVersion", "subresource"]
            .map(|k| e.get(k).and_then(Value::as_str).unwrap_or("").to_string())
    };
    out.sort_by_key(key);
    let m = meta_mut(obj);
    if out.is_empty() {
        m.remove("managedFields");
    } else {
        m.insert("managedFields".into(), Value::Array(out));
    }
}

/// The default field manager derived from a User-Agent (`kubectl/v1.32 (...)` -> `kubectl`).
pub fn manager_from_user_agent(ua: Option<&str>) -> String {
    let ua = ua.unwrap_or("unknown");
    let first = ua.split('/').next().unwrap_or(ua);
    first.chars().take(128).collect()
}

/// `PartialObjectMetadata` view of an object.
pub(crate) fn partial_meta(obj: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj.get("metadata").cloned().unwrap_or(json!({}))})
}
