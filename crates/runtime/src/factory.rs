//! `SharedInformerFactory`: one informer per resource type, namespace and selectors,
//! shared by every controller that asks for it (client-go's `SharedInformerFactory`).
//!
//! Two controllers that both need ConfigMaps in all namespaces get the same
//! `Arc<Informer<ConfigMap>>`, hence one list, one watch and one cache. The key is
//! (Rust type, group/version/resource, namespace, label selector, field selector), so
//! a typed, a dynamic and a metadata-only informer of the same resource are distinct.
//!
//! Cached objects have no `metadata.managedFields` by default (it is skipped while
//! decoding: about half the memory and CPU of a typical cache); call
//! [`SharedInformerFactory::strip_managed_fields`]`(false)` to keep it. Writes are
//! unaffected: an update without managedFields leaves the server's records as they are.
//!
//! Where the informers run is [`InformerThreads`]: by default, when the factory is used
//! from a multi-thread Tokio runtime, on threads of the factory's own (one per core at
//! most, each informer wholly on one of them), so that a watch event never crosses
//! threads between the connection, the store and the handlers.
//!
//! ```no_run
//! # async fn run(client: kubewright_client::Client) {
//! use std::time::Duration;
//! use k8s_openapi::api::core::v1::{ConfigMap, Pod};
//! use kubewright_runtime::factory::{InformerParams, SharedInformerFactory};
//!
//! let factory = SharedInformerFactory::new(client);
//! let pods = factory.informer::<Pod>(InformerParams::default().namespace("apps"));
//! let cms = factory.informer::<ConfigMap>(InformerParams::default().labels("app=web"));
//! factory.start();
//! factory.wait_for_cache_sync(Duration::from_secs(30)).await.expect("caches synced");
//! println!("{} pods, {} configmaps", pods.store().len(), cms.store().len());
//! factory.shutdown().await;
//! # }
//! ```

use crate::informer::Informer;
use crate::reflector::{ListWatch, MetadataOnly, ReflectorConfig};
use futures::FutureExt;
use futures::future::BoxFuture;
use kubewright_client::{Api, Client, ContentType};
use kubewright_core::{ApiResource, DynamicObject, PartialObjectMetadata, Resource, Scope};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt::{self, Debug};
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Which objects an informer from the factory covers. The default is every namespace
/// and no selectors.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct InformerParams {
    /// One namespace, or `None` for all (ignored for cluster-scoped resources). On a
    /// factory with [defaults](SharedInformerFactory::cache_defaults), `None` takes the
    /// default namespace and `Some("")` ([`every_namespace`](Self::every_namespace)) means
    /// every namespace whatever the default.
    pub namespace: Option<String>,
    /// Label selector (`None`: the factory's default, if any).
    pub label_selector: Option<String>,
    /// Field selector (`None`: the factory's default, if any).
    pub field_selector: Option<String>,
}

impl InformerParams {
    /// Every namespace, no selectors.
    pub fn all() -> Self {
        Self::default()
    }
    /// Restricts to one namespace.
    #[must_use]
    pub fn namespace(mut self, ns: &str) -> Self {
        self.namespace = Some(ns.to_string()).filter(|s| !s.is_empty());
        self
    }
    /// Every namespace, even when the factory's (or manager's)
    /// [defaults](SharedInformerFactory::cache_defaults) name one.
    #[must_use]
    pub fn every_namespace(mut self) -> Self {
        self.namespace = Some(String::new());
        self
    }
    /// Fills what `self` leaves unset from `defaults`.
    #[must_use]
    pub fn or(self, defaults: &InformerParams) -> Self {
        Self {
            namespace: self.namespace.or_else(|| defaults.namespace.clone()),
            label_selector: self
                .label_selector
                .or_else(|| defaults.label_selector.clone()),
            field_selector: self
                .field_selector
                .or_else(|| defaults.field_selector.clone()),
        }
    }
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
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct InformerKey {
    type_id: TypeId,
    gvr: String,
    namespace: Option<String>,
    label_selector: Option<String>,
    field_selector: Option<String>,
}

/// What the factory needs of an informer without knowing its type.
trait ManagedInformer: Send + Sync {
    fn start(&self);
    fn has_synced(&self) -> bool;
    fn wait_for_sync(&self) -> BoxFuture<'_, bool>;
    fn shutdown(&self) -> BoxFuture<'_, ()>;
    fn description(&self) -> String;
}

impl<K: Resource + Send + Sync + 'static> ManagedInformer for Informer<K> {
    fn start(&self) {
        Informer::start(self);
    }
    fn has_synced(&self) -> bool {
        Informer::has_synced(self)
    }
    fn wait_for_sync(&self) -> BoxFuture<'_, bool> {
        Informer::wait_for_sync(self).boxed()
    }
    fn shutdown(&self) -> BoxFuture<'_, ()> {
        Informer::shutdown(self).boxed()
    }
    fn description(&self) -> String {
        self.describe().to_string()
    }
}

