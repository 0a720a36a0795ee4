//! Component schemas: built-in types from k8s-openapi's `schemars` implementations (which
//! already carry the Kubernetes definition names), touched up with the extensions
//! kube-apiserver publishes, and custom resources from their CRD's `openAPIV3Schema`.
//!
//! The schemars output for the built-in types is generated once and kept in
//! `builtins.json.gz` beside this file: running schemars over every k8s-openapi type in
//! this crate made it (and k8s-openapi, with its `schemars` feature) the longest part of
//! a first build. A unit test regenerates it from k8s-openapi and fails when the file is
//! stale; `KW_UPDATE_BUILTIN_SCHEMAS=1 cargo test -p kubewright-apiserver --lib
//! builtin_schema_file` rewrites it.

use super::k8s_ext::{
    ATOMIC_STRUCTS, FIELD_DEFAULTS, FIELD_EXTENSIONS, KIND_REQUIRED, STRUCT_FIELDS,
};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

/// Prefix of an OpenAPI v3 schema reference.
pub(crate) const V3_REF: &str = "#/components/schemas/";
/// Prefix of a Swagger 2.0 schema reference.
pub(crate) const V2_REF: &str = "#/definitions/";

/// `meta/v1` definition names used by the paths.
pub(crate) const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
pub(crate) const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
pub(crate) const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
pub(crate) const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
pub(crate) const WATCH_EVENT: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent";
pub(crate) const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";

const API_VERSION_DESC: &str = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const KIND_DESC: &str = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";

/// Group, version, kind.
pub(crate) type Gvk = (String, String, String);

/// Every built-in schema, built once.
pub(crate) struct Builtins {
    /// Definition name -> schema (references as `#/components/schemas/<name>`).
    pub schemas: BTreeMap<String, Value>,
    /// Top-level kinds (and their lists) -> definition name.
    pub kinds: BTreeMap<Gvk, String>,
}

/// The built-in schemas.
pub(crate) static BUILTINS: LazyLock<Builtins> = LazyLock::new(build_builtins);

/// The generated schemars output for the built-in types (see the module docs).
const GENERATED: &[u8] = include_bytes!("builtins.json.gz");

/// What schemars gives for the built-in types, before the touch-ups: every definition,
/// and the definition name of each top-level kind.
#[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
struct Generated {
    schemas: BTreeMap<String, Value>,
    /// (group, version, kind, definition name), in the order they were collected.
    kinds: Vec<(String, String, String, String)>,
}

fn read_generated(bytes: &[u8]) -> Result<Generated, String> {
    use std::io::Read as _;
    let mut json = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut json)
        .map_err(|e| format!("decompressing the built-in schemas: {e}"))?;
    serde_json::from_slice(&json).map_err(|e| format!("reading the built-in schemas: {e}"))
}

