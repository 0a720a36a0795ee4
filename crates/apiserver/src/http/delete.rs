//! DELETE: options, preconditions, finalizers, propagation and response shapes.

use crate::error::ApiError;
use crate::http::admission::{self, Admission};
use crate::http::api::ApiServer;
use crate::http::conversion;
use crate::http::{self as h, Body, Format, Req};
use crate::registry::ResourceDef;
use crate::registry::meta::{self, meta_mut, meta_str};
use crate::storage::Mutation;
use http::{Response, StatusCode};
use serde_json::{Value, json};
use std::sync::Arc;

const CRD_CLEANUP: &str = "customresourcecleanup.apiextensions.k8s.io";

/// Parsed DeleteOptions.
#[derive(Debug, Default, Clone)]
pub struct DeleteOptions {
    /// Background, Foreground or Orphan.
    pub propagation: Option<String>,
    /// Grace period.
    pub grace_period: Option<i64>,
    /// dryRun=All.
    pub dry_run: bool,
    /// Precondition on uid.
    pub uid: Option<String>,
    /// Precondition on resourceVersion.
    pub resource_version: Option<String>,
    /// The resourceVersion admission saw: a delete of a newer object is prepared and
    /// admitted again.
    pub(crate) admitted_rv: Option<String>,
}

/// The reason of the internal error that tells a delete to start over.
const RACED: &str = "kubewright:AdmissionRaced";

impl DeleteOptions {
    /// Reads options from a non-empty JSON body, else from the query.
    pub fn parse(req: &Req) -> Result<Self, ApiError> {
        if req.body.iter().any(|b| !b.is_ascii_whitespace()) {
            return Self::from_body(&h::decode_body(req)?);
        }
        let grace_period =
            match req.q("gracePeriodSeconds") {
                Some(g) if !g.is_empty() => Some(g.parse().map_err(|_| {
                    ApiError::bad_request(format!("invalid gracePeriodSeconds: {g}"))
                })?),
                _ => None,
            };
        let mut o = Self {
            propagation: req
                .q("propagationPolicy")
                .filter(|s| !s.is_empty())
                .map(str::to_string),
            grace_period,
            ..Self::default()
        };
        let orphan = req.q("orphanDependents").map(|v| v == "true");
        match req.q("dryRun") {
            None | Some("") => {}
            Some("All") => o.dry_run = true,
            Some(v) => {
                return Err(ApiError::invalid_msg(format!(
                    "DeleteOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: [{}]: supported values: \"All\"",
                    crate::error::go_quote(v)
                )));
            }
        }
        o.finish(orphan)
    }

    /// Reads options from a `DeleteOptions` JSON object (a DELETE body, or an
    /// Eviction's `deleteOptions`).
    pub fn from_body(b: &Value) -> Result<Self, ApiError> {
        let mut o = Self::default();
        if let Some(kind) = b.get("kind").and_then(Value::as_str)
            && kind != "DeleteOptions"
        {
            return Err(ApiError::bad_request(format!(
                "expected DeleteOptions, got {kind}"
            )));
        }
        o.propagation = b
            .get("propagationPolicy")
            .and_then(Value::as_str)
            .map(str::to_string);
        o.grace_period = b.get("gracePeriodSeconds").and_then(Value::as_i64);
        let orphan = b.get("orphanDependents").and_then(Value::as_bool);
        o.uid = b
            .pointer("/preconditions/uid")
            .and_then(Value::as_str)
            .map(str::to_string);
        o.resource_version = b
            .pointer("/preconditions/resourceVersion")
            .and_then(Value::as_str)
            .map(str::to_string);
        if let Some(dr) = b.get("dryRun").and_then(Value::as_array) {
            if dr.iter().any(|v| v != "All") {
                return Err(ApiError::invalid_msg(format!(
                    "DeleteOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: {}: supported values: \"All\"",
                    Value::Array(dr.clone())
                )));
            }
            o.dry_run = !dr.is_empty();
        }
        o.finish(orphan)
    }

