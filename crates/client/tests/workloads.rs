//! Deployments and ReplicaSets as kube-controller-manager's controllers run them: a
//! Deployment gets a ReplicaSet per pod template (`pod-template-hash`, revisions), a
//! ReplicaSet keeps its number of pods, a rolling update stays within maxSurge and
//! maxUnavailable, Recreate scales the old pods away first, and the status and
//! conditions say where it stands. Runs against the embedded server, or a real cluster
//! when KUBEWRIGHT_TEST_KUBECONFIG is set (whose pods stay Pending: it has no nodes);
//! the rollout to completion needs running pods: the embedded server's simulated
//! kubelet.

#![allow(clippy::unwrap_used, clippy::panic)] // test code: a failed unwrap is a failed test

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{
    ControllerRevision, DaemonSet, Deployment, ReplicaSet, StatefulSet,
};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{
    Endpoints, Event, Node, PersistentVolumeClaim, Pod, ReplicationController, Service,
};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kubewright_apiserver::Kubelet;
use kubewright_client::Api;
use kubewright_core::{ListParams, Patch, PatchParams, PostParams, WatchParams};
use kubewright_testing::TestEnv;
use serde_json::{Value, json};
use std::future::Future;
use std::time::Duration;

fn deployment(name: &str, app: &str, replicas: i32, strategy: Value) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": app}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": app}},
            "strategy": strategy,
            "template": {"metadata": {"labels": {"app": app}},
                "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
                    "terminationGracePeriodSeconds": 0}}}
    }))
    .unwrap()
}

/// An embedded server with the simulated kubelet; `None` (the test skipped, visibly)
/// against a real cluster, which has no nodes.
async fn kubelet_env() -> Option<TestEnv> {
    if kubewright_testing::embedded_only("the test cluster has no nodes: its pods never run") {
        return None;
    }
    let server = kubewright_testing::embedded_server()
        .kubelet(Kubelet::new())
        .start()
        .await
        .unwrap();
    Some(TestEnv::for_server(server))
}

/// Every change of the namespace's `K`s from now on (a watch of 60 s).
async fn changes_of<K>(
    env: &TestEnv,
    ns: &str,
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
    let api: Api<K> = Api::namespaced(env.client(), ns);
    let rv = api.list(&ListParams::default()).await.unwrap();
    // The watch outlives the wait.
    let wp = WatchParams::default().timeout(limit.as_secs() as u32 + 10);
    api.watch(&wp, &rv.metadata.resource_version.unwrap_or_default())
        .await
        .unwrap()
        .map(|_| ())
        .boxed()
}

/// Re-checks `check` on every change of the namespace's workloads, pods, events,
/// Services and their endpoints until it passes (30 s at most; then the last failure is
/// the test's).
async fn settle<F, Fut>(env: &TestEnv, ns: &str, check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    settle_within(env, ns, Duration::from_secs(30), check).await;
}

/// [`settle`], waiting at most `limit`.
async fn settle_within<F, Fut>(env: &TestEnv, ns: &str, limit: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let mut changes = futures::stream::select_all([
        changes_of::<Deployment>(env, ns, limit).await,
        changes_of::<ReplicaSet>(env, ns, limit).await,
        changes_of::<StatefulSet>(env, ns, limit).await,
        changes_of::<DaemonSet>(env, ns, limit).await,
        changes_of::<Job>(env, ns, limit).await,
        changes_of::<CronJob>(env, ns, limit).await,
        changes_of::<Pod>(env, ns, limit).await,
        // Controllers record events asynchronously (client-go's broadcaster): checks
        // on them wait for them too.
        changes_of::<Event>(env, ns, limit).await,
        changes_of::<Service>(env, ns, limit).await,
        changes_of::<Endpoints>(env, ns, limit).await,
        changes_of::<EndpointSlice>(env, ns, limit).await,
    ]);
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let why = match check().await {
            Ok(()) => return,
            Err(why) => why,
        };
        let next = tokio::time::timeout_at(deadline, changes.next())
            .await
            .map(|e| e.is_some());
        match next {
            Ok(true) => {}
            // A watch ended: one more check, then give up if it still fails.
            Ok(false) | Err(_) => {
                if let Err(last) = check().await {
                    panic!("did not settle: {why}; last: {last}");
                }
                return;
            }
        }
    }
}

/// The (reason, message) of every event in `ns`.
async fn events_in(env: &TestEnv, ns: &str) -> Vec<(String, String)> {
    let events: Api<Event> = Api::namespaced(env.client(), ns);
    events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|e| (e.reason.unwrap_or_default(), e.message.unwrap_or_default()))
        .collect()
}

/// Waits until `ns` holds an event with each (reason, message); `None` matches any
/// message.
async fn await_events(env: &TestEnv, ns: &str, wanted: &[(&str, Option<&str>)]) {
    settle(env, ns, || async {
        let events = events_in(env, ns).await;
        let missing: Vec<_> = wanted
            .iter()
            .filter(|(r, m)| {
                !events
                    .iter()
                    .any(|(er, em)| er == r && m.is_none_or(|m| m == em))
            })
            .collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(format!("missing {missing:?} in {events:?}"))
        }
    })
    .await;
}

/// A new pod template: another image.
async fn new_image(api: &Api<Deployment>, name: &str) {
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]}}}});
    api.patch(name, &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .unwrap();
}

fn annotation(rs: &ReplicaSet, key: &str) -> Option<String> {
    rs.metadata.annotations.as_ref()?.get(key).cloned()
}

fn condition(d: &Deployment, kind: &str) -> Option<(String, String, String)> {
    d.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_.as_deref() == Some(kind))
        .map(|c| {
            (
                c.status.clone().unwrap_or_default(),
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            )
        })
}

/// The namespace's ReplicaSets, oldest revision first.
async fn replicasets(api: &Api<ReplicaSet>) -> Vec<ReplicaSet> {
    let mut list = api.list(&ListParams::default()).await.unwrap().items;
    list.sort_by_key(|rs| {
        annotation(rs, "deployment.kubernetes.io/revision")
            .and_then(|r| r.parse::<i64>().ok())
            .unwrap_or(0)
    });
    list
}

fn spec_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.replicas.unwrap_or(0)
}

fn status_replicas(rs: &ReplicaSet) -> i32 {
    rs.status.as_ref().map_or(0, |s| s.replicas)
}

