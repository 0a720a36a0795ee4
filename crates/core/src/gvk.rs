//! Group, version, kind and resource identifiers.

use serde::{Deserialize, Serialize};
use std::fmt;

/// An API group and version, e.g. `apps/v1` or `v1` (the core group is `""`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize)]
pub struct GroupVersion {
    /// API group; empty for the core group.
    pub group: String,
    /// Version, e.g. `v1`.
    pub version: String,
}

impl GroupVersion {
    /// Builds a group version.
    pub fn new(group: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
        }
    }

    /// Parses an `apiVersion` string: `v1` (core) or `group/version`.
    ///
    /// ```
    /// use kubewright_core::GroupVersion;
    /// let gv = GroupVersion::parse_api_version("apps/v1").unwrap();
    /// assert_eq!((gv.group.as_str(), gv.version.as_str()), ("apps", "v1"));
    /// assert_eq!(GroupVersion::parse_api_version("v1").unwrap().group, "");
    /// ```
    pub fn parse_api_version(api_version: &str) -> Result<Self, ParseGroupVersionError> {
        match api_version.split_once('/') {
            None if !api_version.is_empty() => Ok(Self::new("", api_version)),
            Some((g, v)) if !g.is_empty() && !v.is_empty() && !v.contains('/') => {
                Ok(Self::new(g, v))
            }
            _ => Err(ParseGroupVersionError(api_version.to_string())),
        }
    }

    /// `v1` for the core group, else `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The URL prefix of this group version: `/api/v1` or `/apis/<group>/<version>`.
    pub fn url_prefix(&self) -> String {
        if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        }
    }
}

impl fmt::Display for GroupVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.api_version())
    }
}

/// An `apiVersion` that is neither `version` nor `group/version`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid apiVersion {0:?}: expected \"v1\" or \"group/version\"")]
pub struct ParseGroupVersionError(pub String);

/// Group, version and kind of a type, e.g. `apps/v1 Deployment`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize)]
pub struct GroupVersionKind {
    /// API group; empty for the core group.
    pub group: String,
    /// Version.
    pub version: String,
    /// Kind, e.g. `Deployment`.
    pub kind: String,
}

impl GroupVersionKind {
    /// Builds a GVK.
    pub fn gvk(group: &str, version: &str, kind: &str) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
        }
    }

    /// Builds a GVK from an `apiVersion` and a kind.
    pub fn from_api_version_kind(
        api_version: &str,
        kind: &str,
    ) -> Result<Self, ParseGroupVersionError> {
        let gv = GroupVersion::parse_api_version(api_version)?;
        Ok(Self {
            group: gv.group,
            version: gv.version,
            kind: kind.into(),
        })
    }

    /// The `apiVersion` string.
    pub fn api_version(&self) -> String {
        self.group_version().api_version()
    }

    /// The group version part.
    pub fn group_version(&self) -> GroupVersion {
        GroupVersion::new(self.group.clone(), self.version.clone())
    }
}

impl fmt::Display for GroupVersionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.api_version(), self.kind)
    }
}

/// Group, version and resource (plural), e.g. `apps/v1 deployments`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize)]
pub struct GroupVersionResource {
    /// API group; empty for the core group.
    pub group: String,
    /// Version.
    pub version: String,
    /// Plural resource name, e.g. `deployments`.
    pub resource: String,
}

impl GroupVersionResource {
    /// Builds a GVR.
    pub fn gvr(group: &str, version: &str, resource: &str) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
            resource: resource.into(),
        }
    }

    /// The `apiVersion` string.
    pub fn api_version(&self) -> String {
        GroupVersion::new(self.group.clone(), self.version.clone()).api_version()
    }
}

impl fmt::Display for GroupVersionResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.api_version(), self.resource)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_api_versions() {
        assert_eq!(
            GroupVersion::parse_api_version("v1").unwrap(),
            GroupVersion::new("", "v1")
        );
        assert_eq!(
            GroupVersion::parse_api_version("apps/v1").unwrap(),
            GroupVersion::new("apps", "v1")
        );
        for bad in ["", "/v1", "apps/", "a/b/c"] {
            assert!(GroupVersion::parse_api_version(bad).is_err(), "{bad}");
        }
        assert_eq!(
            GroupVersion::new("apps", "v1").url_prefix(),
            "/apis/apps/v1"
        );
        assert_eq!(GroupVersion::new("", "v1").url_prefix(), "/api/v1");
    }
}
