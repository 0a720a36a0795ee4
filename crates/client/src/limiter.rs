//! Client-side rate limiting: a token bucket shared by every request of a client
//! (client-go's QPS/Burst).

use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// A token bucket: `burst` tokens, refilled at `qps` per second. `acquire` reserves a
/// token and waits until it is due, like client-go's `tokenBucketRateLimiter.Wait`.
#[derive(Debug)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    state: Mutex<(f64, Instant)>,
}

impl TokenBucket {
    /// A bucket; `None` when `qps <= 0` (no limiting).
    pub fn new(qps: f32, burst: u32) -> Option<Self> {
        if qps <= 0.0 || !qps.is_finite() {
            return None;
        }
        let burst = f64::from(burst.max(1));
        Some(Self {
            qps: f64::from(qps),
            burst,
            state: Mutex::new((burst, Instant::now())),
        })
    }

    /// Reserves a token; returns how long the caller must wait for it.
    pub fn reserve(&self) -> Duration {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let elapsed = now.saturating_duration_since(st.1).as_secs_f64();
        st.0 = (st.0 + elapsed * self.qps).min(self.burst);
        st.1 = now;
        st.0 -= 1.0;
        if st.0 >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-st.0 / self.qps)
        }
    }

    /// Waits for a token. Returns the time spent waiting.
    pub async fn acquire(&self) -> Duration {
        let wait = self.reserve();
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn burst_then_qps() {
        let b = TokenBucket::new(5.0, 10).unwrap();
        for _ in 0..10 {
            assert_eq!(b.reserve(), Duration::ZERO);
        }
        // The 11th waits 1/qps, the 12th 2/qps (reservations queue up).
        assert_eq!(b.reserve(), Duration::from_millis(200));
        assert_eq!(b.reserve(), Duration::from_millis(400));
        tokio::time::advance(Duration::from_secs(2)).await;
        // 2 s refill 10 tokens, 2 were owed: 8 available now.
        for _ in 0..8 {
            assert_eq!(b.reserve(), Duration::ZERO);
        }
        assert!(b.reserve() > Duration::ZERO);
        assert!(TokenBucket::new(0.0, 10).is_none());
        assert!(TokenBucket::new(-1.0, 10).is_none());
    }
}
