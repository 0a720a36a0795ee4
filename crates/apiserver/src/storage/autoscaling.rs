//! autoscaling/v1 HorizontalPodAutoscalers, kept in autoscaling/v2's form as
//! kube-apiserver keeps them (`pkg/apis/autoscaling/v1/conversion.go`).
//!
//! v1 has one metric field, `targetCPUUtilizationPercentage` (and its status
//! counterpart). Everything else travels in annotations, JSON in v1's own shapes: other
//! metrics (`autoscaling.alpha.kubernetes.io/metrics`), every current metric
//! (`…/current-metrics`), conditions (`…/conditions`) and the scaling behavior
//! (`…/behavior`, written with Go's field names, as the internal type has no JSON tags).
//! A v1 write turns them back into v2 fields and drops them: other metrics come first,
//! the CPU target last, as upstream orders them.

use serde_json::{Map, Value, json};

const METRICS: &str = "autoscaling.alpha.kubernetes.io/metrics";
const CURRENT_METRICS: &str = "autoscaling.alpha.kubernetes.io/current-metrics";
const CONDITIONS: &str = "autoscaling.alpha.kubernetes.io/conditions";
const BEHAVIOR: &str = "autoscaling.alpha.kubernetes.io/behavior";
const ROUND_TRIP: [&str; 4] = [METRICS, CURRENT_METRICS, CONDITIONS, BEHAVIOR];

fn get<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    v.pointer(path).filter(|x| !x.is_null())
}

