//! Serving: HTTP/1.1 and HTTP/2 (ALPN over TLS), TLS with a generated CA, bearer-token
//! and client-certificate authentication, gzip, audit ids; the in-process [`TestServer`].

use crate::error::ApiError;
use crate::http::api::{ApiServer, Route, ServerOptions};
use crate::http::{self as h, Body, Req};
use crate::registry::go_time::parse_go_duration;
use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::convert::Infallible;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Errors starting a server.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Binding or I/O failed.
    #[error("server I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// Certificate generation failed.
    #[error("failed to generate TLS certificates: {0}")]
    Cert(#[from] rcgen::Error),
    /// TLS setup failed.
    #[error("TLS configuration error: {0}")]
    Tls(#[from] rustls::Error),
    /// The client CA bundle is unusable.
    #[error("invalid client CA bundle: {0}")]
    ClientCa(String),
}

/// TLS material generated for a server: a CA and a serving certificate signed by it.
pub struct TlsMaterial {
    /// CA certificate (PEM), what clients trust.
    pub ca_pem: String,
    cert_der: Vec<u8>,
    key_der: Vec<u8>,
}

impl std::fmt::Debug for TlsMaterial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsMaterial")
            .field("ca_pem", &"<certificate>")
            .field("key", &"[redacted]")
            .finish()
    }
}

impl TlsMaterial {
    /// Generates a CA and a serving certificate for localhost, 127.0.0.1 and ::1.
    pub fn generate() -> Result<Self, ServeError> {
        use rcgen::{
            BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, KeyPair,
            KeyUsagePurpose,
        };
        let ca_key = KeyPair::generate()?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, "kubewright-ca");
        ca_params.distinguished_name = dn;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key)?;
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(vec![
            "localhost".to_string(),
            "127.0.0.1".to_string(),
            "::1".to_string(),
            "kubernetes.default.svc".to_string(),
        ])?;
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, "kube-apiserver");
        params.distinguished_name = dn;
        let cert = params.signed_by(&key, &ca)?;
        Ok(Self {
            ca_pem: ca.pem(),
            cert_der: cert.der().to_vec(),
            key_der: key.serialize_der(),
        })
    }

    fn server_config(&self, client_ca: Option<&str>) -> Result<rustls::ServerConfig, ServeError> {
        use rustls_pki_types::pem::PemObject as _;
        use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
        #[allow(
            deprecated,
            reason = "ring by choice: rustls 0.23.48 deprecates its provider for lacking post-quantum key exchange, which aws-lc-rs has at the cost of a C and cmake build"
        )]
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()?;
        let builder = match client_ca {
            None => builder.with_no_client_auth(),
            Some(pem) => {
                let mut roots = rustls::RootCertStore::empty();
                for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
                    let cert = cert.map_err(|e| ServeError::ClientCa(e.to_string()))?;
                    roots.add(cert)?;
                }
                if roots.is_empty() {
                    return Err(ServeError::ClientCa("no CERTIFICATE block".into()));
                }
                // Like kube-apiserver: a certificate is optional (tokens still work), but
                // one that is presented must verify.
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider,
                )
                .allow_unauthenticated()
                .build()
                .map_err(|e| ServeError::ClientCa(e.to_string()))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut cfg = builder.with_single_cert(
            vec![CertificateDer::from(self.cert_der.clone())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_der.clone())),
        )?;
        cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(cfg)
    }
}

/// Builds and starts a server.
#[derive(Debug, Clone, Default)]
pub struct ServerBuilder {
    addr: Option<SocketAddr>,
    tls: bool,
    options: ServerOptions,
    tasks: ServerTasks,
}

/// A task that runs beside the server for as long as it serves (controllers, say):
/// started once the server listens, with a kubeconfig (YAML) for the server's
/// administrator and a token that is cancelled when the server stops.
/// [`TestServer::shutdown`] waits for it to end.
pub type ServerTask = Arc<
    dyn Fn(
            String,
            CancellationToken,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>
        + Send
        + Sync,
>;

/// The tasks a builder starts beside its server.
#[derive(Clone, Default)]
struct ServerTasks(Vec<(String, ServerTask)>);

impl std::fmt::Debug for ServerTasks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|(name, _)| name))
            .finish()
    }
}

