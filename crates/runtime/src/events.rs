//! An event recorder for `events.k8s.io/v1` Events, modelled on client-go's event
//! broadcaster.
//!
//! [`EventRecorder::publish`] never waits: it applies a spam filter and puts the event
//! into a bounded queue, dropping (and counting) what does not fit. One background task
//! per recorder writes the queue to the API server:
//!
//! * **Aggregation.** An event identical to one recorded within the
//!   [aggregation window](EventRecorderConfig::aggregation_window) (same regarding and
//!   related object, type, reason, action and note) does not create a new Event: it
//!   increments the first one's `series.count` and `series.lastObservedTime`. The series is
//!   written at most once per [`series_update_interval`](EventRecorderConfig::series_update_interval)
//!   per event (client-go's 30 s heartbeat), and on [`EventRecorder::shutdown`].
//! * **Spam filter.** A token bucket per regarding object (client-go's
//!   `EventSourceObjectSpamFilter`: burst 25, one token back every 5 minutes); every
//!   published event, aggregated or not, takes a token.
//! * **Retries.** Transport errors, timeouts, 429 and 5xx answers are retried up to
//!   [`max_attempts`](EventRecorderConfig::max_attempts) times (12, like client-go), the
//!   first retry after a random fraction of the retry delay; other API errors are not.
//! * **Shape.** Names are `<regarding-name>.<hex unix nanos>` (client-go's scheme), the
//!   namespace is the regarding object's (or `default` for cluster-scoped objects), the
//!   note is cut to 1 KiB, `eventTime` is a MicroTime.
//!
//! The writer is sequential, like client-go's: while the API server is unreachable, the
//! queue fills up and further events are dropped, never the caller blocked.
//!
//! ```no_run
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kubewright_runtime::events::{Event, EventRecorder, EventType, Reporter, object_reference};
//!
//! # async fn run(client: kubewright_client::Client, cm: ConfigMap) {
//! let recorder = EventRecorder::new(client, Reporter::new("example.com/my-controller", "pod-1"));
//! recorder.publish(
//!     &object_reference(&cm),
//!     Event::new(EventType::Normal, "Synced", "Reconcile").note("config map is up to date"),
//! );
//! recorder.shutdown().await; // flushes pending events and series
//! # }
//! ```

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event as K8sEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kubewright_client::{Api, Client};
use kubewright_core::{ObjectMeta, Patch, PatchParams, PostParams, Resource};
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Maximum length of an Event's `note`, in bytes (the API server rejects longer ones).
pub const NOTE_LENGTH_LIMIT: usize = 1024;

/// Maximum length of an object name.
const NAME_LENGTH_LIMIT: usize = 253;

/// Who reports the events: `reportingController` and `reportingInstance`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reporter {
    /// The controller's name, e.g. `example.com/my-controller` (a qualified name).
    pub controller: String,
    /// This instance of the controller, e.g. the pod name.
    pub instance: String,
}

impl Reporter {
    /// A reporter.
    pub fn new(controller: impl Into<String>, instance: impl Into<String>) -> Self {
        Self {
            controller: controller.into(),
            instance: instance.into(),
        }
    }
}

/// `Normal` or `Warning`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Something expected happened.
    Normal,
    /// Something may need attention.
    Warning,
}

impl EventType {
    /// The API value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Normal => "Normal",
            Self::Warning => "Warning",
        }
    }
}

/// One event to publish (about a regarding object given to [`EventRecorder::publish`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// Normal or Warning.
    pub type_: EventType,
    /// Why the action was taken, UpperCamelCase (e.g. `ScalingReplicaSet`).
    pub reason: String,
    /// What was done, or failed (e.g. `Scale`).
    pub action: String,
    /// A human-readable description (cut to [`NOTE_LENGTH_LIMIT`] bytes).
    pub note: Option<String>,
    /// A second object involved (e.g. the ReplicaSet a Deployment scaled).
    pub related: Option<ObjectReference>,
}

