//! Transport behaviour: TLS + HTTP/2, authentication errors, retries honouring
//! Retry-After, and malformed server responses (never a panic).

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kubewright_apiserver::TestServer;
use kubewright_client::config::{KubeConfigOptions, Kubeconfig};
use kubewright_client::{Api, Client, Config, Error};
use kubewright_core::{ListParams, WatchParams};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

fn client_for(server: &TestServer) -> Client {
    let kc = Kubeconfig::from_yaml(&server.kubeconfig()).unwrap();
    Client::new(Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).unwrap()).unwrap()
}

#[tokio::test]
async fn tls_with_token_negotiates_http2() {
    let server = TestServer::builder()
        .tls(true)
        .token("secret-token")
        .start()
        .await
        .unwrap();
    let client = client_for(&server);
    let resp = client
        .send(http::Request::get("/version").body(vec![]).unwrap())
        .await
        .unwrap();
    assert_eq!(resp.version(), http::Version::HTTP_2, "ALPN should pick h2");
    // kube-apiserver's response headers: an audit id and no caching.
    assert!(resp.headers().contains_key("audit-id"));
    assert_eq!(resp.headers()["cache-control"], "no-cache, private");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.list(&ListParams::default()).await.unwrap();
    // Several watches share the one HTTP/2 connection and all work.
    let mut streams = Vec::new();
    for _ in 0..5 {
        streams.push(Box::pin(
            cms.watch(&WatchParams::default().timeout(1), "")
                .await
                .unwrap(),
        ));
    }
    for s in &mut streams {
        while let Some(ev) = s.next().await {
            ev.unwrap();
        }
    }
    // A wrong token is a 401 mapped to is_unauthorized.
    let mut kc = Kubeconfig::from_yaml(&server.kubeconfig()).unwrap();
    let yaml = kc.to_yaml().unwrap().replace("secret-token", "wrong-token");
    kc = Kubeconfig::from_yaml(&yaml).unwrap();
    let bad =
        Client::new(Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).unwrap())
            .unwrap();
    let err = Api::<ConfigMap>::namespaced(bad, "default")
        .list(&ListParams::default())
        .await
        .unwrap_err();
    assert!(err.is_unauthorized(), "{err}");
    // The token never appears in the error text or Debug output.
    assert!(!format!("{err} {err:?}").contains("wrong-token"));
}

/// A scripted HTTP/1.1 server: each connection reads one request and writes the raw
/// response chosen by `respond(path, hit_count)`.
async fn fake_server(
    respond: impl Fn(&str, usize) -> Vec<u8> + Send + Sync + 'static,
) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let hits = Arc::new(AtomicUsize::new(0));
    let hits2 = hits.clone();
    let respond = Arc::new(respond);
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let respond = respond.clone();
            let hits = hits2.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 16 * 1024];
                let mut got = Vec::new();
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    let Ok(n) = sock.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    got.extend_from_slice(&buf[..n]);
                }
                let text = String::from_utf8_lossy(&got);
                let path = text.split_whitespace().nth(1).unwrap_or("/").to_string();
                let n = hits.fetch_add(1, Ordering::SeqCst);
                let _ = sock.write_all(&respond(&path, n)).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    (format!("http://{addr}"), hits)
}

fn raw(status: &str, ctype: &str, extra: &str, body: &str) -> Vec<u8> {
    format!("HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n{body}", body.len()).into_bytes()
}

fn plain_client(url: &str) -> Client {
    let mut cfg = Config::new(url.parse().unwrap());
    cfg.qps = 0.0;
    Client::new(cfg).unwrap()
}

