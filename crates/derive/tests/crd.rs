//! The generated types and CRDs, without a server: snapshots of every CRD, structural
//! checks, (de)serialization, Resource impls, merging, schema errors and crate overrides.
//!
//! Snapshots live in `tests/snapshots/<name>.json`; regenerate them with
//! `UPDATE_SNAPSHOTS=1 cargo test -p kubewright-derive --test crd` and review the diff.
#![allow(clippy::unwrap_used)]

mod types;

use kubewright::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kubewright::{CustomResourceExt, Resource};
use serde_json::{Value, json};
use std::path::PathBuf;
use types::*;

fn snapshot_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots")
        .join(format!("{name}.json"))
}

/// Compares `value` with the committed snapshot, or writes it when `UPDATE_SNAPSHOTS=1`.
fn assert_snapshot(name: &str, value: &Value) {
    let path = snapshot_path(name);
    let rendered = format!("{}\n", serde_json::to_string_pretty(value).unwrap());
    if std::env::var("UPDATE_SNAPSHOTS").is_ok_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &rendered).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "snapshot {} missing ({e}); run with UPDATE_SNAPSHOTS=1",
            path.display()
        )
    });
    if expected != rendered {
        let expected_value: Value = serde_json::from_str(&expected).unwrap();
        let first_diff = first_difference(&expected_value, value, String::new())
            .unwrap_or_else(|| "formatting only".into());
        panic!(
            "snapshot {} differs (first difference at {first_diff}); \
             run with UPDATE_SNAPSHOTS=1 and review the diff\n--- new ---\n{rendered}",
            path.display()
        );
    }
}

fn first_difference(a: &Value, b: &Value, path: String) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for k in x.keys().chain(y.keys()) {
                match (x.get(k), y.get(k)) {
                    (Some(p), Some(q)) => {
                        if let Some(d) = first_difference(p, q, format!("{path}.{k}")) {
                            return Some(d);
                        }
                    }
                    _ => return Some(format!("{path}.{k}")),
                }
            }
            None
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (p, q))| first_difference(p, q, format!("{path}[{i}]"))),
        _ if a == b => None,
        _ => Some(if path.is_empty() { ".".into() } else { path }),
    }
}

fn schema_of(crd: &CustomResourceDefinition, version: usize) -> Value {
    serde_json::to_value(&crd.spec.versions[version].schema).unwrap()["openAPIV3Schema"].clone()
}

/// Walks a schema: no `$ref`/`definitions`, every node typed or marked int-or-string /
/// preserve-unknown-fields, no `additionalProperties: false`, nullable `Option`s, ...
/// (kubewright's checker), and a few invariants of our own.
fn assert_structural(name: &str, schema: &Value) {
    let violations = kubewright::crd::structural_violations(schema);
    assert!(
        violations.is_empty(),
        "{name}: not structural:\n{}",
        violations.join("\n")
    );
    fn walk(v: &Value, path: &str, name: &str) {
        let Value::Object(m) = v else {
            panic!("{name}: {path} is not an object");
        };
        for forbidden in [
            "$ref",
            "definitions",
            "$schema",
            "title",
            "const",
            "uniqueItems",
        ] {
            assert!(!m.contains_key(forbidden), "{name}: {path} has {forbidden}");
        }
        if let Some(Value::String(f)) = m.get("format") {
            assert!(
                !f.starts_with("uint") && !matches!(f.as_str(), "int8" | "int16" | "uint"),
                "{name}: {path} has format {f}"
            );
        }
        for (k, sub) in m
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            walk(sub, &format!("{path}.{k}"), name);
        }
        if let Some(items) = m.get("items") {
            walk(items, &format!("{path}[*]"), name);
        }
        if let Some(ap) = m.get("additionalProperties").filter(|a| a.is_object()) {
            walk(ap, &format!("{path}{{*}}"), name);
        }
    }
    walk(schema, "", name);
}

#[test]
fn crd_snapshots() {
    for (name, crd) in all_crds() {
        assert_snapshot(name, &serde_json::to_value(&crd).unwrap());
    }
}

#[test]
fn crds_are_structural() {
    for (name, crd) in all_crds() {
        for i in 0..crd.spec.versions.len() {
            assert_structural(name, &schema_of(&crd, i));
        }
    }
}

