//! The basic work queue: dirty set + processing set + FIFO.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::hash::Hash;
use std::marker::PhantomData;
use std::pin::pin;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::delaying::Delayer;
use super::lock;
use super::metrics::{InProgress, InProgressSource, QueueMetrics, QueueMetricsHandle};
use super::rate_limiter::RateLimiter;
use super::rate_limiting::RateLimitingQueue;

/// A work queue with client-go's semantics.
///
/// `WorkQueue` is a cheap, cloneable handle; all clones share one queue.
///
/// * [`add`](Self::add) marks an item *dirty*. A dirty item is queued once;
///   adding it again before a worker takes it does nothing.
/// * [`get`](Self::get) waits for the next item in FIFO order and marks it
///   *processing*.
/// * [`done`](Self::done) must be called when a worker has finished with an
///   item. If the item was added again while it was processing it is queued
///   again at that point; this is what guarantees that one item is never
///   handed to two workers at once.
/// * [`add_after`](Self::add_after) adds an item once a delay has elapsed.
/// * [`shutdown`](Self::shutdown) stops the queue at once;
///   [`shutdown_with_drain`](Self::shutdown_with_drain) lets workers finish
///   the items that are already queued first.
///
/// For per-item back-off build a [`RateLimitingQueue`] with
/// [`WorkQueueBuilder::rate_limiter`].
///
/// # Example
///
/// ```
/// use kubewright_runtime::workqueue::WorkQueue;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let queue = WorkQueue::new();
/// queue.add("default/a");
/// queue.add("default/b");
/// queue.add("default/a"); // already queued: no-op
/// assert_eq!(queue.len(), 2);
///
/// let key = queue.get().await.expect("queue is running");
/// assert_eq!(key, "default/a");
/// queue.add("default/a"); // re-added while processing: held back until `done`
/// assert_eq!(queue.len(), 1);
/// queue.done(&key); // now it is queued again
/// assert_eq!(queue.len(), 2);
///
/// queue.shutdown();
/// assert_eq!(queue.get().await, None);
/// # }
/// ```
pub struct WorkQueue<T> {
    pub(crate) inner: Arc<Inner<T>>,
}

impl<T> Clone for WorkQueue<T> {
    fn clone(&self) -> Self {
        WorkQueue {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<T> fmt::Debug for WorkQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = lock(&self.inner.state);
        f.debug_struct("WorkQueue")
            .field("name", &self.inner.name)
            .field("len", &state.queue.len())
            .field("processing", &state.processing.len())
            .field("shutting_down", &state.shutting_down)
            .finish()
    }
}

/// Shared state behind every [`WorkQueue`] handle.
pub(crate) struct Inner<T> {
    name: String,
    state: Mutex<State<T>>,
    /// Wakes `get` callers: `notify_one` per queued item, `notify_waiters`
    /// when waiting getters may have to return `None`.
    getters: Notify,
    /// Wakes `shutdown_with_drain` callers.
    drained: Notify,
    pub(crate) delay: Delayer<T>,
    pub(crate) metrics: Option<QueueMetricsHandle>,
}

struct State<T> {
    /// Items waiting to be handed out, in order. Always a subset of `dirty`.
    queue: VecDeque<T>,
    /// Items that need processing: everything in `queue`, plus items added
    /// again while they were processing.
    dirty: HashSet<T>,
    /// Items handed out by `get` and not yet `done`.
    processing: HashSet<T>,
    /// Timestamps for metrics; `None` when the queue has no metrics.
    timing: Option<Timing<T>>,
    shutting_down: bool,
    /// Set by `shutdown_with_drain` (together with `shutting_down`): getters
    /// keep receiving items until nothing is left.
    draining: bool,
}

struct Timing<T> {
    /// When each dirty item was first added (for queue duration).
    added_at: HashMap<T, Instant>,
    /// When each processing item was handed out (for work duration).
    started_at: HashMap<T, Instant>,
}

impl<T> State<T> {
    /// True once getters should stop waiting and return `None`.
    fn finished(&self) -> bool {
        self.shutting_down && (!self.draining || self.dirty.is_empty())
    }
}

impl<T> Inner<T>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    pub(crate) fn add(&self, item: T) {
        let mut state = lock(&self.state);
        if state.shutting_down || state.dirty.contains(&item) {
            return;
        }
        if let Some(metrics) = &self.metrics {
            metrics.adds.inc();
            metrics.depth.inc();
        }
        if let Some(timing) = state.timing.as_mut() {
            timing.added_at.insert(item.clone(), Instant::now());
        }
        state.dirty.insert(item.clone());
        if state.processing.contains(&item) {
            // Queued again by `done`.
            return;
        }
        state.queue.push_back(item);
        drop(state);
        self.getters.notify_one();
    }

