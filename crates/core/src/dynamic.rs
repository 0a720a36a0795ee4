//! Objects whose type is known only at run time.

use crate::gvk::{GroupVersionKind, GroupVersionResource};
use crate::metadata::TypeMeta;
use crate::resource::{Resource, Scope};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// Everything needed to address a resource type over the API: group, version, kind,
/// plural and scope. The dynamic type of [`DynamicObject`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ApiResource {
    /// API group; empty for core.
    pub group: String,
    /// Version.
    pub version: String,
    /// `apiVersion` (`v1` or `group/version`).
    pub api_version: String,
    /// Kind.
    pub kind: String,
    /// Plural resource name.
    pub plural: String,
    /// Namespaced or cluster-scoped.
    pub scope: Scope,
}

impl ApiResource {
    /// Describes a static type, e.g. `ApiResource::erase::<Pod>(&())`.
    pub fn erase<K: Resource>(dt: &K::DynamicType) -> Self {
        Self {
            group: K::group(dt).into_owned(),
            version: K::version(dt).into_owned(),
            api_version: K::api_version(dt).into_owned(),
            kind: K::kind(dt).into_owned(),
            plural: K::plural(dt).into_owned(),
            scope: K::scope(dt),
        }
    }

    /// Builds an `ApiResource` from a GVK and an explicit plural.
    pub fn from_gvk_with_plural(gvk: &GroupVersionKind, plural: &str, scope: Scope) -> Self {
        Self {
            group: gvk.group.clone(),
            version: gvk.version.clone(),
            api_version: gvk.api_version(),
            kind: gvk.kind.clone(),
            plural: plural.to_string(),
            scope,
        }
    }

    /// The GVR.
    pub fn gvr(&self) -> GroupVersionResource {
        GroupVersionResource::gvr(&self.group, &self.version, &self.plural)
    }

    /// The GVK.
    pub fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind::gvk(&self.group, &self.version, &self.kind)
    }
}

/// An object of any kind: type meta, object metadata, and the rest as JSON.
///
/// ```
/// use kubewright_core::{DynamicObject, ApiResource, ResourceExt};
/// let obj: DynamicObject = serde_json::from_value(serde_json::json!({
///     "apiVersion": "example.com/v1", "kind": "Monitor",
///     "metadata": {"name": "m1", "namespace": "default"},
///     "spec": {"target": "x"}
/// })).unwrap();
/// assert_eq!(obj.name_any(), "m1");
/// assert_eq!(obj.data["spec"]["target"], "x");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DynamicObject {
    /// `apiVersion` and `kind`, when present.
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub types: Option<TypeMeta>,
    /// Object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Every other top-level field (spec, status, data, ...).
    #[serde(flatten)]
    pub data: serde_json::Value,
}

impl DynamicObject {
    /// A new object of the given type with a name.
    pub fn new(name: &str, resource: &ApiResource) -> Self {
        Self {
            types: Some(TypeMeta {
                api_version: resource.api_version.clone(),
                kind: resource.kind.clone(),
            }),
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                ..Default::default()
            },
            data: serde_json::Value::Object(Default::default()),
        }
    }

    /// Sets the namespace (builder style).
    #[must_use]
    pub fn within(mut self, namespace: &str) -> Self {
        self.metadata.namespace = Some(namespace.to_string());
        self
    }

    /// Replaces the data (builder style); `data` should be a JSON object.
    #[must_use]
    pub fn data(mut self, data: serde_json::Value) -> Self {
        self.data = data;
        self
    }

    /// Converts into a static type by re-decoding.
    pub fn try_parse<K: serde::de::DeserializeOwned>(self) -> Result<K, serde_json::Error> {
        serde_json::from_value(serde_json::to_value(self)?)
    }
}

impl Resource for DynamicObject {
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
    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        Cow::Borrowed(&dt.api_version)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::Deployment;

    #[test]
    fn erase_and_roundtrip() {
        let ar = ApiResource::erase::<Deployment>(&());
        assert_eq!(ar.plural, "deployments");
        assert_eq!(ar.api_version, "apps/v1");
        assert_eq!(
            DynamicObject::url_path(&ar, Some("x")),
            "/apis/apps/v1/namespaces/x/deployments"
        );
        let obj = DynamicObject::new("d", &ar)
            .within("x")
            .data(serde_json::json!({"spec": {"replicas": 2}}));
        let v = serde_json::to_value(&obj).unwrap();
        assert_eq!(v["kind"], "Deployment");
        assert_eq!(v["spec"]["replicas"], 2);
        let d: Deployment = obj.try_parse().unwrap();
        assert_eq!(d.spec.replicas, Some(2));
    }
}
