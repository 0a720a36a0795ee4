//! The child process: one library, one informer/reflector on the benchmark's pods.
//!
//! It syncs, reports (a `KWBENCH synced {..}` line on stdout), then counts the update
//! events applied to its cache until it has seen all of them, checks the cache against
//! the expected final state and reports again (`KWBENCH done {..}`). Its memory numbers are
//! its own: nothing else runs in this process.

use crate::pods::GEN_LABEL;
use crate::procfs;
use crate::{BenchError, Mode, Variant};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// The hidden first argument that makes a process a benchmark child
/// (see [`run_child_if_requested`]).
pub const CHILD_COMMAND: &str = "__kw-bench-child";

/// Prefix of the child's report lines on stdout.
pub(crate) const LINE_PREFIX: &str = "KWBENCH ";

/// What a child is asked to do (passed as command-line arguments).
#[derive(Clone, Debug, clap::Parser)]
#[command(name = CHILD_COMMAND, hide = true)]
pub struct ChildArgs {
    /// Which library and variant.
    #[arg(long, value_parser = parse_variant)]
    pub variant: Variant,
    /// Where the pods are served from (recorded replay or embedded server).
    #[arg(long, value_parser = parse_mode)]
    pub mode: Mode,
    /// Base URL of the (plain HTTP) server; unused with `--kubeconfig`.
    #[arg(long)]
    pub url: String,
    /// A kubeconfig to reach a real cluster with (its current context).
    #[arg(long)]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// Namespace of the pods.
    #[arg(long)]
    pub namespace: String,
    /// Number of pods the cache must hold once synced.
    #[arg(long)]
    pub pods: usize,
    /// Number of update events to wait for after the sync.
    #[arg(long)]
    pub events: u64,
    /// Expected sum of the generation label over all pods at the end.
    #[arg(long)]
    pub expect_gen_sum: u64,
    /// List page size.
    #[arg(long, default_value_t = 500)]
    pub page_size: u32,
    /// Pause after the sync before reading the steady RSS, milliseconds.
    #[arg(long, default_value_t = 500)]
    pub settle_ms: u64,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 900)]
    pub timeout_secs: u64,
}

fn parse_variant(s: &str) -> Result<Variant, String> {
    s.parse()
}

fn parse_mode(s: &str) -> Result<Mode, String> {
    s.parse()
}

impl ChildArgs {
    /// The command-line arguments (after [`CHILD_COMMAND`]) that reproduce these args.
    pub(crate) fn to_args(&self) -> Vec<String> {
        let mut args = self
            .kubeconfig
            .as_ref()
            .map(|k| vec!["--kubeconfig".to_string(), k.display().to_string()])
            .unwrap_or_default();
        args.extend([
            "--variant".into(),
            self.variant.to_string(),
            "--mode".into(),
            self.mode.to_string(),
            "--url".into(),
            self.url.clone(),
            "--namespace".into(),
            self.namespace.clone(),
            "--pods".into(),
            self.pods.to_string(),
            "--events".into(),
            self.events.to_string(),
            "--expect-gen-sum".into(),
            self.expect_gen_sum.to_string(),
            "--page-size".into(),
            self.page_size.to_string(),
            "--settle-ms".into(),
            self.settle_ms.to_string(),
            "--timeout-secs".into(),
            self.timeout_secs.to_string(),
        ]);
        args
    }
}

/// What the child reports after the sync.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SyncResult {
    /// RSS before the client was created (runtime and binary only), bytes.
    pub baseline_rss: u64,
    /// Informer start to a cache holding every pod, seconds.
    pub sync_secs: f64,
    /// CPU time (user + system) of the child during the sync, seconds.
    pub sync_cpu_secs: f64,
    /// Objects in the cache at sync.
    pub synced_objects: usize,
    /// RSS after the sync and the settle pause, bytes.
    pub rss_after_sync: u64,
    /// Peak RSS up to that point, bytes.
    pub peak_rss_sync: u64,
    /// Median time of a keyed read of a cached pod (the lean variant decodes it),
    /// microseconds, over 2,000 random keys.
    #[serde(default)]
    pub get_p50_us: f64,
}

