//! ResourceQuota usage, as kube-controller-manager's quota controller reports it
//! (`status.hard`, `status.used`) and kube-apiserver's `ResourceQuota` admission plugin
//! enforces it on creates and on updates that add usage ("exceeded quota: ...").
//!
//! Counted: object counts (`pods` and `count/pods` for pods not yet finished,
//! `services`, `services.nodeports`, `services.loadbalancers`, `configmaps`, `secrets`,
//! `persistentvolumeclaims`, `replicationcontrollers`, `resourcequotas`, and
//! `count/<resource>[.<group>]` for any kind), the compute resources of unfinished pods
//! (`requests.cpu`, `cpu`, `requests.memory`, `memory`, `limits.cpu`, `limits.memory`,
//! `requests.ephemeral-storage`, `limits.ephemeral-storage`) and claims' storage
//! (`requests.storage`). A quota with scopes or a scope selector counts only the pods
//! that match them (BestEffort, NotBestEffort, Terminating, NotTerminating,
//! PriorityClass, CrossNamespacePodAffinity).

use crate::registry::ResourceDef;
use crate::storage::{Mutation, Storage};
use kubewright_core::quantity::{Quantity, QuantityFormat};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// A resource's usage: the sum in thousandths and the format of the first addend.
#[derive(Clone, Copy, Default)]
pub(crate) struct Amount {
    pub(crate) milli: i128,
    format: Option<QuantityFormat>,
}

impl Amount {
    fn count(n: i128) -> Self {
        Self {
            milli: n * 1000,
            format: Some(QuantityFormat::DecimalSi),
        }
    }

    pub(crate) fn add(&mut self, q: &str) {
        let Ok(q) = q.parse::<Quantity>() else { return };
        self.milli += i128::from(q.as_milli().unwrap_or(0));
        self.format.get_or_insert(q.format());
    }

    /// The sum, in the format of the first addend, or of the second when the first is
    /// zero (Go's `Quantity.Add`).
    fn plus(self, other: Amount) -> Amount {
        let format = if self.milli == 0 {
            other.format.or(self.format)
        } else {
            self.format.or(other.format)
        };
        Amount {
            milli: self.milli + other.milli,
            format,
        }
    }

    /// Printed as Go's canonical Quantity: a binary suffix when exact, else decimal.
    pub(crate) fn text(&self) -> String {
        if self.format == Some(QuantityFormat::BinarySi) && self.milli % 1000 == 0 {
            let bytes = self.milli / 1000;
            if bytes == 0 {
                return "0".into();
            }
            for (shift, suffix) in [
                (60, "Ei"),
                (50, "Pi"),
                (40, "Ti"),
                (30, "Gi"),
                (20, "Mi"),
                (10, "Ki"),
            ] {
                let unit = 1i128 << shift;
                if bytes % unit == 0 {
                    return format!("{}{suffix}", bytes / unit);
                }
            }
            return bytes.to_string();
        }
        format!("{}m", self.milli)
            .parse::<Quantity>()
            .map(|q| q.to_string())
            .unwrap_or_else(|_| format!("{}m", self.milli))
    }
}

fn str_of<'v>(v: &'v Value, ptr: &str) -> Option<&'v str> {
    v.pointer(ptr).and_then(Value::as_str)
}

fn finished_pod(pod: &Value) -> bool {
    matches!(str_of(pod, "/status/phase"), Some("Succeeded" | "Failed"))
}

/// The names an object of `resource` (plural) in `group` counts under.
fn count_names(resource: &str, group: &str) -> Vec<String> {
    let mut names = vec![if group.is_empty() {
        format!("count/{resource}")
    } else {
        format!("count/{resource}.{group}")
    }];
    if group.is_empty()
        && matches!(
            resource,
            "pods"
                | "services"
                | "configmaps"
                | "secrets"
                | "persistentvolumeclaims"
                | "replicationcontrollers"
                | "resourcequotas"
        )
    {
        names.push(resource.to_string());
    }
    names
}

