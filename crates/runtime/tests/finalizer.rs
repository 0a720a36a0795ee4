//! Finalizer helper integration tests: run against the embedded server, or a real
//! cluster when KUBEWRIGHT_TEST_KUBECONFIG is set. Each test uses its own namespace and
//! removes every finalizer it added (even when it fails), so that the namespace can go.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kubewright_client::Api;
use kubewright_core::{
    DeleteParams, ObjectMeta, Patch, PatchParams, PostParams, ResourceExt, WatchEvent, WatchParams,
};
use kubewright_runtime::finalizer::{FinalizerError, FinalizerEvent, finalizer, finalizer_with};
use kubewright_testing::TestEnv;
use serde_json::json;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

const MINE: &str = "kubewright.test/mine";
const OTHER_A: &str = "kubewright.test/other-a";
const OTHER_B: &str = "kubewright.test/other-b";

#[derive(Debug, thiserror::Error)]
#[error("reconcile failed")]
struct ReconcileError;

type Outcome = Result<&'static str, FinalizerError<ReconcileError>>;

fn cm(name: &str, finalizers: &[&str]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            finalizers: (!finalizers.is_empty())
                .then(|| finalizers.iter().map(|f| f.to_string()).collect()),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Runs `body`, then strips every finalizer from `name` whatever happened (a stuck
/// finalizer would keep a real cluster's namespace terminating forever).
async fn with_cleanup<F>(api: Api<ConfigMap>, name: &str, body: F)
where
    F: Future<Output = ()> + Send + 'static,
{
    let result = tokio::spawn(body).await;
    let strip = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    let _ = api.patch(name, &PatchParams::default(), &strip).await;
    if let Err(e) = result {
        std::panic::resume_unwind(e.into_panic());
    }
}

/// Waits (on a watch) until `name` is gone.
async fn wait_gone(api: &Api<ConfigMap>, name: &str) {
    let wp = WatchParams::default()
        .fields(&format!("metadata.name={name}"))
        .timeout(30);
    let gone = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            if api.get_opt(name).await.unwrap().is_none() {
                return;
            }
            let stream = api.watch(&wp, "").await.unwrap();
            let mut stream = std::pin::pin!(stream);
            while let Some(ev) = stream.next().await {
                if let Ok(WatchEvent::Deleted(_)) = ev {
                    return;
                }
            }
        }
    })
    .await;
    assert!(gone.is_ok(), "{name} was not deleted");
}

type ReconcileFuture =
    std::pin::Pin<Box<dyn Future<Output = Result<&'static str, ReconcileError>> + Send>>;

fn apply_or_cleanup(
    applies: &Arc<AtomicUsize>,
    cleanups: &Arc<AtomicUsize>,
) -> impl FnOnce(FinalizerEvent<ConfigMap>) -> ReconcileFuture {
    let (a, c) = (applies.clone(), cleanups.clone());
    move |ev| {
        Box::pin(async move {
            match ev {
                FinalizerEvent::Apply(obj) => {
                    assert!(obj.finalizers().iter().any(|f| f == MINE));
                    assert!(!obj.is_being_deleted());
                    a.fetch_add(1, Ordering::SeqCst);
                    Ok("applied")
                }
                FinalizerEvent::Cleanup(obj) => {
                    assert!(obj.is_being_deleted());
                    c.fetch_add(1, Ordering::SeqCst);
                    Ok("cleaned")
                }
            }
        })
    }
}

