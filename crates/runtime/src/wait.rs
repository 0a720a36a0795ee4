//! Waiting for one object to reach a state, as kube-rs's `runtime::wait`:
//! [`await_condition`] reads the object, then watches it until a [`Condition`] holds.
//!
//! A condition sees `Some(object)` while the object exists and `None` once it is gone (or
//! before it is created), so one helper waits for creation, a status, or deletion. There
//! is no timeout of its own: wrap the call in [`tokio::time::timeout`].
//!
//! ```no_run
//! use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
//! use kubewright_client::{Api, Client};
//! use kubewright_runtime::wait::{await_condition, conditions};
//! use std::time::Duration;
//!
//! # async fn run(client: Client) -> Result<(), Box<dyn std::error::Error>> {
//! let crds: Api<CustomResourceDefinition> = Api::all(client);
//! let established = await_condition(crds, "backups.example.com", conditions::is_crd_established());
//! tokio::time::timeout(Duration::from_secs(30), established).await??;
//! # Ok(()) }
//! ```
//!
//! Any `Fn(Option<&K>) -> bool` is a condition, and conditions combine with
//! [`Condition::not`], [`Condition::and`] and [`Condition::or`]:
//!
//! ```
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kubewright_runtime::wait::Condition;
//!
//! let has_key = |cm: Option<&ConfigMap>| {
//!     cm.and_then(|c| c.data.as_ref()).is_some_and(|d| d.contains_key("ready"))
//! };
//! let exists = |cm: Option<&ConfigMap>| cm.is_some();
//! let cond = has_key.not().and(exists);
//! assert!(cond.matches_object(Some(&ConfigMap::default())));
//! assert!(!cond.matches_object(None));
//! ```

use futures::StreamExt;
use kubewright_client::Api;
use kubewright_core::{ListParams, Resource, WatchEvent, WatchParams};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt::Debug;

/// Why [`await_condition`] gave up.
#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    /// Reading or watching the object failed (other than an expired watch, which is
    /// restarted).
    #[error("waiting for {name}: {source}")]
    Client {
        /// The object's name.
        name: String,
        /// The request's error.
        #[source]
        source: kubewright_client::Error,
    },
}

/// A state of an object (`None`: it does not exist).
pub trait Condition<K> {
    /// Whether the condition holds for `obj`.
    fn matches_object(&self, obj: Option<&K>) -> bool;

    /// The negation.
    fn not(self) -> Not<Self>
    where
        Self: Sized,
    {
        Not(self)
    }

    /// Both conditions.
    fn and<Other: Condition<K>>(self, other: Other) -> And<Self, Other>
    where
        Self: Sized,
    {
        And(self, other)
    }

    /// Either condition.
    fn or<Other: Condition<K>>(self, other: Other) -> Or<Self, Other>
    where
        Self: Sized,
    {
        Or(self, other)
    }
}

impl<K, F: Fn(Option<&K>) -> bool> Condition<K> for F {
    fn matches_object(&self, obj: Option<&K>) -> bool {
        self(obj)
    }
}

/// See [`Condition::not`].
#[derive(Clone, Debug)]
pub struct Not<A>(A);

impl<K, A: Condition<K>> Condition<K> for Not<A> {
    fn matches_object(&self, obj: Option<&K>) -> bool {
        !self.0.matches_object(obj)
    }
}

/// See [`Condition::and`].
#[derive(Clone, Debug)]
pub struct And<A, B>(A, B);

impl<K, A: Condition<K>, B: Condition<K>> Condition<K> for And<A, B> {
    fn matches_object(&self, obj: Option<&K>) -> bool {
        self.0.matches_object(obj) && self.1.matches_object(obj)
    }
}

/// See [`Condition::or`].
#[derive(Clone, Debug)]
pub struct Or<A, B>(A, B);

impl<K, A: Condition<K>, B: Condition<K>> Condition<K> for Or<A, B> {
    fn matches_object(&self, obj: Option<&K>) -> bool {
        self.0.matches_object(obj) || self.1.matches_object(obj)
    }
}