/// What the child reports at the end.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ChildResult {
    /// The sync phase.
    pub sync: SyncResult,
    /// Update events counted.
    pub events: u64,
    /// First to last event, seconds.
    pub events_secs: f64,
    /// CPU time of the child from the first to the last event, seconds.
    pub events_cpu_secs: f64,
    /// RSS once every event was applied, bytes.
    pub rss_end: u64,
    /// Peak RSS over the whole run, bytes.
    pub peak_rss: u64,
    /// Sum of the generation label over the cache at the end.
    pub gen_sum: u64,
    /// Whether the cache held exactly the expected state at the end.
    pub verified: bool,
    /// Largest number of notifications queued for the event handler, sampled every few
    /// milliseconds during the events (kubewright only: kube-rs has no handler queue).
    #[serde(default)]
    pub max_handler_backlog: Option<u64>,
}

impl ChildResult {
    /// Events per second, first to last event.
    pub fn events_per_sec(&self) -> f64 {
        if self.events_secs > 0.0 && self.events > 1 {
            (self.events - 1) as f64 / self.events_secs
        } else {
            0.0
        }
    }

    /// CPU microseconds per event.
    pub fn cpu_us_per_event(&self) -> f64 {
        if self.events > 0 {
            self.events_cpu_secs * 1e6 / self.events as f64
        } else {
            0.0
        }
    }
}

/// If this process was started as a benchmark child (first argument
/// [`CHILD_COMMAND`]), runs the child and returns its exit code; otherwise returns `None`
/// at once. Call it first thing in `main` of every binary that calls [`crate::run`]
/// (the parent starts children as `current_exe() __kw-bench-child ...`).
pub async fn run_child_if_requested() -> Option<ExitCode> {
    let mut args = std::env::args_os();
    let _exe = args.next();
    if args.next().as_deref() != Some(std::ffi::OsStr::new(CHILD_COMMAND)) {
        return None;
    }
    let parsed = <ChildArgs as clap::Parser>::try_parse_from(
        std::iter::once(std::ffi::OsString::from(CHILD_COMMAND)).chain(args),
    );
    let args = match parsed {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return Some(ExitCode::from(2));
        }
    };
    Some(match run_child(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kw-bench child: {e}");
            ExitCode::FAILURE
        }
    })
}

fn emit<T: Serialize>(kind: &str, value: &T) -> Result<(), BenchError> {
    let json = serde_json::to_string(value)
        .map_err(|e| BenchError::Child(format!("cannot encode report: {e}")))?;
    // stdout is line-buffered: the line reaches the parent at once.
    println!("{LINE_PREFIX}{kind} {json}");
    Ok(())
}

/// Counts update events; remembers when the first and the last one arrived.
struct Counter {
    target: u64,
    seen: AtomicU64,
    first: OnceLock<(Instant, f64)>,
    last: OnceLock<(Instant, f64)>,
    done: Notify,
}

impl Counter {
    fn new(target: u64) -> Arc<Self> {
        Arc::new(Self {
            target,
            seen: AtomicU64::new(0),
            first: OnceLock::new(),
            last: OnceLock::new(),
            done: Notify::new(),
        })
    }

    fn hit(&self) {
        let n = self.seen.fetch_add(1, Ordering::AcqRel) + 1;
        if n == 1 {
            let _ = self.first.set((Instant::now(), procfs::cpu_seconds()));
        }
        if n == self.target {
            let _ = self.last.set((Instant::now(), procfs::cpu_seconds()));
            self.done.notify_one();
        }
    }

    async fn wait(&self, timeout: Duration) -> Result<(), BenchError> {
        if self.target == 0 {
            return Ok(());
        }
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.done.notified();
            if self.last.get().is_some() {
                return Ok(());
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Err(BenchError::Child(format!(
                    "saw {} of {} update events in {timeout:?}",
                    self.seen.load(Ordering::Acquire),
                    self.target
                )));
            }
        }
    }
}

/// The cache under test, behind a uniform interface.
trait Cache: Send + Sync {
    fn len(&self) -> usize;
    fn gen_sum(&self) -> u64;
    /// Reads pod `name` (decoding it if the cache keeps it encoded); whether it is there.
    fn get(&self, namespace: &str, name: &str) -> bool;
    fn backlog(&self) -> Option<usize> {
        None
    }
}

