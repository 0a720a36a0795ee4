//! kubewright: a Kubernetes client and controller toolkit in the spirit of client-go and
//! controller-runtime, with an embedded API server for tests.
//!
//! This facade re-exports the workspace crates behind features:
//!
//! | feature | default | gives |
//! |---|---|---|
//! | (always) | | [`core`] (`kubewright-core`), [`k8s_openapi`], [`serde`], [`serde_json`], [`Resource`], [`ResourceExt`], [`crd`], [`conditions`] (status conditions) |
//! | `client` | yes | [`client`] (`kubewright-client`), [`Api`], [`Client`], [`Config`], [`Error`] |
//! | `runtime` | yes | [`runtime`] (`kubewright-runtime`): work queues, reflector, store, informers |
//! | `derive` | yes | [`CustomResource`], [`schemars`] |
//! | `k8s-schemars` | yes | `JsonSchema` for the k8s-openapi types (its `schemars` feature), so a spec can hold `IntOrString`, `Quantity`, `Condition`, ...; it roughly doubles k8s-openapi's compile time |
//! | `apiserver` | no | `apiserver` (`kubewright-apiserver`): the embedded API server |
//! | `testing` | no | `testing` (`kubewright-testing`): [`TestEnv`](https://docs.rs/kubewright-testing), the embedded server or a real cluster per test, CRD installation; for `[dev-dependencies]` |
//!
//! Like every library built on k8s-openapi, kubewright enables no Kubernetes version
//! feature: the application picks one (`k8s-openapi = { version = "0.29", features =
//! ["latest"] }`, or `v1_33` … `v1_37`).
//!
//! # Custom resources
//!
//! `#[derive(CustomResource)]` on a spec struct generates the resource type, its
//! `Resource` impls (so it works with [`Api`], informers and controllers) and its
//! `CustomResourceDefinition` with a structural schema. The attribute is `#[kube(...)]`,
//! as in kube-rs, so migrating is a change of imports; the full attribute reference is in
//! [`CustomResource`]'s crate, `kubewright-derive`.
//!
//! ```
//! use kubewright::CustomResource;
//! use kubewright::k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
//! use schemars::JsonSchema;
//! use serde::{Deserialize, Serialize};
//!
//! /// Watches an HTTP endpoint.
//! #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
//! #[kube(group = "example.com", version = "v1", kind = "Monitor", namespaced,
//!        status = "MonitorStatus", shortname = "mon", category = "all",
//!        printcolumn(name = "Target", json_path = ".spec.target", type = "string"),
//!        printcolumn(name = "Ready", json_path = ".status.ready", type = "boolean", priority = 1),
//!        scale(spec = ".spec.replicas", status = ".status.replicas"),
//!        selectable_field = ".spec.target",
//!        validation(rule = "self.intervalSeconds >= 10 || !has(self.timeout)",
//!                   message = "short intervals cannot have a timeout"))]
//! #[serde(rename_all = "camelCase")]
//! pub struct MonitorSpec {
//!     /// URL to probe.
//!     #[schemars(regex(pattern = r"^https?://"))]
//!     pub target: String,
//!     /// Seconds between probes.
//!     #[serde(default = "default_interval")]
//!     #[schemars(range(min = 1, max = 3600))]
//!     pub interval_seconds: u32,
//!     /// Probe timeout: seconds or a string such as "5s".
//!     #[serde(default, skip_serializing_if = "Option::is_none")]
//!     pub timeout: Option<IntOrString>,
//!     /// Parallel probers.
//!     #[serde(default)]
//!     pub replicas: i32,
//! }
//!
//! fn default_interval() -> u32 {
//!     30
//! }
//!
//! #[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
//! pub struct MonitorStatus {
//!     pub ready: bool,
//!     pub replicas: i32,
//! }
//!
//! // The generated type:
//! let m = Monitor::new("web", MonitorSpec {
//!     target: "https://example.com".into(),
//!     interval_seconds: 30,
//!     timeout: None,
//!     replicas: 1,
//! });
//! let json = serde_json::to_value(&m).unwrap();
//! assert_eq!(json["apiVersion"], "example.com/v1");
//! assert_eq!(json["kind"], "Monitor");
//! assert_eq!(serde_json::from_value::<Monitor>(json).unwrap().spec, m.spec);
//!
//! // Its CRD, ready to apply (or print as YAML with serde-saphyr):
//! let crd = Monitor::crd();
//! assert_eq!(Monitor::crd_name(), "monitors.example.com");
//! assert_eq!(crd.spec.scope, "Namespaced");
//! let schema = serde_json::to_value(&crd.spec.versions[0].schema).unwrap();
//! let spec = &schema["openAPIV3Schema"]["properties"]["spec"];
//! assert_eq!(spec["properties"]["intervalSeconds"]["default"], 30);
//! assert_eq!(spec["properties"]["timeout"]["x-kubernetes-int-or-string"], true);
//! assert!(kubewright::crd::structural_violations(&schema["openAPIV3Schema"]).is_empty());
//!
//! // And it is a Resource: `Api<Monitor>` works.
//! # fn api(client: kubewright::Client) {
//! let monitors: kubewright::Api<Monitor> = kubewright::Api::namespaced(client, "default");
//! # let _ = monitors;
//! # }
//! ```
//!
//! The spec (and status) types need `Serialize`, `Deserialize`, `Clone`, `Debug` and
//! `schemars::JsonSchema` (schemars 1.x); depend on `serde` and `schemars` directly, or
//! point their derives at the re-exports with `#[serde(crate = "kubewright::serde")]` and
//! `#[schemars(crate = "kubewright::schemars")]`.

pub use kubewright_core as core;
pub use kubewright_core::conditions;
pub use kubewright_core::k8s_openapi;
pub use kubewright_core::{Resource, ResourceExt};
pub use serde;
pub use serde_json;

#[cfg(feature = "client")]
pub use kubewright_client as client;
#[cfg(feature = "client")]
pub use kubewright_client::{Api, Client, Config, ContentType, Error};

#[cfg(feature = "runtime")]
pub use kubewright_runtime as runtime;

#[cfg(feature = "derive")]
pub use kubewright_derive::CustomResource;
#[cfg(feature = "derive")]
pub use schemars;

#[cfg(feature = "apiserver")]
pub use kubewright_apiserver as apiserver;

#[cfg(feature = "testing")]
pub use kubewright_testing as testing;

pub mod crd;
pub use crd::CustomResourceExt;
