//! kube-controller-manager's daemonset controller.
//!
//! A DaemonSet runs one pod on every Node its template may run on: the node selector
//! matches, and every `NoSchedule`/`NoExecute` taint is tolerated (by the template or by
//! the tolerations the controller adds, as upstream: not-ready, unreachable, disk,
//! memory and pid pressure, unschedulable). Each pod (`<set>-<random>`) is pinned with a
//! required node affinity on `metadata.name`, labelled with `controller-revision-hash` and
//! `pod-template-generation`. Pods on nodes that no longer fit, extra pods on a node
//! and failed pods are deleted (and replaced where they belong). A `RollingUpdate`
//! replaces old pods while at most `maxUnavailable` (default 1) are unavailable;
//! `OnDelete` waits. The template's revisions are ControllerRevisions. Status as upstream
//! counts it; events `SuccessfulCreate`/`SuccessfulDelete`.
//!
//! On a cluster without nodes (the real test cluster, or the embedded server without the
//! simulated kubelet) a DaemonSet has nothing to run. Not done: `maxSurge`.

use super::statefulsets::revision_for;
use super::workloads::{
    availability, controller_of, create_pod, delete_pod, deleting, event, int, key_of, live_object,
    now, owner_ref, ready_since, terminal, write_status,
};
use crate::http::api::ApiServer;
use crate::registry::meta::{labels, meta_str, string_map};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

pub(super) const DAEMONSETS: &str = "apps/daemonsets";
pub(super) const NODES: &str = "/nodes";
const PODS: &str = "/pods";
const REVISIONS: &str = "apps/controllerrevisions";
const COMPONENT: &str = "daemonset-controller";

/// The tolerations upstream's controller adds to every daemon pod.
fn default_tolerations() -> Vec<Value> {
    let t = |key: &str, effect: &str| json!({"key": key, "operator": "Exists", "effect": effect});
    vec![
        t("node.kubernetes.io/not-ready", "NoExecute"),
        t("node.kubernetes.io/unreachable", "NoExecute"),
        t("node.kubernetes.io/disk-pressure", "NoSchedule"),
        t("node.kubernetes.io/memory-pressure", "NoSchedule"),
        t("node.kubernetes.io/pid-pressure", "NoSchedule"),
        t("node.kubernetes.io/unschedulable", "NoSchedule"),
    ]
}

/// Whether some of `tolerations` tolerates `taint`.
fn tolerates(tolerations: &[Value], taint: &Value) -> bool {
    tolerations
        .iter()
        .any(|t| super::nodes::tolerates(t, taint))
}

/// Whether the set's pods may run on `node`.
fn fits(template: &Value, node: &Value) -> bool {
    if deleting(node) {
        return false;
    }
    let node_labels = labels(node);
    let selector = string_map(template, "/spec/nodeSelector");
    if !selector.iter().all(|(k, v)| node_labels.get(k) == Some(v)) {
        return false;
    }
    let mut tolerations: Vec<Value> = template
        .pointer("/spec/tolerations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    tolerations.extend(default_tolerations());
    node.pointer("/spec/taints")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|t| {
            matches!(
                t.get("effect").and_then(Value::as_str),
                Some("NoSchedule" | "NoExecute")
            )
        })
        .all(|t| tolerates(&tolerations, t))
}

/// The node a daemon pod is for: its node name, else its node affinity's name.
fn node_of(pod: &Value) -> Option<String> {
    if let Some(n) = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
    {
        return Some(n.to_string());
    }
    pod.pointer("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/0/matchFields/0/values/0")
        .and_then(Value::as_str)
        .map(str::to_string)
}

fn pod_for(set: &Value, template: &Value, hash: &str, node: &str) -> Value {
    let (ns, name) = key_of(set);
    let mut spec = template.get("spec").cloned().unwrap_or_else(|| json!({}));
    spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = json!({
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]});
    let mut tolerations: Vec<Value> = spec
        .get("tolerations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for t in default_tolerations() {
        if !tolerations
            .iter()
            .any(|x| x.get("key") == t.get("key") && x.get("effect") == t.get("effect"))
        {
            tolerations.push(t);
        }
    }
    spec["tolerations"] = Value::Array(tolerations);
    let mut meta = Map::new();
    meta.insert("generateName".into(), json!(format!("{name}-")));
    meta.insert("namespace".into(), json!(ns));
    let mut pod_labels = template
        .pointer("/metadata/labels")
        .cloned()
        .unwrap_or_else(|| json!({}));
    pod_labels["controller-revision-hash"] = json!(hash);
    pod_labels["pod-template-generation"] =
        json!(int(set, "/metadata/generation").unwrap_or(1).to_string());
    meta.insert("labels".into(), pod_labels);
    if let Some(a) = template.pointer("/metadata/annotations") {
        meta.insert("annotations".into(), a.clone());
    }
    meta.insert(
        "ownerReferences".into(),
        json!([owner_ref(set, "DaemonSet")]),
    );
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
}

