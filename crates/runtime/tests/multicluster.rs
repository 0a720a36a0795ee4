//! Multi-cluster controller tests. The first cluster is the suite's server (the embedded
//! one, or the real cluster of KUBEWRIGHT_TEST_KUBECONFIG), further clusters are embedded
//! servers of their own: on a real cluster the fleet is mixed. Every test works in one
//! namespace of its own (the same name in every cluster) and its controllers watch only
//! that namespace, so tests sharing a real cluster do not see each other.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kubewright_apiserver::TestServer;
use kubewright_client::{Api, Client, Config};
use kubewright_core::{ObjectKey, ObjectMeta, PostParams, ResourceExt};
use kubewright_runtime::controller::{Action, ReconcileReport, ReconcileResult, Source};
use kubewright_runtime::manager::{Manager, ManagerError};
use kubewright_runtime::metrics::{Metrics, encode};
use kubewright_runtime::multicluster::{
    ClusterContext, ClusterStatus, ClusterStatuses, Fleet, MultiClusterController,
    MultiClusterError,
};
use kubewright_runtime::owner::controller_owner_ref;
use kubewright_runtime::{InformerParams, SharedInformerFactory};
use kubewright_testing::TestEnv;
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Every wait in these tests ends after this, failing the test.
const DEADLINE: Duration = Duration::from_secs(30);

/// The suite's cluster (embedded or real) with a fresh namespace, and the namespace.
async fn first_cluster() -> (TestEnv, String) {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    (env, ns)
}

/// One more embedded cluster with the namespace `ns`.
async fn embedded_cluster(ns: &str) -> TestEnv {
    let env = TestEnv::for_server(TestServer::start().await.unwrap());
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(ns.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<Namespace>::all(env.client())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    env
}

/// Two clusters sharing a namespace name: the suite's, and an embedded one.
async fn two_clusters() -> (TestEnv, TestEnv, String) {
    let (east, ns) = first_cluster().await;
    let west = embedded_cluster(&ns).await;
    (east, west, ns)
}

/// A client whose server is gone: a port that was free a moment ago.
fn unreachable_client() -> Client {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut config = Config::new(format!("http://127.0.0.1:{port}").parse().unwrap());
    config.qps = 0.0;
    Client::new(config).unwrap()
}

fn source(ns: &str, name: &str, value: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(ns.into()),
            labels: Some(BTreeMap::from([("mc".into(), "src".into())])),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("value".into(), value.into())])),
        ..Default::default()
    }
}

async fn create_source(env: &TestEnv, ns: &str, name: &str, value: &str) {
    Api::<ConfigMap>::namespaced(env.client(), ns)
        .create(&PostParams::default(), &source(ns, name, value))
        .await
        .unwrap();
}

/// The output a reconcile wrote for source `name`, if any.
async fn output(env: &TestEnv, ns: &str, name: &str) -> Option<BTreeMap<String, String>> {
    Api::<ConfigMap>::namespaced(env.client(), ns)
        .get_opt(&format!("{name}-out"))
        .await
        .unwrap()
        .map(|cm| cm.data.unwrap_or_default())
}

/// Writes `<name>-out` into the source's own cluster, owned by the source, with the
/// cluster's name and the source's value.
async fn reconcile(
    src: Arc<ConfigMap>,
    cx: Arc<ClusterContext<()>>,
) -> Result<Action, kubewright_client::Error> {
    let value = src
        .data
        .as_ref()
        .and_then(|d| d.get("value"))
        .cloned()
        .unwrap_or_default();
    let out = ConfigMap {
        metadata: ObjectMeta {
            name: Some(format!("{}-out", src.name_any())),
            namespace: src.namespace().map(str::to_string),
            labels: Some(BTreeMap::from([("mc".into(), "out".into())])),
            owner_references: controller_owner_ref(&*src).ok().map(|r| vec![r]),
            ..Default::default()
        },
        data: Some(BTreeMap::from([
            ("cluster".into(), cx.cluster.clone()),
            ("value".into(), value),
        ])),
        ..Default::default()
    };
    let ns = src.namespace().unwrap_or_default().to_string();
    let api: Api<ConfigMap> = Api::namespaced(cx.client.clone(), &ns);
    match api.create(&PostParams::default(), &out).await {
        Ok(_) => Ok(Action::await_change()),
        Err(e) if e.is_already_exists() => Ok(Action::await_change()),
        Err(e) => Err(e),
    }
}

