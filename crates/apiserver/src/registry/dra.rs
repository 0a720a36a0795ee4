//! Validation of the resource.k8s.io/v1 kinds (dynamic resource allocation: DeviceClass,
//! ResourceClaim, ResourceClaimTemplate, ResourceSlice) and of VolumeAttributesClasses,
//! as kube-apiserver v1.36 reports it (`pkg/apis/resource/validation`,
//! `ValidateVolumeAttributesClass`): the checks a driver or controller commonly trips,
//! with upstream's field paths, order and texts. CEL selector expressions are not
//! compiled here, semantic versions and the alpha fields are not checked.

use crate::error::{
    DNS_LABEL_ERROR, DNS_SUBDOMAIN_ERROR, forbidden_cause as forbidden, go_json_text, go_quote,
    invalid_cause as invalid, label_value_errors, qualified_name_errors,
    required_cause as required,
};
use crate::registry::resources::items;
use crate::registry::validation::{duplicate, not_supported, required_why};
use kubewright_core::StatusCause;
use serde_json::{Map, Value};

/// Requests, constraints, configs and selectors per claim or class (`...MaxSize`).
const MAX_32: usize = 32;
const MAX_SUBREQUESTS: usize = 8;
const MAX_DEVICES: usize = 128;
const MAX_TAINTS: usize = 16;
const MAX_ATTRIBUTES_AND_CAPACITIES: usize = 32;
const MAX_ATTRIBUTE_STRING: usize = 64;
const C_IDENTIFIER_MAX: usize = 32;
const C_IDENTIFIER_ERROR: &str = "a valid C identifier must start with alphabetic character or '_', followed by a string of alphanumeric characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used for validation is '[A-Za-z_][A-Za-z0-9_]*')";
const REQUEST_REF: &str = "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'";
const TAINT_EFFECTS: &[&str] = &["NoExecute", "NoSchedule", "None"];

fn cause(reason: &str, field: &str, message: String) -> StatusCause {
    StatusCause {
        reason: reason.into(),
        message,
        field: field.into(),
    }
}

fn too_many(field: &str, n: usize, max: usize) -> StatusCause {
    cause(
        "FieldValueTooMany",
        field,
        format!("Too many: {n}: must have at most {max} items"),
    )
}

fn too_long(field: &str, max: usize) -> StatusCause {
    cause(
        "FieldValueTooLong",
        field,
        format!("Too long: may not be more than {max} bytes"),
    )
}

fn str_of<'v>(v: &'v Value, key: &str) -> &'v str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// The DNS-1123 label pattern alone (Go reports the length separately).
fn label_re(s: &str) -> bool {
    crate::registry::meta::dns_label_shape(s)
}

fn subdomain_re(s: &str) -> bool {
    s.split('.').all(label_re)
}

/// `IsDNS1123Label`'s messages.
fn dns_label(field: &str, s: &str, out: &mut Vec<StatusCause>) {
    if s.len() > 63 {
        out.push(invalid(
            field,
            &go_quote(s),
            "must be no more than 63 characters",
        ));
    }
    if !label_re(s) {
        let why = if subdomain_re(s) {
            "must not contain dots"
        } else {
            DNS_LABEL_ERROR
        };
        out.push(invalid(field, &go_quote(s), why));
    }
}

/// `IsDNS1123Subdomain`'s messages.
fn dns_subdomain(field: &str, s: &str, out: &mut Vec<StatusCause>) {
    if s.len() > 253 {
        out.push(invalid(
            field,
            &go_quote(s),
            "must be no more than 253 characters",
        ));
    }
    if !subdomain_re(s) {
        out.push(invalid(field, &go_quote(s), DNS_SUBDOMAIN_ERROR));
    }
}

/// `validatePoolName`: required, at most 253 characters, and each `/`-separated part a
/// DNS subdomain, reported with the part (measured on v1.36: `A/ok/B_` gives two errors,
/// for "A" and "B_").
fn pool_name(field: &str, s: &str, out: &mut Vec<StatusCause>) {
    if s.is_empty() {
        out.push(required(field));
        return;
    }
    if s.len() > 253 {
        out.push(too_long(field, 253));
    }
    for part in s.split('/') {
        dns_subdomain(field, part, out);
    }
}

/// A device class name in a request: required, a DNS subdomain.
fn class_name(field: &str, s: &str, out: &mut Vec<StatusCause>) {
    if s.is_empty() {
        out.push(required(field));
    } else {
        dns_subdomain(field, s, out);
    }
}

