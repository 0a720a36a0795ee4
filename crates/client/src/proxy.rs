//! Proxies: `http://` and `https://` proxies (HTTP `CONNECT` tunnels), `socks5://` and
//! `socks5h://` proxies (RFC 1928, RFC 1929 username/password), and client-go's
//! fallback to the environment (`HTTPS_PROXY`, `HTTP_PROXY`, `NO_PROXY`, with Go's
//! `http.ProxyFromEnvironment` semantics) when the kubeconfig has no `proxy-url`.
//!
//! ```
//! use kubewright_client::proxy::{NoProxy, ProxyEnv};
//! let env = ProxyEnv::from_lookup(|name| match name {
//!     "HTTPS_PROXY" => Some("http://proxy.corp:3128".to_owned()),
//!     "NO_PROXY" => Some(".internal,10.0.0.0/8".to_owned()),
//!     _ => None,
//! });
//! let proxy = |url: &str| env.proxy_for(&url.parse().unwrap()).unwrap();
//! assert!(proxy("https://k8s.example.com").is_some());
//! assert!(proxy("https://api.cluster.internal").is_none()); // NO_PROXY suffix
//! assert!(proxy("https://10.1.2.3:6443").is_none()); // NO_PROXY CIDR
//! assert!(proxy("https://127.0.0.1:6443").is_none()); // loopback: never proxied
//! assert!(proxy("http://k8s.example.com").is_none()); // no HTTP_PROXY
//! assert!(!NoProxy::parse("*").use_proxy("anything", 443));
//! ```
//!
//! Proxy credentials never appear in `Debug` output, logs or errors.

use std::fmt;
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use base64::Engine as _;
use http::Uri;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use secrecy::{ExposeSecret as _, SecretString};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _, ReadBuf};
use tokio::net::TcpStream;

use crate::config::ConfigError;
use crate::config::redact_url;
use crate::error::ConnectError;

// ---------------------------------------------------------------- environment

/// Proxy settings from the environment, used when a cluster has no `proxy-url` (Go's
/// `http.ProxyFromEnvironment`): `HTTPS_PROXY` for `https://` servers, `HTTP_PROXY`
/// for `http://` servers (upper case first, then lower case; empty values are
/// ignored), minus the hosts of `NO_PROXY` and loopback addresses.
#[derive(Clone, Default)]
pub struct ProxyEnv {
    http_proxy: Option<String>,
    https_proxy: Option<String>,
    no_proxy: NoProxy,
}

impl fmt::Debug for ProxyEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProxyEnv")
            .field("http_proxy", &self.http_proxy.as_deref().map(redact_url))
            .field("https_proxy", &self.https_proxy.as_deref().map(redact_url))
            .field("no_proxy", &self.no_proxy)
            .finish()
    }
}

impl ProxyEnv {
    /// No proxy from the environment.
    pub fn none() -> Self {
        Self::default()
    }

    /// Read `HTTPS_PROXY`/`https_proxy`, `HTTP_PROXY`/`http_proxy` and
    /// `NO_PROXY`/`no_proxy` from this process's environment.
    pub fn from_process_env() -> Self {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Read the variables through `lookup` (a variable name to its value), e.g. a map
    /// in tests.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let any = |names: [&str; 2]| {
            names
                .iter()
                .find_map(|n| lookup(n).filter(|v| !v.trim().is_empty()))
        };
        Self {
            http_proxy: any(["HTTP_PROXY", "http_proxy"]),
            https_proxy: any(["HTTPS_PROXY", "https_proxy"]),
            no_proxy: NoProxy::parse(&any(["NO_PROXY", "no_proxy"]).unwrap_or_default()),
        }
    }

    /// The proxy to use for requests to `url`, if any. A proxy value without a scheme
    /// is an `http://` proxy (like Go); an unparsable one is an error naming the
    /// variable.
    pub fn proxy_for(&self, url: &Uri) -> Result<Option<Uri>, ConfigError> {
        let (raw, variable, default_port) = match url.scheme_str() {
            Some("https") => (&self.https_proxy, "HTTPS_PROXY", 443),
            Some("http") => (&self.http_proxy, "HTTP_PROXY", 80),
            _ => return Ok(None),
        };
        let Some(raw) = raw else { return Ok(None) };
        let Some(host) = url.host() else {
            return Ok(None);
        };
        if !self
            .no_proxy
            .use_proxy(host, url.port_u16().unwrap_or(default_port))
        {
            return Ok(None);
        }
        let raw = raw.trim();
        let with_scheme = if raw.contains("://") {
            raw.to_owned()
        } else {
            format!("http://{raw}")
        };
        ProxyTarget::from_uri_str(&with_scheme, variable)?;
        with_scheme
            .parse()
            .map(Some)
            .map_err(|_| ConfigError::InvalidUrl {
                field: variable.to_owned(),
                url: redact_url(&with_scheme),
                reason: "not a valid URL".to_owned(),
            })
    }
}

