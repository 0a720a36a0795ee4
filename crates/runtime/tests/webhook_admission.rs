//! Admission webhook behaviour beyond `webhook_cluster.rs`, on both targets (the embedded
//! server, and a real kube-apiserver with KUBEWRIGHT_TEST_KUBECONFIG): reinvocation,
//! deletes (oldObject, delete-collection per item), dry runs, matchConditions, a Service
//! client config that cannot be reached, and webhooks that answer badly.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

mod support;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kubewright_client::{Api, Error};
use kubewright_core::{DeleteParams, ListParams, ObjectMeta, PostParams};
use kubewright_runtime::webhook::{
    AdmissionRequest, HookOptions, Mutation, Operation, Verdict, WebhookClient, WebhookServer,
};
use kubewright_testing::TestEnv;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::{Leftovers, certificates, only_namespace};
use tokio_util::sync::CancellationToken;

fn labelled(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Retries `attempt` until `done` holds for its result (a real API server takes up new
/// webhook configurations within about a second).
async fn eventually<T: std::fmt::Debug, F, Fut>(mut attempt: F, done: impl Fn(&T) -> bool) -> T
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let deadline = Instant::now() + Duration::from_secs(30);
    for i in 0.. {
        let r = attempt(i).await;
        if done(&r) {
            return r;
        }
        assert!(Instant::now() < deadline, "never took effect, last: {r:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    unreachable!()
}

fn status_of(r: &Result<ConfigMap, Error>) -> Option<(u16, String)> {
    r.as_ref()
        .err()
        .and_then(|e| e.status())
        .map(|s| (s.code, s.message.clone()))
}

#[tokio::test]
async fn reinvocation_deletes_dry_runs_and_match_conditions() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let dir = tempfile::tempdir().unwrap();
    let ca = certificates(dir.path());
    let calls: Arc<Mutex<Vec<String>>> = Arc::default();
    let (first_calls, delete_calls, dry_calls) = (calls.clone(), calls.clone(), calls.clone());
    let server = WebhookServer::builder("127.0.0.1:0".parse().unwrap())
        .tls_files(dir.path().join("tls.crt"), dir.path().join("tls.key"))
        // Called first, changes nothing, asks to be called again if needed.
        .mutate_with(
            "/first",
            HookOptions {
                name: Some("first.kubewright.io".into()),
                namespace_selector: only_namespace(&ns),
                reinvocation_policy: Some("IfNeeded".into()),
                ..Default::default()
            },
            move |req: AdmissionRequest<ConfigMap>| {
                let calls = first_calls.clone();
                async move {
                    let cm = req.object.unwrap_or_default();
                    let second = cm
                        .metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get("second"))
                        .cloned()
                        .unwrap_or_default();
                    calls.lock().unwrap().push(format!(
                        "first {} second={second}",
                        cm.metadata.name.unwrap_or_default()
                    ));
                    Mutation::allow()
                }
            },
        )
        // Called second: labels the object, which reinvokes the first.
        .mutate_with(
            "/second",
            HookOptions {
                name: Some("second.kubewright.io".into()),
                namespace_selector: only_namespace(&ns),
                ..Default::default()
            },
            |req: AdmissionRequest<ConfigMap>| async move {
                let mut cm = req.object.unwrap_or_default();
                cm.metadata
                    .labels
                    .get_or_insert_default()
                    .insert("second".into(), "done".into());
                Mutation::patch(cm)
            },
        )
        // Deletes of protected objects are refused; it sees them as oldObject.
        .validate_with(
            "/delete",
            HookOptions {
                name: Some("delete.kubewright.io".into()),
                operations: vec![Operation::Delete],
                namespace_selector: only_namespace(&ns),
                object_selector: Some(LabelSelector {
                    match_labels: Some(BTreeMap::from([(
                        "protect".to_string(),
                        "yes".to_string(),
                    )])),
                    ..Default::default()
                }),
                ..Default::default()
            },
            move |req: AdmissionRequest<ConfigMap>| {
                let calls = delete_calls.clone();
                async move {
                    let old = req.old_object.and_then(|o| o.metadata.name);
                    calls.lock().unwrap().push(format!(
                        "delete {} old={old:?} object={} dryRun={}",
                        req.name,
                        req.object.is_some(),
                        req.dry_run
                    ));
                    Verdict::deny(format!("{} is protected", req.name))
                }
            },
        )
        // Only names starting with "checked-" are validated (and refused on a dry run).
        .validate_with(
            "/checked",
            HookOptions {
                name: Some("checked.kubewright.io".into()),
                namespace_selector: only_namespace(&ns),
                match_conditions: vec![(
                    "checked".into(),
                    "object.metadata.name.startsWith('checked-') && request.operation == 'CREATE'"
                        .into(),
                )],
                ..Default::default()
            },
            move |req: AdmissionRequest<ConfigMap>| {
                let calls = dry_calls.clone();
                async move {
                    calls
                        .lock()
                        .unwrap()
                        .push(format!("checked {} dryRun={}", req.name, req.dry_run));
                    if req.dry_run {
                        Verdict::deny_with(422, "Invalid", "not even as a dry run")
                    } else {
                        Verdict::allow().warning(format!("checked {}", req.name))
                    }
                }
            },
        )
        .build()
        .unwrap();
    let url = WebhookClient::Url(format!("https://{}", server.local_addr()));
    let name = env.unique_name("kw-more");
    let mut leftovers = Leftovers::new(&env);
    leftovers.validating.push(name.clone());
    leftovers.mutating.push(name.clone());
    let cancel = CancellationToken::new();
    let validating = server.validating_configuration(&name, &url, Some(ca.as_bytes()));
    let mutating = server.mutating_configuration(&name, &url, Some(ca.as_bytes()));
    tokio::spawn(server.run(cancel.clone()));
    let client = env.client();
    Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .create(&PostParams::default(), &validating)
        .await
        .unwrap();
    Api::<MutatingWebhookConfiguration>::all(client.clone())
        .create(&PostParams::default(), &mutating)
        .await
        .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);

    // Reinvocation: the second webhook's label makes the first run again, and it sees it.
    eventually(
        |i| {
            let cms = cms.clone();
            async move {
                cms.create(
                    &PostParams::default(),
                    &labelled(&format!("probe-{i}"), &[]),
                )
                .await
                .unwrap()
            }
        },
        |cm: &ConfigMap| {
            cm.metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key("second"))
        },
    )
    .await;
    calls.lock().unwrap().clear();
    cms.create(&PostParams::default(), &labelled("again", &[]))
        .await
        .unwrap();
    assert_eq!(
        *calls.lock().unwrap(),
        ["first again second=", "first again second=done"]
    );

    // Deletes: the validating webhook sees the object as oldObject (object null) and
    // refuses with its message; the others are not selected.
    cms.create(
        &PostParams::default(),
        &labelled("kept", &[("protect", "yes")]),
    )
    .await
    .unwrap();
    calls.lock().unwrap().clear();
    let err = cms
        .delete("kept", &DeleteParams::default())
        .await
        .unwrap_err();
    let status = err.status().unwrap();
    assert_eq!(
        (status.code, status.reason.as_str(), status.message.as_str()),
        (
            403,
            "Forbidden",
            "admission webhook \"delete.kubewright.io\" denied the request: kept is protected"
        )
    );
    assert_eq!(
        *calls.lock().unwrap(),
        ["delete kept old=Some(\"kept\") object=false dryRun=false"]
    );
    // A dry-run delete is admitted as one.
    calls.lock().unwrap().clear();
    let dry = DeleteParams {
        dry_run: true,
        ..Default::default()
    };
    cms.delete("kept", &dry).await.unwrap_err();
    assert_eq!(
        *calls.lock().unwrap(),
        ["delete kept old=Some(\"kept\") object=false dryRun=true"]
    );
    // A collection delete admits each item: the protected one stays, the others go.
    let err = cms
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .unwrap_err();
    assert_eq!(err.status().unwrap().code, 403, "{err}");
    let left: Vec<String> = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .filter(|n| n != "kube-root-ca.crt")
        .collect();
    assert!(left.contains(&"kept".to_string()), "{left:?}");

    // matchConditions: only "checked-" names reach the webhook; its warning comes back.
    calls.lock().unwrap().clear();
    cms.create(&PostParams::default(), &labelled("unchecked", &[]))
        .await
        .unwrap();
    cms.create(&PostParams::default(), &labelled("checked-a", &[]))
        .await
        .unwrap();
    let seen: Vec<String> = calls
        .lock()
        .unwrap()
        .iter()
        .filter(|c| c.starts_with("checked"))
        .cloned()
        .collect();
    assert_eq!(seen, ["checked checked-a dryRun=false"]);
    // A dry run reaches it with dryRun set (sideEffects None), and its denial keeps the
    // webhook's code and reason.
    let err = cms
        .create(
            &PostParams {
                dry_run: true,
                ..Default::default()
            },
            &labelled("checked-b", &[]),
        )
        .await
        .unwrap_err();
    let status = err.status().unwrap();
    assert_eq!(
        (status.code, status.reason.as_str(), status.message.as_str()),
        (
            422,
            "Invalid",
            "admission webhook \"checked.kubewright.io\" denied the request: not even as a dry run"
        )
    );

    // Clean up what the webhooks guard, then the configurations.
    drop(leftovers);
    cancel.cancel();
}

