//! Eviction against PodDisruptionBudgets, and the pod I/O errors of a pod without a node:
//! on the embedded server and, unchanged, on a real cluster (KUBEWRIGHT_TEST_KUBECONFIG),
//! where pods are made Running and Ready by writing their status and the real disruption
//! controller computes the budgets' status.

#![allow(clippy::unwrap_used, clippy::panic)] // test code: a failed unwrap is a failed test

use http_body_util::BodyExt;
use kubewright_testing::TestEnv;
use serde_json::{Value, json};
use std::time::Duration;

/// Sends a request; returns the status code and the body (JSON, or `null`).
async fn raw(env: &TestEnv, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut req = http::Request::builder().method(method).uri(path);
    let bytes = match body {
        Some(b) => {
            let ct = if method == "PATCH" {
                "application/merge-patch+json"
            } else {
                "application/json"
            };
            req = req.header("content-type", ct);
            serde_json::to_vec(&b).unwrap()
        }
        None => Vec::new(),
    };
    let resp = env.client().send(req.body(bytes).unwrap()).await.unwrap();
    let code = resp.status().as_u16();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (code, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

async fn make_pod(env: &TestEnv, ns: &str, name: &str, app: &str, containers: &[&str]) {
    let cs: Vec<Value> = containers
        .iter()
        .map(|c| json!({"name": c, "image": "busybox"}))
        .collect();
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": app}},
        "spec": {"containers": cs, "terminationGracePeriodSeconds": 0}});
    let (code, v) = raw(
        env,
        "POST",
        &format!("/api/v1/namespaces/{ns}/pods"),
        Some(pod),
    )
    .await;
    assert_eq!(code, 201, "{v}");
}

/// Makes a pod Running and Ready by writing its status (no kubelet needed).
async fn run_pod(env: &TestEnv, ns: &str, name: &str) {
    let path = format!("/api/v1/namespaces/{ns}/pods/{name}");
    for _ in 0..10 {
        let (_, mut pod) = raw(env, "GET", &path, None).await;
        pod["status"]["phase"] = json!("Running");
        pod["status"]["conditions"] = json!([{"type": "Ready", "status": "True"}]);
        let (code, v) = raw(env, "PUT", &format!("{path}/status"), Some(pod)).await;
        if code == 200 {
            return;
        }
        assert_eq!(code, 409, "{v}");
    }
    panic!("could not write the status of {name}");
}

async fn make_pdb(env: &TestEnv, ns: &str, name: &str, app: &str, min_available: Value) {
    let pdb = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": name},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": app}}}});
    let (code, v) = raw(
        env,
        "POST",
        &format!("/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets"),
        Some(pdb),
    )
    .await;
    assert_eq!(code, 201, "{v}");
}

/// Waits (30 s) until the budget's status, observed for its generation, satisfies `ok`.
async fn wait_pdb(env: &TestEnv, ns: &str, name: &str, ok: impl Fn(&Value) -> bool) -> Value {
    let path = format!("/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/{name}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (_, v) = raw(env, "GET", &path, None).await;
        let observed = v["status"]["observedGeneration"] == v["metadata"]["generation"];
        if observed && ok(&v["status"]) {
            return v;
        }
        assert!(tokio::time::Instant::now() < deadline, "budget {name}: {v}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn evict(env: &TestEnv, ns: &str, name: &str, extra: Value) -> (u16, Value) {
    let mut body =
        json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}});
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            b.insert(k.clone(), v.clone());
        }
    }
    raw(
        env,
        "POST",
        &format!("/api/v1/namespaces/{ns}/pods/{name}/eviction"),
        Some(body),
    )
    .await
}

