//! An embedded, in-process Kubernetes-compatible API server.
//!
//! It speaks the Kubernetes HTTP API closely enough for kubectl and kubewright's client:
//! every GA built-in resource, discovery (legacy and aggregated), CRUD with real metadata
//! semantics, the four patch kinds, list pagination, watches with bookmarks and 410s,
//! CustomResourceDefinitions, namespace lifecycle and garbage collection.
//!
//! It never uses kubewright's client, so client bugs cannot hide server bugs.

mod auth;
mod controllers;
mod crd;
mod error;
/// Entry points for the fuzz targets in `fuzz/`; not an API.
#[doc(hidden)]
pub mod fuzzing;
mod http;
mod kubelet;
mod openapi;
mod private_files;
mod protobuf;
mod registry;
mod storage;

pub use crate::auth::rbac::UserInfo;
pub use crate::auth::token_file::{TokenFileError, TokenUser, parse as parse_token_file};
pub use crate::http::api::{ApiServer, ServerOptions};
pub use crate::http::limits::Limits;
pub use crate::http::server::{ServeError, ServerBuilder, ServerTask, TestServer, TlsMaterial};
pub use crate::kubelet::{
    ContainerRef, DEFAULT_MAX_STREAMING_SESSIONS, DEFAULT_NODE, DEFAULT_STREAMING_IDLE_TIMEOUT,
    ExecHandler, ExecSession, Kubelet, LogSource, Output, PodRef, PortForwarder, PortTarget,
    SessionKind, Stdin, TerminalSize,
};
pub use crate::private_files::write_private;
pub use crate::storage::CorruptLog;
