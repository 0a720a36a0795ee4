//! Per-kind write strategies, like kube-apiserver's registry: what a kind's objects get
//! when they are decoded (defaulting), created (`PrepareForCreate`: status reset,
//! `metadata.generation`, server-set fields) and updated (`PrepareForUpdate`: the
//! generation bump), with a generic default for kinds without special behaviour.
//!
//! Each rule was checked against a v1.36 kube-apiserver: which kinds track a generation
//! (and what bumps it), which status an object starts with, which defaults it gets.

use crate::registry::ResourceDef;
use crate::registry::meta::{meta_mut, meta_str};
use serde_json::{Map, Value, json};

/// How a kind tracks `metadata.generation`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Generation {
    /// No generation (ConfigMap, Secret, Namespace, Service, ServiceAccount, Role, ...).
    None,
    /// 1 on create, never bumped (PriorityClass).
    CreateOnly,
    /// 1 on create, bumped when anything outside metadata and status changes.
    Spec,
    /// Also bumped when annotations change (Deployment: they are copied to ReplicaSets).
    SpecOrAnnotations,
    /// Also bumped when labels change (EndpointSlice).
    SpecOrLabels,
}

/// A kind's write behaviour.
pub trait Strategy: Sync {
    /// How `metadata.generation` is kept.
    fn generation(&self) -> Generation;

    /// Defaulting, applied to every write of the main resource (create, update, patch),
    /// as kube-apiserver's defaulters run when a request body is decoded.
    fn default(&self, _def: &ResourceDef, _obj: &mut Value) {}

    /// `PrepareForCreate`: the status a new object starts with and server-set fields.
    /// `metadata.uid` and `metadata.name` (unless generated) are set.
    fn prepare_for_create(&self, def: &ResourceDef, obj: &mut Value) {
        // A status subresource's status is not settable on create.
        if def.has_status
            && let Some(o) = obj.as_object_mut()
        {
            o.remove("status");
        }
        if self.generation() != Generation::None {
            meta_mut(obj).insert("generation".into(), json!(1));
        }
    }

    /// `PrepareForUpdate`: bumps the generation when the kind's tracked content changed.
    fn prepare_for_update(
        &self,
        def: &ResourceDef,
        old: &Value,
        new: &mut Value,
        sub: Option<&str>,
    ) {
        bump_generation(self.generation(), def, old, new, sub);
    }

    /// Fixes up a new object once its final name is known (generated names).
    fn canonicalize(&self, _obj: &mut Value) {}
}

/// Bumps `metadata.generation` when what `generation` tracks changed.
fn bump_generation(
    generation: Generation,
    def: &ResourceDef,
    old: &Value,
    new: &mut Value,
    sub: Option<&str>,
) {
    {
        let bump = sub != Some("status")
            && match generation {
                Generation::None | Generation::CreateOnly => false,
                Generation::Spec => spec_changed(def, old, new),
                Generation::SpecOrAnnotations => {
                    spec_changed(def, old, new)
                        || old.pointer("/metadata/annotations")
                            != new.pointer("/metadata/annotations")
                }
                Generation::SpecOrLabels => {
                    spec_changed(def, old, new)
                        || old.pointer("/metadata/labels") != new.pointer("/metadata/labels")
                }
            };
        if bump {
            let g = old
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            meta_mut(new).insert("generation".into(), json!(g + 1));
        }
    }
}

/// Whether anything outside `metadata` and `status` changed. For a kind without a status
/// subresource, anything outside metadata counts.
pub fn spec_changed(def: &ResourceDef, old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| -> Value {
        let mut v = v.clone();
        if let Some(o) = v.as_object_mut() {
            o.remove("metadata");
            o.remove("apiVersion");
            o.remove("kind");
            if def.has_status {
                o.remove("status");
            }
        }
        v
    };
    strip(old) != strip(new)
}

/// The strategy of a resource.
pub fn for_def(def: &ResourceDef) -> &'static dyn Strategy {
    if def.crd.is_some() {
        return &CUSTOM_RESOURCE;
    }
    match (def.group.as_str(), def.plural.as_str()) {
        ("", "pods") => &POD,
        ("", "podtemplates") => &POD_TEMPLATE,
        ("", "replicationcontrollers") => &REPLICATION_CONTROLLER,
        ("", "services") => &SERVICE,
        ("", "namespaces") => &NAMESPACE,
        ("", "secrets") => &SECRET,
        ("", "persistentvolumeclaims") => &PVC,
        ("", "persistentvolumes") => &PV,
        ("", "limitranges") => &LIMIT_RANGE,
        ("", "nodes") => &NODE,
        ("apps", "deployments") => &DEPLOYMENT,
        ("apps", "replicasets") => &REPLICA_SET,
        ("apps", "statefulsets") => &STATEFUL_SET,
        ("apps", "daemonsets") => &DAEMON_SET,
        ("batch", "jobs") => &JOB,
        ("batch", "cronjobs") => &CRON_JOB,
        ("autoscaling", "horizontalpodautoscalers") => &HPA,
        ("policy", "poddisruptionbudgets") => &PDB,
        ("networking.k8s.io", "ingresses") => &INGRESS,
        ("networking.k8s.io", "networkpolicies") => &NETWORK_POLICY,
        ("flowcontrol.apiserver.k8s.io", "flowschemas") => &FLOW_SCHEMA,
        ("networking.k8s.io", "ingressclasses") => &INGRESS_CLASS,
        (
            "admissionregistration.k8s.io",
            "validatingadmissionpolicies"
            | "validatingadmissionpolicybindings"
            | "mutatingadmissionpolicies"
            | "mutatingadmissionpolicybindings",
        ) => &ADMISSION_POLICY,
        ("flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations") => &PRIORITY_LEVEL,
        ("storage.k8s.io", "csidrivers") => &CSI_DRIVER,
        ("admissionregistration.k8s.io", _) | ("flowcontrol.apiserver.k8s.io", _) => &TRACKS_SPEC,
        ("rbac.authorization.k8s.io", "roles" | "clusterroles") => &ROLE,
        ("storage.k8s.io", "storageclasses") => &STORAGE_CLASS,
        ("discovery.k8s.io", "endpointslices") => &ENDPOINT_SLICE,
        ("", "endpoints") => &ENDPOINTS,
        ("scheduling.k8s.io", "priorityclasses") => &PRIORITY_CLASS,
        ("storage.k8s.io", "volumeattachments") => &VOLUME_ATTACHMENT,
        ("storage.k8s.io", "volumeattributesclasses") => &VOLUME_ATTRIBUTES_CLASS,
        ("resource.k8s.io", "deviceclasses" | "resourceslices") => &DEVICE_CLASS_OR_SLICE,
        ("resource.k8s.io", "resourceclaims") => &RESOURCE_CLAIM,
        ("resource.k8s.io", "resourceclaimtemplates") => &RESOURCE_CLAIM_TEMPLATE,
        ("apiextensions.k8s.io", "customresourcedefinitions") => &CRD,
        _ => &GENERIC,
    }
}

