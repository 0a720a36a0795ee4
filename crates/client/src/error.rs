//! Client errors.

use kubewright_core::Status;

/// Errors from the client.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server answered with an error Status (or one was synthesised from the
    /// HTTP code when the body was not a Status).
    #[error("API error: {0}")]
    Api(Box<Status>),
    /// Configuration or authentication failed.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// The request could not be built.
    #[error(transparent)]
    Request(#[from] kubewright_core::RequestError),
    /// Connecting or sending failed. The message includes the chain of causes (e.g.
    /// `tcp connect error: Connection refused`); a typed cause, such as a
    /// [`ConnectError`] or a [`ProxyError`](crate::proxy::ProxyError), can be found by
    /// walking [`std::error::Error::source`].
    #[error("HTTP request to {url} failed: {}", transport_cause(&**.source))]
    Transport {
        /// The URL (no credentials).
        url: String,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Reading the response body failed.
    #[error("reading the response body failed: {0}")]
    Body(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The response was not the expected JSON.
    #[error("failed to decode the {what} response: {source}")]
    Decode {
        /// What was being decoded (e.g. `ConfigMap`).
        what: String,
        /// The cause (line/column, never the body).
        #[source]
        source: serde_json::Error,
    },
    /// The response was not the expected Kubernetes protobuf.
    #[error("failed to decode the {what} response: {source}")]
    DecodeProtobuf {
        /// What was being decoded (e.g. `ConfigMap`).
        what: String,
        /// What was wrong and where (never the body).
        #[source]
        source: kubewright_proto::Error,
    },
    /// A watch stream broke mid-object or carried malformed data.
    #[error("watch stream error: {0}")]
    Stream(String),
    /// TLS setup failed.
    #[error("TLS setup failed: {0}")]
    Tls(String),
    /// A WebSocket (exec, attach, port-forward) failed: the upgrade, a read or a write.
    #[error("websocket error: {}", cause_chain(&**.0))]
    WebSocket(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The peer broke the streaming protocol of exec, attach or port-forward (an unknown
    /// channel, a missing port header, no exit status, a bad handshake).
    #[error("streaming protocol error: {0}")]
    Protocol(String),
    /// An eviction was refused because it would violate a PodDisruptionBudget (429
    /// with a `DisruptionBudget` cause). Retry later, as `kubectl drain` does.
    #[error("eviction blocked by a PodDisruptionBudget: {}", .0.message)]
    EvictionBlocked(Box<Status>),
    /// The request did not complete within [`Config::timeout`](crate::Config::timeout).
    #[error("request timed out after {0:?}")]
    Timeout(std::time::Duration),
}

/// Why a connection to the API server could not be opened in time. Found in the
/// [`source`](std::error::Error::source) chain of an [`Error::Transport`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// No TCP connection within [`Config::connect_timeout`](crate::Config::connect_timeout)
    /// (name resolution included).
    #[error("connecting to {host} timed out after {timeout:?}")]
    ConnectTimeout {
        /// Host and port of the API server.
        host: String,
        /// The connect timeout.
        timeout: std::time::Duration,
    },
    /// The TLS handshake did not finish within
    /// [`Config::tls_handshake_timeout`](crate::Config::tls_handshake_timeout).
    #[error("TLS handshake with {host} timed out after {timeout:?}")]
    TlsHandshakeTimeout {
        /// Host and port of the API server.
        host: String,
        /// The handshake timeout.
        timeout: std::time::Duration,
    },
}

/// The causes of a transport error, without hyper's generic wrapper message
/// ("client error (Connect)") when it has a more precise source.
fn transport_cause(e: &(dyn std::error::Error + 'static)) -> String {
    match (
        e.downcast_ref::<hyper_util::client::legacy::Error>(),
        e.source(),
    ) {
        (Some(_), Some(inner)) => cause_chain(inner),
        _ => cause_chain(e),
    }
}

/// The messages of `e` and its sources joined by `: `, skipping a cause whose message
/// is already part of the text (wrappers that repeat their source).
pub(crate) fn cause_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        let msg = cause.to_string();
        if !msg.is_empty() && !out.contains(&msg) {
            out.push_str(": ");
            out.push_str(&msg);
        }
        next = cause.source();
    }
    out
}

impl Error {
    /// The Status of an API error.
    pub fn status(&self) -> Option<&Status> {
        match self {
            Error::Api(s) | Error::EvictionBlocked(s) => Some(s),
            _ => None,
        }
    }
    /// 404 NotFound.
    pub fn is_not_found(&self) -> bool {
        self.status().is_some_and(Status::is_not_found)
    }
    /// 409 AlreadyExists.
    pub fn is_already_exists(&self) -> bool {
        self.status().is_some_and(Status::is_already_exists)
    }
    /// 409 Conflict.
    pub fn is_conflict(&self) -> bool {
        self.status().is_some_and(Status::is_conflict)
    }
    /// 410 Expired/Gone.
    pub fn is_gone(&self) -> bool {
        self.status().is_some_and(Status::is_gone)
    }
    /// 410 Expired/Gone (alias of [`Error::is_gone`]).
    pub fn is_expired(&self) -> bool {
        self.is_gone()
    }
    /// 403 Forbidden.
    pub fn is_forbidden(&self) -> bool {
        self.status().is_some_and(Status::is_forbidden)
    }
    /// 401 Unauthorized.
    pub fn is_unauthorized(&self) -> bool {
        self.status().is_some_and(Status::is_unauthorized)
    }
    /// 429 TooManyRequests.
    pub fn is_too_many_requests(&self) -> bool {
        self.status().is_some_and(Status::is_too_many_requests)
    }
    /// 422 Invalid.
    pub fn is_invalid(&self) -> bool {
        self.status().is_some_and(Status::is_invalid)
    }
    /// 400 BadRequest.
    pub fn is_bad_request(&self) -> bool {
        self.status().is_some_and(Status::is_bad_request)
    }
    /// The request timed out: [`Error::Timeout`], or a connect, proxy or TLS handshake
    /// timeout ([`ConnectError`], [`ProxyError::Timeout`](crate::proxy::ProxyError::Timeout))
    /// behind an [`Error::Transport`].
    pub fn is_timeout(&self) -> bool {
        match self {
            Error::Timeout(_) => true,
            Error::Transport { source, .. } => {
                let mut next: Option<&(dyn std::error::Error + 'static)> = Some(&**source);
                while let Some(e) = next {
                    if e.downcast_ref::<ConnectError>().is_some()
                        || matches!(
                            e.downcast_ref::<crate::proxy::ProxyError>(),
                            Some(crate::proxy::ProxyError::Timeout { .. })
                        )
                    {
                        return true;
                    }
                    next = e.source();
                }
                false
            }
            _ => false,
        }
    }
}

/// Result alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;
