//! Bounds of streaming sessions (exec, attach, port-forward): how many are open at once,
//! and how long one may stay without a byte in either direction (the kubelet's
//! `--streaming-connection-idle-timeout`, 4 hours by default).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

/// When bytes last moved on a connection.
#[derive(Debug)]
pub(crate) struct Activity {
    start: Instant,
    /// Milliseconds after `start`.
    last: AtomicU64,
}

impl Activity {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            start: Instant::now(),
            last: AtomicU64::new(0),
        })
    }

    fn touch(&self) {
        let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.fetch_max(ms, Ordering::Relaxed);
    }

    /// Completes once no byte has moved for `timeout`.
    pub(crate) async fn idle(&self, timeout: Duration) {
        loop {
            let last = self.start + Duration::from_millis(self.last.load(Ordering::Relaxed));
            let deadline = last + timeout;
            if Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep_until(deadline).await;
        }
    }
}

/// An upgraded connection whose reads and writes are recorded in an [`Activity`].
pub(crate) struct Watched<T> {
    inner: T,
    activity: Arc<Activity>,
}

impl<T> Watched<T> {
    pub(crate) fn new(inner: T) -> (Self, Arc<Activity>) {
        let activity = Activity::new();
        (
            Self {
                inner,
                activity: activity.clone(),
            },
            activity,
        )
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Watched<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.touch();
        }
        r
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Watched<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, data);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        r
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// One open streaming session, counted until dropped.
#[derive(Debug)]
pub(crate) struct SessionSlot(Arc<AtomicUsize>);

impl Drop for SessionSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Takes a slot among `max` (None when all are taken).
pub(crate) fn take_slot(open: &Arc<AtomicUsize>, max: usize) -> Option<SessionSlot> {
    let mut n = open.load(Ordering::Acquire);
    loop {
        if n >= max {
            return None;
        }
        match open.compare_exchange_weak(n, n + 1, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return Some(SessionSlot(open.clone())),
            Err(now) => n = now,
        }
    }
}

/// Runs `session` on a watched connection until it ends, or until no byte has moved
/// for `timeout` (then the session, and with it the connection, is dropped).
pub(crate) async fn until_idle<F: std::future::Future<Output = ()>>(
    session: F,
    activity: Arc<Activity>,
    timeout: Duration,
) {
    tokio::select! {
        () = session => {}
        () = activity.idle(timeout) => {
            tracing::debug!(?timeout, "streaming session idle: closed");
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test(start_paused = true)]
    async fn an_idle_session_ends_and_a_busy_one_does_not() {
        let (a, mut b) = tokio::io::duplex(64);
        let (mut watched, activity) = Watched::new(a);
        let started = Instant::now();
        let session = async move {
            let mut buf = [0u8; 8];
            while let Ok(n) = watched.read(&mut buf).await {
                if n == 0 {
                    return;
                }
            }
        };
        // A byte every 30 s for two minutes keeps it open; then silence ends it.
        let talker = tokio::spawn(async move {
            for _ in 0..4 {
                tokio::time::sleep(Duration::from_secs(30)).await;
                b.write_all(b"x").await.unwrap();
            }
            std::future::pending::<()>().await;
        });
        until_idle(session, activity, Duration::from_secs(60)).await;
        assert_eq!(started.elapsed(), Duration::from_secs(180));
        talker.abort();
    }

    #[test]
    fn slots_are_bounded_and_given_back() {
        let open = Arc::new(AtomicUsize::new(0));
        let a = take_slot(&open, 2).unwrap();
        let _b = take_slot(&open, 2).unwrap();
        assert!(take_slot(&open, 2).is_none());
        drop(a);
        assert!(take_slot(&open, 2).is_some());
    }
}
