//! The Swagger 2.0 document as the gnostic `openapi.v2.Document` protobuf message
//! (`application/com.github.proto-openapi.spec.v2@v1.0+protobuf`), the form kubectl
//! downloads for client-side validation. proto3: zero values are left out; every value
//! without a typed field (defaults, enums, examples, `x-` extensions) is an `Any` whose
//! `yaml` holds its JSON text (JSON is YAML).

use crate::protobuf::encode::{key, ld, varint};
use serde_json::{Map, Value};

/// Encodes a Swagger 2.0 JSON document.
pub fn document(doc: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    let Some(d) = doc.as_object() else {
        return out;
    };
    string(1, d.get("swagger"), &mut out);
    if let Some(info) = d.get("info").and_then(Value::as_object) {
        let mut b = Vec::new();
        string(1, info.get("title"), &mut b);
        string(2, info.get("version"), &mut b);
        string(3, info.get("description"), &mut b);
        extensions(7, info, &mut b);
        ld(2, &b, &mut out);
    }
    string(3, d.get("host"), &mut out);
    string(4, d.get("basePath"), &mut out);
    strings(5, d.get("schemes"), &mut out);
    strings(6, d.get("consumes"), &mut out);
    strings(7, d.get("produces"), &mut out);
    if let Some(paths) = d.get("paths").and_then(Value::as_object) {
        let mut b = Vec::new();
        extensions(1, paths, &mut b);
        for (name, item) in paths.iter().filter(|(k, _)| !k.starts_with("x-")) {
            named(2, name, &path_item(item), &mut b);
        }
        ld(8, &b, &mut out);
    }
    if let Some(defs) = d.get("definitions").and_then(Value::as_object) {
        let mut b = Vec::new();
        for (name, s) in defs {
            named(1, name, &schema(s, 0), &mut b);
        }
        ld(9, &b, &mut out);
    }
    if let Some(reqs) = d.get("security").and_then(Value::as_array) {
        for r in reqs {
            ld(12, &security_requirement(r), &mut out);
        }
    }
    if let Some(defs) = d.get("securityDefinitions").and_then(Value::as_object) {
        let mut b = Vec::new();
        for (name, s) in defs {
            named(1, name, &security_definition(s), &mut b);
        }
        ld(13, &b, &mut out);
    }
    extensions(16, d, &mut out);
    out
}

fn string(num: u32, v: Option<&Value>, out: &mut Vec<u8>) {
    if let Some(s) = v.and_then(Value::as_str).filter(|s| !s.is_empty()) {
        ld(num, s.as_bytes(), out);
    }
}

fn strings(num: u32, v: Option<&Value>, out: &mut Vec<u8>) {
    match v {
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .for_each(|s| ld(num, s.as_bytes(), out)),
        Some(Value::String(s)) => ld(num, s.as_bytes(), out),
        _ => {}
    }
}

fn boolean(num: u32, v: Option<&Value>, out: &mut Vec<u8>) {
    if v.and_then(Value::as_bool) == Some(true) {
        key(num, 0, out);
        varint(1, out);
    }
}

fn int(num: u32, v: Option<&Value>, out: &mut Vec<u8>) {
    if let Some(i) = v.and_then(Value::as_i64).filter(|i| *i != 0) {
        key(num, 0, out);
        varint(i as u64, out);
    }
}

fn double(num: u32, v: Option<&Value>, out: &mut Vec<u8>) {
    if let Some(f) = v.and_then(Value::as_f64).filter(|f| *f != 0.0) {
        key(num, 1, out);
        out.extend_from_slice(&f.to_bits().to_le_bytes());
    }
}

/// `Any{yaml = 2}`.
fn any(v: &Value) -> Vec<u8> {
    let mut b = Vec::new();
    let text = serde_json::to_string(v).unwrap_or_default();
    ld(2, text.as_bytes(), &mut b);
    b
}

fn any_field(num: u32, v: Option<&Value>, out: &mut Vec<u8>) {
    if let Some(v) = v {
        ld(num, &any(v), out);
    }
}

/// A `Named*` pair: {name = 1, value = 2}.
fn named(num: u32, name: &str, value: &[u8], out: &mut Vec<u8>) {
    let mut b = Vec::with_capacity(name.len() + value.len() + 8);
    ld(1, name.as_bytes(), &mut b);
    ld(2, value, &mut b);
    ld(num, &b, out);
}

/// `x-` keys as repeated NamedAny.
fn extensions(num: u32, m: &Map<String, Value>, out: &mut Vec<u8>) {
    for (k, v) in m.iter().filter(|(k, _)| k.starts_with("x-")) {
        named(num, k, &any(v), out);
    }
}

