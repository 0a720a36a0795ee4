//! The resource table: every type the server serves, with scope, verbs and subresources.
//!
//! Built-in entries are derived from k8s-openapi's resource metadata (`k8s_openapi::Resource`
//! constants and scope markers); the list of types is the only input. Custom resources are
//! added and removed at run time as CRDs become Established or are deleted.

pub(crate) mod defaults;
pub(crate) mod events;
pub(crate) mod fields;
pub(crate) mod filter;
pub(crate) mod go_time;
pub(crate) mod meta;
mod omitempty;
pub(crate) mod resources;
pub(crate) mod schema;
pub mod strategy;
pub(crate) mod table;

use crate::crd::CrdSchema;
use crate::error::ApiError;
use crate::openapi::schemas::builtin_types;
use kubewright_core::{StatusCause, StatusDetails};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Normalises a JSON object through a typed round trip: unknown fields are dropped and
/// type errors reported. Returns the normalised value and the paths of dropped fields.
pub type Normalizer = fn(&Value) -> Result<Value, String>;

/// `/scale` subresource paths.
#[derive(Clone, Debug)]
pub struct ScalePaths {
    /// JSON path of the desired replicas (e.g. `.spec.replicas`).
    pub spec_replicas: String,
    /// JSON path of the observed replicas (e.g. `.status.replicas`).
    pub status_replicas: String,
    /// JSON path of the label selector string, if any.
    pub label_selector: Option<String>,
}

/// One served resource.
#[derive(Clone, Debug)]
pub struct ResourceDef {
    /// API group ("" for core).
    pub group: String,
    /// Served version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Plural (URL segment).
    pub plural: String,
    /// Singular name.
    pub singular: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Short names (`kubectl get po`).
    pub short_names: Vec<String>,
    /// Categories (`kubectl get all`).
    pub categories: Vec<String>,
    /// Has a `/status` subresource.
    pub has_status: bool,
    /// Has a `/scale` subresource.
    pub scale: Option<ScalePaths>,
    /// Built-in type (strategic merge patch allowed, unconditional update allowed).
    pub builtin: bool,
    /// PUT on a missing object creates it.
    pub create_on_update: bool,
    /// DELETE returns the object instead of a Status.
    pub delete_returns_object: bool,
    /// Typed normaliser for built-ins.
    pub normalizer: Option<Normalizer>,
    /// Schema and printer columns of a custom resource.
    pub crd: Option<Arc<CrdSchema>>,
    /// Verbs served.
    pub verbs: Vec<&'static str>,
}

impl ResourceDef {
    /// `v1` or `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
    /// `<plural>[.<group>]` as used in messages.
    pub fn group_resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }
    /// Whether the kind has a protobuf message (built-in kinds, not custom resources).
    pub fn protobuf(&self) -> bool {
        self.crd.is_none() && crate::protobuf::supports(&self.api_version(), &self.kind)
    }
    /// `<Kind>List`.
    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }
    /// Storage key shared by all versions of a resource.
    pub fn storage_key(&self) -> String {
        format!("{}/{}", self.group, self.plural)
    }
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

const ALL_VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

fn builtin<K>() -> ResourceDef
where
    K: k8s_openapi::Resource + DeserializeOwned + Serialize + 'static,
    K::Scope: kubewright_core::NamespaceScope,
{
    // Only the typed round trip depends on `K`: the rest is one non-generic function
    // rather than a copy per built-in kind.
    builtin_def(
        [K::GROUP, K::VERSION, K::KIND, K::URL_PATH_SEGMENT],
        <K::Scope as kubewright_core::NamespaceScope>::SCOPE == kubewright_core::Scope::Namespaced,
        normalize::<K>,
        has_status::<K>(),
    )
}