/// Calls `$m!($($args)* <every served built-in type>)`: the one list of built-in kinds,
/// shared by the resource table and the OpenAPI documents.
macro_rules! builtin_types {
    ($m:ident ! ( $($args:tt)* )) => {
        $m!($($args)*
            k8s_openapi::api::core::v1::ConfigMap,
            k8s_openapi::api::core::v1::Endpoints,
            k8s_openapi::api::core::v1::Event,
            k8s_openapi::api::core::v1::LimitRange,
            k8s_openapi::api::core::v1::Namespace,
            k8s_openapi::api::core::v1::Node,
            k8s_openapi::api::core::v1::PersistentVolume,
            k8s_openapi::api::core::v1::PersistentVolumeClaim,
            k8s_openapi::api::core::v1::Pod,
            k8s_openapi::api::core::v1::PodTemplate,
            k8s_openapi::api::core::v1::ReplicationController,
            k8s_openapi::api::core::v1::ResourceQuota,
            k8s_openapi::api::core::v1::Secret,
            k8s_openapi::api::core::v1::Service,
            k8s_openapi::api::core::v1::ServiceAccount,
            k8s_openapi::api::admissionregistration::v1::MutatingAdmissionPolicy,
            k8s_openapi::api::admissionregistration::v1::MutatingAdmissionPolicyBinding,
            k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration,
            k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration,
            k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy,
            k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding,
            k8s_openapi::api::apps::v1::ControllerRevision,
            k8s_openapi::api::apps::v1::DaemonSet,
            k8s_openapi::api::apps::v1::Deployment,
            k8s_openapi::api::apps::v1::ReplicaSet,
            k8s_openapi::api::apps::v1::StatefulSet,
            k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler,
            k8s_openapi::api::autoscaling::v1::HorizontalPodAutoscaler,
            k8s_openapi::api::batch::v1::CronJob,
            k8s_openapi::api::batch::v1::Job,
            k8s_openapi::api::certificates::v1::CertificateSigningRequest,
            k8s_openapi::api::coordination::v1::Lease,
            k8s_openapi::api::discovery::v1::EndpointSlice,
            k8s_openapi::api::events::v1::Event,
            k8s_openapi::api::flowcontrol::v1::FlowSchema,
            k8s_openapi::api::flowcontrol::v1::PriorityLevelConfiguration,
            k8s_openapi::api::networking::v1::Ingress,
            k8s_openapi::api::networking::v1::IngressClass,
            k8s_openapi::api::networking::v1::IPAddress,
            k8s_openapi::api::networking::v1::NetworkPolicy,
            k8s_openapi::api::networking::v1::ServiceCIDR,
            k8s_openapi::api::node::v1::RuntimeClass,
            k8s_openapi::api::policy::v1::PodDisruptionBudget,
            k8s_openapi::api::resource::v1::DeviceClass,
            k8s_openapi::api::resource::v1::ResourceClaim,
            k8s_openapi::api::resource::v1::ResourceClaimTemplate,
            k8s_openapi::api::resource::v1::ResourceSlice,
            k8s_openapi::api::rbac::v1::ClusterRole,
            k8s_openapi::api::rbac::v1::ClusterRoleBinding,
            k8s_openapi::api::rbac::v1::Role,
            k8s_openapi::api::rbac::v1::RoleBinding,
            k8s_openapi::api::scheduling::v1::PriorityClass,
            k8s_openapi::api::storage::v1::CSIDriver,
            k8s_openapi::api::storage::v1::CSINode,
            k8s_openapi::api::storage::v1::CSIStorageCapacity,
            k8s_openapi::api::storage::v1::StorageClass,
            k8s_openapi::api::storage::v1::VolumeAttachment,
            k8s_openapi::api::storage::v1::VolumeAttributesClass,
            k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
            k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService,
        )
    };
}
pub(crate) use builtin_types;

fn build_builtins() -> Builtins {
    let generated = read_generated(GENERATED).unwrap_or_else(|e| {
        // The file is part of the source and checked by a test: this is a broken build.
        tracing::error!("{e}; the OpenAPI documents will have no built-in schemas");
        Generated {
            schemas: BTreeMap::new(),
            kinds: Vec::new(),
        }
    });
    let mut schemas: BTreeMap<String, Value> = generated
        .schemas
        .into_iter()
        .map(|(k, mut v)| {
            wrap_ref_siblings(&mut v);
            (k, v)
        })
        .collect();
    touch_up(&mut schemas);
    let mut kinds = BTreeMap::new();
    for (g, v, k, name) in generated.kinds {
        let gvk = (g, v, k);
        if let Some(s) = schemas.get_mut(&name) {
            set_gvk(s, &gvk);
        }
        let list_name = format!("{name}List");
        let list_gvk = (gvk.0.clone(), gvk.1.clone(), format!("{}List", gvk.2));
        if !schemas.contains_key(&list_name) {
            schemas.insert(list_name.clone(), list_schema(&gvk.2, &name, &list_gvk));
        }
        kinds.insert(list_gvk, list_name);
        kinds.insert(gvk, name);
    }
    if let Some(s) = schemas.get_mut(STATUS) {
        set_gvk(s, &(String::new(), "v1".into(), "Status".into()));
    }
    Builtins { schemas, kinds }
}

