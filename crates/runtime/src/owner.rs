//! Owner references: build them, set a controller reference, check ownership.
//!
//! These follow controller-runtime's `controllerutil` rules:
//!
//! * [`controller_owner_ref`] builds a reference with `controller: true` and
//!   `blockOwnerDeletion: true` (what the garbage collector and `owns()` mappings use);
//!   [`owner_ref`] builds a plain one.
//! * [`set_controller_reference`] refuses to steal an object another controller already
//!   controls ([`OwnerError::AlreadyOwned`], controller-runtime's `AlreadyOwnedError`) and
//!   refuses owners the garbage collector cannot honour: a namespaced owner of a
//!   cluster-scoped (or namespace-less) dependent, or an owner in another namespace.
//! * [`is_owned_by`] and [`is_controlled_by`] compare by `uid`, the only identity that
//!   survives delete-and-recreate with the same name.
//!
//! ```
//! use k8s_openapi::api::apps::v1::Deployment;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kubewright_core::ObjectMeta;
//! use kubewright_runtime::owner::{is_controlled_by, set_controller_reference};
//!
//! let owner = Deployment {
//!     metadata: ObjectMeta {
//!         name: Some("web".into()),
//!         namespace: Some("prod".into()),
//!         uid: Some("1b4f…".into()),
//!         ..Default::default()
//!     },
//!     ..Default::default()
//! };
//! let mut cm = ConfigMap {
//!     metadata: ObjectMeta {
//!         name: Some("web-config".into()),
//!         namespace: Some("prod".into()),
//!         ..Default::default()
//!     },
//!     ..Default::default()
//! };
//! set_controller_reference(&owner, &mut cm).unwrap();
//! assert!(is_controlled_by(&cm, &owner));
//! ```

use kubewright_core::{OwnerReference, Resource, ResourceExt};

/// Why an owner reference could not be built or set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OwnerError {
    /// The owner has no `metadata.name` or `metadata.uid` (it was not read from the
    /// server); a reference needs both.
    #[error("the owner {kind} {name:?} has no metadata.{field}: read it from the API server first")]
    MissingOwnerField {
        /// The owner's kind.
        kind: String,
        /// The owner's name (may be empty).
        name: String,
        /// `name` or `uid`.
        field: &'static str,
    },
    /// The dependent is already controlled by another object (controller-runtime's
    /// `AlreadyOwnedError`).
    #[error("object {object:?} is already owned by another {owner_kind} controller {owner_name:?}")]
    AlreadyOwned {
        /// The dependent's name.
        object: String,
        /// The existing controller's kind.
        owner_kind: String,
        /// The existing controller's name.
        owner_name: String,
    },
    /// The owner is namespaced but the dependent has no namespace (a cluster-scoped
    /// object, or a namespaced one whose namespace is not set yet).
    #[error(
        "cluster-scoped resource must not have a namespace-scoped owner, owner's namespace {owner_namespace} (set the dependent's metadata.namespace)"
    )]
    ClusterScopedDependent {
        /// The owner's namespace.
        owner_namespace: String,
    },
    /// Owner and dependent live in different namespaces.
    #[error(
        "cross-namespace owner references are disallowed, owner's namespace {owner_namespace}, obj's namespace {dependent_namespace}"
    )]
    CrossNamespace {
        /// The owner's namespace.
        owner_namespace: String,
        /// The dependent's namespace.
        dependent_namespace: String,
    },
}

/// A plain owner reference to `owner` (no `controller`, no `blockOwnerDeletion`).
pub fn owner_ref<K>(owner: &K) -> Result<OwnerReference, OwnerError>
where
    K: Resource,
    K::DynamicType: Default,
{
    owner_ref_with(owner, &K::DynamicType::default())
}