/// Reconcile reports by cluster, to wait on.
#[derive(Clone)]
struct Reports(Arc<watch::Sender<Vec<(String, ReconcileReport)>>>, String);

impl Reports {
    /// Reports of reconciles in namespace `ns`.
    fn new(ns: &str) -> Self {
        Self(Arc::new(watch::channel(Vec::new()).0), ns.to_string())
    }
    fn observer(&self) -> impl Fn(&str, &ReconcileReport) + Send + Sync + 'static {
        let tx = self.0.clone();
        move |cluster, r| tx.send_modify(|v| v.push((cluster.to_string(), r.clone())))
    }
    fn reconciled(&self, cluster: &str, name: &str) -> bool {
        reconciled(&self.0.borrow(), &self.1, cluster, name)
    }
    async fn wait_reconciled(&self, cluster: &str, name: &str) {
        let mut rx = self.0.subscribe();
        let waited = tokio::time::timeout(
            DEADLINE,
            rx.wait_for(|v| reconciled(v, &self.1, cluster, name)),
        )
        .await;
        assert!(
            matches!(waited, Ok(Ok(_))),
            "{name} was not reconciled in {cluster}; reports: {:#?}",
            self.0.borrow()
        );
    }
}

fn reconciled(reports: &[(String, ReconcileReport)], ns: &str, cluster: &str, name: &str) -> bool {
    let key = ObjectKey::new(Some(ns), name);
    reports
        .iter()
        .any(|(c, r)| c == cluster && r.key == key && r.result == ReconcileResult::Success)
}

fn controller(fleet: &Fleet, reports: &Reports) -> MultiClusterController<ConfigMap> {
    let ns = reports.1.as_str();
    MultiClusterController::<ConfigMap>::new(
        fleet.clone(),
        InformerParams::all().namespace(ns).labels("mc=src"),
    )
    .owns::<ConfigMap>(InformerParams::all().namespace(ns).labels("mc=out"))
    .workers(2)
    .cache_sync_timeout(Duration::from_secs(2))
    .retry_backoff(Duration::from_millis(100), Duration::from_secs(1))
    .shutdown_timeout(Duration::from_secs(5))
    .on_result(reports.observer())
}

fn spawn(
    controller: MultiClusterController<ConfigMap>,
    stop: &CancellationToken,
) -> JoinHandle<Result<(), MultiClusterError>> {
    tokio::spawn(
        controller
            .shutdown_on(stop.clone())
            .run(reconcile, Arc::new(())),
    )
}

async fn wait_statuses(
    statuses: &ClusterStatuses,
    what: &str,
    condition: impl FnMut(&BTreeMap<String, ClusterStatus>) -> bool,
) {
    let waited = tokio::time::timeout(DEADLINE, statuses.wait_for(condition)).await;
    assert!(
        waited.is_ok(),
        "timed out waiting for {what}; statuses: {:?}",
        statuses.snapshot()
    );
}

