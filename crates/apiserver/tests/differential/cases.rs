//! The differential cases: requests whose answers must match kube-apiserver's.
//!
//! Every scenario runs in a fresh namespace (`{ns}`). Cluster-scoped objects carry `{ns}`
//! in their names so that runs never collide; they are deleted by the scenario's last
//! steps. Differences that are known and accepted are listed with `.ignore(path, why)`.

use super::harness::{Auth, Scenario, Step, delete, get, patch, post, put};
use serde_json::{Value, json};

const MERGE: &str = "application/merge-patch+json";
const JSON_PATCH: &str = "application/json-patch+json";
const STRATEGIC: &str = "application/strategic-merge-patch+json";
const APPLY: &str = "application/apply-patch+yaml";
const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Groups served by kube-apiserver itself (custom resource groups of other tests and
/// runs are dropped from discovery before comparing).
fn builtin_group(name: &str) -> bool {
    name.is_empty()
        || name.ends_with(".k8s.io")
        || matches!(name, "apps" | "batch" | "autoscaling" | "policy")
}

fn only_builtin_groups(body: &mut Value) {
    if let Some(groups) = body.get_mut("groups").and_then(Value::as_array_mut) {
        groups.retain(|g| builtin_group(g["name"].as_str().unwrap_or("")));
    }
    if let Some(items) = body.get_mut("items").and_then(Value::as_array_mut) {
        items.retain(|g| builtin_group(g["metadata"]["name"].as_str().unwrap_or("")));
    }
}

const CSR_APPROVAL: &str =
    "the embedded server has no certificatesigningrequests/approval subresource";
const PROXY_SUBS: &str = "the embedded server serves no pods/proxy, services/proxy, pods/resize or pods/ephemeralcontainers";

/// `/version`, for the admin and without credentials.
pub fn version() -> Scenario {
    Scenario {
        name: "version",
        steps: vec![
            get("admin", "/version")
                .ignore("body.gitVersion", "build information differs by nature")
                .ignore("body.gitCommit", "build information differs by nature")
                .ignore("body.buildDate", "build information differs by nature")
                .ignore("body.goVersion", "build information differs by nature")
                .ignore("body.compiler", "build information differs by nature")
                .ignore("body.platform", "build information differs by nature")
                .ignore(
                    "body.minor",
                    "the embedded server reports its own Kubernetes version",
                )
                .ignore(
                    "body.emulationMinor",
                    "the embedded server reports its own Kubernetes version",
                )
                .ignore(
                    "body.minCompatibilityMinor",
                    "the embedded server reports its own Kubernetes version",
                ),
            get("anonymous", "/version")
                .by(Auth::Anonymous)
                .ignore("body.gitVersion", "build information differs by nature")
                .ignore("body.gitCommit", "build information differs by nature")
                .ignore("body.buildDate", "build information differs by nature")
                .ignore("body.goVersion", "build information differs by nature")
                .ignore("body.compiler", "build information differs by nature")
                .ignore("body.platform", "build information differs by nature")
                .ignore(
                    "body.minor",
                    "the embedded server reports its own Kubernetes version",
                )
                .ignore(
                    "body.emulationMinor",
                    "the embedded server reports its own Kubernetes version",
                )
                .ignore(
                    "body.minCompatibilityMinor",
                    "the embedded server reports its own Kubernetes version",
                ),
        ],
    }
}

/// Legacy discovery of the core group and the group list.
pub fn discovery() -> Scenario {
    Scenario {
        name: "discovery",
        steps: vec![
            get("api", "/api"),
            get("api-v1", "/api/v1")
                .ignore("body.resources[name=pods/proxy]", PROXY_SUBS)
                .ignore("body.resources[name=pods/resize]", PROXY_SUBS)
                .ignore("body.resources[name=pods/ephemeralcontainers]", PROXY_SUBS)
                .ignore("body.resources[name=services/proxy]", PROXY_SUBS),
            get("apis", "/apis").transform(only_builtin_groups),
            get("apis-apps", "/apis/apps"),
            get("apis-apps-v1", "/apis/apps/v1"),
            get("apis-autoscaling-v2", "/apis/autoscaling/v2"),
            get("apis-events-v1", "/apis/events.k8s.io/v1"),
            get("apis-apiextensions-v1", "/apis/apiextensions.k8s.io/v1"),
            get("apis-autoscaling", "/apis/autoscaling"),
            get("apis-autoscaling-v1", "/apis/autoscaling/v1"),
            get("apis-storage-v1", "/apis/storage.k8s.io/v1"),
            get("apis-resource-v1", "/apis/resource.k8s.io/v1"),
            get("apis-authorization-v1", "/apis/authorization.k8s.io/v1"),
            get("apis-missing", "/apis/nosuch.example.com/v1"),
            get("api-v2-missing", "/api/v2"),
            get("componentstatuses", "/api/v1/componentstatuses")
                .ignore("body.items", "the embedded server's control plane is always healthy; the recording cluster runs no scheduler"),
            delete("namespaces-collection", "/api/v1/namespaces"),
        ],
    }
}

/// Aggregated discovery (`apidiscovery.k8s.io/v2`).
pub fn discovery_aggregated() -> Scenario {
    Scenario {
        name: "discovery_aggregated",
        steps: vec![
            get("api", "/api")
                .header("Accept", AGGREGATED)
                .ignore("body.items[0].versions[version=v1].resources[resource=pods].subresources[subresource=proxy]", PROXY_SUBS)
                .ignore("body.items[0].versions[version=v1].resources[resource=pods].subresources[subresource=resize]", PROXY_SUBS)
                .ignore("body.items[0].versions[version=v1].resources[resource=pods].subresources[subresource=ephemeralcontainers]", PROXY_SUBS)
                .ignore("body.items[0].versions[version=v1].resources[resource=services].subresources[subresource=proxy]", PROXY_SUBS),
            get("apis", "/apis")
                .header("Accept", AGGREGATED)
                .transform(only_builtin_groups)
                .ignore("body.items[name=certificates.k8s.io].versions[version=v1].resources[resource=certificatesigningrequests].subresources[subresource=approval]", CSR_APPROVAL),
        ],
    }
}

fn cm(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"app": "web"}}, "data": {"a": "1", "b": "2"}})
}

/// ConfigMap create/get/list/update/patch/delete.
pub fn configmap_crud() -> Scenario {
    let p = "/api/v1/namespaces/{ns}/configmaps";
    Scenario {
        name: "configmap_crud",
        steps: vec![
            post("create", p, cm("web")),
            get("get", "/api/v1/namespaces/{ns}/configmaps/web"),
            get(
                "list-selected",
                "/api/v1/namespaces/{ns}/configmaps?labelSelector=app%3Dweb",
            ),
            put(
                "update",
                "/api/v1/namespaces/{ns}/configmaps/web",
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web", "labels": {"app": "web"}}, "data": {"a": "10"}}),
            ),
            patch(
                "merge-patch",
                "/api/v1/namespaces/{ns}/configmaps/web",
                MERGE,
                json!({"data": {"c": "3"}}),
            ),
            patch(
                "json-patch",
                "/api/v1/namespaces/{ns}/configmaps/web",
                JSON_PATCH,
                json!([{"op": "add", "path": "/data/d", "value": "4"}]),
            ),
            patch(
                "strategic-patch",
                "/api/v1/namespaces/{ns}/configmaps/web",
                STRATEGIC,
                json!({"metadata": {"annotations": {"note": "x"}}}),
            ),
            patch(
                "apply",
                "/api/v1/namespaces/{ns}/configmaps/applied?fieldManager=kwdiff",
                APPLY,
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}, "data": {"x": "y"}}),
            ),
            post(
                "generate-name",
                p,
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "gen-"}}),
            ),
            delete("delete", "/api/v1/namespaces/{ns}/configmaps/web"),
            get("get-deleted", "/api/v1/namespaces/{ns}/configmaps/web"),
            delete("delete-missing", "/api/v1/namespaces/{ns}/configmaps/web"),
        ],
    }
}

/// Tables and partial metadata for ConfigMaps and Secrets.
pub fn configmap_secret_tables() -> Scenario {
    Scenario {
        name: "configmap_secret_tables",
        steps: vec![
            post("create-cm", "/api/v1/namespaces/{ns}/configmaps", cm("web")),
            post(
                "create-secret",
                "/api/v1/namespaces/{ns}/secrets",
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"}, "data": {"user": "YWRtaW4="}, "stringData": {"pw": "x"}}),
            ),
            get("cm-table", "/api/v1/namespaces/{ns}/configmaps/web").table(),
            get(
                "cm-table-list",
                "/api/v1/namespaces/{ns}/configmaps?labelSelector=app%3Dweb",
            )
            .table(),
            get("secret-table", "/api/v1/namespaces/{ns}/secrets/creds").table(),
            get("cm-partial", "/api/v1/namespaces/{ns}/configmaps/web").header(
                "Accept",
                "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io",
            ),
            get(
                "cm-partial-list",
                "/api/v1/namespaces/{ns}/configmaps?labelSelector=app%3Dweb",
            )
            .header(
                "Accept",
                "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
            ),
        ],
    }
}

const PB_PARTIAL: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";
const PB_PARTIAL_LIST: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";

/// Metadata-only answers in protobuf (client-go's metadata client): an object, a list
/// and a watch of ConfigMaps and of a custom resource, which has no protobuf form of its
/// own; the forms that are not acceptable.
pub fn metadata_protobuf() -> Scenario {
    let cms = "/api/v1/namespaces/{ns}/configmaps";
    let crs = "/apis/{ns}.kwdiff.example/v1/namespaces/{ns}/widgets";
    Scenario {
        name: "metadata_protobuf",
        steps: vec![
            post("create-cm", cms, cm("web")),
            get("cm-partial", &format!("{cms}/web")).header("Accept", PB_PARTIAL),
            get("cm-partial-list", &format!("{cms}?labelSelector=app%3Dweb"))
                .header("Accept", PB_PARTIAL_LIST),
            get("cm-partial-watch", &format!("{cms}?watch=1&timeoutSeconds=1&labelSelector=app%3Dweb"))
                .header("Accept", PB_PARTIAL)
                .stream(),
            get("cm-partial-watch-list", &format!("{cms}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1&labelSelector=app%3Dweb"))
                .header("Accept", PB_PARTIAL)
                .stream()
                .ignore("body[2]", "the embedded server sends a bookmark when a watch with bookmarks times out; a real server may"),
            // Errors to a metadata-only client.
            get("cm-partial-missing", &format!("{cms}/nope")).header("Accept", PB_PARTIAL),
            get("cm-partial-only-pb-missing", &format!("{cms}/nope")).header(
                "Accept",
                "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
            ),
            // A write answered to a metadata-only client.
            patch("cm-partial-patch", &format!("{cms}/web"), MERGE, json!({"data": {"c": "3"}}))
                .header("Accept", PB_PARTIAL),
            // Without the JSON alternatives: protobuf or nothing.
            get("cm-partial-only-pb", &format!("{cms}/web")).header(
                "Accept",
                "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
            ),
            // A single object's form on a list, a list's on an object, a protobuf Table.
            get("cm-partial-on-list", cms).header(
                "Accept",
                "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
            ),
            get("cm-partial-list-on-one", &format!("{cms}/web")).header(
                "Accept",
                "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
            ),
            get("cm-table-pb", &format!("{cms}/web")).header(
                "Accept",
                "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1",
            ),
            post("create-crd", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd()),
            get("established", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.{ns}.kwdiff.example")
                .until(established),
            post(
                "create-cr",
                crs,
                json!({"apiVersion": "{ns}.kwdiff.example/v1", "kind": "Widget", "metadata": {"name": "w1", "labels": {"app": "web"}}, "spec": {"size": 3, "color": "red"}}),
            )
            .retry_on(404),
            get("cr-partial", &format!("{crs}/w1")).header("Accept", PB_PARTIAL),
            get("cr-partial-list", crs).header("Accept", PB_PARTIAL_LIST),
            get("cr-partial-watch", &format!("{crs}?watch=1&timeoutSeconds=1"))
                .header("Accept", PB_PARTIAL)
                .stream(),
            // The object itself has no protobuf form: JSON when allowed, else 406.
            get("cr-pb-or-json", &format!("{crs}/w1"))
                .header("Accept", "application/vnd.kubernetes.protobuf, application/json"),
            get("cr-pb-only", &format!("{crs}/w1"))
                .header("Accept", "application/vnd.kubernetes.protobuf"),
            delete("delete-cr", &format!("{crs}/w1")),
            delete("delete-crd", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.{ns}.kwdiff.example"),
        ],
    }
}

/// 4xx answers of writes: conflicts, invalid names, malformed bodies.
pub fn write_errors() -> Scenario {
    let p = "/api/v1/namespaces/{ns}/configmaps";
    Scenario {
        name: "write_errors",
        steps: vec![
            post("create", p, cm("web")),
            post("already-exists", p, cm("web")),
            put(
                "stale-update",
                "/api/v1/namespaces/{ns}/configmaps/web",
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web", "resourceVersion": "1"}}),
            ),
            post("invalid-name", p, cm("Bad_Name")),
            post(
                "no-name",
                p,
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}),
            ),
            post("malformed-json", p, json!(null)).raw("{\"apiVersion\": \"v1\", \"kind\": "),
            post(
                "kind-mismatch",
                p,
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}}),
            ),
            post(
                "namespace-mismatch",
                p,
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "other"}}),
            ),
            post(
                "namespace-missing",
                "/api/v1/namespaces/{ns}-missing/configmaps",
                cm("x"),
            ),
            get("get-missing", "/api/v1/namespaces/{ns}/configmaps/nope"),
            get("unknown-resource", "/api/v1/namespaces/{ns}/nosuchthings"),
        ],
    }
}

/// Invalid ListOptions, selectors and continue tokens.
pub fn list_errors() -> Scenario {
    let p = "/api/v1/namespaces/{ns}/configmaps";
    Scenario {
        name: "list_errors",
        steps: vec![
            get(
                "rv-match-without-rv",
                &format!("{p}?resourceVersionMatch=Exact"),
            ),
            get(
                "rv-match-unknown",
                &format!("{p}?resourceVersion=1&resourceVersionMatch=Newest"),
            ),
            get("bad-label-selector", &format!("{p}?labelSelector=a%20in")),
            get(
                "bad-label-selector-key",
                &format!("{p}?labelSelector=-a%3Db"),
            ),
            get(
                "bad-field-selector",
                &format!("{p}?fieldSelector=metadata.nope%3Dx"),
            ),
            get("continue-not-base64", &format!("{p}?limit=1&continue=!!!")),
            get("continue-not-json", &format!("{p}?limit=1&continue=abc")),
            get(
                "continue-unknown-version",
                &format!("{p}?limit=1&continue=e30"),
            ),
            get(
                "send-initial-events-on-list",
                &format!("{p}?sendInitialEvents=true"),
            ),
        ],
    }
}

/// Server-side apply: a missing field manager and a conflict.
pub fn apply_errors() -> Scenario {
    let obj = |v: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web"}, "data": {"k": v}});
    Scenario {
        name: "apply_errors",
        steps: vec![
            patch(
                "no-field-manager",
                "/api/v1/namespaces/{ns}/configmaps/web",
                APPLY,
                obj("a"),
            ),
            patch(
                "apply-first",
                "/api/v1/namespaces/{ns}/configmaps/web?fieldManager=first",
                APPLY,
                obj("a"),
            ),
            patch(
                "apply-conflict",
                "/api/v1/namespaces/{ns}/configmaps/web?fieldManager=second",
                APPLY,
                obj("b"),
            ),
            patch(
                "apply-forced",
                "/api/v1/namespaces/{ns}/configmaps/web?fieldManager=second&force=true",
                APPLY,
                obj("b"),
            ),
        ],
    }
}

/// Namespaces: the name label, the table, deletion.
pub fn namespace() -> Scenario {
    Scenario {
        name: "namespace",
        steps: vec![
            post(
                "create",
                "/api/v1/namespaces",
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "{ns}-x"}}),
            ),
            get("table", "/api/v1/namespaces/{ns}-x").table(),
            delete("delete", "/api/v1/namespaces/{ns}-x"),
        ],
    }
}

/// Kinds without generation tracking: ServiceAccount, Secret.
pub fn serviceaccount_secret() -> Scenario {
    Scenario {
        name: "serviceaccount_secret",
        steps: vec![
            post(
                "sa",
                "/api/v1/namespaces/{ns}/serviceaccounts",
                json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"}}),
            ),
            post(
                "secret",
                "/api/v1/namespaces/{ns}/secrets",
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"a": "b"}}),
            ),
            patch(
                "secret-patch",
                "/api/v1/namespaces/{ns}/secrets/s",
                MERGE,
                json!({"data": {"c": "ZA=="}}),
            ),
        ],
    }
}

fn deployment_body() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]}}}})
}

/// Deployments: defaults, `status: {}`, generation on spec and annotation changes, the
/// scale subresource. A paused Deployment keeps the recording cluster's controller from
/// changing more than its status.
pub fn deployment() -> Scenario {
    let p = "/apis/apps/v1/namespaces/{ns}/deployments";
    let mut paused = deployment_body();
    paused["spec"]["paused"] = json!(true);
    const CONTROLLER: &str =
        "the recording cluster's deployment controller writes status and its own managed fields";
    Scenario {
        name: "deployment",
        steps: vec![
            post(
                "create-dry-run",
                &format!("{p}?dryRun=All"),
                deployment_body(),
            ),
            post("create", p, paused),
            patch(
                "patch-annotations",
                &format!("{p}/web"),
                MERGE,
                json!({"metadata": {"annotations": {"note": "x"}}}),
            )
            .ignore("body.status", CONTROLLER)
            .ignore("body.metadata.managedFields", CONTROLLER)
            .ignore(
                "body.metadata.annotations.deployment.kubernetes.io/revision",
                CONTROLLER,
            ),
            patch(
                "patch-labels",
                &format!("{p}/web"),
                MERGE,
                json!({"metadata": {"labels": {"tier": "web"}}}),
            )
            .ignore("body.status", CONTROLLER)
            .ignore("body.metadata.managedFields", CONTROLLER)
            .ignore(
                "body.metadata.annotations.deployment.kubernetes.io/revision",
                CONTROLLER,
            ),
            patch(
                "patch-replicas",
                &format!("{p}/web"),
                MERGE,
                json!({"spec": {"replicas": 2}}),
            )
            .ignore("body.status", CONTROLLER)
            .ignore("body.metadata.managedFields", CONTROLLER)
            .ignore(
                "body.metadata.annotations.deployment.kubernetes.io/revision",
                CONTROLLER,
            ),
            get("scale", &format!("{p}/web/scale")).ignore("body.status.replicas", CONTROLLER),
        ],
    }
}

/// Services: defaults, `status.loadBalancer`, no generation.
pub fn service() -> Scenario {
    Scenario {
        name: "service",
        steps: vec![
            post(
                "create",
                "/api/v1/namespaces/{ns}/services",
                json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
                    "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}}),
            ),
            patch(
                "patch-selector",
                "/api/v1/namespaces/{ns}/services/web",
                MERGE,
                json!({"spec": {"selector": {"app": "other"}}}),
            ),
            get("table", "/api/v1/namespaces/{ns}/services/web").table(),
        ],
    }
}

/// Access reviews and identities: anonymous requests, a user without rights.
pub fn auth() -> Scenario {
    let ssar = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": "get", "resource": "configmaps", "namespace": "{ns}"}}});
    let ssar2 = ssar.clone();
    Scenario {
        name: "auth",
        steps: vec![
            get("anonymous-list", "/api/v1/namespaces/{ns}/configmaps").by(Auth::Anonymous),
            get("anonymous-discovery", "/api").by(Auth::Anonymous),
            get("bad-token", "/api/v1/namespaces/{ns}/configmaps").by(Auth::BadToken),
            get("alice-list", "/api/v1/namespaces/{ns}/configmaps").by(Auth::Alice),
            get("alice-get", "/api/v1/namespaces/{ns}/configmaps/x").by(Auth::Alice),
            post(
                "admin-ssar",
                "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                ssar.clone(),
            ),
            post(
                "alice-ssar",
                "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                ssar,
            )
            .by(Auth::Alice),
            post(
                "alice-whoami",
                "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}),
            )
            .by(Auth::Alice),
            post(
                "bind-alice-view",
                "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                    "metadata": {"name": "alice-view"},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
                    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]}),
            ),
            post(
                "alice-ssar-allowed",
                "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                ssar2,
            )
            .by(Auth::Alice),
            get(
                "alice-list-allowed",
                "/api/v1/namespaces/{ns}/configmaps?labelSelector=app%3Dnone",
            )
            .by(Auth::Alice),
        ],
    }
}

/// A watch's events: the initial ADDED of an existing object, then the stream's end.
pub fn watch() -> Scenario {
    Scenario {
        name: "watch",
        steps: vec![
            post("create", "/api/v1/namespaces/{ns}/configmaps", cm("web")),
            get("watch", "/api/v1/namespaces/{ns}/configmaps?watch=1&timeoutSeconds=1&labelSelector=app%3Dweb")
                .stream(),
        ],
    }
}

fn crd() -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.{ns}.kwdiff.example"},
        "spec": {"group": "{ns}.kwdiff.example", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                    {"name": "Color", "type": "string", "jsonPath": ".spec.color", "priority": 1}],
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "integer"}, "color": {"type": "string"}}},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}})
}

fn established(r: &Value) -> bool {
    r["body"]["status"]["conditions"]
        .as_array()
        .is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "Established" && c["status"] == "True")
        })
}

/// A CRD and its custom resources: the CRD's initial status, the table with printer
/// columns, generation, deletion with the cleanup finalizer.
pub fn custom_resource() -> Scenario {
    let crs = "/apis/{ns}.kwdiff.example/v1/namespaces/{ns}/widgets";
    Scenario {
        name: "custom_resource",
        steps: vec![
            post("create-crd", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd()),
            get("established", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.{ns}.kwdiff.example")
                .until(established),
            post(
                "create-cr",
                crs,
                json!({"apiVersion": "{ns}.kwdiff.example/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": 3, "color": "red"}, "status": {"ignored": true}}),
            )
            .retry_on(404),
            // A value of the wrong type: FieldValueTypeInvalid. (One only: kube-apiserver
            // reports several in Go's map order, which varies.)
            post(
                "create-cr-wrong-type",
                crs,
                json!({"apiVersion": "{ns}.kwdiff.example/v1", "kind": "Widget", "metadata": {"name": "w2"}, "spec": {"size": "big", "color": "blue"}}),
            ),
            patch("patch-spec", &format!("{crs}/w1"), MERGE, json!({"spec": {"size": 4}})),
            patch("patch-labels", &format!("{crs}/w1"), MERGE, json!({"metadata": {"labels": {"a": "b"}}})),
            patch("patch-status", &format!("{crs}/w1/status"), MERGE, json!({"status": {"phase": "Ready"}})),
            get("table", crs).table(),
            get("table-one", &format!("{crs}/w1")).table(),
            delete("delete-cr", &format!("{crs}/w1")),
            delete("delete-crd", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.{ns}.kwdiff.example"),
        ],
    }
}

/// Status written by server-side apply with a body of apiVersion, kind and status only,
/// as controllers write it: accepted on `/status` for a custom resource whose spec is
/// required and for a built-in kind; the merged object is what must be whole.
pub fn status_apply() -> Scenario {
    let crs = "/apis/{ns}.kwdiff.example/v1/namespaces/{ns}/gadgets";
    let av = "{ns}.kwdiff.example/v1";
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.{ns}.kwdiff.example"},
        "spec": {"group": "{ns}.kwdiff.example", "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "required": ["spec"], "properties": {
                    "spec": {"type": "object", "required": ["size"], "properties": {"size": {"type": "integer"}}},
                    "status": {"type": "object", "properties": {
                        "phase": {"type": "string"}, "observed": {"type": "integer"}}}}}}}]}});
    let status = |phase: &str| json!({"apiVersion": av, "kind": "Gadget", "status": {"phase": phase, "observed": 1}});
    let svc_status = json!({"apiVersion": "v1", "kind": "Service", "status": {"conditions": [
        {"type": "Ready", "status": "True", "reason": "Up", "message": "serving",
         "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    Scenario {
        name: "status_apply",
        steps: vec![
            post("create-crd", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd),
            get("established", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.{ns}.kwdiff.example")
                .until(established),
            post("create-cr", crs, json!({"apiVersion": av, "kind": "Gadget", "metadata": {"name": "g1"}, "spec": {"size": 3}}))
                .retry_on(404),
            patch("apply-status", &format!("{crs}/g1/status?fieldManager=status-writer&force=true"), APPLY, status("Ready")),
            patch("apply-status-again", &format!("{crs}/g1/status?fieldManager=status-writer"), APPLY, status("Done")),
            patch(
                "apply-status-named",
                &format!("{crs}/g1/status?fieldManager=other-writer"),
                APPLY,
                json!({"apiVersion": av, "kind": "Gadget", "metadata": {"name": "g1"}, "status": {"observed": 2}}),
            ),
            patch("apply-status-only-to-main", &format!("{crs}/g1?fieldManager=main-writer"), APPLY, status("Ignored")),
            patch("apply-create-without-spec", &format!("{crs}/g2?fieldManager=main-writer"), APPLY, status("New")),
            patch("apply-status-of-missing", &format!("{crs}/g3/status?fieldManager=status-writer"), APPLY, status("Gone")),
            get("get-cr", &format!("{crs}/g1")),
            post(
                "create-service",
                "/api/v1/namespaces/{ns}/services",
                json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
                    "spec": {"ports": [{"port": 80}]}}),
            ),
            patch(
                "apply-service-status",
                "/api/v1/namespaces/{ns}/services/web/status?fieldManager=status-writer&force=true",
                APPLY,
                svc_status,
            ),
            get("get-service", "/api/v1/namespaces/{ns}/services/web"),
            delete("delete-crd", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.{ns}.kwdiff.example"),
        ],
    }
}

/// Webhook URLs as kube-apiserver validates them (`ValidateWebhookURL`): https, a host,
/// no user information, fragment or query; in admission webhook configurations and in a
/// CRD's conversion webhook.
pub fn webhook_urls() -> Scenario {
    let hook = |name: &str, url: &str| {
        json!({"name": name, "admissionReviewVersions": ["v1"],
        "sideEffects": "None", "clientConfig": {"url": url}})
    };
    Scenario {
        name: "webhook_urls",
        steps: vec![
            post(
                "validating-bad-urls",
                "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations?dryRun=All",
                json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                    "metadata": {"name": "{ns}-urls"},
                    "webhooks": [hook("a.b.example.com", "https://user:pw@host.example:8443/p?x=1#frag"),
                                 hook("c.d.example.com", "http://"),
                                 hook("e.f.example.com", "https://host.example/ok")]}),
            ),
            post(
                "mutating-user-info",
                "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations?dryRun=All",
                json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
                    "metadata": {"name": "{ns}-urls"},
                    "webhooks": [hook("a.b.example.com", "https://token@host.example/")]}),
            ),
            post(
                "crd-conversion-bad-url",
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions?dryRun=All",
                json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                    "metadata": {"name": "things.{ns}.kwdiff.example"},
                    "spec": {"group": "{ns}.kwdiff.example", "scope": "Namespaced",
                        "names": {"plural": "things", "singular": "thing", "kind": "Thing"},
                        "conversion": {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"],
                            "clientConfig": {"url": "https://u:p@h/x?q=1#f"}}},
                        "versions": [
                            {"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}}},
                            {"name": "v2", "served": true, "storage": false, "schema": {"openAPIV3Schema": {"type": "object"}}}]}}),
            ),
        ],
    }
}

