//! Work queues for controllers, modelled on client-go's `util/workqueue`.
//!
//! A [`WorkQueue`] hands keys (usually `namespace/name` strings) to workers
//! with the guarantees controllers rely on:
//!
//! * **Deduplication.** Adding an item that is already waiting is a no-op, so
//!   a burst of events for one object results in a single reconcile.
//! * **No concurrent processing of one item.** An item handed out by
//!   [`WorkQueue::get`] is *processing* until [`WorkQueue::done`] is called
//!   for it. If it is added again meanwhile it is remembered (*dirty*) and
//!   queued again only once `done` is called, so two workers never hold the
//!   same item at the same time.
//! * **Fairness.** Items are handed out in FIFO order.
//!
//! On top of that:
//!
//! * [`WorkQueue::add_after`] delays an item (client-go's delaying queue). A
//!   single background Tokio task per queue, started on first use, waits for
//!   the earliest deadline; it is woken by a [`tokio::sync::Notify`] when an
//!   earlier deadline arrives and stops on shutdown, so nothing busy-polls.
//! * [`RateLimitingQueue`] adds per-item back-off through a [`RateLimiter`]
//!   (client-go's rate limiting queue), with the usual limiters:
//!   [`ItemExponentialFailureRateLimiter`], [`BucketRateLimiter`],
//!   [`ItemFastSlowRateLimiter`], [`MaxOfRateLimiter`] and
//!   [`default_controller_rate_limiter`].
//! * [`QueueMetrics`] exports client-go's `workqueue_*` metric families via
//!   `prometheus-client`, labelled by queue name.
//!
//! All time is measured with [`tokio::time::Instant`], so tests can run with
//! a paused clock (`#[tokio::test(start_paused = true)]`).
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use kubewright_runtime::workqueue::{WorkQueue, default_controller_rate_limiter};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let queue = WorkQueue::builder()
//!     .name("pods")
//!     .rate_limiter(default_controller_rate_limiter())
//!     .build();
//!
//! queue.add("default/nginx".to_string());
//!
//! let worker = {
//!     let queue = queue.clone();
//!     tokio::spawn(async move {
//!         while let Some(key) = queue.get().await {
//!             let ok = !key.is_empty(); // reconcile `key` here
//!             if ok {
//!                 queue.forget(&key);
//!             } else {
//!                 queue.add_rate_limited(key.clone());
//!             }
//!             queue.done(&key);
//!         }
//!     })
//! };
//!
//! queue.shutdown_with_drain().await;
//! worker.await.expect("worker panicked");
//! # }
//! ```

mod delaying;
mod metrics;
mod queue;
mod rate_limiter;
mod rate_limiting;

pub use metrics::QueueMetrics;
pub use queue::{NoRateLimiter, WorkQueue, WorkQueueBuilder};
pub use rate_limiter::{
    BucketRateLimiter, ItemExponentialFailureRateLimiter, ItemFastSlowRateLimiter,
    MaxOfRateLimiter, RateLimiter, RateLimiterError, default_controller_rate_limiter,
};
pub use rate_limiting::RateLimitingQueue;

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks a mutex, recovering the data if a previous holder panicked.
///
/// Every critical section in this module leaves its data consistent before
/// calling anything that could panic (user `Hash`/`Eq` impls aside), so
/// continuing after a poisoned lock is safe and keeps one panicking worker
/// from taking the whole queue down.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