    pub(crate) fn is_shutting_down(&self) -> bool {
        lock(&self.state).shutting_down
    }
}

impl<T> InProgressSource for Inner<T>
where
    T: Send + Sync,
{
    fn in_progress(&self, now: Instant) -> InProgress {
        let state = lock(&self.state);
        let mut work = InProgress::default();
        if let Some(timing) = &state.timing {
            for started in timing.started_at.values() {
                let age = now.saturating_duration_since(*started).as_secs_f64();
                work.total_seconds += age;
                work.longest_seconds = work.longest_seconds.max(age);
            }
        }
        work
    }
}

impl<T> Drop for Inner<T> {
    fn drop(&mut self) {
        // Items still dirty leave the depth gauge with the queue.
        if let Some(metrics) = &self.metrics {
            let state = self
                .state
                .get_mut()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            metrics.depth.dec_by(gauge_value(state.dirty.len()));
        }
        // Let the delay task notice that the queue is gone.
        self.delay.stop();
    }
}

fn gauge_value(count: usize) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

impl<T> Default for WorkQueue<T>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    fn default() -> Self {
        WorkQueue::new()
    }
}

impl<T> WorkQueue<T>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    /// Creates an unnamed queue without metrics or rate limiting.
    pub fn new() -> Self {
        WorkQueue::builder().build()
    }

    /// Starts configuring a queue (name, metrics, rate limiter).
    pub fn builder() -> WorkQueueBuilder<T> {
        WorkQueueBuilder {
            name: String::new(),
            metrics: None,
            rate_limiter: NoRateLimiter,
            item: PhantomData,
        }
    }

    fn from_parts(name: String, metrics: Option<&QueueMetrics>) -> Self {
        // As in client-go, only named queues report metrics.
        let metrics = metrics.filter(|_| !name.is_empty());
        let inner = Arc::new(Inner {
            state: Mutex::new(State {
                queue: VecDeque::new(),
                dirty: HashSet::new(),
                processing: HashSet::new(),
                timing: metrics.map(|_| Timing {
                    added_at: HashMap::new(),
                    started_at: HashMap::new(),
                }),
                shutting_down: false,
                draining: false,
            }),
            getters: Notify::new(),
            drained: Notify::new(),
            delay: Delayer::new(),
            metrics: metrics.map(|m| m.for_queue(&name)),
            name,
        });
        if let Some(metrics) = metrics {
            let weak = Arc::downgrade(&inner);
            let source: Weak<dyn InProgressSource> = weak;
            metrics.track_in_progress(&inner.name, source);
        }
        WorkQueue { inner }
    }

    /// The name given to [`WorkQueueBuilder::name`] (empty by default).
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Adds `item` to the queue.
    ///
    /// Does nothing if the item is already waiting, or if the queue is
    /// shutting down. If the item is currently being processed it is only
    /// remembered, and queued again when [`done`](Self::done) is called for it.
    pub fn add(&self, item: T) {
        self.inner.add(item);
    }

    /// Adds `item` once `delay` has elapsed.
    ///
    /// A zero delay adds the item immediately. If the item is already waiting
    /// for a delay to elapse, the earlier of the two deadlines is kept. Items
    /// still waiting when the queue shuts down are dropped.
    ///
    /// # Panics
    ///
    /// The first call with a non-zero delay starts the queue's timer task
    /// with [`tokio::spawn`], so it panics if called outside a Tokio runtime
    /// (like Tokio's own timers).
    pub fn add_after(&self, item: T, delay: Duration) {
        if delay.is_zero() {
            self.add(item);
            return;
        }
        if self.is_shutting_down() {
            return;
        }
        let ready_at = deadline(Instant::now(), delay);
        self.inner.delay.schedule(&self.inner, item, ready_at);
    }

    /// Waits for the next item and marks it as processing.
    ///
    /// Returns `None` once the queue is shut down: immediately after
    /// [`shutdown`](Self::shutdown), or after
    /// [`shutdown_with_drain`](Self::shutdown_with_drain) once no item is left
    /// to hand out (including items that were added again while processing
    /// and will be queued by their `done`). The caller must call
    /// [`done`](Self::done) with the item when finished with it.
    ///
    /// Cancel-safe: dropping the future never loses an item.
    pub async fn get(&self) -> Option<T> {
        let inner = &*self.inner;
        loop {
            let mut notified = pin!(inner.getters.notified());
            notified.as_mut().enable();
            {
                let mut state = lock(&inner.state);
                if let Some(item) = state.queue.pop_front() {
                    state.dirty.remove(&item);
                    state.processing.insert(item.clone());
                    if let Some(metrics) = &inner.metrics {
                        metrics.depth.dec();
                        if let Some(timing) = state.timing.as_mut() {
                            let now = Instant::now();
                            if let Some(added) = timing.added_at.remove(&item) {
                                metrics
                                    .queue_duration
                                    .observe(now.saturating_duration_since(added).as_secs_f64());
                            }
                            timing.started_at.insert(item.clone(), now);
                        }
                    }
                    let drain_exhausted = state.draining && state.dirty.is_empty();
                    drop(state);
                    if drain_exhausted {
                        // Other getters waiting during a drain can now stop.
                        inner.getters.notify_waiters();
                    }
                    return Some(item);
                }
                if state.finished() {
                    return None;
                }
            }
            notified.await;
        }
    }

    /// Marks `item` as no longer processing.
    ///
    /// If it was added again while it was processing, it is queued again now.
    /// Calling `done` for an item that is not processing does nothing.
    pub fn done(&self, item: &T) {
        let inner = &*self.inner;
        let mut state = lock(&inner.state);
        if !state.processing.remove(item) {
            return;
        }
        if let Some(metrics) = &inner.metrics
            && let Some(timing) = state.timing.as_mut()
            && let Some(started) = timing.started_at.remove(item)
        {
            metrics.work_duration.observe(
                Instant::now()
                    .saturating_duration_since(started)
                    .as_secs_f64(),
            );
        }
        // After `shutdown` the dirty set is empty, so this only re-queues
        // while running or draining.
        let requeued = state.dirty.contains(item);
        if requeued {
            state.queue.push_back(item.clone());
        }
        let drained = state.draining && state.processing.is_empty() && state.dirty.is_empty();
        drop(state);
        if requeued {
            inner.getters.notify_one();
        }
        if drained {
            inner.drained.notify_waiters();
        }
    }

    /// Number of items waiting to be handed out.
    ///
    /// Items added again while processing are not counted until their `done`.
    pub fn len(&self) -> usize {
        lock(&self.inner.state).queue.len()
    }

    /// True if no item is waiting to be handed out.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True once [`shutdown`](Self::shutdown) or
    /// [`shutdown_with_drain`](Self::shutdown_with_drain) has been called.
    pub fn is_shutting_down(&self) -> bool {
        self.inner.is_shutting_down()
    }

    /// Shuts the queue down immediately.
    ///
    /// Waiting and future [`get`](Self::get) calls return `None`, later adds
    /// are ignored, and queued or delayed items are dropped. Items currently
    /// processing stay with their workers (calling `done` for them is still
    /// allowed). Also ends a pending
    /// [`shutdown_with_drain`](Self::shutdown_with_drain) early.
    ///
    /// Unlike client-go, where `Get` keeps returning already queued items after
    /// `ShutDown`, queued items are discarded here; use `shutdown_with_drain`
    /// to have them processed.
    pub fn shutdown(&self) {
        let inner = &*self.inner;
        {
            let mut state = lock(&inner.state);
            state.shutting_down = true;
            state.draining = false;
            if let Some(metrics) = &inner.metrics {
                metrics.depth.dec_by(gauge_value(state.dirty.len()));
            }
            state.queue.clear();
            state.dirty.clear();
            if let Some(timing) = state.timing.as_mut() {
                timing.added_at.clear();
            }
        }
        inner.delay.stop();
        inner.getters.notify_waiters();
        inner.drained.notify_waiters();
    }

    /// Shuts the queue down after the remaining work is finished.
    ///
    /// New adds (immediate and delayed) are ignored from now on and items
    /// waiting for a delay are dropped, but workers keep receiving the items
    /// that are already queued, including items that were added again while
    /// processing. Returns once nothing is queued and every handed-out item
    /// is `done`; then [`get`](Self::get) returns `None`.
    ///
    /// This only finishes if workers keep calling `get` and `done`. To bound
    /// the wait, wrap it in [`tokio::time::timeout`] and call
    /// [`shutdown`](Self::shutdown) on expiry, which also makes this future
    /// return.
    pub async fn shutdown_with_drain(&self) {
        let inner = &*self.inner;
        {
            let mut state = lock(&inner.state);
            if !state.shutting_down {
                state.shutting_down = true;
                state.draining = true;
            }
        }
        inner.delay.stop();
        // Getters waiting on an empty queue may have nothing left to wait for.
        inner.getters.notify_waiters();
        loop {
            let mut notified = pin!(inner.drained.notified());
            notified.as_mut().enable();
            {
                let state = lock(&inner.state);
                if !state.draining || (state.processing.is_empty() && state.dirty.is_empty()) {
                    return;
                }
            }
            notified.await;
        }
    }

    /// Counts one retry in the `workqueue_retries_total` metric.
    pub(crate) fn record_retry(&self) {
        if let Some(metrics) = &self.inner.metrics {
            metrics.retries.inc();
        }
    }
}

