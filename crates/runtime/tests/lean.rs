//! Lean informers (`Informer<Lean<K>>`): objects cached as their protobuf message (JSON
//! when the server answers JSON), decoded on read; same store, indexes and handlers. Runs
//! against the embedded server, or a real cluster when KUBEWRIGHT_TEST_KUBECONFIG is set.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use k8s_openapi::api::core::v1::ConfigMap;
use kubewright_client::{Api, ContentType};
use kubewright_core::{ObjectMeta, Patch, PatchParams, PostParams, Resource, ResourceExt};
use kubewright_runtime::lean::Lean;
use kubewright_runtime::{HandlerFuncs, InformerParams, SharedInformerFactory};
use kubewright_testing::TestEnv;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

const LABEL: &str = "kubewright.test/lean";

fn cm(name: &str, run: &str, team: &str, v: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(
                [
                    (LABEL.to_string(), run.to_string()),
                    ("team".to_string(), team.to_string()),
                ]
                .into(),
            ),
            annotations: Some([("note".to_string(), "x".repeat(200))].into()),
            ..Default::default()
        },
        data: Some([("v".to_string(), v.to_string())].into()),
        ..Default::default()
    }
}

async fn lean_informer(content_type: ContentType) {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    let run = format!("t{:08x}", rand::random::<u32>());
    for (i, team) in ["a", "b", "a"].iter().enumerate() {
        api.create(
            &PostParams::default(),
            &cm(&format!("c{i}"), &run, team, "0"),
        )
        .await
        .unwrap();
    }
    let factory = SharedInformerFactory::new(env.client()).content_type(content_type);
    let informer = factory.informer::<Lean<ConfigMap>>(
        InformerParams::default()
            .namespace(&ns)
            .labels(&format!("{LABEL}={run}")),
    );
    informer
        .store()
        .add_indexer("team", |o: &Lean<ConfigMap>| {
            o.labels().get("team").cloned().into_iter().collect()
        })
        .unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel::<(String, String)>();
    let tx2 = tx.clone();
    informer.add_handler(
        HandlerFuncs::new()
            .on_add(move |o: Arc<Lean<ConfigMap>>| {
                let obj = o.object().unwrap();
                let _ = tx.send((o.name_any(), obj.data.as_ref().unwrap()["v"].clone()));
            })
            .on_update(
                move |_old: Arc<Lean<ConfigMap>>, new: Arc<Lean<ConfigMap>>| {
                    let obj = new.object().unwrap();
                    let _ = tx2.send((new.name_any(), obj.data.as_ref().unwrap()["v"].clone()));
                },
            ),
    );
    factory.start();
    factory
        .wait_for_cache_sync(Duration::from_secs(30))
        .await
        .unwrap();

    let store = informer.store();
    assert_eq!(store.len(), 3);
    let lean = store.get_by_name(Some(&ns), "c1").unwrap();
    assert_eq!(lean.is_protobuf(), content_type == ContentType::Protobuf);
    // The kept metadata: keys, labels, versions; no managedFields, no annotations.
    assert_eq!(lean.namespace(), Some(ns.as_str()));
    assert!(lean.resource_version().is_some() && lean.uid().is_some());
    assert!(lean.meta().managed_fields.is_none() && lean.meta().annotations.is_none());
    // The object decodes to what the server holds, minus managedFields.
    let mut want = api.get("c1").await.unwrap();
    want.metadata.managed_fields = None;
    assert_eq!(lean.decode().unwrap(), want);
    assert_eq!(*lean.object().unwrap(), want);
    let json_len = serde_json::to_vec(&want).unwrap().len();
    if lean.is_protobuf() {
        assert!(
            lean.encoded_len() < json_len,
            "{} >= {json_len}",
            lean.encoded_len()
        );
    } else {
        assert_eq!(lean.encoded_len(), json_len);
    }
    // Indexes were computed as the objects arrived.
    let mut team_a: Vec<String> = store
        .by_index("team", "a")
        .unwrap()
        .iter()
        .map(|o| o.name_any())
        .collect();
    team_a.sort();
    assert_eq!(team_a, ["c0", "c2"]);

    // Handlers see the decoded objects of every change.
    let mut seen = Vec::new();
    while seen.len() < 3 {
        seen.push(
            tokio::time::timeout(Duration::from_secs(10), rx.recv())
                .await
                .unwrap()
                .unwrap(),
        );
    }
    api.patch(
        "c2",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "7"}})),
    )
    .await
    .unwrap();
    loop {
        let (name, v) = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .unwrap()
            .unwrap();
        if name == "c2" && v == "7" {
            break;
        }
    }
    let c2 = store.get_by_name(Some(&ns), "c2").unwrap();
    assert_eq!(c2.object().unwrap().data.as_ref().unwrap()["v"], "7");
    assert_eq!(
        c2.object().unwrap().metadata.annotations.as_ref().unwrap()["note"].len(),
        200
    );
    factory.shutdown().await;
}

#[tokio::test]
async fn lean_informer_over_protobuf() {
    lean_informer(ContentType::Protobuf).await;
}

#[tokio::test]
async fn lean_informer_over_json() {
    lean_informer(ContentType::Json).await;
}
