//! Client configuration: kubeconfig loading (client-go `tools/clientcmd`), in-cluster
//! configuration, the resolved [`Config`] (client-go `rest.Config`) and the
//! authentication pieces used by the transport ([`Authenticator`], TLS settings,
//! impersonation headers).
//!
//! ```no_run
//! # async fn demo() -> Result<(), kubewright_client::config::ConfigError> {
//! use kubewright_client::config::{Authenticator, Config};
//! let config = Config::infer().await?;
//! let tls = config.rustls_config()?;
//! let auth = Authenticator::new(&config.auth);
//! let authorization = auth.header().await?; // per request
//! # let _ = (tls, authorization);
//! # Ok(()) }
//! ```
//!
//! # Trust roots
//! There is no bundled or native root store: [`Config::rustls_config`] trusts exactly
//! [`Config::root_certs`] (the kubeconfig's `certificate-authority[-data]` or the
//! in-cluster `ca.crt`). To talk to a server whose certificate is signed by a public
//! CA, put that CA (DER) in `root_certs`.
//!
//! # Secrets
//! Tokens, passwords and private keys are kept in [`secrecy`] types and are never
//! printed by `Debug`, `Display`, logs or errors.

mod auth;
mod error;
pub(crate) mod exec;
mod incluster;
mod kubeconfig;
mod redact;
mod tls;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use base64::Engine as _;
use http::{HeaderName, HeaderValue, Uri};
use secrecy::{ExposeSecret as _, SecretSlice, SecretString};

use crate::proxy::ProxyEnv;

pub use auth::{Auth, Authenticator, EXEC_EXPIRY_SKEW, TOKEN_FILE_REFRESH};
pub use error::ConfigError;
pub use exec::{
    EXEC_API_V1, EXEC_API_V1BETA1, EXEC_INFO_ENV, EXEC_INTERACTIVE_TIMEOUT, EXEC_TIMEOUT,
    ExecClusterInfo, ExecConfig,
};
pub use incluster::{SERVICE_ACCOUNT_DIR, SERVICE_HOST_ENV, SERVICE_PORT_ENV};
pub use kubeconfig::{
    AuthInfo, AuthProviderConfig, Cluster, Context, ExecEnvVar, KUBECONFIG_ENV, Kubeconfig,
    KubeconfigExec, NamedAuthInfo, NamedCluster, NamedContext, NamedExtension, Preferences,
};
pub use tls::{ExecCertResolver, certs_from_pem};

use error::base64_reason;
pub(crate) use error::redact_url;

/// The cluster extension passed to exec plugins as `spec.cluster.config`.
const EXEC_CLUSTER_EXTENSION: &str = "client.authentication.k8s.io/exec";

