//! Object keys: `namespace/name`, or `name` for cluster-scoped objects.

use crate::resource::Resource;
use std::fmt;

/// Identifies one object within a resource type: client-go's `namespace/name` key.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// Namespace, `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

impl ObjectKey {
    /// A namespaced key.
    pub fn new(namespace: Option<&str>, name: &str) -> Self {
        Self {
            namespace: namespace.filter(|n| !n.is_empty()).map(str::to_string),
            name: name.to_string(),
        }
    }

    /// The key of an object.
    pub fn from_obj<K: Resource>(obj: &K) -> Self {
        let m = obj.meta();
        Self::new(m.namespace.as_deref(), m.name.as_deref().unwrap_or(""))
    }

    /// Parses `ns/name` or `name`.
    ///
    /// ```
    /// use kubewright_core::ObjectKey;
    /// let k = ObjectKey::parse("default/web");
    /// assert_eq!(k.namespace.as_deref(), Some("default"));
    /// assert_eq!(k.to_string(), "default/web");
    /// ```
    pub fn parse(s: &str) -> Self {
        match s.split_once('/') {
            Some((ns, name)) => Self::new(Some(ns), name),
            None => Self::new(None, s),
        }
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}
