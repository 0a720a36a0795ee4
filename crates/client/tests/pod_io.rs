//! exec, attach and port-forward at the protocol level, against a hand-rolled peer that
//! speaks the kubelet's side of the WebSocket channel protocols: frame layout, channel
//! numbers, the stdin close signal, resize messages, the exit status, the port header;
//! and bad peers (unknown channels, a connection cut mid-frame, an oversized frame, a
//! refused upgrade). The same API against the embedded server and a real cluster is in
//! `tests/pods.rs`.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use futures::{SinkExt, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kubewright_client::pod::{AttachParams, EvictParams, TerminalSize};
use kubewright_client::{Api, Client, Config, Error};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::Role;

type Ws = WebSocketStream<TcpStream>;

/// The request line and headers of what the client sent.
#[derive(Clone, Debug, Default)]
struct Head {
    target: String,
    headers: Vec<(String, String)>,
}

impl Head {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

async fn read_head(sock: &mut TcpStream) -> Head {
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(b"\r\n\r\n") {
        if sock.read(&mut byte).await.unwrap() == 0 {
            break;
        }
        got.push(byte[0]);
    }
    let text = String::from_utf8(got).unwrap();
    let mut lines = text.split("\r\n");
    let target = lines.next().unwrap().split(' ').nth(1).unwrap().to_string();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    Head { target, headers }
}

/// How the peer answers the upgrade.
enum Answer {
    /// 101 with this sub-protocol, then run the session.
    Switch(&'static str),
    /// This raw HTTP response, then close.
    Refuse(String),
}

/// A peer accepting connections; `answer` picks the reply from the request, `session`
/// runs the WebSocket. Returns a client for it and the heads it saw.
async fn peer<F, Fut>(
    answer: impl Fn(&Head) -> Answer + Send + Sync + 'static,
    session: F,
) -> (Client, Arc<Mutex<Vec<Head>>>)
where
    F: Fn(Ws, Head) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let heads: Arc<Mutex<Vec<Head>>> = Arc::default();
    let seen = heads.clone();
    let answer = Arc::new(answer);
    let session = Arc::new(session);
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let (answer, session, seen) = (answer.clone(), session.clone(), seen.clone());
            tokio::spawn(async move {
                let head = read_head(&mut sock).await;
                seen.lock().unwrap().push(head.clone());
                match answer(&head) {
                    Answer::Refuse(raw) => {
                        sock.write_all(raw.as_bytes()).await.unwrap();
                        let _ = sock.shutdown().await;
                    }
                    Answer::Switch(protocol) => {
                        let key = head.header("sec-websocket-key").unwrap_or_default();
                        let reply = format!(
                            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {}\r\nSec-WebSocket-Protocol: {protocol}\r\n\r\n",
                            derive_accept_key(key.as_bytes())
                        );
                        sock.write_all(reply.as_bytes()).await.unwrap();
                        let ws = WebSocketStream::from_raw_socket(sock, Role::Server, None).await;
                        session(ws, head).await;
                    }
                }
            });
        }
    });
    let mut cfg = Config::new(format!("http://{addr}").parse().unwrap());
    cfg.qps = 0.0;
    cfg.proxy_env = kubewright_client::proxy::ProxyEnv::none();
    (Client::new(cfg).unwrap(), heads)
}

fn pods(client: Client) -> Api<Pod> {
    Api::namespaced(client, "ns")
}

fn bin(channel: u8, data: &[u8]) -> Message {
    let mut v = vec![channel];
    v.extend_from_slice(data);
    Message::Binary(v.into())
}

const SUCCESS: &str = r#"{"metadata":{},"status":"Success"}"#;

/// The kubelet's `cat`: stdout announces the stream, stdin is echoed until the client
/// closes it (v5 `[255, 0]`), then the exit status and a close.
async fn cat(mut ws: Ws, _: Head) {
    ws.send(bin(1, b"")).await.unwrap();
    while let Some(Ok(msg)) = ws.next().await {
        let Message::Binary(data) = msg else { continue };
        match data.as_ref() {
            [255, 0] => break,
            [0, rest @ ..] => ws.send(bin(1, rest)).await.unwrap(),
            other => panic!("unexpected message {other:?}"),
        }
    }
    ws.send(bin(3, SUCCESS.as_bytes())).await.unwrap();
    ws.close(None).await.unwrap();
}

