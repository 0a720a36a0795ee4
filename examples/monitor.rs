//! `Monitor`: the custom resource of the seed use case. A Monitor probes a target; its
//! operator keeps a ConfigMap with the probe configuration and a Deployment of probers.

use kubewright::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The API group of the Monitor resource.
pub const GROUP: &str = "example.kubewright.dev";

fn default_interval() -> u32 {
    30
}

/// What to probe and how often.
// clippy's `duplicated_attributes` lint sees two `type = "integer"` pairs in the
// printer columns of the `kube` attribute; they are distinct columns.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "example.kubewright.dev",
    version = "v1",
    kind = "Monitor",
    namespaced,
    status = "MonitorStatus",
    shortname = "mon",
    category = "all",
    printcolumn(name = "Target", json_path = ".spec.target", type = "string"),
    printcolumn(name = "Replicas", json_path = ".spec.replicas", type = "integer"),
    printcolumn(name = "Ready", json_path = ".status.readyReplicas", type = "integer"),
    scale(spec = ".spec.replicas", status = ".status.replicas")
)]
#[serde(rename_all = "camelCase")]
pub struct MonitorSpec {
    /// URL to probe.
    #[schemars(regex(pattern = r"^https?://"))]
    pub target: String,
    /// Seconds between probes.
    #[serde(default = "default_interval")]
    #[schemars(range(min = 5, max = 3600))]
    pub interval_seconds: u32,
    /// Number of prober replicas.
    #[serde(default)]
    #[schemars(range(min = 0, max = 20))]
    pub replicas: i32,
}

/// What the operator observed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MonitorStatus {
    /// The generation the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Desired prober replicas.
    #[serde(default)]
    pub replicas: i32,
    /// Ready prober replicas (the embedded server runs no pods: the operator reports the
    /// Deployment's status as-is).
    #[serde(default)]
    pub ready_replicas: i32,
    /// Name of the owned ConfigMap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<String>,
}
