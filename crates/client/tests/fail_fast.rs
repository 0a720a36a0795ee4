//! Failing fast and clearly: request, connect and TLS handshake timeouts, and client-go's
//! retry policy (a refused connection is reported at once; only `Retry-After` responses
//! and lost connections of GETs are retried). Each test runs a tiny hand-rolled server.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kubewright_client::{Api, Client, Config, ConnectError, Error, RequestInfo};
use kubewright_core::{PostParams, WatchParams};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the server does with the n-th connection, after reading the request head.
#[derive(Clone)]
enum Act {
    /// Never answer (keep the connection open).
    Silent,
    /// Close the connection without answering.
    Close,
    /// Write these bytes and close.
    Respond(Vec<u8>),
    /// Write these bytes and keep the connection open without writing more.
    RespondThenHang(Vec<u8>),
    /// Write the first bytes, wait, write the rest and close.
    Trickle(Vec<u8>, Duration, Vec<u8>),
}

/// A server reading one request per connection; `act(n)` decides what to do with the
/// n-th. Returns its address and the number of requests seen.
async fn server(
    act: impl Fn(usize) -> Act + Send + Sync + 'static,
) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let hits = Arc::new(AtomicUsize::new(0));
    let seen = hits.clone();
    let act = Arc::new(act);
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let act = act.clone();
            let seen = seen.clone();
            tokio::spawn(async move {
                if !read_head(&mut sock).await {
                    return;
                }
                let n = seen.fetch_add(1, Ordering::SeqCst);
                match act(n) {
                    Act::Silent => hold(sock).await,
                    Act::Close => drop(sock),
                    Act::Respond(bytes) => {
                        let _ = sock.write_all(&bytes).await;
                        let _ = sock.shutdown().await;
                    }
                    Act::RespondThenHang(bytes) => {
                        let _ = sock.write_all(&bytes).await;
                        hold(sock).await;
                    }
                    Act::Trickle(first, pause, rest) => {
                        let _ = sock.write_all(&first).await;
                        // The point of this server: a stream slower than the timeout.
                        tokio::time::sleep(pause).await;
                        let _ = sock.write_all(&rest).await;
                        let _ = sock.shutdown().await;
                    }
                }
            });
        }
    });
    (addr, hits)
}

async fn read_head(sock: &mut TcpStream) -> bool {
    let mut buf = vec![0u8; 16 * 1024];
    let mut got = Vec::new();
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        match sock.read(&mut buf).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    true
}

/// Keeps a connection open until the peer closes it.
async fn hold(mut sock: TcpStream) {
    let mut buf = [0u8; 1024];
    while matches!(sock.read(&mut buf).await, Ok(n) if n > 0) {}
}

fn response(status: &str, extra: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

const CM: &str = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"ok"}}"#;

fn config(url: &str) -> Config {
    let mut cfg = Config::new(url.parse().unwrap());
    cfg.qps = 0.0;
    cfg.proxy_env = kubewright_client::proxy::ProxyEnv::none();
    cfg
}

/// A client recording every attempt as (method, status, attempt).
type Attempts = Arc<Mutex<Vec<(String, Option<u16>, u32)>>>;

fn observed(cfg: Config) -> (Client, Attempts) {
    let attempts: Attempts = Arc::default();
    let seen = attempts.clone();
    let client =
        Client::new(cfg)
            .unwrap()
            .with_observer(Arc::new(move |info: &RequestInfo<'_>| {
                seen.lock()
                    .unwrap()
                    .push((info.method.to_string(), info.status, info.attempt));
            }));
    (client, attempts)
}

fn configmaps(client: Client) -> Api<ConfigMap> {
    Api::namespaced(client, "default")
}

fn find_connect_error(err: &Error) -> Option<&ConnectError> {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = next {
        if let Some(c) = e.downcast_ref::<ConnectError>() {
            return Some(c);
        }
        next = e.source();
    }
    None
}

#[tokio::test]
async fn refused_connection_fails_at_once_without_retries() {
    // A port nobody listens on: bind, note the address, close.
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    // Default settings: 10 retries allowed, none used for a refused connection.
    let (client, attempts) = observed(config(&format!("http://{addr}")));
    let started = Instant::now();
    let err = configmaps(client).get("x").await.unwrap_err();
    let elapsed = started.elapsed();
    // Not a timing target: a generous bound that only a retry loop or a hang exceeds
    // (the attempt log below is the precise check).
    assert!(elapsed < Duration::from_secs(5), "took {elapsed:?}");
    assert_eq!(
        *attempts.lock().unwrap(),
        vec![("GET".to_string(), None, 0)],
        "exactly one attempt"
    );
    let msg = err.to_string();
    assert!(matches!(err, Error::Transport { .. }), "{msg}");
    // The cause is in the message, not only in the source chain.
    assert!(msg.to_lowercase().contains("connection refused"), "{msg}");
    assert!(!err.is_timeout());
}

