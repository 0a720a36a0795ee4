//! Controllers: informers -> work queue -> workers running a [`Reconciler`]
//! (controller-runtime's `Controller`).
//!
//! A [`Controller`] watches a primary resource, optionally resources it
//! [owns](Controller::owns) (mapped to their controller owner through
//! `ownerReferences`) and any other resource through a [mapping](Controller::watches).
//! Every event becomes the key (`namespace/name`) of a primary object in a rate-limited
//! [work queue](crate::workqueue); workers take keys from the queue, read the object from
//! the informer cache and reconcile it:
//!
//! * **One key, one worker.** The queue never hands a key to a second worker while the
//!   first is still on it; events in between are folded into one more reconcile.
//! * **Cache, not API.** The object passed to the reconciler is the cached `Arc<K>`. A
//!   key whose object is gone from the cache (deleted) is not reconciled;
//!   [`Reconciler::on_missing`] is called instead.
//! * **Results.** `Ok(Action::await_change())` forgets the key's back-off;
//!   `Ok(Action::requeue(d))` reconciles again after `d`; an `Err` is logged, counted and
//!   passed to [`Reconciler::error_policy`], which by default retries after the key's
//!   exponential back-off (client-go's `DefaultControllerRateLimiter`: 5 ms doubling up
//!   to 1000 s per key, and 10 qps / burst 100 overall).
//! * **Panics** in a reconcile are caught, logged, counted
//!   (`controller_runtime_reconcile_panics_total`) and retried with back-off.
//! * **Start.** Handlers are added, informers started, and the workers start only once
//!   every informer has synced, or [`run`](Controller::run) fails with
//!   [`ControllerError::CacheSync`] after [`cache_sync_timeout`](Controller::cache_sync_timeout).
//! * **Graceful shutdown** (a [`CancellationToken`], or SIGTERM/SIGINT with
//!   [`shutdown_on_signal`](Controller::shutdown_on_signal)): no new key is taken,
//!   reconciles in flight finish within [`shutdown_timeout`](Controller::shutdown_timeout)
//!   (then they are aborted and `run` reports [`ControllerError::ShutdownTimedOut`]),
//!   the handlers are removed, and a controller made with
//!   [`from_client`](Controller::from_client) stops its informers.
//!
//! Several controllers sharing one client, informer factory, metrics registry and leader
//! election run in a [`Manager`](crate::manager::Manager).

mod predicate;
mod reconciler;
mod source;

pub use predicate::Predicate;
pub use reconciler::{Action, Reconciler, WithErrorPolicy, WithOnMissing};
pub use source::Source;

use crate::factory::{CacheSyncError, SharedInformerFactory};
use crate::informer::Informer;
use crate::metrics::{ControllerMetricsHandle, Metrics, ReconcileResultLabel};
use crate::store::Store;
use crate::workqueue::{RateLimiter, WorkQueue, default_controller_rate_limiter};
use futures::FutureExt;
use futures::future::BoxFuture;
use kubewright_client::Client;
use kubewright_core::{ObjectKey, Resource, ResourceExt};
use reconciler::Requeue;
use source::{Mapper, Queue, Watch, WatchOf, owner_mapper, self_mapper};
use std::any::Any;
use std::fmt;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// Default [`Controller::cache_sync_timeout`] (controller-runtime's 2 minutes).
pub const DEFAULT_CACHE_SYNC_TIMEOUT: Duration = Duration::from_secs(120);
/// Default [`Controller::shutdown_timeout`] (controller-runtime's graceful shutdown
/// timeout).
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a controller stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// The informers did not sync within the cache sync timeout.
    #[error("controller {controller}: timed out waiting for caches to sync: {source}")]
    CacheSync {
        /// The controller.
        controller: String,
        /// Which informers had not synced.
        #[source]
        source: CacheSyncError,
    },
    /// An informer was stopped (e.g. its factory was shut down) before it synced.
    #[error("controller {controller}: informer {informer} stopped before it synced")]
    InformerStopped {
        /// The controller.
        controller: String,
        /// The informer's description.
        informer: String,
    },
    /// In-flight reconciles did not finish within the shutdown timeout and were aborted.
    #[error(
        "controller {controller}: {in_flight} reconcile(s) still running after {timeout:?}, aborted"
    )]
    ShutdownTimedOut {
        /// The controller.
        controller: String,
        /// How many reconciles were aborted.
        in_flight: usize,
        /// The timeout that expired (zero when aborted on lost leadership).
        timeout: Duration,
    },
}

