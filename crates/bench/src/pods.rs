//! The objects of the benchmark: realistic pods (~5 KB of JSON each before the server adds
//! `managedFields`) and the merge patches that make the watch events.

use serde_json::{Value, json};

/// Label carrying how many times the benchmark patched a pod. After every patch has been
/// applied, the sum of this label over all pods equals the number of patches: the child
/// checks its cache with it.
pub const GEN_LABEL: &str = "kw-bench/gen";

/// The name of pod `i`.
pub fn pod_name(i: usize) -> String {
    format!("web-7d9f8b6c5d-{i:06}")
}

/// The object that owns every pod (created first, so the garbage collector keeps the
/// pods). A ConfigMap, not a ReplicaSet: the embedded server runs the replicaset
/// controller, which would delete the pods of a ReplicaSet of zero replicas.
pub fn owner(namespace: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "web-7d9f8b6c5d",
            "namespace": namespace,
            "labels": {"app.kubernetes.io/name": "web"}
        }
    })
}

fn env(prefix: &str, i: usize) -> Value {
    json!([
        {"name": "APP_ENV", "value": "production"},
        {"name": "APP_REGION", "value": format!("eu-west-{}", i % 3 + 1)},
        {"name": "LOG_LEVEL", "value": "info"},
        {"name": format!("{prefix}_PORT"), "value": "8080"},
        {"name": "DATABASE_URL", "value": format!("postgres://shop-db-{}.shop.svc.cluster.local:5432/shop?sslmode=require", i % 4)},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
        {"name": "API_TOKEN", "valueFrom": {"secretKeyRef": {"name": "web-secrets", "key": "api-token"}}}
    ])
}

fn probe(path: &str, port: u16, delay: u32) -> Value {
    json!({
        "httpGet": {"path": path, "port": port, "scheme": "HTTP"},
        "initialDelaySeconds": delay,
        "timeoutSeconds": 2,
        "periodSeconds": 10,
        "successThreshold": 1,
        "failureThreshold": 3
    })
}

/// How many Nodes the pods are spread over.
pub const NODES: usize = 200;

/// The name of Node `i` (`0..NODES`).
pub fn node_name(i: usize) -> String {
    format!("worker-{:03}", i % NODES)
}

/// Node `i`: what the pods' `nodeName` refers to. A pod bound to a Node that does not
/// exist is collected by the pod garbage collector after 40 s (on a real cluster and on
/// the embedded server alike), so the Nodes exist before the pods.
pub fn node(i: usize) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node_name(i),
        "labels": {"kubernetes.io/hostname": node_name(i), "kubernetes.io/os": "linux"}}})
}

