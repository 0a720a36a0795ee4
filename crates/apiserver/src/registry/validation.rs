//! Spec validation kube-apiserver does on create and update that the embedded server's
//! other checks (containers, resources, selectors, keys: `resources.rs`) do not cover,
//! with v1.36's field paths and texts (`pkg/apis/*/validation`): pod specs (volumes and
//! mounts, ports, env, probes, policies, tolerations, node selectors, host names),
//! workload counts and strategies and their templates' restart policy, Jobs, Services,
//! HorizontalPodAutoscalers, PodDisruptionBudgets, Ingresses, TLS Secrets and RBAC.
//!
//! The objects are checked after defaulting, as Go validates the defaulted internal
//! object. Each check is one that a controller's bug commonly trips; the full upstream
//! validation is larger (see docs/testing.md).

use crate::error::{
    forbidden_cause as forbidden, go_json_text, go_quote, invalid_cause as invalid,
    label_value_errors, qualified_name_errors, required_cause as required,
};
use crate::registry::ResourceDef;
use crate::registry::meta::{is_dns_label, is_dns_subdomain};
use crate::registry::resources::items;
use kubewright_core::StatusCause;
use serde_json::Value;

const NON_NEGATIVE: &str = "must be greater than or equal to 0";

/// `Unsupported value: "x": supported values: "a", "b"`.
pub(crate) fn not_supported(field: &str, value: &str, supported: &[&str]) -> StatusCause {
    let list: Vec<String> = supported.iter().map(|s| go_quote(s)).collect();
    StatusCause {
        reason: "FieldValueNotSupported".into(),
        message: format!(
            "Unsupported value: {}: supported values: {}",
            go_quote(value),
            list.join(", ")
        ),
        field: field.into(),
    }
}

pub(crate) fn duplicate(field: &str, value: &str) -> StatusCause {
    StatusCause {
        reason: "FieldValueDuplicate".into(),
        message: format!("Duplicate value: {value}"),
        field: field.into(),
    }
}

fn not_found(field: &str, value: &str) -> StatusCause {
    StatusCause {
        reason: "FieldValueNotFound".into(),
        message: format!("Not found: {}", go_quote(value)),
        field: field.into(),
    }
}

pub(crate) fn required_why(field: &str, why: &str) -> StatusCause {
    StatusCause {
        reason: "FieldValueRequired".into(),
        message: format!("Required value: {why}"),
        field: field.into(),
    }
}

fn str_at<'v>(v: &'v Value, key: &str) -> Option<&'v str> {
    v.get(key).and_then(Value::as_str)
}

fn int_at(v: &Value, key: &str) -> Option<i64> {
    v.get(key).and_then(Value::as_i64)
}

/// An integer field that must not be negative.
fn non_negative(v: &Value, key: &str, base: &str, causes: &mut Vec<StatusCause>) {
    if let Some(n) = int_at(v, key).filter(|n| *n < 0) {
        causes.push(invalid(
            &format!("{base}.{key}"),
            &n.to_string(),
            NON_NEGATIVE,
        ));
    }
}

/// The checks of this module for `obj` of `def`'s kind: the kind's own, its pod spec's,
/// then those of [`validate_rest`].
pub(crate) fn validate(def: &ResourceDef, obj: &Value, causes: &mut Vec<StatusCause>) {
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    match (def.group.as_str(), def.kind.as_str()) {
        ("apps", kind @ ("Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet")) => {
            workload(kind, spec, causes)
        }
        ("", "ReplicationController") => workload("ReplicationController", spec, causes),
        ("batch", "Job") => job(spec, "spec", causes),
        ("batch", "CronJob") => {
            if let Some(j) = obj.pointer("/spec/jobTemplate/spec") {
                job(j, "spec.jobTemplate.spec", causes);
            }
        }
        ("", "Service") => service(spec, causes),
        ("discovery.k8s.io", "EndpointSlice") => endpoint_slice(obj, causes),
        ("autoscaling", "HorizontalPodAutoscaler") => hpa(spec, causes),
        ("policy", "PodDisruptionBudget") => pdb(spec, causes),
        ("networking.k8s.io", "Ingress")
            if spec.get("defaultBackend").is_none() && items(spec, "rules").is_empty() =>
        {
            causes.push(invalid(
                "spec",
                "null",
                "either `defaultBackend` or `rules` must be specified",
            ));
        }
        ("", "Secret") if str_at(obj, "type") == Some("kubernetes.io/tls") => {
            for key in ["tls.crt", "tls.key"] {
                if obj.pointer(&format!("/data/{key}")).is_none() {
                    causes.push(required(&format!("data[{key}]")));
                }
            }
        }
        ("rbac.authorization.k8s.io", "Role" | "ClusterRole") => {
            for (i, r) in items(obj, "rules").iter().enumerate() {
                if items(r, "verbs").is_empty() {
                    causes.push(required_why(
                        &format!("rules[{i}].verbs"),
                        "verbs must contain at least one value",
                    ));
                }
            }
        }
        ("admissionregistration.k8s.io", "MutatingAdmissionPolicy") => {
            mutating_policy(spec, causes)
        }
        ("admissionregistration.k8s.io", "MutatingAdmissionPolicyBinding")
            if str_at(spec, "policyName").is_none_or(str::is_empty) =>
        {
            causes.push(required("spec.policyName"));
        }
        ("resource.k8s.io", "DeviceClass") => crate::registry::dra::device_class(obj, causes),
        ("resource.k8s.io", "ResourceClaim") => crate::registry::dra::claim_spec(
            obj.get("spec").unwrap_or(&Value::Null),
            "spec",
            causes,
        ),
        ("resource.k8s.io", "ResourceClaimTemplate") => {
            crate::registry::dra::claim_template(obj, causes)
        }
        ("resource.k8s.io", "ResourceSlice") => crate::registry::dra::resource_slice(obj, causes),
        ("storage.k8s.io", "VolumeAttributesClass") => {
            crate::registry::dra::volume_attributes_class(obj, causes)
        }
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding")
            if obj
                .pointer("/roleRef/name")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty) =>
        {
            causes.push(required("roleRef.name"));
        }
        _ => {}
    }
    // A StatefulSet's containers may mount its volume claim templates too (measured on
    // v1.36: "data" from a template is found, another name is not).
    let claim_templates: Vec<&str> = if def.group == "apps" && def.kind == "StatefulSet" {
        items(
            obj.get("spec").unwrap_or(&Value::Null),
            "volumeClaimTemplates",
        )
        .iter()
        .filter_map(|t| t.pointer("/metadata/name").and_then(Value::as_str))
        .collect()
    } else {
        Vec::new()
    };
    for at in crate::registry::resources::pod_specs(def) {
        if let Some(pod) = obj.pointer(at) {
            pod_spec(
                pod,
                &at.trim_start_matches('/').replace('/', "."),
                &claim_templates,
                causes,
            );
        }
    }
    validate_rest(def, obj, causes);
}