/// `ValidateCSIDriverName`, the rule for every driver name.
fn driver_name(field: &str, s: &str, out: &mut Vec<StatusCause>) {
    if s.is_empty() {
        out.push(required(field));
        return;
    }
    if s.len() > 63 {
        out.push(too_long(field, 63));
    }
    let lower = s.to_lowercase();
    if lower.len() > 253 {
        out.push(invalid(
            field,
            &go_quote(s),
            "must be no more than 253 characters",
        ));
    }
    if !subdomain_re(&lower) {
        out.push(invalid(field, &go_quote(s), DNS_SUBDOMAIN_ERROR));
    }
}

fn is_c_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// An attribute or capacity name: a C identifier, or `domain/identifier` (the domain a
/// driver name). Errors are reported at the map, the key as their value.
fn qualified_key(field: &str, key: &str, out: &mut Vec<StatusCause>) {
    let (domain, id) = match key.split_once('/') {
        Some((d, i)) => (Some(d), i),
        None => (None, key),
    };
    if let Some(d) = domain {
        if d.is_empty() {
            out.push(invalid(
                field,
                &go_quote(key),
                "the domain must not be empty",
            ));
        } else {
            let mut errs = Vec::new();
            driver_name(field, d, &mut errs);
            out.extend(errs.into_iter().map(|mut c| {
                c.message = c.message.replacen(&go_quote(d), &go_quote(key), 1);
                c
            }));
        }
        if id.is_empty() {
            out.push(invalid(field, &go_quote(key), "the name must not be empty"));
            return;
        }
    }
    if id.len() > C_IDENTIFIER_MAX {
        out.push(too_long(field, C_IDENTIFIER_MAX));
    }
    if !is_c_identifier(id) {
        out.push(invalid(field, &go_quote(key), C_IDENTIFIER_ERROR));
    }
}

/// Selectors of a class or request: at most 32, each with a CEL expression.
fn selectors(v: &Value, base: &str, out: &mut Vec<StatusCause>) {
    let list = items(v, "selectors");
    if list.len() > MAX_32 {
        out.push(too_many(&format!("{base}.selectors"), list.len(), MAX_32));
    }
    for (i, s) in list.iter().enumerate() {
        if s.get("cel").is_none_or(Value::is_null) {
            out.push(required(&format!("{base}.selectors[{i}].cel")));
        }
    }
}

/// `validateRawExtension` for opaque parameters.
fn parameters(v: Option<&Value>, field: &str, out: &mut Vec<StatusCause>) {
    match v {
        None | Some(Value::Null) => out.push(required(field)),
        Some(Value::Object(_)) => {}
        Some(_) => out.push(invalid(
            field,
            "\"<value omitted>\"",
            "must be a valid JSON object",
        )),
    }
}

/// A class's or claim's device configuration: an opaque one, with a driver and
/// parameters.
fn device_config(c: &Value, base: &str, out: &mut Vec<StatusCause>) {
    match c.get("opaque").filter(|o| !o.is_null()) {
        None => out.push(required(&format!("{base}.opaque"))),
        Some(o) => {
            driver_name(&format!("{base}.opaque.driver"), str_of(o, "driver"), out);
            parameters(
                o.get("parameters"),
                &format!("{base}.opaque.parameters"),
                out,
            );
        }
    }
}

/// `ValidateDeviceClass`'s spec.
pub(crate) fn device_class(obj: &Value, out: &mut Vec<StatusCause>) {
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    selectors(spec, "spec", out);
    let config = items(spec, "config");
    if config.len() > MAX_32 {
        out.push(too_many("spec.config", config.len(), MAX_32));
    }
    for (i, c) in config.iter().enumerate() {
        device_config(c, &format!("spec.config[{i}]"), out);
    }
}

fn toleration(t: &Value, base: &str, out: &mut Vec<StatusCause>) {
    let key = str_of(t, "key");
    if !key.is_empty() {
        for e in qualified_name_errors(key) {
            out.push(invalid(&format!("{base}.key"), &go_quote(key), &e));
        }
    }
    let value = str_of(t, "value");
    match str_of(t, "operator") {
        "Exists" if !value.is_empty() => out.push(invalid(
            &format!("{base}.value"),
            &go_quote(value),
            "must be empty for operator `Exists`",
        )),
        "Exists" => {}
        "Equal" => {
            for e in label_value_errors(value) {
                out.push(invalid(&format!("{base}.value"), &go_quote(value), &e));
            }
        }
        "" => out.push(required(&format!("{base}.operator"))),
        op => out.push(not_supported(
            &format!("{base}.operator"),
            op,
            &["Equal", "Exists"],
        )),
    }
    let effect = str_of(t, "effect");
    if !effect.is_empty() && !TAINT_EFFECTS.contains(&effect) {
        out.push(not_supported(
            &format!("{base}.effect"),
            effect,
            TAINT_EFFECTS,
        ));
    }
}

