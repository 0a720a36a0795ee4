//! In-cluster configuration (client-go `rest.InClusterConfig`).

use std::path::Path;

use super::auth::Auth;
use super::error::ConfigError;
use super::tls::certs_from_pem;
use super::{Config, parse_cluster_url};

/// Where the service account credentials are mounted in a pod.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The API server host variable.
pub const SERVICE_HOST_ENV: &str = "KUBERNETES_SERVICE_HOST";
/// The API server port variable.
pub const SERVICE_PORT_ENV: &str = "KUBERNETES_SERVICE_PORT";

impl Config {
    /// The configuration of a pod: API server from `KUBERNETES_SERVICE_HOST` /
    /// `KUBERNETES_SERVICE_PORT`, credentials from [`SERVICE_ACCOUNT_DIR`].
    pub fn incluster() -> Result<Self, ConfigError> {
        Self::incluster_from(|name| std::env::var(name).ok(), SERVICE_ACCOUNT_DIR)
    }

    /// [`Config::incluster`] with an explicit environment lookup and credentials folder
    /// (holding `token`, `ca.crt` and optionally `namespace`).
    ///
    /// The token is used as [`Auth::TokenFile`], so rotated tokens are picked up.
    pub fn incluster_from(
        env: impl Fn(&str) -> Option<String>,
        dir: impl AsRef<Path>,
    ) -> Result<Self, ConfigError> {
        let dir = dir.as_ref();
        let var = |name: &'static str| {
            env(name)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
                .ok_or(ConfigError::InClusterEnv(name))
        };
        let host = var(SERVICE_HOST_ENV)?;
        let port = var(SERVICE_PORT_ENV)?;
        let host = if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]")
        } else {
            host
        };
        let url = parse_cluster_url(&format!("https://{host}:{port}"), "in-cluster server")?;

        let token_path = dir.join("token");
        // Fail early (like client-go) when the token is not mounted.
        std::fs::metadata(&token_path).map_err(|source| ConfigError::ReadFile {
            what: "service account token",
            path: token_path.clone(),
            source,
        })?;

        let ca_path = dir.join("ca.crt");
        let ca = std::fs::read(&ca_path).map_err(|source| ConfigError::ReadFile {
            what: "service account CA bundle",
            path: ca_path.clone(),
            source,
        })?;
        let root_certs = certs_from_pem(&ca, &ca_path.display().to_string())?;

        let namespace_path = dir.join("namespace");
        let namespace = match std::fs::read_to_string(&namespace_path) {
            Ok(ns) if !ns.trim().is_empty() => ns.trim().to_owned(),
            Ok(_) => "default".to_owned(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => "default".to_owned(),
            Err(source) => {
                return Err(ConfigError::ReadFile {
                    what: "service account namespace",
                    path: namespace_path,
                    source,
                });
            }
        };

        let mut config = Config::new(url);
        config.default_namespace = namespace;
        config.root_certs = Some(root_certs);
        config.auth = Auth::TokenFile(token_path);
        Ok(config)
    }
}
