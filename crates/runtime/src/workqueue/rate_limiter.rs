//! Rate limiters deciding how long an item waits before it is retried.

use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::lock;

/// Decides how long an item must wait before it is queued again.
///
/// Used by [`RateLimitingQueue::add_rate_limited`](super::RateLimitingQueue::add_rate_limited).
/// Implementations are shared between workers, hence `Send + Sync` and
/// `&self` methods.
///
/// ```
/// use std::time::Duration;
/// use kubewright_runtime::workqueue::RateLimiter;
///
/// /// Always waits one second.
/// struct OneSecond;
///
/// impl<T> RateLimiter<T> for OneSecond {
///     fn when(&self, _item: &T) -> Duration {
///         Duration::from_secs(1)
///     }
///     fn forget(&self, _item: &T) {}
///     fn num_requeues(&self, _item: &T) -> u32 {
///         0
///     }
/// }
/// ```
pub trait RateLimiter<T>: Send + Sync {
    /// Records another failure of `item` and returns how long it should wait
    /// before being retried.
    fn when(&self, item: &T) -> Duration;

    /// Stops tracking `item`, typically after it was processed successfully.
    /// Its next failure starts from scratch. Limiters that are not per item
    /// (like [`BucketRateLimiter`]) ignore this.
    fn forget(&self, item: &T);

    /// How many times `item` has been rate limited since it was last
    /// forgotten.
    fn num_requeues(&self, item: &T) -> u32;
}

impl<T, R> RateLimiter<T> for Box<R>
where
    R: RateLimiter<T> + ?Sized,
{
    fn when(&self, item: &T) -> Duration {
        (**self).when(item)
    }
    fn forget(&self, item: &T) {
        (**self).forget(item);
    }
    fn num_requeues(&self, item: &T) -> u32 {
        (**self).num_requeues(item)
    }
}

impl<T, R> RateLimiter<T> for Arc<R>
where
    R: RateLimiter<T> + ?Sized,
{
    fn when(&self, item: &T) -> Duration {
        (**self).when(item)
    }
    fn forget(&self, item: &T) {
        (**self).forget(item);
    }
    fn num_requeues(&self, item: &T) -> u32 {
        (**self).num_requeues(item)
    }
}

/// Invalid rate limiter configuration.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RateLimiterError {
    /// The rate is not a positive number of events per second, or is so
    /// small that the interval between events is not representable.
    #[error("invalid rate {0} per second: must be a positive number")]
    InvalidRate(f64),
    /// A token bucket needs room for at least one token.
    #[error("burst must be at least 1")]
    ZeroBurst,
}

/// Per-item exponential back-off: `base * 2^failures`, capped at `max`.
///
/// The first failure of an item waits `base`, the next `2 * base`, and so on,
/// never more than `max` (the computation saturates instead of
/// overflowing). Failures are counted per item until it is
/// [forgotten](RateLimiter::forget). Defaults: 5 ms base, 1000 s max.
pub struct ItemExponentialFailureRateLimiter<T> {
    base: Duration,
    max: Duration,
    failures: Mutex<HashMap<T, u32>>,
}

impl<T> ItemExponentialFailureRateLimiter<T> {
    /// Back-off starting at `base` and capped at `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        ItemExponentialFailureRateLimiter {
            base,
            max,
            failures: Mutex::new(HashMap::new()),
        }
    }

    fn delay_for(&self, failures: u32) -> Duration {
        2u32.checked_pow(failures)
            .and_then(|factor| self.base.checked_mul(factor))
            .map_or(self.max, |delay| delay.min(self.max))
    }
}

impl<T> Default for ItemExponentialFailureRateLimiter<T> {
    /// 5 ms base, 1000 s max (client-go's controller defaults).
    fn default() -> Self {
        ItemExponentialFailureRateLimiter::new(Duration::from_millis(5), Duration::from_secs(1000))
    }
}

impl<T> fmt::Debug for ItemExponentialFailureRateLimiter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ItemExponentialFailureRateLimiter")
            .field("base", &self.base)
            .field("max", &self.max)
            .field("tracked_items", &lock(&self.failures).len())
            .finish()
    }
}