/// What an exact request and a subrequest share: class, selectors, mode and count,
/// tolerations.
fn request_body(r: &Value, base: &str, out: &mut Vec<StatusCause>) {
    class_name(
        &format!("{base}.deviceClassName"),
        str_of(r, "deviceClassName"),
        out,
    );
    selectors(r, base, out);
    let count = r.get("count").and_then(Value::as_i64).unwrap_or(0);
    match str_of(r, "allocationMode") {
        "All" if count != 0 => out.push(invalid(
            &format!("{base}.count"),
            &count.to_string(),
            "must not be specified when allocationMode is 'All'",
        )),
        "All" => {}
        "ExactCount" if count <= 0 => out.push(invalid(
            &format!("{base}.count"),
            &count.to_string(),
            "must be greater than zero",
        )),
        "ExactCount" => {}
        mode => out.push(not_supported(
            &format!("{base}.allocationMode"),
            mode,
            &["All", "ExactCount"],
        )),
    }
    for (i, t) in items(r, "tolerations").iter().enumerate() {
        toleration(t, &format!("{base}.tolerations[{i}]"), out);
    }
}

/// Reports duplicates of `key` among `list` (after the items' own errors, as Go's
/// `validateSlice` does), at the item.
fn duplicates(list: &[Value], key: &str, base: &str, out: &mut Vec<StatusCause>) {
    let mut seen = std::collections::HashSet::new();
    for (i, item) in list.iter().enumerate() {
        let k = str_of(item, key);
        if !seen.insert(k.to_string()) {
            out.push(duplicate(&format!("{base}[{i}]"), &go_quote(k)));
        }
    }
}

/// The names a claim's references may use: its requests', and `request/subrequest`.
fn request_names(devices: &Value) -> Vec<String> {
    let mut names = Vec::new();
    for r in items(devices, "requests") {
        let name = str_of(r, "name");
        names.push(name.to_string());
        for s in items(r, "firstAvailable") {
            names.push(format!("{name}/{}", str_of(s, "name")));
        }
    }
    names
}

/// A ResourceClaimSpec (a claim's `spec`, a template's `spec.spec`).
pub(crate) fn claim_spec(spec: &Value, base: &str, out: &mut Vec<StatusCause>) {
    let devices = spec.get("devices").unwrap_or(&Value::Null);
    let dbase = format!("{base}.devices");
    let requests = items(devices, "requests");
    if requests.len() > MAX_32 {
        out.push(too_many(
            &format!("{dbase}.requests"),
            requests.len(),
            MAX_32,
        ));
    }
    for (i, r) in requests.iter().enumerate() {
        let rb = format!("{dbase}.requests[{i}]");
        let name = str_of(r, "name");
        dns_label(&format!("{rb}.name"), name, out);
        let subs = items(r, "firstAvailable");
        let mut kinds = 0;
        if !subs.is_empty() {
            kinds += 1;
            if subs.len() > MAX_SUBREQUESTS {
                out.push(too_many(
                    &format!("{rb}.firstAvailable"),
                    subs.len(),
                    MAX_SUBREQUESTS,
                ));
            }
            for (j, s) in subs.iter().enumerate() {
                let sb = format!("{rb}.firstAvailable[{j}]");
                dns_label(&format!("{sb}.name"), str_of(s, "name"), out);
                request_body(s, &sb, out);
            }
            duplicates(subs, "name", &format!("{rb}.firstAvailable"), out);
        }
        if let Some(e) = r.get("exactly").filter(|e| !e.is_null()) {
            kinds += 1;
            request_body(e, &format!("{rb}.exactly"), out);
        }
        match kinds {
            0 => out.push(required_why(
                &rb,
                "exactly one of `exactly` or `firstAvailable` is required",
            )),
            1 => {}
            _ => out.push(invalid(
                &rb,
                "null",
                "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set",
            )),
        }
    }
    duplicates(requests, "name", &format!("{dbase}.requests"), out);
    let names = request_names(devices);
    let refs = |list: &Value, base: &str, out: &mut Vec<StatusCause>| {
        for (j, r) in items(list, "requests").iter().enumerate() {
            let r = r.as_str().unwrap_or("");
            if !names.iter().any(|n| n == r) {
                out.push(invalid(
                    &format!("{base}.requests[{j}]"),
                    &go_quote(r),
                    REQUEST_REF,
                ));
            }
        }
    };
    let constraints = items(devices, "constraints");
    if constraints.len() > MAX_32 {
        out.push(too_many(
            &format!("{dbase}.constraints"),
            constraints.len(),
            MAX_32,
        ));
    }
    for (i, c) in constraints.iter().enumerate() {
        let cb = format!("{dbase}.constraints[{i}]");
        refs(c, &cb, out);
        let set = |k: &str| c.get(k).is_some_and(|v| !v.is_null());
        if !set("matchAttribute") && !set("distinctAttribute") {
            out.push(required_why(
                &cb,
                "exactly one of \"matchAttribute\" or \"distinctAttribute\" is required, but multiple fields are set",
            ));
        }
    }
    let config = items(devices, "config");
    if config.len() > MAX_32 {
        out.push(too_many(&format!("{dbase}.config"), config.len(), MAX_32));
    }
    for (i, c) in config.iter().enumerate() {
        let cb = format!("{dbase}.config[{i}]");
        refs(c, &cb, out);
        device_config(c, &cb, out);
    }
}

