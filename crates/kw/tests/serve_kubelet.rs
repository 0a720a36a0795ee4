//! `kw serve --kubelet` with kubectl 1.32: pods run on the simulated node, and
//! `kubectl logs [-f]`, `exec`, `attach`, `port-forward` and `drain` (blocked by a PodDisruptionBudget,
//! then allowed) work as on a real cluster. It starts its own `kw serve`, so it runs the
//! same whether or not the suite targets a real cluster; skipped with a message when
//! kubectl is absent.

#![allow(clippy::unwrap_used, clippy::panic)] // test code: a failed unwrap is a failed test

mod support;

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::{Serve, have_kubectl, kubectl, serve};

/// kubectl with stdin; returns (exit code, stdout, stderr).
fn kubectl_in(s: &Serve, args: &[&str], stdin: &str) -> (i32, String, String) {
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&s.kubeconfig)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[track_caller]
fn ok(s: &Serve, args: &[&str]) -> String {
    let (ok, out, err) = kubectl(s, args);
    assert!(ok, "kubectl {args:?}: {err}");
    out
}

fn run_pod(s: &Serve, name: &str, labels: &str) {
    ok(
        s,
        &[
            "run",
            name,
            "--image=busybox",
            "--labels",
            labels,
            "--overrides",
            r#"{"spec":{"terminationGracePeriodSeconds":1}}"#,
            "--",
            "sleep",
            "3600",
        ],
    );
    ok(
        s,
        &[
            "wait",
            "--for=condition=Ready",
            &format!("pod/{name}"),
            "--timeout=20s",
        ],
    );
}

