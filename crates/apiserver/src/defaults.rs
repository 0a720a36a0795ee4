//! Defaulting applied on create, for the fields clients and kubectl rely on.

use crate::registry::ResourceDef;
use serde_json::{Value, json};

/// Applies create-time defaults and status resets.
pub fn on_create(def: &ResourceDef, obj: &mut Value) {
    let g = def.group.as_str();
    let p = def.plural.as_str();
    // Status is not settable on create for types with a status subresource (nodes excepted).
    if def.has_status
        && !(g.is_empty() && p == "nodes")
        && let Some(o) = obj.as_object_mut()
    {
        o.remove("status");
    }
    match (g, p) {
        ("", "namespaces") => {
            obj["spec"] = json!({"finalizers": ["kubernetes"]});
            obj["status"] = json!({"phase": "Active"});
        }
        ("", "pods") => {
            obj["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"});
            set_default(obj, "/spec/restartPolicy", json!("Always"));
            set_default(obj, "/spec/dnsPolicy", json!("ClusterFirst"));
            set_default(obj, "/spec/schedulerName", json!("default-scheduler"));
            set_default(obj, "/spec/terminationGracePeriodSeconds", json!(30));
            set_default(obj, "/spec/serviceAccountName", json!("default"));
        }
        ("", "services") => {
            set_default(obj, "/spec/type", json!("ClusterIP"));
            set_default(obj, "/spec/sessionAffinity", json!("None"));
            if obj.pointer("/spec/clusterIP").is_none() {
                let n: u32 = rand::random::<u32>() % 65_000 + 1;
                let ip = format!("10.96.{}.{}", n / 256, n % 256);
                obj["spec"]["clusterIP"] = json!(ip);
                obj["spec"]["clusterIPs"] = json!([ip]);
            }
            if let Some(ports) = obj.pointer_mut("/spec/ports").and_then(Value::as_array_mut) {
                for port in ports {
                    if port.get("protocol").is_none() {
                        port["protocol"] = json!("TCP");
                    }
                    if port.get("targetPort").is_none()
                        && let Some(p) = port.get("port").cloned()
                    {
                        port["targetPort"] = p;
                    }
                }
            }
        }
        ("apps", "deployments" | "replicasets" | "statefulsets")
        | ("", "replicationcontrollers") => {
            set_default(obj, "/spec/replicas", json!(1));
            if p == "deployments" {
                set_default(obj, "/spec/revisionHistoryLimit", json!(10));
                set_default(obj, "/spec/progressDeadlineSeconds", json!(600));
                set_default(
                    obj,
                    "/spec/strategy",
                    json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}),
                );
            }
        }
        ("", "secrets") => set_default(obj, "/type", json!("Opaque")),
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            let fins = obj.pointer_mut("/metadata/finalizers");
            match fins.and_then(Value::as_array_mut) {
                Some(a) => {
                    if !a
                        .iter()
                        .any(|f| f == "customresourcecleanup.apiextensions.k8s.io")
                    {
                        a.push(json!("customresourcecleanup.apiextensions.k8s.io"));
                    }
                }
                None => {
                    obj["metadata"]["finalizers"] =
                        json!(["customresourcecleanup.apiextensions.k8s.io"])
                }
            }
        }
        _ => {}
    }
}

fn set_default(obj: &mut Value, ptr: &str, value: Value) {
    if obj.pointer(ptr).is_some() {
        return;
    }
    let mut cur = obj;
    let parts: Vec<&str> = ptr.trim_start_matches('/').split('/').collect();
    for (i, part) in parts.iter().enumerate() {
        let Some(map) = cur.as_object_mut() else {
            return;
        };
        if i + 1 == parts.len() {
            map.insert(part.to_string(), value);
            return;
        }
        cur = map.entry(part.to_string()).or_insert_with(|| json!({}));
    }
}
