//! Kubeconfig file types and loading rules (client-go `tools/clientcmd`).
//!
//! * [`Kubeconfig::read_from`] reads one file and resolves relative paths
//!   (`certificate-authority`, `client-certificate`, `client-key`, `tokenFile`, and an exec
//!   `command` containing a path separator) against the folder of that file.
//! * [`Kubeconfig::merge`] merges two files: the first to define a cluster/context/user
//!   name wins, `current-context` comes from the first file that sets it.
//! * [`Kubeconfig::load_default`] follows the default loading rules: the `KUBECONFIG`
//!   list (OS path-list separated, empty entries and missing files skipped, duplicates
//!   ignored), else `~/.kube/config`.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

use secrecy::SecretString;
use serde::{Deserialize, Deserializer, Serialize};

use super::error::ConfigError;

/// The `KUBECONFIG` environment variable.
pub const KUBECONFIG_ENV: &str = "KUBECONFIG";

/// A kubeconfig file (`kind: Config`, `apiVersion: v1`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Kubeconfig {
    /// `kind` (normally `Config`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// `apiVersion` (normally `v1`).
    #[serde(
        rename = "apiVersion",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub api_version: Option<String>,
    /// `preferences`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferences: Option<Preferences>,
    /// `clusters`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub clusters: Vec<NamedCluster>,
    /// `users` (client-go's `AuthInfos`).
    #[serde(default, deserialize_with = "null_as_default")]
    pub users: Vec<NamedAuthInfo>,
    /// `contexts`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub contexts: Vec<NamedContext>,
    /// `current-context`.
    #[serde(
        rename = "current-context",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub current_context: Option<String>,
    /// `extensions`.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub extensions: Vec<NamedExtension>,
}

/// `preferences` of a kubeconfig.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Preferences {
    /// `colors`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub colors: Option<bool>,
    /// `extensions`.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub extensions: Vec<NamedExtension>,
}

/// A named extension (arbitrary JSON/YAML object).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct NamedExtension {
    /// `name`.
    pub name: String,
    /// `extension`.
    #[serde(default)]
    pub extension: serde_json::Value,
}

/// An entry of `clusters`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct NamedCluster {
    /// `name`.
    pub name: String,
    /// `cluster`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub cluster: Cluster,
}

/// A cluster: where the API server is and how to trust it. Its `Debug` hides the user
/// information of `server` and `proxy-url` (`user:password@`).
#[derive(Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Cluster {
    /// `server`: the API server URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// `tls-server-name`: the server name used for SNI and certificate verification.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_server_name: Option<String>,
    /// `insecure-skip-tls-verify`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub insecure_skip_tls_verify: Option<bool>,
    /// `certificate-authority`: path of a PEM CA bundle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate_authority: Option<String>,
    /// `certificate-authority-data`: base64 of a PEM CA bundle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate_authority_data: Option<String>,
    /// `proxy-url`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_url: Option<String>,
    /// `disable-compression`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_compression: Option<bool>,
    /// `extensions`.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub extensions: Vec<NamedExtension>,
}

/// An entry of `contexts`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct NamedContext {
    /// `name`.
    pub name: String,
    /// `context`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub context: Context,
}

/// A context: a cluster, a user and a default namespace.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Context {
    /// `cluster`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub cluster: String,
    /// `user`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub user: String,
    /// `namespace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// `extensions`.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub extensions: Vec<NamedExtension>,
}

/// An entry of `users`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct NamedAuthInfo {
    /// `name`.
    pub name: String,
    /// `user`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub user: AuthInfo,
}

