//! Defaulting, as kube-apiserver's defaulters apply it when a request body is decoded
//! (`SetDefaults_*`): the values a write gets for the fields it leaves out. Which kind gets
//! which defaults is the kind's strategy (`registry::strategy`).

use crate::registry::meta::{meta_mut, meta_str};
use serde_json::{Map, Value, json};

/// Sets `ptr` (a JSON pointer) to `value` unless something is there, creating objects on
/// the way.
pub fn set_default(obj: &mut Value, ptr: &str, value: Value) {
    if obj.pointer(ptr).is_some() {
        return;
    }
    let mut cur = obj;
    let parts: Vec<&str> = ptr.trim_start_matches('/').split('/').collect();
    for (i, part) in parts.iter().enumerate() {
        let Some(map) = cur.as_object_mut() else {
            return;
        };
        let key = part.replace("~1", "/").replace("~0", "~");
        if i + 1 == parts.len() {
            map.insert(key, value);
            return;
        }
        cur = map.entry(key).or_insert_with(|| json!({}));
    }
}

pub fn namespace_label(obj: &mut Value) {
    let Some(name) = meta_str(obj, "name")
        .filter(|n| !n.is_empty())
        .map(str::to_string)
    else {
        return;
    };
    let m = meta_mut(obj);
    if !m.get("labels").is_some_and(Value::is_object) {
        m.insert("labels".into(), Value::Object(Map::new()));
    }
    if let Some(labels) = m.get_mut("labels").and_then(Value::as_object_mut) {
        labels.insert("kubernetes.io/metadata.name".into(), Value::String(name));
    }
}

pub fn secret(obj: &mut Value) {
    set_default(obj, "/type", json!("Opaque"));
    // `stringData` is write-only: merged into `data` (base64) when decoded.
    let Some(Value::Object(strings)) = obj.as_object_mut().and_then(|o| o.remove("stringData"))
    else {
        return;
    };
    use base64::Engine;
    if !obj.get("data").is_some_and(Value::is_object) {
        obj["data"] = json!({});
    }
    if let Some(data) = obj.get_mut("data").and_then(Value::as_object_mut) {
        for (k, v) in strings {
            let text = v.as_str().unwrap_or_default();
            data.insert(
                k,
                json!(base64::engine::general_purpose::STANDARD.encode(text.as_bytes())),
            );
        }
    }
}

/// `SetDefaults_LoadBalancerIngress`: an ingress point with an IP gets `ipMode: VIP`.
pub fn load_balancer_ip_mode(obj: &mut Value) {
    let Some(ingress) = obj
        .pointer_mut("/status/loadBalancer/ingress")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for i in ingress.iter_mut().filter_map(Value::as_object_mut) {
        if i.get("ip")
            .and_then(Value::as_str)
            .is_some_and(|ip| !ip.is_empty())
            && !i.contains_key("ipMode")
        {
            i.insert("ipMode".into(), Value::String("VIP".into()));
        }
    }
}

