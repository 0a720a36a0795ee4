//! The simulated kubelet: pods that run, their logs, and exec, attach and port-forward
//! at the protocol level (raw WebSocket frames: channel numbers, the first empty
//! message, the status, resize and close messages), with bad input (unknown channels,
//! a peer that goes away mid-frame, oversized messages, a slow reader).
//!
//! A real cluster in CI has no kubelet: every test here is `embedded_only`.

#![allow(clippy::unwrap_used, clippy::panic)] // test code: a failed unwrap is a failed test

#[path = "support/pods.rs"]
mod pods;

use futures::{SinkExt, StreamExt};
use kubewright_apiserver::{ExecSession, Kubelet, PodRef, PortTarget, TestServer};
use pods::{channel, collect, http, namespace, pod, running, send_ch, wait_for, ws};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;

const SKIP: &str = "needs the simulated kubelet (a real cluster here has no nodes)";

async fn server(kubelet: Kubelet) -> TestServer {
    TestServer::builder()
        .kubelet(kubelet)
        .start()
        .await
        .unwrap()
}

fn exec_path(ns: &str, pod: &str, query: &str) -> String {
    format!("/api/v1/namespaces/{ns}/pods/{pod}/exec?{query}")
}

/// Opens exec of pod `default/p` with `v5.channel.k8s.io`.
async fn v5(s: &TestServer, query: &str) -> (pods::Ws, String) {
    ws(s, &exec_path("default", "p", query), &["v5.channel.k8s.io"])
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_run_on_the_fake_node_embedded_only() {
    if kubewright_testing::embedded_only(SKIP) {
        return;
    }
    let s = server(Kubelet::new().node_name("n1")).await;
    namespace(&s, "a").await;
    pod(
        &s,
        "a",
        "p",
        &["c1", "c2"],
        json!({"initContainers": [{"name": "init", "image": "busybox"}]}),
    )
    .await;
    let p = running(&s, "a", "p").await;
    assert_eq!(p["spec"]["nodeName"], "n1");
    let st = &p["status"];
    assert_eq!(st["hostIP"], "127.0.0.1");
    assert!(st["podIP"].as_str().unwrap().starts_with("10.244."));
    for c in ["PodScheduled", "Initialized", "ContainersReady", "Ready"] {
        let cond = st["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["type"] == c);
        assert_eq!(cond.unwrap()["status"], "True", "{c}: {st}");
    }
    let cs = st["containerStatuses"].as_array().unwrap();
    assert_eq!(cs.len(), 2);
    for c in cs {
        assert_eq!(c["ready"], true);
        assert_eq!(c["started"], true);
        assert_eq!(c["restartCount"], 0);
        assert!(
            c["containerID"]
                .as_str()
                .unwrap()
                .starts_with("containerd://")
        );
        assert!(
            c["imageID"]
                .as_str()
                .unwrap()
                .starts_with("docker.io/library/busybox@sha256:")
        );
        assert_eq!(c["image"], "docker.io/library/busybox:latest");
        assert!(c["state"]["running"]["startedAt"].is_string());
    }
    assert_eq!(
        st["initContainerStatuses"][0]["state"]["terminated"]["reason"],
        "Completed"
    );
    let node = http(&s, "GET", "/api/v1/nodes/n1", None).await.json();
    let ready = node["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Ready")
        .cloned();
    assert_eq!(ready.unwrap()["status"], "True");

    // Graceful deletion: marked, then gone after the grace period (1 s here).
    let t0 = std::time::Instant::now();
    let r = http(&s, "DELETE", "/api/v1/namespaces/a/pods/p", None).await;
    assert_eq!(r.status, 200);
    let v = r.json();
    assert!(v["metadata"]["deletionTimestamp"].is_string(), "{v}");
    assert_eq!(v["metadata"]["deletionGracePeriodSeconds"], 1);
    wait_for(&s, "/api/v1/namespaces/a/pods/p", |r| r.status == 404).await;
    assert!(
        t0.elapsed() >= Duration::from_secs(1),
        "removed before its grace period"
    );

    // gracePeriodSeconds=0 removes at once; namespace deletion still finishes.
    pod(
        &s,
        "a",
        "q",
        &["c"],
        json!({"terminationGracePeriodSeconds": 30}),
    )
    .await;
    running(&s, "a", "q").await;
    let r = http(
        &s,
        "DELETE",
        "/api/v1/namespaces/a/pods/q?gracePeriodSeconds=0",
        None,
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        http(&s, "GET", "/api/v1/namespaces/a/pods/q", None)
            .await
            .status,
        404
    );
    pod(&s, "a", "r", &["c"], json!({})).await;
    running(&s, "a", "r").await;
    assert_eq!(
        http(&s, "DELETE", "/api/v1/namespaces/a", None)
            .await
            .status,
        200
    );
    wait_for(&s, "/api/v1/namespaces/a", |r| r.status == 404).await;
}

/// A log source the test feeds line by line.
fn fed_logs() -> (Kubelet, tokio::sync::mpsc::UnboundedSender<String>) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let rx = Arc::new(Mutex::new(Some(rx)));
    let k = Kubelet::new().logs(move |c: &kubewright_apiserver::ContainerRef| {
        let first = futures::stream::iter(vec![
            format!("one {}", c.container),
            format!("two {}", c.container),
        ]);
        let live = match (c.container.as_str(), rx.lock().unwrap().take()) {
            ("main", Some(rx)) => tokio_stream_from(rx).boxed(),
            _ => futures::stream::empty().boxed(),
        };
        first.chain(live)
    });
    (k, tx)
}

fn tokio_stream_from(
    rx: tokio::sync::mpsc::UnboundedReceiver<String>,
) -> impl futures::Stream<Item = String> {
    futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|l| (l, rx)) })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_with_options_and_follow_embedded_only() {
    if kubewright_testing::embedded_only(SKIP) {
        return;
    }
    let (k, feed) = fed_logs();
    let s = server(k).await;
    namespace(&s, "l").await;
    pod(&s, "l", "p", &["main", "side"], json!({})).await;
    running(&s, "l", "p").await;
    let base = "/api/v1/namespaces/l/pods/p/log";
    let r = wait_for(&s, &format!("{base}?container=main"), |r| {
        r.text().contains("two")
    })
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.content_type, "text/plain");
    assert_eq!(r.text(), "one main\ntwo main\n");
    let r = http(&s, "GET", base, None).await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.json()["message"],
        "a container name must be specified for pod p, choose one of: [main side]"
    );
    let r = http(&s, "GET", &format!("{base}?container=zz"), None).await;
    assert_eq!(r.json()["message"], "container zz is not valid for pod p");
    assert_eq!(
        http(
            &s,
            "GET",
            &format!("{base}?container=main&tailLines=1"),
            None
        )
        .await
        .text(),
        "two main\n"
    );
    assert_eq!(
        http(
            &s,
            "GET",
            &format!("{base}?container=main&limitBytes=5"),
            None
        )
        .await
        .text(),
        "one m"
    );
    assert_eq!(
        http(
            &s,
            "GET",
            &format!("{base}?container=main&sinceSeconds=60"),
            None
        )
        .await
        .text(),
        "one main\ntwo main\n"
    );
    let ts = http(
        &s,
        "GET",
        &format!("{base}?container=side&timestamps=true"),
        None,
    )
    .await
    .text();
    let first = ts.lines().next().unwrap();
    let (stamp, rest) = first.split_once(' ').unwrap();
    assert_eq!(rest, "one side");
    assert!(stamp.ends_with('Z') && stamp.contains('T'), "{stamp}");
    assert!(stamp.parse::<jiff::Timestamp>().is_ok(), "{stamp}");
    // Validation errors as kube-apiserver gives them.
    let r = http(
        &s,
        "GET",
        &format!("{base}?container=main&tailLines=-1"),
        None,
    )
    .await;
    assert_eq!(r.status, 422);
    let v = r.json();
    assert_eq!(
        v["message"],
        "PodLogOptions \"p\" is invalid: tailLines: Invalid value: -1: must be greater than or equal to 0"
    );
    assert_eq!(v["details"]["causes"][0]["field"], "tailLines");
    let r = http(
        &s,
        "GET",
        &format!("{base}?container=main&sinceSeconds=1&sinceTime=2020-01-01T00:00:00Z"),
        None,
    )
    .await;
    assert_eq!(
        r.json()["details"]["causes"][0]["reason"],
        "FieldValueForbidden"
    );
    let r = http(
        &s,
        "GET",
        &format!("{base}?container=main&tailLines=abc"),
        None,
    )
    .await;
    assert_eq!(
        (r.status, r.json()["message"].clone()),
        (
            400,
            json!("strconv.ParseInt: parsing \"abc\": invalid syntax")
        )
    );
    let r = http(
        &s,
        "GET",
        &format!("{base}?container=main&previous=true"),
        None,
    )
    .await;
    assert_eq!(r.status, 400);

    // Follow: the lines so far, then each new one as it is logged.
    let resp = pods::send(
        &s,
        "GET",
        &format!("{base}?container=main&follow=true"),
        None,
    )
    .await;
    assert_eq!(resp.status(), 200);
    let mut body = resp.into_body();
    let mut got = String::new();
    let read_until = async |body: &mut hyper::body::Incoming, got: &mut String, want: &str| {
        use http_body_util::BodyExt;
        while !got.contains(want) {
            let f = tokio::time::timeout(Duration::from_secs(10), body.frame())
                .await
                .unwrap()
                .unwrap()
                .unwrap();
            if let Ok(d) = f.into_data() {
                got.push_str(&String::from_utf8_lossy(&d));
            }
        }
    };
    read_until(&mut body, &mut got, "two main\n").await;
    feed.send("three".into()).unwrap();
    read_until(&mut body, &mut got, "three\n").await;
    feed.send("four\nfive".into()).unwrap();
    read_until(&mut body, &mut got, "five\n").await;
    assert_eq!(got, "one main\ntwo main\nthree\nfour\nfive\n");
    // The stream ends when the pod goes.
    http(
        &s,
        "DELETE",
        "/api/v1/namespaces/l/pods/p?gracePeriodSeconds=0",
        None,
    )
    .await;
    let end = tokio::time::timeout(Duration::from_secs(10), async {
        use http_body_util::BodyExt;
        while let Some(f) = body.frame().await {
            if f.is_err() {
                break;
            }
        }
    })
    .await;
    assert!(end.is_ok(), "follow did not end with the pod");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unscheduled_and_unknown_embedded_only() {
    if kubewright_testing::embedded_only(SKIP) {
        return;
    }
    // Without the kubelet: what a real server answers for a pod without a node.
    let s = TestServer::start().await.unwrap();
    pod(&s, "default", "p", &["a", "b"], json!({})).await;
    pod(&s, "default", "q", &["a"], json!({})).await;
    let r = http(&s, "GET", "/api/v1/namespaces/default/pods/q/log", None).await;
    assert_eq!((r.status, r.body.len()), (204, 0));
    let r = http(&s, "GET", "/api/v1/namespaces/default/pods/p/log", None).await;
    assert_eq!(
        r.json()["message"],
        "a container name must be specified for pod p, choose one of: [a b]"
    );
    for sub in [
        "exec?command=ls&stdout=true",
        "attach?stdout=true",
        "portforward?ports=80",
    ] {
        for m in ["GET", "POST"] {
            let r = http(
                &s,
                m,
                &format!("/api/v1/namespaces/default/pods/q/{sub}"),
                None,
            )
            .await;
            assert_eq!(r.status, 400, "{m} {sub}");
            let v = r.json();
            assert_eq!(v["message"], "pod q does not have a host assigned");
            assert_eq!(v["reason"], "BadRequest");
        }
    }
    let (code, body) = ws(
        &s,
        &exec_path("default", "q", "command=ls&stdout=true"),
        &["v5.channel.k8s.io"],
    )
    .await
    .err()
    .unwrap();
    assert_eq!(code, 400);
    assert!(body.contains("does not have a host assigned"), "{body}");
    let r = http(
        &s,
        "GET",
        "/api/v1/namespaces/default/pods/q/exec?command=ls&stdout=true&container=zz",
        None,
    )
    .await;
    assert_eq!(r.json()["message"], "container zz is not valid for pod q");
    let r = http(
        &s,
        "GET",
        "/api/v1/namespaces/default/pods/q/portforward?ports=abc",
        None,
    )
    .await;
    assert_eq!(
        r.json()["message"],
        "cannot convert to []int32: strconv.ParseUint: parsing \"abc\": invalid syntax"
    );
    let r = http(
        &s,
        "GET",
        "/api/v1/namespaces/default/pods/nope/exec?command=ls&stdout=true",
        None,
    )
    .await;
    assert_eq!(
        (r.status, r.json()["message"].clone()),
        (404, json!("pods \"nope\" not found"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_get_needs_create_too_embedded_only() {
    if kubewright_testing::embedded_only(
        "authenticates a user the real cluster's TestEnv has no token for",
    ) {
        return;
    }
    let s = TestServer::builder()
        .token("admin-token")
        .user(
            "alice-token",
            kubewright_apiserver::UserInfo::new("alice", &[]),
        )
        .start()
        .await
        .unwrap();
    let admin = |m: &'static str, path: String, body: Value| {
        let s = &s;
        async move {
            let tcp = tokio::net::TcpStream::connect(s.addr()).await.unwrap();
            let (mut tx, conn) =
                hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp))
                    .await
                    .unwrap();
            tokio::spawn(conn);
            let req = http::Request::builder()
                .method(m)
                .uri(path)
                .header("host", "x")
                .header("authorization", "Bearer admin-token")
                .header("content-type", "application/json")
                .body(http_body_util::Full::new(bytes::Bytes::from(
                    serde_json::to_vec(&body).unwrap(),
                )))
                .unwrap();
            let r = tx.send_request(req).await.unwrap();
            assert!(r.status().is_success(), "{}", r.status());
        }
    };
    admin("POST", "/api/v1/namespaces/default/pods".into(), json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "a", "image": "x"}]}})).await;
    let role = |name: &str, verb: &str| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": name},
        "rules": [{"apiGroups": [""], "resources": ["pods/exec"], "verbs": [verb]}]})
    };
    let binding = |name: &str| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}]})
    };
    admin(
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles".into(),
        role("get", "get"),
    )
    .await;
    admin(
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings".into(),
        binding("get"),
    )
    .await;
    let alice = || async {
        let tcp = tokio::net::TcpStream::connect(s.addr()).await.unwrap();
        let (mut tx, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp))
                .await
                .unwrap();
        tokio::spawn(conn);
        let req = http::Request::builder()
            .uri("/api/v1/namespaces/default/pods/p/exec?command=ls&stdout=true")
            .header("host", "x")
            .header("authorization", "Bearer alice-token")
            .body(http_body_util::Full::new(bytes::Bytes::new()))
            .unwrap();
        let r = tx.send_request(req).await.unwrap();
        let code = r.status().as_u16();
        use http_body_util::BodyExt;
        let v: Value =
            serde_json::from_slice(&r.into_body().collect().await.unwrap().to_bytes()).unwrap();
        (code, v["message"].as_str().unwrap_or("").to_string())
    };
    // get alone: the secondary create check fails, without a reason text (kube 1.36).
    assert_eq!(
        alice().await,
        (403, "pods \"p\" is forbidden: ".to_string())
    );
    admin(
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles".into(),
        role("create", "create"),
    )
    .await;
    admin(
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings".into(),
        binding("create"),
    )
    .await;
    assert_eq!(
        alice().await,
        (400, "pod p does not have a host assigned".to_string())
    );
}

