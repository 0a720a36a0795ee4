//! kube-controller-manager's resourceclaim controller, the part that needs no scheduler:
//! a pod's `spec.resourceClaims` entry that names a ResourceClaimTemplate gets a
//! ResourceClaim made from it (named `<pod>-<claim>-<random>`, owned by the pod so the
//! garbage collector deletes it with the pod, annotated with the pod's claim name, the
//! template's labels and annotations), and the pod's `status.resourceClaimStatuses` says
//! which claim that is (applied by `ResourceClaimController`). Allocation and reservation
//! are the scheduler's and the drivers' (this server runs neither).
//!
//! A pass looks only at the pods that may need a claim: those written since the last pass
//! (from the storage's events; from a full listing when those were compacted away) and
//! those still waiting for a template. So its cost follows the pod writes, not the pods
//! stored (a pass over 20,000 stored pods took ~30 ms when it listed them all).

use crate::http::api::ApiServer;
use crate::registry::meta::meta_str;
use crate::storage::EventType;
use crate::storage::Mutation;
use serde_json::{Map, Value, json};
use std::collections::BTreeSet;
use std::sync::Arc;

const PODS: &str = "/pods";
const CLAIMS: &str = "resource.k8s.io/resourceclaims";
const TEMPLATES: &str = "resource.k8s.io/resourceclaimtemplates";
/// The annotation naming the pod's claim a generated claim is for.
const POD_CLAIM_NAME: &str = "resource.kubernetes.io/pod-claim-name";
/// The field manager of the pod status it writes.
const MANAGER: &str = "ResourceClaimController";

/// The pods a pass must look at, kept between passes.
#[derive(Default)]
pub(crate) struct PendingPods {
    /// The revision the set is current at (0: not built yet).
    rv: u64,
    /// (namespace, name) of the pods that may lack a claim or its status.
    pods: BTreeSet<(String, String)>,
}

impl PendingPods {
    fn note(&mut self, pod: &Value) {
        let key = (
            meta_str(pod, "namespace").unwrap_or("").to_string(),
            meta_str(pod, "name").unwrap_or("").to_string(),
        );
        if wanted(pod).is_empty() {
            self.pods.remove(&key);
        } else {
            self.pods.insert(key);
        }
    }

    /// Brings the set up to the storage's current revision.
    fn refresh(&mut self, srv: &ApiServer) {
        if self.rv != 0
            && let Ok((events, rv)) = srv.storage.events_after(self.rv)
        {
            for e in events.iter().filter(|e| e.resource == PODS) {
                match e.kind {
                    EventType::Deleted => {
                        self.pods.remove(&(e.namespace.clone(), e.name.clone()));
                    }
                    EventType::Added | EventType::Modified => self.note(&e.object),
                }
            }
            self.rv = rv.max(1);
            return;
        }
        let (pods, rv) = srv.storage.list(PODS, None);
        self.pods.clear();
        for pod in &pods {
            self.note(pod);
        }
        self.rv = rv.max(1);
    }
}

/// The claims a pod wants from templates and has no status for yet, as (claim, template);
/// none for a pod being deleted or finished.
fn wanted(pod: &Value) -> Vec<(String, String)> {
    let from_templates = || {
        pod.pointer("/spec/resourceClaims")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| {
                let name = c.get("name")?.as_str()?;
                let template = c.get("resourceClaimTemplateName")?.as_str()?;
                Some((name.to_string(), template.to_string()))
            })
    };
    if from_templates().next().is_none()
        || pod.pointer("/metadata/deletionTimestamp").is_some()
        || matches!(
            pod.pointer("/status/phase").and_then(Value::as_str),
            Some("Succeeded" | "Failed")
        )
    {
        return Vec::new();
    }
    let known: Vec<&str> = pod
        .pointer("/status/resourceClaimStatuses")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| s.get("name").and_then(Value::as_str))
        .collect();
    from_templates()
        .filter(|(claim, _)| !known.contains(&claim.as_str()))
        .collect()
}

/// One pass: the missing claims of the pods written since the last pass (or still waiting
/// for their template), and their statuses.
pub(crate) fn reconcile(srv: &ApiServer) {
    let Some(claim_def) = srv.def("resource.k8s.io", "v1", "resourceclaims") else {
        return;
    };
    let pending: Vec<(String, String)> = {
        let mut index = srv.claims_index.lock().unwrap_or_else(|e| e.into_inner());
        index.refresh(srv);
        index.pods.iter().cloned().collect()
    };
    for (ns, pod_name) in pending {
        let Some(pod) = srv.storage.get(PODS, &ns, &pod_name) else {
            continue;
        };
        make_claims(srv, &claim_def, &pod);
    }
}

