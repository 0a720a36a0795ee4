//! kube-controller-manager's endpointslice and endpoints controllers: a Service with a
//! selector gets EndpointSlices (`<service>-<random>`, owned by it, labelled with its
//! labels, `kubernetes.io/service-name` and `endpointslice.kubernetes.io/managed-by`) and
//! an Endpoints object of the same name, listing the pods it selects that have an IP:
//! ready ones as ready, others not ready; a slice also keeps terminating pods (and says
//! so). Each Service port is resolved per pod (a named `targetPort` through the pod's
//! container ports), pods whose ports resolve alike share slices of at most 100
//! endpoints, and a Service without such pods has one empty placeholder slice. A pod on a
//! Node that does not exist is left out of the slices with a warning event, as upstream
//! does. Slices are updated in place; Endpoints' subsets are packed as upstream packs
//! them (addresses sorted by IP). Deleting the Service deletes its Endpoints (its slices
//! go through garbage collection).
//!
//! The endpointslice-mirroring controller mirrors the Endpoints of a Service without a
//! selector into slices of its own.
//!
//! Not done: topology hints and traffic
//! distribution, the 1000-address truncation of Endpoints; subsets and slice ports come
//! in a stable order of ours (upstream sorts them by hashes of Go's printed structs).

use super::workloads::{Key, event, key_of, write_options};
use crate::http::api::ApiServer;
use crate::http::delete::{DeleteOptions, delete_obj};
use crate::registry::meta::meta_str;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

pub(super) const SERVICES: &str = "/services";
const PODS: &str = "/pods";
const NODES: &str = "/nodes";
const ENDPOINTS: &str = "/endpoints";
const SLICES: &str = "discovery.k8s.io/endpointslices";
const SERVICE_NAME: &str = "kubernetes.io/service-name";
const MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
const SLICE_MANAGER: &str = "endpointslice-controller.k8s.io";
const ENDPOINTS_MANAGED_BY: &str = "endpoints.kubernetes.io/managed-by";
const HEADLESS: &str = "service.kubernetes.io/headless";
const TRIGGER: &str = "endpoints.kubernetes.io/last-change-trigger-time";
const ZONE: &str = "topology.kubernetes.io/zone";
const LEADER: &str = "control-plane.alpha.kubernetes.io/leader";
const MAX_PER_SLICE: usize = 100;
const MIRROR_MANAGER: &str = "endpointslicemirroring-controller.k8s.io";
const SKIP_MIRROR: &str = "endpointslice.kubernetes.io/skip-mirror";
/// Addresses mirrored per Endpoints subset.
const MAX_MIRRORED: usize = 1000;

/// Per Service: the latest Ready transition of its pods seen at the last sync (the
/// trigger-time tracker), kept between passes.
#[derive(Default)]
pub(crate) struct Triggers(HashMap<Key, Option<jiff::Timestamp>>);

fn labels_of(obj: &Value) -> Map<String, Value> {
    obj.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

/// The Service's selector; `None` when it has none (an empty one reads back as none).
pub(super) fn selector(svc: &Value) -> Option<&Map<String, Value>> {
    svc.pointer("/spec/selector")
        .and_then(Value::as_object)
        .filter(|m| !m.is_empty())
}

/// Whether `selector` selects a pod with `labels`.
pub(super) fn selects(selector: &Map<String, Value>, labels: &Map<String, Value>) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

fn pod_ready(pod: &Value) -> bool {
    ready_transition(pod).is_some_and(|(ready, _)| ready)
}

/// The pod's Ready condition: whether it is true, and when it last changed.
fn ready_transition(pod: &Value) -> Option<(bool, Option<jiff::Timestamp>)> {
    let c = pod
        .pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c["type"] == "Ready")?;
    Some((
        c["status"] == "True",
        c.get("lastTransitionTime")
            .and_then(Value::as_str)
            .and_then(|t| t.parse().ok()),
    ))
}

/// `ShouldPodBeInEndpoints`.
fn eligible(pod: &Value, include_terminating: bool) -> bool {
    if super::workloads::terminal(pod) {
        return false;
    }
    let has_ip = pod
        .pointer("/status/podIP")
        .and_then(Value::as_str)
        .is_some_and(|ip| !ip.is_empty())
        || pod
            .pointer("/status/podIPs")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty());
    has_ip && (include_terminating || !super::workloads::deleting(pod))
}

