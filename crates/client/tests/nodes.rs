//! Nodes as kube-controller-manager's node lifecycle and taint-eviction controllers treat
//! them: a Node nothing reports for is marked Unknown after its grace period and tainted,
//! `spec.unschedulable` and the stable os/arch labels are followed at once, and a node
//! that stops reporting while another node of its zone is alive gets a NoExecute taint
//! that evicts the pods not tolerating it for long. Runs against the embedded server, or
//! a real cluster when KUBEWRIGHT_TEST_KUBECONFIG is set (whose Nodes have no kubelet,
//! like these). The ttl controller's annotation is checked too. Each test waits about a minute: the grace periods are upstream's.

#![allow(clippy::unwrap_used, clippy::panic)] // test code: a failed unwrap is a failed test

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kubewright_client::Api;
use kubewright_core::{ListParams, Patch, PatchParams, PostParams, WatchParams};
use kubewright_testing::TestEnv;
use serde_json::{Value, json};
use std::future::Future;
use std::time::Duration;

/// Every change of `K`s in `ns` (all namespaces when `None`) from now on.
async fn changes<K>(
    env: &TestEnv,
    ns: Option<&str>,
    limit: Duration,
) -> futures::stream::BoxStream<'static, ()>
where
    K: kubewright_core::Resource
        + Clone
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
    K::DynamicType: Default,
{
    let api: Api<K> = match ns {
        Some(ns) => Api::namespaced(env.client(), ns),
        None => Api::all(env.client()),
    };
    let rv = api.list(&ListParams::default().limit(1)).await.unwrap();
    let wp = WatchParams::default().timeout(limit.as_secs() as u32 + 10);
    api.watch(&wp, &rv.metadata.resource_version.unwrap_or_default())
        .await
        .unwrap()
        .map(|_| ())
        .boxed()
}

/// Waits (up to `limit`) until `check` passes, checking again on every change of Nodes,
/// of the pods and events of `ns` and of the events of `default` (where node events go).
async fn settle<F, Fut>(env: &TestEnv, ns: &str, limit: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let mut changes = futures::stream::select_all([
        changes::<Node>(env, None, limit).await,
        changes::<Pod>(env, Some(ns), limit).await,
        changes::<Event>(env, Some(ns), limit).await,
        changes::<Event>(env, Some("default"), limit).await,
    ]);
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let why = match check().await {
            Ok(()) => return,
            Err(why) => why,
        };
        match tokio::time::timeout_at(deadline, changes.next()).await {
            Ok(Some(())) => {}
            Ok(None) | Err(_) => {
                if let Err(last) = check().await {
                    panic!("did not settle: {why}; last: {last}");
                }
                return;
            }
        }
    }
}

fn conditions(node: &Node) -> Vec<(String, String, String, String)> {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|c| {
            (
                c.type_,
                c.status,
                c.reason.unwrap_or_default(),
                c.message.unwrap_or_default(),
            )
        })
        .collect()
}

/// The node's taints as (key, effect, whether `timeAdded` is set).
fn taints(node: &Node) -> Vec<(String, String, bool)> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|t| (t.key, t.effect, t.time_added.is_some()))
        .collect()
}

fn taint(key: &str, effect: &str, timed: bool) -> (String, String, bool) {
    (key.to_string(), effect.to_string(), timed)
}

/// The (reason, type, message) of the events in `ns` whose reference passes `about`.
async fn events_where(
    env: &TestEnv,
    ns: &str,
    about: impl Fn(&k8s_openapi::api::core::v1::ObjectReference) -> bool,
) -> Vec<(String, String, String)> {
    let events: Api<Event> = Api::namespaced(env.client(), ns);
    events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| about(&e.involved_object))
        .map(|e| {
            (
                e.reason.unwrap_or_default(),
                e.type_.unwrap_or_default(),
                e.message.unwrap_or_default(),
            )
        })
        .collect()
}