/// What one object adds to the usage of each resource it counts for.
fn usage_of(resource: &str, group: &str, obj: &Value) -> BTreeMap<String, Amount> {
    let mut out = BTreeMap::new();
    if resource == "pods" && group.is_empty() && finished_pod(obj) {
        return out;
    }
    for name in count_names(resource, group) {
        out.insert(name, Amount::count(1));
    }
    match (group, resource) {
        ("", "services") => {
            let ty = str_of(obj, "/spec/type").unwrap_or("ClusterIP");
            if ty == "LoadBalancer" {
                out.insert("services.loadbalancers".into(), Amount::count(1));
            }
            if matches!(ty, "NodePort" | "LoadBalancer") {
                let ports = crate::registry::resources::items(
                    obj.get("spec").unwrap_or(&Value::Null),
                    "ports",
                )
                .iter()
                .filter(|p| {
                    p.get("nodePort")
                        .and_then(Value::as_i64)
                        .is_some_and(|n| n != 0)
                })
                .count();
                out.insert("services.nodeports".into(), Amount::count(ports as i128));
            }
        }
        ("", "persistentvolumeclaims") => {
            let mut a = Amount::default();
            if let Some(s) = str_of(obj, "/spec/resources/requests/storage") {
                a.add(s);
            }
            out.insert("requests.storage".into(), a);
        }
        ("", "pods") => {
            let [requests, limits] = pod_totals(obj.get("spec").unwrap_or(&Value::Null));
            for res in ["cpu", "memory", "ephemeral-storage"] {
                if let Some(a) = requests.get(res) {
                    out.insert(res.to_string(), *a);
                    out.insert(format!("requests.{res}"), *a);
                }
                if let Some(a) = limits.get(res) {
                    out.insert(format!("limits.{res}"), *a);
                }
            }
        }
        _ => {}
    }
    out
}

/// A pod's requests and limits as the scheduler sums them: containers added up, an
/// init container counting when larger (they run one by one), the overhead on top.
pub(crate) fn pod_totals(spec: &Value) -> [BTreeMap<String, Amount>; 2] {
    let mut out: [BTreeMap<String, Amount>; 2] = Default::default();
    for (i, key) in ["requests", "limits"].iter().enumerate() {
        let list = |c: &Value| -> Vec<(String, String)> {
            c.get("resources")
                .and_then(|r| r.get(*key))
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        };
        let totals = &mut out[i];
        for c in crate::registry::resources::items(spec, "containers") {
            for (k, v) in list(c) {
                totals.entry(k).or_default().add(&v);
            }
        }
        for c in crate::registry::resources::items(spec, "initContainers") {
            for (k, v) in list(c) {
                let mut one = Amount::default();
                one.add(&v);
                let t = totals.entry(k).or_default();
                if one.milli > t.milli {
                    *t = one;
                }
            }
        }
        if let Some(overhead) = spec.get("overhead").and_then(Value::as_object) {
            for (k, v) in overhead {
                if let (Some(t), Some(v)) = (totals.get_mut(k), v.as_str()) {
                    t.add(v);
                }
            }
        }
    }
    out
}

