//! The [`Resource`] trait: what every API object type tells the client about itself.

use crate::gvk::{GroupVersionKind, GroupVersionResource};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use std::borrow::Cow;
use std::collections::BTreeMap;

/// Whether a resource lives in a namespace or at the cluster scope.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Objects live in namespaces (`/namespaces/<ns>/<plural>`).
    Namespaced,
    /// Objects are cluster-wide.
    Cluster,
}

/// Maps k8s-openapi's scope marker types to a runtime [`Scope`].
pub trait NamespaceScope {
    /// The scope this marker stands for.
    const SCOPE: Scope;
}
impl NamespaceScope for k8s_openapi::NamespaceResourceScope {
    const SCOPE: Scope = Scope::Namespaced;
}
impl NamespaceScope for k8s_openapi::ClusterResourceScope {
    const SCOPE: Scope = Scope::Cluster;
}

/// An API object type: its group/version/kind, plural, scope and metadata.
///
/// Static types (every k8s-openapi type, derived custom resources) use
/// `DynamicType = ()`; [`DynamicObject`](crate::DynamicObject) carries its type information
/// at run time in an [`ApiResource`](crate::ApiResource).
pub trait Resource {
    /// Run-time type information needed to describe the type (`()` for static types).
    type DynamicType: Clone + Send + Sync + 'static;

    /// Kind, e.g. `ConfigMap`.
    fn kind(dt: &Self::DynamicType) -> Cow<'_, str>;
    /// API group (empty for core).
    fn group(dt: &Self::DynamicType) -> Cow<'_, str>;
    /// Version, e.g. `v1`.
    fn version(dt: &Self::DynamicType) -> Cow<'_, str>;
    /// Plural resource name used in URLs, e.g. `configmaps`.
    fn plural(dt: &Self::DynamicType) -> Cow<'_, str>;
    /// Namespaced or cluster-scoped.
    fn scope(dt: &Self::DynamicType) -> Scope;

    /// `apiVersion` string, e.g. `apps/v1`.
    fn api_version(dt: &Self::DynamicType) -> Cow<'_, str> {
        let group = Self::group(dt);
        if group.is_empty() {
            Self::version(dt)
        } else {
            Cow::Owned(format!("{}/{}", group, Self::version(dt)))
        }
    }

    /// The GVK of this type.
    fn gvk(dt: &Self::DynamicType) -> GroupVersionKind {
        GroupVersionKind::gvk(&Self::group(dt), &Self::version(dt), &Self::kind(dt))
    }

    /// The GVR of this type.
    fn gvr(dt: &Self::DynamicType) -> GroupVersionResource {
        GroupVersionResource::gvr(&Self::group(dt), &Self::version(dt), &Self::plural(dt))
    }

    /// The collection URL path, e.g. `/api/v1/namespaces/default/configmaps`.
    ///
    /// For namespaced types `namespace: None` gives the all-namespaces path; for
    /// cluster-scoped types the namespace is ignored.
    fn url_path(dt: &Self::DynamicType, namespace: Option<&str>) -> String {
        let group = Self::group(dt);
        let prefix = if group.is_empty() {
            format!("/api/{}", Self::version(dt))
        } else {
            format!("/apis/{}/{}", group, Self::version(dt))
        };
        match (Self::scope(dt), namespace) {
            (Scope::Namespaced, Some(ns)) => {
                format!("{prefix}/namespaces/{ns}/{}", Self::plural(dt))
            }
            _ => format!("{prefix}/{}", Self::plural(dt)),
        }
    }

    /// The object's metadata.
    fn meta(&self) -> &ObjectMeta;
    /// The object's metadata, mutably.
    fn meta_mut(&mut self) -> &mut ObjectMeta;
}

