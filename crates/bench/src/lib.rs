//! The informer benchmark: kubewright's informer against kube-rs's reflector, side by side
//! in one run (`kw bench`, or the `kw-bench` binary of this crate).
//!
//! The parent process starts the embedded API server, creates N realistic pods (~5 KB of
//! JSON each, plus the `managedFields` the server adds) and then, for every library
//! variant, starts a **child process** (the same binary, see [`run_child_if_requested`])
//! so that memory is measured per library. A child starts an informer (kubewright) or a
//! `watcher` + `reflector` (kube-rs) on the pods with list pages of 500, reports its sync
//! time and RSS, and counts the update events applied to its cache while the parent
//! produces E watch events (merge patches of a label and an annotation, spread over the
//! pods); it reports events/s (first to last event), CPU per event, peak RSS (`VmHWM`) and
//! RSS at the end, and checks its cache holds the exact final state.
//!
//! Two ways to produce the load ([`Mode`]):
//! * **replay** (the default): the list pages and the watch stream (E events) are recorded
//!   once from the embedded server and served byte for byte, in the same chunks, to every
//!   child by a tiny replay server. It isolates the client's decode + cache cost, and the
//!   throughput is the client's own, not the server's or the patch load's.
//! * **live**: each child lists from the embedded server and the parent patches the pods
//!   while the child watches: end to end, with the server (in the parent) and the patch
//!   load competing with the child for the CPUs, so events/s is bounded by the server;
//!   compare CPU per event there.
//!
//! ```no_run
//! # async fn demo() -> Result<(), kubewright_bench::BenchError> {
//! // In `main`, before anything else:
//! if let Some(code) = kubewright_bench::run_child_if_requested().await {
//!     std::process::exit(if code == std::process::ExitCode::SUCCESS { 0 } else { 1 });
//! }
//! let report = kubewright_bench::run(kubewright_bench::BenchOptions::quick()).await?;
//! println!("{report}");
//! # Ok(()) }
//! ```

mod child;
mod load;
pub mod pods;
mod procfs;
mod replay;
mod report;

pub use child::{
    CHILD_COMMAND, ChildArgs, ChildResult, SyncResult, run_child, run_child_if_requested,
};
pub use report::{NotRun, RecordingInfo, Report, VariantReport};

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::str::FromStr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

/// Errors of a benchmark run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// Bad options.
    #[error("invalid options: {0}")]
    Options(String),
    /// The embedded server, the pods or the recording could not be set up.
    #[error("setup failed: {0}")]
    Setup(String),
    /// A child process failed (inside the child).
    #[error("{0}")]
    Child(String),
    /// A child process failed (seen from the parent).
    #[error("{variant} child ({mode}) failed: {message}")]
    ChildFailed {
        /// The variant it ran.
        variant: Variant,
        /// The mode it ran in.
        mode: Mode,
        /// What went wrong, with the end of its stderr.
        message: String,
    },
}

/// A library and its configuration under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Variant {
    /// kubewright `SharedInformerFactory` informer, default settings (protobuf for
    /// built-in kinds, `managedFields` skipped while decoding).
    Kubewright,
    /// The same with `strip_managed_fields(false)`: objects cached with `managedFields`.
    KubewrightKeep,
    /// The default informer asking for JSON (`content_type(ContentType::Json)`).
    KubewrightJson,
    /// A lean informer (`Informer<Lean<Pod>>`): objects kept encoded, decoded on read.
    KubewrightLean,
    /// The default informer counting with an inline handler
    /// (`Informer::add_inline_handler`, as a controller's handlers run) instead of a
    /// handler in its own task.
    KubewrightInline,
    /// The default informer with the factory's informers on the caller's runtime
    /// (`InformerThreads::Caller`) rather than on threads of the factory's own, counting
    /// with a handler task.
    KubewrightCaller,
    /// kube-rs `watcher` + `reflector`, default settings, with `default_backoff()` as
    /// kube-rs's documentation uses it (without a backoff a watcher retries a failed
    /// request at once, and at shutdown that loop never yields).
    KubeRs,
    /// The same with `.modify()` removing `managedFields` before the reflector.
    KubeRsStrip,
    /// kube-rs with streaming lists (`watcher::Config::streaming_lists()`).
    KubeRsStreaming,
    /// A kubewright metadata-only informer (`PartialObjectMetadata`, protobuf by default,
    /// `managedFields` skipped); live and cluster modes only.
    KubewrightMetadata,
    /// The same asking for JSON.
    KubewrightMetadataJson,
    /// kube-rs `metadata_watcher` + `reflector`, `managedFields` removed before it.
    KubeRsMetadata,
    /// client-go's shared informer with its defaults (protobuf for built-in kinds), run
    /// by an external program given with `--client-go` that speaks the child protocol
    /// (see [`BenchOptions::client_go`]); cluster mode only.
    ClientGo,
    /// The same with an informer transform that drops `managedFields`.
    ClientGoStrip,
    /// client-go asking for JSON.
    ClientGoJson,
}

