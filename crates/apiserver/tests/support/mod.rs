//! kubectl as a real client, shared by the kubectl-driven test files: against an embedded
//! server (TLS, an admin token) or, with KUBEWRIGHT_TEST_KUBECONFIG, a real cluster.

#![allow(dead_code, clippy::unwrap_used)] // test code: each file uses part of it

use kubewright_apiserver::TestServer;
use serde_json::Value;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// Whether kubectl is installed; prints why a test is skipped when it is not.
pub fn have_kubectl() -> bool {
    let ok = Command::new("kubectl")
        .args(["version", "--client"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("skipping: kubectl is not installed");
    }
    ok
}

/// Runs `attempt` (returning success and stderr) until it succeeds, while the failure is
/// only that a new CRD's resource is not served yet (a real cluster serves it a moment
/// after `Established`). Any other failure fails the test; returns false when it never
/// succeeded.
#[track_caller]
pub fn retry_until_served(mut attempt: impl FnMut() -> (bool, String)) -> bool {
    for _ in 0..50 {
        let (ok, err) = attempt();
        if ok {
            return true;
        }
        assert!(
            err.contains("the server doesn't have a resource type")
                || err.contains("no matches for kind")
                || err.contains("NotFound"),
            "{err}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    false
}

/// A random number for unique names.
pub fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish()
}

/// kubectl with a kubeconfig, a private discovery cache and an optional default namespace.
pub struct Kubectl {
    pub kubeconfig: PathBuf,
    pub dir: tempfile::TempDir,
    pub server: Option<TestServer>,
    /// Passed as `-n` to every command when set.
    pub namespace: Option<String>,
}

impl Kubectl {
    /// An embedded server, or the cluster of KUBEWRIGHT_TEST_KUBECONFIG.
    pub async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        match std::env::var("KUBEWRIGHT_TEST_KUBECONFIG") {
            Ok(p) if !p.is_empty() => Self {
                kubeconfig: PathBuf::from(p),
                dir,
                server: None,
                namespace: None,
            },
            _ => {
                let server = kubewright_testing::embedded_server()
                    .tls(true)
                    .token(format!("t{:016x}", rand_u64()))
                    .start()
                    .await
                    .unwrap();
                let kc = dir.path().join("kubeconfig");
                server.write_kubeconfig(&kc).unwrap();
                Self {
                    kubeconfig: kc,
                    dir,
                    server: Some(server),
                    namespace: None,
                }
            }
        }
    }

    /// Runs kubectl; returns (success, stdout, stderr).
    pub fn run(&self, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
        let mut cmd = Command::new("kubectl");
        cmd.arg("--kubeconfig").arg(&self.kubeconfig);
        if let Some(ns) = &self.namespace {
            cmd.args(["-n", ns]);
        }
        cmd.args(args);
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
            child
                .stdin
                .take()
                .unwrap()
                .write_all(input.as_bytes())
                .unwrap();
        }
        let out = child.wait_with_output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Runs kubectl and fails the test unless it succeeds; returns stdout.
    #[track_caller]
    pub fn ok(&self, args: &[&str], stdin: Option<&str>) -> String {
        let (ok, out, err) = self.run(args, stdin);
        assert!(ok, "kubectl {args:?} failed:\nstdout: {out}\nstderr: {err}");
        out
    }

    /// `ok` with `-o json`, parsed.
    #[track_caller]
    pub fn json(&self, args: &[&str]) -> Value {
        let mut a = args.to_vec();
        a.extend(["-o", "json"]);
        serde_json::from_str(&self.ok(&a, None)).unwrap()
    }
}
