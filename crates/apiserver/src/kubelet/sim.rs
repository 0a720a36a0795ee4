//! The simulation: the fake Node, binding, pod status, graceful termination (containers
//! that run to completion: run.rs).

use super::{ContainerRef, Kubelet, LogBuf, PodRef};
use crate::http::api::ApiServer;
use crate::registry::ResourceDef;
use crate::registry::meta::{self, meta_mut, meta_str};
use crate::storage::Mutation;
use futures::StreamExt;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

const PODS: &str = "/pods";
const NODES: &str = "/nodes";

/// Runs the kubelet until cancelled: reacts to every pod or node change, and wakes for
/// the next end of a grace period.
pub(crate) async fn run(k: Kubelet, srv: Arc<ApiServer>, stop: CancellationToken) {
    let (_, mut rx, _) = srv.storage.snapshot_and_watch(PODS, None);
    loop {
        let next = reconcile(&k, &srv);
        let wait = next
            .unwrap_or(Duration::from_secs(1))
            .min(Duration::from_secs(1));
        tokio::select! {
            ev = rx.recv() => match ev {
                Ok(ev) if ev.resource != PODS && ev.resource != NODES => continue,
                Ok(_) => {}
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            },
            _ = tokio::time::sleep(wait) => {}
            _ = stop.cancelled() => break,
        }
    }
    // The server stops: followers of logs end.
    for buf in k
        .state
        .logs
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .values()
    {
        buf.close();
    }
}

fn now() -> jiff::Timestamp {
    jiff::Timestamp::now()
}

fn parse_time(s: &str) -> Option<jiff::Timestamp> {
    s.parse().ok()
}

fn fmt_time(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// One pass; returns how long until the next grace period ends, if any.
fn reconcile(k: &Kubelet, srv: &Arc<ApiServer>) -> Option<Duration> {
    ensure_node(k, srv);
    renew_lease(k, srv);
    let (pods, _) = srv.storage.list(PODS, None);
    let mut next: Option<Duration> = None;
    let mut live = std::collections::HashSet::new();
    let mut wrote = false;
    for pod in pods {
        let ns = meta_str(&pod, "namespace").unwrap_or("").to_string();
        let name = meta_str(&pod, "name").unwrap_or("").to_string();
        let uid = meta_str(&pod, "uid").unwrap_or("").to_string();
        let node = pod
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .unwrap_or("");
        let deleting = pod.pointer("/metadata/deletionTimestamp").is_some();
        if node.is_empty() && !deleting {
            wrote |= bind(k, srv, &ns, &name);
            continue;
        }
        if node != k.node {
            continue;
        }
        live.insert(uid.clone());
        if deleting {
            let at = meta_str(&pod, "deletionTimestamp")
                .and_then(parse_time)
                .unwrap_or_else(now);
            let left = at.duration_since(now());
            if left.is_positive() {
                let left = Duration::try_from(left).unwrap_or(Duration::ZERO);
                next = Some(next.map_or(left, |n| n.min(left)));
            } else {
                wrote |= terminate(srv, &ns, &name, &uid);
            }
            continue;
        }
        let phase = pod.pointer("/status/phase").and_then(Value::as_str);
        if !matches!(phase, Some("Running" | "Succeeded" | "Failed")) {
            wrote |= start(k, srv, &ns, &name);
        }
    }
    // Logs of pods that are gone end.
    {
        let mut logs = k.state.logs.lock().unwrap_or_else(|e| e.into_inner());
        logs.retain(|(uid, _), buf| {
            let keep = live.contains(uid);
            if !keep {
                buf.close();
            }
            keep
        });
    }
    if wrote {
        srv.kick.notify_one();
    }
    next
}

fn node_def(srv: &ApiServer) -> Option<Arc<ResourceDef>> {
    srv.def("", "v1", "nodes")
}

fn ensure_node(k: &Kubelet, srv: &Arc<ApiServer>) {
    let Some(def) = node_def(srv) else { return };
    if srv.storage.get(NODES, "", &k.node).is_none() {
        let obj = json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": k.node, "labels": {
                "kubernetes.io/hostname": k.node,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": "amd64",
            }},
            "spec": {"podCIDR": "10.244.0.0/24", "podCIDRs": ["10.244.0.0/24"]},
        });
        if let Err(e) = srv.create_object(&def, "", obj, "kubelet", false) {
            tracing::debug!("kubelet: creating node {}: {}", k.node, e.status.message);
            return;
        }
    }
    let _ = srv
        .storage
        .mutate::<crate::error::ApiError>(NODES, "", &k.node, |cur, _| {
            let Some(cur) = cur else {
                return Ok(Mutation::Keep);
            };
            if cur.pointer("/status/conditions").is_some() {
                return Ok(Mutation::Keep);
            }
            let mut next = (**cur).clone();
            let t = meta::now_time();
            let cond = |ty: &str, status: &str, reason: &str, msg: &str| {
                json!({"type": ty, "status": status, "lastHeartbeatTime": t,
                    "lastTransitionTime": t, "reason": reason, "message": msg})
            };
            next["status"] = json!({
                "capacity": {"cpu": "8", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"},
                "allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"},
                "conditions": [
                    cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                    cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                    cond("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                    cond("Ready", "True", "KubeletReady", "kubelet is posting ready status (simulated by kubewright)"),
                ],
                "addresses": [
                    {"type": "InternalIP", "address": "127.0.0.1"},
                    {"type": "Hostname", "address": k.node},
                ],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "nodeInfo": {
                    "machineID": "", "systemUUID": "", "bootID": "",
                    "kernelVersion": "", "osImage": "kubewright simulated node",
                    "containerRuntimeVersion": "kubewright://simulated",
                    "kubeletVersion": "v1.32.0-kubewright", "kubeProxyVersion": "",
                    "operatingSystem": "linux", "architecture": "amd64",
                },
            });
            Ok(Mutation::Put(next))
        });
}