impl ServerBuilder {
    /// Runs `task` beside the server (see [`ServerTask`]); `name` names it in logs.
    /// This is how the crates above the server attach the controllers a cluster runs
    /// (the server itself runs none of kube-controller-manager's).
    #[must_use]
    pub fn with_task(mut self, name: &str, task: ServerTask) -> Self {
        self.tasks.0.push((name.to_string(), task));
        self
    }
    /// Listen address (default `127.0.0.1:0`, a free port).
    #[must_use]
    pub fn addr(mut self, addr: SocketAddr) -> Self {
        self.addr = Some(addr);
        self
    }
    /// Port on 127.0.0.1.
    #[must_use]
    pub fn port(mut self, port: u16) -> Self {
        self.addr = Some(SocketAddr::from(([127, 0, 0, 1], port)));
        self
    }
    /// Serve HTTPS with a generated CA (default: plain HTTP).
    #[must_use]
    pub fn tls(mut self, on: bool) -> Self {
        self.tls = on;
        self
    }
    /// Require one of these bearer tokens.
    #[must_use]
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.options.tokens.push(token.into());
        self
    }
    /// Accept `token` as `user`, whose requests are authorized by RBAC (Roles,
    /// ClusterRoles and bindings stored in the server). Tokens given to
    /// [`ServerBuilder::token`] are administrators (`system:masters`).
    #[must_use]
    pub fn user(mut self, token: impl Into<String>, user: crate::auth::rbac::UserInfo) -> Self {
        self.options.users.push((token.into(), user));
        self
    }
    /// Authenticate TLS clients by certificate, like kube-apiserver's `--client-ca-file`:
    /// a client certificate signed by a CA of `ca_pem` authenticates as its subject
    /// common name (CN), with its organizations (O) as groups. Requires TLS.
    #[must_use]
    pub fn client_ca(mut self, ca_pem: impl Into<String>) -> Self {
        self.options.client_ca_pem = Some(ca_pem.into());
        self
    }
    /// Persist objects in `dir` (created if missing); a restarted server keeps them.
    #[must_use]
    pub fn data_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.options.data_dir = Some(dir.into());
        self
    }
    /// Start even when the data directory's log is damaged in the middle, loading every
    /// intact record (by default such a log stops the start; see
    /// [`CorruptLog`](crate::CorruptLog)).
    #[must_use]
    pub fn salvage_corrupt_log(mut self, salvage: bool) -> Self {
        self.options.salvage_corrupt_log = salvage;
        self
    }
    /// Interval of periodic watch bookmarks (default 60 s).
    #[must_use]
    pub fn bookmark_interval(mut self, d: Duration) -> Self {
        self.options.bookmark_interval = d;
        self
    }
    /// Size, time and concurrency limits (default: kube-apiserver's, see
    /// [`crate::Limits`]).
    #[must_use]
    pub fn limits(mut self, limits: crate::http::limits::Limits) -> Self {
        self.options.limits = limits;
        self
    }
    /// Runs a simulated kubelet (see [`crate::Kubelet`]): a fake Node, pods bound to it
    /// that become Running and Ready, graceful termination, and pod logs, exec, attach
    /// and port-forward served by the kubelet's pluggable handlers. Off by default.
    #[must_use]
    pub fn kubelet(mut self, kubelet: crate::kubelet::Kubelet) -> Self {
        self.options.kubelet = Some(kubelet);
        self
    }
    /// Events kept for watch resumption (default 100,000).
    #[must_use]
    pub fn history(mut self, events: usize) -> Self {
        self.options.history = events;
        self
    }

    /// Starts serving in the background.
    ///
    /// The server's code is behind one boxed future, built here: an `async fn`'s body
    /// (and everything it spawns) is otherwise compiled again in every crate that
    /// awaits it.
    #[inline(never)]
    #[allow(clippy::manual_async_fn, reason = "boxed where it is built, see above")]
    pub fn start(
        self,
    ) -> impl std::future::Future<Output = Result<TestServer, ServeError>> + Send + 'static {
        let boxed: std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<TestServer, ServeError>> + Send>,
        > = Box::pin(self.start_inner());
        boxed
    }

    async fn start_inner(self) -> Result<TestServer, ServeError> {
        let addr = self
            .addr
            .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0)));
        let listener = TcpListener::bind(addr).await?;
        let local = listener.local_addr()?;
        let tls = if self.tls {
            Some(TlsMaterial::generate()?)
        } else {
            None
        };
        let acceptor = match &tls {
            Some(t) => Some(tokio_rustls::TlsAcceptor::from(Arc::new(
                t.server_config(self.options.client_ca_pem.as_deref())?,
            ))),
            None if self.options.client_ca_pem.is_some() => {
                return Err(ServeError::ClientCa(
                    "client certificates require TLS (ServerBuilder::tls(true))".into(),
                ));
            }
            None => None,
        };
        let token = self.options.tokens.first().cloned();
        let state = ApiServer::open(self.options)?;
        if state.options.default_namespaces {
            crate::controllers::bootstrap::ensure_kubernetes_endpoints(&state, local);
        }
        // Register persisted CRDs and finish persisted deletions before serving.
        crate::controllers::reconcile_all(&state);
        // kube-apiserver's watch cache starts at the revision it first lists: a watch or
        // an exact list from before it (resourceVersion=1, say) gets 410 Expired rather
        // than the server's bootstrap history, which client tests of 410 handling need.
        state.storage.compact();
        let stop = CancellationToken::new();
        let mut tasks = vec![tokio::spawn(crate::controllers::run(
            state.clone(),
            stop.clone(),
        ))];
        if let Some(k) = state.options.kubelet.clone() {
            tasks.push(tokio::spawn(crate::kubelet::run(
                k,
                state.clone(),
                stop.clone(),
            )));
        }
        tasks.push(tokio::spawn(accept_loop(
            listener,
            acceptor,
            state.clone(),
            stop.clone(),
        )));
        let mut server = TestServer {
            state,
            addr: local,
            tls,
            token,
            stop,
            tasks,
        };
        let kubeconfig = server.kubeconfig();
        for (name, task) in self.tasks.0 {
            tracing::debug!(task = %name, "starting a task beside the server");
            let run = task(kubeconfig.clone(), server.stop.child_token());
            server.tasks.push(tokio::spawn(run));
        }
        Ok(server)
    }
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    state: Arc<ApiServer>,
    stop: CancellationToken,
) {
    let mut conns = tokio::task::JoinSet::new();
    loop {
        let (stream, _) = tokio::select! {
            r = listener.accept() => match r {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stop.cancelled() => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => continue,
        };
        let _ = stream.set_nodelay(true);
        let state = state.clone();
        let acceptor = acceptor.clone();
        conns.spawn(async move {
            let limits = &state.options.limits;
            match acceptor {
                // Like Go's http.Server, the handshake gets the header read timeout.
                Some(acc) => {
                    match tokio::time::timeout(limits.header_read_timeout, acc.accept(stream)).await
                    {
                        Ok(Ok(tls)) => {
                            // Verified by the handshake (when a client CA is configured).
                            let cert_user = tls
                                .get_ref()
                                .1
                                .peer_certificates()
                                .and_then(|chain| chain.first())
                                .and_then(|leaf| user_from_certificate(leaf));
                            serve_connection(state, tls, cert_user).await;
                        }
                        Ok(Err(e)) => tracing::debug!("TLS handshake failed: {e}"),
                        Err(_) => tracing::debug!("TLS handshake timed out"),
                    }
                }
                None => serve_connection(state, stream, None).await,
            }
        });
    }
    conns.abort_all();
    // A request may be inside a write: it completes before the loop reports it ended.
    while conns.join_next().await.is_some() {}
}

/// Serves HTTP/1.1 or HTTP/2 on one connection, within the limits of
/// [`crate::http::limits::Limits`]: header size and count, header read timeout (HTTP/1, which
/// also closes idle keep-alive connections), HTTP/2 settings as kube-apiserver announces
/// them, and the idle timeout (no request in flight: closed, or GOAWAY on HTTP/2).
async fn serve_connection<I>(
    state: Arc<ApiServer>,
    io: I,
    cert_user: Option<crate::auth::rbac::UserInfo>,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    use hyper_util::rt::TokioTimer;
    let limits = state.options.limits.clone();
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        // Bounds what hyper buffers (a read may overshoot it by up to as much again);
        // the exact limit is checked once the headers are parsed.
        .max_buf_size((limits.max_header_bytes + 4096).max(8192 + 4096 * 100))
        .max_headers(limits.max_headers.max(1));
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(limits.http2_max_concurrent_streams)
        .max_header_list_size(u32::try_from(limits.max_header_bytes + 320).unwrap_or(u32::MAX))
        .max_frame_size(256 * 1024)
        .initial_stream_window_size(256 * 1024);
    let activity = crate::http::limits::Activity::new();
    let busy = activity.clone();
    // Go: MaxHeaderBytes plus 4 KiB of slack.
    let max_head = limits.max_header_bytes + 4096;
    let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
        let mark = busy.busy();
        // Go's HTTP/1 server refuses these before any handler runs. (hyper's buffer
        // bound is not exact: headers are measured once parsed.)
        let h1 = req.version() <= http::Version::HTTP_11;
        let refusal = if h1 && crate::http::limits::head_bytes(&req) > max_head {
            Some((
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                "431 Request Header Fields Too Large",
            ))
        } else if req.version() == http::Version::HTTP_11
            && !req.headers().contains_key(http::header::HOST)
        {
            Some((
                StatusCode::BAD_REQUEST,
                "400 Bad Request: missing required Host header",
            ))
        } else {
            None
        };
        let resp = handle(state.clone(), req, cert_user.clone());
        async move {
            if let Some((code, text)) = refusal {
                let mut r = h::text(code, text);
                r.headers_mut()
                    .insert(http::header::CONNECTION, HeaderValue::from_static("close"));
                return Ok(r);
            }
            resp.await.map(|r| crate::http::limits::hold(r, mark))
        }
    });
    // With upgrades: WebSocket for pods/exec, attach and portforward.
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(io), svc);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return,
        _ = activity.idle(limits.header_read_timeout, limits.idle_timeout) => {}
    }
    // Idle: HTTP/1 closes at once, HTTP/2 sends GOAWAY and closes when the client has no
    // more streams; a client that keeps one open anyway loses the connection later.
    conn.as_mut().graceful_shutdown();
    let _ = tokio::time::timeout(limits.idle_timeout, conn).await;
}