#[test]
fn monitor_crd_metadata() {
    let crd = Monitor::crd();
    assert_eq!(Monitor::crd_name(), "monitors.derive.kubewright.test");
    assert_eq!(crd.metadata.name.as_deref(), Some(Monitor::crd_name()));
    assert_eq!(crd.spec.group, GROUP);
    assert_eq!(crd.spec.scope, "Namespaced");
    let names = &crd.spec.names;
    assert_eq!(names.kind, "Monitor");
    assert_eq!(names.list_kind.as_deref(), Some("MonitorList"));
    assert_eq!(names.plural, "monitors");
    assert_eq!(names.singular.as_deref(), Some("monitor"));
    assert_eq!(
        names.short_names.as_deref(),
        Some(&["mon".to_string(), "mons".to_string()][..])
    );
    assert_eq!(Monitor::short_names(), ["mon", "mons"]);
    assert_eq!(
        names.categories.as_deref(),
        Some(&["all".to_string(), "probes".to_string()][..])
    );
    let v = &crd.spec.versions[0];
    assert_eq!((v.name.as_str(), v.served, v.storage), ("v1", true, true));
    let sub = v.subresources.as_ref().unwrap();
    assert!(sub.status.is_some());
    let scale = sub.scale.as_ref().unwrap();
    assert_eq!(scale.spec_replicas_path, ".spec.replicas");
    assert_eq!(scale.status_replicas_path, ".status.replicas");
    assert_eq!(
        scale.label_selector_path.as_deref(),
        Some(".status.selector")
    );
    let cols = v.additional_printer_columns.as_ref().unwrap();
    let cols: Vec<_> = cols
        .iter()
        .map(|c| {
            (
                c.name.as_str(),
                c.type_.as_str(),
                c.json_path.as_str(),
                c.priority,
            )
        })
        .collect();
    assert_eq!(
        cols,
        [
            ("Target", "string", ".spec.target", None),
            ("Interval", "integer", ".spec.intervalSeconds", Some(1)),
            ("Age", "date", ".metadata.creationTimestamp", None),
        ]
    );
    let fields = v.selectable_fields.as_ref().unwrap();
    assert_eq!(fields[0].json_path, ".spec.target");

    let schema = schema_of(&crd, 0);
    assert_eq!(schema["required"], json!(["spec"]));
    assert!(schema["properties"].get("metadata").is_none());
    let spec = &schema["properties"]["spec"];
    assert_eq!(spec["required"], json!(["target"]));
    let target = &spec["properties"]["target"];
    assert_eq!(target["pattern"], "^https?://");
    assert_eq!(
        (target["minLength"].as_i64(), target["maxLength"].as_i64()),
        (Some(8), Some(255))
    );
    let interval = &spec["properties"]["intervalSeconds"];
    assert_eq!(interval["default"], 30);
    assert_eq!(interval["minimum"], json!(5.0));
    assert_eq!(interval["maximum"], json!(3600.0));
    assert_eq!(
        spec["properties"]["timeout"]["x-kubernetes-int-or-string"],
        true
    );
    let rules = spec["x-kubernetes-validations"].as_array().unwrap();
    assert_eq!(rules[0], json!({"rule": "self.replicas <= 10"}));
    assert_eq!(rules[1]["reason"], "FieldValueForbidden");
    assert_eq!(rules[1]["fieldPath"], ".timeout");
    let status = &schema["properties"]["status"];
    assert_eq!(status["nullable"], true);
    assert_eq!(status["properties"]["lastProbe"]["format"], "date-time");
    assert_eq!(status["properties"]["lastProbe"]["nullable"], true);
    assert_eq!(
        status["properties"]["conditions"]["x-kubernetes-list-type"],
        "map"
    );
}

