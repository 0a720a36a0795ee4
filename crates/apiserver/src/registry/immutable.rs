//! What an update of a built-in object may not change, as kube-apiserver's
//! `Validate<Kind>Update` functions check it (v1.36): an immutable ConfigMap's and
//! Secret's data, a Secret's type, workload selectors, a StatefulSet's spec outside its
//! mutable fields, a binding's roleRef, a StorageClass's parameters and provisioner, a
//! pod's spec outside its mutable fields, a Service's cluster IPs, a Job's template and
//! policies, a PersistentVolumeClaim's spec. Scalars print as Go prints them (strings
//! quoted), structured values as Go's JSON.

use crate::error::{
    forbidden_cause as forbidden, go_json_text as go_json, invalid_cause as invalid,
};
use crate::registry::ResourceDef;
use kubewright_core::StatusCause;
use serde_json::{Map, Value};

/// The field errors of updating `old` to `new` (the main resource, after defaulting).
pub(crate) fn validate_update(def: &ResourceDef, old: &Value, new: &Value) -> Vec<StatusCause> {
    let mut causes = Vec::new();
    match (def.group.as_str(), def.plural.as_str()) {
        ("", "configmaps") => frozen(old, new, &["data", "binaryData"], &mut causes),
        ("resource.k8s.io", plural) | ("storage.k8s.io", plural @ "volumeattributesclasses") => {
            crate::registry::dra::validate_update(plural, old, new, &mut causes)
        }
        ("", "secrets") => {
            if old.get("type") != new.get("type") {
                causes.push(immutable("type", &go_value(new.get("type"))));
            }
            frozen(old, new, &["data"], &mut causes);
        }
        ("", "pods") => pod(old, new, &mut causes),
        ("", "services") => cluster_ips(old, new, &mut causes),
        ("batch", "jobs") => job(old, new, &mut causes),
        ("", "persistentvolumeclaims") => claim(old, new, &mut causes),
        ("apps", "deployments" | "replicasets" | "daemonsets") => {
            let (o, n) = (old.pointer("/spec/selector"), new.pointer("/spec/selector"));
            if o != n {
                causes.push(immutable("spec.selector", &label_selector(n)));
            }
        }
        ("apps", "statefulsets") => {
            const MUTABLE: [&str; 7] = [
                "replicas",
                "ordinals",
                "template",
                "updateStrategy",
                "revisionHistoryLimit",
                "persistentVolumeClaimRetentionPolicy",
                "minReadySeconds",
            ];
            if without(old.get("spec"), &MUTABLE) != without(new.get("spec"), &MUTABLE) {
                causes.push(forbidden(
                    "spec",
                    "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
                ));
            }
        }
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings")
            if old.get("roleRef") != new.get("roleRef") =>
        {
            // The internal RoleRef has no JSON tags: its Go field names print.
            let r = new.get("roleRef").unwrap_or(&Value::Null);
            let f = |k: &str| go_json(r.get(k).unwrap_or(&Value::String(String::new())));
            causes.push(invalid(
                "roleRef",
                &format!(
                    "{{\"APIGroup\":{},\"Kind\":{},\"Name\":{}}}",
                    f("apiGroup"),
                    f("kind"),
                    f("name")
                ),
                "cannot change roleRef",
            ));
        }
        ("storage.k8s.io", "storageclasses") => {
            if old.get("parameters") != new.get("parameters") {
                causes.push(immutable(
                    "parameters",
                    &string_map(new.get("parameters").and_then(Value::as_object)),
                ));
            }
            for f in ["provisioner", "reclaimPolicy", "volumeBindingMode"] {
                if old.get(f) != new.get(f) {
                    causes.push(immutable(f, &go_value(new.get(f))));
                }
            }
        }
        _ => {}
    }
    causes
}

/// ConfigMap and Secret: with `immutable: true`, the flag and the data stay.
fn frozen(old: &Value, new: &Value, data: &[&str], causes: &mut Vec<StatusCause>) {
    if old.get("immutable") != Some(&Value::Bool(true)) {
        return;
    }
    const WHY: &str = "field is immutable when `immutable` is set";
    if new.get("immutable") != Some(&Value::Bool(true)) {
        causes.push(forbidden("immutable", WHY));
    }
    for f in data {
        if old.get(*f) != new.get(*f) {
            causes.push(forbidden(f, WHY));
        }
    }
}

