//! `meta.k8s.io/v1 Table` rendering for `kubectl get`.

use crate::error::ApiError;
use crate::http::Req;
use crate::registry::ResourceDef;
use serde_json::{Value, json};
use std::sync::Arc;

struct Col {
    name: &'static str,
    ty: &'static str,
    format: &'static str,
    priority: i64,
    description: &'static str,
}

const fn col(
    name: &'static str,
    ty: &'static str,
    priority: i64,
    description: &'static str,
) -> Col {
    Col {
        name,
        ty,
        format: "",
        priority,
        description,
    }
}

fn columns(def: &ResourceDef) -> Vec<Col> {
    let name = Col {
        name: "Name",
        ty: "string",
        format: "name",
        priority: 0,
        description: "Name must be unique within a namespace.",
    };
    let age = col(
        "Age",
        "string",
        0,
        "CreationTimestamp is a timestamp representing the server time when this object was created.",
    );
    match (def.group.as_str(), def.plural.as_str()) {
        ("", "pods") => vec![
            name,
            col(
                "Ready",
                "string",
                0,
                "The aggregate readiness state of this pod for accepting traffic.",
            ),
            col(
                "Status",
                "string",
                0,
                "The aggregate status of the containers in this pod.",
            ),
            col(
                "Restarts",
                "string",
                0,
                "The number of times the containers in this pod have been restarted.",
            ),
            age,
            col("IP", "string", 1, "IP address allocated to the pod."),
            col(
                "Node",
                "string",
                1,
                "Name of the node the pod is assigned to.",
            ),
        ],
        ("apps", "deployments") => vec![
            name,
            col("Ready", "string", 0, "Number of the pod with ready state"),
            col(
                "Up-to-date",
                "integer",
                0,
                "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
            ),
            col(
                "Available",
                "integer",
                0,
                "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
            ),
            age,
            col(
                "Containers",
                "string",
                1,
                "Names of each container in the template.",
            ),
            col(
                "Images",
                "string",
                1,
                "Images referenced by each container in the template.",
            ),
            col("Selector", "string", 1, "Label selector for pods."),
        ],
        ("", "services") => vec![
            name,
            col("Type", "string", 0, "The type of the service."),
            col("Cluster-IP", "string", 0, "The cluster IP of the service."),
            col(
                "External-IP",
                "string",
                0,
                "The external IP of the service.",
            ),
            col("Port(s)", "string", 0, "The ports of the service."),
            age,
            col("Selector", "string", 1, "The selector of the service."),
        ],
        ("", "nodes") => vec![
            name,
            col("Status", "string", 0, "The status of the node"),
            col("Roles", "string", 0, "The roles of the node"),
            age,
            col(
                "Version",
                "string",
                0,
                "Kubelet Version reported by the node.",
            ),
            col("Internal-IP", "string", 1, "The internal IP of the node."),
        ],
        ("", "configmaps") => vec![
            name,
            col("Data", "string", 0, "Number of entries in data."),
            age,
        ],
        ("", "secrets") => vec![
            name,
            col("Type", "string", 0, "The type of the secret."),
            col("Data", "string", 0, "Number of entries in data."),
            age,
        ],
        ("", "namespaces") => vec![
            name,
            col("Status", "string", 0, "The status of the namespace."),
            age,
        ],
        _ => vec![name, age],
    }
}

/// Human age like kubectl's (`5s`, `3m`, `2h`, `4d`).
pub fn age(ts: Option<&str>) -> String {
    let Some(ts) = ts.and_then(|t| t.parse::<jiff::Timestamp>().ok()) else {
        return "<unknown>".into();
    };
    let secs = jiff::Timestamp::now().duration_since(ts).as_secs().max(0);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 3600 * 2 => format!("{}m", s / 60),
        s if s < 86400 * 2 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

fn s(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(v) => v.to_string(),
    }
}

