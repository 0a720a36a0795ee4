//! kube-controller-manager's node lifecycle controller and taint-eviction controller, for
//! Nodes that nothing keeps alive (a user's Node with no kubelet, or a simulated node
//! whose kubelet stopped).
//!
//! * **Health.** A node is healthy while its Ready condition's `lastHeartbeatTime` or its
//!   Lease's (`kube-node-lease/<node>`) `renewTime` keeps changing. A node that never
//!   reported gets 60 s from its creation (`node-startup-grace-period`), one that did
//!   50 s from the last change this controller saw (`node-monitor-grace-period`), checked
//!   every 5 s. Then Ready, MemoryPressure, DiskPressure and PIDPressure become
//!   `Unknown` (`NodeStatusNeverUpdated` / `NodeStatusUnknown`), written to `status` as
//!   one update.
//! * **NoSchedule taints** follow the conditions and `spec.unschedulable` at once
//!   (`not-ready`, `unreachable`, the pressure taints, `network-unavailable`,
//!   `unschedulable`); such a taint that no condition supports is removed.
//! * **NoExecute taints** (`unreachable` / `not-ready`) go on nodes that are not ready,
//!   one per zone every 10 s, unless the zone is disrupted: when no node of any zone is
//!   ready nothing is tainted NoExecute (and such taints are removed), and a small zone
//!   with more than two nodes, 55 % of them not ready, waits.
//! * **Taint eviction**: a pod on a node with a NoExecute taint it does not tolerate is
//!   deleted, one that tolerates it for `tolerationSeconds` that much later (counted from
//!   when this controller noticed): an event `TaintManagerEviction`, a `DisruptionTarget`
//!   condition (`DeletionByTaintManager`), then the delete.
//! * **Labels**: `beta.kubernetes.io/os` and `/arch` follow their stable labels.
//! * **TTL** (the ttl controller): every Node is annotated `node.alpha.kubernetes.io/ttl`,
//!   the seconds a kubelet may cache the secrets and config maps it mounts: 0 up to 100
//!   nodes, then 15, 30, 60, 300 and 600 s as the cluster grows (each step left only when
//!   the count goes below the next one's lower bound, so a cluster at a boundary does not
//!   flap).
//! * **Events**: `RegisteredNode` and `RemovingNode` (in namespace `default`); when a
//!   ready node stops reporting, `NodeNotReady` on it and, on each of its pods that was
//!   Ready, the Ready condition set to False and a Warning `NodeNotReady`.
//!
//! Compared side by side with v1.36's kube-controller-manager. Not done: a zone's rate
//! limiter is not reset when the zone changes state; Leases are read, never collected.

use super::workloads::{event, key_of, now, update};
use crate::http::api::ApiServer;
use crate::http::delete::{DeleteOptions, delete_obj};
use crate::registry::meta::meta_str;
use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

const NODES: &str = "/nodes";
const PODS: &str = "/pods";
const LEASES: &str = "coordination.k8s.io/leases";
const LEASE_NAMESPACE: &str = "kube-node-lease";
const COMPONENT: &str = "node-controller";
const TAINT_EVICTION: &str = "taint-eviction-controller";

const MONITOR_PERIOD: SignedDuration = SignedDuration::from_secs(5);
const STARTUP_GRACE: SignedDuration = SignedDuration::from_secs(60);
const MONITOR_GRACE: SignedDuration = SignedDuration::from_secs(50);
/// NoExecute taints per second and zone (`--node-eviction-rate`) and for large zones in
/// partial disruption (`--secondary-node-eviction-rate`).
const EVICTION_RATE: f64 = 0.1;
const SECONDARY_RATE: f64 = 0.01;
const LARGE_ZONE: usize = 50;
const UNHEALTHY_ZONE: f64 = 0.55;

const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
const NOT_READY: &str = "node.kubernetes.io/not-ready";
const EXCLUDE_DISRUPTION: &str = "node.kubernetes.io/exclude-disruption";
/// The NoSchedule taints this controller owns.
const NO_SCHEDULE_KEYS: [&str; 7] = [
    NOT_READY,
    UNREACHABLE,
    "node.kubernetes.io/memory-pressure",
    "node.kubernetes.io/disk-pressure",
    "node.kubernetes.io/pid-pressure",
    "node.kubernetes.io/network-unavailable",
    "node.kubernetes.io/unschedulable",
];
/// The conditions a silent node's are set to Unknown, in upstream's order.
const HEALTH_CONDITIONS: [&str; 4] = ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"];

