//! A work queue with per-item retry back-off (client-go's rate limiting queue).

use std::fmt;
use std::hash::Hash;
use std::ops::Deref;
use std::sync::Arc;

use super::queue::WorkQueue;
use super::rate_limiter::RateLimiter;

/// A [`WorkQueue`] whose failed items are retried after a delay chosen by a
/// [`RateLimiter`].
///
/// Dereferences to [`WorkQueue`], so `add`, `get`, `done`, `add_after` and the
/// shutdown methods are all available. Build one with
/// [`WorkQueue::builder`]`().rate_limiter(..).build()` or
/// [`RateLimitingQueue::new`].
///
/// The usual worker loop calls [`forget`](Self::forget) after a successful
/// reconcile and [`add_rate_limited`](Self::add_rate_limited) after a failed
/// one, then [`done`](WorkQueue::done) in both cases:
///
/// ```
/// use kubewright_runtime::workqueue::{RateLimitingQueue, default_controller_rate_limiter};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let queue = RateLimitingQueue::new(default_controller_rate_limiter());
/// queue.add("default/web");
///
/// // First attempt fails: retried after the back-off (5 ms).
/// let key = queue.get().await.expect("running");
/// queue.add_rate_limited(key);
/// queue.done(&key);
/// assert_eq!(queue.num_requeues(&key), 1);
///
/// // Second attempt succeeds: the back-off is reset.
/// let key = queue.get().await.expect("running");
/// queue.forget(&key);
/// queue.done(&key);
/// assert_eq!(queue.num_requeues(&key), 0);
/// # }
/// ```
pub struct RateLimitingQueue<T> {
    queue: WorkQueue<T>,
    rate_limiter: Arc<dyn RateLimiter<T>>,
}

impl<T> Clone for RateLimitingQueue<T> {
    fn clone(&self) -> Self {
        RateLimitingQueue {
            queue: self.queue.clone(),
            rate_limiter: Arc::clone(&self.rate_limiter),
        }
    }
}

impl<T> fmt::Debug for RateLimitingQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitingQueue")
            .field("queue", &self.queue)
            .finish_non_exhaustive()
    }
}

impl<T> Deref for RateLimitingQueue<T> {
    type Target = WorkQueue<T>;

    fn deref(&self) -> &WorkQueue<T> {
        &self.queue
    }
}

impl<T> RateLimitingQueue<T>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    /// An unnamed queue without metrics using `rate_limiter`.
    pub fn new<R>(rate_limiter: R) -> Self
    where
        R: RateLimiter<T> + 'static,
    {
        WorkQueue::builder().rate_limiter(rate_limiter).build()
    }

    pub(crate) fn from_parts(queue: WorkQueue<T>, rate_limiter: Arc<dyn RateLimiter<T>>) -> Self {
        RateLimitingQueue {
            queue,
            rate_limiter,
        }
    }

    /// Adds `item` after the delay the rate limiter asks for, counting one
    /// more requeue for it (and one in `workqueue_retries_total`).
    ///
    /// Ignored once the queue is shutting down, without consulting the
    /// limiter.
    ///
    /// # Panics
    ///
    /// Like [`WorkQueue::add_after`], if the delay is non-zero and this is
    /// called outside a Tokio runtime.
    pub fn add_rate_limited(&self, item: T) {
        if self.queue.is_shutting_down() {
            return;
        }
        self.queue.record_retry();
        let delay = self.rate_limiter.when(&item);
        self.queue.add_after(item, delay);
    }

    /// Tells the rate limiter to stop tracking `item` (it was processed
    /// successfully); its next failure starts from the initial back-off.
    /// Does not remove the item from the queue.
    pub fn forget(&self, item: &T) {
        self.rate_limiter.forget(item);
    }

    /// How many times `item` has been rate limited since it was last
    /// forgotten.
    pub fn num_requeues(&self, item: &T) -> u32 {
        self.rate_limiter.num_requeues(item)
    }

    /// The underlying work queue.
    pub fn queue(&self) -> &WorkQueue<T> {
        &self.queue
    }

    /// The rate limiter deciding the delays.
    pub fn rate_limiter(&self) -> &dyn RateLimiter<T> {
        &*self.rate_limiter
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::workqueue::{ItemExponentialFailureRateLimiter, ItemFastSlowRateLimiter};

    #[tokio::test(start_paused = true)]
    async fn add_rate_limited_backs_off_and_counts_requeues() {
        let queue = WorkQueue::builder()
            .name("rl")
            .rate_limiter(ItemExponentialFailureRateLimiter::new(
                Duration::from_millis(10),
                Duration::from_secs(1),
            ))
            .build();
        let start = tokio::time::Instant::now();

        queue.add_rate_limited("a"); // 10 ms
        assert_eq!(queue.num_requeues(&"a"), 1);
        assert!(queue.is_empty());
        assert_eq!(queue.get().await, Some("a"));
        assert_eq!(start.elapsed(), Duration::from_millis(10));

        queue.add_rate_limited("a"); // 20 ms, while processing
        queue.done(&"a");
        assert_eq!(queue.num_requeues(&"a"), 2);
        assert_eq!(queue.get().await, Some("a"));
        assert_eq!(start.elapsed(), Duration::from_millis(30));
        queue.done(&"a");

        queue.forget(&"a");
        assert_eq!(queue.num_requeues(&"a"), 0);
        queue.add_rate_limited("a"); // back to 10 ms
        assert_eq!(queue.get().await, Some("a"));
        assert_eq!(start.elapsed(), Duration::from_millis(40));
    }

    #[tokio::test(start_paused = true)]
    async fn rate_limited_items_are_deduplicated() {
        let queue = RateLimitingQueue::new(ItemFastSlowRateLimiter::new(
            Duration::from_millis(5),
            Duration::from_secs(1),
            1,
        ));
        queue.add_rate_limited(1); // 5 ms
        queue.add_rate_limited(1); // 1 s: later deadline, ignored
        assert_eq!(queue.num_requeues(&1), 2);
        assert_eq!(queue.get().await, Some(1));
        queue.done(&1);
        tokio::time::advance(Duration::from_secs(2)).await;
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(queue.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn add_rate_limited_is_ignored_after_shutdown() {
        let queue = RateLimitingQueue::new(ItemExponentialFailureRateLimiter::default());
        queue.shutdown();
        queue.add_rate_limited("late");
        assert_eq!(queue.num_requeues(&"late"), 0);
        assert!(queue.is_empty());
        assert_eq!(queue.get().await, None);
    }
}
