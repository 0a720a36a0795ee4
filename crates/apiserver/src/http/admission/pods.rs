//! kube-apiserver's built-in admission plugins for pods created by clients:
//! `LimitRanger` (mutating: the namespace's LimitRanges' container defaults filled in,
//! with the `kubernetes.io/limit-ranger` annotation saying what was set; validating:
//! minima, maxima and limit/request ratios on every container, and on the pod's totals
//! for `Pod` items, and [`limit_claim`]'s storage bounds on new claims),
//! `ServiceAccount` (the pod's service account must exist, waiting a little for the
//! `default` one that a new namespace gets from its controller; its API token mounted
//! as the projected `kube-api-access-<suffix>` volume in every container) and `Priority`
//! (the priority and preemption policy come from the pod's PriorityClass, or a global
//! default one; a priority the pod states itself must be the computed one).
//!
//! [`mutate`] runs in the mutating phase, before the mutating webhooks (which see its
//! result), and after the writer's managedFields are taken: what it adds is not the
//! writer's. [`validate_limits`] and [`limit_claim`] run in the validating phase, after
//! the registry's validation, as the first validating plugins.

use crate::error::ApiError;
use crate::http::api::ApiServer;
use crate::registry::ResourceDef;
use serde_json::{Value, json};
use std::time::Duration;

const TOKEN_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The mutating plugins, in kube-apiserver's order, on a pod about to be created:
/// LimitRanger's defaults, ServiceAccount, Priority.
pub(crate) async fn mutate(
    srv: &ApiServer,
    def: &ResourceDef,
    ns: &str,
    name: &str,
    pod: &mut Value,
) -> Result<(), ApiError> {
    let ranges = srv.storage.list("/limitranges", Some(ns)).0;
    let container_items: Vec<&Value> = limit_items(&ranges)
        .into_iter()
        .filter(|l| l.get("type").and_then(Value::as_str) == Some("Container"))
        .collect();
    if !container_items.is_empty() {
        container_defaults(pod, &container_items);
    }
    service_account(srv, def, ns, name, pod).await?;
    priority(srv, def, name, pod)
}

type Resources = serde_json::Map<String, Value>;

/// LimitRanger's validation of a pod about to be created (`PodValidateLimitFunc`): each
/// Container item of the namespace's LimitRanges against every container (minima,
/// maxima, limit/request ratios), each Pod item against the pod's totals.
pub(crate) fn validate_limits(
    srv: &ApiServer,
    def: &ResourceDef,
    ns: &str,
    name: &str,
    pod: &Value,
) -> Result<(), ApiError> {
    let ranges = srv.storage.list("/limitranges", Some(ns)).0;
    let all = limit_items(&ranges);
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    let mut errs: Vec<String> = Vec::new();
    for l in &all {
        match l.get("type").and_then(Value::as_str) {
            Some("Container") => {
                for list in ["containers", "initContainers"] {
                    for c in crate::registry::resources::items(spec, list) {
                        let get = |key: &str, r: &str| -> Option<String> {
                            c.get("resources")?
                                .get(key)?
                                .get(r)?
                                .as_str()
                                .map(str::to_string)
                        };
                        constraints(l, "Container", &get, &mut errs);
                    }
                }
            }
            Some("Pod") => {
                let totals = crate::registry::quota::pod_totals(spec);
                let get = |key: &str, r: &str| -> Option<String> {
                    let i = usize::from(key == "limits");
                    totals[i].get(r).map(|a| a.text())
                };
                constraints(l, "Pod", &get, &mut errs);
            }
            _ => {}
        }
    }
    limit_errors(def, name, errs)
}