    /// The DeleteOptions admission passes on (`kind`, `apiVersion` and `dryRun` are added
    /// by `Attributes::with_options`).
    pub(crate) fn admission_options(&self) -> Value {
        let mut o = serde_json::Map::new();
        if let Some(g) = self.grace_period {
            o.insert("gracePeriodSeconds".into(), json!(g));
        }
        if let Some(p) = &self.propagation {
            o.insert("propagationPolicy".into(), json!(p));
        }
        let mut pre = serde_json::Map::new();
        if let Some(uid) = &self.uid {
            pre.insert("uid".into(), json!(uid));
        }
        if let Some(rv) = &self.resource_version {
            pre.insert("resourceVersion".into(), json!(rv));
        }
        if !pre.is_empty() {
            o.insert("preconditions".into(), Value::Object(pre));
        }
        Value::Object(o)
    }

    /// Validates the options and folds `orphanDependents` into the propagation policy.
    fn finish(mut self, orphan: Option<bool>) -> Result<Self, ApiError> {
        let o = &mut self;
        if let (Some(_), Some(p)) = (orphan, &o.propagation) {
            return Err(ApiError::invalid_msg(format!(
                "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Invalid value: {}: orphanDependents and deletionPropagation cannot be both set",
                crate::error::go_quote(p)
            )));
        }
        if let Some(p) = &o.propagation
            && !matches!(p.as_str(), "Orphan" | "Background" | "Foreground")
        {
            return Err(ApiError::invalid_msg(format!(
                "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: {}: supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\"",
                crate::error::go_quote(p)
            )));
        }
        if orphan == Some(true) {
            o.propagation = Some("Orphan".into());
        }
        Ok(self)
    }
}

/// Deletes one object, admitted by `adm`, and shapes the response as the real server does.
pub(crate) async fn delete_one(
    srv: &Arc<ApiServer>,
    def: &ResourceDef,
    ns: &str,
    name: &str,
    o: &DeleteOptions,
    format: &Format,
    adm: &mut Admission,
) -> Result<Response<Body>, ApiError> {
    let (removed, obj) = delete_obj_admitted(srv, def, ns, name, o, adm).await?;
    let obj = srv.present(def, &obj);
    if !removed || def.delete_returns_object {
        return Ok(h::encode(StatusCode::OK, &obj, format));
    }
    let mut details =
        json!({"name": name, "kind": def.plural, "uid": meta_str(&obj, "uid").unwrap_or("")});
    if !def.group.is_empty() {
        details["group"] = json!(def.group);
    }
    Ok(h::encode(
        StatusCode::OK,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}),
        format,
    ))
}

/// A failed delete precondition: kube-apiserver names the kind, not the resource.
fn precondition_failed(def: &ResourceDef, name: &str, why: String) -> ApiError {
    let kind = if def.group.is_empty() {
        def.kind.clone()
    } else {
        format!("{}.{}", def.kind, def.group)
    };
    let mut e = ApiError::conflict(def, name, &why);
    e.status.message = format!("Operation cannot be fulfilled on {kind} \"{name}\": {why}");
    if let Some(d) = e.status.details.as_mut() {
        d.kind = def.kind.clone();
    }
    e
}

/// A delete of a client request: the current object is admitted (mutating webhooks, which
/// may only deny, then validating admission; both see it as `oldObject`), then deleted
/// if it did not change in the meantime (else admitted again).
pub(crate) async fn delete_obj_admitted(
    srv: &Arc<ApiServer>,
    def: &ResourceDef,
    ns: &str,
    name: &str,
    o: &DeleteOptions,
    adm: &mut Admission,
) -> Result<(bool, Value), ApiError> {
    loop {
        let Some(cur) = srv.storage.get(&def.storage_key(), ns, name) else {
            return Err(ApiError::not_found(def, name));
        };
        let current = conversion::to_version(srv, def, (*cur).clone()).await?;
        adm.attrs.object = None;
        adm.attrs.old_object = Some(srv.present(def, &current));
        admission::mutate(srv, adm).await?;
        admission::validate(srv, adm).await?;
        adm.attrs.old_object = None;
        let mut admitted = o.clone();
        admitted.admitted_rv = meta_str(&cur, "resourceVersion").map(str::to_string);
        match delete_obj(srv, def, ns, name, &admitted) {
            Err(e) if e.status.reason == RACED => continue,
            Err(e) => return Err(e),
            Ok((removed, obj)) => {
                return Ok((removed, conversion::to_version(srv, def, obj).await?));
            }
        }
    }
}