/// Waits until `cond` holds for the object `name` of `api` and returns the object then
/// (`None` if the condition held for a missing object). It lists the object by name,
/// then watches it from the list's version; a watch that ends or expires (410) is
/// started again from a fresh list, so no change is missed.
pub async fn await_condition<K>(
    api: Api<K>,
    name: &str,
    cond: impl Condition<K>,
) -> Result<Option<K>, WaitError>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug + Send + 'static,
{
    let failed = |source| WaitError::Client {
        name: name.to_string(),
        source,
    };
    let by_name = format!("metadata.name={name}");
    loop {
        // A list by name gives the object and a version to watch from, so a change
        // (its creation included) between the read and the watch is not missed.
        let list = api
            .list(&ListParams::default().fields(&by_name))
            .await
            .map_err(failed)?;
        let current = list.items.into_iter().next();
        if cond.matches_object(current.as_ref()) {
            return Ok(current);
        }
        let rv = list.metadata.resource_version.unwrap_or_default();
        let wp = WatchParams::default().fields(&by_name).timeout(290);
        let stream = match api.watch(&wp, &rv).await {
            Ok(s) => s,
            Err(e) if e.is_gone() || e.is_expired() => continue,
            Err(e) => return Err(failed(e)),
        };
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            match event {
                Ok(WatchEvent::Added(obj) | WatchEvent::Modified(obj)) => {
                    if cond.matches_object(Some(&obj)) {
                        return Ok(Some(obj));
                    }
                }
                Ok(WatchEvent::Deleted(_)) => {
                    if cond.matches_object(None) {
                        return Ok(None);
                    }
                }
                Ok(WatchEvent::Bookmark(_)) => {}
                // Expired, or the stream broke: read again and watch anew.
                Ok(WatchEvent::Error(_)) | Err(_) => break,
            }
        }
    }
}

/// Conditions for common kinds, as kube-rs's `runtime::wait::conditions`.
pub mod conditions {
    use super::Condition;
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::batch::v1::Job;
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kubewright_core::Resource;

    /// The object is gone, or was replaced by another of the same name (its uid
    /// differs from `uid`).
    pub fn is_deleted<K: Resource>(uid: &str) -> impl Condition<K> + '_ {
        move |obj: Option<&K>| obj.is_none_or(|o| o.meta().uid.as_deref() != Some(uid))
    }

    /// The CRD's `Established` condition is true: its resource is about to be served.
    pub fn is_crd_established() -> impl Condition<CustomResourceDefinition> {
        |crd: Option<&CustomResourceDefinition>| {
            crd.and_then(|c| c.status.as_ref())
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c.type_ == "Established" && c.status == "True")
                })
        }
    }

    /// The pod's phase is `Running`.
    pub fn is_pod_running() -> impl Condition<Pod> {
        |pod: Option<&Pod>| {
            pod.and_then(|p| p.status.as_ref())
                .and_then(|s| s.phase.as_deref())
                == Some("Running")
        }
    }

    /// The Job's `Complete` condition is true.
    pub fn is_job_completed() -> impl Condition<Job> {
        |job: Option<&Job>| {
            job.and_then(|j| j.status.as_ref())
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c.type_ == "Complete" && c.status == "True")
                })
        }
    }

    /// The Deployment's rollout is done, as `kubectl rollout status` judges it: the
    /// controller saw the latest generation and every replica is updated and available.
    pub fn is_deployment_completed() -> impl Condition<Deployment> {
        |d: Option<&Deployment>| {
            let Some(d) = d else { return false };
            let Some(status) = &d.status else {
                return false;
            };
            let want = d.spec.replicas.unwrap_or(1);
            status.observed_generation >= d.metadata.generation
                && status.updated_replicas.unwrap_or(0) == want
                && status.replicas.unwrap_or(0) == want
                && status.available_replicas.unwrap_or(0) == want
        }
    }
}

#[cfg(test)]
mod tests {
    use super::conditions::*;
    use super::*;
    use k8s_openapi::api::core::v1::{ConfigMap, Pod, PodStatus};
    use kubewright_core::ObjectMeta;

    #[test]
    fn conditions_combine() {
        let pod = |phase: &str| Pod {
            status: Some(PodStatus {
                phase: Some(phase.into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(is_pod_running().matches_object(Some(&pod("Running"))));
        assert!(!is_pod_running().matches_object(Some(&pod("Pending"))));
        assert!(!is_pod_running().matches_object(None));
        assert!(is_pod_running().not().matches_object(None));
        let cm = |uid: &str| ConfigMap {
            metadata: ObjectMeta {
                uid: Some(uid.into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let gone = is_deleted::<ConfigMap>("a");
        assert!(!gone.matches_object(Some(&cm("a"))));
        assert!(gone.matches_object(Some(&cm("b"))));
        assert!(gone.matches_object(None));
        let either = is_deleted::<ConfigMap>("a").or(|c: Option<&ConfigMap>| c.is_some());
        assert!(either.matches_object(Some(&cm("a"))));
        let both = is_deleted::<ConfigMap>("a").and(|c: Option<&ConfigMap>| c.is_some());
        assert!(!both.matches_object(None));
        assert!(both.matches_object(Some(&cm("b"))));
    }
}
