//! CustomResourceDefinitions: structural schemas, pruning, validation, defaulting,
//! printer columns, and turning an Established CRD into served resources.

pub(crate) mod cel;

use crate::error::ApiError;
use crate::registry::{ResourceDef, ScalePaths};
use kubewright_core::StatusCause;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A printer column of a CRD version.
#[derive(Clone, Debug)]
pub struct PrinterColumn {
    /// Header.
    pub name: String,
    /// OpenAPI type.
    pub ty: String,
    /// OpenAPI format.
    pub format: String,
    /// Description.
    pub description: String,
    /// 0 = default view, >0 = wide only.
    pub priority: i64,
    /// JSON path (simple dotted paths).
    pub json_path: String,
}

#[derive(Clone, Debug, Default)]
struct VersionInfo {
    schema: Option<Value>,
    columns: Vec<PrinterColumn>,
    selectable: Vec<String>,
    /// The compiled list/map semantics of `schema`, built on first use.
    index: std::sync::OnceLock<crate::registry::schema::Index>,
}

/// Per-version schema data of a custom resource.
#[derive(Clone, Debug, Default)]
pub struct CrdSchema {
    versions: BTreeMap<String, VersionInfo>,
}

fn s(v: Option<&Value>) -> String {
    v.and_then(Value::as_str).unwrap_or("").to_string()
}

impl CrdSchema {
    /// The printer columns of a version.
    pub fn printer_columns(&self, version: &str) -> Vec<PrinterColumn> {
        self.versions
            .get(version)
            .map(|v| v.columns.clone())
            .unwrap_or_default()
    }

    /// Selectable fields of a version.
    pub fn selectable_fields(&self, version: &str) -> Vec<String> {
        self.versions
            .get(version)
            .map(|v| v.selectable.clone())
            .unwrap_or_default()
    }

    fn schema(&self, version: &str) -> Option<&Value> {
        self.versions.get(version)?.schema.as_ref()
    }

    /// The list/map semantics of a version's structural schema (`x-kubernetes-list-type`,
    /// `x-kubernetes-list-map-keys`, `x-kubernetes-map-type`), compiled once.
    pub(crate) fn type_index(&self, version: &str) -> Option<&crate::registry::schema::Index> {
        let v = self.versions.get(version)?;
        Some(
            v.index
                .get_or_init(|| crate::registry::schema::Index::for_crd(v.schema.as_ref())),
        )
    }