/// A quota's scopes: `spec.scopes` (each as `Exists`) and the expressions of
/// `spec.scopeSelector`, as (scope, operator, values).
fn scopes(quota: &Value) -> Vec<(&str, &str, Vec<&str>)> {
    let mut out: Vec<(&str, &str, Vec<&str>)> = quota
        .pointer("/spec/scopes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|s| (s, "Exists", Vec::new()))
        .collect();
    for e in quota
        .pointer("/spec/scopeSelector/matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let values = e
            .get("values")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        out.push((
            str_of(e, "/scopeName").unwrap_or(""),
            str_of(e, "/operator").unwrap_or(""),
            values,
        ));
    }
    out
}

/// Whether a pod's QoS class is BestEffort: no container sets a non-zero CPU or memory
/// request or limit (nor the pod, with pod-level resources).
fn best_effort(pod: &Value) -> bool {
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    let set = |r: Option<&Value>| {
        ["requests", "limits"].iter().any(|k| {
            ["cpu", "memory"].iter().any(|res| {
                r.and_then(|r| r.get(*k))
                    .and_then(|m| m.get(*res))
                    .and_then(Value::as_str)
                    .is_some_and(|q| {
                        let mut a = Amount::default();
                        a.add(q);
                        a.milli > 0
                    })
            })
        })
    };
    let containers = ["initContainers", "containers"]
        .iter()
        .flat_map(|k| crate::registry::resources::items(spec, k));
    !set(spec.get("resources")) && !containers.into_iter().any(|c| set(c.get("resources")))
}

/// Whether a pod has affinity terms that reach other namespaces.
fn cross_namespace_affinity(pod: &Value) -> bool {
    let affinity = pod.pointer("/spec/affinity").unwrap_or(&Value::Null);
    ["podAffinity", "podAntiAffinity"].iter().any(|kind| {
        let Some(a) = affinity.get(*kind) else {
            return false;
        };
        let required = a
            .get("requiredDuringSchedulingIgnoredDuringExecution")
            .and_then(Value::as_array)
            .into_iter()
            .flatten();
        let preferred = a
            .get("preferredDuringSchedulingIgnoredDuringExecution")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|w| w.get("podAffinityTerm"));
        required.chain(preferred).any(|t| {
            t.get("namespaceSelector").is_some_and(|s| !s.is_null())
                || t.get("namespaces")
                    .and_then(Value::as_array)
                    .is_some_and(|n| !n.is_empty())
        })
    })
}

/// Whether `quota` counts `obj` (of `resource` in `group`): a quota without scopes
/// counts everything; one with scopes only the pods that match every scope.
fn counts(quota: &Value, resource: &str, group: &str, obj: &Value) -> bool {
    let scopes = scopes(quota);
    if scopes.is_empty() {
        return true;
    }
    if !(group.is_empty() && resource == "pods") {
        return false;
    }
    let deadline = obj
        .pointer("/spec/activeDeadlineSeconds")
        .and_then(Value::as_i64);
    scopes.iter().all(|(scope, op, values)| match *scope {
        "Terminating" => deadline.is_some_and(|d| d >= 0),
        "NotTerminating" => deadline.is_none(),
        "BestEffort" => best_effort(obj),
        "NotBestEffort" => !best_effort(obj),
        "CrossNamespacePodAffinity" => cross_namespace_affinity(obj),
        "PriorityClass" => {
            let class = str_of(obj, "/spec/priorityClassName").unwrap_or("");
            match *op {
                "Exists" => !class.is_empty(),
                "In" => values.contains(&class),
                "NotIn" => !values.contains(&class),
                // The class is always a key of the set matched, if empty.
                _ => false,
            }
        }
        _ => false,
    })
}

/// The usage of every resource in `hard` within namespace `ns`, of the objects `quota`
/// counts.
fn used(
    storage: &Storage,
    ns: &str,
    hard: &Map<String, Value>,
    quota: &Value,
) -> BTreeMap<String, Amount> {
    let mut totals: BTreeMap<String, Amount> = hard
        .keys()
        .map(|k| (k.clone(), Amount::default()))
        .collect();
    for key in storage.resources_in_namespace(ns) {
        let (group, resource) = match key.trim_start_matches('/').split_once('/') {
            Some((g, r)) => (g.to_string(), r.to_string()),
            None => (String::new(), key.trim_start_matches('/').to_string()),
        };
        for obj in storage.list(&key, Some(ns)).0 {
            if !counts(quota, &resource, &group, &obj) {
                continue;
            }
            for (name, a) in usage_of(&resource, &group, &obj) {
                if let Some(t) = totals.get_mut(&name) {
                    *t = t.plus(a);
                }
            }
        }
    }
    totals
}

/// The status the quota controller writes: `hard` as the spec's, `used` for each.
pub(crate) fn status(storage: &Storage, quota: &Value) -> Value {
    let ns = crate::registry::meta::meta_str(quota, "namespace").unwrap_or("");
    let hard = quota
        .pointer("/spec/hard")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    if hard.is_empty() {
        return json!({});
    }
    let used: Map<String, Value> = used(storage, ns, &hard, quota)
        .into_iter()
        .map(|(k, a)| (k, json!(a.text())))
        .collect();
    json!({"hard": hard, "used": used})
}

