//! Decode cost of one realistic pod: JSON (serde_json) against protobuf (this crate's
//! deserializer), into the k8s-openapi `Pod`. A bench binary (no harness):
//! `cargo bench -p kubewright-proto --bench decode`.

use k8s_openapi::api::core::v1::Pod;
use serde_json::json;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// A pod shaped like a real Deployment replica (~8 KB of JSON with managedFields).
fn pod() -> serde_json::Value {
    let containers: Vec<_> = ["app", "sidecar"].iter().map(|name| json!({
        "name": name, "image": format!("registry.example.com/shop/{name}:1.42.3"),
        "args": ["--port=8080", "--log-level=info", "--config=/etc/app/config.yaml"],
        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}, {"name": "metrics", "containerPort": 9090, "protocol": "TCP"}],
        "env": (0..8).map(|i| json!({"name": format!("ENV_{i}"), "value": format!("value-{i}")})).collect::<Vec<_>>(),
        "resources": {"limits": {"cpu": "500m", "memory": "512Mi"}, "requests": {"cpu": "250m", "memory": "256Mi"}},
        "volumeMounts": [{"name": "config", "mountPath": "/etc/app", "readOnly": true}, {"name": "kube-api-access-x7k2p", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}],
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http", "scheme": "HTTP"}, "initialDelaySeconds": 10, "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3},
        "readinessProbe": {"httpGet": {"path": "/ready", "port": "http", "scheme": "HTTP"}, "timeoutSeconds": 1, "periodSeconds": 5, "successThreshold": 1, "failureThreshold": 3},
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent",
        "securityContext": {"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "runAsNonRoot": true, "capabilities": {"drop": ["ALL"]}}
    })).collect();
    let conditions: Vec<_> = ["Initialized", "Ready", "ContainersReady", "PodScheduled"]
        .iter()
        .map(|t| json!({"type": t, "status": "True", "lastTransitionTime": "2026-12-01T10:00:05Z"}))
        .collect();
    let statuses: Vec<_> = ["app", "sidecar"].iter().map(|n| json!({"name": n, "ready": true, "restartCount": 0, "image": format!("registry.example.com/shop/{n}:1.42.3"),
        "imageID": format!("registry.example.com/shop/{n}@sha256:0123456789abcdef"), "containerID": "containerd://0123456789abcdef", "started": true,
        "state": {"running": {"startedAt": "2026-12-01T10:00:03Z"}}})).collect();
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-7d9f8b6c5d-000042", "generateName": "web-7d9f8b6c5d-", "namespace": "shop",
            "uid": "0b6e5cb6-7d36-4d4c-9f4e-2d4f3c1f7a10", "resourceVersion": "1234567", "creationTimestamp": "2026-12-01T10:00:00Z",
            "labels": {"app.kubernetes.io/name": "web", "pod-template-hash": "7d9f8b6c5d", "team": "shop"},
            "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": "9090"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f8b6c5d", "uid": "7a1c2e7e-1111-2222-3333-444455556666", "controller": true, "blockOwnerDeletion": true}],
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1", "time": "2026-12-01T10:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:app.kubernetes.io/name": {}}, "f:ownerReferences": {".": {}}}, "f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {".": {}, "f:image": {}, "f:name": {}}}}}}]},
        "spec": {"containers": containers,
            "volumes": [{"name": "config", "configMap": {"name": "web-config", "defaultMode": 420}},
                {"name": "kube-api-access-x7k2p", "projected": {"defaultMode": 420, "sources": [{"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst", "serviceAccountName": "web", "serviceAccount": "web",
            "nodeName": "worker-042", "securityContext": {"fsGroup": 2000}, "schedulerName": "default-scheduler",
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
            "priority": 0, "enableServiceLinks": true, "preemptionPolicy": "PreemptLowerPriority"},
        "status": {"phase": "Running", "hostIP": "10.0.0.42", "podIP": "10.20.0.42", "podIPs": [{"ip": "10.20.0.42"}], "startTime": "2026-12-01T10:00:00Z", "qosClass": "Burstable",
            "conditions": conditions, "containerStatuses": statuses}
    })
}

/// Runs one measurement unless the command line names others (`-- lean` runs the names
/// that contain "lean").
fn time(name: &str, f: impl Fn()) {
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    if !filters.is_empty() && !filters.iter().any(|f| name.contains(f.as_str())) {
        return;
    }
    // A fixed count, for instruction counting (`valgrind --tool=callgrind`).
    if let Some(n) = std::env::var("DECODE_ITERS")
        .ok()
        .and_then(|n| n.parse::<u32>().ok())
    {
        for _ in 0..n {
            f();
        }
        println!("{name}: {n} iterations");
        return;
    }
    for _ in 0..200 {
        f();
    }
    let mut samples = Vec::new();
    let end = Instant::now() + Duration::from_secs(2);
    while Instant::now() < end {
        let t = Instant::now();
        for _ in 0..50 {
            f();
        }
        samples.push(t.elapsed().as_secs_f64() * 1e6 / 50.0);
    }
    samples.sort_by(f64::total_cmp);
    println!(
        "{name:<48} {:>8.1} us/op (median of {} batches)",
        samples[samples.len() / 2],
        samples.len()
    );
}

fn main() {
    let v = pod();
    let json = serde_json::to_vec(&v).expect("json");
    let pb = kubewright_proto::encode(&v).expect("protobuf");
    println!(
        "one pod: {} bytes of JSON, {} bytes of protobuf",
        json.len(),
        pb.len()
    );
    time("serde_json::from_slice::<Pod>", || {
        black_box(serde_json::from_slice::<Pod>(black_box(&json)).expect("json"));
    });
    time("kubewright_proto::from_slice::<Pod>", || {
        black_box(kubewright_proto::from_slice::<Pod>(black_box(&pb)).expect("pb"));
    });
    // What a lean cache holds: the object's message without managedFields.
    let raw = kubewright_proto::strip_managed_fields(unknown_raw(&pb)).expect("strip");
    time(
        "kubewright_proto::from_raw::<Pod> (lean, no managedFields)",
        || {
            black_box(kubewright_proto::from_raw::<Pod>("v1", "Pod", black_box(&raw)).expect("pb"));
        },
    );
    let mut stripped = v.clone();
    stripped["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("managedFields");
    let stripped_json = serde_json::to_vec(&stripped).expect("json");
    time("serde_json::from_slice::<Pod> (no managedFields)", || {
        black_box(serde_json::from_slice::<Pod>(black_box(&stripped_json)).expect("json"));
    });
    // The floor: the target types' own visitors and allocations, from a decoded tree.
    time(
        "Pod::deserialize(&serde_json::Value) (no managedFields)",
        || {
            black_box(
                <Pod as serde::Deserialize>::deserialize(black_box(&stripped)).expect("value"),
            );
        },
    );
    time("kubewright_proto::decode (to serde_json::Value)", || {
        black_box(kubewright_proto::decode(black_box(&pb)).expect("pb"));
    });
}

/// The `raw` field (2) of the `runtime.Unknown` after the `k8s\0` prefix.
fn unknown_raw(body: &[u8]) -> &[u8] {
    let mut rest = &body[4..];
    while !rest.is_empty() {
        let key = rest[0];
        rest = &rest[1..];
        let (len, n) = varint(rest);
        rest = &rest[n..];
        let (value, tail) = rest.split_at(len as usize);
        if key == (2 << 3 | 2) {
            return value;
        }
        rest = tail;
    }
    panic!("no raw field");
}

fn varint(b: &[u8]) -> (u64, usize) {
    let mut v = 0u64;
    for (i, byte) in b.iter().enumerate() {
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return (v, i + 1);
        }
    }
    panic!("truncated varint");
}
