//! Container resource requirements, validated as kube-apiserver validates pods and pod
//! templates (`ValidateResourceRequirements`, and an emptyDir's size limit): resource
//! names, non-negative amounts,
//! whole numbers for extended resources, requests within limits (equal to them for
//! resources that cannot be overcommitted). Limits and requests are visited in key
//! order (Go's map order is random, so a real server orders several errors at random).

use crate::error::{
    forbidden_cause as forbidden, go_json_text, invalid_cause as invalid,
    required_cause as required,
};
use crate::registry::ResourceDef;
use kubewright_core::StatusCause;
use kubewright_core::quantity::Quantity;
use serde_json::{Map, Value};

/// Where the pod specs of a kind are (JSON pointers).
pub(crate) fn pod_specs(def: &ResourceDef) -> &'static [&'static str] {
    match (def.group.as_str(), def.kind.as_str()) {
        ("", "Pod") => &["/spec"],
        ("", "PodTemplate") => &["/template/spec"],
        ("", "ReplicationController")
        | ("apps", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet")
        | ("batch", "Job") => &["/spec/template/spec"],
        ("batch", "CronJob") => &["/spec/jobTemplate/spec/template/spec"],
        _ => &[],
    }
}

/// The field errors of a create or update of `obj`: Leases' and Events' fields, workload
/// selectors, config keys, Services' ports, containers (names, images, ports) and their
/// resources, then the spec checks of [`crate::registry::validation`]. `old` is the
/// object an update replaces (none for a create).
pub(crate) fn validate(def: &ResourceDef, obj: &Value, old: Option<&Value>) -> Vec<StatusCause> {
    let mut causes = Vec::new();
    match (def.group.as_str(), def.kind.as_str()) {
        ("coordination.k8s.io", "Lease") => lease(obj, &mut causes),
        ("" | "events.k8s.io", "Event") => {
            crate::registry::events::validate(def, obj, old, &mut causes)
        }
        ("apps", "Deployment" | "ReplicaSet" | "DaemonSet" | "StatefulSet") => {
            workload_selector(obj, &mut causes)
        }
        ("", "ConfigMap") => config_keys(obj, &["data", "binaryData"], &mut causes),
        ("", "Secret") => config_keys(obj, &["data"], &mut causes),
        ("", "Service")
            if obj
                .pointer("/spec/ports")
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty)
                && obj.pointer("/spec/type").and_then(Value::as_str) != Some("ExternalName")
                && obj.pointer("/spec/clusterIP").and_then(Value::as_str) != Some("None") =>
        {
            causes.push(required("spec.ports"));
        }
        ("", "Service")
            if obj.pointer("/spec/type").and_then(Value::as_str) == Some("ExternalName")
                && obj
                    .pointer("/spec/clusterIPs")
                    .and_then(Value::as_array)
                    .is_some_and(|ips| !ips.is_empty()) =>
        {
            causes.push(forbidden(
                "spec.clusterIPs",
                "may not be set for ExternalName services",
            ));
        }
        _ => {}
    }
    for spec in pod_specs(def) {
        let Some(pod) = obj.pointer(spec) else {
            continue;
        };
        let base = spec.trim_start_matches('/').replace('/', ".");
        containers(pod, &base, &mut causes);
        // An emptyDir's size limit must not be negative.
        if let Some(volumes) = pod.get("volumes").and_then(Value::as_array) {
            for (i, v) in volumes.iter().enumerate() {
                let limit = v
                    .pointer("/emptyDir/sizeLimit")
                    .and_then(Value::as_str)
                    .and_then(|s| s.parse::<Quantity>().ok());
                if limit.is_some_and(|q| q < Quantity::default()) {
                    causes.push(StatusCause {
                        reason: "FieldValueForbidden".into(),
                        message: "Forbidden: SizeLimit field must be a valid resource quantity"
                            .into(),
                        field: format!("{base}.volumes[{i}].emptyDir.sizeLimit"),
                    });
                }
            }
        }
        for list in ["initContainers", "containers"] {
            let Some(containers) = pod.get(list).and_then(Value::as_array) else {
                continue;
            };
            for (i, c) in containers.iter().enumerate() {
                if let Some(r) = c.get("resources") {
                    let path = format!("{base}.{list}[{i}].resources");
                    requirements(r, &path, &mut causes);
                }
            }
        }
    }
    crate::registry::validation::validate(def, obj, &mut causes);
    causes
}