/// How often a kubelet renews its node's Lease, and the duration the Lease states.
const LEASE_RENEW: jiff::SignedDuration = jiff::SignedDuration::from_secs(10);
const LEASE_DURATION: i64 = 40;

/// Keeps the node's Lease (`kube-node-lease/<node>`) renewed every 10 s, as a kubelet
/// does: the node lifecycle controller counts a node as alive while its Lease is renewed.
fn renew_lease(k: &Kubelet, srv: &Arc<ApiServer>) {
    const LEASES: &str = "coordination.k8s.io/leases";
    const NS: &str = "kube-node-lease";
    let t = now();
    let micro = t.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string();
    match srv.storage.get(LEASES, NS, &k.node) {
        None => {
            let Some(def) = srv.def("coordination.k8s.io", "v1", "leases") else {
                return;
            };
            let owner = srv.storage.get(NODES, "", &k.node);
            let mut lease = json!({
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": k.node, "namespace": NS},
                "spec": {"holderIdentity": k.node, "leaseDurationSeconds": LEASE_DURATION,
                    "renewTime": micro},
            });
            if let Some(node) = owner {
                lease["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1",
                    "kind": "Node", "name": k.node,
                    "uid": meta_str(&node, "uid").unwrap_or("")}]);
            }
            if let Err(e) = srv.create_object(&def, NS, lease, "kubelet", false) {
                tracing::debug!("kubelet: creating the node's lease: {}", e.status.message);
            }
        }
        Some(lease) => {
            let renewed = lease
                .pointer("/spec/renewTime")
                .and_then(Value::as_str)
                .and_then(parse_time);
            if renewed.is_some_and(|r| t.duration_since(r) < LEASE_RENEW) {
                return;
            }
            let _ = srv
                .storage
                .mutate::<crate::error::ApiError>(LEASES, NS, &k.node, |cur, _| {
                    let Some(cur) = cur else {
                        return Ok(Mutation::Keep);
                    };
                    let mut next = (**cur).clone();
                    next["spec"]["renewTime"] = json!(micro);
                    Ok(Mutation::Put(next))
                });
        }
    }
}