/// One DaemonSet; whether it must be looked at again later (pods becoming available).
pub(super) async fn sync_daemonset(
    srv: &Arc<ApiServer>,
    ns: &str,
    name: &str,
    names: Vec<String>,
) -> bool {
    let Some(set) = live_object(srv, DAEMONSETS, ns, name) else {
        return false;
    };
    let uid = meta_str(&set, "uid").unwrap_or("").to_string();
    let template = set.pointer("/spec/template").cloned().unwrap_or_default();
    let Some((revision, _)) = revision_for(srv, &set, "DaemonSet", &template) else {
        return false;
    };
    let hash = srv
        .storage
        .get(REVISIONS, ns, &revision)
        .map(|cr| string_map(&cr, "/metadata/labels"))
        .and_then(|l| l.get("controller.kubernetes.io/hash").cloned())
        .unwrap_or_default();
    let nodes: Vec<Arc<Value>> = srv.storage.list(NODES, None).0;
    let wanted: Vec<String> = nodes
        .iter()
        .filter(|n| fits(&template, n))
        .filter_map(|n| meta_str(n, "name").map(str::to_string))
        .collect();
    // Its pods by node (those controlled by it and not going).
    let mut by_node: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let mut terminating = 0;
    for pod_name in names {
        let Some(pod) = srv.storage.get(PODS, ns, &pod_name) else {
            continue;
        };
        if controller_of(&pod)
            .and_then(|r| r.get("uid"))
            .and_then(Value::as_str)
            != Some(uid.as_str())
        {
            continue;
        }
        if deleting(&pod) {
            terminating += 1;
            continue;
        }
        if terminal(&pod) {
            delete_pod(srv, &set, COMPONENT, &pod, |n| format!("Deleted pod: {n}"));
            continue;
        }
        if let Some(node) = node_of(&pod) {
            by_node.entry(node).or_default().push((*pod).clone());
        }
    }
    // Pods where none may run, and extra pods on a node, go.
    for (node, pods) in &mut by_node {
        if !wanted.contains(node) {
            for pod in pods.drain(..) {
                delete_pod(srv, &set, COMPONENT, &pod, |n| format!("Deleted pod: {n}"));
            }
        } else if pods.len() > 1 {
            pods.sort_by_key(|p| meta_str(p, "creationTimestamp").unwrap_or("").to_string());
            for pod in pods.drain(1..) {
                delete_pod(srv, &set, COMPONENT, &pod, |n| format!("Deleted pod: {n}"));
            }
        }
    }
    by_node.retain(|_, pods| !pods.is_empty());
    // Nodes without a pod get one.
    let empty: Vec<String> = wanted
        .iter()
        .filter(|n| !by_node.contains_key(*n))
        .cloned()
        .collect();
    for node in &empty {
        match create_pod(srv, ns, pod_for(&set, &template, &hash, node)).await {
            Ok(p) => {
                let pod_name = meta_str(&p, "name").unwrap_or("").to_string();
                event(
                    srv,
                    &set,
                    COMPONENT,
                    false,
                    "SuccessfulCreate",
                    &format!("Created pod: {pod_name}"),
                );
                by_node.insert(node.clone(), vec![p]);
            }
            Err(e) => {
                event(
                    srv,
                    &set,
                    COMPONENT,
                    true,
                    "FailedCreate",
                    &format!("Error creating: {}", e.status.message),
                );
                break;
            }
        }
    }
    // A rolling update: old pods go while few enough are unavailable.
    let min_ready = int(&set, "/spec/minReadySeconds").unwrap_or(0);
    let at = now();
    let pod_hash = |p: &Value| {
        string_map(p, "/metadata/labels")
            .get("controller-revision-hash")
            .cloned()
            .unwrap_or_default()
    };
    if set
        .pointer("/spec/updateStrategy/type")
        .and_then(Value::as_str)
        != Some("OnDelete")
    {
        let max_unavailable = match set.pointer("/spec/updateStrategy/rollingUpdate/maxUnavailable")
        {
            Some(Value::Number(n)) => n.as_i64().unwrap_or(1),
            Some(Value::String(p)) => p
                .strip_suffix('%')
                .and_then(|p| p.parse::<i64>().ok())
                .map_or(1, |p| (p * wanted.len() as i64 / 100).max(1)),
            _ => 1,
        };
        let mut unavailable = terminating
            + by_node
                .values()
                .flatten()
                .filter(|p| !availability(p, min_ready, at).0)
                .count() as i64;
        let old: Vec<Value> = by_node
            .values()
            .flatten()
            .filter(|p| pod_hash(p) != hash)
            .cloned()
            .collect();
        for pod in old {
            // An unavailable old pod goes at once; an available one while room is left.
            let available = availability(&pod, min_ready, at).0;
            if available && unavailable >= max_unavailable {
                break;
            }
            delete_pod(srv, &set, COMPONENT, &pod, |n| format!("Deleted pod: {n}"));
            if available {
                unavailable += 1;
            }
        }
    }
    // The status.
    let mut later = false;
    let (mut current, mut ready, mut available, mut updated, mut misscheduled) = (0, 0, 0, 0, 0);
    for (node, pods) in &by_node {
        let Some(pod) = pods.first() else { continue };
        let live = srv
            .storage
            .get(PODS, ns, meta_str(pod, "name").unwrap_or(""))
            .map(|p| (*p).clone())
            .unwrap_or_else(|| pod.clone());
        if !wanted.contains(node) {
            misscheduled += 1;
            continue;
        }
        current += 1;
        if ready_since(&live).is_some() {
            ready += 1;
        }
        let (ok, wait) = availability(&live, min_ready, at);
        available += i64::from(ok);
        later |= wait;
        if pod_hash(&live) == hash {
            updated += 1;
        }
    }
    let desired = wanted.len() as i64;
    let mut status = Map::new();
    status.insert("currentNumberScheduled".into(), json!(current));
    status.insert("desiredNumberScheduled".into(), json!(desired));
    status.insert("numberMisscheduled".into(), json!(misscheduled));
    status.insert("numberReady".into(), json!(ready));
    status.insert(
        "observedGeneration".into(),
        json!(int(&set, "/metadata/generation").unwrap_or(1)),
    );
    for (k, v) in [
        ("numberAvailable", available),
        ("updatedNumberScheduled", updated),
        ("numberUnavailable", (desired - available).max(0)),
    ] {
        if v != 0 {
            status.insert(k.into(), json!(v));
        }
    }
    if let Some(c) = set.pointer("/status/collisionCount") {
        status.insert("collisionCount".into(), c.clone());
    }
    write_status(srv, "daemonsets", &set, status);
    later
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taints_need_tolerations_and_selectors_labels() {
        let template = json!({"spec": {"nodeSelector": {"disk": "ssd"}}});
        let node = |labels: Value, taints: Value| json!({"metadata": {"name": "n", "labels": labels}, "spec": {"taints": taints}});
        assert!(fits(&template, &node(json!({"disk": "ssd"}), json!([]))));
        assert!(!fits(&template, &node(json!({"disk": "hdd"}), json!([]))));
        // Tolerated by default: unschedulable and not-ready.
        let default = node(
            json!({"disk": "ssd"}),
            json!([{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
            {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]),
        );
        assert!(fits(&template, &default));
        let gpu = node(
            json!({"disk": "ssd"}),
            json!([{"key": "gpu", "value": "true", "effect": "NoSchedule"}]),
        );
        assert!(!fits(&template, &gpu));
        let tolerant = json!({"spec": {"nodeSelector": {"disk": "ssd"},
            "tolerations": [{"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}]}});
        assert!(fits(&tolerant, &gpu));
        // PreferNoSchedule does not keep a daemon away.
        let soft = node(
            json!({"disk": "ssd"}),
            json!([{"key": "x", "effect": "PreferNoSchedule"}]),
        );
        assert!(fits(&template, &soft));
    }
}
