//! Parsing of `#[kube(...)]` attributes (plain syn, no darling: one fewer build dependency
//! and full control over error spans).

use crate::json::{Json, ObjectError};
use crate::names;
use proc_macro2::{Span, TokenTree};
use syn::meta::ParseNestedMeta;
use syn::spanned::Spanned;
use syn::{LitBool, LitInt, LitStr, Token};

/// The keys `#[kube(...)]` accepts, for the "unknown key" message.
const KEYS: &[&str] = &[
    "group",
    "version",
    "kind",
    "namespaced",
    "status",
    "plural",
    "singular",
    "shortname",
    "category",
    "printcolumn",
    "scale",
    "selectable_field",
    "served",
    "storage",
    "deprecated",
    "deprecation_warning",
    "derive",
    "validation",
    "crates",
];

/// A printer column (`additionalPrinterColumns`).
#[derive(Debug, Default)]
pub(crate) struct PrinterColumn {
    pub name: String,
    pub json_path: String,
    pub type_: String,
    pub priority: Option<i32>,
    pub description: Option<String>,
    pub format: Option<String>,
}

/// The scale subresource paths.
#[derive(Debug, Default)]
pub(crate) struct Scale {
    pub spec_replicas_path: String,
    pub status_replicas_path: String,
    pub label_selector_path: Option<String>,
}

/// A CEL validation rule for the spec.
#[derive(Debug, Default)]
pub(crate) struct Validation {
    pub rule: String,
    pub message: Option<String>,
    pub message_expression: Option<String>,
    pub reason: Option<String>,
    pub field_path: Option<String>,
}

/// Path overrides from `crates(...)`.
#[derive(Default)]
pub(crate) struct Crates {
    pub kubewright: Option<syn::Path>,
    pub kubewright_core: Option<syn::Path>,
    pub k8s_openapi: Option<syn::Path>,
    pub schemars: Option<syn::Path>,
    pub serde: Option<syn::Path>,
    pub serde_json: Option<syn::Path>,
}

/// A string value and where it was written.
#[derive(Debug, Clone)]
pub(crate) struct At<T> {
    pub value: T,
    pub span: Span,
}

/// Everything `#[kube(...)]` said.
pub(crate) struct Attrs {
    pub group: Option<At<String>>,
    pub version: Option<At<String>>,
    pub kind: Option<At<String>>,
    pub namespaced: bool,
    pub status: Option<syn::Type>,
    pub plural: Option<At<String>>,
    pub singular: Option<At<String>>,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub printer_columns: Vec<PrinterColumn>,
    pub scale: Option<Scale>,
    pub selectable_fields: Vec<String>,
    pub served: bool,
    pub storage: bool,
    pub deprecated: bool,
    pub deprecation_warning: Option<String>,
    pub derives: Vec<syn::Path>,
    pub validations: Vec<Validation>,
    pub crates: Crates,
}

impl Default for Attrs {
    fn default() -> Self {
        Self {
            group: None,
            version: None,
            kind: None,
            namespaced: false,
            status: None,
            plural: None,
            singular: None,
            short_names: vec![],
            categories: vec![],
            printer_columns: vec![],
            scale: None,
            selectable_fields: vec![],
            served: true,
            storage: true,
            deprecated: false,
            deprecation_warning: None,
            derives: vec![],
            validations: vec![],
            crates: Crates::default(),
        }
    }
}

/// Collects errors so that one compile reports all of them.
#[derive(Default)]
struct Errors(Option<syn::Error>);

impl Errors {
    fn push(&mut self, e: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(e),
            None => self.0 = Some(e),
        }
    }
    fn at(&mut self, span: Span, msg: impl std::fmt::Display) {
        self.push(syn::Error::new(span, msg));
    }
}