/// A user: how to authenticate. Secret fields are held in [`SecretString`]s and
/// never printed by `Debug`.
#[derive(Clone, Default, Serialize, Deserialize)]
pub struct AuthInfo {
    /// `client-certificate`: path of a PEM client certificate (chain).
    #[serde(
        rename = "client-certificate",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub client_certificate: Option<String>,
    /// `client-certificate-data`: base64 of a PEM client certificate (chain).
    #[serde(
        rename = "client-certificate-data",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub client_certificate_data: Option<String>,
    /// `client-key`: path of a PEM private key.
    #[serde(
        rename = "client-key",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub client_key: Option<String>,
    /// `client-key-data`: base64 of a PEM private key (secret).
    #[serde(
        rename = "client-key-data",
        default,
        with = "secret_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub client_key_data: Option<SecretString>,
    /// `token`: a bearer token (secret).
    #[serde(default, with = "secret_opt", skip_serializing_if = "Option::is_none")]
    pub token: Option<SecretString>,
    /// `tokenFile`: path of a file holding a bearer token (re-read when it rotates).
    #[serde(rename = "tokenFile", default, skip_serializing_if = "Option::is_none")]
    pub token_file: Option<String>,
    /// `as`: user to impersonate.
    #[serde(rename = "as", default, skip_serializing_if = "Option::is_none")]
    pub impersonate: Option<String>,
    /// `as-uid`: UID to impersonate.
    #[serde(rename = "as-uid", default, skip_serializing_if = "Option::is_none")]
    pub impersonate_uid: Option<String>,
    /// `as-groups`: groups to impersonate.
    #[serde(
        rename = "as-groups",
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub impersonate_groups: Vec<String>,
    /// `as-user-extra`: extra fields to impersonate.
    #[serde(
        rename = "as-user-extra",
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub impersonate_user_extra: BTreeMap<String, Vec<String>>,
    /// `username` for basic authentication.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// `password` for basic authentication (secret).
    #[serde(default, with = "secret_opt", skip_serializing_if = "Option::is_none")]
    pub password: Option<SecretString>,
    /// `auth-provider` (legacy; only `oidc` with an `id-token` is honoured).
    #[serde(
        rename = "auth-provider",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub auth_provider: Option<AuthProviderConfig>,
    /// `exec`: a credential plugin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec: Option<KubeconfigExec>,
    /// `extensions`.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub extensions: Vec<NamedExtension>,
}

const REDACTED: &str = "[redacted]";

impl fmt::Debug for Cluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cluster")
            .field("server", &self.server.as_deref().map(super::redact_url))
            .field("tls_server_name", &self.tls_server_name)
            .field("insecure_skip_tls_verify", &self.insecure_skip_tls_verify)
            .field("certificate_authority", &self.certificate_authority)
            .field(
                "certificate_authority_data",
                &self.certificate_authority_data.as_ref().map(|d| d.len()),
            )
            .field(
                "proxy_url",
                &self.proxy_url.as_deref().map(super::redact_url),
            )
            .field("disable_compression", &self.disable_compression)
            .field("extensions", &self.extensions)
            .finish()
    }
}

fn redact_opt<T>(v: &Option<T>) -> Option<&'static str> {
    v.as_ref().map(|_| REDACTED)
}

impl fmt::Debug for AuthInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthInfo")
            .field("client_certificate", &self.client_certificate)
            .field(
                "client_certificate_data",
                &self
                    .client_certificate_data
                    .as_ref()
                    .map(|d| format!("<{} bytes>", d.len())),
            )
            .field("client_key", &self.client_key)
            .field("client_key_data", &redact_opt(&self.client_key_data))
            .field("token", &redact_opt(&self.token))
            .field("token_file", &self.token_file)
            .field("impersonate", &self.impersonate)
            .field("impersonate_uid", &self.impersonate_uid)
            .field("impersonate_groups", &self.impersonate_groups)
            .field("impersonate_user_extra", &self.impersonate_user_extra)
            .field("username", &self.username)
            .field("password", &redact_opt(&self.password))
            .field("auth_provider", &self.auth_provider)
            .field("exec", &self.exec)
            .field("extensions", &self.extensions)
            .finish()
    }
}

/// `auth-provider` of a user. Its `config` values (tokens, secrets) are never printed.
#[derive(Clone, Default, Serialize, Deserialize)]
pub struct AuthProviderConfig {
    /// `name`, e.g. `oidc`.
    pub name: String,
    /// `config`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub config: BTreeMap<String, String>,
}

impl fmt::Debug for AuthProviderConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys: BTreeMap<&str, &str> =
            self.config.keys().map(|k| (k.as_str(), REDACTED)).collect();
        f.debug_struct("AuthProviderConfig")
            .field("name", &self.name)
            .field("config", &keys)
            .finish()
    }
}

/// The `exec` section of a user, as written in a kubeconfig.
#[derive(Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeconfigExec {
    /// `apiVersion`: `client.authentication.k8s.io/v1` or `client.authentication.k8s.io/v1beta1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// `command`.
    #[serde(default)]
    pub command: String,
    /// `args`.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub args: Vec<String>,
    /// `env`.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub env: Vec<ExecEnvVar>,
    /// `installHint`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_hint: Option<String>,
    /// `provideClusterInfo`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub provide_cluster_info: bool,
    /// `interactiveMode`: `Never`, `IfAvailable` or `Always`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interactive_mode: Option<String>,
}

