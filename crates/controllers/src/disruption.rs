//! kube-controller-manager's `disruption-controller`: the status of every
//! PodDisruptionBudget from the pods it selects (`currentHealthy`, `desiredHealthy`,
//! `expectedPods`, `disruptionsAllowed`, `observedGeneration`, the `DisruptionAllowed`
//! condition), written when it changed.
//!
//! - `minAvailable` as a number expects the selected pods; as a percentage, and
//!   `maxUnavailable` either way, expect the replicas of the pods' controllers
//!   (Deployments through their ReplicaSets, ReplicaSets, StatefulSets and
//!   ReplicationControllers, each counted once), percentages rounded up.
//! - A pod counts as healthy when it is Ready and not being deleted. A pod the eviction
//!   subresource just evicted (`status.disruptedPods`, written by the API server) stays
//!   out of the count until it is deleted or 2 minutes have passed.
//!
//! Not done: controllers reached only through a custom resource's `/scale`.

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kubewright_client::{Api, Client};
use kubewright_core::{LabelSelector, ObjectKey, PostParams};
use kubewright_runtime::{Action, InformerParams, Manager, ManagerError, Source, Store};
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

/// kube-controller-manager's name for this controller.
pub const NAME: &str = "disruption-controller";
/// How long an evicted pod stays out of `currentHealthy` while it is not deleted
/// (upstream's `DeletionTimeout`).
pub const DELETION_TIMEOUT: Duration = Duration::from_secs(2 * 60);

struct Ctx {
    client: Client,
    pods: Store<Pod>,
    replica_sets: Store<ReplicaSet>,
    deployments: Store<Deployment>,
    stateful_sets: Store<StatefulSet>,
    controllers: Store<ReplicationController>,
}

/// Adds the controller to `manager`: budgets are its primary objects; a pod's events
/// reconcile the budgets selecting it, and a workload's those of its namespace.
pub fn add(manager: &mut Manager) -> Result<(), ManagerError> {
    let factory = manager.factory().clone();
    let budgets = factory.informer::<PodDisruptionBudget>(InformerParams::all());
    let pods = factory.informer::<Pod>(InformerParams::all());
    let replica_sets = factory.informer::<ReplicaSet>(InformerParams::all());
    let deployments = factory.informer::<Deployment>(InformerParams::all());
    let stateful_sets = factory.informer::<StatefulSet>(InformerParams::all());
    let controllers = factory.informer::<ReplicationController>(InformerParams::all());
    let (by_pod, by_namespace) = (budgets.store(), budgets.store());
    let in_namespace = move |ns: Option<&str>| -> Vec<ObjectKey> {
        ns.map(|ns| by_namespace.list_namespace(ns))
            .unwrap_or_default()
            .iter()
            .map(|b| ObjectKey::new(ns, b.metadata.name.as_deref().unwrap_or_default()))
            .collect()
    };
    let (in_ns1, in_ns2, in_ns3, in_ns4) = (
        in_namespace.clone(),
        in_namespace.clone(),
        in_namespace.clone(),
        in_namespace,
    );
    let controller = manager
        .controller::<PodDisruptionBudget>(Source::from_informer(budgets))
        .watches::<Pod>(Source::from_informer(pods.clone()), move |pod: &Pod| {
            let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
            let labels = pod.metadata.labels.clone().unwrap_or_default();
            by_pod
                .list_namespace(ns)
                .iter()
                .filter(|b| selector(b).is_some_and(|s| s.matches(&labels)))
                .map(|b| ObjectKey::new(Some(ns), b.metadata.name.as_deref().unwrap_or_default()))
                .collect()
        })
        .watches::<ReplicaSet>(Source::from_informer(replica_sets.clone()), move |o| {
            in_ns1(o.metadata.namespace.as_deref())
        })
        .watches::<Deployment>(Source::from_informer(deployments.clone()), move |o| {
            in_ns2(o.metadata.namespace.as_deref())
        })
        .watches::<StatefulSet>(Source::from_informer(stateful_sets.clone()), move |o| {
            in_ns3(o.metadata.namespace.as_deref())
        })
        .watches::<ReplicationController>(Source::from_informer(controllers.clone()), move |o| {
            in_ns4(o.metadata.namespace.as_deref())
        })
        .named(NAME);
    let ctx = Ctx {
        client: manager.client().clone(),
        pods: pods.store(),
        replica_sets: replica_sets.store(),
        deployments: deployments.store(),
        stateful_sets: stateful_sets.store(),
        controllers: controllers.store(),
    };
    manager.add(controller, reconcile, Arc::new(ctx))
}