/// The generation label the parent's patches bump (0 when absent).
fn gen_of(meta: &ObjectMeta) -> u64 {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(GEN_LABEL))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// A kubewright informer's store: whole objects or their metadata.
struct KubewrightCache<K>(Arc<kubewright_runtime::Informer<K>>);

impl<K> Cache for KubewrightCache<K>
where
    K: kubewright_core::Resource + Send + Sync + 'static,
{
    fn len(&self) -> usize {
        self.0.store().len()
    }
    fn get(&self, namespace: &str, name: &str) -> bool {
        std::hint::black_box(self.0.store().get_by_name(Some(namespace), name)).is_some()
    }
    fn gen_sum(&self) -> u64 {
        self.0.store().list().iter().map(|o| gen_of(o.meta())).sum()
    }
    fn backlog(&self) -> Option<usize> {
        Some(self.0.max_handler_backlog())
    }
}

type LeanPod = kubewright_runtime::lean::Lean<Pod>;

/// A lean informer's store: a read decodes the object (through the small decoded cache).
struct LeanCache(Arc<kubewright_runtime::Informer<LeanPod>>);

impl Cache for LeanCache {
    fn len(&self) -> usize {
        self.0.store().len()
    }
    fn get(&self, namespace: &str, name: &str) -> bool {
        std::hint::black_box(
            self.0
                .store()
                .get_by_name(Some(namespace), name)
                .and_then(|l| l.object().ok()),
        )
        .is_some()
    }
    fn gen_sum(&self) -> u64 {
        use kubewright_core::Resource;
        self.0.store().list().iter().map(|p| gen_of(p.meta())).sum()
    }
    fn backlog(&self) -> Option<usize> {
        Some(self.0.max_handler_backlog())
    }
}

/// A kube-rs reflector store: whole pods or their metadata.
struct KubeRsCache<K: kube::Resource + 'static>(kube::runtime::reflector::Store<K>)
where
    K::DynamicType: std::hash::Hash + Eq + Clone;

impl<K> Cache for KubeRsCache<K>
where
    K: kube::Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    fn len(&self) -> usize {
        self.0.state().len()
    }
    fn get(&self, namespace: &str, name: &str) -> bool {
        std::hint::black_box(
            self.0
                .get(&kube::runtime::reflector::ObjectRef::<K>::new(name).within(namespace)),
        )
        .is_some()
    }
    fn gen_sum(&self) -> u64 {
        self.0.state().iter().map(|o| gen_of(o.meta())).sum()
    }
}

type KubeRsMeta = kube::core::PartialObjectMeta<Pod>;

/// Something that must stay alive while the cache is measured (informers, tasks).
type Guard = Box<dyn std::any::Any + Send>;

/// Starts the variant's cache; returns once it has synced.
async fn start(
    args: &ChildArgs,
    counter: Arc<Counter>,
    timeout: Duration,
) -> Result<(Box<dyn Cache>, Guard), BenchError> {
    match args.variant {
        Variant::Kubewright
        | Variant::KubewrightKeep
        | Variant::KubewrightJson
        | Variant::KubewrightInline
        | Variant::KubewrightCaller => start_kubewright(args, counter, timeout).await,
        Variant::KubewrightLean => start_lean(args, counter, timeout).await,
        Variant::KubeRs | Variant::KubeRsStrip | Variant::KubeRsStreaming => {
            start_kube_rs(args, counter, timeout).await
        }
        Variant::KubewrightMetadata | Variant::KubewrightMetadataJson => {
            start_metadata(args, counter, timeout).await
        }
        Variant::KubeRsMetadata => start_kube_rs_metadata(args, counter, timeout).await,
        Variant::ClientGo | Variant::ClientGoStrip | Variant::ClientGoJson => {
            Err(BenchError::Child(format!(
                "{} runs in its own program (--client-go), not as a Rust child",
                args.variant
            )))
        }
    }
}

