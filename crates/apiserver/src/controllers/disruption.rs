//! The eviction subresource that honours PodDisruptionBudgets, after kube-apiserver's
//! `pkg/registry/core/pod/storage/eviction.go`. The budgets' status comes from
//! kubewright-controllers' disruption controller.

use crate::error::ApiError;
use crate::http::api::{ApiServer, Target};
use crate::http::{self as h, Body, Req};
use crate::registry::meta::{self, meta_str};
use crate::storage::Mutation;
use http::{Response, StatusCode};
use serde_json::{Map, Value, json};
use std::sync::Arc;

const PDBS: &str = "policy/poddisruptionbudgets";
const PODS: &str = "/pods";

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
