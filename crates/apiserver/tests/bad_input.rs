//! Bad input gets a Status with the right code and reason, never a panic or a dropped
//! connection. Driven through `kubectl --raw` so it runs unchanged against a real cluster
//! (KUBEWRIGHT_TEST_KUBECONFIG) and the embedded server.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use kubewright_apiserver::TestServer;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

struct Env {
    kubeconfig: PathBuf,
    dir: tempfile::TempDir,
    _server: Option<TestServer>,
    ns: String,
}

impl Env {
    async fn start() -> Option<Self> {
        let ok = Command::new("kubectl")
            .args(["version", "--client"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("skipping: kubectl is not installed");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let (kubeconfig, server) = match std::env::var("KUBEWRIGHT_TEST_KUBECONFIG") {
            Ok(p) if !p.is_empty() => (PathBuf::from(p), None),
            _ => {
                let s = TestServer::builder()
                    .tls(true)
                    .token("bad-input-token")
                    .start()
                    .await
                    .unwrap();
                let kc = dir.path().join("kubeconfig");
                s.write_kubeconfig(&kc).unwrap();
                (kc, Some(s))
            }
        };
        let ns = format!(
            "kwbad-{:08x}",
            std::process::id()
                ^ (std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .subsec_nanos())
        );
        let env = Self {
            kubeconfig,
            dir,
            _server: server,
            ns,
        };
        let (ok, _, err) = env.kubectl(&["create", "namespace", &env.ns], None);
        assert!(ok, "{err}");
        Some(env)
    }

    fn kubectl(&self, args: &[&str], stdin: Option<&[u8]>) -> (bool, String, String) {
        let mut cmd = Command::new("kubectl");
        cmd.arg("--kubeconfig").arg(&self.kubeconfig).args(args);
        cmd.env("KUBECACHEDIR", self.dir.path().join("cache"));
        cmd.stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        if let Some(input) = stdin {
            child.stdin.take().unwrap().write_all(input).unwrap();
        }
        let out = child.wait_with_output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// POSTs a raw body to the configmaps collection; returns kubectl's stderr.
    fn post_raw(&self, body: &[u8]) -> String {
        let path = format!("/api/v1/namespaces/{}/configmaps", self.ns);
        let file = self.dir.path().join("body");
        std::fs::write(&file, body).unwrap();
        let (ok, out, err) = self.kubectl(
            &["create", "--raw", &path, "-f", file.to_str().unwrap()],
            None,
        );
        assert!(!ok, "expected a failure, got {out}");
        err
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        let _ = self.kubectl(&["delete", "namespace", &self.ns, "--wait=false"], None);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_and_invalid_bodies_get_statuses() {
    let Some(env) = Env::start().await else {
        return;
    };
    // Malformed JSON -> 400.
    let err = env.post_raw(b"{\"apiVersion\": \"v1\", \"kind\": ");
    assert!(err.contains("BadRequest") || err.contains("400"), "{err}");
    // Wrong kind for the URL -> 400.
    let err = env.post_raw(br#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"x"}}"#);
    assert!(err.contains("BadRequest") || err.contains("400"), "{err}");
    // Invalid name -> 422 naming metadata.name.
    let err =
        env.post_raw(br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"Bad_Name"}}"#);
    assert!(
        err.contains("Invalid") && err.contains("metadata.name"),
        "{err}"
    );
    // No name and no generateName -> 422.
    let err = env.post_raw(br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{}}"#);
    assert!(err.contains("name or generateName is required"), "{err}");
    // A wrongly typed field -> 400.
    let err = env.post_raw(
        br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"t"},"data":{"k":5}}"#,
    );
    assert!(err.contains("BadRequest") || err.contains("400"), "{err}");
    // Oversized body -> 413.
    let mut big =
        br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big"},"data":{"k":""#
            .to_vec();
    big.extend(std::iter::repeat_n(b'a', 3 * 1024 * 1024 + 10));
    big.extend(br#""}}"#);
    let err = env.post_raw(&big);
    assert!(
        err.contains("413") || err.contains("too large") || err.contains("RequestEntityTooLarge"),
        "{err}"
    );
    // The server is still healthy.
    let (ok, out, _) = env.kubectl(&["get", "--raw", "/readyz"], None);
    assert!(ok && out.trim() == "ok", "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_field_validation_and_warnings() {
    let Some(env) = Env::start().await else {
        return;
    };
    let manifest = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: strict\n  namespace: {}\nbogus: 1\ndata:\n  a: b\n",
        env.ns
    );
    // kubectl validates strictly by default: unknown fields are rejected by the server.
    let (ok, _, err) = env.kubectl(&["create", "-f", "-"], Some(manifest.as_bytes()));
    assert!(!ok && err.contains("bogus"), "{err}");
    // --validate=warn: created, with a warning naming the field.
    let (ok, _, err) = env.kubectl(
        &["create", "--validate=warn", "-f", "-"],
        Some(manifest.as_bytes()),
    );
    assert!(ok, "{err}");
    assert!(
        err.contains("unknown field") && err.contains("bogus"),
        "{err}"
    );
    // --validate=false: created silently.
    let m2 = manifest.replace("name: strict", "name: lax");
    let (ok, _, err) = env.kubectl(
        &["create", "--validate=false", "-f", "-"],
        Some(m2.as_bytes()),
    );
    assert!(ok && !err.contains("bogus"), "{err}");
}
