//! Raw HTTP and WebSocket helpers for the pod I/O tests (embedded server, plain HTTP).

#![allow(dead_code, clippy::unwrap_used, clippy::panic)] // test code

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use kubewright_apiserver::TestServer;
use serde_json::{Value, json};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// A response: status, content type and body.
pub struct Resp {
    pub status: u16,
    pub content_type: String,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&self.body)))
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Sends one request on a new connection.
pub async fn http(server: &TestServer, method: &str, path: &str, body: Option<Value>) -> Resp {
    let resp = send(server, method, path, body).await;
    let status = resp.status().as_u16();
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let body = resp
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .to_vec();
    Resp {
        status,
        content_type,
        body,
    }
}

/// Sends one request and returns the response with its body unread (for streams).
pub async fn send(
    server: &TestServer,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> http::Response<hyper::body::Incoming> {
    let tcp = TcpStream::connect(server.addr()).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("host", server.addr().to_string());
    let bytes = match body {
        Some(b) => {
            req = req.header("content-type", "application/json");
            Bytes::from(serde_json::to_vec(&b).unwrap())
        }
        None => Bytes::new(),
    };
    sender
        .send_request(req.body(Full::new(bytes)).unwrap())
        .await
        .unwrap()
}

/// Creates a namespace.
pub async fn namespace(server: &TestServer, name: &str) {
    let r = http(
        server,
        "POST",
        "/api/v1/namespaces",
        Some(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
}

/// Creates a pod with these containers (name, image) and returns it.
pub async fn pod(
    server: &TestServer,
    ns: &str,
    name: &str,
    containers: &[&str],
    extra: Value,
) -> Value {
    let cs: Vec<Value> = containers
        .iter()
        .map(|c| json!({"name": c, "image": "busybox"}))
        .collect();
    let mut body = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"containers": cs, "terminationGracePeriodSeconds": 1}});
    if let (Some(b), Some(e)) = (body["spec"].as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            b.insert(k.clone(), v.clone());
        }
    }
    let r = http(
        server,
        "POST",
        &format!("/api/v1/namespaces/{ns}/pods"),
        Some(body),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    r.json()
}

/// Polls a GET until `done` holds (deadline 10 s); returns the last object.
pub async fn wait_for(server: &TestServer, path: &str, done: impl Fn(&Resp) -> bool) -> Resp {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let r = http(server, "GET", path, None).await;
        if done(&r) {
            return r;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting on {path}: {} {}",
            r.status,
            r.text()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Waits until a pod is Running and Ready.
pub async fn running(server: &TestServer, ns: &str, name: &str) -> Value {
    wait_for(
        server,
        &format!("/api/v1/namespaces/{ns}/pods/{name}"),
        |r| {
            let v: Value = serde_json::from_slice(&r.body).unwrap_or_default();
            v.pointer("/status/phase") == Some(&json!("Running"))
        },
    )
    .await
    .json()
}

pub type Ws = WebSocketStream<TcpStream>;

/// Opens a WebSocket to `path`, offering `protocols`; the error response on failure.
pub async fn ws(
    server: &TestServer,
    path: &str,
    protocols: &[&str],
) -> Result<(Ws, String), (u16, String)> {
    ws_with(server, path, protocols, None).await
}

/// [`ws`] with a client configuration.
pub async fn ws_with(
    server: &TestServer,
    path: &str,
    protocols: &[&str],
    cfg: Option<tokio_tungstenite::tungstenite::protocol::WebSocketConfig>,
) -> Result<(Ws, String), (u16, String)> {
    let url = format!("ws://{}{path}", server.addr());
    let mut req = url.into_client_request().unwrap();
    if !protocols.is_empty() {
        req.headers_mut().insert(
            "sec-websocket-protocol",
            protocols.join(", ").parse().unwrap(),
        );
    }
    let tcp = TcpStream::connect(server.addr()).await.unwrap();
    match tokio_tungstenite::client_async_with_config(req, tcp, cfg).await {
        Ok((ws, resp)) => {
            let proto = resp
                .headers()
                .get("sec-websocket-protocol")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string();
            Ok((ws, proto))
        }
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => Err((
            resp.status().as_u16(),
            String::from_utf8_lossy(resp.body().as_deref().unwrap_or_default()).into_owned(),
        )),
        Err(e) => panic!("websocket: {e}"),
    }
}

/// The next message with a deadline (panics on timeout).
pub async fn next(ws: &mut Ws) -> Option<Message> {
    match tokio::time::timeout(Duration::from_secs(10), ws.next()).await {
        Ok(Some(Ok(m))) => Some(m),
        Ok(Some(Err(e))) => panic!("websocket error: {e}"),
        Ok(None) => None,
        Err(_) => panic!("no message within 10 s"),
    }
}

/// Reads binary channel messages until the server closes; returns them in order, and
/// the close frame's code.
pub async fn collect(ws: &mut Ws) -> (Vec<(u8, Vec<u8>)>, Option<u16>) {
    let mut out = Vec::new();
    loop {
        match next(ws).await {
            Some(Message::Binary(b)) => {
                let (ch, rest) = b.split_first().unwrap();
                out.push((*ch, rest.to_vec()));
            }
            Some(Message::Close(f)) => return (out, f.map(|f| u16::from(f.code))),
            Some(_) => {}
            None => return (out, None),
        }
    }
}

/// Sends one binary message on a channel.
pub async fn send_ch(ws: &mut Ws, ch: u8, data: &[u8]) {
    let mut v = vec![ch];
    v.extend_from_slice(data);
    ws.send(Message::Binary(v.into())).await.unwrap();
}

/// The bytes of one channel, concatenated.
pub fn channel(msgs: &[(u8, Vec<u8>)], ch: u8) -> Vec<u8> {
    msgs.iter()
        .filter(|(c, _)| *c == ch)
        .flat_map(|(_, d)| d.clone())
        .collect()
}