/// The user of a verified client certificate, like kube-apiserver's x509 authenticator:
/// subject CN is the user name, each O a group. `None` without a CN.
fn user_from_certificate(der: &[u8]) -> Option<crate::auth::rbac::UserInfo> {
    let (cn, orgs) = x509_subject(der)?;
    let cn = cn.filter(|c| !c.is_empty())?;
    let groups: Vec<&str> = orgs.iter().map(String::as_str).collect();
    Some(crate::auth::rbac::UserInfo::new(&cn, &groups))
}

/// One DER element at the start of `input`: (tag, contents, rest).
fn der_element(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
        rest = &rest[n..];
        len
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

/// The subject common name and organizations of a DER certificate.
pub(crate) fn x509_subject(der: &[u8]) -> Option<(Option<String>, Vec<String>)> {
    const SEQUENCE: u8 = 0x30;
    const SET: u8 = 0x31;
    const OID_CN: &[u8] = &[0x55, 0x04, 0x03];
    const OID_O: &[u8] = &[0x55, 0x04, 0x0a];
    let (SEQUENCE, cert, _) = der_element(der)? else {
        return None;
    };
    let (SEQUENCE, tbs, _) = der_element(cert)? else {
        return None;
    };
    let mut rest = tbs;
    // [0] version (optional), serialNumber, signature, issuer, validity, subject.
    if let Some((0xa0, _, after)) = der_element(rest) {
        rest = after;
    }
    for _ in 0..4 {
        rest = der_element(rest)?.2;
    }
    let (SEQUENCE, mut name, _) = der_element(rest)? else {
        return None;
    };
    let (mut cn, mut orgs) = (None, Vec::new());
    while !name.is_empty() {
        let (tag, mut rdn, after) = der_element(name)?;
        name = after;
        if tag != SET {
            return None;
        }
        while !rdn.is_empty() {
            let (SEQUENCE, attr, after) = der_element(rdn)? else {
                return None;
            };
            rdn = after;
            let (0x06, oid, value) = der_element(attr)? else {
                return None;
            };
            // UTF8String, PrintableString, IA5String.
            let text = match der_element(value)? {
                (0x0c | 0x13 | 0x16, v, _) => String::from_utf8(v.to_vec()).ok(),
                _ => None,
            };
            match (oid, text) {
                (OID_CN, Some(t)) => cn = Some(t),
                (OID_O, Some(t)) => orgs.push(t),
                _ => {}
            }
        }
    }
    Some((cn, orgs))
}

/// Serves one request that a connection delivered (the fuzz targets call it through
/// [`crate::fuzzing::handle`] with an in-memory body).
pub(crate) async fn handle<B>(
    srv: Arc<ApiServer>,
    req: Request<B>,
    cert_user: Option<crate::auth::rbac::UserInfo>,
) -> Result<Response<Body>, Infallible>
where
    B: hyper::body::Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let audit = req
        .headers()
        .get("audit-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 256)
        .map(str::to_string)
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let accepts_gzip = req
        .headers()
        .get("accept-encoding")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|e| e.trim().starts_with("gzip")));
    let extra_space = crate::http::limits::parse_bearer(
        req.headers()
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok()),
    ) == crate::http::limits::Bearer::ExtraSpace;
    let mut resp = match handle_inner(&srv, req, cert_user).await {
        Ok(r) => r,
        Err(e) => h::error_response(&e),
    };
    if extra_space {
        crate::http::api::add_warnings(
            &mut resp,
            &[crate::http::limits::EXTRA_SPACE_WARNING.to_string()],
        );
    }
    if let Ok(v) = HeaderValue::from_str(&audit) {
        resp.headers_mut().insert("audit-id", v);
    }
    // Like kube-apiserver's WithCacheControl filter: API responses are not cacheable
    // unless a handler said otherwise (aggregated discovery is `public`).
    if !resp.headers().contains_key(http::header::CACHE_CONTROL) {
        resp.headers_mut().insert(
            http::header::CACHE_CONTROL,
            HeaderValue::from_static("no-cache, private"),
        );
    }
    if accepts_gzip {
        resp = maybe_gzip(resp).await;
    }
    Ok(resp)
}