#[tokio::test]
async fn add_then_cleanup_then_gone() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    let name = "lifecycle";
    api.create(&PostParams::default(), &cm(name, &[]))
        .await
        .unwrap();
    let body_api = api.clone();
    with_cleanup(api.clone(), name, async move {
        let api = body_api;
        let (applies, cleanups) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));

        // First reconcile: the finalizer is added, then Apply runs.
        let obj = Arc::new(api.get(name).await.unwrap());
        let r: Outcome = finalizer(&api, MINE, obj, apply_or_cleanup(&applies, &cleanups)).await;
        assert_eq!(r.unwrap(), "applied");
        let stored = api.get(name).await.unwrap();
        assert_eq!(stored.finalizers(), [MINE.to_string()]);

        // Second reconcile: nothing to add, Apply runs, no write.
        let rv = stored.resource_version().map(str::to_string);
        let r: Outcome = finalizer(
            &api,
            MINE,
            Arc::new(stored),
            apply_or_cleanup(&applies, &cleanups),
        )
        .await;
        assert_eq!(r.unwrap(), "applied");
        assert_eq!(
            api.get(name)
                .await
                .unwrap()
                .resource_version()
                .map(str::to_string),
            rv
        );
        assert_eq!(applies.load(Ordering::SeqCst), 2);

        // Delete: the object stays (our finalizer) with a deletionTimestamp.
        let deleting = api
            .delete(name, &DeleteParams::default())
            .await
            .unwrap()
            .object()
            .expect("still there");
        assert!(deleting.is_being_deleted());

        // A failing cleanup keeps the finalizer.
        let r: Result<(), FinalizerError<ReconcileError>> =
            finalizer(&api, MINE, Arc::new(deleting.clone()), |_| async {
                Err(ReconcileError)
            })
            .await;
        assert!(matches!(r, Err(FinalizerError::CleanupFailed(_))));
        assert_eq!(
            api.get(name).await.unwrap().finalizers(),
            [MINE.to_string()]
        );

        // A successful cleanup removes the finalizer, and the object goes.
        let r: Outcome = finalizer(
            &api,
            MINE,
            Arc::new(deleting),
            apply_or_cleanup(&applies, &cleanups),
        )
        .await;
        assert_eq!(r.unwrap(), "cleaned");
        assert_eq!(cleanups.load(Ordering::SeqCst), 1);
        wait_gone(&api, name).await;
    })
    .await;
}

#[tokio::test]
async fn being_deleted_without_our_finalizer_does_nothing() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    let name = "not-ours";
    api.create(&PostParams::default(), &cm(name, &[OTHER_A]))
        .await
        .unwrap();
    let body_api = api.clone();
    with_cleanup(api.clone(), name, async move {
        let api = body_api;
        let deleting = api
            .delete(name, &DeleteParams::default())
            .await
            .unwrap()
            .object()
            .unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        let ran2 = ran.clone();
        let r: Result<&'static str, FinalizerError<ReconcileError>> =
            finalizer(&api, MINE, Arc::new(deleting), move |_| async move {
                ran2.fetch_add(1, Ordering::SeqCst);
                Ok("ran")
            })
            .await;
        // Nothing ran: the default value comes back.
        assert_eq!(r.unwrap(), "");
        assert_eq!(ran.load(Ordering::SeqCst), 0);
        assert_eq!(
            api.get(name).await.unwrap().finalizers(),
            [OTHER_A.to_string()]
        );
    })
    .await;
}

