//! The reflector: keeps a [`Store`] equal to the server's state of one resource by listing
//! and then watching (client-go's `tools/cache.Reflector`).
//!
//! What it does, in order:
//!
//! 1. **List.** By default a streaming list ([`InitialList::Streaming`],
//!    `sendInitialEvents=true`: the initial state arrives as ADDED events ended by a
//!    bookmark annotated `k8s.io/initial-events-end`, served from the watch cache in one
//!    request, consistent with etcd), as client-go 1.36 does. When the server rejects it
//!    (422 or 400, the WatchList feature being off), the reflector falls back for good
//!    to client-go's list semantics: the first list asks for `resourceVersion=0` (served
//!    from the watch cache in one response; the server ignores `limit` there), a relist
//!    after 410 is a consistent paged list (`limit` = [`ReflectorConfig::page_size`],
//!    following `continue` tokens; one unpaged list if a token expires). Either way the
//!    result replaces the store's contents atomically ([`Store::replace`]). One request
//!    per list in the common case, so the client's QPS limiter does not throttle a
//!    large initial sync.
//! 2. **Watch** from the list's resourceVersion, with bookmarks (on by default) and a
//!    server-side timeout. Every event and bookmark moves the tracked resourceVersion, so
//!    a watch that ends (cleanly, or because the connection broke) resumes from the last
//!    version seen without losing or repeating events.
//! 3. **Relist** when the server answers 410 Expired/Gone (as an HTTP status or as an ERROR
//!    event). Objects that vanished meanwhile are reported as
//!    [`Delta::Deleted`] with `final_state_unknown: true`.
//! 4. **Back off** on errors: jittered exponential delays ([`BackoffConfig`]; client-go's
//!    800 ms, ×2, 30 s cap, reset after 2 minutes without errors), measured with
//!    `tokio::time` so tests can pause time.
//! 5. **Idle timeout**: a watch that delivers neither an event nor a bookmark for
//!    [`ReflectorConfig::effective_idle_timeout`] (its response headers included: a
//!    server that accepts the request and never answers) is considered stalled and
//!    restarted from the last resourceVersion, without a relist. Bookmarks keep a quiet
//!    watch alive, and the server ends every watch after `timeoutSeconds`, so the bound
//!    sits a little above the watch timeout: 320 s by default.
//!
//! Objects are decoded once, passed through an optional transform (e.g.
//! [`strip_managed_fields`]) and moved into an `Arc`; the store and every consumer share
//! that allocation.
//!
//! The source of lists and watches is a [`ListWatch`]: typed and dynamic
//! ([`DynamicObject`](kubewright_core::DynamicObject)) resources use an [`Api`] directly,
//! metadata-only reflectors wrap one in [`MetadataOnly`].
//!
//! ```no_run
//! # async fn run(client: kubewright_client::Client) {
//! use futures::StreamExt;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kubewright_client::Api;
//! use kubewright_runtime::reflector::{Reflector, ReflectorConfig};
//! use kubewright_runtime::store::Delta;
//!
//! let api: Api<ConfigMap> = Api::namespaced(client, "default");
//! let reflector = Reflector::new(api, ReflectorConfig::default().labels("app=web"));
//! let store = reflector.store();
//! let mut deltas = reflector.into_stream();
//! while let Some(delta) = deltas.next().await {
//!     match delta {
//!         Ok(Delta::Replaced { resource_version }) => {
//!             println!("synced {} objects at {resource_version}", store.len())
//!         }
//!         Ok(other) => println!("{other:?}"),
//!         Err(e) => eprintln!("retrying after: {e}"),
//!     }
//! }
//! # }
//! ```

use crate::store::{Delta, Store};
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, SinkExt, StreamExt};
use kubewright_client::{Api, Error as ClientError};
use kubewright_core::{
    ListParams, ObjectList, PartialObjectMetadata, Resource, ResourceExt, Status, WatchEvent,
    WatchParams,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt::{self, Debug};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::{Instant, Interval, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

/// A stream of watch events, as returned by [`ListWatch::watch`].
pub type WatchStream<K> = BoxStream<'static, Result<WatchEvent<K>, ClientError>>;

/// A transform applied to every object before it is stored (and shared with consumers).
pub type Transform<K> = Arc<dyn Fn(K) -> K + Send + Sync>;

/// The source of lists and watches for a reflector (client-go's `ListerWatcher`).
///
/// Implemented for [`Api<K>`] (typed and dynamic objects) and [`MetadataOnly`]. The
/// reflector passes label and field selectors, page sizes, continue tokens and watch
/// options in the parameters; the implementation only has to send them.
pub trait ListWatch<K>: Send + Sync + 'static {
    /// Lists one page.
    fn list<'a>(&'a self, lp: &'a ListParams) -> BoxFuture<'a, Result<ObjectList<K>, ClientError>>;

    /// Starts a watch from `resource_version` (`""`: from the current state).
    fn watch<'a>(
        &'a self,
        wp: &'a WatchParams,
        resource_version: &'a str,
    ) -> BoxFuture<'a, Result<WatchStream<K>, ClientError>>;

    /// A short description for logs, e.g. the collection path.
    fn describe(&self) -> String {
        String::from("list-watch")
    }
}

impl<K> ListWatch<K> for Api<K>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug + Send + Sync + 'static,
{
    fn list<'a>(&'a self, lp: &'a ListParams) -> BoxFuture<'a, Result<ObjectList<K>, ClientError>> {
        Api::list(self, lp).boxed()
    }

    fn watch<'a>(
        &'a self,
        wp: &'a WatchParams,
        resource_version: &'a str,
    ) -> BoxFuture<'a, Result<WatchStream<K>, ClientError>> {
        async move { Ok(Api::watch(self, wp, resource_version).await?.boxed()) }.boxed()
    }

    fn describe(&self) -> String {
        self.url_path().to_string()
    }
}

/// Lists and watches only object metadata ([`PartialObjectMetadata`]) through an
/// [`Api`] of any type: `MetadataOnly(Api::<Pod>::all(client))`, or an
/// `Api<DynamicObject>` for types known at run time. Much smaller caches when only
/// names, labels, owners or annotations matter.
#[derive(Clone, Debug)]
pub struct MetadataOnly<K: Resource>(pub Api<K>);

impl<K> ListWatch<PartialObjectMetadata> for MetadataOnly<K>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug + Send + Sync + 'static,
{
    fn list<'a>(
        &'a self,
        lp: &'a ListParams,
    ) -> BoxFuture<'a, Result<ObjectList<PartialObjectMetadata>, ClientError>> {
        self.0.list_metadata(lp).boxed()
    }

    fn watch<'a>(
        &'a self,
        wp: &'a WatchParams,
        resource_version: &'a str,
    ) -> BoxFuture<'a, Result<WatchStream<PartialObjectMetadata>, ClientError>> {
        async move { Ok(self.0.watch_metadata(wp, resource_version).await?.boxed()) }.boxed()
    }

    fn describe(&self) -> String {
        format!("{} (metadata)", self.0.url_path())
    }
}

/// Removes `metadata.managedFields`, usually the largest part of a decoded object: a
/// transform for [`Reflector::with_transform`] and informers. With an [`Api`] source,
/// [`Api::without_managed_fields`] is cheaper: it never decodes the field at all.
pub fn strip_managed_fields<K: Resource>(mut obj: K) -> K {
    obj.meta_mut().managed_fields = None;
    obj
}

/// How the initial state (and the state after a 410) is fetched.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum InitialList {
    /// A list (`resourceVersion=0` the first time, paged and consistent after a 410),
    /// then a watch from the list's resourceVersion.
    Paged,
    /// A streaming list (`sendInitialEvents=true`), falling back to [`InitialList::Paged`]
    /// when the server rejects it. The default, as in client-go 1.36.
    #[default]
    Streaming,
}