/// The pod's IPs of one family (`IPv4`/`IPv6`).
fn ips_of(pod: &Value, family: &str) -> Vec<String> {
    pod.pointer("/status/podIPs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| p.get("ip").and_then(Value::as_str))
        .filter_map(|ip| ip.parse::<std::net::IpAddr>().ok())
        .filter(|ip| ip.is_ipv4() == (family == "IPv4"))
        .map(|ip| ip.to_string())
        .collect()
}

/// `FindPort`: the pod's port for a Service port (a number as is; a name through the
/// containers' and sidecars' ports of the same protocol).
fn find_port(pod: &Value, svc_port: &Value) -> Option<i64> {
    let target = svc_port
        .get("targetPort")
        .or_else(|| svc_port.get("port"))?;
    if let Some(n) = target.as_i64() {
        return Some(n);
    }
    let name = target.as_str()?;
    let protocol = svc_port
        .get("protocol")
        .and_then(Value::as_str)
        .unwrap_or("TCP");
    let containers = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten();
    let sidecars = pod
        .pointer("/spec/initContainers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|c| c["restartPolicy"] == "Always");
    containers
        .chain(sidecars)
        .flat_map(|c| {
            c.get("ports")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
        })
        .find(|p| {
            p["name"] == name
                && p.get("protocol").and_then(Value::as_str).unwrap_or("TCP") == protocol
        })
        .and_then(|p| p["containerPort"].as_i64())
}

/// A Service port resolved for a pod: `(name, port, protocol, appProtocol)`.
type Port = (String, i64, String, Option<String>);

fn ports_for(svc: &Value, pod: &Value) -> Vec<Port> {
    svc.pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| {
            Some((
                p.get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                find_port(pod, p)?,
                p.get("protocol")
                    .and_then(Value::as_str)
                    .unwrap_or("TCP")
                    .to_string(),
                p.get("appProtocol")
                    .and_then(Value::as_str)
                    .map(str::to_string),
            ))
        })
        .collect()
}

fn headless(svc: &Value) -> bool {
    matches!(
        svc.pointer("/spec/clusterIP").and_then(Value::as_str),
        None | Some("None" | "")
    )
}

fn hostname_for(svc: &Value, pod: &Value) -> Option<String> {
    let host = pod.pointer("/spec/hostname").and_then(Value::as_str)?;
    (!host.is_empty()
        && pod.pointer("/spec/subdomain").and_then(Value::as_str) == meta_str(svc, "name")
        && meta_str(pod, "namespace") == meta_str(svc, "namespace"))
    .then(|| host.to_string())
}

fn target_ref(pod: &Value) -> Value {
    json!({"kind": "Pod", "namespace": meta_str(pod, "namespace").unwrap_or(""),
        "name": meta_str(pod, "name").unwrap_or(""), "uid": meta_str(pod, "uid").unwrap_or("")})
}

/// The labels the controllers write: the Service's, without the reserved keys, and the
/// headless marker.
fn derived_labels(svc: &Value, extra: &[(&str, &str)]) -> Map<String, Value> {
    let mut labels = labels_of(svc);
    for k in [SERVICE_NAME, MANAGED_BY, HEADLESS] {
        labels.remove(k);
    }
    for (k, v) in extra {
        labels.insert((*k).into(), json!(v));
    }
    if headless(svc) {
        labels.insert(HEADLESS.into(), json!(""));
    }
    labels
}

/// The trigger time of this sync: the Service's creation on its first, else the earliest
/// Ready transition newer than those seen before (none: the annotation goes).
fn trigger_time(
    triggers: &mut Triggers,
    key: &Key,
    svc: &Value,
    pods: &[&Value],
) -> Option<jiff::Timestamp> {
    let latest = pods
        .iter()
        .filter_map(|p| ready_transition(p).and_then(|(_, t)| t))
        .max();
    let first = !triggers.0.contains_key(key);
    let seen = triggers.0.insert(key.clone(), latest).flatten();
    if first {
        return meta_str(svc, "creationTimestamp").and_then(|t| t.parse().ok());
    }
    pods.iter()
        .filter_map(|p| ready_transition(p).and_then(|(_, t)| t))
        .filter(|t| seen.is_none_or(|s| *t > s))
        .min()
}

fn set_trigger(meta: &mut Value, t: Option<jiff::Timestamp>) {
    let annotations = meta
        .as_object_mut()
        .map(|m| m.entry("annotations").or_insert_with(|| json!({})));
    let Some(Value::Object(a)) = annotations else {
        return;
    };
    match t {
        Some(t) => {
            a.insert(
                TRIGGER.into(),
                json!(t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()),
            );
        }
        None => {
            a.remove(TRIGGER);
        }
    }
    if a.is_empty() {
        meta.as_object_mut().map(|m| m.remove("annotations"));
    }
}

/// The live slices of Service `name` that `manager` keeps.
fn managed_slices(srv: &ApiServer, ns: &str, name: &str, manager: &str) -> Vec<Arc<Value>> {
    srv.storage
        .list(SLICES, Some(ns))
        .0
        .into_iter()
        .filter(|s| {
            let l = labels_of(s);
            l.get(SERVICE_NAME) == Some(&json!(name))
                && l.get(MANAGED_BY) == Some(&json!(manager))
                && !super::workloads::deleting(s)
        })
        .collect()
}

/// Whether Endpoints are a leader-election record (left alone by the controllers).
fn leader_record(ep: &Value) -> bool {
    ep.pointer(&format!(
        "/metadata/annotations/{}",
        LEADER.replace('/', "~1")
    ))
    .is_some()
}

/// One sync of a Service's slices and Endpoints.
pub(super) fn sync_service(srv: &Arc<ApiServer>, triggers: &mut Triggers, ns: &str, name: &str) {
    let key = (ns.to_string(), name.to_string());
    let Some(svc) = srv.storage.get(SERVICES, ns, name) else {
        triggers.0.remove(&key);
        // The Service is gone: so are its Endpoints (not leader-election records).
        if let Some(ep) = srv.storage.get(ENDPOINTS, ns, name)
            && !leader_record(&ep)
            && let Some(def) = srv.def("", "v1", "endpoints")
        {
            let _ = delete_obj(srv, &def, ns, name, &DeleteOptions::default());
        }
        mirror(srv, ns, name, false);
        return;
    };
    mirror(srv, ns, name, selector(&svc).is_none());
    if svc.pointer("/spec/type").and_then(Value::as_str) == Some("ExternalName") {
        return;
    }
    let Some(sel) = selector(&svc) else {
        return;
    };
    let pods = srv.storage.list(PODS, Some(ns)).0;
    let mut selected: Vec<&Value> = pods
        .iter()
        .map(|p| &**p)
        .filter(|p| selects(sel, &labels_of(p)))
        .collect();
    selected.sort_by(|a, b| meta_str(a, "name").cmp(&meta_str(b, "name")));
    let trigger = trigger_time(triggers, &key, &svc, &selected);
    sync_slices(srv, &svc, &selected, trigger);
    sync_endpoints(srv, &svc, &selected, trigger);
}

/// One endpoint of a slice, and the identity upstream keeps it by.
fn endpoint_for(svc: &Value, pod: &Value, ips: Vec<String>, zone: Option<&str>) -> Value {
    let serving = pod_ready(pod);
    let terminating = super::workloads::deleting(pod);
    let publish = svc.pointer("/spec/publishNotReadyAddresses") == Some(&json!(true));
    let mut ep = json!({"addresses": ips,
        "conditions": {"ready": publish || (serving && !terminating), "serving": serving,
            "terminating": terminating}});
    if let Some(h) = hostname_for(svc, pod) {
        ep["hostname"] = json!(h);
    }
    if let Some(node) = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
    {
        ep["nodeName"] = json!(node);
    }
    ep["targetRef"] = target_ref(pod);
    if let Some(z) = zone.filter(|z| !z.is_empty()) {
        ep["zone"] = json!(z);
    }
    ep
}

fn identity(ep: &Value) -> (Value, Value, Value, Value) {
    (
        ep["addresses"].clone(),
        ep.get("hostname").cloned().unwrap_or(Value::Null),
        ep.pointer("/targetRef/namespace")
            .cloned()
            .unwrap_or(Value::Null),
        ep.pointer("/targetRef/name")
            .cloned()
            .unwrap_or(Value::Null),
    )
}

fn slice_ports(ports: &[Port]) -> Value {
    Value::Array(
        ports
            .iter()
            .map(|(name, port, protocol, app)| {
                let mut p = json!({"name": name, "port": port, "protocol": protocol});
                if let Some(a) = app {
                    p["appProtocol"] = json!(a);
                }
                p
            })
            .collect(),
    )
}

/// A list as a slice holds it: an empty one reads back as null.
fn list_or_null(v: Value) -> Value {
    match v {
        Value::Array(a) if a.is_empty() => Value::Null,
        v => v,
    }
}

fn sync_slices(
    srv: &Arc<ApiServer>,
    svc: &Value,
    pods: &[&Value],
    trigger: Option<jiff::Timestamp>,
) {
    let (ns, name) = key_of(svc);
    let uid = meta_str(svc, "uid").unwrap_or("");
    let families: Vec<String> = svc
        .pointer("/spec/ipFamilies")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(str::to_string))
                .collect()
        })
        .filter(|a: &Vec<String>| !a.is_empty())
        .unwrap_or_else(|| vec!["IPv4".into()]);
    let labels = derived_labels(svc, &[(SERVICE_NAME, &name), (MANAGED_BY, SLICE_MANAGER)]);
    let owner = json!([{"apiVersion": "v1", "kind": "Service", "name": name, "uid": uid,
        "controller": true, "blockOwnerDeletion": true}]);
    let existing = managed_slices(srv, &ns, &name, SLICE_MANAGER);
    let owned = |s: &Value| {
        s.pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .is_some_and(|o| o.iter().any(|r| r["kind"] == "Service" && r["uid"] == uid))
    };
    let mut skipped: Vec<String> = Vec::new();
    let publish = svc.pointer("/spec/publishNotReadyAddresses") == Some(&json!(true));
    let mut deletes: Vec<Arc<Value>> = existing
        .iter()
        .filter(|s| !owned(s) || !families.iter().any(|f| s["addressType"] == f.as_str()))
        .cloned()
        .collect();
    for family in &families {
        // The endpoints wanted, by their ports.
        let mut groups: BTreeMap<String, (Value, Vec<Value>)> = BTreeMap::new();
        for pod in pods.iter().filter(|p| eligible(p, true)) {
            let ports = if svc
                .pointer("/spec/ports")
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty)
                && headless(svc)
            {
                Vec::new()
            } else {
                ports_for(svc, pod)
            };
            let ports = slice_ports(&ports);
            let group = groups
                .entry(ports.to_string())
                .or_insert_with(|| (ports, Vec::new()));
            let node_name = pod
                .pointer("/spec/nodeName")
                .and_then(Value::as_str)
                .unwrap_or("");
            let node = srv.storage.get(NODES, "", node_name);
            if node.is_none() && !publish {
                skipped.push(format!(
                    "skipping Pod {} for Service {ns}/{name}: Node {node_name} Not Found",
                    meta_str(pod, "name").unwrap_or("")
                ));
                continue;
            }
            let ips = ips_of(pod, family);
            if ips.is_empty() {
                continue;
            }
            let zone = node
                .as_deref()
                .and_then(|n| n.pointer(&format!("/metadata/labels/{}", ZONE.replace('/', "~1"))))
                .and_then(Value::as_str);
            group.1.push(endpoint_for(svc, pod, ips, zone));
        }
        let mine: Vec<&Arc<Value>> = existing
            .iter()
            .filter(|s| owned(s) && s["addressType"] == family.as_str())
            .collect();
        let mut writes: Vec<Value> = Vec::new();
        let mut creates: Vec<Value> = Vec::new();
        let mut family_deletes: Vec<Arc<Value>> = Vec::new();
        for (ports, wanted) in groups.values() {
            let mut left: Vec<&Value> = wanted.iter().collect();
            for s in mine
                .iter()
                .filter(|s| list_or_null(s["ports"].clone()) == list_or_null(ports.clone()))
            {
                let mut kept: Vec<Value> = Vec::new();
                for ep in s["endpoints"].as_array().into_iter().flatten() {
                    if let Some(i) = left.iter().position(|w| identity(w) == identity(ep)) {
                        kept.push(left.remove(i).clone());
                    }
                }
                if kept.is_empty() {
                    family_deletes.push((*s).clone());
                    continue;
                }
                while kept.len() < MAX_PER_SLICE && !left.is_empty() {
                    kept.push(left.remove(0).clone());
                }
                let mut next = (***s).clone();
                next["endpoints"] = Value::Array(kept);
                next["metadata"]["labels"] = Value::Object(labels.clone());
                if next != ***s {
                    writes.push(next);
                }
            }
            for chunk in left.chunks(MAX_PER_SLICE) {
                creates.push(
                    json!({"addressType": family, "ports": list_or_null(ports.clone()),
                    "endpoints": chunk}),
                );
            }
        }
        // Slices of port sets no longer wanted.
        for s in &mine {
            let wanted = groups.values().any(|(p, w)| {
                !w.is_empty() && list_or_null(s["ports"].clone()) == list_or_null(p.clone())
            });
            if !wanted && !family_deletes.iter().any(|d| Arc::ptr_eq(d, s)) {
                family_deletes.push((*s).clone());
            }
        }
        // Nothing left: one placeholder (an existing one stays as it is).
        let remaining = mine.len() - family_deletes.len();
        if remaining == 0 && creates.is_empty() {
            let placeholder = |s: &Value| {
                s["endpoints"].as_array().is_none_or(Vec::is_empty)
                    && s["ports"].as_array().is_none_or(Vec::is_empty)
                    && labels_of(s) == labels
            };
            if family_deletes.len() == 1 && placeholder(&family_deletes[0]) {
                family_deletes.clear();
            } else {
                creates.push(json!({"addressType": family, "ports": null, "endpoints": null}));
            }
        }
        // A create and a delete make an update of the deleted slice.
        while !creates.is_empty() && !family_deletes.is_empty() {
            let old = family_deletes.remove(0);
            let new = creates.remove(0);
            let mut next = (*old).clone();
            next["ports"] = new["ports"].clone();
            next["endpoints"] = new["endpoints"].clone();
            next["metadata"]["labels"] = Value::Object(labels.clone());
            writes.push(next);
        }
        for mut next in writes {
            set_trigger(&mut next["metadata"], trigger);
            super::workloads::update(srv, "endpointslices", next, None);
        }
        if let Some(def) = srv.def("discovery.k8s.io", "v1", "endpointslices")
            && !super::workloads::deleting(svc)
        {
            for mut body in creates {
                body["apiVersion"] = json!("discovery.k8s.io/v1");
                body["kind"] = json!("EndpointSlice");
                let mut meta = json!({"generateName": format!("{name}-"), "namespace": ns,
                    "labels": labels, "ownerReferences": owner});
                set_trigger(&mut meta, trigger);
                body["metadata"] = meta;
                if let Err(e) = srv.create_object(&def, &ns, body, super::workloads::MANAGER, false)
                {
                    tracing::debug!(%ns, service = %name, "creating an EndpointSlice: {}", e.status.message);
                }
            }
        }
        deletes.extend(family_deletes);
    }
    if let Some(def) = srv.def("discovery.k8s.io", "v1", "endpointslices") {
        for s in deletes {
            let (ns, slice) = key_of(&s);
            let _ = delete_obj(srv, &def, &ns, &slice, &DeleteOptions::default());
        }
    }
    if !skipped.is_empty() {
        let why = if skipped.len() == 1 {
            skipped.remove(0)
        } else {
            format!("[{}]", skipped.join(", "))
        };
        event(
            srv,
            svc,
            "endpoint-slice-controller",
            true,
            "FailedToUpdateEndpointSlices",
            &format!("Error updating Endpoint Slices for Service {ns}/{name}: {why}"),
        );
    }
}

