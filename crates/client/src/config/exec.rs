//! Exec credential plugins (client-go `plugin/pkg/client/auth/exec`).
//!
//! The plugin is run with `KUBERNETES_EXEC_INFO` set to an `ExecCredential` request and
//! must print an `ExecCredential` with a `status` on standard output.

use std::fmt;
use std::process::Stdio;
use std::time::Duration;

use base64::Engine as _;
use secrecy::{ExposeSecret, SecretString};

use super::ClientIdentity;
use super::error::{ConfigError, truncate_tail};
use super::redact::redact_secrets;

/// `client.authentication.k8s.io/v1`.
pub const EXEC_API_V1: &str = "client.authentication.k8s.io/v1";
/// `client.authentication.k8s.io/v1beta1`.
pub const EXEC_API_V1BETA1: &str = "client.authentication.k8s.io/v1beta1";

/// The environment variable that carries the `ExecCredential` request to the plugin.
pub const EXEC_INFO_ENV: &str = "KUBERNETES_EXEC_INFO";

/// Most bytes of (redacted) plugin stderr kept in an error or a log line: the tail,
/// where the reason for a failure usually is.
const MAX_STDERR: usize = 2048;

/// Most bytes of plugin stderr read into memory (the tail is kept).
const MAX_STDERR_CAPTURE: usize = 64 * 1024;

/// Most bytes of plugin stdout accepted (an `ExecCredential` is a few KiB).
const MAX_STDOUT: usize = 1024 * 1024;

/// How long a non-interactive run of an exec plugin may take by default. client-go has
/// no limit; token helpers (cloud CLIs, `kubelogin` with a cached token) answer in
/// seconds, and a plugin that waits for a human cannot get one when not interactive.
pub const EXEC_TIMEOUT: Duration = Duration::from_secs(60);

/// How long an interactive run (standard input is a terminal) may take by default:
/// long enough for a person to log in through a browser or type a one-time code
/// (`kubelogin`'s own browser wait is 3 minutes).
pub const EXEC_INTERACTIVE_TIMEOUT: Duration = Duration::from_secs(300);

/// An exec credential plugin, resolved from a kubeconfig `user.exec` section.
#[derive(Clone, Default)]
pub struct ExecConfig {
    /// `client.authentication.k8s.io/v1` or `…/v1beta1`.
    pub api_version: String,
    /// The command (resolved against the kubeconfig's folder if it contains a separator).
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Extra environment variables, added to (and overriding) the process environment.
    pub env: Vec<(String, String)>,
    /// `Never`, `IfAvailable` (the default) or `Always`.
    pub interactive_mode: Option<String>,
    /// Shown when the command is not found.
    pub install_hint: Option<String>,
    /// Whether to pass [`ExecConfig::cluster`] in `KUBERNETES_EXEC_INFO`.
    pub provide_cluster_info: bool,
    /// Cluster information sent to the plugin when `provide_cluster_info` is set.
    pub cluster: Option<ExecClusterInfo>,
    /// How long one run may take before the plugin is killed and
    /// [`ConfigError::ExecTimeout`] returned. `None`: [`EXEC_TIMEOUT`], or
    /// [`EXEC_INTERACTIVE_TIMEOUT`] when the plugin runs interactively. Not a
    /// kubeconfig field; set it in code.
    pub timeout: Option<Duration>,
}

impl fmt::Debug for ExecConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Like client-go: args and env values may carry secrets.
        let env_names: Vec<&str> = self.env.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("ExecConfig")
            .field("api_version", &self.api_version)
            .field("command", &self.command)
            .field("args", &format_args!("[{} redacted]", self.args.len()))
            .field("env", &env_names)
            .field("interactive_mode", &self.interactive_mode)
            .field("install_hint", &self.install_hint)
            .field("provide_cluster_info", &self.provide_cluster_info)
            .field("cluster", &self.cluster)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// Cluster information passed to an exec plugin (`spec.cluster` of the request). Its
