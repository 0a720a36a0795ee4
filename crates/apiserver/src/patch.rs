//! PATCH: JSON Patch, JSON merge patch, strategic merge patch and server-side apply.

use crate::api::{ApiServer, Target, add_warnings, check_body};
use crate::error::ApiError;
use crate::fields::{self, Path};
use crate::http::{self as h, Body, Format, Req};
use crate::meta::{meta_mut, meta_str};
use crate::registry::ResourceDef;
use http::{Response, StatusCode};
use kubewright_core::StatusCause;
use serde_json::{Map, Value, json};
use std::collections::BTreeSet;
use std::sync::Arc;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Json,
    Merge,
    Strategic,
    Apply,
}

/// Serves a PATCH.
pub fn patch(
    srv: &Arc<ApiServer>,
    req: &Req,
    t: &Target,
    name: &str,
    sub: Option<&str>,
) -> Result<Response<Body>, ApiError> {
    let ct = req.header("content-type").unwrap_or("");
    let essence = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let kind = match essence.as_str() {
        "application/json-patch+json" => Kind::Json,
        "application/merge-patch+json" => Kind::Merge,
        "application/strategic-merge-patch+json" if t.def.builtin => Kind::Strategic,
        "application/apply-patch+yaml" => Kind::Apply,
        "application/strategic-merge-patch+json" => {
            return Err(ApiError::unsupported_media_type(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
            ));
        }
        _ => {
            let mut e = ApiError::unsupported_media_type("415: Unsupported Media Type");
            e.0.details = Some(Default::default());
            return Err(e);
        }
    };
    match sub {
        None | Some("status") | Some("scale") => {}
        Some(_) => return Err(ApiError::path_not_found()),
    }
    if sub == Some("status") && !t.def.has_status || sub == Some("scale") && t.def.scale.is_none() {
        return Err(ApiError::path_not_found());
    }
    if kind != Kind::Apply && req.q("force").is_some() {
        return Err(ApiError::invalid_msg(
            "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch",
        ));
    }
    let mut wo = ApiServer::write_options(req, kind == Kind::Apply)?;
    let ns = t.namespace.as_deref().unwrap_or("").to_string();
    let key = t.def.storage_key();
    let current = srv.storage.get(&key, &ns, name);

    if kind == Kind::Apply {
        return apply(srv, req, t, name, sub, current, wo);
    }
    let Some(current) = current else {
        return Err(ApiError::not_found(&t.def, name));
    };
    // The document the patch applies to: the object, or its Scale view.
    let base: Value = if sub == Some("scale") {
        crate::extra::to_scale(&t.def, &current)?
    } else {
        srv.present(&t.def, &current)
    };
    let patch_text = std::str::from_utf8(&req.body)
        .map_err(|_| ApiError::bad_request("the patch is not valid UTF-8"))?;
    let mut doc = base.clone();
    match kind {
        Kind::Json => {
            let p: json_patch::Patch = serde_json::from_str(patch_text)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
            if p.0.len() > 10_000 {
                return Err(ApiError::too_large(10_000));
            }
            // Like kube-apiserver's JSON patch library: `test` of a missing path against
            // `null` passes.
            let p = json_patch::Patch(
                p.0.into_iter()
                    .filter(|op| match op {
                        json_patch::PatchOperation::Test(t) => {
                            !(t.value.is_null() && doc.pointer(t.path.as_str()).is_none())
                        }
                        _ => true,
                    })
                    .collect(),
            );
            json_patch::patch(&mut doc, &p).map_err(|_| {
                let mut e = ApiError::invalid_msg(
                    "the server rejected our request due to an error in our request",
                );
                e.0.details = Some(Default::default());
                e
            })?;
        }
        Kind::Merge => {
            let p: Value = serde_json::from_str(patch_text)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
            json_patch::merge(&mut doc, &p);
        }
        Kind::Strategic => {
            let p: Value = serde_json::from_str(patch_text)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
            if !p.is_object() {
                return Err(ApiError::bad_request(
                    "a strategic merge patch must be a JSON object",
                ));
            }
            strategic_merge(&mut doc, &p).map_err(ApiError::bad_request)?;
        }
        Kind::Apply => {}
    }
    if sub == Some("scale") {
        let stored = crate::extra::apply_scale(srv, t, name, &doc, &wo)?;
        return Ok(h::encode(
            StatusCode::OK,
            &crate::extra::to_scale(&t.def, &stored)?,
            &Format::Json,
        ));
    }
    // A resourceVersion in the patch is a precondition; otherwise patch the latest.
    let patched_rv = meta_str(&doc, "resourceVersion").map(str::to_string);
    let base_rv = meta_str(&base, "resourceVersion").map(str::to_string);
    if patched_rv == base_rv {
        meta_mut(&mut doc).remove("resourceVersion");
    }
    if meta_str(&doc, "name") != Some(name) {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({}) does not match the name on the URL ({name})",
            meta_str(&doc, "name").unwrap_or("")
        )));
    }
    if meta_str(&doc, "uid").is_some_and(|u| Some(u) != meta_str(&current, "uid")) {
        return Err(ApiError::conflict(
            &t.def,
            name,
            "Precondition failed: UID in precondition does not match",
        ));
    }
    let obj = check_body(&t.def, doc, t.namespace.as_deref(), Some(name))?;
    let obj = srv.normalize(&t.def, obj, &mut wo)?;
    let (_, stored) = srv.update_object(&t.def, &ns, name, sub, obj, &wo, false)?;
    let mut resp = h::encode(
        StatusCode::OK,
        &srv.present(&t.def, &stored),
        &h::negotiate(req, false).unwrap_or(Format::Json),
    );
    add_warnings(&mut resp, &wo.warnings);
    srv.kick.notify_one();
    Ok(resp)
}