/// `ValidateDeploymentSpec` and its kin: counts, the strategy, and a template that
/// restarts always.
fn workload(kind: &str, spec: &Value, causes: &mut Vec<StatusCause>) {
    if kind != "DaemonSet" {
        non_negative(spec, "replicas", "spec", causes);
    }
    non_negative(spec, "minReadySeconds", "spec", causes);
    non_negative(spec, "revisionHistoryLimit", "spec", causes);
    if let Some(policy) = spec
        .pointer("/template/spec/restartPolicy")
        .and_then(Value::as_str)
        .filter(|p| *p != "Always")
    {
        causes.push(not_supported(
            "spec.template.spec.restartPolicy",
            policy,
            &["Always"],
        ));
    }
    if kind == "Deployment" {
        deployment_strategy(spec, causes);
        if let Some(deadline) = int_at(spec, "progressDeadlineSeconds") {
            let min_ready = int_at(spec, "minReadySeconds").unwrap_or(0);
            if deadline < 0 {
                causes.push(invalid(
                    "spec.progressDeadlineSeconds",
                    &deadline.to_string(),
                    NON_NEGATIVE,
                ));
            } else if deadline <= min_ready {
                causes.push(invalid(
                    "spec.progressDeadlineSeconds",
                    &deadline.to_string(),
                    "must be greater than minReadySeconds",
                ));
            }
        }
    }
}

/// `ValidateDeploymentStrategy` and `ValidateRollingUpdateDeployment`.
fn deployment_strategy(spec: &Value, causes: &mut Vec<StatusCause>) {
    let Some(strategy) = spec.get("strategy") else {
        return;
    };
    let rolling = strategy.get("rollingUpdate").filter(|r| !r.is_null());
    match str_at(strategy, "type").unwrap_or("") {
        "Recreate" => {
            if rolling.is_some() {
                causes.push(forbidden(
                    "spec.strategy.rollingUpdate",
                    "may not be specified when strategy `type` is 'Recreate'",
                ));
            }
        }
        "RollingUpdate" => {
            let Some(r) = rolling else {
                return;
            };
            // An int or a percentage; zero when both are zero.
            let is_zero = |k: &str| match r.get(k) {
                Some(Value::Number(n)) => n.as_i64() == Some(0),
                Some(Value::String(s)) => s.trim_end_matches('%') == "0",
                _ => false,
            };
            if is_zero("maxUnavailable") && is_zero("maxSurge") {
                let shown = match r.get("maxUnavailable") {
                    Some(Value::String(s)) => go_quote(s),
                    Some(v) => v.to_string(),
                    None => "0".into(),
                };
                causes.push(invalid(
                    "spec.strategy.rollingUpdate.maxUnavailable",
                    &shown,
                    "may not be 0 when `maxSurge` is 0",
                ));
            }
        }
        other => {
            // Go prints the internal DeploymentStrategy struct.
            let rolling_text = rolling.map_or_else(|| "null".into(), go_json_text);
            causes.push(StatusCause {
                reason: "FieldValueNotSupported".into(),
                message: format!(
                    "Unsupported value: {{\"Type\":{},\"RollingUpdate\":{rolling_text}}}: supported values: \"Recreate\", \"RollingUpdate\"",
                    go_json_text(&Value::String(other.into()))
                ),
                field: "spec.strategy".into(),
            });
        }
    }
}

/// `validateJobSpec`: counts and a template that does not restart always.
fn job(spec: &Value, base: &str, causes: &mut Vec<StatusCause>) {
    for key in [
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "backoffLimit",
    ] {
        non_negative(spec, key, base, causes);
    }
    let policy = spec
        .pointer("/template/spec/restartPolicy")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !matches!(policy, "OnFailure" | "Never") {
        causes.push(required_why(
            &format!("{base}.template.spec.restartPolicy"),
            "valid values: \"OnFailure\", \"Never\"",
        ));
    }
}

/// `ValidateService`'s checks of type, ports, external name and selector.
fn service(spec: &Value, causes: &mut Vec<StatusCause>) {
    let ty = str_at(spec, "type").unwrap_or("ClusterIP");
    const TYPES: &[&str] = &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];
    if !TYPES.contains(&ty) {
        causes.push(not_supported("spec.type", ty, TYPES));
    }
    if ty == "ExternalName" {
        let name = str_at(spec, "externalName").unwrap_or("");
        let name = name.strip_suffix('.').unwrap_or(name);
        if name.is_empty() {
            causes.push(required("spec.externalName"));
        } else if !is_dns_subdomain(name) {
            causes.push(invalid(
                "spec.externalName",
                &go_quote(name),
                crate::error::DNS_SUBDOMAIN_ERROR,
            ));
        }
    }
    // `validateServicePort`, port by port.
    let ports = items(spec, "ports");
    let mut names: Vec<&str> = Vec::new();
    for (i, p) in ports.iter().enumerate() {
        let base = format!("spec.ports[{i}]");
        let name = str_at(p, "name").unwrap_or("");
        if name.is_empty() {
            if ports.len() > 1 {
                causes.push(required(&format!("{base}.name")));
            }
        } else {
            if !is_dns_label(name) {
                causes.push(invalid(
                    &format!("{base}.name"),
                    &go_quote(name),
                    crate::error::DNS_LABEL_ERROR,
                ));
            }
            if names.contains(&name) {
                causes.push(duplicate(&format!("{base}.name"), &go_quote(name)));
            } else {
                names.push(name);
            }
        }
        let port = int_at(p, "port").unwrap_or(0);
        if !(1..=65535).contains(&port) {
            causes.push(invalid(
                &format!("{base}.port"),
                &port.to_string(),
                "must be between 1 and 65535, inclusive",
            ));
        }
        const PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];
        if let Some(proto) = str_at(p, "protocol").filter(|p| !PROTOCOLS.contains(p)) {
            causes.push(not_supported(&format!("{base}.protocol"), proto, PROTOCOLS));
        }
        if let Some(Value::Number(n)) = p.get("targetPort")
            && !(1..=65535).contains(&n.as_i64().unwrap_or(0))
        {
            causes.push(invalid(
                &format!("{base}.targetPort"),
                &n.to_string(),
                "must be between 1 and 65535, inclusive",
            ));
        }
    }
    if ty == "ClusterIP" {
        for (i, p) in ports.iter().enumerate() {
            if int_at(p, "nodePort").is_some_and(|n| n != 0) {
                causes.push(forbidden(
                    &format!("spec.ports[{i}].nodePort"),
                    "may not be used when `type` is 'ClusterIP'",
                ));
            }
        }
    }
    // Node ports, then ports, unique per protocol.
    let protocol = |p: &Value| str_at(p, "protocol").unwrap_or("TCP").to_string();
    let mut seen: Vec<(i64, String)> = Vec::new();
    for (i, p) in ports.iter().enumerate() {
        let n = int_at(p, "nodePort").unwrap_or(0);
        if n == 0 {
            continue;
        }
        let key = (n, protocol(p));
        if seen.contains(&key) {
            causes.push(duplicate(
                &format!("spec.ports[{i}].nodePort"),
                &n.to_string(),
            ));
        } else {
            seen.push(key);
        }
    }
    let mut seen: Vec<(i64, String)> = Vec::new();
    for (i, p) in ports.iter().enumerate() {
        let key = (int_at(p, "port").unwrap_or(0), protocol(p));
        if seen.contains(&key) {
            // Go prints the internal ServicePort key it compares: protocol and port.
            let text = format!(
                "{{\"Name\":\"\",\"Protocol\":{},\"AppProtocol\":null,\"Port\":{},\"TargetPort\":0,\"NodePort\":0}}",
                go_json_text(&Value::String(key.1.clone())),
                key.0
            );
            causes.push(duplicate(&format!("spec.ports[{i}]"), &text));
        } else {
            seen.push(key);
        }
    }
    if let Some(sel) = spec.get("selector").and_then(Value::as_object) {
        for (k, v) in sel {
            for msg in qualified_name_errors(k) {
                causes.push(invalid("spec.selector", &go_quote(k), &msg));
            }
            let v = v.as_str().unwrap_or_default();
            for msg in label_value_errors(v) {
                causes.push(invalid("spec.selector", &go_quote(v), &msg));
            }
        }
    }
}

