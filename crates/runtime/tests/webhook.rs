//! The webhook server over HTTPS: admission reviews in and out (validating, mutating
//! with JSON patches), conversion reviews, bad bodies, certificate reload, metrics and
//! the manager's readiness and shutdown. The API server side (a real kube-apiserver or
//! the embedded one calling these handlers) is in `tests/webhook_cluster.rs`.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use k8s_openapi::api::core::v1::ConfigMap;
use kubewright_runtime::webhook::{
    AdmissionRequest, AdmissionReview, ConversionReview, HookOptions, Mutation, Operation, Verdict,
    WebhookClient, WebhookServer, conversion,
};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// A CA and a function issuing serving certificates for 127.0.0.1 with a given CN.
struct Pki {
    ca: CertifiedIssuer<'static, KeyPair>,
}

impl Pki {
    fn new() -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        Self {
            ca: CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap(),
        }
    }

    fn ca_pem(&self) -> String {
        self.ca.pem()
    }

    /// Writes a serving certificate and key for `127.0.0.1` and `localhost` into `dir`.
    fn issue(&self, dir: &Path, cn: &str) {
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        let cert = params.signed_by(&key, &self.ca).unwrap();
        std::fs::write(dir.join("tls.crt"), cert.pem()).unwrap();
        std::fs::write(dir.join("tls.key"), key.serialize_pem()).unwrap();
    }
}

/// A client trusting `ca_pem`, returning the peer certificate's CN with each answer.
struct HttpsClient {
    config: Arc<rustls::ClientConfig>,
}

impl HttpsClient {
    fn new(ca_pem: &str) -> Self {
        use rustls_pki_types::pem::PemObject;
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls_pki_types::CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
            roots.add(cert.unwrap()).unwrap();
        }
        #[allow(
            deprecated,
            reason = "ring by choice: rustls 0.23.48 deprecates its provider for lacking post-quantum key exchange, which aws-lc-rs has at the cost of a C and cmake build"
        )]
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        // Full handshakes only: a resumed session would show the first certificate.
        config.resumption = rustls::client::Resumption::disabled();
        Self {
            config: Arc::new(config),
        }
    }

    /// POSTs `body` to `path`; returns status, body and the server certificate's CN.
    async fn post(
        &self,
        addr: SocketAddr,
        path: &str,
        content_type: &str,
        body: Vec<u8>,
    ) -> (u16, Vec<u8>, String) {
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let connector = tokio_rustls::TlsConnector::from(self.config.clone());
        let name = rustls_pki_types::ServerName::try_from("127.0.0.1").unwrap();
        let tls = connector.connect(name, tcp).await.unwrap();
        let cn = {
            let (_, conn) = tls.get_ref();
            let der = conn.peer_certificates().unwrap()[0].clone();
            common_name(&der)
        };
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
                .await
                .unwrap();
        tokio::spawn(conn);
        let req = http::Request::post(path)
            .header("host", "127.0.0.1")
            .header("content-type", content_type)
            .body(Full::new(Bytes::from(body)))
            .unwrap();
        let resp = sender.send_request(req).await.unwrap();
        let status = resp.status().as_u16();
        let body = resp
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec();
        (status, body, cn)
    }
}

/// The CN of a DER certificate (a crude scan is enough for the test certificates).
fn common_name(der: &[u8]) -> String {
    // OID 2.5.4.3 then a string type and length.
    let oid = [0x06, 0x03, 0x55, 0x04, 0x03];
    let pos = der.windows(5).rposition(|w| w == oid).unwrap();
    let len = der[pos + 6] as usize;
    String::from_utf8_lossy(&der[pos + 7..pos + 7 + len]).into_owned()
}

fn review(operation: &str, object: Value, old: Option<Value>) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "name": "cm",
            "namespace": "default",
            "operation": operation,
            "userInfo": {"username": "admin", "groups": ["system:masters"]},
            "object": object,
            "oldObject": old,
            "dryRun": false,
        }
    }))
    .unwrap()
}

fn configmap(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "cm", "namespace": "default", "annotations": {"keep": "me"}},
           "data": data})
}