/// Malformed JSON bodies: Go's decoder's wording (truncated, trailing data, empty, a bad
/// token, a bad escape), not serde's.
pub fn malformed_json() -> Scenario {
    let p = "/api/v1/namespaces/{ns}/configmaps";
    let cm = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}"#;
    Scenario {
        name: "malformed_json",
        steps: vec![
            post("truncated", p, json!({})).raw(&cm[..cm.len() - 2]),
            post("trailing", p, json!({})).raw(&format!("{cm} trailing")),
            post("empty", p, json!({})).raw(""),
            post("bad-token", p, json!({})).raw(r#"{"apiVersion": tru}"#),
            post("bad-escape", p, json!({})).raw(r#"{"apiVersion":"v\q1"}"#),
            post("truncated-in-string", p, json!({})).raw(r#"{"apiVersion":"v1"#),
            post(
                "create",
                p,
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "m"}}),
            ),
            put("put-truncated", &format!("{p}/m"), json!({})).raw(&cm[..cm.len() - 2]),
            patch("merge-truncated", &format!("{p}/m"), MERGE, json!({}))
                .raw(r#"{"data":{"a":"b"}"#),
            patch(
                "strategic-truncated",
                &format!("{p}/m"),
                STRATEGIC,
                json!({}),
            )
            .raw(r#"{"data":"#),
            patch(
                "json-patch-truncated",
                &format!("{p}/m"),
                "application/json-patch+json",
                json!({}),
            )
            .raw(r#"[{"op":"add","path":"/data","value":{}}"#),
            patch(
                "json-patch-trailing",
                &format!("{p}/m"),
                "application/json-patch+json",
                json!({}),
            )
            .raw(r#"[] x"#),
            patch("merge-empty", &format!("{p}/m"), MERGE, json!({})).raw(""),
        ],
    }
}

/// Invalid create, update, patch and delete options.
pub fn options_errors() -> Scenario {
    let p = "/api/v1/namespaces/{ns}/configmaps";
    Scenario {
        name: "options_errors",
        steps: vec![
            post("create", p, cm("web")),
            post("create-dry-run-bad", &format!("{p}?dryRun=Some"), cm("x")),
            post(
                "create-field-validation-bad",
                &format!("{p}?fieldValidation=Bogus"),
                cm("x"),
            ),
            post(
                "create-field-manager-too-long",
                &format!("{p}?fieldManager={}", "m".repeat(130)),
                cm("x"),
            ),
            put(
                "update-dry-run-bad",
                &format!("{p}/web?dryRun=Some"),
                cm("web"),
            ),
            patch(
                "patch-dry-run-bad",
                &format!("{p}/web?dryRun=Some"),
                MERGE,
                json!({}),
            ),
            patch(
                "patch-force-non-apply",
                &format!("{p}/web?force=true"),
                MERGE,
                json!({}),
            ),
            delete("delete-dry-run-bad", &format!("{p}/web?dryRun=Some")),
            delete(
                "delete-propagation-bad",
                &format!("{p}/web?propagationPolicy=Sometimes"),
            ),
            delete(
                "delete-propagation-and-orphan",
                &format!("{p}/web?propagationPolicy=Orphan&orphanDependents=true"),
            ),
            get(
                "list-rv-match-exact-zero",
                &format!("{p}?resourceVersionMatch=Exact&resourceVersion=0"),
            ),
            get(
                "list-rv-match-with-continue",
                &format!("{p}?resourceVersionMatch=NotOlderThan&resourceVersion=1&continue=abc"),
            ),
            get(
                "watch-initial-events-without-match",
                &format!("{p}?watch=1&sendInitialEvents=true"),
            ),
            // One bad label per request: kube-apiserver reports several in Go's random
            // map order.
            post(
                "invalid-label-value",
                p,
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "l", "labels": {"a": "b c"}}}),
            ),
            post(
                "invalid-label-key",
                p,
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "l", "labels": {"-k": "v"}}}),
            ),
        ],
    }
}

/// Creates of many kinds, as dry runs (no controller acts on them): which kinds get a
/// generation, the status they start with, their defaults.
pub fn generation_and_status() -> Scenario {
    let ns = |plural: &str| format!("/api/v1/namespaces/{{ns}}/{plural}?dryRun=All");
    let g =
        |group: &str, plural: &str| format!("/apis/{group}/namespaces/{{ns}}/{plural}?dryRun=All");
    let c = |group: &str, plural: &str| format!("/apis/{group}/{plural}?dryRun=All");
    let tpl = json!({"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]}});
    let sel = json!({"matchLabels": {"app": "x"}});
    let obj = |av: &str, kind: &str, name: &str, extra: Value| {
        let mut o = json!({"apiVersion": av, "kind": kind, "metadata": {"name": name}});
        if let (Some(o), Some(e)) = (o.as_object_mut(), extra.as_object()) {
            o.extend(e.clone());
        }
        o
    };
    Scenario {
        name: "generation_and_status",
        steps: vec![
            post("replicationcontroller", &ns("replicationcontrollers"),
                obj("v1", "ReplicationController", "rc", json!({"spec": {"selector": {"app": "x"}, "template": tpl}}))),
            post("resourcequota", &ns("resourcequotas"), obj("v1", "ResourceQuota", "rq", json!({"spec": {}}))),
            post("persistentvolumeclaim", &ns("persistentvolumeclaims"),
                obj("v1", "PersistentVolumeClaim", "pvc", json!({"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}))),
            post("limitrange", &ns("limitranges"), obj("v1", "LimitRange", "lr", json!({"spec": {"limits": [{"type": "Container", "max": {"cpu": "1"}}]}}))),
            post("podtemplate", &ns("podtemplates"), obj("v1", "PodTemplate", "pt", json!({"template": tpl}))),
            post("endpoints", &ns("endpoints"), obj("v1", "Endpoints", "ep", json!({}))),
            post("replicaset", &g("apps/v1", "replicasets"), obj("apps/v1", "ReplicaSet", "rs", json!({"spec": {"selector": sel, "template": tpl}}))),
            post("statefulset", &g("apps/v1", "statefulsets"),
                obj("apps/v1", "StatefulSet", "sts", json!({"spec": {"selector": sel, "template": tpl, "serviceName": "x"}}))),
            post("daemonset", &g("apps/v1", "daemonsets"), obj("apps/v1", "DaemonSet", "ds", json!({"spec": {"selector": sel, "template": tpl}}))),
            post("job", &g("batch/v1", "jobs"),
                obj("batch/v1", "Job", "job", json!({"spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}})))
                .ignore("body.metadata.labels", "the Job's generated selector carries its uid")
                .ignore("body.spec.selector", "the Job's generated selector carries its uid")
                .ignore("body.spec.template.metadata.labels", "the Job's generated selector carries its uid"),
            post("cronjob", &g("batch/v1", "cronjobs"),
                obj("batch/v1", "CronJob", "cj", json!({"spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}}}))),
            post("hpa", &g("autoscaling/v2", "horizontalpodautoscalers"),
                obj("autoscaling/v2", "HorizontalPodAutoscaler", "hpa", json!({"spec": {"scaleTargetRef": {"kind": "Deployment", "name": "d", "apiVersion": "apps/v1"}, "maxReplicas": 3}}))),
            post("pdb", &g("policy/v1", "poddisruptionbudgets"), obj("policy/v1", "PodDisruptionBudget", "pdb", json!({"spec": {"minAvailable": 1, "selector": sel}}))),
            post("networkpolicy", &g("networking.k8s.io/v1", "networkpolicies"), obj("networking.k8s.io/v1", "NetworkPolicy", "np", json!({"spec": {"podSelector": {}}}))),
            post("ingress", &g("networking.k8s.io/v1", "ingresses"),
                obj("networking.k8s.io/v1", "Ingress", "ing", json!({"spec": {"defaultBackend": {"service": {"name": "s", "port": {"number": 80}}}}}))),
            post("lease", &g("coordination.k8s.io/v1", "leases"), obj("coordination.k8s.io/v1", "Lease", "lease", json!({"spec": {}}))),
            post("endpointslice", &g("discovery.k8s.io/v1", "endpointslices"),
                obj("discovery.k8s.io/v1", "EndpointSlice", "es", json!({"addressType": "IPv4", "endpoints": []}))),
            post("role", &g("rbac.authorization.k8s.io/v1", "roles"), obj("rbac.authorization.k8s.io/v1", "Role", "role", json!({"rules": []}))),
            post("ingressclass", &c("networking.k8s.io/v1", "ingressclasses"),
                obj("networking.k8s.io/v1", "IngressClass", "{ns}-ic", json!({"spec": {"controller": "example.com/x"}}))),
            post("priorityclass", &c("scheduling.k8s.io/v1", "priorityclasses"), obj("scheduling.k8s.io/v1", "PriorityClass", "{ns}-pc", json!({"value": 5}))),
            post("storageclass", &c("storage.k8s.io/v1", "storageclasses"), obj("storage.k8s.io/v1", "StorageClass", "{ns}-sc", json!({"provisioner": "x.io/y"}))),
            post("validatingwebhookconfiguration", &c("admissionregistration.k8s.io/v1", "validatingwebhookconfigurations"),
                obj("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "{ns}-vwc", json!({}))),
            post("flowschema", &c("flowcontrol.apiserver.k8s.io/v1", "flowschemas"),
                obj("flowcontrol.apiserver.k8s.io/v1", "FlowSchema", "{ns}-fs", json!({"spec": {"priorityLevelConfiguration": {"name": "global-default"}}}))),
            post("persistentvolume", &c("v1", "persistentvolumes").replace("/apis/v1", "/api/v1"),
                obj("v1", "PersistentVolume", "{ns}-pv", json!({"spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp"}}}))),
            post("volumeattachment", &c("storage.k8s.io/v1", "volumeattachments"),
                obj("storage.k8s.io/v1", "VolumeAttachment", "{ns}-va", json!({"spec": {"attacher": "x", "nodeName": "n", "source": {"persistentVolumeName": "pv"}}}))),
        ],
    }
}

/// Pods: defaults and admission, the table, deletion.
pub fn pod() -> Scenario {
    Scenario {
        name: "pod",
        steps: vec![
            post(
                "create",
                "/api/v1/namespaces/{ns}/pods",
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "c", "image": "nginx:1.25", "ports": [{"containerPort": 80}],
                        "resources": {"limits": {"cpu": "100m", "memory": "64Mi"}}}]}}),
            )
            .transform(token_volume),
            get("table", "/api/v1/namespaces/{ns}/pods?labelSelector=app%3Dweb").table(),
            patch("patch-image", "/api/v1/namespaces/{ns}/pods/web", STRATEGIC,
                json!({"spec": {"containers": [{"name": "c", "image": "nginx:1.26"}]}}))
            .transform(token_volume)
            .ignore("body.status", "the recording cluster's scheduler reports the pod unschedulable"),
            // A dry-run binding answers Success and binds nothing.
            post(
                "binding-dry-run",
                "/api/v1/namespaces/{ns}/pods/web/binding?dryRun=All",
                json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "web"},
                    "target": {"apiVersion": "v1", "kind": "Node", "name": "nowhere"}}),
            ),
            get("after-dry-run-binding", "/api/v1/namespaces/{ns}/pods/web")
                .transform(token_volume)
                .ignore("body.status", "the recording cluster's scheduler reports the pod unschedulable"),
        ],
    }
}

const PB: &str = "application/vnd.kubernetes.protobuf, application/json";

/// Built-in kinds answered in protobuf, as the client's informers ask for them: writes,
/// an object, a list and a watch of a pod (defaults and all), a Secret, RBAC objects;
/// compared as the JSON they decode to.
pub fn builtin_protobuf() -> Scenario {
    let pods = "/api/v1/namespaces/{ns}/pods";
    let pod_ignores = |step: Step| {
        step.transform(token_volume).ignore(
            "body.status",
            "the recording cluster's scheduler reports the pod unschedulable",
        )
    };
    Scenario {
        name: "builtin_protobuf",
        steps: vec![
            pod_ignores(
                post(
                    "create-pod",
                    pods,
                    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "labels": {"app": "web"}},
                        "spec": {"containers": [{"name": "c", "image": "nginx:1.25", "ports": [{"containerPort": 80}],
                            "env": [{"name": "A", "value": "1"}],
                            "readinessProbe": {"httpGet": {"path": "/", "port": 80}},
                            "resources": {"limits": {"cpu": "100m", "memory": "64Mi"}}}],
                            "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]}}),
                )
                .header("Accept", PB),
            ),
            pod_ignores(get("get-pod", &format!("{pods}/web")).header("Accept", PB)),
            get("list-pods", &format!("{pods}?labelSelector=app%3Dweb"))
                .header("Accept", PB)
                .transform(token_volume)
                .ignore("body.items[name=web].status", "the recording cluster's scheduler reports the pod unschedulable"),
            get("watch-pods", &format!("{pods}?watch=1&timeoutSeconds=1&labelSelector=app%3Dweb"))
                .header("Accept", PB)
                .stream()
                .transform(token_volume)
                .ignore("body[0].object.status", "the recording cluster's scheduler reports the pod unschedulable"),
            post(
                "create-secret",
                "/api/v1/namespaces/{ns}/secrets",
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "type": "Opaque", "stringData": {"a": "b"}, "data": {"c": "ZA=="}}),
            )
            .header("Accept", PB),
            post(
                "create-role",
                "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "r"},
                    "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]}),
            )
            .header("Accept", PB),
            post(
                "create-rolebinding",
                "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "rb"},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
                    "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"}]}),
            )
            .header("Accept", PB),
            get("get-missing", &format!("{pods}/nope")).header("Accept", PB),
        ],
    }
}

/// Quantities as kube-apiserver stores them: canonical forms of plain quantities
/// (`emptyDir.sizeLimit`, an HPA target), core/v1 ResourceLists rounded up to milli
/// (container resources, limit ranges, pod templates of other groups), another group's
/// ResourceList not rounded (a RuntimeClass's overhead), JSON numbers, malformed ones.
pub fn quantities() -> Scenario {
    let sizes = [
        "1.5Ki",
        "0.5Ki",
        "1Ki",
        "100000000000000000000",
        "1e100",
        "12e-10",
        "9.99999999999999999999999E",
        "1.0",
        "010",
        "1.",
        "0.0000000001",
        "1000000Ki",
        "1500m",
        "1024e3",
        "1.5e2",
        "+1Ki",
        "1.5",
        "12345678901234567890123",
        "0.5e3",
        "1024Mi",
        "1000m",
        "0.1234567890123",
        "1.5Mi",
        "1E",
        "1000",
        "1.5E",
        "123.456789m",
        "1e-3",
        "10e-1",
        "00",
        ".5",
        "1.5n",
        "5Ei",
        "9Ei",
        "0.3Ki",
        "1023.5Ki",
        "1e-10",
        "100e-3",
        "1e+3",
        "1e19",
        "1.23456789123456789123456789",
        "0.001Ki",
        "1000u",
        "10e2",
        "1e-1",
        "5e-1",
        "E",
        "1000000000000000000000",
        "1e21",
    ];
    let volumes: Vec<Value> = sizes
        .iter()
        .enumerate()
        .map(|(i, q)| json!({"name": format!("v{i}"), "emptyDir": {"sizeLimit": q}}))
        .collect();
    let pod = |name: &str, resources: Value, volumes: Value| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"automountServiceAccountToken": false, "volumes": volumes,
                "containers": [{"name": "c", "image": "nginx:1.25", "resources": resources}]}})
    };
    let pods = "/api/v1/namespaces/{ns}/pods?dryRun=All";
    Scenario {
        name: "quantities",
        steps: vec![
            post(
                "pod",
                pods,
                pod(
                    "q",
                    json!({"limits": {"cpu": "0.1234567890123", "memory": "1.5Gi", "ephemeral-storage": "2000m"},
                        "requests": {"cpu": 0.1, "memory": 1000000}}),
                    Value::Array(volumes),
                ),
            ),
            post(
                "bad-format",
                pods,
                pod("b", json!({"limits": {"cpu": "1.5.5"}}), json!([])),
            ),
            post(
                "bad-suffix",
                pods,
                pod(
                    "b",
                    json!({}),
                    json!([{"name": "v", "emptyDir": {"sizeLimit": "1e"}}]),
                ),
            ),
            // Resource requirements kube-apiserver refuses (one resource each: Go visits
            // its maps in random order).
            post(
                "negative",
                pods,
                pod("b", json!({"requests": {"memory": "-1Gi"}}), json!([])),
            ),
            post(
                "negative-limit",
                pods,
                pod("b", json!({"limits": {"cpu": "-1"}}), json!([])),
            ),
            post(
                "above-limit",
                pods,
                pod(
                    "b",
                    json!({"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}),
                    json!([]),
                ),
            ),
            post(
                "extended-without-limit",
                pods,
                pod("b", json!({"requests": {"example.com/x": "1"}}), json!([])),
            ),
            post(
                "extended-unequal",
                pods,
                pod(
                    "b",
                    json!({"requests": {"example.com/x": "1"}, "limits": {"example.com/x": "2"}}),
                    json!([]),
                ),
            ),
            post(
                "extended-fraction",
                pods,
                pod(
                    "b",
                    json!({"limits": {"example.com/x": "1500m"}}),
                    json!([]),
                ),
            ),
            post(
                "unknown-name",
                pods,
                pod("b", json!({"limits": {"foo": "1"}}), json!([])),
            ),
            post(
                "negative-size-limit",
                pods,
                pod(
                    "b",
                    json!({}),
                    json!([{"name": "v", "emptyDir": {"sizeLimit": "-1Ki"}}]),
                ),
            ),
            post(
                "template-above-limit",
                "/apis/apps/v1/namespaces/{ns}/deployments?dryRun=All",
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                    "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}},
                        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}}}]}}}}),
            ),
            post(
                "limit-range",
                "/api/v1/namespaces/{ns}/limitranges?dryRun=All",
                json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "l"},
                    "spec": {"limits": [{"type": "Container", "max": {"cpu": "0.1234567890123", "memory": "1024Mi"}}]}}),
            ),
            post(
                "deployment",
                "/apis/apps/v1/namespaces/{ns}/deployments?dryRun=All",
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                    "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}},
                        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"cpu": "0.1234567890123"}}}]}}}}),
            ),
            post(
                "runtime-class",
                "/apis/node.k8s.io/v1/runtimeclasses?dryRun=All",
                json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "rc-{ns}"},
                    "handler": "h", "overhead": {"podFixed": {"cpu": "0.1234567890123", "memory": "0.5"}}}),
            ),
            post(
                "hpa",
                "/apis/autoscaling/v2/namespaces/{ns}/horizontalpodautoscalers?dryRun=All",
                json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "h"},
                    "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "d", "apiVersion": "apps/v1"}, "maxReplicas": 3,
                        "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "AverageValue", "averageValue": "0.1234567890123"}}}]}}),
            ),
        ],
    }
}

/// Token and subject access reviews.
pub fn reviews() -> Scenario {
    let sar = |user: &str, groups: Value| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": user, "groups": groups, "resourceAttributes": {"verb": "get", "resource": "pods", "namespace": "{ns}"}}})
    };
    Scenario {
        name: "reviews",
        steps: vec![
            post(
                "token-bogus",
                "/apis/authentication.k8s.io/v1/tokenreviews",
                json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": "bogus"}}),
            ),
            post(
                "token-alice",
                "/apis/authentication.k8s.io/v1/tokenreviews",
                json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": "{alice-token}"}}),
            ),
            post(
                "sar-alice",
                "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                sar("alice", json!(["system:authenticated"])),
            ),
            post(
                "sar-masters",
                "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                sar("bob", json!(["system:masters"])),
            ),
            post(
                "lsar",
                "/apis/authorization.k8s.io/v1/namespaces/{ns}/localsubjectaccessreviews",
                json!({"apiVersion": "authorization.k8s.io/v1", "kind": "LocalSubjectAccessReview",
                    "spec": {"user": "bob", "groups": ["system:masters"], "resourceAttributes": {"verb": "get", "resource": "pods", "namespace": "{ns}"}}}),
            ),
            post(
                "sar-non-resource",
                "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                    "spec": {"user": "carol", "groups": ["system:authenticated"], "nonResourceAttributes": {"verb": "get", "path": "/api"}}}),
            ),
        ],
    }
}

/// A streaming list: the initial events, then the bookmark that ends them.
pub fn watch_list() -> Scenario {
    Scenario {
        name: "watch_list",
        steps: vec![
            post("create", "/api/v1/namespaces/{ns}/configmaps", cm("web")),
            get(
                "watch-list",
                "/api/v1/namespaces/{ns}/configmaps?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1&labelSelector=app%3Dweb",
            )
            .stream()
            .ignore("body[2]", "the embedded server sends a bookmark when a watch with bookmarks times out; a real server may"),
            delete("delete-collection", "/api/v1/namespaces/{ns}/configmaps?labelSelector=app%3Dweb"),
        ],
    }
}

/// A watch from a resourceVersion: the changes after it, as MODIFIED and DELETED events.
pub fn watch_changes() -> Scenario {
    let one = "/api/v1/namespaces/{ns}/configmaps/web";
    Scenario {
        name: "watch_changes",
        steps: vec![
            post("create", "/api/v1/namespaces/{ns}/configmaps", cm("web")),
            patch("modify", one, MERGE, json!({"data": {"c": "3"}})),
            delete("delete", one),
            get(
                "watch-from-create",
                "/api/v1/namespaces/{ns}/configmaps?watch=1&resourceVersion={rv:create}&timeoutSeconds=1&fieldSelector=metadata.name%3Dweb",
            )
            .stream(),
            get(
                "watch-one-from-create",
                "/api/v1/namespaces/{ns}/configmaps?watch=1&resourceVersion={rv:create}&timeoutSeconds=1&fieldSelector=metadata.name%3Dweb",
            )
            .header("Accept", "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io")
            .stream(),
        ],
    }
}

/// Deletion with finalizers: marked, no finalizer added while deleting, gone when the last
/// one is removed.
pub fn finalizers() -> Scenario {
    let one = "/api/v1/namespaces/{ns}/configmaps/held";
    Scenario {
        name: "finalizers",
        steps: vec![
            post(
                "create",
                "/api/v1/namespaces/{ns}/configmaps",
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "held", "finalizers": ["example.com/hold"]}}),
            ),
            delete("delete", one),
            get("get-deleting", one),
            patch(
                "add-finalizer",
                one,
                MERGE,
                json!({"metadata": {"finalizers": ["example.com/hold", "example.com/more"]}}),
            ),
            patch(
                "remove-finalizer",
                one,
                MERGE,
                json!({"metadata": {"finalizers": null}}),
            ),
            get("get-gone", one),
        ],
    }
}