/// `validateHorizontalPodAutoscalerSpec`'s replica bounds, and scaling to zero only on
/// Object or External metrics.
fn hpa(spec: &Value, causes: &mut Vec<StatusCause>) {
    let min = int_at(spec, "minReplicas");
    if let Some(min) = min.filter(|m| *m < 1) {
        causes.push(invalid(
            "spec.minReplicas",
            &min.to_string(),
            "must be greater than or equal to 1",
        ));
    }
    let max = int_at(spec, "maxReplicas").unwrap_or(0);
    if max == 0 {
        causes.push(required_why(
            "spec.maxReplicas",
            "must be set and greater than 0",
        ));
    } else if max < 0 {
        causes.push(invalid(
            "spec.maxReplicas",
            &max.to_string(),
            "must be greater than or equal to 1",
        ));
    }
    if min.is_some_and(|m| max < m) {
        causes.push(invalid(
            "spec.maxReplicas",
            &max.to_string(),
            "must be greater than or equal to `minReplicas`",
        ));
    }
    if min == Some(0)
        && !items(spec, "metrics")
            .iter()
            .any(|m| matches!(str_at(m, "type"), Some("Object" | "External")))
    {
        causes.push(forbidden(
            "spec.metrics",
            "must specify at least one Object or External metric to support scaling to zero replicas",
        ));
    }
}

/// `ValidatePodDisruptionBudgetSpec`: one of minAvailable and maxUnavailable.
fn pdb(spec: &Value, causes: &mut Vec<StatusCause>) {
    let (min, max) = (spec.get("minAvailable"), spec.get("maxUnavailable"));
    if let (Some(min), Some(max)) = (min, max) {
        // Go prints the internal PodDisruptionBudgetSpec struct.
        let text = format!(
            "{{\"MinAvailable\":{},\"Selector\":{},\"MaxUnavailable\":{},\"UnhealthyPodEvictionPolicy\":{}}}",
            go_json_text(min),
            spec.get("selector")
                .map_or_else(|| "null".into(), go_json_text),
            go_json_text(max),
            spec.get("unhealthyPodEvictionPolicy")
                .map_or_else(|| "null".into(), go_json_text),
        );
        causes.push(invalid(
            "spec",
            &text,
            "minAvailable and maxUnavailable cannot be both set",
        ));
    }
}

/// `ValidatePodSpec`'s checks besides containers' names, images and resources.
fn pod_spec(pod: &Value, base: &str, claim_templates: &[&str], causes: &mut Vec<StatusCause>) {
    // Volumes: names, unique.
    let mut volumes: Vec<&str> = Vec::new();
    for (i, v) in items(pod, "volumes").iter().enumerate() {
        let field = format!("{base}.volumes[{i}].name");
        let name = str_at(v, "name").unwrap_or("");
        if name.is_empty() {
            causes.push(required(&field));
        } else if !is_dns_label(name) {
            causes.push(invalid(
                &field,
                &go_quote(name),
                crate::error::DNS_LABEL_ERROR,
            ));
        } else if volumes.contains(&name) {
            causes.push(duplicate(&field, &go_quote(name)));
        } else {
            volumes.push(name);
        }
    }
    volumes.extend(claim_templates);
    let host_users_off = pod.get("hostUsers").and_then(Value::as_bool) == Some(false);
    for key in ["containers", "initContainers"] {
        for (i, c) in items(pod, key).iter().enumerate() {
            let at = format!("{base}.{key}[{i}]");
            container(c, &at, &volumes, causes);
            // `ValidateSecurityContext`: an unmasked /proc needs a user namespace.
            if c.pointer("/securityContext/procMount")
                .and_then(Value::as_str)
                == Some("Unmasked")
                && !host_users_off
            {
                causes.push(invalid(
                    &format!("{at}.securityContext.procMount"),
                    "\"Unmasked\"",
                    "`hostUsers` must be false to use `Unmasked`",
                ));
            }
        }
    }
    host_namespace_rules(pod, base, causes);
    const RESTART: &[&str] = &["Always", "OnFailure", "Never"];
    match str_at(pod, "restartPolicy") {
        Some(p) if !p.is_empty() && !RESTART.contains(&p) => {
            causes.push(not_supported(&format!("{base}.restartPolicy"), p, RESTART))
        }
        _ => {}
    }
    const DNS: &[&str] = &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"];
    match str_at(pod, "dnsPolicy") {
        Some(p) if !p.is_empty() && !DNS.contains(&p) => {
            causes.push(not_supported(&format!("{base}.dnsPolicy"), p, DNS))
        }
        _ => {}
    }
    if let Some(sel) = pod.get("nodeSelector").and_then(Value::as_object) {
        for (k, v) in sel {
            for msg in qualified_name_errors(k) {
                causes.push(invalid(&format!("{base}.nodeSelector"), &go_quote(k), &msg));
            }
            let v = v.as_str().unwrap_or_default();
            for msg in label_value_errors(v) {
                causes.push(invalid(&format!("{base}.nodeSelector"), &go_quote(v), &msg));
            }
        }
    }
    if let Some(user) = pod
        .pointer("/securityContext/runAsUser")
        .and_then(Value::as_i64)
        .filter(|u| !(0..=i64::from(i32::MAX)).contains(u))
    {
        causes.push(invalid(
            &format!("{base}.securityContext.runAsUser"),
            &user.to_string(),
            "must be between 0 and 2147483647, inclusive",
        ));
    }
    if let Some(d) = int_at(pod, "activeDeadlineSeconds").filter(|d| *d < 1) {
        causes.push(invalid(
            &format!("{base}.activeDeadlineSeconds"),
            &d.to_string(),
            "must be between 1 and 2147483647, inclusive",
        ));
    }
    for key in ["hostname", "subdomain"] {
        if let Some(h) = str_at(pod, key).filter(|h| !h.is_empty() && !is_dns_label(h)) {
            causes.push(invalid(
                &format!("{base}.{key}"),
                &go_quote(h),
                crate::error::DNS_LABEL_ERROR,
            ));
        }
    }
    for (i, t) in items(pod, "tolerations").iter().enumerate() {
        let at = format!("{base}.tolerations[{i}]");
        let value = str_at(t, "value").unwrap_or("");
        match str_at(t, "operator").unwrap_or("Equal") {
            "Exists" if !value.is_empty() => causes.push(invalid(
                &format!("{at}.operator"),
                &go_quote(value),
                "value must be empty when `operator` is 'Exists'",
            )),
            "Exists" | "Equal" | "" => {}
            other => causes.push(not_supported(
                &format!("{at}.operator"),
                other,
                &["Equal", "Exists"],
            )),
        }
    }
}

