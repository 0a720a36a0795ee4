//! `kw demo`: an operator end to end. Starts the embedded API server (or uses a real
//! cluster), installs the Monitor CRD, runs two Managers with leader election over the
//! Monitor controller, drives a scripted scenario, and checks the end state.

use crate::Connection;
use crate::cutter::Cutter;
use crate::monitor::{Monitor, MonitorContext, MonitorSpec, owned_names, reconcile};
use indicatif::{ProgressBar, ProgressStyle};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kubewright::core::{ObjectMeta, Patch, PatchParams, PostParams};
use kubewright::runtime::controller::ReconcileResult;
use kubewright::runtime::events::{EventRecorder, Reporter};
use kubewright::runtime::{InformerParams, LeaderElection, Manager};
use kubewright::{Api, Client};
use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

type DemoResult<T> = Result<T, String>;

struct Ui {
    bar: Option<ProgressBar>,
    started: Instant,
}

impl Ui {
    fn new(steps: u64) -> Self {
        let bar = std::io::stdout().is_terminal().then(|| {
            let b = ProgressBar::new(steps);
            b.set_style(
                ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            b.enable_steady_tick(Duration::from_millis(100));
            b
        });
        Self {
            bar,
            started: Instant::now(),
        }
    }
    fn step(&self, msg: &str) {
        match &self.bar {
            Some(b) => b.set_message(msg.to_string()),
            None => println!("[{:>6.2}s] {msg} ...", self.started.elapsed().as_secs_f64()),
        }
    }
    fn done(&self, msg: &str) {
        match &self.bar {
            Some(b) => {
                b.println(format!("  ok  {msg}"));
                b.inc(1);
            }
            None => println!(
                "[{:>6.2}s]   ok: {msg}",
                self.started.elapsed().as_secs_f64()
            ),
        }
    }
    fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

/// Polls `check` until it returns true or the deadline passes.
async fn wait_until<F, Fut>(what: &str, timeout: Duration, mut check: F) -> DemoResult<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if check().await {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(format!("timed out after {timeout:?} waiting for {what}"))
}

/// Merge-patches `spec` into a Monitor, then waits until the operator has converged it to
/// `replicas` probers of `target`.
async fn update_and_wait<F, Fut>(
    monitors: &Api<Monitor>,
    name: &str,
    spec: serde_json::Value,
    what: &str,
    converged: F,
) -> DemoResult<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    monitors
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "spec": spec })),
        )
        .await
        .map_err(|e| format!("update {name}: {e}"))?;
    wait_until(what, Duration::from_secs(60), converged).await
}

#[derive(Default)]
struct Stats {
    reconciles: u64,
    errors: u64,
    durations: Vec<Duration>,
}

struct Operator {
    cancel: CancellationToken,
    leading: tokio::sync::watch::Receiver<bool>,
    handle: tokio::task::JoinHandle<()>,
    recorder: EventRecorder,
}

fn start_manager(
    client: &Client,
    ns: &str,
    identity: &str,
    stats: Arc<Mutex<Stats>>,
) -> DemoResult<Operator> {
    let le = LeaderElection::new(ns, "monitor-operator")
        .identity(identity)
        .timings(
            Duration::from_secs(4),
            Duration::from_secs(3),
            Duration::from_millis(500),
        );
    let mut manager = Manager::builder(client.clone())
        .leader_election(le)
        .build()
        .map_err(|e| e.to_string())?;
    let recorder = EventRecorder::new(client.clone(), Reporter::new("monitor-operator", identity));
    let ctx = Arc::new(MonitorContext {
        client: client.clone(),
        recorder: Some(recorder.clone()),
    });
    let stats2 = stats.clone();
    let controller = manager
        .controller::<Monitor>(InformerParams::all().namespace(ns))
        .owns::<ConfigMap>(InformerParams::all().namespace(ns))
        .owns::<Deployment>(InformerParams::all().namespace(ns))
        .named("monitor")
        .workers(2)
        .on_result(move |r| {
            let mut s = stats2.lock().unwrap_or_else(|e| e.into_inner());
            match r.result {
                ReconcileResult::Error(_) | ReconcileResult::Panic(_) => s.errors += 1,
                ReconcileResult::Missing => {}
                _ => {
                    s.reconciles += 1;
                    s.durations.push(r.duration);
                }
            }
        });
    manager
        .add(controller, reconcile, ctx)
        .map_err(|e| e.to_string())?;
    let leading = manager.leading();
    let cancel = CancellationToken::new();
    let c2 = cancel.clone();
    let id = identity.to_string();
    let handle = tokio::spawn(async move {
        if let Err(e) = manager.run(c2).await {
            eprintln!("manager {id} stopped: {e}");
        }
    });
    Ok(Operator {
        cancel,
        leading,
        handle,
        recorder,
    })
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Runs the demo; `kubeconfig` selects a real cluster. Returns an error describing the
/// first check that failed.
///
/// The scenario's code sits behind one boxed future, built here: an `async fn`'s body
/// (with everything it awaits) is otherwise compiled again in the crate that awaits it,
/// here the `kw` binary, which is the last step of a build.
#[inline(never)]
#[allow(clippy::manual_async_fn, reason = "boxed where it is built, see above")]
pub fn run(kubeconfig: Option<&str>) -> impl std::future::Future<Output = DemoResult<()>> + '_ {
    let boxed: std::pin::Pin<Box<dyn std::future::Future<Output = DemoResult<()>> + '_>> =
        Box::pin(run_inner(kubeconfig));
    boxed
}

