//! Every generated CRD against a server: the embedded API server by default, a real
//! cluster when `KUBEWRIGHT_TEST_KUBECONFIG` is set.
//!
//! Each test rewrites the CRD's group to one unique to the run (so parallel runs on a
//! shared cluster do not collide), installs it with `TestEnv::install_crds` (established,
//! served, and removed from a real cluster afterwards),
//! then round-trips valid objects through a dynamic API and checks that invalid ones are
//! rejected with 422 naming the field. CEL rules are asserted only on a real cluster (the
//! embedded server does not evaluate CEL).
#![allow(clippy::unwrap_used)]

mod types;

use kubewright::core::{
    ApiResource, DynamicObject, Patch, PatchParams, PostParams, Resource, Scope,
};
use kubewright::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kubewright::{Api, Client};
use kubewright_testing::TestEnv;
use serde_json::{Value, json};
use std::time::Duration;
use types::*;

/// A CRD installed under a unique group, through `TestEnv::install_crds` (established
/// and served; deleted from a real cluster when the environment drops).
struct Installed {
    client: Client,
    group: String,
    crd: CustomResourceDefinition,
}

impl Installed {
    async fn new(env: &TestEnv, mut crd: CustomResourceDefinition) -> Self {
        let group = format!("{}.{GROUP}", env.unique_name("t"));
        crd.spec.group = group.clone();
        crd.metadata.name = Some(format!("{}.{group}", crd.spec.names.plural));
        let installed = env.install_crds([crd.clone()]).await;
        assert_eq!(installed[0].spec.group, group);
        Self {
            client: env.client(),
            group,
            crd,
        }
    }

    fn resource(&self, version: &str) -> ApiResource {
        let names = &self.crd.spec.names;
        ApiResource {
            group: self.group.clone(),
            version: version.to_string(),
            api_version: format!("{}/{version}", self.group),
            kind: names.kind.clone(),
            plural: names.plural.clone(),
            scope: if self.crd.spec.scope == "Namespaced" {
                Scope::Namespaced
            } else {
                Scope::Cluster
            },
        }
    }

    fn api(&self, version: &str, ns: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), ns, &self.resource(version))
    }

    /// An object from a typed value (or raw JSON), moved to the unique group.
    fn object(&self, version: &str, value: Value) -> DynamicObject {
        let mut value = value;
        value["apiVersion"] = json!(format!("{}/{version}", self.group));
        value["kind"] = json!(self.crd.spec.names.kind);
        serde_json::from_value(value).unwrap()
    }
}

/// Creates, retrying briefly while a real cluster starts serving a fresh CRD (404).
async fn create(
    api: &Api<DynamicObject>,
    obj: &DynamicObject,
) -> kubewright::client::Result<DynamicObject> {
    let mut tries = 0;
    loop {
        match api.create(&PostParams::default(), obj).await {
            Err(e) if e.is_not_found() && tries < 50 => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            other => return other,
        }
    }
}

/// Creates `spec` as object `name`, reads it back and returns the stored spec.
async fn round_trip(inst: &Installed, version: &str, ns: &str, name: &str, typed: Value) -> Value {
    let api = inst.api(version, ns);
    let obj = inst.object(version, typed);
    let created = create(&api, &obj)
        .await
        .unwrap_or_else(|e| panic!("create {name}: {e}"));
    assert_eq!(created.metadata.name.as_deref(), Some(name));
    let got = api.get(name).await.unwrap();
    assert_eq!(got.data["spec"], created.data["spec"]);
    got.data["spec"].clone()
}

/// Asserts that creating `value` fails with 422 and a cause on `field`.
async fn assert_rejected(inst: &Installed, version: &str, ns: &str, value: Value, field: &str) {
    let api = inst.api(version, ns);
    let obj = inst.object(version, value.clone());
    let err = match create(&api, &obj).await {
        Ok(_) => panic!("accepted invalid object (expected a 422 on {field}): {value}"),
        Err(e) => e,
    };
    assert!(err.is_invalid(), "expected 422 for {field}, got {err}");
    let causes = err
        .status()
        .and_then(|s| s.details.as_ref())
        .map(|d| d.causes.clone())
        .unwrap_or_default();
    assert!(
        causes.iter().any(|c| c.field == field),
        "expected a cause on {field}, got {causes:?} ({err})"
    );
}