const TTL_ANNOTATION: &str = "node.alpha.kubernetes.io/ttl";
/// The ttl controller's steps: (least nodes, most nodes, seconds).
const TTL_STEPS: [(usize, usize, i64); 6] = [
    (0, 100, 0),
    (90, 500, 15),
    (450, 1000, 30),
    (900, 2000, 60),
    (1800, 10000, 300),
    (9000, usize::MAX, 600),
];

/// The ttl step for `count` nodes, moving from `step` (hysteresis as upstream's).
fn ttl_step(mut step: usize, count: usize) -> usize {
    while step + 1 < TTL_STEPS.len() && count > TTL_STEPS[step].1 {
        step += 1;
    }
    while step > 0 && count < TTL_STEPS[step].0 {
        step -= 1;
    }
    step
}

/// What the controllers remember between passes.
#[derive(Default)]
pub(crate) struct NodeLifecycle {
    /// The ttl controller's step in [`TTL_STEPS`].
    ttl_step: usize,
    health: HashMap<String, Health>,
    last_monitor: Option<Timestamp>,
    /// The NoExecute rate limiter of each zone: tokens and when they were counted.
    buckets: HashMap<String, (f64, Timestamp)>,
    /// Pods to evict: (namespace, name) → (uid, when).
    evictions: HashMap<(String, String), (String, Timestamp)>,
}

struct Health {
    uid: String,
    /// When the node last showed a sign of life (upstream's `probeTimestamp`).
    probe: Timestamp,
    heartbeat: Option<String>,
    lease: Option<String>,
    /// The Ready status this controller saw last.
    ready: Option<String>,
}

/// What upstream's node events refer to: the node's name and uid, nothing more.
fn node_ref(name: &str, uid: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "uid": uid}})
}

/// What the taint-eviction controller's events refer to: the pod's name and namespace.
fn pod_ref(ns: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns}})
}

fn ts(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn parse(s: Option<&str>) -> Option<Timestamp> {
    s.and_then(|s| s.parse().ok())
}

fn condition<'a>(node: &'a Value, ty: &str) -> Option<&'a Value> {
    node.pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c["type"] == ty)
}

fn ready_status(node: &Value) -> Option<String> {
    condition(node, "Ready").and_then(|c| c["status"].as_str().map(str::to_string))
}

