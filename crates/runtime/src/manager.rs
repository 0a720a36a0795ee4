//! The [`Manager`]: several controllers over one client, one informer factory and one
//! metrics registry, with leader election, a `/metrics` endpoint and health probes
//! (controller-runtime's `Manager`).
//!
//! * **Leader election** (when configured with [`ManagerBuilder::leader_election`]): the
//!   controllers, and the informers they start, run only while this manager holds the
//!   Lease. Losing it aborts the reconciles in flight at once (another manager may be
//!   leading already) and, by default, makes [`Manager::run`] return
//!   [`ManagerError::LeadershipLost`] so that the process exits and restarts, like
//!   controller-runtime; with [`ManagerBuilder::exit_on_leadership_loss`]`(false)` the
//!   manager stops its controllers and stands for election again. A graceful shutdown
//!   lets the reconciles in flight finish and then releases the Lease (by default), so
//!   the next leader takes over at once.
//! * **Metrics** ([`ManagerBuilder::metrics_addr`]): `GET /metrics` serves the registry
//!   (see [`Manager::registry`] to add your own) with controller-runtime's
//!   `controller_runtime_*`, the `workqueue_*` and the `rest_client_*` families
//!   ([`Metrics`]).
//! * **Probes** ([`ManagerBuilder::health_addr`]): `/healthz` (`ping`, and
//!   `leaderElection`, which fails when this leader has not renewed its Lease in time)
//!   and `/readyz` (`ping`, `informer-sync`: every cache of the running controllers has
//!   synced — a standby manager has nothing to sync and is ready —, and `shutdown`, which
//!   fails once shutdown started), in the Kubernetes format of [`crate::health`].
//! * **Errors.** A controller failing (e.g. its caches did not sync in time) stops the
//!   whole manager, gracefully, and `run` returns that error.
//!
//! Port 0 picks a free port: the bound addresses are known right after
//! [`ManagerBuilder::build`] ([`Manager::metrics_addr`], [`Manager::health_addr`]).
//!
//! ```no_run
//! use std::sync::Arc;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kubewright_client::Client;
//! use kubewright_runtime::controller::{Action, shutdown_signal};
//! use kubewright_runtime::manager::{LeaderElection, Manager};
//! use kubewright_runtime::InformerParams;
//!
//! async fn reconcile(cm: Arc<ConfigMap>, _ctx: Arc<()>) -> Result<Action, std::convert::Infallible> {
//!     tracing::info!(name = ?cm.metadata.name, "reconciled");
//!     Ok(Action::await_change())
//! }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = Client::try_default().await?;
//! let mut manager = Manager::builder(client)
//!     .leader_election(LeaderElection::new("kube-system", "config-watcher"))
//!     .metrics_addr("0.0.0.0:8080".parse()?)
//!     .health_addr("0.0.0.0:8081".parse()?)
//!     .build()?;
//! let controller = manager.controller::<ConfigMap>(InformerParams::default().labels("app=web"));
//! manager.add(controller, reconcile, Arc::new(()))?;
//! manager.run(shutdown_signal()).await?;
//! # Ok(()) }
//! ```

use crate::controller::{Bound, Controller, ControllerError, Reconciler, Runnable, Source};
use crate::events::{EventRecorder, Reporter};
use crate::factory::{InformerParams, SharedInformerFactory};
use crate::health::{HealthChecks, serve_health};
use crate::leaderelection::{
    ConfigError, LeaderElectionConfig, LeaderElectionError, LeaderElector, LeaseLock, RunOutcome,
};
use crate::metrics::{Metrics, serve_metrics};
use crate::multicluster::{ClusterContext, MultiClusterController, MultiClusterError};
use crate::webhook::WebhookServer;
use kubewright_client::Client;
use kubewright_core::Resource;
use prometheus_client::registry::Registry;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// Default tolerance of the `leaderElection` health check beyond the lease duration
/// (kube-controller-manager's 20 s).
pub const DEFAULT_LEADER_ELECTION_HEALTH_TOLERANCE: Duration = Duration::from_secs(20);

/// Where and how a [`Manager`] elects its leader: a `coordination.k8s.io/v1` Lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderElection {
    /// The Lease's namespace.
    pub namespace: String,
    /// The Lease's name (the same for every replica of the manager).
    pub name: String,
    /// This replica's identity (unique per process).
    pub identity: String,
    /// Timings (client-go's 15 s / 10 s / 2 s by default) and whether to release the
    /// Lease on a graceful shutdown (on by default here).
    pub config: LeaderElectionConfig,
}

