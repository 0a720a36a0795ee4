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

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kubewright::core::{Patch, PatchParams};
use kubewright::runtime::controller::Action;
use kubewright::runtime::events::{Event, EventRecorder, EventType, object_reference};
use kubewright::runtime::owner::controller_owner_ref;
use kubewright::{Api, Client, ResourceExt};
use std::sync::Arc;
use std::time::Duration;

/// The field manager of the operator's server-side applies.
pub const MANAGER: &str = "monitor-operator";

/// What the reconciler needs.
pub struct MonitorContext {
    /// API client.
    pub client: Client,
    /// Event recorder (optional).
    pub recorder: Option<EventRecorder>,
}

/// Reconcile errors.
#[derive(Debug, thiserror::Error)]
pub enum MonitorError {
    /// An API call failed.
    #[error("API call failed: {0}")]
    Api(#[from] kubewright::Error),
    /// The object has no namespace.
    #[error("monitor {0} has no namespace")]
    NoNamespace(String),
    /// The owner reference could not be built.
    #[error("owner reference: {0}")]
    Owner(#[from] kubewright::runtime::owner::OwnerError),
}

/// Names of the objects a Monitor owns.
pub fn owned_names(monitor_name: &str) -> (String, String) {
    (
        format!("{monitor_name}-config"),
        format!("{monitor_name}-prober"),
    )
}

/// Brings the owned ConfigMap and Deployment in line with the Monitor's spec (server-side
/// apply, so the operator owns exactly its fields) and reports the status.
pub async fn reconcile(
    monitor: Arc<Monitor>,
    ctx: Arc<MonitorContext>,
) -> Result<Action, MonitorError> {
    let name = monitor.name_any();
    let ns = monitor
        .namespace()
        .map(str::to_string)
        .ok_or_else(|| MonitorError::NoNamespace(name.clone()))?;
    let owner = controller_owner_ref(monitor.as_ref())?;
    let (cm_name, deploy_name) = owned_names(&name);
    let apply = PatchParams::apply(MANAGER).force();

    let cm = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": cm_name, "ownerReferences": [owner]},
        "data": {"target": monitor.spec.target, "intervalSeconds": monitor.spec.interval_seconds.to_string()},
    });
    Api::<ConfigMap>::namespaced(ctx.client.clone(), &ns)
        .patch(&cm_name, &apply, &Patch::Apply(cm))
        .await?;

    let labels = serde_json::json!({"app.kubernetes.io/name": "monitor-prober", "monitor": name});
    let deploy = serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": deploy_name, "ownerReferences": [owner]},
        "spec": {
            "replicas": monitor.spec.replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{
                    "name": "prober", "image": "curlimages/curl:8.10.1",
                    "args": ["sh", "-c", format!("while true; do curl -fsS {} >/dev/null; sleep {}; done", monitor.spec.target, monitor.spec.interval_seconds)],
                    "volumeMounts": [{"name": "config", "mountPath": "/etc/monitor"}],
                }],
                "volumes": [{"name": "config", "configMap": {"name": cm_name}}]}
            }
        }
    });
    let deployments = Api::<Deployment>::namespaced(ctx.client.clone(), &ns);
    let applied = deployments
        .patch(&deploy_name, &apply, &Patch::Apply(deploy))
        .await?;
    let ready = applied
        .status
        .as_ref()
        .and_then(|s| s.ready_replicas)
        .unwrap_or(0);

    // A status-only server-side apply (apiVersion, kind and status) to the status
    // subresource: the operator owns these status fields, as it owns its children's.
    let status = serde_json::json!({
        "apiVersion": "example.kubewright.dev/v1",
        "kind": "Monitor",
        "status": {
            "observedGeneration": monitor.metadata.generation,
            "replicas": monitor.spec.replicas,
            "readyReplicas": ready,
            "configMap": cm_name,
        }
    });
    let current = monitor.status.clone().unwrap_or_default();
    let changed = current.observed_generation != monitor.metadata.generation
        || current.replicas != monitor.spec.replicas
        || current.ready_replicas != ready;
    if changed {
        Api::<Monitor>::namespaced(ctx.client.clone(), &ns)
            .patch_status(&name, &apply, &Patch::Apply(status))
            .await?;
        if let Some(rec) = &ctx.recorder {
            let note = format!(
                "{} prober replica(s) for {}",
                monitor.spec.replicas, monitor.spec.target
            );
            rec.publish(
                &object_reference(monitor.as_ref()),
                Event::new(EventType::Normal, "Reconciled", "Reconcile").note(note),
            );
        }
    }
    // Re-check periodically so prober readiness shows up in the status.
    Ok(Action::requeue(Duration::from_secs(300)))
}