/// A CRD without printer columns (the table gets Age), with schema defaults, a scale
/// subresource and a cluster scope.
pub fn custom_resource_defaults() -> Scenario {
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.{ns}.kwdiff.example"},
        "spec": {"group": "{ns}.kwdiff.example", "scope": "Cluster",
            "names": {"plural": "gadgets", "kind": "Gadget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "replicas": {"type": "integer", "default": 1},
                        "mode": {"type": "string", "default": "auto"}}},
                    "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}}}}}}]}});
    let crs = "/apis/{ns}.kwdiff.example/v1/gadgets";
    Scenario {
        name: "custom_resource_defaults",
        steps: vec![
            post("create-crd", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd),
            get("established", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.{ns}.kwdiff.example")
                .until(established),
            post(
                "create-cr",
                crs,
                json!({"apiVersion": "{ns}.kwdiff.example/v1", "kind": "Gadget", "metadata": {"name": "{ns}-g"}, "spec": {}}),
            )
            .retry_on(404),
            get("table", &format!("{crs}/{{ns}}-g")).table(),
            get("scale", &format!("{crs}/{{ns}}-g/scale")),
            patch("scale-patch", &format!("{crs}/{{ns}}-g/scale"), MERGE, json!({"spec": {"replicas": 3}})),
            get("list", crs),
            delete("delete-cr", &format!("{crs}/{{ns}}-g")),
            delete("delete-crd", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.{ns}.kwdiff.example"),
        ],
    }
}

/// Odd requests: bad parameters, preconditions, methods and media types.
pub fn misc_errors() -> Scenario {
    let p = "/api/v1/namespaces/{ns}/configmaps";
    Scenario {
        name: "misc_errors",
        steps: vec![
            post("create", p, cm("web")),
            get("bad-resource-version", &format!("{p}?resourceVersion=abc")),
            get("bad-limit", &format!("{p}?limit=abc")),
            post(
                "create-with-resource-version",
                p,
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "rv", "resourceVersion": "5"}}),
            ),
            put(
                "update-uid-mismatch",
                &format!("{p}/web"),
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web", "uid": "00000000-0000-0000-0000-000000000000"}}),
            ),
            put("update-name-mismatch", &format!("{p}/web"), cm("other")),
            put("update-missing", &format!("{p}/nope"), cm("nope")),
            patch("patch-unsupported-type", &format!("{p}/web"), "application/xml", json!({})),
            patch("patch-missing", &format!("{p}/nope"), MERGE, json!({"data": {"a": "b"}})),
            post("post-to-object", &format!("{p}/web"), cm("web")),
            delete("delete-uid-precondition", &format!("{p}/web"))
                .json(json!({"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}})),
            get("get-as-yaml", &format!("{p}/web")).header("Accept", "application/yaml"),
            get("not-acceptable", &format!("{p}/web")).header("Accept", "text/html"),
        ],
    }
}

/// Strategic merge patch directives and JSON patch errors on a PodTemplate (lists with
/// merge keys, no controller writes to it): merging by key, `$setElementOrder`,
/// `$patch: delete|replace`, `$retainKeys`, `$deleteFromPrimitiveList`, `null`, and the
/// errors of a bad directive, a missing merge key and failing JSON patch operations.
pub fn strategic_patches() -> Scenario {
    let p = "/api/v1/namespaces/{ns}/podtemplates";
    let one = "/api/v1/namespaces/{ns}/podtemplates/t";
    let containers = |c: Value| json!({"template": {"spec": {"containers": c}}});
    Scenario {
        name: "strategic_patches",
        steps: vec![
            post(
                "create",
                p,
                json!({"apiVersion": "v1", "kind": "PodTemplate",
                    "metadata": {"name": "t", "labels": {"a": "1", "b": "2"}},
                    "template": {"metadata": {"labels": {"app": "t"}}, "spec": {
                        "containers": [{"name": "c", "image": "nginx:1.25", "args": ["a", "b"],
                            "env": [{"name": "A", "value": "1"}],
                            "ports": [{"containerPort": 80}]}],
                        "volumes": [{"name": "v", "emptyDir": {}}]}}}),
            ),
            patch(
                "env-merged-by-name",
                one,
                STRATEGIC,
                containers(json!([{"name": "c", "env": [{"name": "B", "value": "2"}]}])),
            ),
            patch(
                "container-added",
                one,
                STRATEGIC,
                containers(json!([{"name": "d", "image": "busybox:1.36"}])),
            ),
            patch(
                "set-element-order",
                one,
                STRATEGIC,
                json!({"template": {"spec": {"$setElementOrder/containers": [{"name": "d"}, {"name": "c"}],
                    "containers": [{"name": "c", "image": "nginx:1.26"}]}}}),
            ),
            patch(
                "port-merged-by-container-port",
                one,
                STRATEGIC,
                containers(
                    json!([{"name": "c", "ports": [{"containerPort": 80, "name": "http"}, {"containerPort": 443}]}]),
                ),
            ),
            patch(
                "args-replaced",
                one,
                STRATEGIC,
                containers(json!([{"name": "c", "args": ["x"]}])),
            ),
            patch(
                "env-replaced",
                one,
                STRATEGIC,
                containers(
                    json!([{"name": "c", "env": [{"name": "Z", "value": "z"}, {"$patch": "replace"}]}]),
                ),
            ),
            patch(
                "container-deleted",
                one,
                STRATEGIC,
                containers(json!([{"name": "d", "$patch": "delete"}])),
            ),
            patch(
                "volume-retain-keys",
                one,
                STRATEGIC,
                json!({"template": {"spec": {"volumes": [{"name": "v", "$retainKeys": ["configMap", "name"], "configMap": {"name": "cm"}}]}}}),
            ),
            patch(
                "label-deleted-with-null",
                one,
                STRATEGIC,
                json!({"metadata": {"labels": {"a": null}}}),
            ),
            patch(
                "map-replaced",
                one,
                STRATEGIC,
                json!({"metadata": {"labels": {"$patch": "replace", "c": "3"}}}),
            ),
            patch(
                "delete-from-primitive-list",
                one,
                STRATEGIC,
                json!({"metadata": {"finalizers": ["example.com/a", "example.com/b"]}}),
            ),
            patch(
                "delete-from-primitive-list-2",
                one,
                STRATEGIC,
                json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["example.com/a", "example.com/b"]}}),
            ),
            patch(
                "bad-directive",
                one,
                STRATEGIC,
                json!({"metadata": {"labels": {"$patch": "bogus"}}}),
            ),
            patch(
                "missing-merge-key",
                one,
                STRATEGIC,
                containers(json!([{"image": "nginx:1.27"}])),
            ),
            patch("strategic-not-an-object", one, STRATEGIC, json!(["x"])),
            patch("merge-not-an-object", one, MERGE, json!(["x"])),
            patch(
                "json-patch-test-fails",
                one,
                JSON_PATCH,
                json!([{"op": "test", "path": "/metadata/labels/b", "value": "nope"}]),
            ),
            patch(
                "json-patch-remove-missing",
                one,
                JSON_PATCH,
                json!([{"op": "remove", "path": "/metadata/labels/zzz"}]),
            ),
            patch(
                "json-patch-bad-op",
                one,
                JSON_PATCH,
                json!([{"op": "frobnicate", "path": "/metadata/labels/b"}]),
            ),
            patch(
                "json-patch-not-a-list",
                one,
                JSON_PATCH,
                json!({"op": "add", "path": "/metadata/labels/b", "value": "x"}),
            ),
            patch(
                "json-patch-add-and-move",
                one,
                JSON_PATCH,
                json!([{"op": "add", "path": "/metadata/labels/m", "value": "x"},
                    {"op": "move", "from": "/metadata/labels/m", "path": "/metadata/labels/n"},
                    {"op": "copy", "from": "/metadata/labels/n", "path": "/metadata/labels/o"}]),
            ),
            patch(
                "json-patch-array-append",
                one,
                JSON_PATCH,
                json!([{"op": "add", "path": "/template/spec/containers/0/args/-", "value": "y"}]),
            ),
            get("final", one),
        ],
    }
}

/// The normalised response is a 404.
fn gone(r: &Value) -> bool {
    r["status"] == 404
}

/// Deletion options: dry run, propagation policies (the `orphan` and
/// `foregroundDeletion` finalizers), grace periods, delete collection with a selector.
pub fn deletion_options() -> Scenario {
    let p = "/api/v1/namespaces/{ns}/configmaps";
    let opts = |o: Value| {
        let mut v = json!({"apiVersion": "v1", "kind": "DeleteOptions"});
        if let (Some(v), Some(o)) = (v.as_object_mut(), o.as_object()) {
            v.extend(o.clone());
        }
        v
    };
    let labelled = |name: &str, tier: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"tier": tier}}, "data": {"k": "v"}});
    Scenario {
        name: "deletion_options",
        steps: vec![
            post("create-a", p, labelled("a", "x")),
            post("create-b", p, labelled("b", "z")),
            post("create-c", p, labelled("c", "y")),
            delete("delete-dry-run", &format!("{p}/a?dryRun=All")),
            get("still-there", &format!("{p}/a")),
            delete("delete-orphan", &format!("{p}/a"))
                .json(opts(json!({"propagationPolicy": "Orphan"}))),
            // The garbage collector removes the orphan finalizer: a has no dependents.
            get("gone-after-orphan", &format!("{p}/a")).until(gone),
            delete("delete-foreground", &format!("{p}/b"))
                .json(opts(json!({"propagationPolicy": "Foreground"}))),
            // The garbage collector removes the foregroundDeletion finalizer: b has no
            // dependents.
            get("gone-after-foreground", &format!("{p}/b")).until(gone),
            delete(
                "delete-background-grace",
                &format!("{p}/c?gracePeriodSeconds=30"),
            )
            .json(opts(json!({"propagationPolicy": "Background"}))),
            delete("delete-orphan-dependents-false", &format!("{p}/nope"))
                .json(opts(json!({"orphanDependents": false}))),
            delete("delete-both-orphan-and-policy", &format!("{p}/nope")).json(opts(
                json!({"orphanDependents": true, "propagationPolicy": "Orphan"}),
            )),
            post("create-d", p, labelled("d", "x")),
            post("create-e", p, labelled("e", "y")),
            delete(
                "delete-collection-dry-run",
                &format!("{p}?labelSelector=tier%3Dx&dryRun=All"),
            ),
            delete("delete-collection", &format!("{p}?labelSelector=tier%3Dx")),
            get("list-left", &format!("{p}?labelSelector=tier")),
            delete(
                "delete-collection-field-selector",
                &format!("{p}?fieldSelector=metadata.name%3De"),
            ),
            get("list-empty", &format!("{p}?labelSelector=tier")),
        ],
    }
}

/// Empty lists and maps in optional fields: kube-apiserver decodes into Go structs whose
/// optional slices and maps are `omitempty`, so an empty one is dropped, while required
/// ones and empty structs stay.
pub fn empty_collections() -> Scenario {
    Scenario {
        name: "empty_collections",
        steps: vec![
            post(
                "configmap",
                "/api/v1/namespaces/{ns}/configmaps",
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "e", "labels": {}, "annotations": {}, "finalizers": [], "ownerReferences": []},
                    "data": {}, "binaryData": {}}),
            ),
            post(
                "podtemplate",
                "/api/v1/namespaces/{ns}/podtemplates",
                json!({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "e"},
                    "template": {"metadata": {"labels": {}}, "spec": {
                        "containers": [{"name": "c", "image": "nginx:1.25", "args": [], "command": [],
                            "env": [], "ports": [], "volumeMounts": [], "resources": {"limits": {}, "requests": {}},
                            "securityContext": {}}],
                        "initContainers": [], "volumes": [], "tolerations": [], "nodeSelector": {},
                        "imagePullSecrets": [], "securityContext": {"supplementalGroups": []}}}}),
            ),
            patch(
                "patch-to-empty",
                "/api/v1/namespaces/{ns}/configmaps/e",
                MERGE,
                json!({"metadata": {"labels": {"a": "b"}}, "data": {"k": "v"}}),
            ),
            patch(
                "json-patch-to-empty",
                "/api/v1/namespaces/{ns}/configmaps/e",
                JSON_PATCH,
                json!([{"op": "remove", "path": "/metadata/labels/a"}, {"op": "remove", "path": "/data/k"}]),
            ),
            post(
                "role",
                "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "e"},
                    "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"], "resourceNames": []}]}),
            ),
            post(
                "role-no-rules",
                "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "f"},
                    "rules": []}),
            ),
            post(
                "service",
                "/api/v1/namespaces/{ns}/services",
                json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "e"},
                    "spec": {"ports": [{"port": 80}], "selector": {}, "externalIPs": []}}),
            ),
        ],
    }
}

/// Zero values of optional scalars: Go drops `""`, `0` and `false` of its non-pointer
/// `omitempty` fields and keeps those of pointer fields.
pub fn zero_scalars() -> Scenario {
    Scenario {
        name: "zero_scalars",
        steps: vec![
            post(
                "podtemplate",
                "/api/v1/namespaces/{ns}/podtemplates?dryRun=All",
                json!({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "z", "generateName": ""},
                "template": {"spec": {
                    "hostname": "", "subdomain": "", "hostNetwork": false, "hostPID": false,
                    "priorityClassName": "", "serviceAccountName": "", "nodeName": "",
                    "automountServiceAccountToken": false,
                    "enableServiceLinks": false, "shareProcessNamespace": false,
                    "containers": [{"name": "c", "image": "nginx:1.25", "workingDir": "", "stdin": false,
                        "tty": false, "stdinOnce": false,
                        "ports": [{"containerPort": 80, "hostPort": 0, "hostIP": "", "name": ""}],
                        "securityContext": {"privileged": false, "runAsUser": 0, "readOnlyRootFilesystem": false}}]}}}),
            ),
            post(
                "service",
                "/api/v1/namespaces/{ns}/services?dryRun=All",
                json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "z"},
                "spec": {"ports": [{"port": 80, "nodePort": 0, "name": ""}], "sessionAffinity": "", "externalName": "",
                    "publishNotReadyAddresses": false, "loadBalancerIP": ""}}),
            ),
            post(
                "deployment",
                "/apis/apps/v1/namespaces/{ns}/deployments?dryRun=All",
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "z"},
                "spec": {"replicas": 0, "minReadySeconds": 0, "paused": false, "selector": {"matchLabels": {"app": "z"}},
                    "template": {"metadata": {"labels": {"app": "z"}}, "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]}}}}),
            ),
            post(
                "configmap",
                "/api/v1/namespaces/{ns}/configmaps?dryRun=All",
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "z", "generation": 0, "namespace": ""},
                "data": {"a": ""}, "immutable": false}),
            ),
        ],
    }
}

/// Server-side apply ownership: fields dropped from an applied configuration are removed
/// when no one else owns them, shared ownership of equal values, an update taking a
/// field over, list-map items by key (containers), and apply with the Update manager's
/// conflict.
pub fn apply_ownership() -> Scenario {
    let cm = "/api/v1/namespaces/{ns}/configmaps/own";
    let pt = "/api/v1/namespaces/{ns}/podtemplates/own";
    let data = |d: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "own"}, "data": d});
    let containers = |c: Value| {
        json!({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "own"},
            "template": {"spec": {"containers": c}}})
    };
    Scenario {
        name: "apply_ownership",
        steps: vec![
            patch(
                "a-applies-a-b",
                &format!("{cm}?fieldManager=a"),
                APPLY,
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "own", "labels": {"x": "1"}},
                    "data": {"a": "1", "b": "2"}}),
            ),
            patch(
                "a-drops-b-and-label",
                &format!("{cm}?fieldManager=a"),
                APPLY,
                data(json!({"a": "1"})),
            ),
            patch(
                "b-shares-a",
                &format!("{cm}?fieldManager=b"),
                APPLY,
                data(json!({"a": "1", "c": "3"})),
            ),
            patch(
                "a-drops-a",
                &format!("{cm}?fieldManager=a"),
                APPLY,
                data(json!({"d": "4"})),
            ),
            patch(
                "c-updates-a",
                &format!("{cm}?fieldManager=c"),
                MERGE,
                json!({"data": {"a": "changed"}}),
            ),
            patch(
                "b-conflicts-with-c",
                &format!("{cm}?fieldManager=b"),
                APPLY,
                data(json!({"a": "1", "c": "3"})),
            ),
            patch(
                "b-dry-run-force",
                &format!("{cm}?fieldManager=b&force=true&dryRun=All"),
                APPLY,
                data(json!({"a": "1", "c": "3"})),
            ),
            patch(
                "b-empty-apply",
                &format!("{cm}?fieldManager=b"),
                APPLY,
                data(json!({})),
            ),
            get("cm-final", cm),
            patch(
                "pt-a",
                &format!("{pt}?fieldManager=a"),
                APPLY,
                containers(
                    json!([{"name": "c", "image": "nginx:1.25", "env": [{"name": "E", "value": "1"}]}]),
                ),
            ),
            patch(
                "pt-b",
                &format!("{pt}?fieldManager=b"),
                APPLY,
                containers(json!([{"name": "d", "image": "busybox:1.36"}])),
            ),
            patch(
                "pt-a-changes-env",
                &format!("{pt}?fieldManager=a"),
                APPLY,
                containers(
                    json!([{"name": "c", "image": "nginx:1.25", "env": [{"name": "F", "value": "2"}]}]),
                ),
            ),
            patch(
                "pt-a-drops-c",
                &format!("{pt}?fieldManager=a"),
                APPLY,
                containers(json!([])),
            ),
            get("pt-final", pt),
        ],
    }
}

/// Watches with a label selector: an object that stops matching is DELETED from the
/// watch, one that starts matching is ADDED.
pub fn watch_selectors() -> Scenario {
    let p = "/api/v1/namespaces/{ns}/configmaps";
    let one = "/api/v1/namespaces/{ns}/configmaps/w";
    let tier = |t: &str| json!({"metadata": {"labels": {"tier": t}}});
    Scenario {
        name: "watch_selectors",
        steps: vec![
            post("create", p, json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "w", "labels": {"tier": "x"}}})),
            patch("to-y", one, MERGE, tier("y")),
            patch("to-x", one, MERGE, tier("x")),
            patch("annotate", one, MERGE, json!({"metadata": {"annotations": {"n": "1"}}})),
            delete("delete", one),
            get("watch-x", &format!("{p}?watch=1&resourceVersion={{rv:create}}&timeoutSeconds=1&labelSelector=tier%3Dx")).stream(),
            get("watch-y", &format!("{p}?watch=1&resourceVersion={{rv:create}}&timeoutSeconds=1&labelSelector=tier%3Dy")).stream(),
            get("watch-name", &format!("{p}?watch=1&resourceVersion={{rv:create}}&timeoutSeconds=1&fieldSelector=metadata.name%3Dw")).stream(),
        ],
    }
}

/// The status subresource: a write to the object ignores its status, a write to
/// `/status` ignores everything else (a Service: no controller of the recording cluster
/// writes its status).
pub fn status_subresource() -> Scenario {
    let p = "/api/v1/namespaces/{ns}/services";
    let one = "/api/v1/namespaces/{ns}/services/st";
    let lb = json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}});
    Scenario {
        name: "status_subresource",
        steps: vec![
            post(
                "create",
                p,
                json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "st"},
                "spec": {"type": "LoadBalancer", "allocateLoadBalancerNodePorts": false,
                    "ports": [{"port": 80}], "selector": {"app": "st"}}, "status": lb.clone()}),
            ),
            patch(
                "patch-status-on-object",
                one,
                MERGE,
                json!({"status": lb.clone(), "metadata": {"labels": {"a": "1"}}}),
            ),
            // Not compared yet: metadata changes through `/status` (a Service keeps them,
            // a custom resource and kinds using ResetObjectMetaForStatus drop them; the
            // embedded server drops them for every kind).
            patch(
                "patch-status",
                &format!("{one}/status"),
                MERGE,
                json!({"status": lb.clone(), "spec": {"selector": {"app": "other"}}}),
            ),
            get("get", one),
            get("get-status", &format!("{one}/status")),
            patch(
                "status-apply",
                &format!("{one}/status?fieldManager=st"),
                APPLY,
                json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "st"},
                    "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.11"}]}}}),
            ),
            patch(
                "status-of-missing",
                "/api/v1/namespaces/{ns}/services/nope/status",
                MERGE,
                json!({"status": lb}),
            ),
        ],
    }
}

/// What `/status` writes keep of metadata, kind by kind (each kind's status strategy):
/// a Service keeps label, annotation and finalizer changes and its writer owns them; a
/// Pod drops owner references; a Deployment drops labels; a VolumeAttachment
/// (`ResetObjectMetaForStatus`), a FlowSchema and a custom resource drop every change; a
/// CRD keeps them (kubernetes#137681). A namespace's spec.finalizers change only through
/// `/finalize`, which keeps metadata changes.
pub fn status_metadata() -> Scenario {
    let svc = "/api/v1/namespaces/{ns}/services/sm";
    let pod = "/api/v1/namespaces/{ns}/pods/sm";
    let dep = "/apis/apps/v1/namespaces/{ns}/deployments/web";
    let va = "/apis/storage.k8s.io/v1/volumeattachments/{ns}-va";
    let fs = "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas/{ns}-fs";
    let crd_path =
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.{ns}.kwdiff.example";
    let cr = "/apis/{ns}.kwdiff.example/v1/namespaces/{ns}/widgets/w1";
    let meta = json!({"labels": {"changed": "yes"}, "annotations": {"note": "x"}});
    let owner = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "6b7f0f5e-0000-4000-8000-000000000001"}]);
    let mut paused = deployment_body();
    paused["spec"]["paused"] = json!(true);
    const CONTROLLER: &str =
        "the recording cluster's deployment controller writes status and its own managed fields";
    const APF: &str =
        "kube-apiserver's flow control configuration controller writes FlowSchema status";
    Scenario {
        name: "status_metadata",
        steps: vec![
            post("create-service", "/api/v1/namespaces/{ns}/services",
                json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "sm", "labels": {"app": "sm"}},
                    "spec": {"ports": [{"port": 80}], "selector": {"app": "sm"}}})),
            patch("service-status", &format!("{svc}/status"), MERGE,
                json!({"metadata": {"labels": {"app": null, "changed": "yes"}, "annotations": {"note": "x"},
                    "finalizers": ["example.com/hold"]}, "spec": {"selector": {"app": "other"}},
                    "status": {"loadBalancer": {}}})),
            patch("service-status-apply", &format!("{svc}/status?fieldManager=st"), APPLY,
                json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "sm", "labels": {"applied": "yes"}},
                    "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.20"}]}}})),
            patch("service-release", svc, MERGE, json!({"metadata": {"finalizers": null}})),
            post("create-pod", "/api/v1/namespaces/{ns}/pods",
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "sm", "labels": {"app": "sm"}},
                    "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]}}))
            .transform(token_volume),
            patch("pod-status", &format!("{pod}/status"), MERGE,
                json!({"metadata": {"labels": {"changed": "yes"}, "annotations": {"note": "x"}, "ownerReferences": owner},
                    "status": {"message": "hello"}}))
            .transform(token_volume),
            post("create-deployment", "/apis/apps/v1/namespaces/{ns}/deployments", paused),
            patch("deployment-status", &format!("{dep}/status"), MERGE,
                json!({"metadata": meta.clone(), "status": {"observedGeneration": 1}}))
            .ignore("body.status", CONTROLLER)
            .ignore("body.metadata.managedFields", CONTROLLER)
            .ignore("body.metadata.annotations.deployment.kubernetes.io/revision", CONTROLLER),
            post("create-volumeattachment", "/apis/storage.k8s.io/v1/volumeattachments",
                json!({"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": "{ns}-va"},
                    "spec": {"attacher": "x.example.com", "nodeName": "n", "source": {"persistentVolumeName": "pv"}}})),
            patch("volumeattachment-status", &format!("{va}/status"), MERGE,
                json!({"metadata": meta.clone(), "status": {"attached": true}})),
            delete("delete-volumeattachment", va),
            post("create-flowschema", "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas",
                json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": {"name": "{ns}-fs"},
                    "spec": {"priorityLevelConfiguration": {"name": "global-default"}}}))
            .ignore("body.status", APF),
            patch("flowschema-status", &format!("{fs}/status"), MERGE,
                json!({"metadata": meta.clone(), "status": {"conditions": [{"type": "Example", "status": "True"}]}}))
            .ignore("body.status", APF)
            .ignore("body.metadata.managedFields", APF),
            delete("delete-flowschema", fs).ignore("body.status", APF),
            post("create-crd", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd()),
            get("established", crd_path).until(established),
            patch("crd-status", &format!("{crd_path}/status"), MERGE, json!({"metadata": meta.clone()})),
            post("create-cr", "/apis/{ns}.kwdiff.example/v1/namespaces/{ns}/widgets",
                json!({"apiVersion": "{ns}.kwdiff.example/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": 3}}))
            .retry_on(404),
            patch("cr-status", &format!("{cr}/status"), MERGE,
                json!({"metadata": meta, "spec": {"size": 4}, "status": {"phase": "Ready"}})),
            delete("delete-crd", crd_path),
            patch("namespace-finalizers", "/api/v1/namespaces/{ns}", MERGE,
                json!({"spec": {"finalizers": []}})),
            put("namespace-finalize", "/api/v1/namespaces/{ns}/finalize",
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "{ns}",
                    "labels": {"kubernetes.io/metadata.name": "{ns}", "finalized": "yes"}},
                    "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Terminating"}})),
        ],
    }
}

/// Everything after the first line of a message (kube-apiserver appends a cmp.Diff of
/// the pod spec, whose spacing Go's cmp randomizes): dropped on both sides.
fn first_line_of_message(r: &mut Value) {
    for path in ["/message", "/details/causes/0/message"] {
        if let Some(m) = r.pointer_mut(path)
            && let Some((first, _)) = m.as_str().and_then(|t| t.split_once('\n'))
        {
            *m = json!(first);
        }
    }
}

/// Fields an update may not change: an immutable ConfigMap's and Secret's data, a
/// Secret's type, workload selectors, a StatefulSet's spec outside its mutable fields, a
/// RoleBinding's roleRef, a Service's cluster IP, a StorageClass's parameters, a pod's
/// spec outside its mutable fields.
pub fn immutable_fields() -> Scenario {
    let cms = "/api/v1/namespaces/{ns}/configmaps";
    let secrets = "/api/v1/namespaces/{ns}/secrets";
    let apps = "/apis/apps/v1/namespaces/{ns}";
    let tpl = |app: &str| json!({"metadata": {"labels": {"app": app}}, "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]}});
    let mut paused = deployment_body();
    paused["spec"]["paused"] = json!(true);
    let moved = json!({"spec": {"selector": {"matchLabels": {"app": "web", "tier": "x"}},
        "template": {"metadata": {"labels": {"app": "web", "tier": "x"}}}}});
    const CONTROLLER: &str = "the recording cluster's controllers write status, annotations and their own managed fields";
    Scenario {
        name: "immutable_fields",
        steps: vec![
            post("create-configmap", cms, json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "frozen"}, "immutable": true, "data": {"a": "1"}, "binaryData": {"b": "AQI="}})),
            patch("configmap-data", &format!("{cms}/frozen"), MERGE, json!({"data": {"a": "2"}, "binaryData": {"b": null}})),
            patch("configmap-unfreeze", &format!("{cms}/frozen"), MERGE, json!({"immutable": false})),
            patch("configmap-unfreeze-null", &format!("{cms}/frozen"), MERGE, json!({"immutable": null})),
            patch("configmap-labels", &format!("{cms}/frozen"), MERGE, json!({"metadata": {"labels": {"a": "b"}}})),
            post("create-secret", secrets, json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "frozen"}, "immutable": true, "stringData": {"a": "1"}})),
            patch("secret-data", &format!("{secrets}/frozen"), MERGE, json!({"stringData": {"a": "2"}})),
            patch("secret-unfreeze", &format!("{secrets}/frozen"), MERGE, json!({"immutable": false})),
            post("create-typed-secret", secrets, json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "typed"}, "type": "example.com/a", "data": {"a": "MQ=="}})),
            patch("secret-type", &format!("{secrets}/typed"), MERGE, json!({"type": "example.com/b"})),
            post("create-deployment", &format!("{apps}/deployments"), paused),
            patch("deployment-selector", &format!("{apps}/deployments/web"), MERGE, moved.clone())
                .ignore("body.status", CONTROLLER)
                .ignore("body.metadata.managedFields", CONTROLLER)
                .ignore("body.metadata.annotations.deployment.kubernetes.io/revision", CONTROLLER),
            post("create-replicaset", &format!("{apps}/replicasets"), json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {"name": "web"}, "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}}, "template": tpl("web")}})),
            patch("replicaset-selector", &format!("{apps}/replicasets/web"), MERGE,
                json!({"spec": {"selector": {"matchLabels": {"app": "web", "tier": "x"}, "matchExpressions": [{"key": "k", "operator": "In", "values": ["a", "b"]}]},
                    "template": {"metadata": {"labels": {"app": "web", "tier": "x", "k": "a"}}}}}))
                .ignore("body.status", CONTROLLER)
                .ignore("body.metadata.managedFields", CONTROLLER),
            post("create-statefulset", &format!("{apps}/statefulsets"), json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
                "metadata": {"name": "db"}, "spec": {"replicas": 0, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}}, "template": tpl("db")}})),
            patch("statefulset-service-name", &format!("{apps}/statefulsets/db"), MERGE, json!({"spec": {"serviceName": "other"}}))
                .ignore("body.status", CONTROLLER)
                .ignore("body.metadata.managedFields", CONTROLLER),
            patch("statefulset-replicas", &format!("{apps}/statefulsets/db"), MERGE, json!({"spec": {"replicas": 0, "minReadySeconds": 5}}))
                .ignore("body.status", CONTROLLER)
                .ignore("body.metadata.managedFields", CONTROLLER),
            post("create-rolebinding", "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "rb"},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
                    "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}]})),
            patch("rolebinding-roleref", "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings/rb", MERGE,
                json!({"roleRef": {"name": "edit"}})),
            post("create-storageclass", "/apis/storage.k8s.io/v1/storageclasses", json!({"apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass", "metadata": {"name": "{ns}-sc"}, "provisioner": "x.example.com", "parameters": {"a": "1"}})),
            patch("storageclass-parameters", "/apis/storage.k8s.io/v1/storageclasses/{ns}-sc", MERGE,
                json!({"parameters": {"a": "2"}, "provisioner": "y.example.com"})),
            delete("delete-storageclass", "/apis/storage.k8s.io/v1/storageclasses/{ns}-sc"),
            post("create-pod", "/api/v1/namespaces/{ns}/pods",
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                    "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]}}))
            .transform(token_volume),
            patch("pod-hostname", "/api/v1/namespaces/{ns}/pods/p", MERGE, json!({"spec": {"hostname": "x"}}))
                .transform(first_line_of_message),
            patch("pod-image", "/api/v1/namespaces/{ns}/pods/p", STRATEGIC,
                json!({"spec": {"containers": [{"name": "c", "image": "nginx:1.26"}], "activeDeadlineSeconds": 60}}))
            .transform(token_volume),
        ],
    }
}

