//! Custom resource types shared by the snapshot and API server tests. Each covers a set of
//! schema shapes; together they cover nested structs, unit and data-carrying enums,
//! optional fields, maps, free-form values, int-or-string, keyed lists, defaults and
//! validation.
#![allow(dead_code)]

use kubewright::CustomResource;
use kubewright::k8s_openapi::api::core::v1::ResourceRequirements;
use kubewright::k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kubewright::k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};
use kubewright::k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The group of every test type; API server tests rewrite it to a unique one per run.
pub const GROUP: &str = "derive.kubewright.test";

// ---------------------------------------------------------------------------------------
// Monitor: the seed example. Namespaced, status + scale subresources, printer columns,
// short names, categories, selectable fields, CEL rules, defaults, pattern, ranges,
// lengths, int-or-string.

/// Probes an HTTP endpoint at an interval.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "derive.kubewright.test",
    version = "v1",
    kind = "Monitor",
    namespaced,
    status = "MonitorStatus",
    shortname = "mon",
    shortname = "mons",
    category = "all",
    category = "probes",
    printcolumn(
        name = "Target",
        json_path = ".spec.target",
        type = "string",
        description = "The probed URL"
    ),
    printcolumn(
        name = "Interval",
        json_path = ".spec.intervalSeconds",
        type = "integer",
        priority = 1
    ),
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#,
    scale(
        spec = ".spec.replicas",
        status = ".status.replicas",
        label_selector = ".status.selector"
    ),
    selectable_field = ".spec.target",
    validation = "self.replicas <= 10",
    validation(
        rule = "!has(self.timeout) || self.intervalSeconds >= 10",
        message = "a timeout needs an interval of at least 10s",
        reason = "FieldValueForbidden",
        field_path = ".timeout"
    ),
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct MonitorSpec {
    /// URL to probe.
    #[schemars(regex(pattern = r"^https?://"), length(min = 8, max = 255))]
    pub target: String,
    /// Seconds between probes.
    #[serde(default = "default_interval")]
    #[schemars(range(min = 5, max = 3600))]
    pub interval_seconds: u32,
    /// Probe timeout: seconds, or a duration string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<IntOrString>,
    /// Parallel probers.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub replicas: i32,
    /// Stop probing.
    #[serde(default)]
    pub paused: bool,
}

fn default_interval() -> u32 {
    30
}

/// What the monitor observed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MonitorStatus {
    /// Running probers.
    #[serde(default)]
    pub replicas: i32,
    /// Label selector of the probers (scale subresource).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// When the last probe ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_probe: Option<Time>,
    /// Standard conditions, merged by type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

// ---------------------------------------------------------------------------------------
// Pipeline: the shapes. Nested structs, keyed lists, maps (typed and free-form),
// free-form values, sets, unit enums, externally and internally tagged data enums, an
// untagged int-or-string enum, k8s types (Quantity, IntOrString, LabelSelector, Time,
// ResourceRequirements), floats, defaults on nested fields, list and string lengths.

/// A build pipeline.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "derive.kubewright.test",
    version = "v1alpha1",
    kind = "Pipeline",
    namespaced
)]
#[serde(rename_all = "camelCase")]
pub struct PipelineSpec {
    /// Ordered stages, merged by name under server-side apply.
    #[schemars(
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]),
        length(min = 1, max = 20)
    )]
    pub stages: Vec<Stage>,
    /// Retries; none when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetryPolicy>,
    /// Labels copied to every run.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Free-form parameters.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, serde_json::Value>,
    /// Any JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<serde_json::Value>,
    /// Tags (a set).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub tags: BTreeSet<String>,
    /// How stages run.
    pub mode: Mode,
    /// Mode to fall back to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_mode: Option<Mode>,
    /// Where the sources come from.
    pub source: Source,
    /// Where artifacts go.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<Storage>,
    /// CPU for the whole pipeline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<Quantity>,
    /// Stages that may fail: a count or a percentage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// A port number or name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<PortSpec>,
    /// Which nodes to run on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// Resources per stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// Relative weight.
    #[serde(default)]
    pub weight: f64,
    /// When the pipeline must be done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Time>,
}

/// One stage.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Stage {
    /// Unique name (the list key).
    #[schemars(length(min = 1, max = 63))]
    pub name: String,
    /// Container image.
    pub image: String,
    /// Arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub args: Vec<String>,
    /// Copies to run.
    #[serde(default = "one")]
    #[schemars(range(min = 1, max = 16))]
    pub parallelism: u8,
}

fn one() -> u8 {
    1
}

/// Retry policy.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RetryPolicy {
    /// Attempts after the first.
    #[schemars(range(max = 10))]
    pub attempts: u32,
    /// Backoff between attempts.
    #[serde(default)]
    pub backoff: Backoff,
}

/// Backoff strategies (a unit enum without docs on the variants).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub enum Backoff {
    #[default]
    Exponential,
    Linear,
    Constant,
}