fn monitor_json(name: &str, spec: Value) -> Value {
    json!({"metadata": {"name": name}, "spec": spec})
}

#[tokio::test]
async fn monitor_crd_is_accepted_and_validates() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let inst = Installed::new(&env, Monitor::crd()).await;

    // Valid objects round-trip (typed value -> server -> typed value).
    let spec = MonitorSpec {
        target: "https://example.com/health".into(),
        interval_seconds: 15,
        timeout: Some(
            kubewright::k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(
                "5s".into(),
            ),
        ),
        replicas: 3,
        paused: true,
    };
    let typed = serde_json::to_value(Monitor::new("full", spec.clone())).unwrap();
    let stored = round_trip(&inst, "v1", &ns, "full", typed).await;
    assert_eq!(serde_json::from_value::<MonitorSpec>(stored).unwrap(), spec);

    // Defaults are applied and unknown fields pruned.
    let stored = round_trip(
        &inst,
        "v1",
        &ns,
        "minimal",
        monitor_json("minimal", json!({"target": "http://a.example", "bogus": 1})),
    )
    .await;
    assert_eq!(
        stored,
        json!({"target": "http://a.example", "intervalSeconds": 30, "replicas": 0, "paused": false})
    );
    let decoded: MonitorSpec = serde_json::from_value(stored).unwrap();
    assert_eq!(decoded.interval_seconds, 30);

    // Invalid objects: 422 naming the field.
    let bad = [
        (
            json!({"target": "http://a.example", "intervalSeconds": 1}),
            "spec.intervalSeconds",
        ),
        (json!({"target": "ftp://a.example"}), "spec.target"),
        (json!({"target": "http://"}), "spec.target"),
        (json!({"intervalSeconds": 30}), "spec.target"),
        (
            json!({"target": "http://a.example", "timeout": true}),
            "spec.timeout",
        ),
        (
            json!({"target": "http://a.example", "replicas": -1}),
            "spec.replicas",
        ),
        (
            json!({"target": "http://a.example", "paused": "yes"}),
            "spec.paused",
        ),
    ];
    for (i, (spec, field)) in bad.into_iter().enumerate() {
        assert_rejected(
            &inst,
            "v1",
            &ns,
            monitor_json(&format!("bad-{i}"), spec),
            field,
        )
        .await;
    }
    let no_spec = json!({"metadata": {"name": "nospec"}});
    assert_rejected(&inst, "v1", &ns, no_spec, "spec").await;

    // `self.replicas <= 10` from #[kube(validation = ...)]: a CEL rule, evaluated by both
    // servers.
    let api = inst.api("v1", &ns);
    let obj = inst.object(
        "v1",
        monitor_json("cel", json!({"target": "http://a.example", "replicas": 11})),
    );
    let err = create(&api, &obj).await.unwrap_err();
    assert!(err.is_invalid(), "{err}");
}

