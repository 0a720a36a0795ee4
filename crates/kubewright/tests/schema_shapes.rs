//! `kubewright::crd::schema_for` over many serde/schemars shapes: every result must be
//! structural, and the interesting ones are checked in detail.
#![allow(clippy::unwrap_used, dead_code)]

use kubewright::crd::{schema_for, structural_violations};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap, HashSet};

fn structural<T: JsonSchema>() -> Value {
    let schema =
        schema_for::<T>().unwrap_or_else(|e| panic!("{}: {e}", std::any::type_name::<T>()));
    let violations = structural_violations(&schema);
    assert!(
        violations.is_empty(),
        "{}: {}\n{}",
        std::any::type_name::<T>(),
        violations.join("\n"),
        serde_json::to_string_pretty(&schema).unwrap()
    );
    schema
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct Inner {
    a: String,
    #[serde(default)]
    b: Option<i64>,
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct Flattened {
    name: String,
    #[serde(flatten)]
    inner: Inner,
}

#[test]
fn flattened_struct() {
    let s = structural::<Flattened>();
    assert_eq!(s["properties"]["a"]["type"], "string");
    assert_eq!(s["properties"]["name"]["type"], "string");
    assert_eq!(s["required"], json!(["name", "a"]));
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct WithExtra {
    name: String,
    #[serde(flatten)]
    extra: BTreeMap<String, Value>,
}

#[test]
fn flattened_free_form_map() {
    let s = structural::<WithExtra>();
    assert_eq!(s["type"], "object");
    assert_eq!(s["x-kubernetes-preserve-unknown-fields"], true);
    assert_eq!(s["properties"]["name"]["type"], "string");
    assert!(s.get("additionalProperties").is_none());
}

#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", content = "spec")]
enum Adjacent {
    Http { url: String },
    Tcp { port: u16 },
    Nothing,
}

#[test]
fn adjacently_tagged_enum() {
    let s = structural::<Adjacent>();
    assert_eq!(s["type"], "object");
    assert_eq!(
        s["properties"]["kind"]["enum"],
        json!(["Http", "Tcp", "Nothing"])
    );
    let spec = &s["properties"]["spec"];
    assert_eq!(spec["type"], "object");
    assert_eq!(spec["properties"]["url"]["type"], "string");
    assert_eq!(spec["properties"]["port"]["type"], "integer");
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct FlattenedEnum {
    name: String,
    #[serde(flatten)]
    target: Target,
}

#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
enum Target {
    Service { name: String },
    Url(String),
}

#[test]
fn flattened_enum() {
    let s = structural::<FlattenedEnum>();
    assert_eq!(s["properties"]["name"]["type"], "string");
    assert_eq!(s["properties"]["service"]["type"], "object");
    assert_eq!(s["properties"]["url"]["type"], "string");
    assert_eq!(
        s["oneOf"],
        json!([{"required": ["service"]}, {"required": ["url"]}])
    );
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct TwoFlattenedEnums {
    #[serde(flatten)]
    target: Target,
    #[serde(flatten)]
    mode: Adjacent,
}

#[test]
fn two_flattened_enums() {
    let s = structural::<TwoFlattenedEnums>();
    for p in ["service", "url", "kind", "spec"] {
        assert!(s["properties"].get(p).is_some(), "{p} missing: {s}");
    }
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct Containers {
    pairs: (String, String),
    nested: Option<Option<Vec<Inner>>>,
    boxed: Box<Inner>,
    by_name: HashMap<String, Inner>,
    set: HashSet<u32>,
    chars: Vec<char>,
    wide: u64,
    small: i8,
    ratio: f32,
    unit: (),
    #[serde(skip)]
    skipped: String,
    #[schemars(with = "String")]
    custom: Vec<u8>,
    matrix: Vec<Vec<i32>>,
}

#[test]
fn containers_and_numbers() {
    let s = structural::<Containers>();
    let p = &s["properties"];
    assert_eq!(
        p["pairs"],
        json!({"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 2})
    );
    assert_eq!(p["nested"]["nullable"], true);
    assert_eq!(p["nested"]["items"]["properties"]["a"]["type"], "string");
    assert_eq!(p["boxed"]["type"], "object");
    assert_eq!(
        p["byName"].get("type").or(p["by_name"].get("type")),
        Some(&json!("object"))
    );
    assert_eq!(p["set"]["x-kubernetes-list-type"], "set");
    assert!(p["wide"].get("format").is_none());
    assert_eq!(p["small"]["minimum"], -128);
    assert_eq!(p["ratio"]["format"], "float");
    assert!(p.get("skipped").is_none());
    assert_eq!(p["custom"]["type"], "string");
    assert_eq!(p["matrix"]["items"]["items"]["type"], "integer");
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct Newtype(Vec<String>);

#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
enum Level {
    #[serde(rename = "dbg")]
    Debug,
    Info,
    WarnOnly,
}

#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
enum Either {
    Flag(bool),
    Named { name: String },
}

#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
enum Shape {
    Circle { radius: f64 },
    Rect { w: f64, h: f64 },
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct Misc {
    list: Newtype,
    level: Level,
    levels: Vec<Level>,
    shape: Shape,
    opt_shape: Option<Shape>,
    #[schemars(range(min = 1, max = 5))]
    opt_bounded: Option<u8>,
    #[schemars(length(min = 1))]
    opt_name: Option<String>,
}

#[test]
fn newtypes_renames_untagged_objects() {
    let s = structural::<Misc>();
    let p = &s["properties"];
    assert_eq!(p["list"]["type"], "array");
    assert_eq!(p["level"]["enum"], json!(["dbg", "INFO", "WARN_ONLY"]));
    assert_eq!(p["levels"]["items"]["type"], "string");
    assert_eq!(p["shape"]["type"], "object");
    assert_eq!(
        p["shape"]["anyOf"],
        json!([{"required": ["radius"]}, {"required": ["w", "h"]}])
    );
    assert_eq!(
        p["optShape"]
            .get("nullable")
            .or(p["opt_shape"].get("nullable")),
        Some(&json!(true))
    );
    assert_eq!(p["opt_bounded"]["minimum"], 1);
    assert_eq!(p["opt_bounded"]["nullable"], true);
    assert_eq!(p["opt_name"]["minLength"], 1);
}

#[test]
fn untagged_mixed_scalar_and_object_fails() {
    let err = schema_for::<Either>().unwrap_err();
    assert!(err.message().contains("different types"), "{err}");
}

#[derive(Serialize, Deserialize, JsonSchema)]
#[schemars(extend("x-kubernetes-validations" = [{"rule": "self.a != ''"}]))]
struct Validated {
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self.startsWith('x')", "message": "x first"}]))]
    a: String,
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["a"]))]
    items: Vec<Inner>,
    #[schemars(extend("x-kubernetes-map-type" = "atomic"))]
    labels: BTreeMap<String, String>,
    #[schemars(extend("x-kubernetes-embedded-resource" = true, "x-kubernetes-preserve-unknown-fields" = true))]
    template: Value,
}

#[test]
fn kubernetes_extensions_are_kept() {
    let s = structural::<Validated>();
    assert_eq!(
        s["x-kubernetes-validations"],
        json!([{"rule": "self.a != ''"}])
    );
    assert_eq!(
        s["properties"]["a"]["x-kubernetes-validations"][0]["message"],
        "x first"
    );
    assert_eq!(
        s["properties"]["items"]["x-kubernetes-list-map-keys"],
        json!(["a"])
    );
    assert_eq!(s["properties"]["labels"]["x-kubernetes-map-type"], "atomic");
    assert_eq!(
        s["properties"]["template"]["x-kubernetes-embedded-resource"],
        true
    );
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct BadListKeys {
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["b"]))]
    items: Vec<Inner>,
}

#[test]
fn list_map_keys_must_be_required_or_defaulted() {
    let s = schema_for::<BadListKeys>().unwrap();
    let v = structural_violations(&s);
    assert!(
        v.iter()
            .any(|m| m.contains("map keys must be required or have a default")),
        "{v:?}"
    );
}