impl<T> RateLimiter<T> for ItemExponentialFailureRateLimiter<T>
where
    T: Clone + Eq + Hash + Send + Sync,
{
    fn when(&self, item: &T) -> Duration {
        let mut failures = lock(&self.failures);
        let count = failures.entry(item.clone()).or_insert(0);
        let previous = *count;
        *count = count.saturating_add(1);
        self.delay_for(previous)
    }

    fn forget(&self, item: &T) {
        lock(&self.failures).remove(item);
    }

    fn num_requeues(&self, item: &T) -> u32 {
        lock(&self.failures).get(item).copied().unwrap_or(0)
    }
}

/// Overall token bucket, the same for every item.
///
/// Allows `burst` items at once and `qps` items per second on average after
/// that: each call to [`when`](RateLimiter::when) reserves the next token and
/// returns how long until it is available. Time is read from
/// [`tokio::time::Instant`], so the limiter follows a paused test clock.
/// Defaults: 10 qps, burst 100.
///
/// ```
/// use std::time::Duration;
/// use kubewright_runtime::workqueue::{BucketRateLimiter, RateLimiter};
///
/// let limiter = BucketRateLimiter::new(10.0, 2).expect("valid configuration");
/// assert_eq!(RateLimiter::<&str>::when(&limiter, &"a"), Duration::ZERO);
/// assert_eq!(RateLimiter::<&str>::when(&limiter, &"b"), Duration::ZERO);
/// // Burst used up: the third token is 1/qps away (give or take the time
/// // that passed between calls).
/// assert!(RateLimiter::<&str>::when(&limiter, &"c") > Duration::from_millis(90));
/// ```
#[derive(Debug)]
pub struct BucketRateLimiter {
    /// Time between two tokens; `None` for an unlimited rate.
    interval: Option<Duration>,
    burst: u32,
    /// Theoretical arrival time (GCRA): when the bucket will be full again
    /// given the tokens reserved so far. `None` until first use.
    full_at: Mutex<Option<Instant>>,
}

impl BucketRateLimiter {
    /// A bucket holding up to `burst` tokens, refilled at `qps` tokens per
    /// second. `qps` may be `f64::INFINITY` for no limit.
    ///
    /// # Errors
    ///
    /// [`RateLimiterError::InvalidRate`] if `qps` is not positive (or NaN,
    /// or too small to represent), [`RateLimiterError::ZeroBurst`] if `burst`
    /// is 0.
    pub fn new(qps: f64, burst: u32) -> Result<Self, RateLimiterError> {
        if burst == 0 {
            return Err(RateLimiterError::ZeroBurst);
        }
        if qps.is_nan() || qps <= 0.0 {
            return Err(RateLimiterError::InvalidRate(qps));
        }
        let interval = if qps.is_infinite() {
            None
        } else {
            let nanos = (1e9 / qps).round();
            if nanos >= u64::MAX as f64 {
                return Err(RateLimiterError::InvalidRate(qps));
            }
            // In range per the check above; `as` saturates anyway.
            Some(Duration::from_nanos(nanos as u64)).filter(|interval| !interval.is_zero())
        };
        Ok(BucketRateLimiter {
            interval,
            burst,
            full_at: Mutex::new(None),
        })
    }

    /// Reserves one token and returns the wait until it is available.
    fn reserve(&self) -> Duration {
        let Some(interval) = self.interval else {
            return Duration::ZERO;
        };
        let now = Instant::now();
        let mut full_at = lock(&self.full_at);
        let start = match *full_at {
            Some(at) if at > now => at,
            _ => now,
        };
        let new_full_at = start.checked_add(interval).unwrap_or(start);
        *full_at = Some(new_full_at);
        // The token is available once the bucket, starting from
        // `new_full_at`, has room for `burst` tokens again.
        match new_full_at.checked_sub(interval.saturating_mul(self.burst)) {
            Some(available_at) => available_at.saturating_duration_since(now),
            None => Duration::ZERO,
        }
    }
}

