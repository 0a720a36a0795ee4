//! Your first operator, end to end (docs/first-operator.md): installs the `Backup` CRD,
//! runs the operator under a Manager with leader election, metrics and probes, creates a
//! Backup, waits for it to be Ready, checks its ConfigMap, Event and metrics, deletes it
//! (the finalizer's cleanup runs first), and removes the CRD again.
//!
//! `cargo run -p kubewright-examples --example first_operator` runs it on the embedded
//! API server; with `KUBECONFIG` set, on that cluster.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kubewright::core::{DeleteParams, ListParams, PostParams};
use kubewright::runtime::wait::{await_condition, conditions};
use kubewright::runtime::{CancellationToken, InformerParams, LeaderElection, Manager};
use kubewright::{Api, ResourceExt};
use kubewright_examples::Connection;
use kubewright_examples::backup::{self, Backup, BackupSpec};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Every wait of this example ends after this.
const DEADLINE: Duration = Duration::from_secs(60);

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    kubewright_examples::exit_code(run().await)
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let conn = Connection::from_env().await?;
    let client = conn.client.clone();
    println!("operator against {}", conn.describe());

    // The CRD, generated from `BackupSpec`; a real deployment ships it as a manifest.
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    if crds.get_opt(Backup::crd_name()).await?.is_none() {
        crds.create(&PostParams::default(), &Backup::crd()).await?;
    }
    let established = await_condition(
        crds.clone(),
        Backup::crd_name(),
        conditions::is_crd_established(),
    );
    tokio::time::timeout(DEADLINE, established).await??;

    // The manager: one namespace cached, leader election over a Lease, metrics and probes
    // on ports the OS picks (a deployment would use fixed ones, e.g. 8080 and 8081).
    let ns = client.default_namespace().to_string();
    let mut manager = Manager::builder(client.clone())
        .cache_defaults(InformerParams::all().namespace(&ns))
        .leader_election(LeaderElection::new(&ns, "backup-operator"))
        .metrics_addr("127.0.0.1:0".parse()?)
        .health_addr("127.0.0.1:0".parse()?)
        .build()?;
    backup::add_to(&mut manager)?;
    let (metrics, health) = (manager.metrics_addr(), manager.health_addr());
    let cancel = CancellationToken::new();
    let running = tokio::spawn(manager.run(cancel.clone()));

    // A user creates a Backup (the resource may 404 for a moment after Established).
    let backups: Api<Backup> = Api::namespaced(client.clone(), &ns);
    let nightly = Backup::new(
        "nightly",
        BackupSpec {
            source: "data-postgres-0".into(),
            schedule: "0 3 * * *".into(),
            retain: 7,
        },
    );
    let started = tokio::time::Instant::now();
    let created = loop {
        match backups.create(&PostParams::default(), &nightly).await {
            Ok(b) => break b,
            Err(e) if e.is_not_found() && started.elapsed() < DEADLINE => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => return Err(e.into()),
        }
    };

    // Ready, with its ConfigMap owned by the Backup.
    let ready = await_condition(backups.clone(), "nightly", |b: Option<&Backup>| {
        b.is_some_and(Backup::is_ready)
    });
    tokio::time::timeout(DEADLINE, ready).await??;
    let cm = Api::<ConfigMap>::namespaced(client.clone(), &ns)
        .get(&backup::config_map_name("nightly"))
        .await?;
    let owner = cm.owner_references().first().map(|o| o.name.clone());
    println!(
        "nightly is Ready; {} holds schedule {:?}, owned by {owner:?}",
        cm.name_any(),
        cm.data.as_ref().and_then(|d| d.get("schedule"))
    );
    if owner.as_deref() != Some("nightly") {
        return Err("the ConfigMap is not owned by its Backup".into());
    }

    // Deleting it runs the cleanup behind the finalizer, then it goes.
    let uid = created.uid().unwrap_or_default();
    backups.delete("nightly", &DeleteParams::default()).await?;
    let gone = await_condition(backups.clone(), "nightly", conditions::is_deleted(uid));
    tokio::time::timeout(DEADLINE, gone).await??;
    println!("nightly deleted after its cleanup");

    // Metrics and probes while it runs.
    let readyz = http_get(health.ok_or("no health address")?, "/readyz").await?;
    let text = http_get(metrics.ok_or("no metrics address")?, "/metrics").await?;
    let cleanups = text
        .lines()
        .find(|l| l.starts_with("backup_cleanups_total"))
        .unwrap_or("backup_cleanups_total (missing)");
    println!(
        "/readyz: {}; {cleanups}",
        readyz.lines().next().unwrap_or("")
    );
    if !cleanups.ends_with(" 1") {
        return Err(format!("expected one cleanup, got {cleanups}").into());
    }

    // Stop: reconciles in flight finish, the Lease is released and pending Events are
    // written before `run` returns.
    cancel.cancel();
    running.await??;
    let events = Api::<Event>::namespaced(client.clone(), &ns)
        .list(&ListParams::default())
        .await?;
    let ours: Vec<String> = events
        .items
        .iter()
        .filter(|e| e.reporting_controller.as_deref() == Some(backup::REPORTER))
        .filter(|e| e.regarding.as_ref().and_then(|r| r.uid.as_deref()) == Some(uid))
        .filter_map(|e| e.reason.clone())
        .collect();
    println!("events: {ours:?}");
    if !(ours.contains(&"Scheduled".to_string()) && ours.contains(&"CleanedUp".to_string())) {
        return Err("the operator's Events are missing".into());
    }

    // Leave the cluster as it was.
    crds.delete(Backup::crd_name(), &DeleteParams::default())
        .await?;
    Api::<Lease>::namespaced(client.clone(), &ns)
        .delete("backup-operator", &DeleteParams::default())
        .await?;
    Ok(())
}

/// A plain HTTP GET of `path` on `addr`: status line and body.
async fn http_get(addr: std::net::SocketAddr, path: &str) -> std::io::Result<String> {
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await?;
    let mut out = String::new();
    s.read_to_string(&mut out).await?;
    Ok(out)
}