const GZIP_THRESHOLD: u64 = 128 * 1024;

async fn maybe_gzip(resp: Response<Body>) -> Response<Body> {
    use hyper::body::Body as _;
    let size = resp.body().size_hint().exact();
    if size.is_none_or(|s| s <= GZIP_THRESHOLD) {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let Ok(collected) = body.collect().await else {
        return Response::from_parts(
            parts,
            Full::new(Bytes::new()).map_err(|n| match n {}).boxed(),
        );
    };
    let bytes = collected.to_bytes();
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let out = enc.write_all(&bytes).and_then(|_| enc.finish());
    match out {
        Ok(gz) => {
            parts
                .headers
                .insert("content-encoding", HeaderValue::from_static("gzip"));
            parts
                .headers
                .insert("vary", HeaderValue::from_static("Accept-Encoding"));
            parts.headers.remove("content-length");
            Response::from_parts(
                parts,
                Full::new(Bytes::from(gz)).map_err(|n| match n {}).boxed(),
            )
        }
        Err(_) => Response::from_parts(parts, Full::new(bytes).map_err(|n| match n {}).boxed()),
    }
}

async fn handle_inner<B>(
    srv: &Arc<ApiServer>,
    req: Request<B>,
    cert_user: Option<crate::auth::rbac::UserInfo>,
) -> Result<Response<Body>, ApiError>
where
    B: hyper::body::Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (parts, body) = req.into_parts();
    // Authentication: health and version stay open, like kube-apiserver's defaults.
    let path = parts.uri.path().to_string();
    let open = matches!(
        path.as_str(),
        "/healthz" | "/livez" | "/readyz" | "/version"
    ) || path.starts_with("/livez/")
        || path.starts_with("/readyz/");
    // As kube-apiserver's bearer token authenticator parses the header.
    let bearer = match crate::http::limits::parse_bearer(
        parts
            .headers
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok()),
    ) {
        crate::http::limits::Bearer::Token(t) => Some(t),
        _ => None,
    };
    // Like kube-apiserver's union authenticator: a client certificate comes first.
    let user = match cert_user.or_else(|| srv.authenticate(bearer)) {
        Some(u) => u,
        None if open && bearer.is_none() => {
            crate::auth::rbac::UserInfo::new("system:anonymous", &["system:unauthenticated"])
        }
        None => return Err(ApiError::unauthorized()),
    };
    let user = crate::auth::impersonation::impersonate(
        srv,
        &srv.storage,
        user,
        &parts.method,
        &parts.uri,
        &parts.headers,
    )?;
    // Like kube-apiserver's max-in-flight filter, after impersonation and before the
    // body is read.
    let limits = &srv.options.limits;
    let class = crate::http::limits::classify(&parts.method, &path, parts.uri.query());
    let exempt = class != crate::http::limits::Class::Watch
        && (crate::http::limits::is_probe(&path)
            || user.is_master() && crate::http::limits::authenticates(&srv.options));
    let seat = match exempt {
        true => None,
        false => match srv.inflight.try_acquire(limits, class, &user.name) {
            Some(seat) => Some(seat),
            None => return Ok(crate::http::limits::too_many_requests()),
        },
    };
    let resp = serve_request(srv, parts, body, user, path).await?;
    // A watch keeps its seat while it streams.
    Ok(match (class, seat) {
        (crate::http::limits::Class::Watch, Some(seat)) => crate::http::limits::hold(resp, seat),
        _ => resp,
    })
}

