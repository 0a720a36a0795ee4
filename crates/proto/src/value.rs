//! Protobuf bodies decoded to the JSON a Go client would have sent.
//!
//! kubectl sends typed objects as protobuf: the 4-byte magic `k8s\0`, then a
//! `runtime.Unknown` message whose `typeMeta` names the kind and whose `raw` holds the
//! object's message. The object is decoded against the schema table into the JSON that
//! the same client would have sent, following the Go types' JSON rules: `omitempty`
//! zero values are dropped (protobuf carries every non-pointer field), pointer fields keep
//! their zero values, inlined structs are merged into their parent, and the types with
//! their own JSON form (Time, MicroTime, Duration, IntOrString, Quantity, RawExtension,
//! FieldsV1, the apiextensions JSON types, slice types such as ExtraValue) get it.

use crate::schema::{Field, SCHEMA, Scalar, Schema, Special, Target, Type};
use crate::wire::{Reader, Unknown, utf8};
use crate::{Error, F_DEFAULT, F_INLINE, F_OMIT_EMPTY, F_OMIT_ZERO, F_REPEATED, MAGIC, MAX_DEPTH};
use base64::Engine as _;
use serde_json::{Map, Number, Value};
use std::borrow::Cow;

/// Decodes a Kubernetes protobuf body (`k8s\0` + `runtime.Unknown`) into the JSON object
/// a JSON client would send, with `apiVersion` and `kind` taken from the envelope.
pub fn decode(body: &[u8]) -> Result<Value, Error> {
    decode_at(body, 0)
}

type Result<T, E = Error> = std::result::Result<T, E>;

fn decode_at(body: &[u8], depth: usize) -> Result<Value> {
    let u = Unknown::parse(body)?;
    let schema = SCHEMA.as_ref().map_err(|e| Error::new(e.clone()))?;
    let (api_version, kind) = (utf8(u.api_version), utf8(u.kind));
    let (content_encoding, content_type, raw) =
        (utf8(u.content_encoding), utf8(u.content_type), u.raw);
    if !content_encoding.is_empty() {
        return Err(Error::new(format!(
            "unsupported content encoding {content_encoding:?}"
        )));
    }
    if kind.is_empty() {
        return Err(Error::new("the envelope names no kind"));
    }
    // Go's decoder reads `raw` as protobuf whatever `contentType` says (its encoder never
    // sets one); a type that names anything else is refused rather than misread.
    if !content_type.is_empty() && content_type != crate::MEDIA_TYPE {
        return Err(Error::new(format!(
            "unsupported embedded content type {content_type:?}"
        )));
    }
    let mut obj = match schema.target(&api_version, &kind) {
        Some(Target::Message(idx)) => decode_message(schema, idx, raw, depth + 1)?,
        Some(Target::List { item, meta }) => decode_list(schema, meta, item, raw, depth + 1)?,
        None => {
            return Err(Error::new(format!(
                "no protobuf schema for kind {kind:?} in {api_version:?}"
            )));
        }
    };
    if let Value::Object(m) = &mut obj {
        if !api_version.is_empty() {
            m.insert("apiVersion".into(), Value::String(api_version));
        }
        m.insert("kind".into(), Value::String(kind));
    }
    Ok(obj)
}

/// A `<Kind>List`: {metadata ListMeta = 1; repeated <Kind> items = 2}.
fn decode_list(
    schema: &Schema,
    list_meta: usize,
    item: usize,
    data: &[u8],
    depth: usize,
) -> Result<Value> {
    let mut meta: Vec<u8> = Vec::new();
    let mut items = Vec::new();
    let mut r = Reader::new(data);
    while let Some((num, wire)) = r.key()? {
        match (num, wire) {
            (1, 2) => meta.extend_from_slice(r.bytes()?),
            (2, 2) => items.push(
                decode_message(schema, item, r.bytes()?, depth + 1)
                    .map_err(|e| e.at(&format!("items[{}]", items.len())))?,
            ),
            (1 | 2, _) => {
                return Err(Error::new(format!(
                    "wire type {wire} is wrong for field {num} of a list"
                )));
            }
            _ => r.skip(wire)?,
        }
    }
    let mut obj = Map::new();
    obj.insert(
        "metadata".into(),
        decode_message(schema, list_meta, &meta, depth + 1).map_err(|e| e.at("metadata"))?,
    );
    obj.insert("items".into(), Value::Array(items));
    Ok(Value::Object(obj))
}
/// Reads one scalar whose wire type was already checked.
fn read_scalar(r: &mut Reader<'_>, s: Scalar) -> Result<Value> {
    Ok(match s {
        Scalar::Int32 => Value::from(r.varint()? as i32),
        Scalar::Int64 => Value::from(r.varint()? as i64),
        Scalar::Uint32 => Value::from(r.varint()? as u32),
        Scalar::Uint64 => Value::from(r.varint()?),
        Scalar::Sint32 => {
            let v = r.varint()? as u32;
            Value::from(((v >> 1) as i32) ^ -((v & 1) as i32))
        }
        Scalar::Sint64 => {
            let v = r.varint()?;
            Value::from(((v >> 1) as i64) ^ -((v & 1) as i64))
        }
        Scalar::Bool => Value::Bool(r.varint()? != 0),
        Scalar::Fixed32 => Value::from(r.fixed32()?),
        Scalar::Sfixed32 => Value::from(r.fixed32()? as i32),
        Scalar::Fixed64 => Value::from(r.fixed64()?),
        Scalar::Sfixed64 => Value::from(r.fixed64()? as i64),
        Scalar::Float => {
            let f = f32::from_bits(r.fixed32()?);
            // Go prints a float32 with float32 precision.
            float(f.to_string().parse::<f64>().unwrap_or(f64::from(f)))?
        }
        Scalar::Double => float(f64::from_bits(r.fixed64()?))?,
        Scalar::String => Value::String(utf8(r.bytes()?)),
        Scalar::Bytes => {
            Value::String(base64::engine::general_purpose::STANDARD.encode(r.bytes()?))
        }
    })
}

