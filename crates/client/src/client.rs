//! The HTTP client: one stack of auth -> rate limit -> retry -> hyper (HTTP/2 by ALPN
//! over TLS, HTTP/1.1 otherwise), shared by every API of a [`Client`].

use crate::config::{Authenticator, Config};
use crate::error::{Error, Result};
use crate::limiter::TokenBucket;
use crate::proxy::{ProxyConnector, ProxyTarget, TlsTimeoutConnector};
use bytes::Bytes;
use futures::Stream;
use http::{HeaderName, HeaderValue, Method, Request, Response, StatusCode, Uri, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kubewright_core::Status;
use serde::de::DeserializeOwned;
use std::future::Future;
use std::io::Read;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

type Connector = TlsTimeoutConnector<hyper_rustls::HttpsConnector<ProxyConnector>>;

type HyperClient = hyper_util::client::legacy::Client<Connector, Full<Bytes>>;

/// The connection pools. They are replaced (same connectors, new pools) when the client
/// certificate of an exec plugin changes, so that later requests open connections that
/// present the new certificate (client-go closes its connections then too); requests
/// in flight, such as watches, finish on their old connections.
///
/// `upgrade` speaks HTTP/1.1 only: exec, attach and port-forward switch protocols with
/// an HTTP/1.1 `Upgrade`, which HTTP/2 does not have.
struct Http {
    connector: Connector,
    upgrade_connector: Connector,
    current: std::sync::Mutex<Pools>,
}

struct Pools {
    generation: u64,
    main: HyperClient,
    upgrade: HyperClient,
}

impl Http {
    fn new(connector: Connector, upgrade_connector: Connector) -> Self {
        let current = Pools {
            generation: 0,
            main: Self::build(&connector),
            upgrade: Self::build(&upgrade_connector),
        };
        Self {
            connector,
            upgrade_connector,
            current: std::sync::Mutex::new(current),
        }
    }

    fn build(connector: &Connector) -> HyperClient {
        hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            .timer(hyper_util::rt::TokioTimer::new())
            .pool_timer(hyper_util::rt::TokioTimer::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .http2_keep_alive_interval(Some(Duration::from_secs(30)))
            .http2_keep_alive_while_idle(true)
            .build(connector.clone())
    }

    /// The pool for client certificate `generation` (the HTTP/1.1-only one for upgrades).
    fn get(&self, generation: u64, upgrade: bool) -> HyperClient {
        let mut current = self
            .current
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if current.generation != generation {
            tracing::debug!(
                generation,
                "client certificate changed, opening new connections"
            );
            *current = Pools {
                generation,
                main: Self::build(&self.connector),
                upgrade: Self::build(&self.upgrade_connector),
            };
        }
        if upgrade {
            current.upgrade.clone()
        } else {
            current.main.clone()
        }
    }
}

/// A callback receiving the server's `Warning` headers (deprecations, unknown fields).
pub type WarningHandler = Arc<dyn Fn(&str) + Send + Sync>;

/// What an observer learns about each HTTP attempt (for metrics such as
/// `rest_client_requests_total`).
#[derive(Debug, Clone)]
pub struct RequestInfo<'a> {
    /// HTTP method.
    pub method: &'a Method,
    /// Host and port of the API server.
    pub host: &'a str,
    /// Response status, `None` when the connection failed.
    pub status: Option<u16>,
    /// Time from sending to response headers.
    pub duration: Duration,
    /// Time spent waiting for the client-side rate limiter before this attempt.
    pub rate_limiter_wait: Duration,
    /// 0 for the first attempt, then 1, 2, ... for retries.
    pub attempt: u32,
    /// The response's `Content-Type` (e.g. `application/vnd.kubernetes.protobuf`).
    pub content_type: Option<&'a str>,
}

/// A callback observing every HTTP attempt.
pub type RequestObserver = Arc<dyn Fn(&RequestInfo<'_>) + Send + Sync>;

/// A Kubernetes API client. Cheap to clone; clones share connections, auth and the
/// QPS/Burst limiter.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    http: Arc<Http>,
    base: String,
    auth: Authenticator,
    limiter: Option<Arc<TokenBucket>>,
    headers: Vec<(HeaderName, HeaderValue)>,
    default_namespace: String,
    max_retries: u32,
    content_type: crate::ContentType,
    timeout: Option<Duration>,
    warnings: Option<WarningHandler>,
    observer: Option<RequestObserver>,
    host: String,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("base", &self.inner.base)
            .field("default_namespace", &self.inner.default_namespace)
            .finish_non_exhaustive()
    }
}