/// `ValidatePersistentVolumeClaimUpdate`: the spec stays, except a volume name set once,
/// a storage class set where there was none, and a bound claim's storage request (not
/// below its capacity) and volume attributes class.
fn claim(old: &Value, new: &Value, causes: &mut Vec<StatusCause>) {
    let (Some(os), Some(ns)) = (old.get("spec"), new.get("spec")) else {
        return;
    };
    let mut before = os.clone();
    let mut after = ns.clone();
    if os
        .get("volumeName")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        set(&mut before, "volumeName", ns.get("volumeName"));
    }
    let beta = "/metadata/annotations/volume.beta.kubernetes.io~1storage-class";
    if os.get("storageClassName").is_none() && old.pointer(beta).is_none() {
        set(&mut after, "storageClassName", os.get("storageClassName"));
    }
    let storage = "/resources/requests/storage";
    if new.pointer("/status/phase").and_then(Value::as_str) == Some("Bound") {
        if let (Some(a), Some(o)) = (after.pointer_mut(storage), os.pointer(storage)) {
            *a = o.clone();
        }
        set(
            &mut after,
            "volumeAttributesClassName",
            os.get("volumeAttributesClassName"),
        );
    }
    if after != before {
        causes.push(forbidden(
            "spec",
            &format!(
                "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims\n{}",
                spec_diff(&before, &after)
            ),
        ));
    }
    let size = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .and_then(|q| q.parse::<kubewright_core::quantity::Quantity>().ok())
            .unwrap_or_default()
    };
    let (was, now) = (size(os.pointer(storage)), size(ns.pointer(storage)));
    // RecoverVolumeExpansionFailure (on): smaller, but above the capacity reached.
    if now < was && now <= size(old.pointer("/status/capacity/storage")) {
        causes.push(forbidden(
            "spec.resources.requests.storage",
            "field can not be less than status.capacity",
        ));
    }
}

/// `ValidateJobSpecUpdate`: the selector, the completion mode and policies stay; the pod
/// template stays unless the Job is suspended, and even then only the scheduling
/// directives (if it never ran or is suspended) and the containers' resources change.
fn job(old: &Value, new: &Value, causes: &mut Vec<StatusCause>) {
    if old.pointer("/spec/selector") != new.pointer("/spec/selector") {
        causes.push(immutable(
            "spec.selector",
            &label_selector(new.pointer("/spec/selector")),
        ));
    }
    let indexed = new.pointer("/spec/completionMode").and_then(Value::as_str) == Some("Indexed");
    if !indexed && old.pointer("/spec/completions") != new.pointer("/spec/completions") {
        causes.push(immutable(
            "spec.completions",
            &go_value(new.pointer("/spec/completions")),
        ));
    }
    let suspended = old.pointer("/spec/suspend") == Some(&Value::Bool(true));
    let never_started = old.pointer("/status/startTime").is_none();
    let suspended_condition = old
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Suspended" && c["status"] == "True")
        });
    let idle = old
        .pointer("/status/active")
        .and_then(Value::as_i64)
        .unwrap_or(0)
        == 0;
    // `shouldAllowMutablePodTemplate`, with its feature gates on in v1.36.
    let mutable = suspended && idle && (never_started || suspended_condition);
    let (ot, nt) = (
        old.pointer("/spec/template")
            .cloned()
            .unwrap_or(Value::Null),
        new.pointer("/spec/template")
            .cloned()
            .unwrap_or(Value::Null),
    );
    if !mutable {
        if ot != nt {
            causes.push(immutable("spec.template", &go_json(&nt)));
        }
    } else {
        // The scheduling directives and the containers' resources taken from the new
        // template; the rest of its spec must not change.
        let mut munged = ot.pointer("/spec").cloned().unwrap_or(Value::Null);
        let ns = nt.pointer("/spec").cloned().unwrap_or(Value::Null);
        for k in ["nodeSelector", "tolerations", "schedulingGates"] {
            set(&mut munged, k, ns.get(k));
        }
        let node_affinity = ns.pointer("/affinity/nodeAffinity").cloned();
        match (ns.get("affinity"), munged.get_mut("affinity")) {
            (None, Some(a)) => {
                if let Some(a) = a.as_object_mut() {
                    a.remove("nodeAffinity");
                }
                if a.as_object().is_some_and(Map::is_empty) {
                    set(&mut munged, "affinity", None);
                }
            }
            (Some(_), None) => {
                let mut a = Map::new();
                if let Some(n) = node_affinity {
                    a.insert("nodeAffinity".into(), n);
                }
                set(&mut munged, "affinity", Some(&Value::Object(a)));
            }
            (Some(_), Some(a)) => set(a, "nodeAffinity", node_affinity.as_ref()),
            (None, None) => {}
        }
        for k in ["containers", "initContainers"] {
            let new_list = crate::registry::resources::items(&ns, k);
            if let Some(list) = munged.get_mut(k).and_then(Value::as_array_mut)
                && list.len() == new_list.len()
            {
                for (o, n) in list.iter_mut().zip(new_list) {
                    if o.get("name") == n.get("name") {
                        set(o, "resources", n.get("resources"));
                    }
                }
            }
        }
        if munged != ns {
            causes.push(immutable("spec.template.spec", &go_json(&ns)));
        }
    }
    for (f, p) in [
        ("spec.completionMode", "/spec/completionMode"),
        ("spec.podFailurePolicy", "/spec/podFailurePolicy"),
        ("spec.backoffLimitPerIndex", "/spec/backoffLimitPerIndex"),
        ("spec.managedBy", "/spec/managedBy"),
        ("spec.successPolicy", "/spec/successPolicy"),
    ] {
        if old.pointer(p) != new.pointer(p) {
            causes.push(immutable(f, &go_value(new.pointer(p))));
        }
    }
}

