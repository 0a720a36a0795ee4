//! kube-controller-manager's replicaset and deployment controllers.
//!
//! A ReplicaSet keeps `spec.replicas` active pods: it creates pods from its template
//! (`<rs>-<random>`, owned by it), deletes the surplus (unscheduled, pending, not ready
//! and newest first, as upstream ranks them), adopts orphan pods its selector matches,
//! releases owned pods it no longer selects, and reports `replicas`,
//! `fullyLabeledReplicas`, `readyReplicas`, `availableReplicas` (ready for
//! `minReadySeconds`), `terminatingReplicas` and `observedGeneration`.
//!
//! A Deployment owns one ReplicaSet per pod template (`<deployment>-<hash>`, the template
//! labelled `pod-template-hash`), numbered by the `deployment.kubernetes.io/revision`
//! annotation. `RollingUpdate` scales the new one up within `maxSurge` and the old ones
//! down while `maxUnavailable` allows; `Recreate` scales the old ones to zero and waits
//! for their pods to go first. It reports the replica counts and the `Available` and
//! `Progressing` conditions (with the progress deadline), keeps `revisionHistoryLimit`
//! old ReplicaSets, and does nothing but report while paused.
//!
//! Both write events as upstream's controllers do (`SuccessfulCreate`,
//! `SuccessfulDelete`, `ScalingReplicaSet`). A pass looks only at the objects written
//! since the last one (from the storage's events) and those waiting for time to pass
//! (`minReadySeconds`, the progress deadline), and finds a ReplicaSet's pods through an
//! index kept from the same events, so its cost follows the writes, not what is stored.
//!
//! Not done: the template hash is this server's (FNV-1a over the template's JSON), not
//! upstream's hash of the Go struct, so names differ from a real cluster's; no rollback
//! through `rollbackTo`; pods are created without admission (as the other controllers'
//! writes here).

use crate::auth::rbac::UserInfo;
use crate::error::ApiError;
use crate::http::admission::{Admission, Attributes, Operation};
use crate::http::api::{ApiServer, WriteOptions};
use crate::http::delete::{DeleteOptions, delete_obj};
use crate::registry::meta::{labels, meta_str, now_time, string_map};
use crate::storage::{EventType, Mutation};
use kubewright_core::LabelSelector;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

const PODS: &str = "/pods";
const REPLICASETS: &str = "apps/replicasets";
const RCS: &str = "/replicationcontrollers";
const DEPLOYMENTS: &str = "apps/deployments";
pub(super) const MANAGER: &str = "kube-controller-manager";
const HASH_LABEL: &str = "pod-template-hash";
const REVISION: &str = "deployment.kubernetes.io/revision";
const DESIRED: &str = "deployment.kubernetes.io/desired-replicas";
const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";
/// Pods a ReplicaSet creates or deletes in one sync (upstream's `BurstReplicas`).
const BURST: usize = 500;

pub(super) type Key = (String, String);

/// What the controllers must look at, kept between passes.
#[derive(Default)]
pub(crate) struct Workloads {
    /// The revision this is current at (0: not built yet).
    rv: u64,
    replicasets: BTreeSet<Key>,
    deployments: BTreeSet<Key>,
    /// Pods by the ReplicaSet (namespace, name) their controller reference names.
    owned: HashMap<Key, BTreeSet<String>>,
    /// ReplicationControllers to look at, and pods by the one that controls them.
    rcs: BTreeSet<Key>,
    rc_owned: HashMap<Key, BTreeSet<String>>,
    /// Pods without a controller, by namespace (candidates for adoption).
    orphans: BTreeMap<String, BTreeSet<String>>,
    /// Namespaces where an orphan pod appeared: their ReplicaSets look for it.
    orphaned_in: BTreeSet<String>,
    /// Jobs to look at, and pods by the Job their controller reference names.
    jobs: BTreeSet<Key>,
    job_pods: HashMap<Key, BTreeSet<String>>,
    /// StatefulSets to look at, and pods by the StatefulSet that controls them.
    statefulsets: BTreeSet<Key>,
    set_pods: HashMap<Key, BTreeSet<String>>,
    /// DaemonSets to look at, and pods by the DaemonSet that controls them.
    daemonsets: BTreeSet<Key>,
    daemon_pods: HashMap<Key, BTreeSet<String>>,
    /// A Node changed: every DaemonSet looks again.
    nodes_changed: bool,
    /// CronJobs to look at, and when each must be looked at again.
    cronjobs: BTreeSet<Key>,
    cron_wake: HashMap<Key, jiff::Timestamp>,
    /// Services to look at; the labels of pods that changed, by namespace (the Services
    /// selecting them look again); every Service (a Node appeared, went or was
    /// relabelled).
    services: BTreeSet<Key>,
    pod_labels: BTreeMap<String, Vec<Map<String, Value>>>,
    all_services: bool,
    triggers: super::endpoints::Triggers,
}

pub(super) fn key_of(obj: &Value) -> Key {
    (
        meta_str(obj, "namespace").unwrap_or("").to_string(),
        meta_str(obj, "name").unwrap_or("").to_string(),
    )
}

/// The controller reference of `obj`, if any.
pub(super) fn controller_of(obj: &Value) -> Option<&Value> {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)?
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
}

/// The name of the controller of `obj` when it is a `kind` (a ReplicaSet or Deployment of
/// `apps`, a Job or CronJob of `batch`).
pub(super) fn controller_named<'a>(obj: &'a Value, kind: &str) -> Option<&'a str> {
    let r = controller_of(obj)?;
    let group = match kind {
        "Job" | "CronJob" => "batch/",
        // The core group: `v1` alone.
        "ReplicationController" => "",
        _ => "apps/",
    };
    (r.get("kind").and_then(Value::as_str) == Some(kind)
        && r.get("apiVersion")
            .and_then(Value::as_str)
            .is_some_and(|v| {
                if group.is_empty() {
                    v == "v1"
                } else {
                    v.starts_with(group)
                }
            }))
    .then(|| r.get("name").and_then(Value::as_str))
    .flatten()
}

impl Workloads {
    fn forget_pod(&mut self, pod: &Value) {
        let (ns, name) = key_of(pod);
        if let Some(rc) = controller_named(pod, "ReplicationController")
            && let Some(set) = self.rc_owned.get_mut(&(ns.clone(), rc.to_string()))
        {
            set.remove(&name);
        }
        if let Some(rs) = controller_named(pod, "ReplicaSet")
            && let Some(set) = self.owned.get_mut(&(ns.clone(), rs.to_string()))
        {
            set.remove(&name);
        }
        if let Some(job) = super::jobs::job_of(pod)
            && let Some(set) = self.job_pods.get_mut(&job)
        {
            set.remove(&name);
        }
        if let Some(sts) = controller_named(pod, "StatefulSet")
            && let Some(set) = self.set_pods.get_mut(&(ns.clone(), sts.to_string()))
        {
            set.remove(&name);
        }
        if let Some(ds) = controller_named(pod, "DaemonSet")
            && let Some(set) = self.daemon_pods.get_mut(&(ns.clone(), ds.to_string()))
        {
            set.remove(&name);
        }
        if let Some(set) = self.orphans.get_mut(&ns) {
            set.remove(&name);
        }
    }

    /// Marks the ReplicaSet, Job or StatefulSet that controls `pod` for the next pass.
    fn mark_controller(&mut self, pod: &Value) {
        let ns = meta_str(pod, "namespace").unwrap_or("");
        if let Some(rs) = controller_named(pod, "ReplicaSet") {
            self.replicasets.insert((ns.to_string(), rs.to_string()));
        }
        if let Some(rc) = controller_named(pod, "ReplicationController") {
            self.rcs.insert((ns.to_string(), rc.to_string()));
        }
        if let Some(job) = super::jobs::job_of(pod) {
            self.jobs.insert(job);
        }
        if let Some(sts) = controller_named(pod, "StatefulSet") {
            self.statefulsets.insert((ns.to_string(), sts.to_string()));
        }
        if let Some(ds) = controller_named(pod, "DaemonSet") {
            self.daemonsets.insert((ns.to_string(), ds.to_string()));
        }
    }