struct Entry {
    any: Arc<dyn Any + Send + Sync>,
    managed: Arc<dyn ManagedInformer>,
}

/// Some caches did not sync in time.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{} informer(s) not synced after {timeout:?}: {}", .pending.len(), .pending.join(", "))]
pub struct CacheSyncError {
    /// The informers that had not synced (their descriptions).
    pub pending: Vec<String>,
    /// How long it waited.
    pub timeout: Duration,
}

/// Where a factory's informers run: their list and watch, their connections, store
/// updates and handlers (inline ones and [`Informer::add_handler`] tasks).
///
/// A watch event that crosses threads between the connection, the informer and a
/// handler task costs more than its decoding: on a 2-core machine `kw bench`'s replay
/// measured 100–113 µs of CPU per pod event on the caller's multi-thread runtime and
/// 40–44 µs with each informer wholly on one thread, whose memory also stayed flat
/// while events streamed (docs/performance.md). Hence the default, [`Auto`](Self::Auto).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum InformerThreads {
    /// [`Dedicated`](Self::Dedicated) with one thread per core
    /// ([`std::thread::available_parallelism`]) when an informer is created in a
    /// multi-thread Tokio runtime or outside any runtime; [`Caller`](Self::Caller)
    /// when it is created in a current-thread runtime (`#[tokio::test]`), which runs
    /// everything on one thread already and may have a paused clock.
    #[default]
    Auto,
    /// The runtime the informers are started from.
    Caller,
    /// Up to this many threads of the factory's own, each a single-threaded Tokio
    /// runtime with its own connections to the server
    /// ([`Client::with_own_connections`]). Each informer runs wholly on one of them;
    /// informers are dealt to the threads in turn, a new thread for each until there
    /// are this many.
    ///
    /// The threads end when the factory is dropped or [shut
    /// down](SharedInformerFactory::shutdown), with any task still on them (tasks a
    /// handler spawned too). The threads' runtimes have clocks of their own (a test's
    /// paused clock does not pause them) and are single-threaded: a handler must not
    /// block, and cannot use `tokio::task::block_in_place`. Informers that share a
    /// thread decode one after another, and a handler that computes for long delays
    /// its thread's other informers. If a thread cannot be created, its informers run
    /// on the caller's runtime (logged as a warning).
    Dedicated(NonZeroUsize),
}

/// Hands out shared informers; see the [module docs](self).
pub struct SharedInformerFactory {
    client: Client,
    defaults: ReflectorConfig,
    /// What informers cover when their params leave it unset.
    scope: InformerParams,
    strip_managed_fields: bool,
    content_type: ContentType,
    informers: Mutex<HashMap<InformerKey, Entry>>,
    started: AtomicBool,
    cancel: CancellationToken,
    threads: InformerThreads,
    /// The factory's informer threads, created as informers need them.
    pool: Mutex<Pool>,
}

#[derive(Default)]
struct Pool {
    threads: Vec<InformerThread>,
    /// Informers placed on the threads so far (the next one goes to `placed % max`).
    placed: usize,
}

/// A thread with a single-threaded Tokio runtime of its own, which some of a factory's
/// informers (their reflectors, connections and handler tasks) run on, with a client of
/// its own connections. It ends when the factory is dropped or shut down; the tasks
/// still on it are dropped then.
struct InformerThread {
    handle: tokio::runtime::Handle,
    client: Client,
    stop: CancellationToken,
}