impl fmt::Debug for KubeconfigExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Like client-go, never print args or env values: they may carry secrets.
        let env_names: Vec<&str> = self.env.iter().map(|e| e.name.as_str()).collect();
        f.debug_struct("KubeconfigExec")
            .field("api_version", &self.api_version)
            .field("command", &self.command)
            .field("args", &format_args!("[{} redacted]", self.args.len()))
            .field("env", &env_names)
            .field("install_hint", &self.install_hint)
            .field("provide_cluster_info", &self.provide_cluster_info)
            .field("interactive_mode", &self.interactive_mode)
            .finish()
    }
}

/// An `env` entry of an exec plugin.
#[derive(Clone, Default, Serialize, Deserialize)]
pub struct ExecEnvVar {
    /// `name`.
    pub name: String,
    /// `value`.
    #[serde(default)]
    pub value: String,
}

impl fmt::Debug for ExecEnvVar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExecEnvVar")
            .field("name", &self.name)
            .field("value", &REDACTED)
            .finish()
    }
}

/// Deserialize `null` as the default value.
fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// (De)serialize `Option<SecretString>` as an optional plain string.
mod secret_opt {
    use secrecy::{ExposeSecret, SecretString};
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<SecretString>, D::Error> {
        Ok(Option::<String>::deserialize(d)?.map(SecretString::from))
    }

    pub(super) fn serialize<S: Serializer>(
        v: &Option<SecretString>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match v {
            Some(secret) => s.serialize_some(secret.expose_secret()),
            None => s.serialize_none(),
        }
    }
}

impl Kubeconfig {
    /// Parse a kubeconfig from YAML. Relative paths are left as they are.
    ///
    /// An empty document (or one holding only comments) is an empty kubeconfig, like
    /// in client-go.
    pub fn from_yaml(s: &str) -> Result<Self, ConfigError> {
        parse_yaml(s, None)
    }