#[tokio::test]
async fn exec_streams_stdin_to_stdout_and_closes_stdin_on_v5() {
    let (client, heads) = peer(|_| Answer::Switch("v5.channel.k8s.io"), cat).await;
    let ap = AttachParams::default().stdin(true).stderr(false);
    let mut p = pods(client).exec("web", ["cat"], &ap).await.unwrap();
    assert_eq!(p.protocol(), "v5.channel.k8s.io");
    let mut stdin = p.stdin().unwrap();
    let mut stdout = p.stdout().unwrap();
    assert!(p.stderr().is_none());
    let reader = tokio::spawn(async move {
        let mut out = Vec::new();
        stdout.read_to_end(&mut out).await.unwrap();
        out
    });
    let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    stdin.write_all(&big).await.unwrap();
    stdin.shutdown().await.unwrap();
    drop(stdin);
    let status = p.join().await.unwrap();
    assert!(status.success(), "{status:?}");
    assert_eq!(reader.await.unwrap(), big, "stdout is stdin, byte for byte");

    let head = heads.lock().unwrap()[0].clone();
    assert_eq!(
        head.target,
        "/api/v1/namespaces/ns/pods/web/exec?command=cat&stdin=true&stdout=true&stderr=false&tty=false"
    );
    assert_eq!(
        head.header("sec-websocket-protocol"),
        Some("v5.channel.k8s.io, v4.channel.k8s.io")
    );
    assert_eq!(head.header("upgrade"), Some("websocket"));
}

#[tokio::test]
async fn exit_code_stderr_and_v4_fallback() {
    let (client, _) = peer(
        |_| Answer::Switch("v4.channel.k8s.io"),
        |mut ws: Ws, _| async move {
            ws.send(bin(1, b"")).await.unwrap();
            ws.send(bin(1, b"out\n")).await.unwrap();
            ws.send(bin(2, b"err\n")).await.unwrap();
            let status = r#"{"metadata":{},"status":"Failure","message":"command terminated with non-zero exit code: exit status 3","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"3"}]}}"#;
            ws.send(bin(3, status.as_bytes())).await.unwrap();
            ws.close(None).await.unwrap();
        },
    )
    .await;
    let mut p = pods(client)
        .exec("web", ["sh", "-c", "exit 3"], &AttachParams::default())
        .await
        .unwrap();
    assert_eq!(p.protocol(), "v4.channel.k8s.io");
    let (mut out, mut err) = (String::new(), String::new());
    let (mut so, mut se) = (p.stdout().unwrap(), p.stderr().unwrap());
    let (a, b) = tokio::join!(so.read_to_string(&mut out), se.read_to_string(&mut err));
    a.unwrap();
    b.unwrap();
    assert_eq!((out.as_str(), err.as_str()), ("out\n", "err\n"));
    let status = p.join().await.unwrap();
    assert_eq!(status.code, 3);
    assert!(status.message.unwrap().contains("non-zero exit code"));
}