/// Deepest schema nesting encoded (the documents are acyclic; this bounds odd input).
const MAX_DEPTH: usize = 64;

fn schema(v: &Value, depth: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let Some(s) = v.as_object() else {
        return out;
    };
    if depth > MAX_DEPTH {
        return out;
    }
    string(1, s.get("$ref"), &mut out);
    string(2, s.get("format"), &mut out);
    string(3, s.get("title"), &mut out);
    string(4, s.get("description"), &mut out);
    any_field(5, s.get("default"), &mut out);
    double(6, s.get("multipleOf"), &mut out);
    double(7, s.get("maximum"), &mut out);
    boolean(8, s.get("exclusiveMaximum"), &mut out);
    double(9, s.get("minimum"), &mut out);
    boolean(10, s.get("exclusiveMinimum"), &mut out);
    int(11, s.get("maxLength"), &mut out);
    int(12, s.get("minLength"), &mut out);
    string(13, s.get("pattern"), &mut out);
    int(14, s.get("maxItems"), &mut out);
    int(15, s.get("minItems"), &mut out);
    boolean(16, s.get("uniqueItems"), &mut out);
    int(17, s.get("maxProperties"), &mut out);
    int(18, s.get("minProperties"), &mut out);
    strings(19, s.get("required"), &mut out);
    if let Some(e) = s.get("enum").and_then(Value::as_array) {
        e.iter().for_each(|v| ld(20, &any(v), &mut out));
    }
    match s.get("additionalProperties") {
        // AdditionalPropertiesItem: oneof {schema = 1, boolean = 2}.
        Some(Value::Bool(b)) => {
            let mut a = Vec::new();
            key(2, 0, &mut a);
            varint(u64::from(*b), &mut a);
            ld(21, &a, &mut out);
        }
        Some(v @ Value::Object(_)) => {
            let mut a = Vec::new();
            ld(1, &schema(v, depth + 1), &mut a);
            ld(21, &a, &mut out);
        }
        _ => {}
    }
    if let Some(t) = s.get("type") {
        let mut b = Vec::new();
        strings(1, Some(t), &mut b);
        ld(22, &b, &mut out);
    }
    match s.get("items") {
        Some(Value::Array(items)) => {
            let mut b = Vec::new();
            items
                .iter()
                .for_each(|i| ld(1, &schema(i, depth + 1), &mut b));
            ld(23, &b, &mut out);
        }
        Some(v @ Value::Object(_)) => {
            let mut b = Vec::new();
            ld(1, &schema(v, depth + 1), &mut b);
            ld(23, &b, &mut out);
        }
        _ => {}
    }
    if let Some(all) = s.get("allOf").and_then(Value::as_array) {
        all.iter()
            .for_each(|v| ld(24, &schema(v, depth + 1), &mut out));
    }
    if let Some(props) = s.get("properties").and_then(Value::as_object) {
        let mut b = Vec::new();
        for (name, p) in props {
            named(1, name, &schema(p, depth + 1), &mut b);
        }
        ld(25, &b, &mut out);
    }
    string(26, s.get("discriminator"), &mut out);
    boolean(27, s.get("readOnly"), &mut out);
    any_field(30, s.get("example"), &mut out);
    extensions(31, s, &mut out);
    out
}

fn path_item(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    let Some(p) = v.as_object() else {
        return out;
    };
    string(1, p.get("$ref"), &mut out);
    for (num, method) in [
        (2, "get"),
        (3, "put"),
        (4, "post"),
        (5, "delete"),
        (6, "options"),
        (7, "head"),
        (8, "patch"),
    ] {
        if let Some(op) = p.get(method) {
            ld(num, &operation(op), &mut out);
        }
    }
    if let Some(ps) = p.get("parameters").and_then(Value::as_array) {
        ps.iter().for_each(|x| ld(9, &parameters_item(x), &mut out));
    }
    extensions(10, p, &mut out);
    out
}

fn operation(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    let Some(o) = v.as_object() else {
        return out;
    };
    strings(1, o.get("tags"), &mut out);
    string(2, o.get("summary"), &mut out);
    string(3, o.get("description"), &mut out);
    string(5, o.get("operationId"), &mut out);
    strings(6, o.get("produces"), &mut out);
    strings(7, o.get("consumes"), &mut out);
    if let Some(ps) = o.get("parameters").and_then(Value::as_array) {
        ps.iter().for_each(|x| ld(8, &parameters_item(x), &mut out));
    }
    if let Some(rs) = o.get("responses").and_then(Value::as_object) {
        // Responses{response_code = 1 (NamedResponseValue), vendor_extension = 2}.
        let mut b = Vec::new();
        for (code, r) in rs.iter().filter(|(k, _)| !k.starts_with("x-")) {
            named(1, code, &response_value(r), &mut b);
        }
        extensions(2, rs, &mut b);
        ld(9, &b, &mut out);
    }
    strings(10, o.get("schemes"), &mut out);
    boolean(11, o.get("deprecated"), &mut out);
    if let Some(reqs) = o.get("security").and_then(Value::as_array) {
        reqs.iter()
            .for_each(|r| ld(12, &security_requirement(r), &mut out));
    }
    extensions(13, o, &mut out);
    out
}