/// `defaultContainerResourceRequirements`: the Container items' defaults filled into
/// every container that lacks them, with the `kubernetes.io/limit-ranger` annotation.
fn container_defaults(pod: &mut Value, items: &[&Value]) {
    // `defaultContainerResourceRequirements`: the last range's value of a resource wins.
    let mut limits = Resources::new();
    let mut requests = Resources::new();
    for l in items {
        for (key, into) in [("defaultRequest", &mut requests), ("default", &mut limits)] {
            if let Some(m) = l.get(key).and_then(Value::as_object) {
                into.extend(m.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
        }
    }
    let mut notes: Vec<String> = Vec::new();
    for (list, prefix) in [
        ("containers", "container"),
        ("initContainers", "init container"),
    ] {
        for c in containers_mut(pod, list) {
            let cname = c
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let mut set = |key: &str, defaults: &Resources| -> Vec<String> {
                let res = &mut c["resources"];
                if !res.is_object() {
                    *res = json!({});
                }
                let target = &mut res[key];
                if !target.is_object() {
                    *target = json!({});
                }
                let mut added = Vec::new();
                if let Some(m) = target.as_object_mut() {
                    for (k, v) in defaults {
                        if !m.contains_key(k) {
                            m.insert(k.clone(), v.clone());
                            added.push(k.clone());
                        }
                    }
                }
                added.sort();
                added
            };
            let set_limits = set("limits", &limits);
            let set_requests = set("requests", &requests);
            // Empty lists are dropped again, as Go's omitempty writes them.
            if let Some(res) = c.get_mut("resources").and_then(Value::as_object_mut) {
                res.retain(|_, v| v.as_object().is_none_or(|m| !m.is_empty()));
            }
            if !set_requests.is_empty() {
                notes.push(format!(
                    "{} request for {prefix} {cname}",
                    set_requests.join(", ")
                ));
            }
            if !set_limits.is_empty() {
                notes.push(format!(
                    "{} limit for {prefix} {cname}",
                    set_limits.join(", ")
                ));
            }
        }
    }
    if !notes.is_empty() {
        let meta = crate::registry::meta::meta_mut(pod);
        let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
        if let Some(a) = annotations.as_object_mut() {
            a.insert(
                "kubernetes.io/limit-ranger".into(),
                json!(format!("LimitRanger plugin set: {}", notes.join("; "))),
            );
        }
    }
}

/// LimitRanger's errors as one 403 (Go's aggregate: one alone, several in brackets).
fn limit_errors(def: &ResourceDef, name: &str, errs: Vec<String>) -> Result<(), ApiError> {
    match errs.len() {
        0 => Ok(()),
        1 => Err(ApiError::forbidden_because(def, name, &errs[0])),
        _ => Err(ApiError::forbidden_because(
            def,
            name,
            &format!("[{}]", errs.join(", ")),
        )),
    }
}

fn quantity(s: &str) -> Option<kubewright_core::quantity::Quantity> {
    s.parse().ok()
}

/// `minConstraint`, `maxConstraint` and `limitRequestRatioConstraint` of one LimitRange
/// item over one container's (or the pod's) requests and limits.
fn constraints(
    item: &Value,
    ty: &str,
    get: &dyn Fn(&str, &str) -> Option<String>,
    errs: &mut Vec<String>,
) {
    let bounds = |key: &str| {
        item.get(key)
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(r, v)| (r.as_str(), v.as_str().unwrap_or("")))
    };
    for bound in ["min", "max"] {
        for (r, enforced) in bounds(bound) {
            let e = quantity(enforced);
            let (req, lim) = (get("requests", r), get("limits", r));
            let q = |v: &String| quantity(v);
            let why = if bound == "min" {
                match (req, lim) {
                    (None, _) => Some(".  No request is specified".to_string()),
                    (Some(v), _) if q(&v) < e => Some(format!(", but request is {v}")),
                    (_, Some(v)) if q(&v) < e => Some(format!(", but limit is {v}")),
                    _ => None,
                }
            } else {
                match (req, lim) {
                    (_, None) => Some(".  No limit is specified".to_string()),
                    (_, Some(v)) if q(&v) > e => Some(format!(", but limit is {v}")),
                    (Some(v), _) if q(&v) > e => Some(format!(", but request is {v}")),
                    _ => None,
                }
            };
            if let Some(why) = why {
                let word = if bound == "min" { "minimum" } else { "maximum" };
                errs.push(format!("{word} {r} usage per {ty} is {enforced}{why}"));
            }
        }
    }
    for (r, enforced) in bounds("maxLimitRequestRatio") {
        let milli = |v: Option<String>| {
            v.as_deref()
                .and_then(quantity)
                .and_then(|q| q.as_milli())
                .unwrap_or(0)
        };
        let (req, lim) = (milli(get("requests", r)), milli(get("limits", r)));
        let head = format!("{r} max limit to request ratio per {ty} is {enforced}");
        if req == 0 {
            errs.push(format!(
                "{head}, but no request is specified or request is 0"
            ));
        } else if lim == 0 {
            errs.push(format!("{head}, but no limit is specified or limit is 0"));
        } else {
            let ratio = lim as f64 / req as f64;
            let max = quantity(enforced).and_then(|q| q.as_milli()).unwrap_or(0);
            if ratio * 1000.0 > max as f64 {
                errs.push(format!("{head}, but provided ratio is {ratio:.6}"));
            }
        }
    }
}

/// The items (`spec.limits`) of every LimitRange of a namespace.
fn limit_items(ranges: &[std::sync::Arc<Value>]) -> Vec<&Value> {
    ranges
        .iter()
        .flat_map(|r| {
            crate::registry::resources::items(r.get("spec").unwrap_or(&Value::Null), "limits")
        })
        .collect()
}

/// LimitRanger on a new PersistentVolumeClaim: each PersistentVolumeClaim item's
/// minima and maxima against the claim's requests.
pub(crate) fn limit_claim(
    srv: &ApiServer,
    def: &ResourceDef,
    ns: &str,
    name: &str,
    claim: &Value,
) -> Result<(), ApiError> {
    let ranges = srv.storage.list("/limitranges", Some(ns)).0;
    let mut errs = Vec::new();
    for l in limit_items(&ranges) {
        if l.get("type").and_then(Value::as_str) != Some("PersistentVolumeClaim") {
            continue;
        }
        let request = |r: &str| -> Option<String> {
            claim
                .pointer("/spec/resources/requests")?
                .get(r)?
                .as_str()
                .map(str::to_string)
        };
        for bound in ["min", "max"] {
            for (r, enforced) in l
                .get(bound)
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                let enforced = enforced.as_str().unwrap_or("");
                let e = quantity(enforced);
                let why = match (bound, request(r)) {
                    ("min", None) => Some(".  No request is specified".to_string()),
                    ("min", Some(v)) if quantity(&v) < e => Some(format!(", but request is {v}")),
                    ("max", Some(v)) if quantity(&v) > e => Some(format!(", but request is {v}")),
                    _ => None,
                };
                if let Some(why) = why {
                    let word = if bound == "min" { "minimum" } else { "maximum" };
                    errs.push(format!(
                        "{word} {r} usage per PersistentVolumeClaim is {enforced}{why}"
                    ));
                }
            }
        }
    }
    limit_errors(def, name, errs)
}