/// How stages run (a unit enum with documented variants).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub enum Mode {
    /// One after the other.
    Sequential,
    /// All at once.
    Parallel,
}

/// Sources (externally tagged, data-carrying variants).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Source {
    /// A git repository.
    Git {
        /// Clone URL.
        url: String,
        /// Branch, tag or commit.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        revision: Option<String>,
    },
    /// An image with the sources.
    Image(String),
    /// Files given inline.
    Inline(BTreeMap<String, String>),
}

/// Artifact storage (internally tagged).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Storage {
    /// An S3 bucket.
    S3 {
        /// Bucket name.
        bucket: String,
        /// Region.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        region: Option<String>,
    },
    /// A persistent volume claim.
    Pvc {
        /// Claim name.
        claim: String,
    },
    /// Nothing is kept.
    Ephemeral,
}

/// A port given by number or by name (untagged).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(untagged)]
pub enum PortSpec {
    /// A number.
    Number(u16),
    /// A name.
    Name(String),
}

// ---------------------------------------------------------------------------------------
// ClusterPolicy: cluster-scoped, explicit plural/singular, deprecated version, CEL rule on
// a nested type through schemars' `extend`, deny_unknown_fields.

/// A cluster-wide policy.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "derive.kubewright.test",
    version = "v1beta1",
    kind = "ClusterPolicy",
    plural = "clusterpolicies",
    singular = "clusterpolicy",
    shortname = "cpol",
    deprecated = "derive.kubewright.test/v1beta1 ClusterPolicy is deprecated; use v1"
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterPolicySpec {
    /// Rules, in order.
    #[schemars(length(min = 1))]
    pub rules: Vec<Rule>,
    /// Reject (true) or only warn (false).
    #[serde(default)]
    pub enforce: bool,
}

/// One rule.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{"rule": "self.action != 'Deny' || has(self.reason)", "message": "Deny rules need a reason"}]))]
pub struct Rule {
    /// What to do.
    pub action: Action,
    /// Why (required for Deny).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Namespaces the rule applies to (all when empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub namespaces: Vec<String>,
}

/// Rule actions.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub enum Action {
    Allow,
    Deny,
    Audit,
}

// ---------------------------------------------------------------------------------------
// Widget: two versions of one kind, merged into one CRD.

pub mod v1 {
    use super::*;

    /// Widget, first version.
    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
    #[kube(
        group = "derive.kubewright.test",
        version = "v1",
        kind = "Widget",
        namespaced
    )]
    pub struct WidgetSpec {
        /// Size in centimetres.
        pub size: i32,
    }
}

pub mod v2 {
    use super::*;

    /// Widget, second version.
    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
    #[kube(
        group = "derive.kubewright.test",
        version = "v2",
        kind = "Widget",
        namespaced,
        status = "WidgetStatus"
    )]
    pub struct WidgetSpec {
        /// Size in centimetres.
        pub size: i32,
        /// Colour.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub colour: Option<String>,
    }

    /// Widget status.
    #[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
    pub struct WidgetStatus {
        /// Whether it is built.
        pub built: bool,
    }
}

/// The merged Widget CRD (v1 served, v2 served and stored).
pub fn widget_crd()
-> kubewright::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition
{
    kubewright::crd::merge_crds(vec![v1::Widget::crd(), v2::Widget::crd()], "v2")
        .unwrap_or_else(|e| panic!("merge: {e}"))
}

/// A Pipeline spec that uses most shapes.
pub fn sample_pipeline_spec() -> PipelineSpec {
    PipelineSpec {
        stages: vec![Stage {
            name: "build".into(),
            image: "rust:1".into(),
            args: vec!["cargo".into(), "build".into()],
            parallelism: 2,
        }],
        retry: Some(RetryPolicy {
            attempts: 3,
            backoff: Backoff::Linear,
        }),
        labels: [("team".to_string(), "core".to_string())].into(),
        params: [(
            "nested".to_string(),
            serde_json::json!({"a": [1, 2, {"b": null}]}),
        )]
        .into(),
        raw: Some(serde_json::json!(["anything", 1, true])),
        tags: ["fast".to_string(), "nightly".to_string()].into(),
        mode: Mode::Parallel,
        fallback_mode: None,
        source: Source::Git {
            url: "https://git.example/x.git".into(),
            revision: None,
        },
        storage: Some(Storage::S3 {
            bucket: "artifacts".into(),
            region: None,
        }),
        cpu: Some(Quantity("500m".into())),
        max_unavailable: Some(IntOrString::String("25%".into())),
        port: Some(PortSpec::Number(8080)),
        selector: None,
        resources: None,
        weight: 1.5,
        deadline: None,
    }
}

/// Every CRD under test, with its snapshot name.
pub fn all_crds() -> Vec<(
    &'static str,
    kubewright::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
)>{
    vec![
        ("monitor", Monitor::crd()),
        ("pipeline", Pipeline::crd()),
        ("clusterpolicy", ClusterPolicy::crd()),
        ("widget-merged", widget_crd()),
    ]
}
