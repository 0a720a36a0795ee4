//! Informers: a reflector, its store, and event handlers (client-go's
//! `SharedIndexInformer`).
//!
//! An [`Informer`] runs one [`Reflector`](crate::reflector::Reflector) loop in a task,
//! keeps a [`Store`] (with indexes) equal to the server's state, and fans every change out
//! to any number of [`EventHandler`]s:
//!
//! * Each handler has its own unbounded queue and task, so a slow handler never blocks the
//!   reflector or the other handlers. Events reach one handler in order, and for one
//!   object in the order the server produced them.
//! * The store is updated before the handlers hear about a change, so a handler reading
//!   the store sees at least the state it was told about.
//! * Handlers can be added before or after [`Informer::start`]; a late handler first gets
//!   a synthetic `on_add` for every object currently in the store, then the live events,
//!   with nothing missed or repeated in between. [`HandlerRegistration`] removes a handler
//!   and tells whether it has processed its initial objects.
//! * Optional periodic resync re-delivers every object as `on_update(obj, obj)`.
//! * Fan-out clones `Arc`s only: the object a handler gets is the one in the store.
//! * [`Informer::add_inline_handler`] registers closures that run on the informer's own
//!   task instead, right after the store changed: no queue and no task switch per event,
//!   for handlers that only enqueue a key or count (controllers use it). Such a handler
//!   must not block, since the informer waits for it.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! # let server = kubewright_apiserver::TestServer::start().await.unwrap();
//! # let env = kubewright_testing::TestEnv::for_server(server);
//! # let client = env.client();
//! use std::sync::Arc;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kubewright_client::Api;
//! use kubewright_core::{ObjectMeta, PostParams};
//! use kubewright_runtime::informer::{HandlerFuncs, Informer};
//! use kubewright_runtime::reflector::{ReflectorConfig, strip_managed_fields};
//!
//! let api: Api<ConfigMap> = Api::namespaced(client, "default");
//! let informer = Arc::new(
//!     Informer::new(api.clone(), ReflectorConfig::default().labels("app=demo"))
//!         .with_transform(strip_managed_fields),
//! );
//! let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
//! informer.add_handler(HandlerFuncs::new().on_add(move |cm: Arc<ConfigMap>| {
//!     let _ = tx.send(cm.metadata.name.clone().unwrap_or_default());
//! }));
//! informer.start();
//! assert!(informer.wait_for_sync().await);
//!
//! let cm = ConfigMap {
//!     metadata: ObjectMeta {
//!         name: Some("settings".into()),
//!         labels: Some([("app".to_string(), "demo".to_string())].into()),
//!         ..Default::default()
//!     },
//!     ..Default::default()
//! };
//! api.create(&PostParams::default(), &cm).await.unwrap();
//! assert_eq!(rx.recv().await.as_deref(), Some("settings"));
//! assert!(informer.store().get_by_key("default/settings").is_some());
//! informer.shutdown().await;
//! # }
//! ```

use crate::reflector::{
    Change, ListWatch, ReflectorConfig, ReflectorStats, Runner, Sink, Transform,
};
use crate::store::{Delta, Lister, Store, StoreError};
use kubewright_core::Resource;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Receives an informer's events. Every method has a no-op default; implement the ones
/// you need. Each handler runs in its own task and sees its events one at a time, in
/// order; `async` methods may await (e.g. a bounded queue) without slowing anything but
/// this handler.
///
/// For plain closures use [`HandlerFuncs`].
pub trait EventHandler<K>: Send + 'static {
    /// An object appeared (also: the synthetic adds of the initial list, or of the current
    /// contents for a handler added late).
    fn on_add(&mut self, obj: Arc<K>) -> impl Future<Output = ()> + Send {
        drop(obj);
        std::future::ready(())
    }

    /// An object changed. On a periodic resync, `old` and `new` are the same `Arc`.
    fn on_update(&mut self, old: Arc<K>, new: Arc<K>) -> impl Future<Output = ()> + Send {
        drop((old, new));
        std::future::ready(())
    }

    /// An object was deleted. `final_state_unknown` is true when the deletion was found by
    /// a relist, so `obj` is the last state the informer knew (client-go's
    /// `DeletedFinalStateUnknown`).
    fn on_delete(
        &mut self,
        obj: Arc<K>,
        final_state_unknown: bool,
    ) -> impl Future<Output = ()> + Send {
        drop((obj, final_state_unknown));
        std::future::ready(())
    }
}

type AddFn<K> = Box<dyn FnMut(Arc<K>) + Send>;
type UpdateFn<K> = Box<dyn FnMut(Arc<K>, Arc<K>) + Send>;
type DeleteFn<K> = Box<dyn FnMut(Arc<K>, bool) + Send>;

/// An [`EventHandler`] made of closures (client-go's `ResourceEventHandlerFuncs`).
///
/// ```
/// # use std::sync::Arc;
/// # use k8s_openapi::api::core::v1::Pod;
/// use kubewright_runtime::informer::HandlerFuncs;
/// let handler = HandlerFuncs::<Pod>::new()
///     .on_add(|pod| println!("added {:?}", pod.metadata.name))
///     .on_delete(|pod, _unknown| println!("deleted {:?}", pod.metadata.name));
/// # let _ = handler;
/// ```
pub struct HandlerFuncs<K> {
    add: Option<AddFn<K>>,
    update: Option<UpdateFn<K>>,
    delete: Option<DeleteFn<K>>,
}

impl<K> Default for HandlerFuncs<K> {
    fn default() -> Self {
        Self {
            add: None,
            update: None,
            delete: None,
        }
    }
}

impl<K> fmt::Debug for HandlerFuncs<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandlerFuncs")
            .field("on_add", &self.add.is_some())
            .field("on_update", &self.update.is_some())
            .field("on_delete", &self.delete.is_some())
            .finish()
    }
}