#[tokio::test]
async fn a_deployment_makes_a_replicaset_and_its_pods() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let deployments: Api<Deployment> = Api::namespaced(env.client(), &ns);
    let rs_api: Api<ReplicaSet> = Api::namespaced(env.client(), &ns);
    let pods: Api<Pod> = Api::namespaced(env.client(), &ns);
    let d = deployments
        .create(
            &PostParams::default(),
            &deployment("web", "web", 3, json!({"type": "RollingUpdate"})),
        )
        .await
        .unwrap();
    let uid = d.metadata.uid.clone().unwrap();
    settle(&env, &ns, || async {
        let d = deployments.get("web").await.unwrap();
        let rss = replicasets(&rs_api).await;
        let [rs] = rss.as_slice() else {
            return Err(format!("{} replicasets", rss.len()));
        };
        let rs_name = rs.metadata.name.clone().unwrap();
        let s = d.status.clone().unwrap_or_default();
        let want = (
            Some(1),
            Some(3),
            Some(3),
            Some(3),
            Some((
                "True".into(),
                "ReplicaSetUpdated".into(),
                format!("ReplicaSet \"{rs_name}\" is progressing."),
            )),
        );
        let got = (
            s.observed_generation,
            s.replicas,
            s.updated_replicas,
            s.unavailable_replicas,
            condition(&d, "Progressing"),
        );
        if got != want || status_replicas(rs) != 3 {
            return Err(format!("status {got:?}, replicaset {:?}", rs.status));
        }
        Ok(())
    })
    .await;
    let d = deployments.get("web").await.unwrap();
    assert_eq!(
        condition(&d, "Available"),
        Some((
            "False".into(),
            "MinimumReplicasUnavailable".into(),
            "Deployment does not have minimum availability.".into()
        ))
    );
    assert_eq!(
        d.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("deployment.kubernetes.io/revision"))
            .map(String::as_str),
        Some("1")
    );
    let rs = replicasets(&rs_api).await.remove(0);
    let rs_name = rs.metadata.name.clone().unwrap();
    let hash = rs.metadata.labels.as_ref().unwrap()["pod-template-hash"].clone();
    assert_eq!(rs_name, format!("web-{hash}"));
    let owner = &rs.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("Deployment", uid.as_str(), Some(true))
    );
    assert_eq!(
        annotation(&rs, "deployment.kubernetes.io/revision").as_deref(),
        Some("1")
    );
    assert_eq!(
        annotation(&rs, "deployment.kubernetes.io/desired-replicas").as_deref(),
        Some("3")
    );
    assert_eq!(
        annotation(&rs, "deployment.kubernetes.io/max-replicas").as_deref(),
        Some("4")
    );
    let spec = &rs.spec;
    assert_eq!(
        spec.selector.match_labels.as_ref().unwrap()["pod-template-hash"],
        hash
    );
    let listed = pods.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(listed.len(), 3);
    for p in &listed {
        assert_eq!(
            p.metadata.generate_name.as_deref(),
            Some(format!("{rs_name}-").as_str())
        );
        assert_eq!(
            p.metadata.labels.as_ref().unwrap()["pod-template-hash"],
            hash
        );
        let o = &p.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (o.kind.as_str(), o.name.as_str(), o.controller),
            ("ReplicaSet", rs_name.as_str(), Some(true))
        );
    }
    // The events upstream's controllers record.
    let scaled = format!("Scaled up replica set {rs_name} from 0 to 3");
    let created: Vec<String> = listed
        .iter()
        .map(|p| format!("Created pod: {}", p.metadata.name.as_deref().unwrap()))
        .collect();
    let mut wanted = vec![("ScalingReplicaSet", Some(scaled.as_str()))];
    wanted.extend(
        created
            .iter()
            .map(|m| ("SuccessfulCreate", Some(m.as_str()))),
    );
    await_events(&env, &ns, &wanted).await;

    // A new template: a second ReplicaSet within maxSurge (1 of 3); none of the old
    // pods is available, so maxUnavailable (0) keeps all three.
    new_image(&deployments, "web").await;
    settle(&env, &ns, || async {
        let rss = replicasets(&rs_api).await;
        let d = deployments.get("web").await.unwrap();
        let s = d.status.clone().unwrap_or_default();
        let sizes: Vec<(i32, i32)> = rss
            .iter()
            .map(|rs| (spec_replicas(rs), status_replicas(rs)))
            .collect();
        let got = (
            sizes.clone(),
            s.observed_generation,
            s.replicas,
            s.updated_replicas,
            s.unavailable_replicas,
        );
        if got != (vec![(3, 3), (1, 1)], Some(2), Some(4), Some(1), Some(4)) {
            return Err(format!("{got:?}"));
        }
        let new_name = rss[1].metadata.name.clone().unwrap();
        // kube-controller-manager leaves `NewReplicaSetCreated` in place when the new
        // ReplicaSet's status had already counted its pod at the sync that created it
        // (nothing then looks like progress to `DeploymentProgressing`): a race of
        // upstream's own, seen on v1.36.
        let progressing = format!("ReplicaSet \"{new_name}\" is progressing.");
        let created = format!("Created new replica set \"{new_name}\"");
        match condition(&d, "Progressing") {
            Some((_, _, m)) if m == progressing || m == created => Ok(()),
            c => Err(format!("progressing {c:?}")),
        }
    })
    .await;
    let rss = replicasets(&rs_api).await;
    assert_eq!(
        annotation(&rss[1], "deployment.kubernetes.io/revision").as_deref(),
        Some("2")
    );
    assert_ne!(rss[0].metadata.name, rss[1].metadata.name);
    let d = deployments.get("web").await.unwrap();
    assert_eq!(
        d.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("deployment.kubernetes.io/revision"))
            .map(String::as_str),
        Some("2")
    );
}

#[tokio::test]
async fn a_replicaset_keeps_its_number_of_pods() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let rs_api: Api<ReplicaSet> = Api::namespaced(env.client(), &ns);
    let pods: Api<Pod> = Api::namespaced(env.client(), &ns);
    // An orphan pod the selector matches is adopted and counts.
    let orphan: Pod = serde_json::from_value(
        json!({"metadata": {"name": "orphan", "labels": {"app": "rs"}},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}),
    )
    .unwrap();
    pods.create(&PostParams::default(), &orphan).await.unwrap();
    let rs: ReplicaSet = serde_json::from_value(json!({"metadata": {"name": "rs"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "rs"}},
            "template": {"metadata": {"labels": {"app": "rs"}},
                "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}}}))
    .unwrap();
    rs_api.create(&PostParams::default(), &rs).await.unwrap();
    let count = || async {
        let rs = rs_api.get("rs").await.unwrap();
        let live: Vec<Pod> = pods
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        (
            status_replicas(&rs),
            rs.status.and_then(|s| s.observed_generation),
            live,
        )
    };
    settle(&env, &ns, || async {
        match count().await {
            (3, Some(1), live) if live.len() == 3 => Ok(()),
            (r, g, live) => Err(format!("status {r}/{g:?}, {} pods", live.len())),
        }
    })
    .await;
    let adopted = pods.get("orphan").await.unwrap();
    let o = &adopted.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (o.kind.as_str(), o.name.as_str(), o.controller),
        ("ReplicaSet", "rs", Some(true))
    );

    // A deleted pod is replaced.
    let victim = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|p| p.metadata.name.as_deref() != Some("orphan"))
        .unwrap();
    let victim = victim.metadata.name.unwrap();
    pods.delete(&victim, &Default::default()).await.unwrap();
    settle(&env, &ns, || async {
        match count().await {
            (3, _, live)
                if live.len() == 3
                    && live
                        .iter()
                        .all(|p| p.metadata.name.as_deref() != Some(victim.as_str())) =>
            {
                Ok(())
            }
            (r, _, live) => Err(format!("status {r}, {} pods", live.len())),
        }
    })
    .await;

    // Scaled down to one (which one is upstream's ranking: all are Pending and
    // unscheduled here, and were created in the same second).
    rs_api
        .patch(
            "rs",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 1}})),
        )
        .await
        .unwrap();
    settle(&env, &ns, || async {
        match count().await {
            (1, Some(2), live) if live.len() == 1 => Ok(()),
            (r, g, live) => Err(format!("status {r}/{g:?}, {} pods", live.len())),
        }
    })
    .await;
    let left = count().await.2[0].metadata.name.clone().unwrap();

    // A pod relabelled out of the selector is released, and replaced.
    pods.patch(
        &left,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "gone"}}})),
    )
    .await
    .unwrap();
    settle(&env, &ns, || async {
        let released = pods.get(&left).await.unwrap();
        let owners = released.metadata.owner_references.unwrap_or_default();
        match count().await {
            (1, _, live) if live.len() == 2 && owners.is_empty() => Ok(()),
            (r, _, live) => Err(format!(
                "status {r}, {} pods, owners {owners:?}",
                live.len()
            )),
        }
    })
    .await;
}

