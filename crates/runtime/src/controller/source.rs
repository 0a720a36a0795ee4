//! What a controller watches: [`Source`]s, and how their events become keys.

use super::predicate::Predicate;
use crate::factory::{InformerParams, SharedInformerFactory};
use crate::informer::{HandlerFuncs, HandlerRegistration, Informer};
use crate::workqueue::RateLimitingQueue;
use futures::FutureExt;
use futures::future::BoxFuture;
use kubewright_core::{
    ApiResource, DynamicObject, ObjectKey, PartialObjectMetadata, Resource, ResourceExt, Scope,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::collections::HashSet;
use std::fmt::{self, Debug};
use std::sync::Arc;

type MakeInformer<X> = Arc<dyn Fn(&SharedInformerFactory) -> Arc<Informer<X>> + Send + Sync>;

/// Maps a watched object to the keys of the primary objects to reconcile.
pub(crate) type Mapper<X> = Arc<dyn Fn(&X) -> Vec<ObjectKey> + Send + Sync>;

/// The work queue of a controller.
pub(crate) type Queue = RateLimitingQueue<ObjectKey>;

enum Origin<X> {
    Factory(MakeInformer<X>),
    Informer(Arc<Informer<X>>),
}

impl<X> Clone for Origin<X> {
    fn clone(&self) -> Self {
        match self {
            Self::Factory(make) => Self::Factory(make.clone()),
            Self::Informer(informer) => Self::Informer(informer.clone()),
        }
    }
}

/// One watched resource of a controller: which objects (type, namespace, selectors), and
/// which of their events count ([`Predicate`]s).
///
/// The informer comes from the controller's [`SharedInformerFactory`], so two controllers
/// watching the same objects share one list, one watch and one cache. An
/// [`InformerParams`] converts into a `Source` of a static type:
///
/// ```no_run
/// # fn f(factory: std::sync::Arc<kubewright_runtime::SharedInformerFactory>) {
/// use k8s_openapi::api::apps::v1::Deployment;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kubewright_runtime::controller::{Controller, Predicate, Source};
/// use kubewright_runtime::InformerParams;
///
/// let controller = Controller::<Deployment>::new(
///     &factory,
///     Source::new(InformerParams::default().namespace("apps"))
///         .predicate(Predicate::generation_changed()),
/// )
/// .owns::<ConfigMap>(InformerParams::default().namespace("apps").labels("app=web"));
/// # let _ = controller;
/// # }
/// ```
///
/// A `Source` is cheap to clone; a clone made from parameters asks each factory it is
/// used with for its own informer (what a
/// [`MultiClusterController`](crate::multicluster::MultiClusterController) relies on).
pub struct Source<X> {
    origin: Origin<X>,
    predicates: Vec<Predicate<X>>,
}

impl<X> Clone for Source<X> {
    fn clone(&self) -> Self {
        Self {
            origin: self.origin.clone(),
            predicates: self.predicates.clone(),
        }
    }
}

impl<X> Debug for Source<X> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let origin = match &self.origin {
            Origin::Factory(_) => "factory".to_string(),
            Origin::Informer(_) => "informer".to_string(),
        };
        f.debug_struct("Source")
            .field("origin", &origin)
            .field("predicates", &self.predicates)
            .finish()
    }
}

impl<X> Source<X>
where
    X: Resource + Clone + DeserializeOwned + Serialize + Debug + Send + Sync + 'static,
{
    /// Objects of a static type (`K::DynamicType = ()`, e.g. `Pod`) matching `params`.
    pub fn new(params: InformerParams) -> Self
    where
        X::DynamicType: Default,
    {
        Self::with_type(X::DynamicType::default(), params)
    }

    /// Objects of a type described at run time (e.g. `DynamicObject` and its
    /// [`ApiResource`]) matching `params`.
    pub fn with_type(dt: X::DynamicType, params: InformerParams) -> Self {
        Self {
            origin: Origin::Factory(Arc::new(move |f: &SharedInformerFactory| {
                f.informer_with::<X>(&dt, params.clone())
            })),
            predicates: Vec::new(),
        }
    }
}

