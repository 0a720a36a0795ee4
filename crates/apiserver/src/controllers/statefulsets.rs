//! kube-controller-manager's statefulset controller.
//!
//! A StatefulSet's pods are `<set>-<ordinal>` (from `spec.ordinals.start`), labelled with
//! their name, index and `controller-revision-hash`, with `hostname` and the service's
//! `subdomain`; each has its claims from `volumeClaimTemplates` (`<claim>-<set>-<ordinal>`,
//! labelled with the selector's labels, kept when the pod goes: the `Retain` policy).
//! The template's revisions are ControllerRevisions (`<set>-<hash>`, numbered, holding
//! the template as a `$patch: replace` patch).
//!
//! `OrderedReady` (the default) creates one pod at a time, each once the ones before it
//! are running and ready, and removes the highest ordinal first, one at a time;
//! `Parallel` does both at once. A `RollingUpdate` replaces pods from the highest ordinal
//! down to `partition`, one at a time, each once the others are ready; `OnDelete` waits
//! for pods to be deleted. A failed pod is replaced. Status: `replicas`,
//! `readyReplicas`, `availableReplicas`, `currentReplicas`, `updatedReplicas`,
//! `currentRevision`, `updateRevision`, `collisionCount`, `observedGeneration`; events
//! as upstream's.
//!
//! Not done: the `WhenDeleted`/`WhenScaled: Delete` claim retention policies (claims are
//! always kept), `maxUnavailable` for rolling updates, and revision history limits.

use super::workloads::{
    availability, controller_of, create_pod, delete_pod, deleting, event, int, key_of, live_object,
    now, owner_ref, ready_since, template_hash, terminal, write_status,
};
use crate::http::api::ApiServer;
use crate::registry::meta::{meta_str, string_map};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

pub(super) const STATEFULSETS: &str = "apps/statefulsets";
const PODS: &str = "/pods";
const CLAIMS: &str = "/persistentvolumeclaims";
const REVISIONS: &str = "apps/controllerrevisions";
const REVISION_LABEL: &str = "controller-revision-hash";
const COMPONENT: &str = "statefulset-controller";

fn owned_by(obj: &Value, uid: &str) -> bool {
    controller_of(obj)
        .and_then(|r| r.get("uid"))
        .and_then(Value::as_str)
        == Some(uid)
}

/// The ControllerRevision of `set` (a StatefulSet or DaemonSet, `kind`) holding `template`
/// (found or created): its name and revision number.
pub(super) fn revision_for(
    srv: &ApiServer,
    set: &Value,
    kind: &str,
    template: &Value,
) -> Option<(String, i64)> {
    let (ns, name) = key_of(set);
    let uid = meta_str(set, "uid").unwrap_or("");
    let mut max = 0;
    for cr in srv.storage.list(REVISIONS, Some(&ns)).0 {
        if !owned_by(&cr, uid) {
            continue;
        }
        let rev = int(&cr, "/revision").unwrap_or(0);
        max = max.max(rev);
        let mut held = cr
            .pointer("/data/spec/template")
            .cloned()
            .unwrap_or_default();
        if let Some(m) = held.as_object_mut() {
            m.remove("$patch");
        }
        if held == *template {
            return Some((meta_str(&cr, "name").unwrap_or("").to_string(), rev));
        }
    }
    let def = srv.def("apps", "v1", "controllerrevisions")?;
    let collisions = int(set, "/status/collisionCount").unwrap_or(0);
    let hash = template_hash(template, collisions);
    let mut labels = template
        .pointer("/metadata/labels")
        .cloned()
        .unwrap_or_else(|| json!({}));
    labels["controller.kubernetes.io/hash"] = json!(hash);
    let mut data = template.clone();
    data["$patch"] = json!("replace");
    let cr = json!({"apiVersion": "apps/v1", "kind": "ControllerRevision",
        "metadata": {"name": format!("{name}-{hash}"), "namespace": ns, "labels": labels,
            "ownerReferences": [owner_ref(set, kind)]},
        "data": {"spec": {"template": data}}, "revision": max + 1});
    let stored = srv
        .create_object(&def, &ns, cr, super::workloads::MANAGER, false)
        .ok()?;
    Some((meta_str(&stored, "name").unwrap_or("").to_string(), max + 1))
}

