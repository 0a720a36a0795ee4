//! The built-in kinds the embedded API server serves: their names, and the typed round
//! trip through the k8s-openapi type that normalises an incoming object (unknown fields
//! dropped, types checked), as kube-apiserver's decoding into its Go types does.
//!
//! A crate of its own so that the round trip's code, generic over every built-in type and
//! the largest part of the server's, compiles in parallel with the server
//! (`kubewright-apiserver`) rather than inside it.
//!
//! ```
//! let kinds = kubewright_builtins::builtin_kinds();
//! let pods = kinds.iter().find(|k| k.group.is_empty() && k.plural == "pods").unwrap();
//! assert!(pods.namespaced && (pods.has_status)());
//! let pod = (pods.normalize)(&serde_json::json!({
//!     "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}, "unknown": 1,
//! }))
//! .unwrap();
//! assert!(pod.get("unknown").is_none());
//! ```

pub use k8s_openapi;
use kubewright_core::{NamespaceScope, Scope};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// One built-in kind: its names and its typed round trip.
#[derive(Clone, Copy, Debug)]
pub struct BuiltinKind {
    /// API group (empty for the core group).
    pub group: &'static str,
    /// API version.
    pub version: &'static str,
    /// Kind.
    pub kind: &'static str,
    /// Resource (plural) name.
    pub plural: &'static str,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// Decodes a JSON object into the k8s-openapi type and encodes it again; the error
    /// is the decoder's message.
    pub normalize: fn(&Value) -> Result<Value, String>,
    /// Whether the type has a `status` (k8s-openapi's type keeps one).
    pub has_status: fn() -> bool,
}

fn normalize<K: DeserializeOwned + Serialize>(v: &Value) -> Result<Value, String> {
    let typed: K = serde_json::from_value(v.clone()).map_err(|e| e.to_string())?;
    serde_json::to_value(&typed).map_err(|e| e.to_string())
}

fn has_status<K: DeserializeOwned + Serialize>() -> bool {
    let probe = serde_json::json!({"metadata": {}, "status": {}});
    match serde_json::from_value::<K>(probe) {
        Ok(k) => serde_json::to_value(&k)
            .ok()
            .and_then(|v| v.get("status").cloned())
            .is_some(),
        Err(_) => false,
    }
}

fn kind<K>() -> BuiltinKind
where
    K: k8s_openapi::Resource + DeserializeOwned + Serialize,
    K::Scope: NamespaceScope,
{
    BuiltinKind {
        group: K::GROUP,
        version: K::VERSION,
        kind: K::KIND,
        plural: K::URL_PATH_SEGMENT,
        namespaced: <K::Scope as NamespaceScope>::SCOPE == Scope::Namespaced,
        normalize: normalize::<K>,
        has_status: has_status::<K>,
    }
}

macro_rules! kinds {
    ($($ty:path),* $(,)?) => {
        vec![$(kind::<$ty>()),*]
    };
}

/// Every built-in kind served (GA APIs and the API extension and aggregation types), in
/// the order of [`builtin_types!`].
pub fn builtin_kinds() -> Vec<BuiltinKind> {
    builtin_types!(kinds!())
}

/// Calls `$m!($($args)* <every served built-in type>)`: the one list of built-in kinds,
/// shared by the resource table ([`builtin_kinds`]) and the embedded server's OpenAPI
/// documents.
#[macro_export]
macro_rules! builtin_types {
    ($m:ident ! ( $($args:tt)* )) => {
        $m!($($args)*
            $crate::k8s_openapi::api::core::v1::ConfigMap,
            $crate::k8s_openapi::api::core::v1::Endpoints,
            $crate::k8s_openapi::api::core::v1::Event,
            $crate::k8s_openapi::api::core::v1::LimitRange,
            $crate::k8s_openapi::api::core::v1::Namespace,
            $crate::k8s_openapi::api::core::v1::Node,
            $crate::k8s_openapi::api::core::v1::PersistentVolume,
            $crate::k8s_openapi::api::core::v1::PersistentVolumeClaim,
            $crate::k8s_openapi::api::core::v1::Pod,
            $crate::k8s_openapi::api::core::v1::PodTemplate,
            $crate::k8s_openapi::api::core::v1::ReplicationController,
            $crate::k8s_openapi::api::core::v1::ResourceQuota,
            $crate::k8s_openapi::api::core::v1::Secret,
            $crate::k8s_openapi::api::core::v1::Service,
            $crate::k8s_openapi::api::core::v1::ServiceAccount,
            $crate::k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration,
            $crate::k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration,
            $crate::k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy,
            $crate::k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding,
            $crate::k8s_openapi::api::apps::v1::ControllerRevision,
            $crate::k8s_openapi::api::apps::v1::DaemonSet,
            $crate::k8s_openapi::api::apps::v1::Deployment,
            $crate::k8s_openapi::api::apps::v1::ReplicaSet,
            $crate::k8s_openapi::api::apps::v1::StatefulSet,
            $crate::k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler,
            $crate::k8s_openapi::api::batch::v1::CronJob,
            $crate::k8s_openapi::api::batch::v1::Job,
            $crate::k8s_openapi::api::certificates::v1::CertificateSigningRequest,
            $crate::k8s_openapi::api::coordination::v1::Lease,
            $crate::k8s_openapi::api::discovery::v1::EndpointSlice,
            $crate::k8s_openapi::api::events::v1::Event,
            $crate::k8s_openapi::api::flowcontrol::v1::FlowSchema,
            $crate::k8s_openapi::api::flowcontrol::v1::PriorityLevelConfiguration,
            $crate::k8s_openapi::api::networking::v1::Ingress,
            $crate::k8s_openapi::api::networking::v1::IngressClass,
            $crate::k8s_openapi::api::networking::v1::IPAddress,
            $crate::k8s_openapi::api::networking::v1::NetworkPolicy,
            $crate::k8s_openapi::api::networking::v1::ServiceCIDR,
            $crate::k8s_openapi::api::node::v1::RuntimeClass,
            $crate::k8s_openapi::api::policy::v1::PodDisruptionBudget,
            $crate::k8s_openapi::api::rbac::v1::ClusterRole,
            $crate::k8s_openapi::api::rbac::v1::ClusterRoleBinding,
            $crate::k8s_openapi::api::rbac::v1::Role,
            $crate::k8s_openapi::api::rbac::v1::RoleBinding,
            $crate::k8s_openapi::api::scheduling::v1::PriorityClass,
            $crate::k8s_openapi::api::storage::v1::CSIDriver,
            $crate::k8s_openapi::api::storage::v1::CSINode,
            $crate::k8s_openapi::api::storage::v1::CSIStorageCapacity,
            $crate::k8s_openapi::api::storage::v1::StorageClass,
            $crate::k8s_openapi::api::storage::v1::VolumeAttachment,
            $crate::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
            $crate::k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService,
        )
    };
}
