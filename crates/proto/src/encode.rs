//! JSON objects encoded as Kubernetes protobuf, the inverse of the decoder.
//!
//! Fields are written in ascending number order with Go's gogo-protobuf rules for the
//! Kubernetes types: non-pointer scalars always (their zero value when the JSON omits
//! them), pointer scalars and `[]byte` only when set, messages when the JSON carries
//! them (and non-pointer `omitzero` ones such as `creationTimestamp` always, empty when
//! zero), inlined structs from their parent's keys, map entries sorted by key, repeated
//! scalars unpacked.

use crate::schema::{SCHEMA, Scalar, Schema, Special, Target, Type};
use crate::{F_DEFAULT, F_INLINE, F_OMIT_EMPTY, F_OMIT_ZERO, F_REPEATED, MAGIC, MAX_DEPTH};
use base64::Engine as _;
use serde_json::Value;

/// Why an object could not be encoded.
#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    /// The kind has no protobuf message (custom resources, unknown kinds).
    #[error("no protobuf schema for kind {kind:?} in {api_version:?}")]
    NoSchema {
        /// The object's apiVersion.
        api_version: String,
        /// The object's kind.
        kind: String,
    },
    /// A value does not fit its field.
    #[error("cannot encode {path}: {msg}")]
    Value {
        /// Dotted JSON path of the field.
        path: String,
        /// What is wrong.
        msg: String,
    },
    /// The schema table failed to load.
    #[error("{0}")]
    Schema(String),
}

struct Bad {
    msg: String,
    path: Vec<String>,
}

impl Bad {
    fn new(msg: impl Into<String>) -> Self {
        Self {
            msg: msg.into(),
            path: Vec::new(),
        }
    }
    fn at(mut self, seg: &str) -> Self {
        self.path.push(seg.to_string());
        self
    }
}

type Res<T = ()> = std::result::Result<T, Bad>;

/// Whether objects of this apiVersion and kind (or the list kind `<Kind>List`) can be
/// encoded as protobuf.
pub fn supports(api_version: &str, kind: &str) -> bool {
    let Ok(schema) = SCHEMA.as_ref() else {
        return false;
    };
    schema.target(api_version, kind).is_some()
}

/// Encodes an object (or a `<Kind>List` of a known kind) with its `apiVersion` and
/// `kind` as a Kubernetes protobuf body: `k8s\0` + `runtime.Unknown`.
pub fn encode(obj: &Value) -> Result<Vec<u8>, EncodeError> {
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    let raw = encode_raw(obj, api_version, kind)?;
    Ok(envelope(api_version, kind, &raw))
}

/// The object's message without the envelope.
fn encode_raw(obj: &Value, api_version: &str, kind: &str) -> Result<Vec<u8>, EncodeError> {
    let schema = SCHEMA
        .as_ref()
        .map_err(|e| EncodeError::Schema(e.clone()))?;
    let no_schema = || EncodeError::NoSchema {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
    };
    let mut out = Vec::new();
    let result = match schema.target(api_version, kind).ok_or_else(no_schema)? {
        Target::Message(idx) => message(schema, idx, obj, &mut out, 1),
        Target::List { item, meta } => list(schema, meta, item, obj, &mut out),
    };
    result.map_err(|b| {
        let path: Vec<&str> = b.path.iter().rev().map(String::as_str).collect();
        EncodeError::Value {
            path: if path.is_empty() {
                "the object".into()
            } else {
                path.join(".")
            },
            msg: b.msg,
        }
    })?;
    Ok(out)
}

fn list(schema: &Schema, meta: usize, item: usize, obj: &Value, out: &mut Vec<u8>) -> Res {
    let mut buf = Vec::new();
    message(
        schema,
        meta,
        obj.get("metadata").unwrap_or(&Value::Null),
        &mut buf,
        1,
    )
    .map_err(|e| e.at("metadata"))?;
    ld(1, &buf, out);
    if let Some(items) = obj.get("items").and_then(Value::as_array) {
        for (i, it) in items.iter().enumerate() {
            buf.clear();
            message(schema, item, it, &mut buf, 1).map_err(|e| e.at(&format!("items[{i}]")))?;
            ld(2, &buf, out);
        }
    }
    Ok(())
}