impl Default for BucketRateLimiter {
    /// 10 qps with a burst of 100 (client-go's controller defaults).
    fn default() -> Self {
        BucketRateLimiter {
            interval: Some(Duration::from_millis(100)),
            burst: 100,
            full_at: Mutex::new(None),
        }
    }
}

impl<T> RateLimiter<T> for BucketRateLimiter {
    fn when(&self, _item: &T) -> Duration {
        self.reserve()
    }

    fn forget(&self, _item: &T) {}

    fn num_requeues(&self, _item: &T) -> u32 {
        0
    }
}

/// Per-item limiter that waits `fast` for the first `max_fast_attempts`
/// failures of an item and `slow` after that.
pub struct ItemFastSlowRateLimiter<T> {
    fast: Duration,
    slow: Duration,
    max_fast_attempts: u32,
    attempts: Mutex<HashMap<T, u32>>,
}

impl<T> ItemFastSlowRateLimiter<T> {
    /// `fast` for the first `max_fast_attempts` failures, then `slow`.
    pub fn new(fast: Duration, slow: Duration, max_fast_attempts: u32) -> Self {
        ItemFastSlowRateLimiter {
            fast,
            slow,
            max_fast_attempts,
            attempts: Mutex::new(HashMap::new()),
        }
    }
}

impl<T> fmt::Debug for ItemFastSlowRateLimiter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ItemFastSlowRateLimiter")
            .field("fast", &self.fast)
            .field("slow", &self.slow)
            .field("max_fast_attempts", &self.max_fast_attempts)
            .field("tracked_items", &lock(&self.attempts).len())
            .finish()
    }
}

impl<T> RateLimiter<T> for ItemFastSlowRateLimiter<T>
where
    T: Clone + Eq + Hash + Send + Sync,
{
    fn when(&self, item: &T) -> Duration {
        let mut attempts = lock(&self.attempts);
        let count = attempts.entry(item.clone()).or_insert(0);
        *count = count.saturating_add(1);
        if *count <= self.max_fast_attempts {
            self.fast
        } else {
            self.slow
        }
    }

    fn forget(&self, item: &T) {
        lock(&self.attempts).remove(item);
    }

    fn num_requeues(&self, item: &T) -> u32 {
        lock(&self.attempts).get(item).copied().unwrap_or(0)
    }
}

/// Combines limiters: waits for the longest of their delays.
///
/// Every limiter sees every call (so each keeps its own bookkeeping);
/// [`forget`](RateLimiter::forget) forgets the item in all of them and
/// [`num_requeues`](RateLimiter::num_requeues) is the maximum over them.
/// With no limiters, there is never a delay.
pub struct MaxOfRateLimiter<T> {
    limiters: Vec<Box<dyn RateLimiter<T>>>,
}

impl<T> MaxOfRateLimiter<T> {
    /// The maximum over `limiters`.
    pub fn new(limiters: Vec<Box<dyn RateLimiter<T>>>) -> Self {
        MaxOfRateLimiter { limiters }
    }
}

impl<T> fmt::Debug for MaxOfRateLimiter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MaxOfRateLimiter")
            .field("limiters", &self.limiters.len())
            .finish()
    }
}

impl<T> RateLimiter<T> for MaxOfRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        self.limiters
            .iter()
            .map(|limiter| limiter.when(item))
            .fold(Duration::ZERO, Duration::max)
    }

    fn forget(&self, item: &T) {
        for limiter in &self.limiters {
            limiter.forget(item);
        }
    }

    fn num_requeues(&self, item: &T) -> u32 {
        self.limiters
            .iter()
            .map(|limiter| limiter.num_requeues(item))
            .max()
            .unwrap_or(0)
    }
}