impl InformerThread {
    fn spawn(client: &Client) -> std::io::Result<Self> {
        let stop = CancellationToken::new();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let handle = runtime.handle().clone();
        let until = stop.clone();
        let mut owned = OwnedRuntime(Some(runtime));
        std::thread::Builder::new()
            .name("kubewright-informers".into())
            .spawn(move || {
                if let Some(runtime) = owned.0.take() {
                    runtime.block_on(until.cancelled());
                }
            })?;
        Ok(Self {
            handle,
            client: client.with_own_connections(),
            stop,
        })
    }
}

/// The runtime on its way to its thread. If the thread cannot be created, the runtime
/// is dropped where the informer was created, perhaps in async code, where
/// dropping a runtime the usual way (waiting for its tasks) would panic.
struct OwnedRuntime(Option<tokio::runtime::Runtime>);

impl Drop for OwnedRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

impl Drop for InformerThread {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Debug for SharedInformerFactory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedInformerFactory")
            .field("informers", &self.len())
            .field("started", &self.started.load(Ordering::Acquire))
            .finish()
    }
}

impl Drop for SharedInformerFactory {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

impl SharedInformerFactory {
    /// A factory whose informers use [`ReflectorConfig::default`] and cache objects
    /// without `managedFields`.
    pub fn new(client: Client) -> Self {
        Self {
            client,
            defaults: ReflectorConfig::default(),
            scope: InformerParams::default(),
            strip_managed_fields: true,
            content_type: ContentType::Protobuf,
            informers: Mutex::new(HashMap::new()),
            started: AtomicBool::new(false),
            cancel: CancellationToken::new(),
            threads: InformerThreads::Auto,
            pool: Mutex::new(Pool::default()),
        }
    }

    /// Where informers created from now on run ([`InformerThreads::Auto`] by default).
    ///
    /// ```no_run
    /// # fn run(client: kubewright_client::Client) {
    /// use kubewright_runtime::factory::{InformerThreads, SharedInformerFactory};
    /// // All informers of this factory on one thread of its own.
    /// let factory = SharedInformerFactory::new(client)
    ///     .threads(InformerThreads::Dedicated(1.try_into().expect("not zero")));
    /// # }
    /// ```
    #[must_use]
    pub fn threads(mut self, threads: InformerThreads) -> Self {
        self.threads = threads;
        self
    }

    /// The runtime and client of the next informer: a thread of the factory's own, or
    /// `None` for the caller's runtime and the factory's client.
    fn place(&self) -> Option<(tokio::runtime::Handle, Client)> {
        let max = match self.threads {
            InformerThreads::Caller => return None,
            InformerThreads::Dedicated(n) => n.get(),
            InformerThreads::Auto => match tokio::runtime::Handle::try_current() {
                Ok(rt) if rt.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread => {
                    return None;
                }
                _ => std::thread::available_parallelism().map_or(1, NonZeroUsize::get),
            },
        };
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        let slot = pool.placed % max;
        pool.placed += 1;
        if slot >= pool.threads.len() {
            match InformerThread::spawn(&self.client) {
                Ok(thread) => pool.threads.push(thread),
                Err(e) if pool.threads.is_empty() => {
                    tracing::warn!(error = %e, "no informer thread; running on the caller's runtime");
                    return None;
                }
                Err(e) => tracing::warn!(error = %e, "no new informer thread; sharing one"),
            }
        }
        let thread = &pool.threads[slot % pool.threads.len()];
        Some((thread.handle.clone(), thread.client.clone()))
    }

    /// Settings for every informer created from now on (page size, streaming lists,
    /// timeouts, resync, backoff). Its selectors are ignored: they come from
    /// [`InformerParams`].
    #[must_use]
    pub fn with_config(mut self, defaults: ReflectorConfig) -> Self {
        self.defaults = defaults;
        self
    }

