//! A loopback TCP relay in front of the API server whose connections the demo can cut,
//! on the embedded server and on a real cluster alike: the operator's client talks to
//! the relay, the relay to the server (TLS passes through untouched).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// The relay: accepts on 127.0.0.1, forwards every connection to `upstream`.
pub struct Cutter {
    addr: std::net::SocketAddr,
    /// Connections currently relayed; cancelling the token closes them.
    live: Arc<Mutex<CancellationToken>>,
    stop: CancellationToken,
    /// Connections being relayed now.
    active: Arc<AtomicU64>,
}

impl Cutter {
    /// Starts relaying to `upstream` (`host:port`).
    pub async fn start(upstream: String) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let live = Arc::new(Mutex::new(CancellationToken::new()));
        let stop = CancellationToken::new();
        let active = Arc::new(AtomicU64::new(0));
        let (live2, stop2, active2) = (live.clone(), stop.clone(), active.clone());
        tokio::spawn(async move {
            let mut conns = JoinSet::new();
            loop {
                let accepted = tokio::select! {
                    _ = stop2.cancelled() => break,
                    a = listener.accept() => a,
                };
                let Ok((mut inbound, _)) = accepted else {
                    continue;
                };
                let token = live2.lock().unwrap_or_else(|e| e.into_inner()).clone();
                let (upstream, active) = (upstream.clone(), active2.clone());
                conns.spawn(async move {
                    let Ok(mut outbound) = TcpStream::connect(&upstream).await else {
                        return;
                    };
                    active.fetch_add(1, Ordering::SeqCst);
                    tokio::select! {
                        _ = token.cancelled() => {}
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                    }
                    active.fetch_sub(1, Ordering::SeqCst);
                });
                while conns.try_join_next().is_some() {}
            }
            conns.shutdown().await;
        });
        Ok(Self {
            addr,
            live,
            stop,
            active,
        })
    }

    /// The relay's address.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    /// Closes every relayed connection (new ones are relayed again) and returns how many
    /// were open.
    pub fn cut_all(&self) -> u64 {
        let old = std::mem::replace(
            &mut *self.live.lock().unwrap_or_else(|e| e.into_inner()),
            CancellationToken::new(),
        );
        let open = self.active.load(Ordering::SeqCst);
        old.cancel();
        open
    }
}

impl Drop for Cutter {
    fn drop(&mut self) {
        self.stop.cancel();
        self.live.lock().unwrap_or_else(|e| e.into_inner()).cancel();
    }
}
