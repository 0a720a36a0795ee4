//! List pods: the first thing everyone writes. Runs against $KUBECONFIG when set, else
//! against a freshly started embedded API server (where it first creates a pod to list).

use k8s_openapi::api::core::v1::Pod;
use kubewright::core::{ListParams, PostParams};
use kubewright::{Api, ResourceExt};
use kubewright_examples::Connection;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    kubewright_examples::exit_code(run().await)
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let conn = Connection::from_env().await?;
    println!("connected to {}", conn.describe());
    let pods: Api<Pod> = Api::default_namespaced(conn.client.clone());
    if conn.server.is_some() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "hello", "labels": {"app": "hello"}},
            "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}
        }))?;
        pods.create(&PostParams::default(), &pod).await?;
    }
    let list = pods.list(&ListParams::default().limit(500)).await?;
    for p in &list {
        let phase = p
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default();
        println!("{:<40} {phase}", p.name_any());
    }
    println!(
        "{} pod(s) in namespace {}",
        list.items.len(),
        conn.client.default_namespace()
    );
    Ok(())
}