/// Binds an unscheduled pod to the node (what a scheduler would do).
fn bind(k: &Kubelet, srv: &ApiServer, ns: &str, name: &str) -> bool {
    let r = srv
        .storage
        .mutate::<crate::error::ApiError>(PODS, ns, name, |cur, _| {
            let Some(cur) = cur else {
                return Ok(Mutation::Keep);
            };
            let unbound = cur
                .pointer("/spec/nodeName")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty);
            if !unbound || cur.pointer("/metadata/deletionTimestamp").is_some() {
                return Ok(Mutation::Keep);
            }
            let mut next = (**cur).clone();
            next["spec"]["nodeName"] = json!(k.node);
            set_condition(&mut next, "PodScheduled", "True");
            if next.pointer("/status/phase").is_none() {
                next["status"]["phase"] = json!("Pending");
            }
            Ok(Mutation::Put(next))
        });
    matches!(r, Ok((_, Some(_))))
}

fn set_condition(pod: &mut Value, ty: &str, status: &str) {
    let t = meta::now_time();
    if !pod.get("status").is_some_and(Value::is_object) {
        pod["status"] = json!({});
    }
    let conds = pod["status"]
        .as_object_mut()
        .map(|s| s.entry("conditions").or_insert_with(|| json!([])));
    let Some(Value::Array(conds)) = conds else {
        return;
    };
    match conds
        .iter_mut()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(ty))
    {
        Some(c) if c.get("status").and_then(Value::as_str) == Some(status) => {}
        Some(c) => {
            c["status"] = json!(status);
            c["lastTransitionTime"] = json!(t);
        }
        None => conds.push(
            json!({"type": ty, "status": status, "lastProbeTime": null, "lastTransitionTime": t}),
        ),
    }
}

/// A stable hex digest of a string (for image ids).
fn digest(s: &str) -> String {
    let mut out = String::new();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for round in 0..4u64 {
        for b in s.bytes().chain(round.to_le_bytes()) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        out.push_str(&format!("{h:016x}"));
    }
    out
}

/// The image reference as container runtimes report it.
fn normalize_image(image: &str) -> String {
    let (repo, has_tag) = match image.rsplit_once('/') {
        Some((_, last)) => (image.to_string(), last.contains(':') || last.contains('@')),
        None => (
            format!("docker.io/library/{image}"),
            image.contains(':') || image.contains('@'),
        ),
    };
    let repo = if repo
        .split('/')
        .next()
        .is_some_and(|h| h.contains('.') || h.contains(':') || h == "localhost")
    {
        repo
    } else {
        format!("docker.io/{repo}")
    };
    if has_tag {
        repo
    } else {
        format!("{repo}:latest")
    }
}

fn container_status(c: &Value, started: &str, init: bool) -> Value {
    let name = c.get("name").and_then(Value::as_str).unwrap_or("");
    let image = normalize_image(c.get("image").and_then(Value::as_str).unwrap_or(""));
    let repo = image
        .rsplit_once(':')
        .filter(|(_, t)| !t.contains('/'))
        .map_or(image.as_str(), |(r, _)| r);
    let image_id = format!("{repo}@sha256:{}", digest(&image));
    let id = format!("containerd://{}", digest(&uuid::Uuid::new_v4().to_string()));
    if init {
        return json!({
            "name": name, "image": image, "imageID": image_id, "containerID": id,
            "ready": true, "restartCount": 0, "started": false,
            "state": {"terminated": {"exitCode": 0, "reason": "Completed",
                "startedAt": started, "finishedAt": started, "containerID": id}},
            "lastState": {},
        });
    }
    json!({
        "name": name, "image": image, "imageID": image_id, "containerID": id,
        "ready": true, "restartCount": 0, "started": true,
        "state": {"running": {"startedAt": started}},
        "lastState": {},
    })
}