/// Counts the informer's update events, starts the factory and waits for its sync; the
/// factory and informer become the guard that keeps them running.
async fn sync_counted<K>(
    factory: kubewright_runtime::SharedInformerFactory,
    informer: Arc<kubewright_runtime::Informer<K>>,
    counter: Arc<Counter>,
    timeout: Duration,
    what: &str,
    inline: bool,
) -> Result<(Arc<kubewright_runtime::Informer<K>>, Guard), BenchError>
where
    K: kubewright_core::Resource + Send + Sync + 'static,
{
    let handler =
        kubewright_runtime::HandlerFuncs::new().on_update(move |_old, _new| counter.hit());
    if inline {
        informer.add_inline_handler(handler);
    } else {
        informer.add_handler(handler);
    }
    factory.start();
    factory
        .wait_for_cache_sync(timeout)
        .await
        .map_err(|e| BenchError::Child(format!("{what}: {e}")))?;
    Ok((informer.clone(), Box::new((factory, informer))))
}

async fn start_kubewright(
    args: &ChildArgs,
    counter: Arc<Counter>,
    timeout: Duration,
) -> Result<(Box<dyn Cache>, Guard), BenchError> {
    use kubewright_runtime::{InformerParams, ReflectorConfig, SharedInformerFactory};
    let client = kubewright_client(args)?;
    let mut factory = SharedInformerFactory::new(client)
        .with_config(ReflectorConfig::default().page_size(args.page_size))
        .strip_managed_fields(args.variant != Variant::KubewrightKeep);
    if args.variant == Variant::KubewrightJson {
        factory = factory.content_type(kubewright_client::ContentType::Json);
    }
    if args.variant == Variant::KubewrightCaller {
        factory = factory.threads(kubewright_runtime::InformerThreads::Caller);
    }
    let informer = factory.informer::<Pod>(InformerParams::default().namespace(&args.namespace));
    let inline = args.variant == Variant::KubewrightInline;
    let (informer, guard) = sync_counted(
        factory,
        informer,
        counter,
        timeout,
        "kubewright informer",
        inline,
    )
    .await?;
    Ok((Box::new(KubewrightCache(informer)), guard))
}

async fn start_lean(
    args: &ChildArgs,
    counter: Arc<Counter>,
    timeout: Duration,
) -> Result<(Box<dyn Cache>, Guard), BenchError> {
    use kubewright_runtime::{InformerParams, ReflectorConfig, SharedInformerFactory};
    let client = kubewright_client(args)?;
    let factory = SharedInformerFactory::new(client)
        .with_config(ReflectorConfig::default().page_size(args.page_size));
    let informer =
        factory.informer::<LeanPod>(InformerParams::default().namespace(&args.namespace));
    let (informer, guard) = sync_counted(
        factory,
        informer,
        counter,
        timeout,
        "kubewright lean informer",
        false,
    )
    .await?;
    Ok((Box::new(LeanCache(informer)), guard))
}

async fn start_metadata(
    args: &ChildArgs,
    counter: Arc<Counter>,
    timeout: Duration,
) -> Result<(Box<dyn Cache>, Guard), BenchError> {
    use kubewright_runtime::{InformerParams, ReflectorConfig, SharedInformerFactory};
    let client = kubewright_client(args)?;
    let mut factory = SharedInformerFactory::new(client)
        .with_config(ReflectorConfig::default().page_size(args.page_size));
    if args.variant == Variant::KubewrightMetadataJson {
        factory = factory.content_type(kubewright_client::ContentType::Json);
    }
    let pods = kubewright_core::ApiResource::erase::<Pod>(&());
    let informer =
        factory.metadata_informer(&pods, InformerParams::default().namespace(&args.namespace));
    let (informer, guard) = sync_counted(
        factory,
        informer,
        counter,
        timeout,
        "kubewright metadata informer",
        false,
    )
    .await?;
    Ok((Box::new(KubewrightCache(informer)), guard))
}

fn kubewright_client(args: &ChildArgs) -> Result<kubewright_client::Client, BenchError> {
    // Shipped defaults, client-go's 5 QPS / burst 10 included.
    let config = match &args.kubeconfig {
        Some(path) => {
            let kc = kubewright_client::config::Kubeconfig::read_from(path)
                .map_err(|e| BenchError::Child(format!("kubeconfig {}: {e}", path.display())))?;
            kubewright_client::Config::from_custom_kubeconfig(kc, &Default::default())
                .map_err(|e| BenchError::Child(format!("kubeconfig {}: {e}", path.display())))?
        }
        None => kubewright_client::Config::new(
            args.url
                .parse()
                .map_err(|e| BenchError::Child(format!("bad url {}: {e}", args.url)))?,
        ),
    };
    kubewright_client::Client::new(config)
        .map_err(|e| BenchError::Child(format!("kubewright client: {e}")))
}