/// Everything needed to talk to one API server.
#[derive(Clone)]
pub struct Config {
    /// The API server URL, e.g. `https://127.0.0.1:6443` (no trailing slash; may have
    /// a path prefix).
    pub cluster_url: Uri,
    /// The namespace used when none is given: the context's, the in-cluster
    /// `namespace` file's, or `default`.
    pub default_namespace: String,
    /// DER certificates of the custom CA bundle (`certificate-authority[-data]`).
    /// These are the only trusted roots (see the module documentation).
    pub root_certs: Option<Vec<Vec<u8>>>,
    /// `insecure-skip-tls-verify`: accept any server certificate.
    pub accept_invalid_certs: bool,
    /// `tls-server-name`: the name to verify the server certificate against (and send
    /// as SNI) instead of the URL's host. Applied by the connector.
    pub tls_server_name: Option<String>,
    /// How requests authenticate.
    pub auth: Auth,
    /// A TLS client certificate chain and key.
    pub client_identity: Option<ClientIdentity>,
    /// `proxy-url`: `http://`, `https://`, `socks5://` or `socks5h://`, with optional
    /// credentials in the user-info. Takes precedence over [`Config::proxy_env`].
    pub proxy_url: Option<Uri>,
    /// Proxy settings from the environment (`HTTPS_PROXY`, `HTTP_PROXY`, `NO_PROXY`),
    /// used when `proxy_url` is not set. [`Config::new`] reads them from the process
    /// environment; set [`ProxyEnv::none`] to ignore the environment.
    pub proxy_env: ProxyEnv,
    /// Requests per second allowed by the client-side rate limiter; `<= 0` disables it.
    pub qps: f32,
    /// Burst of the client-side rate limiter.
    pub burst: u32,
    /// `User-Agent` header.
    pub user_agent: String,
    /// How long opening a TCP connection may take, name resolution and a proxy's
    /// handshake included (client-go's dialer: 30 s). `None`: no limit.
    pub connect_timeout: Option<Duration>,
    /// How long the TLS handshake with the API server may take once the TCP connection is
    /// open (client-go's `TLSHandshakeTimeout`: 10 s). `None`: no limit.
    pub tls_handshake_timeout: Option<Duration>,
    /// The longest a request may take (client-go's `rest.Config.Timeout`; default
    /// `None`, no limit). It starts after the client-side rate limiter and the credential
    /// of the first attempt (an exec plugin has its own timeout) and covers connecting,
    /// sending, waiting for the response headers, retries and reading the body. For
    /// watches and other streams it bounds only the wait for the response headers: the
    /// stream itself ends with the watch's own `timeoutSeconds` (client-go would cut the
    /// stream too). `Client::send` returns the response with its headers, so it bounds
    /// only that part too.
    pub timeout: Option<Duration>,
    /// Extra headers sent with every request.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// Impersonation (`Impersonate-*` headers).
    pub impersonate: Option<Impersonate>,
    /// How many times a request is retried (client-go's policy): after a 429 or 5xx
    /// response with a `Retry-After` header (waiting as told, at most 60 s), and, for
    /// `GET`s only, after the connection was reset or closed before the response
    /// (waiting 1 s). A connection that cannot be opened (refused, DNS failure, TLS error,
    /// connect timeout) is never retried: the error is returned at once. `0`: no retries.
    pub max_retries: u32,
    /// The wire format an [`Api`](crate::Api) asks for on reads and write responses
    /// (client-go's `ContentType`): JSON (the default) or Kubernetes protobuf for
    /// built-in kinds. Custom resources, and servers without protobuf, answer JSON.
    /// Informers use protobuf for built-in kinds whatever this says (see the runtime's
    /// `SharedInformerFactory::content_type`).
    pub content_type: ContentType,
}

/// The wire format for responses of built-in kinds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ContentType {
    /// `application/json`.
    #[default]
    Json,
    /// `application/vnd.kubernetes.protobuf`, with JSON as the fallback the server uses
    /// for kinds without a protobuf form. About 3× faster for kube-apiserver to encode
    /// and for the client to decode, and half the bytes.
    Protobuf,
}

/// Default requests per second (client-go).
pub const DEFAULT_QPS: f32 = 5.0;
/// Default burst (client-go).
pub const DEFAULT_BURST: u32 = 10;
/// Default connection timeout (client-go's dialer).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Default TLS handshake timeout (client-go's `TLSHandshakeTimeout`).
pub const DEFAULT_TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Default number of retries (client-go).
pub const DEFAULT_MAX_RETRIES: u32 = 10;

/// The default `User-Agent`: `kubewright/<version> (<os>/<arch>)`, with Go-style
/// architecture names (`amd64`, `arm64`).
pub fn default_user_agent() -> String {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        other => other,
    };
    format!(
        "kubewright/{} ({}/{arch})",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::OS
    )
}

/// Which context, cluster and user of a kubeconfig to use (overriding the
/// `current-context` and the context's cluster and user).
#[derive(Clone, Debug, Default)]
pub struct KubeConfigOptions {
    /// Context to use instead of `current-context`.
    pub context: Option<String>,
    /// Cluster to use instead of the context's.
    pub cluster: Option<String>,
    /// User to use instead of the context's.
    pub user: Option<String>,
}

/// A TLS client certificate chain and its private key, both PEM.
#[derive(Clone)]
pub struct ClientIdentity {
    /// The certificate chain (PEM), leaf first.
    pub cert_chain_pem: Vec<u8>,
    /// The private key (PEM: PKCS#1 RSA, SEC1 EC or PKCS#8).
    pub key_pem: SecretSlice<u8>,
}