impl TryFrom<Config> for Client {
    type Error = Error;
    fn try_from(config: Config) -> Result<Self> {
        Client::new(config)
    }
}

/// The wait before retrying a `GET` whose connection was lost (client-go answers such an
/// error with an artificial `Retry-After: 1`).
const CONNECTION_RETRY_WAIT: Duration = Duration::from_secs(1);

/// The longest `Retry-After` honoured.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// Whether a failed exchange lost an established connection (reset, closed, or ended
/// before the response: client-go's `IsConnectionReset`, `IsProbableEOF` and
/// `IsHTTP2ConnectionLost`). Failing to connect (refused, name resolution, TLS, connect
/// timeout) is not: the server never saw the request, but retrying would only delay an
/// error the caller should see at once.
fn is_connection_lost(e: &hyper_util::client::legacy::Error) -> bool {
    if e.is_connect() {
        return false;
    }
    let mut next: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(cause) = next {
        if let Some(io) = cause.downcast_ref::<std::io::Error>()
            && matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::ConnectionAborted
                    | std::io::ErrorKind::BrokenPipe
                    | std::io::ErrorKind::UnexpectedEof
            )
        {
            return true;
        }
        if let Some(h) = cause.downcast_ref::<hyper::Error>()
            && (h.is_incomplete_message() || h.is_canceled() || h.is_closed())
        {
            return true;
        }
        next = cause.source();
    }
    false
}

impl Client {
    /// A client for the given configuration.
    pub fn new(config: Config) -> Result<Self> {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(config.connect_timeout);
        let mut tls = config.rustls_config()?;
        // The connector sets ALPN (h2, http/1.1) itself and requires it empty here.
        tls.alpn_protocols.clear();
        let auth = config.authenticator();
        // An exec plugin may return a client certificate; a static one takes precedence
        // (like client-go).
        if config.client_identity.is_none()
            && let Some(resolver) = auth.client_cert_resolver()
        {
            tls.client_auth_cert_resolver = resolver;
            // A resumed TLS session would keep the previous certificate's identity.
            tls.resumption = rustls::client::Resumption::disabled();
        }
        // `https://` proxies get the same trust and client certificate (like client-go).
        let proxy_tls = tls.clone();
        let server_name = match &config.tls_server_name {
            Some(name) => Some(
                rustls_pki_types::ServerName::try_from(name.clone())
                    .map_err(|e| Error::Tls(format!("invalid tls-server-name {name:?}: {e}")))?,
            ),
            None => None,
        };
        let proxy = config
            .proxy_for_cluster()?
            .map(|url| ProxyTarget::from_uri(&url, "proxy-url"))
            .transpose()?;
        let tcp = ProxyConnector::new(http, proxy, &proxy_tls, config.connect_timeout);
        let https = |tls: rustls::ClientConfig| {
            let builder = hyper_rustls::HttpsConnectorBuilder::new()
                .with_tls_config(tls)
                .https_or_http();
            match &server_name {
                Some(name) => builder.with_server_name_resolver(
                    hyper_rustls::FixedServerNameResolver::new(name.clone()),
                ),
                None => builder,
            }
        };
        let connector = TlsTimeoutConnector::new(
            https(tls.clone())
                .enable_all_versions()
                .wrap_connector(tcp.clone()),
            config.tls_handshake_timeout,
        );
        let upgrade_connector = TlsTimeoutConnector::new(
            https(tls).enable_http1().wrap_connector(tcp),
            config.tls_handshake_timeout,
        );
        let http = Arc::new(Http::new(connector, upgrade_connector));
        let mut headers = config.headers.clone();
        headers.extend(config.impersonation_headers()?);
        if let Ok(ua) = HeaderValue::from_str(&config.user_agent) {
            headers.push((header::USER_AGENT, ua));
        }
        // `Uri` displays an empty path as "/": keep the base without a trailing slash so
        // that joining "/api/..." never produces "//api".
        let base = config
            .cluster_url
            .to_string()
            .trim_end_matches('/')
            .to_string();
        // Without user-info, which could hold credentials.
        let host = config
            .cluster_url
            .authority()
            .map(|a| {
                a.as_str()
                    .rsplit('@')
                    .next()
                    .unwrap_or_default()
                    .to_string()
            })
            .unwrap_or_default();
        Ok(Self {
            inner: Arc::new(Inner {
                http,
                base,
                auth,
                limiter: TokenBucket::new(config.qps, config.burst).map(Arc::new),
                headers,
                default_namespace: config.default_namespace.clone(),
                max_retries: config.max_retries,
                content_type: config.content_type,
                timeout: config.timeout,
                warnings: None,
                observer: None,
                host,
            }),
        })
    }