async fn validate_cm(req: AdmissionRequest<ConfigMap>) -> Verdict {
    let cm = req.object.unwrap_or_default();
    if cm.data.unwrap_or_default().contains_key("forbidden") {
        return Verdict::deny("key \"forbidden\" is not allowed");
    }
    if req.operation == Operation::Update {
        return Verdict::allow().warning("updates are audited");
    }
    Verdict::allow()
}

async fn default_cm(req: AdmissionRequest<ConfigMap>) -> Mutation<ConfigMap> {
    let mut cm = req.object.unwrap_or_default();
    let data = cm.data.get_or_insert_default();
    if data.contains_key("reject") {
        return Mutation::deny("rejected by the defaulter");
    }
    data.entry("owner".into()).or_insert("team-a".into());
    Mutation::patch(cm)
}

/// Converts `example.com/v1` `{spec: {size: "3"}}` to and from `v2` `{spec: {replicas: 3}}`.
fn convert(mut obj: Value, desired: &str) -> Result<Value, String> {
    let spec = obj
        .get_mut("spec")
        .and_then(Value::as_object_mut)
        .ok_or("no spec")?;
    match desired {
        "example.com/v2" => {
            let size = spec
                .remove("size")
                .and_then(|s| s.as_str().and_then(|s| s.parse::<i64>().ok()))
                .ok_or("spec.size is not a number")?;
            spec.insert("replicas".into(), size.into());
        }
        "example.com/v1" => {
            let replicas = spec
                .remove("replicas")
                .and_then(|r| r.as_i64())
                .ok_or("no replicas")?;
            spec.insert("size".into(), replicas.to_string().into());
        }
        other => return Err(format!("unknown version {other}")),
    }
    Ok(obj)
}

fn server(dir: &Path) -> WebhookServer {
    WebhookServer::builder("127.0.0.1:0".parse().unwrap())
        .tls_files(dir.join("tls.crt"), dir.join("tls.key"))
        .validate("/validate", validate_cm)
        .mutate("/mutate", default_cm)
        .convert("/convert", convert)
        .build()
        .unwrap()
}