    /// Read one kubeconfig file and resolve its relative paths against its folder.
    pub fn read_from(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::ReadFile {
            what: "kubeconfig",
            path: path.to_owned(),
            source,
        })?;
        let mut kc = parse_yaml(&text, Some(path))?;
        let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
        if let Some(dir) = absolute.parent() {
            kc.resolve_relative_paths(dir);
        }
        Ok(kc)
    }

    /// Merge `next` into `self`: entries already in `self` win (by name), as do
    /// `current-context`, `preferences`, `kind` and `apiVersion` when `self` sets them.
    #[must_use]
    pub fn merge(mut self, next: Kubeconfig) -> Kubeconfig {
        fn merge_named<T>(into: &mut Vec<T>, from: Vec<T>, name: impl Fn(&T) -> &str) {
            for item in from {
                if !into.iter().any(|existing| name(existing) == name(&item)) {
                    into.push(item);
                }
            }
        }
        merge_named(&mut self.clusters, next.clusters, |c| &c.name);
        merge_named(&mut self.users, next.users, |u| &u.name);
        merge_named(&mut self.contexts, next.contexts, |c| &c.name);
        merge_named(&mut self.extensions, next.extensions, |e| &e.name);
        if self.current_context.as_deref().is_none_or(str::is_empty)
            && next
                .current_context
                .as_deref()
                .is_some_and(|c| !c.is_empty())
        {
            self.current_context = next.current_context;
        }
        match (&mut self.preferences, next.preferences) {
            (None, p) => self.preferences = p,
            (Some(mine), Some(theirs)) => {
                if mine.colors.is_none() {
                    mine.colors = theirs.colors;
                }
                merge_named(&mut mine.extensions, theirs.extensions, |e| &e.name);
            }
            (Some(_), None) => {}
        }
        if self.kind.is_none() {
            self.kind = next.kind;
        }
        if self.api_version.is_none() {
            self.api_version = next.api_version;
        }
        self
    }

    /// Load with the default rules: the files listed in `KUBECONFIG` (merged, first
    /// wins; missing files and empty entries skipped), else `~/.kube/config`.
    pub fn load_default() -> Result<Kubeconfig, ConfigError> {
        Self::load_default_with(std::env::var_os(KUBECONFIG_ENV), home_dir())
    }

    /// The default loading rules with an explicit `KUBECONFIG` value and home folder.
    pub(crate) fn load_default_with(
        kubeconfig_env: Option<OsString>,
        home: Option<PathBuf>,
    ) -> Result<Kubeconfig, ConfigError> {
        match kubeconfig_env.filter(|v| !v.is_empty()) {
            Some(list) => {
                let paths: Vec<PathBuf> = std::env::split_paths(&list)
                    .filter(|p| !p.as_os_str().is_empty())
                    .collect();
                Self::load_from_paths(&paths)
            }
            None => {
                let Some(home) = home else {
                    return Err(ConfigError::KubeconfigNotFound(
                        "KUBECONFIG is not set and the home folder is unknown".to_owned(),
                    ));
                };
                let path = home.join(".kube").join("config");
                if !path.exists() {
                    return Err(ConfigError::KubeconfigNotFound(format!(
                        "KUBECONFIG is not set and {} does not exist",
                        path.display()
                    )));
                }
                Self::read_from(&path)
            }
        }
    }

    /// Read and merge the given files in order (first wins). Missing files are
    /// skipped; if none exists, [`ConfigError::KubeconfigNotFound`] is returned.
    pub fn load_from_paths(paths: &[PathBuf]) -> Result<Kubeconfig, ConfigError> {
        let mut merged: Option<Kubeconfig> = None;
        let mut seen: Vec<&PathBuf> = Vec::new();
        for path in paths {
            if path.as_os_str().is_empty() || seen.contains(&path) {
                continue;
            }
            seen.push(path);
            if !path.exists() {
                tracing::debug!(path = %path.display(), "skipping missing kubeconfig file");
                continue;
            }
            let kc = Self::read_from(path)?;
            merged = Some(match merged {
                Some(m) => m.merge(kc),
                None => kc,
            });
        }
        merged.ok_or_else(|| {
            let list: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
            ConfigError::KubeconfigNotFound(format!(
                "none of the files in KUBECONFIG exist: [{}]",
                list.join(", ")
            ))
        })
    }

    /// Resolve relative file references against `dir`, the folder of the file that
    /// defined them.
    pub fn resolve_relative_paths(&mut self, dir: &Path) {
        fn resolve(p: &mut Option<String>, dir: &Path) {
            if let Some(s) = p
                && !s.is_empty()
                && Path::new(s.as_str()).is_relative()
            {
                *s = dir.join(s.as_str()).to_string_lossy().into_owned();
            }
        }
        for c in &mut self.clusters {
            resolve(&mut c.cluster.certificate_authority, dir);
        }
        for u in &mut self.users {
            resolve(&mut u.user.client_certificate, dir);
            resolve(&mut u.user.client_key, dir);
            resolve(&mut u.user.token_file, dir);
            if let Some(exec) = &mut u.user.exec
                && exec.command.contains(std::path::is_separator)
                && Path::new(&exec.command).is_relative()
            {
                exec.command = dir.join(&exec.command).to_string_lossy().into_owned();
            }
        }
    }

    /// The cluster with this name.
    pub fn cluster(&self, name: &str) -> Option<&Cluster> {
        self.clusters
            .iter()
            .find(|c| c.name == name)
            .map(|c| &c.cluster)
    }

    /// The context with this name.
    pub fn context(&self, name: &str) -> Option<&Context> {
        self.contexts
            .iter()
            .find(|c| c.name == name)
            .map(|c| &c.context)
    }

    /// The user with this name.
    pub fn user(&self, name: &str) -> Option<&AuthInfo> {
        self.users.iter().find(|u| u.name == name).map(|u| &u.user)
    }

    /// Serialize to YAML (secrets included: handle the result with care).
    pub fn to_yaml(&self) -> Result<String, ConfigError> {
        serde_saphyr::to_string(self).map_err(|e| ConfigError::Invalid(e.to_string()))
    }
}

/// The user's home folder (`HOME`, else `USERPROFILE`).
pub(crate) fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var_os("USERPROFILE").filter(|h| !h.is_empty()))
        .map(PathBuf::from)
}

fn is_blank_yaml(s: &str) -> bool {
    s.lines().all(|line| {
        let t = line.trim();
        t.is_empty() || t.starts_with('#') || t == "---" || t == "..."
    })
}

fn parse_yaml(s: &str, path: Option<&Path>) -> Result<Kubeconfig, ConfigError> {
    if is_blank_yaml(s) {
        return Ok(Kubeconfig::default());
    }
    serde_saphyr::from_str::<Kubeconfig>(s).map_err(|err| {
        // Render without a source snippet: snippets could echo secrets from the file.
        let plain = err.without_snippet();
        let options = serde_saphyr::render_options! {
            snippets: serde_saphyr::SnippetMode::Off,
        };
        let location = plain
            .location()
            .map(|l| (l.line(), l.column()))
            .filter(|(l, _)| *l > 0);
        let mut message = plain.render_with_options(options);
        if let Some((line, column)) = location {
            // The location is reported separately.
            let suffix = format!(" at line {line}, column {column}");
            if message.ends_with(&suffix) {
                message.truncate(message.len() - suffix.len());
            }
        }
        ConfigError::Yaml {
            path: path.map(Path::to_owned),
            location,
            message,
        }
    })
}