async fn kube_client(args: &ChildArgs) -> Result<kube::Client, BenchError> {
    let config = match &args.kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| BenchError::Child(format!("kubeconfig {}: {e}", path.display())))?;
            kube::Config::from_custom_kubeconfig(kc, &Default::default())
                .await
                .map_err(|e| BenchError::Child(format!("kubeconfig {}: {e}", path.display())))?
        }
        None => kube::Config::new(
            args.url
                .parse()
                .map_err(|e| BenchError::Child(format!("bad url {}: {e}", args.url)))?,
        ),
    };
    kube::Client::try_from(config).map_err(|e| BenchError::Child(format!("kube client: {e}")))
}

/// Runs a kube-rs reflector stream until the process ends: counts the updates after the
/// initial sync, keeps the first errors.
fn drive_kube_rs<K, S>(
    stream: S,
    counter: Arc<Counter>,
) -> (tokio::task::JoinHandle<()>, Arc<Mutex<Vec<String>>>)
where
    S: futures::Stream<
            Item = Result<kube::runtime::watcher::Event<K>, kube::runtime::watcher::Error>,
        > + Send
        + Unpin
        + 'static,
    K: Send + 'static,
{
    use kube::runtime::watcher;
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));
    let task_errors = errors.clone();
    let mut stream = stream;
    let task = tokio::spawn(async move {
        let mut synced = false;
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(watcher::Event::Apply(_)) if synced => counter.hit(),
                Ok(watcher::Event::InitDone) => synced = true,
                Ok(_) => {}
                Err(e) => {
                    let mut errs = task_errors.lock().unwrap_or_else(|p| p.into_inner());
                    if errs.len() < 20 {
                        errs.push(e.to_string());
                    }
                }
            }
        }
    });
    (task, errors)
}

async fn start_kube_rs_metadata(
    args: &ChildArgs,
    counter: Arc<Counter>,
    timeout: Duration,
) -> Result<(Box<dyn Cache>, Guard), BenchError> {
    use kube::runtime::{WatchStreamExt, reflector, watcher};
    // kube-rs 5: an Api of PartialObjectMeta makes metadata-only requests.
    let api: kube::Api<KubeRsMeta> =
        kube::Api::namespaced(kube_client(args).await?, &args.namespace);
    let (reader, writer) = reflector::store::<KubeRsMeta>();
    let wc = watcher::Config::default().page_size(args.page_size);
    let events = watcher(api, wc)
        .default_backoff()
        .modify(|m| m.metadata.managed_fields = None);
    let (task, errors) = drive_kube_rs(reflector::reflector(writer, events).boxed(), counter);
    let ready = tokio::time::timeout(timeout, reader.wait_until_ready()).await;
    if !matches!(ready, Ok(Ok(()))) {
        let errs = errors.lock().unwrap_or_else(|p| p.into_inner()).join("; ");
        return Err(BenchError::Child(format!(
            "kube-rs metadata reflector not ready after {timeout:?}: {errs}"
        )));
    }
    Ok((Box::new(KubeRsCache(reader)), Box::new(AbortOnDrop(task))))
}

