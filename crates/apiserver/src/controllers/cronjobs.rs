//! kube-controller-manager's cronjob controller (batch/v1 CronJobs).
//!
//! A CronJob creates one Job per scheduled time (`<cronjob>-<minutes since the epoch>`,
//! owned by it, its template's labels and annotations plus
//! `batch.kubernetes.io/cronjob-scheduled-timestamp`), for the most recent time missed
//! since `status.lastScheduleTime` (or its creation), no older than
//! `startingDeadlineSeconds`. `concurrencyPolicy` decides what happens while one runs:
//! `Allow` starts another, `Forbid` waits (the time is taken once the running Job
//! finishes, if still within the deadline), `Replace` deletes the running ones first.
//! `status.active` lists the running Jobs, `lastSuccessfulTime` is the latest completion;
//! finished Jobs beyond `successfulJobsHistoryLimit`/`failedJobsHistoryLimit` are deleted
//! oldest first. Schedules are robfig/cron's, in `spec.timeZone` (else UTC, the zone of a
//! kube-controller-manager in a container). The events are upstream's.

use super::jobs::JOBS;
use super::workloads::{
    Key, controller_named, create_admitted, event, int, key_of, now, write_status,
};
use crate::http::api::ApiServer;
use crate::http::delete::{DeleteOptions, delete_obj};
use crate::registry::cron::{Schedule, load_zone};
use crate::registry::meta::meta_str;
use jiff::{SignedDuration, Timestamp};
use serde_json::{Map, Value, json};
use std::sync::Arc;

pub(super) const CRONJOBS: &str = "batch/cronjobs";
const COMPONENT: &str = "cronjob-controller";
const SCHEDULED_AT: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";
/// Upstream wakes 100 ms after a scheduled time.
const NEXT_DELTA: SignedDuration = SignedDuration::from_millis(100);
/// More missed times than this: a `TooManyMissedTimes` warning.
const MANY_MISSED: i64 = 100;

/// `Complete` or `Failed`: the first of them that is `True` (`FinishedCondition`).
pub(super) fn finished(job: &Value) -> Option<&'static str> {
    job.pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find_map(|c| match (c["type"].as_str(), c["status"].as_str()) {
            (Some("Complete"), Some("True")) => Some("Complete"),
            (Some("Failed"), Some("True")) => Some("Failed"),
            _ => None,
        })
}

fn time_at(obj: &Value, ptr: &str) -> Option<Timestamp> {
    obj.pointer(ptr)?.as_str()?.parse().ok()
}