    /// Drops fields not in the schema. Returns the pruned object and the dropped paths.
    pub fn prune(&self, obj: &Value, version: &str) -> (Value, Vec<String>) {
        let mut out = obj.clone();
        let mut dropped = Vec::new();
        if let (Some(schema), Some(root)) = (self.schema(version), out.as_object_mut()) {
            for (k, v) in root.iter_mut() {
                if matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                if let Some(sub) = schema.pointer(&format!("/properties/{k}")) {
                    prune_node(v, sub, k, &mut dropped);
                }
            }
            let preserve = schema.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(true));
            if !preserve {
                let props = schema.get("properties").and_then(Value::as_object);
                root.retain(|k, _| {
                    let keep = matches!(k.as_str(), "apiVersion" | "kind" | "metadata")
                        || props.is_some_and(|p| p.contains_key(k));
                    if !keep {
                        dropped.push(k.clone());
                    }
                    keep
                });
            }
        }
        (out, dropped)
    }

    /// Validates an object against the version's schema (422 with causes).
    pub fn validate(&self, def: &ResourceDef, obj: &Value, version: &str) -> Result<(), ApiError> {
        self.check(def, obj, version, true)
    }

    /// Validates the types and formats of a server-side apply configuration, which holds
    /// only the fields its manager owns: required fields are checked on the merged object.
    pub fn validate_partial(
        &self,
        def: &ResourceDef,
        obj: &Value,
        version: &str,
    ) -> Result<(), ApiError> {
        self.check(def, obj, version, false)
    }

    fn check(
        &self,
        def: &ResourceDef,
        obj: &Value,
        version: &str,
        required: bool,
    ) -> Result<(), ApiError> {
        let Some(schema) = self.schema(version) else {
            return Ok(());
        };
        let mut causes = Vec::new();
        if let Some(root) = obj.as_object() {
            for (k, v) in root {
                if matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                if let Some(sub) = schema.pointer(&format!("/properties/{k}")) {
                    validate_node(v, sub, k, required, &mut causes);
                }
            }
            for req in schema
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|_| required)
            {
                if let Some(r) = req.as_str()
                    && !root.contains_key(r)
                {
                    causes.push(cause("FieldValueRequired", r, "Required value".into()));
                }
            }
        }
        if causes.is_empty() {
            Ok(())
        } else {
            Err(ApiError::invalid(
                def,
                obj.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or(""),
                causes,
            ))
        }
    }

    /// Evaluates the `x-kubernetes-validations` rules of the version's schema on the object
    /// about to be stored; `old` is the stored object on updates (422 with a cause per failed
    /// rule).
    pub fn validate_rules(
        &self,
        def: &ResourceDef,
        obj: &Value,
        old: Option<&Value>,
        version: &str,
    ) -> Result<(), ApiError> {
        let Some(schema) = self.schema(version) else {
            return Ok(());
        };
        // Rules see the object as stored, schema defaults applied.
        let mut obj = obj.clone();
        self.apply_defaults(&mut obj, version);
        let old = old.map(|o| {
            let mut o = o.clone();
            self.apply_defaults(&mut o, version);
            o
        });
        let mut causes = Vec::new();
        crate::crd::cel::validate(&obj, schema, old.as_ref(), "", &mut causes);
        if causes.is_empty() {
            Ok(())
        } else {
            Err(ApiError::invalid(
                def,
                obj.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or(""),
                causes,
            ))
        }
    }

    /// Applies schema defaults in place.
    pub fn apply_defaults(&self, obj: &mut Value, version: &str) {
        if let Some(schema) = self.schema(version)
            && let Some(root) = obj.as_object_mut()
        {
            let props = schema
                .get("properties")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            for (k, sub) in &props {
                if matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                if !root.contains_key(k)
                    && let Some(d) = sub.get("default")
                {
                    root.insert(k.clone(), d.clone());
                }
                if let Some(v) = root.get_mut(k) {
                    default_node(v, sub);
                }
            }
        }
    }
}

fn cause(reason: &str, field: &str, message: String) -> StatusCause {
    StatusCause {
        reason: reason.into(),
        message,
        field: field.into(),
    }
}