/// `validateResourceQuotaScopes`: known scopes, each fitting every standard resource of
/// `hard` (BestEffort only `pods`; the other pod scopes `pods` and CPU and memory), and
/// no contradicting pair.
fn quota_scopes(spec: &Value, causes: &mut Vec<StatusCause>) {
    let Some(scopes) = spec.get("scopes").and_then(Value::as_array) else {
        return;
    };
    if scopes.is_empty() {
        return;
    }
    const STANDARD: &[&str] = &[
        "cpu",
        "memory",
        "ephemeral-storage",
        "requests.cpu",
        "requests.memory",
        "requests.storage",
        "requests.ephemeral-storage",
        "limits.cpu",
        "limits.memory",
        "limits.ephemeral-storage",
        "pods",
        "resourcequotas",
        "services",
        "replicationcontrollers",
        "secrets",
        "persistentvolumeclaims",
        "configmaps",
        "services.nodeports",
        "services.loadbalancers",
    ];
    const COMPUTE: &[&str] = &[
        "cpu",
        "memory",
        "limits.cpu",
        "limits.memory",
        "requests.cpu",
        "requests.memory",
    ];
    let mut hard: Vec<&str> = spec
        .get("hard")
        .and_then(Value::as_object)
        .map(|h| h.keys().map(String::as_str).collect())
        .unwrap_or_default();
    hard.sort_unstable();
    let text = crate::error::go_json_text(&Value::Array(scopes.clone()));
    let mut push = |why: &str| causes.push(invalid("spec.scopes", &text, why));
    let names: Vec<&str> = scopes.iter().filter_map(Value::as_str).collect();
    for scope in &names {
        let pod_scope = matches!(
            *scope,
            "Terminating"
                | "NotTerminating"
                | "NotBestEffort"
                | "PriorityClass"
                | "CrossNamespacePodAffinity"
        );
        if !pod_scope && *scope != "BestEffort" && *scope != "VolumeAttributesClass" {
            push("unsupported scope");
        }
        for k in &hard {
            let standard = STANDARD.contains(k)
                || k.starts_with("hugepages-")
                || k.starts_with("requests.hugepages-");
            let fits = match *scope {
                "BestEffort" => *k == "pods",
                _ if pod_scope => *k == "pods" || COMPUTE.contains(k),
                _ => true,
            };
            if standard && !fits {
                push("unsupported scope applied to resource");
            }
        }
    }
    for pair in [
        ["BestEffort", "NotBestEffort"],
        ["Terminating", "NotTerminating"],
    ] {
        if pair.iter().all(|p| names.contains(p)) {
            push("conflicting scopes");
        }
    }
}

/// `validateHostNetwork` (a host port must be the container port) and the sysctls a
/// pod sharing the host's network or IPC namespace may not set.
fn host_namespace_rules(pod: &Value, base: &str, causes: &mut Vec<StatusCause>) {
    let host_network = pod.get("hostNetwork").and_then(Value::as_bool) == Some(true);
    let host_ipc = pod.get("hostIPC").and_then(Value::as_bool) == Some(true);
    if host_network {
        for (i, c) in items(pod, "containers").iter().enumerate() {
            for (j, p) in items(c, "ports").iter().enumerate() {
                let host = int_at(p, "hostPort").unwrap_or(0);
                if host != 0 && Some(host) != int_at(p, "containerPort") {
                    causes.push(invalid(
                        &format!("{base}.containers[{i}].ports[{j}].hostPort"),
                        &host.to_string(),
                        "must match `containerPort` when `hostNetwork` is true",
                    ));
                }
            }
        }
    }
    let sysctls = pod
        .pointer("/securityContext/sysctls")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for (i, s) in sysctls.iter().enumerate() {
        let name = str_at(s, "name").unwrap_or("");
        // The namespaced sysctls of the network and IPC namespaces.
        let ipc = name.starts_with("kernel.shm")
            || name.starts_with("kernel.msg")
            || name == "kernel.sem"
            || name.starts_with("fs.mqueue.");
        let why = if host_network && name.starts_with("net.") {
            "may not be specified when 'hostNetwork' is true"
        } else if host_ipc && ipc {
            "may not be specified when 'hostIPC' is true"
        } else {
            continue;
        };
        causes.push(invalid(
            &format!("{base}.securityContext.sysctls[{i}].name"),
            &go_quote(name),
            why,
        ));
    }
}