/// How one reconcile ended, as reported to [`Controller::on_result`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReconcileResult {
    /// `Ok(Action::await_change())`.
    Success,
    /// `Ok(Action::requeue(after))`.
    RequeueAfter(Duration),
    /// `Ok(Action::requeue_with_backoff())`.
    Requeue,
    /// `Err(e)`: the error's message.
    Error(String),
    /// The reconcile panicked: the panic message.
    Panic(String),
    /// The object was not in the cache: not reconciled, `on_missing` was called.
    Missing,
}

/// One finished reconcile (see [`Controller::on_result`]).
#[derive(Clone, Debug)]
pub struct ReconcileReport {
    /// The controller's name.
    pub controller: Arc<str>,
    /// The key that was reconciled.
    pub key: ObjectKey,
    /// How it ended.
    pub result: ReconcileResult,
    /// When the reconcile started.
    pub started: Instant,
    /// How long it took.
    pub duration: Duration,
}

type RateLimiterFactory = Arc<dyn Fn() -> Box<dyn RateLimiter<ObjectKey>> + Send + Sync>;
type Observer = Arc<dyn Fn(&ReconcileReport) + Send + Sync>;

/// A controller for the primary resource `K`; see the [module docs](self).
///
/// ```no_run
/// use std::{sync::Arc, time::Duration};
/// use k8s_openapi::api::apps::v1::Deployment;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kubewright_client::{Api, Client};
/// use kubewright_runtime::controller::{Action, Controller, shutdown_signal};
/// use kubewright_runtime::InformerParams;
///
/// async fn reconcile(deploy: Arc<Deployment>, client: Arc<Client>) -> Result<Action, kubewright_client::Error> {
///     let cms: Api<ConfigMap> = Api::namespaced((*client).clone(), deploy.metadata.namespace.as_deref().unwrap_or("default"));
///     // ... create or update the ConfigMaps this Deployment needs, with a controller reference ...
///     let _ = cms;
///     Ok(Action::requeue(Duration::from_secs(300)))
/// }
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let client = Client::try_default().await?;
/// Controller::<Deployment>::from_client(client.clone(), InformerParams::default().namespace("apps"))
///     .owns::<ConfigMap>(InformerParams::default().namespace("apps"))
///     .workers(4)
///     .shutdown_on(shutdown_signal())
///     .run(reconcile, Arc::new(client))
///     .await?;
/// # Ok(()) }
/// ```
pub struct Controller<K> {
    name: String,
    kind: String,
    group: String,
    scope: kubewright_core::Scope,
    factory: Arc<SharedInformerFactory>,
    owns_factory: bool,
    primary: Arc<Informer<K>>,
    watches: Vec<Arc<dyn Watch>>,
    workers: usize,
    cache_sync_timeout: Duration,
    shutdown_timeout: Duration,
    rate_limiter: RateLimiterFactory,
    metrics: Option<Metrics>,
    shutdown_tokens: Vec<CancellationToken>,
    shutdown_on_signal: bool,
    observers: Vec<Observer>,
}

impl<K> fmt::Debug for Controller<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Controller")
            .field("name", &self.name)
            .field(
                "watches",
                &self
                    .watches
                    .iter()
                    .map(|w| w.describe())
                    .collect::<Vec<_>>(),
            )
            .field("workers", &self.workers)
            .field("cache_sync_timeout", &self.cache_sync_timeout)
            .field("shutdown_timeout", &self.shutdown_timeout)
            .finish_non_exhaustive()
    }
}