    fn note_pod(&mut self, pod: &Value) {
        let (ns, name) = key_of(pod);
        match controller_of(pod) {
            Some(_) => {
                if let Some(job) = super::jobs::job_of(pod) {
                    self.job_pods
                        .entry(job.clone())
                        .or_default()
                        .insert(name.clone());
                    self.jobs.insert(job);
                }
                if let Some(sts) = controller_named(pod, "StatefulSet") {
                    let sts = (ns.clone(), sts.to_string());
                    self.set_pods
                        .entry(sts.clone())
                        .or_default()
                        .insert(name.clone());
                    self.statefulsets.insert(sts);
                }
                if let Some(ds) = controller_named(pod, "DaemonSet") {
                    let ds = (ns.clone(), ds.to_string());
                    self.daemon_pods
                        .entry(ds.clone())
                        .or_default()
                        .insert(name.clone());
                    self.daemonsets.insert(ds);
                }
                if let Some(rc) = controller_named(pod, "ReplicationController") {
                    let rc = (ns.clone(), rc.to_string());
                    self.rc_owned
                        .entry(rc.clone())
                        .or_default()
                        .insert(name.clone());
                    self.rcs.insert(rc);
                }
                if let Some(rs) = controller_named(pod, "ReplicaSet") {
                    let rs = (ns, rs.to_string());
                    self.owned.entry(rs.clone()).or_default().insert(name);
                    self.replicasets.insert(rs);
                }
            }
            None if pod.pointer("/metadata/deletionTimestamp").is_none() => {
                self.orphans.entry(ns.clone()).or_default().insert(name);
                self.orphaned_in.insert(ns);
            }
            None => {}
        }
    }

    fn note_replicaset(&mut self, rs: &Value) {
        let key = key_of(rs);
        if let Some(d) = controller_named(rs, "Deployment") {
            self.deployments.insert((key.0.clone(), d.to_string()));
        }
        self.replicasets.insert(key);
    }

    /// Brings the sets up to the storage's current revision.
    fn refresh(&mut self, srv: &ApiServer) {
        if self.rv != 0
            && let Ok((events, rv)) = srv.storage.events_after(self.rv)
        {
            for e in &events {
                match e.resource.as_str() {
                    PODS => {
                        for p in [Some(&e.object), e.prev.as_ref()].into_iter().flatten() {
                            if let Some(l) =
                                p.pointer("/metadata/labels").and_then(Value::as_object)
                            {
                                self.pod_labels
                                    .entry(e.namespace.clone())
                                    .or_default()
                                    .push(l.clone());
                            }
                        }
                        if let Some(prev) = &e.prev {
                            self.forget_pod(prev);
                        }
                        if e.kind == EventType::Deleted {
                            self.forget_pod(&e.object);
                            // Its controller counts it no more.
                            self.mark_controller(&e.object);
                        } else {
                            self.note_pod(&e.object);
                        }
                        if let Some(prev) = &e.prev {
                            self.mark_controller(prev);
                        }
                    }
                    REPLICASETS => {
                        if let Some(prev) = &e.prev
                            && let Some(d) = controller_named(prev, "Deployment")
                        {
                            self.deployments
                                .insert((e.namespace.clone(), d.to_string()));
                        }
                        self.note_replicaset(&e.object);
                    }
                    DEPLOYMENTS => {
                        self.deployments.insert(key_of(&e.object));
                    }
                    RCS => {
                        self.rcs.insert(key_of(&e.object));
                    }
                    super::jobs::JOBS => {
                        self.jobs.insert(key_of(&e.object));
                        for j in [Some(&e.object), e.prev.as_ref()].into_iter().flatten() {
                            if let Some(cj) = super::cronjobs::cronjob_of(j) {
                                self.cronjobs.insert(cj);
                            }
                        }
                    }
                    super::cronjobs::CRONJOBS => {
                        self.cronjobs.insert(key_of(&e.object));
                    }
                    super::statefulsets::STATEFULSETS => {
                        self.statefulsets.insert(key_of(&e.object));
                    }
                    super::daemonsets::DAEMONSETS => {
                        self.daemonsets.insert(key_of(&e.object));
                    }
                    super::daemonsets::NODES => {
                        self.nodes_changed = true;
                        let labels = |o: &Value| o.pointer("/metadata/labels").cloned();
                        if e.kind != EventType::Modified
                            || e.prev.as_deref().map(labels) != Some(labels(&e.object))
                        {
                            self.all_services = true;
                        }
                    }
                    super::endpoints::SERVICES => {
                        self.services.insert(key_of(&e.object));
                    }
                    // As upstream's endpoints controller: Endpoints that go make their
                    // Service look again; Endpoints written without a Service are not its
                    // business (it would delete them), with one only for mirroring.
                    "/endpoints" => {
                        let key = key_of(&e.object);
                        if e.kind == EventType::Deleted
                            || srv
                                .storage
                                .get(super::endpoints::SERVICES, &key.0, &key.1)
                                .is_some()
                        {
                            self.services.insert(key);
                        }
                    }
                    "discovery.k8s.io/endpointslices" => {
                        if let Some(svc) = e
                            .object
                            .pointer("/metadata/labels/kubernetes.io~1service-name")
                            .and_then(Value::as_str)
                        {
                            self.services.insert((e.namespace.clone(), svc.to_string()));
                        }
                    }
                    _ => {}
                }
            }
            self.rv = rv.max(1);
            return;
        }
        let triggers = std::mem::take(&mut self.triggers);
        *self = Workloads {
            triggers,
            all_services: true,
            ..Workloads::default()
        };
        let (pods, rv) = srv.storage.list(PODS, None);
        for pod in &pods {
            self.note_pod(pod);
        }
        for rs in srv.storage.list(REPLICASETS, None).0 {
            self.note_replicaset(&rs);
        }
        for rc in srv.storage.list(RCS, None).0 {
            self.rcs.insert(key_of(&rc));
        }
        for d in srv.storage.list(DEPLOYMENTS, None).0 {
            self.deployments.insert(key_of(&d));
        }
        for j in srv.storage.list(super::jobs::JOBS, None).0 {
            self.jobs.insert(key_of(&j));
        }
        for s in srv.storage.list(super::statefulsets::STATEFULSETS, None).0 {
            self.statefulsets.insert(key_of(&s));
        }
        for c in srv.storage.list(super::cronjobs::CRONJOBS, None).0 {
            self.cronjobs.insert(key_of(&c));
        }
        self.nodes_changed = true;
        self.rv = rv.max(1);
    }
}