impl Variant {
    /// Every variant: the default ones, then the metadata-only ones (run when named).
    pub const ALL: [Variant; 15] = [
        Variant::Kubewright,
        Variant::KubewrightKeep,
        Variant::KubewrightJson,
        Variant::KubewrightLean,
        Variant::KubewrightInline,
        Variant::KubewrightCaller,
        Variant::KubeRs,
        Variant::KubeRsStrip,
        Variant::KubeRsStreaming,
        Variant::KubewrightMetadata,
        Variant::KubewrightMetadataJson,
        Variant::KubeRsMetadata,
        Variant::ClientGo,
        Variant::ClientGoStrip,
        Variant::ClientGoJson,
    ];

    /// The variants run by default, in table order: all but the metadata-only ones.
    pub const DEFAULT: &'static [Variant] = Self::ALL.split_at(9).0;

    /// The name used on the command line and in the table.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Kubewright => "kubewright",
            Variant::KubewrightKeep => "kubewright+managedFields",
            Variant::KubewrightJson => "kubewright+json",
            Variant::KubewrightLean => "kubewright+lean",
            Variant::KubewrightInline => "kubewright+inline",
            Variant::KubewrightCaller => "kubewright+caller-runtime",
            Variant::KubeRs => "kube-rs",
            Variant::KubeRsStrip => "kube-rs+strip",
            Variant::KubeRsStreaming => "kube-rs+streaming",
            Variant::KubewrightMetadata => "kubewright+metadata",
            Variant::KubewrightMetadataJson => "kubewright+metadata+json",
            Variant::KubeRsMetadata => "kube-rs+metadata",
            Variant::ClientGo => "client-go",
            Variant::ClientGoStrip => "client-go+strip",
            Variant::ClientGoJson => "client-go+json",
        }
    }

    /// Whether the variant caches only metadata (`PartialObjectMetadata`): the replay
    /// recording holds whole pods, so these run against a server only.
    pub fn is_metadata(self) -> bool {
        matches!(
            self,
            Variant::KubewrightMetadata | Variant::KubewrightMetadataJson | Variant::KubeRsMetadata
        )
    }

    /// Whether an external client-go program runs this variant.
    pub fn is_client_go(self) -> bool {
        matches!(
            self,
            Variant::ClientGo | Variant::ClientGoStrip | Variant::ClientGoJson
        )
    }

    /// Why the variant cannot run in `mode`, if it cannot.
    pub fn unsupported(self, mode: Mode) -> Option<&'static str> {
        match mode {
            Mode::Cluster => None,
            _ if self.is_client_go() => Some(
                "the client-go program reaches a server through a kubeconfig: use --kubeconfig",
            ),
            Mode::Replay => self.replay_unsupported(),
            Mode::Live => None,
        }
    }

    /// Why the variant cannot run against the replay server, if it cannot.
    pub fn replay_unsupported(self) -> Option<&'static str> {
        if self.is_metadata() {
            Some("it caches metadata only, which a replayed recording of whole pods cannot serve")
        } else if self == Variant::KubeRsStreaming {
            Some(
                "the replay server refuses streaming lists (as a server without WatchList does) \
                 and kube-rs does not fall back to a list: use --mode live or --kubeconfig",
            )
        } else {
            None
        }
    }

    /// Whether this is a kubewright variant.
    pub fn is_kubewright(self) -> bool {
        !self.is_client_go()
            && !matches!(
                self,
                Variant::KubeRs
                    | Variant::KubeRsStrip
                    | Variant::KubeRsStreaming
                    | Variant::KubeRsMetadata
            )
    }

    /// The kube-rs variant that caches the same content as a kubewright variant.
    pub fn baseline(self) -> Option<Variant> {
        match self {
            Variant::Kubewright
            | Variant::KubewrightJson
            | Variant::KubewrightLean
            | Variant::KubewrightInline
            | Variant::KubewrightCaller => Some(Variant::KubeRsStrip),
            Variant::KubewrightKeep => Some(Variant::KubeRs),
            Variant::KubewrightMetadata | Variant::KubewrightMetadataJson => {
                Some(Variant::KubeRsMetadata)
            }
            Variant::KubeRs
            | Variant::KubeRsStrip
            | Variant::KubeRsStreaming
            | Variant::KubeRsMetadata
            | Variant::ClientGo
            | Variant::ClientGoStrip
            | Variant::ClientGoJson => None,
        }
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Variant {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Variant::ALL
            .into_iter()
            .find(|v| v.name() == s.trim())
            .ok_or_else(|| {
                format!(
                    "unknown library variant {s:?} (expected one of {})",
                    Variant::ALL.map(Variant::name).join(", ")
                )
            })
    }
}

/// Where a child's list and watch come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Mode {
    /// Recorded list pages and watch stream, replayed identically to every child.
    Replay,
    /// The embedded API server, with the parent patching pods during the watch.
    Live,
    /// A real cluster (`--kubeconfig`), with the parent patching pods during the watch.
    Cluster,
}

