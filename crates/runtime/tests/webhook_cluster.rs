//! The API server calling kubewright's webhook server: a real kube-apiserver (with
//! KUBEWRIGHT_TEST_KUBECONFIG) reaches it on 127.0.0.1 through `clientConfig.url`; the
//! embedded server calls it the same way. Each test's configurations select only its own
//! namespace, and are deleted at the end.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

mod support;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kubewright_client::{Api, Error};
use kubewright_core::{ObjectMeta, Patch, PatchParams, PostParams};
use kubewright_runtime::webhook::{
    AdmissionRequest, HookOptions, Mutation, Verdict, WebhookClient, WebhookServer,
};
use kubewright_testing::TestEnv;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::{Leftovers, certificates, only_namespace};
use tokio_util::sync::CancellationToken;

fn cm(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        ..Default::default()
    }
}

/// The managers whose managedFields own `data.<key>` (`f:<key>`) of a ConfigMap.
fn owners(cm: &ConfigMap, key: &str) -> Vec<String> {
    cm.metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|m| {
            m.fields_v1
                .as_ref()
                .and_then(|f| f.0.get("f:data"))
                .and_then(|d| d.get(key))
                .is_some()
        })
        .filter_map(|m| m.manager.clone())
        .collect()
}

/// Creates probes until `ready` says the configuration is in effect (a real API server
/// picks up new webhook configurations through an informer, within about a second).
async fn until_in_effect(
    cms: &Api<ConfigMap>,
    mut ready: impl FnMut(&Result<ConfigMap, Error>) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(30);
    for i in 0.. {
        let probe = cms
            .create(
                &PostParams::default(),
                &cm(&format!("probe-{i}"), &[("forbidden", "x")]),
            )
            .await;
        if ready(&probe) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "webhook configuration never took effect: {probe:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn the_api_server_calls_validating_and_mutating_webhooks() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let dir = tempfile::tempdir().unwrap();
    let ca = certificates(dir.path());
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let record = seen.clone();
    let server = WebhookServer::builder("127.0.0.1:0".parse().unwrap())
        .tls_files(dir.path().join("tls.crt"), dir.path().join("tls.key"))
        .validate_with(
            "/validate",
            HookOptions {
                namespace_selector: only_namespace(&ns),
                ..Default::default()
            },
            move |req: AdmissionRequest<ConfigMap>| {
                let record = record.clone();
                async move {
                    record
                        .lock()
                        .unwrap()
                        .push(format!("{:?} {}", req.operation, req.user_info.username));
                    let data = req.object.and_then(|c| c.data).unwrap_or_default();
                    if data.contains_key("forbidden") {
                        Verdict::deny("key \"forbidden\" is not allowed")
                    } else if data.contains_key("risky") {
                        Verdict::allow().warning("risky is deprecated")
                    } else {
                        Verdict::allow()
                    }
                }
            },
        )
        .mutate_with(
            "/mutate",
            HookOptions {
                namespace_selector: only_namespace(&ns),
                ..Default::default()
            },
            |req: AdmissionRequest<ConfigMap>| async move {
                let mut cm = req.object.unwrap_or_default();
                cm.data
                    .get_or_insert_default()
                    .entry("owner".into())
                    .or_insert("team-a".into());
                Mutation::patch(cm)
            },
        )
        .build()
        .unwrap();
    let url = WebhookClient::Url(format!("https://{}", server.local_addr()));
    let name = env.unique_name("kw-webhook");
    let validating = server.validating_configuration(&name, &url, Some(ca.as_bytes()));
    let mutating = server.mutating_configuration(&name, &url, Some(ca.as_bytes()));
    let cancel = CancellationToken::new();
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
    let mut leftovers = Leftovers::new(&env);
    leftovers.validating.push(name.clone());
    leftovers.mutating.push(name.clone());

    let warnings: Arc<Mutex<Vec<String>>> = Arc::default();
    let heard = warnings.clone();
    let watched = client
        .clone()
        .with_warning_handler(Arc::new(move |w: &str| {
            heard.lock().unwrap().push(w.to_string())
        }));
    let cms: Api<ConfigMap> = Api::namespaced(watched, &ns);
    until_in_effect(&cms, |r| matches!(r, Err(e) if e.is_forbidden())).await;

    // Denied: the real server's wording around our message, 403.
    let err = cms
        .create(&PostParams::default(), &cm("bad", &[("forbidden", "1")]))
        .await
        .unwrap_err();
    let status = err.status().unwrap();
    assert_eq!(status.code, 403, "{err}");
    assert_eq!(
        status.message,
        "admission webhook \"validate.core.kubewright.io\" denied the request: key \"forbidden\" is not allowed"
    );

    // Mutated, then validated; a warning comes back as a Warning header.
    let created = cms
        .create(&PostParams::default(), &cm("good", &[("risky", "1")]))
        .await
        .unwrap();
    // The field manager runs before mutating admission: the writer owns what it sent,
    // and what the webhook added is owned by no one.
    assert_eq!(owners(&created, "f:owner"), Vec::<String>::new());
    assert_eq!(owners(&created, "f:risky").len(), 1, "{created:?}");
    assert_eq!(created.data.as_ref().unwrap()["owner"], "team-a");
    // The same on an update: a patch that drops `owner` and adds `extra` owns `extra`;
    // the webhook puts `owner` back, owned by no one.
    let patched = cms
        .patch(
            "good",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"owner": null, "extra": "1"}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.data.as_ref().unwrap()["owner"], "team-a");
    assert_eq!(owners(&patched, "f:owner"), Vec::<String>::new());
    assert_eq!(owners(&patched, "f:extra").len(), 1, "{patched:?}");
    // And on a server-side apply that creates the object.
    let applied = cms
        .patch(
            "applied",
            &PatchParams::apply("kw-applier"),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "applied"}, "data": {"mine": "1"}})),
        )
        .await
        .unwrap();
    assert_eq!(applied.data.as_ref().unwrap()["owner"], "team-a");
    assert_eq!(owners(&applied, "f:owner"), Vec::<String>::new());
    assert_eq!(owners(&applied, "f:mine"), vec!["kw-applier".to_string()]);
    assert!(
        warnings
            .lock()
            .unwrap()
            .iter()
            .any(|w| w == "risky is deprecated"),
        "{:?}",
        warnings.lock().unwrap()
    );
    assert!(
        seen.lock()
            .unwrap()
            .iter()
            .any(|s| s.starts_with("Create "))
    );

    // Another namespace is not selected: no webhook there.
    let other = env.namespace().await;
    let others: Api<ConfigMap> = Api::namespaced(client.clone(), &other);
    let free = others
        .create(&PostParams::default(), &cm("free", &[("forbidden", "1")]))
        .await
        .unwrap();
    assert!(!free.data.unwrap().contains_key("owner"));

    drop(leftovers);
    cancel.cancel();
}