/// Pod `i` in `namespace`, owned by the [`owner`] with `owner_uid`.
pub fn pod(namespace: &str, i: usize, owner_uid: &str) -> Value {
    let name = pod_name(i);
    let node = node_name(i);
    let ip = format!("10.{}.{}.{}", 20 + i / 65536 % 200, i / 256 % 256, i % 256);
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "generateName": "web-7d9f8b6c5d-",
            "labels": {
                "app.kubernetes.io/name": "web",
                "app.kubernetes.io/instance": "web-production",
                "app.kubernetes.io/version": "1.42.3",
                "app.kubernetes.io/component": "frontend",
                "app.kubernetes.io/part-of": "shop",
                "app.kubernetes.io/managed-by": "helm",
                "pod-template-hash": "7d9f8b6c5d",
                "team": format!("team-{}", i % 12),
                GEN_LABEL: "0"
            },
            "annotations": {
                "prometheus.io/scrape": "true",
                "prometheus.io/port": "9090",
                "prometheus.io/path": "/metrics",
                "kubectl.kubernetes.io/restartedAt": "2025-05-01T10:00:00Z",
                "checksum/config": "5f2b6c1e0a9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f",
                "cluster-autoscaler.kubernetes.io/safe-to-evict": "true"
            },
            "ownerReferences": [{
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "name": "web-7d9f8b6c5d",
                "uid": owner_uid,
                "controller": true,
                "blockOwnerDeletion": true
            }]
        },
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "registry.example.com/shop/web:1.42.3",
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["/usr/local/bin/web"],
                    "args": ["--config=/etc/web/config.yaml", "--listen=:8080", "--metrics-listen=:9090"],
                    "ports": [
                        {"name": "http", "containerPort": 8080, "protocol": "TCP"},
                        {"name": "metrics", "containerPort": 9090, "protocol": "TCP"}
                    ],
                    "env": env("APP", i),
                    "resources": {
                        "requests": {"cpu": "250m", "memory": "256Mi"},
                        "limits": {"cpu": "1", "memory": "512Mi"}
                    },
                    "livenessProbe": probe("/healthz", 8080, 10),
                    "readinessProbe": probe("/readyz", 8080, 5),
                    "volumeMounts": [
                        {"name": "config", "mountPath": "/etc/web", "readOnly": true},
                        {"name": "cache", "mountPath": "/var/cache/web"},
                        {"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}
                    ],
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "securityContext": {"runAsNonRoot": true, "runAsUser": 10001, "allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true}
                },
                {
                    "name": "proxy",
                    "image": "registry.example.com/infra/envoy:1.30.1",
                    "imagePullPolicy": "IfNotPresent",
                    "args": ["--config-path", "/etc/envoy/envoy.yaml", "--log-level", "warn"],
                    "ports": [{"name": "proxy", "containerPort": 15001, "protocol": "TCP"}],
                    "env": env("PROXY", i),
                    "resources": {
                        "requests": {"cpu": "100m", "memory": "64Mi"},
                        "limits": {"cpu": "500m", "memory": "128Mi"}
                    },
                    "readinessProbe": probe("/ready", 15021, 1),
                    "volumeMounts": [
                        {"name": "envoy-config", "mountPath": "/etc/envoy", "readOnly": true},
                        {"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}
                    ],
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File"
                }
            ],
            "volumes": [
                {"name": "config", "configMap": {"name": "web-config", "defaultMode": 420}},
                {"name": "envoy-config", "configMap": {"name": "envoy-config", "defaultMode": 420}},
                {"name": "cache", "emptyDir": {"sizeLimit": "1Gi"}},
                {"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
                ]}}
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "web",
            "serviceAccount": "web",
            "nodeName": node,
            "schedulerName": "default-scheduler",
            "priority": 0,
            "enableServiceLinks": true,
            "preemptionPolicy": "PreemptLowerPriority",
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            ]
        },
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "Initialized", "status": "True", "lastTransitionTime": "2025-05-01T10:00:02Z"},
                {"type": "Ready", "status": "True", "lastTransitionTime": "2025-05-01T10:00:09Z"},
                {"type": "ContainersReady", "status": "True", "lastTransitionTime": "2025-05-01T10:00:09Z"},
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2025-05-01T10:00:00Z"}
            ],
            "hostIP": format!("192.168.{}.{}", i % 200 / 250, i % 200 + 10),
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "startTime": "2025-05-01T10:00:00Z",
            "qosClass": "Burstable",
            "containerStatuses": [
                {
                    "name": "app", "ready": true, "restartCount": 0, "started": true,
                    "image": "registry.example.com/shop/web:1.42.3",
                    "containerID": format!("containerd://{:064x}", i as u128 * 7919 + 17),
                    "state": {"running": {"startedAt": "2025-05-01T10:00:03Z"}}
                },
                {
                    "name": "proxy", "ready": true, "restartCount": 0, "started": true,
                    "image": "registry.example.com/infra/envoy:1.30.1",
                    "containerID": format!("containerd://{:064x}", i as u128 * 104729 + 3),
                    "state": {"running": {"startedAt": "2025-05-01T10:00:03Z"}}
                }
            ]
        }
    })
}

/// The merge patch of update `k`: bumps the generation label of its pod to `generation`
/// and rewrites an annotation (what a controller's status/annotation updates look like).
pub fn patch(k: usize, generation: usize) -> String {
    format!(
        r#"{{"metadata":{{"labels":{{"{GEN_LABEL}":"{generation}"}},"annotations":{{"kw-bench/last-update":"update-{k:08}"}}}}}}"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_are_about_five_kilobytes_and_decode_as_pods() {
        let p = pod("bench", 12345, "00000000-0000-0000-0000-000000000000");
        let text = serde_json::to_string(&p).expect("json");
        assert!(
            (4000..6500).contains(&text.len()),
            "pod is {} bytes",
            text.len()
        );
        let typed: k8s_openapi::api::core::v1::Pod = serde_json::from_str(&text).expect("pod");
        assert_eq!(typed.spec.map(|s| s.containers.len()), Some(2));
        let patch: Value = serde_json::from_str(&patch(7, 3)).expect("patch");
        assert_eq!(patch["metadata"]["labels"][GEN_LABEL], "3");
    }
}

#[cfg(test)]
mod sizes {
    /// Prints the in-memory sizes of the pod types (`cargo test -p kubewright-bench
    /// sizes -- --nocapture`): where a cached pod's memory goes besides its strings.
    #[test]
    fn print_type_sizes() {
        use k8s_openapi::api::core::v1;
        use std::mem::size_of;
        println!(
            "Pod {} PodSpec {} PodStatus {} ObjectMeta {} Container {} EnvVar {} Volume {} Probe {} ManagedFieldsEntry {} serde_json::Value {}",
            size_of::<v1::Pod>(),
            size_of::<v1::PodSpec>(),
            size_of::<v1::PodStatus>(),
            size_of::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>(),
            size_of::<v1::Container>(),
            size_of::<v1::EnvVar>(),
            size_of::<v1::Volume>(),
            size_of::<v1::Probe>(),
            size_of::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry>(),
            size_of::<serde_json::Value>(),
        );
    }
}