/// Services written whole (PUT) the way controllers write their desired state: the
/// allocated cluster IP and node ports kept when the request leaves them out, a changed
/// cluster IP refused, the type changed back and forth.
pub fn service_updates() -> Scenario {
    let p = "/api/v1/namespaces/{ns}/services";
    let one = "/api/v1/namespaces/{ns}/services/su";
    let svc = |spec: Value| json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "su"}, "spec": spec});
    Scenario {
        name: "service_updates",
        steps: vec![
            post(
                "create",
                p,
                svc(json!({"ports": [{"port": 80}], "selector": {"app": "su"}})),
            ),
            put(
                "put-without-ip",
                one,
                svc(json!({"ports": [{"port": 80}], "selector": {"app": "other"}})),
            ),
            put(
                "put-other-ip",
                one,
                svc(
                    json!({"clusterIP": "10.0.0.1", "ports": [{"port": 80}], "selector": {"app": "su"}}),
                ),
            ),
            put(
                "put-node-port",
                one,
                svc(
                    json!({"type": "NodePort", "ports": [{"port": 80}], "selector": {"app": "su"}}),
                ),
            ),
            put(
                "put-node-port-again",
                one,
                svc(
                    json!({"type": "NodePort", "ports": [{"port": 80}], "selector": {"app": "su"}}),
                ),
            ),
            put(
                "put-back-to-cluster-ip",
                one,
                svc(
                    json!({"type": "ClusterIP", "ports": [{"port": 80}], "selector": {"app": "su"}}),
                ),
            ),
            put(
                "put-headless",
                one,
                svc(
                    json!({"clusterIP": "None", "ports": [{"port": 80}], "selector": {"app": "su"}}),
                ),
            ),
            put(
                "put-external-name",
                one,
                svc(json!({"type": "ExternalName", "externalName": "example.com"})),
            ),
            put(
                "put-external-name-with-ip",
                one,
                svc(
                    json!({"type": "ExternalName", "externalName": "example.com", "clusterIP": "10.0.0.1"}),
                ),
            ),
            post(
                "create-load-balancer",
                p,
                json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "lb"},
                "spec": {"type": "LoadBalancer", "ports": [{"name": "a", "port": 80}, {"name": "b", "port": 81}], "selector": {"app": "su"}}}),
            ),
            patch(
                "load-balancer-ports",
                &format!("{p}/lb"),
                MERGE,
                json!({"spec": {"ports": [{"name": "a", "port": 80}, {"name": "b", "port": 82}]}}),
            ),
        ],
    }
}

/// Objects kube-apiserver's validation refuses on create (dry runs): a workload whose
/// selector does not match its template, a pod without containers or images, a Service
/// without ports, ConfigMap keys that are not valid keys.
pub fn create_validation() -> Scenario {
    let dry = |p: &str| format!("{p}?dryRun=All");
    let deployments = "/apis/apps/v1/namespaces/{ns}/deployments";
    let pods = "/api/v1/namespaces/{ns}/pods";
    let mismatched = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "bad"},
        "spec": {"selector": {"matchLabels": {"app": "a"}},
            "template": {"metadata": {"labels": {"app": "b"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
    let no_selector = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "bad"},
        "spec": {"template": {"metadata": {"labels": {"app": "b"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
    let pod = |spec: Value| json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bad"}, "spec": spec});
    Scenario {
        name: "create_validation",
        steps: vec![
            post(
                "deployment-selector-mismatch",
                &dry(deployments),
                mismatched,
            ),
            post("deployment-no-selector", &dry(deployments), no_selector),
            post(
                "pod-no-containers",
                &dry(pods),
                pod(json!({"containers": []})),
            ),
            post(
                "pod-no-image",
                &dry(pods),
                pod(json!({"containers": [{"name": "c"}]})),
            ),
            post(
                "pod-bad-container-name",
                &dry(pods),
                pod(json!({"containers": [{"name": "C_1", "image": "nginx"}]})),
            ),
            post(
                "pod-duplicate-container",
                &dry(pods),
                pod(
                    json!({"containers": [{"name": "c", "image": "nginx"}, {"name": "c", "image": "nginx"}]}),
                ),
            ),
            post(
                "pod-bad-port",
                &dry(pods),
                pod(
                    json!({"containers": [{"name": "c", "image": "nginx", "ports": [{"containerPort": 70000}]}]}),
                ),
            ),
            post(
                "service-no-ports",
                &dry("/api/v1/namespaces/{ns}/services"),
                json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "bad"}, "spec": {"selector": {"app": "a"}}}),
            ),
            post(
                "configmap-bad-key",
                &dry("/api/v1/namespaces/{ns}/configmaps"),
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bad"}, "data": {"a b": "1"}}),
            ),
        ],
    }
}

/// A structured value inside "Invalid value: …: field is immutable" (kube-apiserver
/// prints the internal Go struct's JSON, with Go's field names): masked on both sides.
fn mask_immutable_value(r: &mut Value) {
    let mask = |t: &str| -> Option<String> {
        let start = t.find("Invalid value: {")? + "Invalid value: ".len();
        let end = t.rfind(": field is immutable")?;
        (end > start).then(|| format!("{}<value>{}", &t[..start], &t[end..]))
    };
    for path in ["/message", "/details/causes/0/message"] {
        if let Some(m) = r.pointer_mut(path)
            && let Some(masked) = m.as_str().and_then(mask)
        {
            *m = json!(masked);
        }
    }
}

/// Jobs: the pod template of a running Job is immutable; a suspended Job that never
/// ran takes new scheduling directives and container resources, nothing else.
pub fn job_updates() -> Scenario {
    let jobs = "/apis/batch/v1/namespaces/{ns}/jobs";
    let job = |name: &str, suspend: bool| {
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"suspend": suspend, "template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}]}}}})
    };
    const UID: &str = "the Job's generated selector carries its uid";
    const CONTROLLER: &str = "the recording cluster's job controller writes status";
    let uid = |s: Step| {
        s.ignore("body.metadata.labels", UID)
            .ignore("body.spec.selector", UID)
            .ignore("body.spec.template.metadata.labels", UID)
            .ignore("body.status", CONTROLLER)
            .ignore("body.metadata.managedFields", CONTROLLER)
    };
    Scenario {
        name: "job_updates",
        steps: vec![
            uid(post("create-suspended", jobs, job("held", true))),
            uid(patch("suspended-resources", &format!("{jobs}/held"), STRATEGIC,
                json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "200m"}}}],
                    "nodeSelector": {"disk": "ssd"}}}}}))),
            patch("suspended-image", &format!("{jobs}/held"), STRATEGIC,
                json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}}}))
                .transform(mask_immutable_value),
            patch("completions", &format!("{jobs}/held"), MERGE, json!({"spec": {"completions": 3}})),
            uid(post("create-running", jobs, job("run", false))),
            patch("running-resources", &format!("{jobs}/run"), STRATEGIC,
                json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "200m"}}}]}}}}))
                .transform(mask_immutable_value),
        ],
    }
}

/// PersistentVolumeClaims: the spec is immutable except a volume name set once and a
/// storage class set where there was none (a pending claim: its request is immutable).
pub fn claim_updates() -> Scenario {
    let one = "/api/v1/namespaces/{ns}/persistentvolumeclaims/data";
    const CONTROLLER: &str = "the recording cluster's volume controller writes status and events";
    Scenario {
        name: "claim_updates",
        steps: vec![
            post(
                "create",
                "/api/v1/namespaces/{ns}/persistentvolumeclaims",
                json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}),
            ),
            patch(
                "access-modes",
                one,
                MERGE,
                json!({"spec": {"accessModes": ["ReadWriteMany"]}}),
            )
            .transform(first_line_of_message),
            patch(
                "storage",
                one,
                MERGE,
                json!({"spec": {"resources": {"requests": {"storage": "2Gi"}}}}),
            )
            .transform(first_line_of_message),
            patch(
                "storage-class",
                one,
                MERGE,
                json!({"spec": {"storageClassName": "{ns}-none"}}),
            )
            .ignore("body.status", CONTROLLER)
            .ignore("body.metadata.managedFields", CONTROLLER),
            patch(
                "storage-class-again",
                one,
                MERGE,
                json!({"spec": {"storageClassName": "{ns}-other"}}),
            )
            .transform(first_line_of_message),
            patch(
                "volume-name",
                one,
                MERGE,
                json!({"spec": {"volumeName": "{ns}-pv"}}),
            )
            .ignore("body.status", CONTROLLER)
            .ignore("body.metadata.managedFields", CONTROLLER)
            .ignore("body.metadata.annotations", CONTROLLER),
            patch(
                "volume-name-again",
                one,
                MERGE,
                json!({"spec": {"volumeName": "{ns}-pv2"}}),
            )
            .transform(first_line_of_message),
        ],
    }
}

/// Leases (leader election) and Events (the event recorder): MicroTime forms, lease
/// conflicts, the two Event APIs' required fields.
pub fn leases_and_events() -> Scenario {
    let leases = "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases";
    let lease = |name: &str, renew: &str| {
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name},
            "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15, "acquireTime": renew, "renewTime": renew,
                "leaseTransitions": 0}})
    };
    Scenario {
        name: "leases_and_events",
        steps: vec![
            post(
                "lease-micro",
                &format!("{leases}?dryRun=All"),
                lease("l1", "2026-12-03T14:00:00.123456Z"),
            ),
            post(
                "lease-short-fraction",
                &format!("{leases}?dryRun=All"),
                lease("l2", "2026-12-03T14:00:00.1Z"),
            ),
            post(
                "lease-no-fraction",
                &format!("{leases}?dryRun=All"),
                lease("l3", "2026-12-03T14:00:00Z"),
            ),
            post(
                "lease-nanos",
                &format!("{leases}?dryRun=All"),
                lease("l4", "2026-12-03T14:00:00.123456789Z"),
            ),
            post(
                "lease-offset",
                &format!("{leases}?dryRun=All"),
                lease("l5", "2026-12-03T16:00:00.5+02:00"),
            ),
            post(
                "lease-bad-time",
                &format!("{leases}?dryRun=All"),
                lease("l6", "yesterday"),
            ),
            post(
                "lease-negative-duration",
                &format!("{leases}?dryRun=All"),
                json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l7"},
                    "spec": {"leaseDurationSeconds": -1, "leaseTransitions": -1}}),
            ),
            post(
                "core-event",
                "/api/v1/namespaces/{ns}/events?dryRun=All",
                json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e1"},
                    "involvedObject": {"kind": "Pod", "name": "p", "namespace": "{ns}"},
                    "reason": "Started", "message": "m", "type": "Normal", "count": 1,
                    "firstTimestamp": "2026-12-03T14:00:00Z", "lastTimestamp": "2026-12-03T14:00:00Z",
                    "source": {"component": "kw"}}),
            ),
            post(
                "core-event-minimal",
                "/api/v1/namespaces/{ns}/events?dryRun=All",
                json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e2"}}),
            ),
            post(
                "events-v1",
                "/apis/events.k8s.io/v1/namespaces/{ns}/events?dryRun=All",
                json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e3"},
                    "eventTime": "2026-12-03T14:00:00.000001Z", "reportingController": "example.com/kw",
                    "reportingInstance": "kw-1", "action": "Reconcile", "reason": "Synced", "type": "Normal",
                    "regarding": {"kind": "Pod", "name": "p", "namespace": "{ns}"}, "note": "n"}),
            ),
            post(
                "events-v1-minimal",
                "/apis/events.k8s.io/v1/namespaces/{ns}/events?dryRun=All",
                json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e4"}}),
            ),
        ],
    }
}

/// Masks the storage revision in "Too large resource version: N, current: M".
fn mask_current_rv(body: &mut Value) {
    if let Some(Value::String(m)) = body.pointer_mut("/message")
        && let Some(i) = m.find("current: ")
    {
        m.truncate(i + "current: ".len());
        m.push_str("<rv>");
    }
}

/// Paginated lists: limit and continue, remainingItemCount, resourceVersion=0 with a
/// limit (served whole from the watch cache), the last page.
pub fn pagination() -> Scenario {
    let p = "/api/v1/namespaces/{ns}/configmaps";
    let cm = |n: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": n, "labels": {"page": "y"}}});
    Scenario {
        name: "pagination",
        steps: vec![
            post("create-a", p, cm("a")),
            post("create-b", p, cm("b")),
            post("create-c", p, cm("c")),
            get("page-1", &format!("{p}?labelSelector=page&limit=2")),
            get("page-1-rv0", &format!("{p}?labelSelector=page&limit=2&resourceVersion=0")),
            get("page-all", &format!("{p}?labelSelector=page&limit=3")),
            get("page-exact", &format!("{p}?labelSelector=page&limit=2&resourceVersion={{rv:create-c}}&resourceVersionMatch=Exact")),
            get("page-not-older", &format!("{p}?labelSelector=page&limit=2&resourceVersion={{rv:create-a}}&resourceVersionMatch=NotOlderThan")),
            get("list-not-older-future", &format!("{p}?labelSelector=page&resourceVersion=999999999&resourceVersionMatch=NotOlderThan"))
                .transform(mask_current_rv),
        ],
    }
}

/// Cluster IPs and node ports are unique across Services: requested values another
/// Service holds, or outside the ranges, are refused (a dry run too); ports of one
/// Service with the same `port` share a node port; a Service with more ports than the
/// node port range fails as "range is full"; deleting a Service or changing it to
/// ExternalName frees its values at once; a LoadBalancer with `externalTrafficPolicy:
/// Local` gets a health check node port. Each held IP has its IPAddress object. Values
/// are requested from the ranges' static bands, which random allocation leaves alone.
pub fn service_allocation() -> Scenario {
    let p = "/api/v1/namespaces/{ns}/services";
    let ip = "/apis/networking.k8s.io/v1/ipaddresses/10.0.0.12";
    let svc = |name: &str, spec: Value| json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec});
    let many: Vec<Value> = (0..2769)
        .map(|i| json!({"name": format!("p{i}"), "port": 1000 + i}))
        .collect();
    Scenario {
        name: "service_allocation",
        steps: vec![
            post(
                "create-requested",
                p,
                svc(
                    "sa",
                    json!({"type": "NodePort", "clusterIP": "10.0.0.12", "ports": [{"name": "a", "port": 80, "nodePort": 30042}]}),
                ),
            ),
            get("ip-address", ip).ignore(
                "body.metadata.managedFields[0].fieldsV1.f:spec.f:parentRef..",
                "the embedded server takes a required pointer struct (parentRef) for one Go \
                 always writes (null when unset), so its owner does not own the struct itself",
            ),
            post(
                "ip-taken",
                p,
                svc(
                    "sb",
                    json!({"clusterIP": "10.0.0.12", "ports": [{"port": 80}]}),
                ),
            ),
            post(
                "ip-taken-dry-run",
                &format!("{p}?dryRun=All"),
                svc(
                    "sb",
                    json!({"clusterIP": "10.0.0.12", "ports": [{"port": 80}]}),
                ),
            ),
            post(
                "ip-out-of-range",
                p,
                svc(
                    "sb",
                    json!({"clusterIP": "10.1.0.5", "ports": [{"port": 80}]}),
                ),
            ),
            post(
                "port-taken",
                p,
                svc(
                    "sb",
                    json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 30042}]}),
                ),
            ),
            post(
                "port-out-of-range",
                p,
                svc(
                    "sb",
                    json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 29000}]}),
                ),
            ),
            post(
                "port-twice",
                p,
                svc(
                    "sb",
                    json!({"type": "NodePort", "ports": [{"name": "a", "port": 80, "nodePort": 30043}, {"name": "b", "port": 81, "nodePort": 30043}]}),
                ),
            ),
            post(
                "shared-port",
                p,
                svc(
                    "sc",
                    json!({"type": "NodePort", "ports": [{"name": "tcp", "port": 53, "protocol": "TCP"}, {"name": "udp", "port": 53, "protocol": "UDP"}]}),
                ),
            ),
            post(
                "range-full",
                p,
                svc("big", json!({"type": "NodePort", "ports": many})),
            ),
            delete("delete", &format!("{p}/sa")),
            get("ip-address-released", ip),
            post(
                "reuse",
                p,
                svc(
                    "sd",
                    json!({"type": "NodePort", "clusterIP": "10.0.0.12", "ports": [{"name": "a", "port": 80, "nodePort": 30042}]}),
                ),
            ),
            put(
                "health-check",
                &format!("{p}/sd"),
                svc(
                    "sd",
                    json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local", "clusterIP": "10.0.0.12", "ports": [{"name": "a", "port": 80, "nodePort": 30042}]}),
                ),
            ),
            put(
                "external-name",
                &format!("{p}/sd"),
                svc(
                    "sd",
                    json!({"type": "ExternalName", "externalName": "example.com"}),
                ),
            ),
            get("ip-address-after-external-name", ip),
            delete("delete-sd", &format!("{p}/sd")),
            delete("delete-sc", &format!("{p}/sc")),
        ],
    }
}

/// Spec validation a controller's bug commonly trips (dry-run creates): pod specs
/// (volumes and mounts, port names and protocols, env, probes, policies, tolerations,
/// node selectors, host names, user ids), workload counts, strategies and template
/// restart policies, Jobs, Services (types, ports, node ports, external names,
/// selectors), HorizontalPodAutoscalers, PodDisruptionBudgets, Ingresses, TLS Secrets
/// and RBAC rules and role references.
pub fn spec_validation() -> Scenario {
    Scenario {
        name: "spec_validation",
        steps: vec![
            post(
                "dep-negative-replicas",
                "/apis/apps/v1/namespaces/{ns}/deployments?dryRun=All",
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": -1, "selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "app", "image": "nginx"}]}}}}),
            ),
            post(
                "dep-negative-revision",
                "/apis/apps/v1/namespaces/{ns}/deployments?dryRun=All",
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": 1, "selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "app", "image": "nginx"}]}}, "revisionHistoryLimit": -1}}),
            ),
            post(
                "dep-negative-minready",
                "/apis/apps/v1/namespaces/{ns}/deployments?dryRun=All",
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": 1, "selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "app", "image": "nginx"}]}}, "minReadySeconds": -5}}),
            ),
            post(
                "dep-progress-deadline",
                "/apis/apps/v1/namespaces/{ns}/deployments?dryRun=All",
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": 1, "selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "app", "image": "nginx"}]}}, "progressDeadlineSeconds": 0}}),
            ),
            post(
                "dep-strategy-bad",
                "/apis/apps/v1/namespaces/{ns}/deployments?dryRun=All",
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": 1, "selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "app", "image": "nginx"}]}}, "strategy": {"type": "Bogus"}}}),
            ),
            post(
                "dep-rolling-both-zero",
                "/apis/apps/v1/namespaces/{ns}/deployments?dryRun=All",
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": 1, "selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "app", "image": "nginx"}]}}, "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}}}}),
            ),
            post(
                "dep-recreate-with-rolling",
                "/apis/apps/v1/namespaces/{ns}/deployments?dryRun=All",
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": 1, "selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "app", "image": "nginx"}]}}, "strategy": {"type": "Recreate", "rollingUpdate": {"maxSurge": 1}}}}),
            ),
            post(
                "dep-restart-never",
                "/apis/apps/v1/namespaces/{ns}/deployments?dryRun=All",
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": 1, "selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "app", "image": "nginx"}], "restartPolicy": "Never"}}}}),
            ),
            post(
                "pod-env-empty-name",
                "/api/v1/namespaces/{ns}/pods?dryRun=All",
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "app", "image": "nginx", "env": [{"name": "", "value": "x"}]}]}}),
            ),
            post(
                "pod-env-two-sources",
                "/api/v1/namespaces/{ns}/pods?dryRun=All",
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "app", "image": "nginx", "env": [{"name": "A", "value": "x", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}]}}),
            ),
            post(
                "pod-volume-dup",
                "/api/v1/namespaces/{ns}/pods?dryRun=All",
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "app", "image": "nginx"}], "volumes": [{"name": "v", "emptyDir": {}}, {"name": "v", "emptyDir": {}}]}}),
            ),
            post(
                "pod-volume-bad-name",
                "/api/v1/namespaces/{ns}/pods?dryRun=All",
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "app", "image": "nginx"}], "volumes": [{"name": "V_1", "emptyDir": {}}]}}),
            ),
            post(
                "pod-mount-missing-volume",
                "/api/v1/namespaces/{ns}/pods?dryRun=All",
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "app", "image": "nginx", "volumeMounts": [{"name": "nope", "mountPath": "/x"}]}]}}),
            ),
            post(
                "pod-mount-no-path",
                "/api/v1/namespaces/{ns}/pods?dryRun=All",
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "app", "image": "nginx", "volumeMounts": [{"name": "v", "mountPath": ""}]}], "volumes": [{"name": "v", "emptyDir": {}}]}}),
            ),
            post(
                "pod-probe-no-handler",
                "/api/v1/namespaces/{ns}/pods?dryRun=All",
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "app", "image": "nginx", "livenessProbe": {"periodSeconds": 5}}]}}),
            ),
            post(
                "pod-probe-negative",
                "/api/v1/namespaces/{ns}/pods?dryRun=All",
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "app", "image": "nginx", "readinessProbe": {"exec": {"command": ["true"]}, "periodSeconds": -1}}]}}),
            ),
            post(
                "pod-port-name-bad",
                "/api/v1/namespaces/{ns}/pods?dryRun=All",
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "app", "image": "nginx", "ports": [{"name": "HTTP_PORT", "containerPort": 80}]}]}}),
            ),
            post(
                "pod-port-name-dup",
                "/api/v1/namespaces/{ns}/pods?dryRun=All",
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "app", "image": "nginx", "ports": [{"name": "http", "containerPort": 80}, {"name": "http", "containerPort": 81}]}]}}),
            ),
            post(
                "pod-port-protocol",
                "/api/v1/namespaces/{ns}/pods?dryRun=All",
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "app", "image": "nginx", "ports": [{"containerPort": 80, "protocol": "ICMP"}]}]}}),
            ),
            post(
                "pod-restart-policy",
                "/api/v1/namespaces/{ns}/pods?dryRun=All",
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "app", "image": "nginx"}], "restartPolicy": "Sometimes"}}),
            ),
            post(
                "pod-dns-policy",
                "/api/v1/namespaces/{ns}/pods?dryRun=All",
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "app", "image": "nginx"}], "dnsPolicy": "Weird"}}),
            ),
            post(
                "pod-pull-policy",
                "/api/v1/namespaces/{ns}/pods?dryRun=All",
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "app", "image": "nginx", "imagePullPolicy": "Sometimes"}]}}),
            ),
            post(
                "pod-deadline-zero",
                "/api/v1/namespaces/{ns}/pods?dryRun=All",
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "app", "image": "nginx"}], "activeDeadlineSeconds": 0}}),
            ),
            post(
                "pod-node-selector-bad",
                "/api/v1/namespaces/{ns}/pods?dryRun=All",
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "app", "image": "nginx"}], "nodeSelector": {"bad key!": "x"}}}),
            ),
            post(
                "pod-toleration-bad",
                "/api/v1/namespaces/{ns}/pods?dryRun=All",
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "app", "image": "nginx"}], "tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]}}),
            ),
            post(
                "pod-hostname-bad",
                "/api/v1/namespaces/{ns}/pods?dryRun=All",
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "app", "image": "nginx"}], "hostname": "Bad_Name"}}),
            ),
            post(
                "pod-term-msg-policy",
                "/api/v1/namespaces/{ns}/pods?dryRun=All",
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "app", "image": "nginx", "terminationMessagePolicy": "Nope"}]}}),
            ),
            post(
                "pod-security-runasuser-neg",
                "/api/v1/namespaces/{ns}/pods?dryRun=All",
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "app", "image": "nginx", "securityContext": {"runAsUser": -1}}]}}),
            ),
            post(
                "svc-port-dup",
                "/api/v1/namespaces/{ns}/services?dryRun=All",
                json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}, {"port": 80}]}}),
            ),
            post(
                "svc-port-names-missing",
                "/api/v1/namespaces/{ns}/services?dryRun=All",
                json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}, {"port": 81}]}}),
            ),
            post(
                "svc-port-zero",
                "/api/v1/namespaces/{ns}/services?dryRun=All",
                json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"ports": [{"port": 0}]}}),
            ),
            post(
                "svc-type-bad",
                "/api/v1/namespaces/{ns}/services?dryRun=All",
                json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"type": "Bogus", "ports": [{"port": 80}]}}),
            ),
            post(
                "svc-nodeport-on-clusterip",
                "/api/v1/namespaces/{ns}/services?dryRun=All",
                json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"ports": [{"port": 80, "nodePort": 30500}]}}),
            ),
            post(
                "svc-externalname-bad",
                "/api/v1/namespaces/{ns}/services?dryRun=All",
                json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"type": "ExternalName", "externalName": "Not A Name"}}),
            ),
            post(
                "svc-selector-bad",
                "/api/v1/namespaces/{ns}/services?dryRun=All",
                json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"selector": {"a": "bad value!"}, "ports": [{"port": 80}]}}),
            ),
            post(
                "sts-negative-replicas",
                "/apis/apps/v1/namespaces/{ns}/statefulsets?dryRun=All",
                json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s"}, "spec": {"replicas": -1, "selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}),
            ),
            post(
                "job-negative-parallelism",
                "/apis/batch/v1/namespaces/{ns}/jobs?dryRun=All",
                json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {"parallelism": -1, "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}}),
            ),
            post(
                "job-restart-always",
                "/apis/batch/v1/namespaces/{ns}/jobs?dryRun=All",
                json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {"template": {"spec": {"restartPolicy": "Always", "containers": [{"name": "c", "image": "i"}]}}}}),
            ),
            post(
                "hpa-min-zero",
                "/apis/autoscaling/v2/namespaces/{ns}/horizontalpodautoscalers?dryRun=All",
                json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "h"}, "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}, "minReplicas": 0, "maxReplicas": 1}}),
            ),
            post(
                "pdb-both",
                "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets?dryRun=All",
                json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "p"}, "spec": {"minAvailable": 1, "maxUnavailable": 1}}),
            ),
            post(
                "ingress-no-backend",
                "/apis/networking.k8s.io/v1/namespaces/{ns}/ingresses?dryRun=All",
                json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "i"}, "spec": {}}),
            ),
            post(
                "secret-tls-missing",
                "/api/v1/namespaces/{ns}/secrets?dryRun=All",
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "type": "kubernetes.io/tls", "data": {}}),
            ),
            post(
                "role-bad-verb-empty",
                "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles?dryRun=All",
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "r"}, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": []}]}),
            ),
            post(
                "rb-no-roleref-name",
                "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings?dryRun=All",
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "r"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ""}, "subjects": []}),
            ),
        ],
    }
}