impl<K> Controller<K>
where
    K: Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + fmt::Debug,
    K: Send + Sync + 'static,
{
    /// A controller of a static type (e.g. `Deployment`) whose informers come from
    /// `factory` (shared with other controllers; the controller never shuts it down).
    pub fn new(factory: &Arc<SharedInformerFactory>, source: impl Into<Source<K>>) -> Self
    where
        K::DynamicType: Default,
    {
        Self::new_with(factory, K::DynamicType::default(), source)
    }

    /// A controller of a type described at run time, e.g. `DynamicObject` with its
    /// [`ApiResource`](kubewright_core::ApiResource) (use
    /// [`Source::dynamic`] for the source).
    pub fn new_with(
        factory: &Arc<SharedInformerFactory>,
        dt: K::DynamicType,
        source: impl Into<Source<K>>,
    ) -> Self {
        let (primary, predicates) = source.into().into_parts(factory);
        let watch = WatchOf {
            informer: primary.clone(),
            predicates: predicates.into(),
            mapper: self_mapper::<K>(),
        };
        Self {
            name: K::kind(&dt).to_lowercase(),
            kind: K::kind(&dt).into_owned(),
            group: K::group(&dt).into_owned(),
            scope: K::scope(&dt),
            factory: factory.clone(),
            owns_factory: false,
            primary,
            watches: vec![Arc::new(watch)],
            workers: 1,
            cache_sync_timeout: DEFAULT_CACHE_SYNC_TIMEOUT,
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
            rate_limiter: Arc::new(|| Box::new(default_controller_rate_limiter())),
            metrics: None,
            shutdown_tokens: Vec::new(),
            shutdown_on_signal: false,
            observers: Vec::new(),
        }
    }

    /// A standalone controller of a static type with a factory of its own over `client`;
    /// [`run`](Self::run) stops its informers when it returns.
    pub fn from_client(client: Client, source: impl Into<Source<K>>) -> Self
    where
        K::DynamicType: Default,
    {
        let factory = Arc::new(SharedInformerFactory::new(client));
        let mut c = Self::new(&factory, source);
        c.owns_factory = true;
        c
    }
}

