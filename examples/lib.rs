//! Shared pieces of the examples and of `kw demo`: the `Monitor` custom resource and a
//! helper that connects to a cluster or starts the embedded API server.

pub mod monitor;

use kubewright::Client;
use kubewright::apiserver::TestServer;
use kubewright::client::config::{KubeConfigOptions, Kubeconfig};

/// Errors of the example helpers.
#[derive(Debug, thiserror::Error)]
pub enum ExampleError {
    /// The embedded server could not start.
    #[error("embedded API server: {0}")]
    Server(#[from] kubewright::apiserver::ServeError),
    /// Configuration or client error.
    #[error(transparent)]
    Client(#[from] kubewright::Error),
    /// Configuration error.
    #[error(transparent)]
    Config(#[from] kubewright::client::config::ConfigError),
}

/// A client for `KUBECONFIG` / `--kubeconfig` when given, else for a freshly started
/// embedded API server (kept alive by the returned guard).
pub struct Connection {
    /// The client.
    pub client: Client,
    /// Its configuration (to build more clients, e.g. without rate limiting).
    pub config: kubewright::Config,
    /// The embedded server, when one was started.
    pub server: Option<TestServer>,
}

impl Connection {
    /// Connects: `kubeconfig` (a path) when set, else the embedded server.
    pub async fn open(kubeconfig: Option<&str>) -> Result<Self, ExampleError> {
        match kubeconfig.filter(|p| !p.is_empty()) {
            Some(path) => {
                let kc = Kubeconfig::read_from(path)?;
                let config =
                    kubewright::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())?;
                Ok(Self {
                    client: Client::new(config.clone())?,
                    config,
                    server: None,
                })
            }
            None => {
                let server = TestServer::start().await?;
                let kc = Kubeconfig::from_yaml(&server.kubeconfig())?;
                let config =
                    kubewright::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())?;
                Ok(Self {
                    client: Client::new(config.clone())?,
                    config,
                    server: Some(server),
                })
            }
        }
    }

    /// Connects using the `KUBECONFIG` environment variable when set.
    pub async fn from_env() -> Result<Self, ExampleError> {
        let kc = std::env::var("KUBECONFIG").ok();
        Self::open(kc.as_deref()).await
    }

    /// Where this connection points, for messages.
    pub fn describe(&self) -> String {
        match &self.server {
            Some(s) => format!("embedded API server at {}", s.url()),
            None => "the cluster from the kubeconfig".to_string(),
        }
    }
}

/// The guides under `docs/`, compiled as doc tests so their examples stay true.
pub mod guides {
    #[doc = include_str!("../README.md")]
    pub mod readme {}
    #[doc = include_str!("../docs/config-and-auth.md")]
    pub mod config_and_auth {}
    #[doc = include_str!("../docs/testing.md")]
    pub mod testing {}
    #[doc = include_str!("../docs/migrating-from-kube-rs.md")]
    pub mod migrating_from_kube_rs {}
    #[doc = include_str!("../docs/informers-and-workqueues.md")]
    pub mod informers_and_workqueues {}
    #[doc = include_str!("../docs/controllers.md")]
    pub mod controllers {}
    #[doc = include_str!("../docs/performance.md")]
    pub mod performance {}
}