#[tokio::test]
async fn admission_reviews_validate_and_mutate_with_json_patches() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new();
    pki.issue(dir.path(), "first");
    let server = server(dir.path());
    let addr = server.local_addr();
    let cancel = CancellationToken::new();
    let running = tokio::spawn(server.run(cancel.clone()));
    let client = HttpsClient::new(&pki.ca_pem());

    // Allowed, with the uid and apiVersion echoed.
    let (status, body, _) = client
        .post(
            addr,
            "/validate",
            "application/json",
            review("CREATE", configmap(json!({"a": "1"})), None),
        )
        .await;
    assert_eq!(status, 200);
    let answer: AdmissionReview = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        (answer.api_version.as_str(), answer.kind.as_str()),
        ("admission.k8s.io/v1", "AdmissionReview")
    );
    let response = answer.response.unwrap();
    assert_eq!(response.uid, "705ab4f5-6393-11e8-b7cc-42010a800002");
    assert!(response.allowed);
    assert!(response.status.is_none());

    // Denied: 403 Forbidden with the handler's message.
    let (_, body, _) = client
        .post(
            addr,
            "/validate",
            "application/json",
            review("CREATE", configmap(json!({"forbidden": "x"})), None),
        )
        .await;
    let response = serde_json::from_slice::<AdmissionReview>(&body)
        .unwrap()
        .response
        .unwrap();
    assert!(!response.allowed);
    let status = response.status.unwrap();
    assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"));
    assert_eq!(status.message, "key \"forbidden\" is not allowed");

    // Warnings.
    let (_, body, _) = client
        .post(
            addr,
            "/validate",
            "application/json",
            review("UPDATE", configmap(json!({})), Some(configmap(json!({})))),
        )
        .await;
    let response = serde_json::from_slice::<AdmissionReview>(&body)
        .unwrap()
        .response
        .unwrap();
    assert_eq!(response.warnings, ["updates are audited"]);

    // Mutating: a JSON patch that adds only the default, keeping what the object had.
    let original = configmap(json!({"a": "1"}));
    let (_, body, _) = client
        .post(
            addr,
            "/mutate",
            "application/json",
            review("CREATE", original.clone(), None),
        )
        .await;
    let response = serde_json::from_slice::<AdmissionReview>(&body)
        .unwrap()
        .response
        .unwrap();
    assert!(response.allowed);
    assert_eq!(response.patch_type.as_deref(), Some("JSONPatch"));
    let patch = base64::engine::general_purpose::STANDARD
        .decode(response.patch.unwrap())
        .unwrap();
    let ops: Value = serde_json::from_slice(&patch).unwrap();
    assert_eq!(
        ops,
        json!([{"op": "add", "path": "/data/owner", "value": "team-a"}])
    );
    let mut patched = original;
    json_patch::patch(
        &mut patched,
        &serde_json::from_value::<json_patch::Patch>(ops).unwrap(),
    )
    .unwrap();
    assert_eq!(patched["data"], json!({"a": "1", "owner": "team-a"}));
    assert_eq!(patched["metadata"]["annotations"]["keep"], "me");

    // Nothing to change: no patch.
    let (_, body, _) = client
        .post(
            addr,
            "/mutate",
            "application/json",
            review("CREATE", configmap(json!({"owner": "x"})), None),
        )
        .await;
    let response = serde_json::from_slice::<AdmissionReview>(&body)
        .unwrap()
        .response
        .unwrap();
    assert!(response.allowed && response.patch.is_none());

    // A mutating handler that denies.
    let (_, body, _) = client
        .post(
            addr,
            "/mutate",
            "application/json",
            review("CREATE", configmap(json!({"reject": "1"})), None),
        )
        .await;
    let response = serde_json::from_slice::<AdmissionReview>(&body)
        .unwrap()
        .response
        .unwrap();
    assert!(!response.allowed && response.patch.is_none());

    cancel.cancel();
    running.await.unwrap().unwrap();
}

#[tokio::test]
async fn conversion_reviews_convert_every_object_or_fail_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new();
    pki.issue(dir.path(), "conv");
    let server = server(dir.path());
    let addr = server.local_addr();
    let cancel = CancellationToken::new();
    tokio::spawn(server.run(cancel.clone()));
    let client = HttpsClient::new(&pki.ca_pem());
    let obj = |v: &str, spec: Value| {
        json!({"apiVersion": format!("example.com/{v}"), "kind": "Widget",
                                            "metadata": {"name": "w", "uid": "u-1"}, "spec": spec})
    };
    let body = serde_json::to_vec(&json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "request": {"uid": "c-1", "desiredAPIVersion": "example.com/v2",
                    "objects": [obj("v1", json!({"size": "3"})), obj("v2", json!({"replicas": 4}))]}
    }))
    .unwrap();
    let (status, body, _) = client
        .post(addr, "/convert", "application/json", body)
        .await;
    assert_eq!(status, 200);
    let answer: ConversionReview = serde_json::from_slice(&body).unwrap();
    let response = answer.response.unwrap();
    assert_eq!(
        (response.uid.as_str(), response.result.status.as_str()),
        ("c-1", "Success")
    );
    assert_eq!(
        response.converted_objects[0],
        obj("v2", json!({"replicas": 3}))
    );
    assert_eq!(
        response.converted_objects[1],
        obj("v2", json!({"replicas": 4}))
    );

    // And back: the round trip gives the original.
    let body = serde_json::to_vec(&json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "request": {"uid": "c-2", "desiredAPIVersion": "example.com/v1",
                    "objects": [response.converted_objects[0].clone()]}
    }))
    .unwrap();
    let (_, body, _) = client
        .post(addr, "/convert", "application/json", body)
        .await;
    let back = serde_json::from_slice::<ConversionReview>(&body)
        .unwrap()
        .response
        .unwrap();
    assert_eq!(back.converted_objects, [obj("v1", json!({"size": "3"}))]);

    // A failure names the object's version and the reason.
    let body = serde_json::to_vec(&json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "request": {"uid": "c-3", "desiredAPIVersion": "example.com/v2",
                    "objects": [obj("v1", json!({"size": "many"}))]}
    }))
    .unwrap();
    let (_, body, _) = client
        .post(addr, "/convert", "application/json", body)
        .await;
    let failed = serde_json::from_slice::<ConversionReview>(&body)
        .unwrap()
        .response
        .unwrap();
    assert_eq!(failed.result.status, "Failure");
    assert_eq!(
        failed.result.message,
        "converting from example.com/v1 to example.com/v2: spec.size is not a number"
    );
    assert!(failed.converted_objects.is_empty());
    cancel.cancel();
}

