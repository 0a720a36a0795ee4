//! The comparison table.

use crate::{ChildResult, Mode, Variant, mib};
use std::fmt;

/// How the replay stream was made.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RecordingInfo {
    /// Update events recorded from the server (the rest were synthesized).
    pub server_events: usize,
    /// Chunks the server's part arrived in (and is replayed in).
    pub server_chunks: usize,
    /// How many of those end at an event boundary.
    pub server_aligned_chunks: usize,
    /// Chunks of the whole replayed stream.
    pub chunks: usize,
    /// The stream was re-framed into chunks of this many bytes.
    pub rechunked: Option<usize>,
}

/// One child's result.
#[derive(Clone, Debug, serde::Serialize)]
pub struct VariantReport {
    /// What ran.
    pub variant: Variant,
    /// Against what.
    pub mode: Mode,
    /// What it measured: the median of every measurement over the runs.
    pub result: ChildResult,
    /// Every run.
    pub runs: Vec<ChildResult>,
}

fn median_of<T: Copy + PartialOrd + Default>(
    runs: &[ChildResult],
    f: impl Fn(&ChildResult) -> T,
) -> T {
    let mut v: Vec<T> = runs.iter().map(f).collect();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v.get(v.len() / 2).copied().unwrap_or_default()
}

/// The median of every measurement (each on its own) over several runs.
pub(crate) fn median(runs: &[ChildResult]) -> ChildResult {
    use crate::SyncResult;
    ChildResult {
        sync: SyncResult {
            baseline_rss: median_of(runs, |r| r.sync.baseline_rss),
            sync_secs: median_of(runs, |r| r.sync.sync_secs),
            sync_cpu_secs: median_of(runs, |r| r.sync.sync_cpu_secs),
            synced_objects: median_of(runs, |r| r.sync.synced_objects),
            rss_after_sync: median_of(runs, |r| r.sync.rss_after_sync),
            peak_rss_sync: median_of(runs, |r| r.sync.peak_rss_sync),
            get_p50_us: median_of(runs, |r| r.sync.get_p50_us),
        },
        events: median_of(runs, |r| r.events),
        // Keep events/s the median of the runs' rates.
        events_secs: {
            let rate = median_of(runs, |r| r.events_per_sec());
            let events = median_of(runs, |r| r.events);
            if rate > 0.0 && events > 1 {
                (events - 1) as f64 / rate
            } else {
                0.0
            }
        },
        events_cpu_secs: median_of(runs, |r| r.events_cpu_secs),
        rss_end: median_of(runs, |r| r.rss_end),
        peak_rss: median_of(runs, |r| r.peak_rss),
        gen_sum: median_of(runs, |r| r.gen_sum),
        verified: runs.iter().all(|r| r.verified),
        max_handler_backlog: runs
            .iter()
            .all(|r| r.max_handler_backlog.is_some())
            .then(|| median_of(runs, |r| r.max_handler_backlog.unwrap_or(0))),
    }
}

/// The outcome of [`crate::run`]; `Display` prints the comparison table.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Report {
    /// Pods synced.
    pub pods: usize,
    /// Update events after the sync.
    pub events: usize,
    /// List page size.
    pub page_size: u32,
    /// Average size of one pod in a list page (JSON, with managedFields), bytes.
    pub avg_object_bytes: usize,
    /// Size of the recorded watch stream, bytes (replay mode).
    pub watch_bytes: Option<usize>,
    /// Time to create the pods, seconds.
    pub create_secs: f64,
    /// Time to record the list and the watch stream, seconds (replay mode).
    pub record_secs: Option<f64>,
    /// Whole run, seconds.
    pub total_secs: f64,
    /// CPUs available.
    pub cpus: usize,
    /// How the replay stream was made (replay mode).
    pub recording: Option<RecordingInfo>,
    /// Every child's result, in run order.
    pub results: Vec<VariantReport>,
    /// Selected variants that a mode cannot run, and why.
    pub not_run: Vec<NotRun>,
}

/// A selected variant that one mode cannot run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct NotRun {
    /// The variant.
    pub variant: Variant,
    /// The mode it was left out of.
    pub mode: Mode,
    /// Why.
    pub reason: String,
}