#[tokio::test]
async fn unreachable_services_and_bad_answers() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let dir = tempfile::tempdir().unwrap();
    let ca = certificates(dir.path());
    let bad = bad_webhook(dir.path()).await;
    let name = env.unique_name("kw-bad");
    let mut leftovers = Leftovers::new(&env);
    leftovers.mutating.push(name.clone());
    let hook = |hook: &str, client_config: Value| {
        json!({
            "name": format!("{hook}.kubewright.io"),
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "timeoutSeconds": 2,
            "clientConfig": client_config,
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
            "objectSelector": {"matchLabels": {"hook": hook}},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
        })
    };
    let url = |path: &str| json!({"url": format!("https://127.0.0.1:{}{path}", bad.port), "caBundle": base64(&ca)});
    let service = json!({"service": {"namespace": ns, "name": "nowhere", "path": "/v"}});
    let config: MutatingWebhookConfiguration = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [
            hook("service", service),
            hook("notjson", url("/notjson")),
            hook("wronguid", url("/wronguid")),
            hook("badpatch", url("/badpatch")),
            hook("status500", url("/status500")),
            hook("copybomb", url("/copybomb")),
            hook("untrusted", json!({"url": format!("https://127.0.0.1:{}/x", bad.port)})),
        ],
    }))
    .unwrap();
    let client = env.client();
    Api::<MutatingWebhookConfiguration>::all(client.clone())
        .create(&PostParams::default(), &config)
        .await
        .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let create = |hook: &'static str| {
        let cms = cms.clone();
        move |i: usize| {
            let cms = cms.clone();
            async move {
                let mut cm = labelled(&format!("{hook}-{i}"), &[("hook", hook)]);
                cm.data = Some(BTreeMap::from([("a".to_string(), "x".repeat(100))]));
                cms.create(&PostParams::default(), &cm).await
            }
        }
    };
    let failing = |r: &Result<ConfigMap, Error>| r.is_err();
    let port = bad.port;
    let prefix = |hook: &str, path: &str| {
        format!(
            "Internal error occurred: failed calling webhook \"{hook}.kubewright.io\": failed to call webhook: Post \"https://127.0.0.1:{port}{path}?timeout=2s\": "
        )
    };

    let r = eventually(create("service"), failing).await;
    assert_eq!(
        status_of(&r).unwrap(),
        (
            500,
            format!(
                "Internal error occurred: failed calling webhook \"service.kubewright.io\": failed to call webhook: Post \"https://nowhere.{ns}.svc:443/v?timeout=2s\": service \"nowhere\" not found"
            )
        )
    );
    let r = eventually(create("untrusted"), failing).await;
    assert_eq!(
        status_of(&r).unwrap(),
        (
            500,
            format!(
                "{}tls: failed to verify certificate: x509: certificate signed by unknown authority",
                prefix("untrusted", "/x")
            )
        )
    );
    let r = eventually(create("status500"), failing).await;
    assert_eq!(
        status_of(&r).unwrap(),
        (
            500,
            "Internal error occurred: failed calling webhook \"status500.kubewright.io\": failed to call webhook: an error on the server (\"boom\") has prevented the request from succeeding".to_string()
        )
    );
    let r = eventually(create("wronguid"), failing).await;
    let (code, message) = status_of(&r).unwrap();
    assert_eq!(code, 500);
    assert!(
        message.starts_with("Internal error occurred: failed calling webhook \"wronguid.kubewright.io\": received invalid webhook response: expected response.uid=\"")
            && message.ends_with("\", got \"not-the-uid\""),
        "{message}"
    );
    let r = eventually(create("notjson"), failing).await;
    assert_eq!(
        status_of(&r).unwrap(),
        (
            500,
            r#"Internal error occurred: failed calling webhook "notjson.kubewright.io": failed to call webhook: couldn't get version/kind; json parse error: json: cannot unmarshal string into Go value of type struct { APIVersion string "json:\"apiVersion,omitempty\""; Kind string "json:\"kind,omitempty\"" }"#.to_string()
        )
    );
    // A patch that does not apply is an internal error, whatever the failurePolicy.
    let r = eventually(create("badpatch"), failing).await;
    assert_eq!(
        status_of(&r).unwrap(),
        (
            500,
            "Internal error occurred: replace operation does not apply: doc is missing path: /no/such/field: missing value".to_string()
        )
    );

    // A patch of 30 copies, each doubling the object, stops at kube-apiserver's copy
    // limit (3 MiB, process-wide) instead of growing the object to gigabytes.
    let before = support::rss();
    let r = eventually(create("copybomb"), failing).await;
    // The same count on both servers: the copied values' compact JSON, 100 bytes doubling.
    assert_eq!(
        status_of(&r).unwrap(),
        (
            500,
            "Internal error occurred: Unable to complete the copy, the accumulated size increase of copy is 3735374, exceeding the limit 3145728".to_string()
        )
    );
    if env.is_embedded()
        && let (Some(before), Some(after)) = (before, support::rss())
    {
        assert!(
            after.saturating_sub(before) < 256 * 1024 * 1024,
            "resident memory grew from {before} to {after} bytes"
        );
    }

    drop(leftovers);
    bad.cancel.cancel();
}

