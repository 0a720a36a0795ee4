//! PATCH: JSON Patch, JSON merge patch, strategic merge patch and server-side apply.

use crate::error::{ApiError, go_json_type};
use crate::http::admission::{Admission, Attributes, Operation};
use crate::http::api::{ApiServer, Target, add_warnings, check_body};
use crate::http::conversion;
use crate::http::{self as h, Body, Format, Req};
use crate::registry::ResourceDef;
use crate::registry::fields::{self, Path};
use crate::registry::meta::{meta_mut, meta_str};
use crate::registry::schema::{self, FieldTy, ListType, Ty};
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
pub(crate) async fn patch(
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
            e.status.details = Some(Default::default());
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
    let current = match srv.storage.get(&key, &ns, name) {
        // The stored object in the request's version (a conversion webhook's work).
        Some(c) if conversion::by_webhook(srv, &t.def) => Some(Arc::new(
            conversion::to_version(srv, &t.def, (*c).clone()).await?,
        )),
        c => c,
    };
    // A patch is admitted as an update (or, when an apply creates, as a create), with
    // its options as UpdateOptions (CreateOptions).
    let mut adm = Admission::new(
        Attributes::new(
            Operation::Update,
            &t.def,
            sub,
            &ns,
            name,
            &req.user,
            wo.dry_run,
        )
        .with_options("UpdateOptions", crate::http::api::options_of(req)),
    );

    if kind == Kind::Apply {
        return apply(srv, req, t, name, sub, current, wo, &mut adm).await;
    }
    let Some(current) = current else {
        return Err(ApiError::not_found(&t.def, name));
    };
    // The document the patch applies to: the object, or its Scale view.
    let base: Value = if sub == Some("scale") {
        crate::http::extra::to_scale(&t.def, &current)?
    } else {
        srv.present(&t.def, &current)
    };
    let patch_text = std::str::from_utf8(&req.body)
        .map_err(|_| ApiError::bad_request("the patch is not valid UTF-8"))?;
    let mut doc = base.clone();
    match kind {
        Kind::Json => {
            let p = decode_json_patch(patch_text)?;
            if p.0.len() > crate::http::limits::MAX_JSON_PATCH_OPERATIONS {
                let mut e = ApiError::too_large(0);
                e.status.message = format!(
                    "Request entity too large: The allowed maximum operations in a JSON patch is {}, got {}",
                    crate::http::limits::MAX_JSON_PATCH_OPERATIONS,
                    p.0.len()
                );
                return Err(e);
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
            crate::http::limits::apply_json_patch(&mut doc, &p.0)?;
        }
        Kind::Merge => {
            let p = decode_patch_map(patch_text, "error decoding patch: ")?;
            json_patch::merge(&mut doc, &p);
        }
        Kind::Strategic => {
            // kube-apiserver's text for a strategic patch that is not a map lacks the
            // prefix its merge patch text has.
            let p = decode_patch_map(patch_text, "")?;
            strategic_merge(&mut doc, &p, schema::for_resource(&t.def, sub))
                .map_err(SmpError::into_api)?;
        }
        Kind::Apply => {}
    }
    if sub == Some("scale") {
        let stored = crate::http::extra::apply_scale(srv, t, name, &doc, &wo)?;
        return Ok(h::encode(
            StatusCode::OK,
            &crate::http::extra::to_scale(&t.def, &stored)?,
            &h::object_format(req),
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
    let obj = srv
        .admit_mutation(
            &t.def,
            obj,
            Some(srv.present(&t.def, &current)),
            &mut adm,
            &mut wo,
        )
        .await?;
    let (_, stored) = srv
        .update_object_admitted(&t.def, &ns, name, sub, obj, &wo, false, Some(&mut adm))
        .await?;
    wo.warnings.append(&mut adm.warnings);
    let mut resp = h::encode(
        StatusCode::OK,
        &srv.present(&t.def, &stored),
        &h::negotiate(req, false).unwrap_or(Format::Json),
    );
    add_warnings(&mut resp, &wo.warnings);
    srv.kick.notify_one();
    Ok(resp)
}

/// Decodes a JSON patch as kube-apiserver does: a body that is not a list is a 400 with
/// Go's decoding error; a list whose operations are malformed (an unknown `op`, a missing
/// `path`) is the generic 422 that applying it would give.
fn decode_json_patch(text: &str) -> Result<json_patch::Patch, ApiError> {
    // Malformed JSON: Go's decoder's text (`unexpected end of JSON input`), as
    // kube-apiserver passes it on.
    let v: Value = serde_json::from_str(text).map_err(|_| {
        ApiError::bad_request(format!(
            "error decoding patch: {}",
            crate::error::go_json_error(text.as_bytes())
        ))
    })?;
    let Value::Array(ops) = &v else {
        if v.is_null() {
            return Ok(json_patch::Patch(Vec::new()));
        }
        let ty = go_json_type(&v).unwrap_or("value");
        return Err(ApiError::bad_request(format!(
            "error decoding patch: json: cannot unmarshal {ty} into Go value of type []handlers.jsonPatchOp"
        )));
    };
    if let Some(ty) = ops
        .iter()
        .find(|op| !op.is_object() && !op.is_null())
        .and_then(go_json_type)
    {
        return Err(ApiError::bad_request(format!(
            "error decoding patch: json: cannot unmarshal {ty} into Go value of type handlers.jsonPatchOp"
        )));
    }
    serde_json::from_value(v).map_err(|_| crate::http::limits::json_patch_rejected())
}

/// Decodes a merge or strategic merge patch, which kube-apiserver reads into a
/// `map[string]interface{}`: any other JSON value but `null` is a 400 with Go's text,
/// after `prefix`.
fn decode_patch_map(text: &str, prefix: &str) -> Result<Value, ApiError> {
    let p: Value = serde_json::from_str(text).map_err(|_| {
        ApiError::bad_request(format!(
            "{prefix}{}",
            crate::error::go_json_error(text.as_bytes())
        ))
    })?;
    match go_json_type(&p) {
        Some(ty) if !p.is_object() => Err(ApiError::bad_request(format!(
            "{prefix}json: cannot unmarshal {ty} into Go value of type map[string]interface {{}}"
        ))),
        _ => Ok(p),
    }
}

/// A JSON value as Go's `fmt` prints the `interface{}` it decodes to (`%v`): maps as
/// `map[k:v ...]` with sorted keys, lists as `[a b]`, strings bare, numbers as `float64`
/// (`1e+06` from a million on), `null` as `<nil>`. Upstream's strategic merge errors
/// quote the patch this way.
pub(crate) fn go_fmt(v: &Value) -> String {
    let mut out = String::new();
    go_fmt_into(v, &mut out);
    out
}

fn go_fmt_into(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("<nil>"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&go_float(n.as_f64().unwrap_or(0.0))),
        Value::String(s) => out.push_str(s),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                go_fmt_into(x, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push_str("map[");
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(k);
                out.push(':');
                go_fmt_into(&m[k.as_str()], out);
            }
            out.push(']');
        }
    }
}

/// `float64` as Go's `%v` prints it: the shortest digits that round-trip, in exponent
/// form (`1.5e+06`, `1e-05`) when the exponent is below -4 or at least 6.
fn go_float(f: f64) -> String {
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let sci = format!("{f:e}"); // shortest round-trip digits: "1.5e6", "-1e-5"
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.unsigned_abs())
    } else {
        format!("{f}")
    }
}