#[test]
fn kubectl_logs_exec_attach_against_kw_serve_kubelet() {
    if !have_kubectl() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = serve(dir.path(), &["--kubelet", "--node-name", "sim-1"]);
    assert!(
        s.stdout
            .join("\n")
            .contains("simulated kubelet: node sim-1")
    );
    let nodes = ok(&s, &["get", "nodes", "--no-headers"]);
    assert!(
        nodes.contains("sim-1") && nodes.contains(" Ready "),
        "{nodes}"
    );
    run_pod(&s, "web", "app=web");
    let wide = ok(&s, &["get", "pod", "web", "-o", "wide", "--no-headers"]);
    assert!(
        wide.contains("Running") && wide.contains("sim-1") && wide.contains("1/1"),
        "{wide}"
    );

    // logs
    let logs = ok(&s, &["logs", "web"]);
    assert!(
        logs.starts_with("kubewright: container web of pod default/web started"),
        "{logs}"
    );
    let tail = ok(&s, &["logs", "web", "--tail=1", "--timestamps"]);
    assert_eq!(tail.lines().count(), 1, "{tail}");
    assert!(
        tail.contains("Z kubewright: this is a simulated container"),
        "{tail}"
    );

    // exec: stdin through cat, exit codes, unknown commands.
    let (code, out, err) = kubectl_in(&s, &["exec", "-i", "web", "--", "cat"], "hello\nworld\n");
    assert_eq!((code, out.as_str()), (0, "hello\nworld\n"), "{err}");
    let (code, _, err) = kubectl_in(&s, &["exec", "web", "--", "sh", "-c", "exit 3"], "");
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("command terminated with exit code 3"), "{err}");
    let (code, out, _) = kubectl_in(&s, &["exec", "web", "--", "hostname"], "");
    assert_eq!((code, out.as_str()), (0, "web\n"));
    let (code, _, err) = kubectl_in(&s, &["exec", "web", "--", "rm", "-rf", "/"], "");
    assert_eq!(code, 127);
    assert!(err.contains("rm: command not found"), "{err}");

    // attach: the built-in main process echoes stdin.
    let (code, out, err) = kubectl_in(&s, &["attach", "-i", "web"], "ping\n");
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("ping"), "{out} / {err}");

    // port-forward to the built-in echo service: kubectl 1.32 tunnels SPDY through a
    // WebSocket, or (with the feature off) upgrades to SPDY/3.1 directly.
    for websockets in ["true", "false"] {
        let mut pf = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&s.kubeconfig)
            .args(["port-forward", "pod/web", ":80"])
            .env("KUBECTL_PORT_FORWARD_WEBSOCKETS", websockets)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(pf.stdout.as_mut().unwrap()),
            &mut line,
        )
        .unwrap();
        let port = line
            .strip_prefix("Forwarding from 127.0.0.1:")
            .and_then(|l| l.split_whitespace().next())
            .unwrap_or_else(|| panic!("{line}"))
            .to_string();
        for text in ["first connection\n", "second connection\n"] {
            let mut conn = std::net::TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
            conn.set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            conn.write_all(text.as_bytes()).unwrap();
            let mut back = vec![0u8; text.len()];
            conn.read_exact(&mut back).unwrap();
            assert_eq!(back, text.as_bytes(), "websockets={websockets}");
        }
        let _ = pf.kill();
        let _ = pf.wait();
    }

    // logs -f: follows until the pod goes.
    let mut follow = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&s.kubeconfig)
        .args(["logs", "-f", "web"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = follow.stdout.take().unwrap();
    let mut first = [0u8; 11];
    stdout.read_exact(&mut first).unwrap();
    assert_eq!(&first, b"kubewright:");
    ok(&s, &["delete", "pod", "web", "--wait=false"]);
    let t0 = Instant::now();
    loop {
        if let Some(status) = follow.try_wait().unwrap() {
            assert!(status.success());
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "logs -f did not end"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    assert!(rest.contains("this is a simulated container"), "{rest}");
}

#[test]
fn kubectl_drain_waits_for_a_disruption_budget() {
    if !have_kubectl() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = serve(dir.path(), &["--kubelet"]);
    let node = kubewright_apiserver::DEFAULT_NODE;
    run_pod(&s, "db", "app=db");
    ok(
        &s,
        &[
            "create",
            "poddisruptionbudget",
            "db",
            "--selector=app=db",
            "--min-available=1",
        ],
    );
    let t0 = Instant::now();
    loop {
        let allowed = ok(
            &s,
            &[
                "get",
                "pdb",
                "db",
                "-o",
                "jsonpath={.status.currentHealthy}",
            ],
        );
        if allowed == "1" {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "budget never saw the pod"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Blocked: every eviction is refused until the timeout.
    let (done, _, err) = kubectl(
        &s,
        &[
            "drain",
            node,
            "--ignore-daemonsets",
            "--force",
            "--timeout=3s",
        ],
    );
    assert!(!done, "drain succeeded despite the budget");
    assert!(
        err.contains("Cannot evict pod as it would violate the pod's disruption budget"),
        "{err}"
    );
    let unschedulable = ok(
        &s,
        &["get", "node", node, "-o", "jsonpath={.spec.unschedulable}"],
    );
    assert_eq!(unschedulable, "true", "drain cordons first");
    assert!(ok(&s, &["get", "pod", "db", "--no-headers"]).contains("Running"));

    // The budget allows it: the pod is evicted and the drain completes.
    ok(
        &s,
        &[
            "patch",
            "pdb",
            "db",
            "--type=merge",
            "-p",
            r#"{"spec":{"minAvailable":0}}"#,
        ],
    );
    let (done, out, err) = kubectl(
        &s,
        &[
            "drain",
            node,
            "--ignore-daemonsets",
            "--force",
            "--timeout=30s",
        ],
    );
    assert!(done, "{out}\n{err}");
    assert!(out.contains("pod/db evicted"), "{out}");
    assert!(out.contains(&format!("node/{node} drained")), "{out}");
    let (found, _, _) = kubectl(&s, &["get", "pod", "db"]);
    assert!(!found, "the pod is gone");
}