/// How a metav1.Time prints.
fn wire_time(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn uid(obj: &Value) -> &str {
    meta_str(obj, "uid").unwrap_or("")
}

/// The outcome of `mostRecentScheduleTime`.
struct Recent {
    earliest: Timestamp,
    most_recent: Option<Timestamp>,
    many_missed: bool,
}

/// The latest scheduled time in (earliest, now], where earliest is the last schedule time
/// or the creation time, moved up to `now - startingDeadlineSeconds` with `deadline`.
fn most_recent(
    cj: &Value,
    at: Timestamp,
    s: &Schedule,
    tz: &jiff::tz::TimeZone,
    deadline: bool,
) -> Result<Recent, String> {
    let mut earliest = time_at(cj, "/status/lastScheduleTime")
        .or_else(|| time_at(cj, "/metadata/creationTimestamp"))
        .unwrap_or(at);
    if deadline
        && let Some(sds) = int(cj, "/spec/startingDeadlineSeconds")
        && let Ok(floor) = at.checked_sub(SignedDuration::from_secs(sds))
        && floor > earliest
    {
        earliest = floor;
    }
    let none = |earliest| Recent {
        earliest,
        most_recent: None,
        many_missed: false,
    };
    let Some(t1) = s.next(earliest, tz) else {
        return Ok(none(earliest));
    };
    if at < t1 {
        return Ok(none(earliest));
    }
    let Some(t2) = s.next(t1, tz).filter(|t2| *t2 <= at) else {
        return Ok(Recent {
            earliest,
            most_recent: Some(t1),
            many_missed: false,
        });
    };
    let interval = (t2 - t1).get_seconds();
    if interval < 1 {
        return Err("time difference between two schedules is less than 1 second".into());
    }
    let missed = (at - t1).get_seconds() / interval + 1;
    // Upstream jumps to about two intervals before now and steps from there; for an
    // irregular schedule that may overshoot, so step from t2 (at most a day of minutes)
    // when it does.
    let jump = t1
        .checked_add(SignedDuration::from_secs((missed - 2).max(0) * interval))
        .unwrap_or(t1);
    let step_from = |mut t: Timestamp, limit: usize| {
        let mut last = None;
        for _ in 0..limit {
            match s.next(t, tz) {
                Some(n) if n <= at => {
                    last = Some(n);
                    t = n;
                }
                _ => break,
            }
        }
        last
    };
    let most_recent = step_from(jump, 10_000).or_else(|| step_from(t2, 1_440).or(Some(t2)));
    Ok(Recent {
        earliest,
        most_recent,
        many_missed: missed > MANY_MISSED,
    })
}

/// When to look again: 100 ms after the next scheduled time (`nextScheduleTimeDuration`).
fn wake_at(cj: &Value, at: Timestamp, s: &Schedule, tz: &jiff::tz::TimeZone) -> Option<Timestamp> {
    let base = match most_recent(cj, at, s, tz, false) {
        Ok(Recent {
            most_recent: Some(t),
            ..
        }) => t,
        Ok(r) => r.earliest,
        Err(_) => at,
    };
    s.next(base, tz)?.checked_add(NEXT_DELTA).ok()
}

/// Deletes a Job of the CronJob (background propagation), with its event; whether it
/// is gone.
fn delete_job(srv: &Arc<ApiServer>, cj: &Value, job: &Value) -> bool {
    let Some(def) = srv.def("batch", "v1", "jobs") else {
        return false;
    };
    let (ns, name) = key_of(job);
    let opts = DeleteOptions {
        propagation: Some("Background".into()),
        ..Default::default()
    };
    match delete_obj(srv, &def, &ns, &name, &opts) {
        Ok(_) => {
            event(
                srv,
                cj,
                COMPONENT,
                false,
                "SuccessfulDelete",
                &format!("Deleted job {name}"),
            );
            true
        }
        Err(e) => {
            event(
                srv,
                cj,
                COMPONENT,
                true,
                "FailedDelete",
                &format!("Deleted job: {}", e.status.message),
            );
            false
        }
    }
}

fn drop_active(status: &mut Map<String, Value>, job_uid: &str) -> bool {
    let Some(active) = status.get_mut("active").and_then(Value::as_array_mut) else {
        return false;
    };
    let before = active.len();
    active.retain(|r| r["uid"] != job_uid);
    let changed = active.len() != before;
    if active.is_empty() {
        status.remove("active");
    }
    changed
}

fn active_refs(status: &Map<String, Value>) -> Vec<Value> {
    status
        .get("active")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// `cleanupFinishedJobs`: finished Jobs beyond the history limits, oldest first.
fn clean_up(
    srv: &Arc<ApiServer>,
    cj: &Value,
    jobs: &[Arc<Value>],
    status: &mut Map<String, Value>,
) {
    for (kind, field, default) in [
        ("Complete", "successfulJobsHistoryLimit", 3),
        ("Failed", "failedJobsHistoryLimit", 1),
    ] {
        let limit = int(cj, &format!("/spec/{field}")).unwrap_or(default).max(0) as usize;
        let mut done: Vec<&Arc<Value>> =
            jobs.iter().filter(|j| finished(j) == Some(kind)).collect();
        if done.len() <= limit {
            continue;
        }
        // Oldest start first; those without a start time last; then by name.
        done.sort_by_key(|j| {
            let start = time_at(j, "/status/startTime");
            (
                start.is_none(),
                start,
                meta_str(j, "name").unwrap_or("").to_string(),
            )
        });
        let extra = done.len() - limit;
        for job in done.into_iter().take(extra) {
            if delete_job(srv, cj, job) {
                drop_active(status, uid(job));
            }
        }
    }
}

/// The Job for the time `scheduled`.
fn job_for(cj: &Value, scheduled: Timestamp, zone: &jiff::tz::TimeZone) -> Value {
    let (ns, name) = key_of(cj);
    let template = cj.pointer("/spec/jobTemplate").unwrap_or(&Value::Null);
    let labels = template
        .pointer("/metadata/labels")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let mut annotations = template
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let local = scheduled.to_zoned(zone.clone());
    // Go's RFC 3339 prints a zero offset as `Z`.
    let stamp = if local.offset().seconds() == 0 {
        local.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
    } else {
        local.strftime("%Y-%m-%dT%H:%M:%S%:z").to_string()
    };
    annotations.insert(SCHEDULED_AT.into(), json!(stamp));
    let owner = json!({"apiVersion": "batch/v1", "kind": "CronJob", "name": name,
        "uid": uid(cj), "controller": true, "blockOwnerDeletion": true});
    json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": format!("{name}-{}", scheduled.as_second().div_euclid(60)),
            "namespace": ns, "labels": labels, "annotations": annotations,
            "ownerReferences": [owner]},
        "spec": template.get("spec").cloned().unwrap_or_else(|| json!({}))})
}

