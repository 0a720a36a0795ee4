//! Port-forward over a WebSocket (`v4.channel.k8s.io`).
//!
//! For the i-th requested port, channel `2i` carries data both ways and channel `2i+1`
//! carries the server's error text. The first two bytes the server sends on each of the
//! two channels are the port number, little-endian. The protocol has no half-close: one
//! WebSocket carries one connection per port, and [`LocalForward`] opens a WebSocket per
//! accepted local connection.

use crate::error::{Error, Result};
use crate::ws::WsStream;
use futures::stream::SelectAll;
use futures::{SinkExt, StreamExt};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncWriteExt, DuplexStream, ReadHalf, WriteHalf};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::io::ReaderStream;

/// The port-forward sub-protocol.
pub(crate) const V4: &str = "v4.channel.k8s.io";

const PIPE: usize = 64 * 1024;
const MAX_ERROR: usize = 64 * 1024;

/// Connections to ports of a pod, from [`Api::portforward`](crate::Api::portforward).
///
/// Take each port's stream (an `AsyncRead + AsyncWrite`) and its error. Shutting down or
/// dropping the write side of every stream ends the session (the protocol has no
/// half-close), as does [`abort`](Self::abort).
#[derive(Debug)]
pub struct Portforwarder {
    ports: Vec<PortEnds>,
    done: oneshot::Receiver<Result<()>>,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Debug)]
struct PortEnds {
    port: u16,
    stream: Option<DuplexStream>,
    error: Option<oneshot::Receiver<String>>,
}

impl Portforwarder {
    pub(crate) fn start(ws: WsStream, ports: &[u16]) -> Self {
        let mut ends = Vec::with_capacity(ports.len());
        let mut session = Vec::with_capacity(ports.len());
        let mut readers = SelectAll::new();
        for (i, &port) in ports.iter().enumerate() {
            let (user, ours) = tokio::io::duplex(PIPE);
            let (read, write) = tokio::io::split(ours);
            let (err_tx, err_rx) = oneshot::channel();
            ends.push(PortEnds {
                port,
                stream: Some(user),
                error: Some(err_rx),
            });
            readers.push(port_reader(i, read));
            session.push(PortSession {
                port,
                data_header: Vec::new(),
                error_header: Vec::new(),
                write: Some(write),
                error: Vec::new(),
                error_tx: Some(err_tx),
            });
        }
        let (done_tx, done) = oneshot::channel();
        let task = tokio::spawn(async move {
            let result = run(ws, session, readers).await;
            let _ = done_tx.send(result);
        });
        Self {
            ports: ends,
            done,
            task,
        }
    }

    /// The stream of `port` (once per requested occurrence of the port).
    pub fn take_stream(&mut self, port: u16) -> Option<DuplexStream> {
        self.ports
            .iter_mut()
            .filter(|p| p.port == port)
            .find_map(|p| p.stream.take())
    }

    /// Resolves to the server's error text for `port` (e.g. a refused connection inside
    /// the pod), or `None` if the session ended without one. Once per port.
    pub fn take_error(
        &mut self,
        port: u16,
    ) -> Option<impl Future<Output = Option<String>> + Send + use<>> {
        let rx = self
            .ports
            .iter_mut()
            .filter(|p| p.port == port)
            .find_map(|p| p.error.take())?;
        Some(async move { rx.await.ok() })
    }

    /// Waits until the session ends.
    pub async fn join(self) -> Result<()> {
        drop(self.ports);
        match self.done.await {
            Ok(r) => r,
            Err(_) => Err(Error::Protocol(
                "the port-forward task ended without a result".into(),
            )),
        }
    }

    /// Closes the connection at once.
    pub fn abort(&self) {
        self.task.abort();
    }
}

type PortReader =
    futures::stream::BoxStream<'static, (usize, Option<std::io::Result<bytes::Bytes>>)>;

/// The caller's writes to port `i`, then one `None` at end of file.
fn port_reader(i: usize, read: ReadHalf<DuplexStream>) -> PortReader {
    ReaderStream::new(read)
        .map(move |r| (i, Some(r)))
        .chain(futures::stream::once(async move { (i, None) }))
        .boxed()
}

struct PortSession {
    port: u16,
    data_header: Vec<u8>,
    error_header: Vec<u8>,
    write: Option<WriteHalf<DuplexStream>>,
    error: Vec<u8>,
    error_tx: Option<oneshot::Sender<String>>,
}