fn taints(node: &Value) -> Vec<Value> {
    node.pointer("/spec/taints")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn taint(key: &str, effect: &str, at: Timestamp) -> Value {
    json!({"key": key, "effect": effect, "timeAdded": ts(at)})
}

/// Writes `list` as the node's taints (an update of the whole node, as upstream's patch
/// of the whole list). The node as stored after, if the write went through.
fn write_taints(srv: &ApiServer, node: &Value, list: Vec<Value>) -> Option<Value> {
    let mut next = node.clone();
    if list.is_empty() {
        if let Some(spec) = next["spec"].as_object_mut() {
            spec.remove("taints");
        }
    } else {
        next["spec"]["taints"] = Value::Array(list);
    }
    update(srv, "nodes", next, None)
}

/// One pass of both controllers.
pub(crate) fn reconcile(srv: &Arc<ApiServer>) {
    let at = now();
    let mut st = srv.node_lifecycle.lock().unwrap_or_else(|e| e.into_inner());
    let nodes: Vec<Value> = srv
        .storage
        .list(NODES, None)
        .0
        .iter()
        .map(|n| (**n).clone())
        .collect();
    // Nodes gone, nodes new.
    let names: std::collections::HashSet<String> = nodes.iter().map(|n| key_of(n).1).collect();
    let gone: Vec<(String, String)> = st
        .health
        .iter()
        .filter(|(n, _)| !names.contains(*n))
        .map(|(n, h)| (n.clone(), h.uid.clone()))
        .collect();
    for (name, uid) in gone {
        st.health.remove(&name);
        event(
            srv,
            &node_ref(&name, &uid),
            COMPONENT,
            false,
            "RemovingNode",
            &format!("Node {name} event: Removing Node {name} from Controller"),
        );
    }
    let mut nodes = nodes;
    for node in &mut nodes {
        let name = key_of(node).1;
        if !st.health.contains_key(&name) {
            let heartbeat = condition(node, "Ready")
                .and_then(|c| c["lastHeartbeatTime"].as_str().map(str::to_string));
            // A node that never reported counts from its creation.
            let probe = match heartbeat {
                None => parse(meta_str(node, "creationTimestamp")).unwrap_or(at),
                Some(_) => at,
            };
            st.health.insert(
                name.clone(),
                Health {
                    uid: meta_str(node, "uid").unwrap_or("").to_string(),
                    probe,
                    heartbeat,
                    lease: None,
                    ready: ready_status(node),
                },
            );
            event(
                srv,
                &node_ref(&name, meta_str(node, "uid").unwrap_or("")),
                COMPONENT,
                false,
                "RegisteredNode",
                &format!("Node {name} event: Registered Node {name} in Controller"),
            );
            // Upstream marks every node it meets reachable: NoExecute taints go, and come
            // back through the rate-limited queue if they still apply.
            let kept: Vec<Value> = taints(node)
                .into_iter()
                .filter(|t| {
                    !(t["effect"] == "NoExecute"
                        && (t["key"] == UNREACHABLE || t["key"] == NOT_READY))
                })
                .collect();
            if kept.len() != taints(node).len()
                && let Some(stored) = write_taints(srv, node, kept)
            {
                *node = stored;
            }
        }
        if let Some(stored) = labels(srv, node) {
            *node = stored;
        }
    }
    st.ttl_step = ttl_step(st.ttl_step, nodes.len());
    let ttl = TTL_STEPS[st.ttl_step].2;
    for node in &mut nodes {
        let current = node
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(TTL_ANNOTATION))
            .and_then(Value::as_str)
            .and_then(|v| v.parse::<i64>().ok());
        if current != Some(ttl) {
            let mut next = node.clone();
            if !next["metadata"]["annotations"].is_object() {
                next["metadata"]["annotations"] = json!({});
            }
            next["metadata"]["annotations"][TTL_ANNOTATION] = json!(ttl.to_string());
            if let Some(stored) = update(srv, "nodes", next, None) {
                *node = stored;
            }
        }
    }
    if st
        .last_monitor
        .is_none_or(|t| at >= t.saturating_add(MONITOR_PERIOD).unwrap_or(t))
    {
        st.last_monitor = Some(at);
        for node in &mut nodes {
            if let Some(stored) = monitor(srv, &mut st, node, at) {
                *node = stored;
            }
        }
    }
    for node in &mut nodes {
        if let Some(stored) = no_schedule(srv, node, at) {
            *node = stored;
        }
    }
    no_execute(srv, &mut st, &mut nodes, at);
    evict(srv, &mut st, &nodes, at);
}

/// `reconcileNodeLabels`: the beta os and arch labels copy the stable ones.
fn labels(srv: &ApiServer, node: &Value) -> Option<Value> {
    let labels = node
        .pointer("/metadata/labels")
        .and_then(Value::as_object)?;
    let mut next = node.clone();
    let mut changed = false;
    for what in ["os", "arch"] {
        if let Some(v) = labels.get(&format!("kubernetes.io/{what}"))
            && labels.get(&format!("beta.kubernetes.io/{what}")) != Some(v)
        {
            next["metadata"]["labels"][format!("beta.kubernetes.io/{what}")] = v.clone();
            changed = true;
        }
    }
    if changed {
        update(srv, "nodes", next, None)
    } else {
        None
    }
}

