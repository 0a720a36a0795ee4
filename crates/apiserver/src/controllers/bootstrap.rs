//! The default RBAC policy a real cluster starts with (kube-apiserver's bootstrap roles)
//! and the ClusterRole aggregation controller (kube-controller-manager's
//! `clusterrole-aggregation`).
//!
//! Tests that bind a user or ServiceAccount to `view`, `edit`, `admin` or `cluster-admin`
//! behave as on a real cluster: the aggregated roles carry the union of the rules of the
//! ClusterRoles their selectors match (including ones the test adds, e.g. a CRD's
//! `aggregate-to-view` role).

use crate::http::api::ApiServer;
use crate::registry::meta::meta_str;
use crate::storage::Mutation;
use kubewright_core::LabelSelector;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

const CLUSTER_ROLES: &str = "rbac.authorization.k8s.io/clusterroles";
const CLUSTER_ROLE_BINDINGS: &str = "rbac.authorization.k8s.io/clusterrolebindings";
const RBAC_API: &str = "rbac.authorization.k8s.io/v1";

const READ: &str = "get list watch";
const WRITE: &str = "create delete deletecollection patch update";
const ALL: &str = "create delete deletecollection get list patch update watch";

/// A rule: API groups, resources and verbs, each space-separated (`-` = the core group).
type RuleSpec = (&'static str, &'static str, &'static str);

struct RoleSpec {
    name: &'static str,
    /// Extra labels (besides `kubernetes.io/bootstrapping`), e.g. aggregate-to-admin.
    labels: &'static [&'static str],
    /// For aggregated roles: the label the selector matches (`<key>: "true"`).
    aggregate_from: Option<&'static str>,
    rules: &'static [RuleSpec],
    non_resource: &'static [(&'static str, &'static str)],
}

const TO_ADMIN: &str = "rbac.authorization.k8s.io/aggregate-to-admin";
const TO_EDIT: &str = "rbac.authorization.k8s.io/aggregate-to-edit";
const TO_VIEW: &str = "rbac.authorization.k8s.io/aggregate-to-view";