/// One pass: the ReplicaSets and Deployments written since the last pass (or whose pods
/// or ReplicaSets were), and those waiting for time to pass. Asynchronous: pods are
/// created through admission, as kube-controller-manager's go through kube-apiserver's.
pub(crate) async fn reconcile(srv: &Arc<ApiServer>) {
    let crons: BTreeSet<Key>;
    let rcs: BTreeSet<Key>;
    let endpoints: (BTreeSet<Key>, super::endpoints::Triggers);
    let (deployments, replicasets, jobs) = {
        let mut w = srv.workloads.lock().unwrap_or_else(|e| e.into_inner());
        w.refresh(srv);
        for ns in std::mem::take(&mut w.orphaned_in) {
            for rs in srv.storage.list(REPLICASETS, Some(&ns)).0 {
                w.replicasets.insert(key_of(&rs));
            }
            for rc in srv.storage.list(RCS, Some(&ns)).0 {
                w.rcs.insert(key_of(&rc));
            }
        }
        let with_pods = |keys: BTreeSet<Key>, index: &HashMap<Key, BTreeSet<String>>| {
            keys.into_iter()
                .map(|k| {
                    let pods: Vec<String> = index
                        .get(&k)
                        .map(|s| s.iter().cloned().collect())
                        .unwrap_or_default();
                    (k, pods)
                })
                .collect::<Vec<(Key, Vec<String>)>>()
        };
        let jobs = with_pods(std::mem::take(&mut w.jobs), &w.job_pods);
        let sets = with_pods(std::mem::take(&mut w.statefulsets), &w.set_pods);
        if std::mem::take(&mut w.nodes_changed) {
            for d in srv.storage.list(super::daemonsets::DAEMONSETS, None).0 {
                w.daemonsets.insert(key_of(&d));
            }
        }
        let daemons = with_pods(std::mem::take(&mut w.daemonsets), &w.daemon_pods);
        // CronJobs whose time came.
        let mut due = std::mem::take(&mut w.cronjobs);
        due.extend(take_due(&mut w.cron_wake, now()));
        crons = due;
        rcs = std::mem::take(&mut w.rcs);
        // Services: those written, those selecting a pod that changed, or all.
        let mut services = std::mem::take(&mut w.services);
        let everywhere = std::mem::take(&mut w.all_services);
        let by_ns = std::mem::take(&mut w.pod_labels);
        let listed = |ns: Option<&str>| srv.storage.list(super::endpoints::SERVICES, ns).0;
        if everywhere {
            services.extend(listed(None).iter().map(|s| key_of(s)));
        } else {
            for (ns, labels) in by_ns {
                for svc in listed(Some(&ns)) {
                    if let Some(sel) = super::endpoints::selector(&svc)
                        && labels.iter().any(|l| super::endpoints::selects(sel, l))
                    {
                        services.insert(key_of(&svc));
                    }
                }
            }
        }
        endpoints = (services, std::mem::take(&mut w.triggers));
        (
            std::mem::take(&mut w.deployments),
            std::mem::take(&mut w.replicasets),
            (jobs, sets, daemons),
        )
    };
    // The writes happen outside the lock.
    let (services, mut triggers) = endpoints;
    for (ns, name) in &services {
        super::endpoints::sync_service(srv, &mut triggers, ns, name);
    }
    srv.workloads
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .triggers = triggers;
    let (jobs, sets, daemons) = jobs;
    let mut again_ds: Vec<Key> = Vec::new();
    for ((ns, name), pods) in daemons {
        if super::daemonsets::sync_daemonset(srv, &ns, &name, pods).await {
            again_ds.push((ns, name));
        }
    }
    let mut again_s: Vec<Key> = Vec::new();
    for ((ns, name), pods) in sets {
        if super::statefulsets::sync_statefulset(srv, &ns, &name, pods).await {
            again_s.push((ns, name));
        }
    }
    let mut again_j: Vec<Key> = Vec::new();
    for ((ns, name), pods) in jobs {
        if super::jobs::sync_job(srv, &ns, &name, pods).await {
            again_j.push((ns, name));
        }
    }
    let mut wakes: Vec<(Key, jiff::Timestamp)> = Vec::new();
    for (ns, name) in crons {
        if let Some(t) = super::cronjobs::sync_cronjob(srv, &ns, &name).await {
            wakes.push(((ns, name), t));
        }
    }
    if !wakes.is_empty() {
        let mut w = srv.workloads.lock().unwrap_or_else(|e| e.into_inner());
        w.cron_wake.extend(wakes);
    }
    let mut again: Vec<Key> = Vec::new();
    for (ns, name) in &replicasets {
        if sync_replicaset(srv, &REPLICA_SET, ns, name).await {
            again.push((ns.clone(), name.clone()));
        }
    }
    let mut again_rc: Vec<Key> = Vec::new();
    for (ns, name) in &rcs {
        if sync_replicaset(srv, &REPLICATION_CONTROLLER, ns, name).await {
            again_rc.push((ns.clone(), name.clone()));
        }
    }
    let mut again_d: Vec<Key> = Vec::new();
    for (ns, name) in &deployments {
        if sync_deployment(srv, ns, name) {
            again_d.push((ns.clone(), name.clone()));
        }
    }
    if !again.is_empty()
        || !again_rc.is_empty()
        || !again_d.is_empty()
        || !again_j.is_empty()
        || !again_s.is_empty()
        || !again_ds.is_empty()
    {
        let mut w = srv.workloads.lock().unwrap_or_else(|e| e.into_inner());
        w.replicasets.extend(again);
        w.rcs.extend(again_rc);
        w.deployments.extend(again_d);
        w.jobs.extend(again_j);
        w.statefulsets.extend(again_s);
        w.daemonsets.extend(again_ds);
    }
}

// ---------------------------------------------------------------------------------------
// Shared helpers

/// Removes from `wake` the keys whose time is at or before `at`, and returns them.
fn take_due<K: Clone + Eq + std::hash::Hash>(
    wake: &mut HashMap<K, jiff::Timestamp>,
    at: jiff::Timestamp,
) -> Vec<K> {
    let keys: Vec<K> = wake
        .iter()
        .filter(|(_, t)| **t <= at)
        .map(|(k, _)| k.clone())
        .collect();
    for k in &keys {
        wake.remove(k);
    }
    keys
}

pub(super) fn now() -> jiff::Timestamp {
    jiff::Timestamp::now()
}

pub(super) fn int(obj: &Value, ptr: &str) -> Option<i64> {
    obj.pointer(ptr).and_then(Value::as_i64)
}

/// `spec.selector` of a workload; `None` (matches nothing) when missing, empty or invalid.
pub(super) fn selector_of(obj: &Value) -> Option<LabelSelector> {
    let sel = obj.pointer("/spec/selector")?;
    let empty = sel
        .get("matchLabels")
        .and_then(Value::as_object)
        .is_none_or(Map::is_empty)
        && sel
            .get("matchExpressions")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty);
    if empty {
        return None;
    }
    let sel: k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector =
        serde_json::from_value(sel.clone()).ok()?;
    LabelSelector::from_k8s(&sel).ok()
}

/// The stored object `key`/`ns`/`name` (a copy), unless it is gone or being deleted.
pub(super) fn live_object(srv: &ApiServer, key: &str, ns: &str, name: &str) -> Option<Value> {
    srv.storage
        .get(key, ns, name)
        .filter(|o| !deleting(o))
        .map(|o| (*o).clone())
}

pub(super) fn deleting(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp").is_some()
}

pub(super) fn terminal(pod: &Value) -> bool {
    matches!(
        pod.pointer("/status/phase").and_then(Value::as_str),
        Some("Succeeded" | "Failed")
    )
}

/// When the pod became ready, if it is.
pub(super) fn ready_since(pod: &Value) -> Option<Option<jiff::Timestamp>> {
    let c = pod
        .pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))?;
    (c.get("status").and_then(Value::as_str) == Some("True")).then(|| {
        c.get("lastTransitionTime")
            .and_then(Value::as_str)
            .and_then(|t| t.parse().ok())
    })
}

/// Whether a pod is available: ready for `min_ready` seconds; and whether it is ready
/// but not available yet (someone must look again later).
pub(super) fn availability(pod: &Value, min_ready: i64, at: jiff::Timestamp) -> (bool, bool) {
    match ready_since(pod) {
        None => (false, false),
        Some(_) if min_ready <= 0 => (true, false),
        Some(None) => (false, true),
        Some(Some(t)) => {
            let ok = t
                .checked_add(jiff::SignedDuration::from_secs(min_ready))
                .is_ok_and(|end| end <= at);
            (ok, !ok)
        }
    }
}

pub(super) fn write_options(ns: &str) -> WriteOptions {
    WriteOptions {
        dry_run: false,
        field_manager: MANAGER.to_string(),
        validation: "Ignore".to_string(),
        warnings: Vec::new(),
        apply: None,
        user: UserInfo {
            name: "system:kube-controller-manager".to_string(),
            groups: vec!["system:authenticated".to_string()],
            ..Default::default()
        },
        namespace: ns.to_string(),
    }
}

/// Writes `next` (a changed copy of the stored object, its resourceVersion kept, so a
/// concurrent change makes it fail and the next pass retry) through the update path.
pub(super) fn update(
    srv: &ApiServer,
    plural: &str,
    next: Value,
    sub: Option<&str>,
) -> Option<Value> {
    let group = match plural {
        "pods" => "",
        "jobs" | "cronjobs" => "batch",
        "endpoints" | "replicationcontrollers" | "nodes" => "",
        "endpointslices" => "discovery.k8s.io",
        _ => "apps",
    };
    let def = srv.def(group, "v1", plural)?;
    let (ns, name) = key_of(&next);
    match srv.update_object(&def, &ns, &name, sub, next, &write_options(&ns), false) {
        Ok((_, stored)) => Some(stored),
        Err(e) => {
            tracing::debug!(%ns, %name, "{plural} controller write: {}", e.status.message);
            None
        }
    }
}