#[tokio::test]
async fn request_timeout_bounds_a_server_that_never_answers() {
    let (addr, hits) = server(|_| Act::Silent).await;
    let mut cfg = config(&format!("http://{addr}"));
    cfg.timeout = Some(Duration::from_millis(300));
    let (client, attempts) = observed(cfg);
    let api = configmaps(client);

    let started = Instant::now();
    let err = api.get("x").await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    assert!(
        matches!(err, Error::Timeout(t) if t == Duration::from_millis(300)),
        "{err}"
    );
    assert!(err.is_timeout());
    assert_eq!(err.to_string(), "request timed out after 300ms");

    // A watch is bounded too while it waits for the response headers.
    let started = Instant::now();
    let err = api.watch(&WatchParams::default(), "").await.err().unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(matches!(err, Error::Timeout(_)), "{err}");

    assert_eq!(hits.load(Ordering::SeqCst), 2, "no retries after a timeout");
    assert_eq!(attempts.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn request_timeout_covers_the_body_but_not_a_watch_stream() {
    let head =
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
    let chunk = |s: &str| format!("{:x}\r\n{s}\r\n", s.len());
    let event = |name: &str| {
        format!(
            "{{\"type\":\"ADDED\",\"object\":{{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{{\"name\":\"{name}\",\"resourceVersion\":\"1\"}}}}}}\n"
        )
    };
    let first = format!("{head}{}", chunk(&event("a")));
    let rest = format!("{}0\r\n\r\n", chunk(&event("b")));
    let (addr, _) = server(move |n| {
        if n == 0 {
            // Headers and half a body, then nothing.
            Act::RespondThenHang(format!("{head}{}", chunk("{\"apiVersion\":")).into_bytes())
        } else {
            Act::Trickle(
                first.clone().into_bytes(),
                Duration::from_millis(800),
                rest.clone().into_bytes(),
            )
        }
    })
    .await;
    let mut cfg = config(&format!("http://{addr}"));
    cfg.timeout = Some(Duration::from_millis(300));
    let api = configmaps(Client::new(cfg).unwrap());

    let started = Instant::now();
    let err = api.get("x").await.unwrap_err();
    assert!(matches!(err, Error::Timeout(_)), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));

    // The watch stream outlives the request timeout: both events arrive.
    let events: Vec<_> = api
        .watch(&WatchParams::default(), "")
        .await
        .unwrap()
        .collect()
        .await;
    let names: Vec<String> = events
        .into_iter()
        .map(|e| match e.unwrap() {
            kubewright_core::WatchEvent::Added(cm) => cm.metadata.name.unwrap(),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(names, ["a", "b"]);
}

#[tokio::test]
async fn tls_handshake_timeout_names_the_host() {
    // Accepts the TCP connection, never answers the ClientHello.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            tokio::spawn(hold(sock));
        }
    });
    let mut cfg = config(&format!("https://{addr}"));
    cfg.accept_invalid_certs = true;
    cfg.tls_handshake_timeout = Some(Duration::from_millis(300));
    let (client, attempts) = observed(cfg);
    let started = Instant::now();
    let err = configmaps(client).get("x").await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    assert!(err.is_timeout(), "{err}");
    assert!(
        matches!(
            find_connect_error(&err),
            Some(ConnectError::TlsHandshakeTimeout { host, timeout })
                if *host == addr.to_string() && *timeout == Duration::from_millis(300)
        ),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("TLS handshake with {addr} timed out after 300ms")),
        "{msg}"
    );
    assert_eq!(attempts.lock().unwrap().len(), 1, "not retried");
}

