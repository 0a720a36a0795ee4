//! A serde `Deserializer` over the protobuf wire.
//!
//! Each message is presented as the JSON object the API server would have written for it
//! (the same rules as [`crate::decode`]): keys are the fields' JSON names, inlined structs
//! are flattened into their parent, `omitempty` zero scalars are left out, absent
//! non-pointer scalars read as their zero value, and Time, MicroTime, Duration,
//! IntOrString, Quantity and embedded JSON read as their JSON forms. Nothing is
//! materialised on the way: strings are borrowed from the body where the target type
//! allows it, and a field the target ignores (an unknown key, or `managedFields` under a
//! skipping wrapper) is never decoded.
//!
//! Every shape goes through the same few deserializer types, never through an
//! intermediate `serde_json::Value`: each visitor of the target types is instantiated
//! once for this format (compile time and binary size grow with every instantiation).
//! Embedded JSON (RawExtension, FieldsV1) is read by `serde_json` from the borrowed bytes,
//! the same instantiation as a JSON response.

use crate::schema::{Field, SCHEMA, Scalar, Schema, Special, Target, Type};
use crate::value::{Stamp, go_duration};
use crate::wire::{Reader, Unknown};
use crate::{Error, F_INLINE, F_OMIT_EMPTY, F_OMIT_ZERO, F_REPEATED, MAGIC, MAX_DEPTH};
use base64::Engine as _;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::forward_to_deserialize_any;

type Result<T, E = Error> = std::result::Result<T, E>;

/// The part every protobuf deserializer shares: an ignored value is skipped unread, and
/// every other request goes through `deserialize_any`.
macro_rules! skip_ignored_and_forward_the_rest {
    () => {
        fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
            visitor.visit_unit()
        }

        forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
            bytes byte_buf unit unit_struct seq tuple tuple_struct map struct enum identifier
        }
    };
}

/// Decodes a Kubernetes protobuf body (`k8s\0` + `runtime.Unknown`) into `T`: a
/// k8s-openapi object, a `<Kind>List` (as any type with `metadata` and `items`, e.g.
/// `kubewright_core::ObjectList<K>`), a `Status`, or anything else that reads the JSON
/// form of the envelope's kind. `apiVersion` and `kind` come from the envelope.
///
/// Malformed input is an [`Error`] naming what was wrong and where, never a panic.
pub fn from_slice<'de, T: de::Deserialize<'de>>(body: &'de [u8]) -> Result<T> {
    let top = Top::parse(body, 0)?;
    T::deserialize(top)
}

/// Decodes the message of a known `apiVersion` and `kind` without the `k8s\0` envelope
/// (the `raw` of a `runtime.Unknown`).
pub fn from_raw<'de, T: de::Deserialize<'de>>(
    api_version: &'de str,
    kind: &'de str,
    raw: &'de [u8],
) -> Result<T> {
    let schema = schema()?;
    let target = target_of(schema, api_version, kind)?;
    T::deserialize(Top {
        schema,
        target,
        api_version,
        kind,
        data: raw,
        depth: 0,
    })
}

/// Decodes only the `metadata` of an object's message (of a known `apiVersion` and
/// `kind`, without the envelope), e.g. into an `ObjectMeta`: the rest of the message is
/// skipped, not decoded. A message without metadata gives the empty metadata.
pub fn metadata_from_raw<'de, T: de::Deserialize<'de>>(
    api_version: &str,
    kind: &str,
    raw: &'de [u8],
) -> Result<T> {
    let schema = schema()?;
    let Target::Message(idx) = target_of(schema, api_version, kind)? else {
        return Err(Error::new(format!("{kind:?} is a list, not an object")));
    };
    let msg = &schema.messages[idx];
    let Some(fi) = msg.fields.iter().position(|f| f.json == "metadata") else {
        return Err(Error::new(format!("{kind:?} has no metadata")));
    };
    let field = &msg.fields[fi];
    if !matches!(field.ty, Type::Message(_)) {
        return Err(Error::new(format!(
            "the metadata of {kind:?} is not a message"
        )));
    }
    let mut occurrences = Vec::with_capacity(1);
    let mut r = Reader::new(raw);
    while let Some((num, wire)) = r.key()? {
        if num == field.number {
            if !field.accepts(wire) {
                return Err(wire_error(schema, field, wire).at("metadata"));
            }
            occurrences.push(Entry {
                owner: idx as u32,
                field: fi as u32,
                data: Data::Bytes(r.bytes()?),
            });
        } else {
            r.skip(wire)?;
        }
    }
    // Several occurrences merge, as in the whole object.
    T::deserialize(Value {
        schema,
        field,
        group: &occurrences,
        depth: 0,
    })
    .map_err(|e| e.at("metadata"))
}

fn schema() -> Result<&'static Schema> {
    SCHEMA.as_ref().map_err(|e| Error::new(e.clone()))
}

fn target_of(schema: &Schema, api_version: &str, kind: &str) -> Result<Target> {
    schema.target(api_version, kind).ok_or_else(|| {
        Error::new(format!(
            "no protobuf schema for kind {kind:?} in {api_version:?}"
        ))
    })
}

/// A whole body: the envelope's object, with `apiVersion` and `kind`.
pub(crate) struct Top<'de> {
    schema: &'static Schema,
    target: Target,
    api_version: &'de str,
    kind: &'de str,
    data: &'de [u8],
    depth: usize,
}

impl<'de> Top<'de> {
    pub(crate) fn parse(body: &'de [u8], depth: usize) -> Result<Self> {
        let u = Unknown::parse(body)?;
        if depth > MAX_DEPTH {
            return Err(Error::new(format!(
                "messages are nested more than {MAX_DEPTH} deep"
            )));
        }
        let schema = schema()?;
        // The type the envelope names, if any, must be protobuf (Go ignores it: its encoder
        // never sets one); an encoding is refused rather than misread.
        let content_type =
            (u.content_type != crate::MEDIA_TYPE.as_bytes()).then_some(u.content_type);
        for (what, v) in [
            ("content encoding", Some(u.content_encoding)),
            ("content type", content_type),
        ] {
            if let Some(v) = v
                && !v.is_empty()
            {
                return Err(Error::new(format!(
                    "unsupported {what} {:?} in runtime.Unknown",
                    String::from_utf8_lossy(v)
                )));
            }
        }
        let (api_version, kind, raw) = (str_of(u.api_version)?, str_of(u.kind)?, u.raw);
        let target = target_of(schema, api_version, kind)?;
        Ok(Self {
            schema,
            target,
            api_version,
            kind,
            data: raw,
            depth,
        })
    }