/// `validateUpgradeDowngradeClusterIPs`: the cluster IPs stay, unless either side is an
/// ExternalName or both are headless; a secondary IP may be added or removed.
fn cluster_ips(old: &Value, new: &Value, causes: &mut Vec<StatusCause>) {
    let ty = |o: &Value| {
        o.pointer("/spec/type")
            .and_then(Value::as_str)
            .unwrap_or("ClusterIP")
            .to_string()
    };
    if ty(old) == "ExternalName" || ty(new) == "ExternalName" {
        return;
    }
    let ips = |o: &Value| -> Vec<Value> {
        o.pointer("/spec/clusterIPs")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let (o, n) = (ips(old), ips(new));
    let headless = |ips: &[Value]| ips.first().and_then(Value::as_str) == Some("None");
    if headless(&o) && headless(&n) {
        return;
    }
    let shown = go_json(&Value::Array(n.clone()));
    let changed = |i: usize| {
        invalid(
            &format!("spec.clusterIPs[{i}]"),
            &shown,
            "may not change once set",
        )
    };
    if o.len() == n.len() {
        for i in 0..o.len() {
            if o[i] != n[i] {
                causes.push(changed(i));
            }
        }
    } else if n.is_empty() {
        causes.push(invalid(
            "spec.clusterIPs[0]",
            &shown,
            "primary clusterIP can not be unset",
        ));
    } else if !o.is_empty() && o[0] != n[0] {
        causes.push(changed(0));
    }
}

/// The spec fields a pod update may change (`updatablePodSpecFields`).
const POD_UPDATABLE: &str = "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// `ValidatePodUpdate`: only images, a lower active deadline, added tolerations (or a
/// changed tolerationSeconds), removed scheduling gates; for a gated pod, its node
/// selector and node affinity too.
fn pod(old: &Value, new: &Value, causes: &mut Vec<StatusCause>) {
    let empty = Value::Object(Map::new());
    let (os, ns) = (
        old.get("spec").unwrap_or(&empty),
        new.get("spec").unwrap_or(&empty),
    );
    if os == ns {
        return;
    }
    let list = crate::registry::resources::items;
    for k in ["containers", "initContainers"] {
        if list(os, k).len() != list(ns, k).len() {
            causes.push(forbidden(
                &format!("spec.{k}"),
                "pod updates may not add or remove containers",
            ));
            return;
        }
    }
    let deadline = |s: &Value| s.get("activeDeadlineSeconds").and_then(Value::as_i64);
    match (deadline(os), deadline(ns)) {
        (_, Some(n)) if !(0..=i64::from(i32::MAX)).contains(&n) => {
            causes.push(invalid(
                "spec.activeDeadlineSeconds",
                &n.to_string(),
                "must be between 0 and 2147483647, inclusive",
            ));
            return;
        }
        (Some(o), Some(n)) if o < n => {
            causes.push(invalid(
                "spec.activeDeadlineSeconds",
                &n.to_string(),
                "must be less than or equal to previous value",
            ));
            return;
        }
        (Some(_), None) => causes.push(invalid(
            "spec.activeDeadlineSeconds",
            "null",
            "must not update from a positive integer to nil value",
        )),
        _ => {}
    }
    let new_tolerations = list(ns, "tolerations");
    let kept = list(os, "tolerations").iter().all(|o| {
        new_tolerations.iter().any(|n| {
            without(Some(o), &["tolerationSeconds"]) == without(Some(n), &["tolerationSeconds"])
        })
    });
    if !kept {
        causes.push(forbidden(
            "spec.tolerations",
            "existing toleration can not be modified except its tolerationSeconds",
        ));
        return;
    }
    let old_gates = list(os, "schedulingGates");
    if list(ns, "schedulingGates")
        .iter()
        .any(|g| !old_gates.contains(g))
    {
        causes.push(forbidden(
            "spec.schedulingGates",
            "only deletion is allowed, but found new scheduling gate",
        ));
    }
    // The spec with what may change taken from the old one.
    let mut munged = ns.clone();
    for k in ["containers", "initContainers"] {
        if let Some(cs) = munged.get_mut(k).and_then(Value::as_array_mut) {
            for (c, o) in cs.iter_mut().zip(list(os, k)) {
                set(c, "image", o.get("image"));
            }
        }
    }
    for k in ["activeDeadlineSeconds", "schedulingGates", "tolerations"] {
        set(&mut munged, k, os.get(k));
    }
    let grace = |s: &Value| {
        s.get("terminationGracePeriodSeconds")
            .and_then(Value::as_i64)
    };
    if grace(os).is_some_and(|g| g < 0) && grace(&munged) == Some(1) {
        set(
            &mut munged,
            "terminationGracePeriodSeconds",
            os.get("terminationGracePeriodSeconds"),
        );
    }
    if !old_gates.is_empty() {
        // A gated pod's node selector and node affinity may still change.
        set(&mut munged, "nodeSelector", os.get("nodeSelector"));
        let affinity = os.pointer("/affinity/nodeAffinity").cloned();
        if let Some(a) = munged.get_mut("affinity").and_then(Value::as_object_mut) {
            match affinity {
                Some(n) => a.insert("nodeAffinity".into(), n),
                None => a.remove("nodeAffinity"),
            };
            if a.is_empty() && os.get("affinity").is_none() {
                set(&mut munged, "affinity", None);
            }
        }
    }
    if &munged != os {
        causes.push(forbidden(
            "spec",
            &format!(
                "pod updates may not change fields other than {POD_UPDATABLE}\n{}",
                spec_diff(os, &munged)
            ),
        ));
    }
}

/// The changed top-level spec fields, a `-` line with the old value and a `+` line with
/// the new (kube-apiserver appends a unified diff of the internal Go PodSpec's JSON,
/// which names fields as Go does and shows three lines of context).
fn spec_diff(old: &Value, new: &Value) -> String {
    let empty = Map::new();
    let (o, n) = (
        old.as_object().unwrap_or(&empty),
        new.as_object().unwrap_or(&empty),
    );
    let mut out = String::new();
    for k in crate::registry::fields::member_names(o, n) {
        if o.get(k) != n.get(k) {
            for (sign, v) in [("-", o.get(k)), ("+", n.get(k))] {
                let v = v.map_or_else(|| "null".into(), go_json);
                out.push_str(&format!(
                    "{sign} {}: {v},\n",
                    go_json(&Value::String(k.clone()))
                ));
            }
        }
    }
    out
}

/// `obj` without the `skip` members (absent when `obj` is).
fn without(obj: Option<&Value>, skip: &[&str]) -> Option<Value> {
    let mut v = obj?.clone();
    if let Some(o) = v.as_object_mut() {
        for k in skip {
            o.remove(*k);
        }
    }
    Some(v)
}

/// Sets `obj[key]` to `value`, or removes it.
fn set(obj: &mut Value, key: &str, value: Option<&Value>) {
    if let Some(o) = obj.as_object_mut() {
        match value {
            Some(v) => o.insert(key.to_string(), v.clone()),
            None => o.remove(key),
        };
    }
}

/// `ValidateImmutableField`.
fn immutable(field: &str, value: &str) -> StatusCause {
    invalid(field, value, "field is immutable")
}

/// A value as a field error prints it: strings (and named string types) quoted as
/// Go's `%q`, `null` when absent, anything else as Go's JSON.
pub(crate) fn go_value(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "null".into(),
        Some(Value::String(s)) => crate::error::go_quote(s),
        Some(v) => go_json(v),
    }
}