/// The `ServiceAccount` plugin.
async fn service_account(
    srv: &ApiServer,
    def: &ResourceDef,
    ns: &str,
    name: &str,
    pod: &mut Value,
) -> Result<(), ApiError> {
    let sa_name = pod
        .pointer("/spec/serviceAccountName")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or("default")
        .to_string();
    pod["spec"]["serviceAccountName"] = json!(sa_name);
    // The default account is created by a controller when the namespace is: it is
    // looked up ten times, 100-200 ms apart, as kube-apiserver does.
    let attempts = if sa_name == "default" { 10 } else { 1 };
    let mut sa = None;
    for i in 0..attempts {
        if i > 0 {
            let wait = 100 + rand::random::<u64>() % 100;
            tokio::time::sleep(Duration::from_millis(wait)).await;
        }
        sa = srv.storage.get("/serviceaccounts", ns, &sa_name);
        if sa.is_some() {
            break;
        }
    }
    let Some(sa) = sa else {
        return Err(ApiError::forbidden_because(
            def,
            name,
            &format!(
                "error looking up service account {ns}/{sa_name}: serviceaccount {} not found",
                crate::error::go_quote(&sa_name)
            ),
        ));
    };
    let off = |v: Option<&Value>| v == Some(&json!(false));
    let automount = match pod.pointer("/spec/automountServiceAccountToken") {
        Some(Value::Bool(b)) => *b,
        _ => !off(sa.get("automountServiceAccountToken")),
    };
    if automount {
        mount_token(pod);
    }
    Ok(())
}

