//! The Kubernetes WebSocket stream protocols, server side.
//!
//! Every message carries one channel: its first byte (in the base64 variants, the
//! ASCII digit of the channel and base64 data). Exec and attach use 0 stdin, 1 stdout,
//! 2 stderr, 3 error (from `v4`: a `metav1.Status` JSON when the command ends), 4 resize
//! (`{"Width":…,"Height":…}`); `v5.channel.k8s.io` adds the close message
//! `[255, channel]` (the client's stdin is done). Port-forward gives port *i* channel
//! `2i` (data) and `2i+1` (errors); the first message on each is the port, 2 bytes
//! little-endian. Messages on unknown channels are ignored, as the kubelet does.

use super::{ExecHandler, ExecSession, PodRef, PortTarget, SessionKind, TerminalSize};
use crate::error::ApiError;
use crate::http::Body;
use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use http::{HeaderMap, HeaderValue, Response, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};

/// The largest message a client may send (stdin data, resize, port data).
pub(crate) const MAX_MESSAGE: usize = 1024 * 1024;

/// How much of a stream is read into one message.
const CHUNK: usize = 32 * 1024;

/// How long a finished session waits for a slow client to take its last messages.
const DRAIN: Duration = Duration::from_secs(30);

/// Exec and attach protocols, in the server's order of preference.
pub(crate) const EXEC_PROTOCOLS: &[&str] = &[
    "v5.channel.k8s.io",
    "v4.channel.k8s.io",
    "v4.base64.channel.k8s.io",
    "channel.k8s.io",
    "base64.channel.k8s.io",
];

/// kubectl's port-forward: SPDY/3.1 tunnelled through the WebSocket.
pub(crate) const SPDY_TUNNEL: &str = "SPDY/3.1+portforward.k8s.io";

/// Port-forward protocols.
pub(crate) const PORTFORWARD_PROTOCOLS: &[&str] = &[
    "v4.channel.k8s.io",
    SPDY_TUNNEL,
    "v4.base64.channel.k8s.io",
    "portforward.k8s.io",
    "channel.k8s.io",
    "base64.channel.k8s.io",
];

/// What a session's WebSocket runs over: the upgraded connection (memory, in the fuzz
/// target).
pub(crate) trait SessionIo:
    tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send
{
}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> SessionIo for T {}

pub(crate) type Socket = WebSocketStream<super::idle::Watched<Box<dyn SessionIo>>>;

/// A server-side WebSocket over `io`, with the session limits on messages and frames.
pub(crate) async fn server_socket(io: Box<dyn SessionIo>) -> (Socket, Arc<super::idle::Activity>) {
    let cfg = WebSocketConfig::default()
        .max_message_size(Some(MAX_MESSAGE))
        .max_frame_size(Some(MAX_MESSAGE));
    let (io, activity) = super::idle::Watched::new(io);
    let sock = WebSocketStream::from_raw_socket(io, Role::Server, Some(cfg)).await;
    (sock, activity)
}

/// A negotiated sub-protocol.
#[derive(Clone, Debug)]
pub(crate) struct Proto {
    /// As named in the handshake ("" when the client named none).
    pub name: String,
    /// Channel digits and base64 data in text messages.
    pub base64: bool,
    /// `v4` or later: the error channel carries a Status JSON.
    pub status_json: bool,
    /// `v5`: the close message.
    pub close_signal: bool,
}

impl Proto {
    fn of(name: &str) -> Self {
        Self {
            name: name.to_string(),
            base64: name.contains("base64"),
            status_json: name.starts_with("v4.") || name.starts_with("v5."),
            close_signal: name.starts_with("v5."),
        }
    }

    fn frame(&self, channel: u8, data: &[u8]) -> Message {
        if self.base64 {
            use base64::Engine;
            let mut s = String::with_capacity(1 + data.len() * 4 / 3 + 4);
            // Channels past 79 have no ASCII digit; sessions never use them
            // (`max_forwarded_ports`), and a wrapped byte is what Go's kubelet would send.
            s.push(char::from(b'0'.wrapping_add(channel) & 0x7f));
            s.push_str(&base64::engine::general_purpose::STANDARD.encode(data));
            Message::Text(s.into())
        } else {
            let mut v = Vec::with_capacity(data.len() + 1);
            v.push(channel);
            v.extend_from_slice(data);
            Message::Binary(Bytes::from(v))
        }
    }

