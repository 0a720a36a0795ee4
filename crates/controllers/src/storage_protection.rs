//! kube-controller-manager's storage object protection controllers. Each keeps its
//! finalizer on every object of its kind (admission adds it at creation; the
//! controller adds it when missing) and removes it from a deleted object once nothing
//! uses the object, which then goes:
//!
//! - `persistentvolumeclaim-protection-controller` (`kubernetes.io/pvc-protection`): a
//!   claim is used by a scheduled pod that names it, or whose generic ephemeral volume
//!   it is (`<pod>-<volume>`, controlled by the pod) while the pod has not finished. As
//!   upstream, a claim the cache shows unused is checked once more against the server's
//!   list of the namespace's pods before its finalizer goes.
//! - `persistentvolume-protection-controller` (`kubernetes.io/pv-protection`): a volume
//!   is used while its phase is `Bound`.
//! - `volumeattributesclass-protection-controller` (`kubernetes.io/vac-protection`): a
//!   VolumeAttributesClass is used while a claim names it (spec, current or target in
//!   its status) or a volume does (spec).
//!
//! Finalizers are written with the runtime's guarded JSON patches
//! ([`kubewright_runtime::finalizer`]), so another writer's finalizers are never lost;
//! a patch whose guard fails is retried with back-off.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::VolumeAttributesClass;
use kubewright_client::{Api, Client};
use kubewright_core::{ListParams, ObjectKey, Patch, PatchParams, Resource, ResourceExt};
use kubewright_runtime::finalizer::{add_finalizer_patch, remove_finalizer_patch};
use kubewright_runtime::{Action, InformerParams, Manager, ManagerError, Source, Store};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use std::sync::Arc;

/// kube-controller-manager's name for the claim protection controller.
pub const PVC_NAME: &str = "persistentvolumeclaim-protection-controller";
/// kube-controller-manager's name for the volume protection controller.
pub const PV_NAME: &str = "persistentvolume-protection-controller";
/// kube-controller-manager's name for the VolumeAttributesClass protection controller.
pub const VAC_NAME: &str = "volumeattributesclass-protection-controller";
/// The claims' finalizer.
pub const PVC_PROTECTION: &str = "kubernetes.io/pvc-protection";
/// The volumes' finalizer.
pub const PV_PROTECTION: &str = "kubernetes.io/pv-protection";
/// The VolumeAttributesClasses' finalizer.
pub const VAC_PROTECTION: &str = "kubernetes.io/vac-protection";

type Result<T> = std::result::Result<T, kubewright_client::Error>;

/// Keeps `finalizer` on `obj`: added while it is not being deleted, removed once it is
/// and `in_use` says nothing uses it (asked only then).
async fn protect<K, F>(api: Api<K>, obj: &K, finalizer: &str, in_use: F) -> Result<Action>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug + Send + 'static,
    F: AsyncFnOnce() -> Result<bool>,
{
    let Some(name) = obj.meta().name.as_deref() else {
        return Ok(Action::await_change());
    };
    let at = obj.finalizers().iter().position(|f| f == finalizer);
    let patch = match (obj.is_being_deleted(), at) {
        (true, Some(i)) if !in_use().await? => remove_finalizer_patch(i, finalizer),
        (false, None) => add_finalizer_patch(obj, finalizer),
        _ => return Ok(Action::await_change()),
    };
    match api
        .patch(name, &PatchParams::default(), &Patch::Json(patch))
        .await
    {
        Ok(_) => Ok(Action::await_change()),
        Err(e) if e.is_not_found() => Ok(Action::await_change()),
        // A failed guard (the cache was behind): try again with back-off.
        Err(e) => Err(e),
    }
}

/// Adds the claim protection controller: claims are its primary objects, and every
/// pod event reconciles the claims the pod names.
pub fn add_pvc(manager: &mut Manager) -> std::result::Result<(), ManagerError> {
    let pods = manager.factory().informer::<Pod>(InformerParams::all());
    let controller = manager
        .controller::<PersistentVolumeClaim>(Source::new(InformerParams::all()))
        .watches::<Pod>(Source::from_informer(pods.clone()), |pod: &Pod| {
            let ns = pod.metadata.namespace.as_deref();
            claims_named(pod)
                .into_iter()
                .map(|claim| ObjectKey::new(ns, &claim))
                .collect()
        })
        .named(PVC_NAME);
    let ctx = PvcCtx {
        pods: pods.store(),
        client: manager.client().clone(),
    };
    manager.add(controller, reconcile_pvc, Arc::new(ctx))
}