/// An exec handler that records what it saw.
#[derive(Default)]
struct Seen {
    commands: Vec<Vec<String>>,
    resizes: Vec<(u16, u16)>,
}

fn recording(seen: Arc<Mutex<Seen>>) -> Kubelet {
    Kubelet::new().exec(move |mut s: ExecSession| {
        let seen = seen.clone();
        async move {
            seen.lock().unwrap().commands.push(s.command.clone());
            match s.command.first().map(String::as_str) {
                Some("resize") => {
                    // Reports each terminal size on stdout until stdin ends.
                    let mut stdin = s.stdin.take().unwrap();
                    let mut out = s.stdout.take().unwrap();
                    let mut buf = [0u8; 64];
                    loop {
                        tokio::select! {
                            Some(sz) = s.resize.recv() => {
                                seen.lock().unwrap().resizes.push((sz.width, sz.height));
                                out.write_all(format!("{}x{}\n", sz.width, sz.height).as_bytes()).await.unwrap();
                            }
                            n = stdin.read(&mut buf) => if n.unwrap_or(0) == 0 { return 0 },
                        }
                    }
                }
                Some("both") => {
                    s.stdout.as_mut().unwrap().write_all(b"out").await.unwrap();
                    s.stderr.as_mut().unwrap().write_all(b"err").await.unwrap();
                    7
                }
                _ => kubewright_apiserver::Kubelet::builtin_exec(s).await,
            }
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_v5_frames_status_and_close_embedded_only() {
    if kubewright_testing::embedded_only(SKIP) {
        return;
    }
    let seen = Arc::new(Mutex::new(Seen::default()));
    let s = server(recording(seen.clone())).await;
    pod(&s, "default", "p", &["c"], json!({"containers": [{"name": "c", "image": "busybox", "env": [{"name": "GREETING", "value": "hi"}]}]})).await;
    running(&s, "default", "p").await;

    // echo: an empty stdout message first, the output, then Success on channel 3.
    let (mut w, proto) = ws(
        &s,
        &exec_path(
            "default",
            "p",
            "command=echo&command=hello&stdout=true&stderr=true",
        ),
        &["v5.channel.k8s.io", "v4.channel.k8s.io"],
    )
    .await
    .unwrap();
    assert_eq!(proto, "v5.channel.k8s.io");
    let (msgs, close) = collect(&mut w).await;
    assert_eq!(msgs[0], (1, vec![]), "first message: empty, on stdout");
    assert_eq!(channel(&msgs, 1), b"hello\n");
    assert_eq!(
        msgs.last().unwrap(),
        &(3, br#"{"metadata":{},"status":"Success"}"#.to_vec())
    );
    assert_eq!(close, Some(1000));

    // sh -c "exit 3": NonZeroExitCode with the code as a cause.
    let (mut w, _) = ws(
        &s,
        &exec_path(
            "default",
            "p",
            "command=sh&command=-c&command=exit%203&stdout=true",
        ),
        &["v5.channel.k8s.io"],
    )
    .await
    .unwrap();
    let (msgs, _) = collect(&mut w).await;
    let status: Value = serde_json::from_slice(&channel(&msgs, 3)).unwrap();
    assert_eq!(status["status"], "Failure");
    assert_eq!(status["reason"], "NonZeroExitCode");
    assert_eq!(
        status["details"]["causes"],
        json!([{"reason": "ExitCode", "message": "3"}])
    );
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .starts_with("command terminated with non-zero exit code")
    );

    // Unknown command: 127 and a message on stderr.
    let (mut w, _) = v5(&s, "command=ls&stdout=true&stderr=true").await;
    let (msgs, _) = collect(&mut w).await;
    assert!(String::from_utf8_lossy(&channel(&msgs, 2)).contains("ls: command not found"));
    let status: Value = serde_json::from_slice(&channel(&msgs, 3)).unwrap();
    assert_eq!(status["details"]["causes"][0]["message"], "127");

    // cat: stdin comes back; v5's close message [255, 0] ends stdin. An unknown
    // channel and a write to stdout are ignored.
    let (mut w, _) = v5(&s, "command=cat&stdin=true&stdout=true").await;
    assert_eq!(
        pods::next(&mut w).await,
        Some(Message::Binary(vec![1u8].into()))
    );
    send_ch(&mut w, 0, b"abc").await;
    send_ch(&mut w, 9, b"ignored").await;
    send_ch(&mut w, 1, b"ignored too").await;
    w.send(Message::Binary(Vec::<u8>::new().into()))
        .await
        .unwrap();
    send_ch(&mut w, 0, b"def").await;
    w.send(Message::Binary(vec![255u8, 0].into()))
        .await
        .unwrap();
    let (msgs, _) = collect(&mut w).await;
    assert_eq!(channel(&msgs, 1), b"abcdef");
    assert_eq!(msgs.last().unwrap().0, 3);

    // stdout and stderr apart; env from the pod spec; hostname is the pod.
    let (mut w, _) = v5(&s, "command=both&stdout=true&stderr=true").await;
    let (msgs, _) = collect(&mut w).await;
    assert_eq!(
        (channel(&msgs, 1), channel(&msgs, 2)),
        (b"out".to_vec(), b"err".to_vec())
    );
    let (mut w, _) = v5(&s, "command=env&stdout=true").await;
    let env = String::from_utf8(channel(&collect(&mut w).await.0, 1)).unwrap();
    assert!(
        env.contains("GREETING=hi\n") && env.contains("HOSTNAME=p\n"),
        "{env}"
    );

    // Only stderr asked for: the first message is on stderr; none: on the error channel.
    let (mut w, _) = v5(&s, "command=true&stderr=true").await;
    assert_eq!(collect(&mut w).await.0[0], (2, vec![]));
    let (mut w, _) = v5(&s, "command=true&stdin=true").await;
    assert_eq!(
        pods::next(&mut w).await,
        Some(Message::Binary(vec![3u8].into()))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_resize_v4_and_base64_embedded_only() {
    if kubewright_testing::embedded_only(SKIP) {
        return;
    }
    let seen = Arc::new(Mutex::new(Seen::default()));
    let s = server(recording(seen.clone())).await;
    pod(&s, "default", "p", &["c"], json!({})).await;
    running(&s, "default", "p").await;

    // Resize messages (channel 4) reach the handler; with a tty there is no stderr.
    let (mut w, _) = ws(
        &s,
        &exec_path(
            "default",
            "p",
            "command=resize&stdin=true&stdout=true&stderr=true&tty=true",
        ),
        &["v5.channel.k8s.io"],
    )
    .await
    .unwrap();
    assert_eq!(
        pods::next(&mut w).await,
        Some(Message::Binary(vec![1u8].into()))
    );
    send_ch(&mut w, 4, br#"{"Width":80,"Height":24}"#).await;
    send_ch(&mut w, 4, b"not json").await;
    send_ch(&mut w, 4, br#"{"Width":120,"Height":40}"#).await;
    let mut got = Vec::new();
    while !String::from_utf8_lossy(&got).contains("120x40") {
        if let Some(Message::Binary(b)) = pods::next(&mut w).await {
            assert_eq!(b[0], 1);
            got.extend_from_slice(&b[1..]);
        }
    }
    assert_eq!(String::from_utf8_lossy(&got), "80x24\n120x40\n");
    w.send(Message::Binary(vec![255u8, 0].into()))
        .await
        .unwrap();
    let (msgs, _) = collect(&mut w).await;
    assert_eq!(msgs.last().unwrap().0, 3);
    assert_eq!(seen.lock().unwrap().resizes, [(80, 24), (120, 40)]);

    // v4: the same status JSON; no close message (255 is just an unknown channel).
    let (mut w, proto) = ws(
        &s,
        &exec_path("default", "p", "command=false&stdout=true"),
        &["v4.channel.k8s.io"],
    )
    .await
    .unwrap();
    assert_eq!(proto, "v4.channel.k8s.io");
    let (msgs, _) = collect(&mut w).await;
    let status: Value = serde_json::from_slice(&channel(&msgs, 3)).unwrap();
    assert_eq!(status["details"]["causes"][0]["message"], "1");

    // v4.base64: text messages, ASCII channel digit plus base64.
    let (mut w, proto) = ws(
        &s,
        &exec_path("default", "p", "command=cat&stdin=true&stdout=true"),
        &["v4.base64.channel.k8s.io"],
    )
    .await
    .unwrap();
    assert_eq!(proto, "v4.base64.channel.k8s.io");
    assert_eq!(pods::next(&mut w).await, Some(Message::Text("1".into())));
    w.send(Message::Text("0aGVsbG8=".into())).await.unwrap();
    assert_eq!(
        pods::next(&mut w).await,
        Some(Message::Text("1aGVsbG8=".into()))
    );
    w.close(None).await.unwrap();

    // No protocol offered: the original channel protocol (binary, no header back).
    let (mut w, proto) = ws(
        &s,
        &exec_path("default", "p", "command=echo&command=x&stdout=true"),
        &[],
    )
    .await
    .unwrap();
    assert_eq!(proto, "");
    let (msgs, _) = collect(&mut w).await;
    assert_eq!(channel(&msgs, 1), b"x\n");
    assert!(channel(&msgs, 3).is_empty(), "v1 writes nothing on success");

    // Errors before the upgrade.
    let (code, body) = ws(
        &s,
        &exec_path("default", "p", "command=ls"),
        &["v5.channel.k8s.io"],
    )
    .await
    .err()
    .unwrap();
    assert_eq!(
        (code, body.as_str()),
        (400, "you must specify at least 1 of stdin, stdout, stderr")
    );
    let (code, body) = ws(
        &s,
        &exec_path("default", "p", "command=ls&stdout=true"),
        &["v9.nothing"],
    )
    .await
    .err()
    .unwrap();
    assert_eq!(code, 400);
    assert!(body.contains("not supported"), "{body}");
    let r = http(
        &s,
        "GET",
        &exec_path("default", "p", "command=ls&stdout=true"),
        None,
    )
    .await;
    assert_eq!(r.status, 400, "a GET without an upgrade");
}

/// Tells when the handler's future is dropped or finishes.
struct Gone(Option<tokio::sync::oneshot::Sender<()>>);
impl Drop for Gone {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_bad_peers_embedded_only() {
    if kubewright_testing::embedded_only(SKIP) {
        return;
    }
    type Slot = Arc<Mutex<Option<tokio::sync::oneshot::Sender<()>>>>;
    let slot: Slot = Arc::default();
    let slot2 = slot.clone();
    let k = Kubelet::new().exec(move |mut s: ExecSession| {
        let gone = Gone(slot2.lock().unwrap().take());
        async move {
            let _gone = gone;
            if s.command == ["flood"] {
                // Writes until the client stops reading or goes away.
                let out = s.stdout.as_mut().unwrap();
                let chunk = vec![b'x'; 64 * 1024];
                while out.write_all(&chunk).await.is_ok() {}
                return 0;
            }
            // Waits on stdin.
            let mut buf = Vec::new();
            let _ = s.stdin.take().unwrap().read_to_end(&mut buf).await;
            0
        }
    });
    let s = server(k).await;
    pod(&s, "default", "p", &["c"], json!({})).await;
    running(&s, "default", "p").await;
    let arm = || {
        let (tx, rx) = tokio::sync::oneshot::channel();
        *slot.lock().unwrap() = Some(tx);
        rx
    };

    // Oversized message: closed with 1009 (message too big), the session ends.
    let done = arm();
    let (mut w, _) = v5(&s, "command=wait&stdin=true&stdout=true").await;
    assert_eq!(
        pods::next(&mut w).await,
        Some(Message::Binary(vec![1u8].into()))
    );
    let big = vec![0u8; 2 * 1024 * 1024];
    let _ = w.send(Message::Binary(big.into())).await;
    let mut code = None;
    while let Ok(Some(m)) = tokio::time::timeout(Duration::from_secs(10), w.next()).await {
        match m {
            Ok(Message::Close(f)) => {
                code = f.map(|f| u16::from(f.code));
                break;
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    assert_eq!(code, Some(1009));
    tokio::time::timeout(Duration::from_secs(10), done)
        .await
        .unwrap()
        .unwrap();

    // A peer that closes the connection in the middle of a frame.
    let done = arm();
    let (w, _) = v5(&s, "command=wait&stdin=true&stdout=true").await;
    let mut tcp = w.into_inner();
    // A masked binary frame header announcing 100 bytes, then 10 bytes, then EOF.
    tcp.write_all(&[0x82, 0x80 | 100, 1, 2, 3, 4])
        .await
        .unwrap();
    tcp.write_all(&[0u8; 10]).await.unwrap();
    drop(tcp);
    tokio::time::timeout(Duration::from_secs(10), done)
        .await
        .unwrap()
        .unwrap();

    // A slow reader: output waits (bounded), the server keeps serving, and the
    // session ends when the client goes away.
    let done = arm();
    let (w, _) = v5(&s, "command=flood&stdout=true").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let t0 = std::time::Instant::now();
    assert_eq!(http(&s, "GET", "/version", None).await.status, 200);
    // Generous: only a server blocked behind the slow reader exceeds it.
    assert!(t0.elapsed() < Duration::from_secs(10));
    drop(w);
    tokio::time::timeout(Duration::from_secs(10), done)
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attach_and_port_forward_embedded_only() {
    if kubewright_testing::embedded_only(SKIP) {
        return;
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut c, _)) = listener.accept().await {
            tokio::spawn(async move {
                let _ = c.write_all(b"hello from tcp\n").await;
                let mut buf = [0u8; 1024];
                while let Ok(n) = c.read(&mut buf).await {
                    if n == 0 || c.write_all(&buf[..n].to_ascii_uppercase()).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    let k = Kubelet::new().port_forward(move |_: &PodRef, port: u16| match port {
        80 => PortTarget::Echo,
        8080 => PortTarget::Tcp(addr),
        _ => PortTarget::Refuse("connection refused".into()),
    });
    let s = server(k).await;
    pod(&s, "default", "p", &["c"], json!({})).await;
    let uid = running(&s, "default", "p").await["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();

    // attach with stdin: the built-in main process echoes it.
    let (mut w, _) = ws(
        &s,
        "/api/v1/namespaces/default/pods/p/attach?stdin=true&stdout=true",
        &["v5.channel.k8s.io"],
    )
    .await
    .unwrap();
    send_ch(&mut w, 0, b"ping").await;
    w.send(Message::Binary(vec![255u8, 0].into()))
        .await
        .unwrap();
    let (msgs, _) = collect(&mut w).await;
    assert_eq!(channel(&msgs, 1), b"ping");

    // Port-forward: each port's two channels start with the port, little-endian.
    let path = "/api/v1/namespaces/default/pods/p/portforward?ports=80,8080&ports=9";
    let (mut w, proto) = ws(&s, path, &["v4.channel.k8s.io"]).await.unwrap();
    assert_eq!(proto, "v4.channel.k8s.io");
    let mut firsts = Vec::new();
    for _ in 0..6 {
        match pods::next(&mut w).await {
            Some(Message::Binary(b)) => firsts.push(b.to_vec()),
            m => panic!("{m:?}"),
        }
    }
    assert_eq!(
        firsts,
        [
            vec![0, 80, 0],
            vec![1, 80, 0],
            vec![2, 0x90, 0x1f],
            vec![3, 0x90, 0x1f],
            vec![4, 9, 0],
            vec![5, 9, 0]
        ]
    );
    let mut by_ch: std::collections::HashMap<u8, Vec<u8>> = Default::default();
    send_ch(&mut w, 0, b"echo me").await;
    send_ch(&mut w, 2, b"shout\n").await;
    send_ch(&mut w, 1, b"ignored: the error channel is the server's").await;
    let want = |m: &std::collections::HashMap<u8, Vec<u8>>| {
        m.get(&0).is_some_and(|d| d == b"echo me")
            && m.get(&2).is_some_and(|d| d == b"hello from tcp\nSHOUT\n")
            && m.get(&5)
                .is_some_and(|d| d.ends_with(b"connection refused"))
    };
    while !want(&by_ch) {
        match pods::next(&mut w).await {
            Some(Message::Binary(b)) => by_ch.entry(b[0]).or_default().extend_from_slice(&b[1..]),
            m => panic!("{m:?} with {by_ch:?}"),
        }
    }
    let err = String::from_utf8(by_ch[&5].clone()).unwrap();
    assert_eq!(
        err,
        format!("error forwarding port 9 to pod p_default, uid {uid}: connection refused")
    );
    w.close(None).await.unwrap();

    // Without ports: the kubelet's error.
    let (code, body) = ws(
        &s,
        "/api/v1/namespaces/default/pods/p/portforward",
        &["v4.channel.k8s.io"],
    )
    .await
    .err()
    .unwrap();
    assert_eq!(
        (code, body.as_str()),
        (400, "query parameter \"port\" is required")
    );

    // More ports than the protocol's channel byte (or base64 digit) can name: refused
    // (over base64, 105 ports used to overflow the digit and end the server task).
    let many = |n: u16| {
        let list: Vec<String> = (1..=n).map(|p| p.to_string()).collect();
        format!(
            "/api/v1/namespaces/default/pods/p/portforward?ports={}",
            list.join(",")
        )
    };
    let (code, body) = ws(&s, &many(105), &["v4.base64.channel.k8s.io"])
        .await
        .err()
        .unwrap();
    assert_eq!(
        (code, body.as_str()),
        (
            400,
            "105 ports requested; v4.base64.channel.k8s.io carries at most 40"
        )
    );
    let (code, _) = ws(&s, &many(129), &["v4.channel.k8s.io"])
        .await
        .err()
        .unwrap();
    assert_eq!(code, 400);
    // 40 over base64: the last port's channels are '0' + 78 and '0' + 79, still ASCII.
    let (mut w, _) = ws(&s, &many(40), &["v4.base64.channel.k8s.io"])
        .await
        .unwrap();
    let mut digits = Vec::new();
    for _ in 0..80 {
        match pods::next(&mut w).await {
            Some(Message::Text(t)) => digits.push(t.as_bytes()[0]),
            m => panic!("{m:?}"),
        }
    }
    assert_eq!(digits.iter().max(), Some(&(b'0' + 79)));
    w.close(None).await.unwrap();
}

/// Streaming sessions are bounded: more than the kubelet's maximum at once are refused
/// with 429, and one without a byte in either direction for the idle timeout is closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_sessions_are_capped_and_idle_ones_closed_embedded_only() {
    if kubewright_testing::embedded_only(SKIP) {
        return;
    }
    let idle = Duration::from_millis(400);
    let k = Kubelet::new()
        .streaming_idle_timeout(idle)
        .max_streaming_sessions(1);
    let s = server(k).await;
    pod(&s, "default", "p", &["c"], json!({})).await;
    running(&s, "default", "p").await;

    // A shell waiting for input: one session, the only one allowed.
    let (mut first, _) = v5(&s, "command=sh&stdin=true&stdout=true").await;
    let (code, body) = ws(
        &s,
        &exec_path("default", "p", "command=true&stdout=true"),
        &["v5.channel.k8s.io"],
    )
    .await
    .err()
    .unwrap();
    assert_eq!(code, 429, "{body}");
    // Activity keeps it open past the idle timeout...
    let started = std::time::Instant::now();
    for _ in 0..4 {
        tokio::time::sleep(idle / 2).await;
        send_ch(&mut first, 0, b"echo hi\n").await;
    }
    let mut seen = Vec::new();
    // ...then silence closes it (a close or a dropped connection).
    loop {
        match tokio::time::timeout(Duration::from_secs(10), first.next()).await {
            Ok(Some(Ok(Message::Binary(b)))) => seen.extend_from_slice(&b[1..]),
            Ok(Some(Ok(Message::Close(_))) | Some(Err(_)) | None) => break,
            Ok(Some(Ok(_))) => {}
            Err(_) => panic!("an idle session stayed open for 10 s"),
        }
    }
    assert!(started.elapsed() >= idle * 2, "{:?}", started.elapsed());
    assert!(String::from_utf8_lossy(&seen).contains("hi"), "{seen:?}");
    // Its slot is free again.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match ws(
            &s,
            &exec_path("default", "p", "command=true&stdout=true"),
            &["v5.channel.k8s.io"],
        )
        .await
        {
            Ok((mut w, _)) => {
                let _ = collect(&mut w).await;
                break;
            }
            Err((429, _)) if std::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("{e:?}"),
        }
    }
}