/// Why a strategic merge patch failed, answered as kube-apiserver answers it.
#[derive(Debug, Clone, PartialEq)]
pub enum SmpError {
    /// A malformed directive upstream recognises (400 BadRequest).
    BadRequest(String),
    /// Upstream's generic 422: lists of lists, a patch setting fields `$retainKeys` does
    /// not list.
    Rejected,
    /// An error upstream returns unwrapped, answered as a plain 500 carrying the text
    /// (recorded: an unknown `$patch` directive, a list item without its merge key).
    Other(String),
}

impl std::fmt::Display for SmpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SmpError::BadRequest(m) | SmpError::Other(m) => f.write_str(m),
            SmpError::Rejected => f.write_str("the patch was rejected"),
        }
    }
}

impl SmpError {
    fn bad(msg: &str) -> Self {
        SmpError::BadRequest(msg.into())
    }
    /// The API error kube-apiserver gives for it.
    fn into_api(self) -> ApiError {
        match self {
            SmpError::BadRequest(m) => ApiError::bad_request(m),
            SmpError::Rejected => crate::http::limits::json_patch_rejected(),
            SmpError::Other(m) => ApiError::new(500, "", m),
        }
    }
}

/// Applies a strategic merge patch in place, with the list semantics of `ty` (the type of
/// the document): lists whose field has the `merge` patch strategy merge by the field's
/// merge key (or as a set of primitives), other lists are replaced; a `replace` strategy
/// replaces maps. Lists with no schema are replaced, as kube-apiserver does. As upstream's
/// `strategicpatch`, new list items come first, then the items only the object has, unless
/// `$setElementOrder/<field>` gives the order.
pub fn strategic_merge(
    orig: &mut Value,
    patch: &Value,
    ty: Option<Ty<'_>>,
) -> Result<(), SmpError> {
    let Some(pm) = patch.as_object() else {
        *orig = patch.clone();
        return Ok(());
    };
    match pm.get("$patch") {
        None => {}
        Some(Value::String(d)) if d == "replace" => {
            let mut p = pm.clone();
            p.remove("$patch");
            let mut fresh = Value::Object(Map::new());
            strategic_merge(&mut fresh, &Value::Object(p), ty)?;
            *orig = fresh;
            return Ok(());
        }
        // As upstream: the map becomes empty.
        Some(Value::String(d)) if d == "delete" => {
            *orig = Value::Object(Map::new());
            return Ok(());
        }
        Some(Value::String(d)) if d == "merge" => {}
        Some(other) => {
            return Err(SmpError::Other(format!(
                "unknown patch type: {} in map: {}",
                go_fmt(other),
                go_fmt(patch)
            )));
        }
    }
    if !orig.is_object() {
        *orig = Value::Object(Map::new());
    }
    let Some(om) = orig.as_object_mut() else {
        return Ok(());
    };
    if let Some(retain) = pm.get("$retainKeys") {
        apply_retain_keys(om, pm, retain)?;
    }
    // `$setElementOrder/<field>`: merge the field's list now and order it as told.
    let mut ordered: BTreeSet<&str> = BTreeSet::new();
    for (k, order) in pm {
        let Some(field) = k.strip_prefix("$setElementOrder/") else {
            continue;
        };
        let order = order
            .as_array()
            .ok_or_else(|| SmpError::bad("invalid patch format of setElementOrder list"))?;
        let f = schema::field(ty, field);
        let key = list_merge_key(f);
        let item_ty = f.and_then(|f| f.ty.list()).map(|l| l.0);
        let original: Vec<Value> = match om.get(field) {
            Some(Value::Array(a)) => a.clone(),
            Some(_) => {
                return Err(SmpError::BadRequest(format!(
                    "$setElementOrder/{field}: the field is not a list"
                )));
            }
            None => Vec::new(),
        };
        let merged = match (om.get(field), pm.get(field)) {
            (Some(_), Some(Value::Array(pl))) if f.is_some_and(|f| f.patch.merge) => {
                let mut l = original.clone();
                merge_list(&mut l, pl, f)?;
                l
            }
            (_, Some(Value::Array(pl))) => fresh_list(pl, item_ty)?,
            (_, Some(_)) => {
                return Err(SmpError::BadRequest(format!(
                    "$setElementOrder/{field}: the patch is not a list"
                )));
            }
            (Some(_), None) => original.clone(),
            (None, None) => continue,
        };
        let (in_order, server_only): (Vec<Value>, Vec<Value>) = merged
            .into_iter()
            .partition(|i| index_of(order, i, key.as_deref()).is_some());
        om.insert(
            field.to_string(),
            Value::Array(normalize_order(
                in_order,
                server_only,
                order,
                &original,
                key.as_deref(),
            )),
        );
        ordered.insert(field);
    }
    for (k, v) in pm {
        if k == "$patch" || k == "$retainKeys" || k.starts_with("$setElementOrder/") {
            continue;
        }
        if ordered.contains(k.as_str()) {
            continue;
        }
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            let del = v
                .as_array()
                .ok_or_else(|| SmpError::bad("invalid patch format of primitive list"))?;
            if let Some(Value::Array(list)) = om.get_mut(field) {
                list.retain(|x| !del.iter().any(|d| fields::json_eq(d, x)));
            }
            continue;
        }
        if v.is_null() {
            om.remove(k);
            continue;
        }
        let f = schema::field(ty, k);
        match (om.get_mut(k), v) {
            (Some(o @ Value::Object(_)), Value::Object(_)) => {
                if f.is_some_and(|f| f.patch.replace) {
                    let mut fresh = Value::Object(Map::new());
                    strategic_merge(&mut fresh, v, f.map(|f| f.ty))?;
                    *o = fresh;
                } else {
                    strategic_merge(o, v, f.map(|f| f.ty))?;
                }
            }
            (Some(Value::Array(ol)), Value::Array(pl)) => {
                if f.is_some_and(|f| f.patch.merge) {
                    merge_list(ol, pl, f)?;
                } else {
                    *ol = fresh_list(pl, f.and_then(|f| f.ty.list()).map(|l| l.0))?;
                }
            }
            (_, Value::Array(pl)) => {
                let l = fresh_list(pl, f.and_then(|f| f.ty.list()).map(|l| l.0))?;
                om.insert(k.clone(), Value::Array(l));
            }
            (_, Value::Object(_)) => {
                let mut fresh = Value::Object(Map::new());
                strategic_merge(&mut fresh, v, f.map(|f| f.ty))?;
                om.insert(k.clone(), fresh);
            }
            _ => {
                om.insert(k.clone(), v.clone());
            }
        }
    }
    Ok(())
}

