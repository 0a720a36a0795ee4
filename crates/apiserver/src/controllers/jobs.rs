//! kube-controller-manager's job controller (batch/v1 Jobs).
//!
//! A Job runs pods from its template (`<job>-<random>`, or `<job>-<index>-<random>` for an
//! `Indexed` one, owned by it, with the `batch.kubernetes.io/job-tracking` finalizer)
//! until enough of them succeed: `parallelism` at a time, `completions` in all (without
//! `completions`, until one succeeds and the others finish). A finished pod is counted
//! as upstream counts it, first by uid in `status.uncountedTerminatedPods`, then, once
//! its finalizer is gone, in `succeeded`/`failed` (and `completedIndexes`). The Job
//! completes (`SuccessCriteriaMet`, then `Complete`, `completionTime`), or fails
//! (`FailureTarget`, then `Failed`) when more pods failed than `backoffLimit` allows or it
//! ran longer than `activeDeadlineSeconds`; a failed or completed Job's remaining pods
//! are deleted. After a failure the next pod waits for the back-off (10 s, doubling,
//! at most 6 min). `suspend` deletes the active pods and sets `Suspended`. `ready`,
//! `active` and `terminating` count the pods; the events are upstream's
//! (`SuccessfulCreate`, `SuccessfulDelete`, `Completed`, `BackoffLimitExceeded`,
//! `DeadlineExceeded`, `Suspended`, `Resumed`).
//!
//! Not done: pod failure policies and success policies, `backoffLimitPerIndex`,
//! and `podReplacementPolicy: Failed` (pods are replaced once terminating). The
//! ttl-after-finished controller is in cronjobs.rs.

use super::workloads::{
    Key, controller_named, controller_of, create_pod, delete_pod, deleting, event, int, key_of,
    now, owner_ref, ready_since, terminal, update, write_status,
};
use crate::http::api::ApiServer;
use crate::registry::meta::{meta_str, now_time};
use serde_json::{Map, Value, json};
use std::collections::BTreeSet;
use std::sync::Arc;

pub(super) const JOBS: &str = "batch/jobs";
const PODS: &str = "/pods";
const TRACKING: &str = "batch.kubernetes.io/job-tracking";
const INDEX: &str = "batch.kubernetes.io/job-completion-index";
const COMPONENT: &str = "job-controller";
/// First delay before a failed pod is replaced; it doubles per failure.
const BACKOFF_SECS: i64 = 10;
const MAX_BACKOFF_SECS: i64 = 360;

fn condition_true(job: &Value, kind: &str) -> bool {
    job.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == kind && c["status"] == "True")
        })
}

/// Sets condition `kind` (a Job condition: probe and transition times).
fn set_condition(
    status: &mut Map<String, Value>,
    kind: &str,
    state: &str,
    reason: &str,
    msg: &str,
) {
    let conds = status.entry("conditions").or_insert_with(|| json!([]));
    let Some(list) = conds.as_array_mut() else {
        return;
    };
    let t = now_time();
    if let Some(c) = list.iter_mut().find(|c| c["type"] == kind) {
        if c["status"] != state {
            c["lastTransitionTime"] = json!(t);
        }
        if c["status"] != state || c["reason"] != reason {
            c["status"] = json!(state);
            c["reason"] = json!(reason);
            c["message"] = json!(msg);
            c["lastProbeTime"] = json!(t);
        }
        return;
    }
    list.push(json!({"type": kind, "status": state, "lastProbeTime": t,
        "lastTransitionTime": t, "reason": reason, "message": msg}));
}

fn has_tracking(pod: &Value) -> bool {
    pod.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| f.iter().any(|x| x == TRACKING))
}

fn remove_tracking(srv: &ApiServer, pod: &Value) {
    if !has_tracking(pod) {
        return;
    }
    let mut next = pod.clone();
    if let Some(f) = next
        .pointer_mut("/metadata/finalizers")
        .and_then(Value::as_array_mut)
    {
        f.retain(|x| x != TRACKING);
    }
    update(srv, "pods", next, None);
}

fn pod_index(pod: &Value) -> Option<i64> {
    pod.pointer("/metadata/annotations")
        .and_then(|a| a.get(INDEX))
        .and_then(Value::as_str)
        .and_then(|i| i.parse().ok())
}