/// Reads the body (within the size limit and the request timeout) and serves the request.
async fn serve_request<B>(
    srv: &Arc<ApiServer>,
    parts: http::request::Parts,
    body: B,
    user: crate::auth::rbac::UserInfo,
    path: String,
) -> Result<Response<Body>, ApiError>
where
    B: hyper::body::Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let limit = srv.options.max_body;
    let read = Limited::new(body, limit).collect();
    let Ok(read) = tokio::time::timeout(srv.options.limits.request_timeout, read).await else {
        return Ok(crate::http::limits::request_timeout());
    };
    let body = match read {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some()
            {
                return Err(ApiError::too_large(limit));
            }
            return Err(ApiError::bad_request(format!(
                "failed to read the request body: {e}"
            )));
        }
    };
    let query_all: Vec<(String, String)> = parts
        .uri
        .query()
        .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
        .unwrap_or_default();
    let query = query_all.iter().cloned().collect();
    let mut parts = parts;
    let upgrade = parts.extensions.remove::<hyper::upgrade::OnUpgrade>();
    let r = Req {
        upgrade,
        method: parts.method,
        path,
        query,
        query_all,
        headers: parts.headers,
        body,
        user,
    };
    if let Some(t) = r.q("timeout")
        && !t.is_empty()
        && parse_go_duration(t).is_none()
    {
        return Err(ApiError::bad_request(format!(
            "invalid timeout specified in the request URL - time: invalid duration {t:?}"
        )));
    }
    match srv.route(&r.path)? {
        Route::Resource(t) => Ok(srv.serve_resource(r, t).await),
        Route::Other => match crate::http::discovery::serve(srv, &r) {
            Some(resp) => Ok(resp),
            None => Ok(h::text(StatusCode::NOT_FOUND, "404 page not found\n")),
        },
    }
}