#[tokio::test]
async fn failure_policy_and_timeouts_of_unreachable_webhooks() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let dir = tempfile::tempdir().unwrap();
    let ca = certificates(dir.path());
    // A slow webhook (3 s, over its 1 s timeout) and a dead one (nothing listens).
    let server = WebhookServer::builder("127.0.0.1:0".parse().unwrap())
        .tls_files(dir.path().join("tls.crt"), dir.path().join("tls.key"))
        .validate_with(
            "/slow",
            HookOptions {
                name: Some("slow.kubewright.io".into()),
                timeout_seconds: 1,
                namespace_selector: only_namespace(&ns),
                ..Default::default()
            },
            |_: AdmissionRequest<ConfigMap>| async {
                tokio::time::sleep(Duration::from_secs(3)).await;
                Verdict::allow()
            },
        )
        .build()
        .unwrap();
    let dead_port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let live = WebhookClient::Url(format!("https://{}", server.local_addr()));
    let dead = WebhookClient::Url(format!("https://127.0.0.1:{dead_port}"));
    let name = env.unique_name("kw-failure");
    let mut config = server.validating_configuration(&name, &live, Some(ca.as_bytes()));
    let mut hooks = config.webhooks.take().unwrap();
    let mut ignore = hooks[0].clone();
    ignore.name = "dead-ignore.kubewright.io".into();
    ignore.client_config = dead.client_config("/dead", Some(ca.as_bytes()));
    ignore.failure_policy = Some("Ignore".into());
    ignore.object_selector = Some(LabelSelector {
        match_labels: Some(BTreeMap::from([("hook".to_string(), "ignore".to_string())])),
        ..Default::default()
    });
    let mut fail = ignore.clone();
    fail.name = "dead-fail.kubewright.io".into();
    fail.failure_policy = Some("Fail".into());
    fail.object_selector = Some(LabelSelector {
        match_labels: Some(BTreeMap::from([("hook".to_string(), "fail".to_string())])),
        ..Default::default()
    });
    hooks[0].object_selector = Some(LabelSelector {
        match_labels: Some(BTreeMap::from([("hook".to_string(), "slow".to_string())])),
        ..Default::default()
    });
    hooks.extend([ignore, fail]);
    config.webhooks = Some(hooks);
    let cancel = CancellationToken::new();
    tokio::spawn(server.run(cancel.clone()));
    let client = env.client();
    Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .create(&PostParams::default(), &config)
        .await
        .unwrap();
    let mut leftovers = Leftovers::new(&env);
    leftovers.validating.push(name.clone());
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let labelled = |name: &str, hook: &str| {
        let mut c = cm(name, &[]);
        c.metadata.labels = Some(BTreeMap::from([("hook".to_string(), hook.to_string())]));
        c
    };
    // Wait until the failing webhook is in effect.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut i = 0;
    let err = loop {
        i += 1;
        match cms
            .create(&PostParams::default(), &labelled(&format!("f{i}"), "fail"))
            .await
        {
            Err(e) => break e,
            Ok(_) => {
                assert!(
                    Instant::now() < deadline,
                    "the webhook configuration never took effect"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    let status = err.status().unwrap();
    assert_eq!(status.code, 500, "{err}");
    assert!(
        status.message.starts_with(&format!(
            "Internal error occurred: failed calling webhook \"dead-fail.kubewright.io\": failed to call webhook: Post \"https://127.0.0.1:{dead_port}/dead?timeout=1s\""
        )),
        "{}",
        status.message
    );
    // Ignore: the request goes through.
    cms.create(&PostParams::default(), &labelled("ignored", "ignore"))
        .await
        .unwrap();
    // The slow one times out after its 1 s and fails the request.
    let started = Instant::now();
    let err = cms
        .create(&PostParams::default(), &labelled("slow", "slow"))
        .await
        .unwrap_err();
    let status = err.status().unwrap();
    assert_eq!(status.code, 500, "{err}");
    assert!(
        status
            .message
            .contains("failed calling webhook \"slow.kubewright.io\"")
            && status.message.contains("context deadline exceeded"),
        "{}",
        status.message
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    drop(leftovers);
    cancel.cancel();
}

#[tokio::test]
async fn crd_versions_convert_through_a_conversion_webhook() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kubewright_core::{ApiResource, DynamicObject};
    use serde_json::{Value, json};

    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let dir = tempfile::tempdir().unwrap();
    let ca = certificates(dir.path());
    let group = format!("{}.kubewright.io", env.unique_name("conv"));
    let (v1, v2) = (format!("{group}/v1"), format!("{group}/v2"));
    let (to_v1, to_v2) = (v1.clone(), v2.clone());
    let server = WebhookServer::builder("127.0.0.1:0".parse().unwrap())
        .tls_files(dir.path().join("tls.crt"), dir.path().join("tls.key"))
        .convert("/convert", move |mut obj: Value, desired: &str| {
            let spec = obj
                .get_mut("spec")
                .and_then(Value::as_object_mut)
                .ok_or("no spec")?;
            if desired == to_v2 {
                let size = spec
                    .remove("size")
                    .and_then(|s| s.as_str().and_then(|s| s.parse::<i64>().ok()))
                    .ok_or("spec.size is not a number")?;
                spec.insert("replicas".into(), size.into());
            } else if desired == to_v1 {
                let replicas = spec
                    .remove("replicas")
                    .and_then(|r| r.as_i64())
                    .ok_or("no replicas")?;
                spec.insert("size".into(), replicas.to_string().into());
            } else {
                return Err(format!("unknown version {desired}"));
            }
            Ok(obj)
        })
        .build()
        .unwrap();
    let url = WebhookClient::Url(format!("https://{}", server.local_addr()));
    let conversion = kubewright_runtime::webhook::conversion(&url, "/convert", Some(ca.as_bytes()));
    let cancel = CancellationToken::new();
    tokio::spawn(server.run(cancel.clone()));

    let version = |name: &str, storage: bool, spec: Value| {
        json!({"name": name, "served": true, "storage": storage,
               "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec}}}})
    };
    let mut crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("widgets.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                 "versions": [
                     version("v1", true, json!({"type": "object", "properties": {"size": {"type": "string"}}})),
                     version("v2", false, json!({"type": "object", "properties": {"replicas": {"type": "integer"}}})),
                 ]}
    }))
    .unwrap();
    crd.spec.conversion = Some(conversion);
    let crds: Api<CustomResourceDefinition> = Api::all(env.client());
    let crd_name = format!("widgets.{group}");
    let mut leftovers = Leftovers::new(&env);
    leftovers.crds.push(crd_name.clone());
    crds.create(&PostParams::default(), &crd).await.unwrap();

    let resource = |v: &str| ApiResource {
        group: group.clone(),
        version: v.into(),
        api_version: format!("{group}/{v}"),
        kind: "Widget".into(),
        plural: "widgets".into(),
        scope: kubewright_core::Scope::Namespaced,
    };
    let w1: Api<DynamicObject> = Api::namespaced_with(env.client(), &ns, &resource("v1"));
    let w2: Api<DynamicObject> = Api::namespaced_with(env.client(), &ns, &resource("v2"));
    let object = |api_version: &str, name: &str, spec: Value| -> DynamicObject {
        serde_json::from_value(json!({"apiVersion": api_version, "kind": "Widget",
                                      "metadata": {"name": name}, "spec": spec}))
        .unwrap()
    };
    // The CRD's endpoints appear once it is established.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match w1
            .create(
                &PostParams::default(),
                &object(&v1, "one", json!({"size": "3"})),
            )
            .await
        {
            Ok(_) => break,
            Err(e) if Instant::now() < deadline && (e.is_not_found() || e.is_bad_request()) => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("creating a v1 widget: {e}"),
        }
    }
    // Stored as v1, read as v2 through the webhook.
    let as_v2 = w2.get("one").await.unwrap();
    assert_eq!(as_v2.types.as_ref().unwrap().api_version, v2);
    assert_eq!(as_v2.data["spec"], json!({"replicas": 3}));
    // Written as v2, stored as v1, read back as v1.
    w2.create(
        &PostParams::default(),
        &object(&v2, "two", json!({"replicas": 4})),
    )
    .await
    .unwrap();
    assert_eq!(
        w1.get("two").await.unwrap().data["spec"],
        json!({"size": "4"})
    );
    // Lists convert every item.
    let listed = w2.list(&Default::default()).await.unwrap();
    let mut specs: Vec<Value> = listed
        .items
        .iter()
        .map(|w| w.data["spec"].clone())
        .collect();
    specs.sort_by_key(|s| s["replicas"].as_i64());
    assert_eq!(specs, [json!({"replicas": 3}), json!({"replicas": 4})]);
    // A conversion error reaches the client.
    let err = w1
        .create(
            &PostParams::default(),
            &object(&v1, "bad", json!({"size": "many"})),
        )
        .await;
    // Stored as v1 without conversion: the failure shows on reading it as v2.
    assert!(err.is_ok());
    let err = w2.get("bad").await.unwrap_err();
    let status = err.status().unwrap();
    assert_eq!(status.code, 500, "{err}");
    assert!(
        status.message.contains("spec.size is not a number"),
        "{}",
        status.message
    );

    drop(leftovers);
    cancel.cancel();
}