/// The containers of the list `list` (`containers`, `initContainers`) of a pod's spec.
fn containers_mut<'a>(pod: &'a mut Value, list: &str) -> &'a mut [Value] {
    pod.pointer_mut(&format!("/spec/{list}"))
        .and_then(Value::as_array_mut)
        .map_or(&mut [], Vec::as_mut_slice)
}

/// The projected token volume, mounted read-only in every container that has nothing
/// mounted at the token path.
fn mount_token(pod: &mut Value) {
    let volume = format!("kube-api-access-{}", crate::http::api::random_suffix());
    let mount = json!({"name": volume, "readOnly": true, "mountPath": TOKEN_PATH});
    let mut mounted = false;
    for key in ["initContainers", "containers"] {
        for c in containers_mut(pod, key) {
            let has = c
                .get("volumeMounts")
                .and_then(Value::as_array)
                .is_some_and(|ms| {
                    ms.iter()
                        .any(|m| m.get("mountPath") == Some(&json!(TOKEN_PATH)))
                });
            if has {
                continue;
            }
            match c.get_mut("volumeMounts").and_then(Value::as_array_mut) {
                Some(ms) => ms.push(mount.clone()),
                None => c["volumeMounts"] = json!([mount.clone()]),
            }
            mounted = true;
        }
    }
    if !mounted {
        return;
    }
    let v = json!({"name": volume, "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
    ]}});
    match pod
        .pointer_mut("/spec/volumes")
        .and_then(Value::as_array_mut)
    {
        Some(vs) => vs.push(v),
        None => pod["spec"]["volumes"] = json!([v]),
    }
}

/// The `Priority` plugin.
fn priority(
    srv: &ApiServer,
    def: &ResourceDef,
    name: &str,
    pod: &mut Value,
) -> Result<(), ApiError> {
    let class_name = pod
        .pointer("/spec/priorityClassName")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let classes = "scheduling.k8s.io/priorityclasses";
    let class = if class_name.is_empty() {
        srv.storage
            .list(classes, None)
            .0
            .into_iter()
            .find(|c| c.get("globalDefault") == Some(&json!(true)))
    } else {
        match srv.storage.get(classes, "", &class_name) {
            Some(c) => Some(c),
            None => {
                return Err(ApiError::forbidden_because(
                    def,
                    name,
                    &format!("no PriorityClass with name {class_name} was found"),
                ));
            }
        }
    };
    let value = class
        .as_ref()
        .and_then(|c| c.get("value"))
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let policy = class
        .as_ref()
        .and_then(|c| c.get("preemptionPolicy"))
        .and_then(Value::as_str)
        .unwrap_or("PreemptLowerPriority")
        .to_string();
    if let Some(given) = pod.pointer("/spec/priority").and_then(Value::as_i64)
        && given != value
    {
        return Err(ApiError::forbidden_because(
            def,
            name,
            &format!(
                "the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {value} from the given PriorityClass name"
            ),
        ));
    }
    if let Some(given) = pod
        .pointer("/spec/preemptionPolicy")
        .and_then(Value::as_str)
        && given != policy
    {
        return Err(ApiError::forbidden_because(
            def,
            name,
            &format!(
                "the string value of PreemptionPolicy ({given}) must not be provided in pod spec; priority admission controller computed {policy} from the given PriorityClass name"
            ),
        ));
    }
    pod["spec"]["priority"] = json!(value);
    pod["spec"]["preemptionPolicy"] = json!(policy);
    Ok(())
}