/// An address of an Endpoints subset.
fn address(svc: &Value, pod: &Value, ip: String) -> Value {
    let mut a = json!({"ip": ip});
    if let Some(h) = hostname_for(svc, pod) {
        a["hostname"] = json!(h);
    }
    a["nodeName"] = json!(
        pod.pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .unwrap_or("")
    );
    if a["nodeName"] == "" {
        a.as_object_mut().map(|m| m.remove("nodeName"));
    }
    a["targetRef"] = target_ref(pod);
    a
}

fn endpoint_port((name, port, protocol, app): &Port) -> Value {
    let mut p = json!({"port": port, "protocol": protocol});
    if !name.is_empty() {
        p["name"] = json!(name);
    }
    if let Some(a) = app {
        p["appProtocol"] = json!(a);
    }
    p
}

/// Addresses by (IP, pod uid), each with whether it is ready.
type AddressSet = BTreeMap<(String, String), (Value, bool)>;

/// `RepackSubsets`: ports that list the same addresses share a subset; addresses sorted
/// by IP, then pod uid.
fn repack(entries: Vec<(Option<Port>, Value, bool)>) -> Vec<Value> {
    // Port → address (by ip and uid) → ready (not ready wins).
    let mut by_port: Vec<(Option<Port>, AddressSet)> = Vec::new();
    for (port, addr, ready) in entries {
        let id = (
            addr["ip"].as_str().unwrap_or("").to_string(),
            addr.pointer("/targetRef/uid")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
        );
        let i = match by_port.iter().position(|(p, _)| *p == port) {
            Some(i) => i,
            None => {
                by_port.push((port, BTreeMap::new()));
                by_port.len() - 1
            }
        };
        let slot = by_port[i].1.entry(id).or_insert((addr, ready));
        slot.1 &= ready;
    }
    let mut subsets: Vec<(Vec<Option<Port>>, AddressSet)> = Vec::new();
    for (port, addrs) in by_port {
        let same = |s: &AddressSet| {
            s.len() == addrs.len()
                && s.iter()
                    .zip(&addrs)
                    .all(|((a, (_, r)), (b, (_, q)))| a == b && r == q)
        };
        match subsets.iter_mut().find(|(_, s)| same(s)) {
            Some((ports, _)) => ports.push(port),
            None => subsets.push((vec![port], addrs)),
        }
    }
    subsets
        .into_iter()
        .map(|(ports, addrs)| {
            let mut s = json!({});
            let (ready, not): (Vec<_>, Vec<_>) = addrs.into_values().partition(|(_, r)| *r);
            if !ready.is_empty() {
                s["addresses"] = Value::Array(ready.into_iter().map(|(a, _)| a).collect());
            }
            if !not.is_empty() {
                s["notReadyAddresses"] = Value::Array(not.into_iter().map(|(a, _)| a).collect());
            }
            let ports: Vec<Value> = ports.iter().flatten().map(endpoint_port).collect();
            if !ports.is_empty() {
                s["ports"] = Value::Array(ports);
            }
            s
        })
        .collect()
}