/// Whether the quota evaluator of `resource` in `group` counts the resource `name`
/// (upstream's `MatchingResources`): its object counts, and a pod's compute resources,
/// a Service's node ports and load balancers, a claim's storage.
fn evaluator_matches(resource: &str, group: &str, name: &str) -> bool {
    if count_names(resource, group).iter().any(|n| n == name) {
        return true;
    }
    match (group, resource) {
        ("", "pods") => {
            matches!(
                name,
                "cpu"
                    | "memory"
                    | "ephemeral-storage"
                    | "requests.cpu"
                    | "requests.memory"
                    | "requests.ephemeral-storage"
                    | "limits.cpu"
                    | "limits.memory"
                    | "limits.ephemeral-storage"
            ) || name.starts_with("hugepages-")
                || name.starts_with("requests.hugepages-")
        }
        ("", "services") => matches!(name, "services.nodeports" | "services.loadbalancers"),
        ("", "persistentvolumeclaims") => {
            name == "requests.storage"
                || name.ends_with(".storageclass.storage.k8s.io/requests.storage")
                || name.ends_with(".storageclass.storage.k8s.io/persistentvolumeclaims")
        }
        _ => false,
    }
}

/// The pod evaluator's `Constraints`: when a quota limits cpu or memory, every
/// container must state the request or limit it limits ("must specify limits.memory
/// for: a,b; requests.cpu for: a").
fn pod_constraints(pod: &Value, restricted: &[&str]) -> Option<String> {
    const VALIDATED: [&str; 6] = [
        "cpu",
        "memory",
        "requests.cpu",
        "requests.memory",
        "limits.cpu",
        "limits.memory",
    ];
    let required: Vec<&str> = VALIDATED
        .into_iter()
        .filter(|r| restricted.contains(r))
        .collect();
    if required.is_empty() {
        return None;
    }
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    let mut missing: BTreeMap<&str, std::collections::BTreeSet<&str>> = BTreeMap::new();
    for list in ["containers", "initContainers"] {
        for c in crate::registry::resources::items(spec, list) {
            let has = |key: &str, r: &str| c.pointer(&format!("/resources/{key}/{r}")).is_some();
            for r in &required {
                let stated = match *r {
                    "cpu" | "requests.cpu" => has("requests", "cpu"),
                    "memory" | "requests.memory" => has("requests", "memory"),
                    "limits.cpu" => has("limits", "cpu"),
                    _ => has("limits", "memory"),
                };
                if !stated {
                    missing
                        .entry(r)
                        .or_default()
                        .insert(c.get("name").and_then(Value::as_str).unwrap_or(""));
                }
            }
        }
    }
    if missing.is_empty() {
        return None;
    }
    let parts: Vec<String> = missing
        .iter()
        .map(|(r, names)| {
            format!(
                "{r} for: {}",
                names.iter().copied().collect::<Vec<_>>().join(",")
            )
        })
        .collect();
    Some(format!("must specify {}", parts.join("; ")))
}

/// A quota's `status.hard` or `status.used` as amounts.
fn amounts(quota: &Value, field: &str) -> BTreeMap<String, Amount> {
    quota
        .pointer(&format!("/status/{field}"))
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| {
            let mut a = Amount::default();
            a.add(v.as_str().unwrap_or(""));
            (k.clone(), a)
        })
        .collect()
}

