//! Turning a schemars (OpenAPI 3.0) schema into a Kubernetes *structural* schema.
//!
//! Kubernetes accepts a CRD schema only when it is
//! [structural](https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#specifying-a-structural-schema):
//! no `$ref`, every node typed (or marked `x-kubernetes-int-or-string` /
//! `x-kubernetes-preserve-unknown-fields`), and `allOf`/`anyOf`/`oneOf`/`not` used only for
//! value validation over fields that the surrounding schema also declares. schemars
//! produces references, type arrays, `oneOf` for enums and boolean schemas; this module
//! rewrites them:
//!
//! | schemars produces | rewritten to |
//! |---|---|
//! | `$ref` to a definition | the definition, inlined (recursive types are an error) |
//! | `Option<T>`: `type: [T, null]`, `anyOf: [T, {null}]` | `T` with `nullable: true` |
//! | enum of unit variants (`enum` or `oneOf` of `const`s) | `type: string` + `enum` |
//! | enum with data (externally/internally/adjacently tagged, untagged objects) | `type: object` with the variants' properties merged into `properties`; the `oneOf`/`anyOf` keeps only `required` and value checks |
//! | untagged enum of integer and string | `x-kubernetes-int-or-string: true` |
//! | `serde_json::Value`, `true` | `x-kubernetes-preserve-unknown-fields: true` (nullable) |
//! | `BTreeMap<String, serde_json::Value>` (`additionalProperties: true`) | `type: object` + `x-kubernetes-preserve-unknown-fields: true` |
//! | `additionalProperties: false` (`deny_unknown_fields`) | removed |
//! | `uniqueItems: true` (`HashSet`/`BTreeSet`) | removed; `x-kubernetes-list-type: set` for scalar items |
//! | `exclusiveMinimum: 5` (a number) | `minimum: 5` + `exclusiveMinimum: true` |
//! | formats Kubernetes does not know (`uint32`, `int8`, …) | removed (the ranges stay) |
//! | `title`, `$schema`, `examples`, `readOnly`, `default: null`, … | removed |
//!
//! What cannot be expressed is an error naming the field: recursive types, enums mixing
//! unit variants (serialized as strings) with data variants (objects), variants whose
//! same-named fields have different types, tuples of different element types.
//!
//! One limit: schemars gives `Option<T>` the same schema as `T` when `T`'s schema has no
//! `type` (k8s-openapi's `IntOrString` and `Quantity` are such types), so those optional
//! fields are not marked `nullable`. Serialize them with
//! `#[serde(skip_serializing_if = "Option::is_none")]` (good practice for every optional
//! field of a custom resource): a real API server drops a `null` there, the embedded one
//! rejects it.

use serde_json::{Map, Value, json};
use std::fmt;

/// Why a type's schema cannot be turned into a structural CRD schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaError {
    context: String,
    path: String,
    message: String,
}

impl SchemaError {
    pub(crate) fn at(path: &str, message: impl Into<String>) -> Self {
        Self {
            context: String::new(),
            path: path.to_string(),
            message: message.into(),
        }
    }

    /// Adds what was being built (e.g. "the CRD of Monitor") to the message.
    pub(crate) fn context(mut self, context: impl Into<String>) -> Self {
        self.context = context.into();
        self
    }

    /// The JSON path of the offending field in the object (e.g. `.spec.source`), empty
    /// for the whole schema.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// What is wrong and, where there is one, how to fix it.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The generated CRD JSON did not decode as a k8s-openapi `CustomResourceDefinition`
    /// (a bug: used by the derive's generated code).
    #[doc(hidden)]
    pub fn decode(err: serde_json::Error) -> Self {
        Self::at("", format!("the generated CRD does not decode: {err}"))
    }
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.context.is_empty() {
            write!(f, "cannot build {}: ", self.context)?;
        }
        if self.path.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "at `{}`: {}", self.path, self.message)
        }
    }
}

impl std::error::Error for SchemaError {}

/// Formats Kubernetes knows (apiextensions' supported formats); others are dropped.
const KNOWN_FORMATS: &[&str] = &[
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
    "date-time",
    "int32",
    "int64",
    "float",
    "double",
];

/// Keys a structural schema node may carry (besides `x-kubernetes-*`).
const ALLOWED_KEYS: &[&str] = &[
    "type",
    "format",
    "description",
    "nullable",
    "default",
    "enum",
    "maximum",
    "minimum",
    "exclusiveMaximum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "multipleOf",
    "maxProperties",
    "minProperties",
    "required",
    "items",
    "properties",
    "additionalProperties",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "example",
    "externalDocs",
];

/// Keys that decide what a node is (as opposed to annotations such as `description`).
const SHAPE_KEYS: &[&str] = &[
    "type",
    "properties",
    "items",
    "additionalProperties",
    "enum",
    "const",
    "oneOf",
    "anyOf",
    "prefixItems",
    "x-kubernetes-int-or-string",
    "x-kubernetes-preserve-unknown-fields",
];

const SCALARS: &[&str] = &["string", "integer", "number", "boolean"];

const PRESERVE: &str = "x-kubernetes-preserve-unknown-fields";
const INT_OR_STRING: &str = "x-kubernetes-int-or-string";

/// Rewrites a schemars schema (generated with `SchemaSettings::openapi3()`, transforms
/// applied) into a structural schema. `definitions` are the generator's definitions
/// (needed only for recursive types, which are reported as errors, or when
/// `inline_subschemas` was off).
pub fn structural_schema(
    schema: Value,
    definitions: &Map<String, Value>,
) -> Result<Value, SchemaError> {
    structural_schema_at(schema, definitions, "")
}

/// [`structural_schema`] for a schema that sits at `path` in the object (for messages).
pub(crate) fn structural_schema_at(
    mut schema: Value,
    definitions: &Map<String, Value>,
    path: &str,
) -> Result<Value, SchemaError> {
    let mut rw = Rewriter {
        defs: definitions,
        stack: vec![],
    };
    rw.node(&mut schema, path)?;
    Ok(schema)
}

/// The structural schema of any `JsonSchema` type, as the derive computes it for a spec.
///
/// ```
/// # #[derive(schemars::JsonSchema)]
/// # #[schemars(crate = "kubewright::schemars")]
/// # #[allow(dead_code)]
/// struct Limits { max: Option<u32> }
/// let schema = kubewright::crd::schema_for::<Limits>().unwrap();
/// assert_eq!(schema["properties"]["max"]["nullable"], true);
/// assert_eq!(schema["properties"]["max"]["minimum"], 0);
/// ```
#[cfg(feature = "derive")]
pub fn schema_for<T: schemars::JsonSchema + ?Sized>() -> Result<Value, SchemaError> {
    let mut generator = schemars::generate::SchemaSettings::openapi3()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator();
    let mut schema = generator.subschema_for::<T>();
    for t in generator.transforms_mut() {
        t.transform(&mut schema);
    }
    let defs = generator.take_definitions(true);
    structural_schema(schema.to_value(), &defs)
}