#[tokio::test]
async fn attach_with_a_terminal_sends_resize_messages() {
    let seen: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
    let record = seen.clone();
    let (client, heads) = peer(
        |_| Answer::Switch("v5.channel.k8s.io"),
        move |mut ws: Ws, _| {
            let record = record.clone();
            async move {
                ws.send(bin(1, b"")).await.unwrap();
                while let Some(Ok(Message::Binary(data))) = ws.next().await {
                    let done = data.as_ref() == [255, 0];
                    record.lock().unwrap().push(data.to_vec());
                    if done {
                        break;
                    }
                }
                ws.send(bin(3, SUCCESS.as_bytes())).await.unwrap();
                ws.close(None).await.unwrap();
            }
        },
    )
    .await;
    let mut p = pods(client)
        .attach("web", &AttachParams::interactive_tty().container("app"))
        .await
        .unwrap();
    let resize = p.terminal_size().unwrap();
    resize
        .send(TerminalSize {
            width: 120,
            height: 40,
        })
        .await
        .unwrap();
    let mut stdin = p.stdin().unwrap();
    // The resize goes out before stdin closes: both are sent by one task in order of
    // arrival, so wait until the peer has it.
    for _ in 0..200 {
        if !seen.lock().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    stdin.write_all(b"ls\r").await.unwrap();
    drop(stdin);
    assert!(p.join().await.unwrap().success());
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen[0], b"\x04{\"Width\":120,\"Height\":40}".to_vec());
    assert_eq!(seen[1], b"\x00ls\r".to_vec());
    assert_eq!(seen.last().unwrap(), &vec![255, 0]);
    let target = heads.lock().unwrap()[0].target.clone();
    assert_eq!(
        target,
        "/api/v1/namespaces/ns/pods/web/attach?container=app&stdin=true&stdout=true&stderr=false&tty=true"
    );
}

#[tokio::test]
async fn a_refused_upgrade_is_the_servers_status() {
    let body = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pod web does not have a host assigned","reason":"BadRequest","code":400}"#;
    let raw = format!(
        "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let (client, _) = peer(move |_| Answer::Refuse(raw.clone()), cat).await;
    let err = pods(client)
        .exec("web", ["true"], &AttachParams::default())
        .await
        .unwrap_err();
    assert!(err.is_bad_request(), "{err}");
    assert!(
        err.to_string().contains("does not have a host assigned"),
        "{err}"
    );
}

#[tokio::test]
async fn a_server_choosing_an_unoffered_protocol_is_refused() {
    let (client, _) = peer(|_| Answer::Switch("channel.k8s.io"), cat).await;
    let err = pods(client)
        .exec("web", ["true"], &AttachParams::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Protocol(_)), "{err}");
}

#[tokio::test]
async fn an_unknown_channel_is_a_protocol_error() {
    let (client, _) = peer(
        |_| Answer::Switch("v5.channel.k8s.io"),
        |mut ws: Ws, _| async move {
            ws.send(bin(9, b"?")).await.unwrap();
            // Stay open: the client must end the session itself.
            while ws.next().await.is_some() {}
        },
    )
    .await;
    let p = pods(client)
        .exec("web", ["true"], &AttachParams::default())
        .await
        .unwrap();
    let err = tokio::time::timeout(Duration::from_secs(10), p.join())
        .await
        .expect("no hang")
        .unwrap_err();
    assert!(
        matches!(&err, Error::Protocol(m) if m.contains("channel 9")),
        "{err}"
    );
}

#[tokio::test]
async fn a_connection_cut_mid_frame_is_an_error_not_a_hang() {
    let (client, _) = peer(
        |_| Answer::Switch("v5.channel.k8s.io"),
        |ws: Ws, _| async move {
            let mut sock = ws.into_inner();
            // A binary frame announcing 100 bytes, then 3 of them, then the end.
            sock.write_all(&[0x82, 100, 1, b'a', b'b']).await.unwrap();
            sock.shutdown().await.unwrap();
        },
    )
    .await;
    let p = pods(client)
        .exec("web", ["true"], &AttachParams::default())
        .await
        .unwrap();
    let err = tokio::time::timeout(Duration::from_secs(10), p.join())
        .await
        .expect("no hang")
        .unwrap_err();
    assert!(
        matches!(err, Error::WebSocket(_) | Error::Protocol(_)),
        "{err}"
    );
}

#[tokio::test]
async fn an_oversized_frame_is_refused_before_it_is_read() {
    let (client, _) = peer(
        |_| Answer::Switch("v5.channel.k8s.io"),
        |ws: Ws, _| async move {
            let mut sock = ws.into_inner();
            // A binary frame header announcing 1 TiB (64-bit length).
            let mut header = vec![0x82, 127];
            header.extend_from_slice(&(1u64 << 40).to_be_bytes());
            sock.write_all(&header).await.unwrap();
            let mut buf = [0u8; 64];
            while matches!(sock.read(&mut buf).await, Ok(n) if n > 0) {}
        },
    )
    .await;
    let p = pods(client)
        .exec("web", ["true"], &AttachParams::default())
        .await
        .unwrap();
    let err = tokio::time::timeout(Duration::from_secs(10), p.join())
        .await
        .expect("no hang")
        .unwrap_err();
    assert!(
        err.to_string().contains("too long") || err.to_string().contains("size"),
        "{err}"
    );
}