/// The targets for kubewright / kube-rs.
const TARGET_SYNC: f64 = 0.5;
/// Sync time of kubewright's default informer against client-go's (protobuf) defaults.
const TARGET_SYNC_CLIENT_GO: f64 = 1.0;
const TARGET_MEMORY: f64 = 0.5;
const TARGET_THROUGHPUT: f64 = 2.0;

impl Report {
    /// The result of `variant` in `mode`.
    pub fn get(&self, variant: Variant, mode: Mode) -> Option<&ChildResult> {
        self.results
            .iter()
            .find(|r| r.variant == variant && r.mode == mode)
            .map(|r| &r.result)
    }

    /// The report as JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Whether every child's cache ended in the exact expected state.
    pub fn all_verified(&self) -> bool {
        self.results.iter().all(|r| r.result.verified)
    }

    /// Runs per variant.
    pub fn repeat(&self) -> usize {
        self.results.iter().map(|r| r.runs.len()).max().unwrap_or(1)
    }

    fn modes(&self) -> Vec<Mode> {
        let mut modes = Vec::new();
        for r in &self.results {
            if !modes.contains(&r.mode) {
                modes.push(r.mode);
            }
        }
        modes
    }

    fn variants(&self, mode: Mode) -> Vec<Variant> {
        self.results
            .iter()
            .filter(|r| r.mode == mode)
            .map(|r| r.variant)
            .collect()
    }
}

const LABEL: usize = 30;

fn row(
    f: &mut fmt::Formatter<'_>,
    width: usize,
    label: &str,
    cells: impl IntoIterator<Item = String>,
) -> fmt::Result {
    write!(f, "  {label:<LABEL$}")?;
    for c in cells {
        write!(f, "{c:>width$}")?;
    }
    writeln!(f)
}

fn secs(s: f64) -> String {
    if s < 1.0 {
        format!("{:.0} ms", s * 1000.0)
    } else {
        format!("{s:.2} s")
    }
}

fn mem(bytes: u64) -> String {
    format!("{:.0} MiB", mib(bytes))
}

fn ratio(num: f64, den: f64) -> Option<f64> {
    (den > 0.0 && num.is_finite()).then(|| num / den)
}

fn judge(r: Option<f64>, target: f64, lower_is_better: bool) -> String {
    match r {
        None => "n/a".into(),
        Some(r) => {
            let met = if lower_is_better {
                r <= target
            } else {
                r >= target
            };
            let cmp = if lower_is_better { "<=" } else { ">=" };
            let digits = if (r - target).abs() < 0.005 { 3 } else { 2 };
            format!(
                "{r:.digits$}x ({} {cmp} {target:.1})",
                if met { "met" } else { "MISSED" }
            )
        }
    }
}

