//! `#[derive(CustomResource)]` for kubewright.
//!
//! Use it through the facade crate, `kubewright::CustomResource` (feature `derive`, on by
//! default): the generated code refers to `::kubewright::…` paths, and the schema support
//! it calls lives in `kubewright::crd`. The facade's documentation has runnable examples;
//! this page is the attribute reference.
//!
//! # What it generates
//!
//! Put the derive on the *spec* struct of a custom resource. For
//! `#[kube(group = "example.com", version = "v1", kind = "Monitor")] struct MonitorSpec`
//! it generates:
//!
//! - `pub struct Monitor { pub metadata: ObjectMeta, pub spec: MonitorSpec, pub status:
//!   Option<MonitorStatus> }` (`status` only with `status = "…"`), deriving
//!   `Deserialize`, `Clone`, `Debug` (plus any `derive = "…"`) and implementing `Serialize`
//!   by hand so that `apiVersion` and `kind` are always written;
//! - `Monitor::new(name, spec)`, `Monitor::crd()` (a
//!   `CustomResourceDefinition`, apiextensions v1; panics if the schema cannot be made
//!   structural), `Monitor::try_crd()` (the same as a `Result`), `Monitor::crd_name()`
//!   (`<plural>.<group>`), `Monitor::api_resource()` and `Monitor::short_names()`;
//! - `k8s_openapi::Resource`, `k8s_openapi::ListableResource` and
//!   `k8s_openapi::Metadata<Ty = ObjectMeta>`, which give `kubewright_core::Resource`
//!   through its blanket impl, so `Api<Monitor>`, informers and controllers work;
//! - `kubewright::crd::CustomResourceExt` for generic code.
//!
//! The spec (and status) types must implement `Serialize`, `Deserialize`, `Clone`,
//! `Debug` and `schemars::JsonSchema` (schemars 1.x).
//!
//! # Why `#[kube(...)]`
//!
//! The attribute is named `kube`, exactly like kube-rs's derive, and accepts the same keys
//! (plus a few more), so moving a type from kube-rs is a change of imports. The keys that
//! kube-rs has and kubewright lacks are reported as unknown at compile time.
//!
//! # Attribute reference
//!
//! | key | value | meaning |
//! |---|---|---|
//! | `group` | `"example.com"` | API group (required) |
//! | `version` | `"v1"` | API version (required; `v1`, `v1beta2`, `v2alpha1`, …) |
//! | `kind` | `"Monitor"` | kind, also the name of the generated struct (required) |
//! | `namespaced` | flag or bool | namespaced scope (default: cluster-scoped) |
//! | `status` | `"MonitorStatus"` | status type: adds the `status` field and subresource |
//! | `plural` | `"monitors"` | plural (default: English plural of the lowercased kind) |
//! | `singular` | `"monitor"` | singular (default: lowercased kind) |
//! | `shortname` | `"mon"` | short name; repeatable |
//! | `category` | `"all"` | category; repeatable |
//! | `printcolumn` | `(name = "Target", json_path = ".spec.target", type = "string", priority = 1, description = "…", format = "…")` | printer column; repeatable; `type` defaults to `string`; kube-rs's JSON string form `printcolumn = r#"{"name":…,"jsonPath":…,"type":…}"#` is accepted too |
//! | `scale` | `(spec = ".spec.replicas", status = ".status.replicas", label_selector = ".status.selector")` | scale subresource; kube-rs's JSON string form is accepted too |
//! | `selectable_field` | `".spec.target"` | field usable in field selectors; repeatable |
//! | `served` | bool (default true) | whether this version is served |
//! | `storage` | bool (default true) | whether this version is the storage version |
//! | `deprecated` | flag, bool or `"warning text"` | marks the version deprecated |
//! | `deprecation_warning` | `"text"` | warning returned to clients (implies `deprecated`) |
//! | `derive` | `"PartialEq"` | extra derive on the generated struct; repeatable |
//! | `validation` | `"self.min <= self.max"` or `(rule = "…", message = "…", reason = "…", field_path = "…", message_expression = "…")` | CEL rule added to the spec's `x-kubernetes-validations`; repeatable |
//! | `crates` | `(kubewright = ::kubewright, kubewright_core = ::kubewright_core, k8s_openapi = ::k8s_openapi, schemars = ::schemars, serde = ::serde, serde_json = ::serde_json)` | paths used by the generated code (defaults: `::kubewright` and its re-exports) |
//!
//! Several `#[kube(...)]` attributes may be combined; each key except the repeatable ones
//! may appear once. Names, versions, paths, printer column types and validation reasons
//! are checked at compile time.
//!
//! # The schema
//!
//! The CRD's `openAPIV3Schema` is `{type: object, properties: {spec, status}, required:
//! [spec]}` (no `apiVersion`/`kind`/`metadata`, as the API server supplies those). The spec
//! and status schemas come from schemars 1.x (`SchemaSettings::openapi3()`) and are
//! rewritten into Kubernetes structural schemas by `kubewright::crd::schema` (its module
//! documentation lists every rule); `#[serde(default)]` values, schemars' `range`,
//! `length` and `regex` attributes and descriptions from doc comments are kept. Schemas that
//! cannot be made structural (recursive types, enums mixing unit and data variants, …) make
//! `try_crd()` return an error naming the field.
//!
//! Server-side apply markers and CEL rules go on fields or types with schemars' `extend`:
//! `#[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" =
//! ["name"]))]`, `#[schemars(extend("x-kubernetes-validations" = [{"rule": "self.a <
//! self.b", "message": "…"}]))]`; `#[kube(validation = "…")]` adds a rule to the spec.

mod attrs;
mod codegen;
mod json;
mod names;

use proc_macro::TokenStream;

/// Derives a Kubernetes custom resource from its spec struct; see the crate documentation
/// for the `#[kube(...)]` attribute reference.
#[proc_macro_derive(CustomResource, attributes(kube))]
pub fn derive_custom_resource(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    match codegen::expand(input) {
        Ok(tokens) => tokens.into(),
        Err(err) => err.to_compile_error().into(),
    }
}