/// `now + delay`, clamped to a far-future instant on overflow.
fn deadline(now: Instant, delay: Duration) -> Instant {
    const FAR_FUTURE: Duration = Duration::from_secs(86_400 * 365 * 30);
    now.checked_add(delay)
        .or_else(|| now.checked_add(FAR_FUTURE))
        .unwrap_or(now)
}

/// Marker for a [`WorkQueueBuilder`] without a rate limiter.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoRateLimiter;

/// Configures and builds a [`WorkQueue`] or, once a rate limiter is set, a
/// [`RateLimitingQueue`]. Created by [`WorkQueue::builder`].
///
/// ```
/// use prometheus_client::registry::Registry;
/// use kubewright_runtime::workqueue::{QueueMetrics, WorkQueue, default_controller_rate_limiter};
///
/// let mut registry = Registry::default();
/// let metrics = QueueMetrics::register(&mut registry);
///
/// let plain: WorkQueue<String> = WorkQueue::builder().name("plain").metrics(&metrics).build();
/// let limited = WorkQueue::<String>::builder()
///     .name("limited")
///     .metrics(&metrics)
///     .rate_limiter(default_controller_rate_limiter())
///     .build();
/// # drop((plain, limited));
/// ```
pub struct WorkQueueBuilder<T, L = NoRateLimiter> {
    name: String,
    metrics: Option<QueueMetrics>,
    rate_limiter: L,
    item: PhantomData<fn(T) -> T>,
}

