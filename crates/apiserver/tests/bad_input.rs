//! Bad input gets a Status with the right code and reason, never a panic or a dropped
//! connection. Driven through `kubectl --raw` so it runs unchanged against a real cluster
//! (KUBEWRIGHT_TEST_KUBECONFIG) and the embedded server.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

mod support;

use support::{Kubectl, have_kubectl, rand_u64};

/// kubectl with a namespace of its own (deleted at the end).
struct Env {
    kubectl: Kubectl,
    ns: String,
}

impl std::ops::Deref for Env {
    type Target = Kubectl;
    fn deref(&self) -> &Kubectl {
        &self.kubectl
    }
}

impl Env {
    async fn start() -> Option<Self> {
        if !have_kubectl() {
            return None;
        }
        let env = Self {
            kubectl: Kubectl::start().await,
            ns: format!("kwbad-{:08x}", rand_u64() as u32),
        };
        let (ok, _, err) = env.kubectl(&["create", "namespace", &env.ns], None);
        assert!(ok, "{err}");
        Some(env)
    }

    fn kubectl(&self, args: &[&str], stdin: Option<&[u8]>) -> (bool, String, String) {
        self.run(args, stdin.map(|b| std::str::from_utf8(b).unwrap()))
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
