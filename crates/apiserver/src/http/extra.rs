//! Subresources and non-stored APIs: `/scale`, access reviews, create-only subresources.

use crate::error::ApiError;
use crate::http::api::{ApiServer, Target, WriteOptions};
use crate::http::{self as h, Body, Format, Req};
use crate::registry::ResourceDef;
use crate::registry::meta::meta_str;
use http::{Response, StatusCode};
use serde_json::{Value, json};
use std::sync::Arc;

fn ptr(path: &str) -> String {
    format!("/{}", path.trim_start_matches('.').replace('.', "/"))
}

/// The `autoscaling/v1 Scale` view of an object.
pub fn to_scale(def: &ResourceDef, obj: &Value) -> Result<Value, ApiError> {
    let Some(sp) = &def.scale else {
        return Err(ApiError::path_not_found());
    };
    let spec = obj.pointer(&ptr(&sp.spec_replicas)).and_then(Value::as_i64);
    let Some(spec) = spec.or(if def.builtin { Some(1) } else { None }) else {
        return Err(ApiError::bad_request(format!(
            "the spec replicas field {:?} does not exist",
            sp.spec_replicas
        )));
    };
    let status = obj
        .pointer(&ptr(&sp.status_replicas))
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let selector = if def.builtin {
        // Built-ins keep their selector in spec.selector.
        match obj.pointer("/spec/selector") {
            Some(v) if v.get("matchLabels").is_some() || v.get("matchExpressions").is_some() => {
                let sel: k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector =
                    serde_json::from_value(v.clone()).unwrap_or_default();
                kubewright_core::LabelSelector::from_k8s(&sel)
                    .map(|s| s.to_string())
                    .unwrap_or_default()
            }
            // ReplicationControllers use a plain map.
            Some(Value::Object(m)) => {
                let mut parts: Vec<String> = m
                    .iter()
                    .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                    .collect();
                parts.sort();
                parts.join(",")
            }
            _ => String::new(),
        }
    } else {
        sp.label_selector
            .as_ref()
            .and_then(|p| obj.pointer(&ptr(p)))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let mut meta = json!({
        "name": meta_str(obj, "name"),
        "uid": meta_str(obj, "uid"),
        "resourceVersion": meta_str(obj, "resourceVersion"),
        "creationTimestamp": meta_str(obj, "creationTimestamp"),
    });
    if let Some(ns) = meta_str(obj, "namespace") {
        meta["namespace"] = json!(ns);
    }
    // `selector` is omitted when empty, as Go writes it.
    let mut scale_status = json!({"replicas": status});
    if !selector.is_empty() {
        scale_status["selector"] = json!(selector);
    }
    Ok(json!({
        "kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": meta,
        "spec": {"replicas": spec}, "status": scale_status,
    }))
}

fn set_ptr(obj: &mut Value, p: &str, v: Value) {
    let parts: Vec<String> = p
        .trim_start_matches('.')
        .split('.')
        .map(str::to_string)
        .collect();
    let mut cur = obj;
    for (i, part) in parts.iter().enumerate() {
        if !cur.is_object() {
            *cur = json!({});
        }
        let Some(m) = cur.as_object_mut() else { return };
        if i + 1 == parts.len() {
            m.insert(part.clone(), v);
            return;
        }
        cur = m.entry(part.clone()).or_insert_with(|| json!({}));
    }
}

/// PUT (or patched) Scale: writes spec replicas into the object.
pub fn update_scale(
    srv: &Arc<ApiServer>,
    req: &Req,
    t: &Target,
    name: &str,
    body: Value,
    wo: &WriteOptions,
) -> Result<Response<Body>, ApiError> {
    let stored = apply_scale(srv, t, name, &body, wo)?;
    Ok(h::encode(
        StatusCode::OK,
        &to_scale(&t.def, &stored)?,
        &h::negotiate(req, false).unwrap_or(Format::Json),
    ))
}

/// Applies a Scale body to the underlying object and returns the stored object.
pub fn apply_scale(
    srv: &Arc<ApiServer>,
    t: &Target,
    name: &str,
    body: &Value,
    wo: &WriteOptions,
) -> Result<Value, ApiError> {
    let Some(sp) = &t.def.scale else {
        return Err(ApiError::path_not_found());
    };
    let replicas = body
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .ok_or_else(|| {
            ApiError::invalid_field(
                &t.def,
                name,
                "spec.replicas",
                "FieldValueRequired",
                "replicas is required",
            )
        })?;
    if replicas < 0 {
        // The Scale object is what is invalid.
        let mut scale = (*t.def).clone();
        scale.kind = "Scale".into();
        scale.group = "autoscaling".into();
        return Err(ApiError::invalid_field(
            &scale,
            name,
            "spec.replicas",
            "FieldValueInvalid",
            format!("{replicas}: must be greater than or equal to 0"),
        ));
    }
    let cur = srv
        .storage
        .get(
            &t.def.storage_key(),
            t.namespace.as_deref().unwrap_or(""),
            name,
        )
        .ok_or_else(|| ApiError::not_found(&t.def, name))?;
    let mut next = (*cur).clone();
    if let Some(rv) = body
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    {
        next["metadata"]["resourceVersion"] = json!(rv);
    }
    set_ptr(&mut next, &sp.spec_replicas, json!(replicas));
    let (_, stored) = srv.update_object(
        &t.def,
        t.namespace.as_deref().unwrap_or(""),
        name,
        Some("scale"),
        next,
        wo,
        false,
    )?;
    srv.kick.notify_one();
    Ok(stored)
}

/// Access and token reviews: answered by the server's authenticator and authorizer,
/// without storing anything.
pub fn review(srv: &Arc<ApiServer>, req: &Req, t: &Target) -> Result<Response<Body>, ApiError> {
    let mut body = h::decode_body(req)?;
    if !body.is_object() {
        return Err(ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {})",
            t.def.kind
        )));
    }
    let user = &req.user;
    // A SubjectAccessReview asks about the user in its spec, as given (no groups added).
    let subject;
    let user = match t.def.kind.as_str() {
        "SubjectAccessReview" | "LocalSubjectAccessReview" => {
            let strs = |k: &str| -> Vec<String> {
                body.pointer(&format!("/spec/{k}"))
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default()
            };
            let extra = body
                .pointer("/spec/extra")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| {
                            let vals = v
                                .as_array()
                                .map(|a| {
                                    a.iter()
                                        .filter_map(Value::as_str)
                                        .map(str::to_string)
                                        .collect()
                                })
                                .unwrap_or_default();
                            (k.clone(), vals)
                        })
                        .collect()
                })
                .unwrap_or_default();
            subject = crate::auth::rbac::UserInfo {
                name: body
                    .pointer("/spec/user")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .into(),
                uid: body
                    .pointer("/spec/uid")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .into(),
                groups: strs("groups"),
                extra,
            };
            &subject
        }
        _ => user,
    };
    if t.def.kind == "LocalSubjectAccessReview"
        && let Some(ns) = t.namespace.as_deref()
    {
        body["metadata"]["namespace"] = json!(ns);
    }
    let status = match t.def.kind.as_str() {
        "TokenReview" => {
            let token = body
                .pointer("/spec/token")
                .and_then(Value::as_str)
                .unwrap_or("");
            match srv.authenticate(Some(token)).filter(|_| !token.is_empty()) {
                Some(u) => {
                    let mut info = json!({"username": u.name});
                    if !u.uid.is_empty() {
                        info["uid"] = json!(u.uid);
                    }
                    info["groups"] = json!(u.groups);
                    if !u.extra.is_empty() {
                        info["extra"] = json!(u.extra);
                    }
                    json!({"authenticated": true, "user": info, "audiences": ["https://kubernetes.default.svc.cluster.local"]})
                }
                None => json!({"user": {}, "error": "invalid bearer token"}),
            }
        }
        "SelfSubjectAccessReview" | "SubjectAccessReview" | "LocalSubjectAccessReview" => {
            let ra = body
                .pointer("/spec/resourceAttributes")
                .cloned()
                .unwrap_or(Value::Null);
            if ra.is_null() {
                let nra = body
                    .pointer("/spec/nonResourceAttributes")
                    .cloned()
                    .unwrap_or(Value::Null);
                let s = |k: &str| nra.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                let (verb, path) = (s("verb"), s("path"));
                let allowed = crate::auth::rbac::authorize_path(&srv.storage, user, &verb, &path);
                let why = crate::auth::rbac::Request::Path {
                    verb: &verb,
                    path: &path,
                };
                allowed_status(srv, user, allowed, &why)
            } else {
                let s = |k: &str| ra.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                let (verb, group, resource, sub, ns, name) = (
                    s("verb"),
                    s("group"),
                    s("resource"),
                    s("subresource"),
                    s("namespace"),
                    s("name"),
                );
                let attrs = crate::auth::rbac::Attributes {
                    verb: &verb,
                    group: &group,
                    resource: &resource,
                    subresource: (!sub.is_empty()).then_some(sub.as_str()),
                    namespace: &ns,
                    name: &name,
                };
                let allowed = crate::auth::rbac::authorize(&srv.storage, user, &attrs);
                allowed_status(
                    srv,
                    user,
                    allowed,
                    &crate::auth::rbac::Request::Resource(&attrs),
                )
            }
        }
        "SelfSubjectRulesReview" => {
            let ns = body
                .pointer("/spec/namespace")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            if user.groups.iter().any(|g| g == "system:masters") {
                json!({
                    "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                    "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                    "incomplete": false,
                })
            } else {
                let rules: Vec<Value> = crate::auth::rbac::rules_for(&srv.storage, user, &ns)
                    .into_iter()
                    .map(|r| json!({"verbs": r.get("verbs"), "apiGroups": r.get("apiGroups"), "resources": r.get("resources"), "resourceNames": r.get("resourceNames")}))
                    .collect();
                json!({"resourceRules": rules, "nonResourceRules": [], "incomplete": false})
            }
        }
        "SelfSubjectReview" => {
            let mut info = json!({"username": user.name});
            if !user.uid.is_empty() {
                info["uid"] = json!(user.uid);
            }
            info["groups"] = json!(user.groups);
            if !user.extra.is_empty() {
                info["extra"] = json!(user.extra);
            }
            json!({ "userInfo": info })
        }
        _ => return Err(ApiError::method_not_allowed("not supported")),
    };
    // As kube-apiserver's create handler: the request's fields recorded for its manager.
    let manager = crate::registry::meta::manager_from_user_agent(req.header("user-agent"));
    let ty = crate::registry::schema::for_resource(&t.def, None);
    let mut request = body.clone();
    if let Some(o) = request.as_object_mut() {
        o.remove("status");
    }
    let owned =
        crate::registry::fields::compare(&crate::registry::schema::zero_object(ty), &request, ty)
            .changed();
    body["status"] = status;
    body["apiVersion"] = json!(t.def.api_version());
    body["kind"] = json!(t.def.kind);
    if !body.get("metadata").is_some_and(Value::is_object) {
        body["metadata"] = json!({});
    }
    if t.def.kind == "SelfSubjectReview" {
        body["metadata"]["creationTimestamp"] = json!(crate::registry::meta::now_time());
    }
    crate::registry::meta::record_managed(
        &mut body,
        &manager,
        "Update",
        &t.def.api_version(),
        None,
        owned,
        &Default::default(),
        false,
    );
    Ok(h::encode(
        StatusCode::CREATED,
        &body,
        &h::object_format(req),
    ))
}