impl<K> Controller<K>
where
    K: Resource + Send + Sync + 'static,
{
    /// Also reconcile the controller owner of every `X` from `source`: an `X` whose
    /// `ownerReferences` hold a `controller: true` reference to our kind and group
    /// enqueues that owner's key (in the `X`'s namespace for a namespaced primary).
    #[must_use]
    pub fn owns<X>(mut self, source: impl Into<Source<X>>) -> Self
    where
        X: Resource + Send + Sync + 'static,
    {
        let mapper = owner_mapper::<X>(self.kind.clone(), self.group.clone(), self.scope);
        self.add_watch(source.into(), mapper);
        self
    }

    /// Also reconcile the primary objects `mapper` returns for every event of an `X`
    /// from `source` (for an update: for both the old and the new object).
    ///
    /// The mapper (like a [`Predicate`]) runs on the shared informer's own task
    /// ([`Informer::add_inline_handler`](crate::informer::Informer::add_inline_handler)),
    /// so it must be quick and must not block: read a lister, not the API server.
    #[must_use]
    pub fn watches<X>(
        mut self,
        source: impl Into<Source<X>>,
        mapper: impl Fn(&X) -> Vec<ObjectKey> + Send + Sync + 'static,
    ) -> Self
    where
        X: Resource + Send + Sync + 'static,
    {
        self.add_watch(source.into(), Arc::new(mapper));
        self
    }

    fn add_watch<X: Resource + Send + Sync + 'static>(
        &mut self,
        source: Source<X>,
        mapper: Mapper<X>,
    ) {
        let (informer, predicates) = source.into_parts(&self.factory);
        self.watches.push(Arc::new(WatchOf {
            informer,
            predicates: predicates.into(),
            mapper,
        }));
    }

    /// Sets the name (default: the primary kind in lower case), used in logs, metrics
    /// and as the work queue's name. Must be unique within a manager.
    #[must_use]
    pub fn named(mut self, name: &str) -> Self {
        self.name = name.to_string();
        self
    }

    /// How many keys are reconciled in parallel (default 1; at least 1).
    #[must_use]
    pub fn workers(mut self, n: usize) -> Self {
        self.workers = n.max(1);
        self
    }

    /// How long to wait for the informers to sync before giving up (default 2 min).
    #[must_use]
    pub fn cache_sync_timeout(mut self, timeout: Duration) -> Self {
        self.cache_sync_timeout = timeout;
        self
    }

    /// How long reconciles in flight may take to finish once shutdown starts (default
    /// 30 s).
    #[must_use]
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }

    /// The rate limiter of the work queue (a new one for every run; default
    /// [`default_controller_rate_limiter`]).
    #[must_use]
    pub fn rate_limiter<R>(mut self, make: impl Fn() -> R + Send + Sync + 'static) -> Self
    where
        R: RateLimiter<ObjectKey> + 'static,
    {
        self.rate_limiter = Arc::new(move || Box::new(make()));
        self
    }

    /// Reports reconcile and work-queue metrics (a [`Manager`](crate::manager::Manager)
    /// sets its own).
    #[must_use]
    pub fn metrics(mut self, metrics: &Metrics) -> Self {
        self.metrics = Some(metrics.clone());
        self
    }

    /// Shuts down gracefully when `token` is cancelled. May be given several times.
    #[must_use]
    pub fn shutdown_on(mut self, token: CancellationToken) -> Self {
        self.shutdown_tokens.push(token);
        self
    }

    /// Shuts down gracefully on SIGTERM or SIGINT (a second signal exits the process);
    /// see [`shutdown_signal`].
    #[must_use]
    pub fn shutdown_on_signal(mut self) -> Self {
        self.shutdown_on_signal = true;
        self
    }

    /// Calls `f` after every reconcile (e.g. to feed a channel in tests). It runs on the
    /// worker, so it must be quick.
    #[must_use]
    pub fn on_result(mut self, f: impl Fn(&ReconcileReport) + Send + Sync + 'static) -> Self {
        self.observers.push(Arc::new(f));
        self
    }

    /// The controller's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The primary informer.
    pub fn informer(&self) -> &Arc<Informer<K>> {
        &self.primary
    }

    /// The cache of primary objects (what reconciles read).
    pub fn store(&self) -> Store<K> {
        self.primary.store()
    }

    /// The informer factory.
    pub fn factory(&self) -> &Arc<SharedInformerFactory> {
        &self.factory
    }

    /// Whether every informer of this controller has synced.
    pub fn has_synced(&self) -> bool {
        self.watches.iter().all(|w| w.has_synced())
    }

    /// Runs until shut down (see [`shutdown_on`](Self::shutdown_on)); returns
    /// `Ok(())` after a graceful shutdown.
    pub async fn run<R, C>(self, reconciler: R, ctx: Arc<C>) -> Result<(), ControllerError>
    where
        R: Reconciler<K, C>,
        C: Send + Sync + 'static,
    {
        // A child of the first shutdown token sees its cancellation at once (no task in
        // between), so no worker can take a new key after the caller cancelled.
        let stop = match self.shutdown_tokens.first() {
            Some(first) => first.child_token(),
            None => CancellationToken::new(),
        };
        let _unlink = stop.clone().drop_guard();
        self.link_shutdown(&stop);
        let factory = self.factory.clone();
        let owns_factory = self.owns_factory;
        let bound = Arc::new(self.bind(reconciler, ctx));
        let result = bound.run_once(stop, CancellationToken::new()).await;
        if owns_factory {
            factory.shutdown().await;
        }
        result
    }

    pub(crate) fn bind<R, C>(self, reconciler: R, ctx: Arc<C>) -> Bound<K, R, C>
    where
        R: Reconciler<K, C>,
        C: Send + Sync + 'static,
    {
        Bound {
            name: self.name.as_str().into(),
            controller: self,
            reconciler,
            ctx,
        }
    }

    /// Cancels `stop` when one of our shutdown tokens (or a signal) fires.
    fn link_shutdown(&self, stop: &CancellationToken) {
        for token in &self.shutdown_tokens {
            link(token.clone(), stop.clone());
        }
        if self.shutdown_on_signal {
            link(shutdown_signal(), stop.clone());
        }
    }

    /// A future that resolves once every informer of this controller has synced (`true`)
    /// or one stopped before it synced (`false`); it does not start them.
    pub(crate) fn sync_waiter(&self) -> BoxFuture<'static, bool> {
        let watches = self.watches.clone();
        async move {
            futures::future::join_all(watches.iter().map(|w| w.wait_for_sync()))
                .await
                .into_iter()
                .all(|synced| synced)
        }
        .boxed()
    }

    pub(crate) fn set_metrics_if_unset(&mut self, metrics: &Metrics) {
        if self.metrics.is_none() {
            self.metrics = Some(metrics.clone());
        }
    }
}