/// A float as Go's encoding/json writes it: integral values without a fraction.
fn float(f: f64) -> Result<Value> {
    if !f.is_finite() {
        return Err(Error::new(format!("unsupported float value {f}")));
    }
    if f.fract() == 0.0 && f.abs() < 9_007_199_254_740_992.0 {
        return Ok(Value::from(f as i64));
    }
    Number::from_f64(f)
        .map(Value::Number)
        .ok_or_else(|| Error::new(format!("unsupported float value {f}")))
}

// ---------------------------------------------------------------------------------------
// Messages
// ---------------------------------------------------------------------------------------

/// What was read for one field of a message.
enum Slot<'a> {
    Absent,
    Scalar(Value),
    List(Vec<Value>),
    Map(Map<String, Value>),
    /// A singular message: every occurrence, concatenated (protobuf merges them).
    Message(Cow<'a, [u8]>),
}

pub(crate) fn decode_message(
    schema: &Schema,
    idx: usize,
    data: &[u8],
    depth: usize,
) -> Result<Value> {
    if depth > MAX_DEPTH {
        return Err(Error::new(format!(
            "messages are nested more than {MAX_DEPTH} deep"
        )));
    }
    let msg = &schema.messages[idx];
    match msg.special {
        Special::None | Special::Wrapper => {}
        Special::Time => return time(data, false),
        Special::MicroTime => return time(data, true),
        Special::Duration => return duration(data),
        Special::IntOrString => return int_or_string(data),
        Special::Quantity => return quantity(data),
        Special::RawJson => return raw_json(data, depth),
        Special::PropsOrArray | Special::PropsOrBool | Special::PropsOrStringArray => {}
    }
    let mut slots: Vec<Slot> = msg.fields.iter().map(|_| Slot::Absent).collect();
    let mut r = Reader::new(data);
    while let Some((num, wire)) = r.key()? {
        let Some(fi) = msg.field_index(num) else {
            r.skip(wire)?;
            continue;
        };
        let field = &msg.fields[fi];
        read_field(schema, field, wire, &mut r, &mut slots[fi], depth)
            .map_err(|e| e.at(&field.json))?;
    }
    let mut obj = Map::new();
    for (field, slot) in msg.fields.iter().zip(slots) {
        let value = match slot {
            Slot::Absent => {
                if field.flags & F_DEFAULT != 0
                    && let Type::Scalar(s) = field.ty
                {
                    obj.insert(field.json.clone(), s.zero());
                }
                // An absent inlined struct is Go's zero value: its defaults still apply.
                if field.flags & F_INLINE != 0
                    && let Type::Message(m) = field.ty
                    && let Value::Object(inner) = decode_message(schema, m, &[], depth + 1)?
                {
                    obj.extend(inner);
                }
                continue;
            }
            Slot::Scalar(v) => v,
            Slot::List(v) => Value::Array(v),
            Slot::Map(m) => Value::Object(m),
            Slot::Message(bytes) => {
                let Type::Message(m) = field.ty else {
                    continue;
                };
                decode_message(schema, m, &bytes, depth + 1).map_err(|e| e.at(&field.json))?
            }
        };
        if field.flags & F_OMIT_EMPTY != 0 && is_empty(&value) {
            continue;
        }
        if field.flags & F_OMIT_ZERO != 0 && (value.is_null() || is_empty(&value)) {
            continue;
        }
        if field.flags & F_INLINE != 0 {
            if let Value::Object(inner) = value {
                obj.extend(inner);
            }
            continue;
        }
        obj.insert(field.json.clone(), value);
    }
    Ok(match msg.special {
        Special::Wrapper => match obj.remove("items") {
            Some(v @ Value::Array(_)) => v,
            _ => Value::Array(Vec::new()),
        },
        // Go: the list of schemas if any, else the schema (or null).
        Special::PropsOrArray => match obj.remove("jSONSchemas") {
            Some(v @ Value::Array(_)) => v,
            _ => obj.remove("schema").unwrap_or(Value::Null),
        },
        // Go: the schema if any, else the boolean.
        Special::PropsOrBool => match obj.remove("schema") {
            Some(v) => v,
            None => Value::Bool(obj.get("allows").and_then(Value::as_bool).unwrap_or(false)),
        },
        // Go: the string list if not empty, else the schema, else null.
        Special::PropsOrStringArray => match obj.remove("property") {
            Some(v @ Value::Array(_)) => v,
            _ => obj.remove("schema").unwrap_or(Value::Null),
        },
        _ => Value::Object(obj),
    })
}