fn str_at<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

/// A token bound to a pod (`kubectl create token --bound-object-kind Pod`): its user gets
/// the pod's name and uid and, once the pod is on a node, the node's name and uid as extras,
/// like kube-apiserver's (the node name is what `impersonate:associated-node` matches).
fn bind_token_to_pod(
    srv: &Arc<ApiServer>,
    ns: &str,
    bound: &Value,
    user: &mut crate::auth::rbac::UserInfo,
) -> Result<(), ApiError> {
    if str_at(bound, "/kind") != "Pod" {
        return Ok(());
    }
    let Some(pods) = srv.def("", "v1", "pods") else {
        return Ok(());
    };
    let pod_name = str_at(bound, "/name");
    let pod = srv
        .storage
        .get(&pods.storage_key(), ns, pod_name)
        .ok_or_else(|| ApiError::not_found(&pods, pod_name))?;
    let pod_uid = str_at(&pod, "/metadata/uid");
    let want_uid = str_at(bound, "/uid");
    if !want_uid.is_empty() && want_uid != pod_uid {
        return Err(ApiError::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on Pod {pod_name:?}: the UID in the bound object reference ({want_uid}) does not match the UID in record. The object might have been deleted and then recreated"
            ),
        ));
    }
    let mut extra = |k: &str, v: &str| {
        user.extra.insert(
            format!("authentication.kubernetes.io/{k}"),
            vec![v.to_string()],
        );
    };
    extra("pod-name", pod_name);
    extra("pod-uid", pod_uid);
    let node_name = str_at(&pod, "/spec/nodeName");
    if !node_name.is_empty() {
        extra("node-name", node_name);
        if let Some(node) = srv
            .def("", "v1", "nodes")
            .and_then(|nodes| srv.storage.get(&nodes.storage_key(), "", node_name))
        {
            extra("node-uid", str_at(&node, "/metadata/uid"));
        }
    }
    Ok(())
}