impl<K> HandlerFuncs<K> {
    /// A handler that ignores everything.
    pub fn new() -> Self {
        Self::default()
    }
    /// Calls `f` on adds.
    #[must_use]
    pub fn on_add(mut self, f: impl FnMut(Arc<K>) + Send + 'static) -> Self {
        self.add = Some(Box::new(f));
        self
    }
    /// Calls `f(old, new)` on updates.
    #[must_use]
    pub fn on_update(mut self, f: impl FnMut(Arc<K>, Arc<K>) + Send + 'static) -> Self {
        self.update = Some(Box::new(f));
        self
    }
    /// Calls `f(obj, final_state_unknown)` on deletes.
    #[must_use]
    pub fn on_delete(mut self, f: impl FnMut(Arc<K>, bool) + Send + 'static) -> Self {
        self.delete = Some(Box::new(f));
        self
    }
}

impl<K: Send + Sync + 'static> EventHandler<K> for HandlerFuncs<K> {
    fn on_add(&mut self, obj: Arc<K>) -> impl Future<Output = ()> + Send {
        if let Some(f) = &mut self.add {
            f(obj);
        }
        std::future::ready(())
    }
    fn on_update(&mut self, old: Arc<K>, new: Arc<K>) -> impl Future<Output = ()> + Send {
        if let Some(f) = &mut self.update {
            f(old, new);
        }
        std::future::ready(())
    }
    fn on_delete(
        &mut self,
        obj: Arc<K>,
        final_state_unknown: bool,
    ) -> impl Future<Output = ()> + Send {
        if let Some(f) = &mut self.delete {
            f(obj, final_state_unknown);
        }
        std::future::ready(())
    }
}

/// What a handler's queue carries.
enum Notification<K> {
    Add(Arc<K>),
    Update(Arc<K>, Arc<K>),
    Delete(Arc<K>, bool),
    /// The handler has been given every object of the initial state.
    Synced,
}

impl<K> Notification<K> {
    fn from_delta(delta: &Delta<K>) -> Option<Self> {
        Some(match delta {
            Delta::Added(o) => Self::Add(o.clone()),
            Delta::Updated { old, new } => Self::Update(old.clone(), new.clone()),
            Delta::Deleted {
                obj,
                final_state_unknown,
            } => Self::Delete(obj.clone(), *final_state_unknown),
            Delta::Sync(o) => Self::Update(o.clone(), o.clone()),
            Delta::Replaced { .. } => return None,
        })
    }
}

impl<K> HandlerFuncs<K> {
    /// Calls the closure for `delta`, mapped as for a handler task (nothing for a
    /// `Replaced` marker).
    fn call(&mut self, delta: &Delta<K>) {
        match Notification::from_delta(delta) {
            Some(Notification::Add(o)) => {
                if let Some(f) = &mut self.add {
                    f(o);
                }
            }
            Some(Notification::Update(old, new)) => {
                if let Some(f) = &mut self.update {
                    f(old, new);
                }
            }
            Some(Notification::Delete(o, unknown)) => {
                if let Some(f) = &mut self.delete {
                    f(o, unknown);
                }
            }
            Some(Notification::Synced) | None => {}
        }
    }
}

/// A handler registered with [`Informer::add_inline_handler`].
struct InlineSlot<K> {
    id: u64,
    /// Held by whoever delivers to the handler: the informer's task, or the registering
    /// caller while it delivers the initial objects.
    handler: Mutex<HandlerFuncs<K>>,
    synced: Arc<AtomicBool>,
    /// Cancelled when the handler is removed or the informer stops.
    cancel: CancellationToken,
}

impl<K> InlineSlot<K> {
    fn lock(&self) -> MutexGuard<'_, HandlerFuncs<K>> {
        // A panic in a closure was caught and logged; the closures are still usable.
        self.handler.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Delivers `deltas` in order, unless the handler was removed. A panicking closure is
    /// logged and the informer goes on.
    fn deliver(&self, handler: &mut HandlerFuncs<K>, deltas: &[Delta<K>]) {
        for delta in deltas {
            if self.cancel.is_cancelled() {
                return;
            }
            let call = std::panic::AssertUnwindSafe(|| handler.call(delta));
            if std::panic::catch_unwind(call).is_err() {
                tracing::error!(handler = self.id, "an inline informer handler panicked");
            }
        }
    }
}

/// The inline handlers, as the informer's task reads them for each change.
type InlineList<K> = Arc<[Arc<InlineSlot<K>>]>;

struct Slot<K> {
    id: u64,
    tx: mpsc::UnboundedSender<Notification<K>>,
    /// Notifications queued for (or being processed by) the handler.
    backlog: Arc<AtomicUsize>,
    /// Whether the Synced marker was queued.
    marked: bool,
}

struct Dispatcher<K> {
    handlers: Vec<Slot<K>>,
    /// Replaced (not mutated) when an inline handler comes or goes, so that the informer's
    /// task takes it with one reference count and calls the handlers without this lock.
    inline: InlineList<K>,
    next_id: u64,
    synced: bool,
    closed: bool,
}

impl<K> Dispatcher<K> {
    fn dispatch(&mut self, delta: &Delta<K>) {
        if matches!(delta, Delta::Replaced { .. }) {
            return;
        }
        self.handlers
            .retain(|h| match Notification::from_delta(delta) {
                Some(n) => {
                    h.backlog.fetch_add(1, Ordering::Relaxed);
                    h.tx.send(n).is_ok()
                }
                None => true,
            });
    }

    /// The inline handlers to call for a change made under this lock (`None`: there are
    /// none).
    fn inline(&self) -> Option<InlineList<K>> {
        (!self.inline.is_empty()).then(|| self.inline.clone())
    }

    fn mark_synced(&mut self) {
        self.synced = true;
        for h in &mut self.handlers {
            if !h.marked {
                h.marked = true;
                h.backlog.fetch_add(1, Ordering::Relaxed);
                let _ = h.tx.send(Notification::Synced);
            }
        }
    }
}

struct Shared<K> {
    store: Store<K>,
    dispatcher: Mutex<Dispatcher<K>>,
    synced: watch::Sender<bool>,
    stats: Arc<watch::Sender<ReflectorStats>>,
}