/// The items of the list `v[key]` (none when it is absent or not a list).
pub(crate) fn items<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// `validateContainers` and `validateInitContainers`, the checks most often met: at
/// least one container, names (RFC 1123 labels, unique across both lists), images and
/// container ports.
fn containers(pod: &Value, base: &str, causes: &mut Vec<StatusCause>) {
    let (regular, init) = (items(pod, "containers"), items(pod, "initContainers"));
    if regular.is_empty() {
        causes.push(required(&format!("{base}.containers")));
    }
    let mut names: Vec<String> = Vec::new();
    for (key, cs) in [("containers", regular), ("initContainers", init)] {
        for (i, c) in cs.iter().enumerate() {
            let path = format!("{base}.{key}[{i}]");
            let name = c.get("name").and_then(Value::as_str).unwrap_or_default();
            if name.is_empty() {
                causes.push(required(&format!("{path}.name")));
            } else if !crate::registry::meta::is_dns_label(name) {
                causes.push(invalid(
                    &format!("{path}.name"),
                    &crate::error::go_quote(name),
                    crate::error::DNS_LABEL_ERROR,
                ));
            } else if names.iter().any(|n| n == name) {
                causes.push(StatusCause {
                    reason: "FieldValueDuplicate".into(),
                    message: format!("Duplicate value: {}", crate::error::go_quote(name)),
                    field: format!("{path}.name"),
                });
            } else {
                names.push(name.to_string());
            }
            if c.get("image")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                causes.push(required(&format!("{path}.image")));
            }
            for (j, p) in c
                .get("ports")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                for (k, needed) in [("containerPort", true), ("hostPort", false)] {
                    let field = format!("{path}.ports[{j}].{k}");
                    match p.get(k).and_then(Value::as_i64).unwrap_or(0) {
                        0 if needed => causes.push(required(&field)),
                        0 => {}
                        n if !(1..=65535).contains(&n) => causes.push(invalid(
                            &field,
                            &n.to_string(),
                            "must be between 1 and 65535, inclusive",
                        )),
                        _ => {}
                    }
                }
            }
        }
    }
}

/// A workload's selector: required, matching its pod template's labels. (The typed
/// round trip fills a missing selector as `{}`, so an explicit empty selector is taken
/// for a missing one: kube-apiserver answers it with "empty selector is invalid for
/// deployment" instead; both are refused.)
fn workload_selector(obj: &Value, causes: &mut Vec<StatusCause>) {
    let labels = obj.pointer("/spec/template/metadata/labels");
    let sel = obj.pointer("/spec/selector").filter(|s| {
        ["matchLabels", "matchExpressions"].iter().any(|k| {
            s.get(*k).is_some_and(|v| {
                v.as_object().is_some_and(|m| !m.is_empty())
                    || v.as_array().is_some_and(|a| !a.is_empty())
            })
        })
    });
    let matches = match sel {
        None => {
            causes.push(required("spec.selector"));
            false
        }
        Some(sel) => {
            let typed: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector> =
                serde_json::from_value(sel.clone()).ok();
            let set: std::collections::BTreeMap<String, String> = labels
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                        .collect()
                })
                .unwrap_or_default();
            typed
                .and_then(|t| kubewright_core::LabelSelector::from_k8s(&t).ok())
                .is_some_and(|s| s.matches(&set))
        }
    };
    if !matches {
        causes.push(invalid(
            "spec.template.metadata.labels",
            &labels.map_or_else(|| "null".into(), go_json_text),
            "`selector` does not match template `labels`",
        ));
    }
}

/// ConfigMap and Secret keys: `IsConfigMapKey`.
fn config_keys(obj: &Value, fields: &[&str], causes: &mut Vec<StatusCause>) {
    for f in fields {
        for key in obj
            .get(*f)
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(k, _)| k)
        {
            let valid = !key.is_empty()
                && key
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
            if !valid {
                causes.push(invalid(
                    &format!("{f}[{key}]"),
                    &crate::error::go_quote(key),
                    "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
                ));
            }
        }
    }
}

