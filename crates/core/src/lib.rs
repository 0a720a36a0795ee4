//! Core types for kubewright: no I/O, no async.
//!
//! Everything here is shared by the client, the runtime and the embedded API server:
//! the [`Resource`] trait (implemented for every k8s-openapi type and for
//! [`DynamicObject`]), group/version/kind types, lists and watch events, the
//! [`Status`] error body, request parameters, label and field selectors, and object keys.

pub mod conditions;
pub mod dynamic;
pub mod gvk;
pub mod key;
pub mod metadata;
pub mod object;
pub mod params;
pub mod quantity;
pub mod request;
pub mod resource;
pub mod selector;
pub mod status;
pub mod table;
pub mod watch;

pub use dynamic::{ApiResource, DynamicObject};
pub use gvk::{GroupVersion, GroupVersionKind, GroupVersionResource};
pub use key::ObjectKey;
pub use metadata::{PartialObjectMetadata, TypeMeta};
pub use object::ObjectList;
pub use params::{
    DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions, PropagationPolicy,
    ValidationDirective, VersionMatch, WatchParams,
};
pub use request::{Request, RequestError};
pub use resource::{NamespaceScope, Resource, ResourceExt, Scope};
pub use selector::{FieldSelector, LabelSelector, SelectorParseError};
pub use status::{Status, StatusCause, StatusDetails};
pub use table::{Table, TableColumnDefinition, TableRow};
pub use watch::WatchEvent;

/// Re-export of the k8s-openapi crate this version of kubewright is built against.
pub use k8s_openapi;
pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ListMeta, ObjectMeta, OwnerReference};
