//! Pod I/O through the client, against the embedded server (or a real cluster when
//! KUBEWRIGHT_TEST_KUBECONFIG is set): errors for a pod that runs nowhere, eviction and
//! PodDisruptionBudgets. The protocol details are in `tests/pod_io.rs`.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Container, Pod, PodCondition, PodSpec, PodStatus};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kubewright_client::pod::{AttachParams, EvictParams, LogParams};
use kubewright_client::{Api, Error};
use kubewright_core::{ObjectMeta, Patch, PatchParams, PostParams};
use kubewright_testing::TestEnv;
use serde_json::json;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

fn pod(name: &str, app: &str, containers: &[&str]) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([("app".to_string(), app.to_string())])),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: containers
                .iter()
                .map(|c| Container {
                    name: c.to_string(),
                    image: Some("busybox".into()),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_pod_without_a_node_has_no_logs_and_runs_nothing() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let pods: Api<Pod> = Api::namespaced(env.client(), &ns);
    pods.create(&PostParams::default(), &pod("idle", "idle", &["app"]))
        .await
        .unwrap();
    // kube-apiserver answers 204 No Content: no node, no log yet.
    assert_eq!(pods.logs("idle", &LogParams::default()).await.unwrap(), "");
    let follow = LogParams {
        follow: true,
        ..Default::default()
    };
    let lines: Vec<_> = pods
        .log_stream("idle", &follow)
        .await
        .unwrap()
        .collect()
        .await;
    assert!(lines.is_empty(), "{lines:?}");
    let err = pods
        .exec("idle", ["true"], &AttachParams::default())
        .await
        .unwrap_err();
    assert!(err.is_bad_request(), "{err}");
    assert!(
        err.to_string().contains("does not have a host assigned"),
        "{err}"
    );

    let two = pod("two", "two", &["a", "b"]);
    pods.create(&PostParams::default(), &two).await.unwrap();
    let err = pods.logs("two", &LogParams::default()).await.unwrap_err();
    assert!(err.is_bad_request(), "{err}");
    assert_eq!(
        err.status().unwrap().message,
        "a container name must be specified for pod two, choose one of: [a b]"
    );
    let err = pods
        .logs(
            "two",
            &LogParams {
                container: Some("zz".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert!(err.is_bad_request(), "{err}");
    assert_eq!(
        err.status().unwrap().message,
        "container zz is not valid for pod two"
    );
    let err = pods
        .logs("missing", &LogParams::default())
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err}");
}

/// Marks a pod Running and Ready through its status, as a kubelet would.
async fn make_ready(pods: &Api<Pod>, name: &str) {
    let status = PodStatus {
        phase: Some("Running".into()),
        conditions: Some(vec![PodCondition {
            type_: "Ready".into(),
            status: "True".into(),
            ..Default::default()
        }]),
        ..Default::default()
    };
    pods.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": status })),
    )
    .await
    .unwrap();
}

/// Waits until the disruption controller has computed the budget's status for its
/// current generation with `allowed` disruptions.
async fn budget_settles(pdbs: &Api<PodDisruptionBudget>, name: &str, allowed: i32) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let pdb = pdbs.get(name).await.unwrap();
        let status = pdb.status.clone().unwrap_or_default();
        if status.observed_generation == pdb.metadata.generation
            && status.disruptions_allowed.unwrap_or_default() == allowed
            && status.expected_pods == Some(2)
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "budget {name} never allowed {allowed} disruptions: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn eviction_waits_for_the_disruption_budget() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let pods: Api<Pod> = Api::namespaced(env.client(), &ns);
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(env.client(), &ns);
    for name in ["web-0", "web-1"] {
        pods.create(&PostParams::default(), &pod(name, "web", &["app"]))
            .await
            .unwrap();
        make_ready(&pods, name).await;
    }
    let budget = PodDisruptionBudget {
        metadata: ObjectMeta {
            name: Some("web".into()),
            ..Default::default()
        },
        spec: Some(PodDisruptionBudgetSpec {
            min_available: Some(IntOrString::Int(2)),
            selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([("app".to_string(), "web".to_string())])),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    pdbs.create(&PostParams::default(), &budget).await.unwrap();
    budget_settles(&pdbs, "web", 0).await;

    let err = pods
        .evict("web-0", &EvictParams::default())
        .await
        .unwrap_err();
    let Error::EvictionBlocked(status) = &err else {
        panic!("expected a blocked eviction, got {err}");
    };
    assert_eq!(status.code, 429);
    assert_eq!(
        status.message,
        "Cannot evict pod as it would violate the pod's disruption budget."
    );
    let cause = &status.details.as_ref().unwrap().causes[0];
    assert_eq!(cause.reason, "DisruptionBudget");
    assert_eq!(
        cause.message,
        "The disruption budget web needs 2 healthy pods and has 2 currently"
    );
    assert!(pods.get_opt("web-0").await.unwrap().is_some());

    pdbs.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({ "spec": { "minAvailable": 1 } })),
    )
    .await
    .unwrap();
    budget_settles(&pdbs, "web", 1).await;
    let status = pods.evict("web-0", &EvictParams::default()).await.unwrap();
    assert_eq!(status.status, "Success");
    // The pod is deleting (a real kubelet would finish it) or gone.
    let left = pods.get_opt("web-0").await.unwrap();
    assert!(
        left.as_ref()
            .is_none_or(|p| p.metadata.deletion_timestamp.is_some()),
        "{left:?}"
    );
}

#[tokio::test]
async fn a_pending_pod_is_evicted_whatever_the_budget() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let pods: Api<Pod> = Api::namespaced(env.client(), &ns);
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(env.client(), &ns);
    pods.create(&PostParams::default(), &pod("pending", "p", &["app"]))
        .await
        .unwrap();
    let budget = PodDisruptionBudget {
        metadata: ObjectMeta {
            name: Some("p".into()),
            ..Default::default()
        },
        spec: Some(PodDisruptionBudgetSpec {
            max_unavailable: Some(IntOrString::Int(0)),
            selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([("app".to_string(), "p".to_string())])),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    pdbs.create(&PostParams::default(), &budget).await.unwrap();
    // kube-apiserver skips the budget for pods that are not running yet.
    let status = pods
        .evict("pending", &EvictParams::default())
        .await
        .unwrap();
    assert_eq!(status.status, "Success");
}

/// The client's pod I/O against the embedded server's simulated kubelet, with handlers
/// that record what they were given. A real cluster without nodes runs no pod; the
/// protocol details are covered by `tests/pod_io.rs` against a hand-rolled peer.
#[tokio::test]
async fn logs_exec_attach_and_port_forward_through_the_kubelet_embedded_only() {
    use kubewright_apiserver::{ExecSession, Kubelet, PodRef, PortTarget, SessionKind};
    use std::sync::{Arc, Mutex};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    if kubewright_testing::embedded_only("no node runs pods on the test cluster") {
        return;
    }
    let resizes: Arc<Mutex<Vec<(u16, u16)>>> = Arc::default();
    let seen = resizes.clone();
    let (line_tx, line_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let line_rx = Arc::new(Mutex::new(Some(line_rx)));
    let echo = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let echo_addr = echo.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = echo.accept().await {
            tokio::spawn(async move {
                let (mut r, mut w) = s.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    let kubelet = Kubelet::new()
        .logs(move |_: &kubewright_apiserver::ContainerRef| {
            let rx = line_rx.lock().unwrap().take();
            futures::stream::unfold(rx, |rx| async move {
                let mut rx = rx?;
                let line = rx.recv().await?;
                Some((line, Some(rx)))
            })
        })
        .exec(move |mut s: ExecSession| {
            let seen = seen.clone();
            async move {
                if s.kind == SessionKind::Attach {
                    while let Some(size) = s.resize.recv().await {
                        seen.lock().unwrap().push((size.width, size.height));
                        if seen.lock().unwrap().len() == 2 {
                            break;
                        }
                    }
                    return 0;
                }
                let mut input = String::new();
                if let Some(stdin) = s.stdin.as_mut() {
                    stdin.read_to_string(&mut input).await.unwrap();
                }
                if let Some(out) = s.stdout.as_mut() {
                    let reply = format!("{} got {input:?}", s.command.join(" "));
                    out.write_all(reply.as_bytes()).await.unwrap();
                }
                if let Some(err) = s.stderr.as_mut() {
                    err.write_all(b"a warning").await.unwrap();
                }
                7
            }
        })
        .port_forward(move |_: &PodRef, port| {
            if port == 80 {
                PortTarget::Tcp(echo_addr)
            } else {
                PortTarget::Refuse(format!("nothing listens on {port}"))
            }
        });
    let server = kubewright_testing::embedded_server()
        .kubelet(kubelet)
        .start()
        .await
        .unwrap();
    let env = TestEnv::for_server(server);
    let ns = env.namespace().await;
    let pods: Api<Pod> = Api::namespaced(env.client(), &ns);
    pods.create(&PostParams::default(), &pod("web", "web", &["app"]))
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while pods
        .get("web")
        .await
        .unwrap()
        .status
        .and_then(|s| s.phase)
        .as_deref()
        != Some("Running")
    {
        assert!(Instant::now() < deadline, "the pod never ran");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Followed logs: lines arrive as the container writes them.
    let follow = LogParams {
        follow: true,
        ..Default::default()
    };
    let mut lines = pods.log_stream("web", &follow).await.unwrap();
    for text in ["one", "two"] {
        line_tx.send(text.to_string()).unwrap();
        let got = tokio::time::timeout(Duration::from_secs(10), lines.next())
            .await
            .expect("a followed line arrives")
            .unwrap()
            .unwrap();
        assert_eq!(got, text);
    }
    drop(lines);
    let with_times = LogParams {
        timestamps: true,
        tail_lines: Some(1),
        ..Default::default()
    };
    let last = pods.logs("web", &with_times).await.unwrap();
    assert!(last.ends_with(" two\n") && last.len() > 30, "{last:?}");

    // exec: stdin, stdout, stderr and the exit code.
    let mut p = pods
        .exec("web", ["run", "it"], &AttachParams::default().stdin(true))
        .await
        .unwrap();
    let mut stdin = p.stdin().unwrap();
    let (mut out, mut err) = (p.stdout().unwrap(), p.stderr().unwrap());
    stdin.write_all(b"input").await.unwrap();
    drop(stdin);
    let (mut o, mut e) = (String::new(), String::new());
    let (a, b) = tokio::join!(out.read_to_string(&mut o), err.read_to_string(&mut e));
    a.unwrap();
    b.unwrap();
    assert_eq!(
        (o.as_str(), e.as_str()),
        ("run it got \"input\"", "a warning")
    );
    let status = p.join().await.unwrap();
    assert_eq!(status.code, 7);

    // attach with a terminal: resize messages reach the handler.
    let mut p = pods
        .attach("web", &AttachParams::interactive_tty())
        .await
        .unwrap();
    let sizes = p.terminal_size().unwrap();
    sizes
        .send(kubewright_client::pod::TerminalSize {
            width: 80,
            height: 24,
        })
        .await
        .unwrap();
    sizes
        .send(kubewright_client::pod::TerminalSize {
            width: 120,
            height: 40,
        })
        .await
        .unwrap();
    assert!(p.join().await.unwrap().success());
    assert_eq!(*resizes.lock().unwrap(), [(80, 24), (120, 40)]);

    // port-forward: port 80 reaches the echo server; port 81 reports the refusal.
    let mut pf = pods.portforward("web", &[80, 81]).await.unwrap();
    let mut s = pf.take_stream(80).unwrap();
    let refused = pf.take_error(81).unwrap();
    s.write_all(b"ping").await.unwrap();
    let mut got = [0u8; 4];
    s.read_exact(&mut got).await.unwrap();
    assert_eq!(&got, b"ping");
    let text = tokio::time::timeout(Duration::from_secs(10), refused)
        .await
        .expect("the error arrives")
        .unwrap();
    assert!(text.contains("nothing listens on 81"), "{text}");
    pf.abort();
}