/// The events about the object with `uid` in `ns`.
async fn events_about(env: &TestEnv, ns: &str, uid: &str) -> Vec<(String, String, String)> {
    events_where(env, ns, |o| o.uid.as_deref() == Some(uid)).await
}

/// The events about the pod `name` in `ns` that name no uid (the taint-eviction
/// controller's).
async fn events_naming(env: &TestEnv, ns: &str, name: &str) -> Vec<(String, String, String)> {
    events_where(env, ns, |o| {
        o.name.as_deref() == Some(name) && o.uid.is_none()
    })
    .await
}

/// Waits until `default` holds a Normal event `reason` with `message` about the node
/// with `uid`.
async fn await_node_event(env: &TestEnv, ns: &str, uid: &str, reason: &str, message: &str) {
    settle(env, ns, Duration::from_secs(30), || async {
        let events = events_about(env, "default", uid).await;
        if has(&events, reason, "Normal", message) {
            Ok(())
        } else {
            Err(format!("{events:?}"))
        }
    })
    .await;
}

fn has(events: &[(String, String, String)], reason: &str, ty: &str, message: &str) -> bool {
    events
        .iter()
        .any(|(r, t, m)| r == reason && t == ty && m == message)
}

/// Deletes the nodes when dropped (a failed test leaves no Node behind).
struct Cleanup(kubewright_client::Client, Vec<String>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let client = self.0.clone();
        let names = std::mem::take(&mut self.1);
        let handle = tokio::runtime::Handle::current();
        std::thread::spawn(move || {
            handle.block_on(async move {
                let nodes: Api<Node> = Api::all(client);
                for n in names {
                    let _ = nodes.delete(&n, &Default::default()).await;
                }
            })
        })
        .join()
        .ok();
    }
}

const UNREACHABLE: &str = "node.kubernetes.io/unreachable";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_nothing_reports_for_is_marked_unknown_and_tainted() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let nodes: Api<Node> = Api::all(env.client());
    let name = env.unique_name("kw-silent");
    let _cleanup = Cleanup(env.client(), vec![name.clone()]);
    let node: Node = serde_json::from_value(json!({"metadata": {"name": name,
        "labels": {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}},
        "spec": {"unschedulable": true, "taints": [
            {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
            {"key": "mine", "value": "x", "effect": "NoSchedule"}]}}))
    .unwrap();
    let created = nodes.create(&PostParams::default(), &node).await.unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    // At once: the beta labels follow the stable ones; `unschedulable` is a taint, and a
    // controller taint no condition supports goes.
    settle(&env, &ns, Duration::from_secs(30), || async {
        let n = nodes.get(&name).await.unwrap();
        let labels = n.metadata.labels.clone().unwrap_or_default();
        // The ttl controller's annotation: 0 s below 100 nodes.
        let ttl = n
            .metadata
            .annotations
            .clone()
            .unwrap_or_default()
            .get("node.alpha.kubernetes.io/ttl")
            .cloned();
        let got = (
            labels.get("beta.kubernetes.io/os").cloned(),
            labels.get("beta.kubernetes.io/arch").cloned(),
            ttl,
            taints(&n),
        );
        let want = (
            Some("linux".to_string()),
            Some("amd64".to_string()),
            Some("0".to_string()),
            vec![
                taint("mine", "NoSchedule", false),
                taint("node.kubernetes.io/unschedulable", "NoSchedule", true),
            ],
        );
        if got == want {
            Ok(())
        } else {
            Err(format!("{got:?}"))
        }
    })
    .await;
    let registered = format!("Node {name} event: Registered Node {name} in Controller");
    await_node_event(&env, &ns, &uid, "RegisteredNode", &registered).await;
    // After the startup grace period (60 s from its creation): every health condition
    // Unknown, and the unreachable NoSchedule taint. (A NoExecute taint may come too
    // when another test keeps a node of another zone alive: not checked.)
    let never = |ty: &str| {
        (
            ty.to_string(),
            "Unknown".to_string(),
            "NodeStatusNeverUpdated".to_string(),
            "Kubelet never posted node status.".to_string(),
        )
    };
    settle(&env, &ns, Duration::from_secs(100), || async {
        let n = nodes.get(&name).await.unwrap();
        let conds = conditions(&n);
        let want = vec![
            never("Ready"),
            never("MemoryPressure"),
            never("DiskPressure"),
            never("PIDPressure"),
        ];
        let no_schedule: Vec<_> = taints(&n)
            .into_iter()
            .filter(|t| t.1 == "NoSchedule")
            .collect();
        let want_taints = vec![
            taint("mine", "NoSchedule", false),
            taint("node.kubernetes.io/unschedulable", "NoSchedule", true),
            taint(UNREACHABLE, "NoSchedule", true),
        ];
        if conds == want && no_schedule == want_taints {
            Ok(())
        } else {
            Err(format!("{conds:?} {no_schedule:?}"))
        }
    })
    .await;
    let n = nodes.get(&name).await.unwrap();
    let ready = n
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    // The heartbeat it never had is dated at the node's creation.
    assert_eq!(
        ready.last_heartbeat_time.map(|t| t.0),
        created.metadata.creation_timestamp.map(|t| t.0)
    );
    nodes.delete(&name, &Default::default()).await.unwrap();
    let removing = format!("Node {name} event: Removing Node {name} from Controller");
    await_node_event(&env, &ns, &uid, "RemovingNode", &removing).await;
}

