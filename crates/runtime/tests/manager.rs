//! Manager integration tests: run against the embedded server, or a real cluster when
//! KUBEWRIGHT_TEST_KUBECONFIG is set. Every test uses its own namespace, a label unique
//! to the run, its own Lease, and ports chosen by the OS.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kubewright_client::Api;
use kubewright_core::{ApiResource, DynamicObject, ObjectMeta, PostParams, ResourceExt, Scope};
use kubewright_runtime::InformerParams;
use kubewright_runtime::controller::{
    Action, ControllerError, ReconcileReport, ReconcileResult, Source,
};
use kubewright_runtime::manager::{LeaderElection, Manager, ManagerError};
use kubewright_runtime::metrics::ClientRequest;
use kubewright_testing::TestEnv;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Every wait in these tests ends after this, failing the test.
const DEADLINE: Duration = Duration::from_secs(30);

const LEASE: Duration = Duration::from_millis(2000);
const RENEW: Duration = Duration::from_millis(1500);
const RETRY: Duration = Duration::from_millis(400);

fn local() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

fn run_label(env: &TestEnv) -> (String, String) {
    ("kubewright.test/run".to_string(), env.unique_name("mgr"))
}

fn selector(label: &(String, String)) -> String {
    format!("{}={}", label.0, label.1)
}

fn configmap(name: &str, label: &(String, String)) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some([label.clone()].into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn ghost(env: &TestEnv) -> ApiResource {
    let group = format!("{}.kubewright.test", env.unique_name("missing"));
    ApiResource {
        group: group.clone(),
        version: "v1".into(),
        api_version: format!("{group}/v1"),
        kind: "Ghost".into(),
        plural: "ghosts".into(),
        scope: Scope::Namespaced,
    }
}

/// Reconcile reports tagged with the manager that produced them.
#[derive(Clone)]
struct Reports(Arc<watch::Sender<Vec<(String, ReconcileReport)>>>);

impl Reports {
    fn new() -> Self {
        Self(Arc::new(watch::channel(Vec::new()).0))
    }
    fn observer(&self, manager: &str) -> impl Fn(&ReconcileReport) + Send + Sync + 'static {
        let (tx, manager) = (self.0.clone(), manager.to_string());
        move |r| tx.send_modify(|v| v.push((manager.clone(), r.clone())))
    }
    fn snapshot(&self) -> Vec<(String, ReconcileReport)> {
        self.0.borrow().clone()
    }
    async fn wait_reconciled(&self, manager: &str, name: &str) {
        let mut rx = self.0.subscribe();
        let found = tokio::time::timeout(
            DEADLINE,
            rx.wait_for(|v| {
                v.iter().any(|(m, r)| {
                    m == manager && r.key.name == name && r.result == ReconcileResult::Success
                })
            }),
        )
        .await;
        assert!(
            matches!(found, Ok(Ok(_))),
            "{manager} never reconciled {name}: {:?}",
            self.snapshot()
                .iter()
                .map(|(m, r)| (m.clone(), r.key.to_string()))
                .collect::<Vec<_>>()
        );
    }
}

async fn ok_reconcile(_cm: Arc<ConfigMap>, _ctx: Arc<()>) -> Result<Action, String> {
    Ok(Action::await_change())
}

/// A plain HTTP/1.1 GET: (status, headers, body).
async fn http_get(addr: SocketAddr, path: &str) -> (u16, String, String) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(DEADLINE, stream.read_to_end(&mut raw))
        .await
        .unwrap()
        .unwrap();
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, head.to_lowercase(), body.to_string())
}

/// The value of the first sample line starting with `series`.
fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series))
        .and_then(|rest| rest.trim().parse().ok())
        .unwrap_or_else(|| panic!("no sample {series} in\n{text}"))
}

fn spawn_manager(manager: Manager) -> (CancellationToken, JoinHandle<Result<(), ManagerError>>) {
    let cancel = CancellationToken::new();
    (cancel.clone(), tokio::spawn(manager.run(cancel)))
}