/// Adds the extensions and required lists kube-apiserver publishes and k8s-openapi lacks.
fn touch_up(schemas: &mut BTreeMap<String, Value>) {
    for (def, prop, ext) in FIELD_EXTENSIONS {
        let Some(p) = schemas
            .get_mut(*def)
            .and_then(|s| s.get_mut("properties"))
            .and_then(|p| p.get_mut(*prop))
            .and_then(Value::as_object_mut)
        else {
            continue;
        };
        if let Ok(Value::Object(ext)) = serde_json::from_str::<Value>(ext) {
            p.extend(ext);
        }
    }
    for (def, prop, default) in FIELD_DEFAULTS {
        if let Some(p) = schemas
            .get_mut(*def)
            .and_then(|s| s.get_mut("properties"))
            .and_then(|p| p.get_mut(*prop))
            .and_then(Value::as_object_mut)
            && let Ok(d) = serde_json::from_str::<Value>(default)
        {
            p.insert("default".into(), d);
        }
    }
    for (def, prop) in STRUCT_FIELDS {
        if let Some(p) = schemas
            .get_mut(*def)
            .and_then(|s| s.get_mut("properties"))
            .and_then(|p| p.get_mut(*prop))
            .and_then(Value::as_object_mut)
        {
            // As kube-apiserver publishes it: `allOf: [{$ref}]` next to the default.
            if let Some(r) = p.remove("$ref") {
                p.insert("allOf".into(), json!([{ "$ref": r }]));
            }
            p.insert("default".into(), json!({}));
        }
    }
    for def in ATOMIC_STRUCTS {
        if let Some(s) = schemas.get_mut(*def).and_then(Value::as_object_mut) {
            s.insert("x-kubernetes-map-type".into(), json!("atomic"));
        }
    }
    for (def, required) in KIND_REQUIRED {
        let Some(s) = schemas.get_mut(*def).and_then(Value::as_object_mut) else {
            continue;
        };
        let keep: Vec<Value> = s
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|r| r.as_str().is_some_and(|r| required.contains(&r)))
            .cloned()
            .collect();
        if keep.is_empty() {
            s.remove("required");
        } else {
            s.insert("required".into(), Value::Array(keep));
        }
    }
}

fn set_gvk(schema: &mut Value, gvk: &Gvk) {
    if let Some(o) = schema.as_object_mut() {
        o.insert(
            "x-kubernetes-group-version-kind".into(),
            json!([{"group": gvk.0, "kind": gvk.2, "version": gvk.1}]),
        );
    }
}

