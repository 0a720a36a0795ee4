//! The Monitor operator: a derived custom resource, a controller that owns a ConfigMap and
//! a Deployment per Monitor (server-side apply), status updates and events.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kubewright::Api;
use kubewright::core::{PostParams, WatchParams};
use kubewright::runtime::events::{EventRecorder, Reporter};
use kubewright::runtime::{InformerParams, Manager};
use kubewright_examples::Connection;
use kubewright_examples::monitor::{Monitor, MonitorContext, MonitorSpec, reconcile};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    kubewright_examples::exit_code(run().await)
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let conn = Connection::from_env().await?;
    let client = conn.client.clone();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    if crds.get_opt(Monitor::crd_name()).await?.is_none() {
        crds.create(&PostParams::default(), &Monitor::crd()).await?;
    }
    // Wait for the CRD to be served (bounded).
    let monitors: Api<Monitor> = Api::default_namespaced(client.clone());
    for _ in 0..100 {
        if monitors.list(&Default::default()).await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let ns = client.default_namespace().to_string();
    let mut manager = Manager::builder(client.clone()).build()?;
    let recorder = EventRecorder::new(client.clone(), Reporter::new("monitor-operator", "example"));
    let ctx = Arc::new(MonitorContext {
        client: client.clone(),
        recorder: Some(recorder.clone()),
    });
    let controller = manager
        .controller::<Monitor>(InformerParams::all().namespace(&ns))
        .owns::<ConfigMap>(InformerParams::all().namespace(&ns))
        .owns::<Deployment>(InformerParams::all().namespace(&ns))
        .named("monitor");
    manager.add(controller, reconcile, ctx)?;
    let cancel = CancellationToken::new();
    let running = tokio::spawn(manager.run(cancel.clone()));

    let m = Monitor::new(
        "homepage",
        MonitorSpec {
            target: "https://example.com".into(),
            interval_seconds: 60,
            replicas: 2,
        },
    );
    monitors.create(&PostParams::default(), &m).await?;
    // Watch the Monitor until its status reports the current generation.
    let wp = WatchParams::default()
        .fields("metadata.name=homepage")
        .timeout(30);
    let mut events = Box::pin(monitors.watch(&wp, "").await?);
    use futures::StreamExt;
    while let Some(ev) = events.next().await {
        if let kubewright::core::WatchEvent::Added(m) | kubewright::core::WatchEvent::Modified(m) =
            ev?
            && let Some(status) = &m.status
            && status.observed_generation == m.metadata.generation
        {
            println!("homepage reconciled: status {status:?}");
            break;
        }
    }
    let deploy = Api::<Deployment>::namespaced(client.clone(), &ns)
        .get("homepage-prober")
        .await?;
    println!(
        "owned Deployment homepage-prober has {:?} replicas",
        deploy.spec.replicas
    );
    cancel.cancel();
    running.await??;
    recorder.shutdown().await;
    Ok(())
}