/// Records a core/v1 Event about `obj` as kube-controller-manager's recorders do
/// (`warning`: type Warning, else Normal). A repeat of a recent event (same object,
/// component, type, reason and message: client-go's event cache) counts on the stored
/// one: `count` + 1 and a new `lastTimestamp`.
pub(super) fn event(
    srv: &ApiServer,
    obj: &Value,
    component: &str,
    warning: bool,
    reason: &str,
    msg: &str,
) {
    /// Events remembered for repeats (client-go keeps 4096 in an LRU cache).
    const REMEMBERED: usize = 4096;
    let Some(def) = srv.def("", "v1", "events") else {
        return;
    };
    let (ns, name) = key_of(obj);
    // A cluster-scoped object's events go to namespace `default` (client-go's recorder).
    let ev_ns = if ns.is_empty() {
        "default"
    } else {
        ns.as_str()
    }
    .to_string();
    let kind = if warning { "Warning" } else { "Normal" };
    let uid = meta_str(obj, "uid").unwrap_or("");
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let object_kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    let same = [
        component,
        object_kind,
        &ns,
        &name,
        uid,
        api_version,
        kind,
        reason,
        msg,
    ]
    .join("\u{0}");
    let t = now_time();
    let seen = srv
        .recent_events
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&same)
        .cloned();
    if let Some((ev_ns, ev_name)) = seen {
        let counted =
            srv.storage
                .mutate::<ApiError>(&def.storage_key(), &ev_ns, &ev_name, |cur, _| {
                    let Some(cur) = cur else {
                        return Ok(Mutation::Keep);
                    };
                    let mut next = (**cur).clone();
                    next["count"] = json!(cur["count"].as_i64().unwrap_or(1) + 1);
                    next["lastTimestamp"] = json!(t);
                    Ok(Mutation::Put(next))
                });
        if matches!(counted, Ok((Some(_), _))) {
            return;
        }
    }
    let ev_name = format!("{name}.{:x}", now().as_nanosecond());
    let mut ev = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": ev_name, "namespace": ev_ns},
        "involvedObject": {"apiVersion": api_version, "kind": object_kind, "name": name,
            "namespace": ns, "uid": uid,
            "resourceVersion": meta_str(obj, "resourceVersion").unwrap_or("")},
        "reason": reason, "message": msg, "type": kind,
        "source": {"component": component},
        "reportingComponent": component, "reportingInstance": "",
        "firstTimestamp": t, "lastTimestamp": t, "count": 1, "eventTime": null,
    });
    // Empty fields of the reference are left out, as Go's `omitempty` leaves them.
    if let Some(o) = ev["involvedObject"].as_object_mut() {
        o.retain(|_, v| v.as_str() != Some(""));
    }
    if srv.create_object(&def, &ev_ns, ev, MANAGER, false).is_ok() {
        let mut recent = srv.recent_events.lock().unwrap_or_else(|e| e.into_inner());
        if recent.len() >= REMEMBERED {
            recent.clear();
        }
        recent.insert(same, (ev_ns, ev_name));
    }
}

/// Deletes `pod` for its controller `owner` (as `component`) and records the
/// `SuccessfulDelete` event; `message` words it from the pod's name (each controller
/// words it its own way upstream). Whether the pod was deleted.
pub(super) fn delete_pod(
    srv: &Arc<ApiServer>,
    owner: &Value,
    component: &str,
    pod: &Value,
    message: impl Fn(&str) -> String,
) -> bool {
    let Some(def) = srv.def("", "v1", "pods") else {
        return false;
    };
    let (ns, name) = key_of(pod);
    let ok = delete_obj(srv, &def, &ns, &name, &DeleteOptions::default()).is_ok();
    if ok {
        event(
            srv,
            owner,
            component,
            false,
            "SuccessfulDelete",
            &message(&name),
        );
    }
    ok
}

/// Writes `status` as the status of `obj` (a stored object of `plural`) through the
/// status subresource, unless it is already that. The object as stored after the write.
pub(super) fn write_status(
    srv: &ApiServer,
    plural: &str,
    obj: &Value,
    status: Map<String, Value>,
) -> Option<Value> {
    let mut next = obj.clone();
    next["status"] = Value::Object(status);
    if next == *obj {
        return None;
    }
    update(srv, plural, next, Some("status"))
}

/// Creates a pod as kube-controller-manager does, through the API's create path: the
/// built-in admission plugins (ServiceAccount, LimitRanger, Priority, PodSecurity),
/// admission policies and webhooks apply.
pub(super) async fn create_pod(
    srv: &Arc<ApiServer>,
    ns: &str,
    pod: Value,
) -> Result<Value, ApiError> {
    create_admitted(srv, "", "pods", ns, pod).await
}

/// Creates `obj` (a `group`/v1 `plural`) through the API's create path, admission
/// included.
pub(super) async fn create_admitted(
    srv: &Arc<ApiServer>,
    group: &str,
    plural: &str,
    ns: &str,
    obj: Value,
) -> Result<Value, ApiError> {
    let def = srv
        .def(group, "v1", plural)
        .ok_or_else(|| ApiError::internal(format!("{plural} are not served")))?;
    let mut wo = write_options(ns);
    let obj = srv.normalize(&def, obj, &mut wo)?;
    let mut adm = Admission::new(
        Attributes::new(Operation::Create, &def, None, ns, "", &wo.user, false)
            .with_options("CreateOptions", json!({})),
    );
    let obj = srv
        .admit_mutation(&def, obj, None, &mut adm, &mut wo)
        .await?;
    srv.create_object_admitted(&def, ns, obj, MANAGER, false, "Update", Some(&mut adm))
        .await
}

pub(super) fn owner_ref(owner: &Value, kind: &str) -> Value {
    let api_version = owner
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("apps/v1");
    json!({"apiVersion": api_version, "kind": kind,
        "name": meta_str(owner, "name").unwrap_or(""),
        "uid": meta_str(owner, "uid").unwrap_or(""),
        "controller": true, "blockOwnerDeletion": true})
}

// ---------------------------------------------------------------------------------------
// ReplicaSets

/// Upstream's order of pods to delete first: unscheduled, then pending/unknown, then
/// not ready, then the most recently ready, the most restarted, the newest.
fn deletion_rank(
    pod: &Value,
) -> (
    u8,
    u8,
    u8,
    std::cmp::Reverse<String>,
    i64,
    std::cmp::Reverse<String>,
) {
    let scheduled = u8::from(pod.pointer("/spec/nodeName").is_some_and(|n| n != ""));
    let phase = match pod.pointer("/status/phase").and_then(Value::as_str) {
        Some("Pending") => 0,
        Some("Running") => 2,
        _ => 1,
    };
    let ready = ready_since(pod);
    let since = ready.flatten().map(|t| t.to_string()).unwrap_or_default();
    let restarts: i64 = pod
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .filter_map(|c| c.get("restartCount").and_then(Value::as_i64))
                .sum()
        })
        .unwrap_or(0);
    let created = meta_str(pod, "creationTimestamp").unwrap_or("").to_string();
    (
        scheduled,
        phase,
        u8::from(ready.is_some()),
        std::cmp::Reverse(since),
        -restarts,
        std::cmp::Reverse(created),
    )
}

/// One ReplicaSet; whether it must be looked at again later (pods becoming available).
/// A ReplicaSet or a ReplicationController: the replicaset controller runs both (as
/// upstream's replication manager runs its code for the older kind).
struct SetKind {
    key: &'static str,
    plural: &'static str,
    kind: &'static str,
    component: &'static str,
    /// ReplicationControllers' status has no `terminatingReplicas`.
    terminating: bool,
}

const REPLICA_SET: SetKind = SetKind {
    key: REPLICASETS,
    plural: "replicasets",
    kind: "ReplicaSet",
    component: "replicaset-controller",
    terminating: true,
};