/// A built-in kind described by data: its generation rule, the status it starts with,
/// its defaulting and further create-time preparation.
pub struct Kind {
    generation: Generation,
    /// The status a new object gets (`None`: the generic rule, dropped when it is a
    /// subresource; struct fields Go always writes are filled in later).
    status: Option<fn(&Value) -> Value>,
    defaults: Option<fn(&mut Value)>,
    create: Option<fn(&mut Value)>,
    /// Run once a generated name is chosen.
    canonical: Option<fn(&mut Value)>,
    /// Further update preparation (old, new).
    update: Option<fn(&Value, &mut Value)>,
}

impl Strategy for Kind {
    fn generation(&self) -> Generation {
        self.generation
    }
    fn default(&self, _def: &ResourceDef, obj: &mut Value) {
        if let Some(d) = self.defaults {
            d(obj);
        }
    }
    fn prepare_for_create(&self, def: &ResourceDef, obj: &mut Value) {
        match self.status {
            Some(status) => {
                let s = status(obj);
                obj["status"] = s;
            }
            None => {
                if def.has_status
                    && let Some(o) = obj.as_object_mut()
                {
                    o.remove("status");
                }
            }
        }
        if let Some(c) = self.create {
            c(obj);
        }
        crate::registry::defaults::null_when_empty(obj, not_omitempty(&def.group, &def.plural));
        if self.generation != Generation::None {
            meta_mut(obj).insert("generation".into(), json!(1));
        }
    }
    fn prepare_for_update(
        &self,
        def: &ResourceDef,
        old: &Value,
        new: &mut Value,
        sub: Option<&str>,
    ) {
        if sub.is_none() {
            if let Some(u) = self.update {
                u(old, new);
            }
            crate::registry::defaults::null_when_empty(new, not_omitempty(&def.group, &def.plural));
        }
        bump_generation(self.generation, def, old, new, sub);
    }
    fn canonicalize(&self, obj: &mut Value) {
        if let Some(c) = self.canonical {
            c(obj);
        }
    }
}

const fn kind(generation: Generation) -> Kind {
    Kind {
        generation,
        status: None,
        defaults: None,
        create: None,
        canonical: None,
        update: None,
    }
}

static GENERIC: Kind = kind(Generation::None);
static TRACKS_SPEC: Kind = kind(Generation::Spec);
static INGRESS_CLASS: Kind = Kind {
    // `SetDefaults_IngressClass`: parameters are cluster-scoped unless said otherwise.
    defaults: Some(|o| {
        if let Some(p) = o.pointer_mut("/spec/parameters").filter(|p| p.is_object()) {
            crate::registry::defaults::set_default(p, "/scope", json!("Cluster"));
        }
    }),
    ..kind(Generation::Spec)
};
static ADMISSION_POLICY: Kind = Kind {
    // `SetDefaults_ValidatingAdmissionPolicySpec` and `SetDefaults_MatchResources`.
    defaults: Some(|o| {
        // A binding names its policy; a policy has a failure policy.
        let binding = o
            .get("kind")
            .and_then(Value::as_str)
            .is_some_and(|k| k.ends_with("Binding"));
        if let Some(spec) = o
            .get_mut("spec")
            .filter(|s| !binding && s.is_object() && s.get("policyName").is_none())
        {
            crate::registry::defaults::set_default(spec, "/failurePolicy", json!("Fail"));
        }
        for ptr in ["/spec/matchConstraints", "/spec/matchResources"] {
            let Some(m) = o.pointer_mut(ptr).filter(|m| m.is_object()) else {
                continue;
            };
            crate::registry::defaults::set_default(m, "/matchPolicy", json!("Equivalent"));
            crate::registry::defaults::set_default(m, "/namespaceSelector", json!({}));
            crate::registry::defaults::set_default(m, "/objectSelector", json!({}));
            for rules in ["resourceRules", "excludeResourceRules"] {
                if let Some(list) = m.get_mut(rules).and_then(Value::as_array_mut) {
                    for r in list.iter_mut().filter(|r| r.is_object()) {
                        crate::registry::defaults::set_default(r, "/scope", json!("*"));
                    }
                }
            }
        }
    }),
    ..kind(Generation::Spec)
};
static PRIORITY_LEVEL: Kind = Kind {
    // `SetDefaults_PriorityLevelConfiguration` (v1): shares 30, lendable 0, queuing
    // 64 queues, hand size 8, queue length 50; an exempt level's shares and lendable 0.
    defaults: Some(|o| {
        if let Some(l) = o.pointer_mut("/spec/limited").filter(|l| l.is_object()) {
            crate::registry::defaults::set_default(l, "/nominalConcurrencyShares", json!(30));
            crate::registry::defaults::set_default(l, "/lendablePercent", json!(0));
            if let Some(q) = l
                .pointer_mut("/limitResponse/queuing")
                .filter(|q| q.is_object())
            {
                for (k, d) in [("queues", 64), ("handSize", 8), ("queueLengthLimit", 50)] {
                    if q.get(k).and_then(Value::as_i64).unwrap_or(0) == 0 {
                        q[k] = json!(d);
                    }
                }
            }
        }
        if let Some(e) = o.pointer_mut("/spec/exempt").filter(|e| e.is_object()) {
            crate::registry::defaults::set_default(e, "/nominalConcurrencyShares", json!(0));
            crate::registry::defaults::set_default(e, "/lendablePercent", json!(0));
        }
    }),
    ..kind(Generation::Spec)
};
static CSI_DRIVER: Kind = Kind {
    // `SetDefaults_CSIDriver`.
    defaults: Some(|o| {
        let Some(spec) = o.get_mut("spec").filter(|s| s.is_object()) else {
            return;
        };
        for (k, d) in [
            ("attachRequired", json!(true)),
            ("podInfoOnMount", json!(false)),
            ("storageCapacity", json!(false)),
            ("fsGroupPolicy", json!("ReadWriteOnceWithFSType")),
            ("requiresRepublish", json!(false)),
            ("seLinuxMount", json!(false)),
        ] {
            crate::registry::defaults::set_default(spec, &format!("/{k}"), d);
        }
        if spec
            .get("volumeLifecycleModes")
            .and_then(Value::as_array)
            .is_none_or(|m| m.is_empty())
        {
            spec["volumeLifecycleModes"] = json!(["Persistent"]);
        }
    }),
    ..kind(Generation::None)
};
static PRIORITY_CLASS: Kind = Kind {
    defaults: Some(|o| {
        crate::registry::defaults::set_default(
            o,
            "/preemptionPolicy",
            json!("PreemptLowerPriority"),
        )
    }),
    ..kind(Generation::CreateOnly)
};
/// What a write to `/status` takes from the request's metadata: each kind's status
/// strategy (`PrepareForUpdate`) in kube-apiserver v1.36. The server-owned fields (uid,
/// creation and deletion timestamps, generation, ...) come from storage on every write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatusMetadata {
    /// The request's metadata except these fields, kept as stored; a change to the rest
    /// is kept and owned by the writer (most long-standing kinds: only the spec is reset).
    Kept(&'static [&'static str]),
    /// `ResetObjectMetaForStatus`: labels, annotations, finalizers and owner references
    /// kept as stored; none of the metadata is owned by the writer.
    Reset,
    /// The stored metadata: only `.status` comes from the request (custom resources,
    /// flow control kinds).
    Stored,
}