/// `k8s\0` + runtime.Unknown{typeMeta, raw, contentEncoding "", contentType ""}.
pub fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut tm = Vec::with_capacity(api_version.len() + kind.len() + 4);
    ld(1, api_version.as_bytes(), &mut tm);
    ld(2, kind.as_bytes(), &mut tm);
    let mut out = Vec::with_capacity(raw.len() + tm.len() + 16);
    out.extend_from_slice(MAGIC);
    ld(1, &tm, &mut out);
    ld(2, raw, &mut out);
    ld(3, b"", &mut out);
    ld(4, b"", &mut out);
    out
}

// ---------------------------------------------------------------------------------------
// Wire format
// ---------------------------------------------------------------------------------------

pub fn varint(mut v: u64, out: &mut Vec<u8>) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

pub fn key(num: u32, wire: u8, out: &mut Vec<u8>) {
    varint((u64::from(num) << 3) | u64::from(wire), out);
}

/// A length-delimited field.
pub fn ld(num: u32, data: &[u8], out: &mut Vec<u8>) {
    key(num, 2, out);
    varint(data.len() as u64, out);
    out.extend_from_slice(data);
}

/// Writes a length-delimited field whose content `f` appends to `out`.
fn ld_with(num: u32, out: &mut Vec<u8>, f: impl FnOnce(&mut Vec<u8>) -> Res) -> Res {
    let mut buf = Vec::new();
    f(&mut buf)?;
    ld(num, &buf, out);
    Ok(())
}

fn as_i64(v: &Value) -> Res<i64> {
    if let Some(i) = v.as_i64() {
        return Ok(i);
    }
    if let Some(u) = v.as_u64() {
        return Ok(u as i64);
    }
    match v.as_f64() {
        Some(f) if f.fract() == 0.0 && f.abs() < 9.3e18 => Ok(f as i64),
        _ => Err(Bad::new(format!("expected an integer, got {v}"))),
    }
}

fn scalar(num: u32, s: Scalar, v: &Value, out: &mut Vec<u8>) -> Res {
    key(num, s.wire_type(), out);
    scalar_value(s, v, out)
}

fn scalar_value(s: Scalar, v: &Value, out: &mut Vec<u8>) -> Res {
    match s {
        Scalar::Int32 => {
            let i = as_i64(v)?;
            let i = i32::try_from(i).map_err(|_| Bad::new(format!("{i} overflows int32")))?;
            varint(i64::from(i) as u64, out);
        }
        Scalar::Int64 => varint(as_i64(v)? as u64, out),
        Scalar::Uint32 | Scalar::Uint64 => {
            let u = v
                .as_u64()
                .ok_or_else(|| Bad::new(format!("expected an unsigned integer, got {v}")))?;
            varint(u, out);
        }
        Scalar::Sint32 | Scalar::Sint64 => {
            let i = as_i64(v)?;
            varint(((i << 1) ^ (i >> 63)) as u64, out);
        }
        Scalar::Bool => {
            let b = v
                .as_bool()
                .ok_or_else(|| Bad::new(format!("expected a boolean, got {v}")))?;
            varint(u64::from(b), out);
        }
        Scalar::Fixed32 | Scalar::Sfixed32 => {
            out.extend_from_slice(&(as_i64(v)? as u32).to_le_bytes());
        }
        Scalar::Fixed64 | Scalar::Sfixed64 => {
            out.extend_from_slice(&(as_i64(v)? as u64).to_le_bytes());
        }
        Scalar::Float => {
            let f = number(v)? as f32;
            out.extend_from_slice(&f.to_bits().to_le_bytes());
        }
        Scalar::Double => out.extend_from_slice(&number(v)?.to_bits().to_le_bytes()),
        Scalar::String => {
            let s = v
                .as_str()
                .ok_or_else(|| Bad::new(format!("expected a string, got {v}")))?;
            varint(s.len() as u64, out);
            out.extend_from_slice(s.as_bytes());
        }
        Scalar::Bytes => {
            let s = v
                .as_str()
                .ok_or_else(|| Bad::new(format!("expected base64 text, got {v}")))?;
            let b = base64::engine::general_purpose::STANDARD
                .decode(s)
                .map_err(|e| Bad::new(format!("invalid base64: {e}")))?;
            varint(b.len() as u64, out);
            out.extend_from_slice(&b);
        }
    }
    Ok(())
}

fn number(v: &Value) -> Res<f64> {
    v.as_f64()
        .ok_or_else(|| Bad::new(format!("expected a number, got {v}")))
}

// ---------------------------------------------------------------------------------------
// Messages
// ---------------------------------------------------------------------------------------