impl Source<DynamicObject> {
    /// [`DynamicObject`]s of `resource` matching `params`.
    pub fn dynamic(resource: &ApiResource, params: InformerParams) -> Self {
        Self::with_type(resource.clone(), params)
    }
}

impl Source<PartialObjectMetadata> {
    /// Only the metadata of `resource`'s objects (less memory; enough for owner
    /// mappings).
    pub fn metadata(resource: &ApiResource, params: InformerParams) -> Self {
        let resource = resource.clone();
        Self {
            origin: Origin::Factory(Arc::new(move |f: &SharedInformerFactory| {
                f.metadata_informer(&resource, params.clone())
            })),
            predicates: Vec::new(),
        }
    }
}

impl<X> Source<X> {
    /// An informer you built yourself (e.g. over a custom [`ListWatch`](crate::ListWatch)).
    /// The controller starts it if needed, but never stops it.
    pub fn from_informer(informer: Arc<Informer<X>>) -> Self {
        Self {
            origin: Origin::Informer(informer),
            predicates: Vec::new(),
        }
    }

    /// Adds a predicate; an add or update event enqueues only if every predicate passes.
    #[must_use]
    pub fn predicate(mut self, predicate: Predicate<X>) -> Self {
        self.predicates.push(predicate);
        self
    }

    /// The informer when this source wraps one built elsewhere
    /// ([`from_informer`](Self::from_informer)), which every factory would share.
    pub(crate) fn shared_informer(&self) -> Option<&Arc<Informer<X>>> {
        match &self.origin {
            Origin::Factory(_) => None,
            Origin::Informer(i) => Some(i),
        }
    }

    pub(crate) fn into_parts(
        self,
        factory: &SharedInformerFactory,
    ) -> (Arc<Informer<X>>, Vec<Predicate<X>>) {
        let informer = match self.origin {
            Origin::Factory(make) => make(factory),
            Origin::Informer(i) => i,
        };
        (informer, self.predicates)
    }
}

impl<X> From<InformerParams> for Source<X>
where
    X: Resource + Clone + DeserializeOwned + Serialize + Debug + Send + Sync + 'static,
    X::DynamicType: Default,
{
    fn from(params: InformerParams) -> Self {
        Self::new(params)
    }
}

/// A watched informer with its event-to-key mapping, independent of its type.
pub(crate) trait Watch: Send + Sync {
    /// Adds the event handler feeding `queue`; returns what removes it again.
    fn register(&self, queue: &Queue) -> Box<dyn FnOnce() + Send>;
    fn start(&self);
    fn has_synced(&self) -> bool;
    fn wait_for_sync(&self) -> BoxFuture<'_, bool>;
    fn describe(&self) -> String;
}

pub(crate) struct WatchOf<X> {
    pub(crate) informer: Arc<Informer<X>>,
    pub(crate) predicates: Arc<[Predicate<X>]>,
    pub(crate) mapper: Mapper<X>,
}

impl<X: Resource + Send + Sync + 'static> WatchOf<X> {
    fn handler(&self, queue: &Queue) -> HandlerFuncs<X> {
        let (q_add, q_upd, q_del) = (queue.clone(), queue.clone(), queue.clone());
        let (m_add, m_upd, m_del) = (
            self.mapper.clone(),
            self.mapper.clone(),
            self.mapper.clone(),
        );
        let (p_add, p_upd) = (self.predicates.clone(), self.predicates.clone());
        HandlerFuncs::new()
            .on_add(move |obj: Arc<X>| {
                if p_add.iter().all(|p| p.matches(None, &obj)) {
                    for key in m_add(&obj) {
                        q_add.add(key);
                    }
                }
            })
            .on_update(move |old: Arc<X>, new: Arc<X>| {
                if !p_upd.iter().all(|p| p.matches(Some(&old), &new)) {
                    return;
                }
                // Both: an owner or mapping may have changed (controller-runtime does the
                // same). The queue would deduplicate anyway; skip the obvious repeats.
                let mut seen = HashSet::new();
                for key in m_upd(&new).into_iter().chain(m_upd(&old)) {
                    if seen.insert(key.clone()) {
                        q_upd.add(key);
                    }
                }
            })
            .on_delete(move |obj: Arc<X>, _final_state_unknown| {
                for key in m_del(&obj) {
                    q_del.add(key);
                }
            })
    }
}

