//! Protobuf watch streams (`application/vnd.kubernetes.protobuf;stream=watch`).
//!
//! Every event is a frame: a 4-byte big-endian length, then a `metav1.WatchEvent`
//! message `{type = 1; object = 2: RawExtension{raw = 1}}` whose raw object is a whole
//! `k8s\0` body. [`frame_len`] finds where a frame ends in a read buffer;
//! [`from_frame`] decodes one into any type that reads a JSON watch event
//! (`{"type": ..., "object": ...}`), e.g. `kubewright_core::WatchEvent<K>`.
//!
//! ```
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kubewright_core::WatchEvent;
//! let cm = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
//!     "metadata": {"name": "a", "resourceVersion": "7"}});
//! let frame = kubewright_proto::watch::encode_frame("ADDED", &kubewright_proto::encode(&cm)?);
//! assert_eq!(kubewright_proto::watch::frame_len(&frame)?, Some(frame.len()));
//! let ev: WatchEvent<ConfigMap> = kubewright_proto::watch::from_frame(&frame[4..])?;
//! assert!(matches!(ev, WatchEvent::Added(cm) if cm.metadata.name.as_deref() == Some("a")));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::de::Top;
use crate::encode::ld;
use crate::wire::{Reader, Unknown};
use crate::{Error, MAGIC};
use serde::de::{self, DeserializeSeed, Deserializer, IntoDeserializer, MapAccess, Visitor};
use serde::forward_to_deserialize_any;

/// Largest frame accepted (a guard against a corrupt length).
pub const MAX_FRAME: usize = 64 * 1024 * 1024;

/// The length of the first frame of `buf`, prefix included, once it is complete;
/// `None` while more bytes are needed. A length over [`MAX_FRAME`] is an error.
pub fn frame_len(buf: &[u8]) -> Result<Option<usize>, Error> {
    let Some(prefix) = buf.get(..4) else {
        return Ok(None);
    };
    let n = u32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]) as usize;
    if n > MAX_FRAME {
        return Err(Error::new(format!(
            "watch frame of {n} bytes is larger than {MAX_FRAME}"
        )));
    }
    Ok((buf.len() >= n + 4).then_some(n + 4))
}

/// Decodes one frame's message (without its 4-byte length) into a watch event type.
pub fn from_frame<'de, T: de::Deserialize<'de>>(frame: &'de [u8]) -> Result<T, Error> {
    // A frame may come wrapped in an envelope of its own.
    let frame = if frame.starts_with(MAGIC) {
        Unknown::parse(frame)?.raw
    } else {
        frame
    };
    let mut kind = "";
    let mut raw: &[u8] = &[];
    let mut r = Reader::new(frame);
    while let Some((num, wire)) = r.key()? {
        match (num, wire) {
            (1, 2) => {
                kind = std::str::from_utf8(r.bytes()?)
                    .map_err(|_| Error::new("the event type is not UTF-8"))?;
            }
            (2, 2) => {
                let mut ext = Reader::new(r.bytes()?);
                while let Some((n, w)) = ext.key()? {
                    match (n, w) {
                        (1, 2) => raw = ext.bytes()?,
                        _ => ext.skip(w)?,
                    }
                }
            }
            (1 | 2, _) => {
                return Err(Error::new(format!(
                    "wire type {wire} is wrong for field {num} of a WatchEvent"
                )));
            }
            _ => r.skip(wire)?,
        }
    }
    if kind.is_empty() {
        return Err(Error::new("a watch event without a type"));
    }
    T::deserialize(Event {
        kind,
        raw,
        state: 0,
    })
}

/// Encodes a frame: the length prefix and a WatchEvent of `kind` (ADDED, MODIFIED,
/// DELETED, BOOKMARK, ERROR) around an encoded object (a whole `k8s\0` body).
pub fn encode_frame(kind: &str, object: &[u8]) -> Vec<u8> {
    let mut raw = Vec::with_capacity(object.len() + 6);
    ld(1, object, &mut raw);
    let mut ev = Vec::with_capacity(raw.len() + kind.len() + 12);
    ld(1, kind.as_bytes(), &mut ev);
    ld(2, &raw, &mut ev);
    let mut frame = Vec::with_capacity(ev.len() + 4);
    frame.extend_from_slice(&u32::try_from(ev.len()).unwrap_or(u32::MAX).to_be_bytes());
    frame.extend_from_slice(&ev);
    frame
}

/// A watch event as the map `{"type", "object"}`.
struct Event<'de> {
    kind: &'de str,
    raw: &'de [u8],
    state: u8,
}

impl<'de> Deserializer<'de> for Event<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_map(self)
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map
        struct enum identifier ignored_any
    }
}

impl<'de> MapAccess<'de> for Event<'de> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let key = match self.state {
            0 => "type",
            1 => "object",
            _ => return Ok(None),
        };
        seed.deserialize(key.into_deserializer()).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        self.state += 1;
        if self.state == 1 {
            return seed.deserialize(self.kind.into_deserializer());
        }
        seed.deserialize(Top::parse(self.raw, 1)?)
            .map_err(|e| e.at("object"))
    }
}