/// The fields `ResetObjectMetaForStatus` keeps as stored (besides the server-owned ones).
const RESET_FOR_STATUS: &[&str] = &["labels", "annotations", "finalizers", "ownerReferences"];

impl StatusMetadata {
    /// The metadata fields kept as stored, besides the server-owned ones (`None`: all).
    pub fn reset(self) -> Option<&'static [&'static str]> {
        match self {
            Self::Kept(reset) => Some(reset),
            Self::Reset => Some(RESET_FOR_STATUS),
            Self::Stored => None,
        }
    }

    /// Whether a `/status` write owns a change at `path` (its `GetResetFields`): status,
    /// and the metadata the kind keeps from the request.
    pub fn owns(self, path: &[crate::registry::fields::Step]) -> bool {
        use crate::registry::fields::Step;
        match path.first() {
            Some(Step::Field(f)) if f == "status" => true,
            Some(Step::Field(f)) if f == "metadata" => match self {
                Self::Kept(reset) => {
                    !matches!(path.get(1), Some(Step::Field(m)) if reset.contains(&m.as_str()))
                }
                Self::Reset | Self::Stored => false,
            },
            _ => false,
        }
    }
}

/// How a `/status` write of a resource treats metadata.
pub fn status_metadata(def: &ResourceDef) -> StatusMetadata {
    if def.crd.is_some() {
        return StatusMetadata::Stored;
    }
    match (def.group.as_str(), def.plural.as_str()) {
        // Old kubelets corrupted owner references through pods/status.
        ("", "pods") => StatusMetadata::Kept(&["ownerReferences"]),
        ("apps", "deployments") => StatusMetadata::Kept(&["labels"]),
        ("flowcontrol.apiserver.k8s.io", _) => StatusMetadata::Stored,
        ("admissionregistration.k8s.io", "validatingadmissionpolicies")
        | ("apiregistration.k8s.io", "apiservices")
        | ("certificates.k8s.io", "podcertificaterequests")
        | ("internal.apiserver.k8s.io", "storageversions")
        | ("networking.k8s.io", "servicecidrs")
        | (
            "resource.k8s.io",
            "resourceclaims" | "devicetaintrules" | "resourcepoolstatusrequests",
        )
        | ("scheduling.k8s.io", "podgroups")
        | ("storage.k8s.io", "volumeattachments")
        | ("storagemigration.k8s.io", "storageversionmigrations") => StatusMetadata::Reset,
        // CustomResourceDefinitions too: their status strategy resets metadata from the
        // new object itself (kubernetes#137681), so changes are kept.
        _ => StatusMetadata::Kept(&[]),
    }
}

/// Go's optional top-level lists without `omitempty`, by resource: an empty one is kept
/// when decoded (and owned in managedFields), and storage turns it into `null`
/// (`defaults::null_when_empty`, on every create and update of the resource).
pub fn not_omitempty(group: &str, plural: &str) -> &'static [&'static str] {
    match (group, plural) {
        ("discovery.k8s.io", "endpointslices") => &["endpoints", "ports"],
        ("rbac.authorization.k8s.io", "roles" | "clusterroles") => &["rules"],
        _ => &[],
    }
}