/// Jittered exponential backoff settings. The defaults are client-go's reflector
/// backoff: 800 ms initial, factor 2, 30 s cap, jitter 1.0, reset after 2 minutes
/// without errors.
#[derive(Clone, Debug, PartialEq)]
pub struct BackoffConfig {
    /// First delay.
    pub initial: Duration,
    /// Growth factor per consecutive failure (values below 1 count as 1).
    pub factor: f64,
    /// Cap of the base delay.
    pub max: Duration,
    /// Random extra of up to `jitter × base` on top of the base delay (client-go's
    /// semantics: the cap applies to the base, so a delay can reach `(1 + jitter) × max`).
    pub jitter: f64,
    /// After this long without a failure, the next failure starts again at `initial`.
    pub reset_after: Duration,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(800),
            factor: 2.0,
            max: Duration::from_secs(30),
            jitter: 1.0,
            reset_after: Duration::from_secs(120),
        }
    }
}

/// The state of a jittered exponential backoff (see [`BackoffConfig`]). Uses
/// `tokio::time::Instant`, so it follows a paused test clock.
#[derive(Clone, Debug)]
pub struct Backoff {
    config: BackoffConfig,
    base: Option<Duration>,
    last: Option<Instant>,
}

impl Backoff {
    /// A backoff that has not failed yet.
    pub fn new(config: BackoffConfig) -> Self {
        Self {
            config,
            base: None,
            last: None,
        }
    }

    /// The delay to wait after a failure now, and records the failure.
    pub fn next_delay(&mut self) -> Duration {
        let now = Instant::now();
        if let Some(last) = self.last
            && now.saturating_duration_since(last) >= self.config.reset_after
        {
            self.base = None;
        }
        let max = self.config.max;
        let base = match self.base {
            None => self.config.initial.min(max),
            Some(prev) => {
                let factor = if self.config.factor.is_finite() {
                    self.config.factor.max(1.0)
                } else {
                    1.0
                };
                Duration::try_from_secs_f64(prev.as_secs_f64() * factor)
                    .unwrap_or(max)
                    .min(max)
            }
        };
        self.base = Some(base);
        self.last = Some(now);
        let jitter = self.config.jitter;
        if jitter.is_finite() && jitter > 0.0 {
            let extra = base.as_secs_f64() * jitter * rand::random::<f64>();
            base + Duration::try_from_secs_f64(extra).unwrap_or_default()
        } else {
            base
        }
    }

    /// Forgets past failures.
    pub fn reset(&mut self) {
        self.base = None;
        self.last = None;
    }
}

/// Settings of a reflector (and of an informer, which runs one).
#[derive(Clone, Debug, PartialEq)]
pub struct ReflectorConfig {
    /// Label selector sent with lists and watches.
    pub label_selector: Option<String>,
    /// Field selector sent with lists and watches.
    pub field_selector: Option<String>,
    /// Page size of paged lists (default 500; 0 = one unpaged list).
    pub page_size: u32,
    /// Streaming (default) or paged initial list.
    pub initial_list: InitialList,
    /// Server-side watch timeout (`timeoutSeconds`, default 290 s); the watch is resumed
    /// from the last resourceVersion when it ends.
    pub watch_timeout: Duration,
    /// Ask for bookmarks (default true).
    pub bookmarks: bool,
    /// Restart a watch that delivered nothing (no response headers, no event, no
    /// bookmark) for this long (default 5 minutes). Never less than `watch_timeout` plus
    /// a margin (a tenth of it plus 1 s, at most 30 s; see
    /// [`ReflectorConfig::effective_idle_timeout`]), so a quiet but healthy watch is not
    /// restarted before the server closes it. kube-apiserver also sends a bookmark about
    /// every minute, so with a shorter `watch_timeout` stalls are found sooner.
    pub idle_timeout: Duration,
    /// Periodic resync: re-deliver every stored object as [`Delta::Sync`] (handlers see
    /// an update with `old == new`). Off by default.
    pub resync_period: Option<Duration>,
    /// Backoff on errors.
    pub backoff: BackoffConfig,
}

impl Default for ReflectorConfig {
    fn default() -> Self {
        Self {
            label_selector: None,
            field_selector: None,
            page_size: 500,
            initial_list: InitialList::Streaming,
            watch_timeout: Duration::from_secs(290),
            bookmarks: true,
            idle_timeout: Duration::from_secs(300),
            resync_period: None,
            backoff: BackoffConfig::default(),
        }
    }
}

impl ReflectorConfig {
    /// Sets the label selector.
    #[must_use]
    pub fn labels(mut self, selector: &str) -> Self {
        self.label_selector = Some(selector.to_string()).filter(|s| !s.is_empty());
        self
    }
    /// Sets the field selector.
    #[must_use]
    pub fn fields(mut self, selector: &str) -> Self {
        self.field_selector = Some(selector.to_string()).filter(|s| !s.is_empty());
        self
    }
    /// Sets the list page size (0 = unpaged).
    #[must_use]
    pub fn page_size(mut self, n: u32) -> Self {
        self.page_size = n;
        self
    }
    /// Uses streaming lists (`sendInitialEvents`), falling back to paged lists (the
    /// default).
    #[must_use]
    pub fn streaming_list(mut self) -> Self {
        self.initial_list = InitialList::Streaming;
        self
    }
    /// Uses plain lists only, never a streaming list.
    #[must_use]
    pub fn paged_list(mut self) -> Self {
        self.initial_list = InitialList::Paged;
        self
    }
    /// Sets the server-side watch timeout (rounded down to whole seconds, at least 1).
    #[must_use]
    pub fn watch_timeout(mut self, d: Duration) -> Self {
        self.watch_timeout = d;
        self
    }
    /// Turns bookmarks on or off.
    #[must_use]
    pub fn bookmarks(mut self, on: bool) -> Self {
        self.bookmarks = on;
        self
    }
    /// Sets the client-side idle timeout.
    #[must_use]
    pub fn idle_timeout(mut self, d: Duration) -> Self {
        self.idle_timeout = d;
        self
    }
    /// Turns on periodic resync.
    #[must_use]
    pub fn resync(mut self, period: Duration) -> Self {
        self.resync_period = Some(period).filter(|p| !p.is_zero());
        self
    }
    /// Sets the backoff.
    #[must_use]
    pub fn backoff(mut self, backoff: BackoffConfig) -> Self {
        self.backoff = backoff;
        self
    }

    fn watch_timeout_secs(&self) -> u32 {
        u32::try_from(self.watch_timeout.as_secs())
            .unwrap_or(u32::MAX)
            .max(1)
    }

    /// The idle timeout actually used: `idle_timeout`, but at least `watch_timeout` plus
    /// `min(watch_timeout / 10 + 1 s, 30 s)` (320 s for the default 290 s watch timeout).
    pub fn effective_idle_timeout(&self) -> Duration {
        let watch = Duration::from_secs(u64::from(self.watch_timeout_secs()));
        let margin = (watch / 10 + Duration::from_secs(1)).min(Duration::from_secs(30));
        self.idle_timeout.max(watch + margin)
    }
}

