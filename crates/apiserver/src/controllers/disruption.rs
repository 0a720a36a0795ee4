//! PodDisruptionBudgets: the disruption controller (status) and the eviction
//! subresource that honours them, after kube-controller-manager's
//! `pkg/controller/disruption` and kube-apiserver's
//! `pkg/registry/core/pod/storage/eviction.go`.

use crate::error::ApiError;
use crate::http::api::{ApiServer, Target};
use crate::http::{self as h, Body, Req};
use crate::registry::meta::{self, meta_str};
use crate::storage::Mutation;
use http::{Response, StatusCode};
use serde_json::{Map, Value, json};
use std::collections::HashSet;
use std::sync::Arc;

const PDBS: &str = "policy/poddisruptionbudgets";
const PODS: &str = "/pods";

/// How long an eviction keeps a pod out of `currentHealthy` while it is being deleted
/// (the controller's `DeletionTimeout`).
const DELETION_TIMEOUT_SECS: i64 = 2 * 60;

/// More disrupted pods than this in a budget's status block evictions.
const MAX_DISRUPTED_PODS: usize = 2000;

/// A budget's selector: `None` when missing or invalid (matches nothing); `Some(empty)`
/// matches every pod.
fn selector(pdb: &Value) -> Option<kubewright_core::LabelSelector> {
    let sel = pdb.pointer("/spec/selector")?;
    let sel: k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector =
        serde_json::from_value(sel.clone()).ok()?;
    kubewright_core::LabelSelector::from_k8s(&sel).ok()
}

fn is_empty_selector(pdb: &Value) -> bool {
    pdb.pointer("/spec/selector").is_none_or(|s| {
        s.get("matchLabels")
            .and_then(Value::as_object)
            .is_none_or(Map::is_empty)
            && s.get("matchExpressions")
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty)
    })
}

fn is_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some("Ready")
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

fn now() -> jiff::Timestamp {
    jiff::Timestamp::now()
}

/// An int-or-string of a budget, scaled against `total` (percentages round up, as
/// `GetScaledValueFromIntOrPercent(…, true)`).
fn scaled(v: &Value, total: i64) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => {
            let pct: i64 = s.strip_suffix('%')?.parse().ok()?;
            Some((pct * total + 99) / 100)
        }
        _ => None,
    }
}

/// The replicas of the controllers of `pods` (each counted once), as the disruption
/// controller finds them: Deployments through their ReplicaSets, ReplicaSets,
/// StatefulSets and ReplicationControllers.
fn expected_scale(srv: &ApiServer, ns: &str, pods: &[Arc<Value>]) -> i64 {
    let mut seen = HashSet::new();
    let mut total = 0;
    let replicas = |o: &Value| {
        o.pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(1)
    };
    let controller = |o: &Value| -> Option<Value> {
        o.pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)?
            .iter()
            .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
            .cloned()
    };
    for pod in pods {
        let Some(r) = controller(pod) else { continue };
        let kind = r.get("kind").and_then(Value::as_str).unwrap_or("");
        let name = r.get("name").and_then(Value::as_str).unwrap_or("");
        let uid = r.get("uid").and_then(Value::as_str).unwrap_or("");
        let key = match kind {
            "ReplicaSet" => "apps/replicasets",
            "StatefulSet" => "apps/statefulsets",
            "ReplicationController" => "/replicationcontrollers",
            _ => continue,
        };
        let Some(owner) = srv
            .storage
            .get(key, ns, name)
            .filter(|o| meta_str(o, "uid") == Some(uid))
        else {
            continue;
        };
        // A ReplicaSet of a Deployment counts as the Deployment.
        let (owner, ouid) = match controller(&owner) {
            Some(d) if kind == "ReplicaSet" && d.get("kind") == Some(&json!("Deployment")) => {
                let dname = d.get("name").and_then(Value::as_str).unwrap_or("");
                let duid = d
                    .get("uid")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                match srv
                    .storage
                    .get("apps/deployments", ns, dname)
                    .filter(|o| meta_str(o, "uid") == Some(duid.as_str()))
                {
                    Some(dep) => (dep, duid),
                    None => continue,
                }
            }
            _ => (owner, uid.to_string()),
        };
        if seen.insert(ouid) {
            total += replicas(&owner);
        }
    }
    total
}