    /// A client from the inferred configuration (kubeconfig, else in-cluster).
    pub async fn try_default() -> Result<Self> {
        Self::new(Config::infer().await?)
    }

    /// Replaces the warning handler (default: log through `tracing` at warn level).
    #[must_use]
    pub fn with_warning_handler(self, handler: WarningHandler) -> Self {
        self.rebuild(|i| i.warnings = Some(handler))
    }

    /// Installs an observer called after every HTTP attempt (metrics hooks). Clones made
    /// afterwards share it; the connection pool and rate limiter stay shared.
    #[must_use]
    pub fn with_observer(self, observer: RequestObserver) -> Self {
        self.rebuild(|i| i.observer = Some(observer))
    }

    /// A clone with connection pools of its own (same server, credentials, headers and
    /// QPS/Burst limiter). A connection's task runs on the Tokio runtime that opened it:
    /// a component that runs on a runtime of its own (as a
    /// `SharedInformerFactory`'s informer threads do) keeps its connections
    /// there, instead of sharing, say, an HTTP/2 connection whose task runs elsewhere.
    #[must_use]
    pub fn with_own_connections(&self) -> Self {
        let http = Arc::new(Http::new(
            self.inner.http.connector.clone(),
            self.inner.http.upgrade_connector.clone(),
        ));
        self.clone().rebuild(|i| i.http = http)
    }

    fn rebuild(self, change: impl FnOnce(&mut Inner)) -> Self {
        let i = &self.inner;
        let mut inner = Inner {
            http: i.http.clone(),
            base: i.base.clone(),
            auth: i.auth.clone(),
            limiter: i.limiter.clone(),
            headers: i.headers.clone(),
            default_namespace: i.default_namespace.clone(),
            max_retries: i.max_retries,
            content_type: i.content_type,
            timeout: i.timeout,
            warnings: i.warnings.clone(),
            observer: i.observer.clone(),
            host: i.host.clone(),
        };
        change(&mut inner);
        Self {
            inner: Arc::new(inner),
        }
    }

    /// The wire format [`Api`](crate::Api)s of this client ask for
    /// ([`Config::content_type`]).
    pub fn content_type(&self) -> crate::ContentType {
        self.inner.content_type
    }

    /// The namespace from the configuration (context namespace, in-cluster namespace or
    /// `default`).
    pub fn default_namespace(&self) -> &str {
        &self.inner.default_namespace
    }

    fn url(&self, path_and_query: &str) -> Result<Uri> {
        let text = format!("{}{}", self.inner.base, path_and_query);
        text.parse()
            .map_err(|e: http::uri::InvalidUri| Error::Transport {
                url: path_and_query.to_string(),
                source: Box::new(e),
            })
    }

    /// Sends a request and returns the raw response (after auth, rate limiting and
    /// retries). Error statuses are *not* converted; see [`Client::request_bytes`].
    /// [`Config::timeout`] bounds the wait for the response headers only: reading the
    /// body is up to the caller.
    pub async fn send(&self, req: Request<Vec<u8>>) -> Result<Response<Incoming>> {
        self.send_until(req, false).await.map(|(resp, _)| resp)
    }

    /// The full URL of a request, for errors (user-info redacted).
    fn display_url(&self, path_and_query: &str) -> String {
        crate::config::redact_url(&format!("{}{path_and_query}", self.inner.base))
    }