fn read_field<'a>(
    schema: &Schema,
    field: &Field,
    wire: u8,
    r: &mut Reader<'a>,
    slot: &mut Slot<'a>,
    depth: usize,
) -> Result<()> {
    let repeated = field.flags & F_REPEATED != 0;
    let wrong = || {
        let ty = match &field.ty {
            Type::Scalar(s) => format!("{s:?}").to_lowercase(),
            Type::Message(m) => schema.messages[*m].name.clone(),
            Type::Map(..) => "map".into(),
        };
        Error::new(format!(
            "wire type {wire} does not match the field type {ty}"
        ))
    };
    match &field.ty {
        Type::Scalar(s) => {
            let s = *s;
            if repeated && wire == 2 && s.wire_type() != 2 {
                // Packed repeated scalars.
                let mut p = Reader::new(r.bytes()?);
                let mut items = Vec::new();
                while !p.at_end() {
                    items.push(read_scalar(&mut p, s)?);
                }
                push_list(slot, items);
            } else if wire != s.wire_type() {
                return Err(wrong());
            } else {
                let v = read_scalar(r, s)?;
                if repeated {
                    push_list(slot, vec![v]);
                } else {
                    *slot = Slot::Scalar(v);
                }
            }
        }
        Type::Message(m) => {
            if wire != 2 {
                return Err(wrong());
            }
            let bytes = r.bytes()?;
            if repeated {
                let v = decode_message(schema, *m, bytes, depth + 1)?;
                push_list(slot, vec![v]);
            } else {
                match slot {
                    Slot::Message(buf) => buf.to_mut().extend_from_slice(bytes),
                    _ => *slot = Slot::Message(Cow::Borrowed(bytes)),
                }
            }
        }
        Type::Map(ks, vt) => {
            if wire != 2 {
                return Err(wrong());
            }
            let (k, v) = map_entry(schema, *ks, vt, r.bytes()?, depth)?;
            match slot {
                Slot::Map(m) => {
                    m.insert(k, v);
                }
                _ => {
                    let mut m = Map::new();
                    m.insert(k, v);
                    *slot = Slot::Map(m);
                }
            }
        }
    }
    Ok(())
}

fn push_list(slot: &mut Slot<'_>, items: Vec<Value>) {
    match slot {
        Slot::List(v) => v.extend(items),
        _ => *slot = Slot::List(items),
    }
}

fn map_entry(
    schema: &Schema,
    ks: Scalar,
    vt: &Type,
    data: &[u8],
    depth: usize,
) -> Result<(String, Value)> {
    let mut key: Option<Value> = None;
    let mut value: Option<Value> = None;
    let mut msg_bytes: Option<Vec<u8>> = None;
    let mut r = Reader::new(data);
    while let Some((num, wire)) = r.key()? {
        match num {
            1 => {
                if wire != ks.wire_type() {
                    return Err(Error::new(format!(
                        "wire type {wire} is wrong for a map key"
                    )));
                }
                key = Some(read_scalar(&mut r, ks)?);
            }
            2 => match vt {
                Type::Scalar(s) => {
                    if wire != s.wire_type() {
                        return Err(Error::new(format!(
                            "wire type {wire} is wrong for a map value"
                        )));
                    }
                    value = Some(read_scalar(&mut r, *s)?);
                }
                Type::Message(_) => {
                    if wire != 2 {
                        return Err(Error::new(format!(
                            "wire type {wire} is wrong for a map value"
                        )));
                    }
                    msg_bytes
                        .get_or_insert_with(Vec::new)
                        .extend_from_slice(r.bytes()?);
                }
                Type::Map(..) => return Err(Error::new("nested maps are not supported")),
            },
            _ => r.skip(wire)?,
        }
    }
    let key = match key.unwrap_or_else(|| ks.zero()) {
        Value::String(s) => s,
        other => other.to_string(),
    };
    let value = match vt {
        Type::Scalar(s) => value.unwrap_or_else(|| s.zero()),
        Type::Message(m) => {
            decode_message(schema, *m, msg_bytes.as_deref().unwrap_or(&[]), depth + 1)
                .map_err(|e| e.at(&key))?
        }
        Type::Map(..) => Value::Null,
    };
    Ok((key, value))
}

/// Go's encoding/json `omitempty`: false, 0, "", empty arrays and objects (and null).
fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

// ---------------------------------------------------------------------------------------
// Types with their own JSON form
// ---------------------------------------------------------------------------------------

/// Reads the given varint / length-delimited fields of a small message; others are skipped.
struct Fields<'a> {
    varints: [Option<u64>; 4],
    bytes: [Option<&'a [u8]>; 4],
}

fn scan(data: &[u8]) -> Result<Fields<'_>> {
    let mut out = Fields {
        varints: [None; 4],
        bytes: [None; 4],
    };
    let mut r = Reader::new(data);
    while let Some((num, wire)) = r.key()? {
        let slot = num as usize;
        match wire {
            0 if slot < 4 => out.varints[slot] = Some(r.varint()?),
            2 if slot < 4 => out.bytes[slot] = Some(r.bytes()?),
            _ => r.skip(wire)?,
        }
    }
    Ok(out)
}