/// A ResourceClaimTemplate: its `spec.metadata` may only carry labels and annotations.
pub(crate) fn claim_template(obj: &Value, out: &mut Vec<StatusCause>) {
    // ObjectMeta's fields in Go's order.
    const META: &[&str] = &[
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    ];
    if let Some(meta) = obj.pointer("/spec/metadata").and_then(Value::as_object) {
        for f in META {
            let set = meta.get(*f).is_some_and(|v| match v {
                Value::Null => false,
                Value::String(s) => !s.is_empty(),
                Value::Array(a) => !a.is_empty(),
                Value::Object(m) => !m.is_empty(),
                Value::Number(n) => n.as_f64() != Some(0.0),
                Value::Bool(b) => *b,
            });
            if set && !matches!(*f, "labels" | "annotations") {
                out.push(forbidden(&format!("spec.metadata.{f}"), "cannot be set"));
            }
        }
    }
    claim_spec(
        obj.pointer("/spec/spec").unwrap_or(&Value::Null),
        "spec.spec",
        out,
    );
}

fn attributes(d: &Value, base: &str, out: &mut Vec<StatusCause>) {
    let Some(attrs) = d.get("attributes").and_then(Value::as_object) else {
        return;
    };
    let mut keys: Vec<&String> = attrs.keys().collect();
    keys.sort();
    for k in &keys {
        qualified_key(&format!("{base}.attributes"), k, out);
    }
    for k in keys {
        let v = &attrs[k];
        let ab = format!("{base}.attributes[{k}]");
        let set = DEVICE_ATTRIBUTE
            .iter()
            .filter(|(f, _, _)| v.get(*f).is_some_and(|x| !x.is_null()))
            .count();
        if set != 1 {
            out.push(invalid(
                &ab,
                &go_internal(Some(v), DEVICE_ATTRIBUTE),
                "exactly one value must be specified",
            ));
        }
        for f in ["string", "version"] {
            if v.get(f)
                .and_then(Value::as_str)
                .is_some_and(|s| s.len() > MAX_ATTRIBUTE_STRING)
            {
                out.push(too_long(&format!("{ab}.{f}"), MAX_ATTRIBUTE_STRING));
            }
        }
        for f in ["ints", "bools", "strings", "versions"] {
            if v.get(f)
                .and_then(Value::as_array)
                .is_some_and(Vec::is_empty)
            {
                out.push(invalid(
                    &format!("{ab}.{f}"),
                    "[]",
                    "must not be empty if specified",
                ));
            }
        }
    }
}

fn taint(t: &Value, base: &str, out: &mut Vec<StatusCause>) {
    let key = str_of(t, "key");
    for e in qualified_name_errors(key) {
        out.push(invalid(&format!("{base}.key"), &go_quote(key), &e));
    }
    let value = str_of(t, "value");
    for e in label_value_errors(value) {
        out.push(invalid(&format!("{base}.value"), &go_quote(value), &e));
    }
    match str_of(t, "effect") {
        "" => out.push(required(&format!("{base}.effect"))),
        e if TAINT_EFFECTS.contains(&e) => {}
        e => out.push(not_supported(&format!("{base}.effect"), e, TAINT_EFFECTS)),
    }
}