/// `validateContainerCommon`'s checks of ports, env, mounts, probes and policies.
fn container(c: &Value, at: &str, volumes: &[&str], causes: &mut Vec<StatusCause>) {
    let mut names: Vec<&str> = Vec::new();
    for (j, p) in items(c, "ports").iter().enumerate() {
        let field = format!("{at}.ports[{j}].name");
        if let Some(name) = str_at(p, "name").filter(|n| !n.is_empty()) {
            let errs = port_name_errors(name);
            if !errs.is_empty() {
                for e in errs {
                    causes.push(invalid(&field, &go_quote(name), e));
                }
            } else if names.contains(&name) {
                causes.push(duplicate(&field, &go_quote(name)));
            } else {
                names.push(name);
            }
        }
        const PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];
        if let Some(proto) = str_at(p, "protocol").filter(|p| !PROTOCOLS.contains(p)) {
            causes.push(not_supported(
                &format!("{at}.ports[{j}].protocol"),
                proto,
                PROTOCOLS,
            ));
        }
    }
    for (j, e) in items(c, "env").iter().enumerate() {
        let field = format!("{at}.env[{j}]");
        let name = str_at(e, "name").unwrap_or("");
        if name.is_empty() {
            causes.push(required(&format!("{field}.name")));
        } else if name.contains('=') || !name.bytes().all(|b| (0x20..0x7f).contains(&b)) {
            causes.push(invalid(
                &format!("{field}.name"),
                &go_quote(name),
                "a valid environment variable name must consist only of printable ASCII characters other than '='",
            ));
        }
        if e.get("valueFrom").is_some_and(|v| !v.is_null())
            && str_at(e, "value").is_some_and(|v| !v.is_empty())
        {
            causes.push(invalid(
                &format!("{field}.valueFrom"),
                "\"\"",
                "may not be specified when `value` is not empty",
            ));
        }
    }
    for (j, m) in items(c, "volumeMounts").iter().enumerate() {
        let field = format!("{at}.volumeMounts[{j}]");
        let name = str_at(m, "name").unwrap_or("");
        if name.is_empty() {
            causes.push(required(&format!("{field}.name")));
        } else if !volumes.contains(&name) {
            causes.push(not_found(&format!("{field}.name"), name));
        }
        if str_at(m, "mountPath").is_none_or(str::is_empty) {
            causes.push(required(&format!("{field}.mountPath")));
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        let Some(p) = c.get(probe).filter(|p| !p.is_null()) else {
            continue;
        };
        let field = format!("{at}.{probe}");
        let handlers = ["exec", "httpGet", "tcpSocket", "grpc"]
            .iter()
            .filter(|h| p.get(**h).is_some_and(|v| !v.is_null()))
            .count();
        if handlers == 0 {
            causes.push(required_why(&field, "must specify a handler type"));
        }
        for key in [
            "initialDelaySeconds",
            "timeoutSeconds",
            "periodSeconds",
            "successThreshold",
            "failureThreshold",
        ] {
            non_negative(p, key, &field, causes);
        }
    }
    const PULL: &[&str] = &["Always", "IfNotPresent", "Never"];
    if let Some(p) = str_at(c, "imagePullPolicy").filter(|p| !p.is_empty() && !PULL.contains(p)) {
        causes.push(not_supported(&format!("{at}.imagePullPolicy"), p, PULL));
    }
    const MESSAGE: &[&str] = &["File", "FallbackToLogsOnError"];
    if let Some(p) =
        str_at(c, "terminationMessagePolicy").filter(|p| !p.is_empty() && !MESSAGE.contains(p))
    {
        causes.push(not_supported(
            &format!("{at}.terminationMessagePolicy"),
            p,
            MESSAGE,
        ));
    }
    if let Some(user) = c
        .pointer("/securityContext/runAsUser")
        .and_then(Value::as_i64)
        .filter(|u| !(0..=i64::from(i32::MAX)).contains(u))
    {
        causes.push(invalid(
            &format!("{at}.securityContext.runAsUser"),
            &user.to_string(),
            "must be between 0 and 2147483647, inclusive",
        ));
    }
}

/// `IsValidPortName`.
fn port_name_errors(name: &str) -> Vec<&'static str> {
    let mut errs = Vec::new();
    if name.len() > 15 {
        errs.push("must be no more than 15 characters");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        errs.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)");
    }
    if !name.bytes().any(|b| b.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)");
    }
    if name.contains("--") {
        errs.push("must not contain consecutive hyphens");
    }
    if name.starts_with('-') || name.ends_with('-') {
        errs.push("must not begin or end with a hyphen");
    }
    errs
}