async fn wait_leading(rx: &mut watch::Receiver<bool>, leading: bool, what: &str) {
    tokio::time::timeout(DEADLINE, rx.wait_for(|l| *l == leading))
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
        .unwrap();
}

async fn join(handle: JoinHandle<Result<(), ManagerError>>) -> Result<(), ManagerError> {
    tokio::time::timeout(DEADLINE, handle)
        .await
        .expect("manager did not stop in time")
        .expect("manager task panicked")
}

/// `/metrics` has controller-runtime's, the work queue's and the client's families;
/// `/healthz` and `/readyz` answer in the Kubernetes format, with custom checks.
#[tokio::test]
async fn metrics_and_probes_answer() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let label = run_label(&env);
    let custom_ok = Arc::new(AtomicBool::new(true));
    let flag = custom_ok.clone();
    let mut manager = Manager::builder(env.client())
        .leader_election(None)
        .metrics_addr(local())
        .health_addr(local())
        .readyz_check("custom", move || {
            if flag.load(Ordering::SeqCst) {
                Ok(())
            } else {
                Err("custom check is off".to_string())
            }
        })
        .build()
        .unwrap();
    manager.metrics().client.observe(&ClientRequest {
        method: "GET",
        host: "api.test:6443",
        status: Some(200),
        latency: Duration::from_millis(12),
        rate_limiter_wait: Duration::ZERO,
    });
    let metrics_addr = manager.metrics_addr().unwrap();
    let health_addr = manager.health_addr().unwrap();
    assert_ne!(metrics_addr.port(), 0);
    assert_ne!(health_addr.port(), 0);
    let reports = Reports::new();
    let controller = manager
        .controller::<ConfigMap>(
            InformerParams::default()
                .namespace(&ns)
                .labels(&selector(&label)),
        )
        .named("cm-watcher")
        .workers(2)
        .on_result(reports.observer("m"));
    manager.add(controller, ok_reconcile, Arc::new(())).unwrap();
    let mut leading = manager.leading();
    let (cancel, handle) = spawn_manager(manager);
    wait_leading(&mut leading, true, "controllers running").await;

    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    api.create(&PostParams::default(), &configmap("one", &label))
        .await
        .unwrap();
    reports.wait_reconciled("m", "one").await;

    let (status, head, text) = http_get(metrics_addr, "/metrics").await;
    assert_eq!(status, 200);
    assert!(
        head.contains("content-type: application/openmetrics-text"),
        "{head}"
    );
    assert!(
        sample(
            &text,
            r#"controller_runtime_reconcile_total{controller="cm-watcher",result="success"}"#
        ) >= 1.0
    );
    assert_eq!(
        sample(
            &text,
            r#"controller_runtime_reconcile_total{controller="cm-watcher",result="error"}"#
        ),
        0.0
    );
    assert_eq!(
        sample(
            &text,
            r#"controller_runtime_reconcile_errors_total{controller="cm-watcher"}"#
        ),
        0.0
    );
    assert_eq!(
        sample(
            &text,
            r#"controller_runtime_reconcile_panics_total{controller="cm-watcher"}"#
        ),
        0.0
    );
    assert!(
        sample(
            &text,
            r#"controller_runtime_reconcile_time_seconds_count{controller="cm-watcher"}"#
        ) >= 1.0
    );
    assert_eq!(
        sample(
            &text,
            r#"controller_runtime_max_concurrent_reconciles{controller="cm-watcher"}"#
        ),
        2.0
    );
    assert_eq!(
        sample(
            &text,
            r#"controller_runtime_active_workers{controller="cm-watcher"}"#
        ),
        0.0
    );
    assert!(sample(&text, r#"workqueue_adds_total{name="cm-watcher"}"#) >= 1.0);
    assert_eq!(sample(&text, r#"workqueue_depth{name="cm-watcher"}"#), 0.0);
    assert!(
        text.contains("# TYPE workqueue_longest_running_processor_seconds gauge"),
        "{text}"
    );
    // Real requests of the manager's client are counted through the client's observer.
    assert!(
        text.lines()
            .any(|l| l.starts_with("rest_client_requests_total{code=\"200\"")
                && !l.contains("api.test")),
        "no real client requests counted:\n{text}"
    );
    // The client families are served from the manager's registry (fed by the client's
    // request hook).
    assert_eq!(
        sample(
            &text,
            r#"rest_client_requests_total{code="200",host="api.test:6443",method="GET"}"#
        ),
        1.0
    );
    assert_eq!(
        sample(
            &text,
            r#"rest_client_request_duration_seconds_count{host="api.test:6443",verb="GET"}"#
        ),
        1.0
    );
    assert_eq!(
        sample(
            &text,
            r#"rest_client_rate_limiter_duration_seconds_count{host="api.test:6443",verb="GET"}"#
        ),
        1.0
    );
    assert!(text.ends_with("# EOF\n"), "{text}");
    assert_eq!(http_get(metrics_addr, "/other").await.0, 404);

    let (status, head, body) = http_get(health_addr, "/healthz").await;
    assert_eq!((status, body.as_str()), (200, "ok"));
    assert!(
        head.contains("content-type: text/plain; charset=utf-8"),
        "{head}"
    );
    assert_eq!(http_get(health_addr, "/readyz").await.2, "ok");
    let (status, _, body) = http_get(health_addr, "/readyz?verbose").await;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        "[+]ping ok\n[+]informer-sync ok\n[+]shutdown ok\n[+]custom ok\nreadyz check passed\n"
    );
    assert_eq!(http_get(health_addr, "/healthz/ping").await.2, "ok");
    // No leader election configured: no such check.
    assert_eq!(
        http_get(health_addr, "/healthz/leaderElection").await.0,
        404
    );
    assert_eq!(http_get(health_addr, "/metrics").await.0, 404);

    custom_ok.store(false, Ordering::SeqCst);
    let (status, _, body) = http_get(health_addr, "/readyz").await;
    assert_eq!(status, 500);
    assert_eq!(
        body,
        "[+]ping ok\n[+]informer-sync ok\n[+]shutdown ok\n[-]custom failed: reason withheld\nreadyz check failed\n"
    );
    let (status, _, body) = http_get(health_addr, "/readyz/custom").await;
    assert_eq!(
        (status, body.as_str()),
        (500, "internal server error: custom check is off\n")
    );
    assert_eq!(http_get(health_addr, "/healthz").await.0, 200);

    cancel.cancel();
    join(handle).await.unwrap();
    assert!(!*leading.borrow());
    // The servers are gone with the manager.
    assert!(TcpStream::connect(metrics_addr).await.is_err());
    assert!(TcpStream::connect(health_addr).await.is_err());
}

/// Without controllers, a manager serves until cancelled.
#[tokio::test]
async fn a_manager_without_controllers_runs_until_cancelled() {
    let env = TestEnv::start().await;
    let manager = Manager::builder(env.client())
        .metrics_addr(local())
        .build()
        .unwrap();
    let addr = manager.metrics_addr().unwrap();
    let mut leading = manager.leading();
    let (cancel, handle) = spawn_manager(manager);
    wait_leading(&mut leading, true, "manager running").await;
    let (status, _, text) = http_get(addr, "/metrics").await;
    assert_eq!(status, 200);
    assert!(text.ends_with("# EOF\n"), "{text}");
    assert!(!handle.is_finished());
    cancel.cancel();
    join(handle).await.unwrap();
    assert!(!*leading.borrow());
}

/// `/readyz` fails while the running controllers' caches have not synced.
#[tokio::test]
async fn readyz_fails_until_caches_sync() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let ar = ghost(&env);
    let mut manager = Manager::builder(env.client())
        .health_addr(local())
        .build()
        .unwrap();
    let health_addr = manager.health_addr().unwrap();
    let controller = manager
        .controller_with::<DynamicObject>(
            ar.clone(),
            Source::dynamic(&ar, InformerParams::default().namespace(&ns)),
        )
        .cache_sync_timeout(DEADLINE * 2);
    let reconcile =
        |_o: Arc<DynamicObject>, _: Arc<()>| async { Ok::<_, String>(Action::await_change()) };
    manager.add(controller, reconcile, Arc::new(())).unwrap();
    let mut leading = manager.leading();
    let (cancel, handle) = spawn_manager(manager);
    wait_leading(&mut leading, true, "controllers running").await;

    let (status, _, body) = http_get(health_addr, "/readyz").await;
    assert_eq!(status, 500);
    assert_eq!(
        body,
        "[+]ping ok\n[-]informer-sync failed: reason withheld\n[+]shutdown ok\nreadyz check failed\n"
    );
    let (status, _, body) = http_get(health_addr, "/readyz/informer-sync").await;
    assert_eq!(
        (status, body.as_str()),
        (500, "internal server error: caches of ghost not synced\n")
    );
    // Liveness is not readiness.
    assert_eq!(http_get(health_addr, "/healthz").await.0, 200);

    // Cancelled while waiting for the caches: a clean stop.
    cancel.cancel();
    join(handle).await.unwrap();
}

/// Builder and `add` errors are typed.
#[tokio::test]
async fn configuration_errors() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let mut manager = Manager::builder(env.client()).build().unwrap();
    let params = InformerParams::default().namespace(&ns);
    let first = manager
        .controller::<ConfigMap>(params.clone())
        .named("same");
    manager.add(first, ok_reconcile, Arc::new(())).unwrap();
    let second = manager.controller::<ConfigMap>(params).named("same");
    match manager.add(second, ok_reconcile, Arc::new(())) {
        Err(ManagerError::DuplicateController(name)) => assert_eq!(name, "same"),
        other => panic!("expected DuplicateController, got {other:?}"),
    }

    let invalid = LeaderElection::new(&ns, "x").timings(LEASE, LEASE, RETRY);
    let err = Manager::builder(env.client())
        .leader_election(invalid)
        .build()
        .unwrap_err();
    assert!(matches!(err, ManagerError::LeaderElection(_)), "{err}");

    let taken = std::net::TcpListener::bind(local()).unwrap();
    let addr = taken.local_addr().unwrap();
    match Manager::builder(env.client()).metrics_addr(addr).build() {
        Err(ManagerError::Bind { addr: a, .. }) => assert_eq!(a, addr),
        other => panic!("expected Bind, got {other:?}"),
    }
}