fn reference(job: &Value) -> Value {
    let (ns, name) = key_of(job);
    json!({"kind": "Job", "apiVersion": "batch/v1", "namespace": ns, "name": name,
        "uid": uid(job), "resourceVersion": meta_str(job, "resourceVersion").unwrap_or("")})
}

/// One sync of a CronJob; when it must be looked at again (besides on changes).
pub(super) async fn sync_cronjob(srv: &Arc<ApiServer>, ns: &str, name: &str) -> Option<Timestamp> {
    let cj = srv.storage.get(CRONJOBS, ns, name)?;
    let cj: Value = (*cj).clone();
    let at = now();
    let jobs: Vec<Arc<Value>> = srv
        .storage
        .list(JOBS, Some(ns))
        .0
        .into_iter()
        .filter(|j| controller_named(j, "CronJob") == Some(name))
        .collect();
    let mut status: Map<String, Value> = cj
        .get("status")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let (wake, retry) = schedule(srv, &cj, &jobs, &mut status, at).await;
    if write_status(srv, "cronjobs", &cj, status).is_none()
        && let Some(stored) = srv.storage.get(CRONJOBS, ns, name)
        && stored.pointer("/metadata/resourceVersion") != cj.pointer("/metadata/resourceVersion")
    {
        // Changed meanwhile: its event brings it back.
        return wake;
    }
    if retry {
        return at.checked_add(SignedDuration::from_secs(1)).ok();
    }
    wake
}

