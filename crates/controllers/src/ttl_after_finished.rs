//! kube-controller-manager's `ttl-after-finished-controller`: a Job that finished (its
//! `Complete` or `Failed` condition is true) and has `spec.ttlSecondsAfterFinished` is
//! deleted, in the foreground, that many seconds after the condition's
//! `lastTransitionTime`.
//!
//! As upstream, a Job whose time came is read once more from the server (not the cache)
//! before it is deleted, and the delete carries its uid as a precondition, so a Job whose
//! TTL was just raised, or a new Job of the same name, is left alone.

use k8s_openapi::api::batch::v1::Job;
use kubewright_client::{Api, Client};
use kubewright_core::{DeleteParams, Preconditions, PropagationPolicy};
use kubewright_runtime::{Action, InformerParams, Manager, ManagerError, Predicate, Source};
use std::sync::Arc;
use std::time::Duration;

/// kube-controller-manager's name for this controller.
pub const NAME: &str = "ttl-after-finished-controller";

struct Ctx {
    client: Client,
}

/// Adds the controller to `manager`; it reconciles the Jobs that have a TTL.
pub fn add(manager: &mut Manager) -> Result<(), ManagerError> {
    let with_ttl = Predicate::named("ttl-and-finished", |_, j: &Job| {
        ttl_of(j).is_some() && finished_at(j).is_some()
    });
    let controller = manager
        .controller::<Job>(Source::new(InformerParams::all()).predicate(with_ttl))
        .named(NAME);
    let ctx = Ctx {
        client: manager.client().clone(),
    };
    manager.add(controller, reconcile, Arc::new(ctx))
}

async fn reconcile(job: Arc<Job>, ctx: Arc<Ctx>) -> Result<Action, kubewright_client::Error> {
    let now = jiff::Timestamp::now();
    match time_left(&job, now) {
        None => return Ok(Action::await_change()),
        Some(left) if !left.is_zero() => return Ok(Action::requeue(left)),
        Some(_) => {}
    }
    let (Some(ns), Some(name)) = (
        job.metadata.namespace.as_deref(),
        job.metadata.name.as_deref(),
    ) else {
        return Ok(Action::await_change());
    };
    let api: Api<Job> = Api::namespaced(ctx.client.clone(), ns);
    // The cache may be behind (a raised TTL, say): the server has the last word.
    let Some(fresh) = api.get_opt(name).await? else {
        return Ok(Action::await_change());
    };
    match time_left(&fresh, jiff::Timestamp::now()) {
        None => return Ok(Action::await_change()),
        Some(left) if !left.is_zero() => return Ok(Action::requeue(left)),
        Some(_) => {}
    }
    tracing::info!(
        namespace = ns,
        job = name,
        "deleting a finished Job whose TTL expired"
    );
    let dp = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Foreground),
        preconditions: Some(Preconditions {
            uid: fresh.metadata.uid.clone(),
            resource_version: None,
        }),
        ..Default::default()
    };
    match api.delete(name, &dp).await {
        Ok(_) => Ok(Action::await_change()),
        // Gone already, or replaced by another Job of that name (the uid differs).
        Err(e) if e.is_not_found() || e.is_conflict() => Ok(Action::await_change()),
        Err(e) => Err(e),
    }
}

fn ttl_of(job: &Job) -> Option<i64> {
    job.spec
        .as_ref()
        .and_then(|s| s.ttl_seconds_after_finished)
        .map(i64::from)
}

/// When the Job finished: the `lastTransitionTime` of its true `Complete` or `Failed`
/// condition.
fn finished_at(job: &Job) -> Option<jiff::Timestamp> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")?
        .last_transition_time
        .as_ref()
        .map(|t| t.0)
}

/// How long until the Job is due for deletion (zero: now); `None` when it never is: no
/// TTL, not finished, or already being deleted.
fn time_left(job: &Job, now: jiff::Timestamp) -> Option<Duration> {
    if job.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let ttl = ttl_of(job)?;
    let expires = finished_at(job)?
        .checked_add(jiff::SignedDuration::from_secs(ttl))
        .ok()?;
    let left = expires.duration_since(now);
    Some(Duration::try_from(left).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(ttl: Option<i32>, condition: Option<(&str, &str)>, deleting: bool) -> Job {
        let mut v = json!({"metadata": {"name": "j", "namespace": "n"},
            "spec": {"template": {"spec": {"containers": []}}}});
        if let Some(ttl) = ttl {
            v["spec"]["ttlSecondsAfterFinished"] = json!(ttl);
        }
        if let Some((kind, status)) = condition {
            v["status"] = json!({"conditions": [{"type": kind, "status": status,
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]});
        }
        if deleting {
            v["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:05Z");
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn time_left_counts_from_the_finishing_condition() {
        let at = |s: &str| s.parse::<jiff::Timestamp>().unwrap();
        let now = at("2026-01-01T00:00:10Z");
        let secs = |s| Some(Duration::from_secs(s));
        assert_eq!(
            time_left(&job(Some(60), Some(("Complete", "True")), false), now),
            secs(50)
        );
        assert_eq!(
            time_left(&job(Some(60), Some(("Failed", "True")), false), now),
            secs(50)
        );
        assert_eq!(
            time_left(&job(Some(5), Some(("Complete", "True")), false), now),
            secs(0)
        );
        assert_eq!(
            time_left(&job(Some(0), Some(("Complete", "True")), false), now),
            secs(0)
        );
        assert_eq!(
            time_left(&job(Some(60), Some(("Complete", "False")), false), now),
            None
        );
        assert_eq!(
            time_left(&job(Some(60), Some(("Suspended", "True")), false), now),
            None
        );
        assert_eq!(
            time_left(&job(None, Some(("Complete", "True")), false), now),
            None
        );
        assert_eq!(
            time_left(&job(Some(0), Some(("Complete", "True")), true), now),
            None
        );
    }
}