    /// A list body's metadata and items (outside the generic visit: it is the same for
    /// every target type).
    fn list(
        &self,
        item: usize,
        meta: usize,
        header: [(&'static str, &'de str); 2],
    ) -> Result<ListMap<'de>> {
        let mut meta_bytes: &[u8] = &[];
        let mut items = Vec::new();
        let mut r = Reader::new(self.data);
        while let Some((num, wire)) = r.key()? {
            match (num, wire) {
                (1, 2) => meta_bytes = r.bytes()?,
                (2, 2) => items.push(Entry {
                    owner: item as u32,
                    field: 0,
                    data: Data::Bytes(r.bytes()?),
                }),
                (1 | 2, _) => {
                    return Err(Error::new(format!(
                        "wire type {wire} is wrong for field {num} of a list"
                    )));
                }
                _ => r.skip(wire)?,
            }
        }
        Ok(ListMap {
            schema: self.schema,
            header,
            meta,
            meta_bytes,
            item,
            items,
            state: 0,
            depth: self.depth,
        })
    }

    /// The body's map, or the message of a kind whose JSON form is not an object
    /// (outside the generic visit: it is the same for every target type).
    fn open(&self) -> Result<Result<Map<'de, 'de>, Msg<'de>>> {
        let header = [("apiVersion", self.api_version), ("kind", self.kind)];
        match self.target {
            Target::Message(idx) => {
                if self.schema.messages[idx].special != Special::None {
                    return Ok(Err(Msg {
                        schema: self.schema,
                        idx,
                        data: self.data,
                        depth: self.depth,
                    }));
                }
                Ok(Ok(Map::Fields(Fields::new(
                    self.schema,
                    idx,
                    self.data,
                    self.depth,
                    Some(header),
                )?)))
            }
            Target::List { item, meta } => Ok(Ok(Map::List(self.list(item, meta, header)?))),
        }
    }
}

fn str_of(b: &[u8]) -> Result<&str> {
    std::str::from_utf8(b).map_err(|_| Error::new("apiVersion or kind is not UTF-8"))
}

impl<'de> Deserializer<'de> for Top<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.open()? {
            Ok(map) => visitor.visit_map(map),
            Err(msg) => msg.deserialize_any(visitor),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        if name == crate::RAW_MESSAGE && matches!(self.target, Target::Message(_)) {
            return visitor.visit_borrowed_bytes(self.data);
        }
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_some(self)
    }

    skip_ignored_and_forward_the_rest!();
}

/// Every map this format presents, as one `MapAccess` type: a message's fields, a map
/// field's entries and a list body. A struct's visitor (`visit_map`) is the largest code
/// a target type has, and it is instantiated once per map type it can meet.
enum Map<'a, 'de> {
    Fields(Fields<'de>),
    Entries(MapEntries<'a, 'de>),
    List(ListMap<'de>),
    Json(JsonMap),
}

impl<'de> MapAccess<'de> for Map<'_, 'de> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>> {
        let key = match self {
            // The common case first, its key's form known here.
            Map::Fields(m) => {
                return match m.next_key()? {
                    Some(name) => seed.deserialize(Key::Str(name)).map(Some),
                    None => Ok(None),
                };
            }
            Map::Entries(m) => m.next_key()?,
            Map::List(m) => m.next_key(),
            Map::Json(m) => m.iter.next().map(|(k, v)| {
                m.value = Some(v);
                Key::Owned(k)
            }),
        };
        match key {
            Some(key) => seed.deserialize(key).map(Some),
            None => Ok(None),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value> {
        match self {
            Map::Fields(m) => m.next_value(seed),
            Map::Entries(m) => m.next_value(seed),
            Map::List(m) => m.next_value(seed),
            Map::Json(m) => match m.value.take() {
                Some(v) => seed.deserialize(Json(v)),
                None => Err(Error::new("a value was asked for before its key")),
            },
        }
    }

    fn size_hint(&self) -> Option<usize> {
        match self {
            Map::Fields(_) => None,
            Map::Entries(m) => Some(m.entries.len() - m.pos),
            Map::List(m) => Some(4usize.saturating_sub(usize::from(m.state))),
            Map::Json(m) => Some(m.iter.len()),
        }
    }
}

/// Embedded JSON (RawExtension, FieldsV1, JSON), parsed, handed to a visitor through
/// this format's own map and sequence types: `serde_json`'s deserializer would be one
/// more instantiation of every target type, for a form few objects carry.
struct Json(serde_json::Value);

impl<'de> Deserializer<'de> for Json {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.open() {
            JsonForm::Unit => visitor.visit_unit(),
            JsonForm::Bool(b) => visitor.visit_bool(b),
            JsonForm::U64(u) => visitor.visit_u64(u),
            JsonForm::I64(i) => visitor.visit_i64(i),
            JsonForm::F64(f) => visitor.visit_f64(f),
            JsonForm::String(s) => visitor.visit_string(s),
            JsonForm::Seq(seq) => visitor.visit_seq(seq),
            JsonForm::Map(map) => visitor.visit_map(map),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        if self.0.is_null() {
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        visitor.visit_newtype_struct(self)
    }

    /// Enums (only their own visitors ask for this) read as `serde_json` reads them.
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        self.0
            .deserialize_enum(name, variants, visitor)
            .map_err(json_error)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_unit()
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple tuple_struct map struct identifier
    }
}

/// What an embedded JSON value presents (outside the generic visit).
enum JsonForm {
    Unit,
    Bool(bool),
    U64(u64),
    I64(i64),
    F64(f64),
    String(String),
    Seq(Seq<'static, 'static>),
    Map(Map<'static, 'static>),
}

impl Json {
    #[inline(never)]
    fn open(self) -> JsonForm {
        use serde_json::Value as J;
        match self.0 {
            J::Null => JsonForm::Unit,
            J::Bool(b) => JsonForm::Bool(b),
            J::Number(n) => match (n.as_u64(), n.as_i64()) {
                (Some(u), _) => JsonForm::U64(u),
                (None, Some(i)) => JsonForm::I64(i),
                (None, None) => JsonForm::F64(n.as_f64().unwrap_or(f64::NAN)),
            },
            J::String(s) => JsonForm::String(s),
            J::Array(a) => JsonForm::Seq(Seq::Json(a.into_iter())),
            J::Object(m) => JsonForm::Map(Map::Json(JsonMap {
                iter: m.into_iter(),
                value: None,
            })),
        }
    }
}

/// An embedded JSON object's members.
struct JsonMap {
    iter: serde_json::map::IntoIter,
    value: Option<serde_json::Value>,
}

/// A map key: a field's JSON name, or a map entry's key as text (JSON keys are strings).
enum Key<'de> {
    Str(&'de str),
    Owned(String),
}

impl<'de> Deserializer<'de> for Key<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self {
            Key::Str(s) => visitor.visit_borrowed_str(s),
            Key::Owned(s) => visitor.visit_string(s),
        }
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map
        struct enum identifier ignored_any
    }
}

/// A map entry's key as its JSON text.
fn key_text<'de>(s: Scalar, d: Data<'de>) -> Result<Key<'de>> {
    let v = match d {
        Data::Varint(v) | Data::Fixed64(v) => v,
        Data::Fixed32(v) => u64::from(v),
        Data::Zero => 0,
        Data::Bytes(b) => {
            return match s {
                Scalar::String => Ok(match std::str::from_utf8(b) {
                    Ok(text) => Key::Str(text),
                    Err(_) => Key::Owned(String::from_utf8_lossy(b).into_owned()),
                }),
                Scalar::Bytes => Ok(Key::Owned(
                    base64::engine::general_purpose::STANDARD.encode(b),
                )),
                _ => Err(Error::new(format!(
                    "a length-delimited value for a {s:?} map key"
                ))),
            };
        }
    };
    Ok(Key::Owned(match s {
        Scalar::Bool => (v != 0).to_string(),
        Scalar::Int32 | Scalar::Sfixed32 => (v as i32).to_string(),
        Scalar::Int64 | Scalar::Sfixed64 => (v as i64).to_string(),
        Scalar::Sint32 => zigzag32(v).to_string(),
        Scalar::Sint64 => zigzag64(v).to_string(),
        Scalar::Uint32 | Scalar::Fixed32 => (v as u32).to_string(),
        Scalar::String | Scalar::Bytes => String::new(),
        _ => v.to_string(),
    }))
}

