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

/// One recorded column: name, type, format, priority, description.
type RecordedColumn = (String, String, String, i64, String);

/// The column definitions of kube-apiserver v1.36's printers, by `group/plural`, as a
/// v1.36 kube-apiserver reports them (recorded from one: name, type, format, priority,
/// description). Kinds without a printer have its default table (Name, Created At).
static COLUMNS: std::sync::LazyLock<HashMap<String, Vec<Value>>> = std::sync::LazyLock::new(|| {
    let raw: HashMap<String, Vec<RecordedColumn>> =
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

/// The time since `ts` as kube-apiserver's printers give it (`translateTimestampSince`:
/// Go's `duration.HumanDuration`; `<unknown>` for no time).
pub fn age(ts: Option<&str>) -> String {
    let Some(ts) = ts.and_then(|t| t.parse::<jiff::Timestamp>().ok()) else {
        return "<unknown>".into();
    };
    human_duration(jiff::Timestamp::now().duration_since(ts).as_secs())
}

/// Go's `duration.HumanDuration` of `secs` seconds.
pub fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    if secs < 0 {
        return "0s".into();
    }
    if secs < 120 {
        return format!("{secs}s");
    }
    let minutes = secs / 60;
    if minutes < 10 {
        return match secs % 60 {
            0 => format!("{minutes}m"),
            s => format!("{minutes}m{s}s"),
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = secs / 3600;
    if hours < 8 {
        return match minutes % 60 {
            0 => format!("{hours}h"),
            m => format!("{hours}h{m}m"),
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        return match hours % 24 {
            0 => format!("{}d", hours / 24),
            h => format!("{}d{h}h", hours / 24),
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        return match (hours / 24) % 365 {
            0 => format!("{}y", hours / 24 / 365),
            d => format!("{}y{d}d", hours / 24 / 365),
        };
    }
    format!("{}y", hours / 24 / 365)
}

fn s(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(v) => v.to_string(),
    }
}

/// A ResourceClaim's STATE cell (`resourceClaimState`): deleted, pending (not allocated),
/// allocated, reserved (in use by a consumer), deallocating (deleted while allocated and
/// no longer in use), comma-separated.
fn claim_state(o: &Value) -> String {
    let deleted = o
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null());
    let allocated = o
        .pointer("/status/allocation")
        .is_some_and(|a| !a.is_null());
    let reserved = o
        .pointer("/status/reservedFor")
        .and_then(Value::as_array)
        .is_some_and(|r| !r.is_empty());
    let mut states = Vec::new();
    if deleted {
        states.push("deleted");
    }
    if !allocated {
        if !deleted {
            states.push("pending");
        }
    } else {
        states.push("allocated");
        if reserved {
            states.push("reserved");
        } else if deleted {
            states.push("deallocating");
        }
    }
    states.join(",")
}

/// A pod's STATUS and RESTARTS cells as kubectl's pod printer computes them: the phase
/// (or `status.reason`), overridden by a failing init container (`Init:…`) or by the
/// last container's waiting or terminated reason (`CrashLoopBackOff`, `Completed`,
/// `Error`, `ExitCode:N`), `Completed` read as `Running`/`NotReady` while another
/// container runs, `Terminating` for a pod being deleted that has not ended; restarts
/// with the time since the last one (`1 (5s ago)`).
fn pod_status_cell(o: &Value) -> (String, String) {
    let list = |p: &str| {
        o.pointer(p)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let str_at = |v: &Value, p: &str| {
        v.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let phase = str_at(o, "/status/phase");
    let mut reason = match str_at(o, "/status/reason") {
        r if r.is_empty() => phase.clone(),
        r => r,
    };
    let mut restarts = 0;
    let mut last_restart: Option<jiff::Timestamp> = None;
    let note_restart = |c: &Value, restarts: &mut i64, last: &mut Option<jiff::Timestamp>| {
        *restarts += c.get("restartCount").and_then(Value::as_i64).unwrap_or(0);
        if let Some(t) = c
            .pointer("/lastState/terminated/finishedAt")
            .and_then(Value::as_str)
            .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        {
            *last = Some(last.map_or(t, |l| l.max(t)));
        }
    };
    let exit_text = |c: &Value| match c
        .pointer("/state/terminated/signal")
        .and_then(Value::as_i64)
    {
        Some(sig) if sig != 0 => format!("Signal:{sig}"),
        _ => format!(
            "ExitCode:{}",
            c.pointer("/state/terminated/exitCode")
                .and_then(Value::as_i64)
                .unwrap_or(0)
        ),
    };
    let inits = list("/status/initContainerStatuses");
    let init_total = list("/spec/initContainers").len();
    let mut initializing = false;
    for (i, c) in inits.iter().enumerate() {
        note_restart(c, &mut restarts, &mut last_restart);
        let terminated = c.pointer("/state/terminated").is_some();
        let code = c
            .pointer("/state/terminated/exitCode")
            .and_then(Value::as_i64);
        let waiting = str_at(c, "/state/waiting/reason");
        if terminated && code == Some(0) {
            continue;
        }
        if c.get("started") == Some(&json!(true)) && !terminated {
            // A sidecar (restartable init container) that runs.
            continue;
        }
        initializing = true;
        reason = if terminated {
            match str_at(c, "/state/terminated/reason") {
                r if r.is_empty() => format!("Init:{}", exit_text(c)),
                r => format!("Init:{r}"),
            }
        } else if !waiting.is_empty() && waiting != "PodInitializing" {
            format!("Init:{waiting}")
        } else {
            format!("Init:{i}/{init_total}")
        };
        break;
    }
    let initialized = o
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Initialized" && c["status"] == "True")
        });
    if !initializing || initialized {
        restarts = 0;
        last_restart = None;
        let mut has_running = false;
        for c in list("/status/containerStatuses").iter().rev() {
            note_restart(c, &mut restarts, &mut last_restart);
            let waiting = str_at(c, "/state/waiting/reason");
            let terminated = c.pointer("/state/terminated").is_some();
            if !waiting.is_empty() {
                reason = waiting;
            } else if terminated {
                reason = match str_at(c, "/state/terminated/reason") {
                    r if r.is_empty() => exit_text(c),
                    r => r,
                };
            } else if c.get("ready") == Some(&json!(true)) && c.pointer("/state/running").is_some()
            {
                has_running = true;
            }
        }
        if reason == "Completed" && has_running {
            let ready = o
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c["type"] == "Ready" && c["status"] == "True")
                });
            reason = if ready { "Running" } else { "NotReady" }.into();
        }
    }
    if o.pointer("/metadata/deletionTimestamp").is_some() {
        if str_at(o, "/status/reason") == "NodeLost" {
            reason = "Unknown".into();
        } else if !matches!(phase.as_str(), "Succeeded" | "Failed") {
            reason = "Terminating".into();
        }
    }
    let restarts = match last_restart {
        Some(t) => format!(
            "{restarts} ({} ago)",
            human_duration(jiff::Timestamp::now().duration_since(t).as_secs())
        ),
        None => restarts.to_string(),
    };
    (reason, restarts)
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
            let (phase, restarts) = pod_status_cell(o);
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
                json!(restarts),
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
        ("apps", "replicasets") | ("", "replicationcontrollers") => {
            let [names, images] = container_cells(o, "/spec/template/spec");
            let selector = if def.group.is_empty() {
                labels_text(o.pointer("/spec/selector"))
            } else {
                selector_text(o.pointer("/spec/selector"))
            };
            vec![
                name,
                int(o, "/spec/replicas"),
                int(o, "/status/replicas"),
                int(o, "/status/readyReplicas"),
                age,
                names,
                images,
                json!(selector),
            ]
        }
        ("apps", "statefulsets") => {
            let [names, images] = container_cells(o, "/spec/template/spec");
            let ready = format!(
                "{}/{}",
                int(o, "/status/readyReplicas"),
                int(o, "/spec/replicas")
            );
            vec![name, json!(ready), age, names, images]
        }
        ("apps", "daemonsets") => {
            let [names, images] = container_cells(o, "/spec/template/spec");
            vec![
                name,
                int(o, "/status/desiredNumberScheduled"),
                int(o, "/status/currentNumberScheduled"),
                int(o, "/status/numberReady"),
                int(o, "/status/updatedNumberScheduled"),
                int(o, "/status/numberAvailable"),
                json!(labels_text(o.pointer("/spec/template/spec/nodeSelector"))),
                age,
                names,
                images,
                json!(selector_text(o.pointer("/spec/selector"))),
            ]
        }
        ("apps", "controllerrevisions") => {
            let controller = o
                .pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .find(|r| r.get("controller") == Some(&json!(true)))
                .map_or_else(
                    || "<none>".to_string(),
                    |r| {
                        let api_version = s(r.get("apiVersion"));
                        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
                        let kind = s(r.get("kind"));
                        let gk = if group.is_empty() {
                            kind
                        } else {
                            format!("{kind}.{group}")
                        };
                        format!("{}/{}", gk.to_lowercase(), s(r.get("name")))
                    },
                );
            vec![name, json!(controller), int(o, "/revision"), age]
        }
        ("", "podtemplates") => {
            let [names, images] = container_cells(o, "/template/spec");
            vec![
                name,
                names,
                images,
                json!(labels_text(o.pointer("/template/metadata/labels"))),
            ]
        }
        ("batch", "jobs") => {
            let succeeded = o
                .pointer("/status/succeeded")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            let completions = match o.pointer("/spec/completions").and_then(Value::as_i64) {
                Some(c) => format!("{succeeded}/{c}"),
                None => match o
                    .pointer("/spec/parallelism")
                    .and_then(Value::as_i64)
                    .unwrap_or(0)
                {
                    p if p > 1 => format!("{succeeded}/1 of {p}"),
                    _ => format!("{succeeded}/1"),
                },
            };
            let time = |p: &str| {
                o.pointer(p)
                    .and_then(Value::as_str)
                    .and_then(|t| t.parse::<jiff::Timestamp>().ok())
            };
            let duration = match (time("/status/startTime"), time("/status/completionTime")) {
                (None, _) => String::new(),
                (Some(start), None) => {
                    human_duration(jiff::Timestamp::now().duration_since(start).as_secs())
                }
                (Some(start), Some(done)) => human_duration(done.duration_since(start).as_secs()),
            };
            let has = |t: &str| {
                o.pointer("/status/conditions")
                    .and_then(Value::as_array)
                    .is_some_and(|cs| {
                        cs.iter().any(|c| {
                            c.get("type") == Some(&json!(t))
                                && c.get("status") == Some(&json!("True"))
                        })
                    })
            };
            let status = if has("Complete") {
                "Complete"
            } else if has("Failed") {
                "Failed"
            } else if o.pointer("/metadata/deletionTimestamp").is_some() {
                "Terminating"
            } else if has("Suspended") {
                "Suspended"
            } else if has("FailureTarget") {
                "FailureTarget"
            } else if has("SuccessCriteriaMet") {
                "SuccessCriteriaMet"
            } else {
                "Running"
            };
            let [names, images] = container_cells(o, "/spec/template/spec");
            vec![
                name,
                json!(status),
                json!(completions),
                json!(duration),
                age,
                names,
                images,
                json!(selector_text(o.pointer("/spec/selector"))),
            ]
        }
        ("batch", "cronjobs") => {
            let last = match o
                .pointer("/status/lastScheduleTime")
                .and_then(Value::as_str)
            {
                Some(t) => self::age(Some(t)),
                None => "<none>".into(),
            };
            let suspend = match o.pointer("/spec/suspend").and_then(Value::as_bool) {
                Some(true) => "True",
                Some(false) => "False",
                None => "<unset>",
            };
            let active = o
                .pointer("/status/active")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            let [names, images] = container_cells(o, "/spec/jobTemplate/spec/template/spec");
            vec![
                name,
                json!(s(o.pointer("/spec/schedule"))),
                json!(
                    o.pointer("/spec/timeZone")
                        .and_then(Value::as_str)
                        .unwrap_or("<none>")
                ),
                json!(suspend),
                json!(active),
                json!(last),
                age,
                names,
                images,
                json!(selector_text(o.pointer("/spec/jobTemplate/spec/selector"))),
            ]
        }
        ("", "persistentvolumeclaims") => {
            let phase = if o.pointer("/metadata/deletionTimestamp").is_some() {
                "Terminating".to_string()
            } else {
                s(o.pointer("/status/phase"))
            };
            let volume = s(o.pointer("/spec/volumeName"));
            let (capacity, modes) = if volume.is_empty() {
                (String::new(), String::new())
            } else {
                (
                    quantity_text(o.pointer("/status/capacity/storage")),
                    access_modes(o, "/status/accessModes"),
                )
            };
            let class = o
                .pointer("/metadata/annotations/volume.beta.kubernetes.io~1storage-class")
                .or_else(|| o.pointer("/spec/storageClassName"));
            vec![
                name,
                json!(phase),
                json!(volume),
                json!(capacity),
                json!(modes),
                json!(s(class)),
                json!(unset_or(o.pointer("/spec/volumeAttributesClassName"))),
                age,
                json!(unset_or(o.pointer("/spec/volumeMode"))),
            ]
        }
        ("", "persistentvolumes") => {
            let claim = match o.pointer("/spec/claimRef") {
                Some(c) if c.is_object() => {
                    format!("{}/{}", s(c.get("namespace")), s(c.get("name")))
                }
                _ => String::new(),
            };
            let phase = if o.pointer("/metadata/deletionTimestamp").is_some() {
                "Terminating".to_string()
            } else {
                s(o.pointer("/status/phase"))
            };
            let class = o
                .pointer("/metadata/annotations/volume.beta.kubernetes.io~1storage-class")
                .or_else(|| o.pointer("/spec/storageClassName"));
            vec![
                name,
                json!(quantity_text(o.pointer("/spec/capacity/storage"))),
                json!(access_modes(o, "/spec/accessModes")),
                json!(s(o.pointer("/spec/persistentVolumeReclaimPolicy"))),
                json!(phase),
                json!(claim),
                json!(s(class)),
                json!(unset_or(o.pointer("/spec/volumeAttributesClassName"))),
                json!(s(o.pointer("/status/reason"))),
                age,
                json!(unset_or(o.pointer("/spec/volumeMode"))),
            ]
        }
        ("", "events") | ("events.k8s.io", "events") => event_cells(o),
        ("networking.k8s.io", "ingresses") => {
            let rules = o
                .pointer("/spec/rules")
                .and_then(Value::as_array)
                .map_or(&[][..], Vec::as_slice);
            let mut hosts: Vec<String> = Vec::new();
            let mut more = false;
            for r in rules {
                if hosts.len() == 4 {
                    more = true;
                }
                if !more
                    && let Some(h) = r
                        .get("host")
                        .and_then(Value::as_str)
                        .filter(|h| !h.is_empty())
                {
                    hosts.push(h.to_string());
                }
            }
            let hosts = if hosts.is_empty() {
                "*".to_string()
            } else if more {
                format!("{} + {} more...", hosts.join(","), rules.len() - 4)
            } else {
                hosts.join(",")
            };
            let address: Vec<String> = o
                .pointer("/status/loadBalancer/ingress")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|i| {
                    i.get("ip")
                        .or_else(|| i.get("hostname"))
                        .and_then(Value::as_str)
                        .filter(|a| !a.is_empty())
                        .map(str::to_string)
                })
                .collect();
            let tls = o
                .pointer("/spec/tls")
                .and_then(Value::as_array)
                .is_some_and(|t| !t.is_empty());
            vec![
                name,
                json!(
                    o.pointer("/spec/ingressClassName")
                        .and_then(Value::as_str)
                        .unwrap_or("<none>")
                ),
                json!(hosts),
                json!(address.join(",")),
                json!(if tls { "80, 443" } else { "80" }),
                age,
            ]
        }
        ("networking.k8s.io", "ingressclasses") => {
            let params = match o.pointer("/spec/parameters") {
                Some(p) if p.is_object() => match p.get("apiGroup").and_then(Value::as_str) {
                    Some(g) => format!("{}.{g}/{}", s(p.get("kind")), s(p.get("name"))),
                    None => format!("{}/{}", s(p.get("kind")), s(p.get("name"))),
                },
                _ => "<none>".into(),
            };
            let mut n = s(o.pointer("/metadata/name"));
            if o.pointer("/metadata/annotations/ingressclass.kubernetes.io~1is-default-class")
                == Some(&json!("true"))
            {
                n.push_str(" (default)");
            }
            let name = json!(n);
            vec![
                name,
                json!(s(o.pointer("/spec/controller"))),
                json!(params),
                age,
            ]
        }
        ("networking.k8s.io", "networkpolicies") => {
            vec![
                name,
                json!(selector_text(o.pointer("/spec/podSelector"))),
                age,
            ]
        }
        ("networking.k8s.io", "servicecidrs") => {
            let cidrs: Vec<String> = o
                .pointer("/spec/cidrs")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|c| s(Some(c)))
                .collect();
            vec![name, json!(cidrs.join(",")), age]
        }
        ("autoscaling", "horizontalpodautoscalers") => {
            let reference = format!(
                "{}/{}",
                s(o.pointer("/spec/scaleTargetRef/kind")),
                s(o.pointer("/spec/scaleTargetRef/name"))
            );
            let min = o
                .pointer("/spec/minReplicas")
                .and_then(Value::as_i64)
                .map_or_else(|| "<unset>".to_string(), |m| m.to_string());
            vec![
                name,
                json!(reference),
                json!(hpa_targets(o)),
                json!(min),
                int(o, "/spec/maxReplicas"),
                int(o, "/status/currentReplicas"),
                age,
            ]
        }
        ("policy", "poddisruptionbudgets") => {
            let bound = |p: &str| {
                o.pointer(p)
                    .filter(|v| !v.is_null())
                    .map_or_else(|| "N/A".to_string(), |v| s(Some(v)))
            };
            vec![
                name,
                json!(bound("/spec/minAvailable")),
                json!(bound("/spec/maxUnavailable")),
                int(o, "/status/disruptionsAllowed"),
                age,
            ]
        }
        ("", "resourcequotas") => {
            let hard = o
                .pointer("/spec/hard")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            let (mut requests, mut limits) = (Vec::new(), Vec::new());
            for (k, v) in &hard {
                let used = quantity_text(o.pointer("/status/used").and_then(|u| u.get(k)));
                let entry = format!("{k}: {used}/{}", quantity_text(Some(v)));
                if k.split('.').count() > 1 && k.starts_with("limits.") {
                    limits.push(entry);
                } else {
                    requests.push(entry);
                }
            }
            vec![
                name,
                json!(requests.join(", ")),
                json!(limits.join(", ")),
                age,
            ]
        }
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings") => {
            let [role, users, groups, sas] = binding_cells(o);
            vec![name, role, age, users, groups, sas]
        }
        ("coordination.k8s.io", "leases") => {
            vec![name, json!(s(o.pointer("/spec/holderIdentity"))), age]
        }
        ("scheduling.k8s.io", "priorityclasses") => vec![
            name,
            int(o, "/value"),
            json!(
                o.get("globalDefault")
                    .and_then(Value::as_bool)
                    .unwrap_or(false)
            ),
            age,
            json!(unset_or(o.get("preemptionPolicy"))),
        ],
        ("storage.k8s.io", "storageclasses") => {
            let default = [
                "storageclass.kubernetes.io~1is-default-class",
                "storageclass.beta.kubernetes.io~1is-default-class",
            ]
            .iter()
            .any(|a| o.pointer(&format!("/metadata/annotations/{a}")) == Some(&json!("true")));
            let mut n = s(o.pointer("/metadata/name"));
            if default {
                n.push_str(" (default)");
            }
            vec![
                json!(n),
                json!(s(o.get("provisioner"))),
                json!(
                    o.get("reclaimPolicy")
                        .and_then(Value::as_str)
                        .unwrap_or("Delete")
                ),
                json!(
                    o.get("volumeBindingMode")
                        .and_then(Value::as_str)
                        .unwrap_or("Immediate")
                ),
                json!(
                    o.get("allowVolumeExpansion")
                        .and_then(Value::as_bool)
                        .unwrap_or(false)
                ),
                age,
            ]
        }
        ("storage.k8s.io", "csidrivers") => {
            let flag = |p: &str, d: bool| json!(o.pointer(p).and_then(Value::as_bool).unwrap_or(d));
            let audiences: Vec<String> = o
                .pointer("/spec/tokenRequests")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|t| s(t.get("audience")))
                .collect();
            let modes: Vec<String> = o
                .pointer("/spec/volumeLifecycleModes")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|m| s(Some(m)))
                .collect();
            vec![
                name,
                flag("/spec/attachRequired", true),
                flag("/spec/podInfoOnMount", false),
                flag("/spec/storageCapacity", false),
                json!(if audiences.is_empty() {
                    "<unset>".to_string()
                } else {
                    audiences.join(",")
                }),
                flag("/spec/requiresRepublish", false),
                json!(modes.join(",")),
                age,
            ]
        }
        ("storage.k8s.io", "csinodes") => {
            let drivers = o
                .pointer("/spec/drivers")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            vec![name, json!(drivers), age]
        }
        ("storage.k8s.io", "volumeattachments") => vec![
            name,
            json!(s(o.pointer("/spec/attacher"))),
            json!(s(o.pointer("/spec/source/persistentVolumeName"))),
            json!(s(o.pointer("/spec/nodeName"))),
            json!(
                o.pointer("/status/attached")
                    .and_then(Value::as_bool)
                    .unwrap_or(false)
            ),
            age,
        ],
        ("storage.k8s.io", "volumeattributesclasses") => {
            vec![name, json!(s(o.get("driverName"))), age]
        }
        ("resource.k8s.io", "resourceclaims") => vec![name, json!(claim_state(o)), age],
        ("resource.k8s.io", "resourceslices") => vec![
            name,
            json!(s(o.pointer("/spec/nodeName"))),
            json!(s(o.pointer("/spec/driver"))),
            json!(s(o.pointer("/spec/pool/name"))),
            age,
        ],
        ("node.k8s.io", "runtimeclasses") => vec![name, json!(s(o.get("handler"))), age],
        (
            "admissionregistration.k8s.io",
            "validatingwebhookconfigurations" | "mutatingwebhookconfigurations",
        ) => {
            let n = o
                .get("webhooks")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            vec![name, json!(n), age]
        }
        (
            "admissionregistration.k8s.io",
            plural @ ("validatingadmissionpolicies" | "mutatingadmissionpolicies"),
        ) => {
            let list = if plural == "validatingadmissionpolicies" {
                "/spec/validations"
            } else {
                "/spec/mutations"
            };
            let n = o
                .pointer(list)
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            let param = match o.pointer("/spec/paramKind") {
                Some(p) if p.is_object() => {
                    format!("{}/{}", s(p.get("apiVersion")), s(p.get("kind")))
                }
                _ => "<unset>".into(),
            };
            vec![name, json!(n), json!(param), age]
        }
        (
            "admissionregistration.k8s.io",
            "validatingadmissionpolicybindings" | "mutatingadmissionpolicybindings",
        ) => {
            let param = match o.pointer("/spec/paramRef") {
                Some(p) if p.is_object() => {
                    match p
                        .get("name")
                        .and_then(Value::as_str)
                        .filter(|n| !n.is_empty())
                    {
                        Some(n) => match p.get("namespace").and_then(Value::as_str) {
                            Some(ns) if !ns.is_empty() => format!("{ns}/{n}"),
                            _ => format!("*/{n}"),
                        },
                        None => match p.get("selector") {
                            Some(sel) if sel.is_object() => selector_struct_text(sel),
                            _ => "<unset>".into(),
                        },
                    }
                }
                _ => "<unset>".into(),
            };
            vec![
                name,
                json!(s(o.pointer("/spec/policyName"))),
                json!(param),
                age,
            ]
        }
        ("flowcontrol.apiserver.k8s.io", "flowschemas") => {
            let method = o
                .pointer("/spec/distinguisherMethod/type")
                .and_then(Value::as_str)
                .unwrap_or("<none>");
            let missing = o
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .find(|c| c.get("type") == Some(&json!("Dangling")))
                .map_or_else(|| "?".to_string(), |c| s(c.get("status")));
            vec![
                name,
                json!(s(o.pointer("/spec/priorityLevelConfiguration/name"))),
                int(o, "/spec/matchingPrecedence"),
                json!(method),
                age,
                json!(missing),
            ]
        }
        ("flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations") => {
            let limited = o.pointer("/spec/limited");
            let shares = limited
                .and_then(|l| l.get("nominalConcurrencyShares"))
                .map_or(json!("<none>"), |v| v.clone());
            let queuing = limited.and_then(|l| l.pointer("/limitResponse/queuing"));
            let q = |k: &str| {
                queuing
                    .and_then(|q| q.get(k))
                    .map_or(json!("<none>"), |v| v.clone())
            };
            vec![
                name,
                json!(s(o.pointer("/spec/type"))),
                shares,
                q("queues"),
                q("handSize"),
                q("queueLengthLimit"),
                age,
            ]
        }
        ("networking.k8s.io", "ipaddresses") => {
            let parent = match o.pointer("/spec/parentRef") {
                Some(p) if p.is_object() => {
                    let group = s(p.get("group"));
                    let mut r = s(p.get("resource"));
                    if !group.is_empty() {
                        r = format!("{r}.{group}");
                    }
                    let mut out = r.to_lowercase();
                    let ns = s(p.get("namespace"));
                    if !ns.is_empty() {
                        out = format!("{out}/{ns}");
                    }
                    format!("{out}/{}", s(p.get("name")))
                }
                _ => "<none>".into(),
            };
            vec![name, json!(parent), age]
        }
        ("apiregistration.k8s.io", "apiservices") => {
            let service = match o.pointer("/spec/service") {
                Some(svc) if svc.is_object() => {
                    format!("{}/{}", s(svc.get("namespace")), s(svc.get("name")))
                }
                _ => "Local".into(),
            };
            let available = o
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .find(|c| c.get("type") == Some(&json!("Available")))
                .map_or_else(
                    || "Unknown".to_string(),
                    |c| {
                        let status = s(c.get("status"));
                        let reason = s(c.get("reason"));
                        if status == "True" || reason.is_empty() {
                            status
                        } else {
                            format!("{status} ({reason})")
                        }
                    },
                );
            vec![name, json!(service), json!(available), age]
        }
        ("certificates.k8s.io", "certificatesigningrequests") => {
            let has = |t: &str| {
                o.pointer("/status/conditions")
                    .and_then(Value::as_array)
                    .is_some_and(|cs| cs.iter().any(|c| c.get("type") == Some(&json!(t))))
            };
            let mut status = if has("Denied") {
                "Denied".to_string()
            } else if has("Approved") {
                "Approved".to_string()
            } else {
                "Pending".to_string()
            };
            if has("Failed") {
                status.push_str(",Failed");
            }
            if o.pointer("/status/certificate")
                .and_then(Value::as_str)
                .is_some_and(|c| !c.is_empty())
            {
                status.push_str(",Issued");
            }
            let duration = o
                .pointer("/spec/expirationSeconds")
                .and_then(Value::as_i64)
                .map_or_else(|| "<none>".to_string(), human_duration);
            vec![
                name,
                age,
                json!(
                    o.pointer("/spec/signerName")
                        .and_then(Value::as_str)
                        .filter(|v| !v.is_empty())
                        .unwrap_or("<none>")
                ),
                json!(s(o.pointer("/spec/username"))),
                json!(duration),
                json!(status),
            ]
        }
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
        let mut objs: Vec<&Arc<Value>> = objs.iter().collect();
        if def.group == "flowcontrol.apiserver.k8s.io" && def.plural == "flowschemas" {
            // The FlowSchema printer orders a list by matching precedence, then name.
            objs.sort_by_key(|o| {
                (
                    o.pointer("/spec/matchingPrecedence")
                        .and_then(Value::as_i64)
                        .unwrap_or(1000),
                    s(o.pointer("/metadata/name")),
                )
            });
        }
        let rows = objs
            .into_iter()
            .map(|o| row(cells(def, &cols, o), o, include))
            .collect();
        (cols, rows)
    };
    // Go's nil slice: an empty table's rows are null.
    let rows: Value = if rows.is_empty() {
        Value::Null
    } else {
        Value::Array(rows)
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

/// `labels.FormatLabels`: `k=v` pairs by key, `<none>` when empty.
fn labels_text(m: Option<&Value>) -> String {
    let pairs: Vec<String> = m
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", s(Some(v))))
        .collect();
    if pairs.is_empty() {
        "<none>".into()
    } else {
        pairs.join(",")
    }
}

/// `metav1.FormatLabelSelector`: the selector's requirements by key (`k=v`,
/// `k in (a,b)`, `k notin (a,b)`, `k`, `!k`), `<none>` when it selects by nothing.
fn selector_text(sel: Option<&Value>) -> String {
    let mut reqs: Vec<(String, String)> = Vec::new();
    if let Some(m) = sel
        .and_then(|s| s.get("matchLabels"))
        .and_then(Value::as_object)
    {
        for (k, v) in m {
            reqs.push((k.clone(), format!("{k}={}", s(Some(v)))));
        }
    }
    for e in sel
        .and_then(|s| s.get("matchExpressions"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = s(e.get("key"));
        let mut values: Vec<String> = e
            .get("values")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|v| s(Some(v)))
            .collect();
        values.sort();
        values.dedup();
        let text = match e.get("operator").and_then(Value::as_str).unwrap_or("") {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.clone(),
            "DoesNotExist" => format!("!{key}"),
            _ => return "<error>".into(),
        };
        reqs.push((key, text));
    }
    reqs.sort_by(|a, b| a.0.cmp(&b.0));
    if reqs.is_empty() {
        "<none>".into()
    } else {
        reqs.into_iter().map(|r| r.1).collect::<Vec<_>>().join(",")
    }
}

/// `layoutContainerCells`: the containers' names and images, each joined by commas.
fn container_cells(o: &Value, spec: &str) -> [Value; 2] {
    let list = o
        .pointer(&format!("{spec}/containers"))
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let names: Vec<String> = list.iter().map(|c| s(c.get("name"))).collect();
    let images: Vec<String> = list.iter().map(|c| s(c.get("image"))).collect();
    [json!(names.join(",")), json!(images.join(","))]
}

/// An integer at `ptr` (0 when absent).
fn int(o: &Value, ptr: &str) -> Value {
    json!(o.pointer(ptr).and_then(Value::as_i64).unwrap_or(0))
}

/// A persistent volume's access modes as the printers abbreviate them.
fn access_modes(o: &Value, ptr: &str) -> String {
    let modes: Vec<&str> = o
        .pointer(ptr)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut out = Vec::new();
    for (mode, short) in [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ] {
        if modes.contains(&mode) {
            out.push(short);
        }
    }
    out.join(",")
}

/// A Quantity as Go prints it (canonical form; "0" when absent).
fn quantity_text(v: Option<&Value>) -> String {
    match v.and_then(Value::as_str) {
        Some(q) => q
            .parse::<kubewright_core::quantity::Quantity>()
            .map(|q| q.to_string())
            .unwrap_or_else(|_| q.to_string()),
        None => "0".into(),
    }
}

/// An RBAC binding's Role, Users, Groups and ServiceAccounts cells.
fn binding_cells(o: &Value) -> [Value; 4] {
    let role = format!(
        "{}/{}",
        s(o.pointer("/roleRef/kind")),
        s(o.pointer("/roleRef/name"))
    );
    let (mut users, mut groups, mut sas) = (Vec::new(), Vec::new(), Vec::new());
    for sub in o
        .get("subjects")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = s(sub.get("name"));
        match sub.get("kind").and_then(Value::as_str) {
            Some("User") => users.push(name),
            Some("Group") => groups.push(name),
            Some("ServiceAccount") => sas.push(format!("{}/{name}", s(sub.get("namespace")))),
            _ => {}
        }
    }
    [
        json!(role),
        json!(users.join(", ")),
        json!(groups.join(", ")),
        json!(sas.join(", ")),
    ]
}