#[tokio::test]
async fn bad_requests_get_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new();
    pki.issue(dir.path(), "bad");
    let server = server(dir.path());
    let addr = server.local_addr();
    let cancel = CancellationToken::new();
    tokio::spawn(server.run(cancel.clone()));
    let client = HttpsClient::new(&pki.ca_pem());

    // What cannot be read is denied in the review (HTTP 200, code 400), as
    // controller-runtime answers: an HTTP 400 would count as the webhook failing, which
    // `failurePolicy: Ignore` turns into an admission.
    let denied = |status: u16, body: &[u8]| -> (String, String, u16) {
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(body));
        let review: AdmissionReview = serde_json::from_slice(body).unwrap();
        let response = review.response.unwrap();
        assert!(!response.allowed);
        let st = response.status.unwrap();
        (response.uid, st.message, st.code)
    };
    let (status, body, _) = client
        .post(addr, "/validate", "application/json", b"{not json".to_vec())
        .await;
    let (uid, message, code) = denied(status, &body);
    assert_eq!((uid.as_str(), code), ("", 400));
    assert!(
        message.contains("the body is not an AdmissionReview"),
        "{message}"
    );

    let (status, body, _) = client
        .post(
            addr,
            "/validate",
            "application/json",
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#.to_vec(),
        )
        .await;
    let (_, message, code) = denied(status, &body);
    assert_eq!(code, 400);
    assert!(message.contains("has no request"), "{message}");

    let (status, body, _) = client
        .post(addr, "/validate", "text/plain", b"x".to_vec())
        .await;
    let (_, message, _) = denied(status, &body);
    assert_eq!(message, "contentType=text/plain, expected application/json");
    let (status, body, _) = client
        .post(addr, "/validate", "application/json", Vec::new())
        .await;
    assert_eq!(denied(status, &body).1, "request body is empty");
    let (status, body, _) = client
        .post(
            addr,
            "/validate",
            "application/json",
            vec![b' '; kubewright_runtime::webhook::MAX_BODY + 1],
        )
        .await;
    assert_eq!(
        denied(status, &body).1,
        "request entity is too large; limit is 7340032 bytes"
    );
    let (status, _, _) = client
        .post(addr, "/nowhere", "application/json", b"{}".to_vec())
        .await;
    assert_eq!(status, 404);

    // An object that is not a ConfigMap: denied with 400, the uid still echoed.
    let (status, body, _) = client
        .post(
            addr,
            "/validate",
            "application/json",
            review("CREATE", json!({"data": 7}), None),
        )
        .await;
    assert_eq!(status, 200);
    let response = serde_json::from_slice::<AdmissionReview>(&body)
        .unwrap()
        .response
        .unwrap();
    assert!(!response.allowed);
    assert_eq!(response.uid, "705ab4f5-6393-11e8-b7cc-42010a800002");
    let status = response.status.unwrap();
    assert_eq!(status.code, 400);
    assert!(
        status.message.contains("cannot be decoded"),
        "{}",
        status.message
    );
    cancel.cancel();
}