/// Starts a bound pod's containers: Running and Ready, with container statuses.
fn start(k: &Kubelet, srv: &Arc<ApiServer>, ns: &str, name: &str) -> bool {
    let mut started: Option<Value> = None;
    let r = srv
        .storage
        .mutate::<crate::error::ApiError>(PODS, ns, name, |cur, _| {
            let Some(cur) = cur else {
                return Ok(Mutation::Keep);
            };
            if cur.pointer("/metadata/deletionTimestamp").is_some() {
                return Ok(Mutation::Keep);
            }
            let mut next = (**cur).clone();
            let t = meta::now_time();
            let n = k
                .state
                .next_ip
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let ip = format!("10.244.{}.{}", (n / 250) % 250, n % 250 + 2);
            let arr = |p: &str| -> Vec<Value> {
                cur.pointer(p)
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default()
            };
            let init: Vec<Value> = arr("/spec/initContainers")
                .iter()
                .map(|c| container_status(c, &t, true))
                .collect();
            let main: Vec<Value> = arr("/spec/containers")
                .iter()
                .map(|c| container_status(c, &t, false))
                .collect();
            if !next.get("status").is_some_and(Value::is_object) {
                next["status"] = json!({});
            }
            let s = &mut next["status"];
            s["phase"] = json!("Running");
            s["hostIP"] = json!("127.0.0.1");
            s["hostIPs"] = json!([{"ip": "127.0.0.1"}]);
            s["podIP"] = json!(ip);
            s["podIPs"] = json!([{"ip": ip}]);
            s["startTime"] = json!(t);
            s["containerStatuses"] = json!(main);
            if !init.is_empty() {
                s["initContainerStatuses"] = json!(init);
            }
            for c in [
                "PodReadyToStartContainers",
                "Initialized",
                "Ready",
                "ContainersReady",
                "PodScheduled",
            ] {
                set_condition(&mut next, c, "True");
            }
            started = Some(next.clone());
            Ok(Mutation::Put(next))
        });
    let wrote = matches!(r, Ok((_, Some(_))));
    if let (true, Some(pod)) = (wrote, started) {
        start_logs(k, &pod);
        super::run::start(k, srv, &pod);
    }
    wrote
}

/// Starts capturing each container's log from the log source.
fn start_logs(k: &Kubelet, pod: &Value) {
    let pod_ref = PodRef {
        namespace: meta_str(pod, "namespace").unwrap_or("").to_string(),
        name: meta_str(pod, "name").unwrap_or("").to_string(),
        uid: meta_str(pod, "uid").unwrap_or("").to_string(),
    };
    let containers = ["/spec/initContainers", "/spec/containers"]
        .iter()
        .filter_map(|p| pod.pointer(p).and_then(Value::as_array))
        .flatten();
    for c in containers {
        let cref = ContainerRef {
            pod: pod_ref.clone(),
            container: c
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            image: c
                .get("image")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
        };
        let buf = Arc::new(LogBuf::new());
        {
            let mut logs = k.state.logs.lock().unwrap_or_else(|e| e.into_inner());
            let key = (pod_ref.uid.clone(), cref.container.clone());
            if logs.contains_key(&key) {
                continue;
            }
            logs.insert(key, buf.clone());
        }
        // A container that runs its command logs that command's output.
        if super::run::runs_to_completion(pod, c) {
            continue;
        }
        let mut lines = k.logs.lines(&cref);
        let weak = Arc::downgrade(&buf);
        drop(buf);
        tokio::spawn(async move {
            while let Some(line) = lines.next().await {
                // The pod is gone: stop reading the source.
                let Some(buf) = weak.upgrade() else { return };
                if buf.is_closed() {
                    return;
                }
                // One logged line per line of text, as a runtime records output.
                for l in line.split('\n') {
                    buf.push(l.to_string());
                }
            }
        });
    }
}