struct PvcCtx {
    pods: Store<Pod>,
    client: Client,
}

async fn reconcile_pvc(pvc: Arc<PersistentVolumeClaim>, ctx: Arc<PvcCtx>) -> Result<Action> {
    let ns = pvc.metadata.namespace.clone().unwrap_or_default();
    let api: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &ns);
    let in_use = async || -> Result<bool> {
        if ctx
            .pods
            .list_namespace(&ns)
            .iter()
            .any(|p| pod_uses_claim(p, &pvc))
        {
            return Ok(true);
        }
        // The cache may not have a pod just scheduled: ask the server (as upstream).
        let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
        let listed = pods.list(&ListParams::default()).await?;
        Ok(listed.items.iter().any(|p| pod_uses_claim(p, &pvc)))
    };
    protect(api, &pvc, PVC_PROTECTION, in_use).await
}

/// The claims a pod names: its `persistentVolumeClaim` volumes and the claims of its
/// generic ephemeral volumes (`<pod>-<volume>`).
fn claims_named(pod: &Pod) -> Vec<String> {
    let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_ref());
    volumes
        .into_iter()
        .flatten()
        .filter_map(|v| match (&v.persistent_volume_claim, &v.ephemeral) {
            (Some(c), _) => Some(c.claim_name.clone()),
            (None, Some(_)) => Some(format!("{pod_name}-{}", v.name)),
            (None, None) => None,
        })
        .collect()
}

/// Whether `pod` uses `claim` as upstream's `podUsesPVC` counts it: only a scheduled pod
/// (the kubelet starts no pod whose claim is being deleted); a claim it names, or the
/// claim of one of its generic ephemeral volumes, controlled by the pod, while the pod
/// has not finished.
fn pod_uses_claim(pod: &Pod, claim: &PersistentVolumeClaim) -> bool {
    let scheduled = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    if !scheduled {
        return false;
    }
    let claim_name = claim.metadata.name.as_deref().unwrap_or_default();
    let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
    let finished = matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    );
    let controlled_by_pod =
        claim.metadata.owner_references.iter().flatten().any(|o| {
            Some(o.uid.as_str()) == pod.metadata.uid.as_deref() && o.controller == Some(true)
        });
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_ref());
    volumes.into_iter().flatten().any(|v| {
        v.persistent_volume_claim
            .as_ref()
            .is_some_and(|c| c.claim_name == claim_name)
            || (!finished
                && v.ephemeral.is_some()
                && format!("{pod_name}-{}", v.name) == claim_name
                && controlled_by_pod)
    })
}

/// Adds the volume protection controller.
pub fn add_pv(manager: &mut Manager) -> std::result::Result<(), ManagerError> {
    let controller = manager
        .controller::<PersistentVolume>(Source::new(InformerParams::all()))
        .named(PV_NAME);
    let client = manager.client().clone();
    manager.add(controller, reconcile_pv, Arc::new(client))
}

async fn reconcile_pv(pv: Arc<PersistentVolume>, client: Arc<Client>) -> Result<Action> {
    let bound = pv.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
    let api: Api<PersistentVolume> = Api::all((*client).clone());
    protect(api, &pv, PV_PROTECTION, async || Ok(bound)).await
}

/// Adds the VolumeAttributesClass protection controller: classes are its primary
/// objects, and every event of a claim or volume reconciles the classes it names.
pub fn add_vac(manager: &mut Manager) -> std::result::Result<(), ManagerError> {
    let claims = manager
        .factory()
        .informer::<PersistentVolumeClaim>(InformerParams::all());
    let volumes = manager
        .factory()
        .informer::<PersistentVolume>(InformerParams::all());
    let keys = |names: Vec<String>| -> Vec<ObjectKey> {
        names.iter().map(|n| ObjectKey::new(None, n)).collect()
    };
    let controller = manager
        .controller::<VolumeAttributesClass>(Source::new(InformerParams::all()))
        .watches::<PersistentVolumeClaim>(Source::from_informer(claims.clone()), move |c| {
            keys(classes_of_claim(c))
        })
        .watches::<PersistentVolume>(Source::from_informer(volumes.clone()), move |v| {
            keys(classes_of_volume(v))
        })
        .named(VAC_NAME);
    let ctx = VacCtx {
        claims: claims.store(),
        volumes: volumes.store(),
        client: manager.client().clone(),
    };
    manager.add(controller, reconcile_vac, Arc::new(ctx))
}