    /// The channel and data of a client message; `None` for messages without a channel.
    fn parse(&self, msg: Message) -> Option<(u8, Vec<u8>)> {
        match msg {
            Message::Binary(b) if !self.base64 => {
                let (ch, rest) = b.split_first()?;
                Some((*ch, rest.to_vec()))
            }
            Message::Text(t) if self.base64 => {
                use base64::Engine;
                let bytes = t.as_bytes();
                let (ch, rest) = bytes.split_first()?;
                let data = base64::engine::general_purpose::STANDARD
                    .decode(rest)
                    .ok()?;
                Some((ch.wrapping_sub(b'0'), data))
            }
            Message::Binary(b) => {
                let (ch, rest) = b.split_first()?;
                Some((*ch, rest.to_vec()))
            }
            _ => None,
        }
    }
}

/// Whether a request asks for a WebSocket upgrade.
pub(crate) fn is_websocket(headers: &HeaderMap) -> bool {
    let has = |name: &str, token: &str| {
        headers.get_all(name).iter().any(|v| {
            v.to_str()
                .is_ok_and(|s| s.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
        })
    };
    has("connection", "upgrade") && has("upgrade", "websocket")
}

/// Picks the first protocol the client offers that the server speaks; "" when the
/// client offers none (the original binary `channel.k8s.io`).
pub(crate) fn negotiate(headers: &HeaderMap, supported: &[&str]) -> Result<Proto, String> {
    let offered: Vec<String> = headers
        .get_all("sec-websocket-protocol")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|s| s.split(','))
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    if offered.is_empty() {
        return Ok(Proto::of(""));
    }
    match offered.iter().find(|o| supported.contains(&o.as_str())) {
        Some(p) => Ok(Proto::of(p)),
        None => Err(format!(
            "unable to upgrade connection: requested protocol(s) are not supported: [{}]; supports [{}]",
            offered.join(" "),
            supported.join(" ")
        )),
    }
}

/// The `101 Switching Protocols` answer.
pub(crate) fn accept(headers: &HeaderMap, proto: &Proto) -> Result<Response<Body>, ApiError> {
    let key = headers
        .get("sec-websocket-key")
        .map(HeaderValue::as_bytes)
        .filter(|k| !k.is_empty())
        .ok_or_else(|| ApiError::bad_request("missing Sec-WebSocket-Key header"))?;
    if headers
        .get("sec-websocket-version")
        .is_some_and(|v| v.as_bytes() != b"13")
    {
        return Err(ApiError::bad_request("unsupported Sec-WebSocket-Version"));
    }
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key);
    let mut resp = Response::new(Empty::<Bytes>::new().map_err(|n| match n {}).boxed());
    *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = resp.headers_mut();
    h.insert(http::header::UPGRADE, HeaderValue::from_static("websocket"));
    h.insert(
        http::header::CONNECTION,
        HeaderValue::from_static("Upgrade"),
    );
    if let Ok(v) = HeaderValue::from_str(&accept) {
        h.insert("sec-websocket-accept", v);
    }
    if !proto.name.is_empty()
        && let Ok(v) = HeaderValue::from_str(&proto.name)
    {
        h.insert("sec-websocket-protocol", v);
    }
    Ok(resp)
}

/// The upgraded connection as a server-side WebSocket.
/// Also returns what records the connection's activity, for the idle timeout.
pub(crate) async fn upgrade(
    on: hyper::upgrade::OnUpgrade,
) -> Option<(Socket, Arc<super::idle::Activity>)> {
    match on.await {
        Ok(io) => Some(server_socket(Box::new(TokioIo::new(io))).await),
        Err(e) => {
            tracing::debug!("websocket upgrade failed: {e}");
            None
        }
    }
}