impl<T, L> fmt::Debug for WorkQueueBuilder<T, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkQueueBuilder")
            .field("name", &self.name)
            .field("metrics", &self.metrics.is_some())
            .finish_non_exhaustive()
    }
}

impl<T, L> WorkQueueBuilder<T, L>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    /// Sets the queue's name, used as the `name` label of its metrics.
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Reports the queue's metrics through `metrics` (see [`QueueMetrics`]).
    ///
    /// As in client-go, metrics are only recorded for queues that also have a
    /// [`name`](Self::name); an unnamed queue ignores this setting.
    #[must_use]
    pub fn metrics(mut self, metrics: &QueueMetrics) -> Self {
        self.metrics = Some(metrics.clone());
        self
    }

    /// Makes [`build`](WorkQueueBuilder::build) return a
    /// [`RateLimitingQueue`] using `rate_limiter`.
    #[must_use]
    pub fn rate_limiter<R>(self, rate_limiter: R) -> WorkQueueBuilder<T, Arc<dyn RateLimiter<T>>>
    where
        R: RateLimiter<T> + 'static,
    {
        WorkQueueBuilder {
            name: self.name,
            metrics: self.metrics,
            rate_limiter: Arc::new(rate_limiter),
            item: PhantomData,
        }
    }
}

impl<T> WorkQueueBuilder<T, NoRateLimiter>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    /// Builds the queue.
    #[must_use]
    pub fn build(self) -> WorkQueue<T> {
        WorkQueue::from_parts(self.name, self.metrics.as_ref())
    }
}

