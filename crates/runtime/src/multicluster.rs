//! Multi-cluster controllers: one controller over a changing set of clusters
//! (controller-runtime's [multicluster-runtime]).
//!
//! A [`Fleet`] is a cheap, clonable registry of named clusters (`name -> Client`);
//! clusters can be [added](Fleet::add) and [removed](Fleet::remove) at any time, also
//! while controllers run. A [`MultiClusterController`] runs one ordinary
//! [`Controller`] per engaged cluster, built from the same recipe:
//!
//! * **Per cluster**: its own informer factory, caches, work queue and workers. A key is
//!   never reconciled by two workers of one cluster at once; the same `namespace/name`
//!   in two clusters are two keys. The reconciler gets a [`ClusterContext`]: the
//!   cluster's name, its client and the shared context.
//! * **Engage / disengage**: adding a cluster starts its controller; removing it (or
//!   replacing its client) stops it gracefully, like a controller shutdown (no new keys,
//!   reconciles in flight finish within the shutdown timeout, informers stop). Its
//!   status entry disappears once it has stopped. Re-adding starts it afresh, never
//!   while the previous one is still stopping.
//! * **Isolation**: a cluster whose caches do not sync within the
//!   [cache sync timeout](MultiClusterController::cache_sync_timeout) (unreachable,
//!   forbidden, ...) is reported as [`ClusterStatus::Failed`] (and logged), and retried
//!   with exponential back-off while it stays in the fleet; the other clusters are not
//!   affected. See [`MultiClusterController::statuses`].
//! * **Metrics**: each cluster's controller is named `<name>@<cluster>` (e.g.
//!   `deployment@east`), so the `controller_runtime_*` and `workqueue_*` families keep
//!   controller-runtime's names and label sets (`controller="deployment@east"`,
//!   `name="deployment@east"`); select a controller's clusters with
//!   `controller=~"deployment@.*"`.
//! * **Manager**: [`Manager::add_multicluster`](crate::manager::Manager::add_multicluster)
//!   runs it with the manager's metrics, leader election and readiness (ready once every
//!   engaged cluster has synced or failed once).
//!
//! [multicluster-runtime]: https://github.com/kubernetes-sigs/multicluster-runtime
//!
//! ```no_run
//! use std::sync::Arc;
//! use k8s_openapi::api::apps::v1::Deployment;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kubewright_client::{Api, Client};
//! use kubewright_client::config::Kubeconfig;
//! use kubewright_runtime::controller::{Action, shutdown_signal};
//! use kubewright_runtime::multicluster::{ClusterContext, Fleet, MultiClusterController};
//! use kubewright_runtime::InformerParams;
//!
//! struct Settings;
//!
//! async fn reconcile(
//!     deploy: Arc<Deployment>,
//!     cx: Arc<ClusterContext<Settings>>,
//! ) -> Result<Action, kubewright_client::Error> {
//!     // `cx.client` talks to the cluster `cx.cluster` the Deployment lives in.
//!     let ns = deploy.metadata.namespace.as_deref().unwrap_or("default");
//!     let cms: Api<ConfigMap> = Api::namespaced(cx.client.clone(), ns);
//!     let _ = cms;
//!     Ok(Action::await_change())
//! }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let kubeconfig = Kubeconfig::load_default()?;
//! let fleet = Fleet::from_kubeconfig(&kubeconfig, &["east", "west"])?;
//! let controller = MultiClusterController::<Deployment>::new(fleet.clone(), InformerParams::all())
//!     .owns::<ConfigMap>(InformerParams::all())
//!     .workers(2) // per cluster
//!     .shutdown_on(shutdown_signal());
//! let statuses = controller.statuses(); // Starting / Synced / Failed per cluster
//! let running = tokio::spawn(controller.run(reconcile, Arc::new(Settings)));
//! // later: fleet.add("south", client) engages a cluster, fleet.remove("west") stops it
//! # let _ = statuses;
//! running.await??;
//! # Ok(()) }
//! ```

