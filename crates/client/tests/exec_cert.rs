//! Client certificates returned by exec credential plugins authenticate TLS
//! connections; the plugin is re-run on expiry and after a 401, and new connections
//! present the new certificate.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test
#![cfg(unix)]

use kubewright_apiserver::TestServer;
use kubewright_client::config::{
    Auth, ConfigError, EXEC_API_V1, EXEC_EXPIRY_SKEW, ExecConfig, certs_from_pem,
};
use kubewright_client::{Client, Config, Error};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair,
};
use std::path::Path;

/// A client CA, and client certificates (PEM cert, PEM key) signed by it.
struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Ca {
    fn new() -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, "test-client-ca");
        params.distinguished_name = dn;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        Self { issuer }
    }

    fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A client certificate for `cn` (none when empty) in group `system:masters`.
    fn client_cert(&self, cn: &str) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        let mut dn = DistinguishedName::new();
        if !cn.is_empty() {
            dn.push(DnType::CommonName, cn);
        }
        dn.push(DnType::OrganizationName, "system:masters");
        params.distinguished_name = dn;
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

fn credential(cert: &str, key: &str, expiry: Option<jiff::Timestamp>) -> String {
    let mut status = serde_json::json!({"clientCertificateData": cert, "clientKeyData": key});
    if let Some(t) = expiry {
        status["expirationTimestamp"] = t.to_string().into();
    }
    serde_json::json!({"apiVersion": EXEC_API_V1, "kind": "ExecCredential", "status": status})
        .to_string()
}

/// A plugin printing `cred-<n>.json` on its n-th run.
fn plugin(dir: &Path) -> ExecConfig {
    let script = dir.join("plugin.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\nn=$(cat \"$STATE_DIR/count\" 2>/dev/null || echo 0)\nn=$((n + 1))\necho \"$n\" > \"$STATE_DIR/count\"\ncat \"$STATE_DIR/cred-$n.json\"\n",
    )
    .unwrap();
    ExecConfig {
        api_version: EXEC_API_V1.to_owned(),
        command: "/bin/sh".to_owned(),
        args: vec![script.to_string_lossy().into_owned()],
        env: vec![("STATE_DIR".to_owned(), dir.to_string_lossy().into_owned())],
        interactive_mode: Some("Never".to_owned()),
        ..Default::default()
    }
}

fn runs(dir: &Path) -> u32 {
    std::fs::read_to_string(dir.join("count"))
        .map(|s| s.trim().parse().unwrap())
        .unwrap_or(0)
}

fn config_for(server: &TestServer, exec: ExecConfig) -> Config {
    let mut config = Config::new(server.url().parse().unwrap());
    config.root_certs = Some(certs_from_pem(server.ca_pem().unwrap().as_bytes(), "ca").unwrap());
    config.auth = Auth::Exec(exec);
    config
}

/// Who the server thinks we are (a SelfSubjectReview).
async fn whoami(client: &Client) -> Result<String, Error> {
    let body =
        serde_json::json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    let review: serde_json::Value = client
        .request(
            http::Request::post("/apis/authentication.k8s.io/v1/selfsubjectreviews")
                .header("content-type", "application/json")
                .body(body.to_string().into_bytes())
                .unwrap(),
        )
        .await?;
    Ok(review["status"]["userInfo"]["username"]
        .as_str()
        .unwrap()
        .to_owned())
}