    fn timed_out(&self) -> Error {
        Error::Timeout(self.inner.timeout.unwrap_or_default())
    }

    /// Sends a request with client-go's retry policy (see [`Config::max_retries`]);
    /// returns the response and the deadline of [`Config::timeout`], if any, for reading
    /// the body.
    ///
    /// The request path (auth, limiter, retries, hyper's connection pool, TLS) is one
    /// boxed future, built here: an `async fn`'s body is compiled again in every crate
    /// that awaits it, so every crate with an `Api<K>` would otherwise carry its own copy
    /// of the whole transport. Behind the box it is compiled once, in this crate.
    #[inline(never)]
    fn send_until(
        &self,
        req: Request<Vec<u8>>,
        upgrade: bool,
    ) -> BoxFuture<'_, Result<(Response<Incoming>, Option<Instant>)>> {
        Box::pin(self.send_until_inner(req, upgrade))
    }

    async fn send_until_inner(
        &self,
        req: Request<Vec<u8>>,
        upgrade: bool,
    ) -> Result<(Response<Incoming>, Option<Instant>)> {
        let (parts, body) = req.into_parts();
        let body = Bytes::from(body);
        let path = parts
            .uri
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .unwrap_or_else(|| "/".into());
        let uri = self.url(&path)?;
        let mut attempt = 0u32;
        let mut auth_retried = false;
        // Set when the first attempt starts: like client-go, neither the client-side
        // rate limiter nor the credential of the first attempt count.
        let mut deadline: Option<Instant> = None;
        loop {
            let rate_limiter_wait = match (&self.inner.limiter, deadline) {
                (Some(l), Some(d)) => tokio::time::timeout_at(d, l.acquire())
                    .await
                    .map_err(|_| self.timed_out())?,
                (Some(l), None) => l.acquire().await,
                (None, _) => Duration::ZERO,
            };
            let mut builder = Request::builder()
                .method(parts.method.clone())
                .uri(uri.clone());
            for (k, v) in &self.inner.headers {
                builder = builder.header(k, v);
            }
            for (k, v) in &parts.headers {
                builder = builder.header(k, v);
            }
            if !parts.headers.contains_key(header::ACCEPT) {
                builder = builder.header(header::ACCEPT, "application/json");
            }
            builder = builder.header(header::ACCEPT_ENCODING, "gzip");
            if let Some(h) = self.inner.auth.header().await? {
                builder = builder.header(header::AUTHORIZATION, h);
            }
            let req = builder
                .body(Full::new(body.clone()))
                .map_err(|e| Error::Transport {
                    url: path.clone(),
                    source: Box::new(e),
                })?;
            // After `header()`, which refreshed an expired exec credential.
            let http = self
                .inner
                .http
                .get(self.inner.auth.client_cert_generation(), upgrade);
            let started = Instant::now();
            if deadline.is_none() {
                deadline = self.inner.timeout.map(|t| started + t);
            }
            // `None`: the request timeout fired.
            let result = match deadline {
                Some(d) => tokio::time::timeout_at(d, http.request(req)).await.ok(),
                None => Some(http.request(req).await),
            };
            if let Some(obs) = &self.inner.observer {
                obs(&RequestInfo {
                    method: &parts.method,
                    host: &self.inner.host,
                    status: result
                        .as_ref()
                        .and_then(|r| r.as_ref().ok())
                        .map(|r| r.status().as_u16()),
                    duration: started.elapsed(),
                    rate_limiter_wait,
                    attempt,
                    content_type: result
                        .as_ref()
                        .and_then(|r| r.as_ref().ok())
                        .and_then(|r| r.headers().get(header::CONTENT_TYPE))
                        .and_then(|v| v.to_str().ok()),
                });
            }
            let resp = match result {
                None => {
                    tracing::debug!(%path, attempt, "request timed out");
                    return Err(self.timed_out());
                }
                Some(Ok(r)) => r,
                Some(Err(e)) => {
                    if parts.method == Method::GET
                        && attempt < self.inner.max_retries
                        && is_connection_lost(&e)
                        && fits(deadline, CONNECTION_RETRY_WAIT)
                    {
                        attempt += 1;
                        tracing::debug!(%path, attempt, "connection lost, retrying: {e}");
                        tokio::time::sleep(CONNECTION_RETRY_WAIT).await;
                        continue;
                    }
                    return Err(Error::Transport {
                        url: self.display_url(&path),
                        source: Box::new(e),
                    });
                }
            };
            self.surface_warnings(resp.headers());
            let status = resp.status();
            if status == StatusCode::UNAUTHORIZED
                && !auth_retried
                && self.inner.auth.is_refreshable()
            {
                auth_retried = true;
                self.inner.auth.invalidate();
                continue;
            }
            // client-go's `checkWait`: only a 429 or 5xx that says when to come back.
            let retry_after = resp
                .headers()
                .get(header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(|secs| Duration::from_secs(secs).min(MAX_RETRY_AFTER));
            if let Some(wait) = retry_after
                && (status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error())
                && attempt < self.inner.max_retries
                && fits(deadline, wait)
            {
                attempt += 1;
                tracing::debug!(%path, %status, attempt, ?wait, "retrying after Retry-After");
                drop(resp);
                tokio::time::sleep(wait).await;
                continue;
            }
            return Ok((resp, deadline));
        }
    }

    /// Sends an HTTP/1.1 `Upgrade` request (after auth, rate limiting and retries, like
    /// [`Client::send`]) on a connection of its own, and returns the response. On
    /// `101 Switching Protocols`, `hyper::upgrade::on(response)` yields the connection;
    /// any other answer is returned as it is. [`Config::timeout`] bounds the wait for
    /// the response headers.
    pub async fn send_upgrade(&self, req: Request<Vec<u8>>) -> Result<Response<Incoming>> {
        self.send_until(req, true).await.map(|(resp, _)| resp)
    }

    /// The error for a response that should have switched protocols: the server's
    /// Status when it sent one (e.g. 400 "pod does not have a host assigned", 403).
    pub(crate) async fn upgrade_refused(&self, resp: Response<Incoming>) -> Error {
        let status = resp.status();
        let deadline = self.inner.timeout.map(|t| Instant::now() + t);
        match self.read_body(resp, deadline).await {
            Ok(body) => Error::Api(Box::new(status_from_body(status, &body))),
            Err(e) => e,
        }
    }

    /// The display form of a request path (full URL, user-info redacted), for errors.
    pub(crate) fn url_for_errors(&self, path_and_query: &str) -> String {
        self.display_url(path_and_query)
    }

    fn surface_warnings(&self, headers: &http::HeaderMap) {
        for w in headers.get_all("warning") {
            let Ok(text) = w.to_str() else { continue };
            let msg = parse_warning(text);
            match &self.inner.warnings {
                Some(h) => h(&msg),
                None => tracing::warn!(target: "kubewright::warning", "{msg}"),
            }
        }
    }

    /// Sends a request and returns the body bytes of a successful response; error
    /// responses become [`Error::Api`].
    /// [`Config::timeout`] bounds the whole exchange, body included.
    pub async fn request_bytes(&self, req: Request<Vec<u8>>) -> Result<(StatusCode, Bytes)> {
        let (resp, deadline) = self.send_until(req, false).await?;
        let status = resp.status();
        let body = self.read_body(resp, deadline).await?;
        if !status.is_success() {
            return Err(Error::Api(Box::new(status_from_body(status, &body))));
        }
        Ok((status, body))
    }

    /// Reads a whole (possibly gzipped) body before `deadline` (boxed, as
    /// [`Client::send_until`]).
    #[inline(never)]
    fn read_body(
        &self,
        resp: Response<Incoming>,
        deadline: Option<Instant>,
    ) -> BoxFuture<'_, Result<Bytes>> {
        Box::pin(self.read_body_inner(resp, deadline))
    }

    async fn read_body_inner(
        &self,
        resp: Response<Incoming>,
        deadline: Option<Instant>,
    ) -> Result<Bytes> {
        let gzip = is_gzip(resp.headers());
        let read = collect_body(resp.into_body());
        let body = match deadline {
            Some(d) => tokio::time::timeout_at(d, read)
                .await
                .map_err(|_| self.timed_out())?,
            None => read.await,
        }
        .map_err(|e| Error::Body(Box::new(e)))?;
        if gzip { gunzip(&body) } else { Ok(body) }
    }

    /// Sends a request and decodes the response into `T`: JSON, or Kubernetes protobuf
    /// when the server answered with it (a request that asked for it with an `Accept`
    /// header, e.g. an [`Api`](crate::Api) with [`ContentType::Protobuf`]).
    pub async fn request<T: DeserializeOwned>(&self, req: Request<Vec<u8>>) -> Result<T> {
        let (resp, deadline) = self.send_until(req, false).await?;
        let status = resp.status();
        let protobuf = is_protobuf(resp.headers());
        let body = self.read_body(resp, deadline).await?;
        if !status.is_success() {
            return Err(Error::Api(Box::new(status_from_body(status, &body))));
        }
        decode_body(&body, protobuf)
    }

    /// Sends a request and returns the text body.
    pub async fn request_text(&self, req: Request<Vec<u8>>) -> Result<String> {
        let (_, body) = self.request_bytes(req).await?;
        String::from_utf8(body.to_vec()).map_err(|e| Error::Body(Box::new(e)))
    }

    /// Sends a request and streams the response body (e.g. a watch). An error status
    /// becomes [`Error::Api`] before streaming starts. [`Config::timeout`] bounds the
    /// wait for the response headers (and an error body), not the stream: a watch ends
    /// with its own `timeoutSeconds`.
    pub async fn request_stream(
        &self,
        req: Request<Vec<u8>>,
    ) -> Result<impl Stream<Item = Result<Bytes>> + Send + use<>> {
        Ok(self.request_stream_typed(req).await?.1)
    }

    /// [`Client::request_stream`], also telling whether the server answered with
    /// Kubernetes protobuf (a length-framed watch stream).
    pub(crate) async fn request_stream_typed(
        &self,
        req: Request<Vec<u8>>,
    ) -> Result<(bool, impl Stream<Item = Result<Bytes>> + Send + use<>)> {
        let (resp, deadline) = self.send_until(req, false).await?;
        let protobuf = is_protobuf(resp.headers());
        let status = resp.status();
        if !status.is_success() {
            let body = self.read_body(resp, deadline).await?;
            return Err(Error::Api(Box::new(status_from_body(status, &body))));
        }
        Ok((protobuf, body_chunks(resp.into_body())))
    }
}