fn cells(def: &ResourceDef, o: &Value) -> Vec<Value> {
    let name = json!(
        o.pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
    );
    let age = json!(age(o
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)));
    let len = |p: &str| {
        o.pointer(p)
            .and_then(Value::as_object)
            .map_or(0, |m| m.len())
    };
    match (def.group.as_str(), def.plural.as_str()) {
        ("", "pods") => {
            let total = o
                .pointer("/spec/containers")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            let statuses = o
                .pointer("/status/containerStatuses")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let ready = statuses
                .iter()
                .filter(|c| c.get("ready") == Some(&json!(true)))
                .count();
            let restarts: i64 = statuses
                .iter()
                .filter_map(|c| c.get("restartCount").and_then(Value::as_i64))
                .sum();
            let mut phase = s(o.pointer("/status/phase"));
            if o.pointer("/metadata/deletionTimestamp").is_some() {
                phase = "Terminating".into();
            }
            vec![
                name,
                json!(format!("{ready}/{total}")),
                json!(phase),
                json!(restarts.to_string()),
                age,
                json!(
                    o.pointer("/status/podIP")
                        .and_then(Value::as_str)
                        .unwrap_or("<none>")
                ),
                json!(
                    o.pointer("/spec/nodeName")
                        .and_then(Value::as_str)
                        .unwrap_or("<none>")
                ),
            ]
        }
        ("apps", "deployments") => {
            let want = o
                .pointer("/spec/replicas")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            let ready = o
                .pointer("/status/readyReplicas")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            let containers = o
                .pointer("/spec/template/spec/containers")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let names: Vec<String> = containers.iter().map(|c| s(c.get("name"))).collect();
            let images: Vec<String> = containers.iter().map(|c| s(c.get("image"))).collect();
            let selector = o
                .pointer("/spec/selector/matchLabels")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| format!("{k}={}", s(Some(v))))
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_default();
            vec![
                name,
                json!(format!("{ready}/{want}")),
                json!(
                    o.pointer("/status/updatedReplicas")
                        .and_then(Value::as_i64)
                        .unwrap_or(0)
                ),
                json!(
                    o.pointer("/status/availableReplicas")
                        .and_then(Value::as_i64)
                        .unwrap_or(0)
                ),
                age,
                json!(names.join(",")),
                json!(images.join(",")),
                json!(selector),
            ]
        }
        ("", "services") => {
            let ports = o
                .pointer("/spec/ports")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let ports: Vec<String> = ports
                .iter()
                .map(|p| {
                    format!(
                        "{}/{}",
                        s(p.get("port")),
                        p.get("protocol").and_then(Value::as_str).unwrap_or("TCP")
                    )
                })
                .collect();
            let selector = o
                .pointer("/spec/selector")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| format!("{k}={}", s(Some(v))))
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_else(|| "<none>".into());
            vec![
                name,
                json!(s(o.pointer("/spec/type"))),
                json!(
                    o.pointer("/spec/clusterIP")
                        .and_then(Value::as_str)
                        .unwrap_or("<none>")
                ),
                json!("<none>"),
                json!(if ports.is_empty() {
                    "<none>".to_string()
                } else {
                    ports.join(",")
                }),
                age,
                json!(selector),
            ]
        }
        ("", "nodes") => {
            let ready = o
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .and_then(|c| c.iter().find(|c| c.get("type") == Some(&json!("Ready"))))
                .map(|c| {
                    if c.get("status") == Some(&json!("True")) {
                        "Ready"
                    } else {
                        "NotReady"
                    }
                })
                .unwrap_or("Unknown");
            vec![
                name,
                json!(ready),
                json!("<none>"),
                age,
                json!(s(o.pointer("/status/nodeInfo/kubeletVersion"))),
                json!("<none>"),
            ]
        }
        ("", "configmaps") => vec![
            name,
            json!((len("/data") + len("/binaryData")).to_string()),
            age,
        ],
        ("", "secrets") => vec![
            name,
            json!(s(o.pointer("/type"))),
            json!(len("/data").to_string()),
            age,
        ],
        ("", "namespaces") => vec![name, json!(s(o.pointer("/status/phase"))), age],
        _ => vec![name, age],
    }
}

/// Builds a Table of `objs`. `with_columns: Some(false)` omits the column definitions
/// (watch events after the first).
pub fn table(
    def: &ResourceDef,
    objs: &[Arc<Value>],
    req: &Req,
    list_meta: Option<Value>,
    with_columns: Option<bool>,
) -> Result<Value, ApiError> {
    let include = req.q("includeObject").unwrap_or("Metadata");
    if !matches!(include, "None" | "Metadata" | "Object" | "") {
        return Err(ApiError::bad_request(format!(
            "Unable to convert to Table as requested: includeObject: Unsupported value: \"{include}\": supported values: \"None\", \"Metadata\", \"Object\""
        )));
    }
    let (cols_json, rows): (Vec<Value>, Vec<Value>) = if let Some(crd) = &def.crd {
        let cols = crd.printer_columns(&def.version);
        let mut defs = vec![
            json!({"name": "Name", "type": "string", "format": "name", "description": "Name must be unique within a namespace.", "priority": 0}),
        ];
        defs.extend(cols.iter().map(|c| json!({"name": c.name, "type": c.ty, "format": c.format, "description": c.description, "priority": c.priority})));
        let has_age = cols
            .iter()
            .any(|c| c.json_path == ".metadata.creationTimestamp");
        if !has_age {
            defs.push(json!({"name": "Age", "type": "date", "format": "", "description": "CreationTimestamp is a timestamp representing the server time when this object was created.", "priority": 0}));
        }
        let rows = objs
            .iter()
            .map(|o| {
                let mut cells = vec![json!(
                    o.pointer("/metadata/name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                )];
                for c in &cols {
                    let ptr = format!("/{}", c.json_path.trim_start_matches('.').replace('.', "/"));
                    let v = o.pointer(&ptr).cloned().unwrap_or(Value::Null);
                    cells.push(if c.ty == "date" && v.is_string() {
                        json!(age(v.as_str()))
                    } else {
                        v
                    });
                }
                if !has_age {
                    cells.push(json!(age(o
                        .pointer("/metadata/creationTimestamp")
                        .and_then(Value::as_str))));
                }
                row(cells, o, include)
            })
            .collect();
        (defs, rows)
    } else {
        let cols = columns(def);
        let defs = cols
            .iter()
            .map(|c| json!({"name": c.name, "type": c.ty, "format": c.format, "description": c.description, "priority": c.priority}))
            .collect();
        (
            defs,
            objs.iter()
                .map(|o| row(cells(def, o), o, include))
                .collect(),
        )
    };
    let mut t = json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta.unwrap_or_else(|| json!({})),
        "rows": rows,
    });
    if with_columns != Some(false) {
        t["columnDefinitions"] = Value::Array(cols_json);
    }
    Ok(t)
}

fn row(cells: Vec<Value>, o: &Value, include: &str) -> Value {
    let object = match include {
        "None" => Value::Null,
        "Object" => o.clone(),
        _ => crate::api::partial_meta(o),
    };
    let mut r = json!({"cells": cells});
    if !object.is_null() {
        r["object"] = object;
    }
    r
}