/// The checks reported after a pod spec's (as for a DaemonSet's update strategy, which Go
/// validates after the template), and those of the kinds without one: CronJobs, claims and volumes, ingress paths, network
/// policies, storage classes, RBAC subjects and rules, workload policies, limit ranges,
/// quotas, priority classes, endpoint slices, webhook names and config keys' length.
fn validate_rest(def: &ResourceDef, obj: &Value, causes: &mut Vec<StatusCause>) {
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    match (def.group.as_str(), def.kind.as_str()) {
        ("batch", "CronJob") => cron_job(spec, causes),
        ("batch", "Job") => {
            if let Some(m) =
                str_at(spec, "completionMode").filter(|m| !["NonIndexed", "Indexed"].contains(m))
            {
                causes.push(not_supported(
                    "spec.completionMode",
                    m,
                    &["NonIndexed", "Indexed"],
                ));
            }
        }
        ("", "PersistentVolumeClaim") => {
            claim_modes(spec, causes);
            if spec.pointer("/resources/requests/storage").is_none() {
                causes.push(required("spec.resources[storage]"));
            }
        }
        ("", "PersistentVolume") => {
            if spec
                .get("capacity")
                .and_then(Value::as_object)
                .is_none_or(|m| m.is_empty())
            {
                causes.push(required("spec.capacity"));
                causes.push(StatusCause {
                    reason: "FieldValueNotSupported".into(),
                    message: "Unsupported value: null: supported values: \"storage\"".into(),
                    field: "spec.capacity".into(),
                });
            }
            const NOT_SOURCES: &[&str] = &[
                "accessModes",
                "capacity",
                "claimRef",
                "mountOptions",
                "nodeAffinity",
                "persistentVolumeReclaimPolicy",
                "storageClassName",
                "volumeMode",
                "volumeAttributesClassName",
            ];
            let has_source = spec
                .as_object()
                .is_some_and(|m| m.keys().any(|k| !NOT_SOURCES.contains(&k.as_str())));
            if !has_source {
                causes.push(required_why("spec", "must specify a volume type"));
            }
        }
        ("networking.k8s.io", "Ingress") => ingress_paths(spec, causes),
        ("networking.k8s.io", "NetworkPolicy") => network_policy(spec, causes),
        ("storage.k8s.io", "StorageClass") => {
            if str_at(obj, "provisioner").is_none_or(str::is_empty) {
                causes.push(required("provisioner"));
            }
            const MODES: &[&str] = &["Immediate", "WaitForFirstConsumer"];
            if let Some(m) = str_at(obj, "volumeBindingMode").filter(|m| !MODES.contains(m)) {
                causes.push(not_supported("volumeBindingMode", m, MODES));
            }
        }
        ("rbac.authorization.k8s.io", kind @ ("Role" | "ClusterRole")) => {
            for (i, r) in items(obj, "rules").iter().enumerate() {
                let urls = items(r, "nonResourceURLs");
                if kind == "Role" && !urls.is_empty() {
                    causes.push(invalid(
                        &format!("rules[{i}].nonResourceURLs"),
                        &go_json_text(&Value::Array(urls.to_vec())),
                        "namespaced rules cannot apply to non-resource URLs",
                    ));
                }
                if !items(r, "resources").is_empty() && items(r, "apiGroups").is_empty() {
                    causes.push(required_why(
                        &format!("rules[{i}].apiGroups"),
                        "resource rules must supply at least one api group",
                    ));
                }
            }
        }
        ("rbac.authorization.k8s.io", kind @ ("RoleBinding" | "ClusterRoleBinding")) => {
            let kinds: &[&str] = if kind == "RoleBinding" {
                &["Role", "ClusterRole"]
            } else {
                &["ClusterRole"]
            };
            if let Some(k) = obj
                .pointer("/roleRef/kind")
                .and_then(Value::as_str)
                .filter(|k| !kinds.contains(k))
            {
                causes.push(not_supported("roleRef.kind", k, kinds));
            }
            for (i, s) in items(obj, "subjects").iter().enumerate() {
                match str_at(s, "kind").unwrap_or("") {
                    "ServiceAccount" => {
                        if kind == "ClusterRoleBinding"
                            && str_at(s, "namespace").is_none_or(str::is_empty)
                        {
                            causes.push(required(&format!("subjects[{i}].namespace")));
                        }
                    }
                    "User" | "Group" => {}
                    other => causes.push(not_supported(
                        &format!("subjects[{i}].kind"),
                        other,
                        &["ServiceAccount", "User", "Group"],
                    )),
                }
            }
        }
        ("apps", "StatefulSet") => {
            if let Some(p) = str_at(spec, "podManagementPolicy")
                .filter(|p| !["OrderedReady", "Parallel"].contains(p))
            {
                causes.push(invalid(
                    "spec.podManagementPolicy",
                    &go_quote(p),
                    "must be 'OrderedReady' or 'Parallel'",
                ));
            }
        }
        ("apps", "DaemonSet") => {
            if let Some(s) = spec.get("updateStrategy")
                && let Some(t) =
                    str_at(s, "type").filter(|t| !["RollingUpdate", "OnDelete"].contains(t))
            {
                let rolling = s
                    .get("rollingUpdate")
                    .filter(|r| !r.is_null())
                    .map_or_else(|| "null".into(), go_json_text);
                causes.push(StatusCause {
                    reason: "FieldValueNotSupported".into(),
                    message: format!(
                        "Unsupported value: {{\"Type\":{},\"RollingUpdate\":{rolling}}}: supported values: \"RollingUpdate\", \"OnDelete\"",
                        go_json_text(&Value::String(t.into()))
                    ),
                    field: "spec.updateStrategy".into(),
                });
            }
        }
        ("", "LimitRange") => {
            for (i, l) in items(spec, "limits").iter().enumerate() {
                if str_at(l, "type") == Some("Pod") {
                    for key in ["default", "defaultRequest"] {
                        if l.get(key)
                            .and_then(Value::as_object)
                            .is_some_and(|m| !m.is_empty())
                        {
                            causes.push(forbidden(
                                &format!("spec.limits[{i}].{key}"),
                                "may not be specified when `type` is 'Pod'",
                            ));
                        }
                    }
                }
            }
        }
        ("", "ResourceQuota") => {
            for (k, v) in spec
                .get("hard")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                let text = v.as_str().map_or_else(|| v.to_string(), str::to_string);
                if text.starts_with('-') {
                    causes.push(invalid(
                        &format!("spec.hard[{k}]"),
                        &go_quote(&text),
                        NON_NEGATIVE,
                    ));
                }
            }
            quota_scopes(spec, causes);
        }
        ("scheduling.k8s.io", "PriorityClass") => {
            let name = crate::registry::meta::meta_str(obj, "name").unwrap_or("");
            const SYSTEM: &[&str] = &["system-node-critical", "system-cluster-critical"];
            if name.starts_with("system-") && !SYSTEM.contains(&name) {
                causes.push(forbidden(
                    "metadata.name",
                    &format!("priority class names with 'system-' prefix are reserved for system use only. error: {name} is not a known system priority class"),
                ));
            } else if !SYSTEM.contains(&name)
                && int_at(obj, "value").is_some_and(|v| v > 1_000_000_000)
            {
                causes.push(forbidden(
                    "value",
                    "maximum allowed value of a user defined priority is 1000000000",
                ));
            }
        }
        ("", "ConfigMap" | "Secret") => {
            for f in ["data", "binaryData"] {
                for k in obj
                    .get(f)
                    .and_then(Value::as_object)
                    .into_iter()
                    .flatten()
                    .map(|(k, _)| k)
                {
                    if k.len() > 253 {
                        causes.push(invalid(
                            &format!("{f}[{k}]"),
                            &go_quote(k),
                            "must be no more than 253 characters",
                        ));
                    }
                }
            }
        }
        (
            "admissionregistration.k8s.io",
            "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration",
        ) => {
            for (i, w) in items(obj, "webhooks").iter().enumerate() {
                let name = str_at(w, "name").unwrap_or("");
                let field = format!("webhooks[{i}].name");
                if name.is_empty() {
                    causes.push(required(&field));
                } else if !is_dns_subdomain(name) {
                    causes.push(invalid(
                        &field,
                        &go_quote(name),
                        crate::error::DNS_SUBDOMAIN_ERROR,
                    ));
                } else if name.split('.').count() < 3 {
                    causes.push(invalid(
                        &field,
                        &go_quote(name),
                        "should be a domain with at least three segments separated by dots",
                    ));
                }
                if let Some(url) = w.pointer("/clientConfig/url").and_then(Value::as_str) {
                    webhook_url(url, &format!("webhooks[{i}].clientConfig.url"), causes);
                }
            }
        }
        _ => {}
    }
}

/// kube-apiserver's `ValidateWebhookURL` (forcing https): a webhook's URL has the scheme
/// https and a host, and no user information, fragment or query (which would otherwise
/// reach the `Host` header, the request and the errors shown to the users whose
/// requests call the webhook).
pub(crate) fn webhook_url(url: &str, field: &str, causes: &mut Vec<StatusCause>) {
    const FORM: &str = "; desired format: https://host[/path]";
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let (rest, fragment) = rest.split_once('#').unwrap_or((rest, ""));
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let authority = &rest[..rest.find('/').unwrap_or(rest.len())];
    let (user, host) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    if scheme != "https" {
        causes.push(invalid(
            field,
            &go_quote(scheme),
            &format!("'https' is the only allowed URL scheme{FORM}"),
        ));
    }
    if host.is_empty() {
        causes.push(invalid(
            field,
            "\"\"",
            &format!("host must be specified{FORM}"),
        ));
    }
    if let Some(user) = user {
        causes.push(invalid(
            field,
            &go_quote(user),
            "user information is not permitted in the URL",
        ));
    }
    if !fragment.is_empty() {
        causes.push(invalid(
            field,
            &go_quote(fragment),
            "fragments are not permitted in the URL",
        ));
    }
    if !query.is_empty() {
        causes.push(invalid(
            field,
            &go_quote(query),
            "query parameters are not permitted in the URL",
        ));
    }
}

/// A claim's access modes: at least one, each known, ReadWriteOncePod alone.
fn claim_modes(spec: &Value, causes: &mut Vec<StatusCause>) {
    const MODES: &[&str] = &[
        "ReadOnlyMany",
        "ReadWriteMany",
        "ReadWriteOnce",
        "ReadWriteOncePod",
    ];
    let modes = items(spec, "accessModes");
    if modes.is_empty() {
        causes.push(required_why(
            "spec.accessModes",
            "at least 1 access mode is required",
        ));
    }
    for m in modes.iter().filter_map(Value::as_str) {
        if !MODES.contains(&m) {
            causes.push(not_supported("spec.accessModes", m, MODES));
        }
    }
    if modes.len() > 1 && modes.iter().any(|m| m == "ReadWriteOncePod") {
        causes.push(forbidden(
            "spec.accessModes",
            "may not use ReadWriteOncePod with other access modes",
        ));
    }
}