/// A future boxed where it is built (see [`Client::send_until`]).
type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The data frames of a streamed body, boxed here for the same reason as
/// [`Client::send_until`].
#[inline(never)]
fn body_chunks(body: Incoming) -> Pin<Box<dyn Stream<Item = Result<Bytes>> + Send>> {
    Box::pin(futures::stream::unfold(body, |mut body| async move {
        loop {
            match body.frame().await {
                None => return None,
                Some(Err(e)) => return Some((Err(Error::Body(Box::new(e))), body)),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        return Some((Ok(data), body));
                    }
                }
            }
        }
    }))
}

/// A type name without module paths, for error messages:
/// `kubewright_core::object::ObjectList<k8s_openapi::api::core::v1::Pod>` ->
/// `ObjectList<Pod>`.
fn short_type_name(full: &str) -> String {
    let mut out = String::with_capacity(full.len());
    let mut segment_start = 0;
    let mut chars = full.chars().peekable();
    while let Some(c) = chars.next() {
        if c == ':' && chars.peek() == Some(&':') {
            chars.next();
            out.truncate(segment_start);
            continue;
        }
        out.push(c);
        if matches!(c, '<' | '>' | ',' | ' ' | '(' | ')' | '[' | ']' | '&' | ';') {
            segment_start = out.len();
        }
    }
    out
}

