//! Type metadata and metadata-only objects.

use crate::dynamic::ApiResource;
use crate::resource::{Resource, Scope};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// `apiVersion` and `kind` of an object.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TypeMeta {
    /// `v1` or `group/version`.
    #[serde(rename = "apiVersion")]
    pub api_version: String,
    /// Kind.
    pub kind: String,
}

/// An object with only its type and metadata (`meta.k8s.io/v1 PartialObjectMetadata`),
/// as returned by metadata-only requests.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PartialObjectMetadata {
    /// Usually `meta.k8s.io/v1 PartialObjectMetadata`.
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub types: Option<TypeMeta>,
    /// Object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
}

impl Resource for PartialObjectMetadata {
    type DynamicType = ApiResource;

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        Cow::Borrowed(&dt.kind)
    }
    fn group(dt: &ApiResource) -> Cow<'_, str> {
        Cow::Borrowed(&dt.group)
    }
    fn version(dt: &ApiResource) -> Cow<'_, str> {
        Cow::Borrowed(&dt.version)
    }
    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        Cow::Borrowed(&dt.plural)
    }
    fn scope(dt: &ApiResource) -> Scope {
        dt.scope
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}