/// A reflector error. None is fatal: the reflector backs off and retries (relisting when
/// needed) until it is stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A list request failed.
    #[error("list failed: {0}")]
    List(#[source] ClientError),
    /// A watch request failed, or the watch stream broke.
    #[error("watch failed: {0}")]
    Watch(#[source] ClientError),
    /// The watch stream carried an ERROR event other than 410.
    #[error("watch ERROR event: {} {}: {}", .0.code, .0.reason, .0.message)]
    WatchStatus(Box<Status>),
    /// Neither an event nor a bookmark arrived for this long.
    #[error("watch delivered nothing for {0:?}; restarting it")]
    IdleTimeout(Duration),
    /// A watch ended at once without delivering anything.
    #[error("watch closed immediately without any event")]
    WatchClosedEarly,
    /// A streaming list ended before its `k8s.io/initial-events-end` bookmark.
    #[error("streaming list ended before the initial-events-end bookmark")]
    StreamingListIncomplete,
}

/// Counters of a reflector, for logs, metrics and tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReflectorStats {
    /// Completed paged lists (initial and relists).
    pub lists: u64,
    /// Completed streaming lists (initial and relists).
    pub streaming_lists: u64,
    /// Watch requests the server accepted (including streaming lists).
    pub watches: u64,
    /// 410 Expired/Gone answers that caused a relist.
    pub expired: u64,
    /// Errors (each followed by a backoff).
    pub errors: u64,
    /// Times a rejected streaming list made the reflector fall back to paged lists.
    pub streaming_fallbacks: u64,
    /// resourceVersion of the last completed list.
    pub last_sync_resource_version: Option<String>,
}

impl ReflectorStats {
    /// Completed lists of either kind.
    pub fn completed_lists(&self) -> u64 {
        self.lists + self.streaming_lists
    }
}

/// A raw change from the reflector, applied to the store by a [`Sink`].
pub(crate) enum Change<K> {
    Upsert(Arc<K>),
    Delete(Arc<K>),
    Replace {
        objects: Vec<Arc<K>>,
        resource_version: String,
    },
    Resync,
}

/// Where a running reflector sends its changes: it applies them to the store and
/// delivers the resulting deltas. Returns false to stop the reflector.
pub(crate) trait Sink<K>: Send {
    fn apply(&mut self, store: &Store<K>, change: Change<K>) -> impl Future<Output = bool> + Send;
    fn error(&mut self, error: Error) -> impl Future<Output = bool> + Send;
}

/// The sink of [`Reflector::into_stream`]: deltas go to a bounded channel (backpressure
/// from a slow consumer pauses the reflector).
struct ChannelSink<K> {
    tx: futures::channel::mpsc::Sender<Result<Delta<K>, Error>>,
}

impl<K: Resource + Send + Sync + 'static> Sink<K> for ChannelSink<K> {
    async fn apply(&mut self, store: &Store<K>, change: Change<K>) -> bool {
        match change {
            Change::Upsert(obj) => self.tx.send(Ok(store.upsert(obj))).await.is_ok(),
            Change::Delete(obj) => match store.delete(obj) {
                Some(d) => self.tx.send(Ok(d)).await.is_ok(),
                None => true,
            },
            Change::Replace {
                objects,
                resource_version,
            } => {
                for d in store.replace(objects) {
                    if self.tx.send(Ok(d)).await.is_err() {
                        return false;
                    }
                }
                self.tx
                    .send(Ok(Delta::Replaced { resource_version }))
                    .await
                    .is_ok()
            }
            Change::Resync => {
                for obj in store.list() {
                    if self.tx.send(Ok(Delta::Sync(obj))).await.is_err() {
                        return false;
                    }
                }
                true
            }
        }
    }

    async fn error(&mut self, error: Error) -> bool {
        self.tx.send(Err(error)).await.is_ok()
    }
}

/// Keeps a [`Store`] in sync with the server by listing and watching; see the
/// [module docs](self).
pub struct Reflector<K> {
    lw: Arc<dyn ListWatch<K>>,
    store: Store<K>,
    config: ReflectorConfig,
    transform: Option<Transform<K>>,
    stats: Arc<watch::Sender<ReflectorStats>>,
}

impl<K: 'static> Debug for Reflector<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reflector")
            .field("source", &self.lw.describe())
            .field("config", &self.config)
            .finish()
    }
}

const STREAM_BUFFER: usize = 256;

impl<K: Resource + Send + Sync + 'static> Reflector<K> {
    /// A reflector over `lw` with a new, empty store.
    pub fn new(lw: impl ListWatch<K>, config: ReflectorConfig) -> Self {
        Self {
            lw: Arc::new(lw),
            store: Store::new(),
            config,
            transform: None,
            stats: Arc::new(watch::Sender::new(ReflectorStats::default())),
        }
    }

    /// Uses `store` instead of a new one (e.g. one with indexes already added). The
    /// reflector must be the store's only writer.
    #[must_use]
    pub fn with_store(mut self, store: Store<K>) -> Self {
        self.store = store;
        self
    }

    /// Applies `f` to every object before it is stored.
    #[must_use]
    pub fn with_transform(mut self, f: impl Fn(K) -> K + Send + Sync + 'static) -> Self {
        self.transform = Some(Arc::new(f));
        self
    }

    /// The store this reflector writes to.
    pub fn store(&self) -> Store<K> {
        self.store.clone()
    }

    /// Live counters (lists, watches, 410s, errors).
    pub fn stats(&self) -> watch::Receiver<ReflectorStats> {
        self.stats.subscribe()
    }

    /// Runs the reflector as a stream of deltas (errors are reported and retried, never
    /// fatal). The reflector runs only while the stream is polled, needs no spawned task,
    /// and stops when the stream is dropped. The store is updated before each delta is
    /// yielded.
    pub fn into_stream(self) -> BoxStream<'static, Result<Delta<K>, Error>> {
        let (tx, rx) = futures::channel::mpsc::channel(STREAM_BUFFER);
        let runner = Runner {
            lw: self.lw,
            store: self.store,
            config: self.config,
            transform: self.transform,
            stats: self.stats,
            cancel: CancellationToken::new(),
        };
        let driver = futures::stream::once(runner.run(ChannelSink { tx }))
            .filter_map(|()| futures::future::ready(None));
        futures::stream::select(rx, driver).boxed()
    }
}

/// The reflector's loop, shared by [`Reflector::into_stream`] and informers.
pub(crate) struct Runner<K> {
    pub(crate) lw: Arc<dyn ListWatch<K>>,
    pub(crate) store: Store<K>,
    pub(crate) config: ReflectorConfig,
    pub(crate) transform: Option<Transform<K>>,
    pub(crate) stats: Arc<watch::Sender<ReflectorStats>>,
    pub(crate) cancel: CancellationToken,
}

/// How a list attempt ended.
enum Listed<K> {
    Done(String, Option<WatchStream<K>>),
    Unsupported(Error),
    Failed(Error),
    Stopped,
}

/// How a watch ended.
enum WatchEnd {
    Closed,
    Expired,
    Failed(Error),
    Stopped,
}

/// A watch that ends this fast without delivering anything counts as a failure (so a
/// misbehaving server cannot make the reflector spin).
const MIN_WATCH_DURATION: Duration = Duration::from_secs(1);

/// A watch's idle timeout: one timer for the whole watch, re-armed only when it fires
/// before the deadline has really passed, instead of a timer (and its registration with
/// the runtime's timer wheel) per event.
struct IdleDeadline {
    idle: Duration,
    last: Instant,
    sleep: Pin<Box<tokio::time::Sleep>>,
}

impl IdleDeadline {
    fn new(idle: Duration) -> Self {
        let last = Instant::now();
        Self {
            idle,
            last,
            sleep: Box::pin(tokio::time::sleep_until(last + idle)),
        }
    }

    /// Something arrived: the deadline is `idle` from now.
    fn touch(&mut self) {
        self.last = Instant::now();
    }

    /// Resolves once nothing has arrived for `idle`.
    async fn expired(&mut self) {
        loop {
            self.sleep.as_mut().await;
            let deadline = self.last + self.idle;
            if Instant::now() >= deadline {
                return;
            }
            self.sleep.as_mut().reset(deadline);
        }
    }
}