/// The token volume's generated name, and the source an OpenShift-built kube-apiserver
/// adds to it (`openshift-service-ca.crt`; the recording server is such a build),
/// normalised.
fn token_volume(r: &mut Value) {
    fn walk(v: &mut Value) {
        match v {
            Value::String(s) if s.starts_with("kube-api-access-") => {
                *s = "kube-api-access-<suffix>".into();
            }
            Value::Array(a) => {
                a.retain(|x| {
                    x.pointer("/configMap/name") != Some(&json!("openshift-service-ca.crt"))
                });
                a.iter_mut().for_each(walk);
            }
            Value::Object(m) => m.values_mut().for_each(walk),
            _ => {}
        }
    }
    walk(r);
}

/// kube-apiserver's built-in admission of new pods: the ServiceAccount plugin (the
/// account must exist; its token mounted as a projected volume in every container
/// without a mount at the token path, unless the pod or the account turns automounting
/// off) and the Priority plugin (priority and preemption policy from the PriorityClass;
/// a stated priority must match; an unknown class refused). Dry runs.
pub fn pod_admission() -> Scenario {
    let p = "/api/v1/namespaces/{ns}/pods?dryRun=All";
    let pod = |name: &str, extra: Value| {
        let mut spec = json!({
            "initContainers": [{"name": "init", "image": "busybox"}],
            "containers": [
                {"name": "app", "image": "nginx"},
                {"name": "own-mount", "image": "nginx", "volumeMounts": [{"name": "mine", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]},
            ],
            "volumes": [{"name": "mine", "emptyDir": {}}],
        });
        if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                s.insert(k.clone(), v.clone());
            }
        }
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})
    };
    Scenario {
        name: "pod_admission",
        steps: vec![
            post("token-mounted", p, pod("a", json!({}))).transform(token_volume),
            post(
                "pod-opts-out",
                p,
                pod("b", json!({"automountServiceAccountToken": false})),
            ),
            post(
                "missing-account",
                p,
                pod("c", json!({"serviceAccountName": "nobody"})),
            ),
            post(
                "quiet-account",
                "/api/v1/namespaces/{ns}/serviceaccounts",
                json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "quiet"}, "automountServiceAccountToken": false}),
            ),
            post(
                "account-opts-out",
                p,
                pod("d", json!({"serviceAccountName": "quiet"})),
            ),
            post(
                "pod-opts-back-in",
                p,
                pod(
                    "e",
                    json!({"serviceAccountName": "quiet", "automountServiceAccountToken": true}),
                ),
            )
            .transform(token_volume),
            post("stated-priority", p, pod("f", json!({"priority": 5}))),
            post(
                "priority-class",
                p,
                pod("g", json!({"priorityClassName": "system-cluster-critical"})),
            )
            .transform(token_volume),
            post(
                "unknown-priority-class",
                p,
                pod("h", json!({"priorityClassName": "nope"})),
            ),
            post(
                "stated-preemption-policy",
                p,
                pod(
                    "i",
                    json!({"priorityClassName": "system-node-critical", "preemptionPolicy": "Never"}),
                ),
            ),
        ],
    }
}

/// More spec validation, kind by kind (dry-run creates): CronJob schedules (field count,
/// ranges, numbers, descriptors, `TZ=`), time zones, concurrency policy and history
/// limits; Job completion modes; claims' access modes and storage request; volumes'
/// capacity and source; Ingress path types, absolute paths and backends; NetworkPolicy
/// ports and policy types; StorageClass provisioner and binding mode; namespace and
/// account names; RBAC rules' API groups and non-resource URLs, subjects and role
/// references; StatefulSet and DaemonSet policies; LimitRange defaults; negative quotas;
/// PriorityClass names and values; EndpointSlice address types; long config keys;
/// webhook names.
pub fn spec_validation_more() -> Scenario {
    Scenario {
        name: "spec_validation_more",
        steps: vec![
            post(
                "cron-fields",
                "/apis/batch/v1/namespaces/{ns}/cronjobs?dryRun=All",
                json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"}, "spec": {"schedule": "not a schedule", "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}}}}),
            ),
            post(
                "cron-range",
                "/apis/batch/v1/namespaces/{ns}/cronjobs?dryRun=All",
                json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"}, "spec": {"schedule": "61 * * * *", "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}}}}),
            ),
            post(
                "cron-word",
                "/apis/batch/v1/namespaces/{ns}/cronjobs?dryRun=All",
                json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"}, "spec": {"schedule": "x * * * *", "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}}}}),
            ),
            post(
                "cron-tz",
                "/apis/batch/v1/namespaces/{ns}/cronjobs?dryRun=All",
                json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"}, "spec": {"schedule": "TZ=UTC 0 * * * *", "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}}}}),
            ),
            post(
                "cron-descriptor",
                "/apis/batch/v1/namespaces/{ns}/cronjobs?dryRun=All",
                json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"}, "spec": {"schedule": "@hourly", "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}}}}),
            ),
            post(
                "cron-bad-descriptor",
                "/apis/batch/v1/namespaces/{ns}/cronjobs?dryRun=All",
                json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"}, "spec": {"schedule": "@sometimes", "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}}}}),
            ),
            post(
                "cron-timezone-bad",
                "/apis/batch/v1/namespaces/{ns}/cronjobs?dryRun=All",
                json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"}, "spec": {"schedule": "0 * * * *", "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}}, "timeZone": "Mars/Olympus"}}),
            ),
            post(
                "cron-step",
                "/apis/batch/v1/namespaces/{ns}/cronjobs?dryRun=All",
                json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"}, "spec": {"schedule": "*/15 * * * *", "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}}}}),
            ),
            post(
                "cron-dow-name",
                "/apis/batch/v1/namespaces/{ns}/cronjobs?dryRun=All",
                json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"}, "spec": {"schedule": "0 0 * * MON-FRI", "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}}}}),
            ),
            post(
                "cron-concurrency",
                "/apis/batch/v1/namespaces/{ns}/cronjobs?dryRun=All",
                json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"}, "spec": {"schedule": "0 * * * *", "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}}, "concurrencyPolicy": "Sometimes"}}),
            ),
            post(
                "cron-history-neg",
                "/apis/batch/v1/namespaces/{ns}/cronjobs?dryRun=All",
                json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"}, "spec": {"schedule": "0 * * * *", "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}}, "successfulJobsHistoryLimit": -1}}),
            ),
            post(
                "pvc-no-access",
                "/api/v1/namespaces/{ns}/persistentvolumeclaims?dryRun=All",
                json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "p"}, "spec": {"resources": {"requests": {"storage": "1Gi"}}}}),
            ),
            post(
                "pvc-no-storage",
                "/api/v1/namespaces/{ns}/persistentvolumeclaims?dryRun=All",
                json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "p"}, "spec": {"accessModes": ["ReadWriteOnce"]}}),
            ),
            post(
                "pvc-bad-mode",
                "/api/v1/namespaces/{ns}/persistentvolumeclaims?dryRun=All",
                json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "p"}, "spec": {"accessModes": ["ReadWriteSometimes"], "resources": {"requests": {"storage": "1Gi"}}}}),
            ),
            post(
                "ingress-path-type",
                "/apis/networking.k8s.io/v1/namespaces/{ns}/ingresses?dryRun=All",
                json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "i"}, "spec": {"rules": [{"http": {"paths": [{"path": "/", "backend": {"service": {"name": "s", "port": {"number": 80}}}}]}}]}}),
            ),
            post(
                "ingress-path-relative",
                "/apis/networking.k8s.io/v1/namespaces/{ns}/ingresses?dryRun=All",
                json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "i"}, "spec": {"rules": [{"http": {"paths": [{"path": "x", "pathType": "Prefix", "backend": {"service": {"name": "s", "port": {"number": 80}}}}]}}]}}),
            ),
            post(
                "ingress-backend-both",
                "/apis/networking.k8s.io/v1/namespaces/{ns}/ingresses?dryRun=All",
                json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "i"}, "spec": {"defaultBackend": {"service": {"name": "s", "port": {"number": 80, "name": "http"}}}}}),
            ),
            post(
                "netpol-bad-port",
                "/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies?dryRun=All",
                json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "n"}, "spec": {"podSelector": {}, "ingress": [{"ports": [{"port": 70000}]}]}}),
            ),
            post(
                "netpol-bad-type",
                "/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies?dryRun=All",
                json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "n"}, "spec": {"podSelector": {}, "policyTypes": ["Sideways"]}}),
            ),
            post(
                "sc-bad-binding",
                "/apis/storage.k8s.io/v1/storageclasses?dryRun=All",
                json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "s"}, "provisioner": "x", "volumeBindingMode": "Later"}),
            ),
            post(
                "sc-no-provisioner",
                "/apis/storage.k8s.io/v1/storageclasses?dryRun=All",
                json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "s"}}),
            ),
            post(
                "pv-no-capacity",
                "/api/v1/persistentvolumes?dryRun=All",
                json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv"}, "spec": {"accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/x"}}}),
            ),
            post(
                "pv-no-source",
                "/api/v1/persistentvolumes?dryRun=All",
                json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv"}, "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}}),
            ),
            post(
                "ns-bad-name",
                "/api/v1/namespaces?dryRun=All",
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "Bad_Name"}}),
            ),
            post(
                "sa-bad-name",
                "/api/v1/namespaces/{ns}/serviceaccounts?dryRun=All",
                json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "Bad_Name"}}),
            ),
            post(
                "role-no-apigroups",
                "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles?dryRun=All",
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "r"}, "rules": [{"resources": ["pods"], "verbs": ["get"]}]}),
            ),
            post(
                "role-nonresource-in-role",
                "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles?dryRun=All",
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "r"}, "rules": [{"nonResourceURLs": ["/x"], "verbs": ["get"]}]}),
            ),
            post(
                "rb-bad-subject-kind",
                "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings?dryRun=All",
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "r"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "x"}, "subjects": [{"kind": "Robot", "name": "x"}]}),
            ),
            post(
                "rb-sa-no-ns",
                "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings?dryRun=All",
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "r"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "x"}, "subjects": [{"kind": "ServiceAccount", "name": "x"}]}),
            ),
            post(
                "rb-roleref-kind",
                "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings?dryRun=All",
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "r"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Thing", "name": "x"}}),
            ),
            post(
                "sts-pvc-template-bad",
                "/apis/apps/v1/namespaces/{ns}/statefulsets?dryRun=All",
                json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s"}, "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}, "podManagementPolicy": "Random"}}),
            ),
            post(
                "ds-strategy-bad",
                "/apis/apps/v1/namespaces/{ns}/daemonsets?dryRun=All",
                json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}, "updateStrategy": {"type": "Sometimes"}}}),
            ),
            post(
                "job-completion-mode",
                "/apis/batch/v1/namespaces/{ns}/jobs?dryRun=All",
                json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {"completionMode": "Whenever", "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}}),
            ),
            post(
                "lease-neg",
                "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases?dryRun=All",
                json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"}, "spec": {"leaseDurationSeconds": 0}}),
            ),
            post(
                "limitrange-bad",
                "/api/v1/namespaces/{ns}/limitranges?dryRun=All",
                json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "l"}, "spec": {"limits": [{"type": "Pod", "default": {"cpu": "1"}}]}}),
            ),
            post(
                "quota-bad",
                "/api/v1/namespaces/{ns}/resourcequotas?dryRun=All",
                json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"}, "spec": {"hard": {"pods": "-1"}}}),
            ),
            post(
                "pc-bad",
                "/apis/scheduling.k8s.io/v1/priorityclasses?dryRun=All",
                json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "system-x"}, "value": 5}),
            ),
            post(
                "pc-too-high",
                "/apis/scheduling.k8s.io/v1/priorityclasses?dryRun=All",
                json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 2000000001}),
            ),
            post(
                "endpointslice-bad",
                "/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices?dryRun=All",
                json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": {"name": "e"}, "addressType": "IPv7", "endpoints": []}),
            ),
            post(
                "cm-big-key",
                "/api/v1/namespaces/{ns}/configmaps?dryRun=All",
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa": "x"}}),
            ),
            post(
                "vwc-bad",
                "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations?dryRun=All",
                json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "v"}, "webhooks": [{"name": "noDots", "clientConfig": {"url": "https://x"}, "admissionReviewVersions": ["v1"], "sideEffects": "None"}]}),
            ),
        ],
    }
}

/// Status and scale writes kube-apiserver validates: negative counts in a workload's,
/// a Job's and an HPA's status, a scale to a negative count, a pod phase it does not
/// know, a ReplicaSet's ready count above its replicas.
pub fn status_validation() -> Scenario {
    let dep = "/apis/apps/v1/namespaces/{ns}/deployments";
    let rs = "/apis/apps/v1/namespaces/{ns}/replicasets";
    let job = "/apis/batch/v1/namespaces/{ns}/jobs";
    let pods = "/api/v1/namespaces/{ns}/pods";
    let template = json!({"metadata": {"labels": {"app": "sv"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
    Scenario {
        name: "status_validation",
        steps: vec![
            post(
                "create-deployment",
                dep,
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "sv"},
                    "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "sv"}}, "template": template}}),
            ),
            patch(
                "deployment-negative-replicas",
                &format!("{dep}/sv/status"),
                MERGE,
                json!({"status": {"replicas": -1}}),
            ),
            patch(
                "deployment-negative-available",
                &format!("{dep}/sv/status"),
                MERGE,
                json!({"status": {"availableReplicas": -2, "observedGeneration": -1}}),
            ),
            patch(
                "scale-negative",
                &format!("{dep}/sv/scale"),
                MERGE,
                json!({"spec": {"replicas": -3}}),
            ),
            post(
                "create-replicaset",
                rs,
                json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "sv"},
                    "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "sv"}}, "template": template}}),
            ),
            patch(
                "replicaset-ready-above-replicas",
                &format!("{rs}/sv/status"),
                MERGE,
                json!({"status": {"replicas": 1, "readyReplicas": 2}}),
            ),
            patch(
                "replicaset-negative",
                &format!("{rs}/sv/status"),
                MERGE,
                json!({"status": {"replicas": -1}}),
            ),
            post(
                "create-job",
                job,
                json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "sv"},
                    "spec": {"suspend": true, "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}),
            ),
            patch(
                "job-negative-counts",
                &format!("{job}/sv/status"),
                MERGE,
                json!({"status": {"active": -1, "succeeded": -2, "ready": 0}}),
            ),
            post(
                "create-pod",
                pods,
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "sv"},
                    "spec": {"containers": [{"name": "c", "image": "nginx"}]}}),
            )
            .transform(token_volume),
            patch(
                "pod-unknown-phase",
                &format!("{pods}/sv/status"),
                MERGE,
                json!({"status": {"phase": "Dancing"}}),
            )
            .transform(token_volume),
        ],
    }
}

/// kube-apiserver's LimitRanger and ResourceQuota admission and the quota controller's
/// status: a LimitRange's container defaults filled into a new pod (with the
/// `kubernetes.io/limit-ranger` annotation) and its maximum enforced; a quota's
/// `status.used` (object counts, node ports, pods' CPU and memory, claims' storage) and
/// creates past its hard limits refused (a dry run too).
pub fn quota_and_limits() -> Scenario {
    let ns = "/api/v1/namespaces/{ns}";
    let pod = |name: &str, resources: Value| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "nginx", "resources": resources}]}})
    };
    let used = |want: &'static str| -> fn(&Value) -> bool {
        match want {
            "1" => |r| r.pointer("/body/status/used/limits.memory") == Some(&json!("512Mi")),
            _ => |r| r.pointer("/body/status/used/count~1deployments.apps") == Some(&json!("1")),
        }
    };
    Scenario {
        name: "quota_and_limits",
        steps: vec![
            post(
                "limit-range",
                &format!("{ns}/limitranges"),
                json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "l"},
                    "spec": {"limits": [{"type": "Container", "default": {"cpu": "500m", "memory": "256Mi"}, "defaultRequest": {"cpu": "100m"}, "max": {"cpu": "2"}}]}}),
            ),
            post(
                "defaulted",
                &format!("{ns}/pods?dryRun=All"),
                pod("a", json!({})),
            )
            .transform(token_volume),
            post(
                "above-max",
                &format!("{ns}/pods?dryRun=All"),
                pod("b", json!({"limits": {"cpu": "3"}})),
            ),
            post(
                "quota",
                &format!("{ns}/resourcequotas"),
                json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"},
                    "spec": {"hard": {"requests.cpu": "1", "limits.memory": "1Gi", "count/deployments.apps": "1", "services.nodeports": "1", "requests.storage": "1Gi", "configmaps": "5"}}}),
            ),
            post(
                "pod-within",
                &format!("{ns}/pods"),
                pod(
                    "c",
                    json!({"requests": {"cpu": "600m"}, "limits": {"cpu": "1", "memory": "512Mi"}}),
                ),
            )
            .transform(token_volume),
            get("quota-used", &format!("{ns}/resourcequotas/q"))
                .until(used("1"))
                .ignore(
                    "body.metadata.managedFields",
                    "kube-controller-manager's quota controller and kube-apiserver's quota \
                     admission each write status.used through the API, as timing has it; \
                     the embedded server computes it without writers",
                ),
            post(
                "pod-over-dry-run",
                &format!("{ns}/pods?dryRun=All"),
                pod(
                    "d",
                    json!({"requests": {"cpu": "600m"}, "limits": {"cpu": "1", "memory": "768Mi"}}),
                ),
            ),
            post(
                "deployment",
                "/apis/apps/v1/namespaces/{ns}/deployments",
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                    "spec": {"replicas": 0, "selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}),
            ),
            get("quota-used-again", &format!("{ns}/resourcequotas/q"))
                .until(used("2"))
                .ignore(
                    "body.metadata.managedFields",
                    "kube-controller-manager's quota controller and kube-apiserver's quota \
                     admission each write status.used through the API, as timing has it; \
                     the embedded server computes it without writers",
                ),
            post(
                "second-deployment",
                "/apis/apps/v1/namespaces/{ns}/deployments",
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d2"},
                    "spec": {"replicas": 0, "selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}),
            ),
            post(
                "node-ports-over",
                &format!("{ns}/services"),
                json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
                    "spec": {"type": "NodePort", "ports": [{"name": "a", "port": 80}, {"name": "b", "port": 81}]}}),
            ),
            post(
                "storage-over",
                &format!("{ns}/persistentvolumeclaims"),
                json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "2Gi"}}}}),
            ),
        ],
    }
}