#[tokio::test]
async fn connect_timeout_when_the_server_does_not_accept() {
    // A listener with a backlog of one that never accepts: once its queue is full,
    // Linux drops further SYNs and a connect hangs.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(1).unwrap();
    let addr = listener.local_addr().unwrap();
    let mut fillers = Vec::new();
    for _ in 0..8 {
        match tokio::time::timeout(Duration::from_millis(200), TcpStream::connect(addr)).await {
            Ok(Ok(s)) => fillers.push(s),
            _ => break,
        }
    }
    let blocked = tokio::time::timeout(Duration::from_millis(200), TcpStream::connect(addr))
        .await
        .is_err();
    if !blocked {
        eprintln!("skipping: this kernel does not drop SYNs for a full accept queue");
        return;
    }
    let mut cfg = config(&format!("http://{addr}"));
    cfg.connect_timeout = Some(Duration::from_millis(300));
    let started = Instant::now();
    let err = configmaps(Client::new(cfg).unwrap())
        .get("x")
        .await
        .unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    assert!(err.is_timeout(), "{err}");
    assert!(
        matches!(
            find_connect_error(&err),
            Some(ConnectError::ConnectTimeout { timeout, .. }) if *timeout == Duration::from_millis(300)
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("timed out after 300ms"), "{err}");
    drop((listener, fillers));
}

#[tokio::test]
async fn lost_connection_is_retried_for_get_only() {
    // The first request of each server loses its connection; later ones succeed.
    let act = |n| {
        if n == 0 {
            Act::Close
        } else {
            Act::Respond(response("200 OK", "", CM))
        }
    };
    let (addr, hits) = server(act).await;
    let (client, attempts) = observed(config(&format!("http://{addr}")));
    let cm = configmaps(client).get("ok").await.unwrap();
    assert_eq!(cm.metadata.name.as_deref(), Some("ok"));
    assert_eq!(hits.load(Ordering::SeqCst), 2);
    assert_eq!(
        *attempts.lock().unwrap(),
        vec![
            ("GET".to_string(), None, 0),
            ("GET".to_string(), Some(200), 1)
        ]
    );

    // A POST may have been processed: not retried.
    let (addr, hits) = server(act).await;
    let (client, attempts) = observed(config(&format!("http://{addr}")));
    let err = configmaps(client)
        .create(&PostParams::default(), &ConfigMap::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Transport { .. }), "{err}");
    assert_eq!(hits.load(Ordering::SeqCst), 1);
    assert_eq!(attempts.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn only_responses_with_retry_after_are_retried() {
    // 503 without Retry-After: returned at once.
    let (addr, hits) =
        server(|_| Act::Respond(response("503 Service Unavailable", "", "{}"))).await;
    let err = configmaps(Client::new(config(&format!("http://{addr}"))).unwrap())
        .get("x")
        .await
        .unwrap_err();
    assert_eq!(err.status().unwrap().code, 503);
    assert_eq!(hits.load(Ordering::SeqCst), 1);

    // 429 without Retry-After: returned at once too.
    let (addr, hits) = server(|_| Act::Respond(response("429 Too Many Requests", "", "{}"))).await;
    let err = configmaps(Client::new(config(&format!("http://{addr}"))).unwrap())
        .get("x")
        .await
        .unwrap_err();
    assert!(err.is_too_many_requests());
    assert_eq!(hits.load(Ordering::SeqCst), 1);

    // 500 with Retry-After, for a POST too (client-go retries any verb then).
    let (addr, hits) = server(|n| {
        if n == 0 {
            Act::Respond(response(
                "500 Internal Server Error",
                "Retry-After: 0\r\n",
                "{}",
            ))
        } else {
            Act::Respond(response("201 Created", "", CM))
        }
    })
    .await;
    let (client, attempts) = observed(config(&format!("http://{addr}")));
    configmaps(client)
        .create(&PostParams::default(), &ConfigMap::default())
        .await
        .unwrap();
    assert_eq!(hits.load(Ordering::SeqCst), 2);
    assert_eq!(
        *attempts.lock().unwrap(),
        vec![
            ("POST".to_string(), Some(500), 0),
            ("POST".to_string(), Some(201), 1)
        ]
    );

    // A Retry-After longer than what is left of the request timeout: the response is
    // returned instead of waiting past the deadline.
    let (addr, hits) = server(|_| {
        Act::Respond(response(
            "429 Too Many Requests",
            "Retry-After: 30\r\n",
            "{}",
        ))
    })
    .await;
    let mut cfg = config(&format!("http://{addr}"));
    cfg.timeout = Some(Duration::from_secs(2));
    let started = Instant::now();
    let err = configmaps(Client::new(cfg).unwrap())
        .get("x")
        .await
        .unwrap_err();
    // The 429 itself, not a timeout after 2 s, and far less than the 30 s asked for.
    assert!(err.is_too_many_requests(), "{err}");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(hits.load(Ordering::SeqCst), 1);
}