/// A running server; stops when dropped.
pub struct TestServer {
    state: Arc<ApiServer>,
    addr: SocketAddr,
    tls: Option<TlsMaterial>,
    token: Option<String>,
    stop: CancellationToken,
    /// The server's own tasks: controllers, the kubelet, the accept loop.
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl std::fmt::Debug for TestServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestServer")
            .field("url", &self.url())
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

impl TestServer {
    /// Starts a plain-HTTP server on a free loopback port.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let server = kubewright_apiserver::TestServer::start().await.unwrap();
    /// assert!(server.url().starts_with("http://127.0.0.1:"));
    /// assert!(server.kubeconfig().contains("current-context: kubewright"));
    /// # }
    /// ```
    pub async fn start() -> Result<Self, ServeError> {
        ServerBuilder::default().start().await
    }

    /// A builder with options.
    pub fn builder() -> ServerBuilder {
        ServerBuilder::default()
    }

    /// Base URL, e.g. `http://127.0.0.1:41235`.
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// Listen address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// CA certificate (PEM) when serving TLS.
    pub fn ca_pem(&self) -> Option<&str> {
        self.tls.as_ref().map(|t| t.ca_pem.as_str())
    }

    /// The server state (storage, registry, counters) for white-box tests.
    pub fn state(&self) -> &Arc<ApiServer> {
        &self.state
    }

    /// A kubeconfig (YAML) pointing at this server, context `kubewright`.
    pub fn kubeconfig(&self) -> String {
        use base64::Engine;
        let mut cluster = format!("    server: {}\n", self.url());
        if let Some(t) = &self.tls {
            let ca = base64::engine::general_purpose::STANDARD.encode(t.ca_pem.as_bytes());
            cluster.push_str(&format!("    certificate-authority-data: {ca}\n"));
        }
        let user = match &self.token {
            Some(tok) => format!("    token: {tok}\n"),
            None => "    {}\n".to_string(),
        };
        let user = if self.token.is_some() {
            format!("  user:\n{user}")
        } else {
            "  user: {}\n".to_string()
        };
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: kubewright\n  cluster:\n{cluster}users:\n- name: kubewright\n{user}contexts:\n- name: kubewright\n  context:\n    cluster: kubewright\n    user: kubewright\n    namespace: default\ncurrent-context: kubewright\n"
        )
    }

