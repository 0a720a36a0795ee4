//! Kubernetes client: configuration and auth, HTTP transport, typed and dynamic APIs.

pub mod config;

pub use config::Config;