/// Upstream's `completedIndexes` form: sorted, runs as `a-b`, comma-separated.
fn format_indexes(set: &BTreeSet<i64>) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut run: Option<(i64, i64)> = None;
    for &i in set {
        run = match run {
            Some((a, b)) if i == b + 1 => Some((a, i)),
            Some((a, b)) => {
                out.push(if a == b {
                    a.to_string()
                } else {
                    format!("{a}-{b}")
                });
                Some((i, i))
            }
            None => Some((i, i)),
        };
    }
    if let Some((a, b)) = run {
        out.push(if a == b {
            a.to_string()
        } else {
            format!("{a}-{b}")
        });
    }
    out.join(",")
}

fn parse_indexes(s: &str) -> BTreeSet<i64> {
    let mut set = BTreeSet::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<i64>(), b.parse::<i64>()) {
                    set.extend(a..=b.min(a + 1_000_000));
                }
            }
            None => {
                if let Ok(i) = part.parse() {
                    set.insert(i);
                }
            }
        }
    }
    set
}

/// When a failed pod finished (its containers' `finishedAt`, else its last condition).
fn failed_at(pod: &Value) -> Option<jiff::Timestamp> {
    let statuses = pod
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array);
    statuses
        .into_iter()
        .flatten()
        .filter_map(|c| {
            c.pointer("/state/terminated/finishedAt")
                .and_then(Value::as_str)
        })
        .chain(
            pod.pointer("/status/conditions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|c| c.get("lastTransitionTime").and_then(Value::as_str)),
        )
        .filter_map(|t| t.parse().ok())
        .max()
}