/// [`owner_ref`] for types with run-time type information (e.g. `DynamicObject`).
pub fn owner_ref_with<K: Resource>(
    owner: &K,
    dt: &K::DynamicType,
) -> Result<OwnerReference, OwnerError> {
    let kind = K::kind(dt).into_owned();
    let meta = owner.meta();
    let missing = |field| OwnerError::MissingOwnerField {
        kind: kind.clone(),
        name: meta.name.clone().unwrap_or_default(),
        field,
    };
    let name = meta
        .name
        .clone()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| missing("name"))?;
    let uid = meta
        .uid
        .clone()
        .filter(|u| !u.is_empty())
        .ok_or_else(|| missing("uid"))?;
    Ok(OwnerReference {
        api_version: K::api_version(dt).into_owned(),
        kind,
        name,
        uid,
        controller: None,
        block_owner_deletion: None,
    })
}

/// A controller reference to `owner`: `controller: true`, `blockOwnerDeletion: true`.
pub fn controller_owner_ref<K>(owner: &K) -> Result<OwnerReference, OwnerError>
where
    K: Resource,
    K::DynamicType: Default,
{
    controller_owner_ref_with(owner, &K::DynamicType::default())
}

/// [`controller_owner_ref`] for types with run-time type information.
pub fn controller_owner_ref_with<K: Resource>(
    owner: &K,
    dt: &K::DynamicType,
) -> Result<OwnerReference, OwnerError> {
    let mut r = owner_ref_with(owner, dt)?;
    r.controller = Some(true);
    r.block_owner_deletion = Some(true);
    Ok(r)
}

/// Makes `owner` the controller of `dependent` (controller-runtime's
/// `SetControllerReference`): adds (or updates) a controller reference, keeping other
/// owner references.
///
/// Fails with [`OwnerError::AlreadyOwned`] when another object already controls the
/// dependent, and with [`OwnerError::ClusterScopedDependent`] /
/// [`OwnerError::CrossNamespace`] when the garbage collector could not honour the
/// reference. A namespaced dependent must have its `metadata.namespace` set.
pub fn set_controller_reference<O, D>(owner: &O, dependent: &mut D) -> Result<(), OwnerError>
where
    O: Resource,
    O::DynamicType: Default,
    D: Resource,
{
    set_controller_reference_with(owner, &O::DynamicType::default(), dependent)
}

/// [`set_controller_reference`] for owners with run-time type information.
pub fn set_controller_reference_with<O, D>(
    owner: &O,
    dt: &O::DynamicType,
    dependent: &mut D,
) -> Result<(), OwnerError>
where
    O: Resource,
    D: Resource,
{
    validate_namespaces(owner, dependent)?;
    let new_ref = controller_owner_ref_with(owner, dt)?;
    if let Some(existing) = dependent.controller_owner()
        && !refer_same_object(existing, &new_ref)
    {
        return Err(OwnerError::AlreadyOwned {
            object: dependent.name_any(),
            owner_kind: existing.kind.clone(),
            owner_name: existing.name.clone(),
        });
    }
    upsert(dependent, new_ref, false);
    Ok(())
}

/// Adds (or updates) a plain owner reference to `owner` on `dependent`
/// (controller-runtime's `SetOwnerReference`). An existing reference to the same object
/// keeps its `controller` and `blockOwnerDeletion` flags.
pub fn set_owner_reference<O, D>(owner: &O, dependent: &mut D) -> Result<(), OwnerError>
where
    O: Resource,
    O::DynamicType: Default,
    D: Resource,
{
    set_owner_reference_with(owner, &O::DynamicType::default(), dependent)
}

/// [`set_owner_reference`] for owners with run-time type information.
pub fn set_owner_reference_with<O, D>(
    owner: &O,
    dt: &O::DynamicType,
    dependent: &mut D,
) -> Result<(), OwnerError>
where
    O: Resource,
    D: Resource,
{
    validate_namespaces(owner, dependent)?;
    let new_ref = owner_ref_with(owner, dt)?;
    upsert(dependent, new_ref, true);
    Ok(())
}

/// Whether `dependent` has an owner reference to `owner` (compared by uid; an owner
/// without a uid owns nothing).
pub fn is_owned_by<D: Resource, O: Resource>(dependent: &D, owner: &O) -> bool {
    match owner.uid() {
        Some(uid) if !uid.is_empty() => dependent.owner_references().iter().any(|r| r.uid == uid),
        _ => false,
    }
}