/// `tryUpdateNodeHealth` for one node: notes signs of life, and marks a silent node's
/// conditions Unknown once its grace period is over. The node as stored after a write.
fn monitor(srv: &ApiServer, st: &mut NodeLifecycle, node: &Value, at: Timestamp) -> Option<Value> {
    let name = key_of(node).1;
    let lease = srv
        .storage
        .get(LEASES, LEASE_NAMESPACE, &name)
        .and_then(|l| {
            l.pointer("/spec/renewTime")
                .and_then(Value::as_str)
                .map(str::to_string)
        });
    let h = st.health.get_mut(&name)?;
    let heartbeat =
        condition(node, "Ready").and_then(|c| c["lastHeartbeatTime"].as_str().map(str::to_string));
    if heartbeat.is_some() && heartbeat != h.heartbeat {
        h.probe = at;
    }
    h.heartbeat = heartbeat;
    if lease.is_some() && lease != h.lease {
        h.probe = at;
        h.lease = lease;
    }
    let before = h.ready.clone();
    let grace = if condition(node, "Ready").is_some() {
        MONITOR_GRACE
    } else {
        STARTUP_GRACE
    };
    let mut stored = None;
    if at > h.probe.saturating_add(grace).unwrap_or(h.probe) {
        let mut next = node.clone();
        let created = meta_str(node, "creationTimestamp")
            .unwrap_or("")
            .to_string();
        if !next["status"].is_object() {
            next["status"] = json!({});
        }
        if !next["status"]["conditions"].is_array() {
            next["status"]["conditions"] = json!([]);
        }
        if let Some(list) = next["status"]["conditions"].as_array_mut() {
            for ty in HEALTH_CONDITIONS {
                match list.iter_mut().find(|c| c["type"] == ty) {
                    None => list.push(json!({"type": ty, "status": "Unknown",
                        "lastHeartbeatTime": created, "lastTransitionTime": ts(at),
                        "reason": "NodeStatusNeverUpdated",
                        "message": "Kubelet never posted node status."})),
                    Some(c) if c["status"] != "Unknown" => {
                        c["status"] = json!("Unknown");
                        c["reason"] = json!("NodeStatusUnknown");
                        c["message"] = json!("Kubelet stopped posting node status.");
                        c["lastTransitionTime"] = json!(ts(at));
                    }
                    Some(_) => {}
                }
            }
        }
        if ready_status(&next) != ready_status(node) {
            stored = update(srv, "nodes", next, Some("status"));
        }
    }
    let current = stored
        .as_ref()
        .map_or_else(|| ready_status(node), ready_status);
    if let Some(h) = st.health.get_mut(&name) {
        h.ready = current.clone();
    }
    if before.as_deref() == Some("True") && current.as_deref() != Some("True") {
        event(
            srv,
            &node_ref(&name, meta_str(node, "uid").unwrap_or("")),
            COMPONENT,
            false,
            "NodeNotReady",
            &format!("Node {name} status is now: NodeNotReady"),
        );
        mark_pods_not_ready(srv, &name);
    }
    stored
}

/// `MarkPodsNotReady`: the node's pods that are Ready become not Ready, with a warning.
fn mark_pods_not_ready(srv: &ApiServer, node: &str) {
    for pod in srv.storage.list(PODS, None).0 {
        if pod.pointer("/spec/nodeName").and_then(Value::as_str) != Some(node) {
            continue;
        }
        let mut next = (*pod).clone();
        let Some(c) = next
            .pointer_mut("/status/conditions")
            .and_then(Value::as_array_mut)
            .and_then(|l| l.iter_mut().find(|c| c["type"] == "Ready"))
        else {
            continue;
        };
        if c["status"] == "False" {
            continue;
        }
        c["status"] = json!("False");
        c["lastTransitionTime"] = json!(ts(now()));
        if let Some(stored) = update(srv, "pods", next, Some("status")) {
            event(
                srv,
                &stored,
                COMPONENT,
                true,
                "NodeNotReady",
                "Node is not ready",
            );
        }
    }
}

/// `doNoScheduleTaintingPass`: the NoSchedule taints the node's conditions call for.
fn no_schedule(srv: &ApiServer, node: &Value, at: Timestamp) -> Option<Value> {
    let status_of = |ty: &str| condition(node, ty).and_then(|c| c["status"].as_str());
    let mut want: Vec<&str> = Vec::new();
    match status_of("Ready") {
        Some("False") => want.push(NOT_READY),
        Some("Unknown") => want.push(UNREACHABLE),
        _ => {}
    }
    for (ty, key) in [
        ("MemoryPressure", NO_SCHEDULE_KEYS[2]),
        ("DiskPressure", NO_SCHEDULE_KEYS[3]),
        ("PIDPressure", NO_SCHEDULE_KEYS[4]),
        ("NetworkUnavailable", NO_SCHEDULE_KEYS[5]),
    ] {
        if status_of(ty) == Some("True") {
            want.push(key);
        }
    }
    if node.pointer("/spec/unschedulable") == Some(&json!(true)) {
        want.push(NO_SCHEDULE_KEYS[6]);
    }
    let current = taints(node);
    let ours =
        |t: &Value| t["effect"] == "NoSchedule" && NO_SCHEDULE_KEYS.iter().any(|k| t["key"] == *k);
    let mut next: Vec<Value> = current
        .iter()
        .filter(|t| !ours(t) || want.iter().any(|k| t["key"] == *k))
        .cloned()
        .collect();
    for key in &want {
        if !next
            .iter()
            .any(|t| t["key"] == *key && t["effect"] == "NoSchedule")
        {
            next.push(taint(key, "NoSchedule", at));
        }
    }
    if next == current {
        return None;
    }
    write_taints(srv, node, next)
}