/// One pass of the disruption controller over every budget.
pub(crate) fn reconcile(srv: &Arc<ApiServer>) {
    let (pdbs, _) = srv.storage.list(PDBS, None);
    for pdb in pdbs {
        let ns = meta_str(&pdb, "namespace").unwrap_or("").to_string();
        let name = meta_str(&pdb, "name").unwrap_or("").to_string();
        if pdb.pointer("/metadata/deletionTimestamp").is_some() {
            continue;
        }
        let status = compute(srv, &ns, &pdb);
        let _ = srv.storage.mutate::<ApiError>(PDBS, &ns, &name, |cur, _| {
            let Some(cur) = cur else {
                return Ok(Mutation::Keep);
            };
            let mut next = (**cur).clone();
            let mut status = status.clone();
            // Keep the transition time of an unchanged condition.
            if let (Some(old), Some(new)) = (
                cur.pointer("/status/conditions/0"),
                status.pointer_mut("/conditions/0"),
            ) && old.get("status") == new.get("status")
                && let Some(t) = old.get("lastTransitionTime")
            {
                new["lastTransitionTime"] = t.clone();
            }
            if cur.get("status") == Some(&status) {
                return Ok(Mutation::Keep);
            }
            next["status"] = status;
            Ok(Mutation::Put(next))
        });
    }
}

/// A budget's status from the pods it selects.
fn compute(srv: &ApiServer, ns: &str, pdb: &Value) -> Value {
    let (all, _) = srv.storage.list(PODS, Some(ns));
    let pods: Vec<Arc<Value>> = match selector(pdb) {
        Some(sel) => all
            .into_iter()
            .filter(|p| sel.matches(&crate::registry::meta::labels(p)))
            .collect(),
        None => Vec::new(),
    };
    let spec = pdb.get("spec").cloned().unwrap_or_default();
    let (expected, desired) = if let Some(mu) = spec.get("maxUnavailable") {
        let expected = expected_scale(srv, ns, &pods);
        let max = scaled(mu, expected).unwrap_or(0);
        (expected, (expected - max).max(0))
    } else if let Some(ma) = spec.get("minAvailable") {
        match ma {
            Value::Number(n) => (pods.len() as i64, n.as_i64().unwrap_or(0)),
            _ => {
                let expected = expected_scale(srv, ns, &pods);
                (expected, scaled(ma, expected).unwrap_or(0))
            }
        }
    } else {
        (0, 0)
    };
    // Evicted pods not yet deleted stay out of the count for a while.
    let t = now();
    let mut disrupted = Map::new();
    if let Some(d) = pdb
        .pointer("/status/disruptedPods")
        .and_then(Value::as_object)
    {
        for (pod, at) in d {
            let when = at.as_str().and_then(|s| s.parse::<jiff::Timestamp>().ok());
            let fresh = when.is_some_and(|w| {
                w.checked_add(jiff::SignedDuration::from_secs(DELETION_TIMEOUT_SECS))
                    .is_ok_and(|end| end > t)
            });
            let live = pods.iter().any(|p| {
                meta_str(p, "name") == Some(pod.as_str())
                    && p.pointer("/metadata/deletionTimestamp").is_none()
            });
            if fresh && live {
                disrupted.insert(pod.clone(), at.clone());
            }
        }
    }
    let healthy = pods
        .iter()
        .filter(|p| {
            p.pointer("/metadata/deletionTimestamp").is_none()
                && is_ready(p)
                && !meta_str(p, "name").is_some_and(|n| disrupted.contains_key(n))
        })
        .count() as i64;
    let mut allowed = healthy - desired;
    if expected <= 0 || allowed <= 0 {
        allowed = 0;
    }
    let generation = pdb
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let mut status = json!({
        "observedGeneration": generation,
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "disruptionsAllowed": allowed,
        "expectedPods": expected,
        "conditions": [condition(allowed, generation)],
    });
    if !disrupted.is_empty() {
        status["disruptedPods"] = Value::Object(disrupted);
    }
    status
}

fn condition(allowed: i64, generation: i64) -> Value {
    let (status, reason) = if allowed > 0 {
        ("True", "SufficientPods")
    } else {
        ("False", "InsufficientPods")
    };
    json!({"type": "DisruptionAllowed", "status": status, "reason": reason, "message": "",
        "observedGeneration": generation, "lastTransitionTime": meta::now_time()})
}

fn too_many_requests(cause: String) -> ApiError {
    let mut e = ApiError::new(
        429,
        "TooManyRequests",
        "Cannot evict pod as it would violate the pod's disruption budget.",
    );
    e.status.details = Some(kubewright_core::StatusDetails {
        causes: vec![kubewright_core::StatusCause {
            reason: "DisruptionBudget".into(),
            message: cause,
            field: String::new(),
        }],
        ..Default::default()
    });
    e
}