fn base64(pem: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(pem)
}

struct BadWebhook {
    port: u16,
    cancel: CancellationToken,
}

/// A webhook server that answers wrongly, by path: not JSON, another uid, a patch that
/// does not apply, a 500 with a text body.
async fn bad_webhook(dir: &Path) -> BadWebhook {
    use http_body_util::{BodyExt, Full};
    use rustls_pki_types::pem::PemObject as _;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(dir.join("tls.crt"))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let key = PrivateKeyDer::from_pem_file(dir.join("tls.key")).unwrap();
    #[allow(
        deprecated,
        reason = "ring by choice: rustls 0.23.48 deprecates its provider for lacking post-quantum key exchange, which aws-lc-rs has at the cost of a C and cmake build"
    )]
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    tokio::spawn(async move {
        loop {
            let (tcp, _) = tokio::select! {
                a = listener.accept() => match a { Ok(a) => a, Err(_) => return },
                _ = stop.cancelled() => return,
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper::service::service_fn(
                    |req: http::Request<hyper::body::Incoming>| async move {
                        let path = req.uri().path().to_string();
                        let body = req
                            .into_body()
                            .collect()
                            .await
                            .map(|b| b.to_bytes())
                            .unwrap_or_default();
                        let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                        let uid = review
                            .pointer("/request/uid")
                            .cloned()
                            .unwrap_or(Value::Null);
                        let (status, ct, text) = match path.as_str() {
                        "/notjson" => (200, "application/json", "this is not json".to_string()),
                        "/wronguid" => (200, "application/json", json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                            "response": {"uid": "not-the-uid", "allowed": true}}).to_string()),
                        "/badpatch" => {
                            use base64::Engine;
                            let patch = base64::engine::general_purpose::STANDARD.encode(
                                json!([{"op": "replace", "path": "/no/such/field", "value": 1}]).to_string());
                            (200, "application/json", json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                "response": {"uid": uid, "allowed": true, "patchType": "JSONPatch", "patch": patch}}).to_string())
                        }
                        "/copybomb" => {
                            use base64::Engine;
                            let ops: Vec<Value> = (0..30)
                                .map(|i| json!({"op": "copy", "from": "/data", "path": format!("/data/k{i}")}))
                                .collect();
                            let patch = base64::engine::general_purpose::STANDARD
                                .encode(Value::Array(ops).to_string());
                            (200, "application/json", json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                "response": {"uid": uid, "allowed": true, "patchType": "JSONPatch", "patch": patch}}).to_string())
                        }
                        _ => (500, "text/plain", "boom".to_string()),
                    };
                        let resp = http::Response::builder()
                            .status(status)
                            .header("content-type", ct)
                            .body(Full::new(bytes::Bytes::from(text)))
                            .unwrap();
                        Ok::<_, std::convert::Infallible>(resp)
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    BadWebhook { port, cancel }
}