#[tokio::test]
async fn concurrent_finalizer_writers_lose_nothing() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    let name = "contended";
    api.create(&PostParams::default(), &cm(name, &[OTHER_A]))
        .await
        .unwrap();
    let body_api = api.clone();
    with_cleanup(api.clone(), name, async move {
        let api = body_api;
        let (applies, cleanups) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));

        // We read the object; then another writer adds its finalizer.
        let stale = Arc::new(api.get(name).await.unwrap());
        let add_b = Patch::Json(json!([
            {"op": "add", "path": "/metadata/finalizers/-", "value": OTHER_B}
        ]));
        api.patch(name, &PatchParams::default(), &add_b)
            .await
            .unwrap();
        // Our add (from the stale copy) must not drop theirs.
        let r: Outcome = finalizer(
            &api,
            MINE,
            stale.clone(),
            apply_or_cleanup(&applies, &cleanups),
        )
        .await;
        assert_eq!(r.unwrap(), "applied");
        assert_eq!(
            api.get(name).await.unwrap().finalizers(),
            [OTHER_A.to_string(), OTHER_B.to_string(), MINE.to_string()]
        );

        // Five controllers add their finalizers at once, all from the same stale copy.
        let names: Vec<String> = (0..5).map(|i| format!("kubewright.test/c{i}")).collect();
        let adds = names.iter().map(|f| {
            let (api, stale, f) = (api.clone(), stale.clone(), f.clone());
            async move {
                let r: Result<(), FinalizerError<ReconcileError>> =
                    finalizer(&api, &f, stale, |_| async { Ok(()) }).await;
                r.unwrap();
            }
        });
        futures::future::join_all(adds).await;
        let after = api.get(name).await.unwrap();
        let mut expected = vec![OTHER_A.to_string(), OTHER_B.to_string(), MINE.to_string()];
        expected.extend(names.iter().cloned());
        let mut got = after.finalizers().to_vec();
        got.sort();
        expected.sort();
        assert_eq!(got, expected, "a concurrent add was lost");

        // Deletion. We read the object; then another writer removes its finalizer
        // (shifting ours to another index).
        api.delete(name, &DeleteParams::default()).await.unwrap();
        let stale_deleting = Arc::new(api.get(name).await.unwrap());
        assert!(stale_deleting.is_being_deleted());
        let idx_a = stale_deleting
            .finalizers()
            .iter()
            .position(|f| f == OTHER_A)
            .unwrap();
        let remove_a = Patch::Json(json!([
            {"op": "test", "path": format!("/metadata/finalizers/{idx_a}"), "value": OTHER_A},
            {"op": "remove", "path": format!("/metadata/finalizers/{idx_a}")}
        ]));
        api.patch(name, &PatchParams::default(), &remove_a)
            .await
            .unwrap();
        let r: Outcome = finalizer(
            &api,
            MINE,
            stale_deleting.clone(),
            apply_or_cleanup(&applies, &cleanups),
        )
        .await;
        assert_eq!(r.unwrap(), "cleaned");
        let mut left = api.get(name).await.unwrap().finalizers().to_vec();
        left.sort();
        let mut want: Vec<String> = names.clone();
        want.push(OTHER_B.to_string());
        want.sort();
        assert_eq!(left, want, "removing ours must leave the others intact");

        // The five controllers clean up concurrently, from the same stale copy.
        let removes = names.iter().map(|f| {
            let (api, stale, f) = (api.clone(), stale_deleting.clone(), f.clone());
            async move {
                let r: Result<(), FinalizerError<ReconcileError>> =
                    finalizer(&api, &f, stale, |ev| async move {
                        assert!(matches!(ev, FinalizerEvent::Cleanup(_)));
                        Ok(())
                    })
                    .await;
                r.unwrap();
            }
        });
        futures::future::join_all(removes).await;
        assert_eq!(
            api.get(name).await.unwrap().finalizers(),
            [OTHER_B.to_string()]
        );

        // The last finalizer goes, and with it the object.
        let remove_b = Patch::Json(json!([
            {"op": "test", "path": "/metadata/finalizers/0", "value": OTHER_B},
            {"op": "remove", "path": "/metadata/finalizers/0"}
        ]));
        api.patch(name, &PatchParams::default(), &remove_b)
            .await
            .unwrap();
        wait_gone(&api, name).await;
    })
    .await;
}

/// `finalizer_with` writes the finalizer list as the given field manager.
#[tokio::test]
async fn finalizer_writes_carry_the_field_manager() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    let name = "managed";
    // With data: kube-apiserver tracks no field managers on an object created empty.
    let mut with_data = cm(name, &[]);
    with_data.data = Some([("k".to_string(), "v".to_string())].into());
    api.create(&PostParams::default(), &with_data)
        .await
        .unwrap();
    let body_api = api.clone();
    with_cleanup(api.clone(), name, async move {
        let api = body_api;
        let params = PatchParams {
            field_manager: Some("backup-operator".into()),
            ..Default::default()
        };
        let obj = Arc::new(api.get(name).await.unwrap());
        let r: Result<(), FinalizerError<ReconcileError>> =
            finalizer_with(&api, MINE, &params, obj, |_| async { Ok(()) }).await;
        r.unwrap();
        let got = api.get(name).await.unwrap();
        assert_eq!(got.finalizers(), [MINE]);
        let managers: Vec<(String, bool)> = got
            .metadata
            .managed_fields
            .unwrap_or_default()
            .into_iter()
            .map(|m| {
                let owns_finalizers = m
                    .fields_v1
                    .map(|f| f.0.pointer("/f:metadata/f:finalizers").is_some())
                    .unwrap_or(false);
                (m.manager.unwrap_or_default(), owns_finalizers)
            })
            .collect();
        assert!(
            managers.contains(&("backup-operator".to_string(), true)),
            "{managers:?}"
        );
        // Removal goes through the same manager (and succeeds).
        api.delete(name, &DeleteParams::default()).await.unwrap();
        let deleting = Arc::new(api.get(name).await.unwrap());
        let r: Result<(), FinalizerError<ReconcileError>> =
            finalizer_with(&api, MINE, &params, deleting, |_| async { Ok(()) }).await;
        r.unwrap();
        wait_gone(&api, name).await;
    })
    .await;
}