impl ClientIdentity {
    /// Build from PEM data.
    pub fn from_pem(cert_chain_pem: Vec<u8>, key_pem: Vec<u8>) -> Self {
        Self {
            cert_chain_pem,
            key_pem: SecretSlice::from(key_pem),
        }
    }
}

impl fmt::Debug for ClientIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientIdentity")
            .field(
                "cert_chain_pem",
                &format_args!("<{} bytes>", self.cert_chain_pem.len()),
            )
            .field("key_pem", &"[redacted]")
            .finish()
    }
}

/// Who to impersonate.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Impersonate {
    /// `Impersonate-User`.
    pub user: String,
    /// `Impersonate-Group` (one header per group).
    pub groups: Vec<String>,
    /// `Impersonate-Uid`.
    pub uid: Option<String>,
    /// `Impersonate-Extra-<key>` (one header per value).
    pub extra: BTreeMap<String, Vec<String>>,
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Extra headers may carry credentials: print their names only.
        let header_names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("Config")
            .field("cluster_url", &self.cluster_url)
            .field("default_namespace", &self.default_namespace)
            .field(
                "root_certs",
                &self
                    .root_certs
                    .as_ref()
                    .map(|c| format!("<{} certificates>", c.len())),
            )
            .field("accept_invalid_certs", &self.accept_invalid_certs)
            .field("tls_server_name", &self.tls_server_name)
            .field("auth", &self.auth)
            .field("client_identity", &self.client_identity)
            .field(
                "proxy_url",
                &self.proxy_url.as_ref().map(|u| redact_url(&u.to_string())),
            )
            .field("proxy_env", &self.proxy_env)
            .field("qps", &self.qps)
            .field("burst", &self.burst)
            .field("user_agent", &self.user_agent)
            .field("connect_timeout", &self.connect_timeout)
            .field("tls_handshake_timeout", &self.tls_handshake_timeout)
            .field("timeout", &self.timeout)
            .field("headers", &header_names)
            .field("impersonate", &self.impersonate)
            .field("max_retries", &self.max_retries)
            .field("content_type", &self.content_type)
            .finish()
    }
}

impl Config {
    /// A configuration for `cluster_url` with defaults everywhere: namespace
    /// `default`, no custom roots, no auth, qps 5, burst 10, connect timeout 30 s, TLS
    /// handshake timeout 10 s, no request timeout, 10 retries.
    pub fn new(cluster_url: Uri) -> Self {
        Self {
            cluster_url,
            default_namespace: "default".to_owned(),
            root_certs: None,
            accept_invalid_certs: false,
            tls_server_name: None,
            auth: Auth::None,
            client_identity: None,
            proxy_url: None,
            proxy_env: ProxyEnv::from_process_env(),
            qps: DEFAULT_QPS,
            burst: DEFAULT_BURST,
            user_agent: default_user_agent(),
            connect_timeout: Some(DEFAULT_CONNECT_TIMEOUT),
            tls_handshake_timeout: Some(DEFAULT_TLS_HANDSHAKE_TIMEOUT),
            timeout: None,
            headers: Vec::new(),
            impersonate: None,
            max_retries: DEFAULT_MAX_RETRIES,
            content_type: ContentType::Json,
        }
    }

    /// The kubeconfig (default loading rules) if it can be used, else the in-cluster
    /// configuration. If both fail, the error names both causes.
    pub async fn infer() -> Result<Self, ConfigError> {
        match Self::from_kubeconfig(&KubeConfigOptions::default()).await {
            Ok(config) => Ok(config),
            Err(kubeconfig) => {
                tracing::debug!(error = %kubeconfig, "no usable kubeconfig, trying in-cluster configuration");
                Self::incluster().map_err(|in_cluster| ConfigError::Infer {
                    kubeconfig: Box::new(kubeconfig),
                    in_cluster: Box::new(in_cluster),
                })
            }
        }
    }