impl LeaderElection {
    /// The Lease `namespace/name`, identity [`default_identity`], client-go's timings,
    /// release on shutdown.
    pub fn new(namespace: &str, name: &str) -> Self {
        Self {
            namespace: namespace.to_string(),
            name: name.to_string(),
            identity: default_identity(),
            config: LeaderElectionConfig {
                release_on_cancel: true,
                ..LeaderElectionConfig::default()
            },
        }
    }

    /// Sets the identity (e.g. the pod name).
    #[must_use]
    pub fn identity(mut self, identity: &str) -> Self {
        self.identity = identity.to_string();
        self
    }

    /// Sets the lease duration, renew deadline and retry period (must satisfy
    /// `lease_duration > renew_deadline > 1.2 × retry_period`).
    #[must_use]
    pub fn timings(
        mut self,
        lease_duration: Duration,
        renew_deadline: Duration,
        retry_period: Duration,
    ) -> Self {
        self.config.lease_duration = lease_duration;
        self.config.renew_deadline = renew_deadline;
        self.config.retry_period = retry_period;
        self
    }

    /// Whether a graceful shutdown releases the Lease (default true).
    #[must_use]
    pub fn release_on_cancel(mut self, release: bool) -> Self {
        self.config.release_on_cancel = release;
        self
    }
}

/// `<hostname>_<random>`, client-go's usual identity: unique per process, recognisable
/// per pod.
pub fn default_identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "kubewright".to_string());
    format!("{host}_{:016x}", rand::random::<u64>())
}

/// Errors of a [`Manager`].
#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    /// Two controllers with one name.
    #[error("a controller named {0:?} was already added to the manager")]
    DuplicateController(String),
    /// A metrics or health address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The leader election configuration is invalid.
    #[error(transparent)]
    LeaderElection(#[from] LeaderElectionError),
    /// This manager led and lost the Lease (it could not renew it in time).
    #[error(
        "leader election lost: {identity} could not renew the lease {namespace}/{name} in time"
    )]
    LeadershipLost {
        /// Our identity.
        identity: String,
        /// The Lease's namespace.
        namespace: String,
        /// The Lease's name.
        name: String,
    },
    /// A controller failed.
    #[error(transparent)]
    Controller(#[from] ControllerError),
    /// A multi-cluster controller cannot run.
    #[error(transparent)]
    MultiCluster(#[from] MultiClusterError),
    /// The webhook server failed.
    #[error(transparent)]
    Webhook(#[from] crate::webhook::WebhookError),
}

type CheckFn = Box<dyn Fn() -> Result<(), String> + Send + Sync>;

/// Builds a [`Manager`]; see [`Manager::builder`].
pub struct ManagerBuilder {
    client: Client,
    factory: Option<SharedInformerFactory>,
    cache_defaults: Option<InformerParams>,
    registry: Option<Registry>,
    leader_election: Option<LeaderElection>,
    exit_on_leadership_loss: bool,
    leader_election_tolerance: Duration,
    metrics_addr: Option<SocketAddr>,
    health_addr: Option<SocketAddr>,
    healthz: Vec<(String, CheckFn)>,
    readyz: Vec<(String, CheckFn)>,
    webhook: Option<WebhookServer>,
}

impl fmt::Debug for ManagerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ManagerBuilder")
            .field("leader_election", &self.leader_election)
            .field("exit_on_leadership_loss", &self.exit_on_leadership_loss)
            .field("metrics_addr", &self.metrics_addr)
            .field("health_addr", &self.health_addr)
            .finish_non_exhaustive()
    }
}

impl ManagerBuilder {
    /// Elects a leader through this Lease, or (`None`) runs the controllers at once —
    /// for development and tests, or when only one replica ever runs.
    #[must_use]
    pub fn leader_election(mut self, election: impl Into<Option<LeaderElection>>) -> Self {
        self.leader_election = election.into();
        self
    }

    /// Whether losing the Lease makes [`Manager::run`] return
    /// [`ManagerError::LeadershipLost`] (default true, like controller-runtime). When
    /// false, the manager stops its controllers and stands for election again; its
    /// informers keep their caches meanwhile.
    #[must_use]
    pub fn exit_on_leadership_loss(mut self, exit: bool) -> Self {
        self.exit_on_leadership_loss = exit;
        self
    }

