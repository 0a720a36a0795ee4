//! Storage object protection, as kube-controller-manager's pvc-protection and
//! vac-protection controllers keep it: a deleted PersistentVolumeClaim stays while a
//! scheduled pod uses it and goes once none does; a deleted VolumeAttributesClass stays
//! while a claim names it. Runs against the embedded server, or a real cluster when
//! KUBEWRIGHT_TEST_KUBECONFIG is set.

#![allow(clippy::unwrap_used, clippy::panic)] // test code: a failed unwrap is a failed test

use futures::StreamExt;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::VolumeAttributesClass;
use kubewright_client::Api;
use kubewright_core::{DeleteParams, PostParams, WatchEvent, WatchParams};
use kubewright_testing::TestEnv;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;
use std::fmt::Debug;
use std::time::Duration;

/// Waits (watching, up to 30 s) until `name` is gone.
async fn wait_gone<K>(api: &Api<K>, name: &str)
where
    K: kubewright_core::Resource + Clone + DeserializeOwned + Serialize + Debug + Send + 'static,
{
    let list = api
        .list(&kubewright_core::ListParams::default().fields(&format!("metadata.name={name}")))
        .await
        .unwrap();
    if list.items.is_empty() {
        return;
    }
    let rv = list.metadata.resource_version.unwrap_or_default();
    let wp = WatchParams::default()
        .fields(&format!("metadata.name={name}"))
        .timeout(30);
    let mut events = Box::pin(api.watch(&wp, &rv).await.unwrap());
    let gone = tokio::time::timeout(Duration::from_secs(35), async {
        while let Some(e) = events.next().await {
            if let Ok(WatchEvent::Deleted(_)) = e {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(gone, Ok(true), "{name} was not deleted");
}

fn claim(name: &str, class: Option<&str>) -> PersistentVolumeClaim {
    let mut spec = json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
        "storageClassName": "none"});
    if let Some(c) = class {
        spec["volumeAttributesClassName"] = json!(c);
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}

fn finalizers<
    K: k8s_openapi::Metadata<Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>,
>(
    o: &K,
) -> Vec<String> {
    o.metadata().finalizers.clone().unwrap_or_default()
}

#[tokio::test]
async fn a_claim_in_use_by_a_scheduled_pod_outlives_its_deletion() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let client = env.client();
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(client, &ns);
    let pp = PostParams::default();
    for name in ["free", "used", "unscheduled"] {
        let c = claims.create(&pp, &claim(name, None)).await.unwrap();
        assert_eq!(finalizers(&c), ["kubernetes.io/pvc-protection"]);
    }
    let pod = |name: &str, node: Option<&str>, claim: &str| -> Pod {
        let mut spec = json!({"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
            "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": claim}}]});
        if let Some(n) = node {
            spec["nodeName"] = json!(n);
        }
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
    };
    // Bound to a node that does not exist: nothing runs it, it counts as scheduled.
    let node = env.unique_name("node");
    pods.create(&pp, &pod("scheduled", Some(&node), "used"))
        .await
        .unwrap();
    pods.create(&pp, &pod("pending", None, "unscheduled"))
        .await
        .unwrap();

    let dp = DeleteParams::default();
    for name in ["free", "used", "unscheduled"] {
        claims.delete(name, &dp).await.unwrap();
    }
    // Unused, or used by a pod not scheduled yet: gone.
    wait_gone(&claims, "free").await;
    wait_gone(&claims, "unscheduled").await;
    let used = claims.get("used").await.unwrap();
    assert!(used.metadata.deletion_timestamp.is_some());
    assert_eq!(finalizers(&used), ["kubernetes.io/pvc-protection"]);

    // Once its pod is gone, so is the claim.
    pods.delete("scheduled", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    wait_gone(&claims, "used").await;
}

#[tokio::test]
async fn a_volume_attributes_class_named_by_a_claim_outlives_its_deletion() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let client = env.client();
    let classes: Api<VolumeAttributesClass> = Api::all(client.clone());
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client, &ns);
    let pp = PostParams::default();
    let name = env.unique_name("vac");
    let vac: VolumeAttributesClass = serde_json::from_value(json!({
        "metadata": {"name": name}, "driverName": "x.csi.example.com", "parameters": {"iops": "100"}
    }))
    .unwrap();
    let created = classes.create(&pp, &vac).await.unwrap();
    assert_eq!(finalizers(&created), ["kubernetes.io/vac-protection"]);
    claims
        .create(&pp, &claim("user", Some(&name)))
        .await
        .unwrap();

    classes
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    let kept = classes.get(&name).await.unwrap();
    assert!(kept.metadata.deletion_timestamp.is_some());

    claims
        .delete("user", &DeleteParams::default())
        .await
        .unwrap();
    wait_gone(&claims, "user").await;
    wait_gone(&classes, &name).await;
}