impl Event {
    /// An event without note or related object.
    pub fn new(type_: EventType, reason: impl Into<String>, action: impl Into<String>) -> Self {
        Self {
            type_,
            reason: reason.into(),
            action: action.into(),
            note: None,
            related: None,
        }
    }
    /// Sets the note (builder style).
    #[must_use]
    pub fn note(mut self, note: impl Into<String>) -> Self {
        self.note = Some(note.into());
        self
    }
    /// Sets the related object (builder style).
    #[must_use]
    pub fn related(mut self, related: ObjectReference) -> Self {
        self.related = Some(related);
        self
    }
}

/// A reference to `obj` (apiVersion, kind, namespace, name, uid, resourceVersion), to use
/// as an event's regarding or related object.
pub fn object_reference<K>(obj: &K) -> ObjectReference
where
    K: Resource,
    K::DynamicType: Default,
{
    object_reference_with(obj, &K::DynamicType::default())
}

/// [`object_reference`] for types with run-time type information.
pub fn object_reference_with<K: Resource>(obj: &K, dt: &K::DynamicType) -> ObjectReference {
    let meta = obj.meta();
    ObjectReference {
        api_version: Some(K::api_version(dt).into_owned()),
        kind: Some(K::kind(dt).into_owned()),
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        uid: meta.uid.clone(),
        resource_version: meta.resource_version.clone(),
        field_path: None,
    }
}

/// Settings of an [`EventRecorder`]; the defaults are client-go's.
#[derive(Clone, Debug)]
pub struct EventRecorderConfig {
    /// Capacity of the queue between `publish` and the writer (client-go: 1000).
    pub queue_capacity: usize,
    /// Identical events within this window are aggregated into one series (6 min).
    pub aggregation_window: Duration,
    /// A series is written at most this often per event (30 s).
    pub series_update_interval: Duration,
    /// Spam filter burst per regarding object (25).
    pub spam_burst: u32,
    /// The spam filter gives one token back per this interval (5 min).
    pub spam_refill_interval: Duration,
    /// The spam filter remembers at most this many objects (4096).
    pub spam_max_entries: usize,
    /// Attempts per write before the event is given up (12).
    pub max_attempts: u32,
    /// Delay between attempts; the first retry waits a random fraction of it (10 s).
    pub retry_delay: Duration,
    /// How long [`EventRecorder::shutdown`] waits for the queue to be written (10 s).
    pub shutdown_timeout: Duration,
}

impl Default for EventRecorderConfig {
    fn default() -> Self {
        Self {
            queue_capacity: 1000,
            aggregation_window: Duration::from_secs(6 * 60),
            series_update_interval: Duration::from_secs(30),
            spam_burst: 25,
            spam_refill_interval: Duration::from_secs(5 * 60),
            spam_max_entries: 4096,
            max_attempts: 12,
            retry_delay: Duration::from_secs(10),
            shutdown_timeout: Duration::from_secs(10),
        }
    }
}

/// Counters of an [`EventRecorder`] (a snapshot).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EventRecorderStats {
    /// Events accepted into the queue.
    pub queued: u64,
    /// Events dropped because the queue was full.
    pub dropped_queue_full: u64,
    /// Events dropped by the spam filter.
    pub dropped_spam: u64,
    /// Events published after shutdown.
    pub dropped_closed: u64,
    /// Events dropped because the regarding object had no name.
    pub dropped_invalid: u64,
    /// Event objects created.
    pub created: u64,
    /// Events folded into an existing series.
    pub aggregated: u64,
    /// Series writes (PATCH, or create when the Event had expired).
    pub series_updates: u64,
    /// Writes given up after retries or on a permanent error.
    pub failed: u64,
}