async fn wait_gone(env: &TestEnv, ns: &str, name: &str) {
    let path = format!("/api/v1/namespaces/{ns}/pods/{name}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while raw(env, "GET", &path, None).await.0 != 404 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name} was not deleted"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn int(v: &Value, k: &str) -> i64 {
    v[k].as_i64().unwrap_or(-1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eviction_respects_a_disruption_budget() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    for p in ["a", "b"] {
        make_pod(&env, &ns, p, "web", &["c"]).await;
        run_pod(&env, &ns, p).await;
    }
    make_pdb(&env, &ns, "budget", "web", json!(1)).await;
    let pdb = wait_pdb(&env, &ns, "budget", |s| {
        int(s, "currentHealthy") == 2 && int(s, "disruptionsAllowed") == 1
    })
    .await;
    let st = &pdb["status"];
    assert_eq!(
        (int(st, "desiredHealthy"), int(st, "expectedPods")),
        (1, 2),
        "{st}"
    );
    let cond = &st["conditions"][0];
    assert_eq!(
        (
            cond["type"].as_str(),
            cond["status"].as_str(),
            cond["reason"].as_str()
        ),
        (
            Some("DisruptionAllowed"),
            Some("True"),
            Some("SufficientPods")
        ),
        "{st}"
    );

    // A dry run takes nothing.
    let (code, v) = evict(
        &env,
        &ns,
        "a",
        json!({"deleteOptions": {"dryRun": ["All"]}}),
    )
    .await;
    assert_eq!(
        (code, &v),
        (
            201,
            &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
        )
    );
    let (_, p) = raw(
        &env,
        "GET",
        &format!("/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/budget"),
        None,
    )
    .await;
    assert_eq!(int(&p["status"], "disruptionsAllowed"), 1);
    assert_eq!(
        raw(
            &env,
            "GET",
            &format!("/api/v1/namespaces/{ns}/pods/a"),
            None
        )
        .await
        .0,
        200
    );

    // One disruption is allowed: a goes.
    let (code, v) = evict(&env, &ns, "a", json!({})).await;
    assert_eq!(code, 201, "{v}");
    assert_eq!(v["status"], "Success");
    wait_gone(&env, &ns, "a").await;
    wait_pdb(&env, &ns, "budget", |s| {
        int(s, "currentHealthy") == 1 && int(s, "expectedPods") == 1
    })
    .await;

    // None is left: 429 with the budget as the cause; b stays.
    let (code, v) = evict(&env, &ns, "b", json!({})).await;
    assert_eq!(code, 429, "{v}");
    assert_eq!(v["reason"], "TooManyRequests");
    assert_eq!(
        v["message"],
        "Cannot evict pod as it would violate the pod's disruption budget."
    );
    assert_eq!(
        v["details"]["causes"],
        json!([{"reason": "DisruptionBudget",
        "message": "The disruption budget budget needs 1 healthy pods and has 1 currently"}])
    );
    assert_eq!(
        raw(
            &env,
            "GET",
            &format!("/api/v1/namespaces/{ns}/pods/b"),
            None
        )
        .await
        .0,
        200
    );

    // The budget relaxed: b goes too.
    let (code, v) = raw(
        &env,
        "PATCH",
        &format!("/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/budget"),
        Some(json!({"spec": {"minAvailable": 0}})),
    )
    .await;
    assert_eq!(code, 200, "{v}");
    wait_pdb(&env, &ns, "budget", |s| int(s, "disruptionsAllowed") == 1).await;
    let (code, v) = evict(&env, &ns, "b", json!({})).await;
    assert_eq!(code, 201, "{v}");
    wait_gone(&env, &ns, "b").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eviction_skips_pending_pods_and_refuses_two_budgets() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    make_pod(&env, &ns, "pending", "db", &["c"]).await;
    make_pod(&env, &ns, "running", "db", &["c"]).await;
    run_pod(&env, &ns, "running").await;
    make_pdb(&env, &ns, "one", "db", json!(2)).await;
    wait_pdb(&env, &ns, "one", |s| {
        int(s, "currentHealthy") == 1 && int(s, "disruptionsAllowed") == 0
    })
    .await;

    // A pending pod skips the budget.
    let (code, v) = evict(&env, &ns, "pending", json!({})).await;
    assert_eq!(code, 201, "{v}");
    wait_gone(&env, &ns, "pending").await;

    // Two budgets for one pod: 500, without a reason.
    make_pdb(&env, &ns, "two", "db", json!("50%")).await;
    wait_pdb(&env, &ns, "two", |_| true).await;
    let (code, v) = evict(&env, &ns, "running", json!({})).await;
    assert_eq!(code, 500, "{v}");
    assert_eq!(
        v["message"],
        "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
    );
    assert_eq!(v["status"], "Failure");
    assert!(v.get("reason").is_none(), "{v}");

    // Bad requests.
    let body =
        json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "other"}});
    let (code, v) = raw(
        &env,
        "POST",
        &format!("/api/v1/namespaces/{ns}/pods/running/eviction"),
        Some(body),
    )
    .await;
    assert_eq!(
        (code, v["message"].as_str()),
        (
            400,
            Some("name in URL does not match name in Eviction object")
        )
    );
    let (code, v) = evict(&env, &ns, "missing", json!({})).await;
    assert_eq!(
        (code, v["message"].as_str()),
        (404, Some("pods \"missing\" not found"))
    );
    make_pod(&env, &ns, "third", "other", &["c"]).await;
    let (code, v) = evict(
        &env,
        &ns,
        "third",
        json!({"deleteOptions": {"preconditions": {"uid": "nope"}}}),
    )
    .await;
    assert_eq!(code, 409, "{v}");
    assert_eq!(v["reason"], "Conflict");
    assert!(v["message"].as_str().unwrap().starts_with("Operation cannot be fulfilled on Pod \"third\": the UID in the precondition (nope) does not match the UID in record"), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_io_of_an_unscheduled_pod() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    make_pod(&env, &ns, "one", "x", &["a"]).await;
    make_pod(&env, &ns, "two", "x", &["a", "b"]).await;
    let base = format!("/api/v1/namespaces/{ns}/pods");
    // Logs: no node, no content.
    let (code, v) = raw(&env, "GET", &format!("{base}/one/log"), None).await;
    assert_eq!((code, v), (204, Value::Null));
    let (code, v) = raw(&env, "GET", &format!("{base}/two/log"), None).await;
    assert_eq!(code, 400);
    assert_eq!(
        v["message"],
        "a container name must be specified for pod two, choose one of: [a b]"
    );
    let (code, v) = raw(&env, "GET", &format!("{base}/one/log?container=zz"), None).await;
    assert_eq!(
        (code, v["message"].as_str()),
        (400, Some("container zz is not valid for pod one"))
    );
    let (code, v) = raw(&env, "GET", &format!("{base}/one/log?limitBytes=0"), None).await;
    assert_eq!(code, 422);
    assert_eq!(
        v["message"],
        "PodLogOptions \"one\" is invalid: limitBytes: Invalid value: 0: must be greater than 0"
    );
    // exec, attach, port-forward: 400, the pod has no host.
    for sub in [
        "exec?command=ls&stdout=true",
        "attach?stdout=true&stdin=true",
        "portforward?ports=8080",
    ] {
        for m in ["GET", "POST"] {
            let (code, v) = raw(&env, m, &format!("{base}/one/{sub}"), None).await;
            assert_eq!(code, 400, "{m} {sub}: {v}");
            assert_eq!(v["reason"], "BadRequest");
            assert_eq!(v["message"], "pod one does not have a host assigned");
        }
    }
    let (code, v) = raw(
        &env,
        "POST",
        &format!("{base}/two/exec?command=ls&stdout=true"),
        None,
    )
    .await;
    assert_eq!(
        (code, v["message"].as_str()),
        (
            400,
            Some("a container name must be specified for pod two, choose one of: [a b]")
        )
    );
    let (code, v) = raw(
        &env,
        "POST",
        &format!("{base}/one/portforward?ports=x"),
        None,
    )
    .await;
    assert_eq!(
        (code, v["message"].as_str()),
        (
            400,
            Some("cannot convert to []int32: strconv.ParseUint: parsing \"x\": invalid syntax")
        )
    );
}