/// Creates the claims `pod` lacks (or finds the ones made before its status said so) and
/// records them in its status.
fn make_claims(srv: &ApiServer, claim_def: &Arc<crate::registry::ResourceDef>, pod: &Value) {
    let wanted = wanted(pod);
    if wanted.is_empty() {
        return;
    }
    let ns = meta_str(pod, "namespace").unwrap_or("").to_string();
    let pod_name = meta_str(pod, "name").unwrap_or("").to_string();
    let pod_uid = meta_str(pod, "uid").unwrap_or("").to_string();
    let mut found: Vec<(String, String)> = Vec::new();
    for (claim, template) in &wanted {
        let existing = srv.storage.list(CLAIMS, Some(&ns)).0.into_iter().find(|c| {
            c.pointer(&format!(
                "/metadata/annotations/{}",
                POD_CLAIM_NAME.replace('/', "~1")
            ))
            .and_then(Value::as_str)
                == Some(claim)
                && owned_by(c, &pod_uid)
        });
        let name = match existing {
            Some(c) => meta_str(&c, "name").unwrap_or("").to_string(),
            None => {
                let Some(t) = srv.storage.get(TEMPLATES, &ns, template) else {
                    continue;
                };
                let obj = claim_from(&t, &pod_name, &pod_uid, claim);
                match srv.create_object(claim_def, &ns, obj, "kube-controller-manager", false) {
                    Ok(created) => meta_str(&created, "name").unwrap_or("").to_string(),
                    Err(e) => {
                        tracing::warn!(pod = %pod_name, claim = %claim, "creating a ResourceClaim: {}", e.status.message);
                        continue;
                    }
                }
            }
        };
        found.push((claim.clone(), name));
    }
    if !found.is_empty() {
        record_statuses(srv, &ns, &pod_name, &found);
    }
}

fn owned_by(obj: &Value, uid: &str) -> bool {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|os| {
            os.iter()
                .any(|o| o.get("uid").and_then(Value::as_str) == Some(uid))
        })
}

/// The name a generated claim starts with: `<pod>-<claim>-`, both shortened in proportion
/// when that is longer than 57 characters (room for 5 random ones in 63).
fn generate_name(pod: &str, claim: &str) -> String {
    const MAX_BASE: usize = 57;
    let whole = format!("{pod}-{claim}-");
    if whole.len() <= MAX_BASE {
        return whole;
    }
    let cut = |s: &str| {
        let mut n = s.len() * MAX_BASE / whole.len();
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        s[..n].to_string()
    };
    format!("{}-{}", cut(pod), cut(claim))
}

/// A claim made from a template for a pod's claim.
fn claim_from(template: &Value, pod: &str, pod_uid: &str, claim: &str) -> Value {
    let meta = template.pointer("/spec/metadata");
    let mut annotations: Map<String, Value> = meta
        .and_then(|m| m.get("annotations"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    annotations.insert(POD_CLAIM_NAME.into(), json!(claim));
    let mut metadata = json!({
        "generateName": generate_name(pod, claim),
        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": pod_uid,
            "controller": true}],
        "annotations": annotations,
    });
    if let Some(labels) = meta
        .and_then(|m| m.get("labels"))
        .filter(|l| l.as_object().is_some_and(|m| !m.is_empty()))
    {
        metadata["labels"] = labels.clone();
    }
    json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": metadata,
        "spec": template.pointer("/spec/spec").cloned().unwrap_or_else(|| json!({})),
    })
}

