//! Admission and conversion webhooks: the server side of what controller-runtime's
//! `webhook` package does.
//!
//! A [`WebhookServer`] serves validating and mutating admission handlers and CRD
//! conversion handlers over HTTPS (rustls; the certificate is re-read from disk when it
//! changes). Run it on its own ([`WebhookServer::run`]) or under a
//! [`Manager`](crate::Manager) ([`ManagerBuilder::webhook_server`](crate::manager::ManagerBuilder::webhook_server)),
//! which adds its readiness check and metrics and shuts it down gracefully.
//!
//! - Validating handlers get an [`AdmissionRequest<K>`] with the objects decoded and
//!   return a [`Verdict`].
//! - Mutating handlers return a [`Mutation<K>`]: the changed object, from which the server
//!   computes the JSON patch the API server applies (only the handler's changes: fields
//!   `K` does not know are left alone).
//! - Conversion handlers turn one object into the desired `apiVersion`.
//! - [`WebhookServer::validating_configuration`], [`WebhookServer::mutating_configuration`]
//!   and [`conversion`] generate the objects that register them with the API server.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use kubewright_runtime::webhook::{Mutation, Verdict, WebhookServer};
//! use k8s_openapi::api::core::v1::ConfigMap;
//!
//! let server = WebhookServer::builder("0.0.0.0:9443".parse()?)
//!     .tls_files("/certs/tls.crt", "/certs/tls.key")
//!     .validate("/validate-configmap", |req: kubewright_runtime::webhook::AdmissionRequest<ConfigMap>| async move {
//!         match req.object.as_ref().and_then(|cm| cm.data.as_ref()).map(|d| d.contains_key("forbidden")) {
//!             Some(true) => Verdict::deny("key \"forbidden\" is not allowed"),
//!             _ => Verdict::allow(),
//!         }
//!     })
//!     .mutate("/default-configmap", |req: kubewright_runtime::webhook::AdmissionRequest<ConfigMap>| async move {
//!         let mut cm = req.object.unwrap_or_default();
//!         cm.data.get_or_insert_default().entry("owner".into()).or_insert("team-a".into());
//!         Mutation::patch(cm)
//!     })
//!     .build()?;
//! server.run(tokio_util::sync::CancellationToken::new()).await?;
//! # Ok(()) }
//! ```

mod config;
mod review;
mod tls;

pub use config::{HookOptions, WebhookClient, conversion};
pub use review::{
    AdmissionResponse, AdmissionReview, ConversionRequest, ConversionResponse, ConversionReview,
    GroupVersionKind, GroupVersionResource, Operation, RawAdmissionRequest, UserInfo,
};

use base64::Engine;
use bytes::Bytes;
use futures::future::BoxFuture;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use kubewright_core::{Resource, Status, StatusCause, StatusDetails};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use prometheus_client::registry::Unit;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// The largest request body accepted: controller-runtime's 7 MiB (an AdmissionReview
/// carries at most two objects of the API server's 3 MiB request limit, plus less than
/// 1 MiB of the rest).
pub const MAX_BODY: usize = 7 << 20;
/// How long in-flight requests may take to finish at shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Bounds of a [`WebhookServer`] against slow, idle or greedy peers; see
/// [`WebhookServerBuilder::limits`]. The defaults suit a webhook the API server calls.
#[derive(Clone, Debug)]
pub struct WebhookLimits {
    /// Time a peer has to send a request's headers, counted from when the server waits
    /// for them (so it also closes an HTTP/1 keep-alive connection idle this long) and
    /// bounding the TLS handshake. Default 10 s.
    pub header_read_timeout: Duration,
    /// A connection with no request in flight for this long is closed, including one
    /// that never sends a byte. Default 90 s (kube-apiserver's and Go's idle timeout).
    pub idle_timeout: Duration,
    /// Time a peer has to send a request's body once its headers came. Default 30 s.
    pub body_read_timeout: Duration,
    /// Time a handler may take; kube-apiserver gives a webhook at most 30 s
    /// (`timeoutSeconds`). One that takes longer is answered with a denial (code 500).
    /// Default 30 s.
    pub handler_timeout: Duration,
    /// Connections open at once; more wait in the listen backlog. Default 1,024.
    pub max_connections: usize,
    /// Requests read and handled at once, over all connections: with
    /// [`MAX_BODY`], what bounds the memory of bodies in flight (64 × 7 MiB). More wait
    /// for a seat. Default 64.
    pub max_concurrent_requests: usize,
    /// HTTP/2 streams per connection. Default 32.
    pub max_concurrent_streams: u32,
}

impl Default for WebhookLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(90),
            body_read_timeout: Duration::from_secs(30),
            handler_timeout: Duration::from_secs(30),
            max_connections: 1024,
            max_concurrent_requests: 64,
            max_concurrent_streams: 32,
        }
    }
}

/// Errors of the webhook server.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The certificate or key is missing or invalid.
    #[error("webhook TLS: {0}")]
    Tls(String),
    /// Two handlers for one path, or a path that does not start with `/`.
    #[error("webhook path {0:?} is invalid or already registered")]
    Path(String),
}