    /// What every informer created from now on covers where its [`InformerParams`] leave
    /// a field unset (controller-runtime's `cache.Options` defaults): one namespace for
    /// an operator that watches only its own, or a label selector for the objects it
    /// manages. An informer's own params win; [`InformerParams::every_namespace`] keeps
    /// every namespace. Cluster-scoped resources ignore the namespace.
    ///
    /// ```no_run
    /// # fn run(client: kubewright_client::Client) {
    /// use kubewright_runtime::{InformerParams, SharedInformerFactory};
    /// let factory = SharedInformerFactory::new(client)
    ///     .cache_defaults(InformerParams::all().namespace("backups"));
    /// # }
    /// ```
    #[must_use]
    pub fn cache_defaults(mut self, defaults: InformerParams) -> Self {
        self.scope = defaults;
        self
    }

    /// The defaults set by [`cache_defaults`](Self::cache_defaults).
    pub fn cache_defaults_params(&self) -> &InformerParams {
        &self.scope
    }

    /// Whether cached objects drop `metadata.managedFields` (often a third to a half of
    /// an object); on by default. It is skipped while decoding
    /// ([`Api::without_managed_fields`]), so it costs neither memory nor allocation
    /// churn. Turn it off for tools that read field ownership from the cache. Informers
    /// created before this call keep their setting.
    #[must_use]
    pub fn strip_managed_fields(mut self, on: bool) -> Self {
        self.strip_managed_fields = on;
        self
    }

    /// The wire format of typed and dynamic informers: Kubernetes protobuf by default
    /// (as kube-controller-manager's informers), which built-in kinds are listed and
    /// watched in; custom resources are always JSON. kube-apiserver encodes protobuf
    /// several times faster than JSON, which dominates the sync of a large cache.
    /// `ContentType::Json` turns it off. Metadata-only informers follow the same
    /// setting for every resource, custom ones too (`PartialObjectMetadata` has a
    /// protobuf form whatever the kind), as client-go's metadata informers do.
    /// Informers created before this call keep their setting.
    #[must_use]
    pub fn content_type(mut self, ct: ContentType) -> Self {
        self.content_type = ct;
        self
    }

    fn map(&self) -> MutexGuard<'_, HashMap<InformerKey, Entry>> {
        self.informers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The shared informer of a static type (e.g. `Pod`) for `params`, created on first
    /// request. If the factory was started already, a new informer starts at once.
    pub fn informer<K>(&self, params: InformerParams) -> Arc<Informer<K>>
    where
        K: Resource + Clone + DeserializeOwned + Serialize + Debug + Send + Sync + 'static,
        K::DynamicType: Default,
    {
        self.informer_with::<K>(&K::DynamicType::default(), params)
    }

    /// The shared informer of a type described at run time (`DynamicObject` with an
    /// [`ApiResource`], or a static type with `()`).
    pub fn informer_with<K>(&self, dt: &K::DynamicType, params: InformerParams) -> Arc<Informer<K>>
    where
        K: Resource + Clone + DeserializeOwned + Serialize + Debug + Send + Sync + 'static,
    {
        let dt2 = dt.clone();
        let ct = self.content_type;
        self.get_or_create::<K>(
            TypeId::of::<K>(),
            gvr_key(&K::group(dt), &K::version(dt), &K::plural(dt)),
            K::scope(dt),
            params,
            move |client, ns, skip| -> Arc<dyn ListWatch<K>> {
                let api = match ns {
                    Some(ns) => Api::<K>::namespaced_with(client, ns, &dt2),
                    None => Api::<K>::all_with(client, &dt2),
                }
                .with_content_type(ct);
                Arc::new(if skip {
                    api.without_managed_fields()
                } else {
                    api
                })
            },
        )
    }

    /// The shared informer of [`DynamicObject`]s of `resource`.
    pub fn dynamic_informer(
        &self,
        resource: &ApiResource,
        params: InformerParams,
    ) -> Arc<Informer<DynamicObject>> {
        self.informer_with::<DynamicObject>(resource, params)
    }