/// A string value that is not on the wire (a body's `apiVersion` and `kind`), through
/// the deserializer scalars use rather than one more deserializer type per target.
fn text(s: &str) -> ScalarDe<'_> {
    ScalarDe {
        s: Scalar::String,
        d: Data::Bytes(s.as_bytes()),
    }
}

/// A list body as a map: apiVersion, kind, metadata, items.
struct ListMap<'de> {
    schema: &'static Schema,
    header: [(&'static str, &'de str); 2],
    meta: usize,
    meta_bytes: &'de [u8],
    item: usize,
    items: Vec<Entry<'de>>,
    state: u8,
    depth: usize,
}

impl<'de> ListMap<'de> {
    fn next_key(&mut self) -> Option<Key<'de>> {
        Some(Key::Str(match self.state {
            0 | 1 => self.header[usize::from(self.state)].0,
            2 => "metadata",
            3 => "items",
            _ => return None,
        }))
    }

    fn next_value<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value> {
        let state = self.state;
        self.state += 1;
        match state {
            0 | 1 => seed.deserialize(text(self.header[usize::from(state)].1)),
            2 => seed
                .deserialize(Msg {
                    schema: self.schema,
                    idx: self.meta,
                    data: self.meta_bytes,
                    depth: self.depth + 1,
                })
                .map_err(|e| e.at("metadata")),
            _ => {
                let items = std::mem::take(&mut self.items);
                seed.deserialize(Repeated {
                    schema: self.schema,
                    ty: Type::Message(self.item),
                    entries: &items,
                    depth: self.depth,
                })
            }
        }
    }
}

/// One occurrence of a field on the wire.
#[derive(Clone, Copy)]
struct Entry<'de> {
    /// The message the field belongs to (the parent, or a struct inlined into it).
    owner: u32,
    /// Index into the owner's `fields`.
    field: u32,
    data: Data<'de>,
}

#[derive(Clone, Copy)]
enum Data<'de> {
    Varint(u64),
    Fixed32(u32),
    Fixed64(u64),
    Bytes(&'de [u8]),
    /// Not on the wire: a non-pointer scalar that reads as its zero value.
    Zero,
}

impl Data<'_> {
    fn is_zero(&self) -> bool {
        match self {
            Data::Varint(v) | Data::Fixed64(v) => *v == 0,
            Data::Fixed32(v) => *v == 0,
            Data::Bytes(b) => b.is_empty(),
            Data::Zero => true,
        }
    }
}

#[inline(always)]
fn read_data<'de>(r: &mut Reader<'de>, wire: u8) -> Result<Data<'de>> {
    Ok(match wire {
        0 => Data::Varint(r.varint()?),
        1 => Data::Fixed64(r.fixed64()?),
        2 => Data::Bytes(r.bytes()?),
        5 => Data::Fixed32(r.fixed32()?),
        _ => return Err(Error::new(format!("unsupported wire type {wire}"))),
    })
}