struct Rewriter<'a> {
    defs: &'a Map<String, Value>,
    /// Definitions being inlined (recursion detection).
    stack: Vec<String>,
}

fn obj(v: &mut Value) -> &mut Map<String, Value> {
    if !v.is_object() {
        *v = Value::Object(Map::new());
    }
    match v {
        Value::Object(m) => m,
        _ => unreachable!("just made an object"),
    }
}

fn type_of(m: &Map<String, Value>) -> Option<&str> {
    m.get("type").and_then(Value::as_str)
}

fn is_true(m: &Map<String, Value>, key: &str) -> bool {
    m.get(key) == Some(&Value::Bool(true))
}

/// `{"type": "null"}`, `{"nullable": true, "enum": [null]}`, `{"const": null}`.
fn is_null_schema(v: &Value) -> bool {
    let Some(m) = v.as_object() else {
        return false;
    };
    m.get("type") == Some(&json!("null"))
        || m.get("enum") == Some(&json!([null]))
        || m.get("const") == Some(&Value::Null)
}

fn percent_decode(s: &str) -> String {
    fn hex(b: u8) -> Option<u8> {
        (b as char).to_digit(16).and_then(|d| u8::try_from(d).ok())
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push(h * 16 + l);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl Rewriter<'_> {
    fn node(&mut self, v: &mut Value, path: &str) -> Result<(), SchemaError> {
        match v {
            Value::Bool(true) => *v = Value::Object(Map::new()),
            Value::Bool(false) => {
                return Err(SchemaError::at(
                    path,
                    "the schema `false` (no value allowed) cannot be expressed in a CRD",
                ));
            }
            Value::Object(_) => {}
            other => {
                return Err(SchemaError::at(path, format!("not a schema: {other}")));
            }
        }
        let depth = self.stack.len();
        let m = obj(v);
        let result = self
            .resolve_refs(m, path)
            .and_then(|()| self.object(m, path));
        self.stack.truncate(depth);
        result
    }

    /// Replaces `$ref` with the referenced definition (the node's own keys win).
    fn resolve_refs(&mut self, m: &mut Map<String, Value>, path: &str) -> Result<(), SchemaError> {
        while let Some(r) = m.remove("$ref") {
            let r = r
                .as_str()
                .ok_or_else(|| SchemaError::at(path, "`$ref` is not a string"))?
                .to_string();
            let encoded = r.rsplit('/').next().unwrap_or("");
            let name = percent_decode(encoded)
                .replace("~1", "/")
                .replace("~0", "~");
            if self.stack.contains(&name) {
                return Err(SchemaError::at(
                    path,
                    format!(
                        "`{name}` contains itself: a structural schema cannot describe a recursive type; \
                         break the cycle (e.g. give the field #[schemars(schema_with = \"...\")] returning \
                         an object schema with \"x-kubernetes-preserve-unknown-fields\": true)"
                    ),
                ));
            }
            let def = self
                .defs
                .get(&name)
                .or_else(|| self.defs.get(encoded))
                .ok_or_else(|| SchemaError::at(path, format!("unresolved reference `{r}`")))?;
            match def {
                Value::Bool(true) => {}
                Value::Object(dm) => {
                    for (k, val) in dm {
                        if !m.contains_key(k) {
                            m.insert(k.clone(), val.clone());
                        }
                    }
                }
                _ => {
                    return Err(SchemaError::at(
                        path,
                        format!("reference `{r}` is not a usable schema"),
                    ));
                }
            }
            self.stack.push(name);
        }
        Ok(())
    }

    fn object(&mut self, m: &mut Map<String, Value>, path: &str) -> Result<(), SchemaError> {
        let Some(all_of) = m.remove("allOf") else {
            return self.shape(m, path);
        };
        let Value::Array(items) = all_of else {
            return Err(SchemaError::at(path, "`allOf` is not an array"));
        };
        let shape_empty = !m.keys().any(|k| SHAPE_KEYS.contains(&k.as_str()));
        let mut processed = Vec::with_capacity(items.len());
        for mut item in items {
            self.node(&mut item, path)?;
            processed.push(item);
        }
        if shape_empty {
            // `{allOf: [X], description: ...}`: X with the node's annotations on top.
            let annotations = std::mem::take(m);
            let mut iter = processed.into_iter();
            if let Some(first) = iter.next() {
                *m = match first {
                    Value::Object(f) => f,
                    _ => Map::new(),
                };
            }
            for item in iter {
                merge_all_of(m, item, path)?;
            }
            for (k, v) in annotations {
                m.insert(k, v);
            }
            cleanup_annotations(m);
            if m.is_empty() {
                free_form(m);
            }
            Ok(())
        } else {
            self.shape(m, path)?;
            for item in processed {
                merge_all_of(m, item, path)?;
            }
            Ok(())
        }
    }

    fn shape(&mut self, m: &mut Map<String, Value>, path: &str) -> Result<(), SchemaError> {
        // Children first.
        if let Some(Value::Object(props)) = m.get_mut("properties") {
            for (k, sub) in props.iter_mut() {
                self.node(sub, &format!("{path}.{k}"))?;
            }
        }
        if let Some(prefix) = m.remove("prefixItems") {
            m.insert("items".into(), prefix);
        }
        let item_path = format!("{path}[*]");
        match m.get_mut("items") {
            Some(Value::Array(items)) => {
                for it in items.iter_mut() {
                    self.node(it, &item_path)?;
                }
                let first = items.first().cloned();
                if let Some(first) = first {
                    if items.iter().any(|i| *i != first) {
                        return Err(SchemaError::at(
                            path,
                            "a tuple with elements of different types cannot be expressed in a structural \
                             schema (every list item needs one schema); use a struct instead",
                        ));
                    }
                    m.insert("items".into(), first);
                } else {
                    m.remove("items");
                }
            }
            Some(items) => self.node(items, &item_path)?,
            None => {}
        }
        if let Some(ap) = m.get_mut("additionalProperties")
            && ap.is_object()
        {
            self.node(ap, &format!("{path}[*]"))?;
        }
        if let Some(not) = m.get_mut("not") {
            self.node(not, path)?;
            strip_value_validation(not);
        }
        for key in ["oneOf", "anyOf"] {
            if let Some(branches) = m.remove(key) {
                self.variants(m, key, branches, path)?;
            }
        }
        normalize(m, path)
    }

    /// `oneOf` / `anyOf`: optional values, enums, int-or-string, object variants.
    fn variants(
        &mut self,
        m: &mut Map<String, Value>,
        key: &str,
        branches: Value,
        path: &str,
    ) -> Result<(), SchemaError> {
        let Value::Array(branches) = branches else {
            return Err(SchemaError::at(path, format!("`{key}` is not an array")));
        };
        let mut bs: Vec<Map<String, Value>> = vec![];
        for mut b in branches {
            if is_null_schema(&b) {
                m.insert("nullable".into(), Value::Bool(true));
                continue;
            }
            self.node(&mut b, path)?;
            if let Value::Object(b) = b {
                bs.push(b);
            }
        }
        if bs.is_empty() {
            return Ok(());
        }
        if bs.len() == 1 {
            let only = bs.pop().map(Value::Object).unwrap_or(Value::Null);
            return merge_single(m, only, path);
        }

        let kinds: Vec<Option<String>> = bs
            .iter()
            .map(|b| {
                if is_true(b, INT_OR_STRING) {
                    Some("int-or-string".to_string())
                } else {
                    type_of(b).map(str::to_string)
                }
            })
            .collect();
        let mut distinct: Vec<&str> = kinds.iter().flatten().map(String::as_str).collect();
        distinct.sort_unstable();
        distinct.dedup();
        let untyped = kinds.iter().any(Option::is_none);
        if let Some(t) = type_of(m)
            && !distinct.is_empty()
            && distinct != [t]
        {
            return Err(SchemaError::at(
                path,
                format!(
                    "the type is `{t}` but its variants are of type {}",
                    distinct.join(" and ")
                ),
            ));
        }

        if untyped {
            // A free-form variant accepts anything: the node does too.
            m.insert(PRESERVE.into(), Value::Bool(true));
            if distinct.iter().all(|t| *t == "object") {
                m.insert("type".into(), json!("object"));
                return hoist(m, key, bs, path);
            }
            return Ok(());
        }

        match distinct.as_slice() {
            ["object"] => hoist(m, key, bs, path),
            [scalar] if SCALARS.contains(scalar) => {
                m.insert("type".into(), json!(scalar));
                if bs.iter().all(|b| b.contains_key("enum")) {
                    let mut values: Vec<Value> = vec![];
                    for b in &bs {
                        for v in b
                            .get("enum")
                            .and_then(Value::as_array)
                            .into_iter()
                            .flatten()
                        {
                            if !values.contains(v) {
                                values.push(v.clone());
                            }
                        }
                    }
                    m.insert("enum".into(), Value::Array(values));
                    return Ok(());
                }
                keep_branches(m, "anyOf", bs);
                Ok(())
            }
            ["array"] => {
                m.insert("type".into(), json!("array"));
                let mut items: Option<Value> = None;
                for b in &bs {
                    if let Some(i) = b.get("items") {
                        match &mut items {
                            None => items = Some(i.clone()),
                            Some(acc) => merge_schemas(acc, i.clone(), &format!("{path}[*]"))?,
                        }
                    }
                }
                if let Some(items) = items {
                    m.insert("items".into(), items);
                }
                keep_branches(m, "anyOf", bs);
                Ok(())
            }
            ["int-or-string", "integer"]
            | ["int-or-string", "string"]
            | ["int-or-string", "integer", "string"]
            | ["integer", "string"] => {
                m.remove("type");
                m.insert(INT_OR_STRING.into(), Value::Bool(true));
                Ok(())
            }
            ["integer", "number"] => {
                m.insert("type".into(), json!("number"));
                keep_branches(m, "anyOf", bs);
                Ok(())
            }
            ["object", "string"] if key == "oneOf" => Err(SchemaError::at(
                path,
                "this enum mixes unit variants (serialized as plain strings) with variants that carry \
                 data (serialized as objects), and a structural schema needs one type per field: write \
                 the unit variants as empty struct variants (`Variant {}`), or tag the enum with \
                 #[serde(tag = \"type\")]",
            )),
            _ => Err(SchemaError::at(
                path,
                format!(
                    "the variants of this enum have different types ({}), which a structural schema \
                     cannot express; give all variants the same JSON type",
                    distinct.join(", ")
                ),
            )),
        }
    }
}

/// One remaining variant (`Option<T>` as `anyOf: [T, null]`): `T`, the node's own
/// annotations (description, default) winning.
fn merge_single(m: &mut Map<String, Value>, only: Value, path: &str) -> Result<(), SchemaError> {
    let Value::Object(only) = only else {
        return Ok(());
    };
    if m.contains_key("properties") && only.contains_key("properties") {
        return merge_all_of(m, Value::Object(only), path);
    }
    for (k, v) in only {
        match m.get(&k) {
            None => {
                m.insert(k, v);
            }
            Some(_) if k == "nullable" && v == Value::Bool(true) => {
                m.insert(k, v);
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// Keeps value-validation branches that still say something; drops the keyword when any
/// branch says nothing (it would accept everything).
fn keep_branches(m: &mut Map<String, Value>, key: &str, bs: Vec<Map<String, Value>>) {
    let mut stripped: Vec<Value> = bs
        .into_iter()
        .map(|b| {
            let mut v = Value::Object(b);
            strip_value_validation(&mut v);
            v
        })
        .collect();
    if stripped
        .iter()
        .any(|b| b.as_object().is_none_or(Map::is_empty))
    {
        return;
    }
    stripped.dedup();
    if stripped.len() > 1 {
        m.insert(key.into(), Value::Array(stripped));
    } else if let Some(Value::Object(one)) = stripped.pop() {
        // A single constraint applies to the node itself, as an allOf value validation.
        let all = m.entry("allOf").or_insert_with(|| json!([]));
        if let Value::Array(all) = all {
            all.push(Value::Object(one));
        }
    }
}

/// Object variants: their properties move to the node (merged per name), the branches
/// keep only what distinguishes them (`required`, value checks such as a tag's `enum`).
fn hoist(
    m: &mut Map<String, Value>,
    key: &str,
    bs: Vec<Map<String, Value>>,
    path: &str,
) -> Result<(), SchemaError> {
    m.insert("type".into(), json!("object"));
    let mut props = match m.remove("properties") {
        Some(Value::Object(p)) => p,
        _ => Map::new(),
    };
    for b in &bs {
        let Some(Value::Object(bp)) = b.get("properties") else {
            continue;
        };
        let variant_description = b.get("description").filter(|_| bp.len() == 1);
        for (k, s) in bp {
            let mut s = s.clone();
            if let (Some(d), Some(sm)) = (variant_description, s.as_object_mut())
                && !sm.contains_key("description")
            {
                sm.insert("description".into(), d.clone());
            }
            match props.get_mut(k) {
                None => {
                    props.insert(k.clone(), s);
                }
                Some(existing) => merge_schemas(existing, s, &format!("{path}.{k}"))?,
            }
        }
        if is_true(b, PRESERVE) {
            m.insert(PRESERVE.into(), Value::Bool(true));
        }
    }
    // Fields every variant requires are required by the node.
    let mut common: Option<Vec<Value>> = None;
    for b in &bs {
        let req: Vec<Value> = b
            .get("required")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        common = Some(match common {
            None => req,
            Some(c) => c.into_iter().filter(|r| req.contains(r)).collect(),
        });
    }
    if let Some(common) = common.filter(|c| !c.is_empty()) {
        let req = m.entry("required").or_insert_with(|| json!([]));
        if let Value::Array(req) = req {
            for r in common {
                if !req.contains(&r) {
                    req.push(r);
                }
            }
        }
    }
    if !props.is_empty() {
        m.insert("properties".into(), Value::Object(props));
    }
    let stripped: Vec<Value> = bs
        .into_iter()
        .map(|b| {
            let mut v = Value::Object(b);
            strip_value_validation(&mut v);
            subtract(&mut v, m);
            v
        })
        .collect();
    // An empty branch matches everything: `anyOf` becomes vacuous, `oneOf` would reject
    // values matching another branch too; drop the keyword (the schema gets looser).
    if stripped
        .iter()
        .all(|b| b.as_object().is_some_and(|o| !o.is_empty()))
    {
        let mut dedup = stripped.clone();
        dedup.dedup();
        if dedup.len() == stripped.len() || key == "anyOf" {
            m.insert(key.into(), Value::Array(dedup));
        }
    }
    Ok(())
}

/// Merges an `allOf` member (processed) into a processed node.
fn merge_all_of(m: &mut Map<String, Value>, item: Value, path: &str) -> Result<(), SchemaError> {
    let Value::Object(item) = item else {
        return Ok(());
    };
    for (k, v) in item {
        match k.as_str() {
            "type" => match type_of(m) {
                None if !is_true(m, INT_OR_STRING) => {
                    m.insert(k, v);
                }
                Some(t) if v.as_str() != Some(t) => {
                    return Err(SchemaError::at(
                        path,
                        format!("conflicting types `{t}` and {v} in allOf"),
                    ));
                }
                _ => {}
            },
            "properties" => {
                let Value::Object(vp) = v else { continue };
                let props = obj(m.entry("properties").or_insert_with(|| json!({})));
                for (pk, ps) in vp {
                    match props.get_mut(&pk) {
                        None => {
                            props.insert(pk, ps);
                        }
                        Some(existing) => merge_schemas(existing, ps, &format!("{path}.{pk}"))?,
                    }
                }
                if m.get("additionalProperties").is_some_and(Value::is_object) {
                    m.remove("additionalProperties");
                    m.insert(PRESERVE.into(), Value::Bool(true));
                }
            }
            "required" => {
                let req = m.entry("required").or_insert_with(|| json!([]));
                if let (Value::Array(req), Value::Array(add)) = (req, v) {
                    for r in add {
                        if !req.contains(&r) {
                            req.push(r);
                        }
                    }
                }
            }
            "oneOf" | "anyOf" | "allOf" | "not" => {
                if m.contains_key(&k) {
                    let all = m.entry("allOf").or_insert_with(|| json!([]));
                    if let Value::Array(all) = all {
                        if k == "allOf" {
                            if let Value::Array(vs) = v {
                                all.extend(vs);
                            }
                        } else {
                            all.push(json!({ k: v }));
                        }
                    }
                } else {
                    m.insert(k, v);
                }
            }
            PRESERVE => {
                m.insert(k, v);
            }
            _ => {
                if !m.contains_key(&k) {
                    m.insert(k, v);
                }
            }
        }
    }
    Ok(())
}

/// Merges two processed schemas of one field that appears in several variants: the
/// result accepts what either accepts (enums are united, differing checks dropped).
pub(crate) fn merge_schemas(a: &mut Value, b: Value, path: &str) -> Result<(), SchemaError> {
    if *a == b {
        return Ok(());
    }
    let Value::Object(mut bm) = b else {
        return Ok(());
    };
    let am = obj(a);
    let kind = |m: &Map<String, Value>| {
        if is_true(m, INT_OR_STRING) {
            Some("int-or-string".to_string())
        } else {
            type_of(m).map(str::to_string)
        }
    };
    match (kind(am), kind(&bm)) {
        (Some(x), Some(y)) if x == y => {}
        (Some(x), Some(y)) => {
            let mut pair = [x.as_str(), y.as_str()];
            pair.sort_unstable();
            match pair {
                ["integer", "number"] => {
                    am.insert("type".into(), json!("number"));
                    am.remove("format");
                    bm.remove("format");
                    bm.insert("type".into(), json!("number"));
                }
                ["int-or-string", "integer"] | ["int-or-string", "string"] => {
                    am.remove("type");
                    bm.remove("type");
                    am.remove("format");
                    bm.remove("format");
                    am.insert(INT_OR_STRING.into(), Value::Bool(true));
                    bm.insert(INT_OR_STRING.into(), Value::Bool(true));
                }
                _ => {
                    return Err(SchemaError::at(
                        path,
                        format!(
                            "variants of this enum declare the field with different types (`{x}` and `{y}`); \
                             a structural schema has one schema per field name: rename one of the fields \
                             (#[serde(rename)]) or give them the same type"
                        ),
                    ));
                }
            }
        }
        (None, _) | (_, None) => {
            // One side is free-form: the merge is free-form too.
            if !is_true(am, PRESERVE) && !is_true(&bm, PRESERVE) {
                return Err(SchemaError::at(
                    path,
                    "cannot merge an untyped schema with a typed one",
                ));
            }
            am.insert(PRESERVE.into(), Value::Bool(true));
            if type_of(am) != type_of(&bm) {
                am.remove("type");
                am.remove("properties");
                am.remove("items");
                am.remove("required");
            }
            return Ok(());
        }
    }
    let mut keys: Vec<String> = am.keys().chain(bm.keys()).cloned().collect();
    keys.sort_unstable();
    keys.dedup();
    for k in keys {
        let av = am.get(&k).cloned();
        let bv = bm.remove(&k);
        match k.as_str() {
            "type" | INT_OR_STRING => {}
            "description" | "example" | "externalDocs" => {
                if av.is_none()
                    && let Some(bv) = bv
                {
                    am.insert(k, bv);
                }
            }
            "nullable" | PRESERVE => {
                if av == Some(Value::Bool(true)) || bv == Some(Value::Bool(true)) {
                    am.insert(k, Value::Bool(true));
                }
            }
            "enum" => match (av, bv) {
                (Some(Value::Array(mut x)), Some(Value::Array(y))) => {
                    for v in y {
                        if !x.contains(&v) {
                            x.push(v);
                        }
                    }
                    am.insert(k, Value::Array(x));
                }
                _ => {
                    am.remove(&k);
                }
            },
            "properties" => {
                let mut ap = match av {
                    Some(Value::Object(p)) => p,
                    _ => Map::new(),
                };
                if let Some(Value::Object(bp)) = bv {
                    for (pk, ps) in bp {
                        match ap.get_mut(&pk) {
                            None => {
                                ap.insert(pk, ps);
                            }
                            Some(existing) => {
                                merge_schemas(existing, ps, &format!("{path}.{pk}"))?;
                            }
                        }
                    }
                }
                am.insert(k, Value::Object(ap));
            }
            "required" => {
                let x = av.and_then(|v| v.as_array().cloned()).unwrap_or_default();
                let y = bv.and_then(|v| v.as_array().cloned()).unwrap_or_default();
                let both: Vec<Value> = x.into_iter().filter(|r| y.contains(r)).collect();
                if both.is_empty() {
                    am.remove(&k);
                } else {
                    am.insert(k, Value::Array(both));
                }
            }
            "items" | "additionalProperties" => match (av, bv) {
                (Some(mut x), Some(y)) if x.is_object() && y.is_object() => {
                    merge_schemas(&mut x, y, &format!("{path}[*]"))?;
                    am.insert(k, x);
                }
                (Some(_), None) => {}
                (None, Some(y)) => {
                    am.insert(k, y);
                }
                (Some(x), Some(y)) => {
                    if x != y {
                        am.remove(&k);
                    }
                }
                (None, None) => {}
            },
            _ if k.starts_with("x-kubernetes-") => {
                if av.is_none()
                    && let Some(bv) = bv
                {
                    am.insert(k, bv);
                }
            }
            _ => {
                // A check only one side has, or that differs, would reject the other.
                if av != bv {
                    am.remove(&k);
                }
            }
        }
    }
    Ok(())
}

/// Makes a processed schema fit inside `allOf`/`anyOf`/`oneOf`/`not`: no `type`,
/// `description`, `default`, `nullable`, `additionalProperties`, `x-kubernetes-*`; empty
/// property and item schemas removed.
fn strip_value_validation(v: &mut Value) {
    let Some(m) = v.as_object_mut() else {
        return;
    };
    m.retain(|k, _| {
        !matches!(
            k.as_str(),
            "type"
                | "description"
                | "default"
                | "nullable"
                | "additionalProperties"
                | "example"
                | "externalDocs"
        ) && !k.starts_with("x-kubernetes-")
    });
    if let Some(Value::Object(props)) = m.get_mut("properties") {
        for sub in props.values_mut() {
            strip_value_validation(sub);
        }
        props.retain(|_, s| s.as_object().is_some_and(|o| !o.is_empty()));
        if props.is_empty() {
            m.remove("properties");
        }
    }
    if let Some(items) = m.get_mut("items") {
        strip_value_validation(items);
        if items.as_object().is_some_and(Map::is_empty) {
            m.remove("items");
        }
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(Value::Array(bs)) = m.get_mut(key) {
            for b in bs.iter_mut() {
                strip_value_validation(b);
            }
            if bs.iter().any(|b| b.as_object().is_some_and(Map::is_empty)) {
                m.remove(key);
            }
        }
    }
    if let Some(not) = m.get_mut("not") {
        strip_value_validation(not);
    }
}

/// Removes from a value-validation branch what the structural node already enforces
/// (identical `required`, `enum`, `pattern`, … on the same field), so that the branch keeps
/// only what tells the variants apart.
fn subtract(v: &mut Value, outer: &Map<String, Value>) {
    let Some(b) = v.as_object_mut() else {
        return;
    };
    b.retain(|k, val| {
        matches!(
            k.as_str(),
            "properties" | "items" | "allOf" | "anyOf" | "oneOf" | "not"
        ) || outer.get(k) != Some(val)
    });
    if let (Some(Value::Object(props)), Some(Value::Object(outer_props))) =
        (b.get_mut("properties"), outer.get("properties"))
    {
        for (k, sub) in props.iter_mut() {
            if let Some(Value::Object(o)) = outer_props.get(k) {
                subtract(sub, o);
            }
        }
        props.retain(|_, s| s.as_object().is_some_and(|o| !o.is_empty()));
        if props.is_empty() {
            b.remove("properties");
        }
    }
    if let (Some(items), Some(Value::Object(o))) = (b.get_mut("items"), outer.get("items")) {
        subtract(items, o);
        if items.as_object().is_some_and(Map::is_empty) {
            b.remove("items");
        }
    }
}

fn free_form(m: &mut Map<String, Value>) {
    m.insert(PRESERVE.into(), Value::Bool(true));
    m.insert("nullable".into(), Value::Bool(true));
}

fn cleanup_annotations(m: &mut Map<String, Value>) {
    if m.get("default") == Some(&Value::Null) {
        m.remove("default");
    }
    m.retain(|k, _| ALLOWED_KEYS.contains(&k.as_str()) || k.starts_with("x-kubernetes-"));
}

/// Per-node fix-ups once children and variants are done.
fn normalize(m: &mut Map<String, Value>, path: &str) -> Result<(), SchemaError> {
    // `type: [..]`.
    if let Some(Value::Array(types)) = m.get("type").cloned() {
        let mut ts: Vec<String> = types
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect();
        if ts.iter().any(|t| t == "null") {
            m.insert("nullable".into(), Value::Bool(true));
            ts.retain(|t| t != "null");
        }
        ts.sort_unstable();
        ts.dedup();
        let as_strs: Vec<&str> = ts.iter().map(String::as_str).collect();
        match as_strs.as_slice() {
            [] => {
                m.remove("type");
            }
            [t] => {
                m.insert("type".into(), json!(t));
            }
            ["integer", "string"] => {
                m.remove("type");
                m.insert(INT_OR_STRING.into(), Value::Bool(true));
            }
            ["integer", "number"] => {
                m.insert("type".into(), json!("number"));
            }
            _ => {
                return Err(SchemaError::at(
                    path,
                    format!(
                        "a value that may be any of {} cannot be expressed in a structural schema",
                        ts.join(", ")
                    ),
                ));
            }
        }
    }
    if m.get("type") == Some(&json!("null")) {
        m.remove("type");
        m.insert("nullable".into(), Value::Bool(true));
    }
    // `const` -> `enum`; `null` in `enum` -> `nullable`.
    if let Some(c) = m.remove("const") {
        m.insert("enum".into(), Value::Array(vec![c]));
    }
    if let Some(Value::Array(values)) = m.get_mut("enum") {
        if values.iter().any(Value::is_null) {
            values.retain(|v| !v.is_null());
            m.insert("nullable".into(), Value::Bool(true));
        }
        if m.get("enum")
            .and_then(Value::as_array)
            .is_some_and(Vec::is_empty)
        {
            m.remove("enum");
        }
    }
    // `exclusiveMinimum: 5` (JSON Schema 2019+) -> OpenAPI 3.0 booleans.
    for (excl, bound) in [
        ("exclusiveMinimum", "minimum"),
        ("exclusiveMaximum", "maximum"),
    ] {
        if let Some(n) = m.get(excl).filter(|v| v.is_number()).cloned() {
            m.insert(bound.into(), n);
            m.insert(excl.into(), Value::Bool(true));
        }
    }
    if let Some(f) = m.get("format").and_then(Value::as_str)
        && !KNOWN_FORMATS.contains(&f)
    {
        m.remove("format");
    }
    // Maps.
    match m.get("additionalProperties").cloned() {
        Some(Value::Bool(false)) => {
            m.remove("additionalProperties");
        }
        Some(Value::Bool(true)) => {
            m.remove("additionalProperties");
            m.insert(PRESERVE.into(), Value::Bool(true));
        }
        Some(Value::Object(ap)) => {
            let free = is_true(&ap, PRESERVE)
                && !ap.contains_key("type")
                && !ap.contains_key("properties")
                && !is_true(&ap, INT_OR_STRING);
            if free || m.contains_key("properties") {
                // Free-form values, or fixed fields plus extra ones (flatten): Kubernetes
                // forbids properties next to additionalProperties.
                m.remove("additionalProperties");
                m.insert(PRESERVE.into(), Value::Bool(true));
            }
        }
        _ => {}
    }
    // Sets.
    if m.remove("uniqueItems") == Some(Value::Bool(true))
        && !m.contains_key("x-kubernetes-list-type")
    {
        let scalar_items = m
            .get("items")
            .and_then(Value::as_object)
            .and_then(|i| type_of(i))
            .is_some_and(|t| SCALARS.contains(&t));
        if scalar_items {
            m.insert("x-kubernetes-list-type".into(), json!("set"));
        }
    }
    // Missing types.
    if !m.contains_key("type") && !is_true(m, INT_OR_STRING) {
        if m.contains_key("properties")
            || m.contains_key("additionalProperties")
            || m.contains_key("required")
        {
            m.insert("type".into(), json!("object"));
        } else if m.contains_key("items") {
            m.insert("type".into(), json!("array"));
        } else if let Some(Value::Array(values)) = m.get("enum") {
            let mut ts: Vec<&str> = values
                .iter()
                .map(|v| match v {
                    Value::String(_) => "string",
                    Value::Bool(_) => "boolean",
                    Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
                    Value::Number(_) => "number",
                    Value::Array(_) => "array",
                    _ => "object",
                })
                .collect();
            ts.sort_unstable();
            ts.dedup();
            match ts.as_slice() {
                [t] => {
                    m.insert("type".into(), json!(t));
                }
                ["integer", "number"] => {
                    m.insert("type".into(), json!("number"));
                }
                _ => {
                    return Err(SchemaError::at(
                        path,
                        format!(
                            "enum values of different types ({}) cannot be expressed in a structural schema",
                            ts.join(", ")
                        ),
                    ));
                }
            }
        } else if !is_true(m, PRESERVE) {
            free_form(m);
        }
    }
    if m.get("required")
        .and_then(Value::as_array)
        .is_some_and(Vec::is_empty)
    {
        m.remove("required");
    }
    cleanup_annotations(m);
    Ok(())
}

/// Checks that a schema is structural and that its server-side-apply markers are
/// consistent; returns the violations (empty: fine). Messages name the path in the schema.
///
/// This is stricter than the embedded API server and follows the Kubernetes rules: every
/// node typed (or `x-kubernetes-int-or-string` / `x-kubernetes-preserve-unknown-fields`),
/// no `$ref`/`definitions`/`patternProperties`/`additionalProperties: false`/`uniqueItems`,
/// `properties` and `additionalProperties` not together, value validations (`allOf`,
/// `anyOf`, `oneOf`, `not`) without types, descriptions, defaults, `nullable`,
/// `additionalProperties` or `x-kubernetes-*`, and only over fields the schema declares;
/// `x-kubernetes-list-type: map` lists of objects whose key fields exist and are required
/// or defaulted.
pub fn structural_violations(schema: &Value) -> Vec<String> {
    let mut out = vec![];
    check_node(schema, "", &mut out);
    out
}

fn check_node(v: &Value, path: &str, out: &mut Vec<String>) {
    let Some(m) = v.as_object() else {
        out.push(format!("{path}: not a schema object"));
        return;
    };
    check_common(m, path, out);
    let int_or_string = is_true(m, INT_OR_STRING);
    match type_of(m) {
        None if !int_or_string && !is_true(m, PRESERVE) => {
            out.push(format!(
                "{path}.type: Required value: must not be empty for specified fields"
            ));
        }
        Some(t) if int_or_string => {
            out.push(format!(
                "{path}.type: Invalid value: {t}: must be empty if x-kubernetes-int-or-string is true"
            ));
        }
        Some(t)
            if !matches!(
                t,
                "object" | "array" | "string" | "integer" | "number" | "boolean"
            ) =>
        {
            out.push(format!("{path}.type: Unsupported value: {t}"));
        }
        None if m.get("type").is_some() => {
            out.push(format!("{path}.type: must be a string"));
        }
        _ => {}
    }
    if m.get("default") == Some(&Value::Null) && !is_true(m, "nullable") {
        out.push(format!(
            "{path}.default: null is only allowed with nullable: true"
        ));
    }
    if let Some(Value::Object(props)) = m.get("properties") {
        for (k, sub) in props {
            check_node(sub, &format!("{path}.properties[{k}]"), out);
        }
    }
    if let Some(items) = m.get("items") {
        check_node(items, &format!("{path}.items"), out);
    }
    if let Some(ap) = m.get("additionalProperties").filter(|a| a.is_object()) {
        check_node(ap, &format!("{path}.additionalProperties"), out);
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(bs) = m.get(key) {
            match bs.as_array() {
                Some(bs) => {
                    for (i, b) in bs.iter().enumerate() {
                        check_validation(b, v, &format!("{path}.{key}[{i}]"), out);
                    }
                }
                None => out.push(format!("{path}.{key}: must be an array")),
            }
        }
    }
    if let Some(not) = m.get("not") {
        check_validation(not, v, &format!("{path}.not"), out);
    }
    check_list_type(m, path, out);
}

fn check_common(m: &Map<String, Value>, path: &str, out: &mut Vec<String>) {
    for forbidden in [
        "$ref",
        "definitions",
        "patternProperties",
        "dependencies",
        "additionalItems",
    ] {
        if m.contains_key(forbidden) {
            out.push(format!(
                "{path}.{forbidden}: Forbidden: not allowed in structural schemas"
            ));
        }
    }
    if m.get("additionalProperties") == Some(&Value::Bool(false)) {
        out.push(format!(
            "{path}.additionalProperties: Forbidden: additionalProperties: false is forbidden"
        ));
    }
    if m.get("uniqueItems") == Some(&Value::Bool(true)) {
        out.push(format!(
            "{path}.uniqueItems: Forbidden: uniqueItems cannot be set to true"
        ));
    }
    if m.get("items").is_some_and(Value::is_array) {
        out.push(format!(
            "{path}.items: Forbidden: items must be a single schema"
        ));
    }
    if m.contains_key("properties")
        && m.get("additionalProperties")
            .is_some_and(|a| *a != Value::Bool(false))
    {
        out.push(format!(
            "{path}.additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive"
        ));
    }
}

/// A value-validation subtree; `outer` is the structural node it constrains.
fn check_validation(v: &Value, outer: &Value, path: &str, out: &mut Vec<String>) {
    let Some(m) = v.as_object() else {
        out.push(format!("{path}: not a schema object"));
        return;
    };
    check_common(m, path, out);
    for k in m.keys() {
        if matches!(
            k.as_str(),
            "type" | "description" | "default" | "nullable" | "additionalProperties"
        ) || (k.starts_with("x-kubernetes-") && k != INT_OR_STRING)
        {
            out.push(format!(
                "{path}.{k}: Forbidden: must not be set inside value validations"
            ));
        }
    }
    if let Some(Value::Object(props)) = m.get("properties") {
        for (k, sub) in props {
            match outer.pointer(&format!("/properties/{}", k.replace('~', "~0").replace('/', "~1"))) {
                Some(o) => check_validation(sub, o, &format!("{path}.properties[{k}]"), out),
                None => out.push(format!(
                    "{path}.properties[{k}]: Required value: must be specified in the structural part of the schema too"
                )),
            }
        }
    }
    if let Some(items) = m.get("items") {
        match outer.get("items") {
            Some(o) => check_validation(items, o, &format!("{path}.items"), out),
            None => out.push(format!(
                "{path}.items: Required value: must be specified in the structural part of the schema too"
            )),
        }
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(Value::Array(bs)) = m.get(key) {
            for (i, b) in bs.iter().enumerate() {
                check_validation(b, outer, &format!("{path}.{key}[{i}]"), out);
            }
        }
    }
    if let Some(not) = m.get("not") {
        check_validation(not, outer, &format!("{path}.not"), out);
    }
}

fn check_list_type(m: &Map<String, Value>, path: &str, out: &mut Vec<String>) {
    let Some(list_type) = m.get("x-kubernetes-list-type").and_then(Value::as_str) else {
        if m.contains_key("x-kubernetes-list-map-keys") {
            out.push(format!(
                "{path}.x-kubernetes-list-map-keys: Forbidden: requires x-kubernetes-list-type: map"
            ));
        }
        return;
    };
    if type_of(m) != Some("array") {
        out.push(format!(
            "{path}.x-kubernetes-list-type: Forbidden: only allowed on arrays"
        ));
        return;
    }
    let items = m.get("items").and_then(Value::as_object);
    match list_type {
        "atomic" => {}
        "set" => {
            if items.and_then(|i| type_of(i)).is_some_and(|t| !SCALARS.contains(&t)) {
                out.push(format!(
                    "{path}.items.type: Invalid value: x-kubernetes-list-type: set needs scalar items"
                ));
            }
        }
        "map" => {
            let keys: Vec<&str> = m
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            if keys.is_empty() {
                out.push(format!(
                    "{path}.x-kubernetes-list-map-keys: Required value: x-kubernetes-list-type: map needs map keys"
                ));
            }
            let Some(items) = items.filter(|i| type_of(i) == Some("object")) else {
                out.push(format!(
                    "{path}.items.type: Invalid value: x-kubernetes-list-type: map needs object items"
                ));
                return;
            };
            let required: Vec<&str> = items
                .get("required")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            for key in keys {
                match items.get("properties").and_then(|p| p.get(key)) {
                    None => out.push(format!(
                        "{path}.x-kubernetes-list-map-keys: Invalid value: `{key}` is not a property of the items"
                    )),
                    Some(p) => {
                        if !required.contains(&key) && p.get("default").is_none() {
                            out.push(format!(
                                "{path}.items.properties[{key}]: Required value: map keys must be required or have a default"
                            ));
                        }
                        if p.get("type")
                            .and_then(Value::as_str)
                            .is_some_and(|t| !SCALARS.contains(&t))
                        {
                            out.push(format!(
                                "{path}.items.properties[{key}].type: Invalid value: map keys must be scalars"
                            ));
                        }
                    }
                }
            }
        }
        other => out.push(format!(
            "{path}.x-kubernetes-list-type: Unsupported value: {other}: supported values: atomic, map, set"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rw(v: Value) -> Value {
        structural_schema(v, &Map::new()).unwrap()
    }

    #[test]
    fn option_type_array_becomes_nullable() {
        let out = rw(json!({"type": ["string", "null"], "format": "uint32"}));
        assert_eq!(out, json!({"type": "string", "nullable": true}));
    }

    #[test]
    fn any_of_null_branch_becomes_nullable() {
        let out = rw(json!({
            "description": "opt",
            "anyOf": [{"type": "object", "properties": {"a": {"type": "integer", "format": "int32"}}}, {"nullable": true, "enum": [null]}]
        }));
        assert_eq!(
            out,
            json!({"description": "opt", "nullable": true, "type": "object", "properties": {"a": {"type": "integer", "format": "int32"}}})
        );
    }

    #[test]
    fn unit_variant_one_of_becomes_string_enum() {
        let out = rw(json!({
            "oneOf": [
                {"type": "string", "enum": ["A"], "description": "a"},
                {"type": "string", "enum": ["B"]}
            ]
        }));
        assert_eq!(out, json!({"type": "string", "enum": ["A", "B"]}));
    }

    #[test]
    fn external_tagging_hoists_properties() {
        let out = rw(json!({
            "oneOf": [
                {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"], "additionalProperties": false, "description": "From a URL"},
                {"type": "object", "properties": {"inline": {"type": "object", "properties": {"data": {"type": "string"}}, "required": ["data"]}}, "required": ["inline"]}
            ]
        }));
        assert_eq!(
            out,
            json!({
                "type": "object",
                "properties": {
                    "url": {"type": "string", "description": "From a URL"},
                    "inline": {"type": "object", "properties": {"data": {"type": "string"}}, "required": ["data"]}
                },
                "oneOf": [{"required": ["url"]}, {"required": ["inline"]}]
            })
        );
        assert!(structural_violations(&out).is_empty());
    }

    #[test]
    fn internal_tagging_merges_tag_enum() {
        let out = rw(json!({
            "oneOf": [
                {"type": "object", "properties": {"kind": {"type": "string", "enum": ["S3"]}, "bucket": {"type": "string"}}, "required": ["kind", "bucket"]},
                {"type": "object", "properties": {"kind": {"type": "string", "enum": ["Gcs"]}, "bucket": {"type": "string"}, "project": {"type": "string"}}, "required": ["kind", "bucket", "project"]}
            ]
        }));
        assert_eq!(
            out["properties"]["kind"],
            json!({"type": "string", "enum": ["S3", "Gcs"]})
        );
        assert_eq!(out["required"], json!(["kind", "bucket"]));
        assert_eq!(
            out["oneOf"],
            json!([
                {"properties": {"kind": {"enum": ["S3"]}}},
                {"properties": {"kind": {"enum": ["Gcs"]}}, "required": ["kind", "bucket", "project"]}
            ])
        );
        assert!(
            structural_violations(&out).is_empty(),
            "{:?}",
            structural_violations(&out)
        );
    }

    #[test]
    fn mixed_unit_and_data_variants_fail() {
        let err = structural_schema(
            json!({"oneOf": [{"type": "string", "enum": ["None"]}, {"type": "object", "properties": {"Some": {"type": "string"}}}]}),
            &Map::new(),
        )
        .unwrap_err();
        assert!(err.message().contains("unit variants"), "{err}");
    }

    #[test]
    fn conflicting_field_types_fail() {
        let err = structural_schema(
            json!({"anyOf": [
                {"type": "object", "properties": {"x": {"type": "string"}}},
                {"type": "object", "properties": {"x": {"type": "boolean"}}}
            ]}),
            &Map::new(),
        )
        .unwrap_err();
        assert_eq!(err.path(), ".x");
    }

    #[test]
    fn untagged_int_or_string() {
        let out =
            rw(json!({"anyOf": [{"type": "integer", "format": "int64"}, {"type": "string"}]}));
        assert_eq!(out, json!({"x-kubernetes-int-or-string": true}));
    }

    #[test]
    fn free_form_values_and_maps() {
        assert_eq!(
            rw(json!({})),
            json!({"x-kubernetes-preserve-unknown-fields": true, "nullable": true})
        );
        assert_eq!(
            rw(json!({"type": "object", "additionalProperties": true})),
            json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
        );
        assert_eq!(
            rw(json!({"type": "object", "additionalProperties": {"type": "string"}})),
            json!({"type": "object", "additionalProperties": {"type": "string"}})
        );
        assert_eq!(
            rw(
                json!({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": false})
            ),
            json!({"type": "object", "properties": {"a": {"type": "string"}}})
        );
    }

    #[test]
    fn refs_are_inlined_and_recursion_fails() {
        let mut defs = Map::new();
        defs.insert(
            "Leaf".into(),
            json!({"type": "object", "properties": {"n": {"type": "integer"}}}),
        );
        defs.insert("Node".into(), json!({"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}}}}));
        let out = structural_schema(
            json!({"type": "object", "properties": {"leaf": {"allOf": [{"$ref": "#/components/schemas/Leaf"}], "description": "d"}}}),
            &defs,
        )
        .unwrap();
        assert_eq!(
            out["properties"]["leaf"],
            json!({"type": "object", "description": "d", "properties": {"n": {"type": "integer"}}})
        );
        let err =
            structural_schema(json!({"$ref": "#/components/schemas/Node"}), &defs).unwrap_err();
        assert!(err.message().contains("recursive"), "{err}");
        assert_eq!(err.path(), ".children[*]");
    }

    #[test]
    fn sets_bounds_formats_and_titles() {
        let out = rw(json!({
            "title": "T", "$schema": "x", "type": "object",
            "properties": {
                "tags": {"type": "array", "uniqueItems": true, "items": {"type": "string"}},
                "n": {"type": "integer", "format": "uint8", "minimum": 0, "maximum": 255, "exclusiveMinimum": 1},
                "d": {"type": ["string", "null"], "format": "date-time", "default": null, "readOnly": true},
                "t": {"type": "array", "items": [{"type": "string"}, {"type": "string"}], "minItems": 2, "maxItems": 2}
            }
        }));
        assert_eq!(
            out,
            json!({
                "type": "object",
                "properties": {
                    "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                    "n": {"type": "integer", "minimum": 1, "maximum": 255, "exclusiveMinimum": true},
                    "d": {"type": "string", "format": "date-time", "nullable": true},
                    "t": {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 2}
                }
            })
        );
    }

    #[test]
    fn violations_are_found() {
        let bad = json!({
            "type": "object",
            "properties": {
                "a": {"$ref": "#/x"},
                "b": {"description": "untyped"},
                "c": {"type": "object", "properties": {"x": {"type": "string"}}, "additionalProperties": {"type": "string"}},
                "d": {"type": "object", "properties": {"x": {"type": "string"}}, "oneOf": [{"type": "object", "properties": {"y": {"enum": [1]}}}]},
                "e": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"], "items": {"type": "object", "properties": {"name": {"type": "string"}}}}
            }
        });
        let v = structural_violations(&bad);
        let joined = v.join("\n");
        for needle in [
            ".properties[a].$ref",
            ".properties[b].type",
            ".properties[c].additionalProperties: Forbidden",
            ".properties[d].oneOf[0].type: Forbidden",
            ".properties[d].oneOf[0].properties[y]: Required value",
            ".properties[e].items.properties[name]: Required value: map keys",
        ] {
            assert!(joined.contains(needle), "missing {needle} in:\n{joined}");
        }
    }
}