impl Mode {
    /// The name used on the command line and in the table.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Replay => "replay",
            Mode::Live => "live",
            Mode::Cluster => "cluster",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "replay" => Ok(Mode::Replay),
            "live" => Ok(Mode::Live),
            "cluster" => Ok(Mode::Cluster),
            other => Err(format!(
                "unknown mode {other:?} (expected replay, live or cluster)"
            )),
        }
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// Pods to create and sync.
    pub pods: usize,
    /// Watch events (pod updates) after the sync.
    pub events: usize,
    /// Variants to run, in this order.
    pub variants: Vec<Variant>,
    /// Modes to run (each variant runs once per mode).
    pub modes: Vec<Mode>,
    /// List page size (both libraries).
    pub page_size: u32,
    /// Update events of the replay recording that go through the server (the rest are
    /// synthesized from the listed pods and the server's own events, which the
    /// synthesis is checked against); `None`: all of them. The embedded server applies a
    /// few hundred merge patches per second to these pods, so recording 100,000 real
    /// events takes minutes.
    pub events_from_server: Option<usize>,
    /// Re-frame the replayed watch stream into chunks of this many bytes, ignoring event
    /// boundaries (e.g. 16384, the size of a TLS record or HTTP/2 frame), instead of the
    /// server's framing (about one event per chunk).
    pub replay_chunk_bytes: Option<usize>,
    /// Concurrent requests of the parent when creating and patching pods.
    pub concurrency: usize,
    /// Runs of each variant, in rounds; the table shows the median of every measurement.
    pub repeat: usize,
    /// Executable to start the children with (default: the current executable, which
    /// must call [`run_child_if_requested`] first thing in `main`).
    pub child_exe: Option<PathBuf>,
    /// A command that wraps every child, e.g. `["heaptrack", "-o", "/tmp/ht"]` or
    /// `["perf", "record", "-g", "-o", "/tmp/perf.data", "--"]` (profiling). The default
    /// comes from the environment variable `KW_BENCH_CHILD_WRAPPER` (split at spaces).
    pub child_wrapper: Vec<String>,
    /// Give up on a phase after this long.
    pub timeout: Duration,
    /// Print progress to stderr.
    pub progress: bool,
    /// Run against the real cluster of this kubeconfig (its current context) instead of
    /// the embedded server: mode [`Mode::Cluster`]. The pods go to a namespace of their
    /// own, deleted at the end.
    pub kubeconfig: Option<PathBuf>,
    /// The program that runs the client-go variants (default: the environment variable
    /// `KW_BENCH_CLIENT_GO`). It is started as `PROGRAM --variant client-go[+strip|+json]
    /// --kubeconfig FILE --namespace NS --pods N --events E --expect-gen-sum S ...` (the
    /// arguments of [`ChildArgs`]) and must print the two report lines a Rust child
    /// prints (`KWBENCH synced {SyncResult}` and `KWBENCH done {ChildResult}`).
    /// No such program is in the repository (CI has no Go toolchain): any client-go
    /// program that speaks this protocol can be measured beside the Rust clients.
    pub client_go: Option<PathBuf>,
}

impl Default for BenchOptions {
    /// The issue's size: 20,000 pods, 100,000 events, every variant, replay mode.
    fn default() -> Self {
        Self {
            pods: 20_000,
            events: 100_000,
            variants: Variant::DEFAULT.to_vec(),
            modes: vec![Mode::Replay],
            page_size: 500,
            events_from_server: Some(1_000),
            replay_chunk_bytes: None,
            concurrency: 32,
            repeat: 1,
            child_exe: None,
            child_wrapper: std::env::var("KW_BENCH_CHILD_WRAPPER")
                .map(|w| w.split_whitespace().map(str::to_string).collect())
                .unwrap_or_default(),
            client_go: std::env::var_os("KW_BENCH_CLIENT_GO").map(PathBuf::from),
            timeout: Duration::from_secs(900),
            progress: true,
            kubeconfig: None,
        }
    }
}

impl BenchOptions {
    /// A preset for CI: 2,000 pods, 10,000 events, every variant, replay mode (well under
    /// a minute on 2 cores).
    pub fn quick() -> Self {
        Self {
            pods: 2_000,
            events: 10_000,
            timeout: Duration::from_secs(300),
            ..Self::default()
        }
    }