const REPLICATION_CONTROLLER: SetKind = SetKind {
    key: RCS,
    plural: "replicationcontrollers",
    kind: "ReplicationController",
    component: "replication-controller",
    terminating: false,
};

async fn sync_replicaset(srv: &Arc<ApiServer>, sk: &SetKind, ns: &str, name: &str) -> bool {
    let Some(rs) = srv.storage.get(sk.key, ns, name) else {
        return false;
    };
    let uid = meta_str(&rs, "uid").unwrap_or("").to_string();
    let selector = if sk.terminating {
        selector_of(&rs)
    } else {
        // A ReplicationController's selector is a map of labels.
        rs.pointer("/spec/selector")
            .and_then(Value::as_object)
            .filter(|m| !m.is_empty())
            .and_then(|m| {
                let sel = k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
                    match_labels: Some(
                        m.iter()
                            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                            .collect(),
                    ),
                    ..Default::default()
                };
                LabelSelector::from_k8s(&sel).ok()
            })
    };
    // The pods it controls: those its index names, then orphans it selects (adopted).
    let names: Vec<String> = {
        let w = srv.workloads.lock().unwrap_or_else(|e| e.into_inner());
        let index = if sk.terminating {
            &w.owned
        } else {
            &w.rc_owned
        };
        index
            .get(&(ns.to_string(), name.to_string()))
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    };
    let mut pods: Vec<Arc<Value>> = Vec::new();
    for pod_name in names {
        let Some(pod) = srv.storage.get(PODS, ns, &pod_name) else {
            continue;
        };
        let ours = controller_of(&pod)
            .and_then(|r| r.get("uid"))
            .and_then(Value::as_str)
            == Some(uid.as_str());
        if !ours {
            continue;
        }
        let selected = selector.as_ref().is_some_and(|s| s.matches(&labels(&pod)));
        if selected || deleting(&rs) {
            pods.push(pod);
        } else if !deleting(&pod) {
            // No longer selected: released.
            let mut next = (*pod).clone();
            if let Some(refs) = next
                .pointer_mut("/metadata/ownerReferences")
                .and_then(Value::as_array_mut)
            {
                refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(uid.as_str()));
            }
            update(srv, "pods", next, None);
        }
    }
    if !deleting(&rs)
        && let Some(sel) = &selector
    {
        let orphans: Vec<String> = {
            let w = srv.workloads.lock().unwrap_or_else(|e| e.into_inner());
            w.orphans
                .get(ns)
                .map(|s| s.iter().cloned().collect())
                .unwrap_or_default()
        };
        for pod_name in orphans {
            let Some(pod) = srv.storage.get(PODS, ns, &pod_name) else {
                continue;
            };
            if controller_of(&pod).is_some() || deleting(&pod) || !sel.matches(&labels(&pod)) {
                continue;
            }
            let mut next = (*pod).clone();
            let refs = next["metadata"]
                .as_object_mut()
                .map(|m| m.entry("ownerReferences").or_insert_with(|| json!([])));
            if let Some(Value::Array(refs)) = refs {
                refs.push(owner_ref(&rs, sk.kind));
            }
            if let Some(stored) = update(srv, "pods", next, None) {
                pods.push(Arc::new(stored));
            }
        }
    }
    let active: Vec<&Arc<Value>> = pods
        .iter()
        .filter(|p| !deleting(p) && !terminal(p))
        .collect();
    let want = int(&rs, "/spec/replicas").unwrap_or(1).max(0) as usize;
    let mut created: Vec<Value> = Vec::new();
    if !deleting(&rs) && active.len() < want {
        let template = rs.pointer("/spec/template").cloned().unwrap_or_default();
        for _ in 0..(want - active.len()).min(BURST) {
            let mut meta = Map::new();
            meta.insert("generateName".into(), json!(format!("{name}-")));
            meta.insert("namespace".into(), json!(ns));
            for k in ["labels", "annotations", "finalizers"] {
                if let Some(v) = template.pointer(&format!("/metadata/{k}")) {
                    meta.insert(k.into(), v.clone());
                }
            }
            meta.insert("ownerReferences".into(), json!([owner_ref(&rs, sk.kind)]));
            let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                "spec": template.get("spec").cloned().unwrap_or_else(|| json!({}))});
            match create_pod(srv, ns, pod).await {
                Ok(p) => {
                    event(
                        srv,
                        &rs,
                        sk.component,
                        false,
                        "SuccessfulCreate",
                        &format!("Created pod: {}", meta_str(&p, "name").unwrap_or("")),
                    );
                    created.push(p);
                }
                Err(e) => {
                    event(
                        srv,
                        &rs,
                        sk.component,
                        false,
                        "FailedCreate",
                        &format!("Error creating: {}", e.status.message),
                    );
                    break;
                }
            }
        }
    } else if !deleting(&rs) && active.len() > want {
        let mut ranked: Vec<&Arc<Value>> = active.clone();
        ranked.sort_by_key(|p| deletion_rank(p));
        for pod in ranked.into_iter().take((active.len() - want).min(BURST)) {
            delete_pod(srv, &rs, sk.component, pod, |n| format!("Deleted pod: {n}"));
        }
    }
    // The status from the pods as they are now.
    let mut current: Vec<Arc<Value>> = Vec::new();
    for p in pods
        .iter()
        .map(|p| meta_str(p, "name").unwrap_or("").to_string())
        .chain(
            created
                .iter()
                .map(|p| meta_str(p, "name").unwrap_or("").to_string()),
        )
    {
        if let Some(pod) = srv.storage.get(PODS, ns, &p) {
            current.push(pod);
        }
    }
    let min_ready = int(&rs, "/spec/minReadySeconds").unwrap_or(0);
    let at = now();
    let template_labels = string_map(&rs, "/spec/template/metadata/labels");
    let (mut replicas, mut labelled, mut ready, mut available, mut terminating) = (0, 0, 0, 0, 0);
    let mut later = false;
    for pod in &current {
        if terminal(pod) {
            continue;
        }
        if deleting(pod) {
            terminating += 1;
            continue;
        }
        replicas += 1;
        let labels = labels(pod);
        if template_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
        {
            labelled += 1;
        }
        if ready_since(pod).is_some() {
            ready += 1;
        }
        let (avail, wait) = availability(pod, min_ready, at);
        available += i64::from(avail);
        later |= wait;
    }
    let mut status = rs
        .get("status")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut set = |k: &str, v: i64, omit_zero: bool| {
        if v == 0 && omit_zero {
            status.remove(k);
        } else {
            status.insert(k.into(), json!(v));
        }
    };
    set("replicas", replicas, false);
    set("fullyLabeledReplicas", labelled, true);
    set("readyReplicas", ready, true);
    set("availableReplicas", available, true);
    if sk.terminating {
        set("terminatingReplicas", terminating, false);
    }
    set(
        "observedGeneration",
        int(&rs, "/metadata/generation").unwrap_or(1),
        false,
    );
    write_status(srv, sk.plural, &rs, status);
    later
}

// ---------------------------------------------------------------------------------------
// Deployments

/// An int-or-percent of `total`, percentages rounded up (`round_up`) or down.
fn scaled(v: Option<&Value>, total: i64, round_up: bool, default: &str) -> i64 {
    let v = v.cloned().unwrap_or_else(|| json!(default));
    match &v {
        Value::Number(n) => n.as_i64().unwrap_or(0),
        Value::String(s) => match s.strip_suffix('%').and_then(|p| p.parse::<i64>().ok()) {
            Some(p) if round_up => (p * total + 99) / 100,
            Some(p) => p * total / 100,
            None => s.parse().unwrap_or(0),
        },
        _ => 0,
    }
}

/// (maxSurge, maxUnavailable) of a rolling update, as upstream resolves them (both zero:
/// one may be unavailable).
fn surge_and_unavailable(d: &Value, replicas: i64) -> (i64, i64) {
    if d.pointer("/spec/strategy/type").and_then(Value::as_str) == Some("Recreate") {
        return (0, 0);
    }
    let ru = d.pointer("/spec/strategy/rollingUpdate");
    let surge = scaled(ru.and_then(|r| r.get("maxSurge")), replicas, true, "25%");
    let unavailable = scaled(
        ru.and_then(|r| r.get("maxUnavailable")),
        replicas,
        false,
        "25%",
    );
    if surge == 0 && unavailable == 0 {
        (0, 1)
    } else {
        (surge, unavailable)
    }
}