    /// How much longer than the lease duration a leader may go without renewing before
    /// the `leaderElection` health check fails (default 20 s).
    #[must_use]
    pub fn leader_election_health_tolerance(mut self, tolerance: Duration) -> Self {
        self.leader_election_tolerance = tolerance;
        self
    }

    /// Serves `/metrics` here (port 0: any free port; see [`Manager::metrics_addr`]).
    #[must_use]
    pub fn metrics_addr(mut self, addr: SocketAddr) -> Self {
        self.metrics_addr = Some(addr);
        self
    }

    /// Serves `/healthz` and `/readyz` here (port 0: any free port; see
    /// [`Manager::health_addr`]).
    #[must_use]
    pub fn health_addr(mut self, addr: SocketAddr) -> Self {
        self.health_addr = Some(addr);
        self
    }

    /// Uses this informer factory (e.g. with [`ReflectorConfig`](crate::ReflectorConfig)
    /// defaults or managed fields stripped) instead of a default one.
    #[must_use]
    pub fn informer_factory(mut self, factory: SharedInformerFactory) -> Self {
        self.factory = Some(factory);
        self
    }

    /// Uses this registry (with metrics of your own already in it).
    #[must_use]
    pub fn registry(mut self, registry: Registry) -> Self {
        self.registry = Some(registry);
        self
    }

    /// Adds a `/healthz` check (liveness); a name already used replaces that check.
    #[must_use]
    pub fn healthz_check(
        mut self,
        name: &str,
        check: impl Fn() -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        self.healthz.push((name.to_string(), Box::new(check)));
        self
    }

    /// Adds a `/readyz` check (readiness); a name already used replaces that check.
    #[must_use]
    pub fn readyz_check(
        mut self,
        name: &str,
        check: impl Fn() -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        self.readyz.push((name.to_string(), Box::new(check)));
        self
    }

    /// What every informer of the manager's factory covers unless its controller's
    /// [`InformerParams`] say otherwise: a namespace, a label or a field selector
    /// (controller-runtime's `cache.Options` defaults; see
    /// [`SharedInformerFactory::cache_defaults`]).
    ///
    /// ```no_run
    /// # async fn run(client: kubewright_client::Client) -> Result<(), Box<dyn std::error::Error>> {
    /// use kubewright_runtime::{InformerParams, Manager};
    /// use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
    /// let manager = Manager::builder(client)
    ///     .cache_defaults(InformerParams::all().namespace("backups"))
    ///     .build()?;
    /// // Watches ConfigMaps in "backups" only; Namespaces are cluster-scoped.
    /// let configmaps = manager.controller::<ConfigMap>(InformerParams::all());
    /// let namespaces = manager.controller::<Namespace>(InformerParams::all());
    /// # let _ = (configmaps, namespaces); Ok(()) }
    /// ```
    #[must_use]
    pub fn cache_defaults(mut self, defaults: InformerParams) -> Self {
        self.cache_defaults = Some(defaults);
        self
    }

    /// Validates the leader election settings, binds the addresses and registers the
    /// metric families. Does not need a Tokio runtime.
    pub fn build(self) -> Result<Manager, ManagerError> {
        let mut this = self;
        let mut registry = this.registry.take().unwrap_or_default();
        let webhook = this.webhook.take().map(|server| {
            let server = server.with_metrics(&mut registry);
            this.readyz
                .push(("webhook".to_string(), Box::new(server.ready_check())));
            server
        });
        this.registry = Some(registry);
        this.build_with(webhook)
    }

    /// Runs `server` with the manager: on every replica (webhooks do not wait for
    /// leadership), with its metrics in the manager's registry, a `webhook` readiness
    /// check, and a graceful stop when the manager stops.
    #[must_use]
    pub fn webhook_server(mut self, server: WebhookServer) -> Self {
        self.webhook = Some(server);
        self
    }