/// Whether `owner` is the controller (`controller: true` reference) of `dependent`.
pub fn is_controlled_by<D: Resource, O: Resource>(dependent: &D, owner: &O) -> bool {
    match (owner.uid(), dependent.controller_owner()) {
        (Some(uid), Some(r)) => !uid.is_empty() && r.uid == uid,
        _ => false,
    }
}

fn validate_namespaces<O: Resource, D: Resource>(
    owner: &O,
    dependent: &D,
) -> Result<(), OwnerError> {
    let Some(owner_ns) = owner.namespace().filter(|n| !n.is_empty()) else {
        // Cluster-scoped owners may own anything.
        return Ok(());
    };
    match dependent.namespace().filter(|n| !n.is_empty()) {
        None => Err(OwnerError::ClusterScopedDependent {
            owner_namespace: owner_ns.to_string(),
        }),
        Some(dep_ns) if dep_ns != owner_ns => Err(OwnerError::CrossNamespace {
            owner_namespace: owner_ns.to_string(),
            dependent_namespace: dep_ns.to_string(),
        }),
        Some(_) => Ok(()),
    }
}

fn group_of(api_version: &str) -> &str {
    api_version.split_once('/').map(|(g, _)| g).unwrap_or("")
}

/// controller-runtime's `referSameObject`: same group (any version), kind and name.
fn refer_same_object(a: &OwnerReference, b: &OwnerReference) -> bool {
    group_of(&a.api_version) == group_of(&b.api_version) && a.kind == b.kind && a.name == b.name
}