/// A `NO_PROXY` list with Go's semantics: comma-separated entries, each an IP address,
/// a CIDR range, a domain name (matching itself and its subdomains), a domain with a
/// leading `.` or `*.` (subdomains only), optionally with a `:port`; `*` matches
/// everything. Malformed entries are ignored.
#[derive(Clone, Debug, Default)]
pub struct NoProxy {
    all: bool,
    ips: Vec<IpMatch>,
    domains: Vec<DomainMatch>,
}

#[derive(Clone, Debug)]
enum IpMatch {
    Cidr(IpAddr, u8),
    Ip(IpAddr, Option<u16>),
}

#[derive(Clone, Debug)]
struct DomainMatch {
    /// Starts with `.`.
    suffix: String,
    /// Whether the domain itself matches (not only its subdomains).
    match_host: bool,
    port: Option<u16>,
}

fn parse_cidr(s: &str) -> Option<(IpAddr, u8)> {
    let (ip, bits) = s.split_once('/')?;
    let ip: IpAddr = ip.parse().ok()?;
    let bits: u8 = bits.parse().ok()?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    (bits <= max).then_some((ip, bits))
}

fn cidr_contains(net: IpAddr, bits: u8, ip: IpAddr) -> bool {
    let (a, b, width) = match (net, ip) {
        (IpAddr::V4(a), IpAddr::V4(b)) => (
            u128::from(u32::from(a)) << 96,
            u128::from(u32::from(b)) << 96,
            32,
        ),
        (IpAddr::V6(a), IpAddr::V6(b)) => (u128::from(a), u128::from(b), 128),
        _ => return false,
    };
    let bits = u32::from(bits.min(width));
    if bits == 0 {
        return true;
    }
    let mask = u128::MAX << (128 - bits);
    a & mask == b & mask
}

/// Split `host:port` / `[v6]:port` like Go's `net.SplitHostPort` (None without a port).
fn split_host_port(s: &str) -> Option<(&str, &str)> {
    if let Some(rest) = s.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        return Some((host, after.strip_prefix(':')?));
    }
    let (host, port) = s.rsplit_once(':')?;
    (!host.contains(':')).then_some((host, port))
}

impl NoProxy {
    /// Parse a `NO_PROXY` value.
    pub fn parse(value: &str) -> Self {
        let mut out = Self::default();
        for entry in value.split(',') {
            let entry = entry.trim().to_ascii_lowercase();
            if entry.is_empty() {
                continue;
            }
            if entry == "*" {
                return Self {
                    all: true,
                    ..Self::default()
                };
            }
            if let Some((ip, bits)) = parse_cidr(&entry) {
                out.ips.push(IpMatch::Cidr(ip, bits));
                continue;
            }
            let (host, port) = match split_host_port(&entry) {
                Some((host, port)) => match port.parse::<u16>() {
                    Ok(port) if !host.is_empty() => (host, Some(port)),
                    _ => continue,
                },
                None => (entry.as_str(), None),
            };
            if let Ok(ip) = host.parse::<IpAddr>() {
                out.ips.push(IpMatch::Ip(ip, port));
                continue;
            }
            // "*.example.com" behaves like ".example.com".
            let host = host
                .strip_prefix('*')
                .filter(|h| h.starts_with('.'))
                .unwrap_or(host);
            if host.is_empty() || host == "." {
                continue;
            }
            let (suffix, match_host) = match host.strip_prefix('.') {
                Some(_) => (host.to_owned(), false),
                None => (format!(".{host}"), true),
            };
            out.domains.push(DomainMatch {
                suffix,
                match_host,
                port,
            });
        }
        out
    }

    /// Whether requests to `host:port` should use the proxy: `false` for `localhost`,
    /// loopback addresses (Go never proxies them) and hosts matched by the list.
    /// `host` may be an IPv6 address in brackets.
    pub fn use_proxy(&self, host: &str, port: u16) -> bool {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let host = host.trim().to_ascii_lowercase();
        if host.is_empty() {
            return true;
        }
        if host == "localhost" {
            return false;
        }
        let ip = host.parse::<IpAddr>().ok();
        if ip.is_some_and(|ip| ip.is_loopback()) {
            return false;
        }
        if self.all {
            return false;
        }
        let port_ok = |p: Option<u16>| p.is_none_or(|p| p == port);
        if let Some(ip) = ip {
            return !self.ips.iter().any(|m| match m {
                IpMatch::Cidr(net, bits) => cidr_contains(*net, *bits, ip),
                IpMatch::Ip(want, p) => *want == ip && port_ok(*p),
            });
        }
        !self.domains.iter().any(|m| {
            (host.ends_with(&m.suffix) || (m.match_host && host == m.suffix[1..]))
                && port_ok(m.port)
        })
    }
}