#[derive(Default)]
struct Counters {
    queued: AtomicU64,
    dropped_queue_full: AtomicU64,
    dropped_spam: AtomicU64,
    dropped_closed: AtomicU64,
    dropped_invalid: AtomicU64,
    created: AtomicU64,
    aggregated: AtomicU64,
    series_updates: AtomicU64,
    failed: AtomicU64,
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// A token bucket per key, like client-go's `EventSourceObjectSpamFilter`: `burst`
/// tokens, one more every `refill_interval`, each event takes one.
#[derive(Debug)]
pub struct SpamFilter {
    burst: f64,
    refill_interval: Duration,
    max_entries: usize,
    buckets: HashMap<String, Bucket>,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    last: Instant,
}

impl SpamFilter {
    /// A filter with the given burst and refill interval, remembering at most
    /// `max_entries` keys (keys whose bucket is full are forgotten first).
    pub fn new(burst: u32, refill_interval: Duration, max_entries: usize) -> Self {
        Self {
            burst: f64::from(burst.max(1)),
            refill_interval: refill_interval.max(Duration::from_nanos(1)),
            max_entries: max_entries.max(1),
            buckets: HashMap::new(),
        }
    }

    fn refill(&self, b: &mut Bucket, now: Instant) {
        let elapsed = now.saturating_duration_since(b.last);
        b.tokens =
            (b.tokens + elapsed.as_secs_f64() / self.refill_interval.as_secs_f64()).min(self.burst);
        b.last = now;
    }

    /// Takes a token for `key` at `now`; false when the bucket is empty (drop the event).
    pub fn allow(&mut self, key: &str, now: Instant) -> bool {
        if !self.buckets.contains_key(key) && self.buckets.len() >= self.max_entries {
            self.evict(now);
        }
        let mut b = self.buckets.get(key).copied().unwrap_or(Bucket {
            tokens: self.burst,
            last: now,
        });
        self.refill(&mut b, now);
        let allowed = b.tokens >= 1.0;
        if allowed {
            b.tokens -= 1.0;
        }
        self.buckets.insert(key.to_string(), b);
        allowed
    }

    fn evict(&mut self, now: Instant) {
        let (burst, interval) = (self.burst, self.refill_interval.as_secs_f64());
        // A full bucket is the same as no bucket.
        self.buckets.retain(|_, b| {
            b.tokens + now.saturating_duration_since(b.last).as_secs_f64() / interval < burst
        });
        if self.buckets.len() >= self.max_entries {
            // Still full: forget the least recently used half.
            let mut by_age: Vec<(Instant, String)> = self
                .buckets
                .iter()
                .map(|(k, b)| (b.last, k.clone()))
                .collect();
            by_age.sort();
            for (_, k) in by_age.into_iter().take(self.max_entries / 2 + 1) {
                self.buckets.remove(&k);
            }
        }
    }

    /// How many keys are remembered.
    pub fn len(&self) -> usize {
        self.buckets.len()
    }

    /// Whether no key is remembered.
    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }
}

fn spam_key(r: &ObjectReference) -> String {
    let s = |o: &Option<String>| o.clone().unwrap_or_default();
    format!(
        "{}\x00{}\x00{}\x00{}\x00{}",
        s(&r.api_version),
        s(&r.kind),
        s(&r.namespace),
        s(&r.name),
        s(&r.uid)
    )
}

/// The identity of an object reference for aggregation (resourceVersion excluded: it
/// changes with every write of the object).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct RefKey {
    api_version: String,
    kind: String,
    namespace: String,
    name: String,
    uid: String,
    field_path: String,
}

impl From<&ObjectReference> for RefKey {
    fn from(r: &ObjectReference) -> Self {
        let s = |o: &Option<String>| o.clone().unwrap_or_default();
        Self {
            api_version: s(&r.api_version),
            kind: s(&r.kind),
            namespace: s(&r.namespace),
            name: s(&r.name),
            uid: s(&r.uid),
            field_path: s(&r.field_path),
        }
    }
}

/// Events with equal keys are aggregated into one series.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct EventKey {
    regarding: RefKey,
    related: Option<RefKey>,
    type_: EventType,
    reason: String,
    action: String,
    note: String,
}

impl EventKey {
    fn new(regarding: &ObjectReference, ev: &Event) -> Self {
        Self {
            regarding: regarding.into(),
            related: ev.related.as_ref().map(RefKey::from),
            type_: ev.type_,
            reason: ev.reason.clone(),
            action: ev.action.clone(),
            note: truncate_note(ev.note.as_deref().unwrap_or("")).to_string(),
        }
    }
}

