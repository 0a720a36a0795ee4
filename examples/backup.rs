//! The operator of [docs/first-operator.md](../docs/first-operator.md): a `Backup` custom
//! resource, and a controller that keeps, for each Backup, a ConfigMap with its schedule
//! (owned by the Backup, so the garbage collector removes it with it), a status with a
//! `Ready` condition, a finalizer whose cleanup runs before the Backup goes, an Event,
//! and a metric of its own. `examples/first_operator.rs` runs it under a [`Manager`] with
//! leader election, metrics and probes; `examples/tests/backup.rs` tests it on the
//! embedded server and on a real cluster.

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kubewright::conditions::{new_condition, set_status_condition};
use kubewright::core::{Patch, PatchParams};
use kubewright::runtime::events::{Event, EventRecorder, EventType, object_reference};
use kubewright::runtime::finalizer::{FinalizerError, FinalizerEvent, finalizer_with};
use kubewright::runtime::metrics::prometheus_client::metrics::counter::Counter;
use kubewright::runtime::owner::{OwnerError, controller_owner_ref};
use kubewright::runtime::{Action, InformerParams, Manager, ManagerError};
use kubewright::{Api, Client, CustomResource, Resource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

/// The field manager of every write of the operator: its server-side applies, its status
/// and its finalizer all show up under this name in `managedFields`.
pub const MANAGER: &str = "backup-operator";
/// The finalizer that guards the cleanup.
pub const FINALIZER: &str = "first.kubewright.dev/cleanup";
/// `reportingController` of the operator's Events.
pub const REPORTER: &str = "first.kubewright.dev/backup-operator";

/// What to back up, and when.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "first.kubewright.dev",
    version = "v1",
    kind = "Backup",
    namespaced,
    status = "BackupStatus",
    shortname = "bk",
    printcolumn(name = "Schedule", json_path = ".spec.schedule", type = "string")
)]
#[serde(rename_all = "camelCase")]
pub struct BackupSpec {
    /// The PersistentVolumeClaim to back up.
    pub source: String,
    /// When, as a cron expression.
    pub schedule: String,
    /// How many backups to keep.
    #[serde(default = "default_retain")]
    #[schemars(range(min = 1, max = 100))]
    pub retain: u32,
}

fn default_retain() -> u32 {
    7
}

/// What the operator observed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupStatus {
    /// The generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`: the schedule is in place.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

impl Backup {
    /// Whether the status reports `Ready` for the current generation.
    pub fn is_ready(&self) -> bool {
        self.status.as_ref().is_some_and(|s| {
            s.observed_generation == self.metadata.generation
                && kubewright::conditions::is_status_condition_true(&s.conditions, "Ready")
        })
    }
}

/// The name of a Backup's ConfigMap.
pub fn config_map_name(backup: &str) -> String {
    format!("{backup}-schedule")
}

/// What the reconciler shares across reconciles.
pub struct Context {
    /// The API client.
    pub client: Client,
    /// Records Events; the manager flushes it when it stops.
    pub recorder: EventRecorder,
    /// `backup_cleanups_total`: cleanups that ran.
    pub cleanups: Counter,
}