/// A `$ref` with siblings (a description) becomes `allOf: [{$ref}]` plus the siblings, as
/// kube-apiserver publishes it: OpenAPI 3.0 ignores the siblings of a `$ref`.
pub(crate) fn wrap_ref_siblings(v: &mut Value) {
    match v {
        Value::Object(o) => {
            // A property named `$ref` (in JSONSchemaProps) is an object, not a reference.
            if o.len() > 1
                && o.get("$ref").is_some_and(Value::is_string)
                && let Some(r) = o.remove("$ref")
            {
                o.insert("allOf".into(), json!([{ "$ref": r }]));
            }
            for x in o.values_mut() {
                wrap_ref_siblings(x);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(wrap_ref_siblings),
        _ => {}
    }
}

fn ref_to(name: &str) -> Value {
    json!({ "$ref": format!("{V3_REF}{name}") })
}

fn type_meta_props(props: &mut Map<String, Value>) {
    props.insert(
        "apiVersion".into(),
        json!({"description": API_VERSION_DESC, "type": "string"}),
    );
    props.insert(
        "kind".into(),
        json!({"description": KIND_DESC, "type": "string"}),
    );
}

/// `<Kind>List`.
fn list_schema(kind: &str, item: &str, list_gvk: &Gvk) -> Value {
    let mut props = Map::new();
    type_meta_props(&mut props);
    props.insert(
        "items".into(),
        json!({"description": format!("List of {kind} objects."), "type": "array", "items": ref_to(item)}),
    );
    props.insert(
        "metadata".into(),
        json!({"allOf": [ref_to(LIST_META)], "description": "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"}),
    );
    let mut s = json!({
        "description": format!("{kind}List is a list of {kind} objects."),
        "type": "object",
        "properties": props,
        "required": ["items"],
    });
    set_gvk(&mut s, list_gvk);
    s
}

/// Kubernetes' definition name of a custom resource: the reversed group, version, kind
/// (`com.example.stable.v1.CronTab`).
pub(crate) fn crd_definition_name(group: &str, version: &str, kind: &str) -> String {
    let mut parts: Vec<&str> = group.split('.').collect();
    parts.reverse();
    format!("{}.{version}.{kind}", parts.join("."))
}

/// The schemas of a custom resource version: the object and its list.
pub(crate) fn crd_schemas(
    group: &str,
    version: &str,
    kind: &str,
    schema: Option<&Value>,
) -> Vec<(String, Value)> {
    let name = crd_definition_name(group, version, kind);
    let gvk = (group.to_string(), version.to_string(), kind.to_string());
    let mut s = match schema {
        Some(Value::Object(o)) => Value::Object(o.clone()),
        _ => json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
    };
    if let Some(o) = s.as_object_mut() {
        o.entry("type").or_insert_with(|| json!("object"));
        let props = o
            .entry("properties")
            .or_insert_with(|| json!({}))
            .as_object_mut();
        if let Some(props) = props {
            type_meta_props(props);
            props.insert(
                "metadata".into(),
                json!({"allOf": [ref_to(OBJECT_META)], "description": "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"}),
            );
        }
    }
    set_gvk(&mut s, &gvk);
    let list_gvk = (gvk.0.clone(), gvk.1.clone(), format!("{kind}List"));
    let list = list_schema(kind, &name, &list_gvk);
    vec![(format!("{name}List"), list), (name, s)]
}

/// Every schema of `extra` or `builtins` reachable from the references in `root` (which
/// start with `root_prefix`), transitively.
pub(crate) fn closure(
    root: &Value,
    root_prefix: &str,
    builtins: &BTreeMap<String, Value>,
    extra: &BTreeMap<String, Value>,
) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    let mut todo: Vec<String> = Vec::new();
    let mut seen = BTreeSet::new();
    collect_refs(root, root_prefix, &mut todo);
    while let Some(name) = todo.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        let Some(s) = extra.get(&name).or_else(|| builtins.get(&name)) else {
            continue;
        };
        collect_refs(s, V3_REF, &mut todo);
        out.insert(name, s.clone());
    }
    out
}

/// The names referenced (`$ref` strings starting with `prefix`) anywhere in `v`.
pub(crate) fn collect_refs(v: &Value, prefix: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                match x {
                    Value::String(r) if k == "$ref" => {
                        if let Some(n) = r.strip_prefix(prefix) {
                            out.push(n.to_string());
                        }
                    }
                    _ => collect_refs(x, prefix, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| collect_refs(x, prefix, out)),
        _ => {}
    }
}