fn builtin_def(
    [group, version, kind, plural]: [&str; 4],
    namespaced: bool,
    normalizer: Normalizer,
    has_status: bool,
) -> ResourceDef {
    let plural = plural.to_string();
    let (short_names, categories) = names_for(group, &plural);
    let scale = if group == "apps"
        && matches!(
            plural.as_str(),
            "deployments" | "replicasets" | "statefulsets"
        )
        || (group.is_empty() && plural == "replicationcontrollers")
    {
        Some(ScalePaths {
            spec_replicas: ".spec.replicas".into(),
            status_replicas: ".status.replicas".into(),
            label_selector: Some(".status.selector".into()),
        })
    } else {
        None
    };
    let core = group.is_empty();
    ResourceDef {
        group: group.to_string(),
        version: version.to_string(),
        kind: kind.to_string(),
        singular: kind.to_lowercase(),
        plural: plural.clone(),
        namespaced,
        short_names,
        categories,
        has_status,
        scale,
        builtin: true,
        create_on_update: (core
            && matches!(
                plural.as_str(),
                "services" | "endpoints" | "nodes" | "limitranges"
            ))
            || (group == "coordination.k8s.io" && plural == "leases")
            || (group == "rbac.authorization.k8s.io"),
        delete_returns_object: (core
            && matches!(plural.as_str(), "pods" | "serviceaccounts" | "namespaces"))
            || (group == "storage.k8s.io" && plural == "storageclasses"),
        normalizer: Some(normalizer),
        crd: None,
        verbs: ALL_VERBS.to_vec(),
    }
}

fn names_for(group: &str, plural: &str) -> (Vec<String>, Vec<String>) {
    let short: &[&str] = match (group, plural) {
        ("", "pods") => &["po"],
        ("", "services") => &["svc"],
        ("", "configmaps") => &["cm"],
        ("", "namespaces") => &["ns"],
        ("", "nodes") => &["no"],
        ("", "serviceaccounts") => &["sa"],
        ("", "events") => &["ev"],
        ("", "endpoints") => &["ep"],
        ("", "persistentvolumes") => &["pv"],
        ("", "persistentvolumeclaims") => &["pvc"],
        ("", "replicationcontrollers") => &["rc"],
        ("", "resourcequotas") => &["quota"],
        ("", "limitranges") => &["limits"],
        ("", "componentstatuses") => &["cs"],
        ("apps", "deployments") => &["deploy"],
        ("apps", "replicasets") => &["rs"],
        ("apps", "statefulsets") => &["sts"],
        ("apps", "daemonsets") => &["ds"],
        ("batch", "cronjobs") => &["cj"],
        ("autoscaling", "horizontalpodautoscalers") => &["hpa"],
        ("networking.k8s.io", "ingresses") => &["ing"],
        ("networking.k8s.io", "ipaddresses") => &["ip"],
        ("networking.k8s.io", "networkpolicies") => &["netpol"],
        ("policy", "poddisruptionbudgets") => &["pdb"],
        ("storage.k8s.io", "storageclasses") => &["sc"],
        ("scheduling.k8s.io", "priorityclasses") => &["pc"],
        ("certificates.k8s.io", "certificatesigningrequests") => &["csr"],
        ("apiextensions.k8s.io", "customresourcedefinitions") => &["crd", "crds"],
        ("events.k8s.io", "events") => &["ev"],
        _ => &[],
    };
    let all = matches!(
        (group, plural),
        ("", "pods" | "services" | "replicationcontrollers")
            | (
                "apps",
                "deployments" | "replicasets" | "statefulsets" | "daemonsets"
            )
            | ("batch", "jobs" | "cronjobs")
            | ("autoscaling", "horizontalpodautoscalers")
    );
    let extensions = matches!(
        (group, plural),
        ("apiregistration.k8s.io", "apiservices")
            | ("apiextensions.k8s.io", "customresourcedefinitions")
            | (
                "admissionregistration.k8s.io",
                "mutatingwebhookconfigurations"
                    | "validatingwebhookconfigurations"
                    | "validatingadmissionpolicies"
                    | "validatingadmissionpolicybindings"
            )
    );
    let categories = if all {
        vec!["all".to_string()]
    } else if extensions {
        vec!["api-extensions".to_string()]
    } else {
        vec![]
    };
    (short.iter().map(|s| s.to_string()).collect(), categories)
}

macro_rules! builtins {
    ($($ty:path),* $(,)?) => {
        vec![$(builtin::<$ty>()),*]
    };
}

/// Every built-in resource served (GA APIs and the API extension and aggregation types).
pub fn builtin_resources() -> Vec<ResourceDef> {
    let mut defs = builtin_types!(builtins!());
    // Namespaces: the `/status` and `/finalize` subresources are handled specially, and
    // they cannot be deleted as a collection.
    for d in &mut defs {
        // CSINodes have no status (k8s-openapi's probe cannot tell).
        if d.group == "storage.k8s.io" && d.plural == "csinodes" {
            d.has_status = false;
        }
        if d.group.is_empty() && d.plural == "namespaces" {
            d.has_status = true;
            d.verbs.retain(|v| *v != "deletecollection");
        }
    }
    defs
}

