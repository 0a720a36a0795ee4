//! `kw serve` for more than one user: `--token-auth-file` users in kube-apiserver's CSV
//! format get contexts of their own and are authorized by RBAC; `--client-ca-file`
//! authenticates client certificates. Driven with kubectl, a real client; skipped with a
//! message when kubectl is absent. It starts its own `kw serve`, so it runs the same
//! whether or not the suite targets a real cluster.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

mod support;

use std::process::Command;
use support::{have_kubectl, kubectl, serve};

#[test]
fn token_file_users_get_contexts_and_rbac() {
    if !have_kubectl() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(
        &tokens,
        "alice-token-1,alice,uid-alice,\"devs,qa\"\nbob-token-2,bob,uid-bob\n",
    )
    .unwrap();
    let s = serve(dir.path(), &["--token-auth-file", tokens.to_str().unwrap()]);
    let banner = s.stdout.join("\n");
    assert!(banner.contains("context alice"), "{banner}");
    assert!(
        !banner.contains("alice-token-1"),
        "a token in the banner: {banner}"
    );

    // Each user is who the file says, with system:authenticated added.
    let (ok, out, err) = kubectl(&s, &["--context", "alice", "auth", "whoami", "-o", "json"]);
    assert!(ok, "{err}");
    let who: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(who["status"]["userInfo"]["username"], "alice");
    assert_eq!(who["status"]["userInfo"]["uid"], "uid-alice");
    assert_eq!(
        who["status"]["userInfo"]["groups"],
        serde_json::json!(["devs", "qa", "system:authenticated"])
    );
    // No rights until RBAC grants them.
    let (ok, _, err) = kubectl(&s, &["--context", "bob", "get", "pods", "-n", "default"]);
    assert!(
        !ok && err.contains("forbidden") && err.contains("\"bob\""),
        "{err}"
    );
    let (ok, _, err) = kubectl(
        &s,
        &[
            "create",
            "rolebinding",
            "devs-view",
            "--clusterrole=view",
            "--group=devs",
            "-n",
            "default",
        ],
    );
    assert!(ok, "{err}");
    let (ok, _, err) = kubectl(&s, &["--context", "alice", "get", "pods", "-n", "default"]);
    assert!(ok, "{err}");
    let (ok, _, err) = kubectl(
        &s,
        &[
            "--context",
            "alice",
            "create",
            "configmap",
            "x",
            "-n",
            "default",
        ],
    );
    assert!(!ok && err.contains("forbidden"), "{err}");
    let (ok, _, _) = kubectl(&s, &["--context", "bob", "get", "pods", "-n", "default"]);
    assert!(!ok, "bob is not in devs");
}

#[test]
fn bad_token_file_is_refused_without_echoing_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, "very-secret-token,alice\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kw"))
        .args(["serve", "--port", "0", "--token-auth-file"])
        .arg(&tokens)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("must have at least 3 columns (token, user name, user uid), found 2"),
        "{err}"
    );
    assert!(!err.contains("very-secret-token"), "{err}");
}

#[test]
fn client_certificates_signed_by_the_client_ca() {
    if !have_kubectl() {
        return;
    }
    use rcgen::{BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, KeyPair};
    let dir = tempfile::tempdir().unwrap();
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "test-client-ca");
    ca_params.distinguished_name = dn;
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "carol");
    dn.push(DnType::OrganizationName, "ops");
    params.distinguished_name = dn;
    let cert = params.signed_by(&key, &ca).unwrap();
    let (ca_file, crt, pem_key) = (
        dir.path().join("client-ca.crt"),
        dir.path().join("carol.crt"),
        dir.path().join("carol.key"),
    );
    std::fs::write(&ca_file, ca.pem()).unwrap();
    std::fs::write(&crt, cert.pem()).unwrap();
    std::fs::write(&pem_key, key.serialize_pem()).unwrap();

    let s = serve(dir.path(), &["--client-ca-file", ca_file.to_str().unwrap()]);
    let (ok, _, err) = kubectl(
        &s,
        &[
            "config",
            "set-credentials",
            "carol",
            &format!("--client-certificate={}", crt.display()),
            &format!("--client-key={}", pem_key.display()),
        ],
    );
    assert!(ok, "{err}");
    let (ok, _, err) = kubectl(
        &s,
        &[
            "config",
            "set-context",
            "carol",
            "--cluster=kubewright",
            "--user=carol",
        ],
    );
    assert!(ok, "{err}");
    let (ok, out, err) = kubectl(&s, &["--context", "carol", "auth", "whoami", "-o", "json"]);
    assert!(ok, "{err}");
    let who: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(who["status"]["userInfo"]["username"], "carol");
    assert_eq!(
        who["status"]["userInfo"]["groups"],
        serde_json::json!(["ops", "system:authenticated"])
    );
}

/// `kw serve --insecure`: kubectl sends no bearer token over plain HTTP, so without
/// `--token` the server is open and kubectl is the administrator (before, the kubeconfig
/// carried a token kubectl never sent, and every request was refused as anonymous).
#[test]
fn plain_http_without_a_token_serves_kubectl_as_the_administrator() {
    if !have_kubectl() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = serve(dir.path(), &["--insecure"]);
    let banner = s.stdout.join("\n");
    assert!(banner.contains("authentication: none"), "{banner}");
    let kc = std::fs::read_to_string(&s.kubeconfig).unwrap();
    assert!(!kc.contains("token"), "{kc}");
    let (ok, out, err) = kubectl(
        &s,
        &["auth", "whoami", "-o", "jsonpath={.status.userInfo.groups}"],
    );
    assert!(ok, "{err}");
    assert!(out.contains("system:masters"), "{out}");
    let (ok, out, err) = kubectl(&s, &["create", "configmap", "plain", "--from-literal=a=b"]);
    assert!(ok, "{err}");
    assert!(out.contains("configmap/plain created"), "{out}");
}