    fn build_with(self, webhook: Option<WebhookServer>) -> Result<Manager, ManagerError> {
        if let Some(le) = &self.leader_election {
            le.config
                .validate()
                .map_err(|e| ManagerError::LeaderElection(e.into()))?;
            if le.identity.is_empty() {
                return Err(ManagerError::LeaderElection(
                    ConfigError::EmptyIdentity.into(),
                ));
            }
        }
        let bind =
            |addr: Option<SocketAddr>| -> Result<Option<std::net::TcpListener>, ManagerError> {
                let Some(addr) = addr else { return Ok(None) };
                let listener = std::net::TcpListener::bind(addr)
                    .and_then(|l| l.set_nonblocking(true).map(|()| l))
                    .map_err(|source| ManagerError::Bind { addr, source })?;
                Ok(Some(listener))
            };
        let metrics_listener = bind(self.metrics_addr)?;
        let health_listener = bind(self.health_addr)?;
        let mut registry = self.registry.unwrap_or_default();
        let metrics = Metrics::register(&mut registry);
        // Feed client-go's rest_client_* families from every HTTP attempt of the client.
        let client_metrics = metrics.client.clone();
        let client = self.client.with_observer(Arc::new(
            move |info: &kubewright_client::RequestInfo<'_>| {
                client_metrics.observe(&crate::metrics::ClientRequest {
                    method: info.method.as_str(),
                    host: info.host,
                    status: info.status,
                    latency: info.duration,
                    rate_limiter_wait: info.rate_limiter_wait,
                });
            },
        ));
        let mut factory = self
            .factory
            .unwrap_or_else(|| SharedInformerFactory::new(client.clone()));
        if let Some(defaults) = self.cache_defaults {
            factory = factory.cache_defaults(defaults);
        }
        Ok(Manager {
            client,
            factory: Arc::new(factory),
            registry,
            metrics,
            runnables: Vec::new(),
            leader_election: self.leader_election,
            exit_on_leadership_loss: self.exit_on_leadership_loss,
            leader_election_tolerance: self.leader_election_tolerance,
            metrics_listener,
            health_listener,
            healthz: self.healthz,
            readyz: self.readyz,
            leading: watch::channel(false).0,
            webhook,
            recorders: Mutex::new(Vec::new()),
        })
    }
}

/// Runs controllers; see the [module docs](self).
pub struct Manager {
    client: Client,
    factory: Arc<SharedInformerFactory>,
    registry: Registry,
    metrics: Metrics,
    runnables: Vec<Arc<dyn Runnable>>,
    leader_election: Option<LeaderElection>,
    exit_on_leadership_loss: bool,
    leader_election_tolerance: Duration,
    metrics_listener: Option<std::net::TcpListener>,
    health_listener: Option<std::net::TcpListener>,
    healthz: Vec<(String, CheckFn)>,
    readyz: Vec<(String, CheckFn)>,
    webhook: Option<WebhookServer>,
    leading: watch::Sender<bool>,
    /// Recorders handed out by [`Manager::event_recorder`], flushed when `run` ends.
    recorders: Mutex<Vec<EventRecorder>>,
}

impl fmt::Debug for Manager {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Manager")
            .field(
                "controllers",
                &self.runnables.iter().map(|r| r.name()).collect::<Vec<_>>(),
            )
            .field("leader_election", &self.leader_election)
            .field("metrics_addr", &self.metrics_addr())
            .field("health_addr", &self.health_addr())
            .finish_non_exhaustive()
    }
}

impl Manager {
    /// A builder: no leader election, no endpoints, a default informer factory and
    /// registry.
    pub fn builder(client: Client) -> ManagerBuilder {
        ManagerBuilder {
            client,
            factory: None,
            cache_defaults: None,
            registry: None,
            leader_election: None,
            exit_on_leadership_loss: true,
            leader_election_tolerance: DEFAULT_LEADER_ELECTION_HEALTH_TOLERANCE,
            metrics_addr: None,
            health_addr: None,
            healthz: Vec::new(),
            readyz: Vec::new(),
            webhook: None,
        }
    }

    /// The client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The informer factory every controller of this manager should use (see
    /// [`Manager::controller`]).
    pub fn factory(&self) -> &Arc<SharedInformerFactory> {
        &self.factory
    }

    /// The registry served on `/metrics`: register your own metrics here before
    /// [`run`](Self::run).
    pub fn registry(&mut self) -> &mut Registry {
        &mut self.registry
    }