// Their lists Go writes even when empty: `not_omitempty`.
static ENDPOINT_SLICE: Kind = Kind {
    // `SetDefaults_EndpointPort`: a port's name is "" and its protocol TCP.
    defaults: Some(|o| {
        if let Some(ports) = o.get_mut("ports").and_then(Value::as_array_mut) {
            for p in ports.iter_mut().filter(|p| p.is_object()) {
                crate::registry::defaults::set_default(p, "/name", json!(""));
                crate::registry::defaults::set_default(p, "/protocol", json!("TCP"));
            }
        }
    }),
    ..kind(Generation::SpecOrLabels)
};
static ENDPOINTS: Kind = Kind {
    // `SetDefaults_Endpoints`: a port's protocol is TCP.
    defaults: Some(|o| {
        if let Some(subsets) = o.get_mut("subsets").and_then(Value::as_array_mut) {
            for ss in subsets {
                if let Some(ports) = ss.get_mut("ports").and_then(Value::as_array_mut) {
                    for p in ports.iter_mut().filter(|p| p.is_object()) {
                        crate::registry::defaults::set_default(p, "/protocol", json!("TCP"));
                    }
                }
            }
        }
    }),
    ..kind(Generation::None)
};
static ROLE: Kind = kind(Generation::None);
static STORAGE_CLASS: Kind = Kind {
    defaults: Some(|o| {
        crate::registry::defaults::set_default(o, "/reclaimPolicy", json!("Delete"));
        crate::registry::defaults::set_default(o, "/volumeBindingMode", json!("Immediate"));
    }),
    ..kind(Generation::None)
};
static NETWORK_POLICY: Kind = Kind {
    defaults: Some(crate::registry::defaults::network_policy),
    ..kind(Generation::Spec)
};
static FLOW_SCHEMA: Kind = Kind {
    defaults: Some(|o| {
        if o.pointer("/spec/matchingPrecedence").is_none_or(|p| p == 0) {
            o["spec"]["matchingPrecedence"] = json!(1000);
        }
    }),
    ..kind(Generation::Spec)
};
static LIMIT_RANGE: Kind = Kind {
    defaults: Some(crate::registry::defaults::limit_range),
    ..kind(Generation::None)
};
static NODE: Kind = Kind {
    // A node's status is set by whoever registers it.
    status: Some(|o| o.get("status").cloned().unwrap_or_else(|| json!({}))),
    ..kind(Generation::None)
};
static POD: Kind = Kind {
    status: Some(pod_status),
    defaults: Some(crate::registry::defaults::pod),
    create: Some(pod_admission),
    ..kind(Generation::Spec)
};
static POD_TEMPLATE: Kind = Kind {
    defaults: Some(|o| crate::registry::defaults::pod_template(o, "/template")),
    ..kind(Generation::Spec)
};
static REPLICATION_CONTROLLER: Kind = Kind {
    status: Some(|_| json!({"replicas": 0})),
    defaults: Some(crate::registry::defaults::replication_controller),
    ..kind(Generation::Spec)
};
static SERVICE: Kind = Kind {
    status: Some(|_| json!({"loadBalancer": {}})),
    defaults: Some(crate::registry::defaults::service),
    create: Some(service_allocate),
    update: Some(service_update),
    ..kind(Generation::None)
};
static NAMESPACE: Kind = Kind {
    status: Some(|_| json!({"phase": "Active"})),
    defaults: Some(crate::registry::defaults::namespace_label),
    canonical: Some(crate::registry::defaults::namespace_label),
    create: Some(|o| {
        // The `kubernetes` finalizer is required on create.
        let fins = o
            .pointer_mut("/spec/finalizers")
            .and_then(Value::as_array_mut);
        match fins {
            Some(f) if f.iter().any(|x| x == "kubernetes") => {}
            Some(f) => f.push(json!("kubernetes")),
            None => o["spec"] = json!({"finalizers": ["kubernetes"]}),
        }
    }),
    ..kind(Generation::None)
};
static SECRET: Kind = Kind {
    defaults: Some(crate::registry::defaults::secret),
    ..kind(Generation::None)
};
static PVC: Kind = Kind {
    status: Some(|_| json!({"phase": "Pending"})),
    defaults: Some(|o| {
        crate::registry::defaults::set_default(o, "/spec/volumeMode", json!("Filesystem"))
    }),
    // The StorageObjectInUseProtection admission plugin.
    create: Some(|o| add_finalizer(o, "kubernetes.io/pvc-protection")),
    ..kind(Generation::None)
};
static PV: Kind = Kind {
    status: Some(
        |_| json!({"phase": "Pending", "lastPhaseTransitionTime": crate::registry::meta::now_time()}),
    ),
    defaults: Some(|o| {
        crate::registry::defaults::set_default(
            o,
            "/spec/persistentVolumeReclaimPolicy",
            json!("Retain"),
        );
        crate::registry::defaults::set_default(o, "/spec/volumeMode", json!("Filesystem"));
        if let Some(h) = o.pointer_mut("/spec/hostPath").filter(|h| h.is_object()) {
            crate::registry::defaults::set_default(h, "/type", json!(""));
        }
    }),
    create: Some(|o| add_finalizer(o, "kubernetes.io/pv-protection")),
    ..kind(Generation::None)
};
static DEPLOYMENT: Kind = Kind {
    status: Some(|_| json!({})),
    defaults: Some(|o| {
        crate::registry::defaults::set_default(o, "/spec/replicas", json!(1));
        crate::registry::defaults::set_default(o, "/spec/strategy/type", json!("RollingUpdate"));
        if o.pointer("/spec/strategy/type") == Some(&json!("RollingUpdate")) {
            crate::registry::defaults::set_default(
                o,
                "/spec/strategy/rollingUpdate/maxUnavailable",
                json!("25%"),
            );
            crate::registry::defaults::set_default(
                o,
                "/spec/strategy/rollingUpdate/maxSurge",
                json!("25%"),
            );
        }
        crate::registry::defaults::set_default(o, "/spec/revisionHistoryLimit", json!(10));
        crate::registry::defaults::set_default(o, "/spec/progressDeadlineSeconds", json!(600));
        crate::registry::defaults::pod_template(o, "/spec/template");
    }),
    ..kind(Generation::SpecOrAnnotations)
};
static REPLICA_SET: Kind = Kind {
    status: Some(|_| json!({"replicas": 0})),
    defaults: Some(|o| {
        crate::registry::defaults::set_default(o, "/spec/replicas", json!(1));
        crate::registry::defaults::pod_template(o, "/spec/template");
    }),
    ..kind(Generation::Spec)
};
static STATEFUL_SET: Kind = Kind {
    status: Some(|_| json!({"replicas": 0, "availableReplicas": 0})),
    defaults: Some(|o| {
        crate::registry::defaults::set_default(o, "/spec/replicas", json!(1));
        crate::registry::defaults::set_default(
            o,
            "/spec/podManagementPolicy",
            json!("OrderedReady"),
        );
        crate::registry::defaults::set_default(
            o,
            "/spec/updateStrategy/type",
            json!("RollingUpdate"),
        );
        if o.pointer("/spec/updateStrategy/type") == Some(&json!("RollingUpdate")) {
            crate::registry::defaults::set_default(
                o,
                "/spec/updateStrategy/rollingUpdate/partition",
                json!(0),
            );
        }
        crate::registry::defaults::set_default(o, "/spec/revisionHistoryLimit", json!(10));
        crate::registry::defaults::set_default(
            o,
            "/spec/persistentVolumeClaimRetentionPolicy",
            json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
        );
        crate::registry::defaults::pod_template(o, "/spec/template");
    }),
    ..kind(Generation::Spec)
};
static DAEMON_SET: Kind = Kind {
    status: Some(
        |_| json!({"currentNumberScheduled": 0, "numberMisscheduled": 0, "desiredNumberScheduled": 0, "numberReady": 0}),
    ),
    defaults: Some(|o| {
        crate::registry::defaults::set_default(
            o,
            "/spec/updateStrategy/type",
            json!("RollingUpdate"),
        );
        if o.pointer("/spec/updateStrategy/type") == Some(&json!("RollingUpdate")) {
            crate::registry::defaults::set_default(
                o,
                "/spec/updateStrategy/rollingUpdate/maxUnavailable",
                json!(1),
            );
            crate::registry::defaults::set_default(
                o,
                "/spec/updateStrategy/rollingUpdate/maxSurge",
                json!(0),
            );
        }
        crate::registry::defaults::set_default(o, "/spec/revisionHistoryLimit", json!(10));
        crate::registry::defaults::pod_template(o, "/spec/template");
        // The template generation, kept in an annotation by apps/v1.
        crate::registry::defaults::set_default(
            o,
            "/metadata/annotations/deprecated.daemonset.template.generation",
            json!("1"),
        );
    }),
    update: Some(|old, new| {
        if old.pointer("/spec/template") != new.pointer("/spec/template") {
            let g = old
                .pointer("/metadata/annotations/deprecated.daemonset.template.generation")
                .and_then(Value::as_str)
                .and_then(|g| g.parse::<i64>().ok())
                .unwrap_or(0);
            let ann = meta_mut(new)
                .entry("annotations")
                .or_insert_with(|| json!({}));
            if let Some(a) = ann.as_object_mut() {
                a.insert(
                    "deprecated.daemonset.template.generation".into(),
                    json!((g + 1).to_string()),
                );
            }
        }
    }),
    ..kind(Generation::Spec)
};
static JOB: Kind = Kind {
    status: Some(|_| json!({})),
    defaults: Some(|o| crate::registry::defaults::job_spec(o, "/spec")),
    create: Some(job_selector),
    ..kind(Generation::Spec)
};
static CRON_JOB: Kind = Kind {
    status: Some(|_| json!({})),
    defaults: Some(|o| {
        crate::registry::defaults::set_default(o, "/spec/concurrencyPolicy", json!("Allow"));
        crate::registry::defaults::set_default(o, "/spec/suspend", json!(false));
        crate::registry::defaults::set_default(o, "/spec/successfulJobsHistoryLimit", json!(3));
        crate::registry::defaults::set_default(o, "/spec/failedJobsHistoryLimit", json!(1));
        // The job template's pod template only (Job defaults apply when a Job is made).
        crate::registry::defaults::pod_template(o, "/spec/jobTemplate/spec/template");
    }),
    ..kind(Generation::Spec)
};
static HPA: Kind = Kind {
    status: Some(|_| json!({"desiredReplicas": 0, "currentMetrics": null})),
    defaults: Some(|o| {
        crate::registry::defaults::set_default(o, "/spec/minReplicas", json!(1));
        if o.get("apiVersion").and_then(Value::as_str) == Some("autoscaling/v1") {
            // What v1 shows of v2's default metric (a CPU target of 80%), when neither
            // the CPU field nor the other-metrics annotation sets one.
            let others = o
                .pointer("/metadata/annotations/autoscaling.alpha.kubernetes.io~1metrics")
                .and_then(Value::as_str)
                .and_then(|a| serde_json::from_str::<Vec<Value>>(a).ok())
                .is_some_and(|m| !m.is_empty());
            if !others {
                crate::registry::defaults::set_default(
                    o,
                    "/spec/targetCPUUtilizationPercentage",
                    json!(80),
                );
            }
            return;
        }
        if o.pointer("/spec/metrics")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty)
        {
            o["spec"]["metrics"] = json!([{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 80}}}]);
        }
        // A behavior that is set gets every rule it leaves out (autoscaling/v2's
        // SetDefaults_HorizontalPodAutoscalerBehavior): field by field, per direction.
        if let Some(b) = o
            .pointer_mut("/spec/behavior")
            .and_then(Value::as_object_mut)
        {
            let defaults = [
                (
                    "scaleUp",
                    json!({"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                        "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15},
                            {"type": "Percent", "value": 100, "periodSeconds": 15}]}),
                ),
                (
                    "scaleDown",
                    json!({"selectPolicy": "Max",
                        "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}),
                ),
            ];
            for (direction, default) in defaults {
                let rules = b.entry(direction).or_insert_with(|| json!({}));
                if rules.is_null() {
                    *rules = json!({});
                }
                if let (Some(r), Some(d)) = (rules.as_object_mut(), default.as_object()) {
                    for (k, v) in d {
                        if r.get(k).is_none_or(Value::is_null) {
                            r.insert(k.clone(), v.clone());
                        }
                    }
                }
            }
        }
    }),
    ..kind(Generation::None)
};
static PDB: Kind = Kind {
    status: Some(
        |_| json!({"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}),
    ),
    ..kind(Generation::Spec)
};
static INGRESS: Kind = Kind {
    status: Some(|_| json!({"loadBalancer": {}})),
    ..kind(Generation::Spec)
};
static VOLUME_ATTACHMENT: Kind = Kind {
    status: Some(|_| json!({"attached": false})),
    ..kind(Generation::None)
};
static VOLUME_ATTRIBUTES_CLASS: Kind = Kind {
    // The StorageObjectInUseProtection admission plugin.
    create: Some(|o| add_finalizer(o, "kubernetes.io/vac-protection")),
    ..kind(Generation::None)
};
static DEVICE_CLASS_OR_SLICE: Kind = Kind {
    defaults: Some(crate::registry::defaults::device_class_or_slice),
    ..kind(Generation::Spec)
};
static RESOURCE_CLAIM: Kind = Kind {
    // `PrepareForCreate` resets the status; Go writes the empty struct.
    status: Some(|_| json!({})),
    defaults: Some(|o| {
        if let Some(spec) = o.get_mut("spec") {
            crate::registry::defaults::resource_claim_spec(spec);
        }
    }),
    ..kind(Generation::None)
};
static RESOURCE_CLAIM_TEMPLATE: Kind = Kind {
    defaults: Some(|o| {
        if let Some(spec) = o.pointer_mut("/spec/spec") {
            crate::registry::defaults::resource_claim_spec(spec);
        }
    }),
    ..kind(Generation::None)
};
static CRD: Kind = Kind {
    status: Some(crd_initial_status),
    defaults: Some(crate::registry::defaults::crd),
    ..kind(Generation::Spec)
};

fn add_finalizer(obj: &mut Value, f: &str) {
    let m = meta_mut(obj);
    match m.get_mut("finalizers").and_then(Value::as_array_mut) {
        Some(list) if list.iter().any(|x| x == f) => {}
        Some(list) => list.push(json!(f)),
        None => {
            m.insert("finalizers".into(), json!([f]));
        }
    }
}

/// Custom resources: generation on any change outside metadata (and status, with a status
/// subresource); the status of a new object comes from the client only without one.
pub struct CustomResource;

static CUSTOM_RESOURCE: CustomResource = CustomResource;

impl Strategy for CustomResource {
    fn generation(&self) -> Generation {
        Generation::Spec
    }
    /// The schema's defaults, applied when the object is decoded (so stored, and owned by
    /// the writer).
    fn default(&self, def: &ResourceDef, obj: &mut Value) {
        if let Some(crd) = &def.crd {
            crd.apply_defaults(obj, &def.version);
        }
    }
}

/// A Service's create-time fields besides its allocations (which
/// [`crate::registry::service_alloc`] makes, with the other Services in view): the IP
/// families of a Service that has cluster IPs, and `clusterIPs` following `clusterIP`.
fn service_allocate(obj: &mut Value) {
    service_cluster_ips(obj);
    if !crate::registry::service_alloc::needs_cluster_ip(obj) {
        // Validation refuses the cluster IPs of an ExternalName Service.
        return;
    }
    crate::registry::defaults::set_default(obj, "/spec/ipFamilies", json!(["IPv4"]));
    crate::registry::defaults::set_default(obj, "/spec/ipFamilyPolicy", json!("SingleStack"));
}

/// `clusterIPs` following a `clusterIP` set alone.
fn service_cluster_ips(obj: &mut Value) {
    if obj
        .pointer("/spec/clusterIPs")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
        && let Some(ip) = obj.pointer("/spec/clusterIP").cloned()
        && ip != ""
    {
        obj["spec"]["clusterIPs"] = json!([ip]);
    }
}

/// A Service update as kube-apiserver's service storage prepares it: allocated values
/// the request left out are kept (`patchAllocatedValues`), and those of a type that no
/// longer needs them are dropped when the request kept them unchanged
/// (`dropTypeDependentFields`). New values for a type that now needs them are the
/// allocator's ([`crate::registry::service_alloc`]).
fn service_update(old: &Value, new: &mut Value) {
    let spec = |o: &Value, k: &str| o.pointer(&format!("/spec/{k}")).cloned();
    let unset = |o: &Value, k: &str| {
        o.pointer(&format!("/spec/{k}")).is_none_or(|v| {
            v.is_null() || v == "" || v == 0 || v.as_array().is_some_and(Vec::is_empty)
        })
    };
    if crate::registry::service_alloc::needs_cluster_ip(old)
        && crate::registry::service_alloc::needs_cluster_ip(new)
    {
        for k in ["clusterIP", "clusterIPs"] {
            if unset(new, k)
                && let Some(v) = spec(old, k)
            {
                new["spec"][k] = v;
            }
        }
    }
    if crate::registry::service_alloc::needs_health_check(old)
        && crate::registry::service_alloc::needs_health_check(new)
        && unset(new, "healthCheckNodePort")
        && let Some(v) = spec(old, "healthCheckNodePort")
    {
        new["spec"]["healthCheckNodePort"] = v;
    }
    if crate::registry::service_alloc::allocates_node_ports(old)
        && crate::registry::service_alloc::allocates_node_ports(new)
        && let Some(old_ports) = old.pointer("/spec/ports").and_then(Value::as_array)
    {
        let node_port = |p: &Value| {
            p.get("nodePort")
                .and_then(Value::as_u64)
                .filter(|n| *n != 0)
        };
        let new_ports: Vec<u64> = new
            .pointer("/spec/ports")
            .and_then(Value::as_array)
            .map(|ps| ps.iter().filter_map(node_port).collect())
            .unwrap_or_default();
        let by_name: Vec<(Value, Option<u64>)> = old_ports
            .iter()
            .map(|p| (p.get("name").cloned().unwrap_or(json!("")), node_port(p)))
            .collect();
        let used: Vec<u64> = old_ports
            .iter()
            .filter_map(node_port)
            .filter(|n| new_ports.contains(n))
            .collect();
        if let Some(ports) = new.pointer_mut("/spec/ports").and_then(Value::as_array_mut) {
            for p in ports.iter_mut() {
                if node_port(p).is_none() {
                    let name = p.get("name").cloned().unwrap_or(json!(""));
                    if let Some(n) = by_name
                        .iter()
                        .rev()
                        .find(|(k, _)| *k == name)
                        .and_then(|(_, n)| *n)
                        .filter(|n| !used.contains(n))
                    {
                        p["nodePort"] = json!(n);
                    }
                }
            }
        }
    }
    // `normalizeClusterIPs`: a changed clusterIP with clusterIPs left as they were
    // changes the primary one.
    if spec(new, "clusterIP") != spec(old, "clusterIP")
        && spec(new, "clusterIPs") == spec(old, "clusterIPs")
        && let Some(ip) = spec(new, "clusterIP").filter(|ip| ip != "")
        && let Some(first) = new.pointer_mut("/spec/clusterIPs/0")
    {
        *first = ip;
    }
    // Dropped: what the old type needed and the new one does not, left as it was.
    if crate::registry::service_alloc::needs_cluster_ip(old)
        && !crate::registry::service_alloc::needs_cluster_ip(new)
        && spec(old, "clusterIPs") == spec(new, "clusterIPs")
        && let Some(s) = new.get_mut("spec").and_then(Value::as_object_mut)
    {
        for k in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
            s.remove(k);
        }
    }
    let node_ports = |o: &Value| -> Vec<Option<Value>> {
        o.pointer("/spec/ports")
            .and_then(Value::as_array)
            .map(|ps| ps.iter().map(|p| p.get("nodePort").cloned()).collect())
            .unwrap_or_default()
    };
    if crate::registry::service_alloc::allocates_node_ports(old)
        && !crate::registry::service_alloc::allocates_node_ports(new)
        && node_ports(old) == node_ports(new)
        && let Some(ports) = new.pointer_mut("/spec/ports").and_then(Value::as_array_mut)
    {
        for p in ports.iter_mut() {
            if let Some(p) = p.as_object_mut() {
                p.remove("nodePort");
            }
        }
    }
    if crate::registry::service_alloc::needs_health_check(old)
        && !crate::registry::service_alloc::needs_health_check(new)
        && spec(old, "healthCheckNodePort") == spec(new, "healthCheckNodePort")
        && let Some(s) = new.get_mut("spec").and_then(Value::as_object_mut)
    {
        s.remove("healthCheckNodePort");
    }
    // What the new type needs besides its allocations (made by the allocator).
    service_allocate(new);
}

/// A Job's generated selector: its pods carry its uid and name.
fn job_selector(obj: &mut Value) {
    if obj.pointer("/spec/manualSelector") == Some(&json!(true)) {
        return;
    }
    let (Some(uid), Some(name)) = (
        meta_str(obj, "uid").map(str::to_string),
        meta_str(obj, "name").map(str::to_string),
    ) else {
        return;
    };
    let labels = [
        ("batch.kubernetes.io/controller-uid", uid.as_str()),
        ("batch.kubernetes.io/job-name", name.as_str()),
        ("controller-uid", uid.as_str()),
        ("job-name", name.as_str()),
    ];
    for (k, v) in labels {
        crate::registry::defaults::set_default(
            obj,
            &format!("/spec/template/metadata/labels/{}", k.replace('/', "~1")),
            json!(v),
        );
    }
    crate::registry::defaults::set_default(
        obj,
        "/spec/selector",
        json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}),
    );
    if obj
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .is_none_or(Map::is_empty)
        && let Some(l) = obj.pointer("/spec/template/metadata/labels").cloned()
    {
        meta_mut(obj).insert("labels".into(), l);
    }
}