fn prune_node(v: &mut Value, schema: &Value, path: &str, dropped: &mut Vec<String>) {
    let preserve = schema.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(true));
    match v {
        Value::Object(m) => {
            if schema.get("x-kubernetes-embedded-resource") == Some(&json!(true)) {
                // apiVersion/kind/metadata are kept on embedded resources.
            }
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                let embedded = schema.get("x-kubernetes-embedded-resource") == Some(&json!(true));
                let keys: Vec<String> = m.keys().cloned().collect();
                for k in keys {
                    let p = format!("{path}.{k}");
                    match props.get(&k) {
                        Some(sub) => {
                            if let Some(child) = m.get_mut(&k) {
                                prune_node(child, sub, &p, dropped);
                            }
                        }
                        None if preserve
                            || embedded
                                && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") => {}
                        None => {
                            m.remove(&k);
                            dropped.push(p);
                        }
                    }
                }
            } else if let Some(ap) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                for (k, child) in m.iter_mut() {
                    prune_node(child, ap, &format!("{path}.{k}"), dropped);
                }
            } else if !preserve
                && schema.get("type") == Some(&json!("object"))
                && schema.get("additionalProperties").is_none()
            {
                for k in m.keys() {
                    dropped.push(format!("{path}.{k}"));
                }
                m.clear();
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    prune_node(item, item_schema, &format!("{path}[{i}]"), dropped);
                }
            }
        }
        _ => {}
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Checks `v` against `schema`; `required` says whether absent required fields count.
fn validate_node(
    v: &Value,
    schema: &Value,
    path: &str,
    required: bool,
    causes: &mut Vec<StatusCause>,
) {
    if v.is_null() {
        if schema.get("nullable") != Some(&json!(true)) {
            causes.push(cause(
                "FieldValueRequired",
                path,
                format!(
                    "Invalid value: \"null\": {path} in body must be of type {}: \"null\"",
                    s(schema.get("type"))
                ),
            ));
        }
        return;
    }
    let int_or_string = schema.get("x-kubernetes-int-or-string") == Some(&json!(true));
    let actual = type_name(v);
    if int_or_string {
        if !matches!(actual, "integer" | "string") {
            // kube-apiserver's wording and reason for a value of the wrong type.
            causes.push(cause("FieldValueTypeInvalid", path, format!("Invalid value: \"{actual}\": {path} in body must be of type integer,string: \"{actual}\"")));
            return;
        }
    } else if let Some(want) = schema.get("type").and_then(Value::as_str) {
        let ok = want == actual || (want == "number" && actual == "integer");
        if !ok {
            causes.push(cause("FieldValueTypeInvalid", path, format!("Invalid value: \"{actual}\": {path} in body must be of type {want}: \"{actual}\"")));
            return;
        }
    }
    if let Some(en) = schema.get("enum").and_then(Value::as_array)
        && !en.contains(v)
    {
        let supported = en
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        causes.push(cause(
            "FieldValueNotSupported",
            path,
            format!("Unsupported value: {v}: supported values: {supported}"),
        ));
    }
    match v {
        Value::String(st) => {
            let len = st.chars().count() as u64;
            if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
                && len > max
            {
                causes.push(cause(
                    "FieldValueTooLong",
                    path,
                    format!("Too long: may not be more than {max} bytes"),
                ));
            }
            if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
                && len < min
            {
                causes.push(cause(
                    "FieldValueInvalid",
                    path,
                    format!(
                        "Invalid value: {v}: {path} in body should be at least {min} chars long"
                    ),
                ));
            }
            if let Some(pat) = schema.get("pattern").and_then(Value::as_str) {
                match regex::Regex::new(pat) {
                    Ok(re) if !re.is_match(st) => {
                        causes.push(cause(
                            "FieldValueInvalid",
                            path,
                            format!("Invalid value: {v}: {path} in body should match '{pat}'"),
                        ));
                    }
                    _ => {}
                }
            }
        }
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(0.0);
            let excl_min = schema.get("exclusiveMinimum") == Some(&json!(true));
            let excl_max = schema.get("exclusiveMaximum") == Some(&json!(true));
            if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
                && (x < min || excl_min && x <= min)
            {
                causes.push(cause("FieldValueInvalid", path, format!("Invalid value: {n}: {path} in body should be greater than or equal to {min}")));
            }
            if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
                && (x > max || excl_max && x >= max)
            {
                causes.push(cause(
                    "FieldValueInvalid",
                    path,
                    format!(
                        "Invalid value: {n}: {path} in body should be less than or equal to {max}"
                    ),
                ));
            }
        }
        Value::Array(items) => {
            if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
                && items.len() as u64 > max
            {
                causes.push(cause(
                    "FieldValueTooMany",
                    path,
                    format!("Too many: {}: must have at most {max} items", items.len()),
                ));
            }
            if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
                && (items.len() as u64) < min
            {
                causes.push(cause(
                    "FieldValueInvalid",
                    path,
                    format!(
                        "Invalid value: {}: {path} in body should have at least {min} items",
                        items.len()
                    ),
                ));
            }
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    validate_node(item, item_schema, &format!("{path}[{i}]"), required, causes);
                }
            }
        }
        Value::Object(m) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, child) in m {
                    if let Some(sub) = props.get(k) {
                        validate_node(child, sub, &format!("{path}.{k}"), required, causes);
                    }
                }
            } else if let Some(ap) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                for (k, child) in m {
                    validate_node(child, ap, &format!("{path}.{k}"), required, causes);
                }
            }
            for req in schema
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|_| required)
            {
                if let Some(r) = req.as_str()
                    && !m.contains_key(r)
                {
                    causes.push(cause(
                        "FieldValueRequired",
                        &format!("{path}.{r}"),
                        "Required value".into(),
                    ));
                }
            }
        }
        _ => {}
    }
}

fn default_node(v: &mut Value, schema: &Value) {
    match v {
        Value::Object(m) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, sub) in props {
                    if !m.contains_key(k)
                        && let Some(d) = sub.get("default")
                    {
                        m.insert(k.clone(), d.clone());
                    }
                    if let Some(child) = m.get_mut(k) {
                        default_node(child, sub);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(is) = schema.get("items") {
                for i in items {
                    default_node(i, is);
                }
            }
        }
        _ => {}
    }
}