/// Reads a whole body into one buffer, copying each frame as it arrives and releasing
/// it: a large list is held once while it is read, not as its frames plus a copy of
/// them (which doubled the memory a big initial list touches). A body of one frame is
/// returned without a copy.
async fn collect_body<B>(mut body: B) -> std::result::Result<Bytes, B::Error>
where
    B: http_body::Body<Data = Bytes> + Unpin,
{
    let mut buf = bytes::BytesMut::new();
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame?.into_data() else {
            continue; // trailers
        };
        if buf.is_empty() && body.is_end_stream() {
            return Ok(data);
        }
        if buf.capacity() == 0 {
            // Content-Length when the server sent one, else grow as the frames come.
            let hint = body.size_hint();
            let expected = hint
                .exact()
                .unwrap_or(hint.lower())
                .saturating_add(data.len() as u64);
            buf.reserve(
                usize::try_from(expected.min(MAX_PRESIZE))
                    .unwrap_or(0)
                    .max(data.len()),
            );
        }
        buf.extend_from_slice(&data);
    }
    Ok(buf.freeze())
}

/// The most a body's announced length reserves up front (more grows as it arrives).
const MAX_PRESIZE: u64 = 256 << 20;

/// Whether waiting `wait` before a retry still leaves time before `deadline`.
fn fits(deadline: Option<Instant>, wait: Duration) -> bool {
    deadline.is_none_or(|d| Instant::now() + wait < d)
}