/// client-go's `DefaultControllerRateLimiter`: per-item exponential back-off
/// from 5 ms to 1000 s, combined with an overall token bucket of 10 qps and
/// burst 100.
pub fn default_controller_rate_limiter<T>() -> MaxOfRateLimiter<T>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    MaxOfRateLimiter::new(vec![
        Box::new(ItemExponentialFailureRateLimiter::<T>::default()),
        Box::new(BucketRateLimiter::default()),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn exponential_doubles_per_failure_and_forget_resets() {
        let limiter = ItemExponentialFailureRateLimiter::new(5 * MS, Duration::from_secs(1000));
        let delays: Vec<_> = (0..5).map(|_| limiter.when(&"one")).collect();
        assert_eq!(delays, [5 * MS, 10 * MS, 20 * MS, 40 * MS, 80 * MS]);
        assert_eq!(limiter.num_requeues(&"one"), 5);

        // Items are counted separately.
        assert_eq!(limiter.when(&"two"), 5 * MS);
        assert_eq!(limiter.num_requeues(&"two"), 1);

        limiter.forget(&"one");
        assert_eq!(limiter.num_requeues(&"one"), 0);
        assert_eq!(limiter.when(&"one"), 5 * MS);
        assert_eq!(limiter.when(&"one"), 10 * MS);
    }

    #[test]
    fn exponential_is_capped_and_saturates() {
        let limiter = ItemExponentialFailureRateLimiter::new(MS, Duration::from_secs(1));
        let delays: Vec<_> = (0..12).map(|_| limiter.when(&1)).collect();
        assert_eq!(delays[9], 512 * MS);
        assert_eq!(delays[10], Duration::from_secs(1));
        assert_eq!(delays[11], Duration::from_secs(1));

        // Far past any representable power of two: still the cap.
        let limiter = ItemExponentialFailureRateLimiter::new(Duration::MAX, Duration::from_secs(7));
        for _ in 0..100 {
            assert_eq!(limiter.when(&1), Duration::from_secs(7));
        }
        assert_eq!(limiter.num_requeues(&1), 100);
    }

    #[test]
    fn exponential_defaults() {
        let limiter = ItemExponentialFailureRateLimiter::<u8>::default();
        assert_eq!(limiter.when(&0), 5 * MS);
        let last = (0..40).map(|_| limiter.when(&0)).last();
        assert_eq!(last, Some(Duration::from_secs(1000)));
    }

    #[tokio::test(start_paused = true)]
    async fn bucket_allows_burst_then_spaces_by_one_over_qps() {
        let limiter = BucketRateLimiter::new(10.0, 3).expect("valid");
        let when = |item: &str| RateLimiter::<&str>::when(&limiter, &item);
        assert_eq!(when("a"), Duration::ZERO);
        assert_eq!(when("a"), Duration::ZERO);
        assert_eq!(when("b"), Duration::ZERO);
        assert_eq!(when("c"), 100 * MS);
        assert_eq!(when("d"), 200 * MS);
        assert_eq!(when("e"), 300 * MS);

        // After the reserved tokens and a full refill, the burst is back.
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(when("f"), Duration::ZERO);
        assert_eq!(when("g"), Duration::ZERO);
        assert_eq!(when("h"), Duration::ZERO);

        // Partial refill: 150 ms later one token is back and half of the
        // next one.
        tokio::time::advance(150 * MS).await;
        assert_eq!(when("i"), Duration::ZERO);
        assert_eq!(when("j"), 50 * MS);
        assert_eq!(when("k"), 150 * MS);
        assert_eq!(RateLimiter::<&str>::num_requeues(&limiter, &"a"), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn bucket_defaults_are_ten_qps_burst_hundred() {
        let limiter = BucketRateLimiter::default();
        for i in 0..100u32 {
            assert_eq!(limiter.when(&i), Duration::ZERO);
        }
        assert_eq!(limiter.when(&100u32), 100 * MS);
        assert_eq!(limiter.when(&101u32), 200 * MS);
    }

    #[test]
    fn bucket_rejects_invalid_configuration() {
        assert_eq!(
            BucketRateLimiter::new(0.0, 1).err(),
            Some(RateLimiterError::InvalidRate(0.0))
        );
        assert_eq!(
            BucketRateLimiter::new(-1.0, 1).err(),
            Some(RateLimiterError::InvalidRate(-1.0))
        );
        assert!(matches!(
            BucketRateLimiter::new(f64::NAN, 1),
            Err(RateLimiterError::InvalidRate(_))
        ));
        assert!(matches!(
            BucketRateLimiter::new(1e-30, 1),
            Err(RateLimiterError::InvalidRate(_))
        ));
        assert_eq!(
            BucketRateLimiter::new(1.0, 0).err(),
            Some(RateLimiterError::ZeroBurst)
        );
        let unlimited = BucketRateLimiter::new(f64::INFINITY, 1).expect("valid");
        for i in 0..10 {
            assert_eq!(unlimited.when(&i), Duration::ZERO);
        }
    }

    #[test]
    fn fast_slow_switches_after_max_fast_attempts() {
        let limiter = ItemFastSlowRateLimiter::new(5 * MS, Duration::from_secs(10), 3);
        let delays: Vec<_> = (0..5).map(|_| limiter.when(&"x")).collect();
        assert_eq!(
            delays,
            [
                5 * MS,
                5 * MS,
                5 * MS,
                Duration::from_secs(10),
                Duration::from_secs(10)
            ]
        );
        assert_eq!(limiter.num_requeues(&"x"), 5);
        assert_eq!(limiter.when(&"y"), 5 * MS);
        limiter.forget(&"x");
        assert_eq!(limiter.num_requeues(&"x"), 0);
        assert_eq!(limiter.when(&"x"), 5 * MS);
    }

    #[test]
    fn max_of_takes_the_longest_delay_and_forgets_everywhere() {
        let limiter: MaxOfRateLimiter<&str> = MaxOfRateLimiter::new(vec![
            Box::new(ItemFastSlowRateLimiter::new(3 * MS, 1000 * MS, 2)),
            Box::new(ItemExponentialFailureRateLimiter::new(
                MS,
                Duration::from_secs(1),
            )),
        ]);
        let delays: Vec<_> = (0..4).map(|_| limiter.when(&"one")).collect();
        // max(fast-slow, exponential): (3,1) (3,2) (1000,4) (1000,8)
        assert_eq!(delays, [3 * MS, 3 * MS, 1000 * MS, 1000 * MS]);
        assert_eq!(limiter.num_requeues(&"one"), 4);

        limiter.forget(&"one");
        assert_eq!(limiter.num_requeues(&"one"), 0);
        assert_eq!(limiter.when(&"one"), 3 * MS);

        let empty: MaxOfRateLimiter<u8> = MaxOfRateLimiter::new(Vec::new());
        assert_eq!(empty.when(&1), Duration::ZERO);
        assert_eq!(empty.num_requeues(&1), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn default_controller_rate_limiter_combines_backoff_and_bucket() {
        let limiter = default_controller_rate_limiter::<String>();
        let key = "ns/name".to_string();
        assert_eq!(limiter.when(&key), 5 * MS);
        assert_eq!(limiter.when(&key), 10 * MS);
        assert_eq!(limiter.num_requeues(&key), 2);
        // Drain the shared bucket (98 tokens left) with other keys, each
        // failing once (5 ms back-off).
        for i in 0..98 {
            assert_eq!(limiter.when(&format!("k{i}")), 5 * MS);
        }
        // Now the bucket dominates the 5 ms back-off of a fresh item.
        assert_eq!(limiter.when(&"fresh".to_string()), 100 * MS);
        limiter.forget(&key);
        assert_eq!(limiter.num_requeues(&key), 0);
    }

    #[test]
    fn user_defined_limiters_compose_through_box_and_arc() {
        struct Fixed(Duration);
        impl<T> RateLimiter<T> for Fixed {
            fn when(&self, _item: &T) -> Duration {
                self.0
            }
            fn forget(&self, _item: &T) {}
            fn num_requeues(&self, _item: &T) -> u32 {
                7
            }
        }
        let shared = Arc::new(Fixed(42 * MS));
        let limiter: MaxOfRateLimiter<u8> =
            MaxOfRateLimiter::new(vec![Box::new(Arc::clone(&shared)), Box::new(Fixed(MS))]);
        assert_eq!(limiter.when(&0), 42 * MS);
        assert_eq!(limiter.num_requeues(&0), 7);
    }
}