/// What admission plugins add to a new pod: the ServiceAccount, priority, and the
/// default not-ready/unreachable tolerations. (The ServiceAccount token volume is not
/// added: the embedded server runs no pods.)
fn pod_admission(obj: &mut Value) {
    crate::registry::defaults::set_default(obj, "/spec/serviceAccountName", json!("default"));
    if let Some(sa) = obj.pointer("/spec/serviceAccountName").cloned() {
        crate::registry::defaults::set_default(obj, "/spec/serviceAccount", sa);
    }
    crate::registry::defaults::set_default(obj, "/spec/priority", json!(0));
    crate::registry::defaults::set_default(
        obj,
        "/spec/preemptionPolicy",
        json!("PreemptLowerPriority"),
    );
    let has = |o: &Value, key: &str| {
        o.pointer("/spec/tolerations")
            .and_then(Value::as_array)
            .is_some_and(|t| t.iter().any(|t| t.get("key") == Some(&json!(key))))
    };
    for key in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ] {
        if has(obj, key) {
            continue;
        }
        let t = json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300});
        match obj
            .pointer_mut("/spec/tolerations")
            .and_then(Value::as_array_mut)
        {
            Some(list) => list.push(t),
            None => obj["spec"]["tolerations"] = json!([t]),
        }
    }
}

