//! Exec credential plugins (client-go `plugin/pkg/client/auth/exec`).
//!
//! The plugin is run with `KUBERNETES_EXEC_INFO` set to an `ExecCredential` request and
//! must print an `ExecCredential` with a `status` on standard output.

use std::fmt;
use std::process::Stdio;

use base64::Engine as _;
use secrecy::{ExposeSecret, SecretString};

use super::ClientIdentity;
use super::error::{ConfigError, truncate_tail};

/// `client.authentication.k8s.io/v1`.
pub const EXEC_API_V1: &str = "client.authentication.k8s.io/v1";
/// `client.authentication.k8s.io/v1beta1`.
pub const EXEC_API_V1BETA1: &str = "client.authentication.k8s.io/v1beta1";

/// The environment variable that carries the `ExecCredential` request to the plugin.
pub const EXEC_INFO_ENV: &str = "KUBERNETES_EXEC_INFO";

/// Most bytes of plugin stderr kept in an error.
const MAX_STDERR: usize = 4096;

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
            .finish()
    }
}

/// Cluster information passed to an exec plugin (`spec.cluster` of the request).
#[derive(Clone, Debug, Default)]
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

    tracing::debug!(command = %config.command, interactive, "running exec credential plugin");
    let child = cmd.spawn().map_err(|source| {
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
    let output = child
        .wait_with_output()
        .await
        .map_err(|source| ConfigError::ExecSpawn {
            command: config.command.clone(),
            source,
        })?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        return Err(ConfigError::ExecFailed {
            command: config.command.clone(),
            code: output.status.code(),
            stderr: truncate_tail(stderr.trim(), MAX_STDERR),
        });
    }
    if !stderr.trim().is_empty() {
        tracing::debug!(
            command = %config.command,
            stderr = %truncate_tail(stderr.trim(), MAX_STDERR),
            "exec credential plugin wrote to stderr"
        );
    }
    parse_exec_credential(config, &output.stdout)
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