/// The bootstrap ClusterRoles a workload-facing test can meet (Kubernetes 1.32).
const ROLES: &[RoleSpec] = &[
    RoleSpec {
        name: "cluster-admin",
        labels: &[],
        aggregate_from: None,
        rules: &[("*", "*", "*")],
        non_resource: &[("*", "*")],
    },
    RoleSpec {
        name: "admin",
        labels: &[],
        aggregate_from: Some(TO_ADMIN),
        rules: &[],
        non_resource: &[],
    },
    RoleSpec {
        name: "edit",
        labels: &[TO_ADMIN],
        aggregate_from: Some(TO_EDIT),
        rules: &[],
        non_resource: &[],
    },
    RoleSpec {
        name: "view",
        labels: &[TO_EDIT],
        aggregate_from: Some(TO_VIEW),
        rules: &[],
        non_resource: &[],
    },
    RoleSpec {
        name: "system:aggregate-to-admin",
        labels: &[TO_ADMIN],
        aggregate_from: None,
        rules: &[
            (
                "authorization.k8s.io",
                "localsubjectaccessreviews",
                "create",
            ),
            ("rbac.authorization.k8s.io", "rolebindings roles", ALL),
        ],
        non_resource: &[],
    },
    RoleSpec {
        name: "system:aggregate-to-edit",
        labels: &[TO_EDIT],
        aggregate_from: None,
        rules: &[
            (
                "-",
                "pods/attach pods/exec pods/portforward pods/proxy secrets services/proxy",
                READ,
            ),
            ("-", "serviceaccounts", "impersonate"),
            (
                "-",
                "pods pods/attach pods/exec pods/portforward pods/proxy",
                WRITE,
            ),
            ("-", "pods/eviction", "create"),
            (
                "-",
                "configmaps events persistentvolumeclaims replicationcontrollers \
                 replicationcontrollers/scale secrets serviceaccounts services services/proxy",
                WRITE,
            ),
            ("-", "serviceaccounts/token", "create"),
            (
                "apps",
                "daemonsets deployments deployments/rollback deployments/scale replicasets \
                 replicasets/scale statefulsets statefulsets/scale",
                WRITE,
            ),
            ("autoscaling", "horizontalpodautoscalers", WRITE),
            ("batch", "cronjobs jobs", WRITE),
            (
                "extensions",
                "daemonsets deployments deployments/rollback deployments/scale ingresses \
                 networkpolicies replicasets replicasets/scale replicationcontrollers/scale",
                WRITE,
            ),
            ("policy", "poddisruptionbudgets", WRITE),
            ("networking.k8s.io", "ingresses networkpolicies", WRITE),
            ("coordination.k8s.io", "leases", ALL),
        ],
        non_resource: &[],
    },
    RoleSpec {
        name: "system:aggregate-to-view",
        labels: &[TO_VIEW],
        aggregate_from: None,
        rules: &[
            (
                "-",
                "configmaps endpoints persistentvolumeclaims persistentvolumeclaims/status pods \
                 replicationcontrollers replicationcontrollers/scale serviceaccounts services \
                 services/status",
                READ,
            ),
            (
                "-",
                "bindings events limitranges namespaces/status pods/log pods/status \
                 replicationcontrollers/status resourcequotas resourcequotas/status",
                READ,
            ),
            ("-", "namespaces", READ),
            ("discovery.k8s.io", "endpointslices", READ),
            (
                "apps",
                "controllerrevisions daemonsets daemonsets/status deployments deployments/scale \
                 deployments/status replicasets replicasets/scale replicasets/status \
                 statefulsets statefulsets/scale statefulsets/status",
                READ,
            ),
            (
                "autoscaling",
                "horizontalpodautoscalers horizontalpodautoscalers/status",
                READ,
            ),
            ("batch", "cronjobs cronjobs/status jobs jobs/status", READ),
            (
                "extensions",
                "daemonsets daemonsets/status deployments deployments/scale deployments/status \
                 ingresses ingresses/status networkpolicies replicasets replicasets/scale \
                 replicasets/status replicationcontrollers/scale",
                READ,
            ),
            (
                "policy",
                "poddisruptionbudgets poddisruptionbudgets/status",
                READ,
            ),
            (
                "networking.k8s.io",
                "ingresses ingresses/status networkpolicies",
                READ,
            ),
        ],
        non_resource: &[],
    },
    RoleSpec {
        name: "system:basic-user",
        labels: &[],
        aggregate_from: None,
        rules: &[
            (
                "authorization.k8s.io",
                "selfsubjectaccessreviews selfsubjectrulesreviews",
                "create",
            ),
            ("authentication.k8s.io", "selfsubjectreviews", "create"),
        ],
        non_resource: &[],
    },
    RoleSpec {
        name: "system:discovery",
        labels: &[],
        aggregate_from: None,
        rules: &[],
        non_resource: &[(
            "/api /api/* /apis /apis/* /healthz /livez /openapi /openapi/* /readyz /version \
             /version/",
            "get",
        )],
    },
    RoleSpec {
        name: "system:public-info-viewer",
        labels: &[],
        aggregate_from: None,
        rules: &[],
        non_resource: &[("/healthz /livez /readyz /version /version/", "get")],
    },
    RoleSpec {
        name: "system:auth-delegator",
        labels: &[],
        aggregate_from: None,
        rules: &[
            ("authentication.k8s.io", "tokenreviews", "create"),
            ("authorization.k8s.io", "subjectaccessreviews", "create"),
        ],
        non_resource: &[],
    },
    RoleSpec {
        name: "system:monitoring",
        labels: &[],
        aggregate_from: None,
        rules: &[],
        non_resource: &[(
            "/healthz /healthz/* /livez /livez/* /metrics /metrics/slis /readyz /readyz/*",
            "get",
        )],
    },
];

/// (binding = role name, subject groups).
const BINDINGS: &[(&str, &[&str])] = &[
    ("cluster-admin", &["system:masters"]),
    ("system:basic-user", &["system:authenticated"]),
    ("system:discovery", &["system:authenticated"]),
    (
        "system:public-info-viewer",
        &["system:authenticated", "system:unauthenticated"],
    ),
    ("system:monitoring", &["system:monitoring"]),
];

fn words(s: &str) -> Vec<Value> {
    s.split_whitespace()
        .map(|w| Value::String(if w == "-" { String::new() } else { w.into() }))
        .collect()
}

fn bootstrap_meta(name: &str, extra_labels: &[&str]) -> Value {
    let mut labels = Map::new();
    labels.insert("kubernetes.io/bootstrapping".into(), "rbac-defaults".into());
    for l in extra_labels {
        labels.insert((*l).into(), "true".into());
    }
    json!({
        "name": name,
        "labels": labels,
        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
    })
}