impl<K> Shared<K> {
    fn dispatcher(&self) -> MutexGuard<'_, Dispatcher<K>> {
        // Dispatching only pushes to channels; a panic cannot leave it inconsistent.
        self.dispatcher.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The reflector stopped: drop every handler queue (their tasks finish).
    fn close(&self) {
        let mut d = self.dispatcher();
        d.closed = true;
        d.handlers.clear();
        for h in d.inline.iter() {
            h.cancel.cancel();
        }
        d.inline = Arc::new([]);
    }
}

/// The informer's sink: store writes and handler dispatch happen under the dispatcher
/// lock, so that registering a handler (snapshot + subscribe) is atomic with respect to
/// changes.
struct InformerSink<K> {
    shared: Arc<Shared<K>>,
    /// Objects that left the store (replaced or deleted), kept until the handlers have
    /// let go of them.
    retired: Retired<K>,
}

impl<K> InformerSink<K> {
    fn new(shared: Arc<Shared<K>>) -> Self {
        Self {
            shared,
            retired: Retired::default(),
        }
    }
}

/// Objects that left the store, freed on the informer's own task once no handler holds
/// them.
///
/// Without this the last reference to a replaced object is usually a handler's, and the
/// object (hundreds of allocations for a pod) is freed on the handler's thread while the
/// next one is decoded into fresh memory on the informer's: with glibc's per-thread
/// caches both sides then take the allocator's slow paths (`kw bench` replay, 5,000 pods,
/// 50,000 events: CPU per watch event 172 µs before, 141 µs after). Freed here, the memory goes back to the
/// cache of the thread that decodes the next object. A handler that falls more than
/// [`RETIRED_MAX`] objects behind frees what it holds itself. Watch events and relists
/// (`Change::Replace`) retire objects alike.
struct Retired<K> {
    queue: std::collections::VecDeque<Arc<K>>,
}

impl<K> Default for Retired<K> {
    fn default() -> Self {
        Self {
            queue: std::collections::VecDeque::new(),
        }
    }
}

/// How many retired objects wait for slow handlers.
const RETIRED_MAX: usize = 64;

impl<K> Retired<K> {
    /// Adds the object a change took out of the store, and frees, oldest first, those
    /// no handler holds any more.
    fn push(&mut self, gone: Option<Arc<K>>) {
        if let Some(obj) = gone {
            self.queue.push_back(obj);
        }
        while let Some(front) = self.queue.front() {
            if Arc::strong_count(front) > 1 && self.queue.len() <= RETIRED_MAX {
                break;
            }
            self.queue.pop_front();
        }
    }
}

impl<K: Resource + Send + Sync + 'static> Sink<K> for InformerSink<K> {
    async fn apply(&mut self, store: &Store<K>, change: Change<K>) -> bool {
        let mut d = self.shared.dispatcher();
        match change {
            Change::Upsert(obj) => {
                let delta = store.upsert(obj);
                d.dispatch(&delta);
                let inline = d.inline();
                drop(d);
                call_inline(inline, std::slice::from_ref(&delta), false);
                self.retired.push(delta.into_retired());
            }
            Change::Delete(obj) => {
                if let Some(delta) = store.delete(obj) {
                    d.dispatch(&delta);
                    let inline = d.inline();
                    drop(d);
                    call_inline(inline, std::slice::from_ref(&delta), false);
                    self.retired.push(delta.into_retired());
                }
            }
            Change::Replace { objects, .. } => {
                // What a relist replaced or removed is retired like a watch event's, once
                // the dispatcher lock is released and the inline handlers had it.
                let deltas = store.replace(objects);
                for delta in &deltas {
                    d.dispatch(delta);
                }
                let first_sync = !d.synced;
                if first_sync {
                    d.mark_synced();
                }
                let inline = d.inline();
                drop(d);
                call_inline(inline, &deltas, first_sync);
                if first_sync {
                    self.shared.synced.send_replace(true);
                }
                for delta in deltas {
                    self.retired.push(delta.into_retired());
                }
            }
            Change::Resync => {
                let deltas: Vec<_> = store.list().into_iter().map(Delta::Sync).collect();
                for delta in &deltas {
                    d.dispatch(delta);
                }
                let inline = d.inline();
                drop(d);
                call_inline(inline, &deltas, false);
            }
        }
        true
    }

    async fn error(&mut self, _error: crate::reflector::Error) -> bool {
        // The runner has logged it; an informer keeps going.
        true
    }
}

/// Calls the inline handlers for a change the store has already taken; with `synced`,
/// the change was the initial list, and each handler has now had all of it.
fn call_inline<K>(inline: Option<InlineList<K>>, deltas: &[Delta<K>], synced: bool) {
    let Some(inline) = inline else { return };
    for slot in inline.iter() {
        let mut handler = slot.lock();
        slot.deliver(&mut handler, deltas);
        if synced {
            slot.synced.store(true, Ordering::Release);
        }
    }
}