/// Sends messages in order; ends when every sender is gone (then closes normally) or
/// the client is gone.
fn writer(
    mut sink: futures::stream::SplitSink<Socket, Message>,
) -> (mpsc::Sender<Message>, tokio::task::JoinHandle<()>) {
    let (tx, mut rx) = mpsc::channel::<Message>(8);
    let task = tokio::spawn(async move {
        while let Some(m) = rx.recv().await {
            let close = matches!(m, Message::Close(_));
            if sink.send(m).await.is_err() {
                return;
            }
            if close {
                return;
            }
        }
        let _ = sink
            .send(Message::Close(Some(CloseFrame {
                code: CloseCode::Normal,
                reason: "".into(),
            })))
            .await;
        let _ = sink.close().await;
    });
    (tx, task)
}

/// Why reading from the client stopped.
#[derive(Debug)]
enum ReadEnd {
    /// A close frame or the end of the connection.
    Closed,
    /// A protocol error (e.g. an oversized message).
    Error(String),
}

/// Copies one output stream of the session into messages on `channel`.
fn pump(
    mut from: tokio::io::DuplexStream,
    channel: u8,
    proto: Proto,
    out: mpsc::Sender<Message>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut buf = vec![0u8; CHUNK];
        loop {
            match from.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if out.send(proto.frame(channel, &buf[..n])).await.is_err() {
                        return;
                    }
                }
            }
        }
    })
}

/// What the server learned from the session's parameters.
pub(crate) struct ExecParams {
    pub kind: SessionKind,
    pub container: super::ContainerRef,
    pub command: Vec<String>,
    pub tty: bool,
    pub env: Vec<(String, String)>,
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
}

const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const ERROR: u8 = 3;
const RESIZE: u8 = 4;
const CLOSE: u8 = 255;

/// The Status JSON of a finished command, as the kubelet writes it on the error channel.
pub(crate) fn exit_status(code: i32, command: &[String]) -> String {
    if code == 0 {
        return r#"{"metadata":{},"status":"Success"}"#.to_string();
    }
    serde_json::json!({
        "metadata": {},
        "status": "Failure",
        "message": format!(
            "command terminated with non-zero exit code: error executing command {}, exit code {code}",
            go_list(command)
        ),
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]},
    })
    .to_string()
}

fn go_list(items: &[String]) -> String {
    format!("[{}]", items.join(" "))
}

