//! Event filters (controller-runtime's `predicate` package).

use kubewright_core::{Resource, ResourceExt};
use std::fmt;
use std::sync::Arc;

type PredicateFn<K> = dyn Fn(Option<&K>, &K) -> bool + Send + Sync;

/// Decides whether an add or update event of a watched object should enqueue anything.
///
/// A predicate sees `(None, new)` for an add and `(Some(old), new)` for an update.
/// Deletes always pass: a deleted object must never be missed. Several predicates on one
/// watch must all pass (combine them with [`and`](Self::and) / [`or`](Self::or) /
/// [`not`](Self::not) for other logic).
///
/// The built-ins pass every add and filter updates, like controller-runtime's:
///
/// ```
/// use k8s_openapi::api::apps::v1::Deployment;
/// use kubewright_core::ObjectMeta;
/// use kubewright_runtime::controller::Predicate;
///
/// let p = Predicate::<Deployment>::generation_changed().or(Predicate::labels_changed());
/// let old = Deployment { metadata: ObjectMeta { generation: Some(1), ..Default::default() }, ..Default::default() };
/// let mut new = old.clone();
/// new.metadata.resource_version = Some("42".into()); // e.g. a status update
/// assert!(!p.matches(Some(&old), &new));
/// new.metadata.generation = Some(2); // the spec changed
/// assert!(p.matches(Some(&old), &new));
/// assert!(p.matches(None, &new)); // adds pass
/// ```
pub struct Predicate<K> {
    name: Arc<str>,
    f: Arc<PredicateFn<K>>,
}

impl<K> Clone for Predicate<K> {
    fn clone(&self) -> Self {
        Self {
            name: self.name.clone(),
            f: self.f.clone(),
        }
    }
}

impl<K> fmt::Debug for Predicate<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Predicate").field(&self.name).finish()
    }
}

impl<K: 'static> Predicate<K> {
    /// A predicate from a function of `(old, new)`; `old` is `None` for adds.
    pub fn new(f: impl Fn(Option<&K>, &K) -> bool + Send + Sync + 'static) -> Self {
        Self::named("custom", f)
    }

    /// Like [`new`](Self::new), with a name for `Debug` output.
    pub fn named(name: &str, f: impl Fn(Option<&K>, &K) -> bool + Send + Sync + 'static) -> Self {
        Self {
            name: name.into(),
            f: Arc::new(f),
        }
    }

    /// Whether an event passes.
    pub fn matches(&self, old: Option<&K>, new: &K) -> bool {
        (self.f)(old, new)
    }

    /// Passes when both pass.
    #[must_use]
    pub fn and(self, other: Predicate<K>) -> Self {
        let name = format!("({} && {})", self.name, other.name);
        Self::named(&name, move |o, n| self.matches(o, n) && other.matches(o, n))
    }

    /// Passes when either passes.
    #[must_use]
    pub fn or(self, other: Predicate<K>) -> Self {
        let name = format!("({} || {})", self.name, other.name);
        Self::named(&name, move |o, n| self.matches(o, n) || other.matches(o, n))
    }

    /// Passes when this one does not (note: this also filters adds if this passes them).
    #[must_use]
    #[allow(clippy::should_implement_trait)]
    pub fn not(self) -> Self {
        let name = format!("!{}", self.name);
        Self::named(&name, move |o, n| !self.matches(o, n))
    }
}

impl<K: Resource + 'static> Predicate<K> {
    fn on_update(name: &str, changed: impl Fn(&K, &K) -> bool + Send + Sync + 'static) -> Self {
        Self::named(name, move |old, new| match old {
            None => true,
            Some(old) => changed(old, new),
        })
    }

    /// Updates pass only when `metadata.generation` changed, i.e. the spec changed (not
    /// the status or metadata). Objects without a generation (e.g. ConfigMaps) never
    /// pass an update.
    pub fn generation_changed() -> Self {
        Self::on_update("generation_changed", |old, new| {
            old.meta().generation != new.meta().generation
        })
    }

    /// Updates pass only when `metadata.resourceVersion` changed, which filters out the
    /// periodic resyncs of the informer.
    pub fn resource_version_changed() -> Self {
        Self::on_update("resource_version_changed", |old, new| {
            old.resource_version() != new.resource_version()
        })
    }

    /// Updates pass only when the labels changed.
    pub fn labels_changed() -> Self {
        Self::on_update("labels_changed", |old, new| old.labels() != new.labels())
    }

    /// Updates pass only when the annotations changed.
    pub fn annotations_changed() -> Self {
        Self::on_update("annotations_changed", |old, new| {
            old.annotations() != new.annotations()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kubewright_core::ObjectMeta;

    fn cm(rv: &str, generation: Option<i64>, label: &str, annotation: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                resource_version: Some(rv.into()),
                generation,
                labels: Some([("l".to_string(), label.to_string())].into()),
                annotations: Some([("a".to_string(), annotation.to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn builtins_pass_adds_and_filter_updates() {
        let base = cm("1", Some(1), "x", "y");
        let preds = [
            (Predicate::generation_changed(), cm("2", Some(2), "x", "y")),
            (
                Predicate::resource_version_changed(),
                cm("2", Some(1), "x", "y"),
            ),
            (Predicate::labels_changed(), cm("2", Some(1), "z", "y")),
            (Predicate::annotations_changed(), cm("2", Some(1), "x", "z")),
        ];
        for (p, changed) in preds {
            assert!(p.matches(None, &base), "{p:?} on add");
            assert!(p.matches(Some(&base), &changed), "{p:?} on its change");
            assert!(!p.matches(Some(&base), &base), "{p:?} on a resync");
        }
        // Only the resourceVersion changed: only that predicate passes.
        let status_only = cm("3", Some(1), "x", "y");
        assert!(!Predicate::generation_changed().matches(Some(&base), &status_only));
        assert!(!Predicate::labels_changed().matches(Some(&base), &status_only));
        assert!(Predicate::resource_version_changed().matches(Some(&base), &status_only));
    }

    #[test]
    fn combinators() {
        let yes = Predicate::<ConfigMap>::new(|_, _| true);
        let no = Predicate::<ConfigMap>::new(|_, _| false);
        let obj = ConfigMap::default();
        assert!(!yes.clone().and(no.clone()).matches(None, &obj));
        assert!(yes.clone().or(no.clone()).matches(None, &obj));
        assert!(no.clone().not().matches(None, &obj));
        assert_eq!(
            format!("{:?}", yes.and(no.not())),
            "Predicate(\"(custom && !custom)\")"
        );
    }
}