async fn run_handler<K, H>(
    mut handler: H,
    mut rx: mpsc::UnboundedReceiver<Notification<K>>,
    synced: Arc<AtomicBool>,
    backlog: Arc<AtomicUsize>,
    cancel: CancellationToken,
) where
    K: Send + Sync + 'static,
    H: EventHandler<K>,
{
    loop {
        let next = tokio::select! {
            biased;
            () = cancel.cancelled() => return,
            n = rx.recv() => n,
        };
        let Some(n) = next else { return };
        let call = async {
            match n {
                Notification::Add(o) => handler.on_add(o).await,
                Notification::Update(old, new) => handler.on_update(old, new).await,
                Notification::Delete(o, unknown) => handler.on_delete(o, unknown).await,
                Notification::Synced => synced.store(true, Ordering::Release),
            }
        };
        tokio::select! {
            biased;
            () = cancel.cancelled() => return,
            () = call => {}
        }
        backlog.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A handle to a handler added with [`Informer::add_handler`]: pass it to
/// [`Informer::remove_handler`], or ask whether the handler has processed the initial
/// objects.
#[derive(Clone, Debug)]
pub struct HandlerRegistration {
    id: u64,
    synced: Arc<AtomicBool>,
    backlog: Arc<AtomicUsize>,
    cancel: CancellationToken,
}

impl HandlerRegistration {
    /// The registration id (unique within its informer).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Whether the handler has processed the adds of the initial state (the initial list,
    /// or the store's contents when it was added after the informer synced).
    pub fn has_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// Notifications queued for this handler, including the one it is processing: how
    /// far it lags behind the informer. Each holds its objects (`Arc`s), so a large
    /// backlog also means memory held.
    pub fn backlog(&self) -> usize {
        self.backlog.load(Ordering::Relaxed)
    }
}

/// A reflector, a store and event handlers; see the [module docs](self).
///
/// Dropping the informer (its last `Arc`) stops it.
pub struct Informer<K> {
    shared: Arc<Shared<K>>,
    lw: Arc<dyn ListWatch<K>>,
    config: ReflectorConfig,
    transform: Option<Transform<K>>,
    cancel: CancellationToken,
    task: Mutex<Option<JoinHandle<()>>>,
    started: AtomicBool,
    description: String,
    /// The runtime its tasks run on (a thread of its factory's), else the caller's.
    runtime: Option<tokio::runtime::Handle>,
}

impl<K> fmt::Debug for Informer<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Informer")
            .field("source", &self.description)
            .field("synced", &*self.shared.synced.borrow())
            .field("store", &self.shared.store)
            .finish()
    }
}

impl<K> Drop for Informer<K> {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

impl<K: Resource + Send + Sync + 'static> Informer<K> {
    /// An informer over `lw` (an [`Api<K>`](kubewright_client::Api), a
    /// [`MetadataOnly`](crate::reflector::MetadataOnly), or any [`ListWatch`]). It does
    /// nothing until [`Informer::start`].
    pub fn new(lw: impl ListWatch<K>, config: ReflectorConfig) -> Self {
        Self::build(Arc::new(lw), config, CancellationToken::new())
    }

    pub(crate) fn build(
        lw: Arc<dyn ListWatch<K>>,
        config: ReflectorConfig,
        cancel: CancellationToken,
    ) -> Self {
        let description = describe(&*lw, &config);
        Self {
            shared: Arc::new(Shared {
                store: Store::new(),
                dispatcher: Mutex::new(Dispatcher {
                    handlers: Vec::new(),
                    inline: Arc::new([]),
                    next_id: 1,
                    synced: false,
                    closed: false,
                }),
                synced: watch::Sender::new(false),
                stats: Arc::new(watch::Sender::new(ReflectorStats::default())),
            }),
            lw,
            config,
            transform: None,
            cancel,
            task: Mutex::new(None),
            started: AtomicBool::new(false),
            description,
            runtime: None,
        }
    }

    /// Applies `f` to every object before it is stored, e.g.
    /// [`strip_managed_fields`](crate::reflector::strip_managed_fields).
    #[must_use]
    pub fn with_transform(mut self, f: impl Fn(K) -> K + Send + Sync + 'static) -> Self {
        self.transform = Some(Arc::new(f));
        self
    }

    /// What this informer watches, for logs: path, selectors.
    pub fn describe(&self) -> &str {
        &self.description
    }

    /// The settings.
    pub fn config(&self) -> &ReflectorConfig {
        &self.config
    }

    /// The store (a cheap handle; reads are always allowed).
    pub fn store(&self) -> Store<K> {
        self.shared.store.clone()
    }

    /// A typed read API over the store.
    pub fn lister(&self) -> Lister<K> {
        self.shared.store.lister()
    }

    /// Adds an index to the store, built at once from the current contents.
    pub fn add_indexer<F>(&self, name: &str, f: F) -> Result<(), StoreError>
    where
        F: Fn(&K) -> Vec<String> + Send + Sync + 'static,
    {
        self.shared.store.add_indexer(name, f)
    }

    /// Runs the informer's tasks on `runtime` instead of the caller's (a thread of its
    /// factory's).
    pub(crate) fn with_runtime(mut self, runtime: tokio::runtime::Handle) -> Self {
        self.runtime = Some(runtime);
        self
    }

