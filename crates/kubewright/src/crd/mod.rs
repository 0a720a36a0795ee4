//! Custom resource definitions: the support behind `#[derive(CustomResource)]`.
//!
//! - [`CustomResourceExt`]: what every derived custom resource type offers (its CRD, CRD
//!   name, [`ApiResource`], short names) for generic code.
//! - [`structural_schema`] / `schema_for` (feature `derive`): turn a schemars schema
//!   into a Kubernetes structural schema; the rewrite rules are listed in the
//!   [`schema`] module.
//! - [`structural_violations`]: check that a schema is structural (and that its
//!   server-side-apply list markers are consistent).
//! - [`merge_crds`]: one CRD out of several versions of a kind.
//!
//! # Server-side apply markers and CEL validation rules
//!
//! schemars 1.x's `extend` attribute adds any key to a field's or a type's schema, and the
//! structural rewrite keeps every `x-kubernetes-*` key:
//!
//! ```
//! # use kubewright::schemars::{self, JsonSchema};
//! # use serde::{Deserialize, Serialize};
//! #[derive(Serialize, Deserialize, Clone, Debug, JsonSchema)]
//! #[schemars(crate = "kubewright::schemars")]
//! // A CEL rule on a type (evaluated by a real API server; the embedded one skips CEL).
//! #[schemars(extend("x-kubernetes-validations" = [{"rule": "self.min <= self.max", "message": "min must not exceed max"}]))]
//! struct Range {
//!     min: i32,
//!     max: i32,
//! }
//!
//! #[derive(Serialize, Deserialize, Clone, Debug, JsonSchema)]
//! #[schemars(crate = "kubewright::schemars")]
//! struct Port {
//!     name: String,
//!     port: u16,
//! }
//!
//! #[derive(Serialize, Deserialize, Clone, Debug, JsonSchema)]
//! #[schemars(crate = "kubewright::schemars")]
//! struct Spec {
//!     range: Range,
//!     /// A list merged by `name` under server-side apply.
//!     #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
//!     ports: Vec<Port>,
//!     /// A CEL rule on a field.
//!     #[schemars(extend("x-kubernetes-validations" = [{"rule": "self.size() <= 3"}]))]
//!     tags: Vec<String>,
//! }
//!
//! let s = kubewright::crd::schema_for::<Spec>().unwrap();
//! assert_eq!(s["properties"]["ports"]["x-kubernetes-list-type"], "map");
//! assert_eq!(s["properties"]["range"]["x-kubernetes-validations"][0]["rule"], "self.min <= self.max");
//! assert!(kubewright::crd::structural_violations(&s).is_empty());
//! ```
//!
//! On the derive, `#[kube(validation = "rule")]` (or `validation(rule = "…", message =
//! "…")`) adds a rule to the spec's schema without touching the spec type's attributes.

mod merge;
pub mod schema;

pub use merge::{MergeError, merge_crds};
#[cfg(feature = "derive")]
pub use schema::schema_for;
pub use schema::{SchemaError, structural_schema, structural_violations};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kubewright_core::ApiResource;

/// What `#[derive(CustomResource)]` generates, as a trait for generic code (the derived
/// type has the same functions as inherent associated functions).
pub trait CustomResourceExt {
    /// The `CustomResourceDefinition` of this version of the kind.
    ///
    /// # Panics
    ///
    /// When the schema cannot be made structural; see [`CustomResourceExt::try_crd`].
    fn crd() -> CustomResourceDefinition;
    /// The CRD, or why the schema cannot be expressed as a structural schema.
    fn try_crd() -> Result<CustomResourceDefinition, SchemaError>;
    /// `<plural>.<group>`.
    fn crd_name() -> &'static str;
    /// Type information for dynamic APIs.
    fn api_resource() -> ApiResource;
    /// Short names.
    fn short_names() -> &'static [&'static str];
}

#[doc(hidden)]
pub mod __private;