/// Checks that a schema is structural; returns the violations.
pub fn structural_violations(schema: &Value, path: &str, out: &mut Vec<String>) {
    let Some(m) = schema.as_object() else { return };
    let special = m.get("x-kubernetes-int-or-string") == Some(&json!(true))
        || m.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(true));
    if !m.contains_key("type") && !special {
        out.push(format!(
            "{path}.type: Required value: must not be empty for specified object fields"
        ));
    }
    for forbidden in ["$ref", "definitions", "patternProperties"] {
        if m.contains_key(forbidden) {
            out.push(format!(
                "{path}.{forbidden}: Forbidden: {forbidden} is forbidden in structural schemas"
            ));
        }
    }
    if m.get("additionalProperties") == Some(&json!(false)) {
        out.push(format!(
            "{path}.additionalProperties: Forbidden: additionalProperties: false is forbidden"
        ));
    }
    if m.get("uniqueItems") == Some(&json!(true)) {
        out.push(format!("{path}.uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic"));
    }
    if let Some(props) = m.get("properties").and_then(Value::as_object) {
        for (k, sub) in props {
            structural_violations(sub, &format!("{path}.properties[{k}]"), out);
        }
    }
    if let Some(items) = m.get("items") {
        structural_violations(items, &format!("{path}.items"), out);
    }
    if let Some(ap) = m.get("additionalProperties").filter(|a| a.is_object()) {
        structural_violations(ap, &format!("{path}.additionalProperties"), out);
    }
}

/// Resource definitions for the served versions of a CRD object.
pub fn defs_from_crd(crd: &Value) -> Vec<ResourceDef> {
    let spec = crd.get("spec").cloned().unwrap_or(json!({}));
    let group = s(spec.get("group"));
    let names = spec.get("names").cloned().unwrap_or(json!({}));
    let plural = s(names.get("plural"));
    let kind = s(names.get("kind"));
    let singular = names
        .get("singular")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| kind.to_lowercase());
    let short: Vec<String> = names
        .get("shortNames")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let cats: Vec<String> = names
        .get("categories")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let namespaced = spec.get("scope").and_then(Value::as_str) != Some("Cluster");
    let mut schema = CrdSchema::default();
    let versions = spec
        .get("versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for v in &versions {
        let name = s(v.get("name"));
        let columns = v
            .get("additionalPrinterColumns")
            .and_then(Value::as_array)
            .map(|cols| {
                cols.iter()
                    .map(|c| PrinterColumn {
                        name: s(c.get("name")),
                        ty: s(c.get("type")),
                        format: s(c.get("format")),
                        description: s(c.get("description")),
                        priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                        json_path: s(c.get("jsonPath")),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let selectable = v
            .get("selectableFields")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|f| f.get("jsonPath").and_then(Value::as_str))
                    .map(|p| p.trim_start_matches('.').to_string())
                    .collect()
            })
            .unwrap_or_default();
        schema.versions.insert(
            name,
            VersionInfo {
                schema: v.pointer("/schema/openAPIV3Schema").cloned(),
                columns,
                selectable,
                index: Default::default(),
            },
        );
    }
    let schema = Arc::new(schema);
    versions
        .iter()
        .filter(|v| v.get("served") != Some(&json!(false)))
        .map(|v| {
            let scale = v.pointer("/subresources/scale").map(|sc| ScalePaths {
                spec_replicas: s(sc.get("specReplicasPath")),
                status_replicas: s(sc.get("statusReplicasPath")),
                label_selector: sc
                    .get("labelSelectorPath")
                    .and_then(Value::as_str)
                    .map(str::to_string),
            });
            ResourceDef {
                group: group.clone(),
                version: s(v.get("name")),
                kind: kind.clone(),
                plural: plural.clone(),
                singular: singular.clone(),
                namespaced,
                short_names: short.clone(),
                categories: cats.clone(),
                has_status: v.pointer("/subresources/status").is_some(),
                scale,
                builtin: false,
                create_on_update: false,
                delete_returns_object: false,
                normalizer: None,
                crd: Some(schema.clone()),
                verbs: vec![
                    "create",
                    "delete",
                    "deletecollection",
                    "get",
                    "list",
                    "patch",
                    "update",
                    "watch",
                ],
            }
        })
        .collect()
}