/// Appends the fields of message `idx` read from `v` (its JSON form) to `out`.
fn message(schema: &Schema, idx: usize, v: &Value, out: &mut Vec<u8>, depth: usize) -> Res {
    if depth > MAX_DEPTH {
        return Err(Bad::new(format!(
            "objects are nested more than {MAX_DEPTH} deep"
        )));
    }
    let msg = &schema.messages[idx];
    match msg.special {
        Special::None => {}
        Special::Time => return time(v, false, out),
        Special::MicroTime => return time(v, true, out),
        Special::Duration => return duration(v, out),
        Special::IntOrString => return int_or_string(v, out),
        Special::Quantity => return quantity(v, out),
        Special::RawJson => return raw_json(v, out),
        Special::Wrapper => {
            let items = v
                .as_array()
                .ok_or_else(|| Bad::new(format!("expected an array, got {v}")))?;
            for (i, it) in items.iter().enumerate() {
                scalar(1, Scalar::String, it, out).map_err(|e| e.at(&i.to_string()))?;
            }
            return Ok(());
        }
        Special::PropsOrArray | Special::PropsOrBool | Special::PropsOrStringArray => {
            return props_or(schema, msg.special, idx, v, out, depth);
        }
    }
    let obj = match v {
        Value::Object(o) => o,
        Value::Null => &serde_json::Map::new(),
        _ => return Err(Bad::new(format!("expected an object, got {v}"))),
    };
    for field in &msg.fields {
        let at = |e: Bad| e.at(&field.json);
        if field.flags & F_INLINE != 0 {
            if let Type::Message(m) = field.ty {
                ld_with(field.number, out, |b| message(schema, m, v, b, depth + 1))?;
            }
            continue;
        }
        let value = obj.get(&field.json).filter(|v| !v.is_null());
        match &field.ty {
            Type::Map(ks, vt) => {
                let Some(value) = value else { continue };
                let m = value
                    .as_object()
                    .ok_or_else(|| at(Bad::new(format!("expected an object, got {value}"))))?;
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort_unstable();
                for k in keys {
                    let ev = &m[k];
                    ld_with(field.number, out, |b| {
                        let kv = match ks {
                            Scalar::String => Value::String(k.clone()),
                            _ => serde_json::from_str(k)
                                .map_err(|_| Bad::new(format!("invalid map key {k:?}")))?,
                        };
                        scalar(1, *ks, &kv, b)?;
                        match &**vt {
                            Type::Scalar(s) => {
                                if !(ev.is_null() && *s == Scalar::Bytes) {
                                    scalar(2, *s, ev, b)?;
                                }
                                Ok(())
                            }
                            Type::Message(mi) => {
                                ld_with(2, b, |b| message(schema, *mi, ev, b, depth + 1))
                            }
                            Type::Map(..) => Err(Bad::new("nested maps are not supported")),
                        }
                    })
                    .map_err(|e| at(e.at(k)))?;
                }
            }
            Type::Scalar(s) if field.flags & F_REPEATED != 0 => {
                let Some(value) = value else { continue };
                let items = value
                    .as_array()
                    .ok_or_else(|| at(Bad::new(format!("expected an array, got {value}"))))?;
                for it in items {
                    scalar(field.number, *s, it, out).map_err(at)?;
                }
            }
            Type::Message(m) if field.flags & F_REPEATED != 0 => {
                let Some(value) = value else { continue };
                let items = value
                    .as_array()
                    .ok_or_else(|| at(Bad::new(format!("expected an array, got {value}"))))?;
                for it in items {
                    ld_with(field.number, out, |b| message(schema, *m, it, b, depth + 1))
                        .map_err(at)?;
                }
            }
            Type::Scalar(s) => match value {
                Some(v) => scalar(field.number, *s, v, out).map_err(at)?,
                None => {
                    // Pointers and []byte are written only when set; other scalars always.
                    let non_pointer = field.flags & (F_DEFAULT | F_OMIT_EMPTY | F_OMIT_ZERO) != 0;
                    if non_pointer && *s != Scalar::Bytes {
                        scalar(field.number, *s, &s.zero(), out).map_err(at)?;
                    }
                }
            },
            Type::Message(m) => {
                // A zero Time is `null` in JSON and an empty message in protobuf.
                let zero_time = obj.get(&field.json).is_some_and(Value::is_null)
                    && matches!(
                        schema.messages[*m].special,
                        Special::Time | Special::MicroTime
                    );
                if value.is_some() || zero_time || field.flags & F_OMIT_ZERO != 0 {
                    let v = value.unwrap_or(&Value::Null);
                    ld_with(field.number, out, |b| message(schema, *m, v, b, depth + 1))
                        .map_err(at)?;
                }
            }
        }
    }
    Ok(())
}