/// One Job; whether it must be looked at again later (a back-off or a deadline).
pub(super) async fn sync_job(
    srv: &Arc<ApiServer>,
    ns: &str,
    name: &str,
    names: Vec<String>,
) -> bool {
    let job = srv.storage.get(JOBS, ns, name);
    let uid = job
        .as_deref()
        .and_then(|j| meta_str(j, "uid"))
        .unwrap_or("")
        .to_string();
    let mut pods: Vec<Value> = Vec::new();
    for pod_name in names {
        if let Some(pod) = srv.storage.get(PODS, ns, &pod_name)
            && controller_of(&pod)
                .and_then(|r| r.get("uid"))
                .and_then(Value::as_str)
                .is_some_and(|u| job.is_none() || u == uid)
        {
            pods.push((*pod).clone());
        }
    }
    // A Job that is gone (or going) no longer holds its pods.
    let Some(job) = job.filter(|j| !deleting(j)) else {
        for pod in &pods {
            remove_tracking(srv, pod);
        }
        return false;
    };
    let mut job: Value = (*job).clone();
    let mut status: Map<String, Value> = job
        .get("status")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let indexed = job.pointer("/spec/completionMode").and_then(Value::as_str) == Some("Indexed");
    let finished = condition_true(&job, "Complete") || condition_true(&job, "Failed");

    // 1. Finished pods still holding the finalizer: recorded by uid, released, counted.
    let uncounted = |status: &Map<String, Value>, which: &str| -> Vec<String> {
        status
            .get("uncountedTerminatedPods")
            .and_then(|u| u.get(which))
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let (mut u_ok, mut u_failed) = (
        uncounted(&status, "succeeded"),
        uncounted(&status, "failed"),
    );
    let mut recorded = false;
    for pod in pods
        .iter()
        .filter(|p| has_tracking(p) && (terminal(p) || deleting(p)))
    {
        let pod_uid = meta_str(pod, "uid").unwrap_or("").to_string();
        if u_ok.contains(&pod_uid) || u_failed.contains(&pod_uid) {
            continue;
        }
        // A pod deleted before it finished counts as failed.
        if pod.pointer("/status/phase").and_then(Value::as_str) == Some("Succeeded") {
            u_ok.push(pod_uid);
        } else if terminal(pod) || deleting(pod) {
            u_failed.push(pod_uid);
        }
        recorded = true;
    }
    if recorded {
        status.insert(
            "uncountedTerminatedPods".into(),
            json!({"succeeded": u_ok, "failed": u_failed}),
        );
        let mut next = job.clone();
        next["status"] = Value::Object(status.clone());
        // The final write below goes on from what this one stored.
        match update(srv, "jobs", next, Some("status")) {
            Some(stored) => job = stored,
            None => return true,
        }
    }
    for pod in &pods {
        let pod_uid = meta_str(pod, "uid").unwrap_or("");
        if u_ok.iter().chain(&u_failed).any(|u| u == pod_uid) {
            remove_tracking(srv, pod);
        }
    }
    let mut completed: BTreeSet<i64> = status
        .get("completedIndexes")
        .and_then(Value::as_str)
        .map(parse_indexes)
        .unwrap_or_default();
    let (mut succeeded, mut failed) = (
        int(&job, "/status/succeeded").unwrap_or(0),
        int(&job, "/status/failed").unwrap_or(0),
    );
    for u in &u_ok {
        succeeded += 1;
        if let Some(i) = pods
            .iter()
            .find(|p| meta_str(p, "uid") == Some(u.as_str()))
            .and_then(pod_index)
        {
            completed.insert(i);
        }
    }
    failed += u_failed.len() as i64;
    status.insert("uncountedTerminatedPods".into(), json!({}));

    // 2. What the Job needs now.
    let active: Vec<&Value> = pods
        .iter()
        .filter(|p| !terminal(p) && !deleting(p))
        .collect();
    let ready = active.iter().filter(|p| ready_since(p).is_some()).count();
    let terminating = pods.iter().filter(|p| deleting(p) && !terminal(p)).count();
    let parallelism = int(&job, "/spec/parallelism").unwrap_or(1).max(0);
    let completions = int(&job, "/spec/completions");
    let backoff_limit = int(&job, "/spec/backoffLimit").unwrap_or(6);
    let suspended = job.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true);
    let at = now();
    let mut later = false;
    let mut delete_active = false;
    let mut to_create: Vec<Option<i64>> = Vec::new();
    let success = match (indexed, completions) {
        (true, Some(c)) => completed.range(0..c).count() as i64 >= c,
        (false, Some(c)) => succeeded >= c,
        (_, None) => succeeded >= 1 && active.is_empty(),
    };
    let started = status
        .get("startTime")
        .and_then(Value::as_str)
        .and_then(|t| t.parse::<jiff::Timestamp>().ok());
    let deadline_over = int(&job, "/spec/activeDeadlineSeconds").and_then(|d| {
        let end = started?
            .checked_add(jiff::SignedDuration::from_secs(d))
            .ok()?;
        if end <= at {
            Some(true)
        } else {
            later = true;
            None
        }
    });
    if finished {
        delete_active = true;
    } else if suspended {
        delete_active = true;
        if !condition_true(&job, "Suspended") {
            set_condition(
                &mut status,
                "Suspended",
                "True",
                "JobSuspended",
                "Job suspended",
            );
            event(srv, &job, COMPONENT, false, "Suspended", "Job suspended");
        }
        status.remove("startTime");
    } else if failed > backoff_limit || deadline_over == Some(true) {
        let (reason, msg) = if failed > backoff_limit {
            (
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit",
            )
        } else {
            (
                "DeadlineExceeded",
                "Job was active longer than specified deadline",
            )
        };
        set_condition(&mut status, "FailureTarget", "True", reason, msg);
        set_condition(&mut status, "Failed", "True", reason, msg);
        event(srv, &job, COMPONENT, true, reason, msg);
        delete_active = true;
    } else if success {
        let msg = "Reached expected number of succeeded pods";
        set_condition(
            &mut status,
            "SuccessCriteriaMet",
            "True",
            "CompletionsReached",
            msg,
        );
        set_condition(&mut status, "Complete", "True", "CompletionsReached", msg);
        status.insert("completionTime".into(), json!(now_time()));
        event(srv, &job, COMPONENT, false, "Completed", "Job completed");
        delete_active = true;
    } else {
        if condition_true(&job, "Suspended") {
            set_condition(
                &mut status,
                "Suspended",
                "False",
                "JobResumed",
                "Job resumed",
            );
            event(srv, &job, COMPONENT, false, "Resumed", "Job resumed");
        }
        if !status.contains_key("startTime") {
            status.insert("startTime".into(), json!(now_time()));
            if let Some(d) = int(&job, "/spec/activeDeadlineSeconds")
                && d > 0
            {
                later = true;
            }
        }
        // Pods are replaced once those that are going are gone.
        let busy = active.len() as i64 + terminating as i64;
        let want = match (indexed, completions) {
            (false, Some(c)) => parallelism.min(c - succeeded).max(0),
            (false, None) if succeeded > 0 => 0,
            _ => parallelism,
        };
        let mut room = (want - busy).max(0);
        // After a failure, the next pod waits for the back-off.
        if failed > 0 && room > 0 {
            let delay = (BACKOFF_SECS << (failed - 1).min(10)).min(MAX_BACKOFF_SECS);
            let last = pods
                .iter()
                .filter(|p| p.pointer("/status/phase").and_then(Value::as_str) == Some("Failed"))
                .filter_map(failed_at)
                .max();
            if let Some(last) = last
                && last
                    .checked_add(jiff::SignedDuration::from_secs(delay))
                    .is_ok_and(|end| end > at)
            {
                room = 0;
                later = true;
            }
        }
        if indexed {
            let c = completions.unwrap_or(0);
            let running: BTreeSet<i64> = active.iter().filter_map(|p| pod_index(p)).collect();
            for i in (0..c).filter(|i| !completed.contains(i) && !running.contains(i)) {
                if room == 0 {
                    break;
                }
                to_create.push(Some(i));
                room -= 1;
            }
        } else {
            to_create.extend((0..room).map(|_| None));
        }
    }
    if delete_active {
        for pod in &active {
            delete_pod(srv, &job, COMPONENT, pod, |n| format!("Deleted pod: {n}"));
        }
    }
    let mut created = 0;
    for index in to_create {
        match create_pod(srv, ns, pod_for(&job, index)).await {
            Ok(p) => {
                created += 1;
                event(
                    srv,
                    &job,
                    COMPONENT,
                    false,
                    "SuccessfulCreate",
                    &format!("Created pod: {}", meta_str(&p, "name").unwrap_or("")),
                );
            }
            Err(e) => {
                event(
                    srv,
                    &job,
                    COMPONENT,
                    true,
                    "FailedCreate",
                    &format!("Error creating: {}", e.status.message),
                );
                break;
            }
        }
    }
    // 3. The counts.
    let active_now = if delete_active {
        0
    } else {
        active.len() + created
    };
    let mut put = |k: &str, v: i64, keep_zero: bool| {
        if v != 0 || keep_zero {
            status.insert(k.into(), json!(v));
        } else {
            status.remove(k);
        }
    };
    put("active", active_now as i64, false);
    put("succeeded", succeeded, false);
    put("failed", failed, false);
    put("ready", if delete_active { 0 } else { ready as i64 }, true);
    put(
        "terminating",
        terminating as i64
            + if delete_active {
                active.len() as i64
            } else {
                0
            },
        true,
    );
    if indexed {
        status.insert("completedIndexes".into(), json!(format_indexes(&completed)));
    }
    write_status(srv, "jobs", &job, status);
    later
}

