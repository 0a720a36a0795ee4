//! Used by the code `#[derive(CustomResource)]` generates; not a stable API.

use super::schema::{SchemaError, structural_schema_at, structural_violations};
use serde_json::{Map, Value, json};

/// A printer column as written in `#[kube(printcolumn(...))]`.
#[derive(Debug, Clone, Copy)]
pub struct PrinterColumn<'a> {
    pub name: &'a str,
    pub json_path: &'a str,
    pub type_: &'a str,
    pub priority: Option<i32>,
    pub description: Option<&'a str>,
    pub format: Option<&'a str>,
}

/// `#[kube(scale(...))]`.
#[derive(Debug, Clone, Copy)]
pub struct Scale<'a> {
    pub spec_replicas_path: &'a str,
    pub status_replicas_path: &'a str,
    pub label_selector_path: Option<&'a str>,
}

/// `#[kube(validation(...))]`.
#[derive(Debug, Clone, Copy)]
pub struct Validation<'a> {
    pub rule: &'a str,
    pub message: Option<&'a str>,
    pub message_expression: Option<&'a str>,
    pub reason: Option<&'a str>,
    pub field_path: Option<&'a str>,
}

/// Everything the derive knows about one version of a kind.
#[derive(Debug)]
pub struct CrdParts<'a> {
    pub group: &'a str,
    pub version: &'a str,
    pub kind: &'a str,
    pub plural: &'a str,
    pub singular: &'a str,
    pub short_names: &'a [&'a str],
    pub categories: &'a [&'a str],
    pub namespaced: bool,
    pub served: bool,
    pub storage: bool,
    pub deprecated: bool,
    pub deprecation_warning: Option<&'a str>,
    pub printer_columns: &'a [PrinterColumn<'a>],
    pub scale: Option<Scale<'a>>,
    pub selectable_fields: &'a [&'a str],
    pub validations: &'a [Validation<'a>],
    /// The spec type's name (for descriptions and messages).
    pub spec_type: &'a str,
    /// schemars' schema of the spec type (openapi3 settings, transforms applied).
    pub spec_schema: Value,
    /// schemars' schema of `Option<Status>`, when there is a status.
    pub status_schema: Option<Value>,
    /// schemars' definitions (recursive types).
    pub definitions: Map<String, Value>,
}

fn opt_insert(m: &mut Map<String, Value>, key: &str, v: Option<&str>) {
    if let Some(v) = v {
        m.insert(key.into(), json!(v));
    }
}

/// Builds the CRD as JSON (the generated code decodes it into k8s-openapi's type).
pub fn build_crd(parts: CrdParts<'_>) -> Result<Value, SchemaError> {
    let context = format!("the CRD of {} ({})", parts.kind, parts.spec_type);
    let mut spec = structural_schema_at(parts.spec_schema, &parts.definitions, ".spec")
        .map_err(|e| e.context(context.clone()))?;
    if !parts.validations.is_empty() {
        let rules: Vec<Value> = parts
            .validations
            .iter()
            .map(|v| {
                let mut m = Map::new();
                m.insert("rule".into(), json!(v.rule));
                opt_insert(&mut m, "message", v.message);
                opt_insert(&mut m, "messageExpression", v.message_expression);
                opt_insert(&mut m, "reason", v.reason);
                opt_insert(&mut m, "fieldPath", v.field_path);
                Value::Object(m)
            })
            .collect();
        if let Some(m) = spec.as_object_mut() {
            let list = m
                .entry("x-kubernetes-validations")
                .or_insert_with(|| json!([]));
            if let Value::Array(list) = list {
                list.extend(rules);
            }
        }
    }
    let mut properties = Map::new();
    properties.insert("spec".into(), spec);
    if let Some(status) = parts.status_schema {
        let status = structural_schema_at(status, &parts.definitions, ".status")
            .map_err(|e| e.context(context.clone()))?;
        properties.insert("status".into(), status);
    }
    let schema = json!({
        "description": format!("Auto-generated derived type for {} via `CustomResource`", parts.spec_type),
        "type": "object",
        "properties": properties,
        "required": ["spec"],
    });
    let violations = structural_violations(&schema);
    if !violations.is_empty() {
        return Err(SchemaError::at(
            "",
            format!(
                "the schema is not structural:\n  {}",
                violations.join("\n  ")
            ),
        )
        .context(context));
    }

    let mut version = Map::new();
    version.insert("name".into(), json!(parts.version));
    version.insert("served".into(), json!(parts.served));
    version.insert("storage".into(), json!(parts.storage));
    if parts.deprecated {
        version.insert("deprecated".into(), json!(true));
        opt_insert(
            &mut version,
            "deprecationWarning",
            parts.deprecation_warning,
        );
    }
    version.insert("schema".into(), json!({ "openAPIV3Schema": schema }));
    let mut subresources = Map::new();
    if properties_has_status(&version) {
        subresources.insert("status".into(), json!({}));
    }
    if let Some(scale) = parts.scale {
        let mut m = Map::new();
        m.insert("specReplicasPath".into(), json!(scale.spec_replicas_path));
        m.insert(
            "statusReplicasPath".into(),
            json!(scale.status_replicas_path),
        );
        opt_insert(&mut m, "labelSelectorPath", scale.label_selector_path);
        subresources.insert("scale".into(), Value::Object(m));
    }
    if !subresources.is_empty() {
        version.insert("subresources".into(), Value::Object(subresources));
    }
    if !parts.printer_columns.is_empty() {
        let cols: Vec<Value> = parts
            .printer_columns
            .iter()
            .map(|c| {
                let mut m = Map::new();
                m.insert("name".into(), json!(c.name));
                m.insert("type".into(), json!(c.type_));
                m.insert("jsonPath".into(), json!(c.json_path));
                opt_insert(&mut m, "description", c.description);
                opt_insert(&mut m, "format", c.format);
                if let Some(p) = c.priority {
                    m.insert("priority".into(), json!(p));
                }
                Value::Object(m)
            })
            .collect();
        version.insert("additionalPrinterColumns".into(), Value::Array(cols));
    }
    if !parts.selectable_fields.is_empty() {
        let fields: Vec<Value> = parts
            .selectable_fields
            .iter()
            .map(|f| json!({ "jsonPath": f }))
            .collect();
        version.insert("selectableFields".into(), Value::Array(fields));
    }

    let mut names = Map::new();
    names.insert("kind".into(), json!(parts.kind));
    names.insert("listKind".into(), json!(format!("{}List", parts.kind)));
    names.insert("plural".into(), json!(parts.plural));
    names.insert("singular".into(), json!(parts.singular));
    if !parts.short_names.is_empty() {
        names.insert("shortNames".into(), json!(parts.short_names));
    }
    if !parts.categories.is_empty() {
        names.insert("categories".into(), json!(parts.categories));
    }
    Ok(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": { "name": format!("{}.{}", parts.plural, parts.group) },
        "spec": {
            "group": parts.group,
            "names": names,
            "scope": if parts.namespaced { "Namespaced" } else { "Cluster" },
            "versions": [version],
        }
    }))
}

fn properties_has_status(version: &Map<String, Value>) -> bool {
    version
        .get("schema")
        .and_then(|s| s.pointer("/openAPIV3Schema/properties/status"))
        .is_some()
}