/// kube-apiserver's PodSecurity admission: a namespace labelled `enforce=baseline`,
/// `warn=restricted` refuses pods that break baseline (403, every failed check's
/// reason and detail in upstream's order) and admits the rest with the restricted
/// warning; workloads' pod templates only warn; invalid labels are 422; raising
/// `enforce` warns about the existing pods; pod updates are judged only when they
/// change containers or images.
pub fn pod_security() -> Scenario {
    let p = "/api/v1/namespaces/{ns}/pods?dryRun=All";
    let ns = "/api/v1/namespaces/{ns}";
    let merge = "application/merge-patch+json";
    let labels = |pairs: Value| json!({"metadata": {"labels": pairs}});
    let pod = |name: &str, spec: Value| json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec});
    let restricted_container = json!({"name": "app", "image": "nginx", "securityContext": {
        "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}});
    Scenario {
        name: "pod_security",
        steps: vec![
            patch(
                "label-baseline-warn-restricted",
                ns,
                merge,
                labels(json!({
                    "pod-security.kubernetes.io/enforce": "baseline",
                    "pod-security.kubernetes.io/warn": "restricted",
                })),
            ),
            post(
                "plain-pod-warned",
                p,
                pod("plain", json!({"initContainers": [{"name": "init", "image": "busybox"}], "containers": [{"name": "app", "image": "nginx"}, {"name": "side", "image": "nginx"}]})),
            )
            .transform(token_volume),
            post(
                "restricted-pod-quiet",
                p,
                pod("good", json!({"securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}}, "containers": [restricted_container]})),
            )
            .transform(token_volume),
            post(
                "baseline-breaker-refused",
                p,
                pod("bad", json!({
                    "hostPID": true, "hostIPC": true,
                    "securityContext": {"sysctls": [{"name": "net.core.somaxconn", "value": "1024"}, {"name": "net.ipv4.tcp_rmem", "value": "4096 87380 6291456"}, {"name": "kernel.panic", "value": "1"}], "seLinuxOptions": {"type": "spc_t", "user": "u"}, "seccompProfile": {"type": "Unconfined"}},
                    "volumes": [{"name": "root", "hostPath": {"path": "/"}}, {"name": "etc", "hostPath": {"path": "/etc"}}],
                    "containers": [
                        {"name": "a", "image": "nginx", "ports": [{"containerPort": 80, "hostPort": 80}, {"containerPort": 8080, "hostPort": 10000}],
                         "securityContext": {"privileged": true, "capabilities": {"add": ["SYS_ADMIN", "CHOWN", "NET_RAW"]}, "seccompProfile": {"type": "Unconfined"}},
                         "livenessProbe": {"httpGet": {"host": "localhost", "port": 80}}},
                        {"name": "b", "image": "nginx", "ports": [{"containerPort": 81, "hostPort": 20}],
                         "securityContext": {"privileged": true, "appArmorProfile": {"type": "Unconfined"}, "seLinuxOptions": {"role": "r"}},
                         "lifecycle": {"preStop": {"tcpSocket": {"host": "127.0.0.1", "port": 1}}}},
                    ]})),
            ),
            post(
                "user-namespace-relaxes-baseline-proc-mount",
                p,
                pod("userns", json!({"hostUsers": false, "containers": [{"name": "a", "image": "nginx", "securityContext": {"procMount": "Unmasked"}}]})),
            )
            .transform(token_volume),
            post(
                "host-network-pod-rules",
                p,
                pod("hostnet", json!({
                    "hostNetwork": true, "hostPID": true,
                    "securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "65536"}, {"name": "net.ipv4.tcp_rmem", "value": "4096 87380 6291456"}], "seLinuxOptions": {"type": "spc_t", "user": "u"}},
                    "volumes": [{"name": "root", "hostPath": {"path": "/"}}, {"name": "etc", "hostPath": {"path": "/etc"}}],
                    "containers": [
                        {"name": "a", "image": "nginx", "ports": [{"containerPort": 80, "hostPort": 80}, {"containerPort": 8080, "hostPort": 10000}],
                         "securityContext": {"privileged": true, "capabilities": {"add": ["SYS_ADMIN", "CHOWN", "NET_RAW"]}, "seccompProfile": {"type": "Unconfined"}, "procMount": "Unmasked"},
                         "livenessProbe": {"httpGet": {"host": "localhost", "port": 80}}},
                        {"name": "b", "image": "nginx", "ports": [{"containerPort": 81, "hostPort": 20}],
                         "securityContext": {"privileged": true, "appArmorProfile": {"type": "Unconfined"}, "windowsOptions": {"hostProcess": false}},
                         "lifecycle": {"preStop": {"tcpSocket": {"host": "127.0.0.1", "port": 1}}}},
                    ]})),
            ),
            post(
                "restricted-only-breaker-warned",
                p,
                pod("loose", json!({
                    "securityContext": {"runAsNonRoot": false, "runAsUser": 0},
                    "volumes": [{"name": "n", "nfs": {"server": "nfs.example", "path": "/x"}}, {"name": "c", "configMap": {"name": "x"}}],
                    "containers": [
                        {"name": "a", "image": "nginx", "securityContext": {"allowPrivilegeEscalation": true, "capabilities": {"add": ["CHOWN", "NET_BIND_SERVICE"]}, "seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"}}},
                        {"name": "b", "image": "nginx", "securityContext": {"runAsNonRoot": true, "runAsUser": 0}},
                    ]})),
            )
            .transform(token_volume),
            post(
                "windows-pod-warned",
                p,
                pod("win", json!({"os": {"name": "windows"}, "containers": [{"name": "app", "image": "nginx"}]})),
            )
            .transform(token_volume),
            post(
                "deployment-template-warned",
                "/apis/apps/v1/namespaces/{ns}/deployments?dryRun=All",
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {
                    "selector": {"matchLabels": {"app": "d"}},
                    "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"hostNetwork": true, "containers": [{"name": "app", "image": "nginx"}]}}}}),
            ),
            post(
                "cronjob-template-warned",
                "/apis/batch/v1/namespaces/{ns}/cronjobs?dryRun=All",
                json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"}, "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i", "securityContext": {"privileged": true}}]}}}}}}),
            ),
            post(
                "existing-pod",
                "/api/v1/namespaces/{ns}/pods",
                pod("existing", json!({"containers": [{"name": "app", "image": "nginx"}]})),
            )
            .transform(token_volume)
            .ignore("body.metadata.uid", "generated")
            .ignore("body.metadata.resourceVersion", "server's counter")
            .ignore("body.metadata.creationTimestamp", "time of the request")
            .ignore("body.metadata.managedFields", "timestamps"),
            patch(
                "invalid-labels-refused",
                ns,
                merge,
                labels(json!({
                    "pod-security.kubernetes.io/enforce": "bogus",
                    "pod-security.kubernetes.io/warn-version": "1.25",
                })),
            ),
            patch(
                "raise-enforce-warns-about-existing-pods",
                ns,
                merge,
                labels(json!({"pod-security.kubernetes.io/enforce": "restricted"})),
            ),
            patch(
                "insignificant-update-allowed",
                "/api/v1/namespaces/{ns}/pods/existing",
                merge,
                json!({"metadata": {"labels": {"touched": "yes"}}}),
            )
            .transform(token_volume)
            .ignore("body.metadata.uid", "generated")
            .ignore("body.metadata.resourceVersion", "server's counter")
            .ignore("body.metadata.creationTimestamp", "time of the request")
            .ignore("body.metadata.managedFields", "timestamps"),
            patch(
                "image-change-refused",
                "/api/v1/namespaces/{ns}/pods/existing",
                "application/strategic-merge-patch+json",
                json!({"spec": {"containers": [{"name": "app", "image": "nginx:2"}]}}),
            ),
            patch(
                "versioned-warn",
                ns,
                merge,
                labels(json!({
                    "pod-security.kubernetes.io/enforce": "privileged",
                    "pod-security.kubernetes.io/warn": "baseline",
                    "pod-security.kubernetes.io/warn-version": "v1.30",
                })),
            ),
            post(
                "old-version-skips-newer-checks",
                p,
                pod("probe", json!({"containers": [{"name": "app", "image": "nginx", "readinessProbe": {"tcpSocket": {"host": "localhost", "port": 1}}, "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}}}]})),
            )
            .transform(token_volume),
        ],
    }
}

/// ResourceQuota scopes: a quota with `scopes` or a `scopeSelector` counts only the pods
/// that match them (BestEffort, NotBestEffort, Terminating, PriorityClass), in its
/// status and in admission; a scope that does not fit the quota's resources is 422.
pub fn quota_scopes() -> Scenario {
    let ns = "/api/v1/namespaces/{ns}";
    let quota = |name: &str, spec: Value| json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name}, "spec": spec});
    let pod = |name: &str, spec: Value| {
        let mut s = json!({"containers": [{"name": "c", "image": "nginx"}]});
        if let (Some(s), Some(extra)) = (s.as_object_mut(), spec.as_object()) {
            for (k, v) in extra {
                s.insert(k.clone(), v.clone());
            }
        }
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": s})
    };
    let cpu =
        |c: &str| json!([{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": c}}}]);
    const WRITERS: &str = "kube-controller-manager's quota controller and kube-apiserver's quota \
                           admission each write status.used through the API, as timing has it";
    let synced = |name: &'static str, step: &'static str| {
        get(step, &format!("{ns}/resourcequotas/{name}"))
            .until(|r| r.pointer("/body/status/used").is_some())
            .ignore("body.metadata.managedFields", WRITERS)
    };
    let pods = format!("{ns}/pods");
    let dry = format!("{ns}/pods?dryRun=All");
    let quotas = format!("{ns}/resourcequotas");
    Scenario {
        name: "quota_scopes",
        steps: vec![
            post(
                "best-effort",
                &quotas,
                quota(
                    "best-effort",
                    json!({"hard": {"pods": "1"}, "scopes": ["BestEffort"]}),
                ),
            ),
            post(
                "not-best-effort",
                &quotas,
                quota(
                    "not-best-effort",
                    json!({"hard": {"requests.cpu": "500m", "pods": "10"}, "scopes": ["NotBestEffort"]}),
                ),
            ),
            post(
                "terminating",
                &quotas,
                quota(
                    "terminating",
                    json!({"hard": {"pods": "0"}, "scopes": ["Terminating"]}),
                ),
            ),
            post(
                "critical",
                &quotas,
                quota(
                    "critical",
                    json!({"hard": {"pods": "0"}, "scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["system-cluster-critical"]}]}}),
                ),
            ),
            post(
                "scope-misfit",
                &quotas,
                quota(
                    "misfit",
                    json!({"hard": {"cpu": "1"}, "scopes": ["BestEffort"]}),
                ),
            ),
            synced("best-effort", "best-effort-synced"),
            synced("not-best-effort", "not-best-effort-synced"),
            synced("terminating", "terminating-synced"),
            synced("critical", "critical-synced"),
            post("best-effort-pod", &pods, pod("be1", json!({})))
                .transform(token_volume)
                .ignore("body.metadata.uid", "generated")
                .ignore("body.metadata.resourceVersion", "server's counter")
                .ignore("body.metadata.creationTimestamp", "time of the request")
                .ignore("body.metadata.managedFields", "timestamps"),
            get(
                "best-effort-counted",
                &format!("{ns}/resourcequotas/best-effort"),
            )
            .until(|r| r.pointer("/body/status/used/pods") == Some(&json!("1")))
            .ignore("body.metadata.managedFields", WRITERS),
            get(
                "not-best-effort-unchanged",
                &format!("{ns}/resourcequotas/not-best-effort"),
            )
            .ignore("body.metadata.managedFields", WRITERS),
            post("second-best-effort-refused", &dry, pod("be2", json!({}))),
            post(
                "burstable-within",
                &dry,
                pod("b1", json!({"containers": cpu("100m")})),
            )
            .transform(token_volume),
            post(
                "burstable-over",
                &dry,
                pod("b2", json!({"containers": cpu("600m")})),
            ),
            post(
                "terminating-refused",
                &dry,
                pod(
                    "t",
                    json!({"containers": cpu("100m"), "activeDeadlineSeconds": 60}),
                ),
            ),
            post(
                "critical-refused",
                &dry,
                pod(
                    "p",
                    json!({"containers": cpu("100m"), "priorityClassName": "system-cluster-critical"}),
                ),
            ),
        ],
    }
}

/// The ResourceQuota plugin as kube-apiserver runs it: a quota limiting cpu or memory
/// requires every container to state them ("must specify", names sorted); an admitted
/// pod is charged to `status.used` at once, by kube-apiserver's own status write (its
/// managedFields entry beside the quota controller's); a dry run is not charged; the
/// charge is judged against `status.used`; a deleted pod is given back by the
/// controller, whose write then owns the fields.
pub fn quota_admission() -> Scenario {
    let ns = "/api/v1/namespaces/{ns}";
    let pods = format!("{ns}/pods");
    let quota_path = format!("{ns}/resourcequotas/compute");
    let pod = |name: &str, init: Value, containers: Value| {
        let mut spec = json!({"containers": containers});
        if !init.is_null() {
            spec["initContainers"] = init;
        }
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})
    };
    let c = |name: &str, resources: Value| json!({"name": name, "image": "nginx", "resources": resources});
    let full = |cpu: &str, mem: &str| json!([{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": cpu}, "limits": {"memory": mem}}}]);
    let created = |step: Step| {
        step.transform(token_volume)
            .ignore("body.metadata.uid", "generated")
            .ignore("body.metadata.creationTimestamp", "time of the request")
    };
    Scenario {
        name: "quota_admission",
        steps: vec![
            post(
                "quota",
                &format!("{ns}/resourcequotas"),
                json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "compute"},
                    "spec": {"hard": {"requests.cpu": "1", "limits.memory": "1Gi", "pods": "2"}}}),
            ),
            get("synced", &quota_path).until(|r| r.pointer("/body/status/used").is_some()),
            post(
                "bare-refused",
                &pods,
                pod(
                    "bare",
                    Value::Null,
                    json!([{"name": "c", "image": "nginx"}]),
                ),
            ),
            post(
                "partial-refused",
                &pods,
                pod(
                    "partial",
                    json!([c("i", json!({}))]),
                    json!([c("c", json!({"requests": {"cpu": "100m"}}))]),
                ),
            ),
            created(post(
                "dry-run",
                &format!("{pods}?dryRun=All"),
                pod("dry", Value::Null, full("600m", "256Mi")),
            )),
            get("dry-run-not-charged", &quota_path),
            created(post(
                "first",
                &pods,
                pod("p1", Value::Null, full("600m", "256Mi")),
            )),
            get("charged-at-once", &quota_path),
            post(
                "second-exceeds",
                &pods,
                pod("p2", Value::Null, full("600m", "256Mi")),
            ),
            created(post(
                "fits",
                &pods,
                pod("p3", Value::Null, full("400m", "768Mi")),
            )),
            get("full", &quota_path),
            delete("delete-first", &format!("{pods}/p1"))
                .transform(token_volume)
                .ignore("body.metadata.uid", "generated")
                .ignore("body.metadata.creationTimestamp", "time of the request"),
            get("given-back", &quota_path)
                .until(|r| r.pointer("/body/status/used/pods") == Some(&json!("1"))),
        ],
    }
}

/// Endpoints and EndpointSlices as kubectl lists them: the printers' columns (at most
/// three `ip:port` pairs or addresses, `+ N more...`, `<none>` and `<unset>`), and the
/// `default/kubernetes` Endpoints and EndpointSlice kube-apiserver keeps (labels,
/// managedFields; the address and port are the server's own).
pub fn endpoints_tables() -> Scenario {
    const TABLE: &str = "application/json;as=Table;g=meta.k8s.io;v=v1";
    let ns = "/api/v1/namespaces/{ns}";
    let slices = "/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices";
    let addrs = |ips: &[&str]| -> Value { ips.iter().map(|ip| json!({"ip": ip})).collect() };
    let server_own = "the server's own address and port";
    Scenario {
        name: "endpoints_tables",
        steps: vec![
            post(
                "endpoints",
                &format!("{ns}/endpoints"),
                json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "many"},
                    "subsets": [
                        {"addresses": addrs(&["10.1.0.1", "10.1.0.2"]),
                         "ports": [{"name": "a", "port": 80}, {"name": "b", "port": 81}]},
                        {"addresses": addrs(&["10.1.0.3", "fd00::1"]), "ports": [{"port": 90}]},
                        {"notReadyAddresses": addrs(&["10.1.0.9"]), "ports": [{"port": 91}]}]}),
            ),
            post(
                "endpoints-v6",
                &format!("{ns}/endpoints"),
                json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "v6"},
                    "subsets": [{"addresses": addrs(&["fd00::2"]), "ports": [{"port": 443}]}]}),
            ),
            post(
                "endpoints-empty",
                &format!("{ns}/endpoints"),
                json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "empty"}}),
            ),
            get("endpoints-table", &format!("{ns}/endpoints")).header("accept", TABLE),
            post(
                "slice",
                slices,
                json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                    "metadata": {"name": "many"}, "addressType": "IPv4",
                    "ports": [{"name": "a", "port": 80}, {"name": "named"}, {}, {"name": "d", "port": 83}],
                    "endpoints": [{"addresses": ["10.2.0.1"]}, {"addresses": ["10.2.0.2"]},
                        {"addresses": ["10.2.0.3"]}, {"addresses": ["10.2.0.4"]}, {"addresses": ["10.2.0.5"]}]}),
            ),
            post(
                "slice-invalid",
                slices,
                json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                    "metadata": {"name": "invalid"}, "addressType": "IPv5",
                    "ports": [{"name": "a", "port": 80}, {"name": "a", "protocol": "HTTP"},
                        {"name": "Bad_Name"}, {}, {"port": 1}],
                    "endpoints": [{"addresses": []}, {"addresses": ["10.2.0.1"]}]}),
            ),
            post(
                "slice-empty",
                slices,
                json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                    "metadata": {"name": "empty"}, "addressType": "IPv4", "endpoints": []}),
            ),
            get("slices-table", slices).header("accept", TABLE),
            get(
                "kubernetes-endpoints",
                "/api/v1/namespaces/default/endpoints/kubernetes",
            )
            .ignore("body.subsets", server_own),
            get(
                "kubernetes-slice",
                "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes",
            )
            .ignore("body.endpoints", server_own)
            .ignore("body.ports", server_own)
            .ignore("body.metadata.generation", "a real server's restarts"),
        ],
    }
}

/// kubectl's tables of the built-in kinds (`kubectl get`): one object of each kind
/// with the fields its printer shows, listed as a Table (namespaced kinds) or fetched
/// as one (cluster-scoped), cells compared (times masked).
pub fn printers() -> Scenario {
    const TABLE: &str = "application/json;as=Table;g=meta.k8s.io;v=v1";
    let ns = "{ns}";
    let nsd = |gv: &str, plural: &str| {
        if gv == "v1" {
            format!("/api/v1/namespaces/{ns}/{plural}")
        } else {
            format!("/apis/{gv}/namespaces/{ns}/{plural}")
        }
    };
    let cl = |gv: &str, plural: &str| {
        if gv == "v1" {
            format!("/api/v1/{plural}")
        } else {
            format!("/apis/{gv}/{plural}")
        }
    };
    let obj = |gv: &str, kind: &str, name: &str, rest: Value| {
        let mut o = json!({"apiVersion": gv, "kind": kind, "metadata": {"name": name}});
        if let (Some(o), Some(r)) = (o.as_object_mut(), rest.as_object()) {
            for (k, v) in r {
                if k == "metadata" {
                    if let (Some(m), Some(extra)) = (o["metadata"].as_object_mut(), v.as_object()) {
                        m.extend(extra.clone());
                    }
                } else {
                    o.insert(k.clone(), v.clone());
                }
            }
        }
        o
    };
    // Writes: their bodies are other scenarios' subject (several of these kinds' defaults
    // and controllers are not emulated: docs/testing.md).
    let written = |st: Step| {
        st.ignore(
            "body",
            "this scenario compares tables; the write's status code only",
        )
        .ignore(
            "headers",
            "this scenario compares tables; the write's status code only",
        )
    };
    // Tables: the rows' objects carry the managedFields of a real cluster's controllers;
    // cells their status writes fill are named per step.
    let table = |st: Step| {
        let controllers = "a real cluster's controllers write this status (the embedded server has no workload, PV or APF controllers)";
        let st = st.header("accept", TABLE).ignore(
            "body.rows[*].object",
            "a real cluster's controllers write managedFields and status",
        );
        match st.name {
            "replicasets-table" | "replicationcontrollers-table" => {
                st.ignore("body.rows[*].cells[2]", controllers)
            }
            "jobs-table" => st.ignore("body.rows[*].cells[1]", controllers),
            "persistentvolume-table" => st.ignore("body.rows[*].cells[4]", controllers),
            "flowschema-table" => st.ignore("body.rows[*].cells[5]", controllers),
            "resourcequotas-table" => st.ignore("body.rows[*].cells[1]", controllers),
            "ipaddress-table" => st.ignore(
                "body.rows[*].cells[2]",
                "the age of the cluster's own Service IP (no Age column to mask it by)",
            ),
            _ => st,
        }
    };
    let containers =
        json!([{"name": "a", "image": "nginx:1.27"}, {"name": "b", "image": "busybox"}]);
    let template =
        json!({"metadata": {"labels": {"app": "x"}}, "spec": {"containers": containers}});
    let job_template = json!({"spec": {"restartPolicy": "Never", "containers": containers}});
    let mut steps = vec![
        post(
            "replicaset",
            &nsd("apps/v1", "replicasets"),
            obj(
                "apps/v1",
                "ReplicaSet",
                "rs",
                json!({"spec": {"replicas": 2, "selector": {"matchLabels": {"app": "x"}}, "template": template}}),
            ),
        ),
        post(
            "replicationcontroller",
            &nsd("v1", "replicationcontrollers"),
            obj(
                "v1",
                "ReplicationController",
                "rc",
                json!({"spec": {"replicas": 1, "selector": {"app": "x", "tier": "web"}, "template": {"metadata": {"labels": {"app": "x", "tier": "web"}}, "spec": {"containers": containers}}}}),
            ),
        ),
        post(
            "statefulset",
            &nsd("apps/v1", "statefulsets"),
            obj(
                "apps/v1",
                "StatefulSet",
                "sts",
                json!({"spec": {"replicas": 2, "serviceName": "s", "selector": {"matchLabels": {"app": "x"}}, "template": template}}),
            ),
        ),
        post(
            "daemonset",
            &nsd("apps/v1", "daemonsets"),
            obj(
                "apps/v1",
                "DaemonSet",
                "ds",
                json!({"spec": {"selector": {"matchLabels": {"app": "x"}}, "template": {"metadata": {"labels": {"app": "x"}}, "spec": {"nodeSelector": {"disk": "ssd", "zone": "a"}, "containers": containers}}}}),
            ),
        ),
        post(
            "job",
            &nsd("batch/v1", "jobs"),
            obj(
                "batch/v1",
                "Job",
                "job",
                json!({"spec": {"completions": 3, "parallelism": 2, "suspend": true, "template": job_template}}),
            ),
        ),
        post(
            "cronjob",
            &nsd("batch/v1", "cronjobs"),
            obj(
                "batch/v1",
                "CronJob",
                "cj",
                json!({"spec": {"schedule": "*/5 * * * *", "timeZone": "Etc/UTC", "suspend": true, "jobTemplate": {"spec": {"template": job_template}}}}),
            ),
        ),
        post(
            "cronjob-plain",
            &nsd("batch/v1", "cronjobs"),
            obj(
                "batch/v1",
                "CronJob",
                "cj2",
                json!({"spec": {"schedule": "@daily", "jobTemplate": {"spec": {"template": job_template}}}}),
            ),
        ),
        post(
            "pvc",
            &nsd("v1", "persistentvolumeclaims"),
            obj(
                "v1",
                "PersistentVolumeClaim",
                "pvc",
                json!({"spec": {"storageClassName": "standard", "accessModes": ["ReadWriteOnce", "ReadWriteMany", "ReadOnlyMany"], "volumeMode": "Block", "resources": {"requests": {"storage": "1Gi"}}}}),
            ),
        ),
        post(
            "event",
            &nsd("v1", "events"),
            obj(
                "v1",
                "Event",
                "ev",
                json!({"involvedObject": {"kind": "Pod", "name": "p", "namespace": "{ns}", "fieldPath": "spec.containers{a}"},
                "reason": "Pulled", "message": "pulled the image", "type": "Warning", "count": 3,
                "source": {"component": "kubelet", "host": "node-1"},
                "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:05:00Z"}),
            ),
        ),
        post(
            "event-plain",
            &nsd("v1", "events"),
            obj(
                "v1",
                "Event",
                "ev2",
                json!({"involvedObject": {"kind": "Pod", "name": "q", "namespace": "{ns}"}, "reason": "Started", "message": "m", "type": "Normal"}),
            ),
        ),
        post(
            "events-k8s-io",
            &nsd("events.k8s.io/v1", "events"),
            obj(
                "events.k8s.io/v1",
                "Event",
                "ev3",
                json!({"eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "example.com/c", "reportingInstance": "c-1",
                "action": "Scaled", "reason": "Scaling", "type": "Normal", "note": "scaled up",
                "regarding": {"kind": "Deployment", "name": "d", "namespace": "{ns}"}}),
            ),
        ),
        post(
            "ingress",
            &nsd("networking.k8s.io/v1", "ingresses"),
            obj(
                "networking.k8s.io/v1",
                "Ingress",
                "ing",
                json!({"spec": {"ingressClassName": "nginx", "tls": [{"hosts": ["a.example.com"]}], "rules": [
                {"host": "a.example.com", "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "s", "port": {"number": 80}}}}]}},
                {"host": "b.example.com", "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "s", "port": {"number": 80}}}}]}}]}}),
            ),
        ),
        post(
            "ingress-plain",
            &nsd("networking.k8s.io/v1", "ingresses"),
            obj(
                "networking.k8s.io/v1",
                "Ingress",
                "ing2",
                json!({"spec": {"defaultBackend": {"service": {"name": "s", "port": {"number": 80}}}}}),
            ),
        ),
        post(
            "hpa",
            &nsd("autoscaling/v2", "horizontalpodautoscalers"),
            obj(
                "autoscaling/v2",
                "HorizontalPodAutoscaler",
                "hpa",
                json!({"spec": {"scaleTargetRef": {"kind": "Deployment", "name": "d", "apiVersion": "apps/v1"}, "minReplicas": 2, "maxReplicas": 5,
                "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}},
                    {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "100Mi"}}}]}}),
            ),
        ),
        post(
            "pdb",
            &nsd("policy/v1", "poddisruptionbudgets"),
            obj(
                "policy/v1",
                "PodDisruptionBudget",
                "pdb",
                json!({"spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "x"}}}}),
            ),
        ),
        post(
            "pdb-max",
            &nsd("policy/v1", "poddisruptionbudgets"),
            obj(
                "policy/v1",
                "PodDisruptionBudget",
                "pdb2",
                json!({"spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "y"}}}}),
            ),
        ),
        post(
            "resourcequota",
            &nsd("v1", "resourcequotas"),
            obj(
                "v1",
                "ResourceQuota",
                "rq",
                json!({"spec": {"hard": {"requests.cpu": "1", "limits.memory": "1Gi", "pods": "3"}}}),
            ),
        ),
        post(
            "rolebinding",
            &nsd("rbac.authorization.k8s.io/v1", "rolebindings"),
            obj(
                "rbac.authorization.k8s.io/v1",
                "RoleBinding",
                "rb",
                json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
                "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}, {"kind": "Group", "name": "devs", "apiGroup": "rbac.authorization.k8s.io"},
                    {"kind": "ServiceAccount", "name": "default", "namespace": "{ns}"}]}),
            ),
        ),
        post(
            "lease",
            &nsd("coordination.k8s.io/v1", "leases"),
            obj(
                "coordination.k8s.io/v1",
                "Lease",
                "lease",
                json!({"spec": {"holderIdentity": "me"}}),
            ),
        ),
        post(
            "networkpolicy",
            &nsd("networking.k8s.io/v1", "networkpolicies"),
            obj(
                "networking.k8s.io/v1",
                "NetworkPolicy",
                "np",
                json!({"spec": {"podSelector": {"matchLabels": {"app": "x"}}}}),
            ),
        ),
        post(
            "networkpolicy-all",
            &nsd("networking.k8s.io/v1", "networkpolicies"),
            obj(
                "networking.k8s.io/v1",
                "NetworkPolicy",
                "np2",
                json!({"spec": {"podSelector": {}}}),
            ),
        ),
        post(
            "controllerrevision",
            &nsd("apps/v1", "controllerrevisions"),
            obj(
                "apps/v1",
                "ControllerRevision",
                "cr",
                json!({"revision": 3, "data": {}}),
            ),
        ),
        post(
            "podtemplate",
            &nsd("v1", "podtemplates"),
            obj("v1", "PodTemplate", "pt", json!({"template": template})),
        ),
    ];
    for (step, gv, plural) in [
        ("replicasets-table", "apps/v1", "replicasets"),
        (
            "replicationcontrollers-table",
            "v1",
            "replicationcontrollers",
        ),
        ("statefulsets-table", "apps/v1", "statefulsets"),
        ("daemonsets-table", "apps/v1", "daemonsets"),
        ("jobs-table", "batch/v1", "jobs"),
        ("cronjobs-table", "batch/v1", "cronjobs"),
        ("pvcs-table", "v1", "persistentvolumeclaims"),
        ("ingresses-table", "networking.k8s.io/v1", "ingresses"),
        ("hpas-table", "autoscaling/v2", "horizontalpodautoscalers"),
        ("pdbs-table", "policy/v1", "poddisruptionbudgets"),
        ("resourcequotas-table", "v1", "resourcequotas"),
        (
            "rolebindings-table",
            "rbac.authorization.k8s.io/v1",
            "rolebindings",
        ),
        ("leases-table", "coordination.k8s.io/v1", "leases"),
        (
            "networkpolicies-table",
            "networking.k8s.io/v1",
            "networkpolicies",
        ),
        ("podtemplates-table", "v1", "podtemplates"),
        ("limitranges-table", "v1", "limitranges"),
    ] {
        steps.push(table(get(step, &nsd(gv, plural))));
    }
    // Single objects (a real cluster's controllers add their own events and revisions).
    for (step, path) in [
        ("event-table", nsd("v1", "events/ev")),
        ("event-plain-table", nsd("v1", "events/ev2")),
        ("event-new-api-table", nsd("events.k8s.io/v1", "events/ev3")),
        (
            "controllerrevision-table",
            nsd("apps/v1", "controllerrevisions/cr"),
        ),
        (
            "ipaddress-table",
            "/apis/networking.k8s.io/v1/ipaddresses/10.0.0.1".to_string(),
        ),
        (
            "servicecidr-table",
            "/apis/networking.k8s.io/v1/servicecidrs/kubernetes".to_string(),
        ),
        (
            "apiservice-table",
            "/apis/apiregistration.k8s.io/v1/apiservices/v1.apps".to_string(),
        ),
    ] {
        steps.push(table(get(step, &path)));
    }
    let cluster: Vec<(&'static str, &'static str, &'static str, Value)> = vec![
        (
            "persistentvolume",
            "v1",
            "persistentvolumes",
            obj(
                "v1",
                "PersistentVolume",
                "{ns}-pv",
                json!({"spec": {"capacity": {"storage": "2Gi"}, "accessModes": ["ReadWriteOnce", "ReadOnlyMany"], "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": "standard", "claimRef": {"namespace": "{ns}", "name": "pvc"}, "hostPath": {"path": "/tmp"}}}),
            ),
        ),
        (
            "storageclass",
            "storage.k8s.io/v1",
            "storageclasses",
            obj(
                "storage.k8s.io/v1",
                "StorageClass",
                "{ns}-sc",
                json!({"provisioner": "x.io/y", "reclaimPolicy": "Retain", "volumeBindingMode": "WaitForFirstConsumer", "allowVolumeExpansion": true}),
            ),
        ),
        (
            "priorityclass",
            "scheduling.k8s.io/v1",
            "priorityclasses",
            obj(
                "scheduling.k8s.io/v1",
                "PriorityClass",
                "{ns}-pc",
                json!({"value": 5, "preemptionPolicy": "Never"}),
            ),
        ),
        (
            "ingressclass",
            "networking.k8s.io/v1",
            "ingressclasses",
            obj(
                "networking.k8s.io/v1",
                "IngressClass",
                "{ns}-ic",
                json!({"spec": {"controller": "example.com/x", "parameters": {"apiGroup": "example.com", "kind": "Params", "name": "p"}}}),
            ),
        ),
        (
            "runtimeclass",
            "node.k8s.io/v1",
            "runtimeclasses",
            obj(
                "node.k8s.io/v1",
                "RuntimeClass",
                "{ns}-rc",
                json!({"handler": "runc"}),
            ),
        ),
        (
            "clusterrolebinding",
            "rbac.authorization.k8s.io/v1",
            "clusterrolebindings",
            obj(
                "rbac.authorization.k8s.io/v1",
                "ClusterRoleBinding",
                "{ns}-crb",
                json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
                "subjects": [{"kind": "ServiceAccount", "name": "a", "namespace": "{ns}"}, {"kind": "ServiceAccount", "name": "b", "namespace": "{ns}"}]}),
            ),
        ),
        (
            "validatingwebhookconfiguration",
            "admissionregistration.k8s.io/v1",
            "validatingwebhookconfigurations",
            obj(
                "admissionregistration.k8s.io/v1",
                "ValidatingWebhookConfiguration",
                "{ns}-vwc",
                json!({}),
            ),
        ),
        (
            "mutatingwebhookconfiguration",
            "admissionregistration.k8s.io/v1",
            "mutatingwebhookconfigurations",
            obj(
                "admissionregistration.k8s.io/v1",
                "MutatingWebhookConfiguration",
                "{ns}-mwc",
                json!({}),
            ),
        ),
        (
            "validatingadmissionpolicy",
            "admissionregistration.k8s.io/v1",
            "validatingadmissionpolicies",
            obj(
                "admissionregistration.k8s.io/v1",
                "ValidatingAdmissionPolicy",
                "{ns}-vap",
                // Not ConfigMap parameters: a v1.36 server whose ConfigMap-param policy loses
                // its last binding finds no parameters until restarted (kubernetes#130887),
                // which would break admission_policy's test on the same cluster.
                json!({"spec": {"paramKind": {"apiVersion": "example.invalid/v1", "kind": "Params"},
                    "matchConstraints": {"resourceRules": [{"apiGroups": ["example.invalid"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["nothings"]}]},
                    "validations": [{"expression": "true"}, {"expression": "1 == 1"}]}}),
            ),
        ),
        (
            "validatingadmissionpolicybinding",
            "admissionregistration.k8s.io/v1",
            "validatingadmissionpolicybindings",
            obj(
                "admissionregistration.k8s.io/v1",
                "ValidatingAdmissionPolicyBinding",
                "{ns}-vapb",
                json!({"spec": {"policyName": "{ns}-vap", "validationActions": ["Warn"], "paramRef": {"name": "cfg", "namespace": "{ns}", "parameterNotFoundAction": "Allow"}}}),
            ),
        ),
        (
            "csidriver",
            "storage.k8s.io/v1",
            "csidrivers",
            obj(
                "storage.k8s.io/v1",
                "CSIDriver",
                "{ns}.csi.example.com",
                json!({"spec": {"attachRequired": false, "podInfoOnMount": true, "volumeLifecycleModes": ["Persistent", "Ephemeral"], "tokenRequests": [{"audience": "a"}], "requiresRepublish": true}}),
            ),
        ),
        (
            "csinode",
            "storage.k8s.io/v1",
            "csinodes",
            obj(
                "storage.k8s.io/v1",
                "CSINode",
                "{ns}-node",
                json!({"spec": {"drivers": [{"name": "d.example.com", "nodeID": "n1"}, {"name": "e.example.com", "nodeID": "n1"}]}}),
            ),
        ),
        (
            "volumeattachment",
            "storage.k8s.io/v1",
            "volumeattachments",
            obj(
                "storage.k8s.io/v1",
                "VolumeAttachment",
                "{ns}-va",
                json!({"spec": {"attacher": "x.example.com", "nodeName": "n", "source": {"persistentVolumeName": "pv"}}}),
            ),
        ),
        (
            "flowschema",
            "flowcontrol.apiserver.k8s.io/v1",
            "flowschemas",
            obj(
                "flowcontrol.apiserver.k8s.io/v1",
                "FlowSchema",
                "{ns}-fs",
                json!({"spec": {"priorityLevelConfiguration": {"name": "global-default"}, "matchingPrecedence": 5000, "distinguisherMethod": {"type": "ByUser"}}}),
            ),
        ),
        (
            "prioritylevelconfiguration",
            "flowcontrol.apiserver.k8s.io/v1",
            "prioritylevelconfigurations",
            obj(
                "flowcontrol.apiserver.k8s.io/v1",
                "PriorityLevelConfiguration",
                "{ns}-plc",
                json!({"spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 7, "limitResponse": {"type": "Queue", "queuing": {"queues": 16, "handSize": 4, "queueLengthLimit": 20}}}}}),
            ),
        ),
    ];
    for (step, gv, plural, body) in &cluster {
        steps.push(written(post(step, &cl(gv, plural), body.clone())));
    }
    let tables: [&'static str; 15] = [
        "persistentvolume-table",
        "storageclass-table",
        "priorityclass-table",
        "ingressclass-table",
        "runtimeclass-table",
        "clusterrolebinding-table",
        "validatingwebhookconfiguration-table",
        "mutatingwebhookconfiguration-table",
        "validatingadmissionpolicy-table",
        "validatingadmissionpolicybinding-table",
        "csidriver-table",
        "csinode-table",
        "volumeattachment-table",
        "flowschema-table",
        "prioritylevelconfiguration-table",
    ];
    for ((_, gv, plural, body), step) in cluster.iter().zip(tables) {
        let name = body
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        steps.push(table(get(step, &format!("{}/{name}", cl(gv, plural)))));
    }
    for (step, gv, plural) in [
        ("delete-persistentvolume", "v1", "persistentvolumes/{ns}-pv"),
        (
            "delete-storageclass",
            "storage.k8s.io/v1",
            "storageclasses/{ns}-sc",
        ),
        (
            "delete-priorityclass",
            "scheduling.k8s.io/v1",
            "priorityclasses/{ns}-pc",
        ),
        (
            "delete-ingressclass",
            "networking.k8s.io/v1",
            "ingressclasses/{ns}-ic",
        ),
        (
            "delete-runtimeclass",
            "node.k8s.io/v1",
            "runtimeclasses/{ns}-rc",
        ),
        (
            "delete-clusterrolebinding",
            "rbac.authorization.k8s.io/v1",
            "clusterrolebindings/{ns}-crb",
        ),
        (
            "delete-vwc",
            "admissionregistration.k8s.io/v1",
            "validatingwebhookconfigurations/{ns}-vwc",
        ),
        (
            "delete-mwc",
            "admissionregistration.k8s.io/v1",
            "mutatingwebhookconfigurations/{ns}-mwc",
        ),
        (
            "delete-vapb",
            "admissionregistration.k8s.io/v1",
            "validatingadmissionpolicybindings/{ns}-vapb",
        ),
        (
            "delete-vap",
            "admissionregistration.k8s.io/v1",
            "validatingadmissionpolicies/{ns}-vap",
        ),
        (
            "delete-csidriver",
            "storage.k8s.io/v1",
            "csidrivers/{ns}.csi.example.com",
        ),
        ("delete-csinode", "storage.k8s.io/v1", "csinodes/{ns}-node"),
        (
            "delete-volumeattachment",
            "storage.k8s.io/v1",
            "volumeattachments/{ns}-va",
        ),
        (
            "delete-flowschema",
            "flowcontrol.apiserver.k8s.io/v1",
            "flowschemas/{ns}-fs",
        ),
        (
            "delete-plc",
            "flowcontrol.apiserver.k8s.io/v1",
            "prioritylevelconfigurations/{ns}-plc",
        ),
    ] {
        steps.push(written(delete(step, &cl(gv, plural))));
    }
    // The namespaced creates: only their status codes are this scenario's.
    let n = steps
        .iter()
        .position(|st| st.name == "replicasets-table")
        .unwrap_or(0);
    for st in steps.iter_mut().take(n) {
        *st = written(std::mem::replace(st, get("", "")));
    }
    Scenario {
        name: "printers",
        steps,
    }
}

/// Defaults of less common kinds: an IngressClass's parameters scope, a
/// ValidatingAdmissionPolicy's failure policy and match constraints, a
/// PriorityLevelConfiguration's lendable percent and queuing, a CSIDriver's flags.
pub fn kind_defaults() -> Scenario {
    let obj = |gv: &str, kind: &str, name: &str, spec: Value| json!({"apiVersion": gv, "kind": kind, "metadata": {"name": name}, "spec": spec});
    let created = |st: Step| {
        st.ignore("body.metadata.uid", "generated")
            .ignore("body.metadata.creationTimestamp", "time of the request")
    };
    Scenario {
        name: "kind_defaults",
        steps: vec![
            created(post(
                "ingressclass",
                "/apis/networking.k8s.io/v1/ingressclasses",
                obj(
                    "networking.k8s.io/v1",
                    "IngressClass",
                    "{ns}-ic",
                    json!({"controller": "example.com/x", "parameters": {"apiGroup": "example.com", "kind": "Params", "name": "p"}}),
                ),
            )),
            created(post(
                "validatingadmissionpolicy",
                "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
                obj(
                    "admissionregistration.k8s.io/v1",
                    "ValidatingAdmissionPolicy",
                    "{ns}-vap",
                    json!({"matchConstraints": {"resourceRules": [{"apiGroups": ["example.invalid"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["nothings"]}],
                        "excludeResourceRules": [{"apiGroups": ["example.invalid"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["others"]}]},
                        "validations": [{"expression": "true"}]}),
                ),
            )),
            created(post(
                "prioritylevelconfiguration",
                "/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations",
                obj(
                    "flowcontrol.apiserver.k8s.io/v1",
                    "PriorityLevelConfiguration",
                    "{ns}-plc",
                    json!({"type": "Limited", "limited": {"limitResponse": {"type": "Queue", "queuing": {"queues": 16}}}}),
                ),
            )),
            post(
                "claim-rwop-with-others",
                "/api/v1/namespaces/{ns}/persistentvolumeclaims",
                json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c"},
                    "spec": {"accessModes": ["ReadWriteOnce", "ReadWriteOncePod"], "resources": {"requests": {"storage": "1Gi"}}}}),
            ),
            created(post(
                "csidriver",
                "/apis/storage.k8s.io/v1/csidrivers",
                obj(
                    "storage.k8s.io/v1",
                    "CSIDriver",
                    "{ns}.csi.example.com",
                    json!({}),
                ),
            )),
            get(
                "apiservice-apps",
                "/apis/apiregistration.k8s.io/v1/apiservices/v1.apps",
            ),
            get(
                "apiservice-core",
                "/apis/apiregistration.k8s.io/v1/apiservices/v1.",
            ),
            delete(
                "delete-ingressclass",
                "/apis/networking.k8s.io/v1/ingressclasses/{ns}-ic",
            ),
            delete(
                "delete-vap",
                "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/{ns}-vap",
            ),
            delete(
                "delete-plc",
                "/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations/{ns}-plc",
            ),
            delete(
                "delete-csidriver",
                "/apis/storage.k8s.io/v1/csidrivers/{ns}.csi.example.com",
            ),
        ],
    }
}

/// LimitRanger beyond container defaults: a Container item's limit/request ratio, a Pod
/// item's bounds on the pod's totals, and a PersistentVolumeClaim item's bounds on a
/// claim's storage request (403 with upstream's texts; dry runs).
pub fn limit_range_kinds() -> Scenario {
    let ns = "/api/v1/namespaces/{ns}";
    let pods = format!("{ns}/pods?dryRun=All");
    let claims = format!("{ns}/persistentvolumeclaims?dryRun=All");
    let pod = |name: &str, containers: Value| json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {"containers": containers}});
    let c = |name: &str, requests: Value, limits: Value| json!({"name": name, "image": "nginx", "resources": {"requests": requests, "limits": limits}});
    let claim = |name: &str, storage: &str| {
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": storage}}}})
    };
    Scenario {
        name: "limit_range_kinds",
        steps: vec![
            post(
                "limit-range",
                &format!("{ns}/limitranges"),
                json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "l"}, "spec": {"limits": [
                    {"type": "Container", "maxLimitRequestRatio": {"cpu": "2"}},
                    {"type": "Pod", "max": {"memory": "1Gi"}, "min": {"cpu": "100m"}},
                    {"type": "PersistentVolumeClaim", "min": {"storage": "1Gi"}, "max": {"storage": "5Gi"}},
                ]}}),
            ),
            post(
                "within",
                &pods,
                pod(
                    "ok",
                    json!([c(
                        "a",
                        json!({"cpu": "100m"}),
                        json!({"cpu": "200m", "memory": "512Mi"})
                    )]),
                ),
            )
            .transform(token_volume),
            post(
                "ratio-over",
                &pods,
                pod(
                    "ratio",
                    json!([c(
                        "a",
                        json!({"cpu": "100m"}),
                        json!({"cpu": "500m", "memory": "512Mi"})
                    )]),
                ),
            ),
            post(
                "pod-total-over",
                &pods,
                pod(
                    "total",
                    json!([
                        c(
                            "a",
                            json!({"cpu": "100m"}),
                            json!({"cpu": "200m", "memory": "768Mi"})
                        ),
                        c(
                            "b",
                            json!({"cpu": "100m"}),
                            json!({"cpu": "200m", "memory": "768Mi"})
                        ),
                    ]),
                ),
            ),
            post(
                "no-request",
                &pods,
                pod(
                    "bare",
                    json!([c("a", json!({}), json!({"memory": "256Mi"}))]),
                ),
            ),
            post("claim-under", &claims, claim("small", "500Mi")),
            post("claim-over", &claims, claim("big", "10Gi")),
            post("claim-within", &claims, claim("fine", "2Gi")),
        ],
    }
}