/// An access review's status: kube-apiserver gives a reason only when RBAC allows (not
/// for `system:masters`, nor for a denial).
fn allowed_status(
    srv: &ApiServer,
    user: &crate::auth::rbac::UserInfo,
    allowed: bool,
    req: &crate::auth::rbac::Request<'_>,
) -> Value {
    let reason = (allowed && !user.is_master())
        .then(|| crate::auth::rbac::allow_reason(&srv.storage, user, req))
        .flatten();
    match reason {
        Some(r) => json!({"allowed": true, "reason": r}),
        None => json!({"allowed": allowed}),
    }
}

/// `pods/binding` (and `bindings`), as kube-apiserver's binding storage writes it: the
/// pod's node, the binding's annotations and the `PodScheduled` condition, in one write
/// outside the pod update path (no field manager, no generation bump); a pod already
/// on a node is a conflict.
fn bind_pod(
    srv: &Arc<ApiServer>,
    req: &Req,
    t: &Target,
    ns: &str,
    name: &str,
) -> Result<Response<Body>, ApiError> {
    let body = h::decode_body(req)?;
    if meta_str(&body, "name").is_some_and(|n| n != name) {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Binding object",
        ));
    }
    // `ValidatePodBinding`, reported as a plain error.
    let mut errs: Vec<String> = Vec::new();
    let kind = body
        .pointer("/target/kind")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !matches!(kind, "" | "Node") {
        errs.push(format!(
            "target.kind: Unsupported value: {}: supported values: \"Node\", \"<empty>\"",
            crate::error::go_quote(kind)
        ));
    }
    let node = body
        .pointer("/target/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if node.is_empty() {
        errs.push("target.name: Required value".into());
    }
    if !errs.is_empty() {
        let msg = if errs.len() == 1 {
            errs.remove(0)
        } else {
            format!("[{}]", errs.join(", "))
        };
        return Err(ApiError::new(500, "", msg));
    }
    let annotations = body
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let key = t.def.storage_key();
    // `dryRun=All`: every check, no write (kube-apiserver's binding honours it too).
    let dry_run = req.q("dryRun") == Some("All");
    srv.storage
        .mutate::<ApiError>(&key, ns, name, |cur, _| {
            let cur = cur.ok_or_else(|| ApiError::not_found(&t.def, name))?;
            if cur.pointer("/metadata/deletionTimestamp").is_some() {
                return Err(ApiError::new(
                    500,
                    "",
                    format!("pod {name} is being deleted, cannot be assigned to a host"),
                ));
            }
            if let Some(on) = cur
                .pointer("/spec/nodeName")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
            {
                return Err(ApiError::new(
                    409,
                    "Conflict",
                    format!(
                        "Operation cannot be fulfilled on pods/binding {}: pod {name} is already assigned to node {}",
                        crate::error::go_quote(name),
                        crate::error::go_quote(on)
                    ),
                )
                .with(kubewright_core::StatusDetails {
                    name: name.to_string(),
                    kind: "pods/binding".into(),
                    ..Default::default()
                }));
            }
            let mut next = (**cur).clone();
            next["spec"]["nodeName"] = json!(node);
            if !annotations.is_empty() {
                let meta = &mut next["metadata"];
                if !meta["annotations"].is_object() {
                    meta["annotations"] = json!({});
                }
                for (k, v) in &annotations {
                    meta["annotations"][k] = v.clone();
                }
            }
            let conds = &mut next["status"]["conditions"];
            if !conds.is_array() {
                *conds = json!([]);
            }
            if let Some(list) = conds.as_array_mut() {
                let now = crate::registry::meta::now_time();
                match list.iter_mut().find(|c| c["type"] == "PodScheduled") {
                    Some(c) => {
                        if c["status"] != "True" {
                            c["lastTransitionTime"] = json!(now);
                        }
                        c["status"] = json!("True");
                    }
                    None => list.push(json!({"type": "PodScheduled", "status": "True",
                        "lastProbeTime": null, "lastTransitionTime": now})),
                }
            }
            if dry_run {
                return Ok(crate::storage::Mutation::Keep);
            }
            Ok(crate::storage::Mutation::Put(next))
        })?;
    if !dry_run {
        srv.kick.notify_one();
    }
    Ok(h::encode(
        StatusCode::CREATED,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
        &h::object_format(req),
    ))
}