/// `Debug` hides user information in `server` and `proxy_url`.
#[derive(Clone, Default)]
pub struct ExecClusterInfo {
    /// `server`.
    pub server: String,
    /// `tls-server-name`.
    pub tls_server_name: Option<String>,
    /// `insecure-skip-tls-verify`.
    pub insecure_skip_tls_verify: bool,
    /// The CA bundle (PEM), sent base64-encoded as `certificate-authority-data`.
    pub certificate_authority_data: Option<Vec<u8>>,
    /// `proxy-url`.
    pub proxy_url: Option<String>,
    /// `disable-compression`.
    pub disable_compression: bool,
    /// The cluster's `client.authentication.k8s.io/exec` extension, sent as `config`.
    pub config: Option<serde_json::Value>,
}

impl fmt::Debug for ExecClusterInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use super::redact_url;
        f.debug_struct("ExecClusterInfo")
            .field("server", &redact_url(&self.server))
            .field("tls_server_name", &self.tls_server_name)
            .field("insecure_skip_tls_verify", &self.insecure_skip_tls_verify)
            .field(
                "certificate_authority_data",
                &self.certificate_authority_data.as_ref().map(Vec::len),
            )
            .field("proxy_url", &self.proxy_url.as_deref().map(redact_url))
            .field("disable_compression", &self.disable_compression)
            .field(
                "config",
                &self.config.as_ref().map(|_| "[plugin configuration]"),
            )
            .finish()
    }
}

/// The `status` of an `ExecCredential` returned by a plugin.
#[derive(Clone)]
pub(crate) struct ExecCredential {
    pub(crate) token: Option<SecretString>,
    pub(crate) identity: Option<ClientIdentity>,
    pub(crate) expiration: Option<jiff::Timestamp>,
}

impl fmt::Debug for ExecCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExecCredential")
            .field("token", &self.token.as_ref().map(|_| "[redacted]"))
            .field("identity", &self.identity)
            .field("expiration", &self.expiration)
            .finish()
    }
}

impl ExecConfig {
    /// Whether the plugin would run interactively, given whether stdin is a terminal.
    fn interactive(&self, stdin_is_terminal: bool) -> Result<bool, ConfigError> {
        match self.interactive_mode.as_deref() {
            None | Some("") | Some("IfAvailable") => Ok(stdin_is_terminal),
            Some("Never") => Ok(false),
            Some("Always") if stdin_is_terminal => Ok(true),
            Some("Always") => Err(ConfigError::ExecInteractive {
                command: self.command.clone(),
            }),
            Some(other) => Err(ConfigError::Invalid(format!(
                "exec plugin {:?}: invalid interactiveMode {other:?} (expected Never, IfAvailable or Always)",
                self.command
            ))),
        }
    }

    /// The `ExecCredential` request put in `KUBERNETES_EXEC_INFO`.
    fn exec_info(&self, interactive: bool) -> serde_json::Value {
        let mut spec = serde_json::json!({ "interactive": interactive });
        if let (true, Some(cluster)) = (self.provide_cluster_info, &self.cluster) {
            let mut c = serde_json::Map::new();
            c.insert("server".into(), cluster.server.clone().into());
            if let Some(name) = &cluster.tls_server_name {
                c.insert("tls-server-name".into(), name.clone().into());
            }
            if cluster.insecure_skip_tls_verify {
                c.insert("insecure-skip-tls-verify".into(), true.into());
            }
            if let Some(ca) = &cluster.certificate_authority_data {
                c.insert(
                    "certificate-authority-data".into(),
                    base64::engine::general_purpose::STANDARD.encode(ca).into(),
                );
            }
            if let Some(proxy) = &cluster.proxy_url {
                c.insert("proxy-url".into(), proxy.clone().into());
            }
            if cluster.disable_compression {
                c.insert("disable-compression".into(), true.into());
            }
            if let Some(config) = &cluster.config {
                c.insert("config".into(), config.clone());
            }
            spec["cluster"] = serde_json::Value::Object(c);
        }
        serde_json::json!({
            "apiVersion": self.api_version,
            "kind": "ExecCredential",
            "spec": spec,
        })
    }
}

/// Whether this process's standard input is a terminal.
pub(crate) fn stdin_is_terminal() -> bool {
    use std::io::IsTerminal as _;
    std::io::stdin().is_terminal()
}