/// The zone of a node, from its region and zone labels (the beta ones first).
fn zone_of(node: &Value) -> String {
    let label = |k: &str| {
        node.pointer("/metadata/labels")
            .and_then(|l| l.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let pick = |beta: &str, ga: &str| {
        let b = label(beta);
        if b.is_empty() { label(ga) } else { b }
    };
    let region = pick(
        "failure-domain.beta.kubernetes.io/region",
        "topology.kubernetes.io/region",
    );
    let zone = pick(
        "failure-domain.beta.kubernetes.io/zone",
        "topology.kubernetes.io/zone",
    );
    if region.is_empty() && zone.is_empty() {
        String::new()
    } else {
        format!("{region}:\u{0}:{zone}")
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum ZoneState {
    Normal,
    Partial,
    Full,
}

/// `ComputeZoneState` over (ready, not ready) counts.
fn zone_state(ready: usize, not_ready: usize) -> ZoneState {
    if ready == 0 && not_ready > 0 {
        ZoneState::Full
    } else if not_ready > 2 && not_ready as f64 / (ready + not_ready) as f64 >= UNHEALTHY_ZONE {
        ZoneState::Partial
    } else {
        ZoneState::Normal
    }
}

/// The NoExecute taints (`processTaintBaseEviction`, `doNoExecuteTaintingPass`,
/// `handleDisruption`).
fn no_execute(srv: &ApiServer, st: &mut NodeLifecycle, nodes: &mut [Value], at: Timestamp) {
    let mut counts: BTreeMap<String, (usize, usize, usize)> = BTreeMap::new();
    for node in nodes.iter() {
        let zone = zone_of(node);
        let entry = counts.entry(zone).or_default();
        entry.2 += 1;
        let excluded = node
            .pointer("/metadata/labels")
            .is_some_and(|l| l.get(EXCLUDE_DISRUPTION).is_some());
        if excluded {
            continue;
        }
        if ready_status(node).as_deref() == Some("True") {
            entry.0 += 1;
        } else {
            entry.1 += 1;
        }
    }
    let states: BTreeMap<&String, ZoneState> = counts
        .iter()
        .filter(|(_, (r, n, _))| r + n > 0)
        .map(|(z, (r, n, _))| (z, zone_state(*r, *n)))
        .collect();
    let all_full = !states.is_empty() && states.values().all(|s| *s == ZoneState::Full);
    for node in nodes.iter_mut() {
        let ready = ready_status(node);
        let not_execute = |t: &Value| {
            t["effect"] == "NoExecute" && (t["key"] == UNREACHABLE || t["key"] == NOT_READY)
        };
        let want = match ready.as_deref() {
            _ if all_full => None,
            // No Ready condition yet: upstream leaves its NoExecute taints alone.
            None => continue,
            Some("Unknown") => Some(UNREACHABLE),
            Some("False") => Some(NOT_READY),
            _ => None,
        };
        let current = taints(node);
        let has = current
            .iter()
            .find(|t| not_execute(t))
            .map(|t| t["key"].clone());
        let next: Vec<Value> = match (want, has) {
            (None, None) => continue,
            (Some(w), Some(h)) if h == w => continue,
            (None, Some(_)) => current.into_iter().filter(|t| !not_execute(t)).collect(),
            // The other NoExecute taint is swapped without waiting.
            (Some(w), Some(_)) => {
                let mut l: Vec<Value> = current.into_iter().filter(|t| !not_execute(t)).collect();
                l.push(taint(w, "NoExecute", at));
                l
            }
            (Some(w), None) => {
                let zone = zone_of(node);
                let (_, _, size) = counts.get(&zone).copied().unwrap_or_default();
                let rate = match states.get(&zone) {
                    Some(ZoneState::Partial) if size > LARGE_ZONE => SECONDARY_RATE,
                    Some(ZoneState::Partial) => 0.0,
                    _ => EVICTION_RATE,
                };
                if !take_token(st, &zone, rate, at) {
                    continue;
                }
                let mut l = current;
                l.push(taint(w, "NoExecute", at));
                l
            }
        };
        if let Some(stored) = write_taints(srv, node, next) {
            *node = stored;
        }
    }
}

/// A token of the zone's bucket (burst 1, full at first), if there is one.
fn take_token(st: &mut NodeLifecycle, zone: &str, rate: f64, at: Timestamp) -> bool {
    if rate <= 0.0 {
        return false;
    }
    let (tokens, since) = st.buckets.entry(zone.to_string()).or_insert((1.0, at));
    let elapsed = at.duration_since(*since).as_secs_f64().max(0.0);
    *tokens = (*tokens + elapsed * rate).min(1.0);
    *since = at;
    if *tokens >= 1.0 {
        *tokens -= 1.0;
        true
    } else {
        false
    }
}

/// Whether `tol` tolerates `taint` (`Toleration.ToleratesTaint`).
pub(super) fn tolerates(tol: &Value, taint: &Value) -> bool {
    let effect = tol["effect"].as_str().unwrap_or("");
    if !effect.is_empty() && tol["effect"] != taint["effect"] {
        return false;
    }
    let key = tol["key"].as_str().unwrap_or("");
    if !key.is_empty() && tol["key"] != taint["key"] {
        return false;
    }
    match tol["operator"].as_str().unwrap_or("Equal") {
        "Exists" => true,
        "Equal" | "" => {
            tol["value"].as_str().unwrap_or("") == taint["value"].as_str().unwrap_or("")
        }
        _ => false,
    }
}

/// When a pod on a node with these NoExecute taints must go: now if one is not
/// tolerated, never if every matching toleration is unbounded, else after the shortest
/// `tolerationSeconds`.
fn eviction_delay(pod: &Value, no_execute: &[Value]) -> Option<SignedDuration> {
    let tolerations = pod
        .pointer("/spec/tolerations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut least: Option<i64> = None;
    for t in no_execute {
        let matching: Vec<&Value> = tolerations.iter().filter(|tol| tolerates(tol, t)).collect();
        if matching.is_empty() {
            return Some(SignedDuration::ZERO);
        }
        for tol in matching {
            if let Some(s) = tol["tolerationSeconds"].as_i64() {
                least = Some(least.map_or(s, |l| l.min(s)));
            }
        }
    }
    least.map(|s| SignedDuration::from_secs(s.max(0)))
}

/// The taint-eviction controller's pass.
fn evict(srv: &Arc<ApiServer>, st: &mut NodeLifecycle, nodes: &[Value], at: Timestamp) {
    let tainted: HashMap<String, Vec<Value>> = nodes
        .iter()
        .filter_map(|n| {
            let t: Vec<Value> = taints(n)
                .into_iter()
                .filter(|t| t["effect"] == "NoExecute")
                .collect();
            (!t.is_empty()).then(|| (key_of(n).1, t))
        })
        .collect();
    if tainted.is_empty() && st.evictions.is_empty() {
        return;
    }
    let mut due: Vec<(String, String, String)> = Vec::new();
    let mut still: HashMap<(String, String), (String, Timestamp)> = HashMap::new();
    for pod in srv.storage.list(PODS, None).0 {
        let Some(taints) = pod
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .and_then(|n| tainted.get(n))
        else {
            continue;
        };
        if pod.pointer("/metadata/deletionTimestamp").is_some() {
            continue;
        }
        let key = key_of(&pod);
        let uid = meta_str(&pod, "uid").unwrap_or("").to_string();
        let Some(delay) = eviction_delay(&pod, taints) else {
            continue;
        };
        let when = match st.evictions.get(&key) {
            Some((u, t)) if *u == uid => *t,
            _ => at.saturating_add(delay).unwrap_or(at),
        };
        if when <= at {
            due.push((key.0, key.1, uid));
        } else {
            still.insert(key, (uid, when));
        }
    }
    // Pods no longer to be evicted: the deletion is cancelled.
    for ((ns, name), (uid, _)) in &st.evictions {
        let key = (ns.clone(), name.clone());
        if still.contains_key(&key) || due.iter().any(|(n, m, _)| n == ns && m == name) {
            continue;
        }
        if let Some(pod) = srv.storage.get(PODS, ns, name)
            && meta_str(&pod, "uid") == Some(uid.as_str())
            && pod.pointer("/metadata/deletionTimestamp").is_none()
        {
            event(
                srv,
                &pod_ref(ns, name),
                TAINT_EVICTION,
                false,
                "TaintManagerEviction",
                &format!("Cancelling deletion of Pod {ns}/{name}"),
            );
        }
    }
    st.evictions = still;
    for (ns, name, uid) in due {
        let Some(pod) = srv.storage.get(PODS, &ns, &name) else {
            continue;
        };
        if meta_str(&pod, "uid") != Some(uid.as_str()) {
            continue;
        }
        event(
            srv,
            &pod_ref(&ns, &name),
            TAINT_EVICTION,
            false,
            "TaintManagerEviction",
            &format!("Marking for deletion Pod {ns}/{name}"),
        );
        let mut next = (*pod).clone();
        let mut cond = json!({"type": "DisruptionTarget", "status": "True",
            "lastTransitionTime": ts(at), "reason": "DeletionByTaintManager",
            "message": "Taint manager: deleting due to NoExecute taint"});
        if let Some(g) = pod.pointer("/metadata/generation") {
            cond["observedGeneration"] = g.clone();
        }
        if !next["status"]["conditions"].is_array() {
            next["status"]["conditions"] = json!([]);
        }
        if let Some(list) = next["status"]["conditions"].as_array_mut() {
            match list.iter_mut().find(|c| c["type"] == "DisruptionTarget") {
                Some(c) => *c = cond,
                None => list.push(cond),
            }
        }
        let _ = update(srv, "pods", next, Some("status"));
        let Some(def) = srv.def("", "v1", "pods") else {
            continue;
        };
        if let Err(e) = delete_obj(srv, &def, &ns, &name, &DeleteOptions::default()) {
            tracing::debug!(%ns, %name, "taint eviction: {}", e.status.message);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zones_are_disrupted_as_upstream_counts() {
        assert_eq!(zone_state(0, 1), ZoneState::Full);
        assert_eq!(zone_state(1, 2), ZoneState::Normal);
        assert_eq!(zone_state(1, 3), ZoneState::Partial);
        assert_eq!(zone_state(3, 3), ZoneState::Normal);
        assert_eq!(zone_state(2, 3), ZoneState::Partial);
        assert_eq!(zone_state(0, 0), ZoneState::Normal);
    }

    #[test]
    fn tolerations_decide_when_a_pod_goes() {
        let unreachable = vec![json!({"key": UNREACHABLE, "effect": "NoExecute"})];
        let pod = |tols: Value| json!({"spec": {"tolerations": tols}});
        assert_eq!(
            eviction_delay(&pod(json!([])), &unreachable),
            Some(SignedDuration::ZERO)
        );
        let bounded = pod(json!([
            {"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"operator": "Exists", "tolerationSeconds": 30}]));
        assert_eq!(
            eviction_delay(&bounded, &unreachable),
            Some(SignedDuration::from_secs(30))
        );
        let forever = pod(json!([{"operator": "Exists"}]));
        assert_eq!(eviction_delay(&forever, &unreachable), None);
        let other = pod(json!([{"key": "x", "operator": "Exists"}]));
        assert_eq!(
            eviction_delay(&other, &unreachable),
            Some(SignedDuration::ZERO)
        );
        let equal = json!({"key": "k", "value": "v", "effect": "NoExecute"});
        assert!(tolerates(&json!({"key": "k", "value": "v"}), &equal));
        assert!(!tolerates(&json!({"key": "k", "value": "w"}), &equal));
    }

    #[test]
    fn the_ttl_steps_up_and_down_with_hysteresis() {
        assert_eq!(ttl_step(0, 3), 0);
        assert_eq!(ttl_step(0, 100), 0);
        assert_eq!(ttl_step(0, 101), 1);
        assert_eq!(ttl_step(1, 95), 1);
        assert_eq!(ttl_step(1, 89), 0);
        assert_eq!(ttl_step(0, 20_000), 5);
        assert_eq!(ttl_step(5, 0), 0);
        assert_eq!(TTL_STEPS[ttl_step(0, 1000)].2, 30);
    }

    #[test]
    fn zone_keys_prefer_the_beta_labels() {
        let n = json!({"metadata": {"labels": {"topology.kubernetes.io/zone": "a",
            "failure-domain.beta.kubernetes.io/zone": "b"}}});
        assert_eq!(zone_of(&n), ":\u{0}:b");
        assert_eq!(zone_of(&json!({"metadata": {}})), "");
    }
}