/// A token issued through `serviceaccounts/token`: whom it authenticates, until when,
/// and the objects that must still exist (with the same uid) for it to be valid.
#[derive(Clone, Debug)]
pub(crate) struct IssuedToken {
    pub user: crate::auth::rbac::UserInfo,
    pub expires: jiff::Timestamp,
    /// Storage key, namespace, name and uid of the ServiceAccount, then of the bound
    /// object (a Pod or a Secret), if any.
    pub bound_to: Vec<(String, String, String, String)>,
}

impl IssuedToken {
    /// Unexpired, and every object it is bound to still there with its uid.
    pub(crate) fn valid(&self, storage: &crate::storage::Storage, now: jiff::Timestamp) -> bool {
        now < self.expires
            && self.bound_to.iter().all(|(key, ns, name, uid)| {
                storage
                    .get(key, ns, name)
                    .is_some_and(|o| str_at(&o, "/metadata/uid") == uid)
            })
    }
}

/// kube-apiserver's shortest TokenRequest: 10 minutes.
const MIN_TOKEN_SECONDS: i64 = 600;

/// POST to an object's subresource (`pods/eviction`, `pods/binding`, `serviceaccounts/token`).
pub fn create_subresource(
    srv: &Arc<ApiServer>,
    req: &Req,
    t: &Target,
) -> Result<Response<Body>, ApiError> {
    let (Some(name), Some(sub)) = (t.name.as_deref(), t.sub.as_deref()) else {
        return Err(ApiError::path_not_found());
    };
    let ns = t.namespace.as_deref().unwrap_or("");
    match (t.def.group.as_str(), t.def.plural.as_str(), sub) {
        ("", "pods", "eviction") => crate::controllers::disruption::evict(srv, req, t, name),
        ("", "pods", "binding") => bind_pod(srv, req, t, ns, name),
        ("", "serviceaccounts", "token") => {
            let account = srv
                .storage
                .get(&t.def.storage_key(), ns, name)
                .ok_or_else(|| ApiError::not_found(&t.def, name))?;
            let mut body = h::decode_body(req).unwrap_or_else(|_| json!({}));
            let mut user = crate::auth::rbac::UserInfo::service_account(ns, name);
            user.uid = str_at(&account, "/metadata/uid").to_string();
            user.extra.insert(
                "authentication.kubernetes.io/credential-id".into(),
                vec![format!("JTI={}", uuid::Uuid::new_v4())],
            );
            if let Some(bound) = body.pointer("/spec/boundObjectRef") {
                bind_token_to_pod(srv, ns, bound, &mut user)?;
            }
            let secs = body
                .pointer("/spec/expirationSeconds")
                .and_then(Value::as_i64)
                .unwrap_or(3600);
            if !(MIN_TOKEN_SECONDS..=i64::from(u32::MAX)).contains(&secs) {
                let why = if secs < MIN_TOKEN_SECONDS {
                    "may not specify a duration less than 10 minutes"
                } else {
                    "may not specify a duration larger than 2^32 seconds"
                };
                let cause = format!("Invalid value: {secs}: {why}");
                return Err(ApiError::new(
                    422,
                    "Invalid",
                    format!(
                        "TokenRequest.authentication.k8s.io \"\" is invalid: spec.expirationSeconds: {cause}"
                    ),
                )
                .with(kubewright_core::StatusDetails {
                    group: "authentication.k8s.io".into(),
                    kind: "TokenRequest".into(),
                    causes: vec![kubewright_core::StatusCause {
                        reason: "FieldValueInvalid".into(),
                        message: cause,
                        field: "spec.expirationSeconds".into(),
                    }],
                    ..Default::default()
                }));
            }
            let exp = jiff::Timestamp::now()
                .checked_add(jiff::SignedDuration::from_secs(secs))
                .unwrap_or_else(|_| jiff::Timestamp::now());
            body["kind"] = json!("TokenRequest");
            body["apiVersion"] = json!("authentication.k8s.io/v1");
            let token = format!("kw-sa-{}", uuid::Uuid::new_v4().simple());
            let mut bound_to = vec![(
                t.def.storage_key(),
                ns.to_string(),
                name.to_string(),
                user.uid.clone(),
            )];
            if let Some(bound) = body.pointer("/spec/boundObjectRef") {
                let plural = match str_at(bound, "/kind") {
                    "Pod" => Some("pods"),
                    "Secret" => Some("secrets"),
                    _ => None,
                };
                if let Some(def) = plural.and_then(|p| srv.def("", "v1", p)) {
                    let bound_name = str_at(bound, "/name");
                    if let Some(obj) = srv.storage.get(&def.storage_key(), ns, bound_name) {
                        bound_to.push((
                            def.storage_key(),
                            ns.to_string(),
                            bound_name.to_string(),
                            str_at(&obj, "/metadata/uid").to_string(),
                        ));
                    }
                }
            }
            let mut issued = srv.issued_tokens.lock().unwrap_or_else(|e| e.into_inner());
            // Expired tokens go as new ones come: the map holds only live tokens.
            let now = jiff::Timestamp::now();
            issued.retain(|_, t| t.expires > now);
            issued.insert(
                token.clone(),
                IssuedToken {
                    user,
                    expires: exp,
                    bound_to,
                },
            );
            drop(issued);
            body["status"] = json!({
                "token": token,
                "expirationTimestamp": exp.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
            });
            Ok(h::encode(
                StatusCode::CREATED,
                &body,
                &h::object_format(req),
            ))
        }
        _ => Err(ApiError::path_not_found()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_issued_token_expires() {
        let storage = crate::storage::Storage::new(10);
        let now = jiff::Timestamp::now();
        let token = IssuedToken {
            user: crate::auth::rbac::UserInfo::service_account("ns", "sa"),
            expires: now + jiff::SignedDuration::from_secs(600),
            bound_to: vec![],
        };
        assert!(token.valid(&storage, now));
        assert!(!token.valid(&storage, now + jiff::SignedDuration::from_secs(601)));
        // Bound to an object that is not there: invalid.
        let bound = IssuedToken {
            bound_to: vec![(
                "/serviceaccounts".into(),
                "ns".into(),
                "sa".into(),
                "u".into(),
            )],
            ..token
        };
        assert!(!bound.valid(&storage, now));
    }
}