    /// The runtime's metric families (e.g. [`ClientMetrics`](crate::metrics::ClientMetrics)
    /// to feed from a client hook).
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The address `/metrics` is served on.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_listener
            .as_ref()
            .and_then(|l| l.local_addr().ok())
    }

    /// The address `/healthz` and `/readyz` are served on.
    pub fn health_addr(&self) -> Option<SocketAddr> {
        self.health_listener
            .as_ref()
            .and_then(|l| l.local_addr().ok())
    }

    /// The leader election settings.
    pub fn leader_election_config(&self) -> Option<&LeaderElection> {
        self.leader_election.as_ref()
    }

    /// An event recorder reporting as `controller` (`reportingController`, e.g.
    /// `example.com/backup-controller`) from this replica (`reportingInstance`: the
    /// leader election identity, or the host name): controller-runtime's
    /// `GetEventRecorderFor`. The manager shuts it down when [`run`](Self::run) ends,
    /// after the controllers stopped, so the events of the last reconciles are written.
    /// Clones share one queue. Must be called within a Tokio runtime.
    ///
    /// ```no_run
    /// # async fn run(manager: kubewright_runtime::Manager, cm: k8s_openapi::api::core::v1::ConfigMap) {
    /// use kubewright_runtime::events::{Event, EventType, object_reference};
    /// let recorder = manager.event_recorder("example.com/backup-controller");
    /// recorder.publish(
    ///     &object_reference(&cm),
    ///     Event::new(EventType::Normal, "Synced", "Reconcile").note("configuration applied"),
    /// );
    /// # }
    /// ```
    pub fn event_recorder(&self, controller: &str) -> EventRecorder {
        let instance = self
            .leader_election
            .as_ref()
            .map(|le| le.identity.clone())
            .unwrap_or_else(default_identity);
        let recorder = EventRecorder::new(self.client.clone(), Reporter::new(controller, instance));
        self.recorders
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(recorder.clone());
        recorder
    }

    /// `true` while the controllers run (while leading, with leader election).
    pub fn leading(&self) -> watch::Receiver<bool> {
        self.leading.subscribe()
    }

    /// A controller of a static type over this manager's informer factory, to
    /// configure and then [`add`](Self::add).
    pub fn controller<K>(&self, source: impl Into<Source<K>>) -> Controller<K>
    where
        K: Resource + Clone + DeserializeOwned + Serialize + fmt::Debug + Send + Sync + 'static,
        K::DynamicType: Default,
    {
        Controller::new(&self.factory, source)
    }

    /// A controller of a type described at run time (e.g. `DynamicObject`) over this
    /// manager's informer factory.
    pub fn controller_with<K>(
        &self,
        dt: K::DynamicType,
        source: impl Into<Source<K>>,
    ) -> Controller<K>
    where
        K: Resource + Clone + DeserializeOwned + Serialize + fmt::Debug + Send + Sync + 'static,
    {
        Controller::new_with(&self.factory, dt, source)
    }

    /// Adds a controller with its reconciler and context. It gets the manager's metrics
    /// unless it has its own; its name must be unique.
    pub fn add<K, R, C>(
        &mut self,
        mut controller: Controller<K>,
        reconciler: R,
        ctx: Arc<C>,
    ) -> Result<(), ManagerError>
    where
        K: Resource + Send + Sync + 'static,
        R: Reconciler<K, C>,
        C: Send + Sync + 'static,
    {
        if self.runnables.iter().any(|r| r.name() == controller.name()) {
            return Err(ManagerError::DuplicateController(
                controller.name().to_string(),
            ));
        }
        if !Arc::ptr_eq(controller.factory(), &self.factory) {
            tracing::warn!(controller = %controller.name(), "controller uses another informer factory than its manager: its informers are not stopped by the manager");
        }
        controller.set_metrics_if_unset(&self.metrics);
        let bound: Bound<K, R, C> = controller.bind(reconciler, ctx);
        self.runnables.push(Arc::new(bound));
        Ok(())
    }

    /// Adds a [multi-cluster controller](crate::multicluster) with its reconciler and
    /// context. It runs under this manager's leader election and counts towards
    /// `/readyz` (ready once every engaged cluster has synced or failed once; a failing
    /// cluster never makes the manager fail). It gets the manager's metrics unless it
    /// has its own; its name must be unique. Its clusters' clients are the fleet's (not
    /// this manager's client), so their requests are not in `rest_client_*`.
    pub fn add_multicluster<K, R, C>(
        &mut self,
        mut controller: MultiClusterController<K>,
        reconciler: R,
        ctx: Arc<C>,
    ) -> Result<(), ManagerError>
    where
        K: Resource + Send + Sync + 'static,
        R: Reconciler<K, ClusterContext<C>>,
        C: Send + Sync + 'static,
    {
        if self.runnables.iter().any(|r| r.name() == controller.name()) {
            return Err(ManagerError::DuplicateController(
                controller.name().to_string(),
            ));
        }
        controller.set_metrics_if_unset(&self.metrics);
        self.runnables
            .push(Arc::new(controller.bind(reconciler, ctx)?));
        Ok(())
    }

    /// Runs until `cancel` fires (then shuts down gracefully and returns `Ok`), a
    /// controller fails, or leadership is lost (see the [module docs](self)).
    #[inline(never)]
    #[allow(clippy::manual_async_fn, reason = "boxed where it is built")]
    pub fn run(
        self,
        cancel: CancellationToken,
    ) -> impl std::future::Future<Output = Result<(), ManagerError>> + Send + 'static {
        // Boxed where it is built: an `async fn`'s body (and all it awaits) is otherwise
        // compiled again in every crate that awaits it.
        let boxed: std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<(), ManagerError>> + Send + 'static>,
        > = Box::pin(self.run_inner(cancel));
        boxed
    }

    async fn run_inner(self, cancel: CancellationToken) -> Result<(), ManagerError> {
        let stop = cancel.child_token();
        let shared = Arc::new(Shared {
            runnables: self.runnables,
            stop: stop.clone(),
            error: Mutex::new(None),
            leading: self.leading,
        });

        let elector = match &self.leader_election {
            None => None,
            Some(le) => {
                let lock = LeaseLock::new(
                    self.client.clone(),
                    &le.namespace,
                    &le.name,
                    le.identity.clone(),
                );
                let lead = shared.clone();
                let elector = LeaderElector::builder(lock)
                    .config(le.config.clone())
                    .on_started_leading(move |leading| lead.clone().lead(leading))
                    .on_new_leader(|id| tracing::info!(leader = %id, "new leader elected"))
                    .build()?;
                Some(elector)
            }
        };

        let mut healthz = HealthChecks::new("healthz");
        healthz.add("ping", || Ok(()));
        if let Some(elector) = &elector {
            let elector = elector.clone();
            let tolerance = self.leader_election_tolerance;
            healthz.add("leaderElection", move || {
                elector.check(tolerance).map_err(|e| e.to_string())
            });
        }
        for (name, check) in self.healthz {
            healthz.add(&name, check);
        }
        let mut readyz = HealthChecks::new("readyz");
        readyz.add("ping", || Ok(()));
        let sync = shared.clone();
        readyz.add("informer-sync", move || sync.check_synced());
        let stopping = stop.clone();
        readyz.add("shutdown", move || {
            if stopping.is_cancelled() {
                Err("the manager is shutting down".to_string())
            } else {
                Ok(())
            }
        });
        for (name, check) in self.readyz {
            readyz.add(&name, check);
        }

        let servers_cancel = CancellationToken::new();
        let mut servers = JoinSet::new();
        let registry = Arc::new(self.registry);
        if let Some(listener) = self.metrics_listener {
            let addr = listener.local_addr().ok();
            match tokio::net::TcpListener::from_std(listener) {
                Ok(l) => {
                    tracing::info!(?addr, "serving metrics");
                    servers.spawn(serve_metrics(l, registry.clone(), servers_cancel.clone()));
                }
                Err(source) => shared.fail(bind_error(addr, source)),
            }
        }
        if let Some(listener) = self.health_listener {
            let addr = listener.local_addr().ok();
            match tokio::net::TcpListener::from_std(listener) {
                Ok(l) => {
                    tracing::info!(?addr, "serving health probes");
                    servers.spawn(serve_health(l, healthz, readyz, servers_cancel.clone()));
                }
                Err(source) => shared.fail(bind_error(addr, source)),
            }
        }

        if let Some(server) = self.webhook {
            let failed = shared.clone();
            let cancel = servers_cancel.clone();
            servers.spawn(async move {
                if let Err(e) = server.run(cancel).await {
                    failed.fail(e.into());
                }
            });
        }

        if let Some(le) = &self.leader_election {
            // leader_election_master_status{name}: 0 while standing by, 1 while leading.
            let (gauge, name) = (self.metrics.leader.clone(), le.name.clone());
            let mut leading = shared.leading.subscribe();
            let done = servers_cancel.clone();
            servers.spawn(async move {
                loop {
                    gauge.set_leading(&name, *leading.borrow_and_update());
                    tokio::select! {
                        () = done.cancelled() => return,
                        changed = leading.changed() => {
                            if changed.is_err() {
                                return;
                            }
                        }
                    }
                }
            });
        }
        tracing::info!(controllers = ?shared.runnables.iter().map(|r| r.name()).collect::<Vec<_>>(), "starting manager");
        match (&elector, &self.leader_election) {
            (Some(elector), Some(le)) => {
                while !stop.is_cancelled() {
                    match elector.run(stop.clone()).await {
                        RunOutcome::Cancelled => break,
                        RunOutcome::LeadershipLost if self.exit_on_leadership_loss => {
                            shared.fail(ManagerError::LeadershipLost {
                                identity: le.identity.clone(),
                                namespace: le.namespace.clone(),
                                name: le.name.clone(),
                            });
                            break;
                        }
                        RunOutcome::LeadershipLost => {
                            tracing::warn!(identity = %le.identity, "leadership lost: controllers stopped, standing for election again");
                        }
                        RunOutcome::AlreadyRunning => {
                            tracing::error!("the manager's leader elector is already running");
                            break;
                        }
                    }
                }
            }
            _ => shared.clone().lead(stop.clone()).await,
        }

        tracing::info!("stopping informers");
        self.factory.shutdown().await;
        let recorders =
            std::mem::take(&mut *self.recorders.lock().unwrap_or_else(|e| e.into_inner()));
        for recorder in recorders {
            recorder.shutdown().await;
        }
        servers_cancel.cancel();
        while servers.join_next().await.is_some() {}
        tracing::info!("manager stopped");
        let error = shared
            .error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        match error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

fn bind_error(addr: Option<SocketAddr>, source: std::io::Error) -> ManagerError {
    ManagerError::Bind {
        addr: addr.unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0))),
        source,
    }
}