use crate::controller::{
    Action, Bound, Controller, ControllerError, ReconcileReport, Reconciler, Runnable, Source,
    link, shutdown_signal,
};
use crate::factory::SharedInformerFactory;
use crate::metrics::Metrics;
use crate::workqueue::RateLimiter;
use futures::FutureExt;
use futures::future::BoxFuture;
use kubewright_client::Client;
use kubewright_client::config::{ConfigError, KubeConfigOptions, Kubeconfig};
use kubewright_core::{ObjectKey, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// Default first delay before a failed cluster is tried again (doubling up to
/// [`DEFAULT_RETRY_MAX`]).
pub const DEFAULT_RETRY_INITIAL: Duration = Duration::from_secs(1);
/// Default longest delay between two tries of a failed cluster.
pub const DEFAULT_RETRY_MAX: Duration = Duration::from_secs(300);

// ---------------------------------------------------------------------------------------
// Fleet
// ---------------------------------------------------------------------------------------

#[derive(Clone)]
struct Member {
    /// Changes when the cluster is added again or its client replaced.
    id: u64,
    client: Client,
}

#[derive(Clone, Default)]
struct Members {
    clusters: BTreeMap<String, Member>,
    next_id: u64,
}

/// A set of named clusters, each with its client (a cluster provider). Clones share the
/// set; changes reach running [`MultiClusterController`]s at once.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use kubewright_client::{Client, Config};
/// use kubewright_runtime::multicluster::Fleet;
///
/// let client = Client::new(Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap();
/// let fleet = Fleet::new();
/// fleet.add("east", client.clone());
/// fleet.add("west", client);
/// assert_eq!(fleet.names(), ["east", "west"]);
/// assert!(fleet.remove("west"));
/// assert!(!fleet.contains("west"));
/// # }
/// ```
#[derive(Clone)]
pub struct Fleet {
    members: Arc<watch::Sender<Members>>,
}

impl fmt::Debug for Fleet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fleet")
            .field("clusters", &self.names())
            .finish()
    }
}

impl Default for Fleet {
    fn default() -> Self {
        Self::new()
    }
}

/// Why a [`Fleet`] could not be built from a kubeconfig.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// A context could not be resolved (missing, or its cluster, user or files).
    #[error("kubeconfig context {context:?}: {source}")]
    Config {
        /// The context.
        context: String,
        /// Why.
        #[source]
        source: ConfigError,
    },
    /// A client could not be built for a context (e.g. invalid TLS settings).
    #[error("kubeconfig context {context:?}: {source}")]
    Client {
        /// The context.
        context: String,
        /// Why.
        #[source]
        source: kubewright_client::Error,
    },
}

impl Fleet {
    /// An empty fleet.
    pub fn new() -> Self {
        Self {
            members: Arc::new(watch::channel(Members::default()).0),
        }
    }

    /// A fleet with one cluster per named context of `kubeconfig`, each named after its
    /// context.
    pub fn from_kubeconfig(kubeconfig: &Kubeconfig, contexts: &[&str]) -> Result<Self, FleetError> {
        let fleet = Self::new();
        for context in contexts {
            fleet.add(*context, kubeconfig_client(kubeconfig, context)?);
        }
        Ok(fleet)
    }

    /// A fleet with one cluster per context of `kubeconfig`.
    pub fn from_kubeconfig_all(kubeconfig: &Kubeconfig) -> Result<Self, FleetError> {
        let names: Vec<&str> = kubeconfig
            .contexts
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        Self::from_kubeconfig(kubeconfig, &names)
    }

    /// Engages a cluster. A cluster of that name already in the fleet is replaced (its
    /// controllers restart with the new client); returns whether one was.
    pub fn add(&self, name: impl Into<String>, client: Client) -> bool {
        let name = name.into();
        let mut replaced = false;
        self.members.send_modify(|m| {
            let id = m.next_id;
            m.next_id += 1;
            replaced = m.clusters.insert(name, Member { id, client }).is_some();
        });
        replaced
    }

    /// Disengages a cluster: its controllers stop. Returns whether it was in the fleet.
    pub fn remove(&self, name: &str) -> bool {
        self.members
            .send_if_modified(|m| m.clusters.remove(name).is_some())
    }

    /// The client of a cluster.
    pub fn client(&self, name: &str) -> Option<Client> {
        self.members
            .borrow()
            .clusters
            .get(name)
            .map(|m| m.client.clone())
    }

    /// Whether a cluster is in the fleet.
    pub fn contains(&self, name: &str) -> bool {
        self.members.borrow().clusters.contains_key(name)
    }