/// Cancels `to` when `from` is cancelled (the task ends when either is).
pub(crate) fn link(from: CancellationToken, to: CancellationToken) {
    if from.is_cancelled() {
        to.cancel();
        return;
    }
    tokio::spawn(async move {
        tokio::select! {
            () = from.cancelled() => to.cancel(),
            () = to.cancelled() => {}
        }
    });
}

/// A token cancelled on the first SIGTERM or SIGINT (Ctrl-C); a second signal exits the
/// process with status 1, like controller-runtime's `SetupSignalHandler`. Must be called
/// within a Tokio runtime.
pub fn shutdown_signal() -> CancellationToken {
    let token = CancellationToken::new();
    let t = token.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutdown signal received, stopping (a second signal exits at once)");
        t.cancel();
        wait_for_signal().await;
        tracing::warn!("second shutdown signal received, exiting");
        std::process::exit(1);
    });
    token
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
                return;
            }
            Err(e) => tracing::warn!(error = %e, "cannot listen for SIGTERM, only for SIGINT"),
        }
    }
    if let Err(e) = tokio::signal::ctrl_c().await {
        tracing::error!(error = %e, "cannot listen for SIGINT; shutdown only by cancellation");
        std::future::pending::<()>().await;
    }
}

/// A controller bound to its reconciler and context: what runs.
pub(crate) struct Bound<K, R, C> {
    name: Arc<str>,
    controller: Controller<K>,
    reconciler: R,
    ctx: Arc<C>,
}

/// A controller as the manager sees it.
pub(crate) trait Runnable: Send + Sync {
    fn name(&self) -> &str;
    fn has_synced(&self) -> bool;
    /// Runs until `stop`; on `abort`, in-flight reconciles are abandoned at once.
    fn run(
        self: Arc<Self>,
        stop: CancellationToken,
        abort: CancellationToken,
    ) -> BoxFuture<'static, Result<(), ControllerError>>;
}

impl<K, R, C> Runnable for Bound<K, R, C>
where
    K: Resource + Send + Sync + 'static,
    R: Reconciler<K, C>,
    C: Send + Sync + 'static,
{
    fn name(&self) -> &str {
        &self.name
    }
    fn has_synced(&self) -> bool {
        self.controller.has_synced()
    }
    fn run(
        self: Arc<Self>,
        stop: CancellationToken,
        abort: CancellationToken,
    ) -> BoxFuture<'static, Result<(), ControllerError>> {
        async move {
            let stop = stop.child_token();
            let _unlink = stop.clone().drop_guard();
            self.controller.link_shutdown(&stop);
            self.run_once(stop, abort).await
        }
        .boxed()
    }
}

/// Removes the handlers when dropped.
struct Handlers(Vec<Box<dyn FnOnce() + Send>>);

impl Drop for Handlers {
    fn drop(&mut self) {
        for remove in self.0.drain(..) {
            remove();
        }
    }
}

/// A key being processed: `done` (and the gauges) even if the worker is aborted.
struct InFlight<'a> {
    queue: &'a Queue,
    key: ObjectKey,
    metrics: Option<&'a ControllerMetricsHandle>,
    active: &'a AtomicUsize,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if let Some(m) = self.metrics {
            m.worker_finished();
        }
        self.active.fetch_sub(1, Ordering::AcqRel);
        self.queue.done(&self.key);
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