/// The template a revision holds.
fn template_of(srv: &ApiServer, ns: &str, revision: &str) -> Option<Value> {
    let cr = srv.storage.get(REVISIONS, ns, revision)?;
    let mut t = cr.pointer("/data/spec/template").cloned()?;
    if let Some(m) = t.as_object_mut() {
        m.remove("$patch");
    }
    Some(t)
}

fn ordinal_of(set_name: &str, pod: &Value) -> Option<i64> {
    meta_str(pod, "name")?
        .strip_prefix(set_name)?
        .strip_prefix('-')?
        .parse()
        .ok()
}

fn running_and_ready(pod: &Value) -> bool {
    pod.pointer("/status/phase").and_then(Value::as_str) == Some("Running")
        && ready_since(pod).is_some()
        && !deleting(pod)
}

/// Creates pod `ordinal` from `template` at `revision`, with its claims.
async fn create_ordinal(
    srv: &Arc<ApiServer>,
    set: &Value,
    template: &Value,
    revision: &str,
    ordinal: i64,
) -> bool {
    let (ns, name) = key_of(set);
    let pod_name = format!("{name}-{ordinal}");
    let mut spec = template.get("spec").cloned().unwrap_or_else(|| json!({}));
    // Claims first, as upstream: `<claim>-<set>-<ordinal>`.
    let selector_labels = string_map(set, "/spec/selector/matchLabels");
    for claim in set
        .pointer("/spec/volumeClaimTemplates")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let claim_name = meta_str(claim, "name").unwrap_or("").to_string();
        let full = format!("{claim_name}-{name}-{ordinal}");
        if srv.storage.get(CLAIMS, &ns, &full).is_none() {
            let Some(def) = srv.def("", "v1", "persistentvolumeclaims") else {
                return false;
            };
            let mut meta = claim.get("metadata").cloned().unwrap_or_else(|| json!({}));
            meta["name"] = json!(full);
            meta["namespace"] = json!(ns);
            for (k, v) in &selector_labels {
                meta["labels"][k] = json!(v);
            }
            let pvc = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta,
                "spec": claim.get("spec").cloned().unwrap_or_else(|| json!({}))});
            match srv.create_object(&def, &ns, pvc, super::workloads::MANAGER, false) {
                Ok(_) => event(
                    srv,
                    set,
                    COMPONENT,
                    false,
                    "SuccessfulCreate",
                    &format!("create Claim {full} Pod {pod_name} in StatefulSet {name} success"),
                ),
                Err(e) => {
                    event(
                        srv,
                        set,
                        COMPONENT,
                        true,
                        "FailedCreate",
                        &format!(
                            "create Claim {full} for Pod {pod_name} in StatefulSet {name} failed error: {}",
                            e.status.message
                        ),
                    );
                    return false;
                }
            }
        }
        let volume = json!({"name": claim_name, "persistentVolumeClaim": {"claimName": full}});
        let vols = spec
            .as_object_mut()
            .map(|m| m.entry("volumes").or_insert_with(|| json!([])));
        if let Some(Value::Array(vols)) = vols {
            vols.retain(|v| v.get("name").and_then(Value::as_str) != Some(claim_name.as_str()));
            vols.push(volume);
        }
    }
    spec["hostname"] = json!(pod_name);
    if let Some(service) = set
        .pointer("/spec/serviceName")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    {
        spec["subdomain"] = json!(service);
    }
    let mut meta = Map::new();
    meta.insert("name".into(), json!(pod_name));
    meta.insert("generateName".into(), json!(format!("{name}-")));
    meta.insert("namespace".into(), json!(ns));
    let mut labels = template
        .pointer("/metadata/labels")
        .cloned()
        .unwrap_or_else(|| json!({}));
    labels[REVISION_LABEL] = json!(revision);
    labels["statefulset.kubernetes.io/pod-name"] = json!(pod_name);
    labels["apps.kubernetes.io/pod-index"] = json!(ordinal.to_string());
    meta.insert("labels".into(), labels);
    if let Some(a) = template.pointer("/metadata/annotations") {
        meta.insert("annotations".into(), a.clone());
    }
    meta.insert(
        "ownerReferences".into(),
        json!([owner_ref(set, "StatefulSet")]),
    );
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec});
    match create_pod(srv, &ns, pod).await {
        Ok(_) => {
            event(
                srv,
                set,
                COMPONENT,
                false,
                "SuccessfulCreate",
                &format!("create Pod {pod_name} in StatefulSet {name} successful"),
            );
            true
        }
        Err(e) => {
            event(
                srv,
                set,
                COMPONENT,
                true,
                "FailedCreate",
                &format!(
                    "create Pod {pod_name} in StatefulSet {name} failed error: {}",
                    e.status.message
                ),
            );
            false
        }
    }
}