    /// The shared metadata-only informer ([`PartialObjectMetadata`]) of `resource`.
    pub fn metadata_informer(
        &self,
        resource: &ApiResource,
        params: InformerParams,
    ) -> Arc<Informer<PartialObjectMetadata>> {
        let ar = resource.clone();
        let ct = self.content_type;
        self.get_or_create::<PartialObjectMetadata>(
            TypeId::of::<PartialObjectMetadata>(),
            gvr_key(&resource.group, &resource.version, &resource.plural),
            resource.scope,
            params,
            move |client, ns, skip| -> Arc<dyn ListWatch<PartialObjectMetadata>> {
                let api = match ns {
                    Some(ns) => Api::<DynamicObject>::namespaced_with(client, ns, &ar),
                    None => Api::<DynamicObject>::all_with(client, &ar),
                }
                .with_content_type(ct);
                Arc::new(MetadataOnly(if skip {
                    api.without_managed_fields()
                } else {
                    api
                }))
            },
        )
    }

    fn get_or_create<K>(
        &self,
        type_id: TypeId,
        gvr: String,
        scope: Scope,
        params: InformerParams,
        make: impl FnOnce(Client, Option<&str>, bool) -> Arc<dyn ListWatch<K>>,
    ) -> Arc<Informer<K>>
    where
        K: Resource + Send + Sync + 'static,
    {
        let params = params.or(&self.scope);
        let namespace = match scope {
            Scope::Namespaced => params.namespace.filter(|s| !s.is_empty()),
            Scope::Cluster => None,
        };
        let key = InformerKey {
            type_id,
            gvr,
            namespace,
            label_selector: params.label_selector.filter(|s| !s.is_empty()),
            field_selector: params.field_selector.filter(|s| !s.is_empty()),
        };
        let mut map = self.map();
        if let Some(existing) = map.get(&key)
            && let Ok(informer) = existing.any.clone().downcast::<Informer<K>>()
        {
            return informer;
        }
        let mut config = self.defaults.clone();
        config.label_selector = key.label_selector.clone();
        config.field_selector = key.field_selector.clone();
        let place = self.place();
        let client = place.as_ref().map_or(&self.client, |(_, c)| c).clone();
        let mut informer = Informer::build(
            make(client, key.namespace.as_deref(), self.strip_managed_fields),
            config,
            self.cancel.child_token(),
        );
        if let Some((runtime, _)) = place {
            informer = informer.with_runtime(runtime);
        }
        let informer = Arc::new(informer);
        if self.started.load(Ordering::Acquire) {
            informer.start();
        }
        map.insert(
            key,
            Entry {
                any: informer.clone(),
                managed: informer.clone(),
            },
        );
        informer
    }

    /// Number of informers created.
    pub fn len(&self) -> usize {
        self.map().len()
    }

    /// Whether no informer was created yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn managed(&self) -> Vec<Arc<dyn ManagedInformer>> {
        self.map().values().map(|e| e.managed.clone()).collect()
    }

    /// Starts every informer created so far; informers created later start at once.
    /// Must be called from within a Tokio runtime, unless every informer runs on a
    /// thread of the factory's own ([`InformerThreads`]).
    pub fn start(&self) {
        self.started.store(true, Ordering::Release);
        for informer in self.managed() {
            informer.start();
        }
    }

    /// Waits until every informer created so far has synced, for at most `timeout`.
    pub async fn wait_for_cache_sync(&self, timeout: Duration) -> Result<(), CacheSyncError> {
        let informers = self.managed();
        let all = futures::future::join_all(informers.iter().map(|i| i.wait_for_sync()));
        let synced = tokio::time::timeout(timeout, all).await;
        if synced.as_ref().is_ok_and(|r| r.iter().all(|s| *s)) {
            return Ok(());
        }
        let mut pending: Vec<String> = informers
            .iter()
            .filter(|i| !i.has_synced())
            .map(|i| i.description())
            .collect();
        pending.sort();
        Err(CacheSyncError { pending, timeout })
    }

    /// Stops every informer (reflectors and handlers) and waits for the reflector tasks
    /// to end. Informers requested afterwards never start.
    pub async fn shutdown(&self) {
        self.cancel.cancel();
        let informers = self.managed();
        futures::future::join_all(informers.iter().map(|i| i.shutdown())).await;
        let pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        for thread in &pool.threads {
            thread.stop.cancel();
        }
    }
}

