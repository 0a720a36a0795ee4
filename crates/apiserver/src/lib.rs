//! An embedded, in-process Kubernetes-compatible API server.
//!
//! It speaks the Kubernetes HTTP API closely enough for kubectl and kubewright's client:
//! every GA built-in resource, discovery (legacy and aggregated), CRUD with real metadata
//! semantics, the four patch kinds, list pagination, watches with bookmarks and 410s,
//! CustomResourceDefinitions, namespace lifecycle and garbage collection.
//!
//! It never uses kubewright's client, so client bugs cannot hide server bugs.

mod api;
mod bootstrap;
mod cel;
mod controllers;
mod crd;
mod defaults;
mod delete;
mod discovery;
mod error;
mod extra;
mod fields;
mod filter;
/// Entry points for the fuzz targets in `fuzz/`; not an API.
#[doc(hidden)]
pub mod fuzzing;
mod http;
mod impersonation;
mod limits;
mod meta;
mod openapi;
mod patch;
mod protobuf;
mod rbac;
mod registry;
mod schema;
mod server;
/// SPDY/3.1 for kubectl port-forward.
#[allow(dead_code)] // wired into pods/portforward by the kubelet simulation
mod spdy;
mod storage;
mod table;
mod watch;

pub use api::{ApiServer, ServerOptions};
pub use limits::Limits;
pub use rbac::UserInfo;
pub use server::{ServeError, ServerBuilder, TestServer, TlsMaterial};