#[tokio::test]
async fn recreate_scales_the_old_pods_away_first() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let deployments: Api<Deployment> = Api::namespaced(env.client(), &ns);
    let rs_api: Api<ReplicaSet> = Api::namespaced(env.client(), &ns);
    deployments
        .create(
            &PostParams::default(),
            &deployment("re", "re", 2, json!({"type": "Recreate"})),
        )
        .await
        .unwrap();
    settle(&env, &ns, || async {
        let rss = replicasets(&rs_api).await;
        match rss.as_slice() {
            [rs] if status_replicas(rs) == 2 => Ok(()),
            other => Err(format!("{} replicasets", other.len())),
        }
    })
    .await;
    new_image(&deployments, "re").await;
    settle(&env, &ns, || async {
        let rss = replicasets(&rs_api).await;
        let sizes: Vec<(i32, i32)> = rss
            .iter()
            .map(|rs| (spec_replicas(rs), status_replicas(rs)))
            .collect();
        if sizes == [(0, 0), (2, 2)] {
            Ok(())
        } else {
            Err(format!("{sizes:?}"))
        }
    })
    .await;
}

#[tokio::test]
async fn a_rolling_update_completes_with_running_pods_embedded_only() {
    let Some(env) = kubelet_env().await else {
        return;
    };
    let ns = env.namespace().await;
    let deployments: Api<Deployment> = Api::namespaced(env.client(), &ns);
    let rs_api: Api<ReplicaSet> = Api::namespaced(env.client(), &ns);
    deployments
        .create(
            &PostParams::default(),
            &deployment(
                "web",
                "web",
                4,
                json!({"type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 1}}),
            ),
        )
        .await
        .unwrap();
    let complete = |generation: i64, revisions: usize| {
        let deployments = deployments.clone();
        let rs_api = rs_api.clone();
        move || {
            let deployments = deployments.clone();
            let rs_api = rs_api.clone();
            async move {
                let d = deployments.get("web").await.unwrap();
                let s = d.status.clone().unwrap_or_default();
                let rss = replicasets(&rs_api).await;
                let sizes: Vec<i32> = rss.iter().map(spec_replicas).collect();
                let mut want_sizes = vec![0; revisions - 1];
                want_sizes.push(4);
                let got = (
                    s.observed_generation,
                    s.replicas,
                    s.updated_replicas,
                    s.ready_replicas,
                    s.available_replicas,
                    sizes,
                );
                if got
                    != (
                        Some(generation),
                        Some(4),
                        Some(4),
                        Some(4),
                        Some(4),
                        want_sizes,
                    )
                {
                    return Err(format!("{got:?}"));
                }
                match (condition(&d, "Available"), condition(&d, "Progressing")) {
                    (Some((a, ar, _)), Some((p, pr, _)))
                        if a == "True"
                            && ar == "MinimumReplicasAvailable"
                            && p == "True"
                            && pr == "NewReplicaSetAvailable" =>
                    {
                        Ok(())
                    }
                    c => Err(format!("conditions {c:?}")),
                }
            }
        }
    };
    settle(&env, &ns, complete(1, 1)).await;
    new_image(&deployments, "web").await;
    settle(&env, &ns, complete(2, 2)).await;
    // During the rollout at most 5 pods existed and at least 3 were available: the
    // ScalingReplicaSet events tell the steps.
    settle(&env, &ns, || async {
        let steps: Vec<(String, String)> = events_in(&env, &ns)
            .await
            .into_iter()
            .filter(|(r, _)| r == "ScalingReplicaSet")
            .collect();
        if steps.len() >= 3 {
            Ok(())
        } else {
            Err(format!("{steps:?}"))
        }
    })
    .await;
}

fn job(name: &str, completions: i32, backoff_limit: i32) -> Job {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"completions": completions, "parallelism": 1, "backoffLimit": backoff_limit,
            "template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "command": ["true"]}]}}}
    }))
    .unwrap()
}

/// What a kubelet reports when a pod's container exits (the test cluster has none).
async fn finish(pods: &Api<Pod>, name: &str, code: i32) {
    let (phase, reason) = if code == 0 {
        ("Succeeded", "Completed")
    } else {
        ("Failed", "Error")
    };
    let status = json!({"status": {"phase": phase, "containerStatuses": [{"name": "c",
        "image": "registry.k8s.io/pause:3.10", "imageID": "", "ready": false, "restartCount": 0,
        "state": {"terminated": {"exitCode": code, "reason": reason,
            "startedAt": "2026-01-01T00:00:00Z", "finishedAt": "2026-01-01T00:00:01Z"}}}]}});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap();
}

/// Waits until Job `job` has exactly one pod; its name.
async fn only_pod_of(env: &TestEnv, ns: &str, pods: &Api<Pod>, job: &str) -> String {
    let lp = ListParams::default().labels(&format!("batch.kubernetes.io/job-name={job}"));
    let of_job = || async { pods.list(&lp).await.unwrap().items };
    settle(env, ns, || async {
        match of_job().await.len() {
            1 => Ok(()),
            n => Err(format!("{n} pods of {job}")),
        }
    })
    .await;
    of_job().await.remove(0).metadata.name.unwrap()
}

/// (active, succeeded, failed, conditions as (type, status, reason)).
type JobState = (
    Option<i32>,
    Option<i32>,
    Option<i32>,
    Vec<(String, String, String)>,
);

fn job_state(j: &Job) -> JobState {
    let s = j.status.clone().unwrap_or_default();
    let conds = s
        .conditions
        .unwrap_or_default()
        .into_iter()
        .map(|c| (c.type_, c.status, c.reason.unwrap_or_default()))
        .collect();
    (s.active, s.succeeded, s.failed, conds)
}