#[tokio::test]
async fn no_exit_status_is_a_protocol_error() {
    let (client, _) = peer(
        |_| Answer::Switch("v5.channel.k8s.io"),
        |mut ws: Ws, _| async move {
            ws.send(bin(1, b"partial")).await.unwrap();
            ws.close(None).await.unwrap();
        },
    )
    .await;
    let mut p = pods(client)
        .exec("web", ["true"], &AttachParams::default())
        .await
        .unwrap();
    drop(p.stdout());
    let err = p.join().await.unwrap_err();
    assert!(
        matches!(&err, Error::Protocol(m) if m.contains("exit status")),
        "{err}"
    );
}

#[tokio::test]
async fn a_slow_reader_gets_every_byte() {
    const TOTAL: usize = 4 << 20;
    let (client, _) = peer(
        |_| Answer::Switch("v5.channel.k8s.io"),
        |mut ws: Ws, _| async move {
            let chunk = vec![7u8; 32 * 1024];
            for _ in 0..TOTAL / chunk.len() {
                ws.send(bin(1, &chunk)).await.unwrap();
            }
            ws.send(bin(3, SUCCESS.as_bytes())).await.unwrap();
            ws.close(None).await.unwrap();
        },
    )
    .await;
    let mut p = pods(client)
        .exec("web", ["yes"], &AttachParams::default().stderr(false))
        .await
        .unwrap();
    let mut stdout = p.stdout().unwrap();
    let mut buf = vec![0u8; 1000];
    let mut total = 0;
    loop {
        let n = stdout.read(&mut buf).await.unwrap();
        if n == 0 {
            break;
        }
        total += n;
        if total % (512 * 1024) < 1000 {
            // A reader that falls behind: output waits for it.
            tokio::task::yield_now().await;
        }
    }
    assert_eq!(total, TOTAL);
    assert!(p.join().await.unwrap().success());
}

/// The kubelet's port-forward: the port header on both channels of each port, then an
/// echo on port 8080's data channel, and an error for port 9090.
async fn echo_ports(mut ws: Ws, _: Head) {
    for (i, port) in [8080u16, 9090].into_iter().enumerate() {
        let ch = (i * 2) as u8;
        ws.send(bin(ch, &port.to_le_bytes())).await.unwrap();
        ws.send(bin(ch + 1, &port.to_le_bytes())).await.unwrap();
    }
    ws.send(bin(
        3,
        b"error forwarding port 9090 to pod web: connection refused",
    ))
    .await
    .unwrap();
    while let Some(Ok(msg)) = ws.next().await {
        match msg {
            Message::Binary(data) if data.first() == Some(&0) => {
                ws.send(bin(0, &data[1..])).await.unwrap();
            }
            Message::Close(_) => break,
            _ => {}
        }
    }
    let _ = ws.close(None).await;
}

#[tokio::test]
async fn portforward_streams_and_errors_per_port() {
    let (client, heads) = peer(|_| Answer::Switch("v4.channel.k8s.io"), echo_ports).await;
    let mut pf = pods(client)
        .portforward("web", &[8080, 9090])
        .await
        .unwrap();
    let mut s = pf.take_stream(8080).unwrap();
    assert!(pf.take_stream(8080).is_none(), "each stream is taken once");
    let err9090 = pf.take_error(9090).unwrap();
    let _s9090 = pf.take_stream(9090).unwrap();
    s.write_all(b"ping").await.unwrap();
    let mut got = [0u8; 4];
    s.read_exact(&mut got).await.unwrap();
    assert_eq!(&got, b"ping");
    pf.abort();
    assert!(
        err9090
            .await
            .is_some_and(|e| e.contains("connection refused")),
    );
    assert_eq!(
        heads.lock().unwrap()[0].target,
        "/api/v1/namespaces/ns/pods/web/portforward?ports=8080%2C9090"
    );
}