impl PortSession {
    /// Strips the two-byte port header from the first bytes of a channel.
    fn strip<'a>(
        port: u16,
        header: &mut Vec<u8>,
        mut data: &'a [u8],
        channel: u8,
    ) -> Result<&'a [u8]> {
        if header.len() < 2 {
            let take = (2 - header.len()).min(data.len());
            header.extend_from_slice(&data[..take]);
            data = &data[take..];
            if header.len() == 2 {
                let announced = u16::from_le_bytes([header[0], header[1]]);
                if announced != port {
                    return Err(Error::Protocol(format!(
                        "the server announced port {announced} on channel {channel}, expected {port}"
                    )));
                }
            }
        }
        Ok(data)
    }

    fn finish(&mut self) {
        if !self.error.is_empty()
            && let Some(tx) = self.error_tx.take()
        {
            let _ = tx.send(String::from_utf8_lossy(&self.error).into_owned());
        }
    }
}

async fn run(
    ws: WsStream,
    mut ports: Vec<PortSession>,
    mut readers: SelectAll<PortReader>,
) -> Result<()> {
    let (mut sink, mut source) = ws.split();
    let mut open_writers = ports.len();
    let n_ports = ports.len();
    let outcome: Result<()> = loop {
        tokio::select! {
            msg = source.next() => match msg {
                None => break Ok(()),
                Some(Err(e)) => break super::attach::closed_or(e),
                Some(Ok(Message::Binary(data))) => {
                    let Some((&channel, payload)) = data.split_first() else { continue };
                    let Some(p) = ports.get_mut(usize::from(channel / 2)) else {
                        break Err(Error::Protocol(format!(
                            "the server sent data on channel {channel}, but only {n_ports} ports were requested"
                        )));
                    };
                    if channel % 2 == 0 {
                        let payload = match PortSession::strip(p.port, &mut p.data_header, payload, channel) {
                            Ok(rest) => rest,
                            Err(e) => break Err(e),
                        };
                        if !payload.is_empty()
                            && let Some(w) = &mut p.write
                            && w.write_all(payload).await.is_err()
                        {
                            p.write = None;
                        }
                    } else {
                        let payload = match PortSession::strip(p.port, &mut p.error_header, payload, channel) {
                            Ok(rest) => rest,
                            Err(e) => break Err(e),
                        };
                        if p.error.len() + payload.len() <= MAX_ERROR {
                            p.error.extend_from_slice(payload);
                        }
                        // The kubelet writes an error in one message: hand it over
                        // at once, while the caller may still be using the stream.
                        p.finish();
                    }
                }
                Some(Ok(Message::Text(_))) => break Err(Error::Protocol(
                    "the server sent a text message on a binary channel protocol".into(),
                )),
                Some(Ok(Message::Close(_))) => break Ok(()),
                Some(Ok(_)) => {}
            },
            Some((i, chunk)) = readers.next(), if open_writers > 0 => match chunk {
                Some(Ok(bytes)) => {
                    let mut msg = Vec::with_capacity(bytes.len() + 1);
                    // At most 127 ports fit the one-byte channel: checked at the start.
                    msg.push((i * 2) as u8);
                    msg.extend_from_slice(&bytes);
                    if let Err(e) = sink.send(Message::Binary(msg.into())).await {
                        break super::attach::closed_or(e);
                    }
                }
                Some(Err(_)) | None => {
                    open_writers -= 1;
                    if open_writers == 0 {
                        // Nothing more to send on any port: end the session.
                        let _ = sink.send(Message::Close(None)).await;
                    }
                }
            },
        }
    };
    for p in &mut ports {
        p.finish();
        if let Some(mut w) = p.write.take() {
            let _ = w.shutdown().await;
        }
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), sink.close()).await;
    outcome
}