/// ResponseValue: oneof {response = 1, json_reference = 2}.
fn response_value(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    if let Some(r) = v.get("$ref") {
        let mut j = Vec::new();
        string(1, Some(r), &mut j);
        ld(2, &j, &mut out);
        return out;
    }
    let mut b = Vec::new();
    string(1, v.get("description"), &mut b);
    if let Some(s) = v.get("schema") {
        // SchemaItem: oneof {schema = 1, file_schema = 2}.
        let mut si = Vec::new();
        ld(1, &schema(s, 0), &mut si);
        ld(2, &si, &mut b);
    }
    if let Some(m) = v.as_object() {
        extensions(5, m, &mut b);
    }
    ld(1, &b, &mut out);
    out
}

/// ParametersItem: oneof {parameter = 1, json_reference = 2}; Parameter: oneof
/// {body_parameter = 1, non_body_parameter = 2}; NonBodyParameter: oneof {header = 1,
/// form_data = 2, query = 3, path = 4}.
fn parameters_item(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    let Some(p) = v.as_object() else {
        return out;
    };
    if let Some(r) = p.get("$ref") {
        let mut j = Vec::new();
        string(1, Some(r), &mut j);
        string(2, p.get("description"), &mut j);
        ld(2, &j, &mut out);
        return out;
    }
    let mut param = Vec::new();
    let loc = p.get("in").and_then(Value::as_str).unwrap_or("");
    if loc == "body" {
        let mut b = Vec::new();
        string(1, p.get("description"), &mut b);
        string(2, p.get("name"), &mut b);
        string(3, p.get("in"), &mut b);
        boolean(4, p.get("required"), &mut b);
        if let Some(s) = p.get("schema") {
            ld(5, &schema(s, 0), &mut b);
        }
        extensions(6, p, &mut b);
        ld(1, &b, &mut param);
    } else {
        // Query and form data have allow_empty_value at 5; header and path do not.
        let (which, shift) = match loc {
            "header" => (1, 0),
            "formData" => (2, 1),
            "path" => (4, 0),
            _ => (3, 1),
        };
        let mut b = Vec::new();
        boolean(1, p.get("required"), &mut b);
        string(2, p.get("in"), &mut b);
        string(3, p.get("description"), &mut b);
        string(4, p.get("name"), &mut b);
        if shift == 1 {
            boolean(5, p.get("allowEmptyValue"), &mut b);
        }
        string(5 + shift, p.get("type"), &mut b);
        string(6 + shift, p.get("format"), &mut b);
        string(8 + shift, p.get("collectionFormat"), &mut b);
        any_field(9 + shift, p.get("default"), &mut b);
        boolean(19 + shift, p.get("uniqueItems"), &mut b);
        if let Some(e) = p.get("enum").and_then(Value::as_array) {
            e.iter().for_each(|v| ld(20 + shift, &any(v), &mut b));
        }
        extensions(22 + shift, p, &mut b);
        let mut nb = Vec::new();
        ld(which, &b, &mut nb);
        ld(2, &nb, &mut param);
    }
    ld(1, &param, &mut out);
    out
}

/// SecurityRequirement{additional_properties = 1 (NamedStringArray)}.
fn security_requirement(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    if let Some(m) = v.as_object() {
        for (name, scopes) in m {
            let mut sa = Vec::new();
            strings(1, Some(scopes), &mut sa);
            named(1, name, &sa, &mut out);
        }
    }
    out
}

/// SecurityDefinitionsItem: oneof {basic = 1, api_key = 2, ...}; only the kinds
/// Kubernetes documents (apiKey, basic) are written.
fn security_definition(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    let mut b = Vec::new();
    match v.get("type").and_then(Value::as_str) {
        Some("apiKey") => {
            string(1, v.get("type"), &mut b);
            string(2, v.get("name"), &mut b);
            string(3, v.get("in"), &mut b);
            string(4, v.get("description"), &mut b);
            ld(2, &b, &mut out);
        }
        Some("basic") => {
            string(1, v.get("type"), &mut b);
            string(2, v.get("description"), &mut b);
            ld(1, &b, &mut out);
        }
        _ => {}
    }
    out
}