    fn validate(&self) -> Result<(), BenchError> {
        if self.pods == 0 {
            return Err(BenchError::Options("--pods must be at least 1".into()));
        }
        if self.variants.is_empty() {
            return Err(BenchError::Options("no library variant selected".into()));
        }
        if self.modes.is_empty() {
            return Err(BenchError::Options("no mode selected".into()));
        }
        if self.kubeconfig.is_none()
            && self.modes.contains(&Mode::Replay)
            && let Some(v) = self.variants.iter().find(|v| v.is_metadata())
        {
            return Err(BenchError::Options(format!(
                "{v} caches metadata only, which a replayed recording of whole pods cannot \
                 serve: use --mode live or --kubeconfig"
            )));
        }
        if self.client_go.is_none()
            && let Some(v) = self.variants.iter().find(|v| v.is_client_go())
        {
            return Err(BenchError::Options(format!(
                "{v} needs --client-go PROGRAM (or KW_BENCH_CLIENT_GO): a client-go program \
                 that speaks the child protocol"
            )));
        }
        let (children, not_run) = plan(self);
        if children.is_empty() {
            let why: Vec<String> = not_run
                .iter()
                .map(|n| format!("{} in {} mode: {}", n.variant, n.mode, n.reason))
                .collect();
            return Err(BenchError::Options(format!(
                "nothing to run: {}",
                why.join("; ")
            )));
        }
        if self.page_size == 0 {
            return Err(BenchError::Options("--page-size must be at least 1".into()));
        }
        if self.kubeconfig.is_some() != (self.modes == [Mode::Cluster]) {
            return Err(BenchError::Options(
                "mode cluster and --kubeconfig go together (and with no other mode)".into(),
            ));
        }
        Ok(())
    }
}

/// The order of the children in round `round`: each round starts one child later, so that
/// an effect of position (such as running right after the previous round's largest child
/// has exited) does not always fall on the same variant.
fn round_order(n: usize, round: usize) -> impl Iterator<Item = usize> {
    (0..n).map(move |k| (k + round) % n)
}

/// The (mode, variant) children to run, in table order, and the selected variants a mode
/// cannot run. kube-rs with streaming lists cannot sync from the replay server (it retries
/// the refused streaming list forever), so it is left out of replay mode, and the report
/// says so.
fn plan(opts: &BenchOptions) -> (Vec<(Mode, Variant)>, Vec<NotRun>) {
    let mut pairs = Vec::new();
    let mut not_run = Vec::new();
    for &mode in &opts.modes {
        for &variant in &opts.variants {
            match variant.unsupported(mode) {
                Some(reason) => not_run.push(NotRun {
                    variant,
                    mode,
                    reason: reason.to_string(),
                }),
                None => pairs.push((mode, variant)),
            }
        }
    }
    (pairs, not_run)
}

/// Command-line options of `kw bench` / `kw-bench` (flatten into a clap command).
#[derive(Clone, Debug, clap::Args)]
pub struct BenchArgs {
    /// Number of pods to create and sync [default: 20000, quick: 2000].
    #[arg(long)]
    pub pods: Option<usize>,
    /// Number of watch events (pod updates) after the sync [default: 100000, quick: 10000].
    #[arg(long)]
    pub events: Option<usize>,
    /// Library variants, comma-separated: kubewright, kubewright+managedFields,
    /// kubewright+json, kubewright+lean, kubewright+inline, kubewright+caller-runtime, kube-rs,
    /// kube-rs+strip, kube-rs+streaming [default: these nine; replay mode leaves out
    /// kube-rs+streaming, which needs a server with streaming lists], and the metadata-only
    /// kubewright+metadata, kubewright+metadata+json and kube-rs+metadata (live and
    /// cluster modes), and client-go, client-go+strip and client-go+json (cluster mode,
    /// with --client-go).
    #[arg(long, value_delimiter = ',')]
    pub libs: Vec<String>,
    /// replay (recorded list + watch stream replayed to each child: client cost only),
    /// live (embedded server, patches during the watch: end to end), or both
    /// [default: replay].
    #[arg(long)]
    pub mode: Option<String>,
    /// Small preset for CI: 2,000 pods, 10,000 events.
    #[arg(long)]
    pub quick: bool,
    /// Concurrent create/patch requests of the load generator.
    #[arg(long)]
    pub concurrency: Option<usize>,
    /// List page size.
    #[arg(long, default_value_t = 500)]
    pub page_size: u32,
    /// Replay recording: how many update events go through the server; the rest are
    /// synthesized from the listed pods and the server's events (checked against them).
    /// A number, or `all` [default: 1000].
    #[arg(long)]
    pub events_from_server: Option<String>,
    /// Replay the watch stream in chunks of this many bytes regardless of event boundaries
    /// (e.g. 16384, a TLS record) instead of the server's framing.
    #[arg(long)]
    pub replay_chunk_bytes: Option<usize>,
    /// Run each variant this many times, in rounds (every variant once per round), and
    /// report medians (less noise on a busy machine).
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    /// No progress messages on stderr.
    #[arg(long)]
    pub quiet: bool,
    /// Run against the real cluster of this kubeconfig (current context): pods are
    /// created in a namespace of their own, patched during the watch, and deleted at the
    /// end. Implies `--mode cluster`.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The program that runs the client-go variants (client-go, client-go+strip,
    /// client-go+json), speaking the child protocol [default: $KW_BENCH_CLIENT_GO].
    #[arg(long)]
    pub client_go: Option<PathBuf>,
}

