//! Watch events.

use crate::status::Status;
use serde::{Deserialize, Serialize};

/// One event of a watch stream: `{"type": T, "object": {...}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "object", rename_all = "UPPERCASE")]
#[allow(clippy::large_enum_variant)] // events are moved once into the store; boxing would add an allocation per event
#[serde(bound(deserialize = "K: Deserialize<'de>", serialize = "K: Serialize"))]
pub enum WatchEvent<K> {
    /// The object was created (or is part of the initial state).
    Added(K),
    /// The object was changed.
    Modified(K),
    /// The object was deleted; carries its last state.
    Deleted(K),
    /// A progress marker: only `metadata.resourceVersion` (and annotations) are set.
    Bookmark(Bookmark),
    /// An error, e.g. 410 Expired when the start version is too old.
    Error(Status),
}

/// The object of a BOOKMARK event.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Bookmark {
    /// Object metadata: `resourceVersion` and annotations.
    pub metadata: BookmarkMeta,
}

/// Metadata of a bookmark.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BookmarkMeta {
    /// The version the watcher has seen everything up to.
    pub resource_version: String,
    /// Annotations, e.g. `k8s.io/initial-events-end: "true"`.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub annotations: std::collections::BTreeMap<String, String>,
}

/// The annotation that marks the end of a streaming list's initial events.
pub const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

impl<K> WatchEvent<K> {
    /// Converts the object of an ADDED, MODIFIED or DELETED event.
    pub fn map<U>(self, f: impl FnOnce(K) -> U) -> WatchEvent<U> {
        match self {
            WatchEvent::Added(k) => WatchEvent::Added(f(k)),
            WatchEvent::Modified(k) => WatchEvent::Modified(f(k)),
            WatchEvent::Deleted(k) => WatchEvent::Deleted(f(k)),
            WatchEvent::Bookmark(b) => WatchEvent::Bookmark(b),
            WatchEvent::Error(s) => WatchEvent::Error(s),
        }
    }
}

impl Bookmark {
    /// Whether this bookmark ends the initial events of a streaming list.
    pub fn is_initial_events_end(&self) -> bool {
        self.metadata
            .annotations
            .get(INITIAL_EVENTS_END)
            .map(String::as_str)
            == Some("true")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    #[test]
    fn decodes_events() {
        let e: WatchEvent<ConfigMap> = serde_json::from_str(
            r#"{"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"5"}}}"#,
        )
        .unwrap();
        assert!(matches!(e, WatchEvent::Added(cm) if cm.metadata.name.as_deref() == Some("a")));
        let b: WatchEvent<ConfigMap> = serde_json::from_str(
            r#"{"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"9","annotations":{"k8s.io/initial-events-end":"true"}}}}"#,
        )
        .unwrap();
        assert!(
            matches!(b, WatchEvent::Bookmark(ref bm) if bm.is_initial_events_end() && bm.metadata.resource_version == "9")
        );
        let err: WatchEvent<ConfigMap> = serde_json::from_str(
            r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (3)","reason":"Expired","code":410}}"#,
        )
        .unwrap();
        assert!(matches!(err, WatchEvent::Error(s) if s.is_gone()));
    }
}