/// A controller that fails (its caches never sync) stops the whole manager, and `run`
/// returns its error.
#[tokio::test]
async fn a_failing_controller_stops_the_manager() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let label = run_label(&env);
    let ar = ghost(&env);
    let mut manager = Manager::builder(env.client()).build().unwrap();
    let healthy = manager.controller::<ConfigMap>(
        InformerParams::default()
            .namespace(&ns)
            .labels(&selector(&label)),
    );
    manager.add(healthy, ok_reconcile, Arc::new(())).unwrap();
    let broken = manager
        .controller_with::<DynamicObject>(
            ar.clone(),
            Source::dynamic(&ar, InformerParams::default().namespace(&ns)),
        )
        .cache_sync_timeout(Duration::from_millis(300));
    let reconcile =
        |_o: Arc<DynamicObject>, _: Arc<()>| async { Ok::<_, String>(Action::await_change()) };
    manager.add(broken, reconcile, Arc::new(())).unwrap();
    let (_cancel, handle) = spawn_manager(manager);
    match join(handle).await {
        Err(ManagerError::Controller(ControllerError::CacheSync { controller, .. })) => {
            assert_eq!(controller, "ghost");
        }
        other => panic!("expected a cache sync error, got {other:?}"),
    }
}

fn elected(ns: &str, lease: &str, id: &str) -> LeaderElection {
    LeaderElection::new(ns, lease)
        .identity(id)
        .timings(LEASE, RENEW, RETRY)
}