/// Core resources that are not stored: `bindings` (binds a pod to a node, like
/// `pods/binding`) and `componentstatuses` (the control plane's health, read only).
pub fn virtual_resources() -> Vec<ResourceDef> {
    let mk = |kind: &str, plural: &str, namespaced: bool, verbs: Vec<&'static str>| ResourceDef {
        group: String::new(),
        version: "v1".into(),
        kind: kind.into(),
        singular: kind.to_lowercase(),
        plural: plural.into(),
        namespaced,
        short_names: names_for("", plural).0,
        categories: vec![],
        has_status: false,
        scale: None,
        builtin: true,
        create_on_update: false,
        delete_returns_object: false,
        normalizer: None,
        crd: None,
        verbs,
    };
    vec![
        mk("Binding", "bindings", true, vec!["create"]),
        mk(
            "ComponentStatus",
            "componentstatuses",
            false,
            vec!["get", "list"],
        ),
    ]
}

impl ResourceDef {
    /// A resource that is served without storage (see [`virtual_resources`]).
    pub fn is_virtual(&self) -> bool {
        self.group.is_empty() && matches!(self.plural.as_str(), "bindings" | "componentstatuses")
    }
}

/// Resources served by the access-review APIs (create only, nothing stored).
pub fn review_resources() -> Vec<ResourceDef> {
    let mk = |group: &str, kind: &str, plural: &str| ResourceDef {
        group: group.into(),
        version: "v1".into(),
        kind: kind.into(),
        singular: kind.to_lowercase(),
        plural: plural.into(),
        namespaced: kind == "LocalSubjectAccessReview",
        short_names: vec![],
        categories: vec![],
        has_status: false,
        scale: None,
        builtin: true,
        create_on_update: false,
        delete_returns_object: false,
        normalizer: None,
        crd: None,
        verbs: vec!["create"],
    };
    vec![
        mk(
            "authorization.k8s.io",
            "SelfSubjectAccessReview",
            "selfsubjectaccessreviews",
        ),
        mk(
            "authorization.k8s.io",
            "SelfSubjectRulesReview",
            "selfsubjectrulesreviews",
        ),
        mk(
            "authentication.k8s.io",
            "SelfSubjectReview",
            "selfsubjectreviews",
        ),
        mk("authentication.k8s.io", "TokenReview", "tokenreviews"),
        mk(
            "authorization.k8s.io",
            "SubjectAccessReview",
            "subjectaccessreviews",
        ),
        mk(
            "authorization.k8s.io",
            "LocalSubjectAccessReview",
            "localsubjectaccessreviews",
        ),
    ]
}

/// The live table: built-ins plus established custom resources.
#[derive(Clone, Debug, Default)]
pub struct Registry {
    /// (group, version, plural) -> definition.
    by_gvr: BTreeMap<(String, String, String), Arc<ResourceDef>>,
}

impl Registry {
    /// The built-in table.
    pub fn new() -> Self {
        let mut r = Self::default();
        for d in builtin_resources()
            .into_iter()
            .chain(review_resources())
            .chain(virtual_resources())
        {
            r.insert(d);
        }
        r
    }

    /// Adds or replaces a definition.
    pub fn insert(&mut self, d: ResourceDef) {
        self.by_gvr.insert(
            (d.group.clone(), d.version.clone(), d.plural.clone()),
            Arc::new(d),
        );
    }

    /// Removes every version of a group/plural.
    pub fn remove_group_resource(&mut self, group: &str, plural: &str) {
        self.by_gvr
            .retain(|(g, _, p), _| !(g == group && p == plural));
    }

    /// Looks up a definition.
    pub fn get(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceDef>> {
        self.by_gvr
            .get(&(group.to_string(), version.to_string(), plural.to_string()))
            .cloned()
    }

    /// Finds the definition of a kind in a group/version.
    pub fn by_kind(&self, group: &str, version: &str, kind: &str) -> Option<Arc<ResourceDef>> {
        self.by_gvr
            .values()
            .find(|d| d.group == group && d.version == version && d.kind == kind)
            .cloned()
    }

    /// Every definition.
    pub fn all(&self) -> impl Iterator<Item = &Arc<ResourceDef>> {
        self.by_gvr.values()
    }

    /// Group name -> versions, in preference order (preferred first).
    pub fn groups(&self) -> BTreeMap<String, Vec<String>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for d in self.by_gvr.values() {
            let vs = out.entry(d.group.clone()).or_default();
            if !vs.contains(&d.version) {
                vs.push(d.version.clone());
            }
        }
        for vs in out.values_mut() {
            vs.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
        }
        out
    }
}