/// metav1.Time (seconds, RFC 3339) and metav1.MicroTime (microseconds); empty is null.
fn time(data: &[u8], micro: bool) -> Result<Value> {
    if data.is_empty() {
        return Ok(Value::Null);
    }
    let f = scan(data)?;
    let secs = f.varints[1].unwrap_or(0) as i64;
    if !micro {
        // Kubernetes drops the nanoseconds of a Time.
        return Ok(Value::String(rfc3339(
            i128::from(secs) * 1_000_000_000,
            false,
        )?));
    }
    let nanos = i64::from(f.varints[2].unwrap_or(0) as i32);
    let nanos = nanos - nanos % 1000;
    let total = i128::from(secs) * 1_000_000_000 + i128::from(nanos);
    Ok(Value::String(rfc3339(total, true)?))
}

pub(crate) fn rfc3339(total_nanos: i128, micro: bool) -> Result<String> {
    Ok(Stamp::new(total_nanos, micro)?.as_str().to_owned())
}

/// An RFC 3339 timestamp written into a fixed buffer (no allocation).
pub(crate) struct Stamp {
    buf: [u8; 27],
    len: usize,
}

impl Stamp {
    pub(crate) fn as_str(&self) -> &str {
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or_default()
    }

    pub(crate) fn new(total_nanos: i128, micro: bool) -> Result<Self> {
        let secs = total_nanos.div_euclid(1_000_000_000);
        let nanos = total_nanos.rem_euclid(1_000_000_000);
        let days = secs.div_euclid(86_400);
        let rem = secs.rem_euclid(86_400);
        // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        let year = yoe + era * 400 + i128::from(month <= 2);
        if !(0..=9999).contains(&year) {
            return Err(Error::new(format!("timestamp year {year} is out of range")));
        }
        let (h, m, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
        // Written by hand: `format!` costs several times the rest of a decoded timestamp.
        let mut out = Stamp {
            buf: [0; 27],
            len: 0,
        };
        let mut put = |v: i128, n: u32, sep: u8| {
            // In range: the year was checked, the rest are remainders.
            let v = u64::try_from(v).unwrap_or(0);
            for i in (0..n).rev() {
                out.buf[out.len] = b'0' + (v / 10u64.pow(i) % 10) as u8;
                out.len += 1;
            }
            out.buf[out.len] = sep;
            out.len += 1;
        };
        put(year, 4, b'-');
        put(month, 2, b'-');
        put(day, 2, b'T');
        put(h, 2, b':');
        put(m, 2, b':');
        if micro {
            put(s, 2, b'.');
            put(nanos / 1000, 6, b'Z');
        } else {
            put(s, 2, b'Z');
        }
        Ok(out)
    }
}

/// metav1.Duration: Go's `time.Duration.String()`.
fn duration(data: &[u8]) -> Result<Value> {
    let d = scan(data)?.varints[1].unwrap_or(0) as i64;
    Ok(Value::String(go_duration(d)))
}

pub(crate) fn go_duration(d: i64) -> String {
    fn frac(out: &mut Vec<u8>, mut v: u64, prec: u32) -> u64 {
        let mut digits = Vec::new();
        let mut print = false;
        for _ in 0..prec {
            let digit = (v % 10) as u8;
            print = print || digit != 0;
            if print {
                digits.push(b'0' + digit);
            }
            v /= 10;
        }
        if print {
            digits.push(b'.');
        }
        out.extend(digits);
        v
    }
    fn int(out: &mut Vec<u8>, v: u64) {
        out.extend(v.to_string().bytes().rev());
    }
    if d == 0 {
        return "0s".into();
    }
    let mut u = d.unsigned_abs();
    // Built back to front, like Go.
    let mut out: Vec<u8> = Vec::new();
    if u < 1_000_000_000 {
        out.push(b's');
        let prec = if u < 1_000 {
            out.push(b'n');
            0
        } else if u < 1_000_000 {
            out.extend("µ".bytes().rev());
            3
        } else {
            out.push(b'm');
            6
        };
        u = frac(&mut out, u, prec);
        int(&mut out, u);
    } else {
        out.push(b's');
        u = frac(&mut out, u, 9);
        int(&mut out, u % 60);
        u /= 60;
        if u > 0 {
            out.push(b'm');
            int(&mut out, u % 60);
            u /= 60;
            if u > 0 {
                out.push(b'h');
                int(&mut out, u);
            }
        }
    }
    if d < 0 {
        out.push(b'-');
    }
    out.reverse();
    String::from_utf8_lossy(&out).into_owned()
}

/// intstr.IntOrString: a number (type 0) or a string (type 1).
fn int_or_string(data: &[u8]) -> Result<Value> {
    let f = scan(data)?;
    match f.varints[1].unwrap_or(0) {
        0 => Ok(Value::from(f.varints[2].unwrap_or(0) as i32)),
        1 => Ok(Value::String(utf8(f.bytes[3].unwrap_or(&[])))),
        t => Err(Error::new(format!("impossible IntOrString type {t}"))),
    }
}

/// resource.Quantity: its string; the zero Quantity is "0".
fn quantity(data: &[u8]) -> Result<Value> {
    let s = utf8(scan(data)?.bytes[1].unwrap_or(&[]));
    Ok(Value::String(if s.is_empty() { "0".into() } else { s }))
}

/// RawExtension, FieldsV1, apiextensions JSON: the embedded JSON document (or a nested
/// protobuf object); empty is null.
fn raw_json(data: &[u8], depth: usize) -> Result<Value> {
    let raw = scan(data)?.bytes[1].unwrap_or(&[]);
    if raw.is_empty() {
        return Ok(Value::Null);
    }
    if raw.starts_with(MAGIC) {
        return decode_at(raw, depth + 1);
    }
    serde_json::from_slice(raw).map_err(|e| Error::new(format!("embedded JSON is invalid: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Removes `"creationTimestamp": null`, which kubectl 1.32's JSON carries and the
    /// current Go types (omitzero) leave out.
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

    macro_rules! fixture {
        ($name:literal) => {
            (
                include_bytes!(concat!("testdata/", $name, ".pb")).as_slice(),
                include_str!(concat!("testdata/", $name, ".json")),
            )
        };
    }

    fn check((pb, expected): (&[u8], &str)) {
        let mut want: Value = serde_json::from_str(expected).unwrap();
        strip_null_timestamps(&mut want);
        let got = decode(pb).unwrap();
        assert_eq!(
            got,
            want,
            "got {}",
            serde_json::to_string_pretty(&got).unwrap()
        );
    }

    #[test]
    fn schema_table_loads() {
        let s = SCHEMA.as_ref().unwrap();
        assert!(s.kinds.contains_key("v1/ConfigMap"));
        assert!(s.kinds.contains_key("apps/v1/Deployment"));
        assert!(
            s.kinds
                .contains_key("authorization.k8s.io/v1/SelfSubjectAccessReview")
        );
        assert!(
            s.kinds
                .contains_key("rbac.authorization.k8s.io/v1/ClusterRole")
        );
        assert!(
            s.kinds
                .contains_key("apiextensions.k8s.io/v1/CustomResourceDefinition")
        );
        assert!(s.kinds.contains_key("apiregistration.k8s.io/v1/APIService"));
        assert!(s.meta_kinds.contains_key("DeleteOptions"));
    }

    #[test]
    fn kubectl_create_configmap() {
        check(fixture!("configmap"));
    }

    #[test]
    fn kubectl_create_secret_generic() {
        check(fixture!("secret"));
    }

    #[test]
    fn kubectl_create_secret_docker_registry() {
        check(fixture!("secretreg"));
    }

    #[test]
    fn kubectl_create_deployment() {
        check(fixture!("deployment"));
    }

    #[test]
    fn kubectl_create_namespace() {
        check(fixture!("namespace"));
    }

    #[test]
    fn kubectl_create_serviceaccount() {
        check(fixture!("serviceaccount"));
    }

    #[test]
    fn kubectl_create_job() {
        check(fixture!("job"));
    }

    #[test]
    fn kubectl_create_cronjob() {
        check(fixture!("cronjob"));
    }

    #[test]
    fn kubectl_create_service_clusterip() {
        check(fixture!("service"));
    }

    #[test]
    fn kubectl_create_service_nodeport_named_target_port() {
        check(fixture!("nodeport"));
    }

    #[test]
    fn kubectl_create_rbac() {
        check(fixture!("role"));
        check(fixture!("rolebinding"));
        check(fixture!("clusterrole"));
        check(fixture!("clusterrolebinding"));
    }

    #[test]
    fn kubectl_create_pdb_priorityclass_quota_ingress() {
        check(fixture!("pdb"));
        check(fixture!("priorityclass"));
        check(fixture!("quota"));
        check(fixture!("ingress"));
    }

    #[test]
    fn kubectl_auth_can_i() {
        check(fixture!("cani"));
        check(fixture!("cani2"));
    }

    #[test]
    fn kubectl_create_token() {
        check(fixture!("token"));
    }

    // ---- hand-built messages ----

    fn varint(mut v: u64, out: &mut Vec<u8>) {
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

    fn key(num: u32, wire: u8, out: &mut Vec<u8>) {
        varint(u64::from(num) << 3 | u64::from(wire), out);
    }

    fn ld(num: u32, data: &[u8], out: &mut Vec<u8>) {
        key(num, 2, out);
        varint(data.len() as u64, out);
        out.extend_from_slice(data);
    }

    fn vi(num: u32, v: u64, out: &mut Vec<u8>) {
        key(num, 0, out);
        varint(v, out);
    }

    fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
        let mut tm = Vec::new();
        ld(1, api_version.as_bytes(), &mut tm);
        ld(2, kind.as_bytes(), &mut tm);
        let mut out = MAGIC.to_vec();
        ld(1, &tm, &mut out);
        ld(2, raw, &mut out);
        ld(3, b"", &mut out);
        ld(4, b"", &mut out);
        out
    }

    fn meta(name: &str) -> Vec<u8> {
        let mut m = Vec::new();
        ld(1, name.as_bytes(), &mut m);
        m
    }

    #[test]
    fn special_types() {
        // Pod with a probe (inline handler, IntOrString string port), times, quantities.
        let mut port = Vec::new();
        vi(1, 1, &mut port);
        vi(2, 0, &mut port);
        ld(3, b"http", &mut port);
        let mut http_get = Vec::new();
        ld(1, b"/healthz", &mut http_get);
        ld(2, &port, &mut http_get);
        let mut handler = Vec::new();
        ld(2, &http_get, &mut handler);
        let mut probe = Vec::new();
        ld(1, &handler, &mut probe);
        vi(2, 0, &mut probe); // initialDelaySeconds 0: omitempty
        vi(7, 0, &mut probe); // terminationGracePeriodSeconds: pointer, kept
        let mut q = Vec::new();
        ld(1, b"250m", &mut q);
        let mut entry = Vec::new();
        ld(1, b"cpu", &mut entry);
        ld(2, &q, &mut entry);
        let mut limits = Vec::new();
        ld(1, &entry, &mut limits);
        let mut container = Vec::new();
        ld(1, b"c", &mut container);
        ld(10, &probe, &mut container);
        ld(8, &limits, &mut container);
        let mut spec = Vec::new();
        ld(2, &container, &mut spec);
        let mut ts = Vec::new();
        vi(1, 1_767_323_045, &mut ts); // 2026-01-02T03:04:05Z
        vi(2, 999, &mut ts);
        let mut m = meta("p");
        ld(8, &ts, &mut m);
        ld(9, &ts, &mut m);
        let mut pod = Vec::new();
        ld(1, &m, &mut pod);
        ld(2, &spec, &mut pod);
        let got = decode(&envelope("v1", "Pod", &pod)).unwrap();
        assert_eq!(
            got,
            json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "creationTimestamp": "2026-01-02T03:04:05Z",
                             "deletionTimestamp": "2026-01-02T03:04:05Z"},
                "spec": {"containers": [{
                    "name": "c",
                    "resources": {"limits": {"cpu": "250m"}},
                    "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http"},
                                      "terminationGracePeriodSeconds": 0}
                }]}
            })
        );
    }

    #[test]
    fn micro_time_and_duration() {
        // Event (events.k8s.io/v1): eventTime is a MicroTime.
        let mut mt = Vec::new();
        vi(1, 1_767_323_045, &mut mt);
        vi(2, 123_456_789, &mut mt);
        let mut ev = Vec::new();
        ld(1, &meta("e"), &mut ev);
        ld(2, &mt, &mut ev);
        let got = decode(&envelope("events.k8s.io/v1", "Event", &ev)).unwrap();
        assert_eq!(got["eventTime"], json!("2026-01-02T03:04:05.123456Z"));
        assert_eq!(go_duration(0), "0s");
        assert_eq!(go_duration(3_723_000_000_000), "1h2m3s");
        assert_eq!(go_duration(1_500_000_000), "1.5s");
        assert_eq!(go_duration(1_500_000), "1.5ms");
        assert_eq!(go_duration(2_000), "2µs");
        assert_eq!(go_duration(7), "7ns");
        assert_eq!(go_duration(-90_000_000_000), "-1m30s");
        assert_eq!(go_duration(i64::MIN), "-2562047h47m16.854775808s");
        assert_eq!(rfc3339(0, false).unwrap(), "1970-01-01T00:00:00Z");
        assert_eq!(
            rfc3339(-62_135_596_800 * 1_000_000_000, false).unwrap(),
            "0001-01-01T00:00:00Z"
        );
        assert_eq!(
            rfc3339(951_782_400 * 1_000_000_000, false).unwrap(),
            "2000-02-29T00:00:00Z"
        );
    }

    #[test]
    fn duration_field() {
        // No served kind carries a metav1.Duration, so use a table of its own.
        let s = Schema::parse(
            r#"{"kinds": {"x/v1/D": "t.D"}, "meta_kinds": {}, "wrappers": [], "messages": {
                "t.D": [[1, "d", "k8s.io.apimachinery.pkg.apis.meta.v1.Duration", 0]],
                "k8s.io.apimachinery.pkg.apis.meta.v1.Duration": [[1, "duration", "int64", 16]]}}"#,
        )
        .unwrap();
        let mut d = Vec::new();
        vi(1, 3_723_000_000_000, &mut d);
        let mut outer = Vec::new();
        ld(1, &d, &mut outer);
        assert_eq!(
            decode_message(&s, s.kinds["x/v1/D"], &outer, 0).unwrap(),
            json!({"d": "1h2m3s"})
        );
    }

    #[test]
    fn packed_and_unpacked_repeated_scalars() {
        // A Job's podFailurePolicy onExitCodes values (repeated int32), packed and not.
        let mut codes = Vec::new();
        ld(1, b"c", &mut codes); // containerName
        ld(2, b"In", &mut codes); // operator
        let mut packed = Vec::new();
        varint(1, &mut packed);
        varint(2, &mut packed);
        ld(3, &packed, &mut codes);
        vi(3, 42, &mut codes); // unpacked element of the same field
        let mut rule = Vec::new();
        ld(1, b"FailJob", &mut rule);
        ld(2, &codes, &mut rule);
        let mut policy = Vec::new();
        ld(1, &rule, &mut policy);
        let mut spec = Vec::new();
        ld(11, &policy, &mut spec);
        let mut job = Vec::new();
        ld(1, &meta("j"), &mut job);
        ld(2, &spec, &mut job);
        let got = decode(&envelope("batch/v1", "Job", &job)).unwrap();
        assert_eq!(
            got["spec"]["podFailurePolicy"]["rules"][0]["onExitCodes"],
            json!({"containerName": "c", "operator": "In", "values": [1, 2, 42]})
        );
    }

    #[test]
    fn raw_extension_and_extra_value() {
        // SubjectAccessReview: extra is map<string, ExtraValue> (JSON: string lists).
        let mut ev = Vec::new();
        ld(1, b"a", &mut ev);
        ld(1, b"b", &mut ev);
        let mut entry = Vec::new();
        ld(1, b"scopes", &mut entry);
        ld(2, &ev, &mut entry);
        let mut spec = Vec::new();
        ld(3, b"alice", &mut spec);
        ld(5, &entry, &mut spec);
        let mut sar = Vec::new();
        ld(1, &meta(""), &mut sar);
        ld(2, &spec, &mut sar);
        let got = decode(&envelope(
            "authorization.k8s.io/v1",
            "SubjectAccessReview",
            &sar,
        ))
        .unwrap();
        assert_eq!(got["spec"]["user"], json!("alice"));
        assert_eq!(got["spec"]["extra"], json!({"scopes": ["a", "b"]}));
        assert_eq!(got["metadata"], json!({}));

        // ControllerRevision.data is a RawExtension holding JSON.
        let mut raw = Vec::new();
        ld(1, br#"{"spec":{"x":1}}"#, &mut raw);
        let mut cr = Vec::new();
        ld(1, &meta("r"), &mut cr);
        ld(2, &raw, &mut cr);
        vi(3, 7, &mut cr);
        let got = decode(&envelope("apps/v1", "ControllerRevision", &cr)).unwrap();
        assert_eq!(
            got,
            json!({"apiVersion": "apps/v1", "kind": "ControllerRevision",
                   "metadata": {"name": "r"}, "data": {"spec": {"x": 1}}, "revision": 7})
        );
    }

    #[test]
    fn crd_schema_types() {
        // JSONSchemaProps with $ref-style names, JSON default, OrBool and OrArray.
        let mut def = Vec::new();
        ld(1, br#"{"a":1}"#, &mut def);
        let mut inner = Vec::new();
        ld(5, b"string", &mut inner);
        let mut items = Vec::new();
        ld(1, &inner, &mut items);
        let mut addl = Vec::new();
        vi(1, 0, &mut addl);
        let mut props = Vec::new();
        ld(5, b"object", &mut props);
        ld(8, &def, &mut props);
        key(9, 1, &mut props);
        props.extend_from_slice(&2.5f64.to_le_bytes());
        ld(24, &items, &mut props);
        ld(30, &addl, &mut props);
        vi(38, 1, &mut props);
        let mut entry = Vec::new();
        ld(1, b"p", &mut entry);
        ld(2, &inner, &mut entry);
        ld(29, &entry, &mut props);
        let mut vs = Vec::new();
        ld(1, &props, &mut vs);
        let mut version = Vec::new();
        ld(1, b"v1", &mut version);
        vi(2, 1, &mut version);
        vi(3, 1, &mut version);
        ld(4, &vs, &mut version);
        let mut spec = Vec::new();
        ld(1, b"example.com", &mut spec);
        ld(7, &version, &mut spec);
        let mut crd = Vec::new();
        ld(1, &meta("xs.example.com"), &mut crd);
        ld(2, &spec, &mut crd);
        let got = decode(&envelope(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            &crd,
        ))
        .unwrap();
        assert_eq!(
            got["spec"]["versions"][0],
            json!({
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object", "default": {"a": 1}, "maximum": 2.5,
                    "items": {"type": "string"}, "additionalProperties": false,
                    "x-kubernetes-preserve-unknown-fields": true,
                    "properties": {"p": {"type": "string"}}
                }}
            })
        );
    }

    #[test]
    fn delete_options_any_group() {
        let mut opts = Vec::new();
        vi(1, 5, &mut opts);
        ld(4, b"Foreground", &mut opts);
        let got = decode(&envelope("apps/v1", "DeleteOptions", &opts)).unwrap();
        assert_eq!(
            got,
            json!({"apiVersion": "apps/v1", "kind": "DeleteOptions",
                   "gracePeriodSeconds": 5, "propagationPolicy": "Foreground"})
        );
    }

    #[test]
    fn repeated_singular_message_fields_merge() {
        let mut cm = Vec::new();
        ld(1, &meta("a"), &mut cm);
        let mut m2 = Vec::new();
        ld(3, b"ns", &mut m2);
        ld(1, &m2, &mut cm);
        let got = decode(&envelope("v1", "ConfigMap", &cm)).unwrap();
        assert_eq!(got["metadata"], json!({"name": "a", "namespace": "ns"}));
    }

    #[test]
    fn unknown_fields_are_skipped() {
        let mut cm = Vec::new();
        ld(1, &meta("a"), &mut cm);
        vi(99, 1, &mut cm);
        key(98, 5, &mut cm);
        cm.extend_from_slice(&[0, 0, 0, 0]);
        key(97, 1, &mut cm);
        cm.extend_from_slice(&[0; 8]);
        ld(96, b"zz", &mut cm);
        let got = decode(&envelope("v1", "ConfigMap", &cm)).unwrap();
        assert_eq!(
            got,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}})
        );
    }

    // ---- malformed input ----

    fn err(body: &[u8]) -> String {
        decode(body).unwrap_err().to_string()
    }

    #[test]
    fn rejects_wrong_magic() {
        assert!(err(b"").contains("prefix"));
        assert!(err(b"k8s").contains("prefix"));
        assert!(err(b"{\"kind\":\"ConfigMap\"}").contains("prefix"));
        let (pb, _) = fixture!("configmap");
        let mut bad = pb.to_vec();
        bad[3] = b'x';
        assert!(err(&bad).contains("prefix"));
    }

    #[test]
    fn rejects_every_truncation() {
        for (pb, _) in [fixture!("deployment"), fixture!("cani"), fixture!("secret")] {
            // A cut between two envelope fields is still a well-formed message.
            let mut boundaries = vec![4];
            let mut r = Reader::new(&pb[4..]);
            while let Some((_, wire)) = r.key().unwrap() {
                r.skip(wire).unwrap();
                boundaries.push(4 + r.pos);
            }
            for n in 4..pb.len() {
                let r = decode(&pb[..n]);
                if boundaries.contains(&n) {
                    continue;
                }
                assert!(r.is_err(), "prefix of {n} bytes decoded: {r:?}");
            }
        }
    }

    #[test]
    fn rejects_unknown_kind() {
        let e = err(&envelope("v1", "Nope", &[]));
        assert!(e.contains("no protobuf schema for kind \"Nope\""), "{e}");
        let e = err(&envelope("example.com/v1", "Widget", &[]));
        assert!(e.contains("Widget"), "{e}");
        let mut body = MAGIC.to_vec();
        ld(2, b"", &mut body);
        assert!(err(&body).contains("no kind"));
    }

    #[test]
    fn rejects_bad_wire_types_and_varints() {
        // metadata (field 1) as a varint.
        let mut cm = Vec::new();
        vi(1, 3, &mut cm);
        let e = err(&envelope("v1", "ConfigMap", &cm));
        assert!(e.contains("wire type 0"), "{e}");
        // Group wire types.
        let e = err(&envelope("v1", "ConfigMap", &[0x0b, 0x0c]));
        assert!(e.contains("unsupported wire type 3"), "{e}");
        // Field number 0.
        let e = err(&envelope("v1", "ConfigMap", &[0x02, 0x00]));
        assert!(e.contains("invalid field number 0"), "{e}");
        // 11-byte varint.
        let mut body = MAGIC.to_vec();
        body.push(0x28);
        body.extend_from_slice(&[0xff; 10]);
        body.push(0x01);
        assert!(err(&body).contains("overflows"));
        // 10th byte > 1.
        let mut body = MAGIC.to_vec();
        body.push(0x30);
        body.extend_from_slice(&[0xff; 9]);
        body.push(0x02);
        assert!(err(&body).contains("overflows"));
        // Length beyond the end.
        let mut body = MAGIC.to_vec();
        body.extend_from_slice(&[0x12, 0xff, 0xff, 0xff, 0xff, 0x0f]);
        assert!(err(&body).contains("truncated"));
        // Impossible IntOrString type.
        let mut ios = Vec::new();
        vi(1, 7, &mut ios);
        let mut port = Vec::new();
        vi(3, 80, &mut port);
        ld(4, &ios, &mut port);
        let mut spec = Vec::new();
        ld(1, &port, &mut spec);
        let mut svc = Vec::new();
        ld(2, &spec, &mut svc);
        let e = err(&envelope("v1", "Service", &svc));
        assert!(
            e.contains("IntOrString") && e.contains("spec.ports.targetPort"),
            "{e}"
        );
        // Gzip content encoding.
        let mut body = envelope("v1", "ConfigMap", &[]);
        ld(3, b"gzip", &mut body);
        assert!(err(&body).contains("content encoding"));
        // Embedded JSON: Go reads `raw` as protobuf whatever the content type says.
        let mut body = envelope("v1", "ConfigMap", br#"{"data":{"k":"v"}}"#);
        ld(4, b"application/json", &mut body);
        assert!(err(&body).contains("content type"));
        let mut body = envelope("v1", "ConfigMap", &[]);
        ld(4, crate::MEDIA_TYPE.as_bytes(), &mut body);
        assert!(decode(&body).is_ok());
    }

    #[test]
    fn deep_nesting_is_bounded() {
        // JSONSchemaProps.not nests without limit in the schema.
        let mut props: Vec<u8> = Vec::new();
        for _ in 0..150 {
            let mut outer = Vec::new();
            ld(28, &props, &mut outer);
            props = outer;
        }
        let mut validation = Vec::new();
        ld(1, &props, &mut validation);
        let mut version = Vec::new();
        ld(4, &validation, &mut version);
        let mut spec = Vec::new();
        ld(7, &version, &mut spec);
        let mut crd = Vec::new();
        ld(2, &spec, &mut crd);
        let e = err(&envelope(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            &crd,
        ));
        assert!(e.contains("nested more than 100"), "{e}");
        // Nested protobuf envelopes in RawExtensions are bounded too.
        let mut body = envelope("apps/v1", "ControllerRevision", &[]);
        for _ in 0..150 {
            let mut raw = Vec::new();
            ld(1, &body, &mut raw);
            let mut cr = Vec::new();
            ld(2, &raw, &mut cr);
            body = envelope("apps/v1", "ControllerRevision", &cr);
        }
        assert!(err(&body).contains("nested more than 100"));
    }

    #[test]
    fn garbage_never_panics() {
        // A small deterministic generator; every result is fine as long as none panics.
        let (pb, _) = fixture!("deployment");
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..3000 {
            let mut b = pb.to_vec();
            let flips = 1 + next() % 4;
            for _ in 0..flips {
                let i = 4 + (next() as usize) % (b.len() - 4);
                b[i] = next() as u8;
            }
            let _ = decode(&b);
        }
        for len in 0..64 {
            let mut b = MAGIC.to_vec();
            b.extend((0..len).map(|_| next() as u8));
            let _ = decode(&b);
        }
    }
}