/// `$retainKeys`: keeps only the listed fields of the original; every field the patch sets
/// must be listed.
fn apply_retain_keys(
    om: &mut Map<String, Value>,
    pm: &Map<String, Value>,
    retain: &Value,
) -> Result<(), SmpError> {
    let bad = || SmpError::bad("invalid patch format of retainKeys");
    let keys: Vec<&str> = retain
        .as_array()
        .ok_or_else(bad)?
        .iter()
        .map(|k| k.as_str().ok_or_else(bad))
        .collect::<Result<_, _>>()?;
    for (k, v) in pm {
        if v.is_null()
            || k == "$patch"
            || k == "$retainKeys"
            || k.starts_with("$deleteFromPrimitiveList/")
            || k.starts_with("$setElementOrder/")
        {
            continue;
        }
        if !keys.contains(&k.as_str()) {
            // Upstream: "patch content doesn't match retainKeys list", answered with the
            // generic 422.
            return Err(SmpError::Rejected);
        }
    }
    om.retain(|k, _| keys.contains(&k.as_str()));
    Ok(())
}

/// The merge key of a merging list field.
fn list_merge_key(f: Option<FieldTy<'_>>) -> Option<String> {
    f.filter(|f| f.patch.merge)
        .and_then(|f| f.patch.merge_key.clone())
}