// ---------------------------------------------------------------- proxy URLs

/// The kind of proxy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ProxyScheme {
    Http,
    Https,
    Socks5,
    Socks5h,
}

/// A parsed proxy URL.
pub(crate) struct ProxyTarget {
    scheme: ProxyScheme,
    host: String,
    port: u16,
    username: Option<String>,
    password: Option<SecretString>,
    /// The URL with credentials redacted, for messages.
    display: String,
}

impl fmt::Debug for ProxyTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.display)
    }
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push(u8::try_from(h * 16 + l).unwrap_or(b'?'));
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl ProxyTarget {
    pub(crate) fn from_uri(uri: &Uri, field: &str) -> Result<Self, ConfigError> {
        Self::from_uri_str(&uri.to_string(), field)
    }

    fn from_uri_str(raw: &str, field: &str) -> Result<Self, ConfigError> {
        let display = redact_url(raw);
        let invalid = |reason: &str| ConfigError::InvalidUrl {
            field: field.to_owned(),
            url: display.clone(),
            reason: reason.to_owned(),
        };
        let uri: Uri = raw.parse().map_err(|_| invalid("not a valid URL"))?;
        let (scheme, default_port) = match uri.scheme_str() {
            Some("http") => (ProxyScheme::Http, 80),
            Some("https") => (ProxyScheme::Https, 443),
            Some("socks5") => (ProxyScheme::Socks5, 1080),
            Some("socks5h") => (ProxyScheme::Socks5h, 1080),
            _ => {
                return Err(invalid(
                    "unsupported scheme (expected http, https, socks5 or socks5h)",
                ));
            }
        };
        let host = uri
            .host()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| invalid("missing host"))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let (username, password) = match uri.authority().and_then(|a| a.as_str().rsplit_once('@')) {
            None => (None, None),
            Some((userinfo, _)) => match userinfo.split_once(':') {
                Some((u, p)) => (
                    Some(percent_decode(u)),
                    Some(SecretString::from(percent_decode(p))),
                ),
                None => (Some(percent_decode(userinfo)), None),
            },
        };
        Ok(Self {
            scheme,
            host,
            port: uri.port_u16().unwrap_or(default_port),
            username,
            password,
            display,
        })
    }

    fn basic_auth(&self) -> Option<String> {
        let user = self.username.as_deref()?;
        let password = self.password.as_ref().map_or("", |p| p.expose_secret());
        Some(base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}")))
    }
}

// ---------------------------------------------------------------- errors