/// Adds `(claim, resourceClaimName)` entries to the pod's `status.resourceClaimStatuses`,
/// owned by [`MANAGER`] as an apply of the status.
fn record_statuses(srv: &ApiServer, ns: &str, pod: &str, found: &[(String, String)]) {
    let _ = srv
        .storage
        .mutate::<crate::storage::StorageError>(PODS, ns, pod, |cur, _| {
            let Some(cur) = cur else {
                return Ok(Mutation::Keep);
            };
            let mut next = (**cur).clone();
            let mut list: Vec<Value> = next
                .pointer("/status/resourceClaimStatuses")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for (claim, name) in found {
                if !list
                    .iter()
                    .any(|s| s.get("name").and_then(Value::as_str) == Some(claim))
                {
                    list.push(json!({"name": claim, "resourceClaimName": name}));
                }
            }
            if !next.get("status").is_some_and(Value::is_object) {
                next["status"] = json!({});
            }
            next["status"]["resourceClaimStatuses"] = Value::Array(list);
            if next == **cur {
                return Ok(Mutation::Keep);
            }
            let ty = crate::registry::schema::builtin_def("io.k8s.api.core.v1.Pod");
            let mut changed = crate::registry::fields::compare(cur, &next, ty);
            changed.retain_root("status", true);
            crate::registry::meta::record_managed(
                &mut next,
                MANAGER,
                "Apply",
                "v1",
                Some("status"),
                changed.changed(),
                &Default::default(),
                false,
            );
            Ok(Mutation::Put(next))
        });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::api::ServerOptions;

    fn create(srv: &ApiServer, group: &str, plural: &str, obj: Value) {
        let def = srv.def(group, "v1", plural).expect("served");
        srv.create_object(&def, "default", obj, "test", false)
            .expect("created");
    }

    fn pod(srv: &ApiServer, name: &str, template: &str) {
        create(
            srv,
            "",
            "pods",
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"containers": [{"name": "c", "image": "i"}],
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}]}}),
        );
    }

    fn template(srv: &ApiServer, name: &str) {
        create(
            srv,
            "resource.k8s.io",
            "resourceclaimtemplates",
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"spec": {"devices": {"requests": [{"name": "r",
                    "exactly": {"deviceClassName": "gpu.example.com"}}]}}}}),
        );
    }

    fn claim_status(srv: &ApiServer, pod: &str) -> Option<String> {
        srv.storage
            .get(PODS, "default", pod)?
            .pointer("/status/resourceClaimStatuses/0/resourceClaimName")
            .and_then(Value::as_str)
            .map(str::to_string)
    }

    fn pending(srv: &ApiServer) -> Vec<String> {
        let index = srv.claims_index.lock().unwrap_or_else(|e| e.into_inner());
        index.pods.iter().map(|(_, n)| n.clone()).collect()
    }

    #[test]
    fn only_pods_written_since_the_last_pass_or_waiting_are_looked_at() {
        let srv = ApiServer::new(ServerOptions::default());
        template(&srv, "t1");
        pod(&srv, "ready", "t1");
        pod(&srv, "waiting", "t2");
        create(
            &srv,
            "",
            "pods",
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "plain", "namespace": "default"},
                "spec": {"containers": [{"name": "c", "image": "i"}]}}),
        );
        reconcile(&srv);
        assert!(claim_status(&srv, "ready").is_some_and(|c| c.starts_with("ready-gpu-")));
        assert_eq!(
            claim_status(&srv, "waiting"),
            None,
            "its template is missing"
        );
        // The next pass reads the status write from the events: only the pod still
        // waiting for its template is left.
        reconcile(&srv);
        assert_eq!(pending(&srv), ["waiting"]);
        template(&srv, "t2");
        reconcile(&srv);
        assert!(claim_status(&srv, "waiting").is_some_and(|c| c.starts_with("waiting-gpu-")));
        reconcile(&srv);
        assert!(pending(&srv).is_empty());
    }

    #[test]
    fn a_compacted_history_rebuilds_the_set_from_a_listing() {
        let srv = ApiServer::new(ServerOptions {
            history: 16,
            ..Default::default()
        });
        reconcile(&srv);
        template(&srv, "t1");
        pod(&srv, "early", "t1");
        for i in 0..40 {
            create(
                &srv,
                "",
                "configmaps",
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("filler-{i}"), "namespace": "default"}}),
            );
        }
        reconcile(&srv);
        assert!(
            claim_status(&srv, "early").is_some(),
            "found by the listing"
        );
    }

    #[test]
    fn long_names_are_shortened_in_proportion() {
        assert_eq!(generate_name("p1", "gpu"), "p1-gpu-");
        let g = generate_name(&"p".repeat(60), &"c".repeat(30));
        assert!(g.len() <= 57, "{g}");
        assert!(
            g.starts_with(&"p".repeat(37)) && g.ends_with(&"c".repeat(18)),
            "{g}"
        );
    }
}