impl BenchArgs {
    /// The options these arguments describe.
    pub fn into_options(self) -> Result<BenchOptions, BenchError> {
        let mut o = if self.quick {
            BenchOptions::quick()
        } else {
            BenchOptions::default()
        };
        if let Some(p) = self.pods {
            o.pods = p;
        }
        if let Some(e) = self.events {
            o.events = e;
        }
        if !self.libs.is_empty() {
            o.variants = self
                .libs
                .iter()
                .filter(|s| !s.trim().is_empty())
                .map(|s| s.parse().map_err(BenchError::Options))
                .collect::<Result<_, _>>()?;
        }
        if let Some(m) = self.mode {
            o.modes = match m.trim() {
                "both" => vec![Mode::Replay, Mode::Live],
                other => vec![other.parse().map_err(BenchError::Options)?],
            };
        }
        if let Some(c) = self.concurrency {
            o.concurrency = c.max(1);
        }
        o.page_size = self.page_size;
        o.repeat = self.repeat.max(1);
        o.replay_chunk_bytes = self.replay_chunk_bytes.filter(|n| *n > 0);
        if let Some(n) = self.events_from_server {
            o.events_from_server = match n.trim() {
                "all" => None,
                n => Some(n.parse().map_err(|_| {
                    BenchError::Options(format!(
                        "--events-from-server takes a number or `all`, not {n:?}"
                    ))
                })?),
            };
        }
        o.progress = !self.quiet;
        if let Some(p) = self.client_go {
            o.client_go = Some(p);
        }
        if let Some(k) = self.kubeconfig {
            o.kubeconfig = Some(k);
            o.modes = vec![Mode::Cluster];
        }
        o.validate()?;
        Ok(o)
    }
}

const NAMESPACE: &str = "kw-bench";

fn progress(opts: &BenchOptions, msg: impl fmt::Display) {
    if opts.progress {
        eprintln!("[kw bench] {msg}");
    }
}

/// Runs the benchmark and returns the comparison (print it with `{}`).
pub async fn run(opts: BenchOptions) -> Result<Report, BenchError> {
    opts.validate()?;
    let exe = match &opts.child_exe {
        Some(p) => p.clone(),
        None => std::env::current_exe()
            .map_err(|e| BenchError::Setup(format!("cannot find the current executable: {e}")))?,
    };
    let started = Instant::now();
    if let Some(kubeconfig) = opts.kubeconfig.clone() {
        return run_cluster(&opts, &exe, kubeconfig, started).await;
    }
    let replays = opts.modes.contains(&Mode::Replay);
    let server = kubewright_apiserver::TestServer::builder()
        .history(opts.pods + opts.events + 10_000)
        .start()
        .await
        .map_err(|e| BenchError::Setup(format!("embedded server: {e}")))?;
    let http = load::Http::new(&server.url());
    progress(&opts, format_args!("creating {} pods", opts.pods));
    let t = Instant::now();
    load::create_pods(&http, NAMESPACE, opts.pods, opts.concurrency).await?;
    let create_secs = t.elapsed().as_secs_f64();

    // The recording always runs first: it applies updates 0..events, so the live runs
    // continue the numbering and every child knows the final generation sum.
    let mut applied = 0usize;
    let mut replay_server = None;
    let mut list_stats = None;
    let mut recording = None;
    if replays {
        progress(
            &opts,
            format_args!("recording the list and {} watch events", opts.events),
        );
        let t = Instant::now();
        let mut rec = load::record(
            &http,
            NAMESPACE,
            opts.pods,
            opts.events,
            opts.events_from_server.unwrap_or(opts.events),
            opts.page_size,
            opts.concurrency,
            opts.timeout,
        )
        .await?;
        applied += opts.events;
        if let Some(size) = opts.replay_chunk_bytes {
            rec.rechunk(size);
        }
        list_stats = Some((rec.list_bytes, rec.watch_bytes, t.elapsed().as_secs_f64()));
        recording = Some(RecordingInfo {
            server_events: rec.server_events,
            server_chunks: rec.server_chunks,
            server_aligned_chunks: rec.server_aligned_chunks,
            chunks: rec.watch.len(),
            rechunked: opts.replay_chunk_bytes,
        });
        replay_server = Some(replay::ReplayServer::start(NAMESPACE, rec).await?);
    }
    let list_bytes = match list_stats {
        Some((b, _, _)) => b,
        None => measure_list_bytes(&http, NAMESPACE, opts.page_size).await?,
    };

    // One child of (mode, variant): against the replay server, or against the embedded
    // server while the parent applies the next `events` updates.
    let one_child = async |mode: Mode, variant: Variant, applied: &mut usize| {
        let (url, first_update) = match (mode, &replay_server) {
            (Mode::Replay, Some(r)) => {
                r.hold();
                (r.url().to_string(), None)
            }
            _ => (server.url(), Some(*applied)),
        };
        let expect_gen_sum = first_update.unwrap_or(0) + opts.events;
        let args = ChildArgs {
            variant,
            mode,
            url,
            kubeconfig: None,
            namespace: NAMESPACE.to_string(),
            pods: opts.pods,
            events: opts.events as u64,
            expect_gen_sum: expect_gen_sum as u64,
            page_size: opts.page_size,
            settle_ms: 500,
            timeout_secs: opts.timeout.as_secs().max(1),
        };
        let result = run_one(&exe, args, &opts, |_| async {
            match first_update {
                Some(first) => {
                    load::apply_updates(
                        &http,
                        NAMESPACE,
                        opts.pods,
                        first,
                        opts.events,
                        opts.concurrency,
                    )
                    .await
                }
                None => {
                    if let Some(r) = &replay_server {
                        r.release();
                    }
                    Ok(())
                }
            }
        })
        .await?;
        if first_update.is_some() {
            *applied += opts.events;
        }
        Ok::<_, BenchError>(result)
    };
    let (pairs, not_run) = plan(&opts);
    // A discarded first child: the first child after the setup ran consistently
    // slower, whichever variant it was (see `run_cluster`).
    if let Some(&(mode, variant)) = pairs.first() {
        progress(
            &opts,
            format_args!("{variant} ({mode}), warm-up run, not counted"),
        );
        one_child(mode, variant, &mut applied).await?;
    }
    // Repeats run in rounds (every variant once, then again, each round starting one
    // variant later), so that a machine that drifts during the run weighs on every
    // variant alike.
    let mut runs: Vec<Vec<ChildResult>> = vec![Vec::new(); pairs.len()];
    for round in 0..opts.repeat.max(1) {
        for i in round_order(pairs.len(), round) {
            let (mode, variant) = pairs[i];
            if opts.repeat > 1 {
                progress(
                    &opts,
                    format_args!("{variant} ({mode}), run {} of {}", round + 1, opts.repeat),
                );
            } else {
                progress(&opts, format_args!("{variant} ({mode})"));
            }
            runs[i].push(one_child(mode, variant, &mut applied).await?);
        }
    }
    let results = pairs
        .iter()
        .zip(runs)
        .map(|(&(mode, variant), runs)| VariantReport {
            variant,
            mode,
            result: report::median(&runs),
            runs,
        })
        .collect();
    Ok(Report {
        pods: opts.pods,
        events: opts.events,
        page_size: opts.page_size,
        avg_object_bytes: list_bytes / opts.pods.max(1),
        watch_bytes: list_stats.map(|(_, w, _)| w),
        create_secs,
        record_secs: list_stats.map(|(_, _, s)| s),
        total_secs: started.elapsed().as_secs_f64(),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        recording,
        results,
        not_run,
    })
}