/// Tracks which managers run their controllers, and the most that ever did at once.
#[derive(Clone)]
struct Leaders(Arc<watch::Sender<(BTreeSet<String>, usize)>>);

impl Leaders {
    fn new() -> Self {
        Self(Arc::new(watch::channel((BTreeSet::new(), 0)).0))
    }
    fn follow(&self, id: &str, mut rx: watch::Receiver<bool>) {
        let (tx, id) = (self.0.clone(), id.to_string());
        tokio::spawn(async move {
            loop {
                let leading = *rx.borrow_and_update();
                tx.send_modify(|(set, max)| {
                    if leading {
                        set.insert(id.clone());
                    } else {
                        set.remove(&id);
                    }
                    *max = (*max).max(set.len());
                });
                if rx.changed().await.is_err() {
                    return;
                }
            }
        });
    }
    async fn wait(&self, what: &str, pred: impl Fn(&BTreeSet<String>) -> bool) -> BTreeSet<String> {
        let mut rx = self.0.subscribe();
        let r = tokio::time::timeout(DEADLINE, rx.wait_for(|(s, _)| pred(s)))
            .await
            .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
            .unwrap();
        r.0.clone()
    }
    fn max(&self) -> usize {
        self.0.borrow().1
    }
}

/// Two managers, one Lease: one leads and reconciles; when it is cancelled it finishes,
/// releases the Lease, and the other takes over and starts its controllers.
#[tokio::test]
async fn leader_election_hands_over_on_cancel() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let label = run_label(&env);
    let lease = env.unique_name("lease");
    let reports = Reports::new();
    let leaders = Leaders::new();
    let mut running = Vec::new();
    let mut metrics = Vec::new();
    for id in ["mgr-a", "mgr-b"] {
        let mut manager = Manager::builder(env.client())
            .leader_election(elected(&ns, &lease, id))
            .health_addr(local())
            .metrics_addr(local())
            .build()
            .unwrap();
        let controller = manager
            .controller::<ConfigMap>(
                InformerParams::default()
                    .namespace(&ns)
                    .labels(&selector(&label)),
            )
            .on_result(reports.observer(id));
        manager.add(controller, ok_reconcile, Arc::new(())).unwrap();
        leaders.follow(id, manager.leading());
        let health = manager.health_addr().unwrap();
        metrics.push((id, manager.metrics_addr().unwrap()));
        let (cancel, handle) = spawn_manager(manager);
        running.push((id, cancel, handle, health));
    }

    let first = leaders.wait("a leader", |s| s.len() == 1).await;
    let first = first.first().unwrap().clone();
    let pos = running.iter().position(|r| r.0 == first).unwrap();
    let (_, first_cancel, first_handle, first_health) = running.remove(pos);
    let (second, second_cancel, second_handle, second_health) = running.remove(0);
    assert_ne!(first, second);

    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    api.create(&PostParams::default(), &configmap("one", &label))
        .await
        .unwrap();
    reports.wait_reconciled(&first, "one").await;
    let (status, _, body) = http_get(first_health, "/healthz?verbose").await;
    assert_eq!(status, 200);
    assert!(body.contains("[+]leaderElection ok\n"), "{body}");
    // The standby has nothing to sync: ready, so a rollout can proceed.
    assert_eq!(http_get(second_health, "/readyz").await.0, 200);
    // leader_election_master_status: 1 on the leader, 0 on the standby.
    let series = format!("leader_election_master_status{{name=\"{lease}\"}}");
    for (id, addr) in &metrics {
        let (_, _, text) = http_get(*addr, "/metrics").await;
        let want = if *id == first { 1.0 } else { 0.0 };
        assert_eq!(sample(&text, &series), want, "{id}: {text}");
    }
    assert!(
        reports.snapshot().iter().all(|(m, _)| *m == first),
        "the standby reconciled"
    );

    let handover = Instant::now();
    first_cancel.cancel();
    join(first_handle).await.unwrap();
    let stopped = reports.snapshot().len();
    leaders
        .wait("the standby to lead", |s| {
            s.len() == 1 && s.contains(second)
        })
        .await;
    let took = handover.elapsed();
    assert!(took < LEASE + RETRY, "takeover took {took:?}");

    api.create(&PostParams::default(), &configmap("two", &label))
        .await
        .unwrap();
    reports.wait_reconciled(second, "two").await;
    let all = reports.snapshot();
    assert!(
        all[stopped..].iter().all(|(m, _)| m == second),
        "the old leader reconciled after it stopped"
    );
    let leases: Api<Lease> = Api::namespaced(env.client(), &ns);
    let holder = leases
        .get(&lease)
        .await
        .unwrap()
        .spec
        .unwrap()
        .holder_identity;
    assert_eq!(holder.as_deref(), Some(second));

    second_cancel.cancel();
    join(second_handle).await.unwrap();
    assert_eq!(
        leaders.max(),
        1,
        "two managers ran their controllers at once"
    );
}