/// An admission request with its objects decoded as `K`.
#[derive(Clone, Debug)]
pub struct AdmissionRequest<K> {
    /// The request's uid.
    pub uid: String,
    /// The object's kind.
    pub kind: GroupVersionKind,
    /// The resource.
    pub resource: GroupVersionResource,
    /// The subresource, if any.
    pub sub_resource: Option<String>,
    /// The object's name (empty on a create with `generateName`).
    pub name: String,
    /// The namespace.
    pub namespace: Option<String>,
    /// The operation.
    pub operation: Operation,
    /// Who asked.
    pub user_info: UserInfo,
    /// The new object (create, update).
    pub object: Option<K>,
    /// The existing object (update, delete).
    pub old_object: Option<K>,
    /// A dry run: a handler must not have side effects.
    pub dry_run: bool,
    /// The operation's options.
    pub options: Option<Value>,
}

/// A validating decision (also the denial of a mutating handler).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    allowed: bool,
    code: u16,
    reason: String,
    message: String,
    warnings: Vec<String>,
}

impl Verdict {
    /// Admits the request.
    pub fn allow() -> Self {
        Self {
            allowed: true,
            code: 200,
            reason: String::new(),
            message: String::new(),
            warnings: Vec::new(),
        }
    }
    /// Denies the request: 403 Forbidden with `message`, as controller-runtime's
    /// `Denied` does. The client sees `admission webhook "name" denied the request: message`.
    pub fn deny(message: impl Into<String>) -> Self {
        Self::deny_with(403, "Forbidden", message)
    }
    /// Denies with another code and reason (e.g. 422 `Invalid`).
    pub fn deny_with(code: u16, reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            allowed: false,
            code,
            reason: reason.into(),
            message: message.into(),
            warnings: Vec::new(),
        }
    }
    /// Adds a warning, shown to the client (kubectl prints `Warning: …`).
    #[must_use]
    pub fn warning(mut self, text: impl Into<String>) -> Self {
        self.warnings.push(text.into());
        self
    }
    /// Whether the request is admitted.
    pub fn is_allowed(&self) -> bool {
        self.allowed
    }

    fn response(self, uid: &str) -> AdmissionResponse {
        AdmissionResponse {
            uid: uid.to_string(),
            allowed: self.allowed,
            status: (!self.allowed).then(|| Status {
                status: "Failure".into(),
                message: self.message,
                reason: self.reason,
                code: self.code,
                ..Default::default()
            }),
            warnings: self.warnings,
            ..Default::default()
        }
    }
}

/// A mutating decision: admit, admit with changes, or deny.
#[derive(Clone, Debug)]
pub struct Mutation<K> {
    verdict: Verdict,
    object: Option<K>,
}

impl<K> Mutation<K> {
    /// Admits the request with `object` as the handler changed it.
    pub fn patch(object: K) -> Self {
        Self {
            verdict: Verdict::allow(),
            object: Some(object),
        }
    }
    /// Admits the request unchanged.
    pub fn allow() -> Self {
        Self {
            verdict: Verdict::allow(),
            object: None,
        }
    }
    /// Denies the request (403).
    pub fn deny(message: impl Into<String>) -> Self {
        Self {
            verdict: Verdict::deny(message),
            object: None,
        }
    }
    /// Denies with a verdict of your own.
    pub fn denied(verdict: Verdict) -> Self {
        Self {
            verdict,
            object: None,
        }
    }
    /// Adds a warning.
    #[must_use]
    pub fn warning(mut self, text: impl Into<String>) -> Self {
        self.verdict = self.verdict.warning(text);
        self
    }
}

/// One endpoint: takes the request body, returns status and JSON body.
trait Endpoint: Send + Sync {
    fn call(&self, body: Bytes) -> BoxFuture<'static, (StatusCode, Vec<u8>, Outcome)>;
    /// The answer to a request that never reached the handler (no body, too large, the
    /// wrong content type, unreadable): `body` is what was read of it, if anything.
    fn reject(&self, code: u16, message: &str, body: &[u8]) -> (StatusCode, Vec<u8>);
    /// Whether a handler's panic or timeout is answered in the review (admission) or
    /// as an HTTP error (conversion).
    fn failed(&self, message: &str, body: &[u8]) -> (StatusCode, Vec<u8>) {
        self.reject(500, message, body)
    }
}

/// How a request ended, for metrics.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Allowed,
    Denied,
    Converted,
    Failed,
}

/// A registered admission webhook, for the generated configurations.
#[derive(Clone, Debug)]
pub(crate) struct Hook {
    pub path: String,
    pub mutating: bool,
    pub resource: kubewright_core::ApiResource,
    pub options: HookOptions,
}

/// Builds a [`WebhookServer`].
pub struct WebhookServerBuilder {
    addr: SocketAddr,
    limits: WebhookLimits,
    tls: Option<(PathBuf, PathBuf)>,
    plain_http: bool,
    routes: HashMap<String, Arc<dyn Endpoint>>,
    hooks: Vec<Hook>,
    error: Option<WebhookError>,
}