#[tokio::test]
async fn pipeline_crd_is_accepted_and_validates() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let inst = Installed::new(&env, Pipeline::crd()).await;

    let spec = sample_pipeline_spec();
    let typed = serde_json::to_value(Pipeline::new("build", spec.clone())).unwrap();
    let stored = round_trip(&inst, "v1alpha1", &ns, "build", typed).await;
    // Free-form values survive; defaults were present already.
    assert_eq!(
        stored["params"]["nested"],
        json!({"a": [1, 2, {"b": null}]})
    );
    assert_eq!(
        serde_json::from_value::<PipelineSpec>(stored).unwrap(),
        spec
    );

    // Other variants of the enums, k8s types, an untagged string port.
    let mut other = spec.clone();
    other.source = Source::Inline([("main.rs".to_string(), "fn main() {}".to_string())].into());
    other.storage = Some(Storage::Ephemeral);
    other.port = Some(PortSpec::Name("http".into()));
    other.fallback_mode = Some(Mode::Sequential);
    other.selector = Some(
        kubewright::k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
            match_labels: Some([("app".to_string(), "x".to_string())].into()),
            ..Default::default()
        },
    );
    other.retry = Some(RetryPolicy {
        attempts: 0,
        backoff: Backoff::Constant,
    });
    let typed = serde_json::to_value(Pipeline::new("other", other.clone())).unwrap();
    let stored = round_trip(&inst, "v1alpha1", &ns, "other", typed).await;
    assert_eq!(
        serde_json::from_value::<PipelineSpec>(stored).unwrap(),
        other
    );

    // Nested defaults (stage parallelism, retry backoff) are applied by the server.
    let minimal = json!({
        "metadata": {"name": "minimal"},
        "spec": {
            "stages": [{"name": "a", "image": "busybox"}],
            "mode": "Sequential",
            "source": {"image": "src:1"},
            "retry": {"attempts": 2}
        }
    });
    let stored = round_trip(&inst, "v1alpha1", &ns, "minimal", minimal).await;
    assert_eq!(stored["stages"][0]["parallelism"], 1);
    assert_eq!(stored["retry"]["backoff"], "Exponential");
    let decoded: PipelineSpec = serde_json::from_value(stored).unwrap();
    assert_eq!(decoded.source, Source::Image("src:1".into()));

    let base = serde_json::to_value(&spec).unwrap();
    let with = |pointer: &str, value: Value| {
        let mut v = base.clone();
        *v.pointer_mut(pointer).unwrap() = value;
        v
    };
    let bad = [
        (with("/mode", json!("Bogus")), "spec.mode"),
        (with("/stages", json!([])), "spec.stages"),
        (
            with("/stages/0/parallelism", json!(0)),
            "spec.stages[0].parallelism",
        ),
        (with("/stages/0/name", json!("")), "spec.stages[0].name"),
        (with("/labels/team", json!(7)), "spec.labels.team"),
        (with("/storage/type", json!("ftp")), "spec.storage.type"),
        (with("/port", json!(true)), "spec.port"),
        (with("/cpu", json!([1])), "spec.cpu"),
        (with("/retry/attempts", json!(11)), "spec.retry.attempts"),
        (
            with("/retry/backoff", json!("Random")),
            "spec.retry.backoff",
        ),
        (with("/weight", json!("heavy")), "spec.weight"),
        (with("/tags", json!("fast")), "spec.tags"),
    ];
    for (i, (spec, field)) in bad.into_iter().enumerate() {
        let obj = json!({"metadata": {"name": format!("bad-{i}")}, "spec": spec});
        assert_rejected(&inst, "v1alpha1", &ns, obj, field).await;
    }
}

#[tokio::test]
async fn cluster_scoped_crd_is_accepted_and_validates() {
    let env = TestEnv::start().await;
    let inst = Installed::new(&env, ClusterPolicy::crd()).await;
    assert_eq!(inst.resource("v1beta1").scope, Scope::Cluster);

    let spec = ClusterPolicySpec {
        rules: vec![
            Rule {
                action: Action::Deny,
                reason: Some("no".into()),
                namespaces: vec!["a".into(), "b".into()],
            },
            Rule {
                action: Action::Audit,
                reason: None,
                namespaces: vec![],
            },
        ],
        enforce: true,
    };
    let typed = serde_json::to_value(ClusterPolicy::new("strict", spec.clone())).unwrap();
    let stored = round_trip(&inst, "v1beta1", "", "strict", typed).await;
    assert_eq!(
        serde_json::from_value::<ClusterPolicySpec>(stored).unwrap(),
        spec
    );

    let bad = [
        (json!({"rules": []}), "spec.rules"),
        (
            json!({"rules": [{"action": "Maybe"}]}),
            "spec.rules[0].action",
        ),
        (json!({"rules": [{"reason": "x"}]}), "spec.rules[0].action"),
        (
            json!({"rules": [{"action": "Allow"}], "enforce": 1}),
            "spec.enforce",
        ),
    ];
    for (i, (spec, field)) in bad.into_iter().enumerate() {
        let obj = json!({"metadata": {"name": format!("bad-{i}")}, "spec": spec});
        assert_rejected(&inst, "v1beta1", "", obj, field).await;
    }
    if !env.is_embedded() {
        // The CEL rule on `Rule` (via schemars' extend): Deny needs a reason.
        let api = inst.api("v1beta1", "");
        let obj = inst.object(
            "v1beta1",
            json!({"metadata": {"name": "cel"}, "spec": {"rules": [{"action": "Deny"}]}}),
        );
        let err = create(&api, &obj).await.unwrap_err();
        assert!(err.is_invalid(), "{err}");
    }
}