/// Merge keys of built-in list fields (from the Kubernetes API definitions'
/// `patchMergeKey`). `None` = the field merges as a set of primitives.
fn merge_key(field: &str, items: &[Value]) -> Option<Option<&'static str>> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "resourceClaims"
        | "readinessGates"
        | "schedulingGates" => Some(if field == "readinessGates" {
            "conditionType"
        } else {
            "name"
        }),
        "volumeMounts" => Some("mountPath"),
        "volumeDevices" => Some("devicePath"),
        "hostAliases" => Some("ip"),
        "conditions" => Some("type"),
        "ownerReferences" => Some("uid"),
        "topologySpreadConstraints" => Some("topologyKey"),
        "ports" => {
            if items.iter().any(|i| i.get("containerPort").is_some()) {
                Some("containerPort")
            } else {
                Some("port")
            }
        }
        "finalizers" => None,
        _ => return None,
    })
}

/// Applies a strategic merge patch in place.
pub fn strategic_merge(orig: &mut Value, patch: &Value) -> Result<(), String> {
    let Some(pm) = patch.as_object() else {
        *orig = patch.clone();
        return Ok(());
    };
    match pm.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            let mut p = pm.clone();
            p.remove("$patch");
            *orig = Value::Object(p);
            return Ok(());
        }
        Some("delete") => {
            *orig = Value::Null;
            return Ok(());
        }
        Some(other) if other != "merge" => return Err(format!("unknown patch type: {other}")),
        _ => {}
    }
    if !orig.is_object() {
        *orig = Value::Object(Map::new());
    }
    let Some(om) = orig.as_object_mut() else {
        return Ok(());
    };
    if let Some(retain) = pm.get("$retainKeys") {
        let keys: Vec<&str> = retain
            .as_array()
            .ok_or("$retainKeys must be a list")?
            .iter()
            .map(|k| k.as_str().ok_or("$retainKeys must contain strings"))
            .collect::<Result<_, _>>()?;
        om.retain(|k, _| keys.contains(&k.as_str()));
    }
    let mut orders: Vec<(String, Vec<Value>)> = Vec::new();
    for (k, v) in pm {
        if k == "$patch" || k == "$retainKeys" {
            continue;
        }
        if let Some(field) = k.strip_prefix("$setElementOrder/") {
            orders.push((
                field.to_string(),
                v.as_array()
                    .ok_or("$setElementOrder must be a list")?
                    .clone(),
            ));
            continue;
        }
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            let del = v
                .as_array()
                .ok_or("$deleteFromPrimitiveList must be a list")?;
            if let Some(Value::Array(list)) = om.get_mut(field) {
                list.retain(|x| !del.contains(x));
            }
            continue;
        }
        if v.is_null() {
            om.remove(k);
            continue;
        }
        match (om.get_mut(k), v) {
            (Some(o @ Value::Object(_)), Value::Object(_)) => {
                strategic_merge(o, v)?;
                if o.is_null() {
                    om.remove(k);
                }
            }
            (Some(Value::Array(ol)), Value::Array(pl)) => match merge_key(k, pl) {
                Some(Some(key)) => merge_list_by_key(ol, pl, key)?,
                Some(None) => {
                    for item in pl {
                        if !ol.contains(item) {
                            ol.push(item.clone());
                        }
                    }
                }
                None => *ol = strip_directives(pl),
            },
            (_, Value::Array(pl)) => {
                om.insert(k.clone(), Value::Array(strip_directives(pl)));
            }
            (_, Value::Object(_)) => {
                let mut fresh = Value::Object(Map::new());
                strategic_merge(&mut fresh, v)?;
                if !fresh.is_null() {
                    om.insert(k.clone(), fresh);
                }
            }
            _ => {
                om.insert(k.clone(), v.clone());
            }
        }
    }
    for (field, order) in orders {
        if let Some(Value::Array(list)) = om.get_mut(&field) {
            let pos = |item: &Value| {
                order.iter().position(|o| {
                    o == item
                        || o.as_object()
                            .is_some_and(|om| om.iter().all(|(k, v)| item.get(k) == Some(v)))
                })
            };
            list.sort_by_key(|i| pos(i).unwrap_or(usize::MAX));
        }
    }
    Ok(())
}