impl<K> Resource for K
where
    K: k8s_openapi::Resource + k8s_openapi::Metadata<Ty = ObjectMeta>,
    K::Scope: NamespaceScope,
{
    type DynamicType = ();

    fn kind(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(K::KIND)
    }
    fn group(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(K::GROUP)
    }
    fn version(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(K::VERSION)
    }
    fn plural(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(K::URL_PATH_SEGMENT)
    }
    fn scope(_: &()) -> Scope {
        <K::Scope as NamespaceScope>::SCOPE
    }
    fn api_version(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(K::API_VERSION)
    }
    fn meta(&self) -> &ObjectMeta {
        self.metadata()
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        self.metadata_mut()
    }
}

static EMPTY_MAP: BTreeMap<String, String> = BTreeMap::new();

/// Convenience accessors over [`Resource::meta`].
pub trait ResourceExt: Resource {
    /// The name, or the generateName prefix when the name is not set yet.
    fn name_any(&self) -> String {
        let m = self.meta();
        m.name
            .clone()
            .or_else(|| m.generate_name.clone())
            .unwrap_or_default()
    }
    /// The name, empty when unset.
    fn name_unchecked(&self) -> &str {
        self.meta().name.as_deref().unwrap_or("")
    }
    /// The namespace, if any.
    fn namespace(&self) -> Option<&str> {
        self.meta().namespace.as_deref()
    }
    /// The resourceVersion, if any.
    fn resource_version(&self) -> Option<&str> {
        self.meta().resource_version.as_deref()
    }
    /// The uid, if any.
    fn uid(&self) -> Option<&str> {
        self.meta().uid.as_deref()
    }
    /// Labels (empty when unset).
    fn labels(&self) -> &BTreeMap<String, String> {
        self.meta().labels.as_ref().unwrap_or(&EMPTY_MAP)
    }
    /// Annotations (empty when unset).
    fn annotations(&self) -> &BTreeMap<String, String> {
        self.meta().annotations.as_ref().unwrap_or(&EMPTY_MAP)
    }
    /// Labels, mutably (created when unset).
    fn labels_mut(&mut self) -> &mut BTreeMap<String, String> {
        self.meta_mut().labels.get_or_insert_with(BTreeMap::new)
    }
    /// Annotations, mutably (created when unset).
    fn annotations_mut(&mut self) -> &mut BTreeMap<String, String> {
        self.meta_mut()
            .annotations
            .get_or_insert_with(BTreeMap::new)
    }
    /// Finalizers (empty when unset).
    fn finalizers(&self) -> &[String] {
        self.meta().finalizers.as_deref().unwrap_or(&[])
    }
    /// Owner references (empty when unset).
    fn owner_references(&self) -> &[OwnerReference] {
        self.meta().owner_references.as_deref().unwrap_or(&[])
    }
    /// The owner reference with `controller: true`, if any.
    fn controller_owner(&self) -> Option<&OwnerReference> {
        self.owner_references()
            .iter()
            .find(|o| o.controller == Some(true))
    }
    /// `metadata.generation`, if set.
    fn generation(&self) -> Option<i64> {
        self.meta().generation
    }
    /// Whether a deletionTimestamp is set.
    fn is_being_deleted(&self) -> bool {
        self.meta().deletion_timestamp.is_some()
    }
}

impl<K: Resource + ?Sized> ResourceExt for K {}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};

    #[test]
    fn static_metadata() {
        assert_eq!(ConfigMap::plural(&()), "configmaps");
        assert_eq!(
            ConfigMap::url_path(&(), Some("ns")),
            "/api/v1/namespaces/ns/configmaps"
        );
        assert_eq!(ConfigMap::url_path(&(), None), "/api/v1/configmaps");
        assert_eq!(Deployment::api_version(&()), "apps/v1");
        assert_eq!(
            Deployment::url_path(&(), Some("a")),
            "/apis/apps/v1/namespaces/a/deployments"
        );
        assert_eq!(Namespace::scope(&()), Scope::Cluster);
        assert_eq!(
            Namespace::url_path(&(), Some("ignored")),
            "/api/v1/namespaces"
        );
    }
}