async fn stop_and_join(stop: CancellationToken, run: JoinHandle<Result<(), MultiClusterError>>) {
    stop.cancel();
    tokio::time::timeout(DEADLINE, run)
        .await
        .expect("the controller did not stop")
        .unwrap()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_cluster_is_reconciled_with_its_own_client() {
    let (east, west, ns) = two_clusters().await;
    // The same namespace/name in both clusters, with different content.
    create_source(&east, &ns, "app", "from-east").await;
    create_source(&west, &ns, "app", "from-west").await;
    create_source(&west, &ns, "west-only", "w").await;

    let fleet = Fleet::new();
    fleet.add("east", east.client());
    fleet.add("west", west.client());
    let reports = Reports::new(&ns);
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let controller = controller(&fleet, &reports).metrics(&metrics);
    let statuses = controller.statuses();
    let stop = CancellationToken::new();
    let run = spawn(controller, &stop);

    reports.wait_reconciled("east", "app").await;
    reports.wait_reconciled("west", "app").await;
    reports.wait_reconciled("west", "west-only").await;
    let out = |cluster: &str, value: &str| {
        BTreeMap::from([
            ("cluster".to_string(), cluster.to_string()),
            ("value".to_string(), value.to_string()),
        ])
    };
    assert_eq!(
        output(&east, &ns, "app").await,
        Some(out("east", "from-east"))
    );
    assert_eq!(
        output(&west, &ns, "app").await,
        Some(out("west", "from-west"))
    );
    assert_eq!(
        output(&west, &ns, "west-only").await,
        Some(out("west", "w"))
    );
    // Written with west's client only, and never reconciled in east.
    assert_eq!(output(&east, &ns, "west-only").await, None);
    assert!(!reports.reconciled("east", "west-only"));

    wait_statuses(&statuses, "both synced", |s| {
        s.get("east") == Some(&ClusterStatus::Synced)
            && s.get("west") == Some(&ClusterStatus::Synced)
    })
    .await;

    // Deleting an owned output in west brings it back in west (owns() per cluster).
    // A reconcile already in flight (the output's own creation event) may report
    // after the delete without having seen it, so wait for reports until one leaves
    // the output back in place.
    Api::<ConfigMap>::namespaced(west.client(), &ns)
        .delete("app-out", &Default::default())
        .await
        .unwrap();
    let restored = tokio::time::timeout(DEADLINE, async {
        let mut rx = reports.0.subscribe();
        let mut seen = 0;
        loop {
            let v = rx
                .wait_for(|v| reconciled(&v[seen.min(v.len())..], &ns, "west", "app"))
                .await
                .unwrap();
            seen = v.len();
            drop(v);
            if let Some(data) = output(&west, &ns, "app").await {
                break data;
            }
        }
    })
    .await
    .expect("the deleted output was not restored in west");
    assert_eq!(restored, out("west", "from-west"));

    // Metrics: one controller name per cluster, controller-runtime's families.
    let text = encode(&registry);
    for cluster in ["east", "west"] {
        assert!(
            text.contains(&format!(
                "controller_runtime_max_concurrent_reconciles{{controller=\"configmap@{cluster}\"}} 2"
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "workqueue_adds_total{{name=\"configmap@{cluster}\"}}"
            )),
            "{text}"
        );
    }

    stop_and_join(stop, run).await;
    assert!(statuses.snapshot().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clusters_join_leave_and_rejoin_while_running() {
    let (east, west, ns) = two_clusters().await;
    create_source(&east, &ns, "first", "e").await;
    create_source(&west, &ns, "first", "w").await;

    let fleet = Fleet::new();
    fleet.add("east", east.client());
    let reports = Reports::new(&ns);
    let controller = controller(&fleet, &reports);
    let statuses = controller.statuses();
    let stop = CancellationToken::new();
    let run = spawn(controller, &stop);
    reports.wait_reconciled("east", "first").await;
    assert!(!reports.reconciled("west", "first"));

    // Added while running: reconciled.
    fleet.add("west", west.client());
    reports.wait_reconciled("west", "first").await;
    assert_eq!(
        output(&west, &ns, "first").await.unwrap()["cluster"],
        "west"
    );

    // Removed: its controller stops (its status goes away), east carries on.
    assert!(fleet.remove("west"));
    wait_statuses(&statuses, "west stopped", |s| {
        !s.contains_key("west") && s.contains_key("east")
    })
    .await;
    create_source(&west, &ns, "second", "w").await;
    create_source(&east, &ns, "second", "e").await;
    reports.wait_reconciled("east", "second").await;
    assert!(!reports.reconciled("west", "second"));
    assert_eq!(output(&west, &ns, "second").await, None);

    // Re-added: a fresh controller catches up with what happened meanwhile.
    fleet.add("west", west.client());
    reports.wait_reconciled("west", "second").await;
    assert_eq!(
        output(&west, &ns, "second").await.unwrap()["cluster"],
        "west"
    );
    wait_statuses(&statuses, "both synced", |s| {
        s.values().all(|st| *st == ClusterStatus::Synced) && s.len() == 2
    })
    .await;

    stop_and_join(stop, run).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_cluster_fails_alone_and_is_retried() {
    let (healthy, ns) = first_cluster().await;
    let fleet = Fleet::new();
    fleet.add("dead", unreachable_client());
    fleet.add("healthy", healthy.client());
    let reports = Reports::new(&ns);
    let controller = controller(&fleet, &reports).cache_sync_timeout(Duration::from_millis(500));
    let statuses = controller.statuses();
    let stop = CancellationToken::new();
    let run = spawn(controller, &stop);

    create_source(&healthy, &ns, "app", "h").await;
    reports.wait_reconciled("healthy", "app").await;
    // Failed, then failed again after a back-off: retried while it stays in the fleet.
    wait_statuses(&statuses, "dead failed twice, healthy synced", |s| {
        matches!(s.get("dead"), Some(ClusterStatus::Failed { attempts, error }) if *attempts >= 2 && error.contains("sync"))
            && s.get("healthy") == Some(&ClusterStatus::Synced)
    })
    .await;
    // The healthy cluster keeps working while the other one fails.
    create_source(&healthy, &ns, "later", "h").await;
    reports.wait_reconciled("healthy", "later").await;

    // Removing the failed cluster ends its retries.
    fleet.remove("dead");
    wait_statuses(&statuses, "dead gone", |s| !s.contains_key("dead")).await;
    stop_and_join(stop, run).await;
    assert!(statuses.snapshot().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_manager_runs_a_multicluster_controller() {
    let (east, west, ns) = two_clusters().await;
    create_source(&east, &ns, "app", "e").await;
    create_source(&west, &ns, "app", "w").await;
    let fleet = Fleet::new();
    fleet.add("east", east.client());
    fleet.add("west", west.client());
    let reports = Reports::new(&ns);

    let mut manager = Manager::builder(east.client()).build().unwrap();
    manager
        .add_multicluster(controller(&fleet, &reports), reconcile, Arc::new(()))
        .unwrap();
    // Names are unique within a manager.
    let again = manager.add_multicluster(controller(&fleet, &reports), reconcile, Arc::new(()));
    assert!(matches!(again, Err(ManagerError::DuplicateController(n)) if n == "configmap"));
    // A source over an existing informer would be shared by the clusters: refused.
    let factory = SharedInformerFactory::new(east.client());
    let informer = factory.informer::<ConfigMap>(InformerParams::all());
    let shared =
        MultiClusterController::<ConfigMap>::new(fleet.clone(), Source::from_informer(informer))
            .named("shared");
    let refused = manager.add_multicluster(shared, reconcile, Arc::new(()));
    assert!(
        matches!(
            refused,
            Err(ManagerError::MultiCluster(
                MultiClusterError::SharedInformer { .. }
            ))
        ),
        "{refused:?}"
    );

    let stop = CancellationToken::new();
    let run = tokio::spawn(manager.run(stop.clone()));
    reports.wait_reconciled("east", "app").await;
    reports.wait_reconciled("west", "app").await;
    assert_eq!(output(&west, &ns, "app").await.unwrap()["cluster"], "west");
    stop.cancel();
    tokio::time::timeout(DEADLINE, run)
        .await
        .expect("the manager did not stop")
        .unwrap()
        .unwrap();
}
