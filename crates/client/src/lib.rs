//! Kubernetes client: configuration and auth, HTTP transport, typed and dynamic APIs.
//!
//! ```no_run
//! # async fn run() -> Result<(), kubewright_client::Error> {
//! use k8s_openapi::api::core::v1::Pod;
//! use kubewright_client::{Api, Client};
//! let client = Client::try_default().await?;
//! let pods: Api<Pod> = Api::default_namespaced(client);
//! for p in pods.list(&Default::default()).await? {
//!     println!("{}", p.metadata.name.unwrap_or_default());
//! }
//! # Ok(()) }
//! ```

pub mod api;
pub mod client;
pub mod config;
pub mod discovery;
pub mod error;
/// Entry points for the fuzz targets in `fuzz/`; not an API.
#[doc(hidden)]
pub mod fuzzing;
pub mod limiter;
pub mod pod;
pub mod proxy;
pub mod skip;
pub mod watch;
mod ws;

pub use api::{Api, DeleteResult};
pub use client::{Client, RequestInfo, RequestObserver};
pub use config::{Config, ContentType};
pub use error::{ConnectError, Error, Result};
pub use kubewright_core as core;
pub use skip::WithoutManagedFields;