/// Rewrites a v3 schema for Swagger 2.0: references under `#/definitions/` and a lone
/// `allOf: [{$ref}]` back to a `$ref` with siblings, as kube-apiserver's v2 document has.
pub(crate) fn to_v2(v: &mut Value) {
    match v {
        Value::Object(o) => {
            let lone_ref = o
                .get("allOf")
                .and_then(Value::as_array)
                .filter(|a| a.len() == 1)
                .and_then(|a| a[0].as_object())
                .filter(|r| r.len() == 1)
                .and_then(|r| r.get("$ref"))
                .cloned();
            if let Some(r) = lone_ref {
                o.remove("allOf");
                o.insert("$ref".into(), r);
            }
            if let Some(Value::String(r)) = o.get_mut("$ref")
                && let Some(n) = r.strip_prefix(V3_REF)
            {
                *r = format!("{V2_REF}{n}");
            }
            // Swagger 2.0 has no `nullable` (a boolean keyword; a property of that name in a
            // `properties` map is an object).
            if o.get("nullable").is_some_and(Value::is_boolean) {
                o.remove("nullable");
            }
            for x in o.values_mut() {
                to_v2(x);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(to_v2),
        _ => {}
    }
}

/// Generating `builtins.json.gz` from k8s-openapi's `schemars` implementations (a
/// dev-dependency feature: the library itself does not run schemars).
#[cfg(test)]
mod generate {
    use super::*;
    use k8s_openapi::schemars::generate::SchemaSettings;
    use k8s_openapi::schemars::{JsonSchema, SchemaGenerator};

    struct Collector {
        generator: SchemaGenerator,
        kinds: Vec<(String, String, String, String)>,
    }

    impl Collector {
        fn add<T: JsonSchema>(&mut self) -> String {
            let r = self.generator.subschema_for::<T>();
            r.as_value()
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|s| s.strip_prefix(V3_REF))
                .map(str::to_string)
                .unwrap_or_else(|| T::schema_name().into_owned())
        }

        fn kind<T: JsonSchema + k8s_openapi::Resource>(&mut self) {
            let name = self.add::<T>();
            self.kinds.push((
                T::GROUP.to_string(),
                T::VERSION.to_string(),
                T::KIND.to_string(),
                name,
            ));
        }
    }

    /// The top-level kinds with schemas: the types served (the list of
    /// `builtin_resources()`), the access reviews and the kinds of the subresources.
    macro_rules! kinds {
        ($c:expr; $($ty:path),* $(,)?) => {
            $( $c.kind::<$ty>(); )*
        };
    }

    fn generate() -> Generated {
        use k8s_openapi::api as a;
        use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
        let settings = SchemaSettings::draft2020_12().with(|s| {
            s.definitions_path = "/components/schemas".into();
            s.meta_schema = None;
        });
        let mut c = Collector {
            generator: SchemaGenerator::new(settings),
            kinds: Vec::new(),
        };
        builtin_types!(kinds!(c;));
        kinds![c;
            // Access reviews and subresource kinds.
            a::authorization::v1::SelfSubjectAccessReview,
            a::authorization::v1::SelfSubjectRulesReview,
            a::authentication::v1::SelfSubjectReview,
            a::authentication::v1::TokenReview,
            a::authorization::v1::SubjectAccessReview,
            a::authorization::v1::LocalSubjectAccessReview,
            a::authentication::v1::TokenRequest,
            a::autoscaling::v1::Scale,
            a::core::v1::Binding,
            a::policy::v1::Eviction,
        ];
        for name in [
            c.add::<meta::ObjectMeta>(),
            c.add::<meta::ListMeta>(),
            c.add::<meta::Status>(),
            c.add::<meta::DeleteOptions>(),
            c.add::<meta::WatchEvent<k8s_openapi::apimachinery::pkg::runtime::RawExtension>>(),
            c.add::<meta::Patch>(),
            c.add::<meta::APIResourceList>(),
        ] {
            assert!(name.starts_with("io.k8s.apimachinery."), "{name}");
        }
        Generated {
            schemas: c.generator.take_definitions(false).into_iter().collect(),
            kinds: c.kinds,
        }
    }

    #[test]
    fn builtin_schema_file_is_current() {
        let fresh = generate();
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/openapi/builtins.json.gz");
        if std::env::var_os("KW_UPDATE_BUILTIN_SCHEMAS").is_some() {
            use std::io::Write as _;
            let json = serde_json::to_vec(&fresh).unwrap();
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
            gz.write_all(&json).unwrap();
            std::fs::write(path, gz.finish().unwrap()).unwrap();
            // This build embedded the old file; the next run checks the new one.
            return;
        }
        let stored = read_generated(&std::fs::read(path).unwrap()).unwrap();
        assert!(
            stored.kinds.len() > 60 && stored.schemas.len() > 300,
            "{} kinds, {} schemas",
            stored.kinds.len(),
            stored.schemas.len()
        );
        assert!(
            stored == fresh,
            "{path} is stale (k8s-openapi or the list of kinds changed): rerun this test \
             with KW_UPDATE_BUILTIN_SCHEMAS=1 and commit the file"
        );
        // What the server builds from it is the file's content.
        let built = build_builtins();
        assert_eq!(built.schemas.len(), {
            let mut names: BTreeSet<&String> = fresh.schemas.keys().collect();
            let lists: Vec<String> = fresh.kinds.iter().map(|k| format!("{}List", k.3)).collect();
            names.extend(lists.iter());
            names.len()
        });
    }
}