/// Kubernetes version ordering: GA > beta > alpha, higher numbers first.
pub fn version_priority(v: &str) -> (u8, u32, u32) {
    let rest = v.strip_prefix('v').unwrap_or(v);
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    let major = digits.parse().unwrap_or(0);
    let tail = &rest[digits.len()..];
    if tail.is_empty() {
        return (3, major, 0);
    }
    let (class, n) = if let Some(n) = tail.strip_prefix("beta") {
        (2, n)
    } else if let Some(n) = tail.strip_prefix("alpha") {
        (1, n)
    } else {
        (0, "")
    };
    (class, major, n.parse().unwrap_or(0))
}

/// The errors about an object of a resource, with the resource in their details.
impl ApiError {
    /// 404 NotFound for an object.
    pub fn not_found(def: &ResourceDef, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", def.group_resource()),
        )
        .with(details(def, name))
    }
    /// 409 AlreadyExists.
    pub fn already_exists(def: &ResourceDef, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", def.group_resource()),
        )
        .with(details(def, name))
    }
    /// 409 Conflict with a reason text.
    pub fn conflict(def: &ResourceDef, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                def.group_resource()
            ),
        )
        .with(details(def, name))
    }
    /// 409 Conflict for a stale resourceVersion.
    pub fn optimistic_lock(def: &ResourceDef, name: &str) -> Self {
        Self::conflict(
            def,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }
    /// 422 Invalid with field causes.
    pub fn invalid(def: &ResourceDef, name: &str, causes: Vec<StatusCause>) -> Self {
        // Go's aggregate of field errors: without duplicates, one alone, several in
        // brackets.
        let mut all: Vec<String> = Vec::new();
        for c in &causes {
            let text = format!("{}: {}", c.field, c.message);
            if !all.contains(&text) {
                all.push(text);
            }
        }
        let summary = if all.len() == 1 {
            all.join("")
        } else {
            format!("[{}]", all.join(", "))
        };
        let group = if def.group.is_empty() {
            String::new()
        } else {
            format!(".{}", def.group)
        };
        Self::new(
            422,
            "Invalid",
            format!("{}{group} \"{name}\" is invalid: {summary}", def.kind),
        )
        .with(StatusDetails {
            name: name.into(),
            group: def.group.clone(),
            kind: def.kind.clone(),
            causes,
            ..Default::default()
        })
    }
    /// 422 for one field.
    pub fn invalid_field(
        def: &ResourceDef,
        name: &str,
        field: &str,
        reason: &str,
        message: impl Into<String>,
    ) -> Self {
        let message = message.into();
        let kind_text = match reason {
            "FieldValueRequired" => "Required value",
            "FieldValueForbidden" => "Forbidden",
            "FieldValueNotSupported" => "Unsupported value",
            "FieldValueDuplicate" => "Duplicate value",
            "FieldValueTooLong" => "Too long",
            _ => "Invalid value",
        };
        Self::invalid(
            def,
            name,
            vec![StatusCause {
                reason: reason.into(),
                message: format!("{kind_text}: {message}"),
                field: field.into(),
            }],
        )
    }
    /// 403 Forbidden.
    pub fn forbidden(def: &ResourceDef, name: &str, msg: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", msg).with(details(def, name))
    }
}

fn details(def: &ResourceDef, name: &str) -> StatusDetails {
    StatusDetails {
        name: name.into(),
        group: def.group.clone(),
        kind: def.plural.clone(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_have_right_metadata() {
        let r = Registry::new();
        let pods = r.get("", "v1", "pods").unwrap();
        assert!(pods.namespaced && pods.has_status && pods.short_names == ["po"]);
        let cm = r.get("", "v1", "configmaps").unwrap();
        assert!(!cm.has_status);
        let deploy = r.get("apps", "v1", "deployments").unwrap();
        assert!(deploy.scale.is_some() && deploy.has_status);
        let ns = r.get("", "v1", "namespaces").unwrap();
        assert!(!ns.namespaced);
        let crd = r
            .get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
            .unwrap();
        assert!(!crd.namespaced && crd.has_status);
        assert!(r.get("coordination.k8s.io", "v1", "leases").is_some());
        assert!(version_priority("v1") > version_priority("v2beta1"));
        assert!(version_priority("v1beta2") > version_priority("v1beta1"));
        assert!(version_priority("v1beta1") > version_priority("v1alpha1"));
    }
}