/// The benchmark against a real cluster: pods in a namespace of their own, every
/// variant synced from the cluster while the parent patches the pods.
async fn run_cluster(
    opts: &BenchOptions,
    exe: &Path,
    kubeconfig: PathBuf,
    started: Instant,
) -> Result<Report, BenchError> {
    let http = load::Http::kube(&kubeconfig)?;
    let namespace = format!("kw-bench-{:08x}", rand_u32());
    progress(
        opts,
        format_args!(
            "creating {} pods in namespace {namespace} of the cluster",
            opts.pods
        ),
    );
    let t = Instant::now();
    let outcome = async {
        load::create_cluster_pods(&http, &namespace, opts.pods, opts.concurrency).await?;
        let create_secs = t.elapsed().as_secs_f64();
        let list_bytes = measure_list_bytes(&http, &namespace, opts.page_size).await?;
        let mut applied = 0usize;
        // One child of `variant` while the parent applies the next `events` updates.
        let one_child = async |variant: Variant, events: usize, applied: &mut usize| {
            let first = *applied;
            let args = ChildArgs {
                variant,
                mode: Mode::Cluster,
                url: String::new(),
                kubeconfig: Some(kubeconfig.clone()),
                namespace: namespace.clone(),
                pods: opts.pods,
                events: events as u64,
                expect_gen_sum: (first + events) as u64,
                page_size: opts.page_size,
                settle_ms: 500,
                timeout_secs: opts.timeout.as_secs().max(1),
            };
            let result = run_one(exe, args, opts, |_| {
                load::apply_updates(
                    &http,
                    &namespace,
                    opts.pods,
                    first,
                    events,
                    opts.concurrency,
                )
            })
            .await?;
            *applied += events;
            Ok::<_, BenchError>(result)
        };
        // A discarded first child: right after the creations kube-apiserver, etcd and
        // the controllers are still busy with them, and the first child measured was
        // consistently the slowest whichever variant it ran.
        if let Some(&variant) = opts.variants.first() {
            progress(
                opts,
                format_args!("{variant} (cluster), warm-up run, not counted"),
            );
            one_child(variant, opts.events.min(200), &mut applied).await?;
        }
        // Repeats run in rounds, as in the other modes.
        let mut runs: Vec<Vec<ChildResult>> = vec![Vec::new(); opts.variants.len()];
        for round in 0..opts.repeat.max(1) {
            for i in round_order(opts.variants.len(), round) {
                let variant = opts.variants[i];
                progress(
                    opts,
                    format_args!("{variant} (cluster), run {} of {}", round + 1, opts.repeat),
                );
                runs[i].push(one_child(variant, opts.events, &mut applied).await?);
            }
        }
        let results: Vec<VariantReport> = opts
            .variants
            .iter()
            .zip(runs)
            .map(|(&variant, runs)| VariantReport {
                variant,
                mode: Mode::Cluster,
                result: report::median(&runs),
                runs,
            })
            .collect();
        Ok::<_, BenchError>((create_secs, list_bytes, results))
    }
    .await;
    progress(opts, format_args!("deleting namespace {namespace}"));
    let deleted = http
        .delete(&format!("/api/v1/namespaces/{namespace}"))
        .await;
    let (create_secs, list_bytes, results) = outcome?;
    deleted?;
    Ok(Report {
        pods: opts.pods,
        events: opts.events,
        page_size: opts.page_size,
        avg_object_bytes: list_bytes / opts.pods.max(1),
        watch_bytes: None,
        create_secs,
        record_secs: None,
        total_secs: started.elapsed().as_secs_f64(),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        recording: None,
        results,
        not_run: Vec::new(),
    })
}