/// The field errors of a write to `/status` (the kinds' `ValidateStatusUpdate`) that
/// makes `obj` of `old`.
pub(crate) fn validate_status(def: &ResourceDef, old: &Value, obj: &Value) -> Vec<StatusCause> {
    let mut causes = Vec::new();
    crate::registry::validation::validate_status(def, old, obj, &mut causes);
    if def.group.is_empty() && def.kind == "Service" {
        // ValidateLoadBalancerStatus: ingress points only for a LoadBalancer.
        let ingress = obj
            .pointer("/status/loadBalancer/ingress")
            .and_then(Value::as_array)
            .is_some_and(|i| !i.is_empty());
        if ingress && obj.pointer("/spec/type").and_then(Value::as_str) != Some("LoadBalancer") {
            causes.push(forbidden(
                "status.loadBalancer.ingress",
                "may only be used when `spec.type` is 'LoadBalancer'",
            ));
        }
    }
    causes
}

/// `ValidateLeaseSpec`: a positive duration, non-negative transitions.
fn lease(obj: &Value, causes: &mut Vec<StatusCause>) {
    let int = |f: &str| obj.pointer(&format!("/spec/{f}")).and_then(Value::as_i64);
    if let Some(d) = int("leaseDurationSeconds").filter(|d| *d <= 0) {
        causes.push(StatusCause {
            reason: "FieldValueInvalid".into(),
            message: format!("Invalid value: {d}: must be greater than 0"),
            field: "spec.leaseDurationSeconds".into(),
        });
    }
    if let Some(t) = int("leaseTransitions").filter(|t| *t < 0) {
        causes.push(StatusCause {
            reason: "FieldValueInvalid".into(),
            message: format!("Invalid value: {t}: must be greater than or equal to 0"),
            field: "spec.leaseTransitions".into(),
        });
    }
}

/// An invalid value printed in double quotes (quantities).
fn invalid_quoted(field: String, value: &str, message: &str) -> StatusCause {
    invalid(&field, &format!("\"{value}\""), message)
}

fn requirements(r: &Value, path: &str, causes: &mut Vec<StatusCause>) {
    let empty = Map::new();
    let map = |k: &str| r.get(k).and_then(Value::as_object).unwrap_or(&empty);
    let (limits, requests) = (map("limits"), map("requests"));
    let quantity = |v: &Value| v.as_str().and_then(|s| s.parse::<Quantity>().ok());
    for (name, v) in limits {
        let at = format!("{path}.limits[{name}]");
        amount(name, v, &at, causes);
    }
    for (name, v) in requests {
        let at = format!("{path}.requests[{name}]");
        amount(name, v, &at, causes);
        let Some(req) = quantity(v) else { continue };
        match limits.get(name).and_then(quantity) {
            Some(lim) if req != lim && !overcommit_allowed(name) => causes.push(invalid_quoted(
                format!("{path}.requests"),
                &req.to_string(),
                &format!("must be equal to {name} limit of {lim}"),
            )),
            Some(lim) if req > lim => causes.push(invalid_quoted(
                format!("{path}.requests"),
                &req.to_string(),
                &format!("must be less than or equal to {name} limit of {lim}"),
            )),
            Some(_) => {}
            None if !overcommit_allowed(name) => causes.push(StatusCause {
                reason: "FieldValueRequired".into(),
                message: "Required value: Limit must be set for non overcommitable resources"
                    .into(),
                field: format!("{path}.limits"),
            }),
            None => {}
        }
    }
}

/// The name and amount checks of one limit or request.
fn amount(name: &str, v: &Value, at: &str, causes: &mut Vec<StatusCause>) {
    if !name.contains('/') {
        if !standard_container_resource(name) {
            if !standard_resource(name) {
                causes.push(invalid_quoted(
                    at.into(),
                    name,
                    "must be a standard resource type or fully qualified",
                ));
            }
            causes.push(invalid_quoted(
                at.into(),
                name,
                "must be a standard resource for containers",
            ));
            return;
        }
    } else if !native(name) && !extended(name) {
        causes.push(invalid_quoted(
            at.into(),
            name,
            "doesn't follow extended resource name standard",
        ));
        return;
    }
    let Some(q) = v.as_str().and_then(|s| s.parse::<Quantity>().ok()) else {
        return;
    };
    let zero: Quantity = Quantity::default();
    if q < zero {
        causes.push(invalid_quoted(
            at.into(),
            &q.to_string(),
            "must be greater than or equal to 0",
        ));
    }
    if extended(name) && q.as_milli().is_some_and(|m| m % 1000 != 0) {
        causes.push(invalid_quoted(
            at.into(),
            &q.to_string(),
            "must be an integer",
        ));
    }
}