fn cluster_role(spec: &RoleSpec) -> Value {
    let mut rules: Vec<Value> = spec
        .rules
        .iter()
        .map(|(g, r, v)| json!({"apiGroups": words(g), "resources": words(r), "verbs": words(v)}))
        .collect();
    rules.extend(
        spec.non_resource
            .iter()
            .map(|(u, v)| json!({"nonResourceURLs": words(u), "verbs": words(v)})),
    );
    let mut role = json!({
        "apiVersion": RBAC_API,
        "kind": "ClusterRole",
        "metadata": bootstrap_meta(spec.name, spec.labels),
        "rules": rules,
    });
    if let Some(label) = spec.aggregate_from {
        role["aggregationRule"] =
            json!({"clusterRoleSelectors": [{"matchLabels": {label: "true"}}]});
    }
    role
}

fn binding(role: &str, groups: &[&str]) -> Value {
    let subjects: Vec<Value> = groups
        .iter()
        .map(|g| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g}))
        .collect();
    json!({
        "apiVersion": RBAC_API,
        "kind": "ClusterRoleBinding",
        "metadata": bootstrap_meta(role, &[]),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": subjects,
    })
}

/// Creates the bootstrap ClusterRoles and ClusterRoleBindings that are missing (at start,
/// like kube-apiserver's `rbac/bootstrap-roles` post-start hook; existing objects are left
/// as they are).
pub fn ensure_policy(srv: &ApiServer) {
    let (Some(role_def), Some(binding_def)) = (
        srv.def("rbac.authorization.k8s.io", "v1", "clusterroles"),
        srv.def("rbac.authorization.k8s.io", "v1", "clusterrolebindings"),
    ) else {
        return;
    };
    for spec in ROLES {
        if srv.storage.get(CLUSTER_ROLES, "", spec.name).is_none() {
            let _ = srv.create_object(&role_def, "", cluster_role(spec), "kube-apiserver", false);
        }
    }
    for (role, groups) in BINDINGS {
        if srv.storage.get(CLUSTER_ROLE_BINDINGS, "", role).is_none() {
            let _ = srv.create_object(
                &binding_def,
                "",
                binding(role, groups),
                "kube-apiserver",
                false,
            );
        }
    }
}

/// The selectors of an aggregation rule; `None` when a selector cannot be read (the role
/// is then left alone, as the upstream controller does with invalid selectors).
fn selectors(rule: &Value) -> Option<Vec<LabelSelector>> {
    let list = rule.get("clusterRoleSelectors")?.as_array()?;
    list.iter()
        .map(|s| {
            let sel: k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector =
                serde_json::from_value(s.clone()).ok()?;
            LabelSelector::from_k8s(&sel).ok()
        })
        .collect()
}

/// ClusterRole aggregation: every ClusterRole with an `aggregationRule` gets the rules of
/// the ClusterRoles its selectors match (in name order, without duplicates; itself
/// excluded), written only when they changed.
pub fn aggregate_cluster_roles(srv: &ApiServer) {
    let (roles, _) = srv.storage.list(CLUSTER_ROLES, None);
    for role in roles.iter() {
        let Some(rule) = role.get("aggregationRule") else {
            continue;
        };
        let Some(sels) = selectors(rule) else {
            continue;
        };
        let name = meta_str(role, "name").unwrap_or_default().to_string();
        let mut want: Vec<Value> = Vec::new();
        // `list` returns objects in name order.
        for other in roles.iter() {
            if meta_str(other, "name") == Some(name.as_str()) {
                continue;
            }
            let labels = crate::registry::meta::labels(other);
            if !sels.iter().any(|s| !s.is_empty() && s.matches(&labels)) {
                continue;
            }
            for r in other
                .get("rules")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if !want.contains(r) {
                    want.push(r.clone());
                }
            }
        }
        let current = role.get("rules").cloned().unwrap_or(Value::Null);
        let want = Value::Array(want);
        let same =
            current == want || (current.is_null() && want.as_array().is_some_and(Vec::is_empty));
        if same {
            continue;
        }
        let _ = srv
            .storage
            .mutate::<()>(CLUSTER_ROLES, "", &name, |cur, _| {
                let Some(cur) = cur else {
                    return Ok(Mutation::Keep);
                };
                let mut next = (**cur).clone();
                if next.get("aggregationRule").is_none() {
                    return Ok(Mutation::Keep);
                }
                next["rules"] = want.clone();
                Ok(Mutation::Put(next))
            });
    }
}

