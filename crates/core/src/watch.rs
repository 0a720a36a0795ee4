//! Watch events.

use crate::status::Status;
use serde::de::{self, DeserializeOwned, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use std::fmt;
use std::marker::PhantomData;

/// One event of a watch stream: `{"type": T, "object": {...}}`.
///
/// Decoding reads the object straight into `K` when `type` comes first, as every API
/// server writes it. An object that comes before its type is buffered as JSON and decoded
/// once the type is known, so the order of the keys never changes the result.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", content = "object", rename_all = "UPPERCASE")]
#[allow(clippy::large_enum_variant)] // events are moved once into the store; boxing would add an allocation per event
#[serde(bound(serialize = "K: Serialize"))]
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

/// The `type` of a watch event.
#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
enum EventType {
    Added,
    Modified,
    Deleted,
    Bookmark,
    Error,
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "lowercase")]
enum EventField {
    Type,
    Object,
    #[serde(other)]
    Other,
}

// Written by hand rather than derived: serde's adjacently tagged decoding keeps a
// buffered path (`Content`) for an object that precedes its type, and that path
// instantiates every visitor of `K` once more, in every crate that decodes events. The
// buffer here is JSON, decoded by the same code as a JSON response.
impl<'de, K: DeserializeOwned> Deserialize<'de> for WatchEvent<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(EventVisitor(PhantomData))
    }
}

struct EventVisitor<K>(PhantomData<K>);

impl<'de, K: DeserializeOwned> Visitor<'de> for EventVisitor<K> {
    type Value = WatchEvent<K>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a watch event with a type and an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<WatchEvent<K>, A::Error> {
        let mut ty = None;
        let mut event = None;
        // An object seen before its type, re-encoded as JSON.
        let mut early: Option<Vec<u8>> = None;
        while let Some(key) = map.next_key::<EventField>()? {
            match key {
                EventField::Type if ty.is_some() => return Err(de::Error::duplicate_field("type")),
                EventField::Type => ty = Some(map.next_value::<EventType>()?),
                EventField::Object if event.is_some() || early.is_some() => {
                    return Err(de::Error::duplicate_field("object"));
                }
                EventField::Object => match ty {
                    Some(t) => event = Some(object_of(t, &mut map)?),
                    None => {
                        let v = map.next_value::<serde_json::Value>()?;
                        early = Some(serde_json::to_vec(&v).map_err(de::Error::custom)?);
                    }
                },
                EventField::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let ty = ty.ok_or_else(|| de::Error::missing_field("type"))?;
        match (event, early) {
            (Some(event), _) => Ok(event),
            (None, Some(json)) => buffered(ty, &json).map_err(de::Error::custom),
            (None, None) => Err(de::Error::missing_field("object")),
        }
    }
}

/// The object of an event whose type is known, read from the map.
fn object_of<'de, K: DeserializeOwned, A: MapAccess<'de>>(
    ty: EventType,
    map: &mut A,
) -> Result<WatchEvent<K>, A::Error> {
    Ok(match ty {
        EventType::Added => WatchEvent::Added(map.next_value()?),
        EventType::Modified => WatchEvent::Modified(map.next_value()?),
        EventType::Deleted => WatchEvent::Deleted(map.next_value()?),
        EventType::Bookmark => WatchEvent::Bookmark(map.next_value()?),
        EventType::Error => WatchEvent::Error(map.next_value()?),
    })
}

/// The object of an event whose type came after it, from its JSON.
fn buffered<K: DeserializeOwned>(
    ty: EventType,
    json: &[u8],
) -> Result<WatchEvent<K>, serde_json::Error> {
    Ok(match ty {
        EventType::Added => WatchEvent::Added(serde_json::from_slice(json)?),
        EventType::Modified => WatchEvent::Modified(serde_json::from_slice(json)?),
        EventType::Deleted => WatchEvent::Deleted(serde_json::from_slice(json)?),
        EventType::Bookmark => WatchEvent::Bookmark(serde_json::from_slice(json)?),
        EventType::Error => WatchEvent::Error(serde_json::from_slice(json)?),
    })
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

    #[test]
    fn key_order_does_not_matter() {
        let obj =
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"v"}}"#;
        let first: WatchEvent<ConfigMap> =
            serde_json::from_str(&format!(r#"{{"type":"MODIFIED","object":{obj}}}"#)).unwrap();
        let late: WatchEvent<ConfigMap> = serde_json::from_str(&format!(
            r#"{{"object":{obj},"extra":[1,{{"x":null}}],"type":"MODIFIED"}}"#
        ))
        .unwrap();
        assert_eq!(first, late);
        assert!(
            matches!(&first, WatchEvent::Modified(cm) if cm.data.as_ref().unwrap()["k"] == "v")
        );
        // A map that sorts its keys (serde_json::Value) puts the object first.
        let value = serde_json::to_value(&first).unwrap();
        let from_value: WatchEvent<ConfigMap> = serde_json::from_value(value).unwrap();
        assert_eq!(from_value, first);
        let bookmark: WatchEvent<ConfigMap> = serde_json::from_str(
            r#"{"object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"9"}},"type":"BOOKMARK"}"#,
        )
        .unwrap();
        assert!(matches!(bookmark, WatchEvent::Bookmark(b) if b.metadata.resource_version == "9"));
    }

    #[test]
    fn malformed_events_are_errors() {
        for bad in [
            r#"{"object":{}}"#,
            r#"{"type":"ADDED"}"#,
            r#"{"type":"ADDED","type":"ADDED","object":{}}"#,
            r#"{"type":"ADDED","object":{},"object":{}}"#,
            r#"{"type":"RENAMED","object":{}}"#,
            r#"{"object":{"metadata":7},"type":"ADDED"}"#,
            r#"{"type":"ADDED","object":{"metadata":7}}"#,
            r#"[1,2]"#,
        ] {
            assert!(
                serde_json::from_str::<WatchEvent<ConfigMap>>(bad).is_err(),
                "{bad}"
            );
        }
    }
}
