//! A Manager serving Prometheus metrics and health probes, running one controller.

use k8s_openapi::api::core::v1::ConfigMap;
use kubewright::Api;
use kubewright::core::{ObjectMeta, PostParams};
use kubewright::runtime::controller::Action;
use kubewright::runtime::{InformerParams, Manager};
use kubewright_examples::Connection;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

async fn http_get(addr: std::net::SocketAddr, path: &str) -> std::io::Result<String> {
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await?;
    let mut out = String::new();
    s.read_to_string(&mut out).await?;
    Ok(out)
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    kubewright_examples::exit_code(run().await)
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let conn = Connection::from_env().await?;
    let ns = conn.client.default_namespace().to_string();
    let mut manager = Manager::builder(conn.client.clone())
        .metrics_addr("127.0.0.1:0".parse()?)
        .health_addr("127.0.0.1:0".parse()?)
        .build()?;
    let metrics_addr = manager.metrics_addr().ok_or("no metrics address")?;
    let health_addr = manager.health_addr().ok_or("no health address")?;
    let controller = manager
        .controller::<ConfigMap>(
            InformerParams::all()
                .namespace(&ns)
                .labels("example=metrics"),
        )
        .named("configmap-counter");
    manager.add(
        controller,
        |cm: Arc<ConfigMap>, _ctx: Arc<()>| async move {
            println!(
                "reconciled {}",
                cm.metadata.name.clone().unwrap_or_default()
            );
            Ok::<_, std::convert::Infallible>(Action::await_change())
        },
        Arc::new(()),
    )?;
    let cancel = CancellationToken::new();
    let running = tokio::spawn(manager.run(cancel.clone()));

    let cms: Api<ConfigMap> = Api::namespaced(conn.client.clone(), &ns);
    let cm = ConfigMap {
        metadata: ObjectMeta {
            generate_name: Some("counted-".into()),
            labels: Some([("example".to_string(), "metrics".to_string())].into()),
            ..Default::default()
        },
        ..Default::default()
    };
    cms.create(&PostParams::default(), &cm).await?;

    // Wait (bounded) until ready and the reconcile shows up in the metrics.
    let mut metrics = String::new();
    for _ in 0..100 {
        let ready = http_get(health_addr, "/readyz").await?;
        metrics = http_get(metrics_addr, "/metrics").await?;
        if ready.starts_with("HTTP/1.1 200") && metrics.contains("controller_runtime_reconcile_total{controller=\"configmap-counter\",result=\"success\"} 1") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!(
        "/readyz: {}",
        http_get(health_addr, "/readyz?verbose")
            .await?
            .lines()
            .last()
            .unwrap_or_default()
    );
    for line in metrics.lines().filter(|l| {
        l.starts_with("controller_runtime_reconcile_total")
            || l.starts_with("workqueue_adds_total")
            || l.starts_with("rest_client_requests_total")
    }) {
        println!("{line}");
    }
    cancel.cancel();
    running.await??;
    Ok(())
}
