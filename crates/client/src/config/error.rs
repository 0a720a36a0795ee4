//! The error type of the `config` module.
//!
//! Every variant names what was wrong (a file path, a context/cluster/user name, a
//! kubeconfig field, an environment variable, a plugin command …) but never the value of
//! a secret: tokens, passwords and private keys are not included in any message.

use std::path::PathBuf;

/// Errors raised while loading a kubeconfig, building a [`Config`](super::Config),
/// building TLS settings or producing credentials.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A file could not be read.
    #[error("failed to read {what} {path:?}: {source}")]
    ReadFile {
        /// What the file was meant to hold ("kubeconfig", "client certificate", …).
        what: &'static str,
        /// The path that was read.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },

    /// No kubeconfig file could be found by the default loading rules.
    #[error("no kubeconfig found: {0}")]
    KubeconfigNotFound(String),

    /// The kubeconfig YAML could not be parsed.
    #[error("failed to parse kubeconfig{}{}: {message}", .path.as_ref().map(|p| format!(" {p:?}")).unwrap_or_default(), .location.as_ref().map(|(l, c)| format!(" at line {l}, column {c}")).unwrap_or_default())]
    Yaml {
        /// The file the YAML came from, if any.
        path: Option<PathBuf>,
        /// 1-based line and column of the problem, when known.
        location: Option<(u64, u64)>,
        /// The parser's message (without a source snippet).
        message: String,
    },

    /// Neither `current-context` nor an explicit context was given.
    #[error(
        "no context selected: the kubeconfig has no current-context and no context was requested"
    )]
    NoCurrentContext,

    /// The named context does not exist in the kubeconfig.
    #[error("context {0:?} not found in kubeconfig")]
    ContextNotFound(String),

    /// The named cluster does not exist in the kubeconfig.
    #[error("cluster {name:?} not found in kubeconfig{}", context_suffix(.context))]
    ClusterNotFound {
        /// The cluster name.
        name: String,
        /// The context that referenced it, if any.
        context: Option<String>,
    },

    /// The named user (auth info) does not exist in the kubeconfig.
    #[error("user {name:?} not found in kubeconfig{}", context_suffix(.context))]
    UserNotFound {
        /// The user name.
        name: String,
        /// The context that referenced it, if any.
        context: Option<String>,
    },

    /// The selected context names no cluster.
    #[error("context {0:?} has no cluster")]
    ContextWithoutCluster(String),

    /// The selected cluster has no `server`.
    #[error("cluster {0:?} has no server")]
    MissingServer(String),

    /// A URL (server or proxy) is invalid.
    #[error("invalid {field} {url:?}: {reason}")]
    InvalidUrl {
        /// Which field held the URL.
        field: String,
        /// The URL, with any user-info (credentials) redacted.
        url: String,
        /// Why it is invalid.
        reason: String,
    },

    /// A `*-data` field (or other base64 value) is not valid base64.
    #[error("field {field} is not valid base64: {reason}")]
    Base64 {
        /// The field, e.g. `users[alice].client-key-data`.
        field: String,
        /// What is wrong (never the data itself).
        reason: String,
    },

    /// PEM data (certificate or key) is invalid.
    #[error("invalid PEM in {what}: {reason}")]
    Pem {
        /// Where the PEM came from, e.g. `client-key-data of user "alice"`.
        what: String,
        /// What is wrong (never the data itself).
        reason: String,
    },

    /// The TLS configuration could not be built.
    #[error("failed to build TLS configuration: {0}")]
    Tls(String),

    /// A header (impersonation, authorization, extra header) could not be built.
    #[error("invalid value for header {name}: {reason}")]
    InvalidHeader {
        /// The header name.
        name: String,
        /// Why it is invalid (never the value).
        reason: String,
    },

    /// Some other combination of settings is invalid.
    #[error("invalid configuration: {0}")]
    Invalid(String),

    /// The user's `auth-provider` is not supported.
    #[error("auth-provider {name:?} is not supported{}", .hint.as_ref().map(|h| format!(": {h}")).unwrap_or_default())]
    UnsupportedAuthProvider {
        /// The auth-provider name.
        name: String,
        /// A hint about what to use instead.
        hint: Option<String>,
    },

    /// A token file could not be read or was empty.
    #[error("failed to read token file {path:?}: {reason}")]
    TokenFile {
        /// The token file.
        path: PathBuf,
        /// Why (I/O error or "empty").
        reason: String,
    },

    /// The exec credential plugin executable could not be found.
    #[error("exec plugin: executable {command:?} not found{}", .install_hint.as_ref().map(|h| format!("\n\n{h}")).unwrap_or_default())]
    ExecNotFound {
        /// The command.
        command: String,
        /// The kubeconfig's `installHint`.
        install_hint: Option<String>,
    },

    /// The exec credential plugin could not be started.
    #[error("exec plugin {command:?}: failed to run: {source}")]
    ExecSpawn {
        /// The command.
        command: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },

    /// The exec plugin requires an interactive terminal which is not available.
    #[error(
        "exec plugin {command:?} requires interactive mode (interactiveMode: Always) but standard input is not a terminal"
    )]
    ExecInteractive {
        /// The command.
        command: String,
    },

    /// The exec plugin did not finish in time ([`ExecConfig::timeout`](super::ExecConfig::timeout));
    /// it was killed.
    #[error("exec plugin {command:?} did not finish within {timeout:?} and was killed")]
    ExecTimeout {
        /// The command (never its arguments or environment, which may hold secrets).
        command: String,
        /// The timeout that expired.
        timeout: std::time::Duration,
    },

    /// The exec plugin exited unsuccessfully.
    #[error("exec plugin {command:?} failed with {}{}", .code.map(|c| format!("exit code {c}")).unwrap_or_else(|| "no exit code (killed by a signal)".to_owned()), stderr_suffix(.stderr))]
    ExecFailed {
        /// The command.
        command: String,
        /// The exit code, if the process exited normally.
        code: Option<i32>,
        /// The tail of its standard error output, with anything that looks like a
        /// credential (tokens, keys, PEM blocks) redacted.
        stderr: String,
    },

    /// The exec plugin's output was not a valid `ExecCredential`.
    #[error("exec plugin {command:?} returned an invalid ExecCredential: {reason}")]
    ExecOutput {
        /// The command.
        command: String,
        /// What is wrong with the output.
        reason: String,
    },

    /// A required in-cluster environment variable is missing or empty.
    #[error(
        "not running in a cluster: environment variable {0} is not set (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be defined)"
    )]
    InClusterEnv(&'static str),

    /// [`Config::infer`](super::Config::infer) failed both ways.
    #[error(
        "failed to infer configuration: from kubeconfig: {kubeconfig}; from in-cluster environment: {in_cluster}"
    )]
    Infer {
        /// Why the kubeconfig could not be used.
        kubeconfig: Box<ConfigError>,
        /// Why the in-cluster configuration could not be used.
        in_cluster: Box<ConfigError>,
    },
}

