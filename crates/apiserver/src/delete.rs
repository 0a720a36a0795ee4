//! DELETE: options, preconditions, finalizers, propagation and response shapes.

use crate::api::ApiServer;
use crate::error::ApiError;
use crate::http::{self as h, Body, Format, Req};
use crate::meta::{self, meta_mut, meta_str};
use crate::registry::ResourceDef;
use crate::storage::Mutation;
use http::{Response, StatusCode};
use serde_json::{Value, json};
use std::sync::Arc;

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
}

impl DeleteOptions {
    /// Reads options from a non-empty JSON body, else from the query.
    pub fn parse(req: &Req) -> Result<Self, ApiError> {
        let mut o = Self::default();
        let orphan: Option<bool>;
        let body: Option<Value> = if req.body.iter().any(|b| !b.is_ascii_whitespace()) {
            Some(h::decode_body(req)?)
        } else {
            None
        };
        if let Some(b) = &body {
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
            orphan = b.get("orphanDependents").and_then(Value::as_bool);
            o.uid = b
                .pointer("/preconditions/uid")
                .and_then(Value::as_str)
                .map(str::to_string);
            o.resource_version = b
                .pointer("/preconditions/resourceVersion")
                .and_then(Value::as_str)
                .map(str::to_string);
            if let Some(dr) = b.get("dryRun").and_then(Value::as_array) {
                for v in dr {
                    if v != "All" {
                        return Err(ApiError::invalid_msg(format!(
                            "DeleteOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: {v}: supported values: \"All\""
                        )));
                    }
                    o.dry_run = true;
                }
            }
        } else {
            o.propagation = req
                .q("propagationPolicy")
                .filter(|s| !s.is_empty())
                .map(str::to_string);
            o.grace_period = match req.q("gracePeriodSeconds") {
                Some(g) if !g.is_empty() => Some(g.parse().map_err(|_| {
                    ApiError::bad_request(format!("invalid gracePeriodSeconds: {g}"))
                })?),
                _ => None,
            };
            orphan = req.q("orphanDependents").map(|v| v == "true");
            match req.q("dryRun") {
                None | Some("") => {}
                Some("All") => o.dry_run = true,
                Some(v) => {
                    return Err(ApiError::invalid_msg(format!(
                        "DeleteOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: \"{v}\": supported values: \"All\""
                    )));
                }
            }
        }
        if orphan.is_some() && o.propagation.is_some() {
            return Err(ApiError::invalid_msg(
                "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Invalid value: \"\": orphanDependents and deletionPropagation cannot be both set",
            ));
        }
        if let Some(p) = &o.propagation
            && !matches!(p.as_str(), "Orphan" | "Background" | "Foreground")
        {
            return Err(ApiError::invalid_msg(format!(
                "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"{p}\": supported values: \"Foreground\", \"Background\", \"Orphan\""
            )));
        }
        if orphan == Some(true) {
            o.propagation = Some("Orphan".into());
        }
        Ok(o)
    }
}

/// Deletes one object and shapes the response as the real server does.
pub fn delete_one(
    srv: &Arc<ApiServer>,
    def: &ResourceDef,
    ns: &str,
    name: &str,
    o: &DeleteOptions,
    format: &Format,
) -> Result<Response<Body>, ApiError> {
    let (removed, obj) = delete_obj(srv, def, ns, name, o)?;
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

/// Deletes or marks for deletion. Returns whether the object is gone and its last state.
pub fn delete_obj(
    srv: &Arc<ApiServer>,
    def: &ResourceDef,
    ns: &str,
    name: &str,
    o: &DeleteOptions,
) -> Result<(bool, Value), ApiError> {
    let is_ns = def.group.is_empty() && def.plural == "namespaces";
    let mut out: Option<(bool, Value)> = None;
    let (stored, _) = srv.storage.mutate(&def.storage_key(), ns, name, |cur, _| {
        let Some(cur) = cur else { return Err(ApiError::not_found(def, name)) };
        if let Some(uid) = &o.uid
            && meta_str(cur, "uid") != Some(uid.as_str()) {
                return Err(ApiError::conflict(def, name, &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}", meta_str(cur, "uid").unwrap_or(""))));
            }
        if let Some(rv) = &o.resource_version
            && meta_str(cur, "resourceVersion") != Some(rv.as_str()) {
                return Err(ApiError::conflict(def, name, &format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}", meta_str(cur, "resourceVersion").unwrap_or(""))));
            }
        let being_deleted = cur.pointer("/metadata/deletionTimestamp").is_some();
        if is_ns && being_deleted {
            let mut e = ApiError::conflict(def, name, "");
            e.0.message = "The system is ensuring all content is removed from this namespace.  Upon completion, this namespace will automatically be purged by the system.".into();
            return Err(e);
        }
        let mut next = (**cur).clone();
        let mut fins: Vec<Value> = next.pointer("/metadata/finalizers").and_then(Value::as_array).cloned().unwrap_or_default();
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
        let keep_ns = is_ns && next.pointer("/spec/finalizers").and_then(Value::as_array).is_some_and(|a| !a.is_empty());
        if fins.is_empty() && !keep_ns {
            out = Some((true, next));
            return Ok(if o.dry_run { Mutation::Keep } else { Mutation::Delete });
        }
        if being_deleted {
            out = Some((false, next));
            return Ok(Mutation::Keep);
        }
        {
            let m = meta_mut(&mut next);
            m.insert("finalizers".into(), Value::Array(fins.clone()));
            if fins.is_empty() {
                m.remove("finalizers");
            }
            m.insert("deletionTimestamp".into(), json!(meta::now_time()));
            m.insert("deletionGracePeriodSeconds".into(), json!(0));
            let g = m.get("generation").and_then(Value::as_i64).unwrap_or(1);
            m.insert("generation".into(), json!(g + 1));
        }
        if is_ns {
            next["status"]["phase"] = json!("Terminating");
        }
        out = Some((false, next.clone()));
        Ok(if o.dry_run { Mutation::Keep } else { Mutation::Put(next) })
    })?;
    if let (Some(stored), Some((false, _)), false) = (&stored, &out, o.dry_run) {
        out = Some((false, (**stored).clone()));
    }
    srv.kick.notify_one();
    out.ok_or_else(|| ApiError::internal("delete produced no result"))
}