#[tokio::test]
async fn malformed_responses_are_errors_not_panics() {
    let (url, _) = fake_server(|path, _| {
        if path.contains("/configmaps/truncated") {
            raw("200 OK", "application/json", "", r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"#)
        } else if path.contains("/configmaps/html") {
            raw("502 Bad Gateway", "text/html", "", "<html>upstream down</html>")
        } else if path.contains("/configmaps/notjson") {
            raw("200 OK", "text/plain", "", "hello")
        } else if path.contains("watch=true") {
            // A watch stream cut in the middle of the second event.
            let body = "{\"type\":\"ADDED\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\"}}}\n{\"type\":\"MODIFIED\",\"object\":{\"apiVer";
            raw("200 OK", "application/json", "", body)
        } else {
            raw("404 Not Found", "text/plain", "", "404 page not found")
        }
    })
    .await;
    let api: Api<ConfigMap> = Api::namespaced(plain_client(&url), "x");
    assert!(matches!(
        api.get("truncated").await,
        Err(Error::Decode { .. })
    ));
    let err = api.get("html").await.unwrap_err();
    assert_eq!(err.status().unwrap().code, 502);
    assert!(matches!(
        api.get("notjson").await,
        Err(Error::Decode { .. })
    ));
    assert!(api.get("other").await.unwrap_err().is_not_found());
    let events: Vec<_> = api
        .watch(&WatchParams::default(), "")
        .await
        .unwrap()
        .collect()
        .await;
    assert_eq!(events.len(), 2);
    assert!(events[0].is_ok());
    assert!(
        matches!(&events[1], Err(Error::Stream(m)) if m.contains("middle")),
        "{:?}",
        events[1]
    );
}

#[tokio::test]
async fn retries_honour_retry_after_and_are_bounded() {
    // Two text/plain 429s (like API priority and fairness), then success.
    let (url, hits) = fake_server(|_, n| {
        if n < 2 {
            raw(
                "429 Too Many Requests",
                "text/plain",
                "Retry-After: 0\r\n",
                "Too many requests, please try again later.\n",
            )
        } else {
            raw(
                "200 OK",
                "application/json",
                "",
                r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"ok"}}"#,
            )
        }
    })
    .await;
    let api: Api<ConfigMap> = Api::namespaced(plain_client(&url), "x");
    assert_eq!(
        api.get("ok").await.unwrap().metadata.name.as_deref(),
        Some("ok")
    );
    assert_eq!(hits.load(Ordering::SeqCst), 3);

    // Always 429: gives up after max_retries and reports a synthesised Status.
    let (url, hits) = fake_server(|_, _| {
        raw(
            "429 Too Many Requests",
            "text/plain",
            "Retry-After: 0\r\n",
            "slow down\n",
        )
    })
    .await;
    let mut cfg = Config::new(url.parse().unwrap());
    cfg.qps = 0.0;
    cfg.max_retries = 3;
    let api: Api<ConfigMap> = Api::namespaced(Client::new(cfg).unwrap(), "x");
    let err = api.get("x").await.unwrap_err();
    assert!(err.is_too_many_requests(), "{err}");
    assert_eq!(hits.load(Ordering::SeqCst), 4, "one try plus three retries");
}

#[tokio::test]
async fn observer_sees_every_attempt() {
    let (url, _) = fake_server(|_, n| {
        if n == 0 {
            raw(
                "429 Too Many Requests",
                "text/plain",
                "Retry-After: 0\r\n",
                "slow down\n",
            )
        } else {
            raw(
                "200 OK",
                "application/json",
                "",
                r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"ok"}}"#,
            )
        }
    })
    .await;
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    let client = plain_client(&url).with_observer(Arc::new(
        move |info: &kubewright_client::RequestInfo<'_>| {
            seen2
                .lock()
                .unwrap()
                .push((info.method.to_string(), info.status, info.attempt));
        },
    ));
    Api::<ConfigMap>::namespaced(client, "x")
        .get("ok")
        .await
        .unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![
            ("GET".to_string(), Some(429), 0),
            ("GET".to_string(), Some(200), 1)
        ]
    );
}

/// A minimal HTTP CONNECT proxy counting the tunnels it opens.
async fn connect_proxy() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let tunnels = Arc::new(AtomicUsize::new(0));
    let count = tunnels.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut inbound, _)) = listener.accept().await else {
                return;
            };
            let count = count.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if inbound.read_exact(&mut byte).await.is_err() {
                        return;
                    }
                    head.push(byte[0]);
                }
                let text = String::from_utf8_lossy(&head).to_string();
                let target = text.split_whitespace().nth(1).unwrap_or("").to_string();
                if !text.starts_with("CONNECT ") {
                    let _ = inbound
                        .write_all(b"HTTP/1.1 405 Method Not Allowed\r\n\r\n")
                        .await;
                    return;
                }
                let Ok(mut outbound) = tokio::net::TcpStream::connect(&target).await else {
                    return;
                };
                count.fetch_add(1, Ordering::SeqCst);
                let _ = inbound
                    .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    .await;
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            });
        }
    });
    (format!("http://{addr}"), tunnels)
}

#[tokio::test]
async fn requests_go_through_the_proxy_url() {
    let server = TestServer::builder()
        .tls(true)
        .token("proxied")
        .start()
        .await
        .unwrap();
    let (proxy, tunnels) = connect_proxy().await;
    let kc = Kubeconfig::from_yaml(&server.kubeconfig()).unwrap();
    let mut cfg = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).unwrap();
    cfg.proxy_url = Some(proxy.parse().unwrap());
    let client = Client::new(cfg).unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.list(&ListParams::default()).await.unwrap();
    let resp = client
        .send(http::Request::get("/version").body(vec![]).unwrap())
        .await
        .unwrap();
    assert_eq!(
        resp.version(),
        http::Version::HTTP_2,
        "TLS and ALPN run inside the tunnel"
    );
    assert!(
        tunnels.load(Ordering::SeqCst) >= 1,
        "the request did not go through the proxy"
    );
}