pub fn service(obj: &mut Value) {
    load_balancer_ip_mode(obj);
    set_default(obj, "/spec/type", json!("ClusterIP"));
    set_default(obj, "/spec/sessionAffinity", json!("None"));
    let ty = obj
        .pointer("/spec/type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if ty != "ExternalName" {
        set_default(obj, "/spec/internalTrafficPolicy", json!("Cluster"));
    }
    if matches!(ty.as_str(), "NodePort" | "LoadBalancer") {
        set_default(obj, "/spec/externalTrafficPolicy", json!("Cluster"));
    }
    if ty == "LoadBalancer" {
        set_default(obj, "/spec/allocateLoadBalancerNodePorts", json!(true));
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

pub fn replication_controller(obj: &mut Value) {
    set_default(obj, "/spec/replicas", json!(1));
    // An empty selector and labels default to the template's labels.
    if let Some(labels) = obj.pointer("/spec/template/metadata/labels").cloned() {
        if obj
            .pointer("/spec/selector")
            .and_then(Value::as_object)
            .is_none_or(Map::is_empty)
        {
            obj["spec"]["selector"] = labels.clone();
        }
        if obj
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .is_none_or(Map::is_empty)
        {
            meta_mut(obj).insert("labels".into(), labels);
        }
    }
    pod_template(obj, "/spec/template");
}

pub fn job_spec(obj: &mut Value, spec: &str) {
    let Some(s) = obj.pointer_mut(spec) else {
        return;
    };
    if s.get("parallelism").is_none() {
        s["parallelism"] = json!(1);
    }
    if s.get("completions").is_none() && s.get("parallelism") == Some(&json!(1)) {
        s["completions"] = json!(1);
    }
    set_default(s, "/backoffLimit", json!(6));
    set_default(s, "/completionMode", json!("NonIndexed"));
    set_default(s, "/suspend", json!(false));
    let failed = s.pointer("/podFailurePolicy").is_some();
    set_default(
        s,
        "/podReplacementPolicy",
        json!(if failed {
            "Failed"
        } else {
            "TerminatingOrFailed"
        }),
    );
    set_default(s, "/manualSelector", json!(false));
    pod_template(s, "/template");
}

pub fn pod_template(obj: &mut Value, template: &str) {
    if let Some(spec) = obj.pointer_mut(&format!("{template}/spec")) {
        pod_spec(spec);
    }
}

/// `SetDefaults_Pod`: the pod spec's defaults, service links, and requests from limits.
pub fn pod(obj: &mut Value) {
    if let Some(spec) = obj.get_mut("spec") {
        pod_spec(spec);
        set_default(spec, "/enableServiceLinks", json!(true));
        for list in ["containers", "initContainers"] {
            for c in spec
                .get_mut(list)
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                let Some(limits) = c
                    .pointer("/resources/limits")
                    .and_then(Value::as_object)
                    .cloned()
                else {
                    continue;
                };
                for (res, q) in limits {
                    set_default(
                        c,
                        &format!("/resources/requests/{}", res.replace('/', "~1")),
                        q,
                    );
                }
            }
        }
    }
}

/// `SetDefaults_PodSpec` and the defaults of containers, probes and volumes.
pub fn pod_spec(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    set_default(spec, "/restartPolicy", json!("Always"));
    set_default(spec, "/terminationGracePeriodSeconds", json!(30));
    set_default(spec, "/dnsPolicy", json!("ClusterFirst"));
    set_default(spec, "/securityContext", json!({}));
    set_default(spec, "/schedulerName", json!("default-scheduler"));
    // The v1 conversion: `serviceAccountName` from the deprecated `serviceAccount` when
    // unset, and `serviceAccount` always written back from it.
    let account = |spec: &Value, k: &str| {
        spec.get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    if let Some(name) =
        account(spec, "serviceAccountName").or_else(|| account(spec, "serviceAccount"))
    {
        spec["serviceAccountName"] = json!(name);
        spec["serviceAccount"] = json!(name);
    }
    let host_network = spec.get("hostNetwork") == Some(&json!(true));
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        for c in spec
            .get_mut(list)
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            container(c, host_network);
        }
    }
    for v in spec
        .get_mut("volumes")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        volume(v);
    }
}

fn container(c: &mut Value, host_network: bool) {
    set_default(c, "/terminationMessagePath", json!("/dev/termination-log"));
    set_default(c, "/terminationMessagePolicy", json!("File"));
    if c.get("imagePullPolicy").is_none() {
        let image = c.get("image").and_then(Value::as_str).unwrap_or("");
        c["imagePullPolicy"] = json!(if image_tag(image) == "latest" {
            "Always"
        } else {
            "IfNotPresent"
        });
    }
    for p in c
        .get_mut("ports")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        set_default(p, "/protocol", json!("TCP"));
        if host_network && let Some(cp) = p.get("containerPort").cloned() {
            set_default(p, "/hostPort", cp);
        }
    }
    for e in c
        .get_mut("env")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        if e.pointer("/valueFrom/fieldRef").is_some() {
            set_default(e, "/valueFrom/fieldRef/apiVersion", json!("v1"));
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = c.get_mut(probe).filter(|p| p.is_object()) {
            set_default(p, "/timeoutSeconds", json!(1));
            set_default(p, "/periodSeconds", json!(10));
            set_default(p, "/successThreshold", json!(1));
            set_default(p, "/failureThreshold", json!(3));
            http_get(p);
        }
    }
    for hook in ["postStart", "preStop"] {
        if let Some(h) = c.pointer_mut(&format!("/lifecycle/{hook}")) {
            http_get(h);
        }
    }
}

fn http_get(handler: &mut Value) {
    if let Some(h) = handler.get_mut("httpGet").filter(|h| h.is_object()) {
        set_default(h, "/path", json!("/"));
        set_default(h, "/scheme", json!("HTTP"));
    }
}

/// An image reference's tag: `latest` when it has neither a tag nor a digest.
pub fn image_tag(image: &str) -> &str {
    let (name, digest) = match image.split_once('@') {
        Some((n, _)) => (n, true),
        None => (image, false),
    };
    let last = name.rsplit('/').next().unwrap_or(name);
    match last.split_once(':') {
        Some((_, tag)) => tag,
        None if digest => "",
        None => "latest",
    }
}

fn volume(v: &mut Value) {
    let Some(o) = v.as_object_mut() else { return };
    let has_source = o.keys().any(|k| {
        VOLUME_SOURCES.contains(&k.as_str()) || k == "csi" || k == "ephemeral" || k == "image"
    });
    if !has_source {
        o.insert("emptyDir".into(), json!({}));
    }
    for src in ["secret", "configMap", "downwardAPI", "projected"] {
        if let Some(s) = o.get_mut(src).filter(|s| s.is_object()) {
            set_default(s, "/defaultMode", json!(420));
        }
    }
    if let Some(h) = o.get_mut("hostPath").filter(|h| h.is_object()) {
        set_default(h, "/type", json!(""));
    }
}