/// Collects the fields of message `idx` (and of the structs inlined into it).
fn scan<'de>(
    schema: &'static Schema,
    idx: usize,
    data: &'de [u8],
    depth: usize,
    out: &mut Vec<Entry<'de>>,
) -> Result<()> {
    if depth > MAX_DEPTH {
        return Err(Error::new(format!(
            "messages are nested more than {MAX_DEPTH} deep"
        )));
    }
    let msg = &schema.messages[idx];
    let mut r = Reader::new(data);
    while let Some((num, wire)) = r.key()? {
        let Some(fi) = msg.field_index(num) else {
            r.skip(wire)?;
            continue;
        };
        let field = &msg.fields[fi];
        if !field.accepts(wire) {
            return Err(wire_error(schema, field, wire).at(&field.json));
        }
        let d = read_data(&mut r, wire).map_err(|e| e.at(&field.json))?;
        if field.flags & F_INLINE != 0
            && let (Type::Message(inner), Data::Bytes(b)) = (&field.ty, d)
            && schema.messages[*inner].special == Special::None
        {
            scan(schema, *inner, b, depth + 1, out).map_err(|e| e.at(&field.json))?;
            continue;
        }
        out.push(Entry {
            owner: idx as u32,
            field: fi as u32,
            data: d,
        });
    }
    // An absent inlined struct is Go's zero value: its fields' defaults still apply.
    // (A present one left entries, its defaults at least, unless it has no defaults.)
    for &fi in &msg.inlined {
        let field = &msg.fields[fi];
        if let Type::Message(inner) = field.ty
            && schema.messages[inner].special == Special::None
            && !out.iter().any(|e| e.owner == inner as u32)
        {
            scan(schema, inner, &[], depth + 1, out).map_err(|e| e.at(&field.json))?;
        }
    }
    let owner = idx as u32;
    for &fi in &msg.defaults {
        let field = fi as u32;
        if !out.iter().any(|e| e.owner == owner && e.field == field) {
            out.push(Entry {
                owner,
                field,
                data: Data::Zero,
            });
        }
    }
    Ok(())
}

#[cold]
fn wire_error(schema: &Schema, field: &Field, wire: u8) -> Error {
    let ty = match &field.ty {
        Type::Scalar(s) => format!("{s:?}").to_lowercase(),
        Type::Message(m) => schema.messages[*m].name.clone(),
        Type::Map(..) => "map".into(),
    };
    Error::new(format!(
        "wire type {wire} does not match the field type {ty}"
    ))
}

thread_local! {
    /// Field buffers, reused by every message of every decode on this thread (a decode
    /// holds one per nesting level): in the steady state the decoder allocates nothing
    /// of its own, only what the target type does.
    static BUFFERS: std::cell::RefCell<Vec<Vec<Entry<'static>>>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Buffers kept per thread, and the largest kept (in entries; an entry is 32 bytes).
const BUFFERS_KEPT: usize = 32;
const BUFFER_MAX: usize = 1024;

fn take_buffer<'de>() -> Vec<Entry<'de>> {
    BUFFERS
        .try_with(|b| b.borrow_mut().pop())
        .ok()
        .flatten()
        .unwrap_or_else(|| Vec::with_capacity(32))
}

fn give_back(mut entries: Vec<Entry<'_>>) {
    if entries.capacity() == 0 || entries.capacity() > BUFFER_MAX {
        return;
    }
    entries.clear();
    // The empty buffer, relabelled to outlive the body: collecting an emptied
    // `vec::IntoIter` into elements of the same layout reuses its allocation.
    #[allow(
        clippy::unnecessary_filter_map,
        reason = "it changes the element lifetime"
    )]
    let entries: Vec<Entry<'static>> = entries.into_iter().filter_map(|_| None).collect();
    let _ = BUFFERS.try_with(|b| {
        let mut b = b.borrow_mut();
        if b.len() < BUFFERS_KEPT {
            b.push(entries);
        }
    });
}

/// A message as a map of its JSON keys.
struct Fields<'de> {
    schema: &'static Schema,
    entries: Vec<Entry<'de>>,
    pos: usize,
    /// The group chosen by the last key.
    pending: (usize, usize),
    header: Option<[(&'static str, &'de str); 2]>,
    header_pos: usize,
    depth: usize,
}

impl<'de> Fields<'de> {
    fn new(
        schema: &'static Schema,
        idx: usize,
        data: &'de [u8],
        depth: usize,
        header: Option<[(&'static str, &'de str); 2]>,
    ) -> Result<Self> {
        let mut entries = take_buffer();
        scan(schema, idx, data, depth, &mut entries)?;
        Ok(Self::finish(schema, entries, depth, header))
    }