/// An Event's cells (`printEvent`; an `events.k8s.io` Event is printed as the core
/// Event it converts to).
fn event_cells(o: &Value) -> Vec<Value> {
    let new_api = o.get("regarding").is_some() || o.get("note").is_some();
    let field = |core: &str, new: &str| o.pointer(if new_api { new } else { core });
    fn text(v: Option<&Value>) -> Option<&str> {
        v.and_then(Value::as_str).filter(|t| !t.is_empty())
    }
    let obj = field("/involvedObject", "/regarding").unwrap_or(&Value::Null);
    let first_ts = text(field("/firstTimestamp", "/deprecatedFirstTimestamp"));
    let last_ts = text(field("/lastTimestamp", "/deprecatedLastTimestamp"));
    let first = match first_ts {
        Some(t) => age(Some(t)),
        None => age(text(o.get("eventTime"))),
    };
    let mut last = match last_ts {
        Some(t) => age(Some(t)),
        None => first.clone(),
    };
    let mut count = field("/count", "/deprecatedCount")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if let Some(series) = o.get("series").filter(|v| v.is_object()) {
        last = age(text(series.get("lastObservedTime")));
        count = series.get("count").and_then(Value::as_i64).unwrap_or(0);
    } else if count == 0 {
        count = 1;
    }
    let first_of =
        |a: Option<&Value>, b: Option<&Value>| text(a).or(text(b)).unwrap_or("").to_string();
    let component = first_of(
        field("/source/component", "/deprecatedSource/component"),
        field("/reportingComponent", "/reportingController"),
    );
    let instance = first_of(
        field("/source/host", "/deprecatedSource/host"),
        o.get("reportingInstance"),
    );
    let source = if instance.is_empty() {
        component
    } else {
        format!("{component}, {instance}")
    };
    let kind = s(obj.get("kind")).to_lowercase();
    let target = match text(obj.get("name")) {
        Some(n) => format!("{kind}/{n}"),
        None => kind,
    };
    vec![
        json!(last),
        json!(s(o.get("type"))),
        json!(s(o.get("reason"))),
        json!(target),
        json!(s(obj.get("fieldPath"))),
        json!(source),
        json!(s(field("/message", "/note")).trim()),
        json!(first),
        json!(count),
        json!(s(o.pointer("/metadata/name"))),
    ]
}