    /// The clusters' names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.members.borrow().clusters.keys().cloned().collect()
    }

    /// How many clusters are in the fleet.
    pub fn len(&self) -> usize {
        self.members.borrow().clusters.len()
    }

    /// Whether the fleet is empty.
    pub fn is_empty(&self) -> bool {
        self.members.borrow().clusters.is_empty()
    }

    fn subscribe(&self) -> watch::Receiver<Members> {
        self.members.subscribe()
    }
}

/// A client for one context of `kubeconfig` (its cluster, user and namespace).
pub fn kubeconfig_client(kubeconfig: &Kubeconfig, context: &str) -> Result<Client, FleetError> {
    let options = KubeConfigOptions {
        context: Some(context.to_string()),
        ..KubeConfigOptions::default()
    };
    let config = kubewright_client::Config::from_custom_kubeconfig(kubeconfig.clone(), &options)
        .map_err(|source| FleetError::Config {
            context: context.to_string(),
            source,
        })?;
    Client::new(config).map_err(|source| FleetError::Client {
        context: context.to_string(),
        source,
    })
}

// ---------------------------------------------------------------------------------------
// Status
// ---------------------------------------------------------------------------------------

/// Where one cluster's controller stands; see [`MultiClusterController::statuses`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClusterStatus {
    /// Engaged, waiting for the caches to sync for the first time.
    Starting,
    /// The caches synced; the workers run.
    Synced,
    /// The controller failed (e.g. the caches did not sync in time) and is retried with
    /// back-off; it stays `Failed` until a retry syncs.
    Failed {
        /// The last error.
        error: String,
        /// Failed tries so far.
        attempts: u32,
    },
}

/// The status of every engaged cluster of one [`MultiClusterController`] (cheap to
/// clone). A cluster appears when its controller starts and disappears once it has
/// stopped after being removed from the fleet.
#[derive(Clone)]
pub struct ClusterStatuses(Arc<watch::Sender<BTreeMap<String, ClusterStatus>>>);

impl fmt::Debug for ClusterStatuses {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ClusterStatuses")
            .field(&*self.0.borrow())
            .finish()
    }
}

impl ClusterStatuses {
    fn new() -> Self {
        Self(Arc::new(watch::channel(BTreeMap::new()).0))
    }

    /// One cluster's status.
    pub fn get(&self, cluster: &str) -> Option<ClusterStatus> {
        self.0.borrow().get(cluster).cloned()
    }

    /// Every cluster's status.
    pub fn snapshot(&self) -> BTreeMap<String, ClusterStatus> {
        self.0.borrow().clone()
    }

    /// A receiver notified on every change.
    pub fn subscribe(&self) -> watch::Receiver<BTreeMap<String, ClusterStatus>> {
        self.0.subscribe()
    }

    /// Waits until `condition` holds for the statuses; returns them. Wrap it in a
    /// timeout.
    pub async fn wait_for(
        &self,
        mut condition: impl FnMut(&BTreeMap<String, ClusterStatus>) -> bool,
    ) -> BTreeMap<String, ClusterStatus> {
        let mut rx = self.0.subscribe();
        match rx.wait_for(|s| condition(s)).await {
            Ok(s) => s.clone(),
            // Unreachable: `self` holds the sender.
            Err(_) => self.snapshot(),
        }
    }

    fn set(&self, cluster: &str, status: ClusterStatus) {
        self.0.send_if_modified(|s| {
            if s.get(cluster) == Some(&status) {
                return false;
            }
            s.insert(cluster.to_string(), status);
            true
        });
    }

    fn remove(&self, cluster: &str) {
        self.0.send_if_modified(|s| s.remove(cluster).is_some());
    }

    /// Every engaged cluster has synced or failed at least once.
    fn settled(&self) -> bool {
        self.0
            .borrow()
            .values()
            .all(|s| !matches!(s, ClusterStatus::Starting))
    }
}

// ---------------------------------------------------------------------------------------
// Controller
// ---------------------------------------------------------------------------------------

/// What a reconcile of a [`MultiClusterController`] gets as its context.
pub struct ClusterContext<C> {
    /// The cluster's name in the fleet.
    pub cluster: String,
    /// The cluster's client.
    pub client: Client,
    /// The context shared by every cluster.
    pub ctx: Arc<C>,
}