/// Takes the Lease over for `holder` (as another candidate would), retrying conflicts
/// with the leader's renewals.
async fn steal(leases: &Api<Lease>, name: &str, holder: &str, duration_secs: i32) {
    for _ in 0..50 {
        let mut lease = leases.get(name).await.unwrap();
        let spec = lease.spec.get_or_insert_with(Default::default);
        spec.holder_identity = Some(holder.to_string());
        spec.lease_duration_seconds = Some(duration_secs);
        spec.renew_time = Some(MicroTime(k8s_openapi::jiff::Timestamp::now()));
        match leases.replace(name, &PostParams::default(), &lease).await {
            Ok(_) => return,
            Err(e) if e.is_conflict() => continue,
            Err(e) => panic!("steal the lease: {e}"),
        }
    }
    panic!("could not steal the lease");
}

/// Losing the Lease aborts the reconciles in flight at once and `run` returns
/// `LeadershipLost` (controller-runtime exits).
#[tokio::test]
async fn leadership_loss_stops_controllers_and_returns_an_error() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let label = run_label(&env);
    let lease = env.unique_name("lease");
    let mut manager = Manager::builder(env.client())
        .leader_election(elected(&ns, &lease, "victim"))
        .build()
        .unwrap();
    let entered = Arc::new(watch::channel(false).0);
    let hang = |_cm: Arc<ConfigMap>, entered: Arc<watch::Sender<bool>>| async move {
        entered.send_replace(true);
        std::future::pending::<()>().await;
        Ok::<_, String>(Action::await_change())
    };
    let controller = manager
        .controller::<ConfigMap>(
            InformerParams::default()
                .namespace(&ns)
                .labels(&selector(&label)),
        )
        .shutdown_timeout(DEADLINE * 2);
    manager.add(controller, hang, entered.clone()).unwrap();
    let mut leading = manager.leading();
    let (_cancel, handle) = spawn_manager(manager);
    wait_leading(&mut leading, true, "leadership").await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    api.create(&PostParams::default(), &configmap("stuck", &label))
        .await
        .unwrap();
    tokio::time::timeout(DEADLINE, entered.subscribe().wait_for(|e| *e))
        .await
        .unwrap()
        .unwrap();

    let leases: Api<Lease> = Api::namespaced(env.client(), &ns);
    let lost_at = Instant::now();
    steal(&leases, &lease, "thief", 3600).await;
    match join(handle).await {
        Err(ManagerError::LeadershipLost { identity, name, .. }) => {
            assert_eq!(
                (identity.as_str(), name.as_str()),
                ("victim", lease.as_str())
            );
        }
        other => panic!("expected LeadershipLost, got {other:?}"),
    }
    // Not after the (long) shutdown timeout: the hung reconcile was aborted.
    assert!(
        lost_at.elapsed() < RENEW + RETRY * 3,
        "{:?}",
        lost_at.elapsed()
    );
    assert!(!*leading.borrow());
    let holder = leases
        .get(&lease)
        .await
        .unwrap()
        .spec
        .unwrap()
        .holder_identity;
    assert_eq!(holder.as_deref(), Some("thief"));
}