struct VacCtx {
    claims: Store<PersistentVolumeClaim>,
    volumes: Store<PersistentVolume>,
    client: Client,
}

async fn reconcile_vac(vac: Arc<VolumeAttributesClass>, ctx: Arc<VacCtx>) -> Result<Action> {
    let name = vac.metadata.name.clone().unwrap_or_default();
    let named = |classes: Vec<String>| classes.contains(&name);
    let in_use = async || -> Result<bool> {
        Ok(ctx.claims.list().iter().any(|c| named(classes_of_claim(c)))
            || ctx
                .volumes
                .list()
                .iter()
                .any(|v| named(classes_of_volume(v))))
    };
    let api: Api<VolumeAttributesClass> = Api::all(ctx.client.clone());
    protect(api, &vac, VAC_PROTECTION, in_use).await
}

/// The VolumeAttributesClasses a claim names: in its spec, and the current and target
/// ones of its status.
fn classes_of_claim(c: &PersistentVolumeClaim) -> Vec<String> {
    let spec = c
        .spec
        .as_ref()
        .and_then(|s| s.volume_attributes_class_name.clone());
    let status = c.status.as_ref();
    let current = status.and_then(|s| s.current_volume_attributes_class_name.clone());
    let target = status
        .and_then(|s| s.modify_volume_status.as_ref())
        .and_then(|m| m.target_volume_attributes_class_name.clone());
    let mut names: Vec<String> = [spec, current, target]
        .into_iter()
        .flatten()
        .filter(|n| !n.is_empty())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The VolumeAttributesClass a volume names in its spec.
fn classes_of_volume(v: &PersistentVolume) -> Vec<String> {
    v.spec
        .as_ref()
        .and_then(|s| s.volume_attributes_class_name.clone())
        .filter(|n| !n.is_empty())
        .into_iter()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    fn claim(name: &str, owner_uid: Option<&str>) -> PersistentVolumeClaim {
        let mut v = json!({"metadata": {"name": name, "namespace": "n"}});
        if let Some(uid) = owner_uid {
            v["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "Pod",
                "name": "p", "uid": uid, "controller": true}]);
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_claim_is_used_by_scheduled_pods_only_and_ephemeral_ones_until_they_finish() {
        let volumes = json!([{"name": "data", "persistentVolumeClaim": {"claimName": "named"}},
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]);
        let scheduled = pod(
            json!({"metadata": {"name": "p", "namespace": "n", "uid": "u1"},
            "spec": {"nodeName": "node", "containers": [], "volumes": volumes}}),
        );
        let mut pending = scheduled.clone();
        pending.spec.as_mut().unwrap().node_name = None;
        let mut finished = scheduled.clone();
        finished.status = serde_json::from_value(json!({"phase": "Succeeded"})).unwrap();

        assert!(pod_uses_claim(&scheduled, &claim("named", None)));
        assert!(!pod_uses_claim(&pending, &claim("named", None)));
        assert!(pod_uses_claim(&finished, &claim("named", None)));
        assert!(pod_uses_claim(&scheduled, &claim("p-scratch", Some("u1"))));
        assert!(!pod_uses_claim(
            &scheduled,
            &claim("p-scratch", Some("other"))
        ));
        assert!(!pod_uses_claim(&scheduled, &claim("p-scratch", None)));
        assert!(!pod_uses_claim(&finished, &claim("p-scratch", Some("u1"))));
        assert_eq!(claims_named(&scheduled), ["named", "p-scratch"]);
    }

    #[test]
    fn classes_named_by_claims_and_volumes() {
        let c: PersistentVolumeClaim = serde_json::from_value(json!({"metadata": {"name": "c"},
            "spec": {"volumeAttributesClassName": "gold"},
            "status": {"currentVolumeAttributesClassName": "silver",
                "modifyVolumeStatus": {"status": "InProgress", "targetVolumeAttributesClassName": "gold"}}}))
        .unwrap();
        assert_eq!(classes_of_claim(&c), ["gold", "silver"]);
        let v: PersistentVolume = serde_json::from_value(json!({"metadata": {"name": "v"},
            "spec": {"volumeAttributesClassName": "bronze"}}))
        .unwrap();
        assert_eq!(classes_of_volume(&v), ["bronze"]);
    }
}