fn rand_u32() -> u32 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    t ^ std::process::id().rotate_left(16)
}

/// Bytes of one full paged list (to report the object size when nothing was recorded).
async fn measure_list_bytes(
    http: &load::Http,
    namespace: &str,
    page_size: u32,
) -> Result<usize, BenchError> {
    let mut total = 0;
    let mut token = String::new();
    loop {
        let mut path = format!("/api/v1/namespaces/{namespace}/pods?limit={page_size}");
        if !token.is_empty() {
            path.push_str("&continue=");
            path.extend(form_urlencoded::byte_serialize(token.as_bytes()));
        }
        let body = http.get(&path).await?;
        total += body.len();
        let v: serde_json::Value = serde_json::from_slice(&body)
            .map_err(|e| BenchError::Setup(format!("list page: {e}")))?;
        match v["metadata"]["continue"].as_str().filter(|c| !c.is_empty()) {
            Some(c) => token = c.to_string(),
            None => return Ok(total),
        }
    }
}

/// Starts one child, waits for its sync report, runs `load` (which produces the events),
/// and waits for its final report.
async fn run_one<F, Fut>(
    exe: &Path,
    args: ChildArgs,
    opts: &BenchOptions,
    load: F,
) -> Result<ChildResult, BenchError>
where
    F: FnOnce(&SyncResult) -> Fut,
    Fut: Future<Output = Result<(), BenchError>>,
{
    let (variant, mode) = (args.variant, args.mode);
    let fail = |message: String| BenchError::ChildFailed {
        variant,
        mode,
        message,
    };
    // client-go variants run the external program, Rust ones this executable as a child.
    let (exe, child_command) = match (&opts.client_go, variant.is_client_go()) {
        (Some(program), true) => (program.as_path(), None),
        (None, true) => return Err(fail("no client-go program (--client-go)".into())),
        (_, false) => (exe, Some(CHILD_COMMAND)),
    };
    let mut command = match opts.child_wrapper.split_first() {
        Some((program, rest)) => {
            let mut c = tokio::process::Command::new(program);
            c.args(rest).arg(exe);
            c
        }
        None => tokio::process::Command::new(exe),
    };
    let mut child = command
        .args(child_command)
        .args(args.to_args())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| fail(format!("cannot start {}: {e}", exe.display())))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| fail("no stdout".into()))?;
    let mut stderr = child
        .stderr
        .take()
        .ok_or_else(|| fail("no stderr".into()))?;
    let stderr_task = tokio::spawn(async move {
        let mut buf = Vec::new();
        let _ = stderr.read_to_end(&mut buf).await;
        let text = String::from_utf8_lossy(&buf).into_owned();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    });
    let mut lines = BufReader::new(stdout).lines();
    let timeout = opts.timeout;
    let outcome = async {
        let sync: SyncResult = next_report(&mut lines, "synced", timeout).await?;
        progress(
            opts,
            format_args!(
                "  synced {} pods in {:.2} s, RSS {:.0} MiB",
                sync.synced_objects,
                sync.sync_secs,
                mib(sync.rss_after_sync)
            ),
        );
        let producing = load(&sync);
        let reading = next_report::<ChildResult>(&mut lines, "done", timeout);
        let (produced, done) = tokio::join!(producing, reading);
        produced?;
        done
    }
    .await;
    let result = match outcome {
        Ok(r) => r,
        Err(e) => {
            let _ = child.start_kill();
            let _ = child.wait().await;
            let tail = stderr_task.await.unwrap_or_default();
            return Err(fail(format!("{e}\n{tail}")));
        }
    };
    let status = tokio::time::timeout(Duration::from_secs(60), child.wait()).await;
    if !matches!(status, Ok(Ok(s)) if s.success()) {
        let _ = child.start_kill();
        let tail = stderr_task.await.unwrap_or_default();
        return Err(fail(format!(
            "child did not exit cleanly: {status:?}\n{tail}"
        )));
    }
    progress(
        opts,
        format_args!(
            "  {} events at {:.0}/s, peak RSS {:.0} MiB{}",
            result.events,
            result.events_per_sec(),
            mib(result.peak_rss),
            if result.verified {
                ""
            } else {
                ", CACHE NOT VERIFIED"
            }
        ),
    );
    Ok(result)
}