/// With `exit_on_leadership_loss(false)` the manager stops its controllers, stands for
/// election again, and restarts them when it leads again.
#[tokio::test]
async fn recampaigns_after_leadership_loss_when_configured() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let label = run_label(&env);
    let lease = env.unique_name("lease");
    let reports = Reports::new();
    let mut manager = Manager::builder(env.client())
        .leader_election(elected(&ns, &lease, "phoenix"))
        .exit_on_leadership_loss(false)
        .build()
        .unwrap();
    let controller = manager
        .controller::<ConfigMap>(
            InformerParams::default()
                .namespace(&ns)
                .labels(&selector(&label)),
        )
        .on_result(reports.observer("phoenix"));
    manager.add(controller, ok_reconcile, Arc::new(())).unwrap();
    let transitions = Arc::new(Mutex::new(Vec::new()));
    let mut leading = manager.leading();
    {
        let (mut rx, transitions) = (manager.leading(), transitions.clone());
        tokio::spawn(async move {
            while rx.changed().await.is_ok() {
                transitions.lock().unwrap().push(*rx.borrow_and_update());
            }
        });
    }
    let (cancel, handle) = spawn_manager(manager);
    wait_leading(&mut leading, true, "leadership").await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    api.create(&PostParams::default(), &configmap("before", &label))
        .await
        .unwrap();
    reports.wait_reconciled("phoenix", "before").await;

    // A thief holds the Lease for a second and never renews it.
    let leases: Api<Lease> = Api::namespaced(env.client(), &ns);
    steal(&leases, &lease, "thief", 1).await;
    wait_leading(&mut leading, false, "leadership lost").await;
    wait_leading(&mut leading, true, "leadership regained").await;
    api.create(&PostParams::default(), &configmap("after", &label))
        .await
        .unwrap();
    reports.wait_reconciled("phoenix", "after").await;
    let holder = leases
        .get(&lease)
        .await
        .unwrap()
        .spec
        .unwrap()
        .holder_identity;
    assert_eq!(holder.as_deref(), Some("phoenix"));
    assert!(!handle.is_finished());

    cancel.cancel();
    join(handle).await.unwrap();
    let t = transitions.lock().unwrap().clone();
    assert!(t.starts_with(&[true, false, true]), "{t:?}");
    let after = api.get("after").await.unwrap();
    assert!(after.uid().is_some());
}