async fn tick(interval: &mut Option<Interval>) {
    match interval {
        Some(i) => {
            i.tick().await;
        }
        None => std::future::pending::<()>().await,
    }
}

fn same_key<K: Resource>(a: &K, b: &K) -> bool {
    a.meta().name == b.meta().name && a.meta().namespace == b.meta().namespace
}

impl<K: Resource + Send + Sync + 'static> Runner<K> {
    fn prepare(&self, obj: K) -> Arc<K> {
        Arc::new(match &self.transform {
            Some(t) => t(obj),
            None => obj,
        })
    }

    fn bump(&self, f: impl FnOnce(&mut ReflectorStats)) {
        self.stats.send_modify(f);
    }

    async fn cancellable<F: Future>(&self, f: F) -> Option<F::Output> {
        tokio::select! {
            biased;
            () = self.cancel.cancelled() => None,
            v = f => Some(v),
        }
    }

    fn watch_params(&self, streaming: bool) -> WatchParams {
        WatchParams {
            label_selector: self.config.label_selector.clone(),
            field_selector: self.config.field_selector.clone(),
            timeout: Some(self.config.watch_timeout_secs()),
            bookmarks: self.config.bookmarks || streaming,
            send_initial_events: streaming,
        }
    }

    /// Sleeps for the next backoff delay; false when stopped meanwhile.
    async fn sleep(&self, backoff: &mut Backoff) -> bool {
        let d = backoff.next_delay();
        self.cancellable(tokio::time::sleep(d)).await.is_some()
    }

    /// Reports an error and backs off; false when the reflector should stop.
    async fn fail<S: Sink<K>>(&self, sink: &mut S, backoff: &mut Backoff, e: Error) -> bool {
        self.bump(|s| s.errors += 1);
        tracing::warn!(resource = %self.lw.describe(), error = %e, "reflector error, backing off");
        if !sink.error(e).await {
            return false;
        }
        self.sleep(backoff).await
    }

    pub(crate) async fn run<S: Sink<K>>(self, mut sink: S) {
        let mut backoff = Backoff::new(self.config.backoff.clone());
        let mut streaming = self.config.initial_list == InitialList::Streaming;
        let mut rv: Option<String> = None;
        let mut carried: Option<WatchStream<K>> = None;
        let mut resync = self.config.resync_period.filter(|p| !p.is_zero()).map(|p| {
            let mut i = tokio::time::interval_at(Instant::now() + p, p);
            i.set_missed_tick_behavior(MissedTickBehavior::Delay);
            i
        });
        let mut expired_streak = 0u32;
        let mut listed_once = false;
        loop {
            if self.cancel.is_cancelled() {
                return;
            }
            if rv.is_none() {
                let listed = if streaming {
                    self.streaming_list(&mut sink).await
                } else {
                    // The first list may come from the watch cache (client-go's
                    // `resourceVersion=0`); a relist after 410 must be consistent.
                    self.paged_list(&mut sink, !listed_once).await
                };
                match listed {
                    Listed::Done(r, stream) => {
                        listed_once = true;
                        rv = Some(r);
                        carried = stream;
                    }
                    Listed::Unsupported(e) => {
                        tracing::info!(resource = %self.lw.describe(), error = %e,
                            "streaming lists are not supported; falling back to paged lists");
                        self.bump(|s| s.streaming_fallbacks += 1);
                        streaming = false;
                        continue;
                    }
                    Listed::Failed(e) => {
                        if !self.fail(&mut sink, &mut backoff, e).await {
                            return;
                        }
                        continue;
                    }
                    Listed::Stopped => return,
                }
            }
            let Some(from) = rv.clone() else { continue };
            let stream = match carried.take() {
                Some(s) => s,
                None => {
                    let wp = self.watch_params(false);
                    // A server that takes the request and never answers is a stall too.
                    let idle = self.config.effective_idle_timeout();
                    let started = tokio::time::timeout(idle, self.lw.watch(&wp, &from));
                    match self.cancellable(started).await {
                        None => return,
                        Some(Err(_)) => {
                            if !self
                                .fail(&mut sink, &mut backoff, Error::IdleTimeout(idle))
                                .await
                            {
                                return;
                            }
                            continue;
                        }
                        Some(Ok(Ok(s))) => {
                            self.bump(|s| s.watches += 1);
                            s
                        }
                        Some(Ok(Err(e))) if e.is_gone() => {
                            tracing::debug!(resource = %self.lw.describe(), rv = %from, "watch expired (410); relisting");
                            self.bump(|s| s.expired += 1);
                            rv = None;
                            if expired_streak > 0 && !self.sleep(&mut backoff).await {
                                return;
                            }
                            expired_streak += 1;
                            continue;
                        }
                        Some(Ok(Err(e))) => {
                            if !self.fail(&mut sink, &mut backoff, Error::Watch(e)).await {
                                return;
                            }
                            continue;
                        }
                    }
                }
            };
            let started = Instant::now();
            let mut current = from;
            let (end, items) = self
                .consume(stream, &mut sink, &mut current, &mut resync)
                .await;
            rv = Some(current);
            if items > 0 {
                expired_streak = 0;
            }
            match end {
                WatchEnd::Closed => {
                    if items == 0
                        && started.elapsed() < MIN_WATCH_DURATION
                        && !self
                            .fail(&mut sink, &mut backoff, Error::WatchClosedEarly)
                            .await
                    {
                        return;
                    }
                }
                WatchEnd::Expired => {
                    tracing::debug!(resource = %self.lw.describe(), "watch expired (410 ERROR event); relisting");
                    self.bump(|s| s.expired += 1);
                    rv = None;
                    if expired_streak > 0 && !self.sleep(&mut backoff).await {
                        return;
                    }
                    expired_streak += 1;
                }
                WatchEnd::Failed(e) => {
                    if !self.fail(&mut sink, &mut backoff, e).await {
                        return;
                    }
                }
                WatchEnd::Stopped => return,
            }
        }
    }

    /// Lists every page, transforming and wrapping objects as they arrive. With
    /// `from_cache`, asks for `resourceVersion=0` (any recent state, which kube-apiserver
    /// serves from its watch cache in one response, ignoring `limit`); otherwise a
    /// consistent list.
    async fn list_all(&self, from_cache: bool) -> Result<(Vec<Arc<K>>, String), ClientError> {
        let mut lp = ListParams {
            label_selector: self.config.label_selector.clone(),
            field_selector: self.config.field_selector.clone(),
            limit: Some(self.config.page_size).filter(|n| *n > 0),
            resource_version: from_cache.then(|| "0".to_string()),
            ..Default::default()
        };
        let mut out: Vec<Arc<K>> = Vec::new();
        loop {
            let page = match self.lw.list(&lp).await {
                Ok(p) => p,
                Err(e) if e.is_gone() && lp.continue_token.is_some() => {
                    // The continue token expired mid-list: like client-go's pager, fall
                    // back to one unpaged list.
                    tracing::debug!(resource = %self.lw.describe(), "continue token expired; listing without pages");
                    out.clear();
                    lp.continue_token = None;
                    lp.limit = None;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let ObjectList { metadata, items } = page;
            let remaining = metadata
                .remaining_item_count
                .and_then(|n| usize::try_from(n).ok())
                .unwrap_or(0);
            out.reserve(items.len() + remaining);
            out.extend(items.into_iter().map(|o| self.prepare(o)));
            match metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) if lp.limit.is_some() => {
                    // A server without a watch cache pages even at resourceVersion=0;
                    // continue tokens carry their own version.
                    lp.resource_version = None;
                    lp.continue_token = Some(token);
                }
                _ => return Ok((out, metadata.resource_version.unwrap_or_default())),
            }
        }
    }

    async fn paged_list<S: Sink<K>>(&self, sink: &mut S, from_cache: bool) -> Listed<K> {
        match self.cancellable(self.list_all(from_cache)).await {
            None => Listed::Stopped,
            Some(Err(e)) => Listed::Failed(Error::List(e)),
            Some(Ok((objects, rv))) => {
                let n = objects.len();
                if !sink
                    .apply(
                        &self.store,
                        Change::Replace {
                            objects,
                            resource_version: rv.clone(),
                        },
                    )
                    .await
                {
                    return Listed::Stopped;
                }
                tracing::debug!(resource = %self.lw.describe(), objects = n, rv = %rv, "listed");
                self.bump(|s| {
                    s.lists += 1;
                    s.last_sync_resource_version = Some(rv.clone());
                });
                Listed::Done(rv, None)
            }
        }
    }

    async fn streaming_list<S: Sink<K>>(&self, sink: &mut S) -> Listed<K> {
        let wp = self.watch_params(true);
        let idle = self.config.effective_idle_timeout();
        let started = tokio::time::timeout(idle, self.lw.watch(&wp, ""));
        let mut stream = match self.cancellable(started).await {
            None => return Listed::Stopped,
            Some(Err(_)) => return Listed::Failed(Error::IdleTimeout(idle)),
            Some(Ok(Err(e))) if e.is_invalid() || e.is_bad_request() => {
                return Listed::Unsupported(Error::Watch(e));
            }
            Some(Ok(Err(e))) => return Listed::Failed(Error::Watch(e)),
            Some(Ok(Ok(s))) => s,
        };
        self.bump(|s| s.watches += 1);
        let mut objects: Vec<Arc<K>> = Vec::new();
        let cancelled = self.cancel.cancelled();
        tokio::pin!(cancelled);
        let mut deadline = IdleDeadline::new(idle);
        loop {
            let next = tokio::select! {
                biased;
                () = &mut cancelled => return Listed::Stopped,
                () = deadline.expired() => return Listed::Failed(Error::IdleTimeout(idle)),
                next = stream.next() => next,
            };
            deadline.touch();
            match next {
                None => return Listed::Failed(Error::StreamingListIncomplete),
                Some(Err(e)) => return Listed::Failed(Error::Watch(e)),
                // Initial events are one ADDED per object; push without searching.
                Some(Ok(WatchEvent::Added(o))) => objects.push(self.prepare(o)),
                Some(Ok(WatchEvent::Modified(o))) => {
                    let o = self.prepare(o);
                    match objects.iter_mut().find(|x| same_key(&***x, &*o)) {
                        Some(slot) => *slot = o,
                        None => objects.push(o),
                    }
                }
                Some(Ok(WatchEvent::Deleted(o))) => objects.retain(|x| !same_key(&**x, &o)),
                Some(Ok(WatchEvent::Bookmark(b))) if b.is_initial_events_end() => {
                    let rv = b.metadata.resource_version;
                    let n = objects.len();
                    if !sink
                        .apply(
                            &self.store,
                            Change::Replace {
                                objects,
                                resource_version: rv.clone(),
                            },
                        )
                        .await
                    {
                        return Listed::Stopped;
                    }
                    tracing::debug!(resource = %self.lw.describe(), objects = n, rv = %rv, "streaming list complete");
                    self.bump(|s| {
                        s.streaming_lists += 1;
                        s.last_sync_resource_version = Some(rv.clone());
                    });
                    return Listed::Done(rv, Some(stream));
                }
                Some(Ok(WatchEvent::Bookmark(_))) => {}
                Some(Ok(WatchEvent::Error(st))) if st.code == 422 || st.code == 400 => {
                    return Listed::Unsupported(Error::WatchStatus(Box::new(st)));
                }
                Some(Ok(WatchEvent::Error(st))) => {
                    return Listed::Failed(Error::WatchStatus(Box::new(st)));
                }
            }
        }
    }

    /// Consumes one watch stream until it ends, applying its events; `rv` follows every
    /// event and bookmark. Returns how it ended and how many events/bookmarks it carried.
    async fn consume<S: Sink<K>>(
        &self,
        mut stream: WatchStream<K>,
        sink: &mut S,
        rv: &mut String,
        resync: &mut Option<Interval>,
    ) -> (WatchEnd, u64) {
        let idle = self.config.effective_idle_timeout();
        let mut deadline = IdleDeadline::new(idle);
        let cancelled = self.cancel.cancelled();
        tokio::pin!(cancelled);
        let mut items = 0u64;
        loop {
            let next = tokio::select! {
                biased;
                () = &mut cancelled => return (WatchEnd::Stopped, items),
                () = tick(resync) => {
                    if !sink.apply(&self.store, Change::Resync).await {
                        return (WatchEnd::Stopped, items);
                    }
                    continue;
                }
                () = deadline.expired() => {
                    return (WatchEnd::Failed(Error::IdleTimeout(idle)), items);
                }
                next = stream.next() => next,
            };
            deadline.touch();
            let event = match next {
                None => return (WatchEnd::Closed, items),
                Some(Err(e)) => return (WatchEnd::Failed(Error::Watch(e)), items),
                Some(Ok(event)) => event,
            };
            let change = match event {
                WatchEvent::Added(o) | WatchEvent::Modified(o) => {
                    set_rv(rv, &o);
                    Change::Upsert(self.prepare(o))
                }
                WatchEvent::Deleted(o) => {
                    set_rv(rv, &o);
                    Change::Delete(self.prepare(o))
                }
                WatchEvent::Bookmark(b) => {
                    items += 1;
                    if !b.metadata.resource_version.is_empty() {
                        rv.clone_from(&b.metadata.resource_version);
                    }
                    continue;
                }
                WatchEvent::Error(status) if status.is_gone() => {
                    return (WatchEnd::Expired, items);
                }
                WatchEvent::Error(status) => {
                    return (
                        WatchEnd::Failed(Error::WatchStatus(Box::new(status))),
                        items,
                    );
                }
            };
            items += 1;
            if !sink.apply(&self.store, change).await {
                return (WatchEnd::Stopped, items);
            }
        }
    }
}