#[tokio::test]
async fn exec_plugin_certificate_authenticates_and_rotates() {
    let ca = Ca::new();
    let server = TestServer::builder()
        .tls(true)
        .token("admin-token-not-used-here")
        .client_ca(ca.pem())
        .start()
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // 1: valid for a few seconds beyond the refresh skew.
    let soon = jiff::Timestamp::now()
        .checked_add(jiff::SignedDuration::try_from(EXEC_EXPIRY_SKEW).unwrap())
        .unwrap()
        .checked_add(jiff::SignedDuration::from_secs(3))
        .unwrap();
    let (cert1, key1) = ca.client_cert("exec-user-1");
    std::fs::write(d.join("cred-1.json"), credential(&cert1, &key1, Some(soon))).unwrap();
    // 2: a token the server does not know: it answers 401. (A certificate without a CN
    // would not do: like kube-apiserver, the server treats it as no credential at all,
    // so the request runs as system:anonymous and gets 403.)
    std::fs::write(
        d.join("cred-2.json"),
        serde_json::json!({"apiVersion": EXEC_API_V1, "kind": "ExecCredential",
            "status": {"token": "not-a-token-this-server-knows"}})
        .to_string(),
    )
    .unwrap();
    // 3: what the plugin returns after that 401.
    let (cert3, key3) = ca.client_cert("exec-user-3");
    std::fs::write(d.join("cred-3.json"), credential(&cert3, &key3, None)).unwrap();

    let client = Client::new(config_for(&server, plugin(d))).unwrap();
    assert_eq!(whoami(&client).await.unwrap(), "exec-user-1");
    assert_eq!(whoami(&client).await.unwrap(), "exec-user-1");
    assert_eq!(runs(d), 1, "the credential is cached until it expires");

    // Expiry: the next request re-runs the plugin, gets a 401 with certificate 2,
    // re-runs it again and authenticates with certificate 3 on a new connection.
    tokio::time::sleep(std::time::Duration::from_millis(3500)).await;
    assert_eq!(whoami(&client).await.unwrap(), "exec-user-3");
    assert_eq!(runs(d), 3);
    assert_eq!(whoami(&client).await.unwrap(), "exec-user-3");
    assert_eq!(runs(d), 3);

    // Without the certificate the same server refuses the client: it is
    // system:anonymous, which may not even review itself (403, as on kube-apiserver).
    let mut no_auth = config_for(&server, plugin(d));
    no_auth.auth = Auth::None;
    let err = whoami(&Client::new(no_auth).unwrap()).await.unwrap_err();
    assert!(err.is_forbidden(), "{err}");
    assert!(err.to_string().contains("system:anonymous"), "{err}");
}

#[tokio::test]
async fn bad_exec_certificates_are_typed_errors_without_secrets() {
    let ca = Ca::new();
    let server = TestServer::builder()
        .tls(true)
        .client_ca(ca.pem())
        .start()
        .await
        .unwrap();
    let (cert, key) = ca.client_cert("someone");
    let key_body = key.lines().nth(1).unwrap().to_owned();
    let cases = [
        // A certificate without a key.
        (
            serde_json::json!({"apiVersion": EXEC_API_V1, "kind": "ExecCredential", "status": {"clientCertificateData": cert}}).to_string(),
            "clientCertificateData but no clientKeyData",
        ),
        // An unparsable certificate.
        (
            credential("-----BEGIN CERTIFICATE-----\n%%%\n-----END CERTIFICATE-----\n", &key, None),
            "client certificate",
        ),
        // An unparsable key.
        (
            credential(&cert, &key.replace("PRIVATE KEY", "PRIVATE KEY X"), None),
            "client key",
        ),
        // A key that does not match the certificate.
        (
            credential(&cert, &KeyPair::generate().unwrap().serialize_pem(), None),
            "client certificate/key",
        ),
    ];
    for (output, expected) in cases {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("cred-1.json"), output).unwrap();
        let client = Client::new(config_for(&server, plugin(dir.path()))).unwrap();
        let err = whoami(&client).await.unwrap_err();
        let text = format!("{err} {err:?}");
        assert!(text.contains(expected), "{expected}: {text}");
        assert!(
            matches!(
                err,
                Error::Config(ConfigError::ExecOutput { .. } | ConfigError::Pem { .. })
            ),
            "{text}"
        );
        assert!(!text.contains(&key_body), "the key leaked: {text}");
        assert!(!format!("{client:?}").contains(&key_body));
    }
}