#[tokio::test]
async fn a_job_runs_pods_until_enough_succeed_or_too_many_fail() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let jobs: Api<Job> = Api::namespaced(env.client(), &ns);
    let pods: Api<Pod> = Api::namespaced(env.client(), &ns);
    let pp = PostParams::default();
    let j = jobs.create(&pp, &job("ok", 2, 6)).await.unwrap();
    let uid = j.metadata.uid.clone().unwrap();
    // One pod at a time (parallelism 1), tracked with the finalizer.
    let running = || async {
        pods.list(&ListParams::default().labels("batch.kubernetes.io/job-name=ok"))
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Pending"))
            .collect::<Vec<Pod>>()
    };
    settle(&env, &ns, || async {
        let j = jobs.get("ok").await.unwrap();
        let live = running().await;
        match (
            job_state(&j).0,
            live.len(),
            j.status.and_then(|s| s.start_time).is_some(),
        ) {
            (Some(1), 1, true) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let first = running().await.remove(0);
    assert_eq!(
        first.metadata.finalizers.clone().unwrap_or_default(),
        ["batch.kubernetes.io/job-tracking"]
    );
    assert!(first.metadata.generate_name.as_deref() == Some("ok-"));
    let o = &first.metadata.owner_references.clone().unwrap()[0];
    assert_eq!(
        (o.kind.as_str(), o.uid.as_str(), o.controller),
        ("Job", uid.as_str(), Some(true))
    );
    let first = first.metadata.name.unwrap();
    finish(&pods, &first, 0).await;
    // Counted, released, and the second pod started.
    settle(&env, &ns, || async {
        let j = jobs.get("ok").await.unwrap();
        let released = pods
            .get(&first)
            .await
            .unwrap()
            .metadata
            .finalizers
            .unwrap_or_default()
            .is_empty();
        let live = running().await;
        match (job_state(&j), released, live.len()) {
            ((Some(1), Some(1), None, c), true, 1) if c.is_empty() => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let second = running().await.remove(0).metadata.name.unwrap();
    finish(&pods, &second, 0).await;
    settle(&env, &ns, || async {
        let j = jobs.get("ok").await.unwrap();
        let done = j
            .status
            .as_ref()
            .and_then(|s| s.completion_time.as_ref())
            .is_some();
        match (job_state(&j), done) {
            ((None, Some(2), None, c), true)
                if c == [
                    (
                        "SuccessCriteriaMet".into(),
                        "True".into(),
                        "CompletionsReached".into(),
                    ),
                    (
                        "Complete".into(),
                        "True".into(),
                        "CompletionsReached".into(),
                    ),
                ] =>
            {
                Ok(())
            }
            other => Err(format!("{other:?}")),
        }
    })
    .await;

    // backoffLimit 0: the first failure fails the Job.
    jobs.create(&pp, &job("bad", 1, 0)).await.unwrap();
    let victim = only_pod_of(&env, &ns, &pods, "bad").await;
    finish(&pods, &victim, 1).await;
    settle(&env, &ns, || async {
        let j = jobs.get("bad").await.unwrap();
        match job_state(&j) {
            (None, None, Some(1), c)
                if c == [
                    (
                        "FailureTarget".into(),
                        "True".into(),
                        "BackoffLimitExceeded".into(),
                    ),
                    (
                        "Failed".into(),
                        "True".into(),
                        "BackoffLimitExceeded".into(),
                    ),
                ] =>
            {
                Ok(())
            }
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    await_events(
        &env,
        &ns,
        &[
            ("SuccessfulCreate", None),
            ("Completed", None),
            ("BackoffLimitExceeded", None),
        ],
    )
    .await;
}

#[tokio::test]
async fn an_indexed_job_completes_each_index_and_a_suspended_one_waits() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let jobs: Api<Job> = Api::namespaced(env.client(), &ns);
    let pods: Api<Pod> = Api::namespaced(env.client(), &ns);
    let mut j = job("ix", 3, 6);
    j.spec.as_mut().unwrap().parallelism = Some(3);
    j.spec.as_mut().unwrap().completion_mode = Some("Indexed".into());
    jobs.create(&PostParams::default(), &j).await.unwrap();
    let by_index = || async {
        let mut out: Vec<(String, String, String)> = pods
            .list(&ListParams::default().labels("batch.kubernetes.io/job-name=ix"))
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|p| {
                let index = p
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get("batch.kubernetes.io/job-completion-index"))
                    .cloned()
                    .unwrap_or_default();
                let host = p
                    .spec
                    .as_ref()
                    .and_then(|s| s.hostname.clone())
                    .unwrap_or_default();
                (index, host, p.metadata.name.unwrap_or_default())
            })
            .collect();
        out.sort();
        out
    };
    settle(&env, &ns, || async {
        let got = by_index().await;
        let shape: Vec<(String, String)> =
            got.iter().map(|(i, h, _)| (i.clone(), h.clone())).collect();
        if shape
            == [
                ("0".into(), "ix-0".into()),
                ("1".into(), "ix-1".into()),
                ("2".into(), "ix-2".into()),
            ]
        {
            Ok(())
        } else {
            Err(format!("{got:?}"))
        }
    })
    .await;
    let names: Vec<String> = by_index().await.into_iter().map(|(_, _, n)| n).collect();
    assert!(names[1].starts_with("ix-1-"), "{names:?}");
    finish(&pods, &names[1], 0).await;
    let completed = || async {
        jobs.get("ix")
            .await
            .unwrap()
            .status
            .and_then(|s| s.completed_indexes)
            .unwrap_or_default()
    };
    settle(&env, &ns, || async {
        match completed().await.as_str() {
            "1" => Ok(()),
            other => Err(other.to_string()),
        }
    })
    .await;
    finish(&pods, &names[0], 0).await;
    finish(&pods, &names[2], 0).await;
    settle(&env, &ns, || async {
        let j = jobs.get("ix").await.unwrap();
        match (completed().await.as_str(), job_state(&j)) {
            ("0-2", (None, Some(3), None, c)) if c.iter().any(|c| c.0 == "Complete") => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;

    // Suspended: no pods until resumed.
    let mut s = job("later", 1, 6);
    s.spec.as_mut().unwrap().suspend = Some(true);
    jobs.create(&PostParams::default(), &s).await.unwrap();
    let pods_of_later = || async {
        pods.list(&ListParams::default().labels("batch.kubernetes.io/job-name=later"))
            .await
            .unwrap()
            .items
            .len()
    };
    settle(&env, &ns, || async {
        let j = jobs.get("later").await.unwrap();
        match job_state(&j).3.as_slice() {
            [(t, st, r)] if t == "Suspended" && st == "True" && r == "JobSuspended" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert_eq!(pods_of_later().await, 0);
    jobs.patch(
        "later",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"suspend": false}})),
    )
    .await
    .unwrap();
    settle(&env, &ns, || async {
        let j = jobs.get("later").await.unwrap();
        match (job_state(&j), pods_of_later().await) {
            ((Some(1), _, _, c), 1)
                if c == [("Suspended".into(), "False".into(), "JobResumed".into())] =>
            {
                Ok(())
            }
            other => Err(format!("{other:?}")),
        }
    })
    .await;
}

#[tokio::test]
async fn jobs_finish_on_their_own_with_the_simulated_kubelet_embedded_only() {
    let Some(env) = kubelet_env().await else {
        return;
    };
    let ns = env.namespace().await;
    let jobs: Api<Job> = Api::namespaced(env.client(), &ns);
    let pods: Api<Pod> = Api::namespaced(env.client(), &ns);
    let with_command = |name: &str, command: &[&str], policy: &str, backoff: i32| -> Job {
        let mut j = job(name, 1, backoff);
        let spec = j.spec.as_mut().unwrap().template.spec.as_mut().unwrap();
        spec.restart_policy = Some(policy.into());
        spec.containers[0].command = Some(command.iter().map(|s| s.to_string()).collect());
        j
    };
    let pp = PostParams::default();
    jobs.create(
        &pp,
        &with_command(
            "hello",
            &["sh", "-c", "echo hello from the job"],
            "Never",
            6,
        ),
    )
    .await
    .unwrap();
    jobs.create(&pp, &with_command("fails", &["false"], "Never", 0))
        .await
        .unwrap();
    jobs.create(&pp, &with_command("retries", &["false"], "OnFailure", 6))
        .await
        .unwrap();
    settle(&env, &ns, || async {
        let hello = job_state(&jobs.get("hello").await.unwrap());
        let fails = job_state(&jobs.get("fails").await.unwrap());
        let done = |s: &JobState, kind: &str| s.3.iter().any(|c| c.0 == kind && c.1 == "True");
        if hello.1 == Some(1)
            && done(&hello, "Complete")
            && fails.2 == Some(1)
            && done(&fails, "Failed")
        {
            Ok(())
        } else {
            Err(format!("hello {hello:?}, fails {fails:?}"))
        }
    })
    .await;
    let pod_of = |job: &str| {
        let pods = pods.clone();
        let job = job.to_string();
        async move {
            pods.list(&ListParams::default().labels(&format!("batch.kubernetes.io/job-name={job}")))
                .await
                .unwrap()
                .items
                .remove(0)
        }
    };
    // The command's output is the container's log; its exit code its terminated state.
    let hello = pod_of("hello").await;
    assert_eq!(
        hello.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded")
    );
    let log = pods
        .logs(hello.metadata.name.as_deref().unwrap(), &Default::default())
        .await
        .unwrap();
    assert_eq!(log, "hello from the job\n");
    let failed = pod_of("fails").await;
    let state = failed.status.unwrap().container_statuses.unwrap()[0]
        .state
        .clone()
        .unwrap();
    let terminated = state.terminated.unwrap();
    assert_eq!(
        (terminated.exit_code, terminated.reason.as_deref()),
        (1, Some("Error"))
    );
    // OnFailure: the container backs off and starts again; the pod keeps running.
    settle(&env, &ns, || async {
        let p = pod_of("retries").await;
        let s = p.status.clone().unwrap_or_default();
        let c = s.container_statuses.unwrap_or_default();
        let waiting = c
            .first()
            .and_then(|c| c.state.clone())
            .and_then(|s| s.waiting)
            .and_then(|w| w.reason);
        match (
            s.phase.as_deref(),
            c.first().map(|c| c.restart_count),
            waiting.as_deref(),
        ) {
            (Some("Running"), Some(1), Some("CrashLoopBackOff")) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
}

fn statefulset(name: &str, replicas: i32, policy: &str) -> StatefulSet {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"serviceName": name, "replicas": replicas, "podManagementPolicy": policy,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"terminationGracePeriodSeconds": 0, "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}
    }))
    .unwrap()
}

/// The pods of a StatefulSet by name, with their revision label.
async fn set_pods(pods: &Api<Pod>, app: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = pods
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| {
            let rev = p
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("controller-revision-hash"))
                .cloned()
                .unwrap_or_default();
            (p.metadata.name.unwrap_or_default(), rev)
        })
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn a_statefulset_makes_ordered_pods_with_their_claims() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let sets: Api<StatefulSet> = Api::namespaced(env.client(), &ns);
    let pods: Api<Pod> = Api::namespaced(env.client(), &ns);
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(env.client(), &ns);
    let pp = PostParams::default();
    sets.create(&pp, &statefulset("db", 3, "OrderedReady"))
        .await
        .unwrap();
    sets.create(&pp, &statefulset("par", 2, "Parallel"))
        .await
        .unwrap();
    // OrderedReady: db-1 waits for db-0 to run (no pod runs here); Parallel: all at once.
    settle(&env, &ns, || async {
        let db = set_pods(&pods, "db").await;
        let par = set_pods(&pods, "par").await;
        let s = sets.get("db").await.unwrap().status.unwrap_or_default();
        let names = |v: &[(String, String)]| v.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
        if names(&db) == ["db-0"]
            && names(&par) == ["par-0", "par-1"]
            && s.replicas == 1
            && s.update_revision.is_some()
        {
            Ok(())
        } else {
            Err(format!("db {db:?}, par {par:?}, status {s:?}"))
        }
    })
    .await;
    let s = sets.get("db").await.unwrap().status.unwrap();
    let rev = s.update_revision.clone().unwrap();
    assert_eq!(s.current_revision.as_deref(), Some(rev.as_str()));
    assert_eq!(
        (
            s.current_replicas,
            s.updated_replicas,
            s.ready_replicas,
            s.available_replicas
        ),
        (Some(1), Some(1), None, Some(0))
    );
    let pod = pods.get("db-0").await.unwrap();
    let labels = pod.metadata.labels.clone().unwrap();
    assert_eq!(labels["controller-revision-hash"], rev);
    assert_eq!(labels["statefulset.kubernetes.io/pod-name"], "db-0");
    assert_eq!(labels["apps.kubernetes.io/pod-index"], "0");
    let spec = pod.spec.unwrap();
    assert_eq!(
        (spec.hostname.as_deref(), spec.subdomain.as_deref()),
        (Some("db-0"), Some("db"))
    );
    let claim_of_pod = spec
        .volumes
        .unwrap()
        .into_iter()
        .find(|v| v.name == "data")
        .unwrap();
    assert_eq!(
        claim_of_pod.persistent_volume_claim.unwrap().claim_name,
        "data-db-0"
    );
    let claim = claims.get("data-db-0").await.unwrap();
    assert_eq!(claim.metadata.labels.unwrap()["app"], "db");
    assert!(
        claim
            .metadata
            .owner_references
            .unwrap_or_default()
            .is_empty(),
        "Retain: the claim outlives the pod"
    );
    let revisions: Api<ControllerRevision> = Api::namespaced(env.client(), &ns);
    let cr = revisions.get(&rev).await.unwrap();
    assert_eq!(cr.revision, Some(1));
    assert_eq!(
        cr.data.0.pointer("/spec/template/$patch"),
        Some(&json!("replace"))
    );
}

#[tokio::test]
async fn a_statefulset_rolls_out_and_scales_in_order_embedded_only() {
    let Some(env) = kubelet_env().await else {
        return;
    };
    let ns = env.namespace().await;
    let sets: Api<StatefulSet> = Api::namespaced(env.client(), &ns);
    let pods: Api<Pod> = Api::namespaced(env.client(), &ns);
    sets.create(
        &PostParams::default(),
        &statefulset("db", 3, "OrderedReady"),
    )
    .await
    .unwrap();
    let all_at = |n: usize, generation: i64| {
        let sets = sets.clone();
        let pods = pods.clone();
        move || {
            let sets = sets.clone();
            let pods = pods.clone();
            async move {
                let s = sets.get("db").await.unwrap().status.unwrap_or_default();
                let now = set_pods(&pods, "db").await;
                let update = s.update_revision.clone().unwrap_or_default();
                let done = now.len() == n
                    && s.observed_generation == Some(generation)
                    && now.iter().all(|(_, r)| *r == update)
                    && s.ready_replicas == Some(n as i32)
                    && s.current_revision.as_deref() == Some(update.as_str());
                if done {
                    Ok(())
                } else {
                    Err(format!("{now:?} {s:?}"))
                }
            }
        }
    };
    settle(&env, &ns, all_at(3, 1)).await;
    let first = sets
        .get("db")
        .await
        .unwrap()
        .status
        .unwrap()
        .update_revision
        .unwrap();
    sets.patch(
        "db",
        &PatchParams::default(),
        &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]}}}})),
    )
    .await
    .unwrap();
    settle(&env, &ns, all_at(3, 2)).await;
    let second = sets
        .get("db")
        .await
        .unwrap()
        .status
        .unwrap()
        .update_revision
        .unwrap();
    assert_ne!(first, second);
    sets.patch(
        "db",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 1}})),
    )
    .await
    .unwrap();
    settle(&env, &ns, all_at(1, 3)).await;
    // The claims stay (Retain), and the pods were replaced highest ordinal first.
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(env.client(), &ns);
    assert_eq!(
        claims
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        3
    );
    let events: Api<Event> = Api::namespaced(env.client(), &ns);
    // A repeated event counts on the first one, as client-go's recorder counts it.
    let deletes: Vec<(String, i32)> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("SuccessfulDelete"))
        .map(|e| (e.message.unwrap_or_default(), e.count.unwrap_or_default()))
        .collect();
    let said = |pod: &str, n: i32| (format!("delete Pod {pod} in StatefulSet db successful"), n);
    assert_eq!(deletes, [said("db-2", 2), said("db-1", 2), said("db-0", 1)]);
}