#[tokio::test]
async fn exec_is_admitted_as_a_connect() {
    use k8s_openapi::api::admissionregistration::v1::{
        RuleWithOperations, ValidatingWebhook, WebhookClientConfig,
    };
    use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
    use kubewright_client::pod::AttachParams;

    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let client = env.client();
    let dead_port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let hook =
        |name: &str, policy: &str, label: &str, op: &str, resource: &str| ValidatingWebhook {
            name: name.into(),
            admission_review_versions: vec!["v1".into()],
            client_config: WebhookClientConfig {
                url: Some(format!("https://127.0.0.1:{dead_port}/exec")),
                ..Default::default()
            },
            failure_policy: Some(policy.into()),
            namespace_selector: only_namespace(&ns),
            object_selector: None,
            rules: Some(vec![RuleWithOperations {
                api_groups: Some(vec!["".into()]),
                api_versions: Some(vec!["v1".into()]),
                operations: Some(vec![op.into()]),
                resources: Some(vec![resource.into()]),
                scope: None,
            }]),
            side_effects: "None".into(),
            timeout_seconds: Some(2),
            match_conditions: Some(vec![
                k8s_openapi::api::admissionregistration::v1::MatchCondition {
                    name: "only-this-pod".into(),
                    expression: format!("request.name == '{label}'"),
                },
            ]),
            ..Default::default()
        };
    let name = env.unique_name("kw-connect");
    let config = ValidatingWebhookConfiguration {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            ..Default::default()
        },
        webhooks: Some(vec![
            hook(
                "connect-fail.kubewright.io",
                "Fail",
                "guarded",
                "CONNECT",
                "pods/exec",
            ),
            hook(
                "connect-ignore.kubewright.io",
                "Ignore",
                "open",
                "CONNECT",
                "pods/exec",
            ),
            hook(
                "evict-fail.kubewright.io",
                "Fail",
                "guarded",
                "CREATE",
                "pods/eviction",
            ),
        ]),
    };
    let mut leftovers = Leftovers::new(&env);
    leftovers.validating.push(name.clone());
    Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .create(&PostParams::default(), &config)
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    for p in ["guarded", "open"] {
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some(p.into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "app".into(),
                    image: Some("busybox".into()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        };
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    // The failing webhook is called before the pod is looked at: its error, not the
    // pod's missing host, answers (once the configuration is in effect).
    let deadline = Instant::now() + Duration::from_secs(30);
    let err = loop {
        let err = pods
            .exec("guarded", ["true"], &AttachParams::default())
            .await
            .unwrap_err();
        if err.status().is_some_and(|s| s.code == 500) || Instant::now() > deadline {
            break err;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let status = err.status().unwrap();
    assert_eq!(status.code, 500, "{err}");
    assert!(
        status.message.starts_with(
            "Internal error occurred: failed calling webhook \"connect-fail.kubewright.io\": failed to call webhook: Post"
        ),
        "{}",
        status.message
    );
    // Ignore: the exec goes on to the pod, which no node runs here.
    let err = pods
        .exec("open", ["true"], &AttachParams::default())
        .await
        .unwrap_err();
    assert!(err.is_bad_request(), "{err}");
    assert!(
        err.to_string().contains("does not have a host assigned"),
        "{err}"
    );
    drop(leftovers);
}