impl std::fmt::Debug for WebhookServerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookServerBuilder")
            .field("addr", &self.addr)
            .field("paths", &self.routes.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl WebhookServerBuilder {
    /// Serves HTTPS with this PEM certificate chain and key, re-read when they change.
    #[must_use]
    pub fn tls_files(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.tls = Some((cert.into(), key.into()));
        self
    }

    /// Bounds against slow, idle and greedy peers ([`WebhookLimits::default`] otherwise).
    #[must_use]
    pub fn limits(mut self, limits: WebhookLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Serves plain HTTP. The API server calls webhooks only over HTTPS: this is for a
    /// TLS-terminating proxy in front, or for tests.
    #[must_use]
    pub fn plain_http(mut self) -> Self {
        self.plain_http = true;
        self
    }

    fn route(mut self, path: &str, endpoint: Arc<dyn Endpoint>) -> Self {
        if !path.starts_with('/') || self.routes.contains_key(path) {
            self.error
                .get_or_insert(WebhookError::Path(path.to_string()));
            return self;
        }
        self.routes.insert(path.to_string(), endpoint);
        self
    }

    /// A validating handler for `K` at `path` (create and update by default).
    #[must_use]
    pub fn validate<K, F, Fut>(self, path: &str, handler: F) -> Self
    where
        K: Resource<DynamicType = ()> + DeserializeOwned + Send + 'static,
        F: Fn(AdmissionRequest<K>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Verdict> + Send + 'static,
    {
        self.validate_with(path, HookOptions::default(), handler)
    }

    /// [`validate`](Self::validate) with options for the generated configuration.
    #[must_use]
    pub fn validate_with<K, F, Fut>(mut self, path: &str, options: HookOptions, handler: F) -> Self
    where
        K: Resource<DynamicType = ()> + DeserializeOwned + Send + 'static,
        F: Fn(AdmissionRequest<K>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Verdict> + Send + 'static,
    {
        self.hooks.push(Hook {
            path: path.to_string(),
            mutating: false,
            resource: kubewright_core::ApiResource::erase::<K>(&()),
            options,
        });
        let handler = Arc::new(handler);
        self.route(
            path,
            Arc::new(AdmissionEndpoint::<K, _>::new(move |req| {
                let handler = handler.clone();
                async move {
                    let verdict = handler(req).await;
                    (verdict, None::<(Value, Value)>)
                }
            })),
        )
    }

    /// A mutating handler for `K` at `path` (create and update by default).
    #[must_use]
    pub fn mutate<K, F, Fut>(self, path: &str, handler: F) -> Self
    where
        K: Resource<DynamicType = ()> + DeserializeOwned + Serialize + Send + Sync + 'static,
        F: Fn(AdmissionRequest<K>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Mutation<K>> + Send + 'static,
    {
        self.mutate_with(path, HookOptions::default(), handler)
    }

    /// [`mutate`](Self::mutate) with options for the generated configuration.
    #[must_use]
    pub fn mutate_with<K, F, Fut>(mut self, path: &str, options: HookOptions, handler: F) -> Self
    where
        K: Resource<DynamicType = ()> + DeserializeOwned + Serialize + Send + Sync + 'static,
        F: Fn(AdmissionRequest<K>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Mutation<K>> + Send + 'static,
    {
        self.hooks.push(Hook {
            path: path.to_string(),
            mutating: true,
            resource: kubewright_core::ApiResource::erase::<K>(&()),
            options,
        });
        let handler = Arc::new(handler);
        self.route(
            path,
            Arc::new(AdmissionEndpoint::<K, _>::new(
                move |req: AdmissionRequest<K>| {
                    let handler = handler.clone();
                    async move {
                        let before = req.object.as_ref().map(serde_json::to_value);
                        let mutation = handler(req).await;
                        let change =
                            match (before, mutation.object.as_ref().map(serde_json::to_value)) {
                                (Some(Ok(before)), Some(Ok(after))) => Some((before, after)),
                                (None, Some(Ok(after))) => Some((Value::Null, after)),
                                _ => None,
                            };
                        (mutation.verdict, change)
                    }
                },
            )),
        )
    }

    /// A CRD conversion handler at `path`: converts one object (any served version) to
    /// `desired_api_version`; the message of an error is returned to the API server.
    #[must_use]
    pub fn convert<F>(self, path: &str, converter: F) -> Self
    where
        F: Fn(Value, &str) -> Result<Value, String> + Send + Sync + 'static,
    {
        self.route(path, Arc::new(ConversionEndpoint(converter)))
    }

    /// Serves one request body at `path` as the server does once it has read it (the
    /// fuzz targets' way in); `None` when no handler is there.
    #[doc(hidden)]
    pub async fn call_for_fuzzing(&self, path: &str, body: &[u8]) -> Option<(u16, Vec<u8>)> {
        let endpoint = self.routes.get(path)?;
        let (status, out, _) = endpoint.call(Bytes::copy_from_slice(body)).await;
        Some((status.as_u16(), out))
    }

    /// Binds the address and loads the certificate (errors here, not at run time).
    pub fn build(self) -> Result<WebhookServer, WebhookError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let tls = match (&self.tls, self.plain_http) {
            (Some((cert, key)), _) => Some(tls_config(cert.clone(), key.clone())?),
            (None, true) => None,
            (None, false) => {
                return Err(WebhookError::Tls(
                    "no certificate: call tls_files(cert, key), or plain_http() behind a TLS proxy"
                        .into(),
                ));
            }
        };
        let listener = std::net::TcpListener::bind(self.addr)
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .map_err(|source| WebhookError::Bind {
                addr: self.addr,
                source,
            })?;
        let local = listener.local_addr().map_err(|source| WebhookError::Bind {
            addr: self.addr,
            source,
        })?;
        Ok(WebhookServer {
            listener,
            local,
            limits: self.limits,
            tls,
            routes: Arc::new(self.routes),
            hooks: self.hooks,
            metrics: None,
            serving: Arc::new(AtomicBool::new(false)),
        })
    }
}

fn tls_config(cert: PathBuf, key: PathBuf) -> Result<Arc<rustls::ServerConfig>, WebhookError> {
    #[allow(
        deprecated,
        reason = "ring by choice: rustls 0.23.48 deprecates its provider for lacking post-quantum key exchange, which aws-lc-rs has at the cost of a C and cmake build"
    )]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let resolver = tls::ReloadingCert::new(cert, key, provider.clone())?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| WebhookError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(resolver));
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Serves admission and conversion webhooks; see the [module docs](self).
pub struct WebhookServer {
    listener: std::net::TcpListener,
    local: SocketAddr,
    limits: WebhookLimits,
    tls: Option<Arc<rustls::ServerConfig>>,
    routes: Routes,
    hooks: Vec<Hook>,
    metrics: Option<WebhookMetrics>,
    serving: Arc<AtomicBool>,
}

impl std::fmt::Debug for WebhookServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookServer")
            .field("addr", &self.local)
            .field("tls", &self.tls.is_some())
            .field("paths", &self.routes.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl WebhookServer {
    /// A builder listening on `addr` (port 0 picks a free port).
    pub fn builder(addr: SocketAddr) -> WebhookServerBuilder {
        WebhookServerBuilder {
            addr,
            limits: WebhookLimits::default(),
            tls: None,
            plain_http: false,
            routes: HashMap::new(),
            hooks: Vec::new(),
            error: None,
        }
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Registers the webhook metrics in `registry` and records into them:
    /// `controller_runtime_webhook_requests_total{webhook,code}`,
    /// `controller_runtime_webhook_latency_seconds{webhook}`,
    /// `controller_runtime_webhook_requests_in_flight{webhook}`, and
    /// `kubewright_webhook_rejections_total{webhook}` (admission requests denied).
    #[must_use]
    pub fn with_metrics(mut self, registry: &mut Registry) -> Self {
        self.metrics = Some(WebhookMetrics::register(registry));
        self
    }

    /// A readiness check: ready once the server accepts connections.
    pub fn ready_check(&self) -> impl Fn() -> Result<(), String> + Send + Sync + 'static {
        let serving = self.serving.clone();
        move || {
            if serving.load(Ordering::Acquire) {
                Ok(())
            } else {
                Err("the webhook server is not serving".into())
            }
        }
    }

    /// Serves until `cancel` fires; then stops accepting and gives requests in flight up
    /// to 10 seconds to finish.
    #[inline(never)]
    #[allow(clippy::manual_async_fn, reason = "boxed where it is built")]
    pub fn run(
        self,
        cancel: CancellationToken,
    ) -> impl std::future::Future<Output = Result<(), WebhookError>> + Send + 'static {
        // Boxed where it is built: an `async fn`'s body (and all it awaits) is otherwise
        // compiled again in every crate that awaits it.
        let boxed: std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<(), WebhookError>> + Send + 'static>,
        > = Box::pin(self.run_inner(cancel));
        boxed
    }

    async fn run_inner(self, cancel: CancellationToken) -> Result<(), WebhookError> {
        let listener = tokio::net::TcpListener::from_std(self.listener).map_err(|source| {
            WebhookError::Bind {
                addr: self.local,
                source,
            }
        })?;
        let acceptor = self.tls.map(tokio_rustls::TlsAcceptor::from);
        let shared = Arc::new(Serving {
            routes: self.routes,
            metrics: self.metrics,
            seats: tokio::sync::Semaphore::new(self.limits.max_concurrent_requests.max(1)),
            limits: self.limits.clone(),
        });
        let connection_slots = Arc::new(tokio::sync::Semaphore::new(
            self.limits.max_connections.max(1),
        ));
        self.serving.store(true, Ordering::Release);
        tracing::info!(addr = %self.local, tls = acceptor.is_some(), "serving webhooks");
        let mut connections = JoinSet::new();
        loop {
            // A connection slot first: past the limit, peers wait in the backlog.
            let slot = tokio::select! {
                () = cancel.cancelled() => break,
                s = connection_slots.clone().acquire_owned() => match s {
                    Ok(s) => s,
                    Err(_) => break,
                },
                Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            };
            let accepted = loop {
                tokio::select! {
                    () = cancel.cancelled() => break None,
                    a = listener.accept() => break Some(a),
                    Some(_) = connections.join_next(), if !connections.is_empty() => {}
                }
            };
            let Some(accepted) = accepted else { break };
            let (tcp, peer) = match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors, say: wait instead of spinning.
                    tracing::warn!(error = %e, "accepting a webhook connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let (shared, acceptor, cancel) = (shared.clone(), acceptor.clone(), cancel.clone());
            let handshake = shared.limits.header_read_timeout;
            connections.spawn(async move {
                let _slot = slot;
                match acceptor {
                    Some(acceptor) => {
                        match tokio::time::timeout(handshake, acceptor.accept(tcp)).await {
                            Ok(Ok(tls)) => serve_connection(tls, shared, cancel).await,
                            Ok(Err(e)) => {
                                tracing::debug!(%peer, "webhook TLS handshake failed: {e}");
                            }
                            Err(_) => tracing::debug!(%peer, "webhook TLS handshake timed out"),
                        }
                    }
                    None => serve_connection(tcp, shared, cancel).await,
                }
            });
        }
        self.serving.store(false, Ordering::Release);
        let drain = async { while connections.join_next().await.is_some() {} };
        if tokio::time::timeout(SHUTDOWN_GRACE, drain).await.is_err() {
            tracing::warn!("webhook requests still running after the shutdown grace period");
        }
        Ok(())
    }

    /// The registered admission webhooks, for the configuration generators.
    pub(crate) fn hooks(&self) -> &[Hook] {
        &self.hooks
    }
}

type Routes = Arc<HashMap<String, Arc<dyn Endpoint>>>;

/// What every connection of a running server shares.
struct Serving {
    routes: Routes,
    metrics: Option<WebhookMetrics>,
    /// Requests read and handled at once ([`WebhookLimits::max_concurrent_requests`]).
    seats: tokio::sync::Semaphore,
    limits: WebhookLimits,
}

/// Requests in flight on one connection, and when the last one ended.
struct Activity {
    in_flight: std::sync::atomic::AtomicUsize,
    idle_since: std::sync::Mutex<tokio::time::Instant>,
}

/// One request in flight on a connection, until dropped.
struct Busy(Arc<Activity>);

impl Busy {
    fn start(activity: &Arc<Activity>) -> Self {
        activity.in_flight.fetch_add(1, Ordering::AcqRel);
        Self(activity.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        *self.0.idle_since.lock().unwrap_or_else(|e| e.into_inner()) = tokio::time::Instant::now();
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

async fn serve_connection<I>(io: I, shared: Arc<Serving>, cancel: CancellationToken)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let activity = Arc::new(Activity {
        in_flight: std::sync::atomic::AtomicUsize::new(0),
        idle_since: std::sync::Mutex::new(tokio::time::Instant::now()),
    });
    let per_request = shared.clone();
    let requests = activity.clone();
    let service = service_fn(move |req: Request<Incoming>| {
        let (shared, busy) = (per_request.clone(), Busy::start(&requests));
        async move {
            let resp = handle(req, &shared).await;
            drop(busy);
            Ok::<_, Infallible>(resp)
        }
    });
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(shared.limits.header_read_timeout);
    builder
        .http2()
        .timer(hyper_util::rt::TokioTimer::new())
        .max_concurrent_streams(shared.limits.max_concurrent_streams)
        .keep_alive_interval(Some(Duration::from_secs(30)))
        .keep_alive_timeout(Duration::from_secs(10));
    let conn = builder.serve_connection(TokioIo::new(io), service);
    let mut conn = std::pin::pin!(conn);
    let idle_timeout = shared.limits.idle_timeout;
    // Closes the connection once no request has been in flight for the idle timeout
    // (hyper bounds a started request's headers, not a connection that sends nothing).
    let idle = async {
        loop {
            let since = *activity
                .idle_since
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            let deadline = since + idle_timeout;
            if activity.in_flight.load(Ordering::Acquire) == 0
                && tokio::time::Instant::now() >= deadline
            {
                return;
            }
            let next = if activity.in_flight.load(Ordering::Acquire) == 0 {
                deadline
            } else {
                tokio::time::Instant::now() + idle_timeout
            };
            tokio::time::sleep_until(next).await;
        }
    };
    tokio::select! {
        r = conn.as_mut() => {
            if let Err(e) = r {
                tracing::debug!("webhook connection ended: {e}");
            }
        }
        () = idle => tracing::debug!("webhook connection idle: closed"),
        () = cancel.cancelled() => {
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(SHUTDOWN_GRACE, conn).await;
        }
    }
}

/// One request in `controller_runtime_webhook_requests_in_flight`, until dropped (also
/// when the peer goes away mid-request and hyper drops the request's future).
struct InFlight(Option<Gauge>);

impl InFlight {
    fn start(gauge: Option<Gauge>) -> Self {
        if let Some(g) = &gauge {
            g.inc();
        }
        Self(gauge)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(g) = &self.0 {
            g.dec();
        }
    }
}

async fn handle(req: Request<Incoming>, shared: &Serving) -> Response<Full<Bytes>> {
    let path = req.uri().path().to_string();
    let Some(endpoint) = shared.routes.get(&path) else {
        return plain(StatusCode::NOT_FOUND, format!("no webhook at {path}\n"));
    };
    if req.method() != Method::POST {
        return plain(
            StatusCode::METHOD_NOT_ALLOWED,
            "webhooks accept POST only\n".into(),
        );
    }
    let metrics = shared.metrics.as_ref();
    let Ok(_seat) = shared.seats.acquire().await else {
        return plain(StatusCode::SERVICE_UNAVAILABLE, "shutting down\n".into());
    };
    let _in_flight = InFlight::start(metrics.map(|m| m.in_flight(&path)));
    let started = Instant::now();
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let json = content_type
        .split(';')
        .next()
        .is_some_and(|t| t.trim() == "application/json");
    let answer = |(status, body): (StatusCode, Vec<u8>)| {
        if let Some(m) = metrics {
            m.observe(&path, status.as_u16(), started.elapsed(), Outcome::Failed);
        }
        json_response(status, body)
    };
    // Answered as controller-runtime answers them: in the review (HTTP 200, not
    // allowed, code 400), which the API server honours whatever the webhook's
    // failurePolicy, where an HTTP error would count as the webhook failing (and
    // `failurePolicy: Ignore` would admit).
    if !json {
        return answer(endpoint.reject(
            400,
            &format!("contentType={content_type}, expected application/json"),
            b"",
        ));
    }
    let read = Limited::new(req.into_body(), MAX_BODY).collect();
    let body = match tokio::time::timeout(shared.limits.body_read_timeout, read).await {
        Ok(Ok(b)) => b.to_bytes(),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
            return answer(endpoint.reject(
                400,
                &format!("request entity is too large; limit is {MAX_BODY} bytes"),
                b"",
            ));
        }
        Ok(Err(e)) => {
            return answer(endpoint.reject(
                400,
                &format!("unable to read the body from the incoming request: {e}"),
                b"",
            ));
        }
        Err(_) => {
            return answer(endpoint.reject(
                400,
                "unable to read the body from the incoming request: timed out",
                b"",
            ));
        }
    };
    if body.is_empty() {
        return answer(endpoint.reject(400, "request body is empty", b""));
    }
    // A handler that panics or hangs still gets an answer in the review.
    let call = std::panic::AssertUnwindSafe(endpoint.call(body.clone()));
    let outcome = tokio::time::timeout(
        shared.limits.handler_timeout,
        futures::FutureExt::catch_unwind(call),
    )
    .await;
    let (status, out, outcome) = match outcome {
        Ok(Ok(done)) => done,
        Ok(Err(panic)) => {
            let why = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into());
            tracing::error!(webhook = %path, panic = %why, "webhook handler panicked");
            let (status, out) =
                endpoint.failed(&format!("the webhook handler panicked: {why}"), &body);
            (status, out, Outcome::Failed)
        }
        Err(_) => {
            tracing::error!(webhook = %path, timeout = ?shared.limits.handler_timeout, "webhook handler timed out");
            let (status, out) = endpoint.failed(
                &format!(
                    "the webhook handler did not answer within {:?}",
                    shared.limits.handler_timeout
                ),
                &body,
            );
            (status, out, Outcome::Failed)
        }
    };
    if let Some(m) = metrics {
        m.observe(&path, status.as_u16(), started.elapsed(), outcome);
    }
    json_response(status, out)
}

fn json_response(status: StatusCode, body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    resp
}

fn plain(status: StatusCode, text: String) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(text)));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

type AdmissionFn<K> = dyn Fn(AdmissionRequest<K>) -> BoxFuture<'static, (Verdict, Option<(Value, Value)>)>
    + Send
    + Sync;

struct AdmissionEndpoint<K, F> {
    handler: Arc<AdmissionFn<K>>,
    _f: std::marker::PhantomData<fn() -> F>,
}

impl<K, F, Fut> AdmissionEndpoint<K, F>
where
    K: Send + 'static,
    F: Fn(AdmissionRequest<K>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = (Verdict, Option<(Value, Value)>)> + Send + 'static,
{
    fn new(f: F) -> Self {
        Self {
            handler: Arc::new(move |req| Box::pin(f(req))),
            _f: std::marker::PhantomData,
        }
    }
}

impl<K, F> Endpoint for AdmissionEndpoint<K, F>
where
    K: DeserializeOwned + Send + 'static,
    F: Send + Sync,
{
    fn reject(&self, code: u16, message: &str, body: &[u8]) -> (StatusCode, Vec<u8>) {
        reject_review(code, message, body)
    }

    fn call(&self, body: Bytes) -> BoxFuture<'static, (StatusCode, Vec<u8>, Outcome)> {
        let handler = self.handler.clone();
        Box::pin(async move {
            let review: AdmissionReview = match serde_json::from_slice(&body) {
                Ok(r) => r,
                Err(e) => {
                    let (status, out) =
                        rejected(&format!("the body is not an AdmissionReview: {e}"), &body);
                    return (status, out, Outcome::Failed);
                }
            };
            let api_version = if review.api_version.is_empty() {
                "admission.k8s.io/v1".to_string()
            } else {
                review.api_version.clone()
            };
            let Some(raw) = review.request else {
                let (status, out) = rejected("the AdmissionReview has no request", &body);
                return (status, out, Outcome::Failed);
            };
            let uid = raw.uid.clone();
            let original = raw.object.clone();
            let (response, outcome) = match decode_request::<K>(raw) {
                Err(message) => (
                    Verdict::deny_with(400, "BadRequest", message).response(&uid),
                    Outcome::Failed,
                ),
                Ok(req) => {
                    let (verdict, change) = handler(req).await;
                    let allowed = verdict.allowed;
                    let mut response = verdict.response(&uid);
                    if allowed && let (Some(original), Some((before, after))) = (original, change) {
                        match patch_for(&original, &before, &after) {
                            Ok(Some(patch)) => {
                                response.patch =
                                    Some(base64::engine::general_purpose::STANDARD.encode(patch));
                                response.patch_type = Some("JSONPatch".into());
                            }
                            Ok(None) => {}
                            Err(message) => {
                                response = Verdict::deny_with(500, "InternalError", message)
                                    .response(&uid);
                            }
                        }
                    }
                    let outcome = if response.allowed {
                        Outcome::Allowed
                    } else {
                        Outcome::Denied
                    };
                    (response, outcome)
                }
            };
            let answer = AdmissionReview {
                api_version,
                kind: "AdmissionReview".into(),
                request: None,
                response: Some(response),
            };
            (
                StatusCode::OK,
                serde_json::to_vec(&answer).unwrap_or_default(),
                outcome,
            )
        })
    }
}

/// An admission request denied in its review (HTTP 200, not allowed, `code`), as
/// controller-runtime answers a request it cannot read: the API server then refuses the
/// request whatever the webhook's failurePolicy.
fn reject_review(code: u16, message: &str, body: &[u8]) -> (StatusCode, Vec<u8>) {
    // The uid and version of the review, when what was read of it says.
    let review: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let uid = review
        .pointer("/request/uid")
        .and_then(Value::as_str)
        .unwrap_or("");
    let api_version = review
        .get("apiVersion")
        .and_then(Value::as_str)
        .filter(|v| v.starts_with("admission.k8s.io/"))
        .unwrap_or("admission.k8s.io/v1");
    let reason = if code == 400 {
        "BadRequest"
    } else {
        "InternalError"
    };
    let answer = AdmissionReview {
        api_version: api_version.to_string(),
        kind: "AdmissionReview".into(),
        request: None,
        response: Some(Verdict::deny_with(code, reason, message).response(uid)),
    };
    (
        StatusCode::OK,
        serde_json::to_vec(&answer).unwrap_or_default(),
    )
}

/// A review that cannot be read, denied in the review.
fn rejected(message: &str, body: &[u8]) -> (StatusCode, Vec<u8>) {
    reject_review(400, message, body)
}

fn decode_request<K: DeserializeOwned>(
    raw: RawAdmissionRequest,
) -> Result<AdmissionRequest<K>, String> {
    let decode = |v: Option<Value>, what: &str| -> Result<Option<K>, String> {
        match v {
            None | Some(Value::Null) => Ok(None),
            Some(v) => serde_json::from_value(v).map(Some).map_err(|e| {
                format!(
                    "the {what} of {} {} cannot be decoded: {e}",
                    raw.kind.kind, raw.name
                )
            }),
        }
    };
    Ok(AdmissionRequest {
        object: decode(raw.object.clone(), "object")?,
        old_object: decode(raw.old_object.clone(), "oldObject")?,
        uid: raw.uid,
        kind: raw.kind,
        resource: raw.resource,
        sub_resource: raw.sub_resource,
        name: raw.name,
        namespace: raw.namespace,
        operation: raw.operation,
        user_info: raw.user_info,
        dry_run: raw.dry_run,
        options: raw.options,
    })
}

/// The JSON patch that makes `original` (as the API server sent it) carry the changes
/// from `before` to `after` (both as `K` serializes them). Applying the typed diff to
/// the original, rather than diffing the original against `after`, leaves alone the
/// fields `K` drops or adds defaults for.
fn patch_for(original: &Value, before: &Value, after: &Value) -> Result<Option<Vec<u8>>, String> {
    let typed = json_patch::diff(before, after);
    if typed.0.is_empty() {
        return Ok(None);
    }
    let mut target = original.clone();
    for op in typed.0 {
        if json_patch::patch(&mut target, std::slice::from_ref(&op)).is_ok() {
            continue;
        }
        // `replace` of a member the original lacks (a default `K` added): add it;
        // `remove` of one it lacks: nothing to do.
        if let json_patch::PatchOperation::Replace(r) = op {
            let add = json_patch::PatchOperation::Add(json_patch::AddOperation {
                path: r.path,
                value: r.value,
            });
            json_patch::patch(&mut target, &[add])
                .map_err(|e| format!("the mutation cannot be expressed as a patch: {e}"))?;
        }
    }
    let patch = json_patch::diff(original, &target);
    if patch.0.is_empty() {
        return Ok(None);
    }
    serde_json::to_vec(&patch)
        .map(Some)
        .map_err(|e| format!("encoding the patch: {e}"))
}

fn error_body(message: &str) -> Vec<u8> {
    serde_json::to_vec(&Status {
        kind: "Status".into(),
        api_version: "v1".into(),
        status: "Failure".into(),
        message: message.to_string(),
        reason: "BadRequest".into(),
        code: 400,
        ..Default::default()
    })
    .unwrap_or_default()
}

struct ConversionEndpoint<F>(F);

impl<F> Endpoint for ConversionEndpoint<F>
where
    F: Fn(Value, &str) -> Result<Value, String> + Send + Sync + 'static,
{
    fn reject(&self, code: u16, message: &str, _body: &[u8]) -> (StatusCode, Vec<u8>) {
        // A conversion has no failure policy: an HTTP error fails it, as it should.
        let status = StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_REQUEST);
        (status, error_body(message))
    }

    fn call(&self, body: Bytes) -> BoxFuture<'static, (StatusCode, Vec<u8>, Outcome)> {
        let review: Result<ConversionReview, _> = serde_json::from_slice(&body);
        let result = match review {
            Err(e) => Err((
                StatusCode::BAD_REQUEST,
                error_body(&format!("the body is not a ConversionReview: {e}")),
            )),
            Ok(ConversionReview { request: None, .. }) => Err((
                StatusCode::BAD_REQUEST,
                error_body("the ConversionReview has no request"),
            )),
            Ok(ConversionReview {
                api_version,
                request: Some(request),
                ..
            }) => Ok((api_version, self.convert(request))),
        };
        Box::pin(async move {
            match result {
                Err((status, body)) => (status, body, Outcome::Failed),
                Ok((api_version, response)) => {
                    let outcome = if response.result.status == "Success" {
                        Outcome::Converted
                    } else {
                        Outcome::Failed
                    };
                    let answer = ConversionReview {
                        api_version: if api_version.is_empty() {
                            "apiextensions.k8s.io/v1".into()
                        } else {
                            api_version
                        },
                        kind: "ConversionReview".into(),
                        request: None,
                        response: Some(response),
                    };
                    (
                        StatusCode::OK,
                        serde_json::to_vec(&answer).unwrap_or_default(),
                        outcome,
                    )
                }
            }
        })
    }
}