/// Validates a CRD object on create/update: names, versions and structural schemas.
pub fn validate_crd(def: &ResourceDef, crd: &Value) -> Result<(), ApiError> {
    let name = crd
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let group = crd
        .pointer("/spec/group")
        .and_then(Value::as_str)
        .unwrap_or("");
    let plural = crd
        .pointer("/spec/names/plural")
        .and_then(Value::as_str)
        .unwrap_or("");
    let mut causes = Vec::new();
    if name != format!("{plural}.{group}") {
        causes.push(cause(
            "FieldValueInvalid",
            "metadata.name",
            format!("Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if versions.is_empty() {
        causes.push(cause(
            "FieldValueRequired",
            "spec.versions",
            "Required value: must have exactly one version marked as storage version".into(),
        ));
    }
    let storage = versions
        .iter()
        .filter(|v| v.get("storage") == Some(&json!(true)))
        .count();
    if !versions.is_empty() && storage != 1 {
        causes.push(cause(
            "FieldValueInvalid",
            "spec.versions",
            format!(
                "Invalid value: {storage}: must have exactly one version marked as storage version"
            ),
        ));
    }
    for (i, v) in versions.iter().enumerate() {
        if let Some(schema) = v.pointer("/schema/openAPIV3Schema") {
            let mut out = Vec::new();
            structural_violations(
                schema,
                &format!("spec.versions[{i}].schema.openAPIV3Schema"),
                &mut out,
            );
            for o in out {
                let (field, msg) = o.split_once(": ").unwrap_or((o.as_str(), ""));
                causes.push(cause("FieldValueInvalid", field, msg.to_string()));
            }
            // kube-apiserver hoists a schema all versions share to `spec.validation`, and
            // reports its rules there.
            let shared = versions
                .iter()
                .all(|o| o.pointer("/schema/openAPIV3Schema") == Some(schema));
            if shared && i > 0 {
                continue;
            }
            let at = if shared {
                "spec.validation.openAPIV3Schema".to_string()
            } else {
                format!("spec.versions[{i}].schema.openAPIV3Schema")
            };
            let mut rules = Vec::new();
            crate::crd::cel::compile_errors(schema, &at, &mut rules);
            for (field, msg) in rules {
                let reason = if msg.starts_with("Required") {
                    "FieldValueRequired"
                } else if msg.starts_with("Unsupported") {
                    "FieldValueNotSupported"
                } else if msg.starts_with("Forbidden") {
                    "FieldValueForbidden"
                } else if msg.starts_with("Internal error") {
                    "InternalError"
                } else {
                    "FieldValueInvalid"
                };
                causes.push(cause(reason, &field, msg));
            }
        }
    }
    if let Some(url) = crd
        .pointer("/spec/conversion/webhook/clientConfig/url")
        .and_then(Value::as_str)
    {
        // kube-apiserver names the field after its internal type.
        crate::registry::validation::webhook_url(
            url,
            "spec.conversion.webhookClientConfig.url",
            &mut causes,
        );
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(def, name, causes))
    }
}

/// The status an Established CRD reports.
pub fn established_status(crd: &Value) -> Value {
    let now = crate::registry::meta::now_time();
    let names = crd.pointer("/spec/names").cloned().unwrap_or(json!({}));
    let mut accepted: Map<String, Value> = names.as_object().cloned().unwrap_or_default();
    if !accepted.contains_key("singular") {
        let kind = names
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_lowercase();
        accepted.insert("singular".into(), json!(kind));
    }
    if !accepted.contains_key("listKind") {
        let kind = names.get("kind").and_then(Value::as_str).unwrap_or("");
        accepted.insert("listKind".into(), json!(format!("{kind}List")));
    }
    let stored: Vec<Value> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(|vs| {
            vs.iter()
                .filter(|v| v.get("storage") == Some(&json!(true)))
                .filter_map(|v| v.get("name").cloned())
                .collect()
        })
        .unwrap_or_default();
    let mut stored_versions: Vec<Value> = crd
        .pointer("/status/storedVersions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for s in stored {
        if !stored_versions.contains(&s) {
            stored_versions.push(s);
        }
    }
    json!({
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "lastTransitionTime": now, "reason": "NoConflicts", "message": "no conflicts found"},
            {"type": "Established", "status": "True", "lastTransitionTime": now, "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"},
        ],
        "acceptedNames": accepted,
        "storedVersions": stored_versions,
    })
}
