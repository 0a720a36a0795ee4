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
    /// Connecting or sending failed.
    #[error("HTTP request to {url} failed: {source}")]
    Transport {
        /// The URL (path and query, no credentials).
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
    /// A watch stream broke mid-object or carried malformed data.
    #[error("watch stream error: {0}")]
    Stream(String),
    /// TLS setup failed.
    #[error("TLS setup failed: {0}")]
    Tls(String),
    /// The request did not complete in time.
    #[error("request timed out after {0:?}")]
    Timeout(std::time::Duration),
}

impl Error {
    /// The Status of an API error.
    pub fn status(&self) -> Option<&Status> {
        match self {
            Error::Api(s) => Some(s),
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
}

/// Result alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;