/// `validateResourceSliceSpec`: driver, pool, the node selection, devices.
pub(crate) fn resource_slice(obj: &Value, out: &mut Vec<StatusCause>) {
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    driver_name("spec.driver", str_of(spec, "driver"), out);
    let pool = spec.get("pool").unwrap_or(&Value::Null);
    pool_name("spec.pool.name", str_of(pool, "name"), out);
    let count = pool
        .get("resourceSliceCount")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if count <= 0 {
        out.push(invalid(
            "spec.pool.resourceSliceCount",
            &count.to_string(),
            "must be greater than zero",
        ));
    }
    let generation = pool.get("generation").and_then(Value::as_i64).unwrap_or(0);
    if generation < 0 {
        out.push(invalid(
            "spec.pool.generation",
            &generation.to_string(),
            "must be greater than or equal to zero",
        ));
    }
    let mut chosen: Vec<&str> = Vec::new();
    if let Some(n) = spec.get("nodeName").and_then(Value::as_str) {
        if n.is_empty() {
            out.push(invalid(
                "spec.nodeName",
                "\"\"",
                "must be either unset or set to a non-empty string",
            ));
        } else {
            chosen.push("`nodeName`");
            dns_subdomain("spec.nodeName", n, out);
        }
    }
    if spec.get("nodeSelector").is_some_and(|s| !s.is_null()) {
        chosen.push("`nodeSelector`");
        let terms = spec
            .pointer("/nodeSelector/nodeSelectorTerms")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        if terms != 1 {
            out.push(invalid(
                "spec.nodeSelector.nodeSelectorTerms",
                "null",
                "must have exactly one node selector term",
            ));
        }
    }
    for (f, label) in [
        ("allNodes", "`allNodes`"),
        ("perDeviceNodeSelection", "`perDeviceNodeSelection`"),
    ] {
        match spec.get(f).and_then(Value::as_bool) {
            Some(true) => chosen.push(label),
            Some(false) => out.push(invalid(
                &format!("spec.{f}"),
                "false",
                "must be either unset or set to true",
            )),
            None => {}
        }
    }
    const ONE_OF: &str = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required";
    match chosen.len() {
        0 => out.push(required_why("spec", ONE_OF)),
        1 => {}
        _ => out.push(invalid(
            "spec",
            &go_quote(&format!("{{{}}}", chosen.join(", "))),
            &format!("{ONE_OF}, but multiple fields are set"),
        )),
    }
    let devices = items(spec, "devices");
    if devices.len() > MAX_DEVICES {
        out.push(too_many("spec.devices", devices.len(), MAX_DEVICES));
    }
    for (i, d) in devices.iter().enumerate() {
        let db = format!("spec.devices[{i}]");
        dns_label(&format!("{db}.name"), str_of(d, "name"), out);
        let n = |k: &str| d.get(k).and_then(Value::as_object).map_or(0, Map::len);
        if n("attributes") + n("capacity") > MAX_ATTRIBUTES_AND_CAPACITIES {
            out.push(invalid(
                &db,
                &(n("attributes") + n("capacity")).to_string(),
                &format!(
                    "the total number of attributes and capacities must not exceed {MAX_ATTRIBUTES_AND_CAPACITIES}"
                ),
            ));
        }
        attributes(d, &db, out);
        if let Some(cap) = d.get("capacity").and_then(Value::as_object) {
            let mut keys: Vec<&String> = cap.keys().collect();
            keys.sort();
            for k in keys {
                qualified_key(&format!("{db}.capacity"), k, out);
            }
        }
        let taints = items(d, "taints");
        if taints.len() > MAX_TAINTS {
            out.push(too_many(&format!("{db}.taints"), taints.len(), MAX_TAINTS));
        }
        for (j, t) in taints.iter().enumerate() {
            taint(t, &format!("{db}.taints[{j}]"), out);
        }
    }
    duplicates(devices, "name", "spec.devices", out);
}

/// `ValidateVolumeAttributesClass`.
pub(crate) fn volume_attributes_class(obj: &Value, out: &mut Vec<StatusCause>) {
    let driver = str_of(obj, "driverName");
    if driver.is_empty() {
        out.push(required("driverName"));
    } else {
        for e in qualified_name_errors(&driver.to_lowercase()) {
            out.push(invalid("driverName", &go_quote(driver), &e));
        }
    }
    match obj.get("parameters").and_then(Value::as_object) {
        Some(p) if !p.is_empty() => {
            if p.len() > 512 {
                out.push(too_long("parameters", 512));
            }
            if p.contains_key("") {
                out.push(invalid("parameters", "\"\"", "field can not be empty."));
            }
            let size: usize = p
                .iter()
                .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
                .sum();
            if size > 256 * 1024 {
                out.push(too_long("parameters", 256 * 1024));
            }
        }
        _ => out.push(required_why(
            "parameters",
            "must contain at least one key/value pair",
        )),
    }
}

/// Consumers a claim may be reserved for (`ResourceClaimReservedForMaxSize`).
const MAX_RESERVED_FOR: usize = 256;

