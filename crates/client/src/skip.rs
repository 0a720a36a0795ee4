//! Decoding objects without their `metadata.managedFields`.
//!
//! Server-side apply's field ownership (`managedFields`) is often the largest part of an
//! object and few controllers read it. Decoding it and then dropping it costs memory
//! churn and CPU; [`WithoutManagedFields`] skips the member inside the JSON decoder, so
//! it is never allocated.
//!
//! ```
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kubewright_client::WithoutManagedFields;
//! let json = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a",
//!     "managedFields":[{"manager":"kubectl","operation":"Apply"}]},"data":{"k":"v"}}"#;
//! let WithoutManagedFields(cm) = serde_json::from_str::<WithoutManagedFields<ConfigMap>>(json)?;
//! assert_eq!(cm.metadata.name.as_deref(), Some("a"));
//! assert!(cm.metadata.managed_fields.is_none());
//! # Ok::<(), serde_json::Error>(())
//! ```

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::forward_to_deserialize_any;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::marker::PhantomData;

/// An object decoded without `metadata.managedFields` (it reads as absent).
///
/// Only the object's own top-level `metadata` is affected: a `managedFields` key anywhere
/// else (e.g. in a custom resource's spec) is decoded as usual. Serializes as the inner
/// object.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(transparent)]
#[repr(transparent)]
pub struct WithoutManagedFields<K>(pub K);

impl<K> WithoutManagedFields<K> {
    /// The decoded object.
    pub fn into_inner(self) -> K {
        self.0
    }
}

impl<'de, K: Deserialize<'de>> Deserialize<'de> for WithoutManagedFields<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        K::deserialize(Proxy {
            inner: d,
            level: Level::Object,
        })
        .map(WithoutManagedFields)
    }
}

/// Where in the object a proxied map sits.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    /// The object: its `metadata` value is proxied at [`Level::Metadata`].
    Object,
    /// The object's metadata: `managedFields` entries are skipped.
    Metadata,
}

/// A deserializer that hands the visitor a filtering map.
struct Proxy<D> {
    inner: D,
    level: Level,
}

struct ProxyVisitor<V> {
    inner: V,
    level: Level,
}

struct ProxyMap<A> {
    inner: A,
    level: Level,
    /// The value about to be read belongs to the object's `metadata` key.
    metadata_next: bool,
}

struct ProxySeed<S> {
    inner: S,
    level: Level,
}