    /// A singular message that occurs several times: protobuf merges the occurrences
    /// (repeated fields concatenate, the last scalar wins, nested messages merge).
    fn new_parts(
        schema: &'static Schema,
        idx: usize,
        parts: &[Entry<'de>],
        depth: usize,
    ) -> Result<Self> {
        let mut entries = take_buffer();
        for part in parts {
            if let Data::Bytes(b) = part.data {
                scan(schema, idx, b, depth, &mut entries)?;
            }
        }
        Ok(Self::finish(schema, entries, depth, None))
    }

    fn finish(
        schema: &'static Schema,
        mut entries: Vec<Entry<'de>>,
        depth: usize,
        header: Option<[(&'static str, &'de str); 2]>,
    ) -> Self {
        if !entries
            .windows(2)
            .all(|w| (w[0].owner, w[0].field) <= (w[1].owner, w[1].field))
        {
            // Occurrences of one field are grouped; encoders that interleave them (and
            // inlined structs) are put in order. Stable: the last occurrence wins.
            entries.sort_by_key(|e| (e.owner, e.field));
        }
        Self {
            schema,
            entries,
            pos: 0,
            pending: (0, 0),
            header,
            header_pos: 0,
            depth,
        }
    }

    fn field(&self, e: &Entry<'_>) -> &'static Field {
        &self.schema.messages[e.owner as usize].fields[e.field as usize]
    }

    /// Whether Go's JSON encoding leaves this field out.
    fn omitted(&self, field: &Field, group: &[Entry<'de>]) -> Result<bool> {
        if field.flags & (F_OMIT_EMPTY | F_OMIT_ZERO) == 0 {
            return Ok(false);
        }
        let Some(last) = group.last() else {
            return Ok(true);
        };
        Ok(match &field.ty {
            _ if field.flags & F_REPEATED != 0 => empty_packed(field, group),
            Type::Scalar(_) => last.data.is_zero(),
            Type::Map(..) => false,
            // A pointer to a struct is written when set, even empty; a struct with
            // `omitzero` only when not zero.
            Type::Message(m) => {
                field.flags & F_OMIT_ZERO != 0 && {
                    let Data::Bytes(b) = last.data else {
                        return Ok(true);
                    };
                    group.len() == 1 && zero_message(self.schema, *m, b, self.depth + 1)?
                }
            }
        })
    }
}

impl Drop for Fields<'_> {
    fn drop(&mut self) {
        give_back(std::mem::take(&mut self.entries));
    }
}

/// Whether a repeated numeric field holds only empty packed runs (nothing).
fn empty_packed(field: &Field, group: &[Entry<'_>]) -> bool {
    matches!(field.ty, Type::Scalar(s) if s.wire_type() != 2)
        && group
            .iter()
            .all(|e| matches!(e.data, Data::Bytes(b) if b.is_empty()))
}

/// Whether a message decodes to its Go zero value (or, for Time, null).
fn zero_message(schema: &Schema, idx: usize, data: &[u8], depth: usize) -> Result<bool> {
    if data.is_empty() {
        return Ok(true);
    }
    if depth > MAX_DEPTH {
        return Err(Error::new(format!(
            "messages are nested more than {MAX_DEPTH} deep"
        )));
    }
    let msg = &schema.messages[idx];
    let mut r = Reader::new(data);
    while let Some((num, wire)) = r.key()? {
        let d = read_data(&mut r, wire)?;
        let Some(fi) = msg.field_index(num) else {
            continue;
        };
        let field = &msg.fields[fi];
        let zero = match (&field.ty, d) {
            _ if field.flags & F_REPEATED != 0 => false,
            (Type::Message(m), Data::Bytes(b)) => zero_message(schema, *m, b, depth + 1)?,
            (Type::Map(..), _) => false,
            (_, d) => d.is_zero(),
        };
        if !zero {
            return Ok(false);
        }
    }
    Ok(true)
}

impl<'de> Fields<'de> {
    #[inline(always)]
    fn next_key(&mut self) -> Result<Option<&'static str>> {
        if let Some(h) = &self.header
            && self.header_pos < 2
        {
            return Ok(Some(h[self.header_pos].0));
        }
        while self.pos < self.entries.len() {
            let start = self.pos;
            let first = self.entries[start];
            let mut end = start + 1;
            while end < self.entries.len()
                && self.entries[end].owner == first.owner
                && self.entries[end].field == first.field
            {
                end += 1;
            }
            self.pos = end;
            let field = self.field(&first);
            if self.omitted(field, &self.entries[start..end])? {
                continue;
            }
            self.pending = (start, end);
            return Ok(Some(&field.json));
        }
        Ok(None)
    }

    #[inline(always)]
    fn next_value<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value> {
        if let Some(h) = &self.header
            && self.header_pos < 2
        {
            let value = h[self.header_pos].1;
            self.header_pos += 1;
            return seed.deserialize(text(value));
        }
        let (start, end) = self.pending;
        let group = &self.entries[start..end];
        let Some(first) = group.first() else {
            return Err(Error::new("a value was asked for before its key"));
        };
        let field = self.field(first);
        seed.deserialize(Value {
            schema: self.schema,
            field,
            group,
            depth: self.depth,
        })
        .map_err(|e| e.at(&field.json))
    }
}

/// The value of one field: every occurrence of it in the message.
struct Value<'a, 'de> {
    schema: &'static Schema,
    field: &'static Field,
    group: &'a [Entry<'de>],
    depth: usize,
}

impl<'a, 'de> Value<'a, 'de> {
    #[inline(always)]
    fn last(&self) -> Data<'de> {
        self.group.last().map_or(Data::Zero, |e| e.data)
    }

    fn is_null(&self) -> Result<bool> {
        if self.field.flags & F_REPEATED != 0 {
            return Ok(false);
        }
        match (&self.field.ty, self.last()) {
            (Type::Message(m), Data::Bytes(b)) if self.group.len() == 1 => Msg {
                schema: self.schema,
                idx: *m,
                data: b,
                depth: self.depth + 1,
            }
            .is_null(),
            _ => Ok(false),
        }
    }
}

impl<'de> Deserializer<'de> for Value<'_, 'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        let field = self.field;
        if field.flags & F_REPEATED != 0 {
            return Repeated {
                schema: self.schema,
                ty: field.ty.clone(),
                entries: self.group,
                depth: self.depth,
            }
            .deserialize_any(visitor);
        }
        match &field.ty {
            Type::Scalar(s) => scalar(*s, self.last(), visitor),
            Type::Map(ks, vt) => visitor.visit_map(Map::Entries(MapEntries {
                schema: self.schema,
                key: *ks,
                value: vt,
                entries: self.group,
                pos: 0,
                value_bytes: None,
                depth: self.depth,
            })),
            Type::Message(m) => {
                if self.group.len() > 1 && self.schema.messages[*m].special == Special::None {
                    // Go's encoders never write a singular message twice; protobuf merges.
                    return visitor.visit_map(Map::Fields(Fields::new_parts(
                        self.schema,
                        *m,
                        self.group,
                        self.depth + 1,
                    )?));
                }
                let data = match self.last() {
                    Data::Bytes(b) => b,
                    _ => &[],
                };
                Msg {
                    schema: self.schema,
                    idx: *m,
                    data,
                    depth: self.depth + 1,
                }
                .deserialize_any(visitor)
            }
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        if self.is_null()? {
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        visitor.visit_newtype_struct(self)
    }

    skip_ignored_and_forward_the_rest!();
}

fn json_error(e: serde_json::Error) -> Error {
    Error::new(e.to_string())
}