    /// Load the kubeconfig with the default rules ([`Kubeconfig::load_default`]) and
    /// resolve it with `options`.
    pub async fn from_kubeconfig(options: &KubeConfigOptions) -> Result<Self, ConfigError> {
        let kubeconfig = Kubeconfig::load_default()?;
        Self::from_custom_kubeconfig(kubeconfig, options)
    }

    /// Resolve a (loaded and merged) kubeconfig: pick the context, cluster and user,
    /// read referenced files, decode `*-data` fields.
    pub fn from_custom_kubeconfig(
        kubeconfig: Kubeconfig,
        options: &KubeConfigOptions,
    ) -> Result<Self, ConfigError> {
        let non_empty = |s: &Option<String>| s.clone().filter(|s| !s.is_empty());
        let context_name =
            non_empty(&options.context).or_else(|| non_empty(&kubeconfig.current_context));
        let context = match &context_name {
            Some(name) => kubeconfig
                .context(name)
                .cloned()
                .ok_or_else(|| ConfigError::ContextNotFound(name.clone()))?,
            None if non_empty(&options.cluster).is_some() => Context::default(),
            None => return Err(ConfigError::NoCurrentContext),
        };

        let cluster_name = non_empty(&options.cluster).unwrap_or(context.cluster.clone());
        if cluster_name.is_empty() {
            return Err(ConfigError::ContextWithoutCluster(
                context_name.unwrap_or_default(),
            ));
        }
        let cluster =
            kubeconfig
                .cluster(&cluster_name)
                .ok_or_else(|| ConfigError::ClusterNotFound {
                    name: cluster_name.clone(),
                    context: context_name.clone(),
                })?;

        let user_name = non_empty(&options.user).unwrap_or(context.user.clone());
        let default_user = AuthInfo::default();
        let user = if user_name.is_empty() {
            &default_user
        } else {
            kubeconfig
                .user(&user_name)
                .ok_or_else(|| ConfigError::UserNotFound {
                    name: user_name.clone(),
                    context: context_name.clone(),
                })?
        };

        let server = cluster
            .server
            .as_deref()
            .filter(|s| !s.trim().is_empty())
            .ok_or_else(|| ConfigError::MissingServer(cluster_name.clone()))?;
        let cluster_url =
            parse_cluster_url(server, &format!("server of cluster {cluster_name:?}"))?;
        let mut config = Config::new(cluster_url);

        if let Some(ns) = context.namespace.as_deref().filter(|ns| !ns.is_empty()) {
            config.default_namespace = ns.to_owned();
        }

        // Trust.
        let ca_pem = load_data_or_file(
            cluster.certificate_authority_data.as_deref(),
            cluster.certificate_authority.as_deref(),
            &format!("certificate-authority-data of cluster {cluster_name:?}"),
            "certificate authority",
        )?;
        let insecure = cluster.insecure_skip_tls_verify.unwrap_or(false);
        if insecure && ca_pem.is_some() {
            return Err(ConfigError::Invalid(format!(
                "cluster {cluster_name:?}: insecure-skip-tls-verify cannot be combined with certificate-authority[-data]"
            )));
        }
        if let Some(pem) = &ca_pem {
            config.root_certs = Some(certs_from_pem(
                pem,
                &format!("certificate authority of cluster {cluster_name:?}"),
            )?);
        }
        config.accept_invalid_certs = insecure;
        config.tls_server_name = cluster.tls_server_name.clone().filter(|s| !s.is_empty());
        if let Some(proxy) = cluster.proxy_url.as_deref().filter(|p| !p.is_empty()) {
            config.proxy_url = Some(parse_proxy_url(
                proxy,
                &format!("proxy-url of cluster {cluster_name:?}"),
            )?);
        }

        // Client certificate.
        let who = format!("user {user_name:?}");
        let cert_pem = load_data_or_file(
            user.client_certificate_data.as_deref(),
            user.client_certificate.as_deref(),
            &format!("client-certificate-data of {who}"),
            "client certificate",
        )?;
        let key_pem = load_data_or_file(
            user.client_key_data.as_ref().map(|k| k.expose_secret()),
            user.client_key.as_deref(),
            &format!("client-key-data of {who}"),
            "client key",
        )?;
        config.client_identity = match (cert_pem, key_pem) {
            (Some(cert), Some(key)) => {
                let identity = ClientIdentity::from_pem(cert, key);
                identity.validate(&who)?;
                Some(identity)
            }
            (None, None) => None,
            (Some(_), None) => {
                return Err(ConfigError::Invalid(format!(
                    "{who} has a client certificate but no client key"
                )));
            }
            (None, Some(_)) => {
                return Err(ConfigError::Invalid(format!(
                    "{who} has a client key but no client certificate"
                )));
            }
        };

        // Authorization.
        config.auth = auth_from_user(user, &who, cluster, ca_pem.as_deref())?;

        // Impersonation.
        let impersonate_user = user.impersonate.clone().unwrap_or_default();
        if !impersonate_user.is_empty() {
            config.impersonate = Some(Impersonate {
                user: impersonate_user,
                groups: user.impersonate_groups.clone(),
                uid: user.impersonate_uid.clone().filter(|u| !u.is_empty()),
                extra: user.impersonate_user_extra.clone(),
            });
        } else if !user.impersonate_groups.is_empty()
            || !user.impersonate_user_extra.is_empty()
            || user
                .impersonate_uid
                .as_deref()
                .is_some_and(|u| !u.is_empty())
        {
            return Err(ConfigError::Invalid(format!(
                "{who}: as-groups, as-uid and as-user-extra require as (the user to impersonate)"
            )));
        }

        Ok(config)
    }