#[tokio::test]
async fn a_rotated_certificate_is_served_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new();
    pki.issue(dir.path(), "before-rotation");
    let server = server(dir.path());
    let addr = server.local_addr();
    let cancel = CancellationToken::new();
    tokio::spawn(server.run(cancel.clone()));
    let client = HttpsClient::new(&pki.ca_pem());
    let body = || review("CREATE", configmap(json!({})), None);
    assert_eq!(
        client
            .post(addr, "/validate", "application/json", body())
            .await
            .2,
        "before-rotation"
    );
    pki.issue(dir.path(), "after-rotation");
    // A handshake never waits for the disk: it starts a check, which the following
    // handshakes see.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let cn = client
            .post(addr, "/validate", "application/json", body())
            .await
            .2;
        if cn == "after-rotation" {
            break;
        }
        assert_eq!(cn, "before-rotation");
        assert!(
            tokio::time::Instant::now() < deadline,
            "the rotated certificate was never served"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    // A half-written pair keeps the current certificate.
    std::fs::write(
        dir.path().join("tls.key"),
        "-----BEGIN PRIVATE KEY-----\ntrunc",
    )
    .unwrap();
    assert_eq!(
        client
            .post(addr, "/validate", "application/json", body())
            .await
            .2,
        "after-rotation"
    );
    cancel.cancel();
}

#[test]
fn building_without_a_certificate_or_with_a_bad_one_fails_clearly() {
    let err = WebhookServer::builder("127.0.0.1:0".parse().unwrap())
        .validate("/v", validate_cm)
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("no certificate"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tls.crt"), "junk").unwrap();
    std::fs::write(dir.path().join("tls.key"), "junk").unwrap();
    let err = WebhookServer::builder("127.0.0.1:0".parse().unwrap())
        .tls_files(dir.path().join("tls.crt"), dir.path().join("tls.key"))
        .build()
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("no certificate in the certificate file"),
        "{err}"
    );
    let err = WebhookServer::builder("127.0.0.1:0".parse().unwrap())
        .plain_http()
        .validate("/v", validate_cm)
        .validate("/v", validate_cm)
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("\"/v\""), "{err}");
}

#[test]
fn configurations_are_generated_from_the_registered_handlers() {
    let server = WebhookServer::builder("127.0.0.1:0".parse().unwrap())
        .plain_http()
        .validate("/validate", validate_cm)
        .validate_with(
            "/validate-deletes",
            HookOptions {
                name: Some("deletes.example.com".into()),
                operations: vec![Operation::Delete],
                failure_policy: "Ignore".into(),
                ..Default::default()
            },
            validate_cm,
        )
        .mutate("/mutate", default_cm)
        .build()
        .unwrap();
    let client = WebhookClient::Url("https://127.0.0.1:9443".into());
    let v = server.validating_configuration("demo", &client, Some(b"CA"));
    let hooks = v.webhooks.unwrap();
    assert_eq!(hooks.len(), 2);
    assert_eq!(hooks[0].name, "validate.core.kubewright.io");
    assert_eq!(
        hooks[0].client_config.url.as_deref(),
        Some("https://127.0.0.1:9443/validate")
    );
    assert_eq!(hooks[0].client_config.ca_bundle.as_ref().unwrap().0, b"CA");
    let rule = &hooks[0].rules.as_ref().unwrap()[0];
    assert_eq!(
        rule.resources.as_deref(),
        Some(&["configmaps".to_string()][..])
    );
    assert_eq!(
        rule.operations.as_deref(),
        Some(&["CREATE".to_string(), "UPDATE".to_string()][..])
    );
    assert_eq!(hooks[0].side_effects, "None");
    assert_eq!(hooks[1].name, "deletes.example.com");
    assert_eq!(hooks[1].failure_policy.as_deref(), Some("Ignore"));
    let m = server.mutating_configuration(
        "demo",
        &WebhookClient::Service {
            namespace: "system".into(),
            name: "webhooks".into(),
            port: Some(9443),
        },
        None,
    );
    let hooks = m.webhooks.unwrap();
    assert_eq!(hooks.len(), 1);
    let service = hooks[0].client_config.service.as_ref().unwrap();
    assert_eq!(
        (service.path.as_deref(), service.port),
        (Some("/mutate"), Some(9443))
    );
    let conv = conversion(&client, "/convert", Some(b"CA"));
    assert_eq!(conv.strategy, "Webhook");
    let hook = conv.webhook.unwrap();
    assert_eq!(hook.conversion_review_versions, ["v1"]);
    assert_eq!(
        hook.client_config.unwrap().url.as_deref(),
        Some("https://127.0.0.1:9443/convert")
    );
}