fn set_rv<K: Resource>(rv: &mut String, obj: &K) {
    if let Some(v) = obj.resource_version().filter(|v| !v.is_empty()) {
        rv.clear();
        rv.push_str(v);
    }
}

#[cfg(test)]
pub(crate) mod fake {
    //! A scripted [`ListWatch`] for unit tests.
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kubewright_core::ListMeta;
    use kubewright_core::ObjectMeta;
    use std::collections::{BTreeMap, VecDeque};
    use std::sync::Mutex;

    pub(crate) type Ev = Result<WatchEvent<ConfigMap>, ClientError>;

    /// One scripted watch.
    pub(crate) enum FakeWatch {
        /// The watch request fails.
        Fail(ClientError),
        /// These events, then the stream ends.
        Events(Vec<Ev>),
        /// These events, then the stream stays open forever.
        EventsThenPending(Vec<Ev>),
        /// Events pushed by the test.
        Live(futures::channel::mpsc::UnboundedReceiver<Ev>),
    }

    /// A recorded call.
    #[derive(Clone, Debug)]
    pub(crate) enum Call {
        List(Instant, ListParams),
        Watch(Instant, WatchParams, String),
    }

    /// Scripted responses; when a script runs out, the request never completes.
    #[derive(Default)]
    pub(crate) struct FakeLw {
        pub lists: Mutex<VecDeque<Result<ObjectList<ConfigMap>, ClientError>>>,
        pub watches: Mutex<VecDeque<FakeWatch>>,
        pub calls: Mutex<Vec<Call>>,
    }