/// `syncCronJob` on a copy of the status; when to look again, and whether to retry soon
/// (a failed create or delete).
async fn schedule(
    srv: &Arc<ApiServer>,
    cj: &Value,
    jobs: &[Arc<Value>],
    status: &mut Map<String, Value>,
    at: Timestamp,
) -> (Option<Timestamp>, bool) {
    let ns = key_of(cj).0;
    clean_up(srv, cj, jobs, status);
    let warn = |reason: &str, msg: &str| event(srv, cj, COMPONENT, true, reason, msg);
    let tell = |reason: &str, msg: &str| event(srv, cj, COMPONENT, false, reason, msg);

    // What the Jobs say: finished ones leave `active`, the latest success is recorded.
    for job in jobs {
        let job_name = meta_str(job, "name").unwrap_or("");
        let listed = active_refs(status).iter().any(|r| r["uid"] == uid(job));
        match finished(job) {
            None if !listed && !super::workloads::deleting(job) => warn(
                "UnexpectedJob",
                &format!("Saw a job that the controller did not create or forgot: {job_name}"),
            ),
            None => {}
            Some(cond) => {
                if listed {
                    drop_active(status, uid(job));
                    tell(
                        "SawCompletedJob",
                        &format!("Saw completed job: {job_name}, condition: {cond}"),
                    );
                }
                if cond == "Complete"
                    && let Some(done) = time_at(job, "/status/completionTime")
                {
                    let last = status
                        .get("lastSuccessfulTime")
                        .and_then(Value::as_str)
                        .and_then(|t| t.parse::<Timestamp>().ok());
                    if last.is_none_or(|l| done > l) {
                        status.insert("lastSuccessfulTime".into(), json!(wire_time(done)));
                    }
                }
            }
        }
    }
    // Active Jobs that are gone.
    for r in active_refs(status) {
        let gone = !jobs.iter().any(|j| uid(j) == r["uid"])
            && srv
                .storage
                .get(JOBS, &ns, r["name"].as_str().unwrap_or(""))
                .is_none();
        if gone {
            drop_active(status, r["uid"].as_str().unwrap_or(""));
            tell(
                "MissingJob",
                &format!(
                    "Active job went missing: {}",
                    r["name"].as_str().unwrap_or("")
                ),
            );
        }
    }
    if super::workloads::deleting(cj) {
        return (None, false);
    }
    let zone = match cj.pointer("/spec/timeZone").and_then(Value::as_str) {
        None => jiff::tz::TimeZone::UTC,
        Some(tz) => match load_zone(tz).filter(|_| tz != "Local") {
            Some(z) => z,
            None => {
                warn(
                    "UnknownTimeZone",
                    &format!("invalid timeZone: {tz:?}: unknown time zone {tz}"),
                );
                return (None, false);
            }
        },
    };
    if cj.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true) {
        return (None, false);
    }
    let spec = cj
        .pointer("/spec/schedule")
        .and_then(Value::as_str)
        .unwrap_or("");
    if spec.contains("TZ") {
        warn(
            "UnsupportedSchedule",
            &format!(
                "CRON_TZ or TZ used in schedule {spec:?} is not officially supported, see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details"
            ),
        );
    }
    let sched = match Schedule::parse(spec) {
        Ok(s) => s,
        Err(e) => {
            warn(
                "UnparseableSchedule",
                &format!("unparseable schedule: {spec:?} : {e}"),
            );
            return (None, false);
        }
    };
    // The status as it is now decides the times (lastScheduleTime may have been set).
    let mut current = cj.clone();
    current["status"] = Value::Object(status.clone());
    let recent = match most_recent(&current, at, &sched, &zone, true) {
        Ok(r) => r,
        Err(e) => {
            warn(
                "InvalidSchedule",
                &format!("invalid schedule: {spec} : {e}"),
            );
            return (None, false);
        }
    };
    let wake = |c: &Value| wake_at(c, at, &sched, &zone);
    if recent.many_missed {
        warn(
            "TooManyMissedTimes",
            "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew",
        );
    }
    let Some(scheduled) = recent.most_recent.filter(|t| *t <= at) else {
        return (wake(&current), false);
    };
    let job = job_for(cj, scheduled, &zone);
    let job_name = meta_str(&job, "name").unwrap_or("").to_string();
    let handled = active_refs(status)
        .iter()
        .any(|r| r["name"] == job_name.as_str() && r["namespace"] == ns.as_str())
        || time_at(&current, "/status/lastScheduleTime") == Some(scheduled);
    if handled {
        return (wake(&current), false);
    }
    let policy = cj
        .pointer("/spec/concurrencyPolicy")
        .and_then(Value::as_str)
        .unwrap_or("Allow");
    if policy == "Forbid" && !active_refs(status).is_empty() {
        tell(
            "JobAlreadyActive",
            "Not starting job because prior execution is running and concurrency policy is Forbid",
        );
        return (wake(&current), false);
    }
    if policy == "Replace" {
        for r in active_refs(status) {
            let running = srv.storage.get(JOBS, &ns, r["name"].as_str().unwrap_or(""));
            if let Some(running) = running
                && !delete_job(srv, cj, &running)
            {
                return (None, true);
            }
            drop_active(status, r["uid"].as_str().unwrap_or(""));
        }
    }
    let created = match create_admitted(srv, "batch", "jobs", &ns, job).await {
        Ok(stored) => {
            tell("SuccessfulCreate", &format!("Created job {job_name}"));
            stored
        }
        Err(e) if e.status.code == 409 => {
            // Made before (a status write lost): adopt it if it is ours and not listed.
            let Some(existing) = srv.storage.get(JOBS, &ns, &job_name) else {
                return (None, true);
            };
            let ours =
                super::workloads::controller_of(&existing).is_some_and(|r| r["uid"] == uid(cj));
            let listed = active_refs(status)
                .iter()
                .any(|r| r["uid"] == uid(&existing));
            if !ours || listed {
                return (None, false);
            }
            (*existing).clone()
        }
        Err(e) => {
            warn(
                "FailedCreate",
                &format!("Error creating job: {}", e.status.message),
            );
            return (None, true);
        }
    };
    let mut active = active_refs(status);
    active.push(reference(&created));
    status.insert("active".into(), Value::Array(active));
    status.insert("lastScheduleTime".into(), json!(wire_time(scheduled)));
    current["status"] = Value::Object(status.clone());
    (wake(&current), false)
}