async fn run_inner(kubeconfig: Option<&str>) -> DemoResult<()> {
    let ui = Ui::new(9);
    ui.step("connecting");
    let conn = Connection::open(kubeconfig)
        .await
        .map_err(|e| e.to_string())?;
    let client = conn.client.clone();
    ui.done(&format!("connected to {}", conn.describe()));

    ui.step("installing the Monitor CRD");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = Monitor::crd();
    let crd_name = Monitor::crd_name().to_string();
    match crds.create(&PostParams::default(), &crd).await {
        Ok(_) => {}
        Err(e) if e.is_already_exists() => {}
        Err(e) => return Err(format!("create CRD: {e}")),
    }
    wait_until(
        "the CRD to be Established",
        Duration::from_secs(60),
        || async {
            crds.get(&crd_name)
                .await
                .ok()
                .and_then(|c| c.status)
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        },
    )
    .await?;
    let ns = format!("kw-demo-{:06x}", rand::random::<u32>() & 0xffffff);
    let nss: Api<Namespace> = Api::all(client.clone());
    nss.create(
        &PostParams::default(),
        &Namespace {
            metadata: ObjectMeta {
                name: Some(ns.clone()),
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .await
    .map_err(|e| format!("create namespace: {e}"))?;
    ui.done(&format!("CRD {crd_name} established; namespace {ns}"));

    ui.step("starting two managers with leader election");
    // The operator's client: the demo's short leader-election timings renew the lease
    // twice a second per manager, so raise client-go's 5 QPS / burst 10 (controller-runtime
    // itself defaults to 20 / 30).
    let mut operator_config = conn.config.clone();
    operator_config.qps = 50.0;
    operator_config.burst = 100;
    // The operator reaches the server through a relay whose connections the scenario
    // cuts later (TLS passes through; the server name stays the real one).
    let upstream = conn.config.cluster_url.clone();
    let host = upstream.host().unwrap_or("127.0.0.1").to_string();
    let tls = upstream.scheme_str() == Some("https");
    let port = upstream.port_u16().unwrap_or(if tls { 443 } else { 80 });
    let cutter = Cutter::start(format!("{host}:{port}"))
        .await
        .map_err(|e| format!("connection relay: {e}"))?;
    operator_config.cluster_url = format!(
        "{}://{}{}",
        if tls { "https" } else { "http" },
        cutter.addr(),
        upstream.path().trim_end_matches('/')
    )
    .parse()
    .map_err(|e| format!("relay url: {e}"))?;
    if operator_config.tls_server_name.is_none() {
        operator_config.tls_server_name = Some(host.trim_matches(['[', ']']).to_string());
    }
    let client = Client::new(operator_config).map_err(|e| e.to_string())?;
    let stats = Arc::new(Mutex::new(Stats::default()));
    let a = start_manager(&client, &ns, "manager-a", stats.clone())?;
    let mut a_leading = a.leading.clone();
    tokio::time::timeout(Duration::from_secs(30), a_leading.wait_for(|l| *l))
        .await
        .map_err(|_| "manager-a never became leader".to_string())?
        .map_err(|e| e.to_string())?;
    let b = start_manager(&client, &ns, "manager-b", stats.clone())?;
    ui.done("manager-a leads, manager-b stands by");

    // The scenario's own checks use a separate client so that they do not eat into the
    // operator's QPS budget (client-go's 5 QPS / burst 10 by default).
    let mut checker_config = conn.config.clone();
    checker_config.qps = 0.0;
    let checker = Client::new(checker_config).map_err(|e| e.to_string())?;
    let monitors: Api<Monitor> = Api::namespaced(checker.clone(), &ns);
    let cms: Api<ConfigMap> = Api::namespaced(checker.clone(), &ns);
    let deploys: Api<Deployment> = Api::namespaced(checker.clone(), &ns);
    let converged = |name: String, replicas: i32, target: String| {
        let (monitors, cms, deploys) = (monitors.clone(), cms.clone(), deploys.clone());
        async move {
            let (cm_name, deploy_name) = owned_names(&name);
            let Ok(m) = monitors.get(&name).await else {
                return false;
            };
            let status_ok =
                m.status.as_ref().and_then(|s| s.observed_generation) == m.metadata.generation;
            let cm_ok = cms
                .get(&cm_name)
                .await
                .ok()
                .and_then(|c| c.data)
                .is_some_and(|d| d.get("target") == Some(&target));
            let deploy_ok = deploys
                .get(&deploy_name)
                .await
                .ok()
                .is_some_and(|d| d.spec.replicas == Some(replicas));
            status_ok && cm_ok && deploy_ok
        }
    };

    ui.step("creating three monitors");
    for (i, target) in [
        "https://example.com",
        "https://kubernetes.io",
        "https://crates.io",
    ]
    .iter()
    .enumerate()
    {
        let m = Monitor::new(
            &format!("site-{i}"),
            MonitorSpec {
                target: target.to_string(),
                interval_seconds: 30,
                replicas: 1,
            },
        );
        monitors
            .create(&PostParams::default(), &m)
            .await
            .map_err(|e| format!("create monitor: {e}"))?;
    }
    for (i, target) in [
        "https://example.com",
        "https://kubernetes.io",
        "https://crates.io",
    ]
    .iter()
    .enumerate()
    {
        wait_until(
            &format!("site-{i} to converge"),
            Duration::from_secs(60),
            || converged(format!("site-{i}"), 1, target.to_string()),
        )
        .await?;
    }
    ui.done("3 monitors reconciled: ConfigMaps, Deployments and status written");

    ui.step("scaling site-0 to 3 replicas through /scale");
    monitors
        .patch_scale(
            "site-0",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"replicas": 3}})),
        )
        .await
        .map_err(|e| format!("scale: {e}"))?;
    wait_until(
        "site-0's Deployment to scale",
        Duration::from_secs(60),
        || converged("site-0".into(), 3, "https://example.com".into()),
    )
    .await?;
    ui.done("site-0 scaled: Deployment has 3 replicas");

    ui.step("updating site-1's target");
    update_and_wait(
        &monitors,
        "site-1",
        serde_json::json!({"target": "https://kubernetes.io/docs"}),
        "site-1's ConfigMap to follow",
        || converged("site-1".into(), 1, "https://kubernetes.io/docs".into()),
    )
    .await?;
    ui.done("site-1 updated: ConfigMap follows the new target");

    ui.step("dropping every watch connection");
    let cut = cutter.cut_all();
    if cut == 0 {
        return Err("no operator connection was open to cut".into());
    }
    update_and_wait(
        &monitors,
        "site-2",
        serde_json::json!({"replicas": 2}),
        "site-2 to converge after the disconnect",
        || converged("site-2".into(), 2, "https://crates.io".into()),
    )
    .await?;
    ui.done(&format!(
        "{cut} connection(s) cut; informers resumed and site-2's change was reconciled"
    ));

    ui.step("leader handover: stopping manager-a");
    a.cancel.cancel();
    let _ = a.handle.await;
    let mut b_leading = b.leading.clone();
    tokio::time::timeout(Duration::from_secs(30), b_leading.wait_for(|l| *l))
        .await
        .map_err(|_| "manager-b never took over".to_string())?
        .map_err(|e| e.to_string())?;
    update_and_wait(
        &monitors,
        "site-0",
        serde_json::json!({"target": "https://example.org"}),
        "manager-b to reconcile site-0",
        || converged("site-0".into(), 3, "https://example.org".into()),
    )
    .await?;
    ui.done("manager-b took over the lease and reconciles");

    ui.step("deleting site-1 (owned objects are garbage-collected)");
    monitors
        .delete("site-1", &Default::default())
        .await
        .map_err(|e| format!("delete: {e}"))?;
    let (cm1, d1) = owned_names("site-1");
    wait_until(
        "site-1's ConfigMap and Deployment to go",
        Duration::from_secs(60),
        || {
            let (cms, deploys, cm1, d1) = (cms.clone(), deploys.clone(), cm1.clone(), d1.clone());
            async move {
                matches!(cms.get_opt(&cm1).await, Ok(None))
                    && matches!(deploys.get_opt(&d1).await, Ok(None))
            }
        },
    )
    .await?;
    ui.done("site-1 deleted with its ConfigMap and Deployment");

    // Final state check.
    let remaining = monitors
        .list(&Default::default())
        .await
        .map_err(|e| e.to_string())?;
    let names: Vec<String> = remaining
        .iter()
        .filter_map(|m| m.metadata.name.clone())
        .collect();
    if names != ["site-0", "site-2"] {
        return Err(format!("unexpected monitors at the end: {names:?}"));
    }
    for (name, replicas, target) in [
        ("site-0", 3, "https://example.org"),
        ("site-2", 2, "https://crates.io"),
    ] {
        if !converged(name.into(), replicas, target.into()).await {
            return Err(format!("{name} is not converged at the end"));
        }
    }
    b.recorder.shutdown().await;
    a.recorder.shutdown().await;
    let events = a.recorder.stats().queued + b.recorder.stats().queued;
    b.cancel.cancel();
    let _ = b.handle.await;
    if conn.server.is_none() {
        let _ = nss.delete(&ns, &Default::default()).await;
    }
    ui.finish();

    let s = stats.lock().unwrap_or_else(|e| e.into_inner());
    let mut d = s.durations.clone();
    d.sort();
    println!();
    println!("kw demo: end state correct");
    println!(
        "  reconciles        {} ({} errors, retried)",
        s.reconciles, s.errors
    );
    println!("  events recorded   {events}");
    println!(
        "  reconcile latency p50 {:?}, p99 {:?}",
        percentile(&d, 0.5),
        percentile(&d, 0.99)
    );
    println!("  leader handover   manager-a -> manager-b");
    Ok(())
}
