//! Finalizer-guarded reconciliation, in the spirit of kube-rs's `runtime::finalizer`.
//!
//! [`finalizer`] wraps a reconcile function so that cleanup is guaranteed to run before
//! the object disappears:
//!
//! | object state                                | what happens                              |
//! |---------------------------------------------|-------------------------------------------|
//! | not being deleted, finalizer missing        | add the finalizer, then [`FinalizerEvent::Apply`] |
//! | not being deleted, finalizer present        | [`FinalizerEvent::Apply`]                 |
//! | being deleted, finalizer present            | [`FinalizerEvent::Cleanup`]; on success remove the finalizer |
//! | being deleted, finalizer absent             | nothing (returns `T::default()`)          |
//!
//! Every write is a JSON Patch guarded by `test` operations, so it never overwrites
//! another writer's finalizers: adding tests the current list (or the resourceVersion
//! when there is none) and appends; removing tests that our name is still at the index
//! it removes. When a test fails (422) because someone else changed the object, the
//! object is read again and the step retried (up to [`MAX_PATCH_ATTEMPTS`] times).
//!
//! Cleanup must be idempotent: it runs again if removing the finalizer fails.
//!
//! ```no_run
//! use std::sync::Arc;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kubewright_client::Api;
//! use kubewright_runtime::finalizer::{finalizer, FinalizerEvent};
//!
//! #[derive(Debug, thiserror::Error)]
//! #[error("reconcile failed")]
//! struct MyError;
//!
//! async fn reconcile(api: Api<ConfigMap>, cm: Arc<ConfigMap>) {
//!     let result: Result<(), _> = finalizer(&api, "example.com/cleanup", cm, |event| async move {
//!         match event {
//!             FinalizerEvent::Apply(cm) => { /* create or update dependents */ }
//!             FinalizerEvent::Cleanup(cm) => { /* delete external resources */ }
//!         }
//!         Ok::<(), MyError>(())
//!     })
//!     .await;
//!     let _ = result;
//! }
//! ```