/// `<unset>` for an absent or empty string.
fn unset_or(v: Option<&Value>) -> String {
    match v.and_then(Value::as_str).filter(|t| !t.is_empty()) {
        Some(t) => t.to_string(),
        None => "<unset>".into(),
    }
}

/// `formatHPAMetrics`: each metric's current and target value (at most two, then
/// `+ N more...`), `<none>` without metrics.
fn hpa_targets(o: &Value) -> String {
    let specs = o
        .pointer("/spec/metrics")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    if specs.is_empty() {
        return "<none>".into();
    }
    let statuses = o
        .pointer("/status/currentMetrics")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let q = |v: Option<&Value>| quantity_text(v);
    let mut list: Vec<String> = Vec::new();
    for (i, m) in specs.iter().enumerate() {
        let status = statuses.get(i);
        let cur = |kind: &str, key: &str| -> Option<String> {
            status?
                .get(kind)?
                .pointer(&format!("/current/{key}"))
                .map(|v| q(Some(v)))
        };
        let item = match m.get("type").and_then(Value::as_str).unwrap_or("") {
            t @ ("Resource" | "ContainerResource") => {
                let kind = if t == "Resource" {
                    "resource"
                } else {
                    "containerResource"
                };
                let r = m.get(kind).unwrap_or(&Value::Null);
                let res = s(r.get("name"));
                let target = r.get("target").unwrap_or(&Value::Null);
                if let Some(avg) = target.get("averageValue") {
                    let current = cur(kind, "averageValue").unwrap_or_else(|| "<unknown>".into());
                    format!("{res}: {current}/{}", q(Some(avg)))
                } else {
                    let current = status
                        .and_then(|st| st.get(kind))
                        .and_then(|st| st.pointer("/current/averageUtilization"))
                        .and_then(Value::as_i64)
                        .map_or_else(|| "<unknown>".to_string(), |u| format!("{u}%"));
                    let goal = target
                        .get("averageUtilization")
                        .and_then(Value::as_i64)
                        .map_or_else(|| "<auto>".to_string(), |u| format!("{u}%"));
                    format!("{res}: {current}/{goal}")
                }
            }
            "Pods" => {
                let current = cur("pods", "averageValue").unwrap_or_else(|| "<unknown>".into());
                format!("{current}/{}", q(m.pointer("/pods/target/averageValue")))
            }
            "Object" => {
                let target = m.pointer("/object/target").unwrap_or(&Value::Null);
                if let Some(avg) = target.get("averageValue") {
                    let current =
                        cur("object", "averageValue").unwrap_or_else(|| "<unknown>".into());
                    format!("{current}/{} (avg)", q(Some(avg)))
                } else {
                    let current = cur("object", "value").unwrap_or_else(|| "<unknown>".into());
                    format!("{current}/{}", q(target.get("value")))
                }
            }
            "External" => {
                let target = m.pointer("/external/target").unwrap_or(&Value::Null);
                if let Some(avg) = target.get("averageValue") {
                    let current =
                        cur("external", "averageValue").unwrap_or_else(|| "<unknown>".into());
                    format!("{current}/{} (avg)", q(Some(avg)))
                } else {
                    let current = cur("external", "value").unwrap_or_else(|| "<unknown>".into());
                    format!("{current}/{}", q(target.get("value")))
                }
            }
            _ => "<unknown type>".into(),
        };
        list.push(item);
    }
    if list.len() > 2 {
        let more = list.len() - 2;
        list.truncate(2);
        format!("{} + {more} more...", list.join(", "))
    } else {
        list.join(", ")
    }
}