#[test]
fn pipeline_schema_shapes() {
    let schema = schema_of(&Pipeline::crd(), 0);
    let p = &schema["properties"]["spec"]["properties"];
    // Keyed list with lengths; nested defaults and ranges; u8 format dropped.
    assert_eq!(p["stages"]["x-kubernetes-list-type"], "map");
    assert_eq!(p["stages"]["x-kubernetes-list-map-keys"], json!(["name"]));
    assert_eq!(p["stages"]["minItems"], 1);
    let stage = &p["stages"]["items"];
    assert_eq!(stage["required"], json!(["name", "image"]));
    assert_eq!(stage["properties"]["parallelism"]["default"], 1);
    assert!(stage["properties"]["parallelism"].get("format").is_none());
    // Optional nested struct.
    assert_eq!(p["retry"]["type"], "object");
    assert_eq!(p["retry"]["nullable"], true);
    assert_eq!(
        p["retry"]["properties"]["backoff"]["enum"],
        json!(["Exponential", "Linear", "Constant"])
    );
    assert_eq!(
        p["retry"]["properties"]["backoff"]["default"],
        "Exponential"
    );
    // Maps and free-form values.
    assert_eq!(
        p["labels"]["additionalProperties"],
        json!({"type": "string"})
    );
    assert_eq!(p["params"]["type"], "object");
    assert_eq!(p["params"]["x-kubernetes-preserve-unknown-fields"], true);
    assert!(p["params"].get("additionalProperties").is_none());
    assert_eq!(p["raw"]["x-kubernetes-preserve-unknown-fields"], true);
    assert!(p["raw"].get("type").is_none());
    assert_eq!(p["tags"]["x-kubernetes-list-type"], "set");
    // Unit enums (documented variants too) and their optional form.
    assert_eq!(
        p["mode"],
        json!({"type": "string", "enum": ["Sequential", "Parallel"], "description": "How stages run."})
    );
    assert_eq!(p["fallbackMode"]["enum"], json!(["Sequential", "Parallel"]));
    assert_eq!(p["fallbackMode"]["nullable"], true);
    // Externally tagged data enum: variants hoisted, branches keep `required`.
    let source = &p["source"];
    assert_eq!(source["type"], "object");
    assert_eq!(source["properties"]["image"]["type"], "string");
    assert_eq!(source["properties"]["git"]["required"], json!(["url"]));
    assert_eq!(
        source["properties"]["inline"]["additionalProperties"]["type"],
        "string"
    );
    assert_eq!(
        source["oneOf"],
        json!([{"required": ["git"]}, {"required": ["image"]}, {"required": ["inline"]}])
    );
    // Internally tagged: the tag's enum is the union, each branch pins its value.
    let storage = &p["storage"];
    assert_eq!(
        storage["properties"]["type"]["enum"],
        json!(["s3", "pvc", "ephemeral"])
    );
    assert_eq!(storage["required"], json!(["type"]));
    assert_eq!(storage["nullable"], true);
    assert_eq!(
        storage["oneOf"][0]["properties"]["type"]["enum"],
        json!(["s3"])
    );
    assert_eq!(storage["oneOf"][0]["required"], json!(["type", "bucket"]));
    // int-or-string: k8s types and an untagged enum.
    assert_eq!(p["cpu"]["x-kubernetes-int-or-string"], true);
    assert_eq!(p["maxUnavailable"]["x-kubernetes-int-or-string"], true);
    assert_eq!(p["port"]["x-kubernetes-int-or-string"], true);
    assert_eq!(
        p["resources"]["properties"]["limits"]["additionalProperties"]["x-kubernetes-int-or-string"],
        true
    );
    assert_eq!(p["weight"]["type"], "number");
    assert_eq!(p["weight"]["format"], "double");
    assert_eq!(p["deadline"]["format"], "date-time");
}

#[test]
fn cluster_policy_crd() {
    let crd = ClusterPolicy::crd();
    assert_eq!(crd.spec.scope, "Cluster");
    assert_eq!(
        ClusterPolicy::crd_name(),
        "clusterpolicies.derive.kubewright.test"
    );
    assert_eq!(crd.spec.names.singular.as_deref(), Some("clusterpolicy"));
    let v = &crd.spec.versions[0];
    assert_eq!(v.deprecated, Some(true));
    assert!(
        v.deprecation_warning
            .as_deref()
            .unwrap()
            .contains("deprecated")
    );
    assert!(v.subresources.is_none());
    let schema = schema_of(&crd, 0);
    let spec = &schema["properties"]["spec"];
    // deny_unknown_fields does not leak `additionalProperties: false`.
    assert!(spec.get("additionalProperties").is_none());
    let rule = &spec["properties"]["rules"]["items"];
    assert_eq!(
        rule["x-kubernetes-validations"][0]["message"],
        "Deny rules need a reason"
    );
    assert_eq!(
        rule["properties"]["namespaces"]["x-kubernetes-list-type"],
        "set"
    );
}

#[test]
fn merged_widget_versions() {
    let crd = widget_crd();
    let versions: Vec<_> = crd
        .spec
        .versions
        .iter()
        .map(|v| {
            (
                v.name.as_str(),
                v.served,
                v.storage,
                v.subresources.is_some(),
            )
        })
        .collect();
    assert_eq!(
        versions,
        [("v1", true, false, false), ("v2", true, true, true)]
    );
    assert_eq!(
        crd.metadata.name.as_deref(),
        Some("widgets.derive.kubewright.test")
    );
    let err =
        kubewright::crd::merge_crds(vec![v1::Widget::crd(), Monitor::crd()], "v1").unwrap_err();
    assert!(
        matches!(
            err,
            kubewright::crd::MergeError::Mismatch { field: "kind", .. }
        ),
        "{err}"
    );
}

