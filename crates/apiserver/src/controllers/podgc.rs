//! kube-controller-manager's pod garbage collector (podgc), for the pods whose node is
//! gone or out of service: a pod bound to a Node that has not existed for 40 s (the
//! quarantine upstream waits) is marked `Failed` with a `DisruptionTarget` condition
//! (`DeletionByPodGC`, unless it had finished) and deleted at once; so is a
//! terminating pod on a node that is not ready and carries the
//! `node.kubernetes.io/out-of-service` taint (marked `Failed`, no condition). No events,
//! as upstream.
//!
//! Event-driven where upstream lists every pod each 20 s: nodes that went missing and
//! pods bound to missing or out-of-service nodes come from the storage's events (see
//! workloads.rs). Not done: the terminated-pod threshold (12,500 finished pods) and
//! unscheduled terminating pods (here a pod without a node is deleted at once, unless
//! a finalizer holds it).

use super::workloads::{deleting, key_of, terminal, update};
use crate::http::api::ApiServer;
use crate::http::delete::{DeleteOptions, delete_obj};
use crate::registry::meta::now_time;
use serde_json::{Value, json};
use std::sync::Arc;

pub(super) const NODES: &str = "/nodes";
const PODS: &str = "/pods";
/// How long a node must be missing before its pods go.
pub(super) const QUARANTINE: jiff::SignedDuration = jiff::SignedDuration::from_secs(40);
const OUT_OF_SERVICE: &str = "node.kubernetes.io/out-of-service";

/// Whether the node is not ready and tainted out of service.
pub(super) fn out_of_service(node: &Value) -> bool {
    let tainted = node
        .pointer("/spec/taints")
        .and_then(Value::as_array)
        .is_some_and(|t| t.iter().any(|t| t["key"] == OUT_OF_SERVICE));
    let ready = node
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        });
    tainted && !ready
}

/// The node a pod is bound to, if any.
pub(super) fn node_of(pod: &Value) -> Option<&str> {
    pod.pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
}

/// `markFailedAndDeletePodWithCondition`: a pod that has not finished is marked
/// `Failed` (with `condition`), then deleted with no grace period.
fn fail_and_delete(srv: &Arc<ApiServer>, pod: &Value, condition: Option<Value>) {
    let (ns, name) = key_of(pod);
    if !terminal(pod) {
        let mut next = pod.clone();
        next["status"]["phase"] = json!("Failed");
        // v1.36's podgc also records the generation it saw (measured).
        if let Some(g) = pod.pointer("/metadata/generation") {
            next["status"]["observedGeneration"] = g.clone();
        }
        if let Some(mut c) = condition {
            if let Some(g) = pod.pointer("/metadata/generation") {
                c["observedGeneration"] = g.clone();
            }
            let conds = &mut next["status"]["conditions"];
            if !conds.is_array() {
                *conds = json!([]);
            }
            if let Some(list) = conds.as_array_mut() {
                match list.iter_mut().find(|x| x["type"] == c["type"]) {
                    Some(old) => {
                        if old["status"] == c["status"] {
                            c["lastTransitionTime"] = old["lastTransitionTime"].clone();
                        }
                        *old = c;
                    }
                    None => list.push(c),
                }
            }
        }
        if update(srv, "pods", next, Some("status")).is_none() {
            // Gone or changed meanwhile: the next pass looks again if it must.
            return;
        }
    }
    let Some(def) = srv.def("", "v1", "pods") else {
        return;
    };
    let opts = DeleteOptions {
        grace_period: Some(0),
        ..Default::default()
    };
    if let Err(e) = delete_obj(srv, &def, &ns, &name, &opts) {
        tracing::debug!(%ns, %name, "podgc delete: {}", e.status.message);
    }
}

/// One pass: the pods of `gone` (nodes whose quarantine ended) if those nodes are
/// still missing, and the terminating pods in `stranded` (pod keys on nodes out of
/// service).
pub(super) fn collect(srv: &Arc<ApiServer>, gone: Vec<String>, stranded: Vec<(String, String)>) {
    let gone: Vec<String> = gone
        .into_iter()
        .filter(|n| srv.storage.get(NODES, "", n).is_none())
        .collect();
    if !gone.is_empty() {
        let condition = json!({"type": "DisruptionTarget", "status": "True",
            "lastProbeTime": null, "lastTransitionTime": now_time(),
            "reason": "DeletionByPodGC", "message": "PodGC: node no longer exists"});
        for pod in srv.storage.list(PODS, None).0 {
            if node_of(&pod).is_some_and(|n| gone.iter().any(|g| g == n)) {
                fail_and_delete(srv, &pod, Some(condition.clone()));
            }
        }
    }
    for (ns, name) in stranded {
        let Some(pod) = srv.storage.get(PODS, &ns, &name) else {
            continue;
        };
        let still = deleting(&pod)
            && node_of(&pod)
                .and_then(|n| srv.storage.get(NODES, "", n))
                .is_some_and(|n| out_of_service(&n));
        if still {
            fail_and_delete(srv, &pod, None);
        }
    }
}