impl<X: Resource + Send + Sync + 'static> Watch for WatchOf<X> {
    fn register(&self, queue: &Queue) -> Box<dyn FnOnce() + Send> {
        // Predicates, mappers and `Queue::add` are quick and never block: they run on the
        // informer's task, with no queue and task switch per event.
        let registration: HandlerRegistration =
            self.informer.add_inline_handler(self.handler(queue));
        let informer = self.informer.clone();
        Box::new(move || {
            informer.remove_handler(&registration);
        })
    }
    fn start(&self) {
        self.informer.start();
    }
    fn has_synced(&self) -> bool {
        self.informer.has_synced()
    }
    fn wait_for_sync(&self) -> BoxFuture<'_, bool> {
        self.informer.wait_for_sync().boxed()
    }
    fn describe(&self) -> String {
        self.informer.describe().to_string()
    }
}

/// The key of the object itself (for the primary resource).
pub(crate) fn self_mapper<X: Resource>() -> Mapper<X> {
    Arc::new(|obj: &X| vec![ObjectKey::from_obj(obj)])
}

/// The group of an `apiVersion` (`apps/v1` -> `apps`, `v1` -> ``).
fn api_group(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

/// Maps an object to its controller owner of the given kind and group (the version is
/// ignored, like controller-runtime's `EnqueueRequestForOwner` with `OnlyControllerOwner`).
pub(crate) fn owner_mapper<X: Resource>(kind: String, group: String, scope: Scope) -> Mapper<X> {
    Arc::new(move |obj: &X| {
        obj.owner_references()
            .iter()
            .filter(|r| r.controller == Some(true))
            .filter(|r| r.kind == kind && api_group(&r.api_version) == group)
            .map(|r| {
                let ns = match scope {
                    Scope::Namespaced => obj.namespace(),
                    Scope::Cluster => None,
                };
                ObjectKey::new(ns, &r.name)
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kubewright_core::{ObjectMeta, OwnerReference};

    fn owned(refs: Vec<OwnerReference>) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some("dep".into()),
                namespace: Some("ns".into()),
                owner_references: Some(refs),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn oref(api_version: &str, kind: &str, name: &str, controller: Option<bool>) -> OwnerReference {
        OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            controller,
            block_owner_deletion: None,
        }
    }

    #[test]
    fn owner_mapping_takes_the_controller_of_the_primary_kind() {
        let map = owner_mapper::<ConfigMap>("Deployment".into(), "apps".into(), Scope::Namespaced);
        let obj = owned(vec![
            oref("apps/v1", "Deployment", "plain-owner", None),
            oref("apps/v1beta1", "Deployment", "web", Some(true)),
        ]);
        assert_eq!(map(&obj), vec![ObjectKey::new(Some("ns"), "web")]);
        // Another kind or group does not map.
        let other = owned(vec![oref("v1", "Deployment", "x", Some(true))]);
        assert!(map(&other).is_empty());
        let other = owned(vec![oref("apps/v1", "ReplicaSet", "x", Some(true))]);
        assert!(map(&other).is_empty());
        // A cluster-scoped owner has a key without namespace.
        let map = owner_mapper::<ConfigMap>("Widget".into(), "example.com".into(), Scope::Cluster);
        let obj = owned(vec![oref("example.com/v1", "Widget", "w", Some(true))]);
        assert_eq!(map(&obj), vec![ObjectKey::new(None, "w")]);
    }

    #[test]
    fn api_groups() {
        assert_eq!(api_group("apps/v1"), "apps");
        assert_eq!(api_group("v1"), "");
        assert_eq!(api_group("a.example.com/v1alpha1"), "a.example.com");
    }
}
