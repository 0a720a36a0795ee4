//! `meta.k8s.io/v1 Table` rendering for `kubectl get`.

use crate::error::ApiError;
use crate::registry::ResourceDef;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;

/// `ObjectMeta.name`'s description, which every table's Name column carries.
pub const NAME_DESC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
/// `ObjectMeta.creationTimestamp`'s description (Age and Created At columns).
pub const CREATED_DESC: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// The column definitions of kube-apiserver v1.36's printers, by `group/plural`, as a
/// v1.36 kube-apiserver reports them (recorded from one: name, type, format, priority,
/// description). Kinds without a printer have its default table (Name, Created At).
static COLUMNS: std::sync::LazyLock<HashMap<String, Vec<Value>>> =
    std::sync::LazyLock::new(|| {
        let raw: HashMap<String, Vec<(String, String, String, i64, String)>> =
            serde_json::from_str(include_str!("table_columns.json")).unwrap_or_default();
        raw.into_iter()
            .map(|(k, cols)| {
                let cols = cols
                    .into_iter()
                    .map(|(name, ty, format, priority, description)| {
                        json!({"name": name, "type": ty, "format": format,
                            "description": description, "priority": priority})
                    })
                    .collect();
                (k, cols)
            })
            .collect()
    });

/// The columns of a built-in kind's table.
fn columns(def: &ResourceDef) -> Vec<Value> {
    COLUMNS
        .get(&format!("{}/{}", def.group, def.plural))
        .cloned()
        .unwrap_or_else(|| {
            vec![
                json!({"name": "Name", "type": "string", "format": "name", "description": NAME_DESC, "priority": 0}),
                json!({"name": "Created At", "type": "date", "format": "", "description": CREATED_DESC, "priority": 0}),
            ]
        })
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

fn cells(def: &ResourceDef, cols: &[Value], o: &Value) -> Vec<Value> {
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
            let none = |p: &str| {
                json!(
                    o.pointer(p)
                        .and_then(Value::as_str)
                        .filter(|s| !s.is_empty())
                        .unwrap_or("<none>")
                )
            };
            let gates = o
                .pointer("/spec/readinessGates")
                .and_then(Value::as_array)
                .filter(|g| !g.is_empty())
                .map(|g| {
                    let ready = g
                        .iter()
                        .filter(|gate| {
                            let t = gate.get("conditionType");
                            o.pointer("/status/conditions")
                                .and_then(Value::as_array)
                                .is_some_and(|cs| {
                                    cs.iter().any(|c| {
                                        c.get("type") == t
                                            && c.get("status") == Some(&json!("True"))
                                    })
                                })
                        })
                        .count();
                    format!("{ready}/{}", g.len())
                })
                .unwrap_or_else(|| "<none>".into());
            vec![
                name,
                json!(format!("{ready}/{total}")),
                json!(phase),
                json!(restarts.to_string()),
                age,
                none("/status/podIP"),
                none("/spec/nodeName"),
                none("/status/nominatedNodeName"),
                json!(gates),
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
        ("", "endpoints") => vec![name, json!(endpoints_cell(o)), age],
        ("discovery.k8s.io", "endpointslices") => {
            let items = |p: &str| {
                o.pointer(p)
                    .and_then(Value::as_array)
                    .map_or(&[][..], Vec::as_slice)
            };
            let ports: Vec<String> = items("/ports")
                .iter()
                .map(|p| {
                    match (
                        p.get("port").and_then(Value::as_i64),
                        p.get("name").and_then(Value::as_str),
                    ) {
                        (Some(n), _) => n.to_string(),
                        (None, Some(name)) => name.to_string(),
                        (None, None) => "*".to_string(),
                    }
                })
                .collect();
            let addresses: Vec<String> = items("/endpoints")
                .iter()
                .flat_map(|e| {
                    e.get("addresses")
                        .and_then(Value::as_array)
                        .map_or(&[][..], Vec::as_slice)
                })
                .map(|a| s(Some(a)))
                .collect();
            vec![
                name,
                json!(s(o.pointer("/addressType"))),
                json!(first_three(&ports)),
                json!(first_three(&addresses)),
                age,
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
            let address = |ty: &str| {
                o.pointer("/status/addresses")
                    .and_then(Value::as_array)
                    .and_then(|a| a.iter().find(|x| x.get("type") == Some(&json!(ty))))
                    .and_then(|x| x.get("address"))
                    .and_then(Value::as_str)
                    .unwrap_or("<none>")
                    .to_string()
            };
            let info = |f: &str| {
                o.pointer(&format!("/status/nodeInfo/{f}"))
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .unwrap_or("<unknown>")
                    .to_string()
            };
            let mut roles: Vec<String> = o
                .pointer("/metadata/labels")
                .and_then(Value::as_object)
                .map(|l| {
                    l.keys()
                        .filter_map(|k| k.strip_prefix("node-role.kubernetes.io/"))
                        .filter(|r| !r.is_empty())
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            roles.sort();
            let mut status = ready.to_string();
            if o.pointer("/spec/unschedulable") == Some(&json!(true)) {
                status.push_str(",SchedulingDisabled");
            }
            vec![
                name,
                json!(status),
                json!(if roles.is_empty() {
                    "<none>".to_string()
                } else {
                    roles.join(",")
                }),
                age,
                json!(s(o.pointer("/status/nodeInfo/kubeletVersion"))),
                json!(address("InternalIP")),
                json!(address("ExternalIP")),
                json!(info("osImage")),
                json!(info("kernelVersion")),
                json!(info("containerRuntimeVersion")),
            ]
        }
        ("", "configmaps") => vec![name, json!(len("/data") + len("/binaryData")), age],
        ("", "secrets") => vec![name, json!(s(o.pointer("/type"))), json!(len("/data")), age],
        ("", "namespaces") => vec![name, json!(s(o.pointer("/status/phase"))), age],
        // Name and Age or Created At (kinds without a printer).
        _ => cols
            .iter()
            .map(|c| match c["name"].as_str() {
                Some("Name") => name.clone(),
                Some("Age") => age.clone(),
                Some("Created At") => o
                    .pointer("/metadata/creationTimestamp")
                    .cloned()
                    .unwrap_or(Value::Null),
                _ => Value::Null,
            })
            .collect(),
    }
}

/// Builds a Table of `objs`. `with_columns: Some(false)` omits the column definitions
/// (watch events after the first); `include_object` is the request's `includeObject`.
pub fn table(
    def: &ResourceDef,
    objs: &[Arc<Value>],
    include_object: Option<&str>,
    list_meta: Option<Value>,
    with_columns: Option<bool>,
) -> Result<Value, ApiError> {
    let include = include_object.unwrap_or("Metadata");
    if !matches!(include, "None" | "Metadata" | "Object" | "") {
        return Err(ApiError::bad_request(format!(
            "Unable to convert to Table as requested: includeObject: Unsupported value: \"{include}\": supported values: \"None\", \"Metadata\", \"Object\""
        )));
    }
    let (cols_json, rows): (Vec<Value>, Vec<Value>) = if let Some(crd) = &def.crd {
        let cols = crd.printer_columns(&def.version);
        let mut defs = vec![
            json!({"name": "Name", "type": "string", "format": "name", "description": NAME_DESC, "priority": 0}),
        ];
        defs.extend(cols.iter().map(|c| {
            let description = if c.description.is_empty() {
                format!("Custom resource definition column (in JSONPath format): {}", c.json_path)
            } else {
                c.description.clone()
            };
            json!({"name": c.name, "type": c.ty, "format": c.format, "description": description, "priority": c.priority})
        }));
        // Like kube-apiserver: an Age column only for versions without printer columns.
        let has_age = !cols.is_empty();
        if !has_age {
            defs.push(json!({"name": "Age", "type": "date", "format": "", "description": CREATED_DESC, "priority": 0}));
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
        let rows = objs
            .iter()
            .map(|o| row(cells(def, &cols, o), o, include))
            .collect();
        (cols, rows)
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

/// The printers' list of at most three items: `a,b,c + 2 more...`, `<unset>` when empty.
fn first_three(items: &[String]) -> String {
    let shown = items.iter().take(3).cloned().collect::<Vec<_>>().join(",");
    if items.len() > 3 {
        format!("{shown} + {} more...", items.len() - 3)
    } else if shown.is_empty() {
        "<unset>".into()
    } else {
        shown
    }
}

/// An Endpoints object's `Endpoints` cell (`formatEndpoints`): up to three `ip:port`
/// pairs (addresses alone for a subset without ports), `+ N more...` for the rest,
/// `<none>` without subsets.
fn endpoints_cell(o: &Value) -> String {
    let subsets = o
        .get("subsets")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    if subsets.is_empty() {
        return "<none>".into();
    }
    let mut list: Vec<String> = Vec::new();
    let mut count = 0;
    let mut more = false;
    for ss in subsets {
        let addrs: Vec<&str> = ss
            .get("addresses")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|a| a.get("ip").and_then(Value::as_str).unwrap_or(""))
            .collect();
        let ports = ss
            .get("ports")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice);
        let mut add = |entry: String| {
            if list.len() == 3 {
                more = true;
            } else {
                list.push(entry);
            }
        };
        if ports.is_empty() {
            count += addrs.len();
            for ip in &addrs {
                add(ip.to_string());
            }
            continue;
        }
        for port in ports {
            count += addrs.len();
            let n = port.get("port").and_then(Value::as_i64).unwrap_or(0);
            for ip in &addrs {
                // Go's net.JoinHostPort: an IPv6 address in brackets.
                add(if ip.contains(':') {
                    format!("[{ip}]:{n}")
                } else {
                    format!("{ip}:{n}")
                });
            }
        }
    }
    let shown = list.join(",");
    if more {
        format!("{shown} + {} more...", count - 3)
    } else {
        shown
    }
}

fn row(cells: Vec<Value>, o: &Value, include: &str) -> Value {
    let object = match include {
        "None" => Value::Null,
        "Object" => o.clone(),
        _ => crate::registry::meta::partial_meta(o),
    };
    let mut r = json!({"cells": cells});
    if !object.is_null() {
        r["object"] = object;
    }
    r
}

#[cfg(test)]
mod column_tests {
    use super::*;

    #[test]
    fn recorded_columns_parse() {
        assert!(COLUMNS.len() >= 50, "{} kinds", COLUMNS.len());
        let pods = &COLUMNS["/pods"];
        assert_eq!(pods[0]["name"], "Name");
        assert_eq!(pods[0]["format"], "name");
        let jobs = &COLUMNS["batch/jobs"];
        assert!(jobs.iter().any(|c| c["name"] == "Completions"));
    }
}