impl<C> fmt::Debug for ClusterContext<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClusterContext")
            .field("cluster", &self.cluster)
            .field("client", &self.client)
            .finish_non_exhaustive()
    }
}

/// Why a [`MultiClusterController`] could not run or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum MultiClusterError {
    /// A source wraps an informer built elsewhere
    /// ([`Source::from_informer`]), which all clusters would share.
    #[error(
        "multi-cluster controller {controller}: source {informer} wraps an existing informer; sources must be made from parameters so that each cluster gets its own"
    )]
    SharedInformer {
        /// The controller.
        controller: String,
        /// The informer's description.
        informer: String,
    },
    /// A cluster's controller failed while shutting down (reconciles aborted).
    #[error(transparent)]
    Controller(#[from] ControllerError),
}

type Build<K> = Arc<dyn Fn(&Arc<SharedInformerFactory>) -> Controller<K> + Send + Sync>;
type Step<K> = Arc<dyn Fn(Controller<K>, &str) -> Controller<K> + Send + Sync>;
type MakeFactory = Arc<dyn Fn(Client) -> SharedInformerFactory + Send + Sync>;

/// One controller over every cluster of a [`Fleet`]; see the [module docs](self).
pub struct MultiClusterController<K> {
    name: String,
    fleet: Fleet,
    build: Build<K>,
    steps: Vec<Step<K>>,
    make_factory: MakeFactory,
    shared_informers: Vec<String>,
    retry: (Duration, Duration),
    metrics: Option<Metrics>,
    statuses: ClusterStatuses,
    shutdown_tokens: Vec<CancellationToken>,
    shutdown_on_signal: bool,
}

impl<K> fmt::Debug for MultiClusterController<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MultiClusterController")
            .field("name", &self.name)
            .field("fleet", &self.fleet)
            .field("statuses", &self.statuses)
            .finish_non_exhaustive()
    }
}

impl<K> MultiClusterController<K>
where
    K: Resource + Clone + DeserializeOwned + Serialize + fmt::Debug + Send + Sync + 'static,
{
    /// A controller of a static type (e.g. `Deployment`) over `fleet`.
    pub fn new(fleet: Fleet, source: impl Into<Source<K>>) -> Self
    where
        K::DynamicType: Default,
    {
        Self::new_with(fleet, K::DynamicType::default(), source)
    }

    /// A controller of a type described at run time (e.g. `DynamicObject` with its
    /// [`ApiResource`](kubewright_core::ApiResource)) over `fleet`.
    pub fn new_with(fleet: Fleet, dt: K::DynamicType, source: impl Into<Source<K>>) -> Self {
        let source = source.into();
        let shared_informers = source
            .shared_informer()
            .map(|i| i.describe().to_string())
            .into_iter()
            .collect();
        let name = K::kind(&dt).to_lowercase();
        let build: Build<K> =
            Arc::new(move |factory| Controller::new_with(factory, dt.clone(), source.clone()));
        Self {
            name,
            fleet,
            build,
            steps: Vec::new(),
            make_factory: Arc::new(SharedInformerFactory::new),
            shared_informers,
            retry: (DEFAULT_RETRY_INITIAL, DEFAULT_RETRY_MAX),
            metrics: None,
            statuses: ClusterStatuses::new(),
            shutdown_tokens: Vec::new(),
            shutdown_on_signal: false,
        }
    }
}