pub fn crd(obj: &mut Value) {
    if let Some(kind) = obj
        .pointer("/spec/names/kind")
        .and_then(Value::as_str)
        .map(str::to_string)
    {
        set_default(obj, "/spec/names/singular", json!(kind.to_lowercase()));
        set_default(obj, "/spec/names/listKind", json!(format!("{kind}List")));
    }
    set_default(obj, "/spec/conversion/strategy", json!("None"));
}

const VOLUME_SOURCES: [&str; 27] = [
    "hostPath",
    "emptyDir",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "persistentVolumeClaim",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "downwardAPI",
    "fc",
    "azureFile",
    "configMap",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "projected",
    "portworxVolume",
    "scaleIO",
    "storageos",
];

/// Go's non-`omitempty` lists: absent or empty, they are written as `null`.
pub fn null_when_empty(obj: &mut Value, fields: &[&str]) {
    let Some(o) = obj.as_object_mut() else { return };
    for f in fields {
        if o.get(*f)
            .is_none_or(|v| v.as_array().is_some_and(Vec::is_empty))
        {
            o.insert(f.to_string(), Value::Null);
        }
    }
}

/// `SetDefaults_NetworkPolicySpec`: the policy types its rules imply.
pub fn network_policy(obj: &mut Value) {
    if obj
        .pointer("/spec/policyTypes")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty())
    {
        return;
    }
    let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    let mut types = vec![json!("Ingress")];
    if spec
        .get("egress")
        .and_then(Value::as_array)
        .is_some_and(|e| !e.is_empty())
    {
        types.push(json!("Egress"));
    }
    spec["policyTypes"] = Value::Array(types);
}

/// `SetDefaults_LimitRangeItem`: a container's default limit is its max, its default
/// request the default limit, else the min.
pub fn limit_range(obj: &mut Value) {
    for item in obj
        .pointer_mut("/spec/limits")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        if item.get("type") != Some(&json!("Container")) {
            continue;
        }
        let get = |item: &Value, k: &str| {
            item.get(k)
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default()
        };
        let mut default = get(item, "default");
        for (k, v) in get(item, "max") {
            default.entry(k).or_insert(v);
        }
        let mut request = get(item, "defaultRequest");
        for (k, v) in default.iter().chain(get(item, "min").iter()) {
            request.entry(k.clone()).or_insert(v.clone());
        }
        if !default.is_empty() {
            item["default"] = Value::Object(default);
        }
        if !request.is_empty() {
            item["defaultRequest"] = Value::Object(request);
        }
    }
}

/// `SetDefaults_ExactDeviceRequest` / `SetDefaults_DeviceSubRequest` (resource.k8s.io/v1):
/// the allocation mode is `ExactCount` and an exact count 1; a toleration's operator is
/// `Equal` (`SetDefaults_DeviceToleration`).
fn device_request(r: &mut Value) {
    if !r.is_object() {
        return;
    }
    if r.get("allocationMode")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        r["allocationMode"] = json!("ExactCount");
    }
    if r.get("allocationMode") == Some(&json!("ExactCount"))
        && r.get("count").and_then(Value::as_i64).unwrap_or(0) == 0
    {
        r["count"] = json!(1);
    }
    if let Some(ts) = r.get_mut("tolerations").and_then(Value::as_array_mut) {
        for t in ts.iter_mut().filter(|t| t.is_object()) {
            if t.get("operator")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                t["operator"] = json!("Equal");
            }
        }
    }
}

/// A ResourceClaimSpec's defaults (a claim's `spec`, a template's `spec.spec`).
pub fn resource_claim_spec(spec: &mut Value) {
    let Some(requests) = spec
        .pointer_mut("/devices/requests")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for r in requests.iter_mut() {
        if let Some(e) = r.get_mut("exactly") {
            device_request(e);
        }
        if let Some(subs) = r.get_mut("firstAvailable").and_then(Value::as_array_mut) {
            subs.iter_mut().for_each(device_request);
        }
    }
}

/// `SetDefaults_DeviceTaint`: a ResourceSlice device's taint is added now (whole
/// seconds). DeviceClasses have no defaults of their own.
pub fn device_class_or_slice(obj: &mut Value) {
    let Some(devices) = obj
        .pointer_mut("/spec/devices")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for d in devices.iter_mut() {
        if let Some(taints) = d.get_mut("taints").and_then(Value::as_array_mut) {
            for t in taints.iter_mut().filter(|t| t.is_object()) {
                if t.get("timeAdded").is_none_or(Value::is_null) {
                    t["timeAdded"] = json!(crate::registry::meta::now_time());
                }
            }
        }
    }
}