/// ResourceQuota on updates: a Service turned NodePort or LoadBalancer is charged the
/// node ports and load balancers it adds (403 past the quota), and one that adds none
/// passes.
pub fn quota_updates() -> Scenario {
    let ns = "/api/v1/namespaces/{ns}";
    let svc = format!("{ns}/services/s");
    let merge = "application/merge-patch+json";
    Scenario {
        name: "quota_updates",
        steps: vec![
            post(
                "quota",
                &format!("{ns}/resourcequotas"),
                json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"},
                    "spec": {"hard": {"services.nodeports": "1", "services.loadbalancers": "0", "services": "5"}}}),
            ),
            get("quota-synced", &format!("{ns}/resourcequotas/q"))
                .until(|r| r.pointer("/body/status/used").is_some())
                .ignore(
                    "body.metadata.managedFields",
                    "kube-controller-manager's quota controller and kube-apiserver's quota \
                     admission each write status.used through the API, as timing has it",
                ),
            post(
                "service",
                &format!("{ns}/services"),
                json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
                    "spec": {"ports": [{"name": "a", "port": 80}, {"name": "b", "port": 81}]}}),
            ),
            patch(
                "to-node-port-over",
                &svc,
                merge,
                json!({"spec": {"type": "NodePort"}}),
            ),
            patch(
                "to-load-balancer-over",
                &svc,
                merge,
                json!({"spec": {"type": "LoadBalancer"}}),
            ),
            patch(
                "one-port-less",
                &svc,
                "application/json-patch+json",
                json!([{"op": "remove", "path": "/spec/ports/1"}]),
            ),
            patch(
                "to-node-port-within",
                &svc,
                merge,
                json!({"spec": {"type": "NodePort"}}),
            ),
        ],
    }
}

/// Go's JSON type errors, as kube-apiserver's decoder words them: a value of the wrong
/// kind for an integer, a string, a bool, a list, a map, a struct, a float given to an
/// integer, the Quantity, IntOrString and Time decoders (dry-run creates).
pub fn go_type_errors() -> Scenario {
    Scenario {
        name: "go_type_errors",
        steps: vec![
            post(
                "replicas-string",
                "/apis/apps/v1/namespaces/{ns}/deployments?dryRun=All",
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": "3", "selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}),
            ),
            post(
                "containers-object",
                "/api/v1/namespaces/{ns}/pods?dryRun=All",
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": {"name": "c", "image": "i"}}}),
            ),
            post(
                "labels-list",
                "/api/v1/namespaces/{ns}/configmaps?dryRun=All",
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": ["a"]}}),
            ),
            post(
                "data-number",
                "/api/v1/namespaces/{ns}/configmaps?dryRun=All",
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": 1}}),
            ),
            post(
                "port-string",
                "/api/v1/namespaces/{ns}/pods?dryRun=All",
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": "80"}]}]}}),
            ),
            post(
                "bool-string",
                "/api/v1/namespaces/{ns}/pods?dryRun=All",
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"hostNetwork": "true", "containers": [{"name": "c", "image": "i"}]}}),
            ),
            post(
                "spec-string",
                "/api/v1/namespaces/{ns}/pods?dryRun=All",
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": "x"}),
            ),
            post(
                "image-number",
                "/api/v1/namespaces/{ns}/pods?dryRun=All",
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": 5}]}}),
            ),
            post(
                "args-string",
                "/api/v1/namespaces/{ns}/pods?dryRun=All",
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i", "args": "x"}]}}),
            ),
            post(
                "quantity-bool",
                "/api/v1/namespaces/{ns}/pods?dryRun=All",
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i", "resources": {"limits": {"cpu": true}}}]}}),
            ),
            post(
                "intorstring-bool",
                "/api/v1/namespaces/{ns}/services?dryRun=All",
                json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"ports": [{"port": 80, "targetPort": true}]}}),
            ),
            post(
                "name-number",
                "/api/v1/namespaces/{ns}/configmaps?dryRun=All",
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": 5}}),
            ),
            post(
                "replicas-float",
                "/apis/apps/v1/namespaces/{ns}/deployments?dryRun=All",
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": 1.5, "selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}),
            ),
            post(
                "binarydata-number",
                "/api/v1/namespaces/{ns}/configmaps?dryRun=All",
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "binaryData": {"a": 1}}),
            ),
            post(
                "time-number",
                "/api/v1/namespaces/{ns}/configmaps?dryRun=All",
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "creationTimestamp": 5}}),
            ),
        ],
    }
}

/// One Event, two APIs: kube-apiserver keeps `events.k8s.io/v1` Events as core v1 Events,
/// so each API reads, lists, watches, patches and deletes the Events the other wrote, in
/// its own form (`regarding`/`involvedObject`, `note`/`message`, …).
pub fn events_two_apis() -> Scenario {
    let core = "/api/v1/namespaces/{ns}/events";
    let v1 = "/apis/events.k8s.io/v1/namespaces/{ns}/events";
    Scenario {
        name: "events_two_apis",
        steps: vec![
            post(
                "core-create",
                core,
                json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "c1"},
                    "involvedObject": {"kind": "Pod", "name": "p", "namespace": "{ns}", "apiVersion": "v1"},
                    "reason": "Started", "message": "m", "type": "Normal", "count": 2,
                    "firstTimestamp": "2026-12-03T14:00:00Z", "lastTimestamp": "2026-12-03T14:00:05Z",
                    "source": {"component": "kw", "host": "h1"}}),
            ),
            post(
                "v1-create",
                v1,
                json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "v1e"},
                    "eventTime": "2026-12-03T14:00:00.000001Z", "reportingController": "example.com/kw",
                    "reportingInstance": "kw-1", "action": "Reconcile", "reason": "Synced", "type": "Warning",
                    "regarding": {"kind": "Pod", "name": "p", "namespace": "{ns}"}, "note": "n",
                    "related": {"kind": "Node", "name": "n1"},
                    "series": {"count": 2, "lastObservedTime": "2026-12-03T14:00:01.000002Z"}}),
            ),
            get("core-as-v1", &format!("{v1}/c1")),
            get("v1-as-core", &format!("{core}/v1e")),
            get("list-core", core),
            get("list-v1", v1),
            get(
                "list-core-by-involved",
                &format!(
                    "{core}?fieldSelector=involvedObject.name%3Dp,reportingComponent%3Dexample.com%2Fkw"
                ),
            ),
            get(
                "list-core-by-source",
                &format!("{core}?fieldSelector=source%3Dkw"),
            ),
            get(
                "list-v1-by-regarding",
                &format!("{v1}?fieldSelector=regarding.name%3Dp"),
            ),
            get(
                "list-v1-by-involved",
                &format!("{v1}?fieldSelector=involvedObject.name%3Dp"),
            ),
            get(
                "list-v1-by-name",
                &format!("{v1}?fieldSelector=metadata.name%3Dc1"),
            ),
            get(
                "list-v1-by-controller",
                &format!(
                    "{v1}?fieldSelector=reportingController%3Dexample.com%2Fkw,type%3DWarning"
                ),
            ),
            get("list-v1-by-note", &format!("{v1}?fieldSelector=note%3Dn")),
            patch(
                "v1-patches-core",
                &format!("{v1}/c1"),
                MERGE,
                json!({"note": "changed", "deprecatedCount": 3}),
            ),
            get("core-after-v1-patch", &format!("{core}/c1")),
            patch(
                "core-patches-v1",
                &format!("{core}/v1e"),
                MERGE,
                json!({"message": "from core"}),
            ),
            get("v1-after-core-patch", &format!("{v1}/v1e")),
            get("table-v1", v1).table(),
            get(
                "watch-v1",
                &format!("{v1}?watch=1&resourceVersion={{rv:core-create}}&timeoutSeconds=1"),
            )
            .stream(),
            get(
                "watch-core",
                &format!("{core}?watch=1&resourceVersion={{rv:core-create}}&timeoutSeconds=1"),
            )
            .stream(),
            delete("v1-deletes-core", &format!("{v1}/c1")),
            get("core-gone", &format!("{core}/c1")),
            delete("core-deletes-v1", &format!("{core}/v1e")),
            get("v1-gone", &format!("{v1}/v1e")),
            get("list-v1-empty", v1),
        ],
    }
}

/// The field selectors each kind supports (kube-apiserver v1.36's field label
/// conversions) and the three wordings of an unsupported one.
pub fn field_selector_labels() -> Scenario {
    let q = |path: &str, sel: &str| format!("{path}?fieldSelector={sel}");
    Scenario {
        name: "field_selector_labels",
        steps: vec![
            get(
                "services-type",
                &q(
                    "/api/v1/namespaces/{ns}/services",
                    "spec.type%3DClusterIP,spec.clusterIP%3D10.0.0.1",
                ),
            ),
            get(
                "services-unknown",
                &q("/api/v1/namespaces/{ns}/services", "spec.ports%3Dx"),
            ),
            get(
                "pods-ips",
                &q("/api/v1/namespaces/{ns}/pods", "status.podIPs%3D10.1.0.1"),
            ),
            get(
                "pods-unknown",
                &q("/api/v1/namespaces/{ns}/pods", "spec.hostPID%3Dtrue"),
            ),
            get(
                "rc-replicas",
                &q(
                    "/api/v1/namespaces/{ns}/replicationcontrollers",
                    "status.replicas%3D1",
                ),
            ),
            get(
                "rs-replicas",
                &q(
                    "/apis/apps/v1/namespaces/{ns}/replicasets",
                    "status.replicas%3D1",
                ),
            ),
            get(
                "jobs-successful",
                &q(
                    "/apis/batch/v1/namespaces/{ns}/jobs",
                    "status.successful%3D1",
                ),
            ),
            get(
                "jobs-unknown",
                &q("/apis/batch/v1/namespaces/{ns}/jobs", "status.failed%3D1"),
            ),
            get(
                "secrets-unknown",
                &q("/api/v1/namespaces/{ns}/secrets", "data%3Dx"),
            ),
            get(
                "configmaps-unknown",
                &q("/api/v1/namespaces/{ns}/configmaps", "data%3Dx"),
            ),
            get("nodes-unknown", &q("/api/v1/nodes", "spec.podCIDR%3Dx")),
            get(
                "csr-unknown",
                &q(
                    "/apis/certificates.k8s.io/v1/certificatesigningrequests",
                    "spec.username%3Dx",
                ),
            ),
        ],
    }
}