/// A webhook server run by the manager: its readiness check, its metrics in the
/// manager's registry, and its stop with the manager.
#[tokio::test]
async fn the_manager_runs_a_webhook_server() {
    use kubewright_runtime::webhook::{AdmissionRequest, Verdict, WebhookServer};
    let env = TestEnv::start().await;
    let server = WebhookServer::builder(local())
        .plain_http()
        .validate("/validate", |req: AdmissionRequest<ConfigMap>| async move {
            if req.name == "bad" {
                Verdict::deny("no")
            } else {
                Verdict::allow()
            }
        })
        .build()
        .unwrap();
    let hook_addr = server.local_addr();
    let manager = Manager::builder(env.client())
        .metrics_addr(local())
        .health_addr(local())
        .webhook_server(server)
        .build()
        .unwrap();
    let (metrics_addr, health_addr) = (
        manager.metrics_addr().unwrap(),
        manager.health_addr().unwrap(),
    );
    let (cancel, running) = spawn_manager(manager);
    let deadline = Instant::now() + DEADLINE;
    while http_get(health_addr, "/readyz/webhook").await.0 != 200 {
        assert!(Instant::now() < deadline, "the webhook check never passed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for name in ["good", "bad"] {
        let body = serde_json::json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u", "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
                        "resource": {"group": "", "version": "v1", "resource": "configmaps"},
                        "name": name, "namespace": "default", "operation": "CREATE",
                        "userInfo": {"username": "a"}, "object": {"metadata": {"name": name}}}
        })
        .to_string();
        let mut stream = TcpStream::connect(hook_addr).await.unwrap();
        let request = format!(
            "POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut raw = String::new();
        stream.read_to_string(&mut raw).await.unwrap();
        assert!(raw.starts_with("HTTP/1.1 200"), "{raw}");
        assert_eq!(raw.contains("\"allowed\":true"), name == "good", "{raw}");
    }
    let (_, _, text) = http_get(metrics_addr, "/metrics").await;
    assert_eq!(
        sample(
            &text,
            "controller_runtime_webhook_requests_total{webhook=\"/validate\",code=\"200\"}"
        ),
        2.0
    );
    assert_eq!(
        sample(
            &text,
            "kubewright_webhook_rejections_total{webhook=\"/validate\"}"
        ),
        1.0
    );
    assert!(text.contains("controller_runtime_webhook_latency_seconds_bucket"));
    cancel.cancel();
    tokio::time::timeout(DEADLINE, running)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(
        TcpStream::connect(hook_addr).await.is_err(),
        "the webhook server stopped"
    );
}

