//! `wait::await_condition` against the embedded server, or a real cluster when
//! KUBEWRIGHT_TEST_KUBECONFIG is set.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use k8s_openapi::api::core::v1::ConfigMap;
use kubewright_client::Api;
use kubewright_core::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kubewright_runtime::wait::{Condition, await_condition, conditions};
use kubewright_testing::TestEnv;
use serde_json::json;
use std::time::Duration;

const DEADLINE: Duration = Duration::from_secs(30);

fn has_key(key: &'static str) -> impl Condition<ConfigMap> {
    move |cm: Option<&ConfigMap>| {
        cm.and_then(|c| c.data.as_ref())
            .is_some_and(|d| d.contains_key(key))
    }
}

#[tokio::test]
async fn waits_for_creation_a_change_and_deletion() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);

    // Already true: returns at once with the object (here: absent).
    let none = await_condition(api.clone(), "later", |c: Option<&ConfigMap>| c.is_none())
        .await
        .unwrap();
    assert!(none.is_none());

    // Creation and a later change, made while the wait is under way.
    let waiting = tokio::spawn(await_condition(api.clone(), "later", has_key("ready")));
    let writer = api.clone();
    let created = writer
        .create(
            &PostParams::default(),
            &ConfigMap {
                metadata: ObjectMeta {
                    name: Some("later".into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .unwrap();
    writer
        .patch(
            "later",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"ready": "yes"}})),
        )
        .await
        .unwrap();
    let seen = tokio::time::timeout(DEADLINE, waiting)
        .await
        .expect("the change was not seen")
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(seen.data.unwrap()["ready"], "yes");

    // Deletion of this very object (by uid).
    let uid = created.metadata.uid.unwrap();
    let gone = tokio::spawn({
        let api = api.clone();
        async move { await_condition(api, "later", conditions::is_deleted(&uid)).await }
    });
    api.delete("later", &DeleteParams::default()).await.unwrap();
    let last = tokio::time::timeout(DEADLINE, gone)
        .await
        .expect("the deletion was not seen")
        .unwrap()
        .unwrap();
    assert!(last.is_none());
}