/// Run the plugin once and parse its credential.
pub(crate) async fn run_exec(
    config: &ExecConfig,
    stdin_is_terminal: bool,
) -> Result<ExecCredential, ConfigError> {
    if config.api_version != EXEC_API_V1 && config.api_version != EXEC_API_V1BETA1 {
        return Err(ConfigError::Invalid(format!(
            "exec plugin {:?}: unsupported apiVersion {:?} (expected {EXEC_API_V1} or {EXEC_API_V1BETA1})",
            config.command, config.api_version
        )));
    }
    if config.command.is_empty() {
        return Err(ConfigError::Invalid(
            "exec plugin: command is empty".to_owned(),
        ));
    }
    let interactive = config.interactive(stdin_is_terminal)?;
    let info = config.exec_info(interactive).to_string();

    let mut cmd = tokio::process::Command::new(&config.command);
    cmd.args(&config.args)
        .envs(config.env.iter().map(|(k, v)| (k, v)))
        .env(EXEC_INFO_ENV, info)
        .stdout(Stdio::piped())
        .kill_on_drop(true);
    if interactive {
        // The plugin talks to the user through the terminal.
        cmd.stdin(Stdio::inherit()).stderr(Stdio::inherit());
    } else {
        cmd.stdin(Stdio::null()).stderr(Stdio::piped());
    }

    let timeout = config.timeout.unwrap_or(if interactive {
        EXEC_INTERACTIVE_TIMEOUT
    } else {
        EXEC_TIMEOUT
    });
    tracing::debug!(command = %config.command, interactive, ?timeout, "running exec credential plugin");
    let mut child = cmd.spawn().map_err(|source| {
        if source.kind() == std::io::ErrorKind::NotFound {
            ConfigError::ExecNotFound {
                command: config.command.clone(),
                install_hint: config.install_hint.clone(),
            }
        } else {
            ConfigError::ExecSpawn {
                command: config.command.clone(),
                source,
            }
        }
    })?;
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let run = async {
        tokio::try_join!(
            child.wait(),
            read_head(stdout, MAX_STDOUT),
            read_tail(stderr, MAX_STDERR_CAPTURE),
        )
    };
    let (status, stdout, stderr) = match tokio::time::timeout(timeout, run).await {
        Ok(done) => done.map_err(|source| ConfigError::ExecSpawn {
            command: config.command.clone(),
            source,
        })?,
        Err(_) => {
            // Kill and reap the plugin. Processes it started and that keep running
            // are not waited for: their pipes are simply dropped.
            if let Err(e) = child.kill().await {
                tracing::debug!(command = %config.command, error = %e, "killing the exec plugin failed");
            }
            return Err(ConfigError::ExecTimeout {
                command: config.command.clone(),
                timeout,
            });
        }
    };
    let stderr = stderr_for_humans(&stderr);
    if !status.success() {
        return Err(ConfigError::ExecFailed {
            command: config.command.clone(),
            code: status.code(),
            stderr,
        });
    }
    if !stderr.is_empty() {
        tracing::debug!(
            command = %config.command,
            %stderr,
            "exec credential plugin wrote to stderr"
        );
    }
    parse_exec_credential(config, &stdout)
}

/// Plugin stderr as it may appear in an error or a log: secrets redacted, at most
/// [`MAX_STDERR`] bytes of the tail.
pub(crate) fn stderr_for_humans(raw: &[u8]) -> String {
    let text = String::from_utf8_lossy(raw);
    truncate_tail(redact_secrets(text.trim()).trim(), MAX_STDERR)
}

/// Reads a pipe to its end, keeping at most `max` bytes of the beginning (the rest is
/// read and dropped so that the writer never blocks).
async fn read_head<R: tokio::io::AsyncRead + Unpin>(
    pipe: Option<R>,
    max: usize,
) -> std::io::Result<Vec<u8>> {
    use tokio::io::AsyncReadExt as _;
    let mut out = Vec::new();
    let Some(mut pipe) = pipe else {
        return Ok(out);
    };
    let mut buf = [0u8; 8192];
    loop {
        let n = pipe.read(&mut buf).await?;
        if n == 0 {
            return Ok(out);
        }
        let room = max.saturating_sub(out.len());
        out.extend_from_slice(&buf[..n.min(room)]);
    }
}