impl<F> ConversionEndpoint<F>
where
    F: Fn(Value, &str) -> Result<Value, String>,
{
    fn convert(&self, request: ConversionRequest) -> ConversionResponse {
        let mut converted = Vec::with_capacity(request.objects.len());
        for object in request.objects {
            let from = object
                .get("apiVersion")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let uid = object.pointer("/metadata/uid").cloned();
            let result = if from == request.desired_api_version {
                Ok(object)
            } else {
                (self.0)(object, &request.desired_api_version)
            };
            match result {
                Ok(mut out) => {
                    // The API server refuses converted objects whose apiVersion or
                    // identity differ from what it asked for.
                    if let Some(map) = out.as_object_mut() {
                        map.insert(
                            "apiVersion".into(),
                            Value::String(request.desired_api_version.clone()),
                        );
                    }
                    if out.pointer("/metadata/uid").cloned() != uid {
                        return conversion_failure(
                            request.uid,
                            format!("converting from {from}: the converter changed metadata.uid"),
                        );
                    }
                    converted.push(out);
                }
                Err(message) => {
                    return conversion_failure(
                        request.uid,
                        format!(
                            "converting from {from} to {}: {message}",
                            request.desired_api_version
                        ),
                    );
                }
            }
        }
        ConversionResponse {
            uid: request.uid,
            converted_objects: converted,
            result: Status {
                status: "Success".into(),
                ..Default::default()
            },
        }
    }
}