/// A new pod's status: `Pending` and its QoS class.
fn pod_status(obj: &Value) -> Value {
    json!({"phase": "Pending", "qosClass": qos_class(obj)})
}

/// The QoS class of a pod, as kube-apiserver computes it: BestEffort without positive CPU
/// or memory requests and limits; Guaranteed when every container limits both and the
/// pod's summed requests equal its summed limits; else Burstable. Amounts compare as
/// quantities (`1` equals `1000m`).
fn qos_class(obj: &Value) -> &'static str {
    use kubewright_core::quantity::Quantity;
    use std::collections::BTreeMap;
    let containers: Vec<&Value> = ["containers", "initContainers"]
        .iter()
        .filter_map(|l| obj.pointer(&format!("/spec/{l}")).and_then(Value::as_array))
        .flatten()
        .collect();
    let zero = Quantity::default();
    // Sums in milli-units (Go adds the quantities).
    let mut requests: BTreeMap<&str, i128> = BTreeMap::new();
    let mut limits: BTreeMap<&str, i128> = BTreeMap::new();
    let mut guaranteed = true;
    for c in &containers {
        let positive = |kind: &str| -> Vec<(&'static str, i128)> {
            ["cpu", "memory"]
                .into_iter()
                .filter_map(|res| {
                    let q: Quantity = c
                        .pointer(&format!("/resources/{kind}/{res}"))?
                        .as_str()?
                        .parse()
                        .ok()?;
                    (q > zero).then(|| (res, i128::from(q.as_milli().unwrap_or(i64::MAX))))
                })
                .collect()
        };
        for (res, m) in positive("requests") {
            *requests.entry(res).or_default() += m;
        }
        let found = positive("limits");
        if found.len() < 2 {
            guaranteed = false;
        }
        for (res, m) in found {
            *limits.entry(res).or_default() += m;
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return "BestEffort";
    }
    if guaranteed
        && requests.iter().all(|(k, v)| limits.get(k) == Some(v))
        && requests.len() == limits.len()
    {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// A new CRD's status: no conditions and no accepted names yet (the CRD controllers set
/// them a moment later), and the storage version recorded.
fn crd_initial_status(obj: &Value) -> Value {
    let stored: Vec<Value> = obj
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(|vs| {
            vs.iter()
                .filter(|v| v.get("storage") == Some(&json!(true)))
                .filter_map(|v| v.get("name").cloned())
                .collect()
        })
        .unwrap_or_default();
    json!({"conditions": null, "acceptedNames": {"plural": "", "kind": ""}, "storedVersions": stored})
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::registry::Registry;

    fn def(group: &str, version: &str, plural: &str) -> std::sync::Arc<ResourceDef> {
        Registry::new().get(group, version, plural).unwrap()
    }

    #[test]
    fn generation_only_for_kinds_that_track_it() {
        for (g, v, p, want) in [
            ("", "v1", "configmaps", Generation::None),
            ("", "v1", "namespaces", Generation::None),
            ("", "v1", "secrets", Generation::None),
            ("", "v1", "serviceaccounts", Generation::None),
            ("", "v1", "services", Generation::None),
            ("", "v1", "pods", Generation::Spec),
            ("apps", "v1", "deployments", Generation::SpecOrAnnotations),
            ("apps", "v1", "statefulsets", Generation::Spec),
            ("batch", "v1", "cronjobs", Generation::Spec),
            (
                "networking.k8s.io",
                "v1",
                "networkpolicies",
                Generation::Spec,
            ),
            (
                "discovery.k8s.io",
                "v1",
                "endpointslices",
                Generation::SpecOrLabels,
            ),
            (
                "scheduling.k8s.io",
                "v1",
                "priorityclasses",
                Generation::CreateOnly,
            ),
            (
                "autoscaling",
                "v2",
                "horizontalpodautoscalers",
                Generation::None,
            ),
            ("rbac.authorization.k8s.io", "v1", "roles", Generation::None),
        ] {
            assert_eq!(for_def(&def(g, v, p)).generation(), want, "{g}/{p}");
        }
        let cm = def("", "v1", "configmaps");
        let mut obj = json!({"metadata": {"name": "x"}, "data": {}});
        for_def(&cm).prepare_for_create(&cm, &mut obj);
        assert!(obj.pointer("/metadata/generation").is_none());
        let d = def("apps", "v1", "deployments");
        let mut obj = json!({"metadata": {"name": "x"}, "spec": {}, "status": {"replicas": 3}});
        for_def(&d).prepare_for_create(&d, &mut obj);
        assert_eq!(obj["metadata"]["generation"], 1);
        assert_eq!(obj["status"], json!({}));
        // Annotations bump a Deployment's generation, labels do not.
        let old = obj.clone();
        let mut new = old.clone();
        new["metadata"]["labels"] = json!({"a": "b"});
        for_def(&d).prepare_for_update(&d, &old, &mut new, None);
        assert_eq!(new["metadata"]["generation"], 1);
        new["metadata"]["annotations"] = json!({"a": "b"});
        for_def(&d).prepare_for_update(&d, &old, &mut new, None);
        assert_eq!(new["metadata"]["generation"], 2);
    }

    #[test]
    fn pod_template_defaults() {
        let d = def("apps", "v1", "deployments");
        let mut obj = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "a", "image": "nginx"}, {"name": "b", "image": "r.io:5000/x:1.2"},
            {"name": "c", "image": "x@sha256:00", "livenessProbe": {"httpGet": {"port": 80}}}],
            "volumes": [{"name": "v"}, {"name": "s", "secret": {"secretName": "s"}}]}}}});
        for_def(&d).default(&d, &mut obj);
        let spec = &obj["spec"]["template"]["spec"];
        assert_eq!(spec["restartPolicy"], "Always");
        assert_eq!(spec["securityContext"], json!({}));
        assert_eq!(spec["containers"][0]["imagePullPolicy"], "Always");
        assert_eq!(spec["containers"][1]["imagePullPolicy"], "IfNotPresent");
        assert_eq!(spec["containers"][2]["imagePullPolicy"], "IfNotPresent");
        assert_eq!(
            spec["containers"][2]["livenessProbe"],
            json!({"httpGet": {"port": 80, "path": "/", "scheme": "HTTP"}, "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3})
        );
        assert_eq!(spec["volumes"][0]["emptyDir"], json!({}));
        assert_eq!(spec["volumes"][1]["secret"]["defaultMode"], 420);
        assert_eq!(obj["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%");
    }

    #[test]
    fn secrets_merge_string_data_and_namespaces_get_their_label() {
        let s = def("", "v1", "secrets");
        let mut obj =
            json!({"metadata": {"name": "s"}, "data": {"a": "eA=="}, "stringData": {"b": "y"}});
        for_def(&s).default(&s, &mut obj);
        assert_eq!(
            obj,
            json!({"metadata": {"name": "s"}, "type": "Opaque", "data": {"a": "eA==", "b": "eQ=="}})
        );
        let ns = def("", "v1", "namespaces");
        let mut obj = json!({"metadata": {"name": "team"}});
        for_def(&ns).default(&ns, &mut obj);
        for_def(&ns).prepare_for_create(&ns, &mut obj);
        assert_eq!(
            obj["metadata"]["labels"],
            json!({"kubernetes.io/metadata.name": "team"})
        );
        assert_eq!(obj["spec"], json!({"finalizers": ["kubernetes"]}));
        assert_eq!(obj["status"], json!({"phase": "Active"}));
    }

    #[test]
    fn qos_classes() {
        let pod = |res: Value| json!({"spec": {"containers": [{"name": "c", "resources": res}]}});
        assert_eq!(qos_class(&pod(json!({}))), "BestEffort");
        assert_eq!(
            qos_class(&pod(
                json!({"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}})
            )),
            "Guaranteed"
        );
        assert_eq!(
            qos_class(&pod(json!({"requests": {"cpu": "1"}}))),
            "Burstable"
        );
        // Values, not strings; zero amounts count as none.
        assert_eq!(
            qos_class(&pod(
                json!({"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1000m", "memory": "1024Mi"}})
            )),
            "Guaranteed"
        );
        assert_eq!(
            qos_class(&pod(
                json!({"requests": {"cpu": "0"}, "limits": {"memory": "0"}})
            )),
            "BestEffort"
        );
    }
}