fn context_suffix(context: &Option<String>) -> String {
    context
        .as_ref()
        .map(|c| format!(" (referenced by context {c:?})"))
        .unwrap_or_default()
}

fn stderr_suffix(stderr: &str) -> String {
    let trimmed = stderr.trim();
    if trimmed.is_empty() {
        String::new()
    } else {
        format!(": stderr: {trimmed}")
    }
}

/// Describe a base64 decoding error without echoing the offending byte.
pub(crate) fn base64_reason(err: &base64::DecodeError) -> String {
    use base64::DecodeError as E;
    match err {
        E::InvalidByte(offset, _) => format!("invalid character at offset {offset}"),
        E::InvalidLength(len) => format!("invalid input length {len}"),
        E::InvalidLastSymbol { offset, .. } => format!("invalid last symbol at offset {offset}"),
        E::InvalidPadding => "invalid padding".to_owned(),
    }
}

/// Describe a PEM decoding error without echoing any of the data.
pub(crate) fn pem_reason(err: &rustls_pki_types::pem::Error) -> String {
    use rustls_pki_types::pem::Error as E;
    match err {
        E::MissingSectionEnd { .. } => "a PEM section is missing its END line".to_owned(),
        E::IllegalSectionStart { .. } => "malformed PEM BEGIN line".to_owned(),
        E::Base64Decode(_) => "invalid base64 inside a PEM section".to_owned(),
        E::Io(e) => format!("I/O error: {e}"),
        E::NoItemsFound => "no PEM item of the expected type found".to_owned(),
        E::SectionTooLarge => "PEM section too large".to_owned(),
        _ => "malformed PEM".to_owned(),
    }
}

/// Redact user-info (credentials) from a URL-ish string for messages.
pub(crate) fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(i) => (&url[..i + 3], &url[i + 3..]),
        None => ("", url),
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}[redacted]@{}", &rest[at + 1..]),
        None => url.to_owned(),
    }
}

/// Keep at most `max` bytes of the tail of `s` (on a char boundary).
pub(crate) fn truncate_tail(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &s[start..])
}