/// Deletes or marks for deletion, without admission (the server's own deletes). Returns
/// whether the object is gone and its last state.
pub fn delete_obj(
    srv: &Arc<ApiServer>,
    def: &ResourceDef,
    ns: &str,
    name: &str,
    o: &DeleteOptions,
) -> Result<(bool, Value), ApiError> {
    let is_ns = def.group.is_empty() && def.plural == "namespaces";
    let mut out: Option<(bool, Value)> = None;
    let mut then_delete = false;
    let (stored, _) = srv.storage.mutate(&def.storage_key(), ns, name, |cur, _| {
        let Some(cur) = cur else { return Err(ApiError::not_found(def, name)) };
        if o.admitted_rv.is_some() && meta_str(cur, "resourceVersion") != o.admitted_rv.as_deref() {
            return Err(ApiError::new(500, RACED, "the object changed during admission"));
        }
        if let Some(uid) = &o.uid
            && meta_str(cur, "uid") != Some(uid.as_str()) {
                return Err(precondition_failed(def, name, format!(
                    "the UID in the precondition ({uid}) does not match the UID in record ({}). The object might have been deleted and then recreated", meta_str(cur, "uid").unwrap_or(""))));
            }
        if let Some(rv) = &o.resource_version
            && meta_str(cur, "resourceVersion") != Some(rv.as_str()) {
                return Err(precondition_failed(def, name, format!(
                    "the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({}). The object might have been modified", meta_str(cur, "resourceVersion").unwrap_or(""))));
            }
        let being_deleted = cur.pointer("/metadata/deletionTimestamp").is_some();
        let is_crd = def.group == "apiextensions.k8s.io" && def.plural == "customresourcedefinitions";
        if is_ns && being_deleted {
            let mut e = ApiError::conflict(def, name, "");
            e.status.message = "The system is ensuring all content is removed from this namespace.  Upon completion, this namespace will automatically be purged by the system.".into();
            return Err(e);
        }
        let mut next = (**cur).clone();
        let mut fins: Vec<Value> = next.pointer("/metadata/finalizers").and_then(Value::as_array).cloned().unwrap_or_default();
        if is_crd && !being_deleted && !fins.iter().any(|f| f == CRD_CLEANUP) {
            // Like the CRD storage: custom resources are cleaned up before the CRD goes.
            fins.push(json!(CRD_CLEANUP));
        }
        if !being_deleted {
            let extra = match o.propagation.as_deref() {
                Some("Foreground") => Some("foregroundDeletion"),
                Some("Orphan") => Some("orphan"),
                _ => None,
            };
            if let Some(f) = extra
                && !fins.iter().any(|x| x == f) {
                    fins.push(json!(f));
                }
        }
        // A pod the simulated kubelet runs terminates gracefully, as on a real node.
        if let Some(grace) = crate::kubelet::graceful_delete(srv, def, cur, o.grace_period) {
            crate::kubelet::mark_terminating(&mut next, grace, &fins);
            out = Some((false, next.clone()));
            return Ok(if o.dry_run || next == **cur { Mutation::Keep } else { Mutation::Put(next) });
        }
        let keep_ns = is_ns && next.pointer("/spec/finalizers").and_then(Value::as_array).is_some_and(|a| !a.is_empty());
        // A pod is always deleted gracefully (its strategy's CheckGracefulDelete), with
        // a period of 0 when it is not running: kube-apiserver first stores it marked
        // (deletionTimestamp now, deletionGracePeriodSeconds 0, generation + 1), which
        // watchers see as MODIFIED, then deletes it.
        if fins.is_empty() && !being_deleted && def.group.is_empty() && def.plural == "pods" {
            let m = meta_mut(&mut next);
            m.insert("deletionTimestamp".into(), json!(meta::now_time()));
            m.insert("deletionGracePeriodSeconds".into(), json!(0));
            if let Some(g) = m.get("generation").and_then(Value::as_i64).filter(|g| *g > 0) {
                m.insert("generation".into(), json!(g + 1));
            }
            out = Some((true, next.clone()));
            if o.dry_run {
                return Ok(Mutation::Keep);
            }
            then_delete = true;
            return Ok(Mutation::Put(next));
        }
        if fins.is_empty() && !keep_ns {
            out = Some((true, next));
            return Ok(if o.dry_run { Mutation::Keep } else { Mutation::Delete });
        }
        if being_deleted {
            // kube-apiserver's BeforeDelete: a pending graceful deletion of a pod may
            // only be shortened (a pod that finished or was never scheduled: to 0).
            let shortened = def.group.is_empty() && def.plural == "pods" && shorten_grace(&mut next, o.grace_period);
            out = Some((false, next.clone()));
            return Ok(if shortened && !o.dry_run { Mutation::Put(next) } else { Mutation::Keep });
        }
        {
            let m = meta_mut(&mut next);
            m.insert("finalizers".into(), Value::Array(fins.clone()));
            if fins.is_empty() {
                m.remove("finalizers");
            }
            m.insert("deletionTimestamp".into(), json!(meta::now_time()));
            // Namespaces and CRDs have their own deletion; other kinds are marked as
            // kube-apiserver's store marks an object with pending finalizers.
            if !is_ns && !is_crd {
                m.insert("deletionGracePeriodSeconds".into(), json!(0));
                if let Some(g) = m.get("generation").and_then(Value::as_i64).filter(|g| *g > 0) {
                    m.insert("generation".into(), json!(g + 1));
                }
            }
        }
        if is_ns {
            next["status"]["phase"] = json!("Terminating");
        }
        if is_crd {
            let cond = json!({"type": "Terminating", "status": "True", "lastTransitionTime": meta::now_time(),
                "reason": "InstanceDeletionPending",
                "message": "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon"});
            match next.pointer_mut("/status/conditions").and_then(Value::as_array_mut) {
                Some(c) => {
                    c.retain(|c| c.get("type") != Some(&json!("Terminating")));
                    c.push(cond);
                }
                None => next["status"]["conditions"] = json!([cond]),
            }
        }
        out = Some((false, next.clone()));
        Ok(if o.dry_run { Mutation::Keep } else { Mutation::Put(next) })
    })?;
    if let (Some(stored), Some((false, _)), false) = (&stored, &out, o.dry_run) {
        out = Some((false, (**stored).clone()));
    }
    if then_delete && let Some(marked) = stored {
        // The marked pod (its uid the precondition), unless a writer added a finalizer
        // in between: then the finalizer's owner finishes the deletion.
        srv.storage.mutate(&def.storage_key(), ns, name, |cur, _| {
            let finalized = |c: &Value| {
                c.pointer("/metadata/finalizers")
                    .and_then(Value::as_array)
                    .is_some_and(|a| !a.is_empty())
            };
            Ok::<_, ApiError>(match cur {
                Some(c) if meta_str(c, "uid") == meta_str(&marked, "uid") && !finalized(c) => {
                    Mutation::Delete
                }
                _ => Mutation::Keep,
            })
        })?;
        out = Some((true, (*marked).clone()));
    }
    if !o.dry_run {
        srv.after_write(def);
    }
    srv.kick.notify_one();
    out.ok_or_else(|| ApiError::internal("delete produced no result"))
}