fn conversion_failure(uid: String, message: String) -> ConversionResponse {
    ConversionResponse {
        uid,
        converted_objects: Vec::new(),
        result: Status {
            status: "Failure".into(),
            message,
            details: Some(StatusDetails {
                causes: vec![StatusCause {
                    reason: "ConversionFailed".into(),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        },
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HookLabels {
    webhook: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CodeLabels {
    webhook: String,
    code: String,
}

/// The webhook server's metrics (see [`WebhookServer::with_metrics`]).
#[derive(Clone, Debug)]
pub struct WebhookMetrics {
    requests: Family<CodeLabels, Counter>,
    latency: Family<HookLabels, Histogram, fn() -> Histogram>,
    in_flight: Family<HookLabels, Gauge>,
    rejections: Family<HookLabels, Counter>,
}

fn latency_histogram() -> Histogram {
    Histogram::new([
        0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    ])
}

impl WebhookMetrics {
    /// Creates and registers the families (once per registry).
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self {
            requests: Family::default(),
            latency: Family::new_with_constructor(latency_histogram),
            in_flight: Family::default(),
            rejections: Family::default(),
        };
        registry.register(
            "controller_runtime_webhook_requests",
            "Total number of admission requests by HTTP status code",
            m.requests.clone(),
        );
        registry.register_with_unit(
            "controller_runtime_webhook_latency",
            "Histogram of the latency of processing admission requests",
            Unit::Seconds,
            m.latency.clone(),
        );
        registry.register(
            "controller_runtime_webhook_requests_in_flight",
            "Current number of admission requests being served",
            m.in_flight.clone(),
        );
        registry.register(
            "kubewright_webhook_rejections",
            "Total number of admission requests denied or failed by the webhook",
            m.rejections.clone(),
        );
        m
    }

    fn in_flight(&self, webhook: &str) -> Gauge {
        self.in_flight
            .get_or_create(&HookLabels {
                webhook: webhook.to_string(),
            })
            .clone()
    }

    fn observe(&self, webhook: &str, code: u16, took: Duration, outcome: Outcome) {
        let hook = HookLabels {
            webhook: webhook.to_string(),
        };
        self.requests
            .get_or_create(&CodeLabels {
                webhook: webhook.to_string(),
                code: code.to_string(),
            })
            .inc();
        self.latency
            .get_or_create(&hook)
            .observe(took.as_secs_f64());
        if matches!(outcome, Outcome::Denied | Outcome::Failed) {
            self.rejections.get_or_create(&hook).inc();
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test
    use super::*;
    use serde_json::json;

    #[test]
    fn patches_carry_only_the_handlers_changes() {
        // The original has a field `K` does not know (`extra`); `K` serializes a default
        // the original lacks (`replicas: 0`).
        let original = json!({"metadata": {"name": "a"}, "spec": {"extra": true}});
        let before = json!({"metadata": {"name": "a"}, "spec": {"replicas": 0}});
        let after =
            json!({"metadata": {"name": "a", "labels": {"x": "y"}}, "spec": {"replicas": 3}});
        let patch = patch_for(&original, &before, &after).unwrap().unwrap();
        let ops: Value = serde_json::from_slice(&patch).unwrap();
        let mut applied = original.clone();
        json_patch::patch(
            &mut applied,
            &serde_json::from_value::<json_patch::Patch>(ops).unwrap(),
        )
        .unwrap();
        assert_eq!(
            applied,
            json!({"metadata": {"name": "a", "labels": {"x": "y"}}, "spec": {"extra": true, "replicas": 3}})
        );
        assert_eq!(patch_for(&original, &before, &before).unwrap(), None);
    }
}