    /// The rustls client configuration: ring provider, safe default protocol versions,
    /// [`Config::root_certs`] as the only roots (or no verification at all with
    /// [`Config::accept_invalid_certs`]), the client certificate if any, ALPN `h2` and
    /// `http/1.1`. [`Config::tls_server_name`] is applied by the connector.
    pub fn rustls_config(&self) -> Result<rustls::ClientConfig, ConfigError> {
        tls::rustls_config(self)
    }

    /// The proxy for connections to the API server: [`Config::proxy_url`], else the
    /// environment's ([`ProxyEnv::proxy_for`]), else none.
    pub fn proxy_for_cluster(&self) -> Result<Option<Uri>, ConfigError> {
        match &self.proxy_url {
            Some(url) => Ok(Some(url.clone())),
            None => self.proxy_env.proxy_for(&self.cluster_url),
        }
    }

    /// An [`Authenticator`] for [`Config::auth`].
    pub fn authenticator(&self) -> Authenticator {
        Authenticator::new(&self.auth)
    }

    /// The `Impersonate-*` headers for [`Config::impersonate`] (empty without
    /// impersonation). Extra keys are percent-encoded like client-go.
    pub fn impersonation_headers(&self) -> Result<Vec<(HeaderName, HeaderValue)>, ConfigError> {
        let Some(imp) = &self.impersonate else {
            return Ok(Vec::new());
        };
        if imp.user.is_empty() {
            return Err(ConfigError::Invalid(
                "impersonation requires a user name".to_owned(),
            ));
        }
        fn value(name: &str, v: &str) -> Result<HeaderValue, ConfigError> {
            HeaderValue::from_bytes(v.as_bytes()).map_err(|_| ConfigError::InvalidHeader {
                name: name.to_owned(),
                reason: "contains control characters".to_owned(),
            })
        }
        let mut headers = Vec::new();
        headers.push((
            HeaderName::from_static("impersonate-user"),
            value("Impersonate-User", &imp.user)?,
        ));
        if let Some(uid) = imp.uid.as_deref().filter(|u| !u.is_empty()) {
            headers.push((
                HeaderName::from_static("impersonate-uid"),
                value("Impersonate-Uid", uid)?,
            ));
        }
        for group in &imp.groups {
            headers.push((
                HeaderName::from_static("impersonate-group"),
                value("Impersonate-Group", group)?,
            ));
        }
        for (key, values) in &imp.extra {
            let name = format!("Impersonate-Extra-{}", header_key_escape(key));
            let header_name = HeaderName::from_bytes(name.as_bytes()).map_err(|e| {
                ConfigError::InvalidHeader {
                    name: name.clone(),
                    reason: e.to_string(),
                }
            })?;
            for v in values {
                headers.push((header_name.clone(), value(&name, v)?));
            }
        }
        Ok(headers)
    }
}

