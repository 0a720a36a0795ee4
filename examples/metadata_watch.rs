//! Metadata-only and multi-namespace watches: watch every namespace's ConfigMaps while
//! transferring only their metadata (labels, annotations, owners), which is what most
//! controllers of "other people's objects" need.

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kubewright::Api;
use kubewright::core::{ObjectMeta, PostParams, WatchEvent, WatchParams};
use kubewright_examples::Connection;
use std::time::Duration;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    kubewright_examples::exit_code(run().await)
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let conn = Connection::from_env().await?;
    let all: Api<ConfigMap> = Api::all(conn.client.clone());
    let wp = WatchParams::default()
        .labels("example=metadata-watch")
        .timeout(20);
    let mut events = Box::pin(all.watch_metadata(&wp, "").await?);
    // Create labelled ConfigMaps in two namespaces.
    for ns in ["default", "kube-public"] {
        let api: Api<ConfigMap> = Api::namespaced(conn.client.clone(), ns);
        let cm = ConfigMap {
            metadata: ObjectMeta {
                generate_name: Some("meta-".into()),
                labels: Some([("example".to_string(), "metadata-watch".to_string())].into()),
                ..Default::default()
            },
            data: Some([("payload".to_string(), "x".repeat(10_000))].into()),
            ..Default::default()
        };
        api.create(&PostParams::default(), &cm).await?;
    }
    let mut seen = 0;
    let deadline = tokio::time::sleep(Duration::from_secs(20));
    tokio::pin!(deadline);
    while seen < 2 {
        tokio::select! {
            ev = events.next() => match ev {
                Some(Ok(WatchEvent::Added(meta))) => {
                    seen += 1;
                    println!("ADDED {}/{} (metadata only: {} labels, no 10 KB payload)",
                        meta.metadata.namespace.unwrap_or_default(), meta.metadata.name.unwrap_or_default(),
                        meta.metadata.labels.map_or(0, |l| l.len()));
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e.into()),
                None => break,
            },
            _ = &mut deadline => break,
        }
    }
    println!("saw {seen} objects across namespaces");
    Ok(())
}