/// `ValidateResourceClaimStatusUpdate`'s common checks: a claim is reserved only once
/// allocated, for at most 256 consumers, each once (by uid); a new allocation's results
/// name the claim's requests, drivers, pools and devices properly; an allocation does not
/// change once made; a device's status is for an allocated device.
pub(crate) fn claim_status(old: &Value, new: &Value, out: &mut Vec<StatusCause>) {
    let status = new.get("status").unwrap_or(&Value::Null);
    let allocation = status.get("allocation").filter(|a| !a.is_null());
    let old_allocation = old.pointer("/status/allocation").filter(|a| !a.is_null());
    if let Some(a) = allocation {
        match old_allocation {
            Some(o) if o != a => out.push(invalid(
                "status.allocation",
                &go_internal(Some(a), ALLOCATION),
                "field is immutable",
            )),
            Some(_) => {}
            None => allocation_results(new, a, out),
        }
    }
    let reserved = items(status, "reservedFor");
    if !reserved.is_empty() && allocation.is_none() {
        out.push(forbidden(
            "status.reservedFor",
            "may not be specified when `allocated` is not set",
        ));
        return;
    }
    if reserved.len() > MAX_RESERVED_FOR {
        out.push(too_many(
            "status.reservedFor",
            reserved.len(),
            MAX_RESERVED_FOR,
        ));
    }
    let mut seen = std::collections::HashSet::new();
    for (i, r) in reserved.iter().enumerate() {
        let uid = str_of(r, "uid");
        if !seen.insert(uid.to_string()) {
            out.push(duplicate(
                &format!("status.reservedFor[{i}].uid"),
                &go_quote(uid),
            ));
        }
    }
    let results = allocation.map_or(&[][..], |a| {
        items(a.get("devices").unwrap_or(&Value::Null), "results")
    });
    for (i, d) in items(status, "devices").iter().enumerate() {
        if !results.iter().any(|r| device_key(r) == device_key(d)) {
            out.push(invalid(
                &format!("status.devices[{i}]"),
                &go_internal(Some(d), DEVICE_KEY),
                "must be an allocated device in the claim",
            ));
        }
    }
}

/// A device's driver, pool, device and share, as [`DEVICE_KEY`] names them.
fn device_key(v: &Value) -> [&str; 4] {
    DEVICE_KEY.map(|(json, _, _)| str_of(v, json))
}

/// A new allocation's results: each names a request of the claim, a driver, a pool and a
/// device.
fn allocation_results(claim: &Value, allocation: &Value, out: &mut Vec<StatusCause>) {
    let names = request_names(claim.pointer("/spec/devices").unwrap_or(&Value::Null));
    let results = items(allocation.get("devices").unwrap_or(&Value::Null), "results");
    if results.len() > MAX_32 {
        out.push(too_many(
            "status.allocation.devices.results",
            results.len(),
            MAX_32,
        ));
    }
    for (i, r) in results.iter().enumerate() {
        let rb = format!("status.allocation.devices.results[{i}]");
        let request = str_of(r, "request");
        if !names.iter().any(|n| n == request) {
            out.push(invalid(
                &format!("{rb}.request"),
                &go_quote(request),
                REQUEST_REF,
            ));
        }
        driver_name(&format!("{rb}.driver"), str_of(r, "driver"), out);
        pool_name(&format!("{rb}.pool"), str_of(r, "pool"), out);
        dns_label(&format!("{rb}.device"), str_of(r, "device"), out);
    }
}

/// The update checks: what may not change (`Validate<Kind>Update`).
pub(crate) fn validate_update(plural: &str, old: &Value, new: &Value, out: &mut Vec<StatusCause>) {
    match plural {
        "resourceclaims" if old.get("spec") != new.get("spec") => out.push(invalid(
            "spec",
            &go_internal(new.get("spec"), CLAIM_SPEC),
            "field is immutable",
        )),
        "resourceclaimtemplates" if old.get("spec") != new.get("spec") => out.push(invalid(
            "spec",
            &go_internal(new.get("spec"), TEMPLATE_SPEC),
            "field is immutable",
        )),
        "resourceslices" => {
            for (ptr, field) in [
                ("/spec/pool/name", "spec.pool.name"),
                ("/spec/driver", "spec.driver"),
                ("/spec/nodeName", "spec.nodeName"),
            ] {
                if old.pointer(ptr) != new.pointer(ptr) {
                    out.push(invalid(
                        field,
                        &crate::registry::immutable::go_value(new.pointer(ptr)),
                        "field is immutable",
                    ));
                }
            }
        }
        "volumeattributesclasses" => {
            for f in ["driverName", "parameters"] {
                if old.get(f) != new.get(f) {
                    out.push(forbidden(f, &format!("updates to {f} are forbidden.")));
                }
            }
        }
        _ => {}
    }
}