/// Percent-encode the bytes of an impersonation extra key that are not legal in a
/// header name (client-go `headerKeyEscape`; `%` itself is escaped).
fn header_key_escape(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for b in key.bytes() {
        let legal = b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'!' | b'#'
                    | b'$'
                    | b'&'
                    | b'\''
                    | b'*'
                    | b'+'
                    | b'-'
                    | b'.'
                    | b'^'
                    | b'_'
                    | b'`'
                    | b'|'
                    | b'~'
            );
        if legal {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Decode a kubeconfig base64 field (whitespace ignored, padding optional).
pub(crate) fn decode_base64_field(data: &str, field: &str) -> Result<Vec<u8>, ConfigError> {
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    const ENGINE: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    let compact: Vec<u8> = data.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    ENGINE.decode(compact).map_err(|e| ConfigError::Base64 {
        field: field.to_owned(),
        reason: base64_reason(&e),
    })
}

/// `*-data` (base64) if set, else the file if set.
fn load_data_or_file(
    data: Option<&str>,
    file: Option<&str>,
    data_field: &str,
    file_what: &'static str,
) -> Result<Option<Vec<u8>>, ConfigError> {
    if let Some(data) = data.filter(|d| !d.trim().is_empty()) {
        return decode_base64_field(data, data_field).map(Some);
    }
    if let Some(path) = file.filter(|f| !f.is_empty()) {
        return std::fs::read(path)
            .map(Some)
            .map_err(|source| ConfigError::ReadFile {
                what: file_what,
                path: path.into(),
                source,
            });
    }
    Ok(None)
}

fn auth_from_user(
    user: &AuthInfo,
    who: &str,
    cluster: &Cluster,
    ca_pem: Option<&[u8]>,
) -> Result<Auth, ConfigError> {
    let token = user
        .token
        .as_ref()
        .filter(|t| !t.expose_secret().trim().is_empty());
    let token_file = user.token_file.as_deref().filter(|t| !t.is_empty());
    let username = user.username.as_deref().filter(|u| !u.is_empty());
    if (token.is_some() || token_file.is_some()) && username.is_some() {
        return Err(ConfigError::Invalid(format!(
            "{who}: username/password or bearer token may be set, but not both"
        )));
    }
    if let Some(token) = token {
        return Ok(Auth::Bearer(token.clone()));
    }
    if let Some(path) = token_file {
        return Ok(Auth::TokenFile(path.into()));
    }
    if let Some(username) = username {
        return Ok(Auth::Basic {
            username: username.to_owned(),
            password: user
                .password
                .clone()
                .unwrap_or_else(|| SecretString::from("")),
        });
    }
    if let Some(exec) = &user.exec {
        return exec_config(exec, who, cluster, ca_pem).map(Auth::Exec);
    }
    if let Some(provider) = &user.auth_provider {
        return match provider.name.as_str() {
            "oidc" => match provider.config.get("id-token").filter(|t| !t.is_empty()) {
                Some(token) => Ok(Auth::Bearer(SecretString::from(token.as_str()))),
                None => Err(ConfigError::UnsupportedAuthProvider {
                    name: provider.name.clone(),
                    hint: Some(
                        "only a static id-token is supported; use an exec credential plugin (e.g. kubelogin) to refresh tokens"
                            .to_owned(),
                    ),
                }),
            },
            "gcp" => Err(ConfigError::UnsupportedAuthProvider {
                name: provider.name.clone(),
                hint: Some("use the gke-gcloud-auth-plugin exec credential plugin".to_owned()),
            }),
            "azure" => Err(ConfigError::UnsupportedAuthProvider {
                name: provider.name.clone(),
                hint: Some("use the kubelogin exec credential plugin".to_owned()),
            }),
            _ => Err(ConfigError::UnsupportedAuthProvider {
                name: provider.name.clone(),
                hint: Some("use an exec credential plugin".to_owned()),
            }),
        };
    }
    Ok(Auth::None)
}

fn exec_config(
    exec: &KubeconfigExec,
    who: &str,
    cluster: &Cluster,
    ca_pem: Option<&[u8]>,
) -> Result<ExecConfig, ConfigError> {
    if exec.command.trim().is_empty() {
        return Err(ConfigError::Invalid(format!(
            "{who}: exec command must be specified"
        )));
    }
    let api_version = exec.api_version.clone().unwrap_or_default();
    if api_version != EXEC_API_V1 && api_version != EXEC_API_V1BETA1 {
        return Err(ConfigError::Invalid(format!(
            "{who}: exec apiVersion must be {EXEC_API_V1} or {EXEC_API_V1BETA1}, got {api_version:?}"
        )));
    }
    match exec.interactive_mode.as_deref() {
        None | Some("") | Some("Never") | Some("IfAvailable") | Some("Always") => {}
        Some(other) => {
            return Err(ConfigError::Invalid(format!(
                "{who}: invalid exec interactiveMode {other:?} (expected Never, IfAvailable or Always)"
            )));
        }
    }
    let cluster_info = exec.provide_cluster_info.then(|| ExecClusterInfo {
        server: cluster.server.clone().unwrap_or_default(),
        tls_server_name: cluster.tls_server_name.clone().filter(|s| !s.is_empty()),
        insecure_skip_tls_verify: cluster.insecure_skip_tls_verify.unwrap_or(false),
        certificate_authority_data: ca_pem.map(<[u8]>::to_vec),
        proxy_url: cluster.proxy_url.clone().filter(|s| !s.is_empty()),
        disable_compression: cluster.disable_compression.unwrap_or(false),
        config: cluster
            .extensions
            .iter()
            .find(|e| e.name == EXEC_CLUSTER_EXTENSION)
            .map(|e| e.extension.clone()),
    });
    Ok(ExecConfig {
        api_version,
        command: exec.command.clone(),
        args: exec.args.clone(),
        env: exec
            .env
            .iter()
            .map(|e| (e.name.clone(), e.value.clone()))
            .collect(),
        interactive_mode: exec.interactive_mode.clone().filter(|m| !m.is_empty()),
        install_hint: exec.install_hint.clone().filter(|h| !h.is_empty()),
        provide_cluster_info: exec.provide_cluster_info,
        cluster: cluster_info,
        timeout: None,
    })
}

/// Parse a server URL: surrounding whitespace and trailing slashes removed, `https://`
/// assumed when there is no scheme; the scheme must be `http` or `https`.
pub(crate) fn parse_cluster_url(raw: &str, field: &str) -> Result<Uri, ConfigError> {
    let trimmed = raw.trim().trim_end_matches('/');
    let with_scheme = if trimmed.contains("://") {
        trimmed.to_owned()
    } else {
        format!("https://{trimmed}")
    };
    let invalid = |reason: String| ConfigError::InvalidUrl {
        field: field.to_owned(),
        url: redact_url(raw),
        reason,
    };
    let uri: Uri = with_scheme
        .parse()
        .map_err(|e: http::uri::InvalidUri| invalid(e.to_string()))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        other => return Err(invalid(format!("unsupported scheme {other:?}"))),
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(invalid("missing host".to_owned()));
    }
    if uri.query().is_some() {
        return Err(invalid("a query is not allowed".to_owned()));
    }
    Ok(uri)
}

fn parse_proxy_url(raw: &str, field: &str) -> Result<Uri, ConfigError> {
    let invalid = |reason: String| ConfigError::InvalidUrl {
        field: field.to_owned(),
        url: redact_url(raw),
        reason,
    };
    let uri: Uri = raw
        .trim()
        .parse()
        .map_err(|e: http::uri::InvalidUri| invalid(e.to_string()))?;
    match uri.scheme_str() {
        Some("http" | "https" | "socks5" | "socks5h") => {}
        other => {
            return Err(invalid(format!(
                "unsupported scheme {other:?} (expected http, https or socks5)"
            )));
        }
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(invalid("missing host".to_owned()));
    }
    Ok(uri)
}