/// The end of a grace period: the containers stop and the pod goes.
fn terminate(srv: &ApiServer, ns: &str, name: &str, uid: &str) -> bool {
    let r = srv
        .storage
        .mutate::<crate::error::ApiError>(PODS, ns, name, |cur, _| {
            let Some(cur) = cur else {
                return Ok(Mutation::Keep);
            };
            if meta_str(cur, "uid") != Some(uid) {
                return Ok(Mutation::Keep);
            }
            let fins = cur
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .is_some_and(|f| !f.is_empty());
            if !fins {
                return Ok(Mutation::Delete);
            }
            // Finalizers keep the object: the kubelet reports the containers stopped.
            if cur.pointer("/metadata/deletionGracePeriodSeconds") == Some(&json!(0)) {
                return Ok(Mutation::Keep);
            }
            let mut next = (**cur).clone();
            let t = meta::now_time();
            if let Some(cs) = next
                .pointer_mut("/status/containerStatuses")
                .and_then(Value::as_array_mut)
            {
                for c in cs {
                    let started = c
                        .pointer("/state/running/startedAt")
                        .cloned()
                        .unwrap_or(json!(t));
                    c["state"] = json!({"terminated": {"exitCode": 137, "reason": "Error",
                        "startedAt": started, "finishedAt": t}});
                    c["ready"] = json!(false);
                    c["started"] = json!(false);
                }
            }
            next["status"]["phase"] = json!("Failed");
            set_condition(&mut next, "Ready", "False");
            set_condition(&mut next, "ContainersReady", "False");
            meta_mut(&mut next).insert("deletionGracePeriodSeconds".into(), json!(0));
            Ok(Mutation::Put(next))
        });
    matches!(r, Ok((_, Some(_))))
}

/// The grace period of a pod deletion when it is graceful (kube-apiserver's pod
/// strategy, `CheckGracefulDelete`: a pod on a node that has not finished): `None` for
/// an immediate deletion. The pod stays, terminating, until its node's kubelet deletes
/// it: the simulated kubelet for its node; on other nodes, as on a real cluster whose
/// node has no kubelet, nobody does.
pub(crate) fn graceful_delete(
    _srv: &ApiServer,
    def: &ResourceDef,
    cur: &Value,
    requested: Option<i64>,
) -> Option<i64> {
    if !(def.group.is_empty() && def.plural == "pods") {
        return None;
    }
    if cur
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        return None;
    }
    if matches!(
        cur.pointer("/status/phase").and_then(Value::as_str),
        Some("Succeeded" | "Failed")
    ) {
        return None;
    }
    let grace = requested.unwrap_or_else(|| {
        cur.pointer("/spec/terminationGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(30)
    });
    // As kube-apiserver: a negative period means 1 second; zero deletes at once.
    let grace = if grace < 0 { 1 } else { grace };
    (grace > 0).then_some(grace)
}

/// Marks a pod for graceful deletion (or shortens a pending one).
pub(crate) fn mark_terminating(pod: &mut Value, grace: i64, finalizers: &[Value]) {
    // Rounded up to the second the timestamp keeps: never removed before its grace
    // period is over.
    let deadline = now()
        .checked_add(jiff::SignedDuration::from_secs(grace))
        .ok()
        .and_then(|t| {
            let ceil = t.as_second() + i64::from(t.subsec_nanosecond() > 0);
            jiff::Timestamp::from_second(ceil).ok()
        })
        .unwrap_or_else(now);
    let m = meta_mut(pod);
    if m.contains_key("deletionTimestamp") {
        let current = m
            .get("deletionGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(i64::MAX);
        if grace >= current {
            return;
        }
        let earlier = m
            .get("deletionTimestamp")
            .and_then(Value::as_str)
            .and_then(parse_time)
            .is_some_and(|t| t <= deadline);
        if !earlier {
            m.insert("deletionTimestamp".into(), json!(fmt_time(deadline)));
        }
        m.insert("deletionGracePeriodSeconds".into(), json!(grace));
        return;
    }
    if finalizers.is_empty() {
        m.remove("finalizers");
    } else {
        m.insert("finalizers".into(), Value::Array(finalizers.to_vec()));
    }
    m.insert("deletionTimestamp".into(), json!(fmt_time(deadline)));
    m.insert("deletionGracePeriodSeconds".into(), json!(grace));
    if let Some(g) = m
        .get("generation")
        .and_then(Value::as_i64)
        .filter(|g| *g > 0)
    {
        m.insert("generation".into(), json!(g + 1));
    }
}