fn sync_endpoints(
    srv: &Arc<ApiServer>,
    svc: &Value,
    pods: &[&Value],
    trigger: Option<jiff::Timestamp>,
) {
    let (ns, name) = key_of(svc);
    let publish = svc.pointer("/spec/publishNotReadyAddresses") == Some(&json!(true));
    let family = svc
        .pointer("/spec/ipFamilies/0")
        .and_then(Value::as_str)
        .unwrap_or("IPv4");
    let no_ports = svc
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty);
    let mut entries: Vec<(Option<Port>, Value, bool)> = Vec::new();
    for pod in pods.iter().filter(|p| eligible(p, publish)) {
        let Some(ip) = ips_of(pod, family).into_iter().next() else {
            continue;
        };
        let ready = publish || pod_ready(pod);
        let addr = address(svc, pod, ip);
        if no_ports {
            if headless(svc) {
                entries.push((None, addr, ready));
            }
            continue;
        }
        for port in ports_for(svc, pod) {
            entries.push((Some(port), addr.clone(), ready));
        }
    }
    let subsets = repack(entries);
    let labels = derived_labels(svc, &[(ENDPOINTS_MANAGED_BY, "endpoint-controller")]);
    let current = srv.storage.get(ENDPOINTS, &ns, &name);
    if let Some(cur) = &current {
        let same_subsets =
            cur.get("subsets").cloned().unwrap_or(json!([])) == Value::Array(subsets.clone());
        if same_subsets && labels_of(cur) == labels {
            return;
        }
    }
    let mut next = match &current {
        Some(cur) => (**cur).clone(),
        None => json!({"apiVersion": "v1", "kind": "Endpoints",
            "metadata": {"name": name, "namespace": ns}}),
    };
    next["metadata"]["labels"] = Value::Object(labels);
    set_trigger(&mut next["metadata"], trigger);
    match next.as_object_mut() {
        Some(m) if subsets.is_empty() => {
            m.remove("subsets");
        }
        Some(m) => {
            m.insert("subsets".into(), Value::Array(subsets));
        }
        None => return,
    }
    let Some(def) = srv.def("", "v1", "endpoints") else {
        return;
    };
    let result = if current.is_some() {
        srv.update_object(
            &def,
            &ns,
            &name,
            None,
            next.clone(),
            &write_options(&ns),
            true,
        )
        .map(|_| ())
        .map_err(|e| {
            (
                "FailedToUpdateEndpoint",
                format!(
                    "Failed to update endpoint {ns}/{name}: {}",
                    e.status.message
                ),
            )
        })
    } else {
        srv.create_object(&def, &ns, next.clone(), super::workloads::MANAGER, false)
            .map(|_| ())
            .map_err(|e| {
                (
                    "FailedToCreateEndpoint",
                    format!(
                        "Failed to create endpoint for service {ns}/{name}: {}",
                        e.status.message
                    ),
                )
            })
    };
    if let Err((reason, msg)) = result
        && !srv
            .storage
            .get("/namespaces", "", &ns)
            .is_some_and(|n| super::workloads::deleting(&n))
    {
        event(srv, &next, "endpoint-controller", true, reason, &msg);
    }
}