#[tokio::test]
async fn merged_crd_serves_every_version() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let inst = Installed::new(&env, widget_crd()).await;

    let v2 = v2::Widget::new(
        "w",
        v2::WidgetSpec {
            size: 3,
            colour: Some("red".into()),
        },
    );
    let stored = round_trip(&inst, "v2", &ns, "w", serde_json::to_value(&v2).unwrap()).await;
    assert_eq!(
        serde_json::from_value::<v2::WidgetSpec>(stored).unwrap(),
        v2.spec
    );
    // Read through the other served version (no conversion webhook: same fields, the
    // v1 schema prunes what it does not know on the way out of a real cluster).
    let via_v1 = inst.api("v1", &ns).get("w").await.unwrap();
    assert_eq!(via_v1.data["spec"]["size"], 3);
    let v1 = v1::Widget::new("old", v1::WidgetSpec { size: 1 });
    let stored = round_trip(&inst, "v1", &ns, "old", serde_json::to_value(&v1).unwrap()).await;
    assert_eq!(
        serde_json::from_value::<v1::WidgetSpec>(stored).unwrap(),
        v1.spec
    );
    assert_rejected(
        &inst,
        "v2",
        &ns,
        json!({"metadata": {"name": "bad"}, "spec": {"size": "big"}}),
        "spec.size",
    )
    .await;
}

/// The derived type with the typed `Api<Monitor>`, its status and scale subresources. The
/// derive fixes the CRD's group ({GROUP}), so on a real cluster the CRD is installed once
/// (or brought up to date) and left there for later runs; the test's objects live in a
/// namespace of its own.
#[tokio::test]
async fn typed_api_with_status_and_scale() {
    let env = TestEnv::start().await;
    let client = env.client();
    let ns = env.namespace().await;
    // Installed until Established and served; removed from a real cluster when `env`
    // drops (its short name would shadow others').
    env.install_crds([Monitor::crd()]).await;

    let api: Api<Monitor> = Api::namespaced(client, &ns);
    let spec = MonitorSpec {
        target: "https://example.com".into(),
        interval_seconds: 60,
        timeout: None,
        replicas: 2,
        paused: false,
    };
    // `install_crds` waited until the resource is served: no retry on 404 here.
    let created = api
        .create(&PostParams::default(), &Monitor::new("web", spec.clone()))
        .await
        .unwrap();
    assert_eq!(created.spec, spec);
    assert!(created.status.is_none());
    assert!(created.metadata.uid.is_some());

    let mut with_status = api.get("web").await.unwrap();
    with_status.status = Some(MonitorStatus {
        replicas: 2,
        selector: Some("app=web".into()),
        ..Default::default()
    });
    let updated = api
        .replace_status("web", &PostParams::default(), &with_status)
        .await
        .unwrap();
    assert_eq!(updated.status.as_ref().unwrap().replicas, 2);
    let got = api.get_status("web").await.unwrap();
    assert_eq!(got.status, with_status.status);
    assert_eq!(got.spec, spec);

    // A status-only server-side apply (apiVersion, kind, status), as controllers write
    // status: the applied configuration is not validated alone (it has no spec); the
    // merged object is.
    let applied = api
        .patch_status(
            "web",
            &PatchParams::apply("status-writer").force(),
            &Patch::Apply(json!({
                "apiVersion": Monitor::api_version(&()),
                "kind": "Monitor",
                "status": {"replicas": 2, "selector": "app=web", "conditions": [
                    {"type": "Ready", "status": "True", "reason": "Probing", "message": "",
                     "lastTransitionTime": "2026-01-01T00:00:00Z"}
                ]},
            })),
        )
        .await
        .unwrap();
    assert_eq!(applied.spec, spec);
    let status = applied.status.unwrap();
    assert_eq!(status.conditions.len(), 1);
    assert_eq!(status.conditions[0].type_, "Ready");
    let managers: Vec<(String, Option<String>)> = applied
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .map(|m| (m.manager.unwrap_or_default(), m.subresource))
        .collect();
    assert!(
        managers.contains(&("status-writer".to_string(), Some("status".to_string()))),
        "{managers:?}"
    );

    let scale = api.get_scale("web").await.unwrap();
    assert_eq!(scale.spec.as_ref().and_then(|s| s.replicas), Some(2));
    assert_eq!(scale.status.as_ref().map(|s| s.replicas), Some(2));

    let list = api.list(&Default::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    assert_eq!(list.items[0].spec, spec);
}