/// Runs one exec or attach session.
pub(crate) async fn exec(sock: Socket, proto: Proto, p: ExecParams, handler: Arc<dyn ExecHandler>) {
    let (sink, mut stream) = sock.split();
    let (out, writer_task) = writer(sink);
    // The kubelet's first message: empty, on the lowest writable channel.
    let first = if p.stdout {
        STDOUT
    } else if p.stderr {
        STDERR
    } else {
        ERROR
    };
    if out.send(proto.frame(first, &[])).await.is_err() {
        return;
    }
    let pair = || tokio::io::duplex(CHUNK * 2);
    let (mut stdin_w, stdin_r) = match p.stdin {
        true => {
            let (a, b) = pair();
            (Some(a), Some(b))
        }
        false => (None, None),
    };
    let mut pumps = Vec::new();
    let mut output = |on: bool, ch: u8| -> Option<tokio::io::DuplexStream> {
        if !on {
            return None;
        }
        let (handler_end, pump_end) = pair();
        pumps.push(pump(pump_end, ch, proto.clone(), out.clone()));
        Some(handler_end)
    };
    let stdout = output(p.stdout, STDOUT);
    let stderr = output(p.stderr, STDERR);
    let (resize_tx, resize_rx) = mpsc::channel::<TerminalSize>(16);
    let command = p.command.clone();
    let session = ExecSession {
        kind: p.kind,
        container: p.container,
        command: p.command,
        tty: p.tty,
        env: p.env,
        stdin: stdin_r.map(|s| Box::new(s) as super::Stdin),
        stdout: stdout.map(|s| Box::new(s) as super::Output),
        stderr: stderr.map(|s| Box::new(s) as super::Output),
        resize: resize_rx,
    };
    let mut run = handler.handle(session);
    let proto_r = proto.clone();
    // Reads the client's messages: stdin, resize, close.
    let read = async {
        loop {
            let msg = match stream.next().await {
                None => return ReadEnd::Closed,
                Some(Err(e)) => return ReadEnd::Error(e.to_string()),
                Some(Ok(Message::Close(_))) => return ReadEnd::Closed,
                Some(Ok(m)) => m,
            };
            let Some((ch, data)) = proto_r.parse(msg) else {
                continue;
            };
            match ch {
                STDIN => {
                    if let Some(w) = stdin_w.as_mut()
                        && !data.is_empty()
                        && w.write_all(&data).await.is_err()
                    {
                        stdin_w = None;
                    }
                }
                RESIZE => {
                    if let Ok(size) = serde_json::from_slice::<TerminalSize>(&data) {
                        let _ = resize_tx.try_send(size);
                    }
                }
                // `[255, channel]`: the client is done writing that channel.
                CLOSE if proto_r.close_signal && data.first() == Some(&STDIN) => {
                    if let Some(mut w) = stdin_w.take() {
                        let _ = w.shutdown().await;
                    }
                }
                // Unknown channels and writes to output channels: ignored.
                _ => {}
            }
        }
    };
    tokio::pin!(read);
    let code = tokio::select! {
        code = &mut run => code,
        end = &mut read => {
            // The client is gone: the session ends with it.
            if let ReadEnd::Error(e) = &end {
                tracing::debug!("exec session: client error: {e}");
                let _ = out.try_send(Message::Close(Some(CloseFrame {
                    code: close_code(e),
                    reason: "".into(),
                })));
            }
            drop(run);
            for p in pumps {
                p.abort();
            }
            drop(out);
            let _ = tokio::time::timeout(Duration::from_secs(1), writer_task).await;
            return;
        }
    };
    // The handler is done: its outputs end; send what is left, then the status.
    let drained = async {
        for p in pumps {
            let _ = p.await;
        }
    };
    tokio::select! {
        _ = drained => {}
        _ = &mut read => {
            drop(out);
            let _ = tokio::time::timeout(Duration::from_secs(1), writer_task).await;
            return;
        }
    }
    let status = if proto.status_json {
        Some(exit_status(code, &command))
    } else if code != 0 {
        Some(format!(
            "command terminated with non-zero exit code: error executing command {}, exit code {code}",
            go_list(&command)
        ))
    } else {
        None
    };
    if let Some(s) = status {
        let _ = out.send(proto.frame(ERROR, s.as_bytes())).await;
    }
    drop(out);
    // Let the client take the last messages (and read its close reply) for a while.
    let _ = tokio::time::timeout(DRAIN, async {
        tokio::select! {
            _ = writer_task => {}
            _ = &mut read => {}
        }
    })
    .await;
}

fn close_code(err: &str) -> CloseCode {
    if err.contains("Space limit exceeded")
        || err.contains("too long")
        || err.contains("Message too big")
    {
        CloseCode::Size
    } else {
        CloseCode::Protocol
    }
}