fn hugepages(name: &str) -> bool {
    name.starts_with("hugepages-")
}

fn standard_container_resource(name: &str) -> bool {
    matches!(name, "cpu" | "memory" | "ephemeral-storage") || hugepages(name)
}

/// Go's `IsStandardResourceName` (quota and container names without a domain).
fn standard_resource(name: &str) -> bool {
    matches!(
        name,
        "cpu"
            | "memory"
            | "ephemeral-storage"
            | "requests.cpu"
            | "requests.memory"
            | "requests.ephemeral-storage"
            | "limits.cpu"
            | "limits.memory"
            | "limits.ephemeral-storage"
            | "pods"
            | "services"
            | "replicationcontrollers"
            | "resourcequotas"
            | "secrets"
            | "configmaps"
            | "persistentvolumeclaims"
            | "storage"
            | "requests.storage"
            | "services.nodeports"
            | "services.loadbalancers"
    ) || hugepages(name)
        || name.starts_with("requests.hugepages-")
}

/// Resources of Kubernetes itself: no domain, or a `kubernetes.io` one.
fn native(name: &str) -> bool {
    match name.split_once('/') {
        None => true,
        Some((domain, _)) => domain == "kubernetes.io" || domain.ends_with(".kubernetes.io"),
    }
}

/// Extended resources (`example.com/gpu`): a domain that is not Kubernetes', not a quota
/// `requests.` name.
fn extended(name: &str) -> bool {
    !native(name) && !name.starts_with("requests.")
}

/// Requests may be below limits for native resources other than huge pages.
fn overcommit_allowed(name: &str) -> bool {
    native(name) && !hugepages(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn causes(resources: Value) -> Vec<(String, String)> {
        let mut out = Vec::new();
        requirements(&resources, "spec.containers[0].resources", &mut out);
        out.into_iter().map(|c| (c.field, c.message)).collect()
    }

    /// The answers of kube-apiserver v1.36 for the same container resources.
    #[test]
    fn container_resources_as_kube_apiserver_validates_them() {
        let r = "spec.containers[0].resources";
        assert_eq!(
            causes(json!({"limits": {"cpu": "-1"}, "requests": {"cpu": "-1"}})),
            [
                (
                    format!("{r}.limits[cpu]"),
                    "Invalid value: \"-1\": must be greater than or equal to 0".into()
                ),
                (
                    format!("{r}.requests[cpu]"),
                    "Invalid value: \"-1\": must be greater than or equal to 0".into()
                ),
            ]
        );
        assert_eq!(
            causes(json!({"requests": {"cpu": "2"}, "limits": {"cpu": "1"}})),
            [(
                format!("{r}.requests"),
                "Invalid value: \"2\": must be less than or equal to cpu limit of 1".into()
            )]
        );
        assert_eq!(
            causes(json!({"requests": {"example.com/x": "1"}})),
            [(
                format!("{r}.limits"),
                "Required value: Limit must be set for non overcommitable resources".into()
            )]
        );
        assert_eq!(
            causes(json!({"requests": {"example.com/x": "1"}, "limits": {"example.com/x": "2"}})),
            [(
                format!("{r}.requests"),
                "Invalid value: \"1\": must be equal to example.com/x limit of 2".into()
            )]
        );
        assert_eq!(
            causes(
                json!({"limits": {"example.com/x": "1500m"}, "requests": {"example.com/x": "1500m"}})
            ),
            [
                (
                    format!("{r}.limits[example.com/x]"),
                    "Invalid value: \"1500m\": must be an integer".into()
                ),
                (
                    format!("{r}.requests[example.com/x]"),
                    "Invalid value: \"1500m\": must be an integer".into()
                ),
            ]
        );
        assert_eq!(
            causes(json!({"limits": {"foo": "1"}})),
            [
                (
                    format!("{r}.limits[foo]"),
                    "Invalid value: \"foo\": must be a standard resource type or fully qualified"
                        .into()
                ),
                (
                    format!("{r}.limits[foo]"),
                    "Invalid value: \"foo\": must be a standard resource for containers".into()
                ),
            ]
        );
        assert!(causes(json!({"requests": {"cpu": "0"}, "limits": {"cpu": "0"}})).is_empty());
        assert!(causes(json!({"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}})).is_empty());
    }
}