/// A template without the hash label, for comparing a ReplicaSet's with the Deployment's.
fn without_hash(template: Option<&Value>) -> Value {
    let mut t = template.cloned().unwrap_or_default();
    if let Some(labels) = t
        .pointer_mut("/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        labels.remove(HASH_LABEL);
    }
    t
}

/// The template hash: FNV-1a (32 bits) of the template's JSON and the collision count,
/// in upstream's alphabet.
pub(super) fn template_hash(template: &Value, collisions: i64) -> String {
    let mut h: u32 = 0x811c_9dc5;
    let text = serde_json::to_string(template).unwrap_or_default();
    for b in text.bytes().chain(collisions.to_string().bytes()) {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    h.to_string()
        .bytes()
        .map(|d| ALPHABET[usize::from(d - b'0') % ALPHABET.len()] as char)
        .collect()
}

fn revision(rs: &Value) -> i64 {
    rs.pointer("/metadata/annotations")
        .and_then(|a| a.get(REVISION))
        .and_then(Value::as_str)
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

pub(super) fn spec_replicas(rs: &Value) -> i64 {
    int(rs, "/spec/replicas").unwrap_or(0)
}

pub(super) fn status_count(rs: &Value, field: &str) -> i64 {
    int(rs, &format!("/status/{field}")).unwrap_or(0)
}

/// Scales a ReplicaSet to `to` (annotating the Deployment's size), with the event.
fn scale(srv: &ApiServer, d: &Value, rs: &Value, to: i64, max_surge: i64) -> Option<Value> {
    let replicas = int(d, "/spec/replicas").unwrap_or(1);
    let mut next = rs.clone();
    next["spec"]["replicas"] = json!(to);
    if let Some(m) = next["metadata"].as_object_mut() {
        let ann = m.entry("annotations").or_insert_with(|| json!({}));
        ann[DESIRED] = json!(replicas.to_string());
        ann[MAX_REPLICAS] = json!((replicas + max_surge).to_string());
    }
    if next == *rs {
        return Some(next);
    }
    let from = spec_replicas(rs);
    let stored = update(srv, "replicasets", next, None)?;
    if from != to {
        let verb = if to > from { "up" } else { "down" };
        event(
            srv,
            d,
            "deployment-controller",
            false,
            "ScalingReplicaSet",
            &format!(
                "Scaled {verb} replica set {} from {from} to {to}",
                meta_str(rs, "name").unwrap_or("")
            ),
        );
    }
    Some(stored)
}

/// One Deployment; whether it must be looked at again later (a rollout in progress, for
/// its deadline, or pods becoming available).
fn sync_deployment(srv: &Arc<ApiServer>, ns: &str, name: &str) -> bool {
    let Some(d) = srv.storage.get(DEPLOYMENTS, ns, name) else {
        return false;
    };
    if deleting(&d) {
        return false;
    }
    let d: Value = (*d).clone();
    let uid = meta_str(&d, "uid").unwrap_or("").to_string();
    let replicas = int(&d, "/spec/replicas").unwrap_or(1).max(0);
    let (max_surge, max_unavailable) = surge_and_unavailable(&d, replicas);
    let paused = d.pointer("/spec/paused").and_then(Value::as_bool) == Some(true);
    let recreate = d.pointer("/spec/strategy/type").and_then(Value::as_str) == Some("Recreate");
    let selector = selector_of(&d);
    // Its ReplicaSets: those it controls, and orphans its selector matches (adopted).
    let mut all: Vec<Value> = Vec::new();
    for rs in srv.storage.list(REPLICASETS, Some(ns)).0 {
        match controller_of(&rs) {
            Some(r) if r.get("uid").and_then(Value::as_str) == Some(uid.as_str()) => {
                all.push((*rs).clone());
            }
            None if !deleting(&rs)
                && selector.as_ref().is_some_and(|s| s.matches(&labels(&rs))) =>
            {
                let mut next = (*rs).clone();
                next["metadata"]["ownerReferences"] = json!([owner_ref(&d, "Deployment")]);
                if let Some(stored) = update(srv, "replicasets", next, None) {
                    all.push(stored);
                }
            }
            _ => {}
        }
    }
    let template = without_hash(d.pointer("/spec/template"));
    let new_idx = all
        .iter()
        .position(|rs| without_hash(rs.pointer("/spec/template")) == template);
    let max_old_revision = all
        .iter()
        .enumerate()
        .filter(|(i, _)| Some(*i) != new_idx)
        .map(|(_, rs)| revision(rs))
        .max()
        .unwrap_or(0);
    let mut conditions_note: Option<(&str, String)> = None;
    let mut collisions = int(&d, "/status/collisionCount").unwrap_or(0);
    let mut new_rs: Option<Value> = new_idx.map(|i| all.remove(i));
    if !paused {
        // The new ReplicaSet: found (its revision brought up to date) or created.
        let wanted_revision = if new_rs
            .as_ref()
            .is_some_and(|r| revision(r) > max_old_revision)
        {
            new_rs.as_ref().map(revision).unwrap_or(1)
        } else {
            max_old_revision + 1
        };
        match new_rs.take() {
            Some(rs) => {
                if d.pointer("/status/conditions").is_none() {
                    let name = meta_str(&rs, "name").unwrap_or("");
                    conditions_note = Some((
                        "FoundNewReplicaSet",
                        format!("Found new replica set {}", crate::error::go_quote(name)),
                    ));
                }
                new_rs = Some(if revision(&rs) != wanted_revision {
                    let mut next = rs.clone();
                    next["metadata"]["annotations"][REVISION] = json!(wanted_revision.to_string());
                    update(srv, "replicasets", next, None).unwrap_or(rs)
                } else {
                    rs
                });
            }
            // Recreate makes the new one (at full size) only once the old pods are gone.
            None if recreate && !recreate_old_gone(srv, &d, &mut all) => {}
            None => {
                let start = if recreate {
                    replicas
                } else {
                    let current: i64 = all.iter().map(spec_replicas).sum();
                    (replicas + max_surge - current).clamp(0, replicas)
                };
                if let Some(rs) = create_replicaset(
                    srv,
                    &d,
                    &template,
                    start,
                    max_surge,
                    wanted_revision,
                    &mut collisions,
                ) {
                    conditions_note = Some((
                        "NewReplicaSetCreated",
                        format!(
                            "Created new replica set {}",
                            crate::error::go_quote(meta_str(&rs, "name").unwrap_or(""))
                        ),
                    ));
                    if start > 0 {
                        event(
                            srv,
                            &d,
                            "deployment-controller",
                            false,
                            "ScalingReplicaSet",
                            &format!(
                                "Scaled up replica set {} from 0 to {start}",
                                meta_str(&rs, "name").unwrap_or("")
                            ),
                        );
                    }
                    new_rs = Some(rs);
                }
            }
        }
        if let Some(rs) = new_rs.clone() {
            let scaled_rs = if recreate {
                rollout_recreate(srv, &d, &rs, &mut all, replicas)
            } else {
                rollout_rolling(srv, &d, &rs, &mut all, replicas, max_surge, max_unavailable)
            };
            new_rs = scaled_rs.or(Some(rs));
        }
    } else if let Some(rs) = &new_rs {
        // Paused: only the size follows spec.replicas (one active ReplicaSet).
        if all.iter().all(|o| spec_replicas(o) == 0) && spec_replicas(rs) != replicas {
            new_rs = scale(srv, &d, rs, replicas, max_surge).or(new_rs.clone());
        }
    }
    // Old ReplicaSets beyond the history limit go once scaled down and empty.
    if let Some(limit) = int(&d, "/spec/revisionHistoryLimit") {
        let mut old: Vec<&Value> = all
            .iter()
            .filter(|rs| {
                spec_replicas(rs) == 0
                    && status_count(rs, "replicas") == 0
                    && int(rs, "/status/observedGeneration") >= int(rs, "/metadata/generation")
                    && !deleting(rs)
            })
            .collect();
        if old.len() as i64 > limit {
            old.sort_by_key(|rs| revision(rs));
            let excess = old.len() - limit.max(0) as usize;
            if let Some(def) = srv.def("apps", "v1", "replicasets") {
                for rs in old.into_iter().take(excess) {
                    let n = meta_str(rs, "name").unwrap_or("").to_string();
                    let _ = delete_obj(srv, &def, ns, &n, &DeleteOptions::default());
                }
            }
        }
    }
    update_deployment_status(
        srv,
        &d,
        new_rs.as_ref(),
        &all,
        replicas,
        max_unavailable,
        paused,
        collisions,
        conditions_note,
    )
}

fn create_replicaset(
    srv: &ApiServer,
    d: &Value,
    template: &Value,
    start: i64,
    max_surge: i64,
    revision: i64,
    collisions: &mut i64,
) -> Option<Value> {
    let def = srv.def("apps", "v1", "replicasets")?;
    let (ns, dname) = key_of(d);
    let replicas = int(d, "/spec/replicas").unwrap_or(1);
    for _ in 0..5 {
        let hash = template_hash(template, *collisions);
        let mut t = template.clone();
        t["metadata"]["labels"][HASH_LABEL] = json!(hash);
        let mut selector = d.pointer("/spec/selector").cloned().unwrap_or_default();
        selector["matchLabels"][HASH_LABEL] = json!(hash);
        let mut labels = t["metadata"]["labels"].clone();
        labels[HASH_LABEL] = json!(hash);
        let mut annotations: Map<String, Value> = d
            .pointer("/metadata/annotations")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        // Upstream's `annotationsToSkip` (the three it sets itself are set below).
        for skip in [
            "kubectl.kubernetes.io/last-applied-configuration",
            "deployment.kubernetes.io/revision-history",
            "deprecated.deployment.rollback.to",
        ] {
            annotations.remove(skip);
        }
        annotations.insert(REVISION.into(), json!(revision.to_string()));
        annotations.insert(DESIRED.into(), json!(replicas.to_string()));
        annotations.insert(
            MAX_REPLICAS.into(),
            json!((replicas + max_surge).to_string()),
        );
        let mut spec = json!({"replicas": start, "selector": selector, "template": t});
        if let Some(m) = d.pointer("/spec/minReadySeconds") {
            spec["minReadySeconds"] = m.clone();
        }
        let rs = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": format!("{dname}-{hash}"), "namespace": ns, "labels": labels,
                "annotations": annotations, "ownerReferences": [owner_ref(d, "Deployment")]},
            "spec": spec});
        match srv.create_object(&def, &ns, rs, MANAGER, false) {
            Ok(stored) => return Some(stored),
            Err(e) if e.status.code == 409 => {
                // A ReplicaSet of another template has that name: count the collision.
                let theirs = srv
                    .storage
                    .get(REPLICASETS, &ns, &format!("{dname}-{hash}"));
                if theirs.as_ref().is_some_and(|r| {
                    without_hash(r.pointer("/spec/template")) == *template
                        && controller_of(r).and_then(|c| c.get("uid")) == d.pointer("/metadata/uid")
                }) {
                    return theirs.map(|r| (*r).clone());
                }
                *collisions += 1;
            }
            Err(e) => {
                tracing::debug!(%ns, deployment = %dname, "creating a ReplicaSet: {}", e.status.message);
                return None;
            }
        }
    }
    None
}