/// Reads a pipe to its end, keeping at most about `max` bytes of the end.
async fn read_tail<R: tokio::io::AsyncRead + Unpin>(
    pipe: Option<R>,
    max: usize,
) -> std::io::Result<Vec<u8>> {
    use tokio::io::AsyncReadExt as _;
    let mut out = Vec::new();
    let Some(mut pipe) = pipe else {
        return Ok(out);
    };
    let mut buf = [0u8; 8192];
    loop {
        let n = pipe.read(&mut buf).await?;
        if n == 0 {
            return Ok(out);
        }
        out.extend_from_slice(&buf[..n]);
        if out.len() > 2 * max {
            out.drain(..out.len() - max);
        }
    }
}

/// Parse the plugin's output. Type errors are reported by field name only: serde
/// messages could echo secret values.
pub(crate) fn parse_exec_credential(
    config: &ExecConfig,
    stdout: &[u8],
) -> Result<ExecCredential, ConfigError> {
    let bad = |reason: String| ConfigError::ExecOutput {
        command: config.command.clone(),
        reason,
    };
    let value: serde_json::Value = serde_json::from_slice(stdout)
        .map_err(|e| bad(format!("output is not valid JSON ({e})")))?;
    let obj = value
        .as_object()
        .ok_or_else(|| bad("output is not a JSON object".to_owned()))?;
    let get_str = |o: &serde_json::Map<String, serde_json::Value>,
                   key: &str|
     -> Result<Option<String>, ConfigError> {
        match o.get(key) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(bad(format!("field {key} is not a string"))),
        }
    };
    match get_str(obj, "kind")?.as_deref() {
        Some("ExecCredential") => {}
        other => {
            return Err(bad(format!(
                "kind is {other:?}, expected \"ExecCredential\""
            )));
        }
    }
    let api_version = get_str(obj, "apiVersion")?;
    if api_version.as_deref() != Some(config.api_version.as_str()) {
        return Err(bad(format!(
            "plugin returned apiVersion {api_version:?} but is configured for {:?}",
            config.api_version
        )));
    }
    let status = match obj.get("status") {
        Some(serde_json::Value::Object(s)) => s,
        None | Some(serde_json::Value::Null) => {
            return Err(bad("missing status".to_owned()));
        }
        Some(_) => return Err(bad("status is not an object".to_owned())),
    };
    let token = get_str(status, "token")?
        .filter(|t| !t.is_empty())
        .map(SecretString::from);
    let cert = get_str(status, "clientCertificateData")?.filter(|c| !c.is_empty());
    let key = get_str(status, "clientKeyData")?
        .filter(|k| !k.is_empty())
        .map(SecretString::from);
    let expiration = match get_str(status, "expirationTimestamp")? {
        Some(ts) if !ts.is_empty() => Some(ts.parse::<jiff::Timestamp>().map_err(|e| {
            bad(format!(
                "expirationTimestamp {ts:?} is not an RFC 3339 timestamp: {e}"
            ))
        })?),
        _ => None,
    };
    let identity = match (cert, key) {
        (Some(cert), Some(key)) => {
            let identity = ClientIdentity::from_pem(
                cert.into_bytes(),
                key.expose_secret().as_bytes().to_vec(),
            );
            identity.validate(&format!("exec plugin {:?} credential", config.command))?;
            Some(identity)
        }
        (None, None) => None,
        (Some(_), None) => {
            return Err(bad(
                "status has clientCertificateData but no clientKeyData".to_owned()
            ));
        }
        (None, Some(_)) => {
            return Err(bad(
                "status has clientKeyData but no clientCertificateData".to_owned()
            ));
        }
    };
    if token.is_none() && identity.is_none() {
        return Err(bad(
            "status has neither a token nor clientCertificateData/clientKeyData".to_owned(),
        ));
    }
    Ok(ExecCredential {
        token,
        identity,
        expiration,
    })
}
