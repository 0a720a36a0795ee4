//! Label and field selector matching on stored objects.

use crate::error::ApiError;
use crate::registry::ResourceDef;
use kubewright_core::{FieldSelector, LabelSelector};
use serde_json::Value;

/// Field selectors supported per resource (beyond metadata.name and metadata.namespace),
/// as kube-apiserver v1.36 registers them.
fn extra_fields(def: &ResourceDef) -> &'static [&'static str] {
    match (def.group.as_str(), def.plural.as_str()) {
        ("", "pods") => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.podIPs",
            "status.nominatedNodeName",
        ],
        ("", "events") => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        ("events.k8s.io", "events") => &[
            "regarding.kind",
            "regarding.namespace",
            "regarding.name",
            "regarding.uid",
            "regarding.apiVersion",
            "regarding.resourceVersion",
            "regarding.fieldPath",
            "reason",
            "reportingController",
            "type",
        ],
        ("", "secrets") => &["type"],
        ("", "namespaces") => &["status.phase"],
        ("", "nodes") => &["spec.unschedulable"],
        ("", "replicationcontrollers") => &["status.replicas"],
        ("", "services") => &["spec.clusterIP", "spec.type"],
        ("batch", "jobs") => &["status.successful"],
        ("certificates.k8s.io", "certificatesigningrequests") => &["spec.signerName"],
        ("resource.k8s.io", "resourceslices") => &["spec.nodeName", "spec.driver"],
        _ => &[],
    }
}

/// The error for a field selector `f` the resource does not support: the words of the
/// resource's field label conversion, or of the default one.
fn unsupported(def: &ResourceDef, f: &str) -> String {
    match (def.group.as_str(), def.plural.as_str()) {
        (
            "",
            "pods"
            | "events"
            | "secrets"
            | "namespaces"
            | "nodes"
            | "replicationcontrollers"
            | "services",
        )
        | ("events.k8s.io", "events")
        | ("certificates.k8s.io", "certificatesigningrequests") => {
            format!("field label not supported: {f}")
        }
        ("batch", "jobs") => format!("field label {f:?} not supported for Job"),
        ("resource.k8s.io", "resourceslices") => {
            format!("field label not supported for resource.k8s.io/v1, Kind=ResourceSlice: {f}")
        }
        _ => format!(
            "\"{f}\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        ),
    }
}

/// Rejects field selectors on unsupported fields (400).
pub fn check_field_selector(def: &ResourceDef, sel: &FieldSelector) -> Result<(), ApiError> {
    let crd_fields: Vec<String> = def
        .crd
        .as_ref()
        .map(|c| c.selectable_fields(&def.version))
        .unwrap_or_default();
    for r in &sel.requirements {
        let f = r.field.as_str();
        if f == "metadata.name"
            || f == "metadata.namespace"
            || extra_fields(def).contains(&f)
            || crd_fields.iter().any(|c| c == f)
        {
            continue;
        }
        return Err(ApiError::bad_request(unsupported(def, f)));
    }
    Ok(())
}

/// Reads a dotted field path as the string the API server compares.
pub fn field_value(def: &ResourceDef, obj: &Value, field: &str) -> Option<String> {
    if def.group.is_empty() && def.plural == "events" && field == "source" {
        return obj
            .pointer("/source/component")
            .and_then(Value::as_str)
            .map(str::to_string);
    }
    if def.group.is_empty() && def.plural == "pods" && field == "status.podIPs" {
        // The pod's IPs joined by commas (upstream's selectable field).
        let ips: Vec<&str> = obj
            .pointer("/status/podIPs")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|ip| ip.get("ip").and_then(Value::as_str))
                    .collect()
            })
            .unwrap_or_default();
        return Some(ips.join(","));
    }
    let ptr = format!("/{}", field.replace('.', "/"));
    match obj.pointer(&ptr)? {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Whether an object matches both selectors.
pub fn matches(
    def: &ResourceDef,
    obj: &Value,
    labels: &LabelSelector,
    fields: &FieldSelector,
) -> bool {
    let label_map = obj.pointer("/metadata/labels").and_then(Value::as_object);
    (labels.is_empty()
        || labels.matches_fn(|k| label_map.and_then(|m| m.get(k)).and_then(Value::as_str)))
        && (fields.is_empty()
            || fields.matches(|f| {
                let v = field_value(def, obj, f);
                // Booleans and numbers default like the API server's field sets.
                v.or_else(|| {
                    if f == "spec.hostNetwork" || f == "spec.unschedulable" {
                        Some("false".into())
                    } else {
                        None
                    }
                })
            }))
}
