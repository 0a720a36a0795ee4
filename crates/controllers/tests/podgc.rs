//! The pod garbage collector's cases that need no 40 s quarantine: terminating pods on a
//! node out of service, and terminating pods never scheduled. (A node that goes is
//! covered with the endpoints test in kubewright-client's tests/workloads.rs.)
//!
//! On a real cluster kube-controller-manager's podgc does this, unless it is switched
//! off and `kw controllers` runs ours instead (CI's KCM-off stage).
#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use k8s_openapi::api::core::v1::{Node, Pod};
use kubewright_client::Api;
use kubewright_core::{DeleteParams, Patch, PatchParams, PostParams};
use kubewright_runtime::wait::await_condition;
use kubewright_testing::TestEnv;
use serde_json::{Value, json};
use std::time::Duration;

const HOLD: &str = "kubewright.test/hold";

fn pod(name: &str, node: Option<&str>) -> Pod {
    let mut spec = json!({"containers": [{"name": "c", "image": "busybox"}]});
    if let Some(node) = node {
        spec["nodeName"] = json!(node);
    }
    serde_json::from_value(json!({"metadata": {"name": name, "finalizers": [HOLD]}, "spec": spec}))
        .unwrap()
}

fn failed(p: &Pod) -> bool {
    p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed")
}

/// Waits (60 s at most) until the pod is `Failed` and deleted with no grace period
/// (held by its finalizer); returns it.
async fn failed_and_deleted(pods: &Api<Pod>, name: &str) -> Pod {
    let done = |p: Option<&Pod>| {
        p.is_some_and(|p| failed(p) && p.metadata.deletion_grace_period_seconds == Some(0))
    };
    let waited = tokio::time::timeout(
        Duration::from_secs(60),
        await_condition(pods.clone(), name, done),
    )
    .await;
    match waited {
        Ok(Ok(Some(p))) => p,
        other => panic!(
            "pod {name} was not failed and deleted: {other:?}; now {:?}",
            pods.get_opt(name).await
        ),
    }
}

async fn release(pods: &Api<Pod>, name: &str) {
    let drop_hold = Patch::Merge(json!({"metadata": {"finalizers": Value::Null}}));
    pods.patch(name, &PatchParams::default(), &drop_hold)
        .await
        .unwrap();
}

#[tokio::test]
async fn terminating_pods_on_a_node_out_of_service_are_failed_and_deleted() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let nodes: Api<Node> = Api::all(env.client());
    let pods: Api<Pod> = Api::namespaced(env.client(), &ns);
    let node_name = env.unique_name("podgc-node");
    let node: Node = serde_json::from_value(json!({"metadata": {"name": node_name}})).unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();

    // Two pods on the node, each held by a finalizer; only the terminating one may go.
    for name in ["going", "staying"] {
        pods.create(&PostParams::default(), &pod(name, Some(&node_name)))
            .await
            .unwrap();
    }
    pods.delete("going", &DeleteParams::default())
        .await
        .unwrap();
    let terminating = pods.get("going").await.unwrap();
    assert!(
        terminating.metadata.deletion_timestamp.is_some() && !failed(&terminating),
        "a bound pod terminates gracefully: {:?}",
        terminating.status
    );

    // NoSchedule, not the usual NoExecute: the taint-eviction controller would evict
    // the other pod too, and podgc looks only at the key.
    let taint = json!({"spec": {"taints": [{"key": "node.kubernetes.io/out-of-service",
        "value": "nodeshutdown", "effect": "NoSchedule"}]}});
    nodes
        .patch(&node_name, &PatchParams::default(), &Patch::Merge(taint))
        .await
        .unwrap();
    let going = failed_and_deleted(&pods, "going").await;
    let conditions = going.status.and_then(|s| s.conditions).unwrap_or_default();
    assert!(
        !conditions.iter().any(
            |c| c.type_ == "DisruptionTarget" && c.reason.as_deref() == Some("DeletionByPodGC")
        ),
        "no node-gone condition for an out-of-service node: {conditions:?}"
    );
    release(&pods, "going").await;

    let staying = pods.get("staying").await.unwrap();
    assert!(!failed(&staying), "{:?}", staying.status);
    release(&pods, "staying").await;
    nodes
        .delete(&node_name, &DeleteParams::default())
        .await
        .unwrap();
}

#[tokio::test]
async fn a_terminating_pod_never_scheduled_is_failed() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let pods: Api<Pod> = Api::namespaced(env.client(), &ns);
    pods.create(&PostParams::default(), &pod("unscheduled", None))
        .await
        .unwrap();
    pods.delete("unscheduled", &DeleteParams::default())
        .await
        .unwrap();
    failed_and_deleted(&pods, "unscheduled").await;
    release(&pods, "unscheduled").await;
}