/// How a field of an internal Go type prints (internal types have no JSON tags: every
/// field, under its Go name).
#[derive(Clone, Copy)]
enum Go {
    /// A string or number Go always writes (`""`, `0` when unset).
    Str,
    Int,
    /// A pointer, slice, map or raw value: `null` when unset, else its JSON.
    Json,
    Struct(&'static GoStruct),
    /// A pointer to a struct: `null` when unset.
    Ptr(&'static GoStruct),
    StructList(&'static GoStruct),
    /// An embedded struct: its fields inline.
    Inline(&'static GoStruct),
    /// An embedded `metav1.ObjectMeta`: its JSON members (it has tags), inline.
    Meta,
}

type GoStruct = [(&'static str, &'static str, Go)];

static DEVICE_ATTRIBUTE: &GoStruct = &[
    ("int", "IntValue", Go::Json),
    ("bool", "BoolValue", Go::Json),
    ("string", "StringValue", Go::Json),
    ("version", "VersionValue", Go::Json),
    ("ints", "IntValues", Go::Json),
    ("bools", "BoolValues", Go::Json),
    ("strings", "StringValues", Go::Json),
    ("versions", "VersionValues", Go::Json),
];
/// What identifies an allocated device (a device status's key).
static DEVICE_KEY: &[(&str, &str, Go); 4] = &[
    ("driver", "Driver", Go::Str),
    ("pool", "Pool", Go::Str),
    ("device", "Device", Go::Str),
    ("shareID", "ShareID", Go::Str),
];
static CEL: &GoStruct = &[("expression", "Expression", Go::Str)];
static SELECTOR: &GoStruct = &[("cel", "CEL", Go::Ptr(CEL))];
static TOLERATION: &GoStruct = &[
    ("key", "Key", Go::Str),
    ("operator", "Operator", Go::Str),
    ("value", "Value", Go::Str),
    ("effect", "Effect", Go::Str),
    ("tolerationSeconds", "TolerationSeconds", Go::Json),
];
static EXACT: &GoStruct = &[
    ("deviceClassName", "DeviceClassName", Go::Str),
    ("selectors", "Selectors", Go::StructList(SELECTOR)),
    ("allocationMode", "AllocationMode", Go::Str),
    ("count", "Count", Go::Int),
    ("adminAccess", "AdminAccess", Go::Json),
    ("tolerations", "Tolerations", Go::StructList(TOLERATION)),
    ("capacity", "Capacity", Go::Json),
];
static SUBREQUEST: &GoStruct = &[
    ("name", "Name", Go::Str),
    ("deviceClassName", "DeviceClassName", Go::Str),
    ("selectors", "Selectors", Go::StructList(SELECTOR)),
    ("allocationMode", "AllocationMode", Go::Str),
    ("count", "Count", Go::Int),
    ("tolerations", "Tolerations", Go::StructList(TOLERATION)),
    ("capacity", "Capacity", Go::Json),
];
static REQUEST: &GoStruct = &[
    ("name", "Name", Go::Str),
    ("exactly", "Exactly", Go::Ptr(EXACT)),
    (
        "firstAvailable",
        "FirstAvailable",
        Go::StructList(SUBREQUEST),
    ),
];
static CONSTRAINT: &GoStruct = &[
    ("requests", "Requests", Go::Json),
    ("matchAttribute", "MatchAttribute", Go::Json),
    ("distinctAttribute", "DistinctAttribute", Go::Json),
];
static OPAQUE: &GoStruct = &[
    ("driver", "Driver", Go::Str),
    ("parameters", "Parameters", Go::Json),
];
static CONFIGURATION: &GoStruct = &[("opaque", "Opaque", Go::Ptr(OPAQUE))];
static CLAIM_CONFIG: &GoStruct = &[
    ("requests", "Requests", Go::Json),
    ("", "DeviceConfiguration", Go::Inline(CONFIGURATION)),
];
static DEVICE_CLAIM: &GoStruct = &[
    ("requests", "Requests", Go::StructList(REQUEST)),
    ("constraints", "Constraints", Go::StructList(CONSTRAINT)),
    ("config", "Config", Go::StructList(CLAIM_CONFIG)),
];
static REQUIREMENT: &GoStruct = &[
    ("key", "Key", Go::Str),
    ("operator", "Operator", Go::Str),
    ("values", "Values", Go::Json),
];
static TERM: &GoStruct = &[
    (
        "matchExpressions",
        "MatchExpressions",
        Go::StructList(REQUIREMENT),
    ),
    ("matchFields", "MatchFields", Go::StructList(REQUIREMENT)),
];
static NODE_SELECTOR: &GoStruct = &[(
    "nodeSelectorTerms",
    "NodeSelectorTerms",
    Go::StructList(TERM),
)];
static RESULT: &GoStruct = &[
    ("request", "Request", Go::Str),
    ("driver", "Driver", Go::Str),
    ("pool", "Pool", Go::Str),
    ("device", "Device", Go::Str),
    ("adminAccess", "AdminAccess", Go::Json),
    ("tolerations", "Tolerations", Go::StructList(TOLERATION)),
    ("bindingConditions", "BindingConditions", Go::Json),
    (
        "bindingFailureConditions",
        "BindingFailureConditions",
        Go::Json,
    ),
    ("shareID", "ShareID", Go::Json),
    ("consumedCapacity", "ConsumedCapacity", Go::Json),
];
static ALLOCATION_CONFIG: &GoStruct = &[
    ("source", "Source", Go::Str),
    ("requests", "Requests", Go::Json),
    ("", "DeviceConfiguration", Go::Inline(CONFIGURATION)),
];
static DEVICE_ALLOCATION: &GoStruct = &[
    ("results", "Results", Go::StructList(RESULT)),
    ("config", "Config", Go::StructList(ALLOCATION_CONFIG)),
];
static ALLOCATION: &GoStruct = &[
    ("devices", "Devices", Go::Struct(DEVICE_ALLOCATION)),
    ("nodeSelector", "NodeSelector", Go::Ptr(NODE_SELECTOR)),
    ("allocationTimestamp", "AllocationTimestamp", Go::Json),
];
static CLAIM_SPEC: &GoStruct = &[("devices", "Devices", Go::Struct(DEVICE_CLAIM))];
static TEMPLATE_SPEC: &GoStruct = &[
    ("metadata", "ObjectMeta", Go::Meta),
    ("spec", "Spec", Go::Struct(CLAIM_SPEC)),
];

/// A value of an internal Go struct type as a field error prints it (Go's JSON of the
/// struct: Go field names in declaration order).
fn go_internal(v: Option<&Value>, ty: &'static GoStruct) -> String {
    fn members(v: &Value, ty: &'static GoStruct, out: &mut Vec<String>) {
        for (json, go, kind) in ty {
            let f = v.get(*json).filter(|x| !x.is_null());
            let text = match kind {
                Go::Str => go_json_text(f.unwrap_or(&Value::String(String::new()))),
                Go::Int => go_json_text(f.unwrap_or(&Value::from(0))),
                Go::Json => f.map_or_else(|| "null".into(), go_json_text),
                Go::Struct(s) => object(f.unwrap_or(&Value::Null), s),
                Go::Ptr(s) => f.map_or_else(|| "null".into(), |x| object(x, s)),
                Go::StructList(s) => match f.and_then(Value::as_array) {
                    None => "null".into(),
                    Some(list) => format!(
                        "[{}]",
                        list.iter()
                            .map(|x| object(x, s))
                            .collect::<Vec<_>>()
                            .join(",")
                    ),
                },
                Go::Inline(s) => {
                    members(v, s, out);
                    continue;
                }
                Go::Meta => {
                    if let Some(Value::Object(m)) = f {
                        for (k, x) in m {
                            out.push(format!("{}:{}", go_quote(k), go_json_text(x)));
                        }
                    }
                    continue;
                }
            };
            out.push(format!("\"{go}\":{text}"));
        }
    }
    fn object(v: &Value, ty: &'static GoStruct) -> String {
        let mut out = Vec::new();
        members(v, ty, &mut out);
        format!("{{{}}}", out.join(","))
    }
    object(v.unwrap_or(&Value::Null), ty)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn internal_claim_spec_prints_go_field_names() {
        let spec = json!({"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "other", "allocationMode": "ExactCount", "count": 1}}]}});
        assert_eq!(
            go_internal(Some(&spec), CLAIM_SPEC),
            r#"{"Devices":{"Requests":[{"Name":"gpu","Exactly":{"DeviceClassName":"other","Selectors":null,"AllocationMode":"ExactCount","Count":1,"AdminAccess":null,"Tolerations":null,"Capacity":null},"FirstAvailable":null}],"Constraints":null,"Config":null}}"#
        );
    }

    #[test]
    fn slice_node_selection_is_exactly_one() {
        let mut out = Vec::new();
        resource_slice(
            &json!({"spec": {"driver": "d.example.com", "nodeName": "n", "allNodes": true,
                "pool": {"name": "p", "resourceSliceCount": 1}}}),
            &mut out,
        );
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].field, "spec");
        assert!(out[0].message.contains("{`nodeName`, `allNodes`}"));
    }
}