/// Cuts `note` to at most [`NOTE_LENGTH_LIMIT`] bytes on a character boundary.
pub fn truncate_note(note: &str) -> &str {
    if note.len() <= NOTE_LENGTH_LIMIT {
        return note;
    }
    let mut end = NOTE_LENGTH_LIMIT;
    while !note.is_char_boundary(end) {
        end -= 1;
    }
    &note[..end]
}

/// `<prefix>.<hex nanos>`, with the prefix shortened so that the name fits 253 bytes.
fn event_name(regarding_name: &str, nanos: i128) -> String {
    let suffix = format!(".{nanos:x}");
    let mut max = NAME_LENGTH_LIMIT.saturating_sub(suffix.len());
    if regarding_name.len() > max {
        while !regarding_name.is_char_boundary(max) {
            max -= 1;
        }
    }
    let prefix = &regarding_name[..regarding_name.len().min(max)];
    let prefix = prefix.trim_end_matches(['.', '-']);
    format!("{prefix}{suffix}")
}

fn micro_now() -> Timestamp {
    let now = Timestamp::now();
    Timestamp::from_microsecond(now.as_microsecond()).unwrap_or(now)
}

struct Queued {
    regarding: ObjectReference,
    event: Event,
    at: Instant,
    wall: Timestamp,
}

struct Shared {
    reporter: Reporter,
    config: EventRecorderConfig,
    spam: Mutex<SpamFilter>,
    counters: Counters,
    closed: AtomicBool,
    closing: CancellationToken,
    worker: Mutex<Option<JoinHandle<()>>>,
}

