//! Helpers shared by the fuzz targets: an in-process API server with a fixed set of
//! objects, and requests sent through the server's own handler.

use bytes::Bytes;
use kubewright_apiserver::{ApiServer, ServerOptions, fuzzing};
use std::sync::Arc;

/// A single-threaded runtime for the server's async handlers.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a tokio runtime")
}

/// A response: status and body (`None` for a stream still open, such as a watch).
pub struct Resp {
    pub status: u16,
    pub body: Option<Bytes>,
}

/// The 500s kube-apiserver itself answers, which the embedded server reproduces: these are
/// no bug. (A failed health check is a 500 too, in plain text.)
const UPSTREAM_500S: &[&str] = &["resourceVersion should not be set on objects to be created"];

/// kube-apiserver's own 500s: the texts above, and the strategic merge patch errors it
/// returns unwrapped (an unknown `$patch` directive, a list item without its merge key;
/// recorded in the `strategic_patches` differential scenario).
fn upstream_500(m: &str) -> bool {
    UPSTREAM_500S.contains(&m)
        || (m.starts_with("unknown patch type: ") && m.contains(" in map: "))
        || (m.starts_with("map: ") && m.contains(" does not contain declared merge key: "))
}

impl Resp {
    /// Panics on a 500 other than [`UPSTREAM_500S`] and failed health checks: a request
    /// the server could not handle is a bug, whatever the input (bad input is a 4xx).
    pub fn assert_handled(&self, what: &str) {
        if self.status != 500 {
            return;
        }
        let body = String::from_utf8_lossy(self.body.as_deref().unwrap_or_default());
        let upstream = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v.get("message")?.as_str().map(str::to_string))
            .is_some_and(|m| upstream_500(&m));
        let health = body.ends_with(" check failed\n");
        assert!(
            upstream || health,
            "{what}: 500 Internal Server Error: {body}"
        );
    }
}

/// Sends a request through the server's handler; `None` when `method`, `uri` or a header
/// is not valid HTTP (a connection could not have delivered it).
pub async fn send(
    srv: &Arc<ApiServer>,
    method: &str,
    uri: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Option<Resp> {
    let mut b = http::Request::builder().method(method).uri(uri);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    let req = b.body(Bytes::copy_from_slice(body)).ok()?;
    let (parts, body) = fuzzing::handle(srv, req).await;
    Some(Resp {
        status: parts.status.as_u16(),
        body,
    })
}

/// The objects every seeded server has, in the order they are created: `(collection
/// path, JSON)`.
pub const SEED_OBJECTS: &[(&str, &str)] = &[
    (
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
"metadata":{"name":"widgets.example.com"},
"spec":{"group":"example.com","scope":"Namespaced",
 "names":{"plural":"widgets","singular":"widget","kind":"Widget","listKind":"WidgetList"},
 "versions":[{"name":"v1","served":true,"storage":true,
  "subresources":{"status":{},"scale":{"specReplicasPath":".spec.replicas","statusReplicasPath":".status.replicas"}},
  "schema":{"openAPIV3Schema":{"type":"object","properties":{
   "spec":{"type":"object",
    "x-kubernetes-validations":[{"rule":"self.replicas <= 100","message":"too many"}],
    "properties":{
     "replicas":{"type":"integer","default":1},
     "color":{"type":"string","enum":["red","green","blue"]},
     "tags":{"type":"array","x-kubernetes-list-type":"set","items":{"type":"string"}},
     "ports":{"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["name"],
      "items":{"type":"object","required":["name"],"properties":{"name":{"type":"string"},"port":{"type":"integer"}}}},
     "extra":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}},
   "status":{"type":"object","properties":{"replicas":{"type":"integer"}}}}}}}]}}"#,
    ),
    (
        "/api/v1/namespaces/default/pods",
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","labels":{"app":"web"},
"annotations":{"note":"seed"},"finalizers":["example.com/keep"]},
"spec":{"containers":[
 {"name":"web","image":"nginx:1.27","ports":[{"containerPort":80,"name":"http"}],
  "env":[{"name":"A","value":"1"},{"name":"B","valueFrom":{"fieldRef":{"fieldPath":"metadata.name"}}}],
  "resources":{"limits":{"cpu":"500m","memory":"128Mi"}},
  "volumeMounts":[{"name":"data","mountPath":"/data"}]},
 {"name":"sidecar","image":"busybox","command":["sleep","3600"]}],
"volumes":[{"name":"data","emptyDir":{}}],
"tolerations":[{"key":"k","operator":"Exists","effect":"NoSchedule"}]}}"#,
    ),
    (
        "/apis/apps/v1/namespaces/default/deployments",
        r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","labels":{"app":"web"}},
"spec":{"replicas":2,"selector":{"matchLabels":{"app":"web"}},
"strategy":{"type":"RollingUpdate","rollingUpdate":{"maxSurge":1,"maxUnavailable":"25%"}},
"template":{"metadata":{"labels":{"app":"web"}},
 "spec":{"containers":[{"name":"web","image":"nginx:1.27","ports":[{"containerPort":80}]}]}}}}"#,
    ),
    (
        "/api/v1/namespaces/default/services",
        r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"web"},
"spec":{"selector":{"app":"web"},"ports":[{"name":"http","port":80,"targetPort":8080},
{"name":"https","port":443,"targetPort":"https","protocol":"TCP"}]}}"#,
    ),
    (
        "/api/v1/namespaces/default/configmaps",
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web","labels":{"app":"web"}},
"data":{"config.yaml":"a: 1\n","mode":"prod"}}"#,
    ),
    (
        "/api/v1/namespaces/default/secrets",
        r#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"web"},"type":"Opaque",
"data":{"password":"aHVudGVyMg=="}}"#,
    ),
    (
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        r#"{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"reader"},
"rules":[{"apiGroups":[""],"resources":["pods","configmaps"],"verbs":["get","list","watch"]}]}"#,
    ),
    (
        "/apis/example.com/v1/namespaces/default/widgets",
        r#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","labels":{"app":"web"}},
"spec":{"replicas":3,"color":"red","tags":["a","b"],"ports":[{"name":"http","port":80}],"extra":{"x":[1,2]}}}"#,
    ),
];

/// A server with the default namespaces, bootstrap RBAC and [`SEED_OBJECTS`], the
/// objects created through the handler (each with a field manager, so apply can
/// conflict) and the CRD established; a short watch history.
pub async fn seeded_server() -> Arc<ApiServer> {
    // A short watch history: the default preallocates 100 000 event slots per server.
    let srv = ApiServer::new(ServerOptions {
        history: 64,
        ..ServerOptions::default()
    });
    for (path, obj) in SEED_OBJECTS {
        let uri = format!("{path}?fieldManager=seed");
        let resp = send(
            &srv,
            "POST",
            &uri,
            &[("content-type", "application/json")],
            obj.as_bytes(),
        )
        .await
        .expect("a valid seed request");
        assert_eq!(
            resp.status,
            201,
            "seeding {path}: {}",
            String::from_utf8_lossy(resp.body.as_deref().unwrap_or_default())
        );
        if path.contains("customresourcedefinitions") {
            // Serve the CRD's resources.
            fuzzing::reconcile(&srv);
        }
    }
    srv
}

/// Splits off the first line (without its `\n`); the rest is what follows it.
pub fn first_line(data: &[u8]) -> (&[u8], &[u8]) {
    match data.iter().position(|&b| b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[]),
    }
}