/// The apiextensions unions: JSONSchemaPropsOrArray {schema = 1, jSONSchemas = 2},
/// JSONSchemaPropsOrBool {allows = 1, schema = 2}, JSONSchemaPropsOrStringArray
/// {schema = 1, property = 2}.
fn props_or(
    schema: &Schema,
    special: Special,
    idx: usize,
    v: &Value,
    out: &mut Vec<u8>,
    depth: usize,
) -> Res {
    let msg = &schema.messages[idx];
    let props = msg
        .fields
        .iter()
        .find_map(|f| match f.ty {
            Type::Message(m) => Some(m),
            _ => None,
        })
        .ok_or_else(|| Bad::new("no JSONSchemaProps field"))?;
    let sub = |num: u32, v: &Value, out: &mut Vec<u8>| {
        ld_with(num, out, |b| message(schema, props, v, b, depth + 1))
    };
    match (special, v) {
        (Special::PropsOrBool, Value::Bool(b)) => {
            key(1, 0, out);
            varint(u64::from(*b), out);
        }
        (Special::PropsOrBool, Value::Object(_)) => {
            key(1, 0, out);
            varint(1, out);
            sub(2, v, out)?;
        }
        (Special::PropsOrArray, Value::Array(items)) => {
            for it in items {
                sub(2, it, out)?;
            }
        }
        (Special::PropsOrArray | Special::PropsOrStringArray, Value::Object(_)) => {
            sub(1, v, out)?;
        }
        (Special::PropsOrStringArray, Value::Array(items)) => {
            for it in items {
                scalar(2, Scalar::String, it, out)?;
            }
        }
        (_, Value::Null) => {}
        _ => return Err(Bad::new(format!("unexpected value {v}"))),
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Types with their own JSON form
// ---------------------------------------------------------------------------------------

/// metav1.Time {seconds = 1, nanos = 2} (whole seconds) and MicroTime (microseconds);
/// null is the zero time, an empty message.
fn time(v: &Value, micro: bool, out: &mut Vec<u8>) -> Res {
    let s = match v {
        Value::Null => return Ok(()),
        Value::String(s) if s.is_empty() => return Ok(()),
        Value::String(s) => s,
        _ => return Err(Bad::new(format!("expected a timestamp, got {v}"))),
    };
    let ts: jiff::Timestamp = s
        .parse()
        .map_err(|e| Bad::new(format!("invalid timestamp {s:?}: {e}")))?;
    let (mut secs, mut nanos) = (ts.as_second(), ts.subsec_nanosecond());
    if nanos < 0 {
        secs -= 1;
        nanos += 1_000_000_000;
    }
    let nanos = if micro { nanos - nanos % 1000 } else { 0 };
    key(1, 0, out);
    varint(secs as u64, out);
    key(2, 0, out);
    varint(i64::from(nanos) as u64, out);
    Ok(())
}

/// metav1.Duration {duration = 1}: nanoseconds from Go's duration syntax.
fn duration(v: &Value, out: &mut Vec<u8>) -> Res {
    let s = v
        .as_str()
        .ok_or_else(|| Bad::new(format!("expected a duration, got {v}")))?;
    let d = parse_go_duration(s).ok_or_else(|| Bad::new(format!("invalid duration {s:?}")))?;
    key(1, 0, out);
    varint(d as u64, out);
    Ok(())
}

/// Go's `time.ParseDuration`.
pub(crate) fn parse_go_duration(s: &str) -> Option<i64> {
    let (neg, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: i128 = 0;
    while !rest.is_empty() {
        let int_end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let int_part = &rest[..int_end];
        rest = &rest[int_end..];
        let mut frac_part = "";
        if let Some(r) = rest.strip_prefix('.') {
            let e = r.find(|c: char| !c.is_ascii_digit()).unwrap_or(r.len());
            frac_part = &r[..e];
            rest = &r[e..];
        }
        if int_part.is_empty() && frac_part.is_empty() {
            return None;
        }
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit: i128 = match &rest[..unit_end] {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        rest = &rest[unit_end..];
        let whole: i128 = if int_part.is_empty() {
            0
        } else {
            int_part.parse().ok()?
        };
        let mut v = whole.checked_mul(unit)?;
        let mut scale = unit;
        for d in frac_part.bytes().take(30) {
            scale /= 10;
            v += i128::from(d - b'0') * scale;
        }
        total = total.checked_add(v)?;
        if total > i128::from(i64::MAX) + 1 {
            return None;
        }
    }
    let total = if neg { -total } else { total };
    i64::try_from(total).ok()
}

/// intstr.IntOrString {type = 1, intVal = 2, strVal = 3}.
fn int_or_string(v: &Value, out: &mut Vec<u8>) -> Res {
    let (ty, i, s) = match v {
        Value::String(s) => (1, 0, s.as_str()),
        Value::Number(_) => {
            let i = as_i64(v)?;
            let i = i32::try_from(i).map_err(|_| Bad::new(format!("{i} overflows int32")))?;
            (0, i, "")
        }
        Value::Null => (0, 0, ""),
        _ => return Err(Bad::new(format!("expected an int or a string, got {v}"))),
    };
    key(1, 0, out);
    varint(ty, out);
    key(2, 0, out);
    varint(i64::from(i) as u64, out);
    ld(3, s.as_bytes(), out);
    Ok(())
}

/// resource.Quantity {string = 1}.
fn quantity(v: &Value, out: &mut Vec<u8>) -> Res {
    let s = match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Null => "0".into(),
        _ => return Err(Bad::new(format!("expected a quantity, got {v}"))),
    };
    ld(1, s.as_bytes(), out);
    Ok(())
}

/// RawExtension, FieldsV1, apiextensions JSON {raw = 1}: the compact JSON document.
fn raw_json(v: &Value, out: &mut Vec<u8>) -> Res {
    if v.is_null() {
        return Ok(());
    }
    let raw = serde_json::to_vec(v).map_err(|e| Bad::new(e.to_string()))?;
    ld(1, &raw, out);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::decode;
    use serde_json::json;

    macro_rules! fixtures {
        ($($name:literal),* $(,)?) => {
            [$((
                $name,
                include_bytes!(concat!("testdata/", $name, ".pb")).as_slice(),
                include_str!(concat!("testdata/", $name, ".json")),
            )),*]
        };
    }

    const FIXTURES: [(&str, &[u8], &str); 21] = fixtures!(
        "configmap",
        "secret",
        "secretreg",
        "deployment",
        "namespace",
        "serviceaccount",
        "job",
        "cronjob",
        "service",
        "nodeport",
        "role",
        "rolebinding",
        "clusterrole",
        "clusterrolebinding",
        "pdb",
        "priorityclass",
        "quota",
        "ingress",
        "cani",
        "cani2",
        "token",
    );

    /// Decoding then encoding kubectl's bodies gives kubectl's bytes back.
    #[test]
    fn kubectl_fixtures_byte_exact() {
        for (name, pb, _) in FIXTURES {
            let v = decode(pb).unwrap();
            let got = encode(&v).unwrap();
            if got != pb {
                panic!(
                    "{name}: encoding differs\n got {:02x?}\nwant {:02x?}\n{}",
                    got,
                    pb,
                    serde_json::to_string(&v).unwrap()
                );
            }
        }
    }

    /// kubectl's JSON encodes and decodes back to itself.
    #[test]
    fn kubectl_fixtures_round_trip() {
        for (name, _, text) in FIXTURES {
            let mut want: Value = serde_json::from_str(text).unwrap();
            strip_null_timestamps(&mut want);
            let got = decode(&encode(&want).unwrap()).unwrap();
            assert_eq!(got, want, "{name}");
        }
    }

    fn strip_null_timestamps(v: &mut Value) {
        match v {
            Value::Object(m) => {
                if m.get("creationTimestamp") == Some(&Value::Null) {
                    m.remove("creationTimestamp");
                }
                m.values_mut().for_each(strip_null_timestamps);
            }
            Value::Array(a) => a.iter_mut().for_each(strip_null_timestamps),
            _ => {}
        }
    }

    /// Every value of `want` is in `got` (which may add the zero values Go's JSON keeps).
    #[track_caller]
    fn contains(got: &Value, want: &Value, path: &str) {
        match (got, want) {
            (Value::Object(g), Value::Object(w)) => {
                for (k, wv) in w {
                    let gv = g.get(k).unwrap_or(&Value::Null);
                    contains(gv, wv, &format!("{path}.{k}"));
                }
            }
            (Value::Array(g), Value::Array(w)) => {
                assert_eq!(g.len(), w.len(), "{path}: length");
                for (i, (gv, wv)) in g.iter().zip(w).enumerate() {
                    contains(gv, wv, &format!("{path}[{i}]"));
                }
            }
            _ => assert_eq!(got, want, "{path}"),
        }
    }

    /// Encodes, decodes and checks that nothing was lost and that a second round gives
    /// the same bytes.
    #[track_caller]
    fn lossless(v: Value) -> Value {
        let pb = encode(&v).unwrap();
        let back = decode(&pb).unwrap();
        contains(&back, &v, "");
        assert_eq!(encode(&back).unwrap(), pb, "second round");
        back
    }

    fn meta() -> Value {
        json!({
            "name": "x", "namespace": "ns", "uid": "0b5c6a5e-0000-4000-8000-000000000001",
            "resourceVersion": "42", "generation": 3,
            "creationTimestamp": "2026-01-02T03:04:05Z",
            "deletionTimestamp": "2026-01-02T03:05:05Z", "deletionGracePeriodSeconds": 0,
            "labels": {"b": "2", "a": "1"}, "annotations": {"k": "v"},
            "finalizers": ["example.com/f"],
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                "uid": "0b5c6a5e-0000-4000-8000-000000000002", "controller": true,
                "blockOwnerDeletion": true}],
            "managedFields": [{"manager": "kubectl", "operation": "Apply",
                "apiVersion": "v1", "time": "2026-01-02T03:04:05Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:labels": {"f:a": {}, ".": {}}}}}]
        })
    }

    #[test]
    fn pod_round_trip() {
        let back = lossless(json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": meta(),
            "spec": {
                "containers": [{
                    "name": "c", "image": "nginx", "command": ["sh", "-c"],
                    "ports": [{"containerPort": 80, "protocol": "TCP", "name": "http"}],
                    "env": [{"name": "A", "value": "1"},
                            {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                    "resources": {"limits": {"cpu": "250m", "memory": "64Mi"},
                                  "requests": {"cpu": "100m"}},
                    "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http",
                        "scheme": "HTTP"}, "initialDelaySeconds": 5, "periodSeconds": 10},
                    "readinessProbe": {"tcpSocket": {"port": 8080}},
                    "securityContext": {"runAsUser": 1000, "runAsNonRoot": true,
                        "capabilities": {"drop": ["ALL"]}}
                }],
                "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
                "nodeSelector": {"disk": "ssd"},
                "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule",
                                 "tolerationSeconds": 60}],
                "volumes": [{"name": "v", "emptyDir": {"sizeLimit": "1Gi"}},
                            {"name": "cm", "configMap": {"name": "cm", "defaultMode": 420}}]
            },
            "status": {"phase": "Running", "podIP": "10.0.0.1",
                "conditions": [{"type": "Ready", "status": "True",
                                "lastTransitionTime": "2026-01-02T03:04:05Z"}],
                "startTime": "2026-01-02T03:04:05Z"}
        }));
        // Go's JSON keeps the zero values of non-pointer fields without omitempty.
        assert_eq!(
            back["spec"]["containers"][0]["readinessProbe"]["tcpSocket"]["port"],
            8080
        );
        assert_eq!(back["metadata"]["deletionGracePeriodSeconds"], 0);
    }

    #[test]
    fn workloads_and_services_round_trip() {
        lossless(json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta(),
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"},
                     "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]},
                "strategy": {"type": "RollingUpdate",
                    "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "c", "image": "nginx"}]}},
                "progressDeadlineSeconds": 600, "revisionHistoryLimit": 10},
            "status": {"replicas": 2, "readyReplicas": 2, "observedGeneration": 3,
                "conditions": [{"type": "Available", "status": "True",
                    "lastUpdateTime": "2026-01-02T03:04:05Z",
                    "lastTransitionTime": "2026-01-02T03:04:05Z", "reason": "R", "message": "m"}]}
        }));
        lossless(json!({
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
            "spec": {"type": "NodePort", "selector": {"app": "web"},
                "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
                "ports": [{"name": "a", "port": 80, "targetPort": 8080, "protocol": "TCP",
                           "nodePort": 30080},
                          {"name": "b", "port": 443, "targetPort": "https", "protocol": "TCP"}],
                "sessionAffinity": "None", "ipFamilies": ["IPv4"]}
        }));
        lossless(json!({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
            "data": {"a": "b", "empty": ""}, "binaryData": {"bin": "AAEC/w==", "z": ""},
            "immutable": false
        }));
        lossless(json!({
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
            "type": "Opaque", "data": {"p": "cQ=="}
        }));
        lossless(json!({
            "apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": {"name": "r"},
            "data": {"spec": {"template": {"x": [1, "2", null, true]}}}, "revision": 7
        }));
    }

    #[test]
    fn micro_time_kinds_round_trip() {
        let back = lossless(json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"},
            "eventTime": "2026-01-02T03:04:05.123456Z", "reportingController": "c",
            "reportingInstance": "i", "action": "A", "reason": "R", "type": "Normal",
            "regarding": {"kind": "Pod", "name": "p", "namespace": "ns"},
            "series": {"count": 2, "lastObservedTime": "2026-01-02T03:04:06.000001Z"},
            "deprecatedFirstTimestamp": "2026-01-02T03:04:05Z", "deprecatedCount": 1
        }));
        assert_eq!(back["eventTime"], "2026-01-02T03:04:05.123456Z");
        lossless(json!({
            "apiVersion": "v1", "kind": "Event", "metadata": {"name": "e", "namespace": "ns"},
            "involvedObject": {"kind": "Pod", "name": "p"}, "reason": "R", "message": "m",
            "source": {"component": "c"}, "firstTimestamp": "2026-01-02T03:04:05Z",
            "lastTimestamp": "2026-01-02T03:04:05Z", "count": 1, "type": "Normal",
            "eventTime": "2026-01-02T03:04:05.500000Z"
        }));
        lossless(json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "l", "namespace": "kube-system"},
            "spec": {"holderIdentity": "h", "leaseDurationSeconds": 15,
                "acquireTime": "2026-01-02T03:04:05.000000Z",
                "renewTime": "2026-01-02T03:04:20.654321Z", "leaseTransitions": 0}
        }));
    }

    #[test]
    fn node_and_rbac_round_trip() {
        lossless(json!({
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"},
            "spec": {"podCIDR": "10.244.0.0/24", "taints": [{"key": "k", "effect": "NoSchedule"}]},
            "status": {
                "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                "allocatable": {"cpu": "3800m", "memory": "7Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True",
                    "lastHeartbeatTime": "2026-01-02T03:04:05Z",
                    "lastTransitionTime": "2026-01-02T03:04:05Z"}],
                "addresses": [{"type": "InternalIP", "address": "192.168.0.2"}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "nodeInfo": {"machineID": "m", "systemUUID": "s", "bootID": "b",
                    "kernelVersion": "6", "osImage": "o", "containerRuntimeVersion": "c",
                    "kubeletVersion": "v1.32.0", "kubeProxyVersion": "", "operatingSystem": "linux",
                    "architecture": "amd64"},
                "images": [{"names": ["nginx:latest"], "sizeBytes": 123456789}]
            }
        }));
        lossless(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "r"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"a": "b"}}]}
        }));
        lossless(json!({
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "metadata": {},
            "spec": {"user": "alice", "groups": ["g"], "extra": {"scopes": ["a", "b"]},
                     "resourceAttributes": {"verb": "list", "resource": "pods"}},
            "status": {"allowed": true, "reason": "ok"}
        }));
    }

    #[test]
    fn crd_round_trip() {
        let spec_props = json!({
            "replicas": {"type": "integer", "format": "int32",
                "minimum": 0, "maximum": 10.5, "exclusiveMaximum": true},
            "mode": {"type": "string", "enum": ["a", "b"], "pattern": "^[a-z]+$"},
            "tags": {"type": "array", "items": {"type": "string"},
                     "x-kubernetes-list-type": "set", "maxItems": 5},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "any": {"x-kubernetes-preserve-unknown-fields": true},
            "port": {"x-kubernetes-int-or-string": true,
                "anyOf": [{"type": "integer"}, {"type": "string"}]},
            "closed": {"type": "object", "additionalProperties": false},
            "deps": {"type": "object", "dependencies": {"a": ["b"], "c": {"required": ["d"]}}}
        });
        let spec = json!({"type": "object", "default": {"replicas": 1},
            "properties": spec_props,
            "x-kubernetes-validations": [{"rule": "self.replicas >= 0", "message": "m"}]});
        let schema = json!({"type": "object", "description": "d", "required": ["spec"],
            "properties": {"spec": spec, "status": {"type": "object", "nullable": true}}});
        let back = lossless(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                          "listKind": "WidgetList", "shortNames": ["wd"]},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                        "statusReplicasPath": ".status.replicas"}},
                    "additionalPrinterColumns": [{"name": "Age", "type": "date",
                        "jsonPath": ".metadata.creationTimestamp"}],
                    "schema": {"openAPIV3Schema": schema}}],
                "conversion": {"strategy": "None"}},
            "status": {"storedVersions": ["v1"], "acceptedNames": {"plural": "widgets", "kind": "Widget"},
                "conditions": [{"type": "Established", "status": "True",
                    "lastTransitionTime": "2026-01-02T03:04:05Z"}]}
        }));
        let props = &back["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"];
        assert_eq!(
            props["spec"]["properties"]["closed"]["additionalProperties"],
            false
        );
        assert_eq!(props["spec"]["default"], json!({"replicas": 1}));
    }

    #[test]
    fn lists_and_status() {
        let pod = json!({"metadata": {"name": "p", "namespace": "ns"},
                         "spec": {"containers": [{"name": "c", "image": "i"}]}});
        let list = json!({"apiVersion": "v1", "kind": "PodList",
            "metadata": {"resourceVersion": "7", "continue": "tok", "remainingItemCount": 3},
            "items": [pod.clone(), pod]});
        let pb = encode(&list).unwrap();
        assert!(supports("v1", "PodList") && supports("v1", "Pod"));
        assert!(!supports("example.com/v1", "Widget") && !supports("v1", "Nope"));
        let back = decode(&pb).unwrap();
        assert_eq!(back["kind"], "PodList");
        assert_eq!(back["metadata"], list["metadata"]);
        assert_eq!(back["items"].as_array().unwrap().len(), 2);
        assert_eq!(back["items"][1]["spec"]["containers"][0]["image"], "i");
        assert_eq!(encode(&back).unwrap(), pb);
        let status = json!({"apiVersion": "v1", "kind": "Status", "metadata": {},
            "status": "Failure", "message": "pods \"p\" not found", "reason": "NotFound",
            "details": {"name": "p", "kind": "pods"}, "code": 404});
        lossless(status);
    }

    #[test]
    fn rejects_what_has_no_schema_or_bad_values() {
        let e = encode(&json!({"apiVersion": "example.com/v1", "kind": "Widget"})).unwrap_err();
        assert!(matches!(e, EncodeError::NoSchema { .. }), "{e}");
        let e = encode(&json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": 5}}))
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "cannot encode metadata.name: expected a string, got 5"
        );
        let e = encode(&json!({"apiVersion": "v1", "kind": "PodList",
            "items": [{"spec": {"containers": [{"name": "c",
                "ports": [{"containerPort": 99999999999u64}]}]}}]}))
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("items[0].spec.containers.ports.containerPort"),
            "{e}"
        );
        let e = encode(&json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"creationTimestamp": "yesterday"}}))
        .unwrap_err();
        assert!(e.to_string().contains("invalid timestamp"), "{e}");
        // Deep nesting is bounded, not a stack overflow.
        let mut props = json!({"type": "string"});
        for _ in 0..200 {
            props = json!({"not": props});
        }
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": props}}]}});
        assert!(
            encode(&crd)
                .unwrap_err()
                .to_string()
                .contains("nested more than")
        );
    }

    #[test]
    fn go_durations() {
        for (s, d) in [
            ("0", 0),
            ("0s", 0),
            ("1h2m3s", 3_723_000_000_000),
            ("1.5s", 1_500_000_000),
            ("1.5ms", 1_500_000),
            ("2µs", 2_000),
            ("2us", 2_000),
            ("7ns", 7),
            ("-1m30s", -90_000_000_000),
            ("-2562047h47m16.854775808s", i64::MIN),
        ] {
            assert_eq!(parse_go_duration(s), Some(d), "{s}");
        }
        // Go's `String()` output parses back.
        for d in [
            1,
            999,
            1_000,
            1_500_000,
            61_000_000_000,
            -7_200_000_000_001,
            i64::MAX,
        ] {
            assert_eq!(parse_go_duration(&crate::value::go_duration(d)), Some(d));
        }
        for bad in ["", "1", "h", "1x", "--1s", "9999999999h", "."] {
            assert_eq!(parse_go_duration(bad), None, "{bad}");
        }
    }
}