/// Whether a response is Kubernetes protobuf (`application/vnd.kubernetes.protobuf`,
/// `;stream=watch` for watches).
pub(crate) fn is_protobuf(h: &http::HeaderMap) -> bool {
    h.get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with(kubewright_proto::MEDIA_TYPE)
        })
}

/// Decodes a whole response body as JSON or Kubernetes protobuf.
pub(crate) fn decode_body<T: DeserializeOwned>(body: &[u8], protobuf: bool) -> Result<T> {
    let what = || short_type_name(std::any::type_name::<T>());
    if protobuf {
        return kubewright_proto::from_slice(body).map_err(|source| Error::DecodeProtobuf {
            what: what(),
            source,
        });
    }
    serde_json::from_slice(body).map_err(|source| Error::Decode {
        what: what(),
        source,
    })
}

fn is_gzip(h: &http::HeaderMap) -> bool {
    h.get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("gzip"))
}

/// How many times its compressed size a gzipped body may grow to, past
/// [`GUNZIP_FLOOR`]: JSON lists compress 10 to 20 times, a gzip bomb a thousand.
const GUNZIP_RATIO: usize = 100;
/// A gzipped body may always unpack to this much.
const GUNZIP_FLOOR: usize = 64 << 20;

/// Unpacks a gzipped body, refusing one that would grow past `GUNZIP_RATIO` times its
/// size (and `GUNZIP_FLOOR`): whoever answers (a pod behind `Api::proxy`, say) chooses
/// `Content-Encoding`.
fn gunzip(b: &[u8]) -> Result<Bytes> {
    gunzip_within(b, GUNZIP_FLOOR)
}

fn gunzip_within(b: &[u8], floor: usize) -> Result<Bytes> {
    let limit = b.len().saturating_mul(GUNZIP_RATIO).max(floor);
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(b)
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| Error::Body(Box::new(e)))?;
    if out.len() > limit {
        return Err(Error::Body(Box::new(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "a gzipped body of {} bytes unpacks to more than {limit} bytes",
                b.len()
            ),
        ))));
    }
    Ok(Bytes::from(out))
}

/// The Status of an error response: decoded when the body is one, else synthesised
/// from the HTTP code (text/plain 429s, unknown-path 404s, proxies).
pub fn status_from_body(code: StatusCode, body: &[u8]) -> Status {
    if body.starts_with(kubewright_proto::MAGIC)
        && let Ok(s) = kubewright_proto::from_slice::<Status>(body)
    {
        return s;
    }
    if let Ok(mut s) = serde_json::from_slice::<Status>(body)
        && (s.kind == "Status" || !s.reason.is_empty() || s.code != 0)
    {
        if s.code == 0 {
            s.code = code.as_u16();
        }
        if s.reason.is_empty() {
            s.reason = Status::from_http(code.as_u16(), "").reason;
        }
        return s;
    }
    Status::from_http(code.as_u16(), &String::from_utf8_lossy(body))
}