/// A Ready=True condition written now.
fn ready_now() -> Value {
    let now = jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    json!({"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok",
        "lastHeartbeatTime": now, "lastTransitionTime": now})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_stops_reporting_is_tainted_and_its_pods_evicted() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let nodes: Api<Node> = Api::all(env.client());
    let pods: Api<Pod> = Api::namespaced(env.client(), &ns);
    let leases: Api<Lease> = Api::namespaced(env.client(), "kube-node-lease");
    // Two nodes in a zone of their own: `alive` keeps renewing its Lease, `silent`
    // reported Ready once and then nothing.
    let zone = env.unique_name("kw-zone");
    let alive = env.unique_name("kw-alive");
    let silent = env.unique_name("kw-silent");
    let _cleanup = Cleanup(env.client(), vec![alive.clone(), silent.clone()]);
    for n in [&alive, &silent] {
        let node: Node = serde_json::from_value(json!({"metadata": {"name": n,
            "labels": {"topology.kubernetes.io/zone": zone}}}))
        .unwrap();
        nodes.create(&PostParams::default(), &node).await.unwrap();
        nodes
            .patch_status(
                n,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"conditions": [ready_now()]}})),
            )
            .await
            .unwrap();
    }
    let renew = {
        let (leases, alive) = (leases.clone(), alive.clone());
        tokio::spawn(async move {
            loop {
                let t = jiff::Timestamp::now()
                    .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
                    .to_string();
                let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": alive},
                    "spec": {"holderIdentity": alive, "leaseDurationSeconds": 40, "renewTime": t}});
                let pp = PatchParams::apply("kw-test-kubelet").force();
                let _ = leases.patch(&alive, &pp, &Patch::Apply(lease)).await;
                tokio::time::sleep(Duration::from_secs(8)).await;
            }
        })
    };
    // Two pods on the silent node: one tolerates its unreachable taint for 2 s, one
    // for ever.
    let pod = |name: &str, seconds: Option<i64>| -> Pod {
        let mut tol = json!({"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute"});
        if let Some(s) = seconds {
            tol["tolerationSeconds"] = json!(s);
        }
        serde_json::from_value(json!({"metadata": {"name": name},
            "spec": {"nodeName": silent, "tolerations": [tol], "terminationGracePeriodSeconds": 30,
                "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}))
        .unwrap()
    };
    for (name, seconds) in [("brief", Some(2)), ("patient", None)] {
        pods.create(&PostParams::default(), &pod(name, seconds))
            .await
            .unwrap();
        let now = jiff::Timestamp::now()
            .strftime("%Y-%m-%dT%H:%M:%SZ")
            .to_string();
        pods.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Running",
                "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}]}})),
        )
        .await
        .unwrap();
    }
    let silent_uid = nodes.get(&silent).await.unwrap().metadata.uid.unwrap();
    // About 50 s after the controller first saw it, the silent node is Unknown, tainted
    // NoSchedule and (its zone being alive) NoExecute; its pods are not Ready; the pod
    // that tolerates the taint for 2 s is marked and deleted; the other stays.
    settle(&env, &ns, Duration::from_secs(120), || async {
        let n = nodes.get(&silent).await.unwrap();
        let ready = conditions(&n).into_iter().find(|c| c.0 == "Ready");
        let want_ready = Some((
            "Ready".to_string(),
            "Unknown".to_string(),
            "NodeStatusUnknown".to_string(),
            "Kubelet stopped posting node status.".to_string(),
        ));
        let mut t = taints(&n);
        t.sort();
        let want_taints = vec![
            taint(UNREACHABLE, "NoExecute", true),
            taint(UNREACHABLE, "NoSchedule", true),
        ];
        let brief = pods.get("brief").await.unwrap();
        let disruption = brief
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == "DisruptionTarget")
            .map(|c| (c.status, c.reason, c.message));
        let got = (
            ready == want_ready,
            t == want_taints,
            brief.metadata.deletion_timestamp.is_some(),
            disruption,
        );
        let want = (
            true,
            true,
            true,
            Some((
                "True".to_string(),
                Some("DeletionByTaintManager".to_string()),
                Some("Taint manager: deleting due to NoExecute taint".to_string()),
            )),
        );
        if got == want {
            Ok(())
        } else {
            Err(format!("{got:?} {ready:?} {t:?}"))
        }
    })
    .await;
    let patient = pods.get("patient").await.unwrap();
    assert!(patient.metadata.deletion_timestamp.is_none());
    let ready = patient
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(ready.status, "False");
    // The living node is left alone.
    let a = nodes.get(&alive).await.unwrap();
    assert_eq!(taints(&a), vec![]);
    assert_eq!(conditions(&a)[0].1, "True");
    // Events: the node's, and the pods'.
    let brief_uid = pods.get("brief").await.unwrap().metadata.uid.unwrap();
    let patient_uid = pods.get("patient").await.unwrap().metadata.uid.unwrap();
    let not_ready = format!("Node {silent} status is now: NodeNotReady");
    let marking = format!("Marking for deletion Pod {ns}/brief");
    settle(&env, &ns, Duration::from_secs(30), || async {
        let node_events = events_about(&env, "default", &silent_uid).await;
        let brief_events = events_about(&env, &ns, &brief_uid).await;
        let eviction_events = events_naming(&env, &ns, "brief").await;
        let patient_events = events_about(&env, &ns, &patient_uid).await;
        let got = (
            has(&node_events, "NodeNotReady", "Normal", &not_ready),
            has(&eviction_events, "TaintManagerEviction", "Normal", &marking),
            has(
                &brief_events,
                "NodeNotReady",
                "Warning",
                "Node is not ready",
            ),
            has(
                &patient_events,
                "NodeNotReady",
                "Warning",
                "Node is not ready",
            ),
        );
        if got == (true, true, true, true) {
            Ok(())
        } else {
            Err(format!(
                "{got:?} {node_events:?} {brief_events:?} {eviction_events:?} {patient_events:?}"
            ))
        }
    })
    .await;
    renew.abort();
    // No kubelet finishes the pods: they go at once.
    for p in ["brief", "patient"] {
        let dp = kubewright_core::DeleteParams::default().grace_period(0);
        let _ = pods.delete(p, &dp).await;
    }
    let _ = leases.delete(&alive, &Default::default()).await;
}