    fn spawn<F>(&self, task: F) -> JoinHandle<()>
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        match &self.runtime {
            Some(rt) => rt.spawn(task),
            None => tokio::spawn(task),
        }
    }

    /// Starts the reflector task (list, then watch). Idempotent; does nothing once the
    /// informer was stopped. Must be called from within a Tokio runtime.
    pub fn start(&self) {
        if self.cancel.is_cancelled() || self.started.swap(true, Ordering::AcqRel) {
            return;
        }
        let runner = Runner {
            lw: self.lw.clone(),
            store: self.shared.store.clone(),
            config: self.config.clone(),
            transform: self.transform.clone(),
            stats: self.shared.stats.clone(),
            cancel: self.cancel.clone(),
        };
        let shared = self.shared.clone();
        let handle = self.spawn(async move {
            runner.run(InformerSink::new(shared.clone())).await;
            shared.close();
        });
        *self.task.lock().unwrap_or_else(|e| e.into_inner()) = Some(handle);
    }

    /// Whether [`Informer::start`] was called.
    pub fn is_started(&self) -> bool {
        self.started.load(Ordering::Acquire)
    }

    /// Whether the informer was stopped.
    pub fn is_stopped(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Stops the reflector and the handlers (without waiting).
    pub fn stop(&self) {
        self.cancel.cancel();
    }

    /// Stops the reflector and the handlers, and waits until the reflector task ended.
    pub async fn shutdown(&self) {
        self.cancel.cancel();
        let handle = self.task.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(h) = handle {
            let _ = h.await;
        }
    }

    /// Whether the initial list has been stored (client-go's `HasSynced`).
    pub fn has_synced(&self) -> bool {
        *self.shared.synced.borrow()
    }

    /// Waits until the initial list has been stored. Returns false if the informer was
    /// stopped first.
    pub async fn wait_for_sync(&self) -> bool {
        let mut rx = self.shared.synced.subscribe();
        tokio::select! {
            biased;
            r = rx.wait_for(|s| *s) => r.is_ok(),
            () = self.cancel.cancelled() => self.has_synced(),
        }
    }

    /// Counters of the reflector (lists, watches, 410s, errors).
    pub fn stats(&self) -> ReflectorStats {
        self.shared.stats.borrow().clone()
    }

    /// A receiver that sees every change of the counters (to wait for a relist, say).
    pub fn subscribe_stats(&self) -> watch::Receiver<ReflectorStats> {
        self.shared.stats.subscribe()
    }

    /// The resourceVersion of the last completed list.
    pub fn last_sync_resource_version(&self) -> Option<String> {
        self.shared
            .stats
            .borrow()
            .last_sync_resource_version
            .clone()
    }

    /// Adds a handler. It first receives `on_add` for every object in the store (nothing,
    /// before the initial list), then every later change. Must be called from within a
    /// Tokio runtime (the handler gets its own task).
    pub fn add_handler<H: EventHandler<K>>(&self, handler: H) -> HandlerRegistration {
        let (tx, rx) = mpsc::unbounded_channel();
        let synced = Arc::new(AtomicBool::new(false));
        let backlog = Arc::new(AtomicUsize::new(0));
        let cancel = self.cancel.child_token();
        let id = {
            let mut d = self.shared.dispatcher();
            let id = d.next_id;
            d.next_id += 1;
            for obj in self.shared.store.list() {
                backlog.fetch_add(1, Ordering::Relaxed);
                let _ = tx.send(Notification::Add(obj));
            }
            if d.synced {
                backlog.fetch_add(1, Ordering::Relaxed);
                let _ = tx.send(Notification::Synced);
            }
            if !d.closed {
                let marked = d.synced;
                d.handlers.push(Slot {
                    id,
                    tx,
                    backlog: backlog.clone(),
                    marked,
                });
            }
            id
        };
        self.spawn(run_handler(
            handler,
            rx,
            synced.clone(),
            backlog.clone(),
            cancel.clone(),
        ));
        HandlerRegistration {
            id,
            synced,
            backlog,
            cancel,
        }
    }

    /// Adds a handler whose closures run on the informer's own task, right after the
    /// store took each change, instead of in a task of their own: no queue and no task
    /// switch per event. Otherwise like [`Informer::add_handler`]: the objects already in
    /// the store first (delivered here, on the caller's thread, before this returns, when
    /// the informer has synced), then every change, in order.
    ///
    /// The informer waits for the closures, so they must be quick and must not block:
    /// enqueue a key, count, send on an unbounded channel. A controller's handlers are
    /// of this kind. Anything slower belongs in [`Informer::add_handler`]. A closure that
    /// panics is logged and the informer goes on. [`HandlerRegistration::backlog`] is
    /// always 0.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// # let server = kubewright_apiserver::TestServer::start().await.unwrap();
    /// # let env = kubewright_testing::TestEnv::for_server(server);
    /// # let client = env.client();
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use k8s_openapi::api::core::v1::Namespace;
    /// use kubewright_client::Api;
    /// use kubewright_runtime::informer::{HandlerFuncs, Informer};
    /// use kubewright_runtime::reflector::ReflectorConfig;
    ///
    /// let informer = Informer::new(Api::<Namespace>::all(client), ReflectorConfig::default());
    /// let seen = Arc::new(AtomicUsize::new(0));
    /// let counter = seen.clone();
    /// let registration = informer.add_inline_handler(
    ///     HandlerFuncs::new().on_add(move |_ns: Arc<Namespace>| {
    ///         counter.fetch_add(1, Ordering::Relaxed);
    ///     }),
    /// );
    /// informer.start();
    /// assert!(informer.wait_for_sync().await);
    /// // The initial list reached the handler before the informer reported its sync.
    /// assert!(registration.has_synced());
    /// assert_eq!(seen.load(Ordering::Relaxed), informer.store().len());
    /// informer.shutdown().await;
    /// # }
    /// ```
    pub fn add_inline_handler(&self, handler: HandlerFuncs<K>) -> HandlerRegistration {
        let synced = Arc::new(AtomicBool::new(false));
        let cancel = self.cancel.child_token();
        let id = {
            let mut d = self.shared.dispatcher();
            d.next_id += 1;
            d.next_id - 1
        };
        let slot = Arc::new(InlineSlot {
            id,
            handler: Mutex::new(handler),
            synced: synced.clone(),
            cancel: cancel.clone(),
        });
        // The handler's lock is taken before the slot becomes visible, so the informer's
        // task waits for the initial objects before it delivers the next change.
        let mut guard = slot.lock();
        let (initial, synced_now) = {
            let mut d = self.shared.dispatcher();
            let initial: Vec<_> = self
                .shared
                .store
                .list()
                .into_iter()
                .map(Delta::Added)
                .collect();
            if !d.closed {
                let mut list: Vec<_> = d.inline.iter().cloned().collect();
                list.push(slot.clone());
                d.inline = list.into();
            }
            (initial, d.synced)
        };
        slot.deliver(&mut guard, &initial);
        if synced_now {
            synced.store(true, Ordering::Release);
        }
        drop(guard);
        HandlerRegistration {
            id,
            synced,
            backlog: Arc::new(AtomicUsize::new(0)),
            cancel,
        }
    }

    /// Removes a handler: it gets no more events and its task stops. Returns false if it
    /// was not registered (any more).
    pub fn remove_handler(&self, registration: &HandlerRegistration) -> bool {
        let removed = {
            let mut d = self.shared.dispatcher();
            let before = d.handlers.len() + d.inline.len();
            d.handlers.retain(|h| h.id != registration.id);
            if d.inline.iter().any(|h| h.id == registration.id) {
                let list: Vec<_> = d
                    .inline
                    .iter()
                    .filter(|h| h.id != registration.id)
                    .cloned()
                    .collect();
                d.inline = list.into();
            }
            d.handlers.len() + d.inline.len() != before
        };
        registration.cancel.cancel();
        removed
    }

    /// Number of registered handlers (inline ones included).
    pub fn handler_count(&self) -> usize {
        let d = self.shared.dispatcher();
        d.handlers.len() + d.inline.len()
    }

    /// The largest backlog of any registered handler (see
    /// [`HandlerRegistration::backlog`]): 0 when every handler has caught up.
    pub fn max_handler_backlog(&self) -> usize {
        self.shared
            .dispatcher()
            .handlers
            .iter()
            .map(|h| h.backlog.load(Ordering::Relaxed))
            .max()
            .unwrap_or(0)
    }
}