/// Connects one forwarded port.
pub(crate) async fn connect(target: PortTarget) -> Result<tokio::io::DuplexStream, String> {
    let (ours, theirs) = tokio::io::duplex(CHUNK * 2);
    match target {
        PortTarget::Echo => {
            tokio::spawn(async move {
                let (mut r, mut w) = tokio::io::split(theirs);
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
        PortTarget::Tcp(addr) => {
            let tcp = tokio::time::timeout(
                Duration::from_secs(10),
                tokio::net::TcpStream::connect(addr),
            )
            .await
            .map_err(|_| format!("dial tcp {addr}: i/o timeout"))?
            .map_err(|e| format!("dial tcp {addr}: {e}"))?;
            tokio::spawn(async move {
                let mut theirs = theirs;
                let mut tcp = tcp;
                let _ = tokio::io::copy_bidirectional(&mut theirs, &mut tcp).await;
            });
        }
        PortTarget::Refuse(msg) => return Err(msg),
    }
    Ok(ours)
}

/// How many ports a port-forward session over `proto` can carry: port *i* uses
/// channels `2i` and `2i+1`, one byte in the binary protocols, and in the base64 ones
/// the ASCII character `'0' + channel`, which must stay below 128 to be text.
pub(crate) fn max_forwarded_ports(proto: &Proto) -> usize {
    if proto.base64 {
        usize::from(127 - b'0').div_ceil(2)
    } else {
        128
    }
}

/// Runs one port-forward session.
pub(crate) async fn port_forward(
    sock: Socket,
    proto: Proto,
    pod: PodRef,
    targets: Vec<(u16, PortTarget)>,
) {
    let (sink, mut stream) = sock.split();
    let (out, writer_task) = writer(sink);
    for (i, (port, _)) in targets.iter().enumerate() {
        let Ok(ch) = u8::try_from(i * 2) else { break };
        for c in [ch, ch.wrapping_add(1)] {
            if out.send(proto.frame(c, &port.to_le_bytes())).await.is_err() {
                return;
            }
        }
    }
    let mut writers: Vec<Option<tokio::io::WriteHalf<tokio::io::DuplexStream>>> = Vec::new();
    let mut pumps = Vec::new();
    for (i, (port, target)) in targets.into_iter().enumerate() {
        let Ok(ch) = u8::try_from(i * 2) else { break };
        match connect(target).await {
            Ok(conn) => {
                let (r, w) = tokio::io::split(conn);
                writers.push(Some(w));
                let out = out.clone();
                let proto = proto.clone();
                pumps.push(tokio::spawn(async move {
                    let mut r = r;
                    let mut buf = vec![0u8; CHUNK];
                    loop {
                        match r.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => {
                                if out.send(proto.frame(ch, &buf[..n])).await.is_err() {
                                    return;
                                }
                            }
                        }
                    }
                }));
            }
            Err(e) => {
                writers.push(None);
                let msg = format!(
                    "error forwarding port {port} to pod {}_{}, uid {}: {e}",
                    pod.name, pod.namespace, pod.uid
                );
                let _ = out
                    .send(proto.frame(ch.wrapping_add(1), msg.as_bytes()))
                    .await;
            }
        }
    }
    let read = async {
        loop {
            let msg = match stream.next().await {
                None | Some(Ok(Message::Close(_))) => return ReadEnd::Closed,
                Some(Err(e)) => return ReadEnd::Error(e.to_string()),
                Some(Ok(m)) => m,
            };
            let Some((ch, data)) = proto.parse(msg) else {
                continue;
            };
            // Data for port i on channel 2i; the error channels are the server's.
            if ch % 2 != 0 {
                continue;
            }
            if let Some(slot) = writers.get_mut(usize::from(ch / 2))
                && let Some(w) = slot.as_mut()
                && w.write_all(&data).await.is_err()
            {
                *slot = None;
            }
        }
    };
    let all_done = async {
        for p in pumps.iter_mut() {
            let _ = p.await;
        }
    };
    tokio::select! {
        _ = all_done => {}
        end = read => {
            if let ReadEnd::Error(e) = &end {
                tracing::debug!("port-forward session: client error: {e}");
                let _ = out.try_send(Message::Close(Some(CloseFrame { code: close_code(e), reason: "".into() })));
            }
        }
    }
    for p in pumps {
        p.abort();
    }
    drop(out);
    let _ = tokio::time::timeout(Duration::from_secs(5), writer_task).await;
}

/// One session whose client sends `input` (raw WebSocket frames, masked as a client's
/// are) and then closes: an exec of the built-in `sh -c cat` with stdin, stdout and
/// stderr, or a port-forward of port 80 (echo) and 81 (refused). `protocol` picks the
/// sub-protocol. Returns what the server sent (at most 1 MiB is kept). For the fuzz
/// target: the frames and channel messages are what an untrusted client controls.
pub(crate) async fn fuzz_session(protocol: u8, port_forward: bool, input: &[u8]) -> Vec<u8> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const NAMES: [&str; 5] = [
        "v5.channel.k8s.io",
        "v4.channel.k8s.io",
        "v4.base64.channel.k8s.io",
        "base64.channel.k8s.io",
        "channel.k8s.io",
    ];
    let proto = Proto::of(NAMES[usize::from(protocol) % NAMES.len()]);
    let (client, server) = tokio::io::duplex(1 << 16);
    let (mut rd, mut wr) = tokio::io::split(client);
    let input = input.to_vec();
    let feed = tokio::spawn(async move {
        let _ = wr.write_all(&input).await;
        // Let the session act on the frames before the connection ends (end of stream
        // is a client gone, which cuts the session short).
        for _ in 0..256 {
            tokio::task::yield_now().await;
        }
        let _ = wr.shutdown().await;
        // Keep this side open until the server is done (a drop would cut its output).
        std::future::pending::<()>().await;
    });
    let drain = tokio::spawn(async move {
        let mut out = Vec::new();
        let mut buf = vec![0u8; 1 << 16];
        while let Ok(n) = rd.read(&mut buf).await {
            if n == 0 {
                break;
            }
            if out.len() < 1 << 20 {
                out.extend_from_slice(&buf[..n]);
            }
        }
        out
    });
    let (sock, _activity) = server_socket(Box::new(server)).await;
    let pod = PodRef {
        namespace: "default".into(),
        name: "fuzz".into(),
        uid: "fuzz-uid".into(),
    };
    let session: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> = if port_forward {
        Box::pin(self::port_forward(
            sock,
            proto,
            pod,
            vec![
                (80, PortTarget::Echo),
                (81, PortTarget::Refuse("nothing listens on 81".into())),
            ],
        ))
    } else {
        let params = ExecParams {
            kind: SessionKind::Exec,
            container: super::ContainerRef {
                pod,
                container: "c".into(),
                image: "busybox".into(),
            },
            command: vec!["sh".into(), "-c".into(), "cat".into()],
            tty: false,
            env: Vec::new(),
            stdin: true,
            stdout: true,
            stderr: true,
        };
        Box::pin(exec(sock, proto, params, super::Kubelet::new().exec))
    };
    // A session the input leaves waiting (a half-open stream) is ended by the bound.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), session).await;
    feed.abort();
    // The session's tasks drop the socket as they end; what they sent is read to EOF.
    match tokio::time::timeout(std::time::Duration::from_secs(2), drain).await {
        Ok(out) => out.unwrap_or_default(),
        Err(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_binary_and_base64() {
        let p = Proto::of("v5.channel.k8s.io");
        assert_eq!(
            p.frame(1, b"hi"),
            Message::Binary(Bytes::from_static(b"\x01hi"))
        );
        assert_eq!(
            p.parse(Message::Binary(Bytes::from_static(b"\x00x"))),
            Some((0, b"x".to_vec()))
        );
        assert!(p.close_signal && p.status_json && !p.base64);
        let b = Proto::of("v4.base64.channel.k8s.io");
        assert_eq!(b.frame(1, b"hi"), Message::Text("1aGk=".into()));
        assert_eq!(
            b.parse(Message::Text("0aGk=".into())),
            Some((0, b"hi".to_vec()))
        );
        assert_eq!(b.parse(Message::Text("0!!".into())), None);
        assert!(!b.close_signal && b.status_json);
        assert_eq!(p.parse(Message::Binary(Bytes::new())), None);
    }

    #[test]
    fn exit_status_json() {
        assert_eq!(exit_status(0, &[]), r#"{"metadata":{},"status":"Success"}"#);
        let v: serde_json::Value =
            serde_json::from_str(&exit_status(3, &["sh".into()])).unwrap_or_default();
        assert_eq!(v["reason"], "NonZeroExitCode");
        assert_eq!(
            v["details"]["causes"][0],
            serde_json::json!({"reason": "ExitCode", "message": "3"})
        );
    }
}
