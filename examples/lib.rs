//! Shared pieces of the examples and of `kw demo`: the `Monitor` custom resource, a
//! helper that connects to a cluster or starts the embedded API server, and the demo's
//! scenario itself ([`demo::run`]).

pub mod backup;
mod cutter;
pub mod demo;
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

/// The exit status of an example, after printing its error for a person: `error:` and
/// the error's `Display` text, then each further cause (its
/// [`source`](std::error::Error::source) chain) that the text does not already
/// include, e.g.
///
/// ```text
/// error: HTTP request to http://127.0.0.1:1/api/v1/namespaces/default/pods failed: tcp connect error: Connection refused (os error 111)
/// ```
///
/// rather than the `Debug` form (`Error: Config(ContextNotFound("nope"))`) that
/// returning a `Result` from `main` prints.
pub fn exit_code(result: Result<(), Box<dyn std::error::Error>>) -> std::process::ExitCode {
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{}", error_report(&*e));
            std::process::ExitCode::FAILURE
        }
    }
}

/// `error: <message>` followed by one `  caused by: <cause>` line per cause that the
/// message does not already tell: causes whose text it contains, and the wrappers
/// above them, are left out.
pub fn error_report(e: &(dyn std::error::Error + 'static)) -> String {
    let mut causes = Vec::new();
    let mut next = e.source();
    while let Some(cause) = next {
        causes.push(cause.to_string());
        next = cause.source();
    }
    let mut out = format!("error: {e}");
    let told = causes.iter().rposition(|c| out.contains(c.as_str()));
    for cause in causes.iter().skip(told.map_or(0, |i| i + 1)) {
        out.push_str("\n  caused by: ");
        out.push_str(cause);
    }
    out
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
    #[doc = include_str!("../docs/pod-io.md")]
    pub mod pod_io {}
    #[doc = include_str!("../docs/kubelet.md")]
    pub mod kubelet {}
    #[doc = include_str!("../docs/first-operator.md")]
    pub mod first_operator {}
    #[doc = include_str!("../docs/security.md")]
    pub mod security {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_reported_with_display_and_new_causes_only() {
        let e = ExampleError::Config(kubewright::client::config::ConfigError::ContextNotFound(
            "nope".into(),
        ));
        assert_eq!(
            error_report(&e),
            "error: context \"nope\" not found in kubeconfig"
        );
        let e = ExampleError::Config(kubewright::client::config::ConfigError::ReadFile {
            what: "kubeconfig",
            path: "/no/such/file".into(),
            source: std::io::Error::other("disk on fire"),
        });
        // The I/O error is already part of the message: not repeated.
        assert_eq!(
            error_report(&e),
            "error: failed to read kubeconfig \"/no/such/file\": disk on fire"
        );
        #[derive(Debug, thiserror::Error)]
        #[error("outer")]
        struct Outer(#[source] std::io::Error);
        assert_eq!(
            error_report(&Outer(std::io::Error::other("inner"))),
            "error: outer\n  caused by: inner"
        );
        // A message that already tells the root cause hides the wrappers above it.
        #[derive(Debug, thiserror::Error)]
        #[error("wrapper")]
        struct Wrapper(#[source] std::io::Error);
        #[derive(Debug, thiserror::Error)]
        #[error("request failed: refused")]
        struct Told(#[source] Wrapper);
        assert_eq!(
            error_report(&Told(Wrapper(std::io::Error::other("refused")))),
            "error: request failed: refused"
        );
    }
}