async fn reconcile(
    pdb: Arc<PodDisruptionBudget>,
    ctx: Arc<Ctx>,
) -> Result<Action, kubewright_client::Error> {
    if pdb.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let (Some(ns), Some(name)) = (
        pdb.metadata.namespace.as_deref(),
        pdb.metadata.name.as_deref(),
    ) else {
        return Ok(Action::await_change());
    };
    let now = jiff::Timestamp::now();
    let (status, recheck) = compute(&ctx, ns, &pdb, now);
    if pdb.status.as_ref() != Some(&status) {
        let mut next = (*pdb).clone();
        next.status = Some(status);
        let api: Api<PodDisruptionBudget> = Api::namespaced(ctx.client.clone(), ns);
        match api
            .replace_status(name, &PostParams::default(), &next)
            .await
        {
            Ok(_) => {}
            // Changed meanwhile: its event reconciles it again.
            Err(e) if e.is_conflict() || e.is_not_found() => return Ok(Action::await_change()),
            Err(e) => return Err(e),
        }
    }
    Ok(match recheck {
        Some(after) => Action::requeue(after),
        None => Action::await_change(),
    })
}

/// A budget's selector: `None` when missing or invalid (it selects nothing); an empty
/// one selects every pod of the namespace.
fn selector(pdb: &PodDisruptionBudget) -> Option<LabelSelector> {
    let sel = pdb.spec.as_ref()?.selector.as_ref()?;
    LabelSelector::from_k8s(sel).ok()
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// An int-or-string of a budget scaled against `total` (percentages round up, as
/// upstream's `GetScaledValueFromIntOrPercent(…, true)`).
fn scaled(v: &IntOrString, total: i64) -> Option<i64> {
    match v {
        IntOrString::Int(n) => Some(i64::from(*n)),
        IntOrString::String(s) => {
            let pct: i64 = s.strip_suffix('%')?.parse().ok()?;
            Some((pct * total + 99) / 100)
        }
    }
}

/// The controller reference of an object's metadata, as (kind, name, uid).
fn controller_of(
    refs: Option<&Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference>>,
) -> Option<(&str, &str, &str)> {
    refs?
        .iter()
        .find(|r| r.controller == Some(true))
        .map(|r| (r.kind.as_str(), r.name.as_str(), r.uid.as_str()))
}

/// The replicas of the controllers of `pods` (each counted once).
fn expected_scale(ctx: &Ctx, ns: &str, pods: &[Arc<Pod>]) -> i64 {
    let mut seen = HashSet::new();
    let mut total = 0;
    let same = |uid: &str, got: Option<&String>| got.map(String::as_str) == Some(uid);
    for pod in pods {
        let Some((kind, name, uid)) = controller_of(pod.metadata.owner_references.as_ref()) else {
            continue;
        };
        let found: Option<(String, i32)> = match kind {
            "ReplicaSet" => ctx
                .replica_sets
                .get_by_name(Some(ns), name)
                .filter(|rs| same(uid, rs.metadata.uid.as_ref()))
                .and_then(|rs| {
                    let replicas = rs.spec.replicas.unwrap_or(1);
                    // A ReplicaSet of a Deployment counts as the Deployment.
                    match controller_of(rs.metadata.owner_references.as_ref()) {
                        Some(("Deployment", dname, duid)) => ctx
                            .deployments
                            .get_by_name(Some(ns), dname)
                            .filter(|d| same(duid, d.metadata.uid.as_ref()))
                            .map(|d| {
                                let r = d.spec.replicas.unwrap_or(1);
                                (duid.to_string(), r)
                            }),
                        _ => Some((uid.to_string(), replicas)),
                    }
                }),
            "StatefulSet" => ctx
                .stateful_sets
                .get_by_name(Some(ns), name)
                .filter(|s| same(uid, s.metadata.uid.as_ref()))
                .map(|s| {
                    let r = s.spec.replicas.unwrap_or(1);
                    (uid.to_string(), r)
                }),
            "ReplicationController" => ctx
                .controllers
                .get_by_name(Some(ns), name)
                .filter(|c| same(uid, c.metadata.uid.as_ref()))
                .map(|c| {
                    let r = c.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
                    (uid.to_string(), r)
                }),
            _ => None,
        };
        if let Some((owner, replicas)) = found
            && seen.insert(owner)
        {
            total += i64::from(replicas);
        }
    }
    total
}

/// A budget's status from the cache, and when to look again (the next disrupted pod's
/// timeout), if ever.
fn compute(
    ctx: &Ctx,
    ns: &str,
    pdb: &PodDisruptionBudget,
    now: jiff::Timestamp,
) -> (PodDisruptionBudgetStatus, Option<Duration>) {
    let pods: Vec<Arc<Pod>> = match selector(pdb) {
        Some(sel) => ctx
            .pods
            .list_namespace(ns)
            .into_iter()
            .filter(|p| sel.matches(p.metadata.labels.as_ref().unwrap_or(&BTreeMap::new())))
            .collect(),
        None => Vec::new(),
    };
    let spec = pdb.spec.clone().unwrap_or_default();
    let (expected, desired) = match (&spec.max_unavailable, &spec.min_available) {
        (Some(mu), _) => {
            let expected = expected_scale(ctx, ns, &pods);
            let max = scaled(mu, expected).unwrap_or(0);
            (expected, (expected - max).max(0))
        }
        (None, Some(IntOrString::Int(n))) => (pods.len() as i64, i64::from(*n)),
        (None, Some(ma)) => {
            let expected = expected_scale(ctx, ns, &pods);
            (expected, scaled(ma, expected).unwrap_or(0))
        }
        (None, None) => (0, 0),
    };
    // Evicted pods not yet deleted stay out of the count for a while.
    let old = pdb.status.as_ref();
    let mut disrupted = BTreeMap::new();
    let mut recheck: Option<Duration> = None;
    for (pod, at) in old
        .and_then(|s| s.disrupted_pods.as_ref())
        .into_iter()
        .flatten()
    {
        let ends =
            at.0.checked_add(jiff::SignedDuration::try_from(DELETION_TIMEOUT).unwrap_or_default())
                .unwrap_or(at.0);
        let live = pods.iter().any(|p| {
            p.metadata.name.as_deref() == Some(pod.as_str())
                && p.metadata.deletion_timestamp.is_none()
        });
        if ends > now && live {
            disrupted.insert(pod.clone(), at.clone());
            let left = Duration::try_from(ends.duration_since(now)).unwrap_or_default();
            recheck = Some(recheck.map_or(left, |r| r.min(left)));
        }
    }
    let healthy = pods
        .iter()
        .filter(|p| {
            p.metadata.deletion_timestamp.is_none()
                && is_ready(p)
                && !p
                    .metadata
                    .name
                    .as_ref()
                    .is_some_and(|n| disrupted.contains_key(n))
        })
        .count() as i64;
    let mut allowed = healthy - desired;
    if expected <= 0 || allowed <= 0 {
        allowed = 0;
    }
    let generation = pdb.metadata.generation.unwrap_or(1);
    let (state, reason) = if allowed > 0 {
        ("True", "SufficientPods")
    } else {
        ("False", "InsufficientPods")
    };
    // An unchanged condition keeps its transition time.
    let since = old
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "DisruptionAllowed"))
        .filter(|c| c.status == state)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| Time(now.round(jiff::Unit::Second).unwrap_or(now)));
    let condition = Condition {
        type_: "DisruptionAllowed".into(),
        status: state.into(),
        reason: reason.into(),
        message: String::new(),
        observed_generation: Some(generation),
        last_transition_time: since,
    };
    let as_i32 = |n: i64| i32::try_from(n).unwrap_or(i32::MAX);
    let status = PodDisruptionBudgetStatus {
        observed_generation: Some(generation),
        current_healthy: Some(as_i32(healthy)),
        desired_healthy: Some(as_i32(desired)),
        disruptions_allowed: Some(as_i32(allowed)),
        expected_pods: Some(as_i32(expected)),
        conditions: Some(vec![condition]),
        disrupted_pods: (!disrupted.is_empty()).then_some(disrupted),
    };
    (status, recheck)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_round_up() {
        let pct = |s: &str| IntOrString::String(s.into());
        assert_eq!(scaled(&pct("50%"), 3), Some(2));
        assert_eq!(scaled(&pct("34%"), 3), Some(2));
        assert_eq!(scaled(&pct("0%"), 3), Some(0));
        assert_eq!(scaled(&IntOrString::Int(2), 10), Some(2));
        assert_eq!(scaled(&pct("half"), 3), None);
    }
}