/// Parses every `#[kube(...)]` attribute of the item. `fallback` is where errors about
/// missing keys point when there is no `#[kube]` attribute at all.
pub(crate) fn parse(attrs: &[syn::Attribute], fallback: Span) -> syn::Result<Attrs> {
    let mut out = Attrs::default();
    let mut errors = Errors::default();
    let mut seen: Vec<&'static str> = vec![];
    let mut first_span = None;
    for attr in attrs.iter().filter(|a| a.path().is_ident("kube")) {
        first_span.get_or_insert(attr.path().span());
        let res = attr.parse_nested_meta(|meta| parse_key(&mut out, &mut errors, &mut seen, &meta));
        if let Err(e) = res {
            errors.push(e);
        }
    }
    let span = first_span.unwrap_or(fallback);
    for (key, missing, example) in [
        ("group", out.group.is_none(), "group = \"example.com\""),
        ("version", out.version.is_none(), "version = \"v1\""),
        ("kind", out.kind.is_none(), "kind = \"Monitor\""),
    ] {
        if missing && !seen.contains(&key) {
            errors.at(
                span,
                format!("#[derive(CustomResource)] requires `{key}`: add #[kube({example})]"),
            );
        }
    }
    match errors.0 {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// Skips the value of a key that was rejected (`= ...` or `(...)`), so that parsing can
/// go on and report further errors.
fn skip_value(meta: &ParseNestedMeta) -> syn::Result<()> {
    while !meta.input.is_empty() && !meta.input.peek(Token![,]) {
        meta.input.parse::<TokenTree>()?;
    }
    Ok(())
}

fn key_name(meta: &ParseNestedMeta) -> String {
    meta.path
        .segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect::<Vec<_>>()
        .join("::")
}

/// A key that may appear once.
fn once(seen: &mut Vec<&'static str>, errors: &mut Errors, key: &'static str, span: Span) -> bool {
    if seen.contains(&key) {
        errors.at(span, format!("duplicate #[kube] key `{key}`"));
        false
    } else {
        seen.push(key);
        true
    }
}

fn lit_str(meta: &ParseNestedMeta) -> syn::Result<LitStr> {
    let value = meta.value()?;
    value.parse::<LitStr>().map_err(|e| {
        syn::Error::new(
            e.span(),
            format!("`{}` expects a string literal", key_name(meta)),
        )
    })
}

/// `key`, `key = true` or `key = false`.
fn flag(meta: &ParseNestedMeta) -> syn::Result<bool> {
    if meta.input.peek(Token![=]) {
        let value = meta.value()?;
        let b: LitBool = value.parse().map_err(|e| {
            syn::Error::new(
                e.span(),
                format!("`{}` expects `true` or `false`", key_name(meta)),
            )
        })?;
        Ok(b.value)
    } else {
        Ok(true)
    }
}

fn parse_key(
    out: &mut Attrs,
    errors: &mut Errors,
    seen: &mut Vec<&'static str>,
    meta: &ParseNestedMeta,
) -> syn::Result<()> {
    let span = meta.path.span();
    let key = key_name(meta);
    match key.as_str() {
        "group" | "version" | "kind" | "plural" | "singular" => {
            let lit = lit_str(meta)?;
            let value = lit.value();
            let check = match key.as_str() {
                "group" => names::check_group(&value),
                "version" => names::check_version(&value),
                "kind" => check_kind(&value),
                _ => names::check_label(&value).map_err(|e| format!("invalid {key}: {e}")),
            };
            if let Err(msg) = check {
                errors.at(lit.span(), msg);
            }
            let (slot, name) = match key.as_str() {
                "group" => (&mut out.group, "group"),
                "version" => (&mut out.version, "version"),
                "kind" => (&mut out.kind, "kind"),
                "plural" => (&mut out.plural, "plural"),
                _ => (&mut out.singular, "singular"),
            };
            if once(seen, errors, name, span) {
                *slot = Some(At {
                    value,
                    span: lit.span(),
                });
            }
        }
        "namespaced" => {
            let v = flag(meta)?;
            if once(seen, errors, "namespaced", span) {
                out.namespaced = v;
            }
        }
        "served" => {
            let v = flag(meta)?;
            if once(seen, errors, "served", span) {
                out.served = v;
            }
        }
        "storage" => {
            let v = flag(meta)?;
            if once(seen, errors, "storage", span) {
                out.storage = v;
            }
        }
        "status" => {
            let ty = if meta.input.peek(Token![=]) && meta.input.peek2(LitStr) {
                let lit = lit_str(meta)?;
                match lit.parse::<syn::Type>() {
                    Ok(ty) => Some(ty),
                    Err(_) => {
                        errors.at(
                            lit.span(),
                            format!(
                                "`status` must name a type, e.g. status = \"MonitorStatus\"; `{}` is not a type",
                                lit.value()
                            ),
                        );
                        None
                    }
                }
            } else {
                let value = meta.value()?;
                Some(value.parse::<syn::Type>()?)
            };
            if once(seen, errors, "status", span) {
                out.status = ty;
            }
        }
        "shortname" | "category" => {
            let lit = lit_str(meta)?;
            let value = lit.value();
            if let Err(msg) = names::check_label(&value) {
                errors.at(lit.span(), format!("invalid {key}: {msg}"));
            }
            if key == "shortname" {
                out.short_names.push(value);
            } else {
                out.categories.push(value);
            }
        }
        "selectable_field" => {
            let lit = lit_str(meta)?;
            let value = lit.value();
            if let Err(msg) = names::check_json_path(&value, None) {
                errors.at(lit.span(), msg);
            }
            out.selectable_fields.push(value);
        }
        "deprecated" => {
            if meta.input.peek(Token![=]) && meta.input.peek2(LitStr) {
                let lit = lit_str(meta)?;
                out.deprecation_warning = Some(lit.value());
                out.deprecated = true;
            } else {
                out.deprecated = flag(meta)?;
            }
            once(seen, errors, "deprecated", span);
        }
        "deprecation_warning" => {
            let lit = lit_str(meta)?;
            if once(seen, errors, "deprecation_warning", span) {
                out.deprecation_warning = Some(lit.value());
                out.deprecated = true;
            }
        }
        "derive" => {
            if meta.input.peek(Token![=]) && meta.input.peek2(LitStr) {
                let lit = lit_str(meta)?;
                let parser = syn::punctuated::Punctuated::<syn::Path, Token![,]>::parse_terminated;
                match lit.parse_with(parser) {
                    Ok(paths) if !paths.is_empty() => out.derives.extend(paths),
                    _ => errors.at(
                        lit.span(),
                        format!(
                            "`derive` expects trait paths such as \"PartialEq\"; `{}` is not one",
                            lit.value()
                        ),
                    ),
                }
            } else {
                let value = meta.value()?;
                out.derives.push(value.parse::<syn::Path>()?);
            }
        }
        "printcolumn" => {
            if let Some(col) = parse_printcolumn(meta, errors)? {
                out.printer_columns.push(col);
            }
        }
        "scale" => {
            let scale = parse_scale(meta, errors)?;
            if once(seen, errors, "scale", span) {
                out.scale = scale;
            }
        }
        "validation" => {
            if let Some(v) = parse_validation(meta, errors)? {
                out.validations.push(v);
            }
        }
        "crates" => {
            meta.parse_nested_meta(|inner| {
                let name = key_name(&inner);
                let value = inner.value()?;
                let path: syn::Path = if value.peek(LitStr) {
                    value.parse::<LitStr>()?.parse()?
                } else {
                    value.parse()?
                };
                let c = &mut out.crates;
                let slot = match name.as_str() {
                    "kubewright" => &mut c.kubewright,
                    "kubewright_core" => &mut c.kubewright_core,
                    "k8s_openapi" => &mut c.k8s_openapi,
                    "schemars" => &mut c.schemars,
                    "serde" => &mut c.serde,
                    "serde_json" => &mut c.serde_json,
                    _ => {
                        errors.at(
                            inner.path.span(),
                            format!(
                                "unknown crate `{name}` in #[kube(crates(...))]; expected one of: kubewright, kubewright_core, k8s_openapi, schemars, serde, serde_json"
                            ),
                        );
                        return Ok(());
                    }
                };
                if slot.is_some() {
                    errors.at(inner.path.span(), format!("duplicate crate `{name}`"));
                }
                *slot = Some(path);
                Ok(())
            })?;
        }
        _ => {
            errors.at(
                span,
                format!(
                    "unknown #[kube] attribute `{key}`; expected one of: {}",
                    KEYS.join(", ")
                ),
            );
            skip_value(meta)?;
        }
    }
    Ok(())
}

fn check_kind(kind: &str) -> Result<(), String> {
    let mut chars = kind.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_uppercase())
        && chars.all(|c| c.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(format!(
            "invalid kind `{kind}`: a kind is an UpperCamelCase identifier (e.g. `Monitor`); it also names the generated struct"
        ))
    }
}

const COLUMN_TYPES: &[&str] = &["integer", "number", "string", "boolean", "date"];

fn check_column(col: &PrinterColumn, span: Span, errors: &mut Errors) {
    if col.name.is_empty() {
        errors.at(span, "printcolumn needs a `name`");
    }
    if col.json_path.is_empty() {
        errors.at(
            span,
            "printcolumn needs a `json_path` (e.g. \".spec.target\")",
        );
    } else if let Err(msg) = names::check_json_path(&col.json_path, None) {
        errors.at(span, msg);
    }
    if !COLUMN_TYPES.contains(&col.type_.as_str()) {
        errors.at(
            span,
            format!(
                "printcolumn type `{}` is not one of: {}",
                col.type_,
                COLUMN_TYPES.join(", ")
            ),
        );
    }
}

fn json_member<'a>(obj: &'a [(String, Json)], key: &str) -> Option<&'a Json> {
    obj.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v)
}