/// The endpointslice-mirroring controller for the Endpoints `ns`/`name`: the Endpoints
/// of a Service without a selector (hand-made, pointing outside the cluster) are
/// mirrored into slices, one per port set and address type (ready and not-ready
/// addresses, at most 1000 a subset); otherwise its mirrored slices go.
fn mirror(srv: &Arc<ApiServer>, ns: &str, name: &str, selectorless: bool) {
    let ep = srv.storage.get(ENDPOINTS, ns, name).filter(|ep| {
        let labels = labels_of(ep);
        selectorless && labels.get(SKIP_MIRROR) != Some(&json!("true")) && !leader_record(ep)
    });
    let existing = managed_slices(srv, ns, name, MIRROR_MANAGER);
    let Some(def) = srv.def("discovery.k8s.io", "v1", "endpointslices") else {
        return;
    };
    let mut wanted: Vec<(String, Value, Vec<Value>)> = Vec::new();
    let mut invalid = 0usize;
    let mut skipped = 0usize;
    if let Some(ep) = &ep {
        let mut entries: Vec<(Option<Port>, Value, bool)> = Vec::new();
        for s in ep
            .get("subsets")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let ports: Vec<Option<Port>> = match s.get("ports").and_then(Value::as_array) {
                Some(ps) if !ps.is_empty() => ps
                    .iter()
                    .map(|p| {
                        Some((
                            p.get("name")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .to_string(),
                            p.get("port").and_then(Value::as_i64).unwrap_or(0),
                            p.get("protocol")
                                .and_then(Value::as_str)
                                .unwrap_or("TCP")
                                .to_string(),
                            p.get("appProtocol")
                                .and_then(Value::as_str)
                                .map(str::to_string),
                        ))
                    })
                    .collect(),
                _ => vec![None],
            };
            for (list, ready) in [("addresses", true), ("notReadyAddresses", false)] {
                for a in s.get(list).and_then(Value::as_array).into_iter().flatten() {
                    for p in &ports {
                        entries.push((p.clone(), a.clone(), ready));
                    }
                }
            }
        }
        for subset in repack(entries) {
            let ports: Vec<Value> = subset
                .get("ports")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|p| {
                    let mut q = json!({"name": p.get("name").and_then(Value::as_str).unwrap_or(""),
                        "port": p["port"], "protocol": p["protocol"]});
                    if let Some(a) = p.get("appProtocol") {
                        q["appProtocol"] = a.clone();
                    }
                    q
                })
                .collect();
            let addresses = subset
                .get("addresses")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|a| (a, true))
                .chain(
                    subset
                        .get("notReadyAddresses")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .map(|a| (a, false)),
                );
            let mut taken = 0usize;
            for (a, ready) in addresses {
                let Ok(ip) = a["ip"].as_str().unwrap_or("").parse::<std::net::IpAddr>() else {
                    invalid += 1;
                    continue;
                };
                if taken == MAX_MIRRORED {
                    skipped += 1;
                    continue;
                }
                taken += 1;
                let family = if ip.is_ipv4() { "IPv4" } else { "IPv6" };
                let mut e = json!({"addresses": [ip.to_string()], "conditions": {"ready": ready}});
                for k in ["hostname", "nodeName", "targetRef"] {
                    if let Some(v) = a.get(k).filter(|v| *v != "") {
                        e[k] = v.clone();
                    }
                }
                let ports = Value::Array(ports.clone());
                match wanted
                    .iter_mut()
                    .find(|(f, p, _)| f == family && *p == ports)
                {
                    Some((_, _, eps)) => eps.push(e),
                    None => wanted.push((family.to_string(), ports, vec![e])),
                }
            }
        }
    }
    let ep_meta = ep.as_deref().map(|ep| {
        let mut labels = labels_of(ep);
        labels.insert(SERVICE_NAME.into(), json!(name));
        labels.insert(MANAGED_BY.into(), json!(MIRROR_MANAGER));
        let mut annotations = ep
            .pointer("/metadata/annotations")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        annotations.remove(TRIGGER);
        annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
        (labels, annotations)
    });
    let mut unused: Vec<Arc<Value>> = existing;
    if let (Some(ep), Some((labels, annotations))) = (&ep, &ep_meta) {
        for (family, ports, endpoints) in wanted {
            let body_ports = list_or_null(ports.clone());
            let at = unused.iter().position(|s| {
                s["addressType"] == family.as_str()
                    && list_or_null(s["ports"].clone()) == body_ports
            });
            let mut next = match at {
                Some(i) => (*unused.remove(i)).clone(),
                None => json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                    "metadata": {"generateName": format!("{name}-"), "namespace": ns,
                        "ownerReferences": [{"apiVersion": "v1", "kind": "Endpoints", "name": name,
                            "uid": meta_str(ep, "uid").unwrap_or(""), "controller": true,
                            "blockOwnerDeletion": true}]},
                    "addressType": family}),
            };
            let before = next.clone();
            next["ports"] = body_ports;
            next["endpoints"] = Value::Array(endpoints);
            next["metadata"]["labels"] = Value::Object(labels.clone());
            if annotations.is_empty() {
                next["metadata"]
                    .as_object_mut()
                    .map(|m| m.remove("annotations"));
            } else {
                next["metadata"]["annotations"] = Value::Object(annotations.clone());
            }
            if at.is_none() {
                if let Err(e) = srv.create_object(&def, ns, next, super::workloads::MANAGER, false)
                {
                    tracing::debug!(%ns, endpoints = %name, "mirroring: {}", e.status.message);
                }
            } else if next != before {
                super::workloads::update(srv, "endpointslices", next, None);
            }
        }
        if invalid > 0 {
            event(
                srv,
                ep,
                "endpoint-slice-mirroring-controller",
                true,
                "InvalidIPAddress",
                &format!("Skipped {invalid} invalid IP addresses when mirroring to EndpointSlices"),
            );
        }
        if skipped > 0 {
            event(
                srv,
                ep,
                "endpoint-slice-mirroring-controller",
                true,
                "TooManyAddressesToMirror",
                &format!(
                    "A max of {MAX_MIRRORED} addresses can be mirrored to EndpointSlices per Endpoints subset. {skipped} addresses were skipped"
                ),
            );
        }
    }
    for s in unused {
        let (ns, slice) = key_of(&s);
        let _ = delete_obj(srv, &def, &ns, &slice, &DeleteOptions::default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(ip: &str, uid: &str) -> Value {
        json!({"ip": ip, "targetRef": {"kind": "Pod", "uid": uid}})
    }

    #[test]
    fn subsets_pack_ports_with_the_same_addresses() {
        let http: Port = ("http".into(), 8080, "TCP".into(), None);
        let metrics: Port = ("metrics".into(), 9100, "TCP".into(), None);
        let packed = repack(vec![
            (Some(http.clone()), addr("10.1.0.5", "a"), true),
            (Some(metrics.clone()), addr("10.1.0.5", "a"), true),
            (Some(http.clone()), addr("10.1.0.10", "b"), false),
            (Some(metrics.clone()), addr("10.1.0.10", "b"), false),
        ]);
        assert_eq!(
            packed,
            [
                json!({"addresses": [addr("10.1.0.5", "a")], "notReadyAddresses": [addr("10.1.0.10", "b")],
                "ports": [{"name": "http", "port": 8080, "protocol": "TCP"},
                    {"name": "metrics", "port": 9100, "protocol": "TCP"}]})
            ]
        );
        // Sorted by IP as text; a port whose addresses differ gets its own subset.
        let packed = repack(vec![
            (Some(http.clone()), addr("10.1.0.5", "a"), true),
            (Some(http.clone()), addr("10.1.0.10", "b"), true),
            (Some(metrics.clone()), addr("10.1.0.5", "a"), true),
        ]);
        assert_eq!(packed.len(), 2);
        assert_eq!(
            packed[0]["addresses"],
            json!([addr("10.1.0.10", "b"), addr("10.1.0.5", "a")])
        );
    }

    #[test]
    fn named_target_ports_resolve_through_the_pods_containers() {
        let pod = json!({"spec": {"containers": [{"ports": [{"name": "http", "containerPort": 8080},
                {"name": "dns", "containerPort": 53, "protocol": "UDP"}]}],
            "initContainers": [{"restartPolicy": "Always", "ports": [{"name": "side", "containerPort": 7000}]},
                {"ports": [{"name": "init", "containerPort": 7001}]}]}});
        let port = |target: Value, protocol: &str| {
            find_port(
                &pod,
                &json!({"port": 80, "targetPort": target, "protocol": protocol}),
            )
        };
        assert_eq!(port(json!("http"), "TCP"), Some(8080));
        assert_eq!(port(json!("dns"), "TCP"), None);
        assert_eq!(port(json!("dns"), "UDP"), Some(53));
        assert_eq!(port(json!("side"), "TCP"), Some(7000));
        assert_eq!(port(json!("init"), "TCP"), None);
        assert_eq!(port(json!(9000), "TCP"), Some(9000));
    }
}
