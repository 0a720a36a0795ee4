//! Combining the CRDs of several versions of one kind into one CRD.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionVersion,
};

/// Why [`merge_crds`] refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MergeError {
    /// No CRDs were given.
    #[error("no CRDs to merge")]
    Empty,
    /// The CRDs describe different resources.
    #[error(
        "CRD {index} has {field} `{found}`, but the first has `{expected}`: only versions of one kind can be merged"
    )]
    Mismatch {
        /// Index of the offending CRD in the input.
        index: usize,
        /// `group`, `kind`, `plural`, `singular`, `listKind`, `shortNames`, `categories` or
        /// `scope`.
        field: &'static str,
        /// The value of the first CRD.
        expected: String,
        /// The value of the offending CRD.
        found: String,
    },
    /// Two CRDs define the same version.
    #[error("version `{0}` is defined more than once")]
    DuplicateVersion(String),
    /// The requested storage version is not among the versions.
    #[error("the storage version `{wanted}` is not one of the versions ({available})")]
    StorageVersionNotFound {
        /// The version asked for.
        wanted: String,
        /// The versions present, comma-separated.
        available: String,
    },
    /// No version is served.
    #[error("no version is served")]
    NoServedVersion,
}

/// Combines the CRDs of several versions of one kind (for example `v1::Monitor::crd()`
/// and `v2::Monitor::crd()`, generated from two spec structs with the same group and kind)
/// into one CRD with all versions.
///
/// `stored_apiversion` names the storage version, as `v2` or `group/v2`: it is the only
/// version with `storage: true`; every other version gets `storage: false`. Each version
/// keeps its `served` flag, schema, subresources and printer columns. The CRDs must agree
/// on group, names and scope; the first CRD's metadata is kept.
///
/// ```
/// # use kubewright::crd::merge_crds;
/// # use kubewright::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
/// # fn crd(version: &str) -> apiext::CustomResourceDefinition {
/// #     serde_json::from_value(serde_json::json!({
/// #         "metadata": {"name": "monitors.example.com"},
/// #         "spec": {"group": "example.com", "scope": "Namespaced",
/// #                  "names": {"kind": "Monitor", "plural": "monitors"},
/// #                  "versions": [{"name": version, "served": true, "storage": true}]}
/// #     })).unwrap()
/// # }
/// let merged = merge_crds(vec![crd("v1"), crd("v2")], "v2").unwrap();
/// let flags: Vec<_> = merged.spec.versions.iter().map(|v| (v.name.as_str(), v.storage)).collect();
/// assert_eq!(flags, [("v1", false), ("v2", true)]);
/// ```
pub fn merge_crds(
    crds: Vec<CustomResourceDefinition>,
    stored_apiversion: &str,
) -> Result<CustomResourceDefinition, MergeError> {
    let mut iter = crds.into_iter();
    let mut merged = iter.next().ok_or(MergeError::Empty)?;
    let stored = stored_apiversion
        .rsplit_once('/')
        .map_or(stored_apiversion, |(_, v)| v);

    let identity = |crd: &CustomResourceDefinition| -> [(&'static str, String); 8] {
        let s = &crd.spec;
        let n = &s.names;
        [
            ("group", s.group.clone()),
            ("kind", n.kind.clone()),
            ("plural", n.plural.clone()),
            ("scope", s.scope.clone()),
            (
                "singular",
                n.singular
                    .clone()
                    .unwrap_or_else(|| n.kind.to_ascii_lowercase()),
            ),
            (
                "listKind",
                n.list_kind
                    .clone()
                    .unwrap_or_else(|| format!("{}List", n.kind)),
            ),
            (
                "shortNames",
                n.short_names.clone().unwrap_or_default().join(","),
            ),
            (
                "categories",
                n.categories.clone().unwrap_or_default().join(","),
            ),
        ]
    };
    let first = identity(&merged);
    let mut versions: Vec<CustomResourceDefinitionVersion> =
        std::mem::take(&mut merged.spec.versions);
    for (i, crd) in iter.enumerate() {
        let index = i + 1;
        for ((field, expected), (_, found)) in first.iter().zip(identity(&crd)) {
            if *expected != found {
                return Err(MergeError::Mismatch {
                    index,
                    field,
                    expected: expected.clone(),
                    found,
                });
            }
        }
        versions.extend(crd.spec.versions);
    }
    let mut seen: Vec<&str> = vec![];
    for v in &versions {
        if seen.contains(&v.name.as_str()) {
            return Err(MergeError::DuplicateVersion(v.name.clone()));
        }
        seen.push(&v.name);
    }
    if !versions.iter().any(|v| v.name == stored) {
        return Err(MergeError::StorageVersionNotFound {
            wanted: stored.to_string(),
            available: seen.join(", "),
        });
    }
    if !versions.iter().any(|v| v.served) {
        return Err(MergeError::NoServedVersion);
    }
    for v in &mut versions {
        v.storage = v.name == stored;
    }
    merged.spec.versions = versions;
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd(group: &str, version: &str, served: bool, scope: &str) -> CustomResourceDefinition {
        serde_json::from_value(json!({
            "metadata": {"name": format!("monitors.{group}")},
            "spec": {
                "group": group,
                "scope": scope,
                "names": {"kind": "Monitor", "plural": "monitors", "shortNames": ["mon"]},
                "versions": [{"name": version, "served": served, "storage": true}]
            }
        }))
        .unwrap()
    }

    #[test]
    fn merges_versions_with_one_storage_version() {
        let merged = merge_crds(
            vec![
                crd("example.com", "v1", true, "Namespaced"),
                crd("example.com", "v2", true, "Namespaced"),
                crd("example.com", "v3alpha1", false, "Namespaced"),
            ],
            "example.com/v2",
        )
        .unwrap();
        let flags: Vec<_> = merged
            .spec
            .versions
            .iter()
            .map(|v| (v.name.as_str(), v.served, v.storage))
            .collect();
        assert_eq!(
            flags,
            [
                ("v1", true, false),
                ("v2", true, true),
                ("v3alpha1", false, false)
            ]
        );
        assert_eq!(
            merged.metadata.name.as_deref(),
            Some("monitors.example.com")
        );
    }

    #[test]
    fn rejects_mismatches_and_bad_versions() {
        assert_eq!(merge_crds(vec![], "v1"), Err(MergeError::Empty));
        let err = merge_crds(
            vec![
                crd("example.com", "v1", true, "Namespaced"),
                crd("other.com", "v2", true, "Namespaced"),
            ],
            "v2",
        )
        .unwrap_err();
        assert!(
            matches!(
                err,
                MergeError::Mismatch {
                    index: 1,
                    field: "group",
                    ..
                }
            ),
            "{err}"
        );
        let err = merge_crds(
            vec![
                crd("example.com", "v1", true, "Namespaced"),
                crd("example.com", "v2", true, "Cluster"),
            ],
            "v2",
        )
        .unwrap_err();
        assert!(
            matches!(err, MergeError::Mismatch { field: "scope", .. }),
            "{err}"
        );
        assert_eq!(
            merge_crds(
                vec![
                    crd("example.com", "v1", true, "Namespaced"),
                    crd("example.com", "v1", true, "Namespaced"),
                ],
                "v1",
            ),
            Err(MergeError::DuplicateVersion("v1".into()))
        );
        assert!(matches!(
            merge_crds(vec![crd("example.com", "v1", true, "Namespaced")], "v9"),
            Err(MergeError::StorageVersionNotFound { .. })
        ));
        assert_eq!(
            merge_crds(vec![crd("example.com", "v1", false, "Namespaced")], "v1"),
            Err(MergeError::NoServedVersion)
        );
    }
}