fn json_str(obj: &[(String, Json)], key: &str) -> Option<String> {
    match json_member(obj, key) {
        Some(Json::Str(s)) => Some(s.clone()),
        _ => None,
    }
}

/// Parses a JSON-object literal (kube-rs's string form).
fn json_object(lit: &LitStr, what: &str, errors: &mut Errors) -> Option<Vec<(String, Json)>> {
    match crate::json::object(&lit.value()) {
        Ok(m) => Some(m),
        Err(ObjectError::NotAnObject) => {
            errors.at(lit.span(), format!("{what} JSON must be an object"));
            None
        }
        Err(ObjectError::Syntax(e)) => {
            errors.at(lit.span(), format!("{what} is not valid JSON: {e}"));
            None
        }
    }
}

fn parse_printcolumn(
    meta: &ParseNestedMeta,
    errors: &mut Errors,
) -> syn::Result<Option<PrinterColumn>> {
    let span = meta.path.span();
    if meta.input.peek(Token![=]) {
        let lit = lit_str(meta)?;
        let Some(obj) = json_object(&lit, "printcolumn", errors) else {
            return Ok(None);
        };
        for k in obj.iter().map(|(k, _)| k) {
            if !matches!(
                k.as_str(),
                "name" | "jsonPath" | "type" | "priority" | "description" | "format"
            ) {
                errors.at(
                    lit.span(),
                    format!(
                        "unknown printcolumn field `{k}`; expected name, jsonPath, type, priority, description, format"
                    ),
                );
            }
        }
        let col = PrinterColumn {
            name: json_str(&obj, "name").unwrap_or_default(),
            json_path: json_str(&obj, "jsonPath").unwrap_or_default(),
            type_: json_str(&obj, "type").unwrap_or_else(|| "string".into()),
            priority: match json_member(&obj, "priority") {
                Some(Json::Num(Some(p))) => i32::try_from(*p).ok(),
                _ => None,
            },
            description: json_str(&obj, "description"),
            format: json_str(&obj, "format"),
        };
        check_column(&col, lit.span(), errors);
        return Ok(Some(col));
    }
    let mut col = PrinterColumn {
        type_: "string".into(),
        ..Default::default()
    };
    meta.parse_nested_meta(|inner| {
        let name = key_name(&inner);
        match name.as_str() {
            "priority" => {
                let lit: LitInt = inner.value()?.parse()?;
                col.priority = Some(lit.base10_parse()?);
            }
            "name" => col.name = lit_str(&inner)?.value(),
            "json_path" | "jsonPath" => col.json_path = lit_str(&inner)?.value(),
            "type" => col.type_ = lit_str(&inner)?.value(),
            "description" => col.description = Some(lit_str(&inner)?.value()),
            "format" => col.format = Some(lit_str(&inner)?.value()),
            _ => {
                errors.at(
                    inner.path.span(),
                    format!(
                        "unknown printcolumn field `{name}`; expected name, json_path, type, priority, description, format"
                    ),
                );
                skip_value(&inner)?;
            }
        }
        Ok(())
    })?;
    check_column(&col, span, errors);
    Ok(Some(col))
}