/// The service network a real cluster starts with, as kube-apiserver creates it: the
/// default ServiceCIDR (`kubernetes`, Ready) and the `default/kubernetes` Service on the
/// first IP of the range. Written by the server itself, without managedFields. Existing
/// objects are left as they are.
pub fn ensure_service_network(srv: &ApiServer) {
    let (base, prefix) = crate::registry::service_alloc::SERVICE_CIDR;
    let now = crate::registry::meta::now_time();
    if let Some(def) = srv.def("networking.k8s.io", "v1", "servicecidrs") {
        system_put(
            srv,
            &def.storage_key(),
            "",
            json!({
                "apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR",
                "metadata": {"name": "kubernetes", "finalizers": ["networking.k8s.io/service-cidr-finalizer"]},
                "spec": {"cidrs": [format!("{base}/{prefix}")]},
                "status": {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now,
                    "reason": "", "message": "Kubernetes Service CIDR is ready"}]},
            }),
        );
    }
    let ip = crate::registry::service_alloc::first_service_ip().to_string();
    system_put(
        srv,
        "/services",
        "default",
        json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "kubernetes", "namespace": "default",
                "labels": {"component": "apiserver", "provider": "kubernetes"}},
            "spec": {"clusterIP": ip, "clusterIPs": [ip], "internalTrafficPolicy": "Cluster",
                "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
                "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}],
                "sessionAffinity": "None", "type": "ClusterIP"},
            "status": {"loadBalancer": {}},
        }),
    );
}

/// The `default/kubernetes` Service's endpoints as kube-apiserver's endpoint reconciler
/// keeps them at start: the Endpoints (`endpointslice.kubernetes.io/skip-mirror`) and
/// the EndpointSlice (`kubernetes.io/service-name`) of the server's address and port,
/// and the Service's `targetPort` set to that port. Existing objects are brought up to
/// date (a persisted server restarted on another port); the EndpointSlice's
/// generation counts its changes. Each carries the `kube-apiserver` managedFields entry
/// of a real server.
pub fn ensure_kubernetes_endpoints(srv: &ApiServer, addr: std::net::SocketAddr) {
    let ip = if addr.ip().is_unspecified() {
        "127.0.0.1".to_string()
    } else {
        addr.ip().to_string()
    };
    let port = addr.port();
    let now = crate::registry::meta::now_time();
    let managed = |api_version: &str, fields: Value| {
        json!([{"apiVersion": api_version, "fieldsType": "FieldsV1", "fieldsV1": fields,
            "manager": "kube-apiserver", "operation": "Update", "time": now}])
    };
    let https = json!([{"name": "https", "port": port, "protocol": "TCP"}]);
    // The Service: its target port follows the server's.
    let _ = srv
        .storage
        .mutate::<crate::storage::StorageError>("/services", "default", "kubernetes", |cur, _| {
            let Some(cur) = cur else {
                return Ok(Mutation::Keep);
            };
            let mut next = (**cur).clone();
            if let Some(p) = next
                .pointer_mut("/spec/ports/0/targetPort")
                .filter(|p| **p != json!(port))
            {
                *p = json!(port);
            }
            if next.pointer("/metadata/managedFields").is_none() {
                next["metadata"]["managedFields"] = managed(
                    "v1",
                    json!({"f:metadata": {"f:labels": {".": {}, "f:component": {}, "f:provider": {}}},
                        "f:spec": {"f:clusterIP": {}, "f:internalTrafficPolicy": {}, "f:ipFamilyPolicy": {},
                            "f:ports": {".": {}, "k:{\"port\":443,\"protocol\":\"TCP\"}": {".": {},
                                "f:name": {}, "f:port": {}, "f:protocol": {}, "f:targetPort": {}}},
                            "f:sessionAffinity": {}, "f:type": {}}}),
                );
            }
            Ok(if next == **cur {
                Mutation::Keep
            } else {
                Mutation::Put(next)
            })
        });
    let endpoints = json!({
        "apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": "kubernetes", "namespace": "default",
            "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"},
            "managedFields": managed("v1", json!({"f:metadata": {"f:labels": {".": {},
                "f:endpointslice.kubernetes.io/skip-mirror": {}}}, "f:subsets": {}}))},
        "subsets": [{"addresses": [{"ip": ip}], "ports": https}],
    });
    put_or_refresh(srv, "/endpoints", endpoints, &["subsets"], false);
    if let Some(def) = srv.def("discovery.k8s.io", "v1", "endpointslices") {
        let slice = json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "kubernetes", "namespace": "default", "generation": 1,
                "labels": {"kubernetes.io/service-name": "kubernetes"},
                "managedFields": managed("discovery.k8s.io/v1", json!({"f:addressType": {},
                    "f:endpoints": {}, "f:metadata": {"f:labels": {".": {},
                    "f:kubernetes.io/service-name": {}}}, "f:ports": {}}))},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [ip], "conditions": {"ready": true}}],
            "ports": https,
        });
        put_or_refresh(
            srv,
            &def.storage_key(),
            slice,
            &["endpoints", "ports"],
            true,
        );
    }
}

