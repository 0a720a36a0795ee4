//! Authentication: the [`Auth`] settings and the per-request [`Authenticator`].

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use base64::Engine as _;
use http::HeaderValue;
use secrecy::{ExposeSecret, SecretString};
use tokio::time::Instant;

use super::error::ConfigError;
use super::exec::{ExecConfig, ExecCredential, run_exec, stdin_is_terminal};
use super::{ClientIdentity, ExecCertResolver};

/// How long a token read from a file is used before the file is read again
/// (client-go re-reads at most once a minute).
pub const TOKEN_FILE_REFRESH: Duration = Duration::from_secs(60);

/// An exec credential is refreshed this long before its `expirationTimestamp`.
pub const EXEC_EXPIRY_SKEW: Duration = Duration::from_secs(10);

/// How requests authenticate (besides a TLS client certificate).
#[derive(Clone, Default)]
#[allow(clippy::large_enum_variant)] // built once per client; keeps `Auth::Exec(ExecConfig)` simple
pub enum Auth {
    /// No `Authorization` header.
    #[default]
    None,
    /// `Authorization: Bearer <token>`.
    Bearer(SecretString),
    /// A bearer token read from a file, re-read when it may have rotated.
    TokenFile(PathBuf),
    /// `Authorization: Basic base64(username:password)`.
    Basic {
        /// The user name.
        username: String,
        /// The password.
        password: SecretString,
    },
    /// A token (and/or client certificate) from an exec credential plugin.
    Exec(ExecConfig),
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Auth::None => f.write_str("None"),
            Auth::Bearer(_) => f.debug_tuple("Bearer").field(&"[redacted]").finish(),
            Auth::TokenFile(path) => f.debug_tuple("TokenFile").field(path).finish(),
            Auth::Basic { username, .. } => f
                .debug_struct("Basic")
                .field("username", username)
                .field("password", &"[redacted]")
                .finish(),
            Auth::Exec(exec) => f.debug_tuple("Exec").field(exec).finish(),
        }
    }
}

/// Produces the `Authorization` header for each request.
///
/// Cheap to clone (an [`Arc`]); clones share the cached credential. Create one per
/// client with [`Authenticator::new`], call [`Authenticator::header`] for every
/// request, and [`Authenticator::invalidate`] when the server answers 401 so the next
/// request re-reads the token file or re-runs the exec plugin.
///
/// For an exec plugin that may return a client certificate, install
/// [`Authenticator::client_cert_resolver`] in the TLS configuration: it always presents
/// the certificate of the cached credential. [`Authenticator::header`] keeps that
/// credential fresh, so call it before opening connections, and open new ones when
/// [`Authenticator::client_cert_generation`] changes (as [`Client`](crate::Client) does).
#[derive(Clone)]
pub struct Authenticator {
    inner: Arc<Inner>,
}

#[allow(clippy::large_enum_variant)] // lives behind an `Arc`
enum Inner {
    None,
    Bearer(SecretString),
    Basic {
        username: String,
        password: SecretString,
    },
    TokenFile(TokenFileSource),
    Exec(ExecSource),
}

impl fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &*self.inner {
            Inner::None => "None".to_owned(),
            Inner::Bearer(_) => "Bearer([redacted])".to_owned(),
            Inner::Basic { username, .. } => format!("Basic({username:?}, [redacted])"),
            Inner::TokenFile(src) => format!("TokenFile({:?})", src.path),
            Inner::Exec(src) => format!("Exec({:?})", src.config.command),
        };
        f.debug_struct("Authenticator")
            .field("auth", &kind)
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave the cache inconsistent: recover.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn sensitive(mut value: HeaderValue) -> HeaderValue {
    value.set_sensitive(true);
    value
}

fn bearer_header(token: &str) -> Result<HeaderValue, ConfigError> {
    HeaderValue::try_from(format!("Bearer {}", token.trim()))
        .map(sensitive)
        .map_err(|_| ConfigError::InvalidHeader {
            name: "authorization".to_owned(),
            reason: "the bearer token contains characters not allowed in an HTTP header".to_owned(),
        })
}