#[test]
fn resource_impls() {
    use kubewright::k8s_openapi::{ListableResource, Resource as _};
    assert_eq!(Monitor::API_VERSION, "derive.kubewright.test/v1");
    assert_eq!(<Monitor as kubewright::k8s_openapi::Resource>::GROUP, GROUP);
    assert_eq!(
        <Monitor as kubewright::k8s_openapi::Resource>::KIND,
        "Monitor"
    );
    assert_eq!(
        <Monitor as kubewright::k8s_openapi::Resource>::VERSION,
        "v1"
    );
    assert_eq!(Monitor::URL_PATH_SEGMENT, "monitors");
    assert_eq!(Monitor::LIST_KIND, "MonitorList");
    assert_eq!(ClusterPolicy::URL_PATH_SEGMENT, "clusterpolicies");

    // kubewright's Resource, through the blanket impl.
    assert_eq!(
        <Monitor as Resource>::url_path(&(), Some("ns")),
        "/apis/derive.kubewright.test/v1/namespaces/ns/monitors"
    );
    assert_eq!(
        <ClusterPolicy as Resource>::url_path(&(), Some("ns")),
        "/apis/derive.kubewright.test/v1beta1/clusterpolicies"
    );
    assert_eq!(
        <ClusterPolicy as Resource>::scope(&()),
        kubewright::core::Scope::Cluster
    );
    let ar = Monitor::api_resource();
    assert_eq!(
        (
            ar.group.as_str(),
            ar.version.as_str(),
            ar.kind.as_str(),
            ar.plural.as_str()
        ),
        (GROUP, "v1", "Monitor", "monitors")
    );
    // The trait, for generic code.
    fn name_of<K: CustomResourceExt>() -> &'static str {
        K::crd_name()
    }
    assert_eq!(name_of::<v2::Widget>(), "widgets.derive.kubewright.test");
}

fn monitor() -> Monitor {
    let mut m = Monitor::new(
        "web",
        MonitorSpec {
            target: "https://example.com".into(),
            interval_seconds: 30,
            timeout: Some(
                kubewright::k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(5),
            ),
            replicas: 2,
            paused: false,
        },
    );
    m.metadata.namespace = Some("default".into());
    m
}

#[test]
fn serialization_round_trip() {
    let m = monitor();
    assert_eq!(m.metadata.name.as_deref(), Some("web"));
    assert!(m.status.is_none());
    let v = serde_json::to_value(&m).unwrap();
    assert_eq!(
        v,
        json!({
            "apiVersion": "derive.kubewright.test/v1",
            "kind": "Monitor",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"target": "https://example.com", "intervalSeconds": 30, "timeout": 5, "replicas": 2, "paused": false}
        })
    );
    let back: Monitor = serde_json::from_value(v).unwrap();
    assert_eq!(back, m);

    let mut with_status = m.clone();
    with_status.status = Some(MonitorStatus {
        replicas: 2,
        ..Default::default()
    });
    let v = serde_json::to_value(&with_status).unwrap();
    assert_eq!(v["status"], json!({"replicas": 2}));
    assert_eq!(serde_json::from_value::<Monitor>(v).unwrap(), with_status);

    // A server object without metadata fields we model, with extra fields, decodes.
    let decoded: Monitor = serde_json::from_value(json!({
        "apiVersion": "derive.kubewright.test/v1", "kind": "Monitor",
        "metadata": {"name": "x", "uid": "1", "resourceVersion": "7"},
        "spec": {"target": "https://a.b", "intervalSeconds": 10}
    }))
    .unwrap();
    assert_eq!(decoded.spec.replicas, 0);
    assert_eq!(decoded.metadata.resource_version.as_deref(), Some("7"));
}

#[test]
fn pipeline_round_trip() {
    let spec = sample_pipeline_spec();
    let p = Pipeline::new("build", spec.clone());
    let v = serde_json::to_value(&p).unwrap();
    assert_eq!(
        v["spec"]["source"],
        json!({"git": {"url": "https://git.example/x.git"}})
    );
    assert_eq!(
        v["spec"]["storage"],
        json!({"type": "s3", "bucket": "artifacts"})
    );
    assert_eq!(v["spec"]["port"], json!(8080));
    assert_eq!(serde_json::from_value::<Pipeline>(v).unwrap().spec, spec);
}

// Schemas that cannot be structural fail with a message naming the field.