/// Checks the budget and takes one disruption from it (kube's `checkAndDecrement`).
fn check_and_decrement(
    srv: &ApiServer,
    ns: &str,
    pdb: &str,
    pod: &str,
    dry_run: bool,
) -> Result<(), ApiError> {
    srv.storage
        .mutate::<ApiError>(PDBS, ns, pdb, |cur, _| {
            let Some(cur) = cur else {
                // Deleted meanwhile: kube's retry would get NotFound.
                return Err(ApiError::new(404, "NotFound", format!("poddisruptionbudgets.policy \"{pdb}\" not found")));
            };
            let st = cur.get("status").cloned().unwrap_or_default();
            let int = |k: &str| st.get(k).and_then(Value::as_i64).unwrap_or(0);
            let generation = cur.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(0);
            if int("observedGeneration") < generation {
                return Err(too_many_requests(format!(
                    "The disruption budget {pdb} is still being processed by the server."
                )));
            }
            let allowed = int("disruptionsAllowed");
            if allowed < 0 {
                return Err(ApiError::new(403, "Forbidden", format!(
                    "poddisruptionbudgets.policy \"{pdb}\" is forbidden: pdb disruptions allowed is negative"
                )));
            }
            let disrupted = st.get("disruptedPods").and_then(Value::as_object).map_or(0, Map::len);
            if disrupted > MAX_DISRUPTED_PODS {
                return Err(ApiError::new(403, "Forbidden", format!(
                    "poddisruptionbudgets.policy \"{pdb}\" is forbidden: DisruptedPods map too big - too many evictions not confirmed by PDB controller"
                )));
            }
            if allowed == 0 {
                return Err(too_many_requests(format!(
                    "The disruption budget {pdb} needs {} healthy pods and has {} currently",
                    int("desiredHealthy"),
                    int("currentHealthy")
                )));
            }
            if dry_run {
                return Ok(Mutation::Keep);
            }
            let mut next = (**cur).clone();
            next["status"]["disruptionsAllowed"] = json!(allowed - 1);
            if allowed - 1 == 0 {
                let mut c = condition(0, generation);
                if let Some(old) = next.pointer("/status/conditions/0")
                    && old.get("status") == c.get("status")
                    && let Some(t) = old.get("lastTransitionTime")
                {
                    c["lastTransitionTime"] = t.clone();
                }
                next["status"]["conditions"] = json!([c]);
            }
            if !next["status"].get("disruptedPods").is_some_and(Value::is_object) {
                next["status"]["disruptedPods"] = json!({});
            }
            next["status"]["disruptedPods"][pod] = json!(meta::now_time());
            Ok(Mutation::Put(next))
        })
        .map(|_| ())
}

/// `POST pods/<name>/eviction`.
pub(crate) fn evict(
    srv: &Arc<ApiServer>,
    req: &Req,
    t: &Target,
    name: &str,
) -> Result<Response<Body>, ApiError> {
    let ns = t.namespace.as_deref().unwrap_or("");
    let body = h::decode_body(req)?;
    if meta_str(&body, "name").is_some_and(|n| n != name) {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Eviction object",
        ));
    }
    let mut opts = delete_options(body.get("deleteOptions"))?;
    if req.q("dryRun") == Some("All") {
        opts.dry_run = true;
    }
    let success = || {
        Ok(h::encode(
            StatusCode::CREATED,
            &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
            &h::object_format(req),
        ))
    };
    let rv_unset = opts.resource_version.as_deref().is_none_or(str::is_empty);
    let pod = srv
        .storage
        .get(PODS, ns, name)
        .ok_or_else(|| ApiError::not_found(&t.def, name))?;
    let phase = pod
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("");
    let deleting = pod.pointer("/metadata/deletionTimestamp").is_some();
    // Terminal, pending or deleting pods skip the budget.
    if matches!(phase, "Succeeded" | "Failed" | "Pending" | "") || deleting {
        let mut o = opts.clone();
        if !matches!(phase, "Succeeded" | "Failed") && !deleting && rv_unset {
            o.resource_version = meta_str(&pod, "resourceVersion").map(str::to_string);
        }
        delete_with_condition(srv, t, ns, name, o)?;
        return success();
    }
    if !rv_unset && opts.resource_version.as_deref() != meta_str(&pod, "resourceVersion") {
        return Err(ApiError::conflict(
            &t.def,
            name,
            "resourceVersion precondition doesn't match",
        ));
    }
    let pod_labels = crate::registry::meta::labels(&pod);
    let (all, _) = srv.storage.list(PDBS, Some(ns));
    let matching: Vec<Arc<Value>> = all
        .into_iter()
        .filter(|p| !is_empty_selector(p))
        .filter(|p| selector(p).is_some_and(|s| s.matches(&pod_labels)))
        .collect();
    if matching.len() > 1 {
        return Ok(h::encode(
            StatusCode::INTERNAL_SERVER_ERROR,
            &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                "code": 500}),
            &h::object_format(req),
        ));
    }
    let mut pin_rv = false;
    if let Some(pdb) = matching.first() {
        let pdb_name = meta_str(pdb, "name").unwrap_or("");
        let st = |k: &str| {
            pdb.pointer(&format!("/status/{k}"))
                .and_then(Value::as_i64)
                .unwrap_or(0)
        };
        let always = pdb
            .pointer("/spec/unhealthyPodEvictionPolicy")
            .and_then(Value::as_str)
            == Some("AlwaysAllow");
        if !is_ready(&pod)
            && (always
                || (st("currentHealthy") >= st("desiredHealthy") && st("desiredHealthy") > 0))
        {
            // An unready pod of a healthy application goes without taking a disruption.
            pin_rv = true;
        } else {
            check_and_decrement(srv, ns, pdb_name, name, opts.dry_run)?;
        }
        if pin_rv {
            let mut o = opts.clone();
            if rv_unset {
                o.resource_version = meta_str(&pod, "resourceVersion").map(str::to_string);
            }
            return match delete_with_condition(srv, t, ns, name, o) {
                Err(e) if e.status.code == 409 && rv_unset => Err(too_many_requests(format!(
                    "The disruption budget {pdb_name} is still being processed by the server."
                ))),
                Err(e) => Err(e),
                Ok(()) => success(),
            };
        }
    }
    delete_with_condition(srv, t, ns, name, opts)?;
    success()
}