/// Stores `obj` in `default` unless it exists; an existing one gets `obj`'s `fields`
/// when they differ (and a new generation when `generation`).
fn put_or_refresh(srv: &ApiServer, key: &str, obj: Value, fields: &[&str], generation: bool) {
    let name = meta_str(&obj, "name").unwrap_or("").to_string();
    if srv.storage.get(key, "default", &name).is_none() {
        system_put(srv, key, "default", obj);
        return;
    }
    let _ = srv
        .storage
        .mutate::<crate::storage::StorageError>(key, "default", &name, |cur, _| {
            let Some(cur) = cur else {
                return Ok(Mutation::Keep);
            };
            let mut next = (**cur).clone();
            for f in fields {
                next[*f] = obj[*f].clone();
            }
            if next == **cur {
                return Ok(Mutation::Keep);
            }
            if generation {
                let g = next
                    .pointer("/metadata/generation")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                next["metadata"]["generation"] = json!(g + 1);
            }
            Ok(Mutation::Put(next))
        });
}

/// kube-apiserver's local APIService priorities (group, version, groupPriorityMinimum,
/// versionPriority), as a v1.36 server registers them at start.
const LOCAL_API_SERVICES: &[(&str, &str, i64, i64)] = &[
    ("", "v1", 18000, 1),
    ("admissionregistration.k8s.io", "v1", 16700, 15),
    ("apiextensions.k8s.io", "v1", 16700, 15),
    ("apps", "v1", 17800, 15),
    ("authentication.k8s.io", "v1", 17700, 15),
    ("authorization.k8s.io", "v1", 17600, 15),
    ("autoscaling", "v1", 17500, 15),
    ("autoscaling", "v2", 17500, 30),
    ("batch", "v1", 17400, 15),
    ("certificates.k8s.io", "v1", 17300, 15),
    ("coordination.k8s.io", "v1", 16500, 15),
    ("discovery.k8s.io", "v1", 16200, 15),
    ("events.k8s.io", "v1", 17750, 15),
    ("flowcontrol.apiserver.k8s.io", "v1", 16100, 21),
    ("networking.k8s.io", "v1", 17200, 15),
    ("node.k8s.io", "v1", 16300, 15),
    ("policy", "v1", 17100, 15),
    ("rbac.authorization.k8s.io", "v1", 17000, 15),
    ("resource.k8s.io", "v1", 16200, 21),
    ("scheduling.k8s.io", "v1", 16600, 15),
    ("storage.k8s.io", "v1", 16800, 15),
];