/// Errors connecting through a proxy. The proxy URL is shown with its credentials
/// redacted.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProxyError {
    /// The TCP connection to the proxy failed.
    #[error("connecting to proxy {proxy} failed: {source}")]
    Connect {
        /// The proxy URL (credentials redacted).
        proxy: String,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The TLS handshake with an `https://` proxy failed.
    #[error("TLS handshake with proxy {proxy} failed: {source}")]
    Tls {
        /// The proxy URL (credentials redacted).
        proxy: String,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// Reading from or writing to the proxy failed.
    #[error("I/O error talking to proxy {proxy}: {source}")]
    Io {
        /// The proxy URL (credentials redacted).
        proxy: String,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// An HTTP proxy answered `CONNECT` with an error status.
    #[error("proxy {proxy} refused to connect to {target}: HTTP status {status}")]
    Refused {
        /// The proxy URL (credentials redacted).
        proxy: String,
        /// The `host:port` asked for.
        target: String,
        /// The HTTP status code.
        status: u16,
    },
    /// The proxy broke its protocol (HTTP `CONNECT` or SOCKS5) or refused the request.
    #[error("proxy {proxy}: {reason}")]
    Protocol {
        /// The proxy URL (credentials redacted).
        proxy: String,
        /// What went wrong.
        reason: String,
    },
    /// The handshake with the proxy took longer than the connect timeout.
    #[error("proxy {proxy}: no answer within {timeout:?}")]
    Timeout {
        /// The proxy URL (credentials redacted).
        proxy: String,
        /// The connect timeout.
        timeout: Duration,
    },
}

// ---------------------------------------------------------------- connector

/// A connection to the API server: direct, or tunnelled through a proxy (possibly
/// inside TLS to an `https://` proxy).
pub(crate) enum ProxyStream {
    Tcp(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl Connection for ProxyStream {
    fn connected(&self) -> Connected {
        Connected::new()
    }
}

impl AsyncRead for ProxyStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for ProxyStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Tcp(s) => Pin::new(s).poll_flush(cx),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Tcp(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Self::Tcp(s) => s.is_write_vectored(),
            Self::Tls(s) => s.is_write_vectored(),
        }
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Opens TCP connections to the API server, directly or through a proxy.
#[derive(Clone)]
pub(crate) struct ProxyConnector {
    http: HttpConnector,
    proxy: Option<Arc<ProxyTarget>>,
    /// TLS to an `https://` proxy.
    proxy_tls: Option<tokio_rustls::TlsConnector>,
    timeout: Option<Duration>,
}

impl ProxyConnector {
    /// `tls` is used for `https://` proxies (the same trust and client certificate as
    /// for the API server, like client-go).
    pub(crate) fn new(
        http: HttpConnector,
        proxy: Option<ProxyTarget>,
        tls: &rustls::ClientConfig,
        timeout: Option<Duration>,
    ) -> Self {
        let proxy_tls = proxy
            .as_ref()
            .filter(|p| p.scheme == ProxyScheme::Https)
            .map(|_| {
                let mut tls = tls.clone();
                tls.alpn_protocols.clear();
                tokio_rustls::TlsConnector::from(Arc::new(tls))
            });
        Self {
            http,
            proxy: proxy.map(Arc::new),
            proxy_tls,
            timeout,
        }
    }

    async fn connect(mut self, dst: Uri) -> Result<ProxyStream, BoxError> {
        use tower::Service as _;
        let Some(proxy) = self.proxy.clone() else {
            let host = dst.authority().map(|a| a.to_string()).unwrap_or_default();
            let connecting = self.http.call(dst);
            let tcp = match self.timeout {
                // The whole dial, name resolution included, like Go's `net.Dialer.Timeout`;
                // hyper's own connect timeout bounds each address attempt.
                Some(timeout) => match tokio::time::timeout(timeout, connecting).await {
                    Ok(Ok(tcp)) => tcp,
                    Ok(Err(e)) if is_timed_out(&e) => {
                        return Err(ConnectError::ConnectTimeout { host, timeout }.into());
                    }
                    Ok(Err(e)) => return Err(e.into()),
                    Err(_) => return Err(ConnectError::ConnectTimeout { host, timeout }.into()),
                },
                None => connecting.await?,
            };
            tcp_connected();
            return Ok(ProxyStream::Tcp(tcp.into_inner()));
        };
        let host = dst
            .host()
            .ok_or("the API server URL has no host")?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let port = dst
            .port_u16()
            .unwrap_or(if dst.scheme_str() == Some("http") {
                80
            } else {
                443
            });
        let proxy_host = if proxy.host.contains(':') {
            format!("[{}]", proxy.host)
        } else {
            proxy.host.clone()
        };
        let proxy_uri: Uri = format!("http://{proxy_host}:{}", proxy.port).parse()?;
        let handshake = async {
            let tcp = self
                .http
                .call(proxy_uri)
                .await
                .map_err(|e| ProxyError::Connect {
                    proxy: proxy.display.clone(),
                    source: e.into(),
                })?
                .into_inner();
            let io_err = |source| ProxyError::Io {
                proxy: proxy.display.clone(),
                source,
            };
            match proxy.scheme {
                ProxyScheme::Http => {
                    let mut stream = ProxyStream::Tcp(tcp);
                    http_connect(&mut stream, &proxy, &host, port).await?;
                    Ok(stream)
                }
                ProxyScheme::Https => {
                    let tls = self
                        .proxy_tls
                        .as_ref()
                        .ok_or_else(|| ProxyError::Protocol {
                            proxy: proxy.display.clone(),
                            reason: "no TLS configuration".to_owned(),
                        })?;
                    let name = rustls_pki_types::ServerName::try_from(proxy.host.clone()).map_err(
                        |e| ProxyError::Protocol {
                            proxy: proxy.display.clone(),
                            reason: format!("invalid TLS server name: {e}"),
                        },
                    )?;
                    let tls = tls
                        .connect(name, tcp)
                        .await
                        .map_err(|source| ProxyError::Tls {
                            proxy: proxy.display.clone(),
                            source,
                        })?;
                    let mut stream = ProxyStream::Tls(Box::new(tls));
                    http_connect(&mut stream, &proxy, &host, port).await?;
                    Ok(stream)
                }
                ProxyScheme::Socks5 | ProxyScheme::Socks5h => {
                    let mut tcp = tcp;
                    let target = if proxy.scheme == ProxyScheme::Socks5h {
                        match host.parse::<IpAddr>() {
                            Ok(ip) => SocksAddr::Ip(ip),
                            Err(_) => SocksAddr::Name(host.clone()),
                        }
                    } else {
                        // socks5: resolve the name here.
                        let ip = match host.parse::<IpAddr>() {
                            Ok(ip) => ip,
                            Err(_) => tokio::net::lookup_host((host.as_str(), port))
                                .await
                                .map_err(io_err)?
                                .next()
                                .ok_or_else(|| ProxyError::Protocol {
                                    proxy: proxy.display.clone(),
                                    reason: format!("{host} has no address"),
                                })?
                                .ip(),
                        };
                        SocksAddr::Ip(ip)
                    };
                    socks5_connect(&mut tcp, &proxy, &target, port).await?;
                    Ok(ProxyStream::Tcp(tcp))
                }
            }
        };
        let result: Result<ProxyStream, ProxyError> = match self.timeout {
            Some(timeout) => tokio::time::timeout(timeout, handshake)
                .await
                .unwrap_or_else(|_| {
                    Err(ProxyError::Timeout {
                        proxy: proxy.display.clone(),
                        timeout,
                    })
                }),
            None => handshake.await,
        };
        tracing::debug!(proxy = %proxy.display, %host, port, ok = result.is_ok(), "proxy connection");
        let stream = result?;
        tcp_connected();
        Ok(stream)
    }
}

/// Whether a connect error is a timeout (an `io::ErrorKind::TimedOut` among its causes).
fn is_timed_out(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(e);
    while let Some(cause) = next {
        if cause
            .downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::TimedOut)
        {
            return true;
        }
        next = cause.source();
    }
    false
}

tokio::task_local! {
    /// Set by [`TlsTimeoutConnector`] around one connection attempt: notified when the
    /// TCP connection (or proxy tunnel) is ready and the TLS handshake starts.
    static TCP_CONNECTED: Arc<tokio::sync::Notify>;
}

fn tcp_connected() {
    let _ = TCP_CONNECTED.try_with(|ready| ready.notify_one());
}

/// Bounds the TLS handshake with the API server (Go's `TLSHandshakeTimeout`): wraps the
/// TLS connector around [`ProxyConnector`], whose connect timeout covers the TCP (and
/// proxy) part; the handshake clock starts when that part is done.
#[derive(Clone)]
pub(crate) struct TlsTimeoutConnector<C> {
    inner: C,
    timeout: Option<Duration>,
}

impl<C> TlsTimeoutConnector<C> {
    pub(crate) fn new(inner: C, timeout: Option<Duration>) -> Self {
        Self { inner, timeout }
    }
}

impl<C> tower::Service<Uri> for TlsTimeoutConnector<C>
where
    C: tower::Service<Uri> + Clone + Send + 'static,
    C::Future: Send + 'static,
    C::Response: Send + 'static,
    C::Error: Into<BoxError>,
{
    type Response = C::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        let Some(timeout) = self.timeout else {
            let connecting = self.inner.call(dst);
            return Box::pin(async move { connecting.await.map_err(Into::into) });
        };
        let host = dst.authority().map(|a| a.to_string()).unwrap_or_default();
        let ready = Arc::new(tokio::sync::Notify::new());
        let connecting = TCP_CONNECTED.scope(ready.clone(), self.inner.call(dst));
        Box::pin(async move {
            let mut connecting = std::pin::pin!(connecting);
            tokio::select! {
                biased;
                done = &mut connecting => return done.map_err(Into::into),
                () = ready.notified() => {}
            }
            match tokio::time::timeout(timeout, connecting).await {
                Ok(done) => done.map_err(Into::into),
                Err(_) => {
                    Err(Box::new(ConnectError::TlsHandshakeTimeout { host, timeout }) as BoxError)
                }
            }
        })
    }
}

impl tower::Service<Uri> for ProxyConnector {
    type Response = TokioIo<ProxyStream>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.http.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        let this = self.clone();
        Box::pin(async move { this.connect(dst).await.map(TokioIo::new) })
    }
}

/// The handshake of `proxy`'s kind over `stream`, to `host:port` (the fuzz target's way
/// in: the replies come from whoever runs the proxy).
pub(crate) async fn tunnel_for_fuzzing<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    proxy: &ProxyTarget,
    host: &str,
    port: u16,
) -> Result<(), ProxyError> {
    match proxy.scheme {
        ProxyScheme::Socks5 | ProxyScheme::Socks5h => {
            socks5_connect(stream, proxy, &SocksAddr::Name(host.to_owned()), port).await
        }
        ProxyScheme::Http | ProxyScheme::Https => http_connect(stream, proxy, host, port).await,
    }
}

