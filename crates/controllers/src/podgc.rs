//! kube-controller-manager's pod garbage collector (`pod-garbage-collector-controller`)
//! for pods whose node is gone or out of service:
//!
//! - a pod bound to a Node that has been missing for [`QUARANTINE`] (and that a live
//!   GET confirms is gone) is marked `Failed` with a `DisruptionTarget` condition
//!   (`DeletionByPodGC`) and deleted with no grace period;
//! - a terminating pod on a Node that is not ready and carries the
//!   `node.kubernetes.io/out-of-service` taint is marked `Failed` and deleted at once;
//! - so is a terminating pod that was never scheduled.
//!
//! A pod that had already finished keeps its phase. Upstream lists every pod each 20 s;
//! this controller is driven by pod and node events instead, with the quarantine as a
//! requeue. Not done: upstream's terminated-pod threshold (12,500 finished pods by
//! default).

use k8s_openapi::api::core::v1::{Node, Pod};
use kubewright_client::{Api, Client};
use kubewright_core::{DeleteParams, Patch, PatchParams};
use kubewright_runtime::{Action, InformerParams, Manager, ManagerError, Source, Store};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// kube-controller-manager's name for this controller.
pub const NAME: &str = "pod-garbage-collector-controller";
/// How long a node must be missing before its pods go (upstream's `quarantineTime`).
pub const QUARANTINE: Duration = Duration::from_secs(40);
/// The taint that lets podgc delete terminating pods of a node that is not ready.
pub const OUT_OF_SERVICE: &str = "node.kubernetes.io/out-of-service";
/// The pod index by `spec.nodeName`.
const NODE_INDEX: &str = "spec.nodeName";

struct Ctx {
    nodes: Store<Node>,
    node_api: Api<Node>,
    client: Client,
    /// Nodes seen missing, and since when: the start of their quarantine.
    missing: Mutex<HashMap<String, Instant>>,
}

/// Adds the controller to `manager`: pods are its primary objects, and every event of a
/// Node reconciles the pods bound to it.
pub fn add(manager: &mut Manager) -> Result<(), ManagerError> {
    let pods = manager.factory().informer::<Pod>(InformerParams::all());
    if !pods.store().index_names().iter().any(|n| n == NODE_INDEX) {
        // Only fails when the index exists, which was just checked.
        let _ = pods.add_indexer(NODE_INDEX, |p: &Pod| {
            node_of(p).map(|n| vec![n.to_string()]).unwrap_or_default()
        });
    }
    let nodes = manager.factory().informer::<Node>(InformerParams::all());
    let by_node = pods.store();
    let relevant = kubewright_runtime::Predicate::named("bound-or-terminating", |_, p: &Pod| {
        node_of(p).is_some() || p.metadata.deletion_timestamp.is_some()
    });
    let controller = manager
        .controller::<Pod>(Source::from_informer(pods).predicate(relevant))
        .watches::<Node>(Source::from_informer(nodes.clone()), move |node: &Node| {
            let name = node.metadata.name.as_deref().unwrap_or_default();
            by_node.index_keys(NODE_INDEX, name).unwrap_or_default()
        })
        .named(NAME);
    let ctx = Ctx {
        nodes: nodes.store(),
        node_api: Api::all(manager.client().clone()),
        client: manager.client().clone(),
        missing: Mutex::default(),
    };
    manager.add(controller, reconcile, Arc::new(ctx))
}

async fn reconcile(pod: Arc<Pod>, ctx: Arc<Ctx>) -> Result<Action, kubewright_client::Error> {
    let terminating = pod.metadata.deletion_timestamp.is_some();
    let Some(node_name) = node_of(&pod) else {
        if terminating {
            fail_and_delete(&ctx, &pod, None).await?;
        }
        return Ok(Action::await_change());
    };
    if let Some(node) = ctx.nodes.get_by_name(None, node_name) {
        ctx.missing_since(node_name, false);
        if terminating && out_of_service(&node) {
            fail_and_delete(&ctx, &pod, None).await?;
        }
        return Ok(Action::await_change());
    }
    let waited = ctx.missing_since(node_name, true).map(|t| t.elapsed());
    if let Some(waited) = waited.filter(|w| *w < QUARANTINE) {
        return Ok(Action::requeue(QUARANTINE - waited));
    }
    // Upstream asks the server, not its cache, before it deletes.
    if ctx.node_api.get_opt(node_name).await?.is_some() {
        // The cache is behind: the node's event reconciles this pod again.
        return Ok(Action::await_change());
    }
    let condition = json!({"type": "DisruptionTarget", "status": "True",
        "reason": "DeletionByPodGC", "message": "PodGC: node no longer exists"});
    fail_and_delete(&ctx, &pod, Some(condition)).await?;
    Ok(Action::await_change())
}