/// Records `events.k8s.io/v1` Events without ever blocking the caller (see the
/// [module documentation](self)). Cheap to clone; clones share the queue and the writer.
#[derive(Clone)]
pub struct EventRecorder {
    tx: mpsc::Sender<Queued>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for EventRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventRecorder")
            .field("reporter", &self.shared.reporter)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl EventRecorder {
    /// A recorder with client-go's defaults. Starts the writer task, so it must be called
    /// within a Tokio runtime.
    pub fn new(client: Client, reporter: Reporter) -> Self {
        Self::with_config(client, reporter, EventRecorderConfig::default())
    }

    /// A recorder with explicit settings. Must be called within a Tokio runtime.
    pub fn with_config(client: Client, reporter: Reporter, config: EventRecorderConfig) -> Self {
        let (tx, rx) = mpsc::channel(config.queue_capacity.max(1));
        let shared = Arc::new(Shared {
            spam: Mutex::new(SpamFilter::new(
                config.spam_burst,
                config.spam_refill_interval,
                config.spam_max_entries,
            )),
            reporter,
            config,
            counters: Counters::default(),
            closed: AtomicBool::new(false),
            closing: CancellationToken::new(),
            worker: Mutex::new(None),
        });
        let worker = Writer {
            client,
            shared: shared.clone(),
            cache: HashMap::new(),
            last_nanos: 0,
        };
        let handle = tokio::spawn(worker.run(rx));
        *shared.worker.lock().unwrap_or_else(|e| e.into_inner()) = Some(handle);
        Self { tx, shared }
    }

    /// The reporter.
    pub fn reporter(&self) -> &Reporter {
        &self.shared.reporter
    }

    /// Queues `event` about `regarding` (see [`object_reference`]). Never waits; returns
    /// whether the event was queued (false: dropped by the spam filter, because the queue
    /// is full, after shutdown, or because `regarding` has no name — all counted in
    /// [`stats`](Self::stats)).
    pub fn publish(&self, regarding: &ObjectReference, event: Event) -> bool {
        let c = &self.shared.counters;
        if self.shared.closed.load(Ordering::Acquire) {
            bump(&c.dropped_closed);
            return false;
        }
        if regarding.name.as_deref().is_none_or(str::is_empty) {
            tracing::warn!(reason = %event.reason, "event dropped: the regarding object has no name");
            bump(&c.dropped_invalid);
            return false;
        }
        let now = Instant::now();
        let allowed = self
            .shared
            .spam
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .allow(&spam_key(regarding), now);
        if !allowed {
            tracing::debug!(reason = %event.reason, object = ?regarding.name, "event dropped by the spam filter");
            bump(&c.dropped_spam);
            return false;
        }
        let q = Queued {
            regarding: regarding.clone(),
            event,
            at: now,
            wall: micro_now(),
        };
        match self.tx.try_send(q) {
            Ok(()) => {
                bump(&c.queued);
                true
            }
            Err(mpsc::error::TrySendError::Full(q)) => {
                tracing::debug!(reason = %q.event.reason, "event dropped: queue full");
                bump(&c.dropped_queue_full);
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                bump(&c.dropped_closed);
                false
            }
        }
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> EventRecorderStats {
        let c = &self.shared.counters;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        EventRecorderStats {
            queued: l(&c.queued),
            dropped_queue_full: l(&c.dropped_queue_full),
            dropped_spam: l(&c.dropped_spam),
            dropped_closed: l(&c.dropped_closed),
            dropped_invalid: l(&c.dropped_invalid),
            created: l(&c.created),
            aggregated: l(&c.aggregated),
            series_updates: l(&c.series_updates),
            failed: l(&c.failed),
        }
    }

    /// Stops accepting events, writes what is queued and every pending series update,
    /// and stops the writer. Waits at most
    /// [`shutdown_timeout`](EventRecorderConfig::shutdown_timeout), then abandons what is
    /// left. Later calls (and calls from clones) return at once.
    pub async fn shutdown(&self) {
        self.shared.closed.store(true, Ordering::Release);
        self.shared.closing.cancel();
        let handle = self
            .shared
            .worker
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let Some(mut handle) = handle else { return };
        let limit = self.shared.config.shutdown_timeout;
        if tokio::time::timeout(limit, &mut handle).await.is_err() {
            tracing::warn!(
                ?limit,
                "event recorder: pending events abandoned at shutdown"
            );
            handle.abort();
        }
    }
}

/// A recorded event and its series.
struct Entry {
    event: K8sEvent,
    count: i32,
    last_observed: Instant,
    last_observed_wall: Timestamp,
    last_write: Instant,
    dirty: bool,
}

struct Writer {
    client: Client,
    shared: Arc<Shared>,
    cache: HashMap<EventKey, Entry>,
    last_nanos: i128,
}

/// Whether a failed write is worth retrying.
fn is_transient(e: &kubewright_client::Error) -> bool {
    use kubewright_client::Error as E;
    match e {
        E::Api(s) => s.code == 429 || s.code >= 500,
        E::Transport { .. } | E::Body(_) | E::Timeout(_) | E::Stream(_) => true,
        _ => false,
    }
}

async fn with_retries<T, F, Fut>(
    config: &EventRecorderConfig,
    retry_already_exists: bool,
    mut op: F,
) -> Result<T, kubewright_client::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kubewright_client::Error>>,
{
    let mut tries = 0u32;
    loop {
        match op().await {
            Ok(v) => return Ok(v),
            Err(e) => {
                tries += 1;
                let retry = is_transient(&e) || (retry_already_exists && e.is_already_exists());
                if !retry || tries >= config.max_attempts {
                    return Err(e);
                }
                // Randomise the first wait so that many clients do not retry in lockstep.
                let delay = if tries == 1 {
                    config.retry_delay.mul_f64(rand::random::<f64>())
                } else {
                    config.retry_delay
                };
                tracing::debug!(error = %e, tries, ?delay, "event write failed, retrying");
                tokio::time::sleep(delay).await;
            }
        }
    }
}

impl Writer {
    async fn run(mut self, mut rx: mpsc::Receiver<Queued>) {
        let period = self
            .shared
            .config
            .series_update_interval
            .clamp(Duration::from_millis(10), Duration::from_secs(5));
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let closing = self.shared.closing.clone();
        loop {
            tokio::select! {
                biased;
                _ = closing.cancelled() => break,
                _ = tick.tick() => self.flush(false).await,
                msg = rx.recv() => match msg {
                    Some(q) => self.handle(q).await,
                    // Every recorder was dropped.
                    None => break,
                },
            }
        }
        rx.close();
        while let Some(q) = rx.recv().await {
            self.handle(q).await;
        }
        self.flush(true).await;
    }

    fn namespace_of(regarding: &ObjectReference) -> String {
        regarding
            .namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "default".to_string())
    }

    fn build(&mut self, q: &Queued) -> K8sEvent {
        let nanos = q.wall.as_nanosecond().max(self.last_nanos + 1);
        self.last_nanos = nanos;
        let name = event_name(q.regarding.name.as_deref().unwrap_or("event"), nanos);
        let reporter = &self.shared.reporter;
        K8sEvent {
            metadata: ObjectMeta {
                name: Some(name),
                namespace: Some(Self::namespace_of(&q.regarding)),
                ..Default::default()
            },
            event_time: Some(MicroTime(q.wall)),
            reporting_controller: Some(reporter.controller.clone()),
            reporting_instance: Some(reporter.instance.clone()),
            type_: Some(q.event.type_.as_str().to_string()),
            reason: Some(q.event.reason.clone()),
            action: Some(q.event.action.clone()),
            note: q
                .event
                .note
                .as_deref()
                .map(|n| truncate_note(n).to_string()),
            regarding: Some(q.regarding.clone()),
            related: q.event.related.clone(),
            ..Default::default()
        }
    }

    async fn handle(&mut self, q: Queued) {
        let key = EventKey::new(&q.regarding, &q.event);
        let window = self.shared.config.aggregation_window;
        let interval = self.shared.config.series_update_interval;
        if let Some(entry) = self.cache.get_mut(&key)
            && q.at.saturating_duration_since(entry.last_observed) < window
        {
            entry.count = entry.count.saturating_add(1);
            entry.last_observed = q.at;
            entry.last_observed_wall = q.wall;
            entry.dirty = true;
            bump(&self.shared.counters.aggregated);
            if entry.last_write.elapsed() >= interval {
                write_series(&self.client, &self.shared, entry).await;
            }
            return;
        }
        let event = self.build(&q);
        let api: Api<K8sEvent> = Api::namespaced(
            self.client.clone(),
            event.metadata.namespace.as_deref().unwrap_or("default"),
        );
        let pp = PostParams::default();
        let result = with_retries(&self.shared.config, false, || api.create(&pp, &event)).await;
        match result {
            Ok(created) => {
                bump(&self.shared.counters.created);
                self.cache.insert(
                    key,
                    Entry {
                        event: created,
                        count: 1,
                        last_observed: q.at,
                        last_observed_wall: q.wall,
                        last_write: Instant::now(),
                        dirty: false,
                    },
                );
            }
            Err(e) => {
                bump(&self.shared.counters.failed);
                tracing::warn!(error = %e, reason = %q.event.reason, "unable to write event");
            }
        }
    }

    /// Writes due series (all pending ones when `all`), then forgets finished series.
    async fn flush(&mut self, all: bool) {
        let interval = self.shared.config.series_update_interval;
        for entry in self.cache.values_mut() {
            if entry.dirty && (all || entry.last_write.elapsed() >= interval) {
                write_series(&self.client, &self.shared, entry).await;
            }
        }
        let window = self.shared.config.aggregation_window;
        self.cache
            .retain(|_, e| e.dirty || e.last_observed.elapsed() < window);
    }
}

/// Writes `series.count` and `series.lastObservedTime` of an entry: a merge patch, or,
/// when the Event expired meanwhile, a new Event with the same name and the series.
async fn write_series(client: &Client, shared: &Shared, entry: &mut Entry) {
    entry.dirty = false;
    entry.last_write = Instant::now();
    let series = EventSeries {
        count: entry.count,
        last_observed_time: MicroTime(entry.last_observed_wall),
    };
    let Some(name) = entry.event.metadata.name.clone() else {
        return;
    };
    let ns = entry
        .event
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let api: Api<K8sEvent> = Api::namespaced(client.clone(), &ns);
    let patch = Patch::Merge(serde_json::json!({ "series": &series }));
    let mut recreate = entry.event.clone();
    recreate.metadata = ObjectMeta {
        name: Some(name.clone()),
        namespace: Some(ns.clone()),
        ..Default::default()
    };
    recreate.series = Some(series);
    let (pp, patch_params) = (PostParams::default(), PatchParams::default());
    let result = with_retries(&shared.config, true, || async {
        match api.patch(&name, &patch_params, &patch).await {
            Err(e) if e.is_not_found() => api.create(&pp, &recreate).await,
            other => other,
        }
    })
    .await;
    match result {
        Ok(ev) => {
            bump(&shared.counters.series_updates);
            entry.event = ev;
        }
        Err(e) => {
            bump(&shared.counters.failed);
            tracing::warn!(error = %e, event = %name, "unable to update event series");
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ConfigMap, Node};

    fn reference(name: &str) -> ObjectReference {
        ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("ConfigMap".into()),
            name: Some(name.into()),
            namespace: Some("ns".into()),
            uid: Some(format!("uid-{name}")),
            ..Default::default()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn spam_filter_token_bucket() {
        let mut f = SpamFilter::new(25, Duration::from_secs(300), 100);
        for _ in 0..25 {
            assert!(f.allow("a", Instant::now()));
        }
        assert!(!f.allow("a", Instant::now()));
        // Other objects have their own bucket.
        assert!(f.allow("b", Instant::now()));
        // One token back after 5 minutes, not before.
        tokio::time::advance(Duration::from_secs(299)).await;
        assert!(!f.allow("a", Instant::now()));
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(f.allow("a", Instant::now()));
        assert!(!f.allow("a", Instant::now()));
        // A long pause refills up to the burst, no more.
        tokio::time::advance(Duration::from_secs(300 * 100)).await;
        for _ in 0..25 {
            assert!(f.allow("a", Instant::now()));
        }
        assert!(!f.allow("a", Instant::now()));
    }

    #[tokio::test(start_paused = true)]
    async fn spam_filter_is_bounded() {
        let mut f = SpamFilter::new(2, Duration::from_secs(1), 10);
        for i in 0..100 {
            assert!(f.allow(&format!("k{i}"), Instant::now()));
            tokio::time::advance(Duration::from_millis(1)).await;
        }
        assert!(f.len() <= 10);
        // A recently throttled key keeps its state when others are evicted first.
        assert!(f.allow("hot", Instant::now()));
        assert!(f.allow("hot", Instant::now()));
        assert!(!f.allow("hot", Instant::now()));
    }

    #[test]
    fn aggregation_keys() {
        let ev = Event::new(EventType::Normal, "Synced", "Reconcile").note("ok");
        let a = EventKey::new(&reference("a"), &ev);
        // resourceVersion changes do not split a series.
        let mut r = reference("a");
        r.resource_version = Some("99".into());
        assert_eq!(a, EventKey::new(&r, &ev));
        assert_ne!(a, EventKey::new(&reference("b"), &ev));
        assert_ne!(a, EventKey::new(&reference("a"), &ev.clone().note("other")));
        let mut w = ev.clone();
        w.type_ = EventType::Warning;
        assert_ne!(a, EventKey::new(&reference("a"), &w));
        let mut other_reason = ev.clone();
        other_reason.reason = "Failed".into();
        assert_ne!(a, EventKey::new(&reference("a"), &other_reason));
        let mut other_action = ev.clone();
        other_action.action = "Delete".into();
        assert_ne!(a, EventKey::new(&reference("a"), &other_action));
        assert_ne!(
            a,
            EventKey::new(&reference("a"), &ev.clone().related(reference("x")))
        );
    }

    #[test]
    fn notes_are_cut_on_a_char_boundary() {
        assert_eq!(truncate_note("short"), "short");
        let long = "é".repeat(600); // 1200 bytes
        let cut = truncate_note(&long);
        assert!(cut.len() <= NOTE_LENGTH_LIMIT);
        assert_eq!(cut.len(), 1024);
        let odd = format!("a{}", "é".repeat(600));
        assert_eq!(truncate_note(&odd).len(), 1023);
    }

    #[test]
    fn names() {
        assert_eq!(event_name("web", 0x1234), "web.1234");
        let long = "a".repeat(300);
        let n = event_name(&long, i128::from(u64::MAX));
        assert_eq!(n.len(), NAME_LENGTH_LIMIT);
        assert!(n.ends_with(".ffffffffffffffff"));
        assert_eq!(event_name("a-.", 1), "a.1");
    }

    #[test]
    fn references() {
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some("c".into()),
                namespace: Some("ns".into()),
                uid: Some("u".into()),
                resource_version: Some("5".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let r = object_reference(&cm);
        assert_eq!(r.api_version.as_deref(), Some("v1"));
        assert_eq!(r.kind.as_deref(), Some("ConfigMap"));
        assert_eq!(r.name.as_deref(), Some("c"));
        assert_eq!(r.namespace.as_deref(), Some("ns"));
        assert_eq!(r.uid.as_deref(), Some("u"));
        let node = Node {
            metadata: ObjectMeta {
                name: Some("n1".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let nr = object_reference(&node);
        assert_eq!(Writer::namespace_of(&nr), "default");
        assert_eq!(Writer::namespace_of(&r), "ns");
    }

    #[tokio::test]
    async fn event_objects_have_the_required_fields() {
        let client = Client::new(kubewright_client::Config::new(
            "http://127.0.0.1:1".parse().unwrap(),
        ))
        .unwrap();
        let shared = Arc::new(Shared {
            reporter: Reporter::new("example.com/ctl", "i-1"),
            config: EventRecorderConfig::default(),
            spam: Mutex::new(SpamFilter::new(1, Duration::from_secs(1), 1)),
            counters: Counters::default(),
            closed: AtomicBool::new(false),
            closing: CancellationToken::new(),
            worker: Mutex::new(None),
        });
        let mut w = Writer {
            client,
            shared,
            cache: HashMap::new(),
            last_nanos: 0,
        };
        let wall = micro_now();
        let q = Queued {
            regarding: reference("web"),
            event: Event::new(EventType::Warning, "Failed", "Sync").note("x".repeat(2000)),
            at: Instant::now(),
            wall,
        };
        let a = w.build(&q);
        let b = w.build(&q);
        // Same wall time: the names still differ.
        assert_ne!(a.metadata.name, b.metadata.name);
        assert!(a.metadata.name.as_deref().unwrap().starts_with("web."));
        assert_eq!(a.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(a.event_time, Some(MicroTime(wall)));
        assert_eq!(a.type_.as_deref(), Some("Warning"));
        assert_eq!(a.reason.as_deref(), Some("Failed"));
        assert_eq!(a.action.as_deref(), Some("Sync"));
        assert_eq!(a.reporting_controller.as_deref(), Some("example.com/ctl"));
        assert_eq!(a.reporting_instance.as_deref(), Some("i-1"));
        assert_eq!(a.note.as_deref().map(str::len), Some(NOTE_LENGTH_LIMIT));
        assert!(a.series.is_none());
        let json = serde_json::to_value(&a).unwrap();
        // MicroTime: six fractional digits.
        let t = json["eventTime"].as_str().unwrap();
        assert_eq!(
            t.split('.').nth(1).map(|f| f.trim_end_matches('Z').len()),
            Some(6)
        );
    }

    #[test]
    fn transient_errors() {
        use kubewright_core::Status;
        let api = |code| kubewright_client::Error::Api(Box::new(Status::from_http(code, "")));
        assert!(is_transient(&api(500)));
        assert!(is_transient(&api(429)));
        assert!(!is_transient(&api(422)));
        assert!(!is_transient(&api(409)));
        assert!(is_transient(&kubewright_client::Error::Timeout(
            Duration::from_secs(1)
        )));
    }
}
