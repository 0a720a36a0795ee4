//! The storage object protection controllers' cases beside those of
//! kubewright-client's tests/storage_protection.rs (a claim or class in use outlives its
//! deletion): a volume nothing binds goes when deleted, and a protection finalizer
//! removed from a live object is added back.
#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::VolumeAttributesClass;
use kubewright_client::Api;
use kubewright_core::{DeleteParams, Patch, PatchParams, PostParams, Resource, ResourceExt};
use kubewright_runtime::wait::await_condition;
use kubewright_testing::TestEnv;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;
use std::fmt::Debug;
use std::time::Duration;

/// Waits (60 s at most) until `cond` holds for `name`.
async fn wait_for<K>(api: &Api<K>, name: &str, what: &str, cond: impl Fn(Option<&K>) -> bool)
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug + Send + 'static,
{
    let waited = tokio::time::timeout(
        Duration::from_secs(60),
        await_condition(api.clone(), name, cond),
    )
    .await;
    assert!(
        matches!(waited, Ok(Ok(_))),
        "{name}: {what}: {waited:?}; now {:?}",
        api.get_opt(name).await
    );
}

fn has<K: ResourceExt>(finalizer: &str) -> impl Fn(Option<&K>) -> bool {
    move |o| o.is_some_and(|o| o.finalizers().iter().any(|f| f == finalizer))
}

#[tokio::test]
async fn a_volume_nothing_binds_goes_when_deleted() {
    let env = TestEnv::start().await;
    let volumes: Api<PersistentVolume> = Api::all(env.client());
    let name = env.unique_name("pv-free");
    let pv: PersistentVolume = serde_json::from_value(json!({"metadata": {"name": name},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "hostPath": {"path": "/tmp/kubewright-test"},
            "storageClassName": "kubewright-none"}}))
    .unwrap();
    let created = volumes.create(&PostParams::default(), &pv).await.unwrap();
    assert_eq!(created.finalizers(), ["kubernetes.io/pv-protection"]);
    volumes
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    wait_for(&volumes, &name, "gone", |v: Option<&PersistentVolume>| {
        v.is_none()
    })
    .await;
}

#[tokio::test]
async fn a_protection_finalizer_removed_from_a_live_object_comes_back() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(env.client(), &ns);
    let classes: Api<VolumeAttributesClass> = Api::all(env.client());
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({"metadata": {"name": "c"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
            "storageClassName": "kubewright-none"}}))
    .unwrap();
    claims.create(&PostParams::default(), &claim).await.unwrap();
    let class_name = env.unique_name("vac-back");
    let class: VolumeAttributesClass = serde_json::from_value(json!({
        "metadata": {"name": class_name}, "driverName": "kubewright.test",
        "parameters": {"iops": "100"}}))
    .unwrap();
    classes
        .create(&PostParams::default(), &class)
        .await
        .unwrap();

    let none = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    claims
        .patch("c", &PatchParams::default(), &none)
        .await
        .unwrap();
    classes
        .patch(&class_name, &PatchParams::default(), &none)
        .await
        .unwrap();
    wait_for(
        &claims,
        "c",
        "finalizer back",
        has("kubernetes.io/pvc-protection"),
    )
    .await;
    wait_for(
        &classes,
        &class_name,
        "finalizer back",
        has("kubernetes.io/vac-protection"),
    )
    .await;

    // Nothing uses them: deleted, they go.
    claims.delete("c", &DeleteParams::default()).await.unwrap();
    classes
        .delete(&class_name, &DeleteParams::default())
        .await
        .unwrap();
    wait_for(&claims, "c", "gone", |c: Option<&PersistentVolumeClaim>| {
        c.is_none()
    })
    .await;
    wait_for(
        &classes,
        &class_name,
        "gone",
        |c: Option<&VolumeAttributesClass>| c.is_none(),
    )
    .await;
}