impl<K, R, C> Bound<K, R, C>
where
    K: Resource + Send + Sync + 'static,
    R: Reconciler<K, C>,
    C: Send + Sync + 'static,
{
    async fn run_once(
        self: Arc<Self>,
        stop: CancellationToken,
        abort: CancellationToken,
    ) -> Result<(), ControllerError> {
        let c = &self.controller;
        let name = &*self.name;
        let metrics = c
            .metrics
            .as_ref()
            .map(|m| m.controller.for_controller(name));
        if let Some(m) = &metrics {
            m.set_max_concurrent(c.workers);
        }
        let mut queue = WorkQueue::<ObjectKey>::builder().name(name);
        if let Some(m) = &c.metrics {
            queue = queue.metrics(&m.queue);
        }
        let queue = queue.rate_limiter((c.rate_limiter)()).build();
        let _handlers = Handlers(c.watches.iter().map(|w| w.register(&queue)).collect());
        for w in &c.watches {
            w.start();
        }
        tracing::info!(controller = %name, sources = ?c.watches.iter().map(|w| w.describe()).collect::<Vec<_>>(), "starting controller");

        // Wait for every cache before the first reconcile.
        let synced = futures::future::join_all(c.watches.iter().map(|w| w.wait_for_sync()));
        let synced = tokio::select! {
            () = stop.cancelled() => {
                queue.shutdown();
                tracing::info!(controller = %name, "stopped before the caches synced");
                return Ok(());
            }
            r = tokio::time::timeout(c.cache_sync_timeout, synced) => r,
        };
        match synced {
            Ok(results) => {
                if let Some((w, _)) = c.watches.iter().zip(results).find(|(_, ok)| !ok) {
                    queue.shutdown();
                    if stop.is_cancelled() {
                        return Ok(());
                    }
                    return Err(ControllerError::InformerStopped {
                        controller: name.to_string(),
                        informer: w.describe(),
                    });
                }
            }
            Err(_) => {
                queue.shutdown();
                let mut pending: Vec<String> = c
                    .watches
                    .iter()
                    .filter(|w| !w.has_synced())
                    .map(|w| w.describe())
                    .collect();
                pending.sort();
                let error = ControllerError::CacheSync {
                    controller: name.to_string(),
                    source: CacheSyncError {
                        pending,
                        timeout: c.cache_sync_timeout,
                    },
                };
                tracing::error!(controller = %name, %error, "could not wait for caches to sync");
                return Err(error);
            }
        }

        tracing::info!(controller = %name, workers = c.workers, "starting workers");
        let active = Arc::new(AtomicUsize::new(0));
        let mut workers = JoinSet::new();
        for _ in 0..c.workers {
            workers.spawn(self.clone().worker(
                queue.clone(),
                metrics.clone(),
                active.clone(),
                stop.clone(),
            ));
        }

        stop.cancelled().await;
        tracing::info!(controller = %name, in_flight = active.load(Ordering::Acquire), "shutdown signal received, waiting for reconciles in flight");
        queue.shutdown();
        let drain = async {
            while let Some(r) = workers.join_next().await {
                if let Err(e) = r
                    && e.is_panic()
                {
                    tracing::error!(controller = %name, "a worker panicked");
                }
            }
        };
        let timeout = if abort.is_cancelled() {
            Duration::ZERO
        } else {
            c.shutdown_timeout
        };
        let drained = tokio::select! {
            r = tokio::time::timeout(timeout, drain) => r.is_ok(),
            () = abort.cancelled() => false,
        };
        if drained {
            tracing::info!(controller = %name, "all workers finished");
            return Ok(());
        }
        let in_flight = active.load(Ordering::Acquire);
        workers.shutdown().await;
        let timeout = if abort.is_cancelled() {
            Duration::ZERO
        } else {
            c.shutdown_timeout
        };
        let error = ControllerError::ShutdownTimedOut {
            controller: name.to_string(),
            in_flight,
            timeout,
        };
        tracing::error!(controller = %name, %error, "reconciles aborted");
        Err(error)
    }

    async fn worker(
        self: Arc<Self>,
        queue: Queue,
        metrics: Option<ControllerMetricsHandle>,
        active: Arc<AtomicUsize>,
        stop: CancellationToken,
    ) {
        loop {
            let key = tokio::select! {
                biased;
                () = stop.cancelled() => break,
                key = queue.get() => key,
            };
            let Some(key) = key else { break };
            if stop.is_cancelled() {
                // Shutdown began while this key was handed out: leave it unprocessed
                // (the next start lists everything again).
                queue.done(&key);
                break;
            }
            if let Some(m) = &metrics {
                m.worker_started();
            }
            active.fetch_add(1, Ordering::AcqRel);
            let in_flight = InFlight {
                queue: &queue,
                key,
                metrics: metrics.as_ref(),
                active: &active,
            };
            let key = &in_flight.key;
            let processed = AssertUnwindSafe(self.process(key, &queue, metrics.as_ref()))
                .catch_unwind()
                .await;
            if let Err(payload) = processed {
                // A panic outside the reconcile itself (error policy, on_missing, an
                // observer): keep the worker alive and retry the key later.
                tracing::error!(controller = %self.name, object = %key, panic = %panic_message(&*payload), "panic while processing a key");
                queue.add_rate_limited(key.clone());
            }
            drop(in_flight);
        }
    }

    async fn process(
        &self,
        key: &ObjectKey,
        queue: &Queue,
        metrics: Option<&ControllerMetricsHandle>,
    ) {
        let started = Instant::now();
        let Some(obj) = self.controller.primary.store().get_by_key(key) else {
            tracing::debug!(controller = %self.name, object = %key, "object not in the cache (deleted), not reconciling");
            queue.forget(key);
            let hook = AssertUnwindSafe(self.reconciler.on_missing(key.clone(), self.ctx.clone()))
                .catch_unwind()
                .await;
            if let Err(payload) = hook {
                tracing::error!(controller = %self.name, object = %key, panic = %panic_message(&*payload), "on_missing panicked");
            }
            self.report(key, ReconcileResult::Missing, started);
            return;
        };
        let span = tracing::info_span!("reconcile", controller = %self.name, object = %key, namespace = obj.namespace().unwrap_or(""));
        let outcome = AssertUnwindSafe(self.reconciler.reconcile(obj.clone(), self.ctx.clone()))
            .catch_unwind()
            .instrument(span.clone())
            .await;
        let duration = started.elapsed();
        let (result, label) = match outcome {
            Ok(Ok(action)) => match action.requeue {
                Requeue::No => {
                    queue.forget(key);
                    (ReconcileResult::Success, ReconcileResultLabel::Success)
                }
                Requeue::After(after) => {
                    queue.forget(key);
                    queue.add_after(key.clone(), after);
                    (
                        ReconcileResult::RequeueAfter(after),
                        ReconcileResultLabel::RequeueAfter,
                    )
                }
                Requeue::RateLimited => {
                    queue.add_rate_limited(key.clone());
                    (ReconcileResult::Requeue, ReconcileResultLabel::Requeue)
                }
            },
            Ok(Err(error)) => {
                let message = error.to_string();
                tracing::error!(parent: &span, error = %message, requeues = queue.num_requeues(key), "reconciler error");
                let action = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    self.reconciler.error_policy(&obj, &error, &self.ctx)
                }))
                .unwrap_or_else(|payload| {
                    tracing::error!(parent: &span, panic = %panic_message(&*payload), "error_policy panicked, backing off");
                    Action::requeue_with_backoff()
                });
                match action.requeue {
                    Requeue::No => queue.forget(key),
                    Requeue::After(after) => queue.add_after(key.clone(), after),
                    Requeue::RateLimited => queue.add_rate_limited(key.clone()),
                }
                (ReconcileResult::Error(message), ReconcileResultLabel::Error)
            }
            Err(payload) => {
                let message = panic_message(&*payload);
                tracing::error!(parent: &span, panic = %message, "observed a panic in reconciler");
                if let Some(m) = metrics {
                    m.panicked();
                }
                queue.add_rate_limited(key.clone());
                (ReconcileResult::Panic(message), ReconcileResultLabel::Error)
            }
        };
        if let Some(m) = metrics {
            m.reconciled(label, duration);
        }
        self.report(key, result, started);
    }

    fn report(&self, key: &ObjectKey, result: ReconcileResult, started: Instant) {
        if self.controller.observers.is_empty() {
            return;
        }
        let report = ReconcileReport {
            controller: self.name.clone(),
            key: key.clone(),
            result,
            started,
            duration: started.elapsed(),
        };
        for observer in &self.controller.observers {
            observer(&report);
        }
    }
}