/// RollingUpdate: the new ReplicaSet up within maxSurge, the old ones down within
/// maxUnavailable (unhealthy pods first). The new ReplicaSet as it is now.
fn rollout_rolling(
    srv: &ApiServer,
    d: &Value,
    new_rs: &Value,
    old: &mut [Value],
    replicas: i64,
    max_surge: i64,
    max_unavailable: i64,
) -> Option<Value> {
    let mut new_rs = new_rs.clone();
    // Scale up (or down to size) the new one.
    let new_count = spec_replicas(&new_rs);
    let target = if new_count > replicas {
        replicas
    } else {
        let current: i64 = old.iter().map(spec_replicas).sum::<i64>() + new_count;
        let room = (replicas + max_surge - current).max(0);
        new_count + room.min(replicas - new_count)
    };
    if target != new_count
        || new_rs
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(DESIRED))
            .and_then(Value::as_str)
            != Some(&replicas.to_string())
    {
        new_rs = scale(srv, d, &new_rs, target, max_surge)?;
    }
    // Scale down the old ones.
    let old_total: i64 = old.iter().map(spec_replicas).sum();
    if old_total == 0 {
        return Some(new_rs);
    }
    let all_pods = old_total + spec_replicas(&new_rs);
    let min_available = replicas - max_unavailable;
    let new_unavailable = spec_replicas(&new_rs) - status_count(&new_rs, "availableReplicas");
    let mut max_down = all_pods - min_available - new_unavailable;
    if max_down <= 0 {
        return Some(new_rs);
    }
    old.sort_by_key(|rs| {
        (
            revision(rs),
            meta_str(rs, "creationTimestamp").unwrap_or("").to_string(),
        )
    });
    // Unhealthy pods first.
    for rs in old.iter_mut() {
        if max_down <= 0 {
            break;
        }
        let n = spec_replicas(rs);
        let unhealthy = n - status_count(rs, "availableReplicas");
        if n == 0 || unhealthy <= 0 {
            continue;
        }
        let down = unhealthy.min(max_down);
        if let Some(stored) = scale(srv, d, rs, n - down, max_surge) {
            *rs = stored;
            max_down -= down;
        }
    }
    // Then available pods, as long as enough stay available.
    let available: i64 = old
        .iter()
        .map(|rs| status_count(rs, "availableReplicas"))
        .sum::<i64>()
        + status_count(&new_rs, "availableReplicas");
    let mut total_down = (available - min_available).min(max_down.max(0));
    for rs in old.iter_mut() {
        if total_down <= 0 {
            break;
        }
        let n = spec_replicas(rs);
        if n == 0 {
            continue;
        }
        let down = n.min(total_down);
        if let Some(stored) = scale(srv, d, rs, n - down, max_surge) {
            *rs = stored;
            total_down -= down;
        }
    }
    Some(new_rs)
}

/// Recreate's first step: every old ReplicaSet to zero; whether their pods are gone.
fn recreate_old_gone(srv: &ApiServer, d: &Value, old: &mut [Value]) -> bool {
    let mut gone = true;
    for rs in old.iter_mut() {
        if spec_replicas(rs) > 0
            && let Some(stored) = scale(srv, d, rs, 0, 0)
        {
            *rs = stored;
        }
        gone &= status_count(rs, "replicas") == 0 && status_count(rs, "terminatingReplicas") == 0;
    }
    gone
}

/// Recreate: every old ReplicaSet to zero, and the new one up once their pods are gone.
fn rollout_recreate(
    srv: &ApiServer,
    d: &Value,
    new_rs: &Value,
    old: &mut [Value],
    replicas: i64,
) -> Option<Value> {
    if !recreate_old_gone(srv, d, old) {
        return Some(new_rs.clone());
    }
    scale(srv, d, new_rs, replicas, 0)
}

/// A condition as upstream's `NewDeploymentCondition`.
fn condition(kind: &str, status: &str, reason: &str, message: &str) -> Value {
    let t = now_time();
    json!({"type": kind, "status": status, "lastUpdateTime": t, "lastTransitionTime": t,
        "reason": reason, "message": message})
}

/// Sets `c` among `conds` as upstream's `SetDeploymentCondition`: an unchanged status
/// and reason keeps the old one; an unchanged status keeps its transition time.
fn set_condition(conds: &mut Vec<Value>, mut c: Value) {
    let kind = c["type"].clone();
    if let Some(i) = conds.iter().position(|x| x["type"] == kind) {
        let old = &conds[i];
        if old["status"] == c["status"] && old["reason"] == c["reason"] {
            return;
        }
        if old["status"] == c["status"] {
            c["lastTransitionTime"] = old["lastTransitionTime"].clone();
        }
        conds.remove(i);
    }
    conds.push(c);
}