fn describe<K: 'static>(lw: &dyn ListWatch<K>, config: &ReflectorConfig) -> String {
    let mut s = lw.describe();
    if let Some(l) = &config.label_selector {
        s.push_str(&format!(" labels={l}"));
    }
    if let Some(f) = &config.field_selector {
        s.push_str(&format!(" fields={f}"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reflector::fake::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kubewright_core::{ObjectKey, ResourceExt, WatchEvent};
    use std::time::Duration;

    type Rx = mpsc::UnboundedReceiver<String>;

    #[test]
    fn retired_objects_are_freed_here_once_no_handler_holds_them() {
        let mut retired = Retired::<u32>::default();
        let held = Arc::new(1);
        let handler_copy = held.clone();
        let free = Arc::new(2);
        let weak_free = Arc::downgrade(&free);
        retired.push(Some(held));
        retired.push(Some(free));
        // The oldest is still held: it and everything after it wait (oldest first).
        assert_eq!(retired.queue.len(), 2);
        assert!(weak_free.upgrade().is_some());
        drop(handler_copy);
        retired.push(None);
        assert!(retired.queue.is_empty());
        assert!(
            weak_free.upgrade().is_none(),
            "freed by the sink, not later"
        );
        // A handler far behind: past the bound the sink lets go, the handler frees.
        let copies: Vec<_> = (0..RETIRED_MAX as u32 + 5).map(Arc::new).collect();
        for c in &copies {
            retired.push(Some(c.clone()));
        }
        assert_eq!(retired.queue.len(), RETIRED_MAX);
        assert_eq!(Arc::strong_count(&copies[0]), 1);
        assert_eq!(Arc::strong_count(&copies[RETIRED_MAX + 4]), 2);
    }

    fn render(o: &ConfigMap) -> String {
        format!(
            "{}@{}",
            ObjectKey::from_obj(o),
            o.resource_version().unwrap_or("")
        )
    }

    fn recorder() -> (HandlerFuncs<ConfigMap>, Rx) {
        let (tx, rx) = mpsc::unbounded_channel();
        let (t1, t2, t3) = (tx.clone(), tx.clone(), tx);
        let h = HandlerFuncs::new()
            .on_add(move |o: Arc<ConfigMap>| {
                let _ = t1.send(format!("add {}", render(&o)));
            })
            .on_update(move |old: Arc<ConfigMap>, new: Arc<ConfigMap>| {
                let same = if Arc::ptr_eq(&old, &new) {
                    " (same)"
                } else {
                    ""
                };
                let _ = t2.send(format!("update {} -> {}{same}", render(&old), render(&new)));
            })
            .on_delete(move |o: Arc<ConfigMap>, unknown| {
                let _ = t3.send(format!("delete {} unknown={unknown}", render(&o)));
            });
        (h, rx)
    }

    async fn recv(rx: &mut Rx, n: usize) -> Vec<String> {
        let mut out = Vec::new();
        for _ in 0..n {
            // Long enough for the paused-clock resync test (virtual time) to reach its ticks.
            let m = tokio::time::timeout(Duration::from_secs(120), rx.recv())
                .await
                .expect("timed out waiting for a handler event")
                .expect("handler channel closed");
            out.push(m);
        }
        out
    }

    async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !cond() {
            assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
            tokio::task::yield_now().await;
        }
    }

    fn live(lw: &Arc<FakeLw>) -> futures::channel::mpsc::UnboundedSender<Ev> {
        let (tx, rx) = futures::channel::mpsc::unbounded();
        lw.watch(FakeWatch::Live(rx));
        tx
    }

    #[tokio::test]
    async fn handlers_get_ordered_events_and_late_handlers_get_current_state() {
        let lw = FakeLw::new();
        lw.list(Ok(list(vec![cm("a", "1"), cm("b", "1")], "2", None)));
        let events = live(&lw);
        let informer = Informer::new(Shared(lw.clone()), ReflectorConfig::default().paged_list());
        let (h1, mut rx1) = recorder();
        let reg1 = informer.add_handler(h1);
        assert!(!informer.has_synced());
        informer.start();
        informer.start();
        assert!(informer.wait_for_sync().await);
        assert_eq!(recv(&mut rx1, 2).await, vec!["add ns/a@1", "add ns/b@1"]);
        eventually("first handler synced", || reg1.has_synced()).await;

        events
            .unbounded_send(Ok(WatchEvent::Modified(cm("a", "3"))))
            .unwrap();
        events
            .unbounded_send(Ok(WatchEvent::Deleted(cm("b", "4"))))
            .unwrap();
        events
            .unbounded_send(Ok(WatchEvent::Added(cm("c", "5"))))
            .unwrap();
        assert_eq!(
            recv(&mut rx1, 3).await,
            vec![
                "update ns/a@1 -> ns/a@3",
                "delete ns/b@4 unknown=false",
                "add ns/c@5"
            ]
        );
        // A late handler gets the current contents, then live events.
        let (h2, mut rx2) = recorder();
        let reg2 = informer.add_handler(h2);
        let mut initial = recv(&mut rx2, 2).await;
        initial.sort();
        assert_eq!(initial, vec!["add ns/a@3", "add ns/c@5"]);
        eventually("late handler synced", || reg2.has_synced()).await;
        events
            .unbounded_send(Ok(WatchEvent::Modified(cm("c", "6"))))
            .unwrap();
        assert_eq!(recv(&mut rx1, 1).await, vec!["update ns/c@5 -> ns/c@6"]);
        assert_eq!(recv(&mut rx2, 1).await, vec!["update ns/c@5 -> ns/c@6"]);

        // A removed handler hears nothing more; its task ends and drops its closures.
        assert!(informer.remove_handler(&reg1));
        assert!(!informer.remove_handler(&reg1));
        assert_eq!(informer.handler_count(), 1);
        events
            .unbounded_send(Ok(WatchEvent::Modified(cm("a", "7"))))
            .unwrap();
        assert_eq!(recv(&mut rx2, 1).await, vec!["update ns/a@3 -> ns/a@7"]);
        let end = tokio::time::timeout(Duration::from_secs(10), rx1.recv()).await;
        assert_eq!(end.expect("removed handler still running"), None);
        assert_eq!(informer.store().len(), 2);
        informer.shutdown().await;
        assert!(informer.is_stopped());
    }

    /// Everything already sent to `rx`, without waiting.
    fn drain(rx: &mut Rx) -> Vec<String> {
        std::iter::from_fn(|| rx.try_recv().ok()).collect()
    }

    #[tokio::test]
    async fn inline_handlers_get_each_change_before_the_informer_moves_on() {
        let lw = FakeLw::new();
        lw.list(Ok(list(vec![cm("a", "1"), cm("b", "1")], "2", None)));
        let events = live(&lw);
        let informer = Informer::new(Shared(lw.clone()), ReflectorConfig::default().paged_list());
        let (h1, mut rx1) = recorder();
        let reg1 = informer.add_inline_handler(h1);
        assert!(!reg1.has_synced());
        informer.start();
        assert!(informer.wait_for_sync().await);
        // Delivered on the informer's task before it reported the sync: nothing to await.
        assert!(reg1.has_synced());
        let mut initial = drain(&mut rx1);
        initial.sort();
        assert_eq!(initial, vec!["add ns/a@1", "add ns/b@1"]);

        events
            .unbounded_send(Ok(WatchEvent::Modified(cm("a", "3"))))
            .unwrap();
        events
            .unbounded_send(Ok(WatchEvent::Deleted(cm("b", "4"))))
            .unwrap();
        assert_eq!(
            recv(&mut rx1, 2).await,
            vec!["update ns/a@1 -> ns/a@3", "delete ns/b@4 unknown=false"]
        );
        // A late inline handler has the current contents when the call returns.
        let (h2, mut rx2) = recorder();
        let reg2 = informer.add_inline_handler(h2);
        assert!(reg2.has_synced());
        assert_eq!(drain(&mut rx2), vec!["add ns/a@3"]);
        assert_eq!(informer.handler_count(), 2);
        assert_eq!(reg2.backlog(), 0);

        // Removed, a handler hears nothing more; the other one does.
        assert!(informer.remove_handler(&reg1));
        assert!(!informer.remove_handler(&reg1));
        assert_eq!(informer.handler_count(), 1);
        events
            .unbounded_send(Ok(WatchEvent::Added(cm("c", "5"))))
            .unwrap();
        assert_eq!(recv(&mut rx2, 1).await, vec!["add ns/c@5"]);
        assert!(drain(&mut rx1).is_empty());
        informer.shutdown().await;
        assert_eq!(informer.handler_count(), 0);
    }

    #[tokio::test]
    async fn a_panicking_inline_handler_stops_neither_the_informer_nor_itself() {
        let lw = FakeLw::new();
        lw.list(Ok(list(vec![], "1", None)));
        let events = live(&lw);
        let informer = Informer::new(Shared(lw.clone()), ReflectorConfig::default().paged_list());
        let (tx, mut rx) = mpsc::unbounded_channel();
        informer.add_inline_handler(HandlerFuncs::new().on_add(move |o: Arc<ConfigMap>| {
            assert_ne!(
                o.name_any(),
                "bad",
                "this handler panics on the object named bad"
            );
            let _ = tx.send(format!("add {}", render(&o)));
        }));
        let (task_handler, mut task_rx) = recorder();
        informer.add_handler(task_handler);
        informer.start();
        for (name, rv) in [("a", "2"), ("bad", "3"), ("c", "4")] {
            events
                .unbounded_send(Ok(WatchEvent::Added(cm(name, rv))))
                .unwrap();
        }
        assert_eq!(recv(&mut rx, 2).await, vec!["add ns/a@2", "add ns/c@4"]);
        assert_eq!(
            recv(&mut task_rx, 3).await,
            vec!["add ns/a@2", "add ns/bad@3", "add ns/c@4"]
        );
        assert_eq!(informer.store().len(), 3);
        assert!(!informer.is_stopped());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn inline_handlers_added_while_events_flow_miss_and_repeat_nothing() {
        let lw = FakeLw::new();
        lw.list(Ok(list(vec![cm("a", "1")], "1", None)));
        let events = live(&lw);
        let informer = Arc::new(Informer::new(
            Shared(lw.clone()),
            ReflectorConfig::default().paged_list(),
        ));
        informer.start();
        assert!(informer.wait_for_sync().await);
        const LAST: u32 = 3000;
        let producer = tokio::spawn(async move {
            for rv in 2..=LAST {
                events
                    .unbounded_send(Ok(WatchEvent::Modified(cm("a", &rv.to_string()))))
                    .unwrap();
                if rv % 64 == 0 {
                    tokio::task::yield_now().await;
                }
            }
            events
        });
        // Each handler, wherever it joins the stream, must see one add and then every
        // later version exactly once.
        let mut receivers = Vec::new();
        for _ in 0..20 {
            let (h, rx) = recorder();
            informer.add_inline_handler(h);
            receivers.push(rx);
            tokio::task::yield_now().await;
        }
        let _events = producer.await.unwrap();
        for mut rx in receivers {
            let first = recv(&mut rx, 1).await.remove(0);
            let start: u32 = first
                .strip_prefix("add ns/a@")
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("first event is not the add: {first}"));
            for rv in start + 1..=LAST {
                let got = recv(&mut rx, 1).await.remove(0);
                assert_eq!(got, format!("update ns/a@{} -> ns/a@{rv}", rv - 1));
            }
        }
        informer.shutdown().await;
    }

    /// A handler that blocks until released, recording what it saw.
    struct Blocked {
        gate: Arc<tokio::sync::Semaphore>,
        seen: mpsc::UnboundedSender<String>,
    }

    impl EventHandler<ConfigMap> for Blocked {
        async fn on_add(&mut self, obj: Arc<ConfigMap>) {
            let _permit = self.gate.acquire().await;
            let _ = self.seen.send(format!("add {}", render(&obj)));
        }
        async fn on_update(&mut self, _old: Arc<ConfigMap>, new: Arc<ConfigMap>) {
            let _permit = self.gate.acquire().await;
            let _ = self.seen.send(format!("update {}", render(&new)));
        }
    }

    #[tokio::test]
    async fn slow_handler_blocks_neither_the_reflector_nor_other_handlers() {
        let lw = FakeLw::new();
        lw.list(Ok(list(vec![cm("a", "1")], "1", None)));
        let events = live(&lw);
        let informer = Informer::new(Shared(lw.clone()), ReflectorConfig::default().paged_list());
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        let (seen_tx, mut slow_rx) = mpsc::unbounded_channel();
        let slow_reg = informer.add_handler(Blocked {
            gate: gate.clone(),
            seen: seen_tx,
        });
        let (fast, mut fast_rx) = recorder();
        informer.add_handler(fast);
        informer.start();
        for i in 2..=200 {
            events
                .unbounded_send(Ok(WatchEvent::Modified(cm("a", &i.to_string()))))
                .unwrap();
        }
        let got = recv(&mut fast_rx, 200).await;
        assert_eq!(got[0], "add ns/a@1");
        assert_eq!(got[199], "update ns/a@199 -> ns/a@200");
        assert_eq!(
            informer
                .store()
                .get_by_key("ns/a")
                .unwrap()
                .resource_version(),
            Some("200")
        );
        assert!(
            slow_rx.try_recv().is_err(),
            "the slow handler was not blocked"
        );
        // 1 add + the Synced marker + 199 updates wait for the slow handler.
        assert_eq!(slow_reg.backlog(), 201);
        assert_eq!(informer.max_handler_backlog(), 201);
        // Released, the slow handler catches up, in order.
        gate.add_permits(1000);
        let slow = recv(&mut slow_rx, 200).await;
        assert_eq!(slow[0], "add ns/a@1");
        for (i, s) in slow.iter().enumerate().skip(1) {
            assert_eq!(s, &format!("update ns/a@{}", i + 1));
        }
        tokio::time::timeout(Duration::from_secs(10), async {
            while informer.max_handler_backlog() > 0 {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("backlog drains");
        assert_eq!(slow_reg.backlog(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn periodic_resync_redelivers_objects_as_updates() {
        let lw = FakeLw::new();
        lw.list(Ok(list(vec![cm("a", "1"), cm("b", "1")], "1", None)))
            .watch(FakeWatch::EventsThenPending(vec![]));
        let informer = Informer::new(
            Shared(lw.clone()),
            ReflectorConfig::default()
                .paged_list()
                .resync(Duration::from_secs(30)),
        );
        let (h, mut rx) = recorder();
        informer.add_handler(h);
        informer.start();
        let start = tokio::time::Instant::now();
        recv(&mut rx, 2).await;
        let mut resync = recv(&mut rx, 2).await;
        resync.sort();
        assert_eq!(
            resync,
            vec![
                "update ns/a@1 -> ns/a@1 (same)",
                "update ns/b@1 -> ns/b@1 (same)"
            ]
        );
        assert_eq!(start.elapsed(), Duration::from_secs(30));
        recv(&mut rx, 2).await;
        assert_eq!(start.elapsed(), Duration::from_secs(60));
    }

    #[tokio::test]
    async fn relist_deletes_reach_handlers_as_final_state_unknown() {
        let lw = FakeLw::new();
        lw.list(Ok(list(vec![cm("a", "1"), cm("b", "1")], "2", None)))
            .watch(FakeWatch::Events(vec![Ok(WatchEvent::Error(
                kubewright_core::Status::failure(410, "Expired", "too old"),
            ))]))
            .list(Ok(list(vec![cm("a", "1")], "9", None)))
            .watch(FakeWatch::EventsThenPending(vec![]));
        let informer = Informer::new(Shared(lw.clone()), ReflectorConfig::default().paged_list());
        let (h, mut rx) = recorder();
        informer.add_handler(h);
        informer.start();
        assert_eq!(
            recv(&mut rx, 3).await,
            vec!["add ns/a@1", "add ns/b@1", "delete ns/b@1 unknown=true"]
        );
        let mut stats = informer.subscribe_stats();
        stats.wait_for(|s| s.lists == 2).await.unwrap();
        assert_eq!(informer.stats().expired, 1);
        assert_eq!(informer.last_sync_resource_version().as_deref(), Some("9"));
    }

    #[tokio::test]
    async fn stopping_before_sync_unblocks_waiters() {
        let lw = FakeLw::new(); // the list never answers
        let informer = Arc::new(Informer::new(
            Shared(lw.clone()),
            ReflectorConfig::default().paged_list(),
        ));
        informer.start();
        let waiter = {
            let informer = informer.clone();
            tokio::spawn(async move { informer.wait_for_sync().await })
        };
        eventually("list requested", || lw.list_calls().len() == 1).await;
        informer.shutdown().await;
        assert!(!waiter.await.unwrap());
        assert!(!informer.has_synced());
        // Starting again after a stop does nothing.
        informer.start();
        assert_eq!(lw.list_calls().len(), 1);
    }
}