/// The `ResourceQuota` admission plugin on a write (kube-apiserver's `CheckRequest`),
/// last of the validating plugins: the error text when the write is refused. Quotas
/// are judged by what the quota controller last reported (`status.hard`, `status.used`),
/// not by counting: a quota whose status does not cover a resource yet does not limit
/// it, and one whose `used` lacks a resource it limits refuses ("status unknown"). A
/// quota limiting cpu or memory requires every container of a new pod to state it. A
/// create is charged what the object uses; an update of a Service or a claim what it
/// uses beyond the object it replaces (other kinds are charged on create only). An
/// admitted write (unless a dry run) adds its charge to the quotas' `status.used` at
/// once, as kube-apiserver's own status update; the quota controller corrects it later.
pub(crate) fn check_write(
    storage: &Storage,
    def: &ResourceDef,
    ns: &str,
    obj: &Value,
    old: Option<&Value>,
    dry_run: bool,
) -> Option<String> {
    let (resource, group) = (def.plural.as_str(), def.group.as_str());
    let handles_update =
        group.is_empty() && matches!(resource, "services" | "persistentvolumeclaims");
    if !def.namespaced || (old.is_some() && !handles_update) {
        return None;
    }
    let quotas = storage.list("/resourcequotas", Some(ns)).0;
    let mut interesting: Vec<&Value> = Vec::new();
    for quota in &quotas {
        if !counts(quota, resource, group, obj) {
            continue;
        }
        let name = crate::registry::meta::meta_str(quota, "name").unwrap_or("");
        let hard = amounts(quota, "hard");
        let restricted: Vec<&str> = hard
            .keys()
            .map(String::as_str)
            .filter(|k| evaluator_matches(resource, group, k))
            .collect();
        if group.is_empty()
            && resource == "pods"
            && let Some(why) = pod_constraints(obj, &restricted)
        {
            return Some(format!("failed quota: {name}: {why}"));
        }
        let used = quota.pointer("/status/used").and_then(Value::as_object);
        if restricted
            .iter()
            .any(|k| !used.is_some_and(|u| u.contains_key(*k)))
        {
            return Some(format!(
                "status unknown for quota: {name}, resources: {}",
                restricted.join(",")
            ));
        }
        interesting.push(quota);
    }
    if interesting.is_empty() {
        return None;
    }
    let mut delta = usage_of(resource, group, obj);
    if let Some(old) = old {
        let before = usage_of(resource, group, old);
        for (k, a) in delta.iter_mut() {
            a.milli = (a.milli - before.get(k).map_or(0, |b| b.milli)).max(0);
        }
    }
    delta.retain(|_, a| a.milli != 0);
    if delta.is_empty() {
        return None;
    }
    // Each quota's charge: the delta of the resources its status limits.
    let charge = |quota: &Value| -> BTreeMap<String, Amount> {
        let hard = amounts(quota, "hard");
        delta
            .iter()
            .filter(|(k, _)| hard.contains_key(*k))
            .map(|(k, a)| (k.clone(), *a))
            .collect()
    };
    let exceeded = |quota: &Value, requested: &BTreeMap<String, Amount>| -> Option<String> {
        let hard = amounts(quota, "hard");
        let used = amounts(quota, "used");
        let over: Vec<&String> = requested
            .iter()
            .filter(|(k, a)| {
                let now = used.get(*k).copied().unwrap_or_default();
                now.plus(**a).milli > hard.get(*k).map_or(0, |h| h.milli)
            })
            .map(|(k, _)| k)
            .collect();
        if over.is_empty() {
            return None;
        }
        let list = |f: &dyn Fn(&str) -> String| {
            over.iter()
                .map(|k| format!("{k}={}", f(k)))
                .collect::<Vec<_>>()
                .join(",")
        };
        let hard_text = |k: &str| {
            quota
                .pointer("/status/hard")
                .and_then(|h| h.get(k))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        Some(format!(
            "exceeded quota: {}, requested: {}, used: {}, limited: {}",
            crate::registry::meta::meta_str(quota, "name").unwrap_or(""),
            list(&|k| requested[k].text()),
            list(&|k| used.get(k).copied().unwrap_or_default().text()),
            list(&hard_text),
        ))
    };
    let mut charges = Vec::new();
    for quota in interesting {
        let requested = charge(quota);
        if requested.is_empty() {
            continue;
        }
        if let Some(why) = exceeded(quota, &requested) {
            return Some(why);
        }
        charges.push((quota, requested));
    }
    if dry_run {
        return None;
    }
    for (quota, requested) in charges {
        let name = crate::registry::meta::meta_str(quota, "name").unwrap_or("");
        let written = storage.mutate::<Refused>("/resourcequotas", ns, name, |cur, _| {
            let Some(cur) = cur else {
                return Ok(Mutation::Keep);
            };
            // Charged against the quota as stored now (another write may have been
            // charged since it was read).
            if let Some(why) = exceeded(cur, &requested) {
                return Err(Refused(why));
            }
            let mut used = amounts(cur, "used");
            for (k, a) in &requested {
                let u = used.entry(k.clone()).or_default();
                *u = u.plus(*a);
            }
            let mut next = (**cur).clone();
            next["status"]["used"] = used_json(&used);
            record_status_write(cur, &mut next, "kube-apiserver");
            Ok(Mutation::Put(next))
        });
        if let Err(Refused(why)) = written {
            return Some(why);
        }
    }
    None
}

/// Why a quota's status update refused a charge (or the storage failed).
struct Refused(String);

impl From<crate::storage::StorageError> for Refused {
    fn from(e: crate::storage::StorageError) -> Self {
        Refused(e.to_string())
    }
}

fn used_json(used: &BTreeMap<String, Amount>) -> Value {
    Value::Object(
        used.iter()
            .map(|(k, a)| (k.clone(), json!(a.text())))
            .collect(),
    )
}

/// Records a write of a quota's status by `manager` in its managedFields, as the
/// status subresource's field manager does.
pub(crate) fn record_status_write(cur: &Value, next: &mut Value, manager: &str) {
    let ty = crate::registry::schema::builtin_def("io.k8s.api.core.v1.ResourceQuota");
    let mut changed = crate::registry::fields::compare(cur, next, ty);
    changed.retain_root("status", true);
    crate::registry::meta::record_update(next, manager, "v1", Some("status"), &changed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_print_as_go_quantities() {
        let mut a = Amount::default();
        a.add("512Mi");
        a.add("256Mi");
        assert_eq!(a.text(), "768Mi");
        let mut c = Amount::default();
        c.add("600m");
        c.add("300m");
        assert_eq!(c.text(), "900m");
        c.add("100m");
        assert_eq!(c.text(), "1");
        assert_eq!(Amount::count(3).text(), "3");
        assert_eq!(Amount::default().text(), "0");
        let pod = json!({"spec": {"containers": [{"name": "c", "resources": {"limits": {"memory": "512Mi"}, "requests": {"cpu": "600m", "memory": "512Mi"}}}]}});
        let u = usage_of("pods", "", &pod);
        assert_eq!(u["limits.memory"].text(), "512Mi");
        let t = Amount::default().plus(u["limits.memory"]);
        assert_eq!(t.text(), "512Mi");
    }

    #[test]
    fn scoped_quotas_count_only_matching_pods() {
        let q = |spec: Value| json!({"spec": spec});
        let best_effort = json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "0"}}}]}});
        let burstable = json!({"spec": {"priorityClassName": "gold", "containers": [{"name": "c", "resources": {"limits": {"memory": "1Gi"}}}],
            "affinity": {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": {"topologyKey": "k", "namespaces": ["other"]}}]}}}});
        let be = q(json!({"scopes": ["BestEffort"]}));
        assert!(counts(&be, "pods", "", &best_effort));
        assert!(!counts(&be, "pods", "", &burstable));
        assert!(!counts(&be, "configmaps", "", &json!({})));
        let not_in = q(
            json!({"scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "NotIn", "values": ["gold"]}]}}),
        );
        assert!(!counts(&not_in, "pods", "", &burstable));
        assert!(counts(&not_in, "pods", "", &best_effort));
        let cross = q(json!({"scopes": ["CrossNamespacePodAffinity", "NotTerminating"]}));
        assert!(counts(&cross, "pods", "", &burstable));
        assert!(!counts(&cross, "pods", "", &best_effort));
        assert!(counts(&q(json!({})), "configmaps", "", &json!({})));
    }
}