fn mode_description(mode: Mode) -> &'static str {
    match mode {
        Mode::Replay => {
            "list pages and watch stream recorded once from the embedded server and replayed byte for byte, in the same chunks, to every child (no gzip): measures the client's decode + cache cost alone"
        }
        Mode::Live => {
            "each child lists from the embedded API server (kubewright asks for gzip, kube-rs without its `gzip` feature does not) and the parent patches pods during the watch; server, patch load and child share the CPUs, so events/s is bounded by the server: compare CPU per event"
        }
        Mode::Cluster => {
            "each child syncs from the real cluster of --kubeconfig (TLS, its authentication, each library's shipped defaults) and the parent patches pods during the watch; the cluster's encoding is part of the sync time"
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "kubewright informer benchmark: {} pods (avg {:.1} KiB of JSON each, managedFields included), {} watch events, list pages of {}, {} CPUs",
            self.pods,
            self.avg_object_bytes as f64 / 1024.0,
            self.events,
            self.page_size,
            self.cpus
        )?;
        writeln!(
            f,
            "each library runs in its own child process (same binary, same Tokio runtime and allocator); update events are merge patches of one label and one annotation spread over the pods{}",
            if self.repeat() > 1 {
                format!("; medians of {} runs", self.repeat())
            } else {
                String::new()
            }
        )?;
        for mode in self.modes() {
            let variants = self.variants(mode);
            let results: Vec<&ChildResult> =
                variants.iter().filter_map(|v| self.get(*v, mode)).collect();
            writeln!(f)?;
            writeln!(f, "mode {mode}: {}", mode_description(mode))?;
            let w = variants
                .iter()
                .map(|v| v.name().len() + 2)
                .max()
                .unwrap_or(0)
                .max(14);
            row(f, w, "", variants.iter().map(|v| v.name().to_string()))?;
            row(
                f,
                w,
                "sync time",
                results.iter().map(|r| secs(r.sync.sync_secs)),
            )?;
            row(
                f,
                w,
                "sync CPU (user+sys)",
                results.iter().map(|r| secs(r.sync.sync_cpu_secs)),
            )?;
            row(
                f,
                w,
                "steady RSS after sync",
                results.iter().map(|r| mem(r.sync.rss_after_sync)),
            )?;
            row(
                f,
                w,
                "  minus empty-process RSS",
                results
                    .iter()
                    .map(|r| mem(r.sync.rss_after_sync.saturating_sub(r.sync.baseline_rss))),
            )?;
            row(
                f,
                w,
                "peak RSS during sync",
                results.iter().map(|r| mem(r.sync.peak_rss_sync)),
            )?;
            row(
                f,
                w,
                "keyed get p50",
                results
                    .iter()
                    .map(|r| format!("{:.1} us", r.sync.get_p50_us)),
            )?;
            row(f, w, "peak RSS", results.iter().map(|r| mem(r.peak_rss)))?;
            row(
                f,
                w,
                "RSS after the events",
                results.iter().map(|r| mem(r.rss_end)),
            )?;
            row(
                f,
                w,
                "events/s (first to last)",
                results.iter().map(|r| format!("{:.0}", r.events_per_sec())),
            )?;
            row(
                f,
                w,
                "CPU per event",
                results
                    .iter()
                    .map(|r| format!("{:.1} us", r.cpu_us_per_event())),
            )?;
            row(
                f,
                w,
                "max handler backlog",
                results.iter().map(|r| match r.max_handler_backlog {
                    Some(b) => b.to_string(),
                    None => "-".into(),
                }),
            )?;
            row(
                f,
                w,
                "cache verified",
                results
                    .iter()
                    .map(|r| if r.verified { "yes" } else { "NO" }.to_string()),
            )?;
            // Same cached content first (kubewright's default skips managedFields, like
            // kube-rs+strip), then both libraries with their default settings.
            let mut pairs: Vec<(Variant, Variant)> = variants
                .iter()
                .filter_map(|v| v.baseline().map(|b| (*v, b)))
                .filter(|(_, b)| variants.contains(b))
                .collect();
            let v = Variant::Kubewright;
            for b in [Variant::KubeRs, Variant::KubeRsStreaming] {
                if variants.contains(&v) && variants.contains(&b) {
                    pairs.push((v, b));
                }
            }
            // The targets are for caches of whole pods; metadata-only caches are
            // compared without them.
            let (meta, pods): (Vec<_>, Vec<_>) =
                pairs.into_iter().partition(|(k, _)| k.is_metadata());
            // client-go: kubewright's default informer (and the lean one) against
            // client-go's defaults, and the stripped caches against each other.
            let client_go: Vec<(Variant, Variant)> = [
                (Variant::Kubewright, Variant::ClientGo),
                (Variant::KubewrightLean, Variant::ClientGo),
                (Variant::Kubewright, Variant::ClientGoStrip),
                (Variant::KubewrightJson, Variant::ClientGoJson),
            ]
            .into_iter()
            .filter(|(k, b)| variants.contains(k) && variants.contains(b))
            .collect();
            for (pairs, against) in [
                (pods, Against::KubeRs),
                (meta, Against::KubeRsMetadata),
                (client_go, Against::ClientGo),
            ] {
                if !pairs.is_empty() {
                    ratio_table(f, self, mode, &pairs, against)?;
                }
            }
            for n in self.not_run.iter().filter(|n| n.mode == mode) {
                writeln!(f, "  not run in this mode: {}: {}", n.variant, n.reason)?;
            }
        }
        writeln!(f)?;
        write!(f, "setup: pods created in {:.1} s", self.create_secs)?;
        if let (Some(r), Some(w), Some(info)) =
            (self.record_secs, self.watch_bytes, &self.recording)
        {
            write!(
                f,
                "; list + {} events recorded in {:.1} s ({:.0} MiB of watch stream in {} chunks, avg {:.0} KiB; {} events through the server, in {} chunks of which {} end at an event boundary; {})",
                self.events,
                r,
                mib(w as u64),
                info.chunks,
                w as f64 / info.chunks.max(1) as f64 / 1024.0,
                info.server_events,
                info.server_chunks,
                info.server_aligned_chunks,
                if info.server_events < self.events {
                    "the rest synthesized from the listed pods and checked against the server's events"
                } else {
                    "none synthesized"
                }
            )?;
            if let Some(n) = info.rechunked {
                write!(
                    f,
                    "; REPLAYED IN {n}-BYTE CHUNKS regardless of event boundaries"
                )?;
            }
        }
        writeln!(f, "; whole run {:.0} s", self.total_secs)
    }
}