fn strip_directives(list: &[Value]) -> Vec<Value> {
    list.iter()
        .filter(|i| i.get("$patch").is_none())
        .cloned()
        .collect()
}

fn merge_list_by_key(orig: &mut Vec<Value>, patch: &[Value], key: &str) -> Result<(), String> {
    if patch
        .iter()
        .any(|p| p.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        *orig = strip_directives(patch);
        return Ok(());
    }
    for p in patch {
        let Some(kv) = p.get(key) else {
            return Err(format!("map list item is missing the merge key {key:?}"));
        };
        let idx = orig.iter().position(|o| o.get(key) == Some(kv));
        if p.get("$patch").and_then(Value::as_str) == Some("delete") {
            if let Some(i) = idx {
                orig.remove(i);
            }
            continue;
        }
        match idx {
            Some(i) => strategic_merge(&mut orig[i], p)?,
            None => {
                let mut fresh = Value::Object(Map::new());
                strategic_merge(&mut fresh, p)?;
                orig.push(fresh);
            }
        }
    }
    Ok(())
}

/// Deep-merges an applied configuration into an object (maps recursively, keyed lists by key).
fn apply_merge(orig: &mut Value, applied: &Value) {
    match (orig, applied) {
        (Value::Object(om), Value::Object(am)) => {
            for (k, v) in am {
                match om.get_mut(k) {
                    Some(o) if o.is_object() && v.is_object() => apply_merge(o, v),
                    Some(Value::Array(ol)) if matches!(v, Value::Array(al) if fields::is_map_list(al) && fields::is_map_list(ol)) => {
                        if let Value::Array(al) = v {
                            for item in al {
                                let key = fields::item_key(item);
                                match ol.iter_mut().find(|o| fields::item_key(o) == key) {
                                    Some(o) => apply_merge(o, item),
                                    None => ol.push(item.clone()),
                                }
                            }
                        }
                    }
                    _ => {
                        om.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (o, a) => *o = a.clone(),
    }
}

fn remove_path(v: &mut Value, path: &[fields::Step]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = v;
    for step in parents {
        let next = match (step, cur) {
            (fields::Step::Field(f), Value::Object(m)) => m.get_mut(f),
            (fields::Step::Key(k), Value::Array(items)) => items
                .iter_mut()
                .find(|i| fields::item_key(i).is_some_and(|ik| ik == fields::Step::Key(k.clone()))),
            _ => None,
        };
        match next {
            Some(n) => cur = n,
            None => return,
        }
    }
    match (last, cur) {
        (fields::Step::Field(f), Value::Object(m)) => {
            m.remove(f);
        }
        (fields::Step::Key(k), Value::Array(items)) => {
            items.retain(|i| {
                fields::item_key(i).is_none_or(|ik| ik != fields::Step::Key(k.clone()))
            });
        }
        (fields::Step::Value(s), Value::Array(items)) => {
            items.retain(|i| serde_json::from_str::<Value>(s).ok().as_ref() != Some(i))
        }
        _ => {}
    }
}

fn path_text(p: &Path) -> String {
    let mut s = String::new();
    for step in p {
        match step {
            fields::Step::Field(f) => {
                s.push('.');
                s.push_str(f);
            }
            fields::Step::Key(k) => s.push_str(&format!(
                "[{}]",
                k.trim_matches(|c| c == '{' || c == '}')
                    .replace("\":", "=")
                    .replace('"', "")
            )),
            fields::Step::Value(v) => s.push_str(&format!("[{v}]")),
        }
    }
    s
}

fn apply(
    srv: &Arc<ApiServer>,
    req: &Req,
    t: &Target,
    name: &str,
    sub: Option<&str>,
    current: Option<Arc<Value>>,
    mut wo: crate::api::WriteOptions,
) -> Result<Response<Body>, ApiError> {
    let text = std::str::from_utf8(&req.body)
        .map_err(|_| ApiError::bad_request("the apply patch is not valid UTF-8"))?;
    let applied: Value = serde_saphyr::from_str(text)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
    if !applied.is_object() {
        return Err(ApiError::bad_request("the apply patch must be an object"));
    }
    let av = applied
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    if av != t.def.api_version() {
        return Err(ApiError::bad_request(format!(
            "Incorrect version specified in apply patch. Specified patch version: {av}, expected: {}",
            t.def.api_version()
        )));
    }
    if applied
        .pointer("/metadata/managedFields")
        .is_some_and(|v| !v.is_null())
    {
        return Err(ApiError::bad_request("metadata.managedFields must be nil"));
    }
    let force = req.q_bool("force");
    let manager = wo.field_manager.clone();
    let ns = t.namespace.as_deref().unwrap_or("").to_string();
    let applied = check_body(&t.def, applied, t.namespace.as_deref(), Some(name))?;
    let applied = srv.normalize(&t.def, applied, &mut wo)?;
    let mut applied_paths: BTreeSet<Path> = fields::paths_of(&applied);
    if sub == Some("status") {
        applied_paths.retain(|p| p.first() == Some(&fields::Step::Field("status".into())));
    } else if t.def.has_status {
        applied_paths.retain(|p| p.first() != Some(&fields::Step::Field("status".into())));
    }
    let Some(current) = current else {
        if sub.is_some() {
            return Err(ApiError::not_found(&t.def, name));
        }
        srv.check_namespace(&t.def, &ns, name)?;
        let mut obj = applied.clone();
        if t.def.namespaced {
            meta_mut(&mut obj).insert("namespace".into(), json!(ns));
        }
        let stored = srv.create_object_as(&t.def, &ns, obj, &manager, wo.dry_run, "Apply")?;
        let mut resp = h::encode(
            StatusCode::CREATED,
            &srv.present(&t.def, &stored),
            &Format::Json,
        );
        add_warnings(&mut resp, &wo.warnings);
        srv.kick.notify_one();
        return Ok(resp);
    };
    // Ownership and conflicts.
    let entries: Vec<Value> = current
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut previously_mine: BTreeSet<Path> = BTreeSet::new();
    let mut others: BTreeSet<Path> = BTreeSet::new();
    let mut causes = Vec::new();
    for e in &entries {
        let m = e.get("manager").and_then(Value::as_str).unwrap_or("");
        let op = e.get("operation").and_then(Value::as_str).unwrap_or("");
        let esub = e.get("subresource").and_then(Value::as_str);
        let set = e
            .get("fieldsV1")
            .map(fields::from_fields_v1)
            .unwrap_or_default();
        if m == manager && op == "Apply" && esub == sub {
            previously_mine = set;
            continue;
        }
        for p in &set {
            others.insert(p.clone());
            if applied_paths.contains(p)
                && fields::get_path(&current, p) != fields::get_path(&applied, p)
                && !force
            {
                let mut msg = format!("conflict with \"{m}\"");
                if let Some(s) = esub {
                    msg.push_str(&format!(" with subresource \"{s}\""));
                }
                if op == "Update" {
                    msg.push_str(&format!(
                        " using {}",
                        e.get("apiVersion").and_then(Value::as_str).unwrap_or("")
                    ));
                }
                causes.push(StatusCause {
                    reason: "FieldManagerConflict".into(),
                    message: msg,
                    field: path_text(p),
                });
            }
        }
    }
    if !causes.is_empty() {
        let list = causes
            .iter()
            .map(|c| format!("{}: {}", c.message, c.field))
            .collect::<Vec<_>>()
            .join("\n- ");
        let n = causes.len();
        let message = if n == 1 {
            format!("Apply failed with 1 conflict: {list}")
        } else {
            format!("Apply failed with {n} conflicts: {list}")
        };
        let mut e = ApiError::conflict(&t.def, name, "");
        e.0.message = message;
        if let Some(d) = e.0.details.as_mut() {
            d.causes = causes;
        }
        return Err(e);
    }
    let mut next = srv.present(&t.def, &current);
    if let Some(rv) = meta_str(&applied, "resourceVersion") {
        meta_mut(&mut next).insert("resourceVersion".into(), json!(rv));
    } else {
        meta_mut(&mut next).remove("resourceVersion");
    }
    // Drop fields this manager applied before but no longer applies (unless others own them).
    for p in previously_mine.difference(&applied_paths) {
        if !others.contains(p) {
            remove_path(&mut next, p);
        }
    }
    let mut applied_body = applied.clone();
    if let Some(m) = applied_body
        .get_mut("metadata")
        .and_then(Value::as_object_mut)
    {
        m.remove("resourceVersion");
        m.remove("managedFields");
    }
    apply_merge(&mut next, &applied_body);
    wo.apply = Some((applied_paths, force));
    let (_, stored) = srv.update_object(&t.def, &ns, name, sub, next, &wo, false)?;
    let mut resp = h::encode(StatusCode::OK, &srv.present(&t.def, &stored), &Format::Json);
    add_warnings(&mut resp, &wo.warnings);
    srv.kick.notify_one();
    Ok(resp)
}

impl ResourceDef {
    /// Whether strategic merge patch is allowed.
    pub fn allows_strategic(&self) -> bool {
        self.builtin
    }
}

/// Not used by handlers directly: exposed for unit tests of strategic merge.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strategic_merges_containers_by_name() {
        let mut orig = json!({"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}], "finalizers": ["f1"]}});
        strategic_merge(&mut orig, &json!({"spec": {"containers": [{"name": "b", "image": "z"}, {"name": "c", "image": "w"}]}})).unwrap();
        assert_eq!(orig["spec"]["containers"].as_array().unwrap().len(), 3);
        assert_eq!(orig["spec"]["containers"][1]["image"], "z");
        strategic_merge(
            &mut orig,
            &json!({"spec": {"containers": [{"name": "a", "$patch": "delete"}]}}),
        )
        .unwrap();
        assert_eq!(orig["spec"]["containers"][0]["name"], "b");
        strategic_merge(
            &mut orig,
            &json!({"spec": {"$setElementOrder/containers": [{"name": "c"}, {"name": "b"}]}}),
        )
        .unwrap();
        assert_eq!(orig["spec"]["containers"][0]["name"], "c");
        strategic_merge(
            &mut orig,
            &json!({"spec": {"finalizers": ["f2"], "$deleteFromPrimitiveList/finalizers": ["f1"]}}),
        )
        .unwrap();
        assert_eq!(orig["spec"]["finalizers"], json!(["f2"]));
        strategic_merge(&mut orig, &json!({"spec": {"$patch": "replace", "x": 1}})).unwrap();
        assert_eq!(orig["spec"], json!({"x": 1}));
        strategic_merge(&mut orig, &json!({"spec": {"$retainKeys": ["y"], "y": 2}})).unwrap();
        assert_eq!(orig["spec"], json!({"y": 2}));
        assert!(strategic_merge(&mut orig, &json!({"spec": {"$retainKeys": "bad"}})).is_err());
    }
}