/// A list the patch introduces: directive items dropped, maps cleaned of directives.
fn fresh_list(pl: &[Value], item_ty: Option<Ty<'_>>) -> Result<Vec<Value>, SmpError> {
    let mut out = Vec::with_capacity(pl.len());
    for p in pl {
        if p.get("$patch").is_some() {
            continue;
        }
        if p.is_object() {
            let mut fresh = Value::Object(Map::new());
            strategic_merge(&mut fresh, p, item_ty)?;
            out.push(fresh);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

/// Position in `list` of the item with the same merge key value as `item` (or the same
/// value, for primitives).
fn index_of(list: &[Value], item: &Value, key: Option<&str>) -> Option<usize> {
    match key {
        Some(k) => {
            let want = item.get(k)?;
            list.iter()
                .position(|x| x.get(k).is_some_and(|v| fields::json_eq(v, want)))
        }
        None => list.iter().position(|x| fields::json_eq(x, item)),
    }
}

/// Upstream's `normalizeElementOrder`: patch items in `patch_order`, server-only items in
/// `server_order`, interleaved by their positions in `server_order`.
fn normalize_order(
    mut patch_items: Vec<Value>,
    mut server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    key: Option<&str>,
) -> Vec<Value> {
    patch_items.sort_by_key(|i| index_of(patch_order, i, key).unwrap_or(usize::MAX));
    server_only.sort_by_key(|i| index_of(server_order, i, key).unwrap_or(usize::MAX));
    let mut out = Vec::with_capacity(patch_items.len() + server_only.len());
    let (mut left, mut right) = (
        server_only.into_iter().peekable(),
        patch_items.into_iter().peekable(),
    );
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => matches!(
                (index_of(server_order, l, key), index_of(server_order, r, key)),
                (Some(li), Some(ri)) if li < ri
            ),
        };
        let next = if take_left { left.next() } else { right.next() };
        out.extend(next);
    }
    out
}

/// Merges a patch list into a list of a field with the `merge` strategy.
fn merge_list(
    orig: &mut Vec<Value>,
    patch: &[Value],
    f: Option<FieldTy<'_>>,
) -> Result<(), SmpError> {
    if orig.is_empty() && patch.is_empty() {
        return Ok(());
    }
    let mut kind: Option<bool> = None; // Some(true): maps
    for v in orig.iter().chain(patch) {
        if v.is_array() {
            return Err(SmpError::Rejected);
        }
        match kind {
            None => kind = Some(v.is_object()),
            Some(k) if k != v.is_object() => {
                return Err(SmpError::bad("list element types are not identical"));
            }
            _ => {}
        }
    }
    if kind != Some(true) {
        let original = orig.clone();
        let mut merged: Vec<Value> = Vec::new();
        for v in original.iter().chain(patch) {
            if !merged.iter().any(|m| fields::json_eq(m, v)) {
                merged.push(v.clone());
            }
        }
        let (in_patch, server_only): (Vec<Value>, Vec<Value>) = merged
            .into_iter()
            .partition(|i| index_of(patch, i, None).is_some());
        *orig = normalize_order(in_patch, server_only, patch, &original, None);
        return Ok(());
    }
    let item_ty = f.and_then(|f| f.ty.list()).map(|l| l.0);
    let Some(key) = list_merge_key(f) else {
        return Err(SmpError::bad("cannot merge lists without merge key"));
    };
    let no_key = |item: &Value| {
        SmpError::Other(format!(
            "map: {} does not contain declared merge key: {key}",
            go_fmt(item)
        ))
    };
    // Directive items first.
    let mut rest: Vec<&Value> = Vec::new();
    let mut replace = false;
    for p in patch {
        match p.get("$patch") {
            None => rest.push(p),
            Some(Value::String(d)) if d == "delete" => {
                let kv = p.get(&key).ok_or_else(|| no_key(p))?;
                orig.retain(|o| !o.get(&key).is_some_and(|v| fields::json_eq(v, kv)));
            }
            Some(Value::String(d)) if d == "replace" => replace = true,
            Some(Value::String(d)) if d == "merge" => {
                return Err(SmpError::bad(
                    "merging lists cannot yet be specified in the patch",
                ));
            }
            Some(other) => {
                return Err(SmpError::Other(format!(
                    "unknown patch type: {} in map: {}",
                    go_fmt(other),
                    go_fmt(p)
                )));
            }
        }
    }
    if replace {
        let mut l = Vec::with_capacity(rest.len());
        for p in rest {
            let mut fresh = Value::Object(Map::new());
            strategic_merge(&mut fresh, p, item_ty)?;
            l.push(fresh);
        }
        *orig = l;
        return Ok(());
    }
    let original = orig.clone();
    for p in &rest {
        let kv = p.get(&key).ok_or_else(|| no_key(p))?;
        match orig
            .iter()
            .position(|o| o.get(&key).is_some_and(|v| fields::json_eq(v, kv)))
        {
            Some(i) => strategic_merge(&mut orig[i], p, item_ty)?,
            None => {
                let mut fresh = Value::Object(Map::new());
                strategic_merge(&mut fresh, p, item_ty)?;
                orig.push(fresh);
            }
        }
    }
    let patch_list: Vec<Value> = rest.into_iter().cloned().collect();
    let merged = std::mem::take(orig);
    let (in_patch, server_only): (Vec<Value>, Vec<Value>) = merged
        .into_iter()
        .partition(|i| index_of(&patch_list, i, Some(&key)).is_some());
    *orig = normalize_order(in_patch, server_only, &patch_list, &original, Some(&key));
    Ok(())
}

/// Merges an applied configuration into an object, owning nothing (a mutating policy's
/// `ApplyConfiguration`): [`apply_merge`] from the object's root.
pub(crate) fn merge_applied(orig: &mut Value, applied: &Value, ty: Option<Ty<'_>>) {
    apply_merge(orig, applied, ty, false);
}

/// Merges an applied configuration into an object: maps recursively, map-lists by key,
/// sets by value; atomic lists, structs and maps (and lists without a schema) are replaced.
fn apply_merge(orig: &mut Value, applied: &Value, ty: Option<Ty<'_>>, atomic: bool) {
    if atomic {
        *orig = applied.clone();
        return;
    }
    match (orig, applied) {
        (Value::Object(om), Value::Object(am)) => {
            for (k, v) in am {
                let f = schema::field(ty, k);
                let (fty, fatomic) = (f.map(|f| f.ty), f.is_some_and(|f| f.is_atomic_object()));
                match om.get_mut(k) {
                    Some(o) if o.is_object() && v.is_object() => apply_merge(o, v, fty, fatomic),
                    Some(Value::Array(ol)) if v.is_array() => {
                        if let Value::Array(al) = v {
                            apply_merge_list(ol, al, fty);
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

fn apply_merge_list(ol: &mut Vec<Value>, al: &[Value], ty: Option<Ty<'_>>) {
    match ty.and_then(|t| t.list()) {
        Some((item_ty, ListType::Map, keys)) => {
            for item in al {
                let key = fields::item_key(item, item_ty, keys);
                let found = key.as_ref().and_then(|key| {
                    ol.iter_mut()
                        .find(|o| fields::item_key(o, item_ty, keys).as_ref() == Some(key))
                });
                match found {
                    Some(o) => apply_merge(o, item, Some(item_ty), item_ty.is_atomic_object()),
                    None => ol.push(item.clone()),
                }
            }
        }
        Some((_, ListType::Set, _)) => {
            for item in al {
                if !ol.iter().any(|o| fields::json_eq(o, item)) {
                    ol.push(item.clone());
                }
            }
        }
        _ => *ol = al.to_vec(),
    }
}

/// `normalized` restricted to the fields present in `sent` (unknown fields stay dropped).
fn only_sent(normalized: Value, sent: &Value) -> Value {
    match (normalized, sent) {
        (Value::Object(n), Value::Object(s)) => Value::Object(
            n.into_iter()
                .filter_map(|(k, v)| {
                    let sv = s.get(&k)?;
                    Some((k, only_sent(v, sv)))
                })
                .collect(),
        ),
        (Value::Array(n), Value::Array(s)) if n.len() == s.len() => Value::Array(
            n.into_iter()
                .zip(s)
                .map(|(v, sv)| only_sent(v, sv))
                .collect(),
        ),
        (n, _) => n,
    }
}

/// A field path as kube-apiserver writes it in conflicts:
/// `.spec.containers[name="web"].ports[containerPort=80,protocol="TCP"].name`.
fn path_text(p: &Path) -> String {
    let mut s = String::new();
    for step in p {
        match step {
            fields::Step::Field(f) => {
                s.push('.');
                s.push_str(f);
            }
            fields::Step::Key(k) => {
                let parts: Vec<String> = serde_json::from_str::<Map<String, Value>>(k)
                    .map(|m| m.iter().map(|(n, v)| format!("{n}={v}")).collect())
                    .unwrap_or_else(|_| vec![k.clone()]);
                s.push_str(&format!("[{}]", parts.join(",")));
            }
            fields::Step::Value(v) => s.push_str(&format!("[={v}]")),
        }
    }
    s
}

#[allow(clippy::too_many_arguments)]
async fn apply(
    srv: &Arc<ApiServer>,
    req: &Req,
    t: &Target,
    name: &str,
    sub: Option<&str>,
    current: Option<Arc<Value>>,
    mut wo: crate::http::api::WriteOptions,
    adm: &mut Admission,
) -> Result<Response<Body>, ApiError> {
    let text = std::str::from_utf8(&req.body)
        .map_err(|_| ApiError::bad_request("the apply patch is not valid UTF-8"))?;
    let applied: Value = crate::http::decode_yaml(text).map_err(|e| match e {
        crate::http::YamlError::TooDeep { line, .. } => ApiError::bad_request(format!(
            "error decoding YAML: error converting YAML to JSON: yaml: line {line}: exceeded max depth of {}",
            crate::http::limits::MAX_JSON_DEPTH
        )),
        crate::http::YamlError::Invalid(e) => {
            ApiError::bad_request(format!("error decoding YAML: {e}"))
        }
    })?;
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
    let named = meta_str(&applied, "name").is_some_and(|n| !n.is_empty());
    let applied = check_body(&t.def, applied, t.namespace.as_deref(), Some(name))?;
    let normalized = srv.normalize_applied(&t.def, applied.clone(), &mut wo)?;
    // The typed round trip fills required fields (an empty `selector`, say): the applier
    // owns only what it sent.
    let applied = only_sent(normalized, &applied);
    let ty = schema::for_resource(&t.def, sub);
    if let Some(msg) = fields::missing_key(&applied, ty, &mut String::new()) {
        return Err(ApiError::bad_request(format!(
            "failed to create typed patch object ({}, Kind={}): {msg}",
            t.def.api_version(),
            t.def.kind
        )));
    }
    let mut applied_paths: BTreeSet<Path> = fields::paths_of(&applied, ty);
    if sub == Some("status") {
        let sm = crate::registry::strategy::status_metadata(&t.def);
        applied_paths.retain(|p| sm.owns(p));
    } else if t.def.has_status {
        applied_paths.retain(|p| p.first() != Some(&fields::Step::Field("status".into())));
    }
    let Some(current) = current else {
        if sub.is_some() {
            return Err(ApiError::not_found(&t.def, name));
        }
        // kube-apiserver's checkName on the patched object: an existing object lends its
        // name, a new one has only the configuration's.
        if !named {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({name} based on URL) was undeterminable: name must be provided"
            )));
        }
        srv.check_namespace(&t.def, &ns, name)?;
        let mut obj = applied.clone();
        if t.def.namespaced {
            meta_mut(&mut obj).insert("namespace".into(), json!(ns));
        }
        // The configuration is the whole object: its required fields must be there.
        if let Some(crd) = &t.def.crd {
            crd.validate(&t.def, &obj, &t.def.version)?;
        }
        adm.attrs.operation = Operation::Create;
        if let Some(o) = adm.attrs.options.as_mut() {
            o["kind"] = json!("CreateOptions");
        }
        let obj = srv.admit_mutation(&t.def, obj, None, adm, &mut wo).await?;
        let stored = srv
            .create_object_admitted(&t.def, &ns, obj, &manager, wo.dry_run, "Apply", Some(adm))
            .await?;
        wo.warnings.append(&mut adm.warnings);
        let mut resp = h::encode(
            StatusCode::CREATED,
            &srv.present(&t.def, &stored),
            &h::object_format(req),
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
            // A member with children (a list item, say) changes only when it is added; a
            // leaf when its value does.
            let changes = if fields::has_children(&applied_paths, p) {
                fields::get_path(&current, p, ty).is_none()
            } else {
                fields::get_path(&current, p, ty) != fields::get_path(&applied, p, ty)
            };
            if applied_paths.contains(p) && changes && !force {
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
        // kube-apiserver's apply conflict names only the fields, not the object.
        let mut e = ApiError::conflict(&t.def, name, "");
        e.status.message = message;
        e.status.details = Some(kubewright_core::StatusDetails {
            causes,
            ..Default::default()
        });
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
            fields::remove_path(&mut next, p, ty);
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
    apply_merge(&mut next, &applied_body, ty, false);
    // The configuration was checked for types only: the merged object must be whole.
    if let Some(crd) = &t.def.crd {
        crd.validate(&t.def, &next, &t.def.version)?;
    }
    wo.apply = Some((applied_paths, force));
    let next = srv
        .admit_mutation(
            &t.def,
            next,
            Some(srv.present(&t.def, &current)),
            adm,
            &mut wo,
        )
        .await?;
    let (_, stored) = srv
        .update_object_admitted(&t.def, &ns, name, sub, next, &wo, false, Some(adm))
        .await?;
    wo.warnings.append(&mut adm.warnings);
    let mut resp = h::encode(
        StatusCode::OK,
        &srv.present(&t.def, &stored),
        &h::object_format(req),
    );
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ty(name: &str) -> Option<Ty<'static>> {
        let t = schema::builtin_def(name);
        assert!(t.is_some(), "{name}");
        t
    }

    fn pod() -> Option<Ty<'static>> {
        ty("io.k8s.api.core.v1.Pod")
    }

    fn deployment() -> Option<Ty<'static>> {
        ty("io.k8s.api.apps.v1.Deployment")
    }

    fn names(v: &Value) -> Vec<&str> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|i| i["name"].as_str().unwrap())
            .collect()
    }

    #[test]
    fn strategic_merges_containers_by_name() {
        let mut orig = json!({"metadata": {"finalizers": ["f1"]}, "spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]}});
        strategic_merge(&mut orig, &json!({"spec": {"containers": [{"name": "b", "image": "z"}, {"name": "c", "image": "w"}]}}), pod()).unwrap();
        // As upstream: patch items in patch order, interleaved with the others by position.
        assert_eq!(names(&orig["spec"]["containers"]), ["a", "b", "c"]);
        assert_eq!(orig["spec"]["containers"][1]["image"], "z");
        strategic_merge(
            &mut orig,
            &json!({"spec": {"containers": [{"name": "a", "$patch": "delete"}]}}),
            pod(),
        )
        .unwrap();
        assert_eq!(names(&orig["spec"]["containers"]), ["b", "c"]);
        strategic_merge(
            &mut orig,
            &json!({"spec": {"$setElementOrder/containers": [{"name": "c"}, {"name": "b"}]}}),
            pod(),
        )
        .unwrap();
        assert_eq!(names(&orig["spec"]["containers"]), ["c", "b"]);
        strategic_merge(
            &mut orig,
            &json!({"metadata": {"finalizers": ["f2"], "$deleteFromPrimitiveList/finalizers": ["f1"]}}),
            pod(),
        )
        .unwrap();
        assert_eq!(orig["metadata"]["finalizers"], json!(["f2"]));
        strategic_merge(
            &mut orig,
            &json!({"spec": {"containers": [{"name": "d", "image": "v"}, {"$patch": "replace"}]}}),
            pod(),
        )
        .unwrap();
        assert_eq!(names(&orig["spec"]["containers"]), ["d"]);
        strategic_merge(
            &mut orig,
            &json!({"spec": {"$patch": "replace", "x": 1}}),
            pod(),
        )
        .unwrap();
        assert_eq!(orig["spec"], json!({"x": 1}));
        strategic_merge(
            &mut orig,
            &json!({"spec": {"$retainKeys": ["y"], "y": 2}}),
            pod(),
        )
        .unwrap();
        assert_eq!(orig["spec"], json!({"y": 2}));
        assert!(
            strategic_merge(&mut orig, &json!({"spec": {"$retainKeys": "bad"}}), pod()).is_err()
        );
        // A field the patch sets must be retained.
        assert!(
            strategic_merge(
                &mut orig,
                &json!({"spec": {"$retainKeys": ["y"], "z": 1}}),
                pod()
            )
            .is_err()
        );
    }

    #[test]
    fn new_items_come_first_as_upstream() {
        let mut orig = json!({"spec": {"containers": [{"name": "web", "image": "x"}]}});
        strategic_merge(
            &mut orig,
            &json!({"spec": {"containers": [{"name": "sidecar", "image": "y"}]}}),
            pod(),
        )
        .unwrap();
        assert_eq!(names(&orig["spec"]["containers"]), ["sidecar", "web"]);
        let mut orig = json!({"metadata": {"finalizers": ["a"]}});
        strategic_merge(
            &mut orig,
            &json!({"metadata": {"finalizers": ["b", "a"]}}),
            pod(),
        )
        .unwrap();
        assert_eq!(orig["metadata"]["finalizers"], json!(["b", "a"]));
    }

    #[test]
    fn nested_lists_follow_the_schema() {
        let mut d = json!({"spec": {"template": {"spec": {
            "tolerations": [{"key": "a", "operator": "Exists"}],
            "containers": [{"name": "web", "image": "x",
                "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                "ports": [{"containerPort": 80, "name": "http"}, {"containerPort": 443}]}]}}}});
        let patch = json!({"spec": {"template": {"spec": {
            "tolerations": [{"key": "b", "operator": "Exists"}],
            "containers": [{"name": "web",
                "env": [{"name": "B", "value": "3"}],
                "ports": [{"containerPort": 80, "name": "web"}]}]}}}});
        strategic_merge(&mut d, &patch, deployment()).unwrap();
        let pod = &d["spec"]["template"]["spec"];
        let c = &pod["containers"][0];
        assert_eq!(c["image"], "x");
        assert_eq!(
            c["env"],
            json!([{"name": "A", "value": "1"}, {"name": "B", "value": "3"}])
        );
        assert_eq!(
            c["ports"],
            json!([{"containerPort": 80, "name": "web"}, {"containerPort": 443}])
        );
        // No merge strategy: replaced.
        assert_eq!(
            pod["tolerations"],
            json!([{"key": "b", "operator": "Exists"}])
        );
        // Without a schema, lists are replaced.
        let mut d2 = json!({"spec": {"template": {"spec": {"containers": [{"name": "a"}]}}}});
        strategic_merge(
            &mut d2,
            &json!({"spec": {"template": {"spec": {"containers": [{"name": "b"}]}}}}),
            None,
        )
        .unwrap();
        assert_eq!(names(&d2["spec"]["template"]["spec"]["containers"]), ["b"]);
    }

    #[test]
    fn service_ports_merge_by_port() {
        let svc = ty("io.k8s.api.core.v1.Service");
        let mut s =
            json!({"spec": {"ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"}]}});
        strategic_merge(
            &mut s,
            &json!({"spec": {"ports": [{"port": 80, "targetPort": 9090}, {"port": 443}]}}),
            svc,
        )
        .unwrap();
        assert_eq!(
            s["spec"]["ports"],
            json!([{"port": 80, "targetPort": 9090, "protocol": "TCP"}, {"port": 443}])
        );
    }

    #[test]
    fn retain_keys_on_strategy_and_volumes() {
        let mut d = json!({"spec": {"strategy": {"type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": 1}}}});
        strategic_merge(
            &mut d,
            &json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}),
            deployment(),
        )
        .unwrap();
        assert_eq!(d["spec"]["strategy"], json!({"type": "Recreate"}));
        let mut p = json!({"spec": {"volumes": [{"name": "v", "emptyDir": {}}, {"name": "w", "emptyDir": {}}]}});
        strategic_merge(
            &mut p,
            &json!({"spec": {"volumes": [{"name": "v", "$retainKeys": ["configMap", "name"],
                "configMap": {"name": "cm"}}]}}),
            pod(),
        )
        .unwrap();
        assert_eq!(
            p["spec"]["volumes"],
            json!([{"name": "v", "configMap": {"name": "cm"}}, {"name": "w", "emptyDir": {}}])
        );
    }

    #[test]
    fn bad_directives_are_errors() {
        let mut p = json!({"spec": {"containers": [{"name": "a"}]}});
        for bad in [
            json!({"spec": {"containers": [{"image": "no-name"}]}}),
            json!({"spec": {"containers": [{"name": "a", "$patch": "bogus"}]}}),
            json!({"spec": {"$patch": "bogus"}}),
            json!({"spec": {"$setElementOrder/containers": "x"}}),
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": "x"}}),
            json!({"spec": {"containers": [["nested"]]}}),
        ] {
            assert!(strategic_merge(&mut p, &bad, pod()).is_err(), "{bad}");
        }
    }

    #[test]
    fn errors_are_answered_as_upstream_answers_them() {
        let mut p = json!({"spec": {"containers": [{"name": "a"}]}});
        let mut err = |patch: Value| strategic_merge(&mut p, &patch, pod()).unwrap_err();
        // Recorded from kube-apiserver v1.36 (tests/fixtures/differential/strategic_patches.json).
        assert_eq!(
            err(json!({"metadata": {"labels": {"$patch": "bogus"}}})),
            SmpError::Other("unknown patch type: bogus in map: map[$patch:bogus]".into())
        );
        assert_eq!(
            err(json!({"spec": {"containers": [{"image": "nginx:1.27", "ports": [{"containerPort": 80}]}]}})),
            SmpError::Other(
                "map: map[image:nginx:1.27 ports:[map[containerPort:80]]] does not contain declared merge key: name"
                    .into()
            )
        );
        assert_eq!(
            err(json!({"spec": {"containers": [["x"]]}})),
            SmpError::Rejected
        );
        assert_eq!(
            err(json!({"spec": {"$retainKeys": ["x"], "hostname": "h"}})),
            SmpError::Rejected
        );
        assert_eq!(
            err(json!({"spec": {"$retainKeys": "x"}})),
            SmpError::BadRequest("invalid patch format of retainKeys".into())
        );
        assert_eq!(SmpError::Rejected.into_api().status.code, 422);
        assert_eq!(SmpError::Other("x".into()).into_api().status.code, 500);
        assert_eq!(SmpError::Other("x".into()).into_api().status.reason, "");
    }

    #[test]
    fn values_print_as_go_prints_them() {
        for (v, want) in [
            (json!(80), "80"),
            (json!(-1.5), "-1.5"),
            (json!(100000), "100000"),
            (json!(1000000), "1e+06"),
            (json!(1234567), "1.234567e+06"),
            (json!(0.0001), "0.0001"),
            (json!(0.00001), "1e-05"),
            (json!(1e21), "1e+21"),
            (json!(1e100), "1e+100"),
            (json!(0), "0"),
            (json!(null), "<nil>"),
            (json!(true), "true"),
            (json!(["a", 1, null]), "[a 1 <nil>]"),
            (
                json!({"b": {"y": [], "x": {}}, "a": "s p"}),
                "map[a:s p b:map[x:map[] y:[]]]",
            ),
        ] {
            assert_eq!(go_fmt(&v), want, "{v}");
        }
    }
}