fn check_scale(scale: &Scale, span: Span, errors: &mut Errors) {
    if scale.spec_replicas_path.is_empty() {
        errors.at(span, "scale needs `spec` (e.g. \".spec.replicas\")");
    } else if let Err(msg) = names::check_json_path(&scale.spec_replicas_path, Some(".spec.")) {
        errors.at(span, format!("scale spec path: {msg}"));
    }
    if scale.status_replicas_path.is_empty() {
        errors.at(span, "scale needs `status` (e.g. \".status.replicas\")");
    } else if let Err(msg) = names::check_json_path(&scale.status_replicas_path, Some(".status.")) {
        errors.at(span, format!("scale status path: {msg}"));
    }
    if let Some(sel) = &scale.label_selector_path
        && let Err(msg) = names::check_json_path(sel, Some(".status."))
    {
        errors.at(span, format!("scale label_selector path: {msg}"));
    }
}

fn parse_scale(meta: &ParseNestedMeta, errors: &mut Errors) -> syn::Result<Option<Scale>> {
    let span = meta.path.span();
    if meta.input.peek(Token![=]) {
        let lit = lit_str(meta)?;
        let Some(obj) = json_object(&lit, "scale", errors) else {
            return Ok(None);
        };
        let scale = Scale {
            spec_replicas_path: json_str(&obj, "specReplicasPath").unwrap_or_default(),
            status_replicas_path: json_str(&obj, "statusReplicasPath").unwrap_or_default(),
            label_selector_path: json_str(&obj, "labelSelectorPath"),
        };
        check_scale(&scale, lit.span(), errors);
        return Ok(Some(scale));
    }
    let mut scale = Scale::default();
    meta.parse_nested_meta(|inner| {
        let name = key_name(&inner);
        match name.as_str() {
            "spec" | "spec_replicas_path" => scale.spec_replicas_path = lit_str(&inner)?.value(),
            "status" | "status_replicas_path" => {
                scale.status_replicas_path = lit_str(&inner)?.value()
            }
            "label_selector" | "label_selector_path" => {
                scale.label_selector_path = Some(lit_str(&inner)?.value())
            }
            _ => {
                errors.at(
                    inner.path.span(),
                    format!("unknown scale field `{name}`; expected spec, status, label_selector"),
                );
                skip_value(&inner)?;
            }
        }
        Ok(())
    })?;
    check_scale(&scale, span, errors);
    Ok(Some(scale))
}