#[allow(clippy::too_many_arguments)]
fn update_deployment_status(
    srv: &ApiServer,
    d: &Value,
    new_rs: Option<&Value>,
    old: &[Value],
    replicas: i64,
    max_unavailable: i64,
    paused: bool,
    collisions: i64,
    note: Option<(&str, String)>,
) -> bool {
    let all: Vec<&Value> = old.iter().chain(new_rs).collect();
    let sum = |f: &dyn Fn(&Value) -> i64| all.iter().map(|rs| f(rs)).sum::<i64>();
    let available = sum(&|rs| status_count(rs, "availableReplicas"));
    let total_spec = sum(&spec_replicas);
    let actual = sum(&|rs| status_count(rs, "replicas"));
    let updated = new_rs.map_or(0, |rs| status_count(rs, "replicas"));
    let ready = sum(&|rs| status_count(rs, "readyReplicas"));
    let terminating = sum(&|rs| status_count(rs, "terminatingReplicas"));
    let mut status = Map::new();
    status.insert(
        "observedGeneration".into(),
        json!(int(d, "/metadata/generation").unwrap_or(1)),
    );
    let mut put = |k: &str, v: i64| {
        if v != 0 {
            status.insert(k.into(), json!(v));
        }
    };
    put("replicas", actual);
    put("updatedReplicas", updated);
    put("readyReplicas", ready);
    put("availableReplicas", available);
    put("unavailableReplicas", (total_spec - available).max(0));
    put("collisionCount", collisions);
    status.insert("terminatingReplicas".into(), json!(terminating));
    let mut conds: Vec<Value> = d
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if available >= replicas - max_unavailable {
        set_condition(
            &mut conds,
            condition(
                "Available",
                "True",
                "MinimumReplicasAvailable",
                "Deployment has minimum availability.",
            ),
        );
    } else {
        set_condition(
            &mut conds,
            condition(
                "Available",
                "False",
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.",
            ),
        );
    }
    let rs_name = new_rs
        .and_then(|rs| meta_str(rs, "name"))
        .map(crate::error::go_quote)
        .unwrap_or_default();
    let complete = new_rs.is_some_and(|rs| {
        status_count(rs, "replicas") == replicas
            && status_count(rs, "availableReplicas") == replicas
            && spec_replicas(rs) == replicas
    }) && old.iter().all(|rs| status_count(rs, "replicas") == 0);
    let progressing_old = conds.iter().find(|c| c["type"] == "Progressing").cloned();
    let mut later = false;
    if paused {
        set_condition(
            &mut conds,
            condition(
                "Progressing",
                "Unknown",
                "DeploymentPaused",
                "Deployment is paused",
            ),
        );
    } else if let Some((reason, msg)) = note {
        set_condition(&mut conds, condition("Progressing", "True", reason, &msg));
    } else if complete {
        set_condition(
            &mut conds,
            condition(
                "Progressing",
                "True",
                "NewReplicaSetAvailable",
                &format!("ReplicaSet {rs_name} has successfully progressed."),
            ),
        );
    } else {
        let before = d.get("status").cloned().unwrap_or_default();
        let progressed = [
            "replicas",
            "updatedReplicas",
            "readyReplicas",
            "availableReplicas",
        ]
        .iter()
        .any(|k| {
            before.get(*k).and_then(Value::as_i64).unwrap_or(0)
                != status.get(*k).and_then(Value::as_i64).unwrap_or(0)
        }) || progressing_old.as_ref().is_some_and(|c| {
            c["reason"] == "DeploymentPaused" || c["reason"] == "NewReplicaSetAvailable"
        });
        if progressed {
            let mut c = condition(
                "Progressing",
                "True",
                "ReplicaSetUpdated",
                &format!("ReplicaSet {rs_name} is progressing."),
            );
            if let Some(old) = &progressing_old
                && old["status"] == "True"
            {
                c["lastTransitionTime"] = old["lastTransitionTime"].clone();
            }
            conds.retain(|x| x["type"] != "Progressing");
            conds.push(c);
        } else if let Some(deadline) = int(d, "/spec/progressDeadlineSeconds")
            && let Some(old) = &progressing_old
            && old["status"] == "True"
            && old["reason"] != "NewReplicaSetAvailable"
        {
            let since: Option<jiff::Timestamp> =
                old["lastUpdateTime"].as_str().and_then(|t| t.parse().ok());
            let over = since.is_some_and(|s| {
                s.checked_add(jiff::SignedDuration::from_secs(deadline))
                    .is_ok_and(|end| end < now())
            });
            if over {
                set_condition(
                    &mut conds,
                    condition(
                        "Progressing",
                        "False",
                        "ProgressDeadlineExceeded",
                        &format!("ReplicaSet {rs_name} has timed out progressing."),
                    ),
                );
            } else {
                later = true;
            }
        }
    }
    // Available first, then Progressing, as upstream keeps them once both exist.
    conds.sort_by_key(|c| u8::from(c["type"] != "Available"));
    status.insert("conditions".into(), Value::Array(conds));
    let mut next = d.clone();
    next["status"] = Value::Object(status);
    if let Some(rev) = new_rs.map(revision).filter(|r| *r > 0) {
        let ann = next["metadata"]
            .as_object_mut()
            .map(|m| m.entry("annotations").or_insert_with(|| json!({})));
        if let Some(ann) = ann {
            ann[REVISION] = json!(rev.to_string());
        }
    }
    if next != *d {
        update(srv, "deployments", next, Some("status"));
    }
    later
        || (!complete
            && !paused
            && new_rs.is_some_and(|rs| {
                status_count(rs, "readyReplicas") > status_count(rs, "availableReplicas")
            }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rolling_update_bounds_resolve_as_upstream() {
        let d = |s: Value| json!({"spec": {"strategy": s}});
        assert_eq!(
            surge_and_unavailable(&d(json!({"type": "RollingUpdate"})), 3),
            (1, 0)
        );
        assert_eq!(
            surge_and_unavailable(&d(json!({"type": "RollingUpdate"})), 10),
            (3, 2)
        );
        assert_eq!(
            surge_and_unavailable(
                &d(
                    json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": "0%"}})
                ),
                4
            ),
            (0, 1)
        );
        assert_eq!(
            surge_and_unavailable(&d(json!({"type": "Recreate"})), 4),
            (0, 0)
        );
    }

    #[test]
    fn template_hashes_use_upstream_alphabet_and_change_with_collisions() {
        let t = json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": []}});
        let a = template_hash(&t, 0);
        assert!(
            a.chars().all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)),
            "{a}"
        );
        assert_eq!(a, template_hash(&t, 0));
        assert_ne!(a, template_hash(&t, 1));
    }

    #[test]
    fn unscheduled_pending_unready_and_newest_pods_go_first() {
        let pod = |node: Option<&str>, phase: &str, ready: bool, created: &str| {
            let mut p = json!({"metadata": {"creationTimestamp": created}, "spec": {}, "status": {"phase": phase}});
            if let Some(n) = node {
                p["spec"]["nodeName"] = json!(n);
            }
            if ready {
                p["status"]["conditions"] =
                    json!([{"type": "Ready", "status": "True", "lastTransitionTime": created}]);
            }
            p
        };
        let mut pods = [
            pod(Some("n"), "Running", true, "2026-01-01T00:00:00Z"),
            pod(Some("n"), "Running", true, "2026-01-02T00:00:00Z"),
            pod(Some("n"), "Running", false, "2026-01-01T00:00:00Z"),
            pod(Some("n"), "Pending", false, "2026-01-01T00:00:00Z"),
            pod(None, "Pending", false, "2026-01-01T00:00:00Z"),
        ];
        pods.sort_by_key(deletion_rank);
        assert!(pods[0].pointer("/spec/nodeName").is_none());
        assert_eq!(pods[1]["status"]["phase"], "Pending");
        assert!(pods[2]["status"].get("conditions").is_none());
        assert_eq!(
            pods[3]["metadata"]["creationTimestamp"],
            "2026-01-02T00:00:00Z"
        );
    }
}