mod bad {
    use kubewright::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize, Clone, Debug, JsonSchema)]
    pub struct Tree {
        pub children: Vec<Tree>,
    }

    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
    #[kube(group = "derive.kubewright.test", version = "v1", kind = "Forest")]
    pub struct ForestSpec {
        pub root: Tree,
    }

    #[derive(Serialize, Deserialize, Clone, Debug, JsonSchema)]
    pub enum Mixed {
        Nothing,
        Something(String),
    }

    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
    #[kube(group = "derive.kubewright.test", version = "v1", kind = "Mix")]
    pub struct MixSpec {
        pub value: Mixed,
    }

    #[derive(Serialize, Deserialize, Clone, Debug, JsonSchema)]
    #[serde(untagged)]
    pub enum Clash {
        A { x: String },
        B { x: bool },
    }

    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
    #[kube(group = "derive.kubewright.test", version = "v1", kind = "Clashing")]
    pub struct ClashingSpec {
        pub clash: Clash,
    }
}

#[test]
fn unstructural_schemas_fail_clearly() {
    let err = bad::Forest::try_crd().unwrap_err();
    assert!(err.path().starts_with(".spec.root.children[*]"), "{err}");
    assert!(err.to_string().contains("recursive type"), "{err}");
    assert!(err.to_string().contains("Forest"), "{err}");

    let err = bad::Mix::try_crd().unwrap_err();
    assert_eq!(err.path(), ".spec.value");
    assert!(err.message().contains("unit variants"), "{err}");

    let err = bad::Clashing::try_crd().unwrap_err();
    assert_eq!(err.path(), ".spec.clash.x");

    let panic = std::panic::catch_unwind(bad::Mix::crd).unwrap_err();
    let msg = panic.downcast_ref::<String>().unwrap();
    assert!(msg.contains("cannot build the CRD of Mix"), "{msg}");
}

// Paths overridden with `crates(...)`: the generated code must not mention `::kubewright`
// paths other than those given.
mod overrides {
    #[derive(
        kubewright::CustomResource,
        serde::Serialize,
        serde::Deserialize,
        Clone,
        Debug,
        schemars::JsonSchema,
    )]
    #[kube(
        group = "derive.kubewright.test",
        version = "v1",
        kind = "Gadget",
        crates(
            kubewright = ::kubewright,
            kubewright_core = ::kubewright::core,
            k8s_openapi = ::k8s_openapi,
            schemars = ::schemars,
            serde = ::serde,
            serde_json = "::serde_json"
        )
    )]
    pub struct GadgetSpec {
        pub on: bool,
    }
}

#[test]
fn crate_overrides() {
    let g = overrides::Gadget::new("g", overrides::GadgetSpec { on: true });
    assert_eq!(serde_json::to_value(&g).unwrap()["kind"], "Gadget");
    assert_eq!(overrides::Gadget::crd().spec.names.plural, "gadgets");
}

// Version flags, printer column details, several derives in one string, `deprecated` as a
// flag plus `deprecation_warning`, bools written out.
mod flags {
    use kubewright::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    #[derive(
        CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema,
    )]
    #[kube(group = "derive.kubewright.test", version = "v2beta3", kind = "Gizmo")]
    #[kube(
        namespaced = false,
        served = false,
        storage = false,
        deprecated,
        deprecation_warning = "Gizmo v2beta3 is going away",
        derive = "PartialEq",
        derive = Default,
        printcolumn(
            name = "Size",
            json_path = ".spec.size",
            type = "integer",
            format = "int32",
            description = "How big",
            priority = 2
        )
    )]
    pub struct GizmoSpec {
        pub size: i32,
    }
}

#[test]
fn version_flags_and_extra_derives() {
    let crd = flags::Gizmo::crd();
    assert_eq!(crd.spec.scope, "Cluster");
    let v = &crd.spec.versions[0];
    assert_eq!(
        (v.served, v.storage, v.deprecated),
        (false, false, Some(true))
    );
    assert_eq!(
        v.deprecation_warning.as_deref(),
        Some("Gizmo v2beta3 is going away")
    );
    let col = &v.additional_printer_columns.as_ref().unwrap()[0];
    assert_eq!(col.format.as_deref(), Some("int32"));
    assert_eq!(col.description.as_deref(), Some("How big"));
    assert_eq!(col.priority, Some(2));
    // PartialEq and Default on the generated type.
    let a = flags::Gizmo::new("a", flags::GizmoSpec { size: 1 });
    assert_ne!(a, flags::Gizmo::default());
    assert_eq!(flags::Gizmo::default().spec.size, 0);
}