/// Extracts the text of a `Warning: 299 - "text"` header.
pub fn parse_warning(h: &str) -> String {
    let rest = h.trim();
    let rest = rest
        .split_once(' ')
        .map(|(_, r)| r)
        .unwrap_or(rest)
        .trim_start();
    let rest = rest.split_once(' ').map(|(_, r)| r).unwrap_or(rest).trim();
    let unquoted = rest
        .strip_prefix('"')
        .and_then(|r| r.rsplit_once('"').map(|(t, _)| t))
        .unwrap_or(rest);
    unquoted.replace("\\\"", "\"").replace("\\\\", "\\")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gunzip_refuses_a_bomb_and_keeps_ordinary_bodies() {
        use std::io::Write;
        let pack = |data: &[u8]| {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
            e.write_all(data).unwrap();
            e.finish().unwrap()
        };
        // With a 1 MiB floor (64 MiB in use): 4 MiB of zeros pack into ~4 KiB, a
        // thousand times; refused.
        let bomb = pack(&vec![0u8; 4 << 20]);
        assert!(bomb.len() < 64 << 10, "{}", bomb.len());
        let err = gunzip_within(&bomb, 1 << 20).unwrap_err().to_string();
        assert!(err.contains("unpacks to more than"), "{err}");
        // Within the floor, any ratio is fine; past it, up to 100 times.
        assert_eq!(gunzip_within(&bomb, 8 << 20).unwrap().len(), 4 << 20);
        let mut x = 0x2545_f491_4f6c_dd1d_u64;
        let noise: Vec<u8> = (0..(2u32 << 20))
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        assert_eq!(gunzip_within(&pack(&noise), 0).unwrap().len(), 2 << 20);
    }

    type Frames = http_body_util::StreamBody<
        futures::stream::Iter<
            std::vec::IntoIter<
                std::result::Result<http_body::Frame<Bytes>, std::convert::Infallible>,
            >,
        >,
    >;

    /// A body of these data frames, then trailers.
    fn frames(parts: &[&'static [u8]]) -> Frames {
        let mut v: Vec<_> = parts
            .iter()
            .map(|p| Ok(http_body::Frame::data(Bytes::from_static(p))))
            .collect();
        v.push(Ok(http_body::Frame::trailers(http::HeaderMap::new())));
        http_body_util::StreamBody::new(futures::stream::iter(v))
    }

    #[tokio::test]
    async fn bodies_are_collected_frame_by_frame() {
        let body = collect_body(frames(&[b"{\"a\":", b"", b"[1,2", b"]}"])).await;
        assert_eq!(body.ok().as_deref(), Some(&b"{\"a\":[1,2]}"[..]));
        let one = collect_body(Full::new(Bytes::from_static(b"whole"))).await;
        assert_eq!(one.ok().as_deref(), Some(&b"whole"[..]));
        let empty = collect_body(frames(&[])).await;
        assert_eq!(empty.ok().as_deref(), Some(&b""[..]));
    }

    #[test]
    fn short_type_names() {
        assert_eq!(
            short_type_name("kubewright_core::object::ObjectList<k8s_openapi::api::core::v1::Pod>"),
            "ObjectList<Pod>"
        );
        assert_eq!(short_type_name("k8s_openapi::api::core::v1::Pod"), "Pod");
        assert_eq!(
            short_type_name("kubewright_client::skip::WithoutManagedFields<a::B<c::D, e::F>>"),
            "WithoutManagedFields<B<D, F>>"
        );
        assert_eq!(short_type_name("serde_json::value::Value"), "Value");
    }

    #[test]
    fn warnings_and_statuses() {
        assert_eq!(
            parse_warning(r#"299 - "unknown field \"spec.foo\"""#),
            r#"unknown field "spec.foo""#
        );
        let s = status_from_body(
            StatusCode::TOO_MANY_REQUESTS,
            b"Too many requests, please try again later.\n",
        );
        assert!(s.is_too_many_requests());
        let s = status_from_body(StatusCode::NOT_FOUND, br#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"x"}"#);
        assert!(s.is_not_found());
        let s = status_from_body(StatusCode::INTERNAL_SERVER_ERROR, b"{\"truncated");
        assert_eq!(s.code, 500);
        let s = status_from_body(StatusCode::BAD_GATEWAY, b"<html>bad gateway</html>");
        assert_eq!(s.code, 502);
    }
}