/// A scalar as its JSON value.
fn scalar<'de, V: Visitor<'de>>(s: Scalar, d: Data<'de>, visitor: V) -> Result<V::Value> {
    let (v, f32v, f64v) = match d {
        Data::Varint(v) => (v, 0, v),
        Data::Fixed32(v) => (u64::from(v), v, 0),
        Data::Fixed64(v) => (v, 0, v),
        Data::Zero => (0, 0, 0),
        Data::Bytes(b) => {
            return match s {
                Scalar::String => match std::str::from_utf8(b) {
                    Ok(text) => visitor.visit_borrowed_str(text),
                    // Go's JSON encoder writes invalid UTF-8 as U+FFFD.
                    Err(_) => visitor.visit_string(String::from_utf8_lossy(b).into_owned()),
                },
                Scalar::Bytes => {
                    visitor.visit_string(base64::engine::general_purpose::STANDARD.encode(b))
                }
                _ => Err(Error::new(format!(
                    "a length-delimited value for a {s:?} field"
                ))),
            };
        }
    };
    match s {
        Scalar::Int32 | Scalar::Sfixed32 => visitor.visit_i32(v as i32),
        Scalar::Int64 | Scalar::Sfixed64 => visitor.visit_i64(v as i64),
        Scalar::Uint32 | Scalar::Fixed32 => visitor.visit_u32(v as u32),
        Scalar::Uint64 | Scalar::Fixed64 => visitor.visit_u64(v),
        Scalar::Sint32 => visitor.visit_i32(zigzag32(v)),
        Scalar::Sint64 => visitor.visit_i64(zigzag64(v)),
        Scalar::Bool => visitor.visit_bool(v != 0),
        Scalar::Float => visitor.visit_f64(float(s, u64::from(f32v))?),
        Scalar::Double => visitor.visit_f64(float(s, f64v)?),
        Scalar::String => visitor.visit_borrowed_str(""),
        Scalar::Bytes => visitor.visit_borrowed_str(""),
    }
}

/// A float or double field's value as JSON has it (finite only).
#[inline(never)]
fn float(s: Scalar, bits: u64) -> Result<f64> {
    let f = if s == Scalar::Float {
        let f = f32::from_bits(bits as u32);
        // Go prints a float32 with float32 precision.
        f.to_string().parse::<f64>().unwrap_or(f64::from(f))
    } else {
        f64::from_bits(bits)
    };
    if !f.is_finite() {
        return Err(Error::new(format!("unsupported float value {f}")));
    }
    Ok(f)
}

fn zigzag32(v: u64) -> i32 {
    let v = v as u32;
    ((v >> 1) as i32) ^ -((v & 1) as i32)
}

fn zigzag64(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// A scalar value on its own (map keys and values, packed elements).
struct ScalarDe<'de> {
    s: Scalar,
    d: Data<'de>,
}

impl<'de> Deserializer<'de> for ScalarDe<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        scalar(self.s, self.d, visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        visitor.visit_newtype_struct(self)
    }

    skip_ignored_and_forward_the_rest!();
}

/// One message: a map of fields, or the JSON form of a special type.
struct Msg<'de> {
    schema: &'static Schema,
    idx: usize,
    data: &'de [u8],
    depth: usize,
}

impl<'de> Msg<'de> {
    fn special(&self) -> Special {
        self.schema.messages[self.idx].special
    }

    /// Whether the JSON form is `null`.
    fn is_null(&self) -> Result<bool> {
        Ok(match self.special() {
            Special::Time | Special::MicroTime => self.data.is_empty(),
            Special::RawJson => raw_bytes(self.data)?.is_empty(),
            Special::PropsOrArray | Special::PropsOrStringArray => {
                self.alternative(&self.own_fields()?).is_none()
            }
            _ => false,
        })
    }

    /// The fields of this message, grouped by field.
    fn own_fields(&self) -> Result<Vec<Entry<'de>>> {
        let mut entries = Vec::new();
        scan(self.schema, self.idx, self.data, self.depth, &mut entries)?;
        entries.sort_by_key(|e| (e.owner, e.field));
        Ok(entries)
    }

    /// The value of field `json` among `entries`, when present and not empty.
    fn group<'a>(&self, entries: &'a [Entry<'de>], json: &str) -> Option<Value<'a, 'de>> {
        let msg = &self.schema.messages[self.idx];
        let fi = msg.fields.iter().position(|f| f.json == json)?;
        let start = entries
            .iter()
            .position(|e| e.owner as usize == self.idx && e.field as usize == fi)?;
        let len = entries[start..]
            .iter()
            .take_while(|e| e.owner as usize == self.idx && e.field as usize == fi)
            .count();
        let group = &entries[start..start + len];
        if msg.fields[fi].flags & F_REPEATED != 0 && empty_packed(&msg.fields[fi], group) {
            return None;
        }
        Some(Value {
            schema: self.schema,
            field: &msg.fields[fi],
            group,
            depth: self.depth,
        })
    }

    /// Of a `JSONSchemaPropsOrArray` (`JSONSchemaPropsOrStringArray`): the list of
    /// schemas (of strings) if not empty, else the schema; None reads as null.
    fn alternative<'a>(&self, entries: &'a [Entry<'de>]) -> Option<Value<'a, 'de>> {
        let list = if self.special() == Special::PropsOrArray {
            "jSONSchemas"
        } else {
            "property"
        };
        self.group(entries, list)
            .or_else(|| self.group(entries, "schema"))
    }

    /// The types whose JSON form is a union or a bare list: the apiextensions
    /// `JSONSchemaPropsOr*` and slice wrappers such as `ExtraValue`.
    fn union<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        let entries = self.own_fields()?;
        match self.union_pick(&entries) {
            Ok(value) => value.deserialize_any(visitor),
            Err(Some(json)) => json.deserialize_any(visitor),
            Err(None) => visitor.visit_seq(Seq::Elements(Elements::new(
                self.schema,
                Type::Scalar(Scalar::String),
                &[],
                self.depth,
            ))),
        }
    }

    /// What a union or slice type reads as (outside the generic visit): one of its
    /// fields, null or a boolean, or (`None`) the empty list.
    fn union_pick<'a>(&self, entries: &'a [Entry<'de>]) -> Result<Value<'a, 'de>, Option<Json>> {
        match self.special() {
            Special::PropsOrArray | Special::PropsOrStringArray => self
                .alternative(entries)
                .ok_or(Some(Json(serde_json::Value::Null))),
            // The schema if any, else the boolean.
            Special::PropsOrBool => self.group(entries, "schema").ok_or_else(|| {
                Some(Json(serde_json::Value::Bool(
                    self.group(entries, "allows")
                        .is_some_and(|v| !v.last().is_zero()),
                )))
            }),
            // A slice type: its items.
            _ => self.group(entries, "items").ok_or(None),
        }
    }

    /// An embedded object: JSON (empty reads as null), or protobuf with its own envelope.
    fn raw_json(&self) -> Result<Result<Json, Top<'de>>> {
        let raw = raw_bytes(self.data)?;
        if raw.is_empty() {
            return Ok(Ok(Json(serde_json::Value::Null)));
        }
        if raw.starts_with(MAGIC) {
            return Ok(Err(Top::parse(raw, self.depth + 1)?));
        }
        serde_json::from_slice(raw)
            .map(|v| Ok(Json(v)))
            .map_err(json_error)
    }
}