/// POSTs `body` over plain HTTP/1.1; status and body.
async fn post_plain(addr: SocketAddr, path: &str, body: Vec<u8>) -> (u16, Vec<u8>) {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp))
            .await
            .unwrap();
    tokio::spawn(conn);
    let req = http::Request::post(path)
        .header("host", "127.0.0.1")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    let status = resp.status().as_u16();
    let body = resp
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .to_vec();
    (status, body)
}

/// Whether the server closes `tcp` (end of file or reset) within `within`.
async fn closed_within(tcp: &mut tokio::net::TcpStream, within: std::time::Duration) -> bool {
    use tokio::io::AsyncReadExt;
    let mut buf = [0u8; 1024];
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, tcp.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => {}
        }
    }
}

/// A handler that panics or hangs still answers (a denial in the review, code 500) and
/// leaves the in-flight gauge at 0; a peer that is slow to send headers, or idle, is cut
/// off after the header timeout.
#[tokio::test]
async fn panics_hangs_and_slow_peers_are_bounded() {
    use kubewright_runtime::webhook::WebhookLimits;
    use std::time::Duration;
    let mut registry = prometheus_client::registry::Registry::default();
    let limits = WebhookLimits {
        header_read_timeout: Duration::from_millis(300),
        idle_timeout: Duration::from_millis(300),
        handler_timeout: Duration::from_millis(300),
        ..WebhookLimits::default()
    };
    let server = WebhookServer::builder("127.0.0.1:0".parse().unwrap())
        .plain_http()
        .limits(limits)
        .validate("/panic", |_req: AdmissionRequest<ConfigMap>| async move {
            if true {
                panic!("boom");
            }
            Verdict::allow()
        })
        .validate("/hang", |_req: AdmissionRequest<ConfigMap>| async move {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Verdict::allow()
        })
        .build()
        .unwrap()
        .with_metrics(&mut registry);
    let addr = server.local_addr();
    let cancel = CancellationToken::new();
    tokio::spawn(server.run(cancel.clone()));

    let in_review = |status: u16, body: &[u8]| -> (String, u16, String) {
        assert_eq!(status, 200);
        let response = serde_json::from_slice::<AdmissionReview>(body)
            .unwrap()
            .response
            .unwrap();
        assert!(!response.allowed);
        let st = response.status.unwrap();
        (response.uid, st.code, st.message)
    };
    let (status, body) =
        post_plain(addr, "/panic", review("CREATE", configmap(json!({})), None)).await;
    let (uid, code, message) = in_review(status, &body);
    assert_eq!(uid, "705ab4f5-6393-11e8-b7cc-42010a800002");
    assert_eq!(
        (code, message.as_str()),
        (500, "the webhook handler panicked: boom")
    );
    let (status, body) =
        post_plain(addr, "/hang", review("CREATE", configmap(json!({})), None)).await;
    let (_, code, message) = in_review(status, &body);
    assert_eq!(code, 500);
    assert!(
        message.starts_with("the webhook handler did not answer within"),
        "{message}"
    );
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    for hook in ["/panic", "/hang"] {
        let line = format!("controller_runtime_webhook_requests_in_flight{{webhook=\"{hook}\"}} 0");
        assert!(text.contains(&line), "{line} missing from\n{text}");
    }

    // Half a request line, then nothing; and a connection that never sends.
    use tokio::io::AsyncWriteExt;
    let mut slow = tokio::net::TcpStream::connect(addr).await.unwrap();
    slow.write_all(b"POST /panic HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let mut idle = tokio::net::TcpStream::connect(addr).await.unwrap();
    assert!(
        closed_within(&mut slow, Duration::from_secs(10)).await,
        "a slow peer kept its connection"
    );
    assert!(
        closed_within(&mut idle, Duration::from_secs(10)).await,
        "an idle peer kept its connection"
    );
    cancel.cancel();
}