/// A `map[string]string` as a field error prints it (`null` when unset).
fn string_map(m: Option<&Map<String, Value>>) -> String {
    m.map_or_else(|| "null".into(), |m| go_json(&Value::Object(m.clone())))
}

/// A `*metav1.LabelSelector` as a field error prints it: its JSON, members in the Go
/// struct's order, empty ones left out (`null` when unset).
fn label_selector(sel: Option<&Value>) -> String {
    let Some(sel) = sel.filter(|s| !s.is_null()) else {
        return "null".into();
    };
    let mut members = Vec::new();
    if let Some(m) = sel
        .get("matchLabels")
        .and_then(Value::as_object)
        .filter(|m| !m.is_empty())
    {
        members.push(format!("\"matchLabels\":{}", string_map(Some(m))));
    }
    if let Some(list) = sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .filter(|l| !l.is_empty())
    {
        let items: Vec<String> = list
            .iter()
            .map(|r| {
                let mut fields = Vec::new();
                for k in ["key", "operator"] {
                    fields.push(format!(
                        "\"{k}\":{}",
                        go_json(r.get(k).unwrap_or(&Value::String(String::new())))
                    ));
                }
                if let Some(vs) = r
                    .get("values")
                    .and_then(Value::as_array)
                    .filter(|v| !v.is_empty())
                {
                    fields.push(format!("\"values\":{}", go_json(&Value::Array(vs.clone()))));
                }
                format!("{{{}}}", fields.join(","))
            })
            .collect();
        members.push(format!("\"matchExpressions\":[{}]", items.join(",")));
    }
    format!("{{{}}}", members.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selectors_print_as_go_json() {
        let s = json!({"matchLabels": {"tier": "x", "app": "web"},
            "matchExpressions": [{"key": "k", "operator": "In", "values": ["a", "b"]}]});
        assert_eq!(
            label_selector(Some(&s)),
            r#"{"matchLabels":{"app":"web","tier":"x"},"matchExpressions":[{"key":"k","operator":"In","values":["a","b"]}]}"#
        );
        assert_eq!(
            label_selector(Some(
                &json!({"matchExpressions": [{"key": "k", "operator": "Exists"}]})
            )),
            r#"{"matchExpressions":[{"key":"k","operator":"Exists"}]}"#
        );
        assert_eq!(
            go_json(&json!({"a": "<&>"})),
            r#"{"a":"\u003c\u0026\u003e"}"#
        );
    }

    #[test]
    fn a_pod_may_change_images_and_add_tolerations_only() {
        let old = json!({"spec": {"containers": [{"name": "c", "image": "a"}],
            "tolerations": [{"key": "k", "operator": "Exists", "tolerationSeconds": 5}]}});
        let mut ok = old.clone();
        ok["spec"]["containers"][0]["image"] = json!("b");
        ok["spec"]["tolerations"] = json!([{"key": "k", "operator": "Exists", "tolerationSeconds": 3},
            {"key": "j", "operator": "Exists"}]);
        let mut c = Vec::new();
        pod(&old, &ok, &mut c);
        assert!(c.is_empty(), "{c:?}");
        let mut bad = old.clone();
        bad["spec"]["hostname"] = json!("x");
        pod(&old, &bad, &mut c);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].field, "spec");
        assert!(c[0].message.starts_with(
            "Forbidden: pod updates may not change fields other than `spec.containers[*].image`"
        ));
        let mut fewer = old.clone();
        fewer["spec"]["containers"] = json!([]);
        c.clear();
        pod(&old, &fewer, &mut c);
        assert_eq!(
            c[0].message,
            "Forbidden: pod updates may not add or remove containers"
        );
    }
}