/// A local TCP listener whose connections are forwarded to a port of a pod, as
/// `kubectl port-forward` does; from [`Api::forward_local`](crate::Api::forward_local).
/// Each accepted connection gets a WebSocket of its own. Dropping it stops listening;
/// connections in progress finish.
#[derive(Debug)]
pub struct LocalForward {
    local: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl LocalForward {
    pub(crate) async fn start(
        api: crate::Api<k8s_openapi::api::core::v1::Pod>,
        pod: String,
        port: u16,
        bind: SocketAddr,
    ) -> Result<Self> {
        let listener = TcpListener::bind(bind)
            .await
            .map_err(|e| Error::WebSocket(Box::new(e)))?;
        let local = listener
            .local_addr()
            .map_err(|e| Error::WebSocket(Box::new(e)))?;
        let listener = std::sync::Arc::new(listener);
        let task = tokio::spawn(accept_with_backoff(
            move || {
                let listener = listener.clone();
                async move { listener.accept().await }
            },
            move |mut tcp: tokio::net::TcpStream, peer: SocketAddr| {
                let api = api.clone();
                let pod = pod.clone();
                tokio::spawn(async move {
                    let mut pf = match api.portforward(&pod, &[port]).await {
                        Ok(pf) => pf,
                        Err(e) => {
                            tracing::warn!(%peer, pod, port, "port-forward failed: {e}");
                            return;
                        }
                    };
                    let (Some(mut remote), Some(error)) =
                        (pf.take_stream(port), pf.take_error(port))
                    else {
                        return;
                    };
                    if let Err(e) = tokio::io::copy_bidirectional(&mut tcp, &mut remote).await {
                        tracing::debug!(%peer, pod, port, "port-forward connection ended: {e}");
                    }
                    drop(remote);
                    if let Some(text) = error.await {
                        tracing::warn!(%peer, pod, port, "port-forward error from the server: {text}");
                    }
                    if let Err(e) = pf.join().await {
                        tracing::debug!(%peer, pod, port, "port-forward session: {e}");
                    }
                });
            },
        ));
        Ok(Self { local, task })
    }

    /// The address the listener is bound to (with the port the OS picked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }
}

/// The shortest and longest pause after a failed accept (out of file descriptors,
/// say): 5 ms doubling to 1 s, as Go's `http.Server` does, so a listener at its
/// descriptor limit waits for connections to close instead of spinning.
const ACCEPT_BACKOFF: (Duration, Duration) = (Duration::from_millis(5), Duration::from_secs(1));

/// Accepts connections for ever, handing each to `serve`; backs off on errors
/// ([`ACCEPT_BACKOFF`]) and starts again from the shortest pause after a success.
async fn accept_with_backoff<S, A, F>(mut accept: A, mut serve: impl FnMut(S, SocketAddr))
where
    A: FnMut() -> F,
    F: Future<Output = std::io::Result<(S, SocketAddr)>>,
{
    let mut backoff = Duration::ZERO;
    loop {
        match accept().await {
            Ok((conn, peer)) => {
                backoff = Duration::ZERO;
                serve(conn, peer);
            }
            Err(e) => {
                backoff = (backoff * 2).clamp(ACCEPT_BACKOFF.0, ACCEPT_BACKOFF.1);
                tracing::warn!(error = %e, ?backoff, "port-forward: accepting a local connection failed");
                tokio::time::sleep(backoff).await;
            }
        }
    }
}

impl Drop for LocalForward {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_header_split_across_messages() {
        let mut h = Vec::new();
        let rest = PortSession::strip(8080, &mut h, &[0x90], 0).ok();
        assert_eq!(rest, Some(&[][..]));
        let rest = PortSession::strip(8080, &mut h, &[0x1f, b'h', b'i'], 0).ok();
        assert_eq!(rest, Some(&b"hi"[..]));
        // After the header, data passes through untouched.
        let rest = PortSession::strip(8080, &mut h, &[0x90, 0x1f], 0).ok();
        assert_eq!(rest, Some(&[0x90, 0x1f][..]));
        let mut h = Vec::new();
        assert!(PortSession::strip(80, &mut h, &[0x90, 0x1f], 1).is_err());
    }

    /// A listener out of file descriptors fails every accept at once: the loop must
    /// pause between tries (doubling, capped), keep serving once accepts succeed,
    /// and start again from the shortest pause after a success.
    #[tokio::test(start_paused = true)]
    async fn accept_errors_back_off_and_serving_resumes() {
        use std::sync::{Arc, Mutex};
        use tokio::time::Instant;
        // 12 failures, one connection, 3 failures, one connection, then nothing more.
        let script: Vec<bool> = [vec![false; 12], vec![true], vec![false; 3], vec![true]].concat();
        let calls: Arc<Mutex<Vec<Instant>>> = Arc::default();
        let served: Arc<Mutex<Vec<u32>>> = Arc::default();
        let (c, sv) = (calls.clone(), served.clone());
        let mut next = 0usize;
        let peer: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let task = tokio::spawn(accept_with_backoff(
            move || {
                c.lock().unwrap().push(Instant::now());
                let step = script.get(next).copied();
                next += 1;
                let n = next as u32;
                async move {
                    match step {
                        Some(true) => Ok((n, peer)),
                        Some(false) => Err(std::io::Error::from_raw_os_error(24)), // EMFILE
                        None => std::future::pending().await,
                    }
                }
            },
            move |conn: u32, _| sv.lock().unwrap().push(conn),
        ));
        tokio::time::sleep(Duration::from_secs(60)).await;
        task.abort();
        let calls = calls.lock().unwrap().clone();
        assert_eq!(
            calls.len(),
            18,
            "one accept per scripted step, then one that waits"
        );
        let gaps: Vec<u64> = calls
            .windows(2)
            .map(|w| (w[1] - w[0]).as_millis() as u64)
            .collect();
        assert_eq!(
            gaps,
            [
                5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000, 1000, 1000, 0, 5, 10, 20, 0
            ],
            "pauses double from 5 ms to 1 s and reset after a connection"
        );
        assert_eq!(
            *served.lock().unwrap(),
            [13, 17],
            "both connections were served"
        );
    }
}
