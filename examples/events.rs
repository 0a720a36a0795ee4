//! Events (`events.k8s.io/v1`) with the recorder: publishing never blocks, repeated
//! events are aggregated into a series, and a spam filter protects the API server.

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event as K8sEvent;
use kubewright::Api;
use kubewright::core::{ListParams, ObjectMeta, PostParams};
use kubewright::runtime::events::{Event, EventRecorder, EventType, Reporter, object_reference};
use kubewright_examples::Connection;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    kubewright_examples::exit_code(run().await)
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let conn = Connection::from_env().await?;
    let ns = conn.client.default_namespace().to_string();
    let cms: Api<ConfigMap> = Api::namespaced(conn.client.clone(), &ns);
    let cm = ConfigMap {
        metadata: ObjectMeta {
            generate_name: Some("evented-".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let cm = cms.create(&PostParams::default(), &cm).await?;
    let regarding = object_reference(&cm);

    let recorder = EventRecorder::new(
        conn.client.clone(),
        Reporter::new("example-controller", "example-pod-1"),
    );
    for _ in 0..5 {
        // Non-blocking: queued and written in the background.
        recorder.publish(
            &regarding,
            Event::new(EventType::Normal, "Synced", "Sync").note("configuration synced"),
        );
    }
    recorder.publish(
        &regarding,
        Event::new(EventType::Warning, "Invalid", "Validate").note("key 'x' is not allowed"),
    );
    recorder.shutdown().await; // flush
    println!("recorder stats: {:?}", recorder.stats());

    let events: Api<K8sEvent> = Api::namespaced(conn.client.clone(), &ns);
    for e in events.list(&ListParams::default()).await? {
        if e.regarding.as_ref().and_then(|r| r.name.as_deref()) != cm.metadata.name.as_deref() {
            continue;
        }
        let count = e.series.as_ref().map_or(1, |s| s.count);
        println!(
            "{:<8} {:<8} x{count:<3} {}",
            e.type_.unwrap_or_default(),
            e.reason.unwrap_or_default(),
            e.note.unwrap_or_default()
        );
    }
    Ok(())
}