/// Why a reconcile failed (it is retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    /// An API call failed.
    #[error(transparent)]
    Api(#[from] kubewright::Error),
    /// The owner reference could not be built (the Backup has no uid yet).
    #[error(transparent)]
    Owner(#[from] OwnerError),
    /// Adding or removing the finalizer failed, or the apply or cleanup did.
    #[error(transparent)]
    Finalizer(#[from] Box<FinalizerError<BackupError>>),
}

/// Reconciles one Backup: behind the finalizer, `apply` while it exists and `cleanup`
/// once it is being deleted.
pub async fn reconcile(backup: Arc<Backup>, ctx: Arc<Context>) -> Result<Action, BackupError> {
    let ns = backup.namespace().unwrap_or_default().to_string();
    let backups: Api<Backup> = Api::namespaced(ctx.client.clone(), &ns);
    let params = PatchParams {
        field_manager: Some(MANAGER.into()),
        ..Default::default()
    };
    finalizer_with(&backups, FINALIZER, &params, backup, |event| async {
        match event {
            FinalizerEvent::Apply(backup) => apply(&backup, &ctx).await,
            FinalizerEvent::Cleanup(backup) => cleanup(&backup, &ctx).await,
        }
    })
    .await
    .map_err(|e| BackupError::Finalizer(Box::new(e)))
}

async fn apply(backup: &Backup, ctx: &Context) -> Result<Action, BackupError> {
    let ns = backup.namespace().unwrap_or_default().to_string();
    let apply = PatchParams::apply(MANAGER).force();
    // The child: server-side apply of exactly the fields the operator owns, with the
    // Backup as its controller (the garbage collector deletes it with the Backup).
    let name = config_map_name(&backup.name_any());
    let child = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "ownerReferences": [controller_owner_ref(backup)?]},
        "data": {
            "source": backup.spec.source,
            "schedule": backup.spec.schedule,
            "retain": backup.spec.retain.to_string(),
        },
    });
    Api::<ConfigMap>::namespaced(ctx.client.clone(), &ns)
        .patch(&name, &apply, &Patch::Apply(child))
        .await?;

    // The status: a Ready condition kept by `set_status_condition` (its transition time
    // moves only when the status does), written by a status-only server-side apply.
    let mut status = backup.status.clone().unwrap_or_default();
    let changed = set_status_condition(
        &mut status.conditions,
        new_condition(
            "Ready",
            true,
            "Scheduled",
            &format!(
                "backing up {} at {}",
                backup.spec.source, backup.spec.schedule
            ),
        ),
    ) | (status.observed_generation != backup.metadata.generation);
    if changed {
        status.observed_generation = backup.metadata.generation;
        let body = serde_json::json!({
            "apiVersion": Backup::api_version(&()),
            "kind": Backup::kind(&()),
            "status": status,
        });
        Api::<Backup>::namespaced(ctx.client.clone(), &ns)
            .patch_status(&backup.name_any(), &apply, &Patch::Apply(body))
            .await?;
        ctx.recorder.publish(
            &object_reference(backup),
            Event::new(EventType::Normal, "Scheduled", "Reconcile").note(format!(
                "schedule {} written to {name}",
                backup.spec.schedule
            )),
        );
    }
    // Nothing changes by itself: wait for the next change (the ConfigMap's too, as it is
    // owned), with an hourly resync as a safety net.
    Ok(Action::requeue(Duration::from_secs(3600)))
}

async fn cleanup(backup: &Backup, ctx: &Context) -> Result<Action, BackupError> {
    // Where an operator would remove what lives outside the cluster (snapshots in a
    // bucket, say); it must be idempotent, as it runs again if removing the finalizer
    // fails. The ConfigMap needs nothing: the garbage collector removes it.
    ctx.cleanups.inc();
    ctx.recorder.publish(
        &object_reference(backup),
        Event::new(EventType::Normal, "CleanedUp", "Cleanup").note("backups released"),
    );
    Ok(Action::await_change())
}

/// Adds the Backup controller (and its `backup_cleanups_total` metric and event
/// recorder) to `manager`, watching Backups and the ConfigMaps they own.
pub fn add_to(manager: &mut Manager) -> Result<(), ManagerError> {
    let cleanups = Counter::default();
    manager.registry().register(
        "backup_cleanups",
        "Backup cleanups that ran",
        cleanups.clone(),
    );
    let ctx = Arc::new(Context {
        client: manager.client().clone(),
        recorder: manager.event_recorder(REPORTER),
        cleanups,
    });
    let controller = manager
        .controller::<Backup>(InformerParams::all())
        .owns::<ConfigMap>(InformerParams::all())
        .named("backup");
    manager.add(controller, reconcile, ctx)
}