/// The APIServices of the served group versions, as kube-aggregator keeps them: one
/// local APIService (`<version>.<group>`, Available) for each built-in group version
/// (labelled `automanaged: onstart`) and for each version of a custom resource group
/// (`automanaged: true`, priorities 1000/100, removed with its last CRD).
pub fn api_services(srv: &ApiServer) {
    let Some(def) = srv.def("apiregistration.k8s.io", "v1", "apiservices") else {
        return;
    };
    let key = def.storage_key();
    let mut want: BTreeMap<String, (String, String, i64, i64, &str)> = BTreeMap::new();
    {
        let reg = srv.registry.read().unwrap_or_else(|e| e.into_inner());
        for d in reg.all() {
            let name = format!("{}.{}", d.version, d.group);
            if d.crd.is_some() {
                want.entry(name)
                    .or_insert((d.group.clone(), d.version.clone(), 1000, 100, "true"));
            } else if let Some((g, v, min, prio)) = LOCAL_API_SERVICES
                .iter()
                .find(|(g, v, ..)| *g == d.group && *v == d.version)
            {
                want.entry(name)
                    .or_insert((g.to_string(), v.to_string(), *min, *prio, "onstart"));
            }
        }
    }
    let now = crate::registry::meta::now_time();
    for (name, (group, version, min, prio, managed)) in &want {
        if srv.storage.get(&key, "", name).is_some() {
            continue;
        }
        let mut spec =
            json!({"version": version, "groupPriorityMinimum": min, "versionPriority": prio});
        let mut spec_fields =
            json!({"f:groupPriorityMinimum": {}, "f:version": {}, "f:versionPriority": {}});
        if !group.is_empty() {
            spec["group"] = json!(group);
            spec_fields["f:group"] = json!({});
        }
        system_put(
            srv,
            &key,
            "",
            json!({
                "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                "metadata": {"name": name,
                    "labels": {"kube-aggregator.kubernetes.io/automanaged": managed},
                    "managedFields": [{"apiVersion": "apiregistration.k8s.io/v1", "fieldsType": "FieldsV1",
                        "fieldsV1": {"f:metadata": {"f:labels": {".": {},
                            "f:kube-aggregator.kubernetes.io/automanaged": {}}}, "f:spec": spec_fields},
                        "manager": "kube-apiserver", "operation": "Update", "time": now}]},
                "spec": spec,
                "status": {"conditions": [{"type": "Available", "status": "True", "lastTransitionTime": now,
                    "reason": "Local", "message": "Local APIServices are always available"}]},
            }),
        );
    }
    // A custom resource group version no CRD serves any more.
    for obj in srv.storage.list(&key, None).0 {
        let name = meta_str(&obj, "name").unwrap_or("").to_string();
        let auto = obj.pointer("/metadata/labels/kube-aggregator.kubernetes.io~1automanaged");
        if auto == Some(&json!("true")) && !want.contains_key(&name) {
            let _ = srv
                .storage
                .mutate::<crate::storage::StorageError>(&key, "", &name, |_, _| {
                    Ok(Mutation::Delete)
                });
        }
    }
}

/// The PriorityClasses kube-apiserver creates at start (`scheduling/bootstrap`).
pub fn ensure_priority_classes(srv: &ApiServer) {
    let Some(def) = srv.def("scheduling.k8s.io", "v1", "priorityclasses") else {
        return;
    };
    for (name, value, description) in [
        (
            "system-node-critical",
            2_000_001_000,
            "Used for system critical pods that must not be moved from their current node.",
        ),
        (
            "system-cluster-critical",
            2_000_000_000,
            "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
        ),
    ] {
        if srv.storage.get(&def.storage_key(), "", name).is_none() {
            let pc = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": name}, "value": value, "description": description,
                "preemptionPolicy": "PreemptLowerPriority"});
            let _ = srv.create_object(&def, "", pc, "kube-apiserver", false);
        }
    }
}

/// Stores `obj` (in its storage form) unless an object of its name exists, with the
/// metadata the server sets on create.
fn system_put(srv: &ApiServer, key: &str, ns: &str, mut obj: Value) {
    let name = meta_str(&obj, "name").unwrap_or("").to_string();
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        m.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
        m.insert(
            "creationTimestamp".into(),
            json!(crate::registry::meta::now_time()),
        );
    }
    let _ = srv
        .storage
        .mutate::<crate::storage::StorageError>(key, ns, &name, |cur, _| {
            Ok(match cur {
                Some(_) => Mutation::Keep,
                None => Mutation::Put(obj),
            })
        });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_specs_render_as_rbac_objects() {
        let view = ROLES.iter().find(|r| r.name == "system:aggregate-to-view");
        let v = cluster_role(view.expect("spec"));
        assert_eq!(v["metadata"]["labels"][TO_VIEW], "true");
        assert_eq!(v["rules"][0]["apiGroups"], json!([""]));
        assert_eq!(v["rules"][0]["verbs"], json!(["get", "list", "watch"]));
        let admin = cluster_role(
            ROLES
                .iter()
                .find(|r| r.name == "cluster-admin")
                .expect("spec"),
        );
        assert_eq!(
            admin["rules"],
            json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                   {"nonResourceURLs": ["*"], "verbs": ["*"]}])
        );
        let edit = cluster_role(ROLES.iter().find(|r| r.name == "edit").expect("spec"));
        assert_eq!(
            edit["aggregationRule"]["clusterRoleSelectors"][0]["matchLabels"][TO_EDIT],
            "true"
        );
        assert_eq!(edit["metadata"]["labels"][TO_ADMIN], "true");
        let sels = selectors(&edit["aggregationRule"]).expect("selectors");
        assert!(
            sels[0].matches(&crate::registry::meta::labels(&cluster_role(
                ROLES.iter().find(|r| r.name == "view").expect("spec")
            )))
        );
    }
}