impl<K> MultiClusterController<K>
where
    K: Resource + Send + Sync + 'static,
{
    fn step(
        mut self,
        step: impl Fn(Controller<K>, &str) -> Controller<K> + Send + Sync + 'static,
    ) -> Self {
        self.steps.push(Arc::new(step));
        self
    }

    /// Also reconcile the controller owner of every `X` (in the same cluster); see
    /// [`Controller::owns`].
    #[must_use]
    pub fn owns<X>(mut self, source: impl Into<Source<X>>) -> Self
    where
        X: Resource + Send + Sync + 'static,
    {
        let source = source.into();
        self.shared_informers
            .extend(source.shared_informer().map(|i| i.describe().to_string()));
        self.step(move |c, _| c.owns::<X>(source.clone()))
    }

    /// Also reconcile the primary objects `mapper` returns for every `X` (in the same
    /// cluster); see [`Controller::watches`].
    #[must_use]
    pub fn watches<X>(
        mut self,
        source: impl Into<Source<X>>,
        mapper: impl Fn(&X) -> Vec<ObjectKey> + Send + Sync + 'static,
    ) -> Self
    where
        X: Resource + Send + Sync + 'static,
    {
        let source = source.into();
        self.shared_informers
            .extend(source.shared_informer().map(|i| i.describe().to_string()));
        let mapper = Arc::new(mapper);
        self.step(move |c, _| {
            let mapper = mapper.clone();
            c.watches::<X>(source.clone(), move |x| mapper(x))
        })
    }

    /// Sets the name (default: the primary kind in lower case); each cluster's
    /// controller is named `<name>@<cluster>`.
    #[must_use]
    pub fn named(mut self, name: &str) -> Self {
        self.name = name.to_string();
        self
    }

    /// Workers per cluster (default 1).
    #[must_use]
    pub fn workers(self, n: usize) -> Self {
        self.step(move |c, _| c.workers(n))
    }

    /// How long each cluster's caches may take to sync before that cluster is reported
    /// [`Failed`](ClusterStatus::Failed) and retried (default 2 min).
    #[must_use]
    pub fn cache_sync_timeout(self, timeout: Duration) -> Self {
        self.step(move |c, _| c.cache_sync_timeout(timeout))
    }

    /// How long reconciles in flight may take to finish when a cluster stops (default
    /// 30 s).
    #[must_use]
    pub fn shutdown_timeout(self, timeout: Duration) -> Self {
        self.step(move |c, _| c.shutdown_timeout(timeout))
    }

    /// The work queues' rate limiter (one per cluster and run); see
    /// [`Controller::rate_limiter`].
    #[must_use]
    pub fn rate_limiter<R>(self, make: impl Fn() -> R + Send + Sync + 'static) -> Self
    where
        R: RateLimiter<ObjectKey> + 'static,
    {
        let make = Arc::new(make);
        self.step(move |c, _| {
            let make = make.clone();
            c.rate_limiter(move || make())
        })
    }

    /// The back-off between tries of a failed cluster: `initial`, doubling up to `max`
    /// (default 1 s to 5 min).
    #[must_use]
    pub fn retry_backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.retry = (initial, max.max(initial));
        self
    }

    /// Builds each cluster's informer factory (default [`SharedInformerFactory::new`]),
    /// e.g. with [`ReflectorConfig`](crate::ReflectorConfig) defaults.
    #[must_use]
    pub fn informer_factory(
        mut self,
        make: impl Fn(Client) -> SharedInformerFactory + Send + Sync + 'static,
    ) -> Self {
        self.make_factory = Arc::new(make);
        self
    }

    /// Any other per-cluster setting: `f` gets each cluster's controller and the
    /// cluster's name.
    #[must_use]
    pub fn configure(
        self,
        f: impl Fn(Controller<K>, &str) -> Controller<K> + Send + Sync + 'static,
    ) -> Self {
        self.step(f)
    }

    /// Calls `f` with the cluster's name after every reconcile; see
    /// [`Controller::on_result`].
    #[must_use]
    pub fn on_result(self, f: impl Fn(&str, &ReconcileReport) + Send + Sync + 'static) -> Self {
        let f = Arc::new(f);
        self.step(move |c, cluster| {
            let (f, cluster) = (f.clone(), cluster.to_string());
            c.on_result(move |report| f(&cluster, report))
        })
    }

    /// Reports reconcile and work-queue metrics (a [`Manager`](crate::manager::Manager)
    /// sets its own).
    #[must_use]
    pub fn metrics(mut self, metrics: &Metrics) -> Self {
        self.metrics = Some(metrics.clone());
        self
    }

    /// Shuts down gracefully (every cluster) when `token` is cancelled. May be given
    /// several times.
    #[must_use]
    pub fn shutdown_on(mut self, token: CancellationToken) -> Self {
        self.shutdown_tokens.push(token);
        self
    }

    /// Shuts down gracefully on SIGTERM or SIGINT; see [`shutdown_signal`].
    #[must_use]
    pub fn shutdown_on_signal(mut self) -> Self {
        self.shutdown_on_signal = true;
        self
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The fleet.
    pub fn fleet(&self) -> &Fleet {
        &self.fleet
    }

    /// The status of each engaged cluster, live while the controller runs.
    pub fn statuses(&self) -> ClusterStatuses {
        self.statuses.clone()
    }

    /// Runs until shut down (see [`shutdown_on`](Self::shutdown_on)), following the
    /// fleet's changes; returns `Ok(())` after a graceful shutdown of every cluster.
    pub async fn run<R, C>(self, reconciler: R, ctx: Arc<C>) -> Result<(), MultiClusterError>
    where
        R: Reconciler<K, ClusterContext<C>>,
        C: Send + Sync + 'static,
    {
        let bound = Arc::new(self.bind(reconciler, ctx)?);
        let stop = CancellationToken::new();
        let _unlink = stop.clone().drop_guard();
        bound.link_shutdown(&stop);
        bound
            .run_fleet(stop, CancellationToken::new())
            .await
            .map_err(MultiClusterError::from)
    }

    pub(crate) fn bind<R, C>(
        self,
        reconciler: R,
        ctx: Arc<C>,
    ) -> Result<MultiBound<K, R, C>, MultiClusterError>
    where
        R: Reconciler<K, ClusterContext<C>>,
        C: Send + Sync + 'static,
    {
        if let Some(informer) = self.shared_informers.first() {
            return Err(MultiClusterError::SharedInformer {
                controller: self.name,
                informer: informer.clone(),
            });
        }
        Ok(MultiBound {
            controller: self,
            reconciler: Arc::new(reconciler),
            ctx,
        })
    }

    pub(crate) fn set_metrics_if_unset(&mut self, metrics: &Metrics) {
        if self.metrics.is_none() {
            self.metrics = Some(metrics.clone());
        }
    }

    /// The controller of one cluster over `factory`.
    fn cluster_controller(
        &self,
        factory: &Arc<SharedInformerFactory>,
        cluster: &str,
    ) -> Controller<K> {
        let mut c = (self.build)(factory).named(&format!("{}@{cluster}", self.name));
        if let Some(m) = &self.metrics {
            c = c.metrics(m);
        }
        for step in &self.steps {
            c = step(c, cluster);
        }
        c
    }

    /// The delay before try `attempts + 1` of a failed cluster.
    fn retry_delay(&self, attempts: u32) -> Duration {
        let (initial, max) = self.retry;
        let factor = 2u32.saturating_pow(attempts.saturating_sub(1).min(31));
        initial.saturating_mul(factor).min(max)
    }
}

/// One reconciler shared by every cluster's controller.
struct SharedReconciler<R>(Arc<R>);

impl<R> Clone for SharedReconciler<R> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<K, C, R> Reconciler<K, C> for SharedReconciler<R>
where
    K: Send + Sync + 'static,
    C: Send + Sync + 'static,
    R: Reconciler<K, C>,
{
    type Error = R::Error;

    fn reconcile(
        &self,
        obj: Arc<K>,
        ctx: Arc<C>,
    ) -> impl Future<Output = Result<Action, Self::Error>> + Send {
        self.0.reconcile(obj, ctx)
    }

    fn error_policy(&self, obj: &Arc<K>, error: &Self::Error, ctx: &C) -> Action {
        self.0.error_policy(obj, error, ctx)
    }

    fn on_missing(&self, key: ObjectKey, ctx: Arc<C>) -> impl Future<Output = ()> + Send {
        self.0.on_missing(key, ctx)
    }
}

/// A multi-cluster controller bound to its reconciler and context: what runs.
pub(crate) struct MultiBound<K, R, C> {
    controller: MultiClusterController<K>,
    reconciler: Arc<R>,
    ctx: Arc<C>,
}

/// A running cluster of the fleet.
struct Engaged {
    id: u64,
    stop: CancellationToken,
}

impl<K, R, C> MultiBound<K, R, C>
where
    K: Resource + Send + Sync + 'static,
    R: Reconciler<K, ClusterContext<C>>,
    C: Send + Sync + 'static,
{
    fn link_shutdown(&self, stop: &CancellationToken) {
        for token in &self.controller.shutdown_tokens {
            link(token.clone(), stop.clone());
        }
        if self.controller.shutdown_on_signal {
            link(shutdown_signal(), stop.clone());
        }
    }

    /// Follows the fleet until `stop`: starts a cluster's controller when it joins,
    /// stops it when it leaves or its client changes.
    async fn run_fleet(
        self: Arc<Self>,
        stop: CancellationToken,
        abort: CancellationToken,
    ) -> Result<(), ControllerError> {
        let name = self.controller.name.clone();
        let mut members = self.controller.fleet.subscribe();
        let mut engaged: HashMap<String, Engaged> = HashMap::new();
        // One lane per cluster name: a cluster's next controller starts only once the
        // previous one has stopped.
        let mut lanes: HashMap<String, Arc<tokio::sync::Mutex<()>>> = HashMap::new();
        let mut tasks = JoinSet::new();
        let mut task_names: HashMap<tokio::task::Id, (String, u64)> = HashMap::new();
        tracing::info!(controller = %name, clusters = ?self.controller.fleet.names(), "starting multi-cluster controller");
        loop {
            let current = members.borrow_and_update().clusters.clone();
            engaged.retain(|cluster, e| {
                let keep = current.get(cluster).is_some_and(|m| m.id == e.id);
                if !keep {
                    tracing::info!(controller = %name, %cluster, "cluster left the fleet, stopping its controller");
                    e.stop.cancel();
                }
                keep
            });
            for (cluster, member) in &current {
                if engaged.contains_key(cluster) {
                    continue;
                }
                tracing::info!(controller = %name, %cluster, "engaging cluster");
                let token = stop.child_token();
                let lane = lanes.entry(cluster.clone()).or_default().clone();
                let handle = tasks.spawn(self.clone().run_cluster(
                    cluster.clone(),
                    member.client.clone(),
                    lane,
                    token.clone(),
                    abort.clone(),
                ));
                task_names.insert(handle.id(), (cluster.clone(), member.id));
                engaged.insert(
                    cluster.clone(),
                    Engaged {
                        id: member.id,
                        stop: token,
                    },
                );
            }
            lanes.retain(|cluster, lane| {
                engaged.contains_key(cluster) || Arc::strong_count(lane) > 1
            });
            tokio::select! {
                changed = members.changed() => {
                    if changed.is_err() {
                        // Unreachable: the controller holds the fleet.
                        stop.cancelled().await;
                        break;
                    }
                }
                () = stop.cancelled() => break,
                Some(ended) = tasks.join_next_with_id(), if !tasks.is_empty() => {
                    let id = match &ended { Ok((id, _)) => *id, Err(e) => e.id() };
                    let Some((cluster, member_id)) = task_names.remove(&id) else { continue };
                    match ended {
                        Ok((_, Some(error))) => tracing::error!(controller = %name, %cluster, %error, "cluster controller stopped with an error"),
                        Ok((_, None)) => {}
                        Err(e) => tracing::error!(controller = %name, %cluster, error = %e, "cluster controller task failed"),
                    }
                    // Ended without being asked to (a panic): start it again.
                    if engaged.get(&cluster).is_some_and(|e| e.id == member_id && !e.stop.is_cancelled()) {
                        engaged.remove(&cluster);
                    }
                }
            }
        }
        tracing::info!(controller = %name, "stopping every cluster");
        let mut first_error = None;
        while let Some(ended) = tasks.join_next().await {
            match ended {
                Ok(Some(error)) => {
                    first_error.get_or_insert(error);
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::error!(controller = %name, error = %e, "cluster controller task failed")
                }
            }
        }
        tracing::info!(controller = %name, "multi-cluster controller stopped");
        first_error.map_or(Ok(()), Err)
    }

    /// Runs one cluster's controller until `stop`, retrying with back-off when it fails.
    async fn run_cluster(
        self: Arc<Self>,
        cluster: String,
        client: Client,
        lane: Arc<tokio::sync::Mutex<()>>,
        stop: CancellationToken,
        abort: CancellationToken,
    ) -> Option<ControllerError> {
        let _lane = tokio::select! {
            guard = lane.lock_owned() => guard,
            () = stop.cancelled() => return None,
        };
        let mc = &self.controller;
        let statuses = &mc.statuses;
        let ctx = Arc::new(ClusterContext {
            cluster: cluster.clone(),
            client: client.clone(),
            ctx: self.ctx.clone(),
        });
        let reconciler = SharedReconciler(self.reconciler.clone());
        statuses.set(&cluster, ClusterStatus::Starting);
        let mut attempts = 0u32;
        let outcome = loop {
            let factory = Arc::new((mc.make_factory)(client.clone()));
            let controller = mc.cluster_controller(&factory, &cluster);
            let synced = controller.sync_waiter();
            let bound: Arc<Bound<K, SharedReconciler<R>, ClusterContext<C>>> =
                Arc::new(controller.bind(reconciler.clone(), ctx.clone()));
            let run = bound.run(stop.clone(), abort.clone());
            tokio::pin!(run);
            let result = tokio::select! {
                result = &mut run => result,
                synced = synced => {
                    if synced && !stop.is_cancelled() {
                        tracing::info!(controller = %mc.name, %cluster, "cluster caches synced");
                        statuses.set(&cluster, ClusterStatus::Synced);
                    }
                    run.await
                }
            };
            factory.shutdown().await;
            match result {
                Ok(()) => break None,
                Err(error) if stop.is_cancelled() => break Some(error),
                Err(error) => {
                    attempts = attempts.saturating_add(1);
                    let delay = mc.retry_delay(attempts);
                    tracing::error!(controller = %mc.name, %cluster, %error, attempts, retry_in = ?delay, "cluster failed, retrying");
                    statuses.set(
                        &cluster,
                        ClusterStatus::Failed {
                            error: error.to_string(),
                            attempts,
                        },
                    );
                    tokio::select! {
                        () = tokio::time::sleep(delay) => {}
                        () = stop.cancelled() => break None,
                    }
                }
            }
        };
        statuses.remove(&cluster);
        tracing::info!(controller = %mc.name, %cluster, "cluster controller stopped");
        outcome
    }
}

impl<K, R, C> Runnable for MultiBound<K, R, C>
where
    K: Resource + Send + Sync + 'static,
    R: Reconciler<K, ClusterContext<C>>,
    C: Send + Sync + 'static,
{
    fn name(&self) -> &str {
        &self.controller.name
    }
    fn has_synced(&self) -> bool {
        self.controller.statuses.settled()
    }
    fn run(
        self: Arc<Self>,
        stop: CancellationToken,
        abort: CancellationToken,
    ) -> BoxFuture<'static, Result<(), ControllerError>> {
        async move {
            let stop = stop.child_token();
            let _unlink = stop.clone().drop_guard();
            self.link_shutdown(&stop);
            self.run_fleet(stop, abort).await
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn client() -> Client {
        #[allow(clippy::unwrap_used)]
        Client::new(kubewright_client::Config::new(
            "http://127.0.0.1:1".parse().unwrap(),
        ))
        .unwrap()
    }

    #[test]
    fn fleet_membership() {
        let fleet = Fleet::new();
        assert!(fleet.is_empty());
        assert!(!fleet.add("a", client()));
        assert!(fleet.add("a", client()));
        fleet.add("b", client());
        assert_eq!(fleet.names(), ["a", "b"]);
        assert!(fleet.client("a").is_some());
        assert!(fleet.remove("a"));
        assert!(!fleet.remove("a"));
        assert_eq!(fleet.len(), 1);
    }

    #[test]
    fn retry_delays_double_up_to_the_max() {
        let c =
            MultiClusterController::<ConfigMap>::new(Fleet::new(), crate::InformerParams::all())
                .retry_backoff(Duration::from_secs(1), Duration::from_secs(5));
        let delays: Vec<u64> = (1..=5).map(|a| c.retry_delay(a).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 5, 5]);
        assert_eq!(c.retry_delay(u32::MAX), Duration::from_secs(5));
    }

    #[test]
    fn kubeconfig_contexts_become_clusters() {
        #[allow(clippy::unwrap_used)]
        let kc = Kubeconfig::from_yaml(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c1\n  cluster:\n    server: http://127.0.0.1:1\n- name: c2\n  cluster:\n    server: http://127.0.0.1:2\nusers:\n- name: u\n  user: {}\ncontexts:\n- name: east\n  context: {cluster: c1, user: u}\n- name: west\n  context: {cluster: c2, user: u}\ncurrent-context: east\n",
        )
        .unwrap();
        #[allow(clippy::unwrap_used)]
        let fleet = Fleet::from_kubeconfig_all(&kc).unwrap();
        assert_eq!(fleet.names(), ["east", "west"]);
        let err = Fleet::from_kubeconfig(&kc, &["east", "north"]);
        assert!(
            matches!(&err, Err(FleetError::Config { context, .. }) if context == "north"),
            "{err:?}"
        );
    }
}
