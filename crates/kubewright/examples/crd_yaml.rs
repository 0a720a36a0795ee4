//! Prints the CustomResourceDefinition of a derived custom resource as YAML, ready for
//! `kubectl apply -f -`:
//!
//! ```sh
//! cargo run -p kubewright --example crd_yaml | kubectl apply -f -
//! ```
//!
//! A real project keeps such a binary next to its types (or a `kw crd`-style subcommand in
//! its controller) so that the manifests in the repository are generated, never edited.

#![deny(missing_docs)]

use kubewright::CustomResource;
use kubewright::k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Probes an HTTP endpoint at an interval.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "example.com",
    version = "v1",
    kind = "Monitor",
    namespaced,
    status = "MonitorStatus",
    shortname = "mon",
    category = "all",
    printcolumn(name = "Target", json_path = ".spec.target", type = "string"),
    printcolumn(name = "Ready", json_path = ".status.ready", type = "boolean"),
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
    /// Probe timeout: seconds, or a duration string such as "5s".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<IntOrString>,
    /// Parallel probers.
    #[serde(default)]
    pub replicas: i32,
}

fn default_interval() -> u32 {
    30
}

/// What the monitor observed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct MonitorStatus {
    /// Whether the last probe succeeded.
    pub ready: bool,
    /// Running probers.
    pub replicas: i32,
}

fn main() {
    let crd = match Monitor::try_crd() {
        Ok(crd) => crd,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    match serde_saphyr::to_string(&crd) {
        Ok(yaml) => print!("---\n{yaml}"),
        Err(e) => {
            eprintln!("cannot render YAML: {e}");
            std::process::exit(1);
        }
    }
}