use kubewright_client::Api;
use kubewright_core::{Patch, PatchParams, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;

/// How many times a finalizer patch is retried after a failed `test` (422) before the
/// error is returned (and the caller requeues).
pub const MAX_PATCH_ATTEMPTS: usize = 10;

/// What the reconcile function is asked to do.
#[derive(Debug, Clone)]
pub enum FinalizerEvent<K> {
    /// The object exists and carries our finalizer: bring the world in line with it.
    Apply(Arc<K>),
    /// The object is being deleted and still carries our finalizer: clean up. When this
    /// succeeds the finalizer is removed and deletion proceeds.
    Cleanup(Arc<K>),
}

/// Errors of [`finalizer`].
#[derive(Debug, thiserror::Error)]
pub enum FinalizerError<E: std::error::Error + 'static> {
    /// The reconcile function failed on [`FinalizerEvent::Apply`].
    #[error("apply failed: {0}")]
    ApplyFailed(#[source] E),
    /// The reconcile function failed on [`FinalizerEvent::Cleanup`]; the finalizer stays.
    #[error("cleanup failed: {0}")]
    CleanupFailed(#[source] E),
    /// Adding the finalizer failed.
    #[error("failed to add finalizer: {0}")]
    AddFinalizer(#[source] kubewright_client::Error),
    /// Removing the finalizer failed (cleanup had succeeded).
    #[error("failed to remove finalizer: {0}")]
    RemoveFinalizer(#[source] kubewright_client::Error),
    /// Reading the object again after a conflicting write failed.
    #[error("failed to re-read the object: {0}")]
    Refresh(#[source] kubewright_client::Error),
    /// The object has no `metadata.name`.
    #[error("the object has no name")]
    UnnamedObject,
    /// The finalizer name is empty.
    #[error("the finalizer name is empty")]
    InvalidFinalizer,
}

/// The state of an object with respect to one finalizer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FinalizerState {
    index: Option<usize>,
    deleting: bool,
}

impl FinalizerState {
    fn of<K: Resource>(obj: &K, name: &str) -> Self {
        Self {
            index: obj.finalizers().iter().position(|f| f == name),
            deleting: obj.is_being_deleted(),
        }
    }
}

/// The JSON Patch that adds `name` to the object's finalizers without overwriting
/// anyone else's: with no finalizers it tests the resourceVersion (a `test` of a missing
/// path is not portable), otherwise it tests the whole current list and appends.
pub fn add_finalizer_patch<K: Resource>(obj: &K, name: &str) -> Value {
    let current = obj.finalizers();
    if current.is_empty() {
        let mut ops = Vec::new();
        if let Some(rv) = obj.resource_version() {
            ops.push(json!({"op": "test", "path": "/metadata/resourceVersion", "value": rv}));
        }
        ops.push(json!({"op": "add", "path": "/metadata/finalizers", "value": [name]}));
        Value::Array(ops)
    } else {
        json!([
            {"op": "test", "path": "/metadata/finalizers", "value": current},
            {"op": "add", "path": "/metadata/finalizers/-", "value": name},
        ])
    }
}

/// The JSON Patch that removes the finalizer at `index`, guarded by a `test` that it is
/// still `name` (so a concurrent change never makes us remove someone else's).
pub fn remove_finalizer_patch(index: usize, name: &str) -> Value {
    let path = format!("/metadata/finalizers/{index}");
    json!([
        {"op": "test", "path": path, "value": name},
        {"op": "remove", "path": path},
    ])
}

/// Runs `reconcile` under the protection of the finalizer `finalizer_name` (see the
/// [module documentation](self) for the state table).
///
/// `obj` may be stale (e.g. from an informer cache): conflicting writes are detected
/// by the patches' `test` operations and resolved by reading the object again. When the
/// object is being deleted without our finalizer (or is gone), nothing runs and
/// `T::default()` is returned, so a controller's `Action` type should default to
/// "await change".
///
/// Its writes carry no field manager, so the server records them under the client's
/// user agent; [`finalizer_with`] names the manager.
pub async fn finalizer<K, T, E, F, Fut>(
    api: &Api<K>,
    finalizer_name: &str,
    obj: Arc<K>,
    reconcile: F,
) -> Result<T, FinalizerError<E>>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug + Send + 'static,
    T: Default,
    E: std::error::Error + 'static,
    F: FnOnce(FinalizerEvent<K>) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    finalizer_with(api, finalizer_name, &PatchParams::default(), obj, reconcile).await
}

/// [`finalizer`], writing the finalizer list with `params`: its `field_manager` is the
/// manager the object's `managedFields` record for the finalizer (the operator's own
/// name, beside its other writes), and `dry_run` and `field_validation` apply too
/// (`force` is for apply and is ignored here).
///
/// ```no_run
/// # use std::sync::Arc;
/// # use k8s_openapi::api::core::v1::ConfigMap;
/// # use kubewright_client::Api;
/// # use kubewright_core::PatchParams;
/// # use kubewright_runtime::finalizer::{finalizer_with, FinalizerEvent};
/// # async fn reconcile(api: Api<ConfigMap>, cm: Arc<ConfigMap>) {
/// let params = PatchParams { field_manager: Some("backup-operator".into()), ..Default::default() };
/// let _ = finalizer_with(&api, "example.com/cleanup", &params, cm, |event| async move {
///     match event {
///         FinalizerEvent::Apply(_) | FinalizerEvent::Cleanup(_) => {}
///     }
///     Ok::<(), std::io::Error>(())
/// })
/// .await;
/// # }
/// ```
pub async fn finalizer_with<K, T, E, F, Fut>(
    api: &Api<K>,
    finalizer_name: &str,
    params: &PatchParams,
    obj: Arc<K>,
    reconcile: F,
) -> Result<T, FinalizerError<E>>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug + Send + 'static,
    T: Default,
    E: std::error::Error + 'static,
    F: FnOnce(FinalizerEvent<K>) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let params = PatchParams {
        force: false,
        ..params.clone()
    };
    if finalizer_name.is_empty() {
        return Err(FinalizerError::InvalidFinalizer);
    }
    let name = obj
        .meta()
        .name
        .clone()
        .filter(|n| !n.is_empty())
        .ok_or(FinalizerError::UnnamedObject)?;
    let mut obj = obj;
    let mut attempt = 0;
    loop {
        attempt += 1;
        match FinalizerState::of(obj.as_ref(), finalizer_name) {
            FinalizerState {
                index: Some(_),
                deleting: false,
            } => {
                return reconcile(FinalizerEvent::Apply(obj))
                    .await
                    .map_err(FinalizerError::ApplyFailed);
            }
            FinalizerState {
                index: None,
                deleting: true,
            } => return Ok(T::default()),
            FinalizerState {
                index: Some(_),
                deleting: true,
            } => {
                let value = reconcile(FinalizerEvent::Cleanup(obj.clone()))
                    .await
                    .map_err(FinalizerError::CleanupFailed)?;
                remove_finalizer(api, &name, finalizer_name, &params, obj).await?;
                return Ok(value);
            }
            FinalizerState {
                index: None,
                deleting: false,
            } => {
                let patch = Patch::Json(add_finalizer_patch(obj.as_ref(), finalizer_name));
                match api.patch(&name, &params, &patch).await {
                    // Continue with the patched object: it now has the finalizer.
                    Ok(patched) => obj = Arc::new(patched),
                    Err(e) if e.is_invalid() && attempt < MAX_PATCH_ATTEMPTS => {
                        tracing::debug!(object = %name, finalizer = finalizer_name, "finalizer list changed concurrently, retrying");
                        match api.get_opt(&name).await.map_err(FinalizerError::Refresh)? {
                            Some(fresh) => obj = Arc::new(fresh),
                            None => return Ok(T::default()),
                        }
                    }
                    Err(e) if e.is_not_found() => return Ok(T::default()),
                    Err(e) => return Err(FinalizerError::AddFinalizer(e)),
                }
            }
        }
    }
}

/// Removes `finalizer_name` from the object, retrying on concurrent changes. Succeeds
/// when the finalizer (or the object) is already gone.
async fn remove_finalizer<K, E>(
    api: &Api<K>,
    name: &str,
    finalizer_name: &str,
    params: &PatchParams,
    mut obj: Arc<K>,
) -> Result<(), FinalizerError<E>>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug + Send + 'static,
    E: std::error::Error + 'static,
{
    let mut attempt = 0;
    loop {
        attempt += 1;
        let Some(index) = obj.finalizers().iter().position(|f| f == finalizer_name) else {
            return Ok(());
        };
        let patch = Patch::Json(remove_finalizer_patch(index, finalizer_name));
        match api.patch(name, params, &patch).await {
            Ok(_) => return Ok(()),
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) if e.is_invalid() && attempt < MAX_PATCH_ATTEMPTS => {
                tracing::debug!(object = %name, finalizer = finalizer_name, "finalizer list changed concurrently, retrying removal");
                match api.get_opt(name).await.map_err(FinalizerError::Refresh)? {
                    Some(fresh) => obj = Arc::new(fresh),
                    None => return Ok(()),
                }
            }
            Err(e) => return Err(FinalizerError::RemoveFinalizer(e)),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use kubewright_core::ObjectMeta;

    fn cm(finalizers: &[&str], rv: Option<&str>, deleting: bool) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some("c".into()),
                resource_version: rv.map(Into::into),
                finalizers: (!finalizers.is_empty())
                    .then(|| finalizers.iter().map(|s| s.to_string()).collect()),
                deletion_timestamp: deleting
                    .then_some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn add_patch_without_finalizers_tests_resource_version() {
        let p = add_finalizer_patch(&cm(&[], Some("42"), false), "x/y");
        assert_eq!(
            p,
            json!([
                {"op": "test", "path": "/metadata/resourceVersion", "value": "42"},
                {"op": "add", "path": "/metadata/finalizers", "value": ["x/y"]},
            ])
        );
    }

    #[test]
    fn add_patch_with_finalizers_tests_the_list() {
        let p = add_finalizer_patch(&cm(&["a", "b"], Some("42"), false), "x/y");
        assert_eq!(
            p,
            json!([
                {"op": "test", "path": "/metadata/finalizers", "value": ["a", "b"]},
                {"op": "add", "path": "/metadata/finalizers/-", "value": "x/y"},
            ])
        );
    }

    #[test]
    fn remove_patch_tests_the_index() {
        assert_eq!(
            remove_finalizer_patch(2, "x/y"),
            json!([
                {"op": "test", "path": "/metadata/finalizers/2", "value": "x/y"},
                {"op": "remove", "path": "/metadata/finalizers/2"},
            ])
        );
    }

    #[test]
    fn states() {
        let s = |o: &ConfigMap| FinalizerState::of(o, "x/y");
        assert_eq!(
            s(&cm(&[], None, false)),
            FinalizerState {
                index: None,
                deleting: false
            }
        );
        assert_eq!(
            s(&cm(&["a", "x/y"], None, true)),
            FinalizerState {
                index: Some(1),
                deleting: true
            }
        );
        assert_eq!(
            s(&cm(&["a"], None, true)),
            FinalizerState {
                index: None,
                deleting: true
            }
        );
    }

    #[tokio::test]
    async fn nothing_runs_when_deleting_without_our_finalizer() {
        // The client is never used on this path.
        let client = kubewright_client::Client::new(kubewright_client::Config::new(
            "http://127.0.0.1:1".parse().unwrap(),
        ))
        .unwrap();
        let api: Api<ConfigMap> = Api::namespaced(client, "ns");
        let obj = Arc::new(cm(&["other"], Some("1"), true));
        let r: Result<u32, FinalizerError<std::io::Error>> =
            finalizer(&api, "x/y", obj, |_| async { Ok(7) }).await;
        assert_eq!(r.unwrap(), 0);
    }

    #[tokio::test]
    async fn apply_runs_directly_when_the_finalizer_is_present() {
        let client = kubewright_client::Client::new(kubewright_client::Config::new(
            "http://127.0.0.1:1".parse().unwrap(),
        ))
        .unwrap();
        let api: Api<ConfigMap> = Api::namespaced(client, "ns");
        let obj = Arc::new(cm(&["x/y"], Some("1"), false));
        let r: Result<u32, FinalizerError<std::io::Error>> =
            finalizer(&api, "x/y", obj, |ev| async move {
                assert!(matches!(ev, FinalizerEvent::Apply(_)));
                Ok(7)
            })
            .await;
        assert_eq!(r.unwrap(), 7);
        let bad: Result<u32, FinalizerError<std::io::Error>> =
            finalizer(&api, "", Arc::new(cm(&[], None, false)), |_| async {
                Ok(1)
            })
            .await;
        assert!(matches!(bad, Err(FinalizerError::InvalidFinalizer)));
    }
}