fn gvr_key(group: &str, version: &str, plural: &str) -> String {
    format!("{group}/{version}/{plural}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_runtime_that_never_reached_its_thread_drops_in_async_code() {
        // What happens when the thread cannot be created: the closure, and the runtime
        // in it, are dropped here. A plain `Runtime` drop would panic in async code.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("runtime: {e}"));
        let handle = runtime.handle().clone();
        let task = handle.spawn(std::future::pending::<()>());
        drop(OwnedRuntime(Some(runtime)));
        assert!(task.await.is_err_and(|e| e.is_cancelled()));
    }

    fn client() -> Client {
        // Never connected: informers here are created, not started.
        Client::try_from(kubewright_client::Config::new(
            "http://127.0.0.1:1"
                .parse()
                .unwrap_or_else(|e| panic!("url: {e}")),
        ))
        .unwrap_or_else(|e| panic!("client: {e}"))
    }

    fn threads_of(factory: &SharedInformerFactory) -> usize {
        factory.pool.lock().map_or(0, |p| p.threads.len())
    }

    fn informers(factory: &SharedInformerFactory, n: usize) {
        for i in 0..n {
            let ns = format!("ns-{i}");
            factory.informer::<k8s_openapi::api::core::v1::ConfigMap>(
                InformerParams::all().namespace(&ns),
            );
        }
    }

    #[test]
    fn dedicated_threads_are_created_as_informers_need_them_up_to_the_limit() {
        let two = NonZeroUsize::new(2).unwrap_or(NonZeroUsize::MIN);
        let factory = SharedInformerFactory::new(client()).threads(InformerThreads::Dedicated(two));
        assert_eq!(threads_of(&factory), 0);
        informers(&factory, 1);
        assert_eq!(threads_of(&factory), 1);
        informers(&factory, 1); // same key: the same informer, no new thread
        assert_eq!(threads_of(&factory), 1);
        let more = SharedInformerFactory::new(client()).threads(InformerThreads::Dedicated(two));
        informers(&more, 5);
        assert_eq!(threads_of(&more), 2);
        assert_eq!(more.pool.lock().map_or(0, |p| p.placed), 5);
    }

    /// Threads a factory with `threads` made for `n` informers created in `runtime`.
    fn threads_made_in(
        runtime: &tokio::runtime::Runtime,
        threads: InformerThreads,
        n: usize,
    ) -> usize {
        let factory = runtime.block_on(async {
            let factory = SharedInformerFactory::new(client()).threads(threads);
            informers(&factory, n);
            factory
        });
        threads_of(&factory)
    }

    #[test]
    fn auto_uses_own_threads_from_a_multi_thread_runtime_and_the_callers_otherwise() {
        let multi = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap_or_else(|e| panic!("runtime: {e}"));
        let single = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap_or_else(|e| panic!("runtime: {e}"));
        assert_eq!(threads_made_in(&multi, InformerThreads::Auto, 1), 1);
        assert_eq!(threads_made_in(&single, InformerThreads::Auto, 3), 0);
        assert_eq!(threads_made_in(&multi, InformerThreads::Caller, 2), 0);

        // Outside any runtime: the informers need a runtime of their own.
        let factory = SharedInformerFactory::new(client());
        informers(&factory, 1);
        assert_eq!(threads_of(&factory), 1);
    }

    #[tokio::test]
    async fn a_dedicated_thread_ends_with_its_factory() {
        let client = client();
        let thread = InformerThread::spawn(&client).unwrap_or_else(|e| panic!("thread: {e}"));
        let handle = thread.handle.clone();
        let (tx, rx) = tokio::sync::oneshot::channel();
        handle.spawn(async move {
            let _ = tx.send(std::thread::current().name().map(str::to_owned));
        });
        assert_eq!(
            rx.await.ok().flatten().as_deref(),
            Some("kubewright-informers")
        );
        let parked = handle.spawn(std::future::pending::<()>());
        drop(thread);
        assert!(parked.await.is_err_and(|e| e.is_cancelled()));
    }
}