/// The JSON form of a message that reads as a scalar: Time, MicroTime, Duration,
/// IntOrString and Quantity.
enum Form<'de> {
    Null,
    Stamp(Stamp),
    Owned(String),
    Borrowed(&'de str),
    Int(i32),
}

impl<'de> Msg<'de> {
    /// The scalar form of this message, worked out once for every target type (the
    /// generic visit only hands it over).
    #[inline(never)]
    fn form(&self) -> Result<Form<'de>> {
        let (ints, bytes) = small(self.data)?;
        Ok(match self.special() {
            Special::Time | Special::MicroTime => {
                if self.data.is_empty() {
                    return Ok(Form::Null);
                }
                let micro = self.special() == Special::MicroTime;
                let secs = i128::from(ints[1] as i64);
                let nanos = if micro {
                    let n = i64::from(ints[2] as i32);
                    i128::from(n - n % 1000)
                } else {
                    // Kubernetes drops the nanoseconds of a Time.
                    0
                };
                Form::Stamp(Stamp::new(secs * 1_000_000_000 + nanos, micro)?)
            }
            Special::Duration => Form::Owned(go_duration(ints[1] as i64)),
            Special::IntOrString => match ints[1] {
                0 => Form::Int(ints[2] as i32),
                1 => match std::str::from_utf8(bytes[3]) {
                    Ok(s) => Form::Borrowed(s),
                    Err(_) => Form::Owned(String::from_utf8_lossy(bytes[3]).into_owned()),
                },
                t => return Err(Error::new(format!("impossible IntOrString type {t}"))),
            },
            Special::Quantity => match std::str::from_utf8(bytes[1]) {
                Ok("") => Form::Borrowed("0"),
                Ok(s) => Form::Borrowed(s),
                Err(_) => return Err(Error::new("a Quantity is not UTF-8")),
            },
            other => return Err(Error::new(format!("{other:?} is not a scalar form"))),
        })
    }
}

/// The `raw` bytes (field 1) of a RawExtension-like message.
fn raw_bytes(data: &[u8]) -> Result<&[u8]> {
    let mut raw: &[u8] = &[];
    let mut r = Reader::new(data);
    while let Some((num, wire)) = r.key()? {
        match (num, wire) {
            (1, 2) => raw = r.bytes()?,
            _ => r.skip(wire)?,
        }
    }
    Ok(raw)
}

/// Reads varint fields 1..3 and bytes fields 1..3 of a small message.
fn small(data: &[u8]) -> Result<([u64; 4], [&[u8]; 4])> {
    let mut ints = [0u64; 4];
    let mut bytes: [&[u8]; 4] = [&[]; 4];
    let mut r = Reader::new(data);
    while let Some((num, wire)) = r.key()? {
        let slot = num as usize;
        match wire {
            0 if slot < 4 => ints[slot] = r.varint()?,
            2 if slot < 4 => bytes[slot] = r.bytes()?,
            _ => r.skip(wire)?,
        }
    }
    Ok((ints, bytes))
}

impl<'de> Deserializer<'de> for Msg<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.special() {
            Special::None => visitor.visit_map(Map::Fields(Fields::new(
                self.schema,
                self.idx,
                self.data,
                self.depth,
                None,
            )?)),
            Special::Time
            | Special::MicroTime
            | Special::Duration
            | Special::IntOrString
            | Special::Quantity => match self.form()? {
                Form::Null => visitor.visit_unit(),
                Form::Stamp(s) => visitor.visit_str(s.as_str()),
                Form::Owned(s) => visitor.visit_string(s),
                Form::Borrowed(s) => visitor.visit_borrowed_str(s),
                Form::Int(i) => visitor.visit_i32(i),
            },
            Special::RawJson => match self.raw_json()? {
                Ok(json) => json.deserialize_any(visitor),
                Err(top) => top.deserialize_any(visitor),
            },
            Special::PropsOrArray
            | Special::PropsOrBool
            | Special::PropsOrStringArray
            | Special::Wrapper => self.union(visitor),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        if self.is_null()? {
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        if name == crate::RAW_MESSAGE && self.special() == Special::None {
            return visitor.visit_borrowed_bytes(self.data);
        }
        visitor.visit_newtype_struct(self)
    }

    skip_ignored_and_forward_the_rest!();
}

/// A repeated field: its occurrences (packed scalars expanded) as a sequence.
struct Repeated<'a, 'de> {
    schema: &'static Schema,
    ty: Type,
    entries: &'a [Entry<'de>],
    depth: usize,
}

impl<'de> Deserializer<'de> for Repeated<'_, 'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_seq(Seq::Elements(Elements::new(
            self.schema,
            self.ty,
            self.entries,
            self.depth,
        )))
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        visitor.visit_newtype_struct(self)
    }

    skip_ignored_and_forward_the_rest!();
}