/// The CronJob that controls `job`.
pub(super) fn cronjob_of(job: &Value) -> Option<Key> {
    controller_named(job, "CronJob").map(|c| (key_of(job).0, c.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cronjob(schedule: &str, created: &str, last: Option<&str>) -> Value {
        let mut cj = json!({"metadata": {"name": "c", "namespace": "n", "uid": "u",
            "creationTimestamp": created}, "spec": {"schedule": schedule}});
        if let Some(l) = last {
            cj["status"] = json!({"lastScheduleTime": l});
        }
        cj
    }

    fn recent(cj: &Value, at: &str, deadline: bool) -> (Option<String>, bool) {
        let s = Schedule::parse(cj["spec"]["schedule"].as_str().unwrap()).unwrap();
        let r = most_recent(
            cj,
            at.parse().unwrap(),
            &s,
            &jiff::tz::TimeZone::UTC,
            deadline,
        )
        .unwrap();
        (r.most_recent.map(|t| t.to_string()), r.many_missed)
    }

    #[test]
    fn the_most_recent_missed_time_is_taken() {
        let cj = cronjob("*/5 * * * *", "2026-12-05T10:01:00Z", None);
        assert_eq!(recent(&cj, "2026-12-05T10:04:00Z", true), (None, false));
        assert_eq!(
            recent(&cj, "2026-12-05T10:05:00Z", true),
            (Some("2026-12-05T10:05:00Z".into()), false)
        );
        assert_eq!(
            recent(&cj, "2026-12-05T10:27:00Z", true),
            (Some("2026-12-05T10:25:00Z".into()), false)
        );
        // A day later: many missed, the latest is still the one taken.
        assert_eq!(
            recent(&cj, "2026-12-06T10:27:00Z", true),
            (Some("2026-12-06T10:25:00Z".into()), true)
        );
        // After the last schedule time only.
        let cj = cronjob(
            "*/5 * * * *",
            "2026-12-05T10:01:00Z",
            Some("2026-12-05T10:25:00Z"),
        );
        assert_eq!(recent(&cj, "2026-12-05T10:29:00Z", true), (None, false));
        // An irregular schedule steps to the right time.
        let cj = cronjob("30 6-16/4 * * 1-5", "2026-11-30T00:00:00Z", None);
        assert_eq!(
            recent(&cj, "2026-12-04T15:00:00Z", true),
            (Some("2026-12-04T14:30:00Z".into()), false)
        );
    }

    #[test]
    fn a_starting_deadline_bounds_how_late_a_time_may_start() {
        let mut cj = cronjob("0 * * * *", "2026-12-05T08:30:00Z", None);
        cj["spec"]["startingDeadlineSeconds"] = json!(600);
        // 10:00 is more than 10 minutes ago at 10:20.
        assert_eq!(recent(&cj, "2026-12-05T10:20:00Z", true), (None, false));
        assert_eq!(
            recent(&cj, "2026-12-05T10:05:00Z", true),
            (Some("2026-12-05T10:00:00Z".into()), false)
        );
        // The wake-up ignores the deadline: the next hour.
        let s = Schedule::parse("0 * * * *").unwrap();
        let at: Timestamp = "2026-12-05T10:20:00Z".parse().unwrap();
        assert_eq!(
            wake_at(&cj, at, &s, &jiff::tz::TimeZone::UTC).map(|t| t.to_string()),
            Some("2026-12-05T11:00:00.1Z".into())
        );
    }

    #[test]
    fn jobs_are_named_by_minute_and_stamped_in_the_zone() {
        let cj = json!({"metadata": {"name": "c", "namespace": "n", "uid": "u"},
            "spec": {"schedule": "0 9 * * *", "jobTemplate": {"metadata": {"labels": {"a": "b"}},
                "spec": {"template": {"spec": {}}}}}});
        let t: Timestamp = "2026-12-05T08:00:00Z".parse().unwrap();
        let j = job_for(&cj, t, &load_zone("Europe/Berlin").unwrap());
        assert_eq!(j["metadata"]["name"], format!("c-{}", t.as_second() / 60));
        assert_eq!(
            j["metadata"]["annotations"][SCHEDULED_AT],
            "2026-12-05T09:00:00+01:00"
        );
        assert_eq!(j["metadata"]["labels"], json!({"a": "b"}));
        assert_eq!(j["metadata"]["ownerReferences"][0]["kind"], "CronJob");
        let j = job_for(&cj, t, &jiff::tz::TimeZone::UTC);
        assert_eq!(
            j["metadata"]["annotations"][SCHEDULED_AT],
            "2026-12-05T08:00:00Z"
        );
    }
}