macro_rules! forward_deserialize {
    ($($method:ident($($arg:ident: $ty:ty),*);)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value, D::Error> {
                self.inner.$method($($arg,)* ProxyVisitor { inner: visitor, level: self.level })
            }
        )*
    };
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Proxy<D> {
    type Error = D::Error;

    forward_deserialize! {
        deserialize_any();
        deserialize_bool();
        deserialize_i8();
        deserialize_i16();
        deserialize_i32();
        deserialize_i64();
        deserialize_i128();
        deserialize_u8();
        deserialize_u16();
        deserialize_u32();
        deserialize_u64();
        deserialize_u128();
        deserialize_f32();
        deserialize_f64();
        deserialize_char();
        deserialize_str();
        deserialize_string();
        deserialize_bytes();
        deserialize_byte_buf();
        deserialize_option();
        deserialize_unit();
        deserialize_unit_struct(name: &'static str);
        deserialize_newtype_struct(name: &'static str);
        deserialize_seq();
        deserialize_tuple(len: usize);
        deserialize_tuple_struct(name: &'static str, len: usize);
        deserialize_map();
        deserialize_struct(name: &'static str, fields: &'static [&'static str]);
        deserialize_enum(name: &'static str, variants: &'static [&'static str]);
        deserialize_identifier();
        deserialize_ignored_any();
    }

    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }
}

macro_rules! forward_visit {
    ($($method:ident($ty:ty);)*) => {
        $(
            fn $method<E: de::Error>(self, v: $ty) -> Result<V::Value, E> {
                self.inner.$method(v)
            }
        )*
    };
}

impl<'de, V: Visitor<'de>> Visitor<'de> for ProxyVisitor<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.expecting(f)
    }

    forward_visit! {
        visit_bool(bool);
        visit_i8(i8);
        visit_i16(i16);
        visit_i32(i32);
        visit_i64(i64);
        visit_i128(i128);
        visit_u8(u8);
        visit_u16(u16);
        visit_u32(u32);
        visit_u64(u64);
        visit_u128(u128);
        visit_f32(f32);
        visit_f64(f64);
        visit_char(char);
        visit_str(&str);
        visit_borrowed_str(&'de str);
        visit_string(String);
        visit_bytes(&[u8]);
        visit_borrowed_bytes(&'de [u8]);
        visit_byte_buf(Vec<u8>);
    }

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_none()
    }
    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_unit()
    }
    // `Option<ObjectMeta>` and newtypes reach the map through these: keep proxying.
    fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<V::Value, D2::Error> {
        self.inner.visit_some(Proxy {
            inner: d,
            level: self.level,
        })
    }
    fn visit_newtype_struct<D2: Deserializer<'de>>(self, d: D2) -> Result<V::Value, D2::Error> {
        self.inner.visit_newtype_struct(Proxy {
            inner: d,
            level: self.level,
        })
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        self.inner.visit_seq(seq)
    }
    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        self.inner.visit_enum(data)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.inner.visit_map(ProxyMap {
            inner: map,
            level: self.level,
            metadata_next: false,
        })
    }
}

/// A map key, borrowed from the input when it has no escapes.
enum Key<'de> {
    Borrowed(&'de str),
    Owned(String),
}

impl Key<'_> {
    fn as_str(&self) -> &str {
        match self {
            Key::Borrowed(s) => s,
            Key::Owned(s) => s,
        }
    }
}

/// A key handed on to the target's visitor: one deserializer for both forms, so the
/// visitor's field identifier is instantiated once.
struct KeyDe<'de, E>(Key<'de>, PhantomData<E>);

impl<'de, E: de::Error> Deserializer<'de> for KeyDe<'de, E> {
    type Error = E;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, E> {
        match self.0 {
            Key::Borrowed(s) => visitor.visit_borrowed_str(s),
            Key::Owned(s) => visitor.visit_string(s),
        }
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map
        struct enum identifier ignored_any
    }
}

struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Key<'de>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Key<'de>, D::Error> {
        d.deserialize_str(KeySeed)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Key<'de>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field name")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
        Ok(Key::Borrowed(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
        Ok(Key::Owned(v.to_string()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Key<'de>, E> {
        Ok(Key::Owned(v))
    }
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for ProxyMap<A> {
    type Error = A::Error;

    fn next_key_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>, A::Error> {
        loop {
            let Some(key) = self.inner.next_key_seed(KeySeed)? else {
                return Ok(None);
            };
            match self.level {
                Level::Metadata if key.as_str() == "managedFields" => {
                    self.inner.next_value::<IgnoredAny>()?;
                    continue;
                }
                Level::Object => self.metadata_next = key.as_str() == "metadata",
                Level::Metadata => {}
            }
            return seed.deserialize(KeyDe(key, PhantomData)).map(Some);
        }
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, A::Error> {
        if std::mem::take(&mut self.metadata_next) {
            self.inner.next_value_seed(ProxySeed {
                inner: seed,
                level: Level::Metadata,
            })
        } else {
            self.inner.next_value_seed(seed)
        }
    }

    fn size_hint(&self) -> Option<usize> {
        self.inner.size_hint()
    }
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for ProxySeed<S> {
    type Value = S::Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        self.inner.deserialize(Proxy {
            inner: d,
            level: self.level,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kubewright_core::{DynamicObject, ObjectList, PartialObjectMetadata, WatchEvent};

    const MF: &str = r#"[{"manager":"kubectl","operation":"Update","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:data":{"f:k":{}}}}]"#;

    fn cm_json(mf_position: &str) -> String {
        match mf_position {
            "first" => format!(
                r#"{{"metadata":{{"managedFields":{MF},"name":"a","labels":{{"x":"y"}}}},"apiVersion":"v1","kind":"ConfigMap","data":{{"managedFields":"kept"}}}}"#
            ),
            "last" => format!(
                r#"{{"apiVersion":"v1","kind":"ConfigMap","data":{{"managedFields":"kept"}},"metadata":{{"name":"a","labels":{{"x":"y"}},"managedFields":{MF}}}}}"#
            ),
            _ => format!(
                r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"a","managedFields":{MF},"labels":{{"x":"y"}}}},"data":{{"managedFields":"kept"}}}}"#
            ),
        }
    }

    #[test]
    fn skips_only_metadata_managed_fields() {
        for pos in ["first", "middle", "last"] {
            let json = cm_json(pos);
            let full: ConfigMap = serde_json::from_str(&json).unwrap();
            assert!(full.metadata.managed_fields.is_some());
            let WithoutManagedFields(cm) = serde_json::from_str(&json).unwrap();
            let cm: ConfigMap = cm;
            assert!(cm.metadata.managed_fields.is_none(), "{pos}");
            let mut expect = full.clone();
            expect.metadata.managed_fields = None;
            assert_eq!(cm, expect, "{pos}");
            assert_eq!(cm.data.unwrap()["managedFields"], "kept");
        }
    }

    #[test]
    fn escaped_keys_and_nested_names_are_handled() {
        // An escaped key decodes through the owned path; a label named managedFields stays.
        let json =
            r#"{"metadata":{"n\u0061me":"a","labels":{"managedFields":"v"},"managedFields":[]}}"#;
        let WithoutManagedFields(cm) =
            serde_json::from_str::<WithoutManagedFields<ConfigMap>>(json).unwrap();
        assert_eq!(cm.metadata.name.as_deref(), Some("a"));
        assert_eq!(cm.metadata.labels.unwrap()["managedFields"], "v");
        assert!(cm.metadata.managed_fields.is_none());
        let json = r#"{"metadata":{"name":"a","m\u0061nagedFields":[]}}"#;
        let WithoutManagedFields(cm) =
            serde_json::from_str::<WithoutManagedFields<ConfigMap>>(json).unwrap();
        assert!(cm.metadata.managed_fields.is_none());
    }

    #[test]
    fn lists_events_dynamic_and_metadata_objects() {
        let json = format!(
            r#"{{"metadata":{{"resourceVersion":"7"}},"items":[{}]}}"#,
            cm_json("")
        );
        let list: ObjectList<WithoutManagedFields<ConfigMap>> =
            serde_json::from_str(&json).unwrap();
        assert!(list.items[0].0.metadata.managed_fields.is_none());
        let ev = format!(r#"{{"type":"MODIFIED","object":{}}}"#, cm_json("last"));
        let ev: WatchEvent<WithoutManagedFields<ConfigMap>> = serde_json::from_str(&ev).unwrap();
        assert!(
            matches!(ev, WatchEvent::Modified(WithoutManagedFields(cm)) if cm.metadata.managed_fields.is_none() && cm.metadata.name.as_deref() == Some("a"))
        );
        let WithoutManagedFields(d) =
            serde_json::from_str::<WithoutManagedFields<DynamicObject>>(&cm_json("")).unwrap();
        assert!(d.metadata.managed_fields.is_none());
        assert_eq!(d.data["data"]["managedFields"], "kept");
        let WithoutManagedFields(p) =
            serde_json::from_str::<WithoutManagedFields<PartialObjectMetadata>>(&cm_json("first"))
                .unwrap();
        assert!(p.metadata.managed_fields.is_none());
        assert_eq!(p.metadata.name.as_deref(), Some("a"));
    }

    #[test]
    fn errors_are_the_decoders_errors() {
        for bad in [
            r#"{"metadata":{"managedFields":[}}"#,
            r#"{"metadata":{"name":5}}"#,
            r#"{"metadata":7}"#,
            r#"[1,2]"#,
            r#"{"metadata":{"managedFields":[]"#,
        ] {
            let a = serde_json::from_str::<ConfigMap>(bad)
                .unwrap_err()
                .to_string();
            let b = serde_json::from_str::<WithoutManagedFields<ConfigMap>>(bad)
                .unwrap_err()
                .to_string();
            // Skipping managedFields may move the point of failure, never hide it.
            assert!(!a.is_empty() && !b.is_empty(), "{bad}");
        }
    }
}