/// What the leader's work shares with `Manager::run`.
struct Shared {
    runnables: Vec<Arc<dyn Runnable>>,
    /// The manager's own shutdown: cancelled by the caller or on the first error.
    stop: CancellationToken,
    error: Mutex<Option<ManagerError>>,
    leading: watch::Sender<bool>,
}

impl Shared {
    /// Records the first error and shuts the manager down.
    fn fail(&self, error: ManagerError) {
        tracing::error!(%error, "manager stopping on error");
        self.error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert(error);
        self.stop.cancel();
    }

    fn check_synced(&self) -> Result<(), String> {
        if !*self.leading.borrow() {
            return Ok(());
        }
        let pending: Vec<&str> = self
            .runnables
            .iter()
            .filter(|r| !r.has_synced())
            .map(|r| r.name())
            .collect();
        if pending.is_empty() {
            Ok(())
        } else {
            Err(format!("caches of {} not synced", pending.join(", ")))
        }
    }

    /// Runs every controller until `leading` is cancelled: gracefully when the manager
    /// stops, aborting reconciles in flight when leadership was lost.
    async fn lead(self: Arc<Self>, leading: CancellationToken) {
        let work = leading.child_token();
        let abort = CancellationToken::new();
        self.leading.send_replace(true);
        tracing::info!("starting controllers");
        let runs = futures::future::join_all(self.runnables.iter().map(|r| {
            let (r, work, abort, shared) = (r.clone(), work.clone(), abort.clone(), self.clone());
            async move {
                let name = r.name().to_string();
                match r.run(work.clone(), abort.clone()).await {
                    Ok(()) if !work.is_cancelled() => {
                        tracing::warn!(controller = %name, "controller stopped on its own");
                    }
                    Ok(()) => {}
                    // Reconciles aborted because leadership was lost: that is the
                    // manager's outcome, not a controller failure.
                    Err(e) if abort.is_cancelled() => {
                        tracing::warn!(controller = %name, error = %e, "controller stopped on lost leadership");
                    }
                    Err(e) => shared.fail(e.into()),
                }
            }
        }));
        let leadership_lost = {
            let (leading, stop, abort) = (leading.clone(), self.stop.clone(), abort.clone());
            async move {
                leading.cancelled().await;
                if !stop.is_cancelled() {
                    tracing::warn!("leadership lost: aborting reconciles in flight");
                    abort.cancel();
                }
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            _ = runs => {}
            () = leadership_lost => {}
        }
        // No controllers, or they all stopped on their own: keep leading (and serving)
        // until the manager stops or leadership ends.
        leading.cancelled().await;
        self.leading.send_replace(false);
        tracing::info!("controllers stopped");
    }
}