fn upsert<D: Resource>(dependent: &mut D, mut new_ref: OwnerReference, keep_flags: bool) {
    let refs = dependent
        .meta_mut()
        .owner_references
        .get_or_insert_with(Vec::new);
    match refs.iter_mut().find(|r| refer_same_object(r, &new_ref)) {
        Some(existing) => {
            if keep_flags {
                new_ref.controller = new_ref.controller.or(existing.controller);
                new_ref.block_owner_deletion = new_ref
                    .block_owner_deletion
                    .or(existing.block_owner_deletion);
            }
            *existing = new_ref;
        }
        None => refs.push(new_ref),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
    use k8s_openapi::api::rbac::v1::ClusterRole;
    use kubewright_core::ObjectMeta;

    fn meta(name: &str, ns: Option<&str>, uid: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            namespace: ns.map(Into::into),
            uid: uid.map(Into::into),
            ..Default::default()
        }
    }
    fn deploy(name: &str, ns: &str, uid: &str) -> Deployment {
        Deployment {
            metadata: meta(name, Some(ns), Some(uid)),
            ..Default::default()
        }
    }
    fn cm(name: &str, ns: Option<&str>) -> ConfigMap {
        ConfigMap {
            metadata: meta(name, ns, None),
            ..Default::default()
        }
    }

    #[test]
    fn refs_carry_type_and_flags() {
        let d = deploy("web", "a", "u1");
        let r = controller_owner_ref(&d).unwrap();
        assert_eq!(r.api_version, "apps/v1");
        assert_eq!(r.kind, "Deployment");
        assert_eq!(r.name, "web");
        assert_eq!(r.uid, "u1");
        assert_eq!(r.controller, Some(true));
        assert_eq!(r.block_owner_deletion, Some(true));
        let p = owner_ref(&d).unwrap();
        assert_eq!(p.controller, None);
        assert_eq!(p.block_owner_deletion, None);
    }

    #[test]
    fn refs_need_name_and_uid() {
        let mut d = deploy("web", "a", "u1");
        d.metadata.uid = None;
        assert!(matches!(
            owner_ref(&d),
            Err(OwnerError::MissingOwnerField { field: "uid", .. })
        ));
        d.metadata.name = None;
        assert!(matches!(
            controller_owner_ref(&d),
            Err(OwnerError::MissingOwnerField { field: "name", .. })
        ));
    }

    #[test]
    fn set_controller_reference_adds_once() {
        let d = deploy("web", "a", "u1");
        let mut c = cm("c", Some("a"));
        set_controller_reference(&d, &mut c).unwrap();
        set_controller_reference(&d, &mut c).unwrap();
        assert_eq!(c.owner_references().len(), 1);
        assert!(is_controlled_by(&c, &d));
        assert!(is_owned_by(&c, &d));
    }

    #[test]
    fn already_owned_by_another_controller() {
        let d1 = deploy("web", "a", "u1");
        let d2 = deploy("api", "a", "u2");
        let mut c = cm("c", Some("a"));
        set_controller_reference(&d1, &mut c).unwrap();
        let err = set_controller_reference(&d2, &mut c).unwrap_err();
        assert_eq!(
            err,
            OwnerError::AlreadyOwned {
                object: "c".into(),
                owner_kind: "Deployment".into(),
                owner_name: "web".into()
            }
        );
        // A plain owner reference is still allowed.
        set_owner_reference(&d2, &mut c).unwrap();
        assert_eq!(c.owner_references().len(), 2);
        assert!(is_owned_by(&c, &d2));
        assert!(!is_controlled_by(&c, &d2));
        assert!(is_controlled_by(&c, &d1));
    }

    #[test]
    fn recreated_owner_with_same_name_replaces_the_reference() {
        // Same group/kind/name, new uid (the owner was deleted and recreated).
        let old = deploy("web", "a", "u1");
        let new = deploy("web", "a", "u9");
        let mut c = cm("c", Some("a"));
        set_controller_reference(&old, &mut c).unwrap();
        set_controller_reference(&new, &mut c).unwrap();
        assert_eq!(c.owner_references().len(), 1);
        assert!(is_controlled_by(&c, &new));
        assert!(!is_owned_by(&c, &old));
    }

    #[test]
    fn namespace_rules() {
        let d = deploy("web", "a", "u1");
        let mut other_ns = cm("c", Some("b"));
        assert_eq!(
            set_controller_reference(&d, &mut other_ns).unwrap_err(),
            OwnerError::CrossNamespace {
                owner_namespace: "a".into(),
                dependent_namespace: "b".into()
            }
        );
        let mut cluster = ClusterRole {
            metadata: meta("r", None, None),
            ..Default::default()
        };
        assert!(matches!(
            set_controller_reference(&d, &mut cluster),
            Err(OwnerError::ClusterScopedDependent { .. })
        ));
        let mut no_ns = cm("c", None);
        assert!(matches!(
            set_owner_reference(&d, &mut no_ns),
            Err(OwnerError::ClusterScopedDependent { .. })
        ));
        // A cluster-scoped owner may own namespaced and cluster-scoped objects.
        let ns_owner = Namespace {
            metadata: meta("a", None, Some("n1")),
            ..Default::default()
        };
        let mut c = cm("c", Some("a"));
        set_controller_reference(&ns_owner, &mut c).unwrap();
        set_controller_reference(&ns_owner, &mut cluster).unwrap();
        assert!(is_controlled_by(&cluster, &ns_owner));
        let r = &c.owner_references()[0];
        assert_eq!(
            (r.api_version.as_str(), r.kind.as_str()),
            ("v1", "Namespace")
        );
    }

    #[test]
    fn set_owner_reference_keeps_controller_flag() {
        let d = deploy("web", "a", "u1");
        let mut c = cm("c", Some("a"));
        set_controller_reference(&d, &mut c).unwrap();
        set_owner_reference(&d, &mut c).unwrap();
        assert_eq!(c.owner_references().len(), 1);
        assert!(is_controlled_by(&c, &d));
    }

    #[test]
    fn ownership_needs_a_uid() {
        let mut d = deploy("web", "a", "u1");
        let mut c = cm("c", Some("a"));
        set_controller_reference(&d, &mut c).unwrap();
        d.metadata.uid = None;
        assert!(!is_owned_by(&c, &d));
        assert!(!is_controlled_by(&c, &d));
    }
}