/// Shortens a terminating pod's pending graceful deletion to the period a new delete
/// asks for (its `CheckGracefulDelete`: the requested period, else the pod's own; 0 for
/// a pod that finished or was never scheduled), moving `deletionTimestamp` earlier by
/// the difference, as kube-apiserver's `BeforeDelete` does. Whether it changed.
fn shorten_grace(pod: &mut Value, requested: Option<i64>) -> bool {
    let unscheduled = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty);
    let finished = matches!(
        pod.pointer("/status/phase").and_then(Value::as_str),
        Some("Succeeded" | "Failed")
    );
    let period = if unscheduled || finished {
        0
    } else {
        requested
            .or_else(|| {
                pod.pointer("/spec/terminationGracePeriodSeconds")
                    .and_then(Value::as_i64)
            })
            .unwrap_or(0)
            .max(0)
    };
    let m = meta_mut(pod);
    let Some(current) = m.get("deletionGracePeriodSeconds").and_then(Value::as_i64) else {
        return false;
    };
    if current == 0 || period >= current {
        return false;
    }
    let moved = m
        .get("deletionTimestamp")
        .and_then(Value::as_str)
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .and_then(|t| {
            t.checked_sub(jiff::SignedDuration::from_secs(current - period))
                .ok()
        });
    if let Some(t) = moved {
        m.insert(
            "deletionTimestamp".into(),
            json!(t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()),
        );
    }
    m.insert("deletionGracePeriodSeconds".into(), json!(period));
    true
}