fn basic_header(username: &str, password: &str) -> Result<HeaderValue, ConfigError> {
    let encoded =
        base64::engine::general_purpose::STANDARD.encode(format!("{username}:{password}"));
    HeaderValue::try_from(format!("Basic {encoded}"))
        .map(sensitive)
        .map_err(|_| ConfigError::InvalidHeader {
            name: "authorization".to_owned(),
            reason: "invalid basic credentials".to_owned(),
        })
}

impl Authenticator {
    /// Create an authenticator for these settings. Nothing is read or run until the
    /// first call to [`Authenticator::header`].
    pub fn new(auth: &Auth) -> Self {
        let inner = match auth {
            Auth::None => Inner::None,
            Auth::Bearer(token) => Inner::Bearer(token.clone()),
            Auth::Basic { username, password } => Inner::Basic {
                username: username.clone(),
                password: password.clone(),
            },
            Auth::TokenFile(path) => Inner::TokenFile(TokenFileSource {
                path: path.clone(),
                cache: Mutex::new(None),
                refresh: tokio::sync::Mutex::new(()),
            }),
            Auth::Exec(config) => Inner::Exec(ExecSource {
                config: config.clone(),
                cache: Mutex::new(None),
                refresh: tokio::sync::Mutex::new(()),
                certs: Arc::new(ExecCertResolver::default()),
            }),
        };
        Self {
            inner: Arc::new(inner),
        }
    }

    /// The `Authorization` header value for the next request (marked sensitive), or
    /// `None` when no header is to be sent (no auth, or an exec plugin that only
    /// returned a client certificate).
    pub async fn header(&self) -> Result<Option<HeaderValue>, ConfigError> {
        match &*self.inner {
            Inner::None => Ok(None),
            Inner::Bearer(token) => bearer_header(token.expose_secret()).map(Some),
            Inner::Basic { username, password } => {
                basic_header(username, password.expose_secret()).map(Some)
            }
            Inner::TokenFile(src) => src.header().await.map(Some),
            Inner::Exec(src) => {
                let cred = src.credential().await?;
                cred.token
                    .as_ref()
                    .map(|t| bearer_header(t.expose_secret()))
                    .transpose()
            }
        }
    }

    /// The client certificate returned by an exec plugin, if any (runs the plugin if
    /// no valid credential is cached). `None` for every other kind of auth.
    pub async fn exec_client_identity(&self) -> Result<Option<ClientIdentity>, ConfigError> {
        match &*self.inner {
            Inner::Exec(src) => Ok(src.credential().await?.identity),
            _ => Ok(None),
        }
    }

    /// For an exec plugin: the TLS client certificate resolver that presents the
    /// certificate of the current credential (see [`ExecCertResolver`]). `None` for
    /// every other kind of auth.
    pub fn client_cert_resolver(&self) -> Option<Arc<ExecCertResolver>> {
        match &*self.inner {
            Inner::Exec(src) => Some(src.certs.clone()),
            _ => None,
        }
    }

    /// Changes whenever an exec plugin's client certificate changes; connections opened
    /// before a change present the old certificate and should be replaced.
    pub fn client_cert_generation(&self) -> u64 {
        match &*self.inner {
            Inner::Exec(src) => src.certs.generation(),
            _ => 0,
        }
    }

    /// Forget the cached credential: the next [`Authenticator::header`] re-reads the
    /// token file or re-runs the exec plugin. Call this when the server answers 401.
    pub fn invalidate(&self) {
        match &*self.inner {
            Inner::TokenFile(src) => {
                if let Some(cached) = lock(&src.cache).as_mut() {
                    cached.read_at = None;
                }
            }
            Inner::Exec(src) => *lock(&src.cache) = None,
            Inner::None | Inner::Bearer(_) | Inner::Basic { .. } => {}
        }
    }