impl<T> WorkQueueBuilder<T, Arc<dyn RateLimiter<T>>>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    /// Builds the rate limiting queue.
    #[must_use]
    pub fn build(self) -> RateLimitingQueue<T> {
        let queue = WorkQueue::from_parts(self.name, self.metrics.as_ref());
        RateLimitingQueue::from_parts(queue, self.rate_limiter)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test]
    async fn repeated_adds_are_deduplicated() {
        let queue = WorkQueue::new();
        queue.add("a");
        queue.add("b");
        queue.add("a");
        queue.add("b");
        queue.add("c");
        assert_eq!(queue.len(), 3);
        assert_eq!(queue.get().await, Some("a"));
        assert_eq!(queue.get().await, Some("b"));
        assert_eq!(queue.get().await, Some("c"));
        assert!(queue.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn item_added_while_processing_is_requeued_after_done() {
        let queue = WorkQueue::new();
        queue.add("a");
        let item = queue.get().await.expect("item");
        queue.add("a");
        queue.add("a");
        // Not handed out again while processing.
        assert_eq!(queue.len(), 0);
        let second = tokio::time::timeout(Duration::from_millis(10), queue.get()).await;
        assert!(second.is_err(), "processing item must not be handed out");

        queue.done(&item);
        assert_eq!(queue.len(), 1);
        assert_eq!(queue.get().await, Some("a"));
        queue.done(&"a");
        assert!(queue.is_empty());
        // `done` for an item that is not processing is ignored.
        queue.done(&"a");
        assert!(queue.is_empty());
    }

    #[tokio::test]
    async fn done_without_readd_does_not_requeue() {
        let queue = WorkQueue::new();
        queue.add(1);
        let item = queue.get().await.expect("item");
        queue.done(&item);
        assert!(queue.is_empty());
        queue.add(1);
        assert_eq!(queue.len(), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_workers_never_share_a_key() {
        const WORKERS: usize = 8;
        const KEYS: u32 = 16;
        const ADDS: u32 = 4_000;

        let queue: WorkQueue<u32> = WorkQueue::new();
        let in_flight = Arc::new(Mutex::new(HashSet::new()));
        let processed = Arc::new(AtomicUsize::new(0));

        let mut workers = Vec::new();
        for _ in 0..WORKERS {
            let queue = queue.clone();
            let in_flight = Arc::clone(&in_flight);
            let processed = Arc::clone(&processed);
            workers.push(tokio::spawn(async move {
                while let Some(key) = queue.get().await {
                    assert!(
                        lock(&in_flight).insert(key),
                        "key {key} handed to two workers at once"
                    );
                    tokio::task::yield_now().await;
                    assert!(lock(&in_flight).remove(&key));
                    processed.fetch_add(1, Ordering::Relaxed);
                    queue.done(&key);
                }
            }));
        }

        let producers: Vec<_> = (0..2)
            .map(|p| {
                let queue = queue.clone();
                tokio::spawn(async move {
                    for i in 0..ADDS {
                        queue.add((i + p) % KEYS);
                        if i % 64 == 0 {
                            tokio::task::yield_now().await;
                        }
                    }
                })
            })
            .collect();
        for producer in producers {
            producer.await.expect("producer");
        }
        queue.shutdown_with_drain().await;
        for worker in workers {
            worker.await.expect("worker");
        }

        assert!(lock(&in_flight).is_empty());
        let processed = processed.load(Ordering::Relaxed);
        assert!(processed >= KEYS as usize, "processed {processed}");
        assert!(processed <= 2 * ADDS as usize, "processed {processed}");
        assert!(queue.is_empty());
    }

    #[tokio::test]
    async fn shutdown_wakes_waiting_getters() {
        let queue: WorkQueue<u32> = WorkQueue::new();
        let getters: Vec<_> = (0..3)
            .map(|_| {
                let queue = queue.clone();
                tokio::spawn(async move { queue.get().await })
            })
            .collect();
        // Let the getters start waiting.
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        queue.shutdown();
        for getter in getters {
            assert_eq!(getter.await.expect("getter"), None);
        }
        assert!(queue.is_shutting_down());
        assert_eq!(queue.get().await, None);
    }

    #[tokio::test]
    async fn shutdown_drops_items_and_ignores_adds() {
        let queue = WorkQueue::new();
        queue.add("a");
        queue.add("b");
        let processing = queue.get().await.expect("item");
        queue.add(processing);
        queue.shutdown();
        assert!(queue.is_empty());
        queue.add("c");
        assert!(queue.is_empty());
        assert_eq!(queue.get().await, None);
        // done after shutdown is allowed and does not requeue.
        queue.done(&processing);
        assert!(queue.is_empty());
    }

    #[tokio::test]
    async fn shutdown_with_drain_hands_out_remaining_items_and_waits_for_done() {
        let queue = WorkQueue::new();
        queue.add("a");
        queue.add("b");
        let first = queue.get().await.expect("item");
        assert_eq!(first, "a");
        queue.add("a"); // re-added while processing: must still be processed

        let drain = tokio::spawn({
            let queue = queue.clone();
            async move { queue.shutdown_with_drain().await }
        });
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(queue.is_shutting_down());
        assert!(!drain.is_finished());

        queue.add("c"); // ignored
        assert_eq!(queue.get().await, Some("b"));
        queue.done(&"b");
        // "a" is dirty and processing: getters wait for it instead of ending.
        let waiting = tokio::spawn({
            let queue = queue.clone();
            async move { queue.get().await }
        });
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(!waiting.is_finished());
        queue.done(&first);
        assert_eq!(waiting.await.expect("getter"), Some("a"));
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(!drain.is_finished(), "drain must wait for the last done");
        assert_eq!(queue.get().await, None);
        queue.done(&"a");
        drain.await.expect("drain");
        assert_eq!(queue.get().await, None);
    }

    #[tokio::test]
    async fn shutdown_with_drain_on_idle_queue_returns_immediately() {
        let queue: WorkQueue<u32> = WorkQueue::new();
        let getter = tokio::spawn({
            let queue = queue.clone();
            async move { queue.get().await }
        });
        tokio::task::yield_now().await;
        queue.shutdown_with_drain().await;
        assert_eq!(getter.await.expect("getter"), None);
    }

    #[tokio::test]
    async fn shutdown_ends_a_pending_drain() {
        let queue = WorkQueue::new();
        queue.add(1);
        let item = queue.get().await.expect("item");
        let drain = tokio::spawn({
            let queue = queue.clone();
            async move { queue.shutdown_with_drain().await }
        });
        tokio::task::yield_now().await;
        assert!(!drain.is_finished());
        queue.shutdown();
        drain.await.expect("drain");
        queue.done(&item);
    }

    #[tokio::test(start_paused = true)]
    async fn cancelled_get_does_not_lose_items() {
        let queue = WorkQueue::new();
        let cancelled = tokio::time::timeout(Duration::from_millis(1), queue.get()).await;
        assert!(cancelled.is_err());
        let getter = tokio::spawn({
            let queue = queue.clone();
            async move { queue.get().await }
        });
        tokio::task::yield_now().await;
        queue.add("x");
        assert_eq!(getter.await.expect("getter"), Some("x"));
    }
}