/// One StatefulSet; whether it must be looked at again later (pods becoming available).
pub(super) async fn sync_statefulset(
    srv: &Arc<ApiServer>,
    ns: &str,
    name: &str,
    names: Vec<String>,
) -> bool {
    let Some(set) = live_object(srv, STATEFULSETS, ns, name) else {
        return false;
    };
    let uid = meta_str(&set, "uid").unwrap_or("").to_string();
    let mut by_ordinal: BTreeMap<i64, Value> = BTreeMap::new();
    for pod_name in names {
        if let Some(pod) = srv.storage.get(PODS, ns, &pod_name)
            && owned_by(&pod, &uid)
            && let Some(i) = ordinal_of(name, &pod)
        {
            by_ordinal.insert(i, (*pod).clone());
        }
    }
    let template = set.pointer("/spec/template").cloned().unwrap_or_default();
    let Some((update_rev, _)) = revision_for(srv, &set, "StatefulSet", &template) else {
        return false;
    };
    let current_rev = set
        .pointer("/status/currentRevision")
        .and_then(Value::as_str)
        .filter(|r| srv.storage.get(REVISIONS, ns, r).is_some())
        .unwrap_or(&update_rev)
        .to_string();
    let replicas = int(&set, "/spec/replicas").unwrap_or(1).max(0);
    let start = int(&set, "/spec/ordinals/start").unwrap_or(0).max(0);
    let ordered = set
        .pointer("/spec/podManagementPolicy")
        .and_then(Value::as_str)
        != Some("Parallel");
    let rolling = set
        .pointer("/spec/updateStrategy/type")
        .and_then(Value::as_str)
        != Some("OnDelete");
    let partition = int(&set, "/spec/updateStrategy/rollingUpdate/partition").unwrap_or(0);
    let wanted = start..start + replicas;
    let mut busy = false;
    // Pods that should exist: failed ones replaced, missing ones created (in order).
    for i in wanted.clone() {
        match by_ordinal.get(&i) {
            Some(pod) if terminal(pod) && !deleting(pod) => {
                delete_pod(srv, &set, COMPONENT, pod, |n| {
                    format!("delete Pod {n} in StatefulSet {name} successful")
                });
                busy = true;
            }
            Some(pod) => {
                if ordered && !running_and_ready(pod) {
                    busy = true;
                }
            }
            None => {
                let (rev, t) = if i - start < partition && current_rev != update_rev {
                    (
                        current_rev.clone(),
                        template_of(srv, ns, &current_rev).unwrap_or_else(|| template.clone()),
                    )
                } else {
                    (update_rev.clone(), template.clone())
                };
                create_ordinal(srv, &set, &t, &rev, i).await;
                busy = true;
            }
        }
        if ordered && busy {
            break;
        }
    }
    // Pods beyond the replicas go, highest first (one at a time when ordered).
    if !busy || !ordered {
        let condemned: Vec<&Value> = by_ordinal
            .iter()
            .rev()
            .filter(|(i, _)| !wanted.contains(i))
            .map(|(_, p)| p)
            .collect();
        for pod in condemned {
            if deleting(pod) {
                busy = true;
            } else {
                delete_pod(srv, &set, COMPONENT, pod, |n| {
                    format!("delete Pod {n} in StatefulSet {name} successful")
                });
                busy = true;
            }
            if ordered {
                break;
            }
        }
    }
    // A rolling update: the highest pod not at the update revision, once all are ready.
    if rolling && !busy {
        let all_ready = wanted
            .clone()
            .all(|i| by_ordinal.get(&i).is_some_and(running_and_ready));
        if all_ready {
            for i in wanted.clone().rev().filter(|i| i - start >= partition) {
                if let Some(pod) = by_ordinal.get(&i)
                    && string_map(pod, "/metadata/labels").get(REVISION_LABEL) != Some(&update_rev)
                {
                    delete_pod(srv, &set, COMPONENT, pod, |n| {
                        format!("delete Pod {n} in StatefulSet {name} successful")
                    });
                    break;
                }
            }
        }
    }
    // The status from the pods as they are now.
    let min_ready = int(&set, "/spec/minReadySeconds").unwrap_or(0);
    let at = now();
    let (mut count, mut ready, mut available, mut current, mut updated) = (0, 0, 0, 0, 0);
    let mut later = false;
    for i in wanted.clone() {
        let Some(pod) = srv.storage.get(PODS, ns, &format!("{name}-{i}")) else {
            continue;
        };
        if !owned_by(&pod, &uid) {
            continue;
        }
        count += 1;
        if running_and_ready(&pod) {
            ready += 1;
            let (ok, wait) = availability(&pod, min_ready, at);
            available += i64::from(ok);
            later |= wait;
        }
        let rev = string_map(&pod, "/metadata/labels")
            .get(REVISION_LABEL)
            .cloned()
            .unwrap_or_default();
        if rev == current_rev {
            current += 1;
        }
        if rev == update_rev {
            updated += 1;
        }
    }
    let mut status = set
        .get("status")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let done = updated == replicas && ready == replicas;
    let mut put = |k: &str, v: Value| {
        status.insert(k.into(), v);
    };
    put(
        "observedGeneration",
        json!(int(&set, "/metadata/generation").unwrap_or(1)),
    );
    put("replicas", json!(count));
    put("readyReplicas", json!(ready));
    put("availableReplicas", json!(available));
    put(
        "currentReplicas",
        json!(if done { updated } else { current }),
    );
    put("updatedReplicas", json!(updated));
    put(
        "currentRevision",
        json!(if done { &update_rev } else { &current_rev }),
    );
    put("updateRevision", json!(update_rev));
    put(
        "collisionCount",
        json!(int(&set, "/status/collisionCount").unwrap_or(0)),
    );
    // Zero counts are omitted, as Go writes them.
    for k in ["readyReplicas", "currentReplicas", "updatedReplicas"] {
        if status.get(k) == Some(&json!(0)) {
            status.remove(k);
        }
    }
    write_status(srv, "statefulsets", &set, status);
    later
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinals_come_from_the_name() {
        let pod = |n: &str| json!({"metadata": {"name": n}});
        assert_eq!(ordinal_of("db", &pod("db-0")), Some(0));
        assert_eq!(ordinal_of("db", &pod("db-12")), Some(12));
        assert_eq!(ordinal_of("db", &pod("dbx-1")), None);
        assert_eq!(ordinal_of("db", &pod("db-a")), None);
    }
}