    /// Whether a 401 might be fixed by [`Authenticator::invalidate`] and a retry
    /// (token file or exec plugin).
    pub fn is_refreshable(&self) -> bool {
        matches!(&*self.inner, Inner::TokenFile(_) | Inner::Exec(_))
    }
}

struct CachedToken {
    header: HeaderValue,
    /// `None` after [`Authenticator::invalidate`]: re-read before use.
    read_at: Option<Instant>,
}

struct TokenFileSource {
    path: PathBuf,
    cache: Mutex<Option<CachedToken>>,
    /// Serializes re-reads so concurrent requests read the file once.
    refresh: tokio::sync::Mutex<()>,
}

impl TokenFileSource {
    fn fresh(&self) -> Option<HeaderValue> {
        let cache = lock(&self.cache);
        let cached = cache.as_ref()?;
        let read_at = cached.read_at?;
        (read_at.elapsed() < TOKEN_FILE_REFRESH).then(|| cached.header.clone())
    }

    async fn header(&self) -> Result<HeaderValue, ConfigError> {
        if let Some(header) = self.fresh() {
            return Ok(header);
        }
        let _guard = self.refresh.lock().await;
        if let Some(header) = self.fresh() {
            return Ok(header);
        }
        match read_token_file(&self.path).await {
            Ok(header) => {
                *lock(&self.cache) = Some(CachedToken {
                    header: header.clone(),
                    read_at: Some(Instant::now()),
                });
                Ok(header)
            }
            Err(err) => {
                // Like client-go: keep using the previous token if the file cannot be
                // re-read (e.g. while it is being rotated).
                let cache = lock(&self.cache);
                match cache.as_ref() {
                    Some(cached) => {
                        tracing::warn!(error = %err, "unable to rotate token, using the cached one");
                        Ok(cached.header.clone())
                    }
                    None => Err(err),
                }
            }
        }
    }
}

async fn read_token_file(path: &Path) -> Result<HeaderValue, ConfigError> {
    let text = tokio::fs::read_to_string(path)
        .await
        .map_err(|e| ConfigError::TokenFile {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
    let token = SecretString::from(text);
    let trimmed = token.expose_secret().trim();
    if trimmed.is_empty() {
        return Err(ConfigError::TokenFile {
            path: path.to_owned(),
            reason: "the file is empty".to_owned(),
        });
    }
    bearer_header(trimmed)
}

struct CachedCredential {
    credential: ExecCredential,
}

impl CachedCredential {
    fn is_fresh(&self) -> bool {
        match self.credential.expiration {
            None => true,
            Some(expiry) => {
                let skew = jiff::SignedDuration::try_from(EXEC_EXPIRY_SKEW)
                    .unwrap_or(jiff::SignedDuration::ZERO);
                jiff::Timestamp::now()
                    .checked_add(skew)
                    .map(|deadline| deadline < expiry)
                    .unwrap_or(false)
            }
        }
    }
}

struct ExecSource {
    config: ExecConfig,
    cache: Mutex<Option<CachedCredential>>,
    /// Serializes plugin runs so concurrent requests run it once.
    refresh: tokio::sync::Mutex<()>,
    /// The TLS client certificate of the cached credential.
    certs: Arc<ExecCertResolver>,
}

impl ExecSource {
    fn fresh(&self) -> Option<ExecCredential> {
        let cache = lock(&self.cache);
        cache
            .as_ref()
            .filter(|c| c.is_fresh())
            .map(|c| c.credential.clone())
    }

    async fn credential(&self) -> Result<ExecCredential, ConfigError> {
        if let Some(cred) = self.fresh() {
            return Ok(cred);
        }
        let _guard = self.refresh.lock().await;
        if let Some(cred) = self.fresh() {
            return Ok(cred);
        }
        let cred = run_exec(&self.config, stdin_is_terminal()).await?;
        self.certs.set(
            cred.identity.as_ref(),
            &format!("exec plugin {:?} credential", self.config.command),
        )?;
        *lock(&self.cache) = Some(CachedCredential {
            credential: cred.clone(),
        });
        Ok(cred)
    }
}