#[tokio::test]
async fn a_wrong_port_header_is_a_protocol_error() {
    let (client, _) = peer(
        |_| Answer::Switch("v4.channel.k8s.io"),
        |mut ws: Ws, _| async move {
            ws.send(bin(0, &81u16.to_le_bytes())).await.unwrap();
            while ws.next().await.is_some() {}
        },
    )
    .await;
    let pf = pods(client).portforward("web", &[80]).await.unwrap();
    let err = tokio::time::timeout(Duration::from_secs(10), pf.join())
        .await
        .expect("no hang")
        .unwrap_err();
    assert!(
        matches!(&err, Error::Protocol(m) if m.contains("port 81")),
        "{err}"
    );
}

#[tokio::test]
async fn forward_local_opens_a_websocket_per_connection() {
    let (client, heads) = peer(
        |_| Answer::Switch("v4.channel.k8s.io"),
        |mut ws: Ws, _| async move {
            ws.send(bin(0, &80u16.to_le_bytes())).await.unwrap();
            ws.send(bin(1, &80u16.to_le_bytes())).await.unwrap();
            while let Some(Ok(msg)) = ws.next().await {
                match msg {
                    Message::Binary(data) if data.first() == Some(&0) => {
                        let mut reply = b"echo:".to_vec();
                        reply.extend_from_slice(&data[1..]);
                        ws.send(bin(0, &reply)).await.unwrap();
                    }
                    Message::Close(_) => break,
                    _ => {}
                }
            }
            let _ = ws.close(None).await;
        },
    )
    .await;
    let fwd = pods(client)
        .forward_local("web", 80, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    for word in ["one", "two"] {
        let mut tcp = TcpStream::connect(fwd.local_addr()).await.unwrap();
        tcp.write_all(word.as_bytes()).await.unwrap();
        let mut got = vec![0u8; 5 + word.len()];
        tcp.read_exact(&mut got).await.unwrap();
        assert_eq!(got, format!("echo:{word}").into_bytes());
    }
    assert_eq!(
        heads.lock().unwrap().len(),
        2,
        "one WebSocket per connection"
    );
}

#[tokio::test]
async fn an_eviction_blocked_by_a_budget_is_typed() {
    let body = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Cannot evict pod as it would violate the pod's disruption budget.","reason":"TooManyRequests","details":{"causes":[{"reason":"DisruptionBudget","message":"The disruption budget web needs 2 healthy pods and has 2 currently"}]},"code":429}"#;
    let raw = format!(
        "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let (client, heads) = peer(move |_| Answer::Refuse(raw.clone()), cat).await;
    let err = pods(client)
        .evict("web-0", &EvictParams::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::EvictionBlocked(s) if s.code == 429),
        "{err}"
    );
    assert!(err.is_too_many_requests());
    assert_eq!(
        heads.lock().unwrap()[0].target,
        "/api/v1/namespaces/ns/pods/web-0/eviction"
    );
}

#[tokio::test]
async fn proxy_requests_go_under_the_objects_proxy_path() {
    let body = "hello from the pod";
    let raw = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let (client, heads) = peer(move |_| Answer::Refuse(raw.clone()), cat).await;
    let got = pods(client.clone())
        .proxy_get("web-0:8080", "/healthz?verbose=1")
        .await
        .unwrap();
    assert_eq!(got, body.as_bytes());
    let services: Api<k8s_openapi::api::core::v1::Service> = Api::namespaced(client, "ns");
    services
        .proxy_get("https:web:443", "metrics")
        .await
        .unwrap();
    let heads = heads.lock().unwrap();
    assert_eq!(
        heads[0].target,
        "/api/v1/namespaces/ns/pods/web-0:8080/proxy/healthz?verbose=1"
    );
    assert_eq!(
        heads[1].target,
        "/api/v1/namespaces/ns/services/https:web:443/proxy/metrics"
    );
}