impl Ctx {
    /// When `node` was first seen missing; `missing: false` forgets it (it exists).
    fn missing_since(&self, node: &str, missing: bool) -> Option<Instant> {
        let mut seen = self.missing.lock().unwrap_or_else(|e| e.into_inner());
        if !missing {
            seen.remove(node);
            return None;
        }
        Some(*seen.entry(node.to_string()).or_insert_with(Instant::now))
    }
}

/// Upstream's `markFailedAndDeletePodWithCondition`: a pod that has not finished gets
/// phase `Failed` (and `condition`) by a strategic merge patch of its status, then
/// the pod is deleted with no grace period. A pod already gone is not an error.
async fn fail_and_delete(
    ctx: &Ctx,
    pod: &Pod,
    condition: Option<Value>,
) -> Result<(), kubewright_client::Error> {
    let (Some(ns), Some(name)) = (
        pod.metadata.namespace.as_deref(),
        pod.metadata.name.as_deref(),
    ) else {
        return Ok(());
    };
    tracing::info!(
        namespace = ns,
        pod = name,
        "podgc is force deleting the pod"
    );
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
    let status = pod.status.as_ref();
    let phase = status.and_then(|s| s.phase.as_deref());
    if !matches!(phase, Some("Succeeded" | "Failed")) {
        let generation = pod.metadata.generation;
        let mut next = json!({"phase": "Failed"});
        if let Some(g) = generation {
            // v1.36's podgc records the generation it saw (measured).
            next["observedGeneration"] = json!(g);
        }
        if let Some(mut c) = condition {
            if let Some(g) = generation {
                c["observedGeneration"] = json!(g);
            }
            let old = status
                .and_then(|s| s.conditions.as_ref())
                .and_then(|cs| cs.iter().find(|x| c["type"] == x.type_.as_str()));
            c["lastTransitionTime"] = match old {
                Some(o) if c["status"] == o.status.as_str() => json!(o.last_transition_time),
                _ => json!(jiff::Timestamp::now().round(jiff::Unit::Second).ok()),
            };
            next["conditions"] = json!([c]);
        }
        // The uid makes it a precondition: a pod recreated under the name is left alone.
        let patch = json!({"metadata": {"uid": pod.metadata.uid}, "status": next});
        match api
            .patch_status(name, &PatchParams::default(), &Patch::Strategic(patch))
            .await
        {
            Ok(_) => {}
            Err(e) if e.is_not_found() || e.is_conflict() => return Ok(()),
            Err(e) => return Err(e),
        }
    }
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    match api.delete(name, &now).await {
        Ok(_) => Ok(()),
        Err(e) if e.is_not_found() => Ok(()),
        Err(e) => Err(e),
    }
}

/// The node a pod is bound to, if any.
fn node_of(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

/// Whether the node is not ready and tainted out of service.
pub fn out_of_service(node: &Node) -> bool {
    let spec = node.spec.as_ref();
    let tainted = spec
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == OUT_OF_SERVICE));
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    tainted && !ready
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(v: Value) -> Node {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn out_of_service_needs_the_taint_and_no_ready_condition() {
        let taint = json!([{"key": OUT_OF_SERVICE, "effect": "NoExecute"}]);
        let ready = json!([{"type": "Ready", "status": "True"}]);
        let not_ready = json!([{"type": "Ready", "status": "Unknown"}]);
        let cases = [
            (json!({"spec": {"taints": taint}}), true),
            (
                json!({"spec": {"taints": taint}, "status": {"conditions": not_ready}}),
                true,
            ),
            (
                json!({"spec": {"taints": taint}, "status": {"conditions": ready}}),
                false,
            ),
            (json!({"status": {"conditions": not_ready}}), false),
        ];
        for (v, want) in cases {
            assert_eq!(out_of_service(&node(v.clone())), want, "{v}");
        }
    }

    #[test]
    fn node_of_ignores_an_empty_name() {
        let pod: Pod =
            serde_json::from_value(json!({"spec": {"nodeName": "", "containers": []}})).unwrap();
        assert_eq!(node_of(&pod), None);
        let pod: Pod =
            serde_json::from_value(json!({"spec": {"nodeName": "n1", "containers": []}})).unwrap();
        assert_eq!(node_of(&pod), Some("n1"));
    }
}