/// The manager's cache defaults scope every controller's informer (one namespace, one
/// label selector here), and its event recorder is flushed when `run` returns.
#[tokio::test]
async fn cache_defaults_and_the_managers_event_recorder() {
    use k8s_openapi::api::events::v1::Event as K8sEvent;
    use kubewright_core::ListParams;
    use kubewright_runtime::events::{Event, EventRecorder, EventType, object_reference};

    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let other = env.namespace().await;
    let label = run_label(&env);
    let manager = Manager::builder(env.client())
        .cache_defaults(
            InformerParams::all()
                .namespace(&ns)
                .labels(&selector(&label)),
        )
        .build()
        .unwrap();
    let recorder = manager.event_recorder("kubewright.test/recorder");
    assert_eq!(recorder.reporter().controller, "kubewright.test/recorder");
    let seen: Arc<watch::Sender<BTreeSet<String>>> = Arc::new(watch::channel(BTreeSet::new()).0);
    struct Ctx {
        recorder: EventRecorder,
        seen: Arc<watch::Sender<BTreeSet<String>>>,
    }
    let ctx = Arc::new(Ctx {
        recorder,
        seen: seen.clone(),
    });
    let mut manager = manager;
    let controller = manager.controller::<ConfigMap>(InformerParams::all());
    manager
        .add(
            controller,
            |cm: Arc<ConfigMap>, ctx: Arc<Ctx>| async move {
                ctx.recorder.publish(
                    &object_reference(cm.as_ref()),
                    Event::new(EventType::Normal, "Seen", "Reconcile").note("reconciled"),
                );
                let key = format!("{}/{}", cm.namespace().unwrap_or_default(), cm.name_any());
                ctx.seen.send_modify(|s| {
                    s.insert(key);
                });
                Ok::<_, String>(Action::await_change())
            },
            ctx,
        )
        .unwrap();
    let mut leading = manager.leading();
    let (cancel, handle) = spawn_manager(manager);
    wait_leading(&mut leading, true, "manager running").await;
    let cms = |n: &str| Api::<ConfigMap>::namespaced(env.client(), n);
    // Outside the defaults: another namespace, or no label.
    cms(&other)
        .create(&PostParams::default(), &configmap("elsewhere", &label))
        .await
        .unwrap();
    let mut unlabelled = configmap("unlabelled", &label);
    unlabelled.metadata.labels = None;
    cms(&ns)
        .create(&PostParams::default(), &unlabelled)
        .await
        .unwrap();
    cms(&ns)
        .create(&PostParams::default(), &configmap("inside", &label))
        .await
        .unwrap();
    let mut rx = seen.subscribe();
    let want = format!("{ns}/inside");
    tokio::time::timeout(DEADLINE, rx.wait_for(|s| s.contains(&want)))
        .await
        .expect("the ConfigMap inside the defaults was never reconciled")
        .unwrap();
    cancel.cancel();
    join(handle).await.unwrap();
    // Only what the defaults select was cached, so only that was reconciled.
    assert_eq!(*seen.borrow(), BTreeSet::from([want]));
    // `run` flushed the recorder: the Event is there as soon as it returned.
    let events = Api::<K8sEvent>::namespaced(env.client(), &ns)
        .list(&ListParams::default().fields("regarding.name=inside"))
        .await
        .unwrap();
    let ours: Vec<&K8sEvent> = events
        .items
        .iter()
        .filter(|e| e.reporting_controller.as_deref() == Some("kubewright.test/recorder"))
        .collect();
    assert_eq!(ours.len(), 1, "{events:?}");
    assert_eq!(ours[0].reason.as_deref(), Some("Seen"));
}
