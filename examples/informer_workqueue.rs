//! The classic controller loop, built by hand: a shared informer feeds a rate-limited
//! work queue, workers reconcile keys read from the informer's cache, and Ctrl-C (or the
//! end of the scripted scenario) shuts everything down gracefully, letting in-flight work
//! finish.
//!
//! The "reconcile" makes sure every ConfigMap labelled `app=echo` has an `echo` key
//! mirroring its `source` key.

use k8s_openapi::api::core::v1::ConfigMap;
use kubewright::core::{ObjectKey, ObjectMeta, Patch, PatchParams, PostParams};
use kubewright::runtime::workqueue::{WorkQueue, default_controller_rate_limiter};
use kubewright::runtime::{HandlerFuncs, InformerParams, SharedInformerFactory};
use kubewright::{Api, ResourceExt};
use kubewright_examples::Connection;
use std::sync::Arc;
use std::time::Duration;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    kubewright_examples::exit_code(run().await)
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let conn = Connection::from_env().await?;
    let client = conn.client.clone();
    let ns = client.default_namespace().to_string();
    let factory = SharedInformerFactory::new(client.clone());
    let informer =
        factory.informer::<ConfigMap>(InformerParams::all().namespace(&ns).labels("app=echo"));
    let queue = WorkQueue::builder()
        .name("echo")
        .rate_limiter(default_controller_rate_limiter())
        .build();

    // Informer events -> keys in the queue (dedup: many events, one reconcile). Adding to
    // the queue never blocks, so the handler runs inline on the informer's task.
    let (q1, q2) = (queue.clone(), queue.clone());
    informer.add_inline_handler(
        HandlerFuncs::new()
            .on_add(move |cm: Arc<ConfigMap>| q1.add(ObjectKey::from_obj(cm.as_ref()).to_string()))
            .on_update(move |_old, cm: Arc<ConfigMap>| {
                q2.add(ObjectKey::from_obj(cm.as_ref()).to_string())
            }),
    );
    factory.start();
    factory.wait_for_cache_sync(Duration::from_secs(30)).await?;

    // Workers: a key is never processed by two workers at once.
    let mut workers = Vec::new();
    for _ in 0..2 {
        let (queue, store, api) = (
            queue.clone(),
            informer.store(),
            Api::<ConfigMap>::namespaced(client.clone(), &ns),
        );
        workers.push(tokio::spawn(async move {
            while let Some(key) = queue.get().await {
                let result = match store.get_by_key(key.as_str()) {
                    Some(cm) => reconcile(&api, &cm).await,
                    None => Ok(()), // deleted: nothing to do
                };
                match result {
                    Ok(()) => queue.forget(&key),
                    Err(e) => {
                        eprintln!("reconcile {key} failed, retrying with backoff: {e}");
                        queue.add_rate_limited(key.clone());
                    }
                }
                queue.done(&key);
            }
        }));
    }

    // The scripted scenario: create, update, then stop.
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some("echo-demo".into()),
            labels: Some([("app".to_string(), "echo".to_string())].into()),
            ..Default::default()
        },
        data: Some([("source".to_string(), "hello".to_string())].into()),
        ..Default::default()
    };
    api.create(&PostParams::default(), &cm).await.or_else(|e| {
        if e.is_already_exists() {
            Ok(cm.clone())
        } else {
            Err(e)
        }
    })?;
    wait_for_echo(&informer.store(), "hello").await;
    api.patch(
        "echo-demo",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"data": {"source": "world"}})),
    )
    .await?;
    wait_for_echo(&informer.store(), "world").await;

    // Graceful shutdown: on Ctrl-C in a long-running controller; here, at the end.
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = tokio::time::sleep(Duration::from_millis(10)) => {}
    }
    queue.shutdown_with_drain().await;
    for w in workers {
        w.await?;
    }
    factory.shutdown().await;
    println!("echo controller stopped cleanly");
    Ok(())
}

async fn reconcile(api: &Api<ConfigMap>, cm: &ConfigMap) -> Result<(), kubewright::Error> {
    let data = cm.data.clone().unwrap_or_default();
    let source = data.get("source").cloned().unwrap_or_default();
    if data.get("echo") == Some(&source) {
        return Ok(()); // converged
    }
    println!("reconcile {}: echo = {source:?}", cm.name_any());
    api.patch(
        &cm.name_any(),
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"data": {"echo": source}})),
    )
    .await?;
    Ok(())
}

async fn wait_for_echo(store: &kubewright::runtime::Store<ConfigMap>, want: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while tokio::time::Instant::now() < deadline {
        let echoed = store.list().iter().any(|cm| {
            cm.data
                .as_ref()
                .and_then(|d| d.get("echo"))
                .map(String::as_str)
                == Some(want)
        });
        if echoed {
            println!("echo = {want:?} observed in the cache");
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!("timed out waiting for echo = {want:?}");
    std::process::exit(1);
}