/// A pod of the Job: its template, owned by it, with the tracking finalizer (and, for
/// an index, the index annotation, label and hostname).
fn pod_for(job: &Value, index: Option<i64>) -> Value {
    let (ns, name) = key_of(job);
    let template = job.pointer("/spec/template").cloned().unwrap_or_default();
    let mut meta = Map::new();
    let prefix = match index {
        Some(i) => format!("{name}-{i}-"),
        None => format!("{name}-"),
    };
    meta.insert("generateName".into(), json!(prefix));
    meta.insert("namespace".into(), json!(ns));
    for k in ["labels", "annotations"] {
        if let Some(v) = template.pointer(&format!("/metadata/{k}")) {
            meta.insert(k.into(), v.clone());
        }
    }
    let mut finalizers: Vec<Value> = template
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    finalizers.push(json!(TRACKING));
    meta.insert("finalizers".into(), Value::Array(finalizers));
    meta.insert("ownerReferences".into(), json!([owner_ref(job, "Job")]));
    let mut spec = template.get("spec").cloned().unwrap_or_else(|| json!({}));
    if let Some(i) = index {
        for k in ["annotations", "labels"] {
            let m = meta.entry(k).or_insert_with(|| json!({}));
            m[INDEX] = json!(i.to_string());
        }
        if spec.get("hostname").is_none() {
            spec["hostname"] = json!(format!("{name}-{i}"));
        }
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
}

/// The Jobs whose pods or selves changed, from pod and Job events.
pub(super) fn job_of(pod: &Value) -> Option<Key> {
    controller_named(pod, "Job").map(|j| (key_of(pod).0, j.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completed_indexes_print_and_read_as_upstream() {
        let set: BTreeSet<i64> = [0, 1, 2, 4, 6, 7].into_iter().collect();
        assert_eq!(format_indexes(&set), "0-2,4,6-7");
        assert_eq!(parse_indexes("0-2,4,6-7"), set);
        assert_eq!(format_indexes(&BTreeSet::new()), "");
    }
}