    impl FakeLw {
        pub fn new() -> Arc<Self> {
            Arc::new(Self::default())
        }
        pub fn list(&self, r: Result<ObjectList<ConfigMap>, ClientError>) -> &Self {
            self.lists.lock().unwrap().push_back(r);
            self
        }
        pub fn watch(&self, w: FakeWatch) -> &Self {
            self.watches.lock().unwrap().push_back(w);
            self
        }
        pub fn calls(&self) -> Vec<Call> {
            self.calls.lock().unwrap().clone()
        }
        pub fn watch_calls(&self) -> Vec<(Instant, WatchParams, String)> {
            self.calls()
                .into_iter()
                .filter_map(|c| match c {
                    Call::Watch(t, wp, rv) => Some((t, wp, rv)),
                    Call::List(..) => None,
                })
                .collect()
        }
        pub fn list_calls(&self) -> Vec<(Instant, ListParams)> {
            self.calls()
                .into_iter()
                .filter_map(|c| match c {
                    Call::List(t, lp) => Some((t, lp)),
                    Call::Watch(..) => None,
                })
                .collect()
        }
    }

    /// Shares one FakeLw between the test and the reflector.
    pub(crate) struct Shared(pub Arc<FakeLw>);

    impl ListWatch<ConfigMap> for Shared {
        fn list<'a>(
            &'a self,
            lp: &'a ListParams,
        ) -> BoxFuture<'a, Result<ObjectList<ConfigMap>, ClientError>> {
            self.0
                .calls
                .lock()
                .unwrap()
                .push(Call::List(Instant::now(), lp.clone()));
            let next = self.0.lists.lock().unwrap().pop_front();
            async move {
                match next {
                    Some(r) => r,
                    None => std::future::pending().await,
                }
            }
            .boxed()
        }

        fn watch<'a>(
            &'a self,
            wp: &'a WatchParams,
            rv: &'a str,
        ) -> BoxFuture<'a, Result<WatchStream<ConfigMap>, ClientError>> {
            self.0.calls.lock().unwrap().push(Call::Watch(
                Instant::now(),
                wp.clone(),
                rv.to_string(),
            ));
            let next = self.0.watches.lock().unwrap().pop_front();
            async move {
                match next {
                    None => std::future::pending().await,
                    Some(FakeWatch::Fail(e)) => Err(e),
                    Some(FakeWatch::Events(evs)) => Ok(futures::stream::iter(evs).boxed()),
                    Some(FakeWatch::EventsThenPending(evs)) => Ok(futures::stream::iter(evs)
                        .chain(futures::stream::pending())
                        .boxed()),
                    Some(FakeWatch::Live(rx)) => Ok(rx.boxed()),
                }
            }
            .boxed()
        }
    }

    pub(crate) fn cm(name: &str, rv: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                namespace: Some("ns".into()),
                name: Some(name.into()),
                resource_version: Some(rv.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    pub(crate) fn list(
        items: Vec<ConfigMap>,
        rv: &str,
        cont: Option<&str>,
    ) -> ObjectList<ConfigMap> {
        ObjectList {
            metadata: ListMeta {
                resource_version: Some(rv.into()),
                continue_: cont.map(str::to_string),
                ..Default::default()
            },
            items,
        }
    }

    pub(crate) fn bookmark(rv: &str, initial_end: bool) -> Ev {
        let mut annotations = BTreeMap::new();
        if initial_end {
            annotations.insert(
                kubewright_core::watch::INITIAL_EVENTS_END.to_string(),
                "true".to_string(),
            );
        }
        Ok(WatchEvent::Bookmark(kubewright_core::watch::Bookmark {
            metadata: kubewright_core::watch::BookmarkMeta {
                resource_version: rv.into(),
                annotations,
            },
        }))
    }

    pub(crate) fn api_error(code: u16, reason: &str) -> ClientError {
        ClientError::Api(Box::new(Status::failure(code, reason, "scripted")))
    }
}

#[cfg(test)]
mod tests {
    use super::fake::*;
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn no_jitter() -> BackoffConfig {
        BackoffConfig {
            jitter: 0.0,
            ..Default::default()
        }
    }

    fn reflector(lw: &Arc<FakeLw>, config: ReflectorConfig) -> Reflector<ConfigMap> {
        Reflector::new(Shared(lw.clone()), config.backoff(no_jitter()))
    }

    /// Takes `n` items from the stream, rendering deltas and errors as strings.
    async fn take(
        s: &mut BoxStream<'static, Result<Delta<ConfigMap>, Error>>,
        n: usize,
    ) -> Vec<String> {
        let mut out = Vec::new();
        for _ in 0..n {
            let item = tokio::time::timeout(Duration::from_secs(600), s.next())
                .await
                .expect("timed out waiting for a delta")
                .expect("stream ended");
            out.push(match item {
                Ok(d) => format!("{d:?}"),
                Err(e) => format!("error: {e}"),
            });
        }
        out
    }

    #[tokio::test(start_paused = true)]
    async fn lists_then_watches_and_resumes_from_the_last_version() {
        let lw = FakeLw::new();
        lw.list(Ok(list(vec![cm("a", "1"), cm("b", "2")], "5", None)))
            .watch(FakeWatch::Events(vec![
                Ok(WatchEvent::Modified(cm("a", "6"))),
                Ok(WatchEvent::Deleted(cm("b", "7"))),
                Ok(WatchEvent::Added(cm("c", "8"))),
                bookmark("9", false),
            ]))
            .watch(FakeWatch::EventsThenPending(vec![Ok(
                WatchEvent::Modified(cm("c", "10")),
            )]));
        let r = reflector(&lw, ReflectorConfig::default().paged_list().labels("app=x"));
        let store = r.store();
        let mut s = r.into_stream();
        assert_eq!(
            take(&mut s, 7).await,
            vec![
                "Added(ns/a@1)",
                "Added(ns/b@2)",
                "Replaced(@5)",
                "Updated(ns/a@1 -> ns/a@6)",
                "Deleted(ns/b@7, final_state_unknown: false)",
                "Added(ns/c@8)",
                "Updated(ns/c@8 -> ns/c@10)",
            ]
        );
        let watches = lw.watch_calls();
        let rvs: Vec<&str> = watches.iter().map(|(_, _, rv)| rv.as_str()).collect();
        assert_eq!(rvs, vec!["5", "9"]);
        // A clean close with events resumes at once, without backoff.
        assert_eq!(watches[0].0, watches[1].0);
        let wp = &watches[0].1;
        assert!(wp.bookmarks && !wp.send_initial_events);
        assert_eq!(wp.label_selector.as_deref(), Some("app=x"));
        assert_eq!(wp.timeout, Some(290));
        let lists = lw.list_calls();
        assert_eq!(lists.len(), 1);
        assert_eq!(lists[0].1.limit, Some(500));
        // The first list may be served from the watch cache, as client-go asks for it.
        assert_eq!(lists[0].1.resource_version.as_deref(), Some("0"));
        assert_eq!(store.len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn expired_watch_relists_and_reports_vanished_objects() {
        let lw = FakeLw::new();
        lw.list(Ok(list(
            vec![cm("a", "1"), cm("b", "1"), cm("c", "1")],
            "3",
            None,
        )))
        // 410 as an ERROR event ...
        .watch(FakeWatch::Events(vec![Ok(WatchEvent::Error(
            Status::failure(410, "Expired", "too old resource version: 3 (7)"),
        ))]))
        .list(Ok(list(vec![cm("a", "4"), cm("d", "5")], "6", None)))
        // ... and as an HTTP status.
        .watch(FakeWatch::Fail(api_error(410, "Gone")))
        .list(Ok(list(vec![cm("a", "4"), cm("d", "5")], "8", None)))
        .watch(FakeWatch::EventsThenPending(vec![bookmark("9", false)]));
        let r = reflector(&lw, ReflectorConfig::default().paged_list());
        let stats = r.stats();
        let mut s = r.into_stream();
        let got = take(&mut s, 10).await;
        assert_eq!(
            &got[..4],
            &[
                "Added(ns/a@1)",
                "Added(ns/b@1)",
                "Added(ns/c@1)",
                "Replaced(@3)"
            ]
        );
        let mut relist: Vec<String> = got[4..8].to_vec();
        relist.sort();
        assert_eq!(
            relist,
            vec![
                "Added(ns/d@5)",
                "Deleted(ns/b@1, final_state_unknown: true)",
                "Deleted(ns/c@1, final_state_unknown: true)",
                "Updated(ns/a@1 -> ns/a@4)",
            ]
        );
        assert_eq!(got[8], "Replaced(@6)");
        // The second relist changed nothing.
        assert_eq!(got[9], "Replaced(@8)");
        let rvs: Vec<String> = lw.watch_calls().into_iter().map(|w| w.2).collect();
        assert_eq!(rvs, vec!["3", "6", "8"]);
        let st = stats.borrow().clone();
        assert_eq!(st.expired, 2);
        assert_eq!(st.lists, 3);
        assert_eq!(st.errors, 0);
        assert_eq!(st.last_sync_resource_version.as_deref(), Some("8"));
    }

    #[tokio::test(start_paused = true)]
    async fn list_failures_back_off_exponentially() {
        let lw = FakeLw::new();
        for _ in 0..7 {
            lw.list(Err(api_error(500, "InternalError")));
        }
        lw.list(Ok(list(vec![cm("a", "1")], "2", None)));
        let mut s = reflector(&lw, ReflectorConfig::default().paged_list()).into_stream();
        let got = take(&mut s, 9).await;
        assert!(
            got[..7].iter().all(|g| g.starts_with("error: list failed")),
            "{got:?}"
        );
        assert_eq!(got[7], "Added(ns/a@1)");
        let times: Vec<Instant> = lw.list_calls().into_iter().map(|c| c.0).collect();
        let gaps: Vec<u128> = times
            .windows(2)
            .map(|w| (w[1] - w[0]).as_millis())
            .collect();
        assert_eq!(gaps, vec![800, 1600, 3200, 6400, 12800, 25600, 30000]);
    }

    #[tokio::test(start_paused = true)]
    async fn broken_watch_resumes_from_last_version_after_backoff() {
        let lw = FakeLw::new();
        lw.list(Ok(list(vec![cm("a", "1")], "5", None)))
            .watch(FakeWatch::Events(vec![
                Ok(WatchEvent::Modified(cm("a", "6"))),
                Err(ClientError::Stream("connection reset".into())),
            ]))
            // Closes at once with nothing: counted as a failure.
            .watch(FakeWatch::Events(vec![]))
            .watch(FakeWatch::EventsThenPending(vec![Ok(
                WatchEvent::Modified(cm("a", "7")),
            )]));
        let r = reflector(&lw, ReflectorConfig::default().paged_list());
        let stats = r.stats();
        let mut s = r.into_stream();
        let got = take(&mut s, 6).await;
        assert_eq!(got[2], "Updated(ns/a@1 -> ns/a@6)");
        assert!(got[3].starts_with("error: watch failed"), "{got:?}");
        assert!(got[4].contains("closed immediately"), "{got:?}");
        assert_eq!(got[5], "Updated(ns/a@6 -> ns/a@7)");
        let w = lw.watch_calls();
        let rvs: Vec<&str> = w.iter().map(|c| c.2.as_str()).collect();
        assert_eq!(rvs, vec!["5", "6", "6"]);
        assert_eq!((w[1].0 - w[0].0).as_millis(), 800);
        assert_eq!((w[2].0 - w[1].0).as_millis(), 1600);
        assert_eq!(lw.list_calls().len(), 1, "a broken watch must not relist");
        assert_eq!(stats.borrow().errors, 2);
    }

    #[tokio::test(start_paused = true)]
    async fn idle_watch_is_restarted() {
        let lw = FakeLw::new();
        lw.list(Ok(list(vec![cm("a", "1")], "5", None)))
            .watch(FakeWatch::EventsThenPending(vec![bookmark("7", false)]))
            .watch(FakeWatch::EventsThenPending(vec![Ok(
                WatchEvent::Modified(cm("a", "8")),
            )]));
        let config = ReflectorConfig::default()
            .paged_list()
            .watch_timeout(Duration::from_secs(10))
            .idle_timeout(Duration::from_secs(60));
        assert_eq!(config.effective_idle_timeout(), Duration::from_secs(60));
        let mut s = reflector(&lw, config).into_stream();
        let got = take(&mut s, 4).await;
        assert!(got[2].contains("delivered nothing for 60s"), "{got:?}");
        assert_eq!(got[3], "Updated(ns/a@1 -> ns/a@8)");
        let w = lw.watch_calls();
        assert_eq!(w[1].2, "7");
        assert_eq!((w[1].0 - w[0].0).as_millis(), 60_800);
        // The idle timeout never undercuts the server-side timeout (plus a margin).
        let c = ReflectorConfig::default()
            .paged_list()
            .idle_timeout(Duration::from_secs(1));
        assert_eq!(c.effective_idle_timeout(), Duration::from_secs(320));
        let c = c.watch_timeout(Duration::from_secs(1));
        assert_eq!(c.effective_idle_timeout(), Duration::from_millis(2100));
        let c = c.watch_timeout(Duration::from_secs(3600));
        assert_eq!(c.effective_idle_timeout(), Duration::from_secs(3630));
    }

    #[tokio::test(start_paused = true)]
    async fn the_idle_deadline_moves_with_each_event() {
        let start = Instant::now();
        let mut deadline = IdleDeadline::new(Duration::from_secs(60));
        tokio::time::sleep(Duration::from_secs(40)).await;
        deadline.touch();
        tokio::time::sleep(Duration::from_secs(30)).await;
        deadline.touch();
        // The timer first fires at 60 s, finds the last event 20 s old, and waits on.
        deadline.expired().await;
        assert_eq!(start.elapsed(), Duration::from_secs(130));
        // Once expired it stays expired until touched.
        deadline.expired().await;
        assert_eq!(start.elapsed(), Duration::from_secs(130));
    }

    #[tokio::test(start_paused = true)]
    async fn unanswered_watch_request_is_restarted() {
        let lw = FakeLw::new();
        // The first watch request is never answered: the script has no watch yet when
        // it is made (one is added afterwards, for the restart).
        lw.list(Ok(list(vec![cm("a", "1")], "5", None)));
        let config = ReflectorConfig::default()
            .paged_list()
            .watch_timeout(Duration::from_secs(10))
            .idle_timeout(Duration::from_secs(60));
        let mut s = reflector(&lw, config).into_stream();
        assert_eq!(take(&mut s, 2).await, vec!["Added(ns/a@1)", "Replaced(@5)"]);
        lw.watch(FakeWatch::EventsThenPending(vec![Ok(
            WatchEvent::Modified(cm("a", "6")),
        )]));
        let got = take(&mut s, 2).await;
        assert!(got[0].contains("delivered nothing for 60s"), "{got:?}");
        assert_eq!(got[1], "Updated(ns/a@1 -> ns/a@6)");
        let w = lw.watch_calls();
        assert_eq!(w.len(), 2);
        assert_eq!((w[0].2.as_str(), w[1].2.as_str()), ("5", "5"));
        assert_eq!((w[1].0 - w[0].0).as_millis(), 60_800);
        assert_eq!(lw.list_calls().len(), 1, "no relist");
    }

    #[tokio::test(start_paused = true)]
    async fn streaming_list_ends_at_the_initial_events_bookmark() {
        let lw = FakeLw::new();
        lw.watch(FakeWatch::EventsThenPending(vec![
            Ok(WatchEvent::Added(cm("a", "1"))),
            Ok(WatchEvent::Added(cm("b", "2"))),
            bookmark("3", false),
            bookmark("3", true),
            Ok(WatchEvent::Modified(cm("a", "4"))),
        ]));
        let r = reflector(&lw, ReflectorConfig::default().streaming_list());
        let store = r.store();
        let stats = r.stats();
        let mut s = r.into_stream();
        assert_eq!(
            take(&mut s, 4).await,
            vec![
                "Added(ns/a@1)",
                "Added(ns/b@2)",
                "Replaced(@3)",
                "Updated(ns/a@1 -> ns/a@4)"
            ]
        );
        assert!(lw.list_calls().is_empty());
        let w = lw.watch_calls();
        assert_eq!(w.len(), 1);
        assert!(w[0].1.send_initial_events && w[0].1.bookmarks);
        assert_eq!(w[0].2, "");
        assert_eq!(store.len(), 2);
        assert_eq!(stats.borrow().streaming_lists, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn rejected_streaming_list_falls_back_to_paged_list() {
        let lw = FakeLw::new();
        lw.watch(FakeWatch::Fail(api_error(422, "Invalid")))
            .list(Ok(list(vec![cm("a", "1")], "5", None)))
            .watch(FakeWatch::Events(vec![
                Ok(WatchEvent::Modified(cm("a", "6"))),
                bookmark("7", false),
            ]))
            .watch(FakeWatch::Fail(api_error(410, "Expired")))
            .list(Ok(list(vec![cm("a", "8")], "9", None)))
            .watch(FakeWatch::EventsThenPending(vec![]));
        let r = reflector(&lw, ReflectorConfig::default().streaming_list());
        let stats = r.stats();
        let mut s = r.into_stream();
        assert_eq!(
            take(&mut s, 5).await,
            vec![
                "Added(ns/a@1)",
                "Replaced(@5)",
                "Updated(ns/a@1 -> ns/a@6)",
                "Updated(ns/a@6 -> ns/a@8)",
                "Replaced(@9)"
            ]
        );
        let w = lw.watch_calls();
        assert!(w[0].1.send_initial_events);
        // After the fallback, even the relist after 410 is a paged list.
        assert!(w[1..].iter().all(|c| !c.1.send_initial_events));
        assert_eq!(lw.list_calls().len(), 2);
        assert_eq!(stats.borrow().streaming_fallbacks, 1);
        assert_eq!(stats.borrow().errors, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn paged_list_follows_continue_tokens_and_survives_expired_tokens() {
        let lw = FakeLw::new();
        lw.list(Ok(list(vec![cm("a", "1"), cm("b", "1")], "9", Some("t1"))))
            .list(Ok(list(vec![cm("c", "1"), cm("d", "1")], "9", Some("t2"))))
            .list(Ok(list(vec![cm("e", "1")], "9", None)))
            .watch(FakeWatch::Events(vec![Ok(WatchEvent::Error(
                Status::failure(410, "Expired", "old"),
            ))]))
            // The relist's continue token expires: one unpaged list instead.
            .list(Ok(list(vec![cm("a", "1"), cm("b", "1")], "12", Some("t3"))))
            .list(Err(api_error(410, "Expired")))
            .list(Ok(list(vec![cm("a", "1"), cm("z", "11")], "13", None)))
            .watch(FakeWatch::EventsThenPending(vec![]));
        let mut s =
            reflector(&lw, ReflectorConfig::default().paged_list().page_size(2)).into_stream();
        let got = take(&mut s, 6).await;
        assert_eq!(got[5], "Replaced(@9)");
        let mut relist = take(&mut s, 5).await;
        relist.sort();
        assert_eq!(
            relist,
            vec![
                "Added(ns/z@11)",
                "Deleted(ns/b@1, final_state_unknown: true)",
                "Deleted(ns/c@1, final_state_unknown: true)",
                "Deleted(ns/d@1, final_state_unknown: true)",
                "Deleted(ns/e@1, final_state_unknown: true)",
            ]
        );
        assert_eq!(take(&mut s, 1).await, vec!["Replaced(@13)"]);
        let lists: Vec<(Option<u32>, Option<String>)> = lw
            .list_calls()
            .into_iter()
            .map(|(_, lp)| (lp.limit, lp.continue_token))
            .collect();
        assert_eq!(
            lists,
            vec![
                (Some(2), None),
                (Some(2), Some("t1".into())),
                (Some(2), Some("t2".into())),
                (Some(2), None),
                (Some(2), Some("t3".into())),
                (None, None),
            ]
        );
        // client-go's list semantics: the first list may come from the watch cache
        // (resourceVersion=0), continued pages carry no version, and the relist after a
        // 410 is consistent (no version).
        let versions: Vec<Option<String>> = lw
            .list_calls()
            .into_iter()
            .map(|(_, lp)| lp.resource_version)
            .collect();
        assert_eq!(
            versions,
            vec![Some("0".into()), None, None, None, None, None]
        );
    }

    #[test]
    fn streaming_lists_are_the_default() {
        assert_eq!(
            ReflectorConfig::default().initial_list,
            InitialList::Streaming
        );
        assert_eq!(
            ReflectorConfig::default().paged_list().initial_list,
            InitialList::Paged
        );
    }

    #[tokio::test(start_paused = true)]
    async fn transform_runs_before_storing() {
        let lw = FakeLw::new();
        let mut obj = cm("a", "1");
        obj.metadata.managed_fields = Some(vec![Default::default()]);
        let mut later = cm("b", "2");
        later.metadata.managed_fields = Some(vec![Default::default()]);
        lw.list(Ok(list(vec![obj], "1", None)))
            .watch(FakeWatch::EventsThenPending(vec![Ok(WatchEvent::Added(
                later,
            ))]));
        let r = reflector(&lw, ReflectorConfig::default().paged_list())
            .with_transform(strip_managed_fields);
        let store = r.store();
        let mut s = r.into_stream();
        take(&mut s, 3).await;
        assert_eq!(store.len(), 2);
        assert!(
            store
                .list()
                .iter()
                .all(|o| o.metadata.managed_fields.is_none())
        );
    }

    #[tokio::test(start_paused = true)]
    async fn backoff_sequence_jitter_and_reset() {
        let mut b = Backoff::new(BackoffConfig {
            jitter: 0.0,
            ..Default::default()
        });
        let seq: Vec<u128> = (0..8).map(|_| b.next_delay().as_millis()).collect();
        assert_eq!(seq, vec![800, 1600, 3200, 6400, 12800, 25600, 30000, 30000]);
        // Failures less than 2 minutes apart keep growing ...
        tokio::time::advance(Duration::from_secs(119)).await;
        assert_eq!(b.next_delay().as_millis(), 30000);
        // ... 2 minutes of health reset it.
        tokio::time::advance(Duration::from_secs(120)).await;
        assert_eq!(b.next_delay().as_millis(), 800);
        b.reset();
        assert_eq!(b.next_delay().as_millis(), 800);

        let mut j = Backoff::new(BackoffConfig::default());
        let mut base = 800u128;
        for _ in 0..10 {
            let d = j.next_delay().as_millis();
            assert!(
                d >= base && d <= 2 * base,
                "{d} outside [{base}, {}]",
                2 * base
            );
            base = (base * 2).min(30_000);
        }
    }
}