/// Reads the child's stdout until its `KWBENCH <kind> {json}` line.
async fn next_report<T: serde::de::DeserializeOwned>(
    lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    kind: &str,
    timeout: Duration,
) -> Result<T, BenchError> {
    let prefix = format!("{}{kind} ", child::LINE_PREFIX);
    let read = async {
        loop {
            match lines.next_line().await {
                Ok(Some(line)) => {
                    if let Some(json) = line.strip_prefix(&prefix) {
                        return serde_json::from_str(json).map_err(|e| {
                            BenchError::Child(format!("bad {kind} report {json:?}: {e}"))
                        });
                    }
                }
                Ok(None) => {
                    return Err(BenchError::Child(format!(
                        "exited before its {kind} report"
                    )));
                }
                Err(e) => return Err(BenchError::Child(format!("reading its output: {e}"))),
            }
        }
    };
    tokio::time::timeout(timeout, read)
        .await
        .map_err(|_| BenchError::Child(format!("no {kind} report within {timeout:?}")))?
}

pub(crate) fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_mode_leaves_out_what_it_cannot_serve_and_says_why() {
        let mut opts = BenchOptions::quick();
        opts.modes = vec![Mode::Replay, Mode::Live];
        let (pairs, not_run) = plan(&opts);
        assert!(!pairs.contains(&(Mode::Replay, Variant::KubeRsStreaming)));
        assert!(pairs.contains(&(Mode::Live, Variant::KubeRsStreaming)));
        assert!(pairs.contains(&(Mode::Replay, Variant::Kubewright)));
        assert_eq!(pairs.len(), 2 * Variant::DEFAULT.len() - 1);
        assert_eq!(not_run.len(), 1);
        assert_eq!(
            (not_run[0].mode, not_run[0].variant),
            (Mode::Replay, Variant::KubeRsStreaming)
        );
        assert!(not_run[0].reason.contains("streaming lists"));
    }

    #[test]
    fn each_round_starts_one_child_later() {
        let rounds: Vec<Vec<usize>> = (0..4).map(|r| round_order(3, r).collect()).collect();
        assert_eq!(rounds, [[0, 1, 2], [1, 2, 0], [2, 0, 1], [0, 1, 2]]);
        assert_eq!(round_order(0, 5).count(), 0);
    }

    #[test]
    fn a_replay_run_of_only_unservable_variants_is_an_options_error() {
        let args = |libs: &str| BenchArgs {
            pods: None,
            events: None,
            libs: vec![libs.to_string()],
            mode: None,
            quick: true,
            concurrency: None,
            page_size: 500,
            events_from_server: None,
            replay_chunk_bytes: None,
            repeat: 1,
            quiet: true,
            kubeconfig: None,
            client_go: None,
        };
        let err = args("kube-rs+streaming").into_options().unwrap_err();
        assert!(err.to_string().contains("--mode live"), "{err}");
        let err = args("kube-rs+metadata").into_options().unwrap_err();
        assert!(err.to_string().contains("metadata only"), "{err}");
        assert!(args("kube-rs").into_options().is_ok());
    }

    #[test]
    fn client_go_runs_its_own_program_against_a_cluster_only() {
        let mut o = BenchOptions::quick();
        o.client_go = None;
        o.variants = vec![Variant::Kubewright, Variant::ClientGo];
        let err = o.validate().unwrap_err();
        assert!(err.to_string().contains("--client-go"), "{err}");
        o.client_go = Some("/opt/bench/client-go-child".into());
        // Replay mode: kubewright runs, client-go is reported as not run.
        let (children, not_run) = plan(&o);
        assert_eq!(children, [(Mode::Replay, Variant::Kubewright)]);
        assert_eq!(not_run.len(), 1);
        assert!(
            not_run[0].reason.contains("--kubeconfig"),
            "{}",
            not_run[0].reason
        );
        o.modes = vec![Mode::Cluster];
        o.kubeconfig = Some("/tmp/kubeconfig".into());
        let (children, not_run) = plan(&o);
        assert_eq!(
            children,
            [
                (Mode::Cluster, Variant::Kubewright),
                (Mode::Cluster, Variant::ClientGo)
            ]
        );
        assert!(not_run.is_empty());
        assert!(o.validate().is_ok());
        assert_eq!(
            "client-go+strip".parse::<Variant>(),
            Ok(Variant::ClientGoStrip)
        );
        assert!(!Variant::ClientGo.is_kubewright());
    }
}
