//! Pod I/O through the client, against the embedded server (or a real cluster when
//! KUBEWRIGHT_TEST_KUBECONFIG is set): errors for a pod that runs nowhere, eviction and
//! PodDisruptionBudgets. The protocol details are in `tests/pod_io.rs`.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Container, Pod, PodCondition, PodSpec, PodStatus};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kubewright_client::pod::{AttachParams, EvictParams, LogParams};
use kubewright_client::{Api, Error};
use kubewright_core::{ObjectMeta, Patch, PatchParams, PostParams};
use kubewright_testing::TestEnv;
use serde_json::json;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

fn pod(name: &str, app: &str, containers: &[&str]) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([("app".to_string(), app.to_string())])),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: containers
                .iter()
                .map(|c| Container {
                    name: c.to_string(),
                    image: Some("busybox".into()),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_pod_without_a_node_has_no_logs_and_runs_nothing() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let pods: Api<Pod> = Api::namespaced(env.client(), &ns);
    pods.create(&PostParams::default(), &pod("idle", "idle", &["app"]))
        .await
        .unwrap();
    // kube-apiserver answers 204 No Content: no node, no log yet.
    assert_eq!(pods.logs("idle", &LogParams::default()).await.unwrap(), "");
    let follow = LogParams {
        follow: true,
        ..Default::default()
    };
    let lines: Vec<_> = pods
        .log_stream("idle", &follow)
        .await
        .unwrap()
        .collect()
        .await;
    assert!(lines.is_empty(), "{lines:?}");
    let err = pods
        .exec("idle", ["true"], &AttachParams::default())
        .await
        .unwrap_err();
    assert!(err.is_bad_request(), "{err}");
    assert!(
        err.to_string().contains("does not have a host assigned"),
        "{err}"
    );

    let two = pod("two", "two", &["a", "b"]);
    pods.create(&PostParams::default(), &two).await.unwrap();
    let err = pods.logs("two", &LogParams::default()).await.unwrap_err();
    assert!(err.is_bad_request(), "{err}");
    assert_eq!(
        err.status().unwrap().message,
        "a container name must be specified for pod two, choose one of: [a b]"
    );
    let err = pods
        .logs(
            "two",
            &LogParams {
                container: Some("zz".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert!(err.is_bad_request(), "{err}");
    assert_eq!(
        err.status().unwrap().message,
        "container zz is not valid for pod two"
    );
    let err = pods
        .logs("missing", &LogParams::default())
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err}");
}

/// Marks a pod Running and Ready through its status, as a kubelet would.
async fn make_ready(pods: &Api<Pod>, name: &str) {
    let status = PodStatus {
        phase: Some("Running".into()),
        conditions: Some(vec![PodCondition {
            type_: "Ready".into(),
            status: "True".into(),
            ..Default::default()
        }]),
        ..Default::default()
    };
    pods.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": status })),
    )
    .await
    .unwrap();
}

/// Waits until the disruption controller has computed the budget's status for its
/// current generation with `allowed` disruptions.
async fn budget_settles(pdbs: &Api<PodDisruptionBudget>, name: &str, allowed: i32) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let pdb = pdbs.get(name).await.unwrap();
        let status = pdb.status.clone().unwrap_or_default();
        if status.observed_generation == pdb.metadata.generation
            && status.disruptions_allowed.unwrap_or_default() == allowed
            && status.expected_pods == Some(2)
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "budget {name} never allowed {allowed} disruptions: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn eviction_waits_for_the_disruption_budget() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let pods: Api<Pod> = Api::namespaced(env.client(), &ns);
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(env.client(), &ns);
    for name in ["web-0", "web-1"] {
        pods.create(&PostParams::default(), &pod(name, "web", &["app"]))
            .await
            .unwrap();
        make_ready(&pods, name).await;
    }
    let budget = PodDisruptionBudget {
        metadata: ObjectMeta {
            name: Some("web".into()),
            ..Default::default()
        },
        spec: Some(PodDisruptionBudgetSpec {
            min_available: Some(IntOrString::Int(2)),
            selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([("app".to_string(), "web".to_string())])),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    pdbs.create(&PostParams::default(), &budget).await.unwrap();
    budget_settles(&pdbs, "web", 0).await;

    let err = pods
        .evict("web-0", &EvictParams::default())
        .await
        .unwrap_err();
    let Error::EvictionBlocked(status) = &err else {
        panic!("expected a blocked eviction, got {err}");
    };
    assert_eq!(status.code, 429);
    assert_eq!(
        status.message,
        "Cannot evict pod as it would violate the pod's disruption budget."
    );
    let cause = &status.details.as_ref().unwrap().causes[0];
    assert_eq!(cause.reason, "DisruptionBudget");
    assert_eq!(
        cause.message,
        "The disruption budget web needs 2 healthy pods and has 2 currently"
    );
    assert!(pods.get_opt("web-0").await.unwrap().is_some());

    pdbs.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({ "spec": { "minAvailable": 1 } })),
    )
    .await
    .unwrap();
    budget_settles(&pdbs, "web", 1).await;
    let status = pods.evict("web-0", &EvictParams::default()).await.unwrap();
    assert_eq!(status.status, "Success");
    // The pod is deleting (a real kubelet would finish it) or gone.
    let left = pods.get_opt("web-0").await.unwrap();
    assert!(
        left.as_ref()
            .is_none_or(|p| p.metadata.deletion_timestamp.is_some()),
        "{left:?}"
    );
}

#[tokio::test]
async fn a_pending_pod_is_evicted_whatever_the_budget() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let pods: Api<Pod> = Api::namespaced(env.client(), &ns);
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(env.client(), &ns);
    pods.create(&PostParams::default(), &pod("pending", "p", &["app"]))
        .await
        .unwrap();
    let budget = PodDisruptionBudget {
        metadata: ObjectMeta {
            name: Some("p".into()),
            ..Default::default()
        },
        spec: Some(PodDisruptionBudgetSpec {
            max_unavailable: Some(IntOrString::Int(0)),
            selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([("app".to_string(), "p".to_string())])),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    pdbs.create(&PostParams::default(), &budget).await.unwrap();
    // kube-apiserver skips the budget for pods that are not running yet.
    let status = pods
        .evict("pending", &EvictParams::default())
        .await
        .unwrap();
    assert_eq!(status.status, "Success");
}