/// What a ratio table compares kubewright with.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Against {
    /// kube-rs caching whole pods: the ratio targets apply.
    KubeRs,
    /// kube-rs caching metadata: no targets.
    KubeRsMetadata,
    /// client-go: the sync time must be at most client-go's.
    ClientGo,
}

/// The ratio rows of kubewright variants against their baselines, judged against the
/// issue's targets where it has some.
fn ratio_table(
    f: &mut fmt::Formatter<'_>,
    report: &Report,
    mode: Mode,
    pairs: &[(Variant, Variant)],
    against: Against,
) -> fmt::Result {
    match against {
        Against::KubeRs if mode == Mode::Replay => writeln!(
            f,
            "  ratios kubewright / kube-rs (targets: sync time and steady RSS <= {TARGET_SYNC:.1}, events/s >= {TARGET_THROUGHPUT:.1})"
        )?,
        // Outside replay the events arrive at the parent's patch rate: no target.
        Against::KubeRs => writeln!(
            f,
            "  ratios kubewright / kube-rs (targets: sync time and steady RSS <= {TARGET_SYNC:.1}; events/s is the patch rate here)"
        )?,
        Against::KubeRsMetadata => writeln!(
            f,
            "  ratios kubewright / kube-rs, metadata-only caches (no targets)"
        )?,
        Against::ClientGo => writeln!(
            f,
            "  ratios kubewright / client-go (target: the default informer's sync time <= {TARGET_SYNC_CLIENT_GO:.1})"
        )?,
    }
    let ratio_col = pairs
        .iter()
        .map(|(k, b)| k.name().len() + b.name().len() + 5)
        .max()
        .unwrap_or(0)
        .max(26);
    write!(f, "  {:<LABEL$}", "")?;
    for (k, b) in pairs {
        write!(f, "{:>ratio_col$}", format!("{k} / {b}"))?;
    }
    writeln!(f)?;
    let plain = |r: Option<f64>| r.map_or("n/a".into(), |r| format!("{r:.2}x"));
    let targets = against == Against::KubeRs;
    let judged = |r: Option<f64>, target: f64, lower: bool| {
        if targets {
            judge(r, target, lower)
        } else {
            plain(r)
        }
    };
    type Metric<'a> = &'a dyn Fn(&ChildResult, &ChildResult) -> String;
    let metrics: [(&str, Metric); 5] = [
        ("sync time", &|k, b| {
            let r = ratio(k.sync.sync_secs, b.sync.sync_secs);
            if against == Against::ClientGo {
                judge(r, TARGET_SYNC_CLIENT_GO, true)
            } else {
                judged(r, TARGET_SYNC, true)
            }
        }),
        ("steady RSS after sync", &|k, b| {
            judged(
                ratio(k.sync.rss_after_sync as f64, b.sync.rss_after_sync as f64),
                TARGET_MEMORY,
                true,
            )
        }),
        ("peak RSS", &|k, b| {
            plain(ratio(k.peak_rss as f64, b.peak_rss as f64))
        }),
        ("events/s", &|k, b| {
            let r = ratio(k.events_per_sec(), b.events_per_sec());
            if mode == Mode::Replay {
                judged(r, TARGET_THROUGHPUT, false)
            } else {
                plain(r)
            }
        }),
        ("CPU per event", &|k, b| {
            plain(ratio(k.cpu_us_per_event(), b.cpu_us_per_event()))
        }),
    ];
    for (name, metric) in metrics {
        write!(f, "  {name:<LABEL$}")?;
        for (k, b) in pairs {
            let cell = match (report.get(*k, mode), report.get(*b, mode)) {
                (Some(k), Some(b)) => metric(k, b),
                _ => "n/a".into(),
            };
            write!(f, "{cell:>ratio_col$}")?;
        }
        writeln!(f)?;
    }
    Ok(())
}