#[tokio::test]
async fn a_daemonset_runs_one_pod_per_fitting_node() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let sets: Api<DaemonSet> = Api::namespaced(env.client(), &ns);
    let pods: Api<Pod> = Api::namespaced(env.client(), &ns);
    let nodes: Api<Node> = Api::all(env.client());
    // Only nodes labelled for this test fit; every taint is tolerated (a real cluster
    // taints a node without a kubelet soon after it appears).
    let ds: DaemonSet = serde_json::from_value(json!({"metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}},
            "template": {"metadata": {"labels": {"app": "agent"}},
                "spec": {"nodeSelector": {"kubewright.test/ds": ns}, "tolerations": [{"operator": "Exists"}],
                    "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}}}))
    .unwrap();
    sets.create(&PostParams::default(), &ds).await.unwrap();
    let status = || async {
        let s = sets.get("agent").await.unwrap().status.unwrap_or_default();
        (
            s.observed_generation,
            s.desired_number_scheduled,
            s.current_number_scheduled,
            s.number_misscheduled,
            s.updated_number_scheduled,
        )
    };
    settle(&env, &ns, || async {
        match status().await {
            (Some(1), 0, 0, 0, None) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    // A fitting node gets a pod pinned to it.
    let node_name = env.unique_name("kw-ds-node");
    let node: Node = serde_json::from_value(
        json!({"metadata": {"name": node_name, "labels": {"kubewright.test/ds": ns}}}),
    )
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    settle(&env, &ns, || async {
        let listed = pods
            .list(&ListParams::default().labels("app=agent"))
            .await
            .unwrap()
            .items;
        match (status().await, listed.len()) {
            ((Some(1), 1, 1, 0, Some(1)), 1) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let pod = pods
        .list(&ListParams::default().labels("app=agent"))
        .await
        .unwrap()
        .items
        .remove(0);
    let labels = pod.metadata.labels.clone().unwrap();
    assert_eq!(labels["pod-template-generation"], "1");
    assert!(!labels["controller-revision-hash"].is_empty());
    let spec = pod.spec.unwrap();
    let term = &spec
        .affinity
        .unwrap()
        .node_affinity
        .unwrap()
        .required_during_scheduling_ignored_during_execution
        .unwrap()
        .node_selector_terms[0];
    let field = &term.match_fields.as_ref().unwrap()[0];
    assert_eq!(
        (field.key.as_str(), field.values.clone().unwrap_or_default()),
        ("metadata.name", vec![node_name.clone()])
    );
    let tolerated: Vec<String> = spec
        .tolerations
        .unwrap()
        .into_iter()
        .filter_map(|t| t.key)
        .collect();
    for key in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
        "node.kubernetes.io/unschedulable",
    ] {
        assert!(tolerated.iter().any(|k| k == key), "{key}: {tolerated:?}");
    }
    // (What happens when the node stops fitting is not compared: kube-controller-manager
    // v1.36 left the pod and the counts as they were for over a minute after the node's
    // label, or the node itself, went.)
    nodes.delete(&node_name, &Default::default()).await.unwrap();
}

/// A CronJob's Job of the time the schedule named, its status, its events, and its
/// history limit (0: a finished Job is deleted at once). It waits for the next minute.
#[tokio::test]
async fn a_cronjob_starts_a_job_on_schedule_and_keeps_its_history() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let crons: Api<CronJob> = Api::namespaced(env.client(), &ns);
    let jobs: Api<Job> = Api::namespaced(env.client(), &ns);
    let pods: Api<Pod> = Api::namespaced(env.client(), &ns);
    let cron = |name: &str, suspend: bool| -> CronJob {
        serde_json::from_value(json!({"metadata": {"name": name},
            "spec": {"schedule": "* * * * *", "suspend": suspend, "concurrencyPolicy": "Forbid",
                "successfulJobsHistoryLimit": 0, "timeZone": "Europe/Berlin",
                "jobTemplate": {"metadata": {"labels": {"from": name}, "annotations": {"a": "b"}},
                    "spec": {"template": {"spec": {"restartPolicy": "Never",
                        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}}}}}))
        .unwrap()
    };
    let pp = PostParams::default();
    let tick = crons.create(&pp, &cron("tick", false)).await.unwrap();
    crons.create(&pp, &cron("idle", true)).await.unwrap();
    // The first whole minute after its creation: one Job, listed as active.
    settle_within(&env, &ns, Duration::from_secs(90), || async {
        let status = crons.get("tick").await.unwrap().status.unwrap_or_default();
        let listed = jobs.list(&ListParams::default()).await.unwrap().items;
        match (
            status.active.as_deref(),
            status.last_schedule_time,
            listed.len(),
        ) {
            (Some([_]), Some(_), 1) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let status = crons.get("tick").await.unwrap().status.unwrap();
    let scheduled = status.last_schedule_time.unwrap().0;
    let created = tick.metadata.creation_timestamp.unwrap().0;
    assert!(
        scheduled > created && scheduled.as_second() % 60 == 0,
        "{scheduled}"
    );
    assert!(scheduled.as_second() - created.as_second() <= 60);
    let job = jobs
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .remove(0);
    let name = job.metadata.name.clone().unwrap();
    assert_eq!(name, format!("tick-{}", scheduled.as_second() / 60));
    let active = &status.active.unwrap()[0];
    assert_eq!(
        (
            active.kind.as_deref(),
            active.api_version.as_deref(),
            active.name.as_deref()
        ),
        (Some("Job"), Some("batch/v1"), Some(name.as_str()))
    );
    assert_eq!(active.uid, job.metadata.uid);
    let owner = &job.metadata.owner_references.clone().unwrap()[0];
    assert_eq!(
        (
            owner.kind.as_str(),
            owner.name.as_str(),
            owner.controller,
            owner.block_owner_deletion
        ),
        ("CronJob", "tick", Some(true), Some(true))
    );
    assert_eq!(job.metadata.labels.clone().unwrap()["from"], "tick");
    // The scheduled time, as its zone writes it.
    let annotations = job.metadata.annotations.clone().unwrap();
    assert_eq!(annotations["a"], "b");
    let stamp = &annotations["batch.kubernetes.io/cronjob-scheduled-timestamp"];
    let local = scheduled.to_zoned(jiff::tz::TimeZone::get("Europe/Berlin").unwrap());
    assert_eq!(stamp, &local.strftime("%Y-%m-%dT%H:%M:%S%:z").to_string());
    // The suspended one started nothing.
    assert!(
        crons
            .get("idle")
            .await
            .unwrap()
            .status
            .unwrap_or_default()
            .active
            .is_none(),
        "a suspended CronJob starts no Job"
    );
    await_events(
        &env,
        &ns,
        &[("SuccessfulCreate", Some(&format!("Created job {name}")))],
    )
    .await;

    // Its pod succeeds: the Job completes, leaves `active`, its completion is recorded,
    // and (history limit 0) it is deleted.
    let pod = only_pod_of(&env, &ns, &pods, &name).await;
    finish(&pods, &pod, 0).await;
    settle(&env, &ns, || async {
        let status = crons.get("tick").await.unwrap().status.unwrap_or_default();
        let gone = jobs.get_opt(&name).await.unwrap().is_none();
        match (status.active, status.last_successful_time, gone) {
            (None, Some(_), true) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    await_events(
        &env,
        &ns,
        &[("SuccessfulDelete", Some(&format!("Deleted job {name}")))],
    )
    .await;
}

/// A finished Job with `ttlSecondsAfterFinished` is deleted when its time is up.
#[tokio::test]
async fn a_finished_job_is_deleted_after_its_ttl() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let jobs: Api<Job> = Api::namespaced(env.client(), &ns);
    let pods: Api<Pod> = Api::namespaced(env.client(), &ns);
    let mut j = job("brief", 1, 6);
    j.spec.as_mut().unwrap().ttl_seconds_after_finished = Some(0);
    jobs.create(&PostParams::default(), &j).await.unwrap();
    let mut keep = job("kept", 1, 6);
    keep.spec.as_mut().unwrap().ttl_seconds_after_finished = Some(3600);
    jobs.create(&PostParams::default(), &keep).await.unwrap();
    for job in ["brief", "kept"] {
        let pod = only_pod_of(&env, &ns, &pods, job).await;
        finish(&pods, &pod, 0).await;
    }
    settle(&env, &ns, || async {
        let brief = jobs.get_opt("brief").await.unwrap();
        let kept = jobs.get("kept").await.unwrap();
        let done = kept.status.and_then(|s| s.conditions).is_some_and(|c| {
            c.iter()
                .any(|c| c.type_ == "Complete" && c.status == "True")
        });
        match (brief.is_none(), done) {
            (true, true) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
}

/// A pod's place in a Service's EndpointSlices: (pod, ready, serving, terminating, node,
/// zone, ports as (name, port)).
type SliceEntry = (String, bool, bool, bool, String, String, Vec<(String, i32)>);

fn slice_entries(slices: &[EndpointSlice]) -> Vec<SliceEntry> {
    let mut out = Vec::new();
    for s in slices {
        let mut ports: Vec<(String, i32)> = s
            .ports
            .iter()
            .flatten()
            .map(|p| {
                (
                    p.name.clone().unwrap_or_default(),
                    p.port.unwrap_or_default(),
                )
            })
            .collect();
        ports.sort();
        for e in s.endpoints.iter().flatten() {
            let c = e.conditions.clone().unwrap_or_default();
            out.push((
                e.target_ref
                    .as_ref()
                    .and_then(|r| r.name.clone())
                    .unwrap_or_default(),
                c.ready.unwrap_or_default(),
                c.serving.unwrap_or_default(),
                c.terminating.unwrap_or_default(),
                e.node_name.clone().unwrap_or_default(),
                e.zone.clone().unwrap_or_default(),
                ports.clone(),
            ));
        }
    }
    out.sort();
    out
}

/// An Endpoints' addresses: (pod, ready, port name, port), sorted.
fn endpoints_entries(ep: &Endpoints) -> Vec<(String, bool, String, i32)> {
    let mut out = Vec::new();
    for s in ep.subsets.iter().flatten() {
        for (list, ready) in [(&s.addresses, true), (&s.not_ready_addresses, false)] {
            for a in list.iter().flatten() {
                for p in s.ports.iter().flatten() {
                    out.push((
                        a.target_ref
                            .as_ref()
                            .and_then(|r| r.name.clone())
                            .unwrap_or_default(),
                        ready,
                        p.name.clone().unwrap_or_default(),
                        p.port,
                    ));
                }
            }
        }
    }
    out.sort();
    out
}

/// A Service's EndpointSlices and Endpoints, as kube-controller-manager's endpointslice
/// and endpoints controllers keep them: a placeholder slice before any pod, then the
/// selected pods with an IP on an existing Node (named ports resolved per pod, pods whose
/// ports differ in separate slices), a deleted pod terminating in the slices and gone
/// from the Endpoints, and the Endpoints deleted with the Service; then the pods of the
/// Node when it goes (podgc; the test waits about a minute).
#[tokio::test]
async fn a_services_endpoint_slices_and_endpoints_follow_its_pods() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let services: Api<Service> = Api::namespaced(env.client(), &ns);
    let slices: Api<EndpointSlice> = Api::namespaced(env.client(), &ns);
    let endpoints: Api<Endpoints> = Api::namespaced(env.client(), &ns);
    let pods: Api<Pod> = Api::namespaced(env.client(), &ns);
    let nodes: Api<Node> = Api::all(env.client());
    let node_name = env.unique_name("kw-ep-node");
    let node: Node = serde_json::from_value(json!({"metadata": {"name": node_name,
        "labels": {"topology.kubernetes.io/zone": "zone-a"}}}))
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let svc: Service = serde_json::from_value(
        json!({"metadata": {"name": "web", "labels": {"tier": "front"}},
        "spec": {"selector": {"app": "web"}, "ports": [
            {"name": "http", "port": 80, "targetPort": "http"},
            {"name": "metrics", "port": 9090, "targetPort": 9100}]}}),
    )
    .unwrap();
    let svc = services.create(&PostParams::default(), &svc).await.unwrap();
    let of_web = ListParams::default().labels("kubernetes.io/service-name=web");
    let current = || async { slices.list(&of_web).await.unwrap().items };

    // No pods: one placeholder slice, and Endpoints without subsets.
    settle(&env, &ns, || async {
        let listed = current().await;
        let ep = endpoints.get_opt("web").await.unwrap();
        match (listed.as_slice(), ep) {
            ([one], Some(ep))
                if one.endpoints.as_deref().unwrap_or_default().is_empty()
                    && ep.subsets.is_none() =>
            {
                Ok(())
            }
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let placeholder = current().await.remove(0);
    let labels = placeholder.metadata.labels.clone().unwrap();
    assert_eq!(
        (
            labels["endpointslice.kubernetes.io/managed-by"].as_str(),
            labels["tier"].as_str(),
            placeholder.address_type.as_str(),
            placeholder.metadata.generate_name.as_deref(),
        ),
        (
            "endpointslice-controller.k8s.io",
            "front",
            "IPv4",
            Some("web-")
        )
    );
    assert!(placeholder.ports.as_deref().unwrap_or_default().is_empty());
    let owner = &placeholder.metadata.owner_references.clone().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("Service", svc.metadata.uid.as_deref().unwrap(), Some(true))
    );
    let ep_labels = endpoints.get("web").await.unwrap().metadata.labels.unwrap();
    assert_eq!(
        ep_labels["endpoints.kubernetes.io/managed-by"],
        "endpoint-controller"
    );
    assert_eq!(ep_labels["tier"], "front");

    // Two pods on the node, one ready; their `http` ports differ.
    for (i, ready) in [(0, true), (1, false)] {
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": format!("web-{i}"),
            "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                "ports": [{"name": "http", "containerPort": 8080 + i}]}]}}))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
        let name = format!("web-{i}");
        pods.bind(&name, &node_name, &Default::default(), &Default::default())
            .await
            .unwrap();
        let ip = format!("10.9.0.{}", 10 + i);
        let status = json!({"status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
            "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}});
        pods.patch_status(&name, &PatchParams::default(), &Patch::Strategic(status))
            .await
            .unwrap();
    }
    let entry = |pod: &str, ready: bool, terminating: bool, http: i32| -> SliceEntry {
        (
            pod.into(),
            ready && !terminating,
            ready,
            terminating,
            node_name.clone(),
            "zone-a".into(),
            vec![("http".into(), http), ("metrics".into(), 9100)],
        )
    };
    let want = [
        entry("web-0", true, false, 8080),
        entry("web-1", false, false, 8081),
    ];
    let want_ep = |with_0: bool| {
        let mut v = vec![
            ("web-1".to_string(), false, "http".to_string(), 8081),
            ("web-1".into(), false, "metrics".into(), 9100),
        ];
        if with_0 {
            v.push(("web-0".into(), true, "http".into(), 8080));
            v.push(("web-0".into(), true, "metrics".into(), 9100));
        }
        v.sort();
        v
    };
    settle(&env, &ns, || async {
        let listed = current().await;
        let ep = endpoints.get("web").await.unwrap();
        match (listed.len(), slice_entries(&listed), endpoints_entries(&ep)) {
            (2, s, e) if s == want && e == want_ep(true) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let bound = pods.get("web-0").await.unwrap();
    assert_eq!(
        bound.spec.unwrap().node_name.as_deref(),
        Some(node_name.as_str())
    );
    assert!(
        bound
            .status
            .unwrap()
            .conditions
            .unwrap()
            .iter()
            .any(|c| c.type_ == "PodScheduled" && c.status == "True")
    );

    // A deleted pod on a node terminates there (graceful deletion): still in the slices,
    // as terminating, and out of the Endpoints.
    pods.delete("web-0", &Default::default()).await.unwrap();
    let want = [
        entry("web-0", true, true, 8080),
        entry("web-1", false, false, 8081),
    ];
    settle(&env, &ns, || async {
        let listed = current().await;
        let ep = endpoints.get("web").await.unwrap();
        match (slice_entries(&listed), endpoints_entries(&ep)) {
            (s, e) if s == want && e == want_ep(false) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;

    // The Service goes: its Endpoints with it, its slices through garbage collection.
    services.delete("web", &Default::default()).await.unwrap();
    settle(&env, &ns, || async {
        let left = (
            current().await.len(),
            endpoints.get_opt("web").await.unwrap().is_some(),
        );
        match left {
            (0, false) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;

    // The Node goes: after podgc's quarantine (40 s) its pods are marked failed and
    // deleted at once (a finalizer keeps web-1 to be looked at).
    let hold = |f: Value| Patch::Merge(json!({"metadata": {"finalizers": f}}));
    pods.patch(
        "web-1",
        &PatchParams::default(),
        &hold(json!(["kubewright.test/hold"])),
    )
    .await
    .unwrap();
    nodes.delete(&node_name, &Default::default()).await.unwrap();
    settle_within(&env, &ns, Duration::from_secs(120), || async {
        let gone = pods.get_opt("web-0").await.unwrap().is_none();
        let held = pods.get("web-1").await.unwrap();
        let status = held.status.clone().unwrap_or_default();
        let marked = status.phase.as_deref() == Some("Failed")
            && status.conditions.iter().flatten().any(|c| {
                c.type_ == "DisruptionTarget"
                    && c.status == "True"
                    && c.reason.as_deref() == Some("DeletionByPodGC")
                    && c.message.as_deref() == Some("PodGC: node no longer exists")
            });
        match (gone, marked, held.metadata.deletion_timestamp.is_some()) {
            (true, true, true) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    pods.patch("web-1", &PatchParams::default(), &hold(Value::Null))
        .await
        .unwrap();
}

/// A ReplicationController keeps its number of pods as a ReplicaSet does (upstream runs
/// the same controller for it), with its own kind in the owner references and events.
#[tokio::test]
async fn a_replication_controller_keeps_its_number_of_pods() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let rcs: Api<ReplicationController> = Api::namespaced(env.client(), &ns);
    let pods: Api<Pod> = Api::namespaced(env.client(), &ns);
    let rc: ReplicationController = serde_json::from_value(json!({"metadata": {"name": "rc"},
        "spec": {"replicas": 2, "selector": {"app": "rc"},
            "template": {"metadata": {"labels": {"app": "rc"}},
                "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}}}))
    .unwrap();
    let rc = rcs.create(&PostParams::default(), &rc).await.unwrap();
    let live = || async {
        pods.list(&ListParams::default().labels("app=rc"))
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect::<Vec<Pod>>()
    };
    let settled = |n: usize| {
        let rcs = rcs.clone();
        let live = &live;
        move || {
            let rcs = rcs.clone();
            async move {
                let status = rcs.get("rc").await.unwrap().status.unwrap_or_default();
                let count = live().await.len();
                match (status.replicas, status.observed_generation, count) {
                    (r, Some(_), c) if r as usize == n && c == n => Ok(()),
                    other => Err(format!("{other:?}")),
                }
            }
        }
    };
    settle(&env, &ns, settled(2)).await;
    let pod = live().await.remove(0);
    let o = &pod.metadata.owner_references.clone().unwrap()[0];
    assert_eq!(
        (
            o.api_version.as_str(),
            o.kind.as_str(),
            o.uid.as_str(),
            o.controller
        ),
        (
            "v1",
            "ReplicationController",
            rc.metadata.uid.as_deref().unwrap(),
            Some(true)
        )
    );
    assert_eq!(pod.metadata.generate_name.as_deref(), Some("rc-"));
    rcs.patch(
        "rc",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 1}})),
    )
    .await
    .unwrap();
    settle(&env, &ns, settled(1)).await;
    let events: Api<Event> = Api::namespaced(env.client(), &ns);
    settle(&env, &ns, || async {
        let seen: Vec<(String, String)> = events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| e.involved_object.kind.as_deref() == Some("ReplicationController"))
            .map(|e| {
                (
                    e.reason.unwrap_or_default(),
                    e.source.and_then(|s| s.component).unwrap_or_default(),
                )
            })
            .collect();
        let has = |r: &str| {
            seen.iter()
                .any(|(x, c)| x == r && c == "replication-controller")
        };
        if has("SuccessfulCreate") && has("SuccessfulDelete") {
            Ok(())
        } else {
            Err(format!("{seen:?}"))
        }
    })
    .await;
}

/// The Endpoints of a Service without a selector are mirrored into EndpointSlices (one
/// per address type), and go with the Service.
#[tokio::test]
async fn a_selectorless_services_endpoints_are_mirrored_into_slices() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let services: Api<Service> = Api::namespaced(env.client(), &ns);
    let endpoints: Api<Endpoints> = Api::namespaced(env.client(), &ns);
    let slices: Api<EndpointSlice> = Api::namespaced(env.client(), &ns);
    let svc: Service = serde_json::from_value(json!({"metadata": {"name": "ext"},
        "spec": {"ports": [{"name": "https", "port": 443, "targetPort": 8443}]}}))
    .unwrap();
    services.create(&PostParams::default(), &svc).await.unwrap();
    let ep: Endpoints = serde_json::from_value(json!({"metadata": {"name": "ext", "labels": {"team": "a"}},
        "subsets": [{"addresses": [{"ip": "192.0.2.10", "hostname": "h1"}, {"ip": "192.0.2.2"}],
            "notReadyAddresses": [{"ip": "192.0.2.30"}], "ports": [{"name": "https", "port": 8443}]},
            {"addresses": [{"ip": "2001:db8::1"}], "ports": [{"name": "https", "port": 8443}]}]}))
    .unwrap();
    endpoints.create(&PostParams::default(), &ep).await.unwrap();
    let mirrored = ListParams::default().labels(
        "kubernetes.io/service-name=ext,endpointslice.kubernetes.io/managed-by=endpointslicemirroring-controller.k8s.io",
    );
    let shape = || async {
        let mut out: Vec<(String, Vec<(String, bool)>)> = slices
            .list(&mirrored)
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|s| {
                // Upstream's order of the endpoints varies from one sync to another.
                let mut eps: Vec<(String, bool)> = s
                    .endpoints
                    .iter()
                    .flatten()
                    .map(|e| {
                        (
                            e.addresses.join(","),
                            e.conditions
                                .as_ref()
                                .and_then(|c| c.ready)
                                .unwrap_or_default(),
                        )
                    })
                    .collect();
                eps.sort();
                (s.address_type, eps)
            })
            .collect();
        out.sort();
        out
    };
    let want = vec![
        (
            "IPv4".to_string(),
            vec![
                ("192.0.2.10".to_string(), true),
                ("192.0.2.2".into(), true),
                ("192.0.2.30".into(), false),
            ],
        ),
        ("IPv6".into(), vec![("2001:db8::1".into(), true)]),
    ];
    settle(&env, &ns, || async {
        match shape().await {
            s if s == want => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let slice = slices.list(&mirrored).await.unwrap().items.remove(0);
    assert_eq!(slice.metadata.labels.unwrap()["team"], "a");
    assert_eq!(
        slice.metadata.owner_references.unwrap()[0].kind,
        "Endpoints"
    );
    services.delete("ext", &Default::default()).await.unwrap();
    settle(&env, &ns, || async {
        let left = (
            shape().await.len(),
            endpoints.get_opt("ext").await.unwrap().is_some(),
        );
        match left {
            (0, false) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
}