/// Who owns what when one manager updates an object through two versions: an Update's
/// managedFields entry is per manager, operation and apiVersion (two entries), an Apply's
/// per manager and operation only (one, relabelled to the last version applied).
pub fn managers_per_version() -> Scenario {
    let versions: Vec<Value> = ["v1", "v2"]
        .iter()
        .map(|v| json!({"name": v, "served": true, "storage": *v == "v1",
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}, "c": {"type": "string"}}}}}}}))
        .collect();
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.{ns}.kwdiff.example"},
        "spec": {"group": "{ns}.kwdiff.example", "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": versions}});
    let v1 = "/apis/{ns}.kwdiff.example/v1/namespaces/{ns}/gadgets";
    let v2 = "/apis/{ns}.kwdiff.example/v2/namespaces/{ns}/gadgets";
    let gadget = |version: &str, name: &str, spec: Value| json!({"apiVersion": format!("{{ns}}.kwdiff.example/{version}"), "kind": "Gadget", "metadata": {"name": name}, "spec": spec});
    Scenario {
        name: "managers_per_version",
        steps: vec![
            post("create-crd", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd),
            get("established", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.{ns}.kwdiff.example")
                .until(established),
            post("create-v1", v1, gadget("v1", "g1", json!({"a": "1"}))).retry_on(404),
            patch("update-v2", &format!("{v2}/g1"), MERGE, json!({"spec": {"b": "2"}})),
            patch("update-v1-again", &format!("{v1}/g1"), MERGE, json!({"spec": {"c": "3"}})),
            patch(
                "apply-v1",
                &format!("{v1}/g2?fieldManager=applier"),
                APPLY,
                gadget("v1", "g2", json!({"a": "1"})),
            ),
            patch(
                "apply-v2",
                &format!("{v2}/g2?fieldManager=applier"),
                APPLY,
                gadget("v2", "g2", json!({"a": "1", "b": "2"})),
            ),
            delete("delete-crd", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.{ns}.kwdiff.example"),
        ],
    }
}

/// resource.k8s.io/v1 (dynamic resource allocation) and VolumeAttributesClasses: defaults,
/// generations, the common validation errors, immutable fields, tables and field
/// selectors, as v1.36 answers them.
pub fn dynamic_resources() -> Scenario {
    let classes = "/apis/resource.k8s.io/v1/deviceclasses";
    let claims = "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims";
    let templates = "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaimtemplates";
    let slices = "/apis/resource.k8s.io/v1/resourceslices";
    let vacs = "/apis/storage.k8s.io/v1/volumeattributesclasses";
    let exactly = |class: &str| json!({"deviceClassName": class});
    let claim = |name: &str, requests: Value| {
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name}, "spec": {"devices": {"requests": requests}}})
    };
    let slice = |name: &str, spec: Value| {
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": name}, "spec": spec})
    };
    Scenario {
        name: "dynamic_resources",
        steps: vec![
            post(
                "class-create",
                classes,
                json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                    "metadata": {"name": "{ns}.gpu.example.com"},
                    "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.example.com\""}}],
                        "config": [{"opaque": {"driver": "gpu.example.com", "parameters": {"mode": "fast"}}}]}}),
            ),
            patch(
                "class-spec-change",
                &format!("{classes}/{{ns}}.gpu.example.com"),
                MERGE,
                json!({"spec": {"config": null}}),
            ),
            patch(
                "class-label-change",
                &format!("{classes}/{{ns}}.gpu.example.com"),
                MERGE,
                json!({"metadata": {"labels": {"a": "b"}}}),
            ),
            post(
                "class-invalid",
                classes,
                json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                    "metadata": {"name": "{ns}-bad"},
                    "spec": {"selectors": [{}],
                        "config": [{}, {"opaque": {"driver": "", "parameters": "x"}},
                            {"opaque": {"driver": "Bad_Driver", "parameters": {"a": 1}}}]}}),
            ),
            post(
                "claim-create",
                claims,
                claim("c1", json!([{"name": "gpu", "exactly": exactly("{ns}.gpu.example.com")},
                    {"name": "any", "firstAvailable": [
                        {"name": "big", "deviceClassName": "big.example.com",
                         "tolerations": [{"key": "example.com/t", "value": "v"}]},
                        {"name": "all", "deviceClassName": "small.example.com", "allocationMode": "All"}]}])),
            ),
            get("claim-get", &format!("{claims}/c1")),
            post(
                "claim-create-second",
                claims,
                claim("c2-ok", json!([{"name": "gpu", "exactly": exactly("x")}])),
            ),
            post(
                "claim-invalid",
                claims,
                claim("c2", json!([
                    {"name": "Bad.Name", "exactly": exactly("")},
                    {"name": "neither"},
                    {"name": "both", "exactly": exactly("x"), "firstAvailable": [{"name": "s", "deviceClassName": "x"}]},
                    {"name": "all", "exactly": {"deviceClassName": "x", "allocationMode": "All", "count": 2}},
                    {"name": "some", "exactly": {"deviceClassName": "x", "allocationMode": "Some"}},
                    {"name": "neg", "exactly": {"deviceClassName": "x", "count": -1}},
                    {"name": "all"},
                    {"name": "tol", "exactly": {"deviceClassName": "x", "tolerations": [
                        {"key": "k", "operator": "Exists", "value": "v"},
                        {"key": "k", "operator": "Less"},
                        {"key": "k", "value": "v", "effect": "Sometimes"}]}},
                    {"name": "sel", "exactly": {"deviceClassName": "x", "selectors": [{}]}},
                ])),
            ),
            post(
                "claim-invalid-constraints",
                claims,
                json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c3"},
                    "spec": {"devices": {"requests": [{"name": "a", "exactly": exactly("x")}],
                        "constraints": [{"requests": ["a", "missing"], "matchAttribute": "example.com/model"}, {"requests": ["a"]}],
                        "config": [{"requests": ["a/b/c"], "opaque": {"driver": "d.example.com", "parameters": {}}}, {"requests": ["a"]}]}}}),
            ),
            patch(
                "claim-spec-immutable",
                &format!("{claims}/c1"),
                MERGE,
                json!({"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly("other")}]}}}),
            ),
            patch(
                "claim-labels",
                &format!("{claims}/c1"),
                MERGE,
                json!({"metadata": {"labels": {"a": "b"}}, "status": {"reservedFor": [{"resource": "pods", "name": "p", "uid": "u1"}]}}),
            ),
            patch(
                "claim-status-reserved-unallocated",
                &format!("{claims}/c1/status"),
                MERGE,
                json!({"status": {"reservedFor": [{"resource": "pods", "name": "p", "uid": "u1"}]}}),
            ),
            patch(
                "claim-status-allocated",
                &format!("{claims}/c1/status"),
                MERGE,
                json!({"metadata": {"labels": {"from": "status"}}, "spec": {"devices": null},
                    "status": {"allocation": {"devices": {"results": [
                        {"request": "gpu", "driver": "gpu.example.com", "pool": "node1", "device": "gpu-0"}]},
                        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node1"]}]}]}}}}),
            ),
            patch(
                "claim-status-bad-results",
                &format!("{claims}/c2-ok/status"),
                MERGE,
                json!({"status": {"allocation": {"devices": {"results": [
                    {"request": "nosuch", "driver": "Bad_Driver", "pool": "", "device": "Bad.Dev"},
                    {"request": "gpu", "driver": "gpu.example.com", "pool": "node1", "device": "gpu-0"},
                    {"request": "gpu", "driver": "gpu.example.com", "pool": "node1", "device": "gpu-0"}]}}}}),
            ),
            patch(
                "claim-status-ok",
                &format!("{claims}/c2-ok/status"),
                MERGE,
                json!({"status": {"allocation": {"devices": {"results": [
                    {"request": "gpu", "driver": "gpu.example.com", "pool": "node1", "device": "gpu-0"}]}}}}),
            ),
            patch(
                "claim-status-reallocate",
                &format!("{claims}/c2-ok/status"),
                MERGE,
                json!({"status": {"allocation": {"devices": {"results": [
                    {"request": "gpu", "driver": "gpu.example.com", "pool": "node1", "device": "gpu-1"}]}}}}),
            ),
            patch(
                "claim-status-devices",
                &format!("{claims}/c2-ok/status"),
                MERGE,
                json!({"status": {"devices": [
                    {"driver": "gpu.example.com", "pool": "node1", "device": "gpu-0", "data": {"a": 1}},
                    {"driver": "gpu.example.com", "pool": "node1", "device": "gpu-9"}]}}),
            ),
            get("claims-table", claims).table(),
            post(
                "template-create",
                templates,
                json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "t1"},
                    "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly("x")}]}}}}),
            ),
            post(
                "template-invalid",
                templates,
                json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "t2"},
                    "spec": {"metadata": {"name": "n", "labels": {"ok": "yes"}, "finalizers": ["x/y"]},
                        "spec": {"devices": {"requests": [{"name": "-x", "exactly": exactly("x")}]}}}}),
            ),
            patch(
                "template-spec-immutable",
                &format!("{templates}/t1"),
                MERGE,
                json!({"spec": {"metadata": {"labels": {"a": "b"}}}}),
            ),
            get("templates-table", templates).table(),
            post(
                "slice-create",
                slices,
                slice("{ns}-node1", json!({"driver": "gpu.example.com", "nodeName": "{ns}-node1",
                    "pool": {"name": "{ns}-node1", "generation": 1, "resourceSliceCount": 1},
                    "devices": [{"name": "gpu-0", "attributes": {"model": {"string": "A100"}, "example.com/index": {"int": 0}},
                        "capacity": {"memory": {"value": "40Gi"}}}]})),
            ),
            post(
                "slice-all-nodes",
                slices,
                slice("{ns}-all", json!({"driver": "net.example.com", "allNodes": true,
                    "pool": {"name": "{ns}-pool", "generation": 0, "resourceSliceCount": 2}, "devices": []})),
            ),
            post(
                "slice-invalid",
                slices,
                slice("{ns}-bad", json!({"driver": "", "pool": {"name": "", "generation": -1, "resourceSliceCount": 0},
                    "devices": [{"name": "d"}, {"name": "d"}, {"name": "Bad_Name"},
                        {"name": "two", "attributes": {"a": {"string": "x", "int": 1}}},
                        {"name": "key", "attributes": {"bad key": {"bool": true}}},
                        {"name": "empty-key", "capacity": {"": {"value": "1"}}},
                        {"name": "taint", "taints": [{"key": "k", "effect": ""}, {"key": "k", "effect": "Never"}]}]})),
            ),
            post(
                "slice-pool-parts",
                slices,
                slice("{ns}-parts", json!({"driver": "gpu.example.com", "allNodes": true,
                    "pool": {"name": "A/ok/B_", "resourceSliceCount": 1}})),
            ),
            post(
                "slice-two-selections",
                slices,
                slice("{ns}-two", json!({"driver": "gpu.example.com", "nodeName": "n", "allNodes": true,
                    "pool": {"name": "p", "resourceSliceCount": 1}})),
            ),
            post(
                "slice-false-and-empty",
                slices,
                slice("{ns}-false", json!({"driver": "gpu.example.com", "nodeName": "", "allNodes": false,
                    "pool": {"name": "p", "resourceSliceCount": 1}})),
            ),
            patch(
                "slice-devices-change",
                &format!("{slices}/{{ns}}-node1"),
                MERGE,
                json!({"spec": {"devices": [{"name": "gpu-0"}, {"name": "gpu-1"}]}}),
            ),
            patch(
                "slice-immutable",
                &format!("{slices}/{{ns}}-node1"),
                MERGE,
                json!({"spec": {"driver": "other.example.com", "nodeName": "other", "pool": {"name": "other"}}}),
            ),
            get(
                "slices-by-node",
                &format!("{slices}?fieldSelector=spec.nodeName%3D{{ns}}-node1"),
            ),
            get(
                "slices-by-driver",
                &format!("{slices}?fieldSelector=spec.driver%3Dnet.example.com,metadata.name%3D{{ns}}-all"),
            ),
            get(
                "slices-unknown-selector",
                &format!("{slices}?fieldSelector=spec.pool.name%3Dx"),
            ),
            get(
                "claims-unknown-selector",
                &format!("{claims}?fieldSelector=status.allocation%3Dx"),
            ),
            get(
                "slices-table",
                &format!("{slices}?fieldSelector=spec.driver%3Dgpu.example.com,metadata.name%3D{{ns}}-node1"),
            )
            .table(),
            post(
                "vac-create",
                vacs,
                json!({"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttributesClass",
                    "metadata": {"name": "{ns}-gold"}, "driverName": "pd.csi.storage.gke.io",
                    "parameters": {"iops": "3000"}}),
            ),
            post(
                "vac-invalid",
                vacs,
                json!({"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttributesClass",
                    "metadata": {"name": "{ns}-bad"}, "parameters": {"": "x"}}),
            ),
            post(
                "vac-invalid-driver",
                vacs,
                json!({"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttributesClass",
                    "metadata": {"name": "{ns}-bad2"}, "driverName": "not a driver!"}),
            ),
            patch(
                "vac-update",
                &format!("{vacs}/{{ns}}-gold"),
                MERGE,
                json!({"driverName": "other.csi.io", "parameters": {"iops": "5000"}}),
            ),
            get(
                "vac-table",
                &format!("{vacs}?fieldSelector=metadata.name%3D{{ns}}-gold"),
            )
            .table(),
            delete("claim-delete", &format!("{claims}/c1")),
            delete("template-delete", &format!("{templates}/t1")),
            delete("slice-delete", &format!("{slices}/{{ns}}-all")),
            delete("class-delete", &format!("{classes}/{{ns}}.gpu.example.com")),
        ],
    }
}

/// MutatingAdmissionPolicies (admissionregistration.k8s.io/v1): defaults, a JSONPatch
/// and an ApplyConfiguration mutation (what they add is owned by no manager), a match
/// condition, an update, the errors of a failing expression and of a patch that does not
/// apply, `failurePolicy: Ignore`, and invalid policies, as v1.36 answers them.
pub fn mutating_policies() -> Scenario {
    let policies = "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies";
    let bindings = "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings";
    let cms = "/api/v1/namespaces/{ns}/configmaps";
    let rules = |resources: &str, ops: Value| json!({"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ops, "resources": [resources]}]});
    let policy = |name: &str, constraints: Value, extra: Value| {
        let mut spec = json!({"matchConstraints": constraints, "reinvocationPolicy": "Never"});
        if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                s.insert(k.clone(), v.clone());
            }
        }
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
            "metadata": {"name": name}, "spec": spec})
    };
    let binding = |name: &str| {
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding",
            "metadata": {"name": name}, "spec": {"policyName": name,
                "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "{ns}"}}}}})
    };
    let jp = |expr: &str| json!({"mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": expr}}]});
    let cm = |name: &str, extra: Value| {
        let mut o = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}});
        if let Some(m) = extra.as_object() {
            for (k, v) in m {
                o["metadata"][k] = v.clone();
            }
        }
        o
    };
    // A policy takes effect once kube-apiserver's policy informers have it.
    let mutated = |v: &Value| {
        v.pointer("/body/metadata/labels/jp") == Some(&json!("yes"))
            && v.pointer("/body/metadata/annotations/ac") == Some(&json!("yes"))
    };
    let sa_refused = |v: &Value| v.get("status").and_then(Value::as_u64) != Some(201);
    let reinvoked = |v: &Value| {
        v.pointer("/body/metadata/labels/late") == Some(&json!("v"))
            && v.pointer("/body/metadata/annotations/copied") == Some(&json!("v"))
    };
    Scenario {
        name: "mutating_policies",
        steps: vec![
            post(
                "jp-policy",
                policies,
                {
                    let mut p = policy("{ns}-jp", rules("configmaps", json!(["CREATE"])),
                        jp(r#"[JSONPatch{op: "add", path: "/metadata/labels", value: {"jp": "yes"}}]"#));
                    p["spec"]["matchConditions"] = json!([{"name": "not-re",
                        "expression": "!object.metadata.name.startsWith('re-')"}]);
                    p
                },
            ),
            post("jp-binding", bindings, binding("{ns}-jp")),
            post(
                "ac-policy",
                policies,
                policy("{ns}-ac", rules("configmaps", json!(["CREATE", "UPDATE"])), json!({
                    "matchConditions": [{"name": "not-skipped",
                        "expression": "!has(object.metadata.annotations) || !('skip' in object.metadata.annotations)"},
                        {"name": "not-re", "expression": "!object.metadata.name.startsWith('re-')"}],
                    "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
                        r#"Object{metadata: Object.metadata{annotations: {"ac": "yes"}}, data: {"added": "by-policy"}}"#}}],
                    "reinvocationPolicy": "IfNeeded"})),
            ),
            post("ac-binding", bindings, binding("{ns}-ac")),
            post("wait-for-policies", &format!("{cms}?dryRun=All"), cm("probe", json!({})))
                .until(mutated),
            post("create-mutated", cms, cm("c1", json!({}))),
            post("create-skipped", cms, cm("c2", json!({"annotations": {"skip": "1"}}))),
            patch(
                "update-reapplies",
                &format!("{cms}/c1"),
                MERGE,
                json!({"data": {"added": null, "k": "w"}}),
            ),
            // IfNeeded reinvocation: `a-reads` copies a label that only `z-writes` sets.
            // The embedded server runs policies in name order, so the copy exists only
            // if `a-reads` runs again; kube-apiserver's order is not fixed (seen failing
            // when `z-writes` ran before `jp`), so these two touch `re-` objects only, and
            // the other policies leave those alone: the result is the same in any order.
            post(
                "reads-policy",
                policies,
                policy("{ns}-a-reads", rules("configmaps", json!(["CREATE"])), json!({
                    "matchConditions": [{"name": "re", "expression": "object.metadata.name.startsWith('re-')"}],
                    "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression":
                        r#"has(object.metadata.labels) && 'late' in object.metadata.labels ? [JSONPatch{op: "add", path: "/metadata/annotations", value: {"copied": object.metadata.labels["late"]}}] : []"#}}],
                    "reinvocationPolicy": "IfNeeded"})),
            ),
            post("reads-binding", bindings, binding("{ns}-a-reads")),
            post(
                "writes-policy",
                policies,
                policy("{ns}-z-writes", rules("configmaps", json!(["CREATE"])), json!({
                    "matchConditions": [{"name": "re", "expression": "object.metadata.name.startsWith('re-')"}],
                    "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression":
                        r#"[JSONPatch{op: "add", path: "/metadata/labels", value: {"late": "v"}}]"#}}]})),
            ),
            post("writes-binding", bindings, binding("{ns}-z-writes")),
            post("wait-for-reinvocation", &format!("{cms}?dryRun=All"), cm("re-probe", json!({})))
                .until(reinvoked),
            post("create-reinvoked", cms, cm("re-1", json!({}))),
            post(
                "err-policy",
                policies,
                policy("{ns}-err", rules("secrets", json!(["CREATE"])),
                    jp(r#"[JSONPatch{op: "add", path: "/metadata/labels", value: object.metadata.annotations["missing"]}]"#)),
            ),
            post("err-binding", bindings, binding("{ns}-err")),
            post(
                "badpath-policy",
                policies,
                policy("{ns}-badpath", rules("serviceaccounts", json!(["CREATE"])),
                    jp(r#"[JSONPatch{op: "replace", path: "/metadata/labels/nope", value: "x"}]"#)),
            ),
            post("badpath-binding", bindings, binding("{ns}-badpath")),
            post(
                "ignore-policy",
                policies,
                {
                    let mut p = policy("{ns}-ignore", rules("endpoints", json!(["CREATE"])),
                        jp(r#"[JSONPatch{op: "replace", path: "/metadata/labels/nope", value: "x"}]"#));
                    p["spec"]["failurePolicy"] = json!("Ignore");
                    p
                },
            ),
            post("ignore-binding", bindings, binding("{ns}-ignore")),
            post(
                "wait-for-error-policies",
                "/api/v1/namespaces/{ns}/serviceaccounts?dryRun=All",
                json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "probe"}}),
            )
            .until(sa_refused),
            post(
                "expression-error",
                "/api/v1/namespaces/{ns}/secrets",
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1"}}),
            ),
            post(
                "patch-does-not-apply",
                "/api/v1/namespaces/{ns}/serviceaccounts",
                json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa1"}}),
            ),
            post(
                "ignored-failure",
                "/api/v1/namespaces/{ns}/endpoints",
                json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "ep"}}),
            ),
            post(
                "invalid-policy",
                policies,
                json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
                    "metadata": {"name": "{ns}-invalid"}, "spec": {
                        "mutations": [{"patchType": "Merge"}, {"patchType": "JSONPatch"},
                            {"patchType": "ApplyConfiguration", "jsonPatch": {"expression": "[]"}}]}}),
            ),
            post(
                "invalid-binding",
                bindings,
                json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding",
                    "metadata": {"name": "{ns}-invalid"}, "spec": {}}),
            ),
            get(
                "policies-table",
                &format!("{policies}?fieldSelector=metadata.name%3D{{ns}}-ac"),
            )
            .table(),
            delete("delete-jp", &format!("{policies}/{{ns}}-jp")),
            delete("delete-jp-binding", &format!("{bindings}/{{ns}}-jp")),
            delete("delete-ac", &format!("{policies}/{{ns}}-ac")),
            delete("delete-ac-binding", &format!("{bindings}/{{ns}}-ac")),
            delete("delete-err", &format!("{policies}/{{ns}}-err")),
            delete("delete-err-binding", &format!("{bindings}/{{ns}}-err")),
            delete("delete-badpath", &format!("{policies}/{{ns}}-badpath")),
            delete("delete-badpath-binding", &format!("{bindings}/{{ns}}-badpath")),
            delete("delete-ignore", &format!("{policies}/{{ns}}-ignore")),
            delete("delete-ignore-binding", &format!("{bindings}/{{ns}}-ignore")),
            delete("delete-reads", &format!("{policies}/{{ns}}-a-reads")),
            delete("delete-reads-binding", &format!("{bindings}/{{ns}}-a-reads")),
            delete("delete-writes", &format!("{policies}/{{ns}}-z-writes")),
            delete("delete-writes-binding", &format!("{bindings}/{{ns}}-z-writes")),
        ],
    }
}

/// `nodes/NAME/proxy/…` up to where kube-apiserver would dial the kubelet: a missing
/// node, a node without addresses, a node whose address may not be proxied to.
pub fn node_proxy() -> Scenario {
    let node = "/api/v1/nodes/{ns}-node";
    Scenario {
        name: "node_proxy",
        steps: vec![
            get("missing", "/api/v1/nodes/{ns}-missing/proxy/healthz"),
            get("missing-no-path", "/api/v1/nodes/{ns}-missing/proxy"),
            post(
                "create",
                "/api/v1/nodes",
                json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "{ns}-node"}}),
            )
            .ignore("body", "a node's defaults and taints are the node controllers' business, not this scenario's"),
            get("no-address", &format!("{node}/proxy/healthz")),
            patch(
                "loopback-address",
                &format!("{node}/status"),
                MERGE,
                json!({"status": {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}]}}),
            )
            .ignore("body", "a node's status is the node controllers' business"),
            get("loopback", &format!("{node}/proxy/healthz")),
            get("loopback-no-path", &format!("{node}/proxy")),
            post("loopback-post", &format!("{node}/proxy/configz"), json!({})),
            delete("delete", node).ignore("body", "a node's status is the node controllers' business"),
        ],
    }
}

/// Continue tokens decoded as Go's base64.RawURLEncoding decodes them (the offsets it
/// names, unused trailing bits and line breaks ignored), then as JSON.
pub fn continue_tokens() -> Scenario {
    let p = "/api/v1/namespaces/{ns}/configmaps?limit=1&continue=";
    let token = |t: &str| format!("{p}{t}");
    Scenario {
        name: "continue_tokens",
        steps: vec![
            // `{"v":"meta.k8s.io/v1","rv":10,"start":"a` : valid base64 of truncated JSON.
            get(
                "truncated-json",
                &token("eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTAsInN0YXJ0IjoiYSJ"),
            ),
            get("one-char-over", &token("abcde")),
            get("padding", &token("ab=c")),
            get("line-break", &token("e30%0A")),
            get("line-break-inside", &token("e3%0D%0A0")),
            get("trailing-bits", &token("e31")),
            get("bad-char-late", &token("e30e30e30e3.")),
            // `{"v":"meta.k8s.io/v1","rv":-1,"start":""}`
            get(
                "empty-start",
                &token("eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6LTEsInN0YXJ0IjoiIn0"),
            ),
            // `{"v":"meta.k8s.io/v1","rv":"5","start":"a"}`: rv of the wrong type.
            get(
                "rv-string",
                &token("eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6IjUiLCJzdGFydCI6ImEifQ"),
            ),
            // `{"v":"meta.k8s.io/v1","rv":1.5,"start":"a"}`
            get(
                "rv-fraction",
                &token("eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MS41LCJzdGFydCI6ImEifQ"),
            ),
            // `{"v":1,"rv":1,"start":"a"}`, `{"v":null,"rv":1,"start":"a"}`, `null`, `[1]`
            get("v-number", &token("eyJ2IjoxLCJydiI6MSwic3RhcnQiOiJhIn0")),
            get("v-null", &token("eyJ2IjpudWxsLCJydiI6MSwic3RhcnQiOiJhIn0")),
            get("null", &token("bnVsbA")),
            get("array", &token("WzFd")),
        ],
    }
}

/// HorizontalPodAutoscalers in autoscaling/v1: the CPU target as a field, the other
/// metrics, the behavior and the statuses in annotations (Go-shaped JSON), turned back
/// into v2 fields on a v1 write (other metrics first), v2's defaults either way.
pub fn hpa_v1() -> Scenario {
    let v1 = "/apis/autoscaling/v1/namespaces/{ns}/horizontalpodautoscalers";
    let v2 = "/apis/autoscaling/v2/namespaces/{ns}/horizontalpodautoscalers";
    let target = json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"});
    Scenario {
        name: "hpa_v1",
        steps: vec![
            post(
                "create-v2",
                v2,
                json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                    "metadata": {"name": "h2"},
                    "spec": {"scaleTargetRef": target, "minReplicas": 2, "maxReplicas": 5,
                        "metrics": [
                            {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}},
                            {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "100Mi"}}},
                            {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "10"}}},
                            {"type": "Object", "object": {"describedObject": {"apiVersion": "v1", "kind": "Service", "name": "s"},
                                "metric": {"name": "hits"}, "target": {"type": "Value", "value": "2k"}}}],
                        "behavior": {"scaleDown": {"stabilizationWindowSeconds": 30}}}}),
            ),
            get("get-v2-as-v1", &format!("{v1}/h2")),
            post(
                "create-v1",
                v1,
                json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
                    "metadata": {"name": "h1", "annotations": {
                        "autoscaling.alpha.kubernetes.io/metrics": "[{\"type\":\"External\",\"external\":{\"metricName\":\"queue\",\"targetValue\":\"5\"}}]"}},
                    "spec": {"scaleTargetRef": target, "maxReplicas": 3, "targetCPUUtilizationPercentage": 50}}),
            ),
            get("get-v1-as-v2", &format!("{v2}/h1")),
            post(
                "create-v1-bare",
                v1,
                json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
                    "metadata": {"name": "bare"}, "spec": {"scaleTargetRef": target, "maxReplicas": 2}}),
            ),
            get("get-bare-as-v2", &format!("{v2}/bare")),
            patch(
                "patch-v1",
                &format!("{v1}/h1"),
                MERGE,
                json!({"spec": {"targetCPUUtilizationPercentage": 70, "minReplicas": 2}}),
            ),
            get("get-patched-as-v2", &format!("{v2}/h1")),
            get("list-v1", v1),
            get(
                "watch-v1",
                &format!("{v1}?watch=true&resourceVersion={{rv:create-v2}}&timeoutSeconds=1"),
            )
            .stream(),
            delete("delete-v1", &format!("{v1}/h1")),
            delete("delete-bare", &format!("{v1}/bare")),
            delete("delete-v2", &format!("{v2}/h2")),
        ],
    }
}

/// `null` where a built-in type holds a value: Go's decoder leaves the zero value (a
/// null map value or list item becomes `""`, `0`, `{}`), a null field is an absent one.
pub fn null_values() -> Scenario {
    let cms = "/api/v1/namespaces/{ns}/configmaps";
    let pods = "/api/v1/namespaces/{ns}/pods";
    Scenario {
        name: "null_values",
        steps: vec![
            post(
                "configmap-null-value",
                &format!("{cms}?dryRun=All"),
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "n", "labels": {"x": null}, "annotations": null},
                    "data": {"a": null, "b": "1"}, "binaryData": null, "immutable": null}),
            ),
            post(
                "secret-null-string-data",
                "/api/v1/namespaces/{ns}/secrets?dryRun=All",
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                    "type": null, "stringData": {"a": null}}),
            ),
            post(
                "pod-null-items",
                &format!("{pods}?dryRun=All"),
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                    "spec": {"containers": [{"name": "c", "image": "i", "args": [null, "x"],
                        "ports": [{"containerPort": 80, "name": null}],
                        "resources": {"limits": {"cpu": null}}}], "restartPolicy": null}}),
            )
            .transform(token_volume),
            post(
                "pod-null-container",
                &format!("{pods}?dryRun=All"),
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                    "spec": {"containers": [null]}}),
            ),
            post(
                "pod-null-name",
                &format!("{pods}?dryRun=All"),
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                    "spec": {"containers": [{"name": null, "image": "i"}]}}),
            ),
        ],
    }
}