/// Eviction's DeleteOptions.
fn delete_options(v: Option<&Value>) -> Result<crate::http::delete::DeleteOptions, ApiError> {
    match v.filter(|v| v.is_object()) {
        Some(v) => crate::http::delete::DeleteOptions::from_body(v),
        None => Ok(crate::http::delete::DeleteOptions::default()),
    }
}

/// Marks the pod with the `DisruptionTarget` condition, then deletes it
/// (kube's `addConditionAndDeletePod`).
fn delete_with_condition(
    srv: &Arc<ApiServer>,
    t: &Target,
    ns: &str,
    name: &str,
    mut o: crate::http::delete::DeleteOptions,
) -> Result<(), ApiError> {
    if !o.dry_run {
        let (stored, _) = srv.storage.mutate::<ApiError>(PODS, ns, name, |cur, _| {
            let Some(cur) = cur else {
                return Err(ApiError::not_found(&t.def, name));
            };
            let pre = |what: &str, want: &str, have: &str, tail: &str| {
                let mut e = ApiError::conflict(&t.def, name, "");
                e.status.message = format!(
                    "Operation cannot be fulfilled on Pod \"{name}\": the {what} in the precondition ({want}) does not match the {what} in record ({have}). The object might have {tail}"
                );
                if let Some(d) = e.status.details.as_mut() {
                    d.kind = "Pod".into();
                }
                e
            };
            let have_uid = meta_str(cur, "uid").unwrap_or("");
            if let Some(u) = o.uid.as_deref().filter(|u| !u.is_empty() && *u != have_uid) {
                return Err(pre("UID", u, have_uid, "been deleted and then recreated"));
            }
            let have_rv = meta_str(cur, "resourceVersion").unwrap_or("");
            if let Some(r) = o.resource_version.as_deref().filter(|r| !r.is_empty() && *r != have_rv) {
                return Err(pre("ResourceVersion", r, have_rv, "been modified"));
            }
            let mut next = (**cur).clone();
            if !next.get("status").is_some_and(Value::is_object) {
                next["status"] = json!({});
            }
            let cond = json!({"type": "DisruptionTarget", "status": "True", "lastProbeTime": null,
                "lastTransitionTime": meta::now_time(), "reason": "EvictionByEvictionAPI",
                "message": "Eviction API: evicting"});
            let conds = next["status"]
                .as_object_mut()
                .map(|s| s.entry("conditions").or_insert_with(|| json!([])));
            if let Some(Value::Array(cs)) = conds {
                match cs.iter_mut().find(|c| c.get("type") == Some(&json!("DisruptionTarget"))) {
                    Some(c) if c.get("status") == Some(&json!("True")) => return Ok(Mutation::Keep),
                    Some(c) => *c = cond,
                    None => cs.push(cond),
                }
            }
            Ok(Mutation::Put(next))
        })?;
        if o.resource_version.as_deref().is_some_and(|r| !r.is_empty())
            && let Some(s) = stored
        {
            o.resource_version = meta_str(&s, "resourceVersion").map(str::to_string);
        }
    }
    crate::http::delete::delete_obj(srv, &t.def, ns, name, &o).map(|_| ())
}