async fn start_kube_rs(
    args: &ChildArgs,
    counter: Arc<Counter>,
    timeout: Duration,
) -> Result<(Box<dyn Cache>, Guard), BenchError> {
    use kube::runtime::{WatchStreamExt, reflector, watcher};
    let api: kube::Api<Pod> = kube::Api::namespaced(kube_client(args).await?, &args.namespace);
    let (reader, writer) = reflector::store::<Pod>();
    let mut wc = watcher::Config::default().page_size(args.page_size);
    if args.variant == Variant::KubeRsStreaming {
        wc = wc.streaming_lists();
    }
    let events = if args.variant == Variant::KubeRsStrip {
        watcher(api, wc)
            .default_backoff()
            .modify(|pod| pod.metadata.managed_fields = None)
            .boxed()
    } else {
        watcher(api, wc).default_backoff().boxed()
    };
    let (task, errors) = drive_kube_rs(reflector::reflector(writer, events).boxed(), counter);
    let ready = tokio::time::timeout(timeout, reader.wait_until_ready()).await;
    if !matches!(ready, Ok(Ok(()))) {
        let errs = errors.lock().unwrap_or_else(|p| p.into_inner()).join("; ");
        return Err(BenchError::Child(format!(
            "kube-rs reflector not ready after {timeout:?}: {errs}"
        )));
    }
    Ok((Box::new(KubeRsCache(reader)), Box::new(AbortOnDrop(task))))
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The median time of reading 2,000 random pods by key, microseconds.
fn keyed_get_p50(cache: &dyn Cache, namespace: &str, pods: usize) -> f64 {
    let mut times = Vec::with_capacity(2000);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..2000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let name = crate::pods::pod_name((x % pods.max(1) as u64) as usize);
        let t = Instant::now();
        let pod = cache.get(namespace, &name);
        times.push(t.elapsed().as_secs_f64() * 1e6);
        std::hint::black_box(pod);
    }
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// Runs one child: sync, report, count events, verify, report.
pub async fn run_child(args: ChildArgs) -> Result<(), BenchError> {
    let timeout = Duration::from_secs(args.timeout_secs);
    let baseline_rss = procfs::rss();
    let counter = Counter::new(args.events);
    let cpu0 = procfs::cpu_seconds();
    let t0 = Instant::now();
    let (cache, guard) = start(&args, counter.clone(), timeout).await?;
    let cache: Arc<dyn Cache> = Arc::from(cache);
    // Synced means the initial list is in the cache; wait for the count to be sure.
    let deadline = Instant::now() + timeout;
    while cache.len() < args.pods {
        if Instant::now() > deadline {
            return Err(BenchError::Child(format!(
                "cache holds {} of {} pods after {timeout:?}",
                cache.len(),
                args.pods
            )));
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let sync_secs = t0.elapsed().as_secs_f64();
    let sync_cpu_secs = procfs::cpu_seconds() - cpu0;
    let synced_objects = cache.len();
    tokio::time::sleep(Duration::from_millis(args.settle_ms)).await;
    let rss_after_sync = procfs::rss();
    let peak_rss_sync = procfs::peak_rss();
    let get_p50_us = keyed_get_p50(&*cache, &args.namespace, args.pods);
    let sync = SyncResult {
        baseline_rss,
        sync_secs,
        sync_cpu_secs,
        synced_objects,
        rss_after_sync,
        peak_rss_sync,
        get_p50_us,
    };
    emit("synced", &sync)?;

    let sampler = cache.backlog().is_some().then(|| {
        let cache = cache.clone();
        let max = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = max.clone();
        let task = tokio::spawn(async move {
            loop {
                if let Some(b) = cache.backlog() {
                    seen.fetch_max(b, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
        (AbortOnDrop(task), max)
    });
    counter.wait(timeout).await?;
    let max_handler_backlog = sampler.map(|(_task, max)| max.load(Ordering::Relaxed) as u64);
    let (first, last) = match (counter.first.get(), counter.last.get()) {
        (Some(f), Some(l)) => (*f, *l),
        _ => ((Instant::now(), 0.0), (Instant::now(), 0.0)),
    };
    // The last event was counted by a handler after the store write; give a concurrent
    // writer (kube-rs applies before yielding, kubewright before dispatching) no chance to
    // be behind: both already are up to date here.
    let mut gen_sum = cache.gen_sum();
    let verify_deadline = Instant::now() + Duration::from_secs(10);
    while gen_sum != args.expect_gen_sum && Instant::now() < verify_deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
        gen_sum = cache.gen_sum();
    }
    let result = ChildResult {
        sync,
        events: counter.seen.load(Ordering::Acquire),
        events_secs: last.0.saturating_duration_since(first.0).as_secs_f64(),
        events_cpu_secs: (last.1 - first.1).max(0.0),
        rss_end: procfs::rss(),
        peak_rss: procfs::peak_rss(),
        gen_sum,
        verified: gen_sum == args.expect_gen_sum && cache.len() == args.pods,
        max_handler_backlog,
    };
    emit("done", &result)?;
    drop(guard);
    Ok(())
}