fn string(v: &Value, path: &str) -> String {
    get(v, path)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// A quantity that Go writes even when zero.
fn quantity(v: &Value, path: &str) -> Value {
    get(v, path).cloned().unwrap_or_else(|| json!("0"))
}

fn is_cpu_utilization(m: &Value) -> bool {
    string(m, "/type") == "Resource"
        && string(m, "/resource/name") == "cpu"
        && get(m, "/resource/target/averageUtilization").is_some()
}

/// Writes a value as JSON text; an object built by [`obj`] (its `[key, value]` pairs
/// under `ORDERED`) keeps its keys in that order, as serde_json's sorted map cannot.
fn go_json(v: &Value, out: &mut String) {
    match v {
        Value::Object(o) if o.len() == 1 && o.contains_key(ORDERED) => {
            out.push('{');
            let pairs = o[ORDERED].as_array().map(Vec::as_slice).unwrap_or_default();
            for (i, pair) in pairs.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(string(pair, "/0")).to_string());
                out.push(':');
                go_json(pair.get(1).unwrap_or(&Value::Null), out);
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                go_json(x, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

const ORDERED: &str = "\u{0}ordered";

/// An object with keys in the given order (Go's struct order), `None`s (the `omitempty`
/// fields) left out.
fn obj(fields: &[(&str, Option<Value>)]) -> Value {
    let pairs: Vec<Value> = fields
        .iter()
        .filter_map(|(k, v)| v.clone().map(|v| json!([k, v])))
        .collect();
    json!({ ORDERED: pairs })
}

fn text(v: &Value) -> String {
    let mut s = String::new();
    go_json(v, &mut s);
    s
}

fn reference(r: Option<&Value>) -> Value {
    let r = r.unwrap_or(&Value::Null);
    obj(&[
        ("kind", Some(json!(string(r, "/kind")))),
        ("name", Some(json!(string(r, "/name")))),
        ("apiVersion", get(r, "/apiVersion").cloned()),
    ])
}

/// A v2 metric source as v1's `MetricSpec`.
fn metric_to_v1(m: &Value) -> Value {
    let ty = string(m, "/type");
    let source = match ty.as_str() {
        "Object" => obj(&[
            ("target", Some(reference(get(m, "/object/describedObject")))),
            ("metricName", Some(json!(string(m, "/object/metric/name")))),
            ("targetValue", Some(quantity(m, "/object/target/value"))),
            ("selector", get(m, "/object/metric/selector").cloned()),
            (
                "averageValue",
                get(m, "/object/target/averageValue").cloned(),
            ),
        ]),
        "Pods" => obj(&[
            ("metricName", Some(json!(string(m, "/pods/metric/name")))),
            (
                "targetAverageValue",
                Some(quantity(m, "/pods/target/averageValue")),
            ),
            ("selector", get(m, "/pods/metric/selector").cloned()),
        ]),
        "Resource" => obj(&[
            ("name", Some(json!(string(m, "/resource/name")))),
            (
                "targetAverageUtilization",
                get(m, "/resource/target/averageUtilization").cloned(),
            ),
            (
                "targetAverageValue",
                get(m, "/resource/target/averageValue").cloned(),
            ),
        ]),
        "ContainerResource" => obj(&[
            ("name", Some(json!(string(m, "/containerResource/name")))),
            (
                "targetAverageUtilization",
                get(m, "/containerResource/target/averageUtilization").cloned(),
            ),
            (
                "targetAverageValue",
                get(m, "/containerResource/target/averageValue").cloned(),
            ),
            (
                "container",
                Some(json!(string(m, "/containerResource/container"))),
            ),
        ]),
        "External" => obj(&[
            (
                "metricName",
                Some(json!(string(m, "/external/metric/name"))),
            ),
            (
                "metricSelector",
                get(m, "/external/metric/selector").cloned(),
            ),
            ("targetValue", get(m, "/external/target/value").cloned()),
            (
                "targetAverageValue",
                get(m, "/external/target/averageValue").cloned(),
            ),
        ]),
        _ => Value::Null,
    };
    v1_metric(&ty, source)
}

/// A v1 `MetricSpec` or `MetricStatus`: the type, then the source in the member the type
/// names (Go's field order: object, pods, resource, containerResource, external).
fn v1_metric(ty: &str, source: Value) -> Value {
    let member = v1_member(ty);
    let mut source = Some(source);
    let mut at = |name: &str| if member == name { source.take() } else { None };
    obj(&[
        ("type", Some(json!(ty))),
        ("object", at("object")),
        ("pods", at("pods")),
        ("resource", at("resource")),
        ("containerResource", at("containerResource")),
        ("external", at("external")),
    ])
}

/// The member of a metric that holds its source, for a type.
fn v1_member(ty: &str) -> &'static str {
    match ty {
        "Object" => "object",
        "Pods" => "pods",
        "Resource" => "resource",
        "ContainerResource" => "containerResource",
        "External" => "external",
        _ => "",
    }
}

/// A v2 metric status as v1's `MetricStatus`.
fn status_to_v1(m: &Value) -> Value {
    let ty = string(m, "/type");
    let source = match ty.as_str() {
        "Object" => obj(&[
            ("target", Some(reference(get(m, "/object/describedObject")))),
            ("metricName", Some(json!(string(m, "/object/metric/name")))),
            ("currentValue", Some(quantity(m, "/object/current/value"))),
            ("selector", get(m, "/object/metric/selector").cloned()),
            (
                "averageValue",
                get(m, "/object/current/averageValue").cloned(),
            ),
        ]),
        "Pods" => obj(&[
            ("metricName", Some(json!(string(m, "/pods/metric/name")))),
            (
                "currentAverageValue",
                Some(quantity(m, "/pods/current/averageValue")),
            ),
            ("selector", get(m, "/pods/metric/selector").cloned()),
        ]),
        "Resource" => obj(&[
            ("name", Some(json!(string(m, "/resource/name")))),
            (
                "currentAverageUtilization",
                get(m, "/resource/current/averageUtilization").cloned(),
            ),
            (
                "currentAverageValue",
                Some(quantity(m, "/resource/current/averageValue")),
            ),
        ]),
        "ContainerResource" => obj(&[
            ("name", Some(json!(string(m, "/containerResource/name")))),
            (
                "currentAverageUtilization",
                get(m, "/containerResource/current/averageUtilization").cloned(),
            ),
            (
                "currentAverageValue",
                Some(quantity(m, "/containerResource/current/averageValue")),
            ),
            (
                "container",
                Some(json!(string(m, "/containerResource/container"))),
            ),
        ]),
        "External" => obj(&[
            (
                "metricName",
                Some(json!(string(m, "/external/metric/name"))),
            ),
            (
                "metricSelector",
                get(m, "/external/metric/selector").cloned(),
            ),
            ("currentValue", Some(quantity(m, "/external/current/value"))),
            (
                "currentAverageValue",
                get(m, "/external/current/averageValue").cloned(),
            ),
        ]),
        _ => Value::Null,
    };
    v1_metric(&ty, source)
}

/// The internal `HorizontalPodAutoscalerBehavior` as Go's `json.Marshal` writes a type
/// without tags: its field names, every field present (nil is `null`).
fn behavior_to_go(b: &Value) -> Value {
    let rules = |path: &str| -> Option<Value> {
        let r = get(b, path)?;
        let policies = get(r, "/policies").and_then(Value::as_array).map(|ps| {
            Value::Array(
                ps.iter()
                    .map(|p| {
                        obj(&[
                            ("Type", Some(json!(string(p, "/type")))),
                            ("Value", Some(get(p, "/value").cloned().unwrap_or(json!(0)))),
                            (
                                "PeriodSeconds",
                                Some(get(p, "/periodSeconds").cloned().unwrap_or(json!(0))),
                            ),
                        ])
                    })
                    .collect(),
            )
        });
        Some(obj(&[
            (
                "StabilizationWindowSeconds",
                Some(
                    get(r, "/stabilizationWindowSeconds")
                        .cloned()
                        .unwrap_or(Value::Null),
                ),
            ),
            (
                "SelectPolicy",
                Some(get(r, "/selectPolicy").cloned().unwrap_or(Value::Null)),
            ),
            ("Policies", Some(policies.unwrap_or(Value::Null))),
            (
                "Tolerance",
                Some(get(r, "/tolerance").cloned().unwrap_or(Value::Null)),
            ),
        ]))
    };
    obj(&[
        ("ScaleUp", Some(rules("/scaleUp").unwrap_or(Value::Null))),
        (
            "ScaleDown",
            Some(rules("/scaleDown").unwrap_or(Value::Null)),
        ),
    ])
}

/// A stored (v2) HorizontalPodAutoscaler as autoscaling/v1 shows it.
pub fn to_v1(v2: &Value) -> Value {
    let mut out = v2.clone();
    let Some(o) = out.as_object_mut() else {
        return out;
    };
    o.insert("apiVersion".into(), json!("autoscaling/v1"));
    let spec = v2.get("spec").cloned().unwrap_or(json!({}));
    let metrics = get(&spec, "/metrics")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut v1_spec = Map::new();
    for k in ["scaleTargetRef", "minReplicas", "maxReplicas"] {
        if let Some(v) = spec.get(k) {
            v1_spec.insert(k.into(), v.clone());
        }
    }
    if let Some(cpu) = metrics.iter().find(|m| is_cpu_utilization(m)) {
        v1_spec.insert(
            "targetCPUUtilizationPercentage".into(),
            cpu["resource"]["target"]["averageUtilization"].clone(),
        );
    }
    let other: Vec<Value> = metrics
        .iter()
        .filter(|m| !is_cpu_utilization(m))
        .map(metric_to_v1)
        .collect();
    let status = v2.get("status").cloned().unwrap_or(Value::Null);
    let mut v1_status = Map::new();
    for k in ["observedGeneration", "lastScaleTime"] {
        if let Some(v) = get(&status, &format!("/{k}")) {
            v1_status.insert(k.into(), v.clone());
        }
    }
    for k in ["currentReplicas", "desiredReplicas"] {
        v1_status.insert(
            k.into(),
            get(&status, &format!("/{k}")).cloned().unwrap_or(json!(0)),
        );
    }
    let current = get(&status, "/currentMetrics")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if let Some(u) = current
        .iter()
        .filter(|m| string(m, "/type") == "Resource" && string(m, "/resource/name") == "cpu")
        .find_map(|m| get(m, "/resource/current/averageUtilization"))
    {
        v1_status.insert("currentCPUUtilizationPercentage".into(), u.clone());
    }
    let conditions = get(&status, "/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut notes: Vec<(&str, String)> = Vec::new();
    if !other.is_empty() {
        notes.push((METRICS, text(&Value::Array(other))));
    }
    if !current.is_empty() {
        let all = current.iter().map(status_to_v1).collect();
        notes.push((CURRENT_METRICS, text(&Value::Array(all))));
    }
    if let Some(b) = get(&spec, "/behavior") {
        notes.push((BEHAVIOR, text(&behavior_to_go(b))));
    }
    if !conditions.is_empty() {
        let all = conditions
            .iter()
            .map(|c| {
                obj(&[
                    ("type", Some(json!(string(c, "/type")))),
                    ("status", Some(json!(string(c, "/status")))),
                    (
                        "lastTransitionTime",
                        Some(
                            get(c, "/lastTransitionTime")
                                .cloned()
                                .unwrap_or(Value::Null),
                        ),
                    ),
                    ("reason", get(c, "/reason").cloned().filter(|r| r != "")),
                    ("message", get(c, "/message").cloned().filter(|m| m != "")),
                ])
            })
            .collect();
        notes.push((CONDITIONS, text(&Value::Array(all))));
    }
    o.insert("spec".into(), Value::Object(v1_spec));
    if v2.get("status").is_some() {
        o.insert("status".into(), Value::Object(v1_status));
    }
    if !notes.is_empty() {
        let meta = o.entry("metadata").or_insert_with(|| json!({}));
        if let Some(m) = meta.as_object_mut() {
            let ann = m.entry("annotations").or_insert_with(|| json!({}));
            if let Some(a) = ann.as_object_mut() {
                for (k, v) in notes {
                    a.insert(k.into(), Value::String(v));
                }
            }
        }
    }
    out
}

/// The value of `key` in a JSON object read as Go's decoder reads into a struct: the
/// exact name, else a case-insensitive match.
fn field<'a>(o: &'a Value, key: &str) -> Option<&'a Value> {
    let m = o.as_object()?;
    m.get(key)
        .or_else(|| {
            m.iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(key))
                .map(|(_, v)| v)
        })
        .filter(|v| !v.is_null())
}

fn put(m: &mut Map<String, Value>, k: &str, v: Option<&Value>) {
    if let Some(v) = v {
        m.insert(k.into(), v.clone());
    }
}

/// v1's `MetricSpec` (from the annotation) as a v2 metric.
fn metric_from_v1(m: &Value) -> Value {
    let ty = field(m, "type").and_then(Value::as_str).unwrap_or("");
    let src = field(m, v1_member(ty)).cloned().unwrap_or(json!({}));
    let ident = |name: &str, selector: &str| {
        let mut id = Map::new();
        put(&mut id, "name", field(&src, name));
        put(&mut id, "selector", field(&src, selector));
        Value::Object(id)
    };
    let resource_target = || {
        let mut t = Map::new();
        let util = field(&src, "targetAverageUtilization");
        t.insert(
            "type".into(),
            json!(if util.is_some() {
                "Utilization"
            } else {
                "AverageValue"
            }),
        );
        put(&mut t, "averageUtilization", util);
        put(&mut t, "averageValue", field(&src, "targetAverageValue"));
        Value::Object(t)
    };
    let source = match ty {
        "Object" => {
            let avg = field(&src, "averageValue");
            let mut t = Map::new();
            t.insert(
                "type".into(),
                json!(if avg.is_none() {
                    "Value"
                } else {
                    "AverageValue"
                }),
            );
            t.insert(
                "value".into(),
                field(&src, "targetValue").cloned().unwrap_or(json!("0")),
            );
            put(&mut t, "averageValue", avg);
            json!({"describedObject": field(&src, "target").cloned().unwrap_or(json!({})),
                "metric": ident("metricName", "selector"), "target": t})
        }
        "Pods" => json!({"metric": ident("metricName", "selector"),
            "target": {"type": "AverageValue",
                "averageValue": field(&src, "targetAverageValue").cloned().unwrap_or(json!("0"))}}),
        "Resource" => json!({"name": field(&src, "name").cloned().unwrap_or(json!("")),
            "target": resource_target()}),
        "ContainerResource" => json!({"name": field(&src, "name").cloned().unwrap_or(json!("")),
            "container": field(&src, "container").cloned().unwrap_or(json!("")),
            "target": resource_target()}),
        "External" => {
            let value = field(&src, "targetValue");
            let mut t = Map::new();
            t.insert(
                "type".into(),
                json!(if value.is_none() {
                    "AverageValue"
                } else {
                    "Value"
                }),
            );
            put(&mut t, "value", value);
            put(&mut t, "averageValue", field(&src, "targetAverageValue"));
            json!({"metric": ident("metricName", "metricSelector"), "target": t})
        }
        _ => return json!({"type": ty}),
    };
    let mut out = Map::new();
    out.insert("type".into(), json!(ty));
    out.insert(v1_member(ty).into(), source);
    Value::Object(out)
}

/// v1's `MetricStatus` (from the annotation) as a v2 metric status.
fn status_from_v1(m: &Value) -> Value {
    let ty = field(m, "type").and_then(Value::as_str).unwrap_or("");
    let src = field(m, v1_member(ty)).cloned().unwrap_or(json!({}));
    let ident = |name: &str, selector: &str| {
        let mut id = Map::new();
        put(&mut id, "name", field(&src, name));
        put(&mut id, "selector", field(&src, selector));
        Value::Object(id)
    };
    let resource_current = || {
        let mut c = Map::new();
        put(
            &mut c,
            "averageUtilization",
            field(&src, "currentAverageUtilization"),
        );
        c.insert(
            "averageValue".into(),
            field(&src, "currentAverageValue")
                .cloned()
                .unwrap_or(json!("0")),
        );
        Value::Object(c)
    };
    let source = match ty {
        "Object" => {
            let mut c = Map::new();
            c.insert(
                "value".into(),
                field(&src, "currentValue").cloned().unwrap_or(json!("0")),
            );
            put(&mut c, "averageValue", field(&src, "averageValue"));
            json!({"describedObject": field(&src, "target").cloned().unwrap_or(json!({})),
                "metric": ident("metricName", "selector"), "current": c})
        }
        "Pods" => json!({"metric": ident("metricName", "selector"),
            "current": {"averageValue": field(&src, "currentAverageValue").cloned().unwrap_or(json!("0"))}}),
        "Resource" => json!({"name": field(&src, "name").cloned().unwrap_or(json!("")),
            "current": resource_current()}),
        "ContainerResource" => json!({"name": field(&src, "name").cloned().unwrap_or(json!("")),
            "container": field(&src, "container").cloned().unwrap_or(json!("")),
            "current": resource_current()}),
        "External" => {
            let mut c = Map::new();
            c.insert(
                "value".into(),
                field(&src, "currentValue").cloned().unwrap_or(json!("0")),
            );
            put(&mut c, "averageValue", field(&src, "currentAverageValue"));
            json!({"metric": ident("metricName", "metricSelector"), "current": c})
        }
        _ => return json!({"type": ty}),
    };
    let mut out = Map::new();
    out.insert("type".into(), json!(ty));
    out.insert(v1_member(ty).into(), source);
    Value::Object(out)
}

/// The behavior annotation (Go's field names, matched case-insensitively) as v2's.
fn behavior_from_go(b: &Value) -> Value {
    let rules = |key: &str| -> Option<Value> {
        let r = field(b, key)?;
        let mut out = Map::new();
        put(
            &mut out,
            "stabilizationWindowSeconds",
            field(r, "stabilizationWindowSeconds"),
        );
        put(&mut out, "selectPolicy", field(r, "selectPolicy"));
        if let Some(ps) = field(r, "policies").and_then(Value::as_array) {
            let ps = ps
                .iter()
                .map(|p| {
                    json!({"type": field(p, "type").cloned().unwrap_or(json!("")),
                        "value": field(p, "value").cloned().unwrap_or(json!(0)),
                        "periodSeconds": field(p, "periodSeconds").cloned().unwrap_or(json!(0))})
                })
                .collect();
            out.insert("policies".into(), Value::Array(ps));
        }
        put(&mut out, "tolerance", field(r, "tolerance"));
        Some(Value::Object(out))
    };
    let mut out = Map::new();
    put(&mut out, "scaleUp", rules("scaleUp").as_ref());
    put(&mut out, "scaleDown", rules("scaleDown").as_ref());
    Value::Object(out)
}

/// An annotation's JSON; a value that does not parse is ignored, as upstream ignores it.
fn note(annotations: Option<&Value>, key: &str) -> Option<Value> {
    let raw = annotations?.get(key)?.as_str()?;
    serde_json::from_str(raw).ok()
}

/// An autoscaling/v1 HorizontalPodAutoscaler in the stored (v2) form, with v2's defaults
/// (at least one replica; a CPU target of 80% when no metric is set).
pub fn to_v2(v1: &Value) -> Value {
    let mut out = v1.clone();
    let Some(o) = out.as_object_mut() else {
        return out;
    };
    o.insert("apiVersion".into(), json!("autoscaling/v2"));
    let annotations = v1.pointer("/metadata/annotations").cloned();
    let ann = annotations.as_ref();
    let spec = v1.get("spec").cloned().unwrap_or(json!({}));
    let mut v2_spec = Map::new();
    for k in ["scaleTargetRef", "minReplicas", "maxReplicas"] {
        put(&mut v2_spec, k, get(&spec, &format!("/{k}")));
    }
    let mut metrics: Vec<Value> = note(ann, METRICS)
        .and_then(|m| m.as_array().cloned())
        .map(|ms| ms.iter().map(metric_from_v1).collect())
        .unwrap_or_default();
    if let Some(cpu) = get(&spec, "/targetCPUUtilizationPercentage") {
        metrics.push(json!({"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": cpu}}}));
    }
    if metrics.is_empty() {
        metrics.push(json!({"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": 80}}}));
    }
    v2_spec.insert("metrics".into(), Value::Array(metrics));
    v2_spec.entry("minReplicas").or_insert_with(|| json!(1));
    if let Some(b) = note(ann, BEHAVIOR).filter(Value::is_object) {
        v2_spec.insert("behavior".into(), behavior_from_go(&b));
    }
    o.insert("spec".into(), Value::Object(v2_spec));
    if let Some(status) = v1.get("status").filter(|s| s.is_object()) {
        let mut v2_status = Map::new();
        for k in [
            "observedGeneration",
            "lastScaleTime",
            "currentReplicas",
            "desiredReplicas",
        ] {
            put(&mut v2_status, k, get(status, &format!("/{k}")));
        }
        // v2 leaves these out when zero (`omitempty`), where v1 writes currentReplicas.
        for k in ["observedGeneration", "currentReplicas"] {
            if v2_status.get(k).and_then(Value::as_i64) == Some(0) {
                v2_status.remove(k);
            }
        }
        let current = match note(ann, CURRENT_METRICS).and_then(|m| m.as_array().cloned()) {
            Some(ms) => ms.iter().map(status_from_v1).collect(),
            None => get(status, "/currentCPUUtilizationPercentage")
                .map(|u| {
                    vec![json!({"type": "Resource", "resource": {"name": "cpu",
                        "current": {"averageUtilization": u, "averageValue": "0"}}})]
                })
                .unwrap_or_default(),
        };
        // v2 writes the field even when empty (no `omitempty`).
        v2_status.insert(
            "currentMetrics".into(),
            if current.is_empty() {
                Value::Null
            } else {
                Value::Array(current)
            },
        );
        if let Some(cs) = note(ann, CONDITIONS).and_then(|c| c.as_array().cloned()) {
            let cs = cs
                .iter()
                .map(|c| {
                    let mut m = Map::new();
                    for k in ["type", "status", "lastTransitionTime", "reason", "message"] {
                        put(&mut m, k, field(c, k));
                    }
                    Value::Object(m)
                })
                .collect();
            v2_status.insert("conditions".into(), Value::Array(cs));
        }
        o.insert("status".into(), Value::Object(v2_status));
    }
    if let Some(a) = o
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
        .and_then(Value::as_object_mut)
    {
        for k in ROUND_TRIP {
            a.remove(k);
        }
    }
    if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut)
        && m.get("annotations")
            .and_then(Value::as_object)
            .is_some_and(Map::is_empty)
    {
        m.remove("annotations");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v2() -> Value {
        json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "h", "namespace": "ns"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "minReplicas": 2, "maxReplicas": 5,
                "metrics": [
                    {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}},
                    {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "100Mi"}}}],
                "behavior": {"scaleDown": {"stabilizationWindowSeconds": 30, "selectPolicy": "Max",
                    "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}}},
            "status": {"desiredReplicas": 0}})
    }

    /// The annotations kube-apiserver v1.36 wrote for this object (recorded in the
    /// `hpa_v1` differential scenario).
    #[test]
    fn v1_shows_the_cpu_target_and_keeps_the_rest_in_go_shaped_annotations() {
        let v1 = to_v1(&v2());
        assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 60);
        assert!(v1["spec"].get("metrics").is_none());
        assert_eq!(
            v1["metadata"]["annotations"][METRICS],
            r#"[{"type":"Resource","resource":{"name":"memory","targetAverageValue":"100Mi"}}]"#
        );
        assert_eq!(
            v1["metadata"]["annotations"][BEHAVIOR],
            r#"{"ScaleUp":null,"ScaleDown":{"StabilizationWindowSeconds":30,"SelectPolicy":"Max","Policies":[{"Type":"Percent","Value":100,"PeriodSeconds":15}],"Tolerance":null}}"#
        );
        assert_eq!(
            v1["status"],
            json!({"currentReplicas": 0, "desiredReplicas": 0})
        );
    }

    #[test]
    fn a_v1_write_turns_the_annotations_back_into_fields_other_metrics_first() {
        let back = to_v2(&to_v1(&v2()));
        assert_eq!(back["spec"]["metrics"][0]["resource"]["name"], "memory");
        assert_eq!(
            back["spec"]["metrics"][1]["resource"]["target"],
            json!({"type": "Utilization", "averageUtilization": 60})
        );
        assert_eq!(
            back["spec"]["behavior"]["scaleDown"]["policies"][0]["value"],
            100
        );
        assert!(back["metadata"].get("annotations").is_none());
        // A bare v1 object gets v2's defaults.
        let bare = to_v2(&json!({"metadata": {"name": "b"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 3}}));
        assert_eq!(bare["spec"]["minReplicas"], 1);
        assert_eq!(
            bare["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
            80
        );
    }
}