/// An Ingress's paths (type required, absolute for Prefix and Exact) and backends (a
/// service port by name or number, not both).
fn ingress_paths(spec: &Value, causes: &mut Vec<StatusCause>) {
    let backend = |b: &Value, field: String, causes: &mut Vec<StatusCause>| {
        if let Some(port) = b.pointer("/service/port")
            && port.get("name").is_some_and(|n| n != "")
            && port.get("number").is_some_and(|n| n != 0)
        {
            causes.push(invalid(
                &field,
                "\"\"",
                "cannot set both port name & port number",
            ));
        }
    };
    if let Some(b) = spec.get("defaultBackend") {
        backend(b, "spec.defaultBackend".into(), causes);
    }
    for (i, rule) in items(spec, "rules").iter().enumerate() {
        let Some(http) = rule.get("http") else {
            continue;
        };
        for (j, p) in items(http, "paths").iter().enumerate() {
            let at = format!("spec.rules[{i}].http.paths[{j}]");
            match str_at(p, "pathType") {
                None | Some("") => causes.push(required_why(
                    &format!("{at}.pathType"),
                    "pathType must be specified",
                )),
                Some("Prefix" | "Exact") => {
                    let path = str_at(p, "path").unwrap_or("");
                    if !path.starts_with('/') {
                        causes.push(invalid(
                            &format!("{at}.path"),
                            &go_quote(path),
                            "must be an absolute path",
                        ));
                    }
                }
                Some(_) => {}
            }
            if let Some(b) = p.get("backend") {
                backend(b, format!("{at}.backend"), causes);
            }
        }
    }
}

/// A NetworkPolicy's policy types and numbered ports.
fn network_policy(spec: &Value, causes: &mut Vec<StatusCause>) {
    for dir in ["ingress", "egress"] {
        for (i, rule) in items(spec, dir).iter().enumerate() {
            for (j, p) in items(rule, "ports").iter().enumerate() {
                if let Some(n) = p.get("port").and_then(Value::as_i64)
                    && !(1..=65535).contains(&n)
                {
                    causes.push(invalid(
                        &format!("spec.{dir}[{i}].ports[{j}].port"),
                        &n.to_string(),
                        "must be between 1 and 65535, inclusive",
                    ));
                }
            }
        }
    }
    for (i, t) in items(spec, "policyTypes").iter().enumerate() {
        let t = t.as_str().unwrap_or("");
        if !["Ingress", "Egress"].contains(&t) {
            causes.push(not_supported(
                &format!("spec.policyTypes[{i}]"),
                t,
                &["Ingress", "Egress"],
            ));
        }
    }
}

/// A CronJob's schedule, time zone, concurrency policy and history limits.
fn cron_job(spec: &Value, causes: &mut Vec<StatusCause>) {
    let schedule = str_at(spec, "schedule").unwrap_or("");
    if schedule.is_empty() {
        causes.push(required("spec.schedule"));
    } else if schedule.contains("TZ") {
        causes.push(invalid(
            "spec.schedule",
            &go_quote(schedule),
            "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
        ));
    } else if let Err(why) = crate::registry::cron::parse(schedule) {
        causes.push(invalid("spec.schedule", &go_quote(schedule), &why));
    }
    if let Some(tz) = str_at(spec, "timeZone")
        && !crate::registry::cron::known_time_zone(tz)
    {
        causes.push(invalid(
            "spec.timeZone",
            &go_quote(tz),
            &format!("unknown time zone {tz}"),
        ));
    }
    const POLICIES: &[&str] = &["Allow", "Forbid", "Replace"];
    if let Some(p) = str_at(spec, "concurrencyPolicy").filter(|p| !POLICIES.contains(p)) {
        causes.push(not_supported("spec.concurrencyPolicy", p, POLICIES));
    }
    for key in [
        "startingDeadlineSeconds",
        "successfulJobsHistoryLimit",
        "failedJobsHistoryLimit",
    ] {
        non_negative(spec, key, "spec", causes);
    }
}

/// Status writes (`Validate*StatusUpdate`): non-negative counts, counts within
/// `status.replicas`, and a Job's counters and ready pods.
pub(crate) fn validate_status(
    def: &ResourceDef,
    old: &Value,
    obj: &Value,
    causes: &mut Vec<StatusCause>,
) {
    let status = obj.get("status").unwrap_or(&Value::Null);
    let n = |k: &str| int_at(status, k).unwrap_or(0);
    let nonneg = |keys: &[&str], causes: &mut Vec<StatusCause>| {
        for k in keys {
            non_negative(status, k, "status", causes);
        }
    };
    // `cannot be greater than status.replicas`, then available within ready.
    let within = |keys: &[&str], ready_msg: &str, causes: &mut Vec<StatusCause>| {
        for k in keys {
            if n(k) > n("replicas") {
                causes.push(invalid(
                    &format!("status.{k}"),
                    &n(k).to_string(),
                    "cannot be greater than status.replicas",
                ));
            }
        }
        if n("availableReplicas") > n("readyReplicas") {
            causes.push(invalid(
                "status.availableReplicas",
                &n("availableReplicas").to_string(),
                ready_msg,
            ));
        }
    };
    match (def.group.as_str(), def.kind.as_str()) {
        ("apps", "Deployment") => {
            nonneg(
                &[
                    "observedGeneration",
                    "replicas",
                    "updatedReplicas",
                    "readyReplicas",
                    "availableReplicas",
                    "unavailableReplicas",
                    "terminatingReplicas",
                    "collisionCount",
                ],
                causes,
            );
            within(
                &["updatedReplicas", "readyReplicas", "availableReplicas"],
                "cannot be greater than readyReplicas",
                causes,
            );
        }
        ("apps", "ReplicaSet") | ("", "ReplicationController") => {
            nonneg(
                &[
                    "replicas",
                    "fullyLabeledReplicas",
                    "readyReplicas",
                    "availableReplicas",
                    "observedGeneration",
                    "terminatingReplicas",
                ],
                causes,
            );
            within(
                &["fullyLabeledReplicas", "readyReplicas", "availableReplicas"],
                "cannot be greater than readyReplicas",
                causes,
            );
        }
        ("apps", "StatefulSet") => {
            nonneg(
                &[
                    "replicas",
                    "readyReplicas",
                    "currentReplicas",
                    "updatedReplicas",
                    "availableReplicas",
                    "observedGeneration",
                    "collisionCount",
                ],
                causes,
            );
            within(
                &[
                    "readyReplicas",
                    "currentReplicas",
                    "updatedReplicas",
                    "availableReplicas",
                ],
                "cannot be greater than status.readyReplicas",
                causes,
            );
        }
        ("apps", "DaemonSet") => {
            nonneg(
                &[
                    "currentNumberScheduled",
                    "numberMisscheduled",
                    "desiredNumberScheduled",
                    "numberReady",
                    "observedGeneration",
                    "updatedNumberScheduled",
                    "numberAvailable",
                    "numberUnavailable",
                    "collisionCount",
                ],
                causes,
            );
        }
        ("batch", "Job") => {
            nonneg(
                &["active", "succeeded", "failed", "ready", "terminating"],
                causes,
            );
            if let Some(ready) = int_at(status, "ready")
                && ready > n("active")
            {
                causes.push(invalid(
                    "status.ready",
                    &ready.to_string(),
                    "cannot set more ready pods than active",
                ));
            }
            let was = |k: &str| {
                old.pointer(&format!("/status/{k}"))
                    .and_then(Value::as_i64)
                    .unwrap_or(0)
            };
            for (k, what) in [("failed", "failed"), ("succeeded", "succeeded")] {
                if n(k) < was(k) {
                    causes.push(invalid(
                        &format!("status.{k}"),
                        &n(k).to_string(),
                        &format!("cannot decrease the {what} counter"),
                    ));
                }
            }
        }
        ("resource.k8s.io", "ResourceClaim") => {
            crate::registry::dra::claim_status(old, obj, causes)
        }
        _ => {}
    }
}