const REASONS: &[&str] = &[
    "FieldValueInvalid",
    "FieldValueForbidden",
    "FieldValueRequired",
    "FieldValueDuplicate",
];

fn parse_validation(
    meta: &ParseNestedMeta,
    errors: &mut Errors,
) -> syn::Result<Option<Validation>> {
    let span = meta.path.span();
    if meta.input.peek(Token![=]) {
        let lit = lit_str(meta)?;
        if lit.value().trim().is_empty() {
            errors.at(lit.span(), "a validation rule must not be empty");
        }
        return Ok(Some(Validation {
            rule: lit.value(),
            ..Default::default()
        }));
    }
    let mut v = Validation::default();
    meta.parse_nested_meta(|inner| {
        let name = key_name(&inner);
        match name.as_str() {
            "rule" => v.rule = lit_str(&inner)?.value(),
            "message" => v.message = Some(lit_str(&inner)?.value()),
            "message_expression" => v.message_expression = Some(lit_str(&inner)?.value()),
            "field_path" => v.field_path = Some(lit_str(&inner)?.value()),
            "reason" => {
                let lit = lit_str(&inner)?;
                if !REASONS.contains(&lit.value().as_str()) {
                    errors.at(
                        lit.span(),
                        format!("validation reason must be one of: {}", REASONS.join(", ")),
                    );
                }
                v.reason = Some(lit.value());
            }
            _ => {
                errors.at(
                    inner.path.span(),
                    format!(
                        "unknown validation field `{name}`; expected rule, message, message_expression, reason, field_path"
                    ),
                );
                skip_value(&inner)?;
            }
        }
        Ok(())
    })?;
    if v.rule.trim().is_empty() {
        errors.at(span, "validation(...) needs a non-empty `rule`");
        return Ok(None);
    }
    Ok(Some(v))
}