    /// Writes the kubeconfig (and the CA next to it) to `path`.
    pub fn write_kubeconfig(&self, path: &Path) -> Result<PathBuf, std::io::Error> {
        // Owner-only (it may hold a token), replacing whatever was at `path`.
        crate::private_files::write_private(path, self.kubeconfig().as_bytes())?;
        if let Some(t) = &self.tls {
            let ca = path.with_file_name("ca.crt");
            std::fs::write(&ca, &t.ca_pem)?;
        }
        Ok(path.to_path_buf())
    }

    /// Forces every older resourceVersion out of the watch history (tests of 410 handling).
    pub fn compact(&self) {
        self.state.storage.compact();
    }

    /// Ends every open watch at once, as a dropped connection would (no final bookmark):
    /// clients must resume from their last resourceVersion. Returns immediately.
    pub fn close_watches(&self) {
        self.state.watch_epoch.send_modify(|e| *e += 1);
    }

    /// Number of watch requests served for a resource (`group/plural`, core group empty).
    pub fn watch_count(&self, group_resource: &str) -> u64 {
        self.state
            .stats
            .watches
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(group_resource)
            .copied()
            .unwrap_or(0)
    }

    /// Stops the server (also done on drop). Its tasks end soon after; see
    /// [`TestServer::shutdown`] to wait for them.
    pub fn stop(&self) {
        self.stop.cancel();
    }

    /// Stops the server and waits until its tasks (controllers, the simulated kubelet,
    /// connections) have ended: from then on nothing writes to its data directory, so
    /// another server may open it.
    pub async fn shutdown(mut self) {
        self.stop.cancel();
        for task in std::mem::take(&mut self.tasks) {
            let _ = task.await;
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(parse_go_duration("30s"), Some(Duration::from_secs(30)));
        assert_eq!(parse_go_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_go_duration("500ms"), Some(Duration::from_millis(500)));
        assert!(parse_go_duration("abc").is_none());
        assert!(parse_go_duration("5").is_none());
    }

    /// Found by the `request` fuzz target: `?timeout=99999999999999999999h` panicked
    /// converting the seconds to a Duration.
    #[test]
    fn go_durations_too_large_are_invalid() {
        assert!(parse_go_duration("99999999999999999999h").is_none());
        assert!(parse_go_duration(&format!("{}s", "9".repeat(400))).is_none());
        assert_eq!(
            parse_go_duration("2562047h"),
            Some(Duration::from_secs(2_562_047 * 3600))
        );
    }

    #[test]
    fn client_certificate_subject_maps_to_user_and_groups() {
        use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair};
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        let mut dn = DistinguishedName::new();
        // (rcgen keeps one value per attribute type: one O here.)
        dn.push(DnType::OrganizationName, "dev");
        dn.push(DnType::CountryName, "DE");
        dn.push(DnType::CommonName, "alice");
        params.distinguished_name = dn;
        let cert = params.self_signed(&key).unwrap();
        let user = user_from_certificate(cert.der()).unwrap();
        assert_eq!(user.name, "alice");
        assert_eq!(user.groups, ["dev", "system:authenticated"]);

        // No CN: not authenticated by the certificate.
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::OrganizationName, "dev");
        params.distinguished_name = dn;
        let cert = params.self_signed(&key).unwrap();
        assert!(user_from_certificate(cert.der()).is_none());
        // Garbage never panics.
        assert!(user_from_certificate(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]).is_none());
        assert!(user_from_certificate(&cert.der()[..40]).is_none());
    }

    #[tokio::test]
    async fn client_ca_requires_tls_and_valid_pem() {
        let err = TestServer::builder()
            .client_ca("x")
            .start()
            .await
            .unwrap_err();
        assert!(err.to_string().contains("require TLS"), "{err}");
        let err = TestServer::builder()
            .tls(true)
            .client_ca("not pem")
            .start()
            .await
            .unwrap_err();
        assert!(err.to_string().contains("client CA"), "{err}");
    }
}