struct Elements<'a, 'de> {
    schema: &'static Schema,
    ty: Type,
    entries: &'a [Entry<'de>],
    pos: usize,
    /// The rest of a packed run of scalars.
    packed: Option<Reader<'de>>,
    index: usize,
    depth: usize,
}

/// Every sequence this format presents, as one `SeqAccess` type.
enum Seq<'a, 'de> {
    Elements(Elements<'a, 'de>),
    Json(std::vec::IntoIter<serde_json::Value>),
}

impl<'de> SeqAccess<'de> for Seq<'_, 'de> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>> {
        match self {
            Seq::Elements(e) => e.next_element(seed),
            Seq::Json(it) => match it.next() {
                Some(v) => seed.deserialize(Json(v)).map(Some),
                None => Ok(None),
            },
        }
    }

    fn size_hint(&self) -> Option<usize> {
        match self {
            // One element per entry, except in packed runs of numbers.
            Seq::Elements(e) => match e.ty {
                Type::Message(_) => Some(e.entries.len() - e.pos),
                Type::Scalar(s) if s.wire_type() == 2 => Some(e.entries.len() - e.pos),
                _ => None,
            },
            Seq::Json(it) => Some(it.len()),
        }
    }
}

impl<'a, 'de> Elements<'a, 'de> {
    fn new(schema: &'static Schema, ty: Type, entries: &'a [Entry<'de>], depth: usize) -> Self {
        Self {
            schema,
            ty,
            entries,
            pos: 0,
            packed: None,
            index: 0,
            depth,
        }
    }

    #[inline(always)]
    fn next_element<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>> {
        let index = self.index;
        let at = |e: Error| e.at(&format!("[{index}]"));
        if let Type::Scalar(s) = self.ty {
            loop {
                if let Some(r) = &mut self.packed {
                    if !r.at_end() {
                        let d = read_data(r, s.wire_type()).map_err(at)?;
                        self.index += 1;
                        return seed.deserialize(ScalarDe { s, d }).map(Some).map_err(at);
                    }
                    self.packed = None;
                }
                let Some(e) = self.entries.get(self.pos) else {
                    return Ok(None);
                };
                self.pos += 1;
                match e.data {
                    Data::Bytes(b) if s.wire_type() != 2 => self.packed = Some(Reader::new(b)),
                    d => {
                        self.index += 1;
                        return seed.deserialize(ScalarDe { s, d }).map(Some).map_err(at);
                    }
                }
            }
        }
        let Some(e) = self.entries.get(self.pos) else {
            return Ok(None);
        };
        self.pos += 1;
        self.index += 1;
        let Type::Message(m) = self.ty else {
            return Err(Error::new("nested maps are not supported"));
        };
        let data = match e.data {
            Data::Bytes(b) => b,
            _ => &[],
        };
        let v = seed.deserialize(Msg {
            schema: self.schema,
            idx: m,
            data,
            depth: self.depth + 1,
        });
        v.map(Some).map_err(at)
    }
}

/// A map field: its entries (`{key = 1; value = 2}` messages).
struct MapEntries<'a, 'de> {
    schema: &'static Schema,
    key: Scalar,
    value: &'static Type,
    entries: &'a [Entry<'de>],
    pos: usize,
    value_bytes: Option<Data<'de>>,
    depth: usize,
}

impl<'de> MapEntries<'_, 'de> {
    fn next_key(&mut self) -> Result<Option<Key<'de>>> {
        let Some(e) = self.entries.get(self.pos) else {
            return Ok(None);
        };
        self.pos += 1;
        let Data::Bytes(entry) = e.data else {
            return Err(Error::new("a map entry that is not a message"));
        };
        let mut key = Data::Zero;
        let mut value = Data::Zero;
        let mut r = Reader::new(entry);
        while let Some((num, wire)) = r.key()? {
            match num {
                1 => {
                    if wire != self.key.wire_type() {
                        return Err(Error::new(format!(
                            "wire type {wire} is wrong for a map key"
                        )));
                    }
                    key = read_data(&mut r, wire)?;
                }
                2 => {
                    let want = match self.value {
                        Type::Scalar(s) => s.wire_type(),
                        _ => 2,
                    };
                    if wire != want {
                        return Err(Error::new(format!(
                            "wire type {wire} is wrong for a map value"
                        )));
                    }
                    value = read_data(&mut r, wire)?;
                }
                _ => r.skip(wire)?,
            }
        }
        self.value_bytes = Some(value);
        key_text(self.key, key).map(Some)
    }

    fn next_value<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value> {
        let d = self.value_bytes.take().unwrap_or(Data::Zero);
        match self.value {
            Type::Scalar(s) => seed.deserialize(ScalarDe { s: *s, d }),
            Type::Message(m) => seed.deserialize(Msg {
                schema: self.schema,
                idx: *m,
                data: match d {
                    Data::Bytes(b) => b,
                    _ => &[],
                },
                depth: self.depth + 1,
            }),
            Type::Map(..) => Err(Error::new("nested maps are not supported")),
        }
    }
}

/// The object's message (the `raw` of its envelope, or a list item) with
/// `metadata.managedFields` left out: every other byte is copied as it is. Objects of
/// every built-in kind carry their `ObjectMeta` as field 1, and `managedFields` is its
/// field 17.
pub fn strip_managed_fields(raw: &[u8]) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(raw.len());
    let mut r = Reader::new(raw);
    loop {
        let start = r.pos;
        let Some((num, wire)) = r.key()? else { break };
        if (num, wire) != (1, 2) {
            r.skip(wire)?;
            out.extend_from_slice(&raw[start..r.pos]);
            continue;
        }
        let meta = r.bytes()?;
        let mut kept = Vec::with_capacity(meta.len());
        let mut m = Reader::new(meta);
        loop {
            let s = m.pos;
            let Some((n, w)) = m.key()? else { break };
            m.skip(w)?;
            if n != 17 {
                kept.extend_from_slice(&meta[s..m.pos]);
            }
        }
        crate::encode::ld(1, &kept, &mut out);
    }
    Ok(out)
}