/// `ValidateMutatingAdmissionPolicy`'s structure: match constraints, each mutation's patch
/// type and the one expression that goes with it, the reinvocation policy. (Expressions
/// are not compiled here.)
fn mutating_policy(spec: &Value, causes: &mut Vec<StatusCause>) {
    const FAILURE: &[&str] = &["Fail", "Ignore"];
    if let Some(f) = str_at(spec, "failurePolicy").filter(|f| !FAILURE.contains(f)) {
        causes.push(not_supported("spec.failurePolicy", f, FAILURE));
    }
    if spec.get("matchConstraints").is_none_or(Value::is_null) {
        causes.push(required("spec.matchConstraints"));
    }
    const TYPES: &[&str] = &["ApplyConfiguration", "JSONPatch"];
    for (i, m) in items(spec, "mutations").iter().enumerate() {
        let at = format!("spec.mutations[{i}]");
        let set = |k: &str| m.get(k).is_some_and(|v| !v.is_null());
        match str_at(m, "patchType").unwrap_or("") {
            "" => causes.push(required(&format!("{at}.patchType"))),
            t @ ("JSONPatch" | "ApplyConfiguration") => {
                let (mine, other) = if t == "JSONPatch" {
                    ("jsonPatch", "applyConfiguration")
                } else {
                    ("applyConfiguration", "jsonPatch")
                };
                if !set(mine) {
                    causes.push(required_why(
                        &format!("{at}.{mine}"),
                        &format!("must be specified when patchType is {t}"),
                    ));
                }
                if set(other) {
                    causes.push(invalid(
                        &format!("{at}.{other}"),
                        &go_quote(&format!("{{{other}}}")),
                        &format!("must not be specified when patchType is {t}"),
                    ));
                }
            }
            t => causes.push(not_supported(&format!("{at}.patchType"), t, TYPES)),
        }
    }
    const REINVOCATION: &[&str] = &["IfNeeded", "Never"];
    match str_at(spec, "reinvocationPolicy").unwrap_or("") {
        "" => causes.push(required("spec.reinvocationPolicy")),
        r if REINVOCATION.contains(&r) => {}
        r => causes.push(not_supported("spec.reinvocationPolicy", r, REINVOCATION)),
    }
}

/// `ValidateEndpointSlice` (without the address checks): the address type, the ports'
/// names (a DNS label when set, unique) and protocols, and each endpoint's address
/// count.
fn endpoint_slice(obj: &Value, causes: &mut Vec<StatusCause>) {
    const TYPES: [&str; 3] = ["FQDN", "IPv4", "IPv6"];
    match str_at(obj, "addressType") {
        None | Some("") => causes.push(required("addressType")),
        Some(t) if !TYPES.contains(&t) => causes.push(not_supported("addressType", t, &TYPES)),
        Some(_) => {}
    }
    let mut ports = items(obj, "ports");
    if ports.len() > 20000 {
        causes.push(too_many("ports", ports.len(), 20000));
        ports = &[];
    }
    let mut names: Vec<&str> = Vec::new();
    for (i, p) in ports.iter().enumerate() {
        let name = str_at(p, "name").unwrap_or("");
        if !name.is_empty() && !is_dns_label(name) {
            causes.push(invalid(
                &format!("ports[{i}].name"),
                &go_quote(name),
                crate::error::DNS_LABEL_ERROR,
            ));
        }
        if names.contains(&name) {
            causes.push(duplicate(&format!("ports[{i}].name"), &go_quote(name)));
        } else {
            names.push(name);
        }
        match str_at(p, "protocol") {
            None => causes.push(required(&format!("ports[{i}].protocol"))),
            Some(proto) if !["SCTP", "TCP", "UDP"].contains(&proto) => causes.push(not_supported(
                &format!("ports[{i}].protocol"),
                proto,
                &["SCTP", "TCP", "UDP"],
            )),
            Some(_) => {}
        }
    }
    let endpoints = items(obj, "endpoints");
    if endpoints.len() > 1000 {
        causes.push(too_many("endpoints", endpoints.len(), 1000));
    } else {
        for (i, e) in endpoints.iter().enumerate() {
            let n = items(e, "addresses").len();
            let field = format!("endpoints[{i}].addresses");
            if n == 0 {
                causes.push(required_why(&field, "must contain at least 1 address"));
            } else if n > 100 {
                causes.push(too_many(&field, n, 100));
            }
        }
    }
}

/// `Too many: 3: must have at most 2 items`.
fn too_many(field: &str, n: usize, max: usize) -> StatusCause {
    StatusCause {
        reason: "FieldValueTooMany".into(),
        message: format!("Too many: {n}: must have at most {max} items"),
        field: field.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_names_as_go_checks_them() {
        assert!(port_name_errors("http").is_empty());
        assert!(port_name_errors("http-2").is_empty());
        assert_eq!(
            port_name_errors("HTTP_PORT"),
            vec![
                "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
                "must contain at least one letter (a-z)"
            ]
        );
        assert_eq!(port_name_errors("8080").len(), 1);
        assert_eq!(
            port_name_errors("a--b"),
            vec!["must not contain consecutive hyphens"]
        );
        assert_eq!(
            port_name_errors("-ab"),
            vec!["must not begin or end with a hyphen"]
        );
        assert_eq!(
            port_name_errors("abcdefghijklmnop"),
            vec!["must be no more than 15 characters"]
        );
    }
}