/// A label selector as Go's generated `LabelSelector.String()` prints it (a
/// ValidatingAdmissionPolicyBinding's parameter selector).
fn selector_struct_text(sel: &Value) -> String {
    let labels: String = sel
        .get("matchLabels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}: {},", s(Some(v))))
        .collect();
    let exprs: String = sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|e| {
            let values: Vec<String> = e
                .get("values")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|v| s(Some(v)))
                .collect();
            format!(
                "LabelSelectorRequirement{{Key:{},Operator:{},Values:[{}],}},",
                s(e.get("key")),
                s(e.get("operator")),
                values.join(" ")
            )
        })
        .collect();
    format!(
        "&LabelSelector{{MatchLabels:map[string]string{{{labels}}},MatchExpressions:[]LabelSelectorRequirement{{{exprs}}},}}"
    )
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
    fn pod_status_cells_follow_kubectls_pod_printer() {
        // Measured on v1.36 with kubectl 1.32 (pods whose status was written by hand).
        let pod = |status: Value| json!({"metadata": {}, "spec": {"initContainers": [{"name": "i"}], "containers": [{"name": "c"}]}, "status": status});
        let done = pod(
            json!({"phase": "Succeeded", "containerStatuses": [{"name": "c", "restartCount": 0,
            "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}),
        );
        assert_eq!(pod_status_cell(&done), ("Completed".into(), "0".into()));
        let crash = pod(
            json!({"phase": "Running", "conditions": [{"type": "Initialized", "status": "True"}],
            "containerStatuses": [{"name": "c", "restartCount": 3,
                "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": "2026-01-01T00:00:00Z"}},
                "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}),
        );
        let (reason, restarts) = pod_status_cell(&crash);
        assert_eq!(reason, "CrashLoopBackOff");
        assert!(
            restarts.starts_with("3 (") && restarts.ends_with(" ago)"),
            "{restarts}"
        );
        let init = pod(json!({"phase": "Pending",
            "initContainerStatuses": [{"name": "i", "restartCount": 2, "state": {"terminated": {"exitCode": 2}}}],
            "containerStatuses": [{"name": "c", "restartCount": 0, "state": {"waiting": {"reason": "PodInitializing"}}}]}));
        assert_eq!(
            pod_status_cell(&init),
            ("Init:ExitCode:2".into(), "2".into())
        );
        let waiting_init = pod(json!({"phase": "Pending",
            "initContainerStatuses": [{"name": "i", "restartCount": 0, "state": {"waiting": {"reason": "PodInitializing"}}}]}));
        assert_eq!(pod_status_cell(&waiting_init).0, "Init:0/1");
        let mut going = done.clone();
        going["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        assert_eq!(
            pod_status_cell(&going).0,
            "Completed",
            "an ended pod is not Terminating"
        );
        let mut running = pod(
            json!({"phase": "Running", "containerStatuses": [{"name": "c", "ready": true, "state": {"running": {}}}]}),
        );
        running["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        assert_eq!(pod_status_cell(&running).0, "Terminating");
    }

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
