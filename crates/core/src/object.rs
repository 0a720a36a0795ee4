//! Lists of objects.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use serde::{Deserialize, Deserializer, Serialize};

/// A list response: `<Kind>List` with list metadata and items.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(bound(deserialize = "K: Deserialize<'de>", serialize = "K: Serialize"))]
pub struct ObjectList<K> {
    /// `resourceVersion`, `continue`, `remainingItemCount`.
    #[serde(default)]
    pub metadata: ListMeta,
    /// The items; a `null` from the server reads as empty.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub items: Vec<K>,
}

fn null_as_empty<'de, D: Deserializer<'de>, K: Deserialize<'de>>(d: D) -> Result<Vec<K>, D::Error> {
    Ok(Option::<Vec<K>>::deserialize(d)?.unwrap_or_default())
}

impl<K> ObjectList<K> {
    /// The list's resourceVersion.
    pub fn resource_version(&self) -> Option<&str> {
        self.metadata.resource_version.as_deref()
    }
    /// The continue token, when more pages remain.
    pub fn continue_token(&self) -> Option<&str> {
        self.metadata.continue_.as_deref().filter(|c| !c.is_empty())
    }
    /// Iterates the items.
    pub fn iter(&self) -> std::slice::Iter<'_, K> {
        self.items.iter()
    }
}

impl<K> IntoIterator for ObjectList<K> {
    type Item = K;
    type IntoIter = std::vec::IntoIter<K>;
    fn into_iter(self) -> Self::IntoIter {
        self.items.into_iter()
    }
}

impl<'a, K> IntoIterator for &'a ObjectList<K> {
    type Item = &'a K;
    type IntoIter = std::slice::Iter<'a, K>;
    fn into_iter(self) -> Self::IntoIter {
        self.items.iter()
    }
}
