//! A tiny HTTP server that replays a [`Recording`]: the list pages by continue token, the
//! whole list in one response for `resourceVersion=0` (as kube-apiserver's watch cache
//! answers it), and the recorded watch stream once the parent opens the gate (after the
//! child has synced). Streaming lists (`sendInitialEvents`) are refused with 422, as by a
//! server without the WatchList feature, so clients that try them fall back to lists.
//! Every child gets the identical bytes in the identical chunks, so the comparison
//! measures the clients' decoding and caching, not the API server. A client that accepts
//! `application/vnd.kubernetes.protobuf` (kubewright's informers, by default) gets the
//! same recording in protobuf, as kube-apiserver would answer it.

use crate::BenchError;
use crate::load::{ProtoRecording, Recording};
use bytes::Bytes;
use futures::StreamExt;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::convert::Infallible;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::watch;

type Body = BoxBody<Bytes, Infallible>;

struct State {
    path: String,
    recording: Recording,
    proto: ProtoRecording,
    /// Closed (false) until the parent releases the watch stream.
    gate: watch::Sender<bool>,
}

/// The running replay server; stops accepting when dropped.
pub(crate) struct ReplayServer {
    url: String,
    state: Arc<State>,
    accept: tokio::task::JoinHandle<()>,
}

impl Drop for ReplayServer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl ReplayServer {
    pub(crate) async fn start(namespace: &str, recording: Recording) -> Result<Self, BenchError> {
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(|e| BenchError::Setup(format!("replay server: {e}")))?;
        let addr = listener
            .local_addr()
            .map_err(|e| BenchError::Setup(format!("replay server: {e}")))?;
        let proto = recording.protobuf()?;
        let state = Arc::new(State {
            path: format!("/api/v1/namespaces/{namespace}/pods"),
            recording,
            proto,
            gate: watch::Sender::new(false),
        });
        let accept_state = state.clone();
        let accept = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let state = accept_state.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let state = state.clone();
                        async move { Ok::<_, Infallible>(handle(&state, req).await) }
                    });
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(Self {
            url: format!("http://{addr}"),
            state,
            accept,
        })
    }

    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// Closes the gate: watches wait until [`ReplayServer::release`].
    pub(crate) fn hold(&self) {
        self.state.gate.send_replace(false);
    }

    /// Opens the gate: waiting and future watches get the recorded stream.
    pub(crate) fn release(&self) {
        self.state.gate.send_replace(true);
    }
}

const JSON: &str = "application/json";
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
const PROTOBUF_WATCH: &str = "application/vnd.kubernetes.protobuf;stream=watch";

fn full(status: StatusCode, body: Bytes) -> Response<Body> {
    typed(status, body, JSON)
}

fn typed(status: StatusCode, body: Bytes, content_type: &'static str) -> Response<Body> {
    let mut resp = Response::new(Full::new(body).boxed());
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(content_type),
    );
    resp
}

fn status(code: StatusCode, reason: &str, message: &str) -> Response<Body> {
    let body = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": reason, "code": code.as_u16()
    });
    full(code, Bytes::from(body.to_string()))
}

async fn handle(state: &State, req: Request<Incoming>) -> Response<Body> {
    if req.method() != http::Method::GET || req.uri().path() != state.path {
        return status(StatusCode::NOT_FOUND, "NotFound", "not recorded");
    }
    // Protobuf when the client lists it first, as kube-apiserver negotiates.
    let protobuf = req
        .headers()
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with(PROTOBUF));
    let mut watch_requested = false;
    let mut token = String::new();
    let mut from_cache = false;
    let mut initial_events = false;
    for (k, v) in form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes()) {
        match &*k {
            "watch" => watch_requested = v == "true" || v == "1",
            "continue" => token = v.into_owned(),
            "resourceVersion" => from_cache = v == "0",
            "sendInitialEvents" => initial_events = v == "true",
            _ => {}
        }
    }
    if initial_events {
        return status(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Invalid",
            "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled",
        );
    }
    if !watch_requested {
        let (full_list, pages, content_type) = if protobuf {
            (&state.proto.full_list, &state.proto.pages, PROTOBUF)
        } else {
            (&state.recording.full_list, &state.recording.pages, JSON)
        };
        if from_cache && token.is_empty() {
            return typed(StatusCode::OK, full_list.clone(), content_type);
        }
        return match pages.get(&token) {
            Some(page) => typed(StatusCode::OK, page.clone(), content_type),
            None => status(StatusCode::GONE, "Expired", "unknown continue token"),
        };
    }
    let mut gate = state.gate.subscribe();
    if gate.wait_for(|open| *open).await.is_err() {
        return status(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            "stopping",
        );
    }
    // The recorded events, then nothing: the watch stays open (a closed watch would make
    // the client re-watch, and a second stream would double the events).
    let (watch, content_type) = if protobuf {
        (&state.proto.watch, PROTOBUF_WATCH)
    } else {
        (&state.recording.watch, JSON)
    };
    let chunks: Vec<Result<Frame<Bytes>, Infallible>> =
        watch.iter().map(|c| Ok(Frame::data(c.clone()))).collect();
    let body = futures::stream::iter(chunks).chain(futures::stream::pending());
    let mut resp = Response::new(BodyExt::boxed(StreamBody::new(body)));
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(content_type),
    );
    resp
}