/// Most bytes of a `CONNECT` response head.
const MAX_CONNECT_RESPONSE: usize = 16 * 1024;

/// Open a `CONNECT` tunnel to `host:port` over `stream`.
async fn http_connect<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    proxy: &ProxyTarget,
    host: &str,
    port: u16,
) -> Result<(), ProxyError> {
    let io_err = |source| ProxyError::Io {
        proxy: proxy.display.clone(),
        source,
    };
    let protocol = |reason: &str| ProxyError::Protocol {
        proxy: proxy.display.clone(),
        reason: reason.to_owned(),
    };
    let target = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    let mut request = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n");
    if let Some(credentials) = proxy.basic_auth() {
        request.push_str(&format!("Proxy-Authorization: Basic {credentials}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).await.map_err(io_err)?;
    stream.flush().await.map_err(io_err)?;

    let mut head = Vec::with_capacity(256);
    let mut chunk = [0u8; 1024];
    loop {
        let n = stream.read(&mut chunk).await.map_err(io_err)?;
        if n == 0 {
            return Err(protocol(
                "the proxy closed the connection before answering CONNECT",
            ));
        }
        head.extend_from_slice(&chunk[..n]);
        if let Some(end) = memchr::memmem::find(&head, b"\r\n\r\n") {
            if end + 4 != head.len() {
                return Err(protocol("unexpected data after the CONNECT response"));
            }
            break;
        }
        if head.len() > MAX_CONNECT_RESPONSE {
            return Err(protocol("CONNECT response head too large"));
        }
    }
    let status_line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let status = std::str::from_utf8(status_line)
        .ok()
        .filter(|l| l.starts_with("HTTP/1."))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|code| code.parse::<u16>().ok())
        .ok_or_else(|| protocol("invalid CONNECT response status line"))?;
    if status != 200 {
        return Err(ProxyError::Refused {
            proxy: proxy.display.clone(),
            target,
            status,
        });
    }
    Ok(())
}

/// The destination of a SOCKS5 `CONNECT`.
enum SocksAddr {
    Ip(IpAddr),
    /// Resolved by the proxy (`socks5h`).
    Name(String),
}

fn socks_reply_reason(code: u8) -> &'static str {
    match code {
        1 => "general SOCKS server failure",
        2 => "connection not allowed by ruleset",
        3 => "network unreachable",
        4 => "host unreachable",
        5 => "connection refused",
        6 => "TTL expired",
        7 => "command not supported",
        8 => "address type not supported",
        _ => "unknown error",
    }
}

/// The RFC 1928 client handshake (no authentication, or RFC 1929 username/password
/// when the proxy URL has credentials), then `CONNECT` to `target:port`.
async fn socks5_connect<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    proxy: &ProxyTarget,
    target: &SocksAddr,
    port: u16,
) -> Result<(), ProxyError> {
    let io_err = |source| ProxyError::Io {
        proxy: proxy.display.clone(),
        source,
    };
    let fail = |reason: String| ProxyError::Protocol {
        proxy: proxy.display.clone(),
        reason: format!("SOCKS5: {reason}"),
    };
    // Greeting: version 5, the methods we offer.
    let greeting: &[u8] = if proxy.username.is_some() {
        &[5, 2, 0x00, 0x02]
    } else {
        &[5, 1, 0x00]
    };
    stream.write_all(greeting).await.map_err(io_err)?;
    let mut choice = [0u8; 2];
    stream.read_exact(&mut choice).await.map_err(io_err)?;
    if choice[0] != 5 {
        return Err(fail(format!("unexpected version {}", choice[0])));
    }
    match choice[1] {
        0x00 => {}
        0x02 => {
            let user = proxy.username.as_deref().unwrap_or_default();
            let password = proxy.password.as_ref().map_or("", |p| p.expose_secret());
            let (Ok(ulen), Ok(plen)) = (u8::try_from(user.len()), u8::try_from(password.len()))
            else {
                return Err(fail(
                    "username or password longer than 255 bytes".to_owned(),
                ));
            };
            let mut auth = Vec::with_capacity(3 + user.len() + password.len());
            auth.push(1);
            auth.push(ulen);
            auth.extend_from_slice(user.as_bytes());
            auth.push(plen);
            auth.extend_from_slice(password.as_bytes());
            let written = stream.write_all(&auth).await;
            // Do not keep the password around longer than needed.
            auth.fill(0);
            written.map_err(io_err)?;
            let mut status = [0u8; 2];
            stream.read_exact(&mut status).await.map_err(io_err)?;
            if status[1] != 0 {
                return Err(fail("username/password authentication failed".to_owned()));
            }
        }
        0xff => {
            return Err(fail(if proxy.username.is_some() {
                "no acceptable authentication method (offered none and username/password)"
                    .to_owned()
            } else {
                "the proxy requires authentication (no credentials in the proxy URL)".to_owned()
            }));
        }
        other => return Err(fail(format!("unexpected authentication method {other}"))),
    }
    // CONNECT request.
    let mut request = vec![5, 1, 0];
    match target {
        SocksAddr::Ip(IpAddr::V4(ip)) => {
            request.push(1);
            request.extend_from_slice(&ip.octets());
        }
        SocksAddr::Ip(IpAddr::V6(ip)) => {
            request.push(4);
            request.extend_from_slice(&ip.octets());
        }
        SocksAddr::Name(name) => {
            let len = u8::try_from(name.len())
                .map_err(|_| fail("host name longer than 255 bytes".to_owned()))?;
            request.push(3);
            request.push(len);
            request.extend_from_slice(name.as_bytes());
        }
    }
    request.extend_from_slice(&port.to_be_bytes());
    stream.write_all(&request).await.map_err(io_err)?;
    let mut reply = [0u8; 4];
    stream.read_exact(&mut reply).await.map_err(io_err)?;
    if reply[0] != 5 {
        return Err(fail(format!("unexpected version {} in reply", reply[0])));
    }
    if reply[1] != 0 {
        return Err(fail(format!(
            "CONNECT failed: {} (code {})",
            socks_reply_reason(reply[1]),
            reply[1]
        )));
    }
    // The bound address, which we do not need.
    let skip = match reply[3] {
        1 => 4,
        4 => 16,
        3 => {
            let mut len = [0u8; 1];
            stream.read_exact(&mut len).await.map_err(io_err)?;
            usize::from(len[0])
        }
        other => return Err(fail(format!("unknown address type {other} in reply"))),
    };
    let mut rest = vec![0u8; skip + 2];
    stream.read_exact(&mut rest).await.map_err(io_err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> ProxyEnv {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        ProxyEnv::from_lookup(|name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
    }

    #[test]
    fn no_proxy_matching() {
        let np = NoProxy::parse(
            " Example.com, .internal.corp,*.wild.dev, 10.0.0.0/8, 192.168.1.7, fd00::/8, ::5, host.port:8443, 172.16.0.1:6443 , ,bad:port:x",
        );
        let bypass = |host: &str, port: u16| !np.use_proxy(host, port);
        // A domain matches itself and its subdomains, case-insensitively.
        assert!(bypass("example.com", 443));
        assert!(bypass("api.EXAMPLE.com", 443));
        assert!(!bypass("notexample.com", 443));
        // A leading dot (or "*.") matches subdomains only.
        assert!(bypass("a.b.internal.corp", 443));
        assert!(!bypass("internal.corp", 443));
        assert!(bypass("x.wild.dev", 443));
        assert!(!bypass("wild.dev", 443));
        // IPs and CIDRs match IP literals only.
        assert!(bypass("10.1.2.3", 6443));
        assert!(!bypass("11.1.2.3", 6443));
        assert!(bypass("192.168.1.7", 443));
        assert!(!bypass("192.168.1.8", 443));
        assert!(bypass("[fd12::1]", 443));
        assert!(bypass("::5", 443));
        assert!(!bypass("fe80::1", 443));
        // Ports.
        assert!(bypass("host.port", 8443));
        assert!(!bypass("host.port", 443));
        assert!(bypass("172.16.0.1", 6443));
        assert!(!bypass("172.16.0.1", 443));
        // localhost and loopback are never proxied, whatever NO_PROXY says.
        let empty = NoProxy::parse("");
        assert!(!empty.use_proxy("localhost", 443));
        assert!(!empty.use_proxy("127.0.0.1", 443));
        assert!(!empty.use_proxy("127.1.2.3", 443));
        assert!(!empty.use_proxy("[::1]", 443));
        assert!(empty.use_proxy("k8s.example", 443));
        // "*" disables proxies.
        let all = NoProxy::parse("foo.com, *");
        assert!(!all.use_proxy("anything.example", 443));
        assert!(!all.use_proxy("8.8.8.8", 443));
        assert!(cidr_contains(
            "0.0.0.0".parse().unwrap(),
            0,
            "1.2.3.4".parse().unwrap()
        ));
    }

    #[test]
    fn proxy_from_environment() {
        let e = env(&[
            ("HTTPS_PROXY", "https://user:s3cret@secure.proxy:8443"),
            ("https_proxy", "http://ignored:1"),
            ("http_proxy", "plain.proxy:3128"),
            ("no_proxy", "skip.me"),
        ]);
        let proxy = |url: &str| {
            e.proxy_for(&url.parse().unwrap())
                .unwrap()
                .map(|u| u.to_string())
        };
        assert_eq!(
            proxy("https://k8s.example:6443").as_deref(),
            Some("https://user:s3cret@secure.proxy:8443/")
        );
        // No scheme: http://.
        assert_eq!(
            proxy("http://k8s.example").as_deref(),
            Some("http://plain.proxy:3128/")
        );
        assert_eq!(proxy("https://skip.me"), None);
        assert_eq!(proxy("https://a.skip.me:6443"), None);
        assert_eq!(proxy("https://localhost:6443"), None);
        assert_eq!(proxy("https://[::1]:6443"), None);
        // Empty values are unset.
        let e = env(&[("HTTPS_PROXY", ""), ("https_proxy", "socks5h://s:1080")]);
        assert_eq!(
            e.proxy_for(&"https://k8s".parse().unwrap())
                .unwrap()
                .map(|u| u.to_string())
                .as_deref(),
            Some("socks5h://s:1080/")
        );
        assert!(
            env(&[])
                .proxy_for(&"https://k8s".parse().unwrap())
                .unwrap()
                .is_none()
        );
        // Debug never shows the password.
        let debug = format!("{:?}", env(&[("HTTPS_PROXY", "http://u:s3cret@p:1")]));
        assert!(!debug.contains("s3cret"), "{debug}");
        // An invalid value is an error naming the variable, without credentials.
        let err = env(&[("HTTPS_PROXY", "ftp://u:s3cret@p:1")])
            .proxy_for(&"https://k8s".parse().unwrap())
            .unwrap_err()
            .to_string();
        assert!(err.contains("HTTPS_PROXY"), "{err}");
        assert!(!err.contains("s3cret"), "{err}");
    }

    #[test]
    fn proxy_urls() {
        let t = ProxyTarget::from_uri_str("socks5://us%40er:p%3Ass@[::1]", "proxy-url").unwrap();
        assert_eq!(t.scheme, ProxyScheme::Socks5);
        assert_eq!(t.host, "::1");
        assert_eq!(t.port, 1080);
        assert_eq!(t.username.as_deref(), Some("us@er"));
        assert_eq!(t.password.as_ref().map(|p| p.expose_secret()), Some("p:ss"));
        assert!(!format!("{t:?}").contains("p%3Ass"));
        let t = ProxyTarget::from_uri_str("https://proxy", "proxy-url").unwrap();
        assert_eq!(
            (t.scheme, t.port, t.basic_auth()),
            (ProxyScheme::Https, 443, None)
        );
        assert!(ProxyTarget::from_uri_str("ftp://proxy", "proxy-url").is_err());
    }

    /// A scripted SOCKS5 server on one end of a duplex pipe.
    #[tokio::test]
    async fn socks5_handshake_with_auth_and_name() {
        let (mut client, mut server) = tokio::io::duplex(1024);
        let proxy = ProxyTarget::from_uri_str("socks5h://alice:pw@p", "proxy-url").unwrap();
        let server = tokio::spawn(async move {
            let mut greeting = [0u8; 4];
            server.read_exact(&mut greeting).await.unwrap();
            assert_eq!(greeting, [5, 2, 0, 2]);
            server.write_all(&[5, 2]).await.unwrap();
            let mut auth = [0u8; 1 + 1 + 5 + 1 + 2];
            server.read_exact(&mut auth).await.unwrap();
            assert_eq!(&auth, b"\x01\x05alice\x02pw");
            server.write_all(&[1, 0]).await.unwrap();
            let mut req = [0u8; 4 + 1 + 3 + 2];
            server.read_exact(&mut req).await.unwrap();
            assert_eq!(&req, b"\x05\x01\x00\x03\x03k8s\x01\xbb");
            server
                .write_all(&[5, 0, 0, 3, 2, b'h', b'i', 0, 80])
                .await
                .unwrap();
        });
        socks5_connect(&mut client, &proxy, &SocksAddr::Name("k8s".into()), 443)
            .await
            .unwrap();
        server.await.unwrap();

        // A refused CONNECT is an error naming the reason.
        let (mut client, mut server) = tokio::io::duplex(1024);
        let proxy = ProxyTarget::from_uri_str("socks5://p", "proxy-url").unwrap();
        tokio::spawn(async move {
            let mut greeting = [0u8; 3];
            server.read_exact(&mut greeting).await.unwrap();
            server.write_all(&[5, 0]).await.unwrap();
            let mut req = [0u8; 10];
            server.read_exact(&mut req).await.unwrap();
            server
                .write_all(&[5, 5, 0, 1, 0, 0, 0, 0, 0, 0])
                .await
                .unwrap();
        });
        let err = socks5_connect(
            &mut client,
            &proxy,
            &SocksAddr::Ip("10.0.0.1".parse().unwrap()),
            443,
        )
        .await
        .unwrap_err();
        assert!(err.to_string().contains("connection refused"), "{err}");
    }
}
