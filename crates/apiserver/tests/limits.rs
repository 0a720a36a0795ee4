//! Limits: each is answered as kube-apiserver v1.36 answers it (status, reason, message,
//! body shape). Requests are raw HTTP/1.1 (hyper, over TLS for a real cluster) so that
//! status line, headers and body are compared exactly; the tests run against the embedded
//! server and, with KUBEWRIGHT_TEST_KUBECONFIG, a real kube-apiserver. Tests that need
//! the embedded server's knobs (tiny timeouts and limits) are `*_embedded_only`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod support;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use kubewright_apiserver::{Limits, TestServer, UserInfo};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use support::rand_u64;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// The admin token of the embedded server.
const TOKEN: &str = "limits-admin-token";

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// A response, read whole.
#[derive(Debug)]
struct Resp {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

impl Resp {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "{}: not JSON ({e}): {}",
                self.status,
                String::from_utf8_lossy(&self.body[..self.body.len().min(500)])
            )
        })
    }
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// The server under test: the embedded one (with an admin token) or the cluster of
/// KUBEWRIGHT_TEST_KUBECONFIG; with a namespace of its own, deleted at the end.
struct Target {
    host: String,
    tls: Option<Arc<rustls::ClientConfig>>,
    token: String,
    server: Option<TestServer>,
    ns: String,
}

fn tls_config(ca_pem: &[u8]) -> Arc<rustls::ClientConfig> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject as _;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem) {
        roots.add(cert.unwrap()).unwrap();
    }
    #[allow(
        deprecated,
        reason = "ring by choice: rustls 0.23.48 deprecates its provider for lacking post-quantum key exchange, which aws-lc-rs has at the cost of a C and cmake build"
    )]
    let mut cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(cfg)
}

/// Server URL, CA (PEM) and token of the current context of a kubeconfig.
fn read_kubeconfig(path: &str) -> (String, Option<Vec<u8>>, String) {
    use base64::Engine as _;
    let text = std::fs::read_to_string(path).unwrap();
    let kc: Value = serde_saphyr::from_str(&text).unwrap();
    let current = kc["current-context"].as_str().unwrap();
    let named = |list: &str, name: &str| -> Value {
        kc[list]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .cloned()
            .unwrap()
    };
    let ctx = named("contexts", current);
    let cluster = named("clusters", ctx["context"]["cluster"].as_str().unwrap());
    let user = named("users", ctx["context"]["user"].as_str().unwrap());
    let server = cluster["cluster"]["server"].as_str().unwrap().to_string();
    let ca = cluster["cluster"]["certificate-authority-data"]
        .as_str()
        .map(|d| base64::engine::general_purpose::STANDARD.decode(d).unwrap());
    let token = user["user"]["token"]
        .as_str()
        .expect("the kubeconfig's user needs a token")
        .to_string();
    (server, ca, token)
}

impl Target {
    async fn start() -> Self {
        if kubewright_testing::real_cluster() {
            let path = std::env::var(kubewright_testing::KUBECONFIG_ENV).unwrap();
            let (server, ca, token) = read_kubeconfig(&path);
            let (tls, host) = match server.strip_prefix("https://") {
                Some(host) => (Some(tls_config(&ca.unwrap_or_default())), host),
                None => (None, server.trim_start_matches("http://")),
            };
            Self::with(host.trim_end_matches('/').to_string(), tls, token, None).await
        } else {
            let server = TestServer::builder().token(TOKEN).start().await.unwrap();
            Self::embedded(server, TOKEN).await
        }
    }

    async fn embedded(server: TestServer, token: &str) -> Self {
        let host = server.addr().to_string();
        Self::with(host, None, token.to_string(), Some(server)).await
    }

    async fn with(
        host: String,
        tls: Option<Arc<rustls::ClientConfig>>,
        token: String,
        server: Option<TestServer>,
    ) -> Self {
        let t = Self {
            host,
            tls,
            token,
            server,
            ns: format!("kwlim-{:08x}", rand_u64() as u32),
        };
        let r = t
            .api(
                Method::POST,
                "/api/v1/namespaces",
                json!({"metadata": {"name": t.ns}}),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
        t
    }

    fn is_embedded(&self) -> bool {
        self.server.is_some()
    }

    async fn connect(&self) -> Box<dyn Io> {
        let tcp = TcpStream::connect(&self.host).await.unwrap();
        match &self.tls {
            None => Box::new(tcp),
            Some(cfg) => {
                let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
                let tls = tokio_rustls::TlsConnector::from(cfg.clone())
                    .connect(name, tcp)
                    .await
                    .unwrap();
                Box::new(tls)
            }
        }
    }

    /// Sends a request as it is (add Host yourself) on a new connection.
    async fn send(&self, req: Request<Full<Bytes>>) -> Resp {
        let io = self.connect().await;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
            .await
            .unwrap();
        tokio::spawn(conn);
        let resp = sender.send_request(req).await.unwrap();
        let (parts, body) = resp.into_parts();
        let body = body.collect().await.unwrap().to_bytes();
        Resp {
            status: parts.status,
            headers: parts.headers,
            body,
        }
    }

    /// A request with Host and the given headers.
    async fn request(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> Resp {
        let mut b = Request::builder()
            .method(method)
            .uri(path)
            .header("host", &self.host);
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        self.send(b.body(Full::new(body.into())).unwrap()).await
    }

    /// An admin request with a body of the given Content-Type (none when `None`).
    async fn raw(&self, method: Method, path: &str, ct: Option<&str>, body: Vec<u8>) -> Resp {
        let auth = format!("Bearer {}", self.token);
        let mut headers = vec![("authorization", auth.as_str())];
        if let Some(ct) = ct {
            headers.push(("content-type", ct));
        }
        self.request(method, path, &headers, body).await
    }

    /// An admin request with a JSON body (none for `Value::Null`).
    async fn api(&self, method: Method, path: &str, body: Value) -> Resp {
        let (ct, bytes) = match &body {
            Value::Null => (None, vec![]),
            b => (Some("application/json"), serde_json::to_vec(b).unwrap()),
        };
        self.raw(method, path, ct, bytes).await
    }

    fn configmaps(&self) -> String {
        format!("/api/v1/namespaces/{}/configmaps", self.ns)
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        // (The helper below has no namespace of its own.)
        if self.is_embedded() || self.ns.is_empty() {
            return;
        }
        // A real cluster: delete the namespace (without waiting for it to go).
        let (host, tls, token, ns) = (
            self.host.clone(),
            self.tls.clone(),
            self.token.clone(),
            self.ns.clone(),
        );
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let t = Target {
                    host,
                    tls,
                    token,
                    server: None,
                    ns: String::new(),
                };
                let path = format!("/api/v1/namespaces/{ns}");
                t.api(Method::DELETE, &path, Value::Null).await;
            });
        })
        .join();
    }
}

/// A kube-apiserver Status with no details.
fn status(code: u16, reason: &str, message: &str) -> Value {
    let mut s = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "code": code});
    if !reason.is_empty() {
        s["reason"] = json!(reason);
    }
    s
}

/// This process's resident memory in bytes (Linux), for the embedded server's footprint.
fn rss() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = text.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_patch_copy_bomb_is_refused_and_memory_stays_bounded() {
    let t = Target::start().await;
    let value = "x".repeat(100);
    let r = t
        .api(
            Method::POST,
            &t.configmaps(),
            json!({"metadata": {"name": "bomb"}, "data": {"a": value}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    // 1.6 KB that doubles the object 30 times: 100 bytes * 2^30 without a bound.
    let ops: Vec<Value> = (0..30)
        .map(|i| json!({"op": "copy", "from": "/data", "path": format!("/data/k{i}")}))
        .collect();
    let before = rss();
    let path = format!("{}/bomb", t.configmaps());
    let r = t
        .raw(
            Method::PATCH,
            &path,
            Some("application/json-patch+json"),
            serde_json::to_vec(&ops).unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
    let mut expected = status(
        422,
        "Invalid",
        "the server rejected our request due to an error in our request",
    );
    expected["details"] = json!({});
    assert_eq!(r.json(), expected);
    // Nothing changed.
    let r = t.api(Method::GET, &path, Value::Null).await;
    assert_eq!(r.json()["data"], json!({"a": value}));
    // The copies stop at 3 MiB: the server (in this process) never held the gigabytes.
    if t.is_embedded()
        && let (Some(before), Some(after)) = (before, rss())
    {
        assert!(
            after.saturating_sub(before) < 256 * 1024 * 1024,
            "resident memory grew from {before} to {after} bytes"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_patch_operation_count_is_limited() {
    let t = Target::start().await;
    let r = t
        .api(
            Method::POST,
            &t.configmaps(),
            json!({"metadata": {"name": "ops"}, "data": {"a": "b"}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    let path = format!("{}/ops", t.configmaps());
    let ops = |n: usize| {
        serde_json::to_vec(&vec![
            json!({"op": "test", "path": "/data/a", "value": "b"});
            n
        ])
        .unwrap()
    };
    let ct = Some("application/json-patch+json");
    let r = t.raw(Method::PATCH, &path, ct, ops(10_001)).await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(
        r.json(),
        status(
            413,
            "RequestEntityTooLarge",
            "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001"
        )
    );
    let r = t.raw(Method::PATCH, &path, ct, ops(10_000)).await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_body_size_is_limited() {
    let t = Target::start().await;
    let too_large = status(
        413,
        "RequestEntityTooLarge",
        "Request entity too large: limit is 3145728",
    );
    let big = "x".repeat(3 * 1024 * 1024);
    let r = t
        .api(
            Method::POST,
            &t.configmaps(),
            json!({"metadata": {"name": "big"}, "data": {"a": big}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(r.json(), too_large);
    let r = t
        .api(
            Method::POST,
            &t.configmaps(),
            json!({"metadata": {"name": "small"}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    let r = t
        .raw(
            Method::PATCH,
            &format!("{}/small", t.configmaps()),
            Some("application/merge-patch+json"),
            serde_json::to_vec(&json!({"data": {"a": big}})).unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(r.json(), too_large);
}

/// kube-apiserver's 422 for one field that is too long.
fn too_long(kind: &str, name: &str, field: &str, max: usize) -> Value {
    let msg = format!("Too long: may not be more than {max} bytes");
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": format!("{kind} \"{name}\" is invalid: {field}: {msg}"),
        "reason": "Invalid",
        "details": {"name": name, "kind": kind, "causes": [
            {"reason": "FieldValueTooLong", "message": msg, "field": field}]},
        "code": 422})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn object_sizes_are_validated() {
    use base64::Engine as _;
    let t = Target::start().await;
    const MIB: usize = 1024 * 1024;
    // ConfigMap data (with binaryData) at most 1 MiB in total.
    let r = t
        .api(
            Method::POST,
            &t.configmaps(),
            json!({"metadata": {"name": "bigcm"}, "data": {"a": "x".repeat(MIB - 10)},
                "binaryData": {"b": base64::engine::general_purpose::STANDARD.encode([7u8; 11])}}),
        )
        .await;
    assert_eq!(r.json(), too_long("ConfigMap", "bigcm", "[]", MIB));
    let r = t
        .api(
            Method::POST,
            &t.configmaps(),
            json!({"metadata": {"name": "okcm"}, "data": {"a": "x".repeat(MIB)}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    // A merge patch that makes it too large.
    let r = t
        .raw(
            Method::PATCH,
            &format!("{}/okcm", t.configmaps()),
            Some("application/merge-patch+json"),
            serde_json::to_vec(&json!({"data": {"b": "y"}})).unwrap(),
        )
        .await;
    assert_eq!(r.json(), too_long("ConfigMap", "okcm", "[]", MIB));
    // Secret data (decoded) at most 1 MiB, stringData counted too.
    let secrets = format!("/api/v1/namespaces/{}/secrets", t.ns);
    let data = base64::engine::general_purpose::STANDARD.encode(vec![b'x'; MIB + 1]);
    let r = t
        .api(
            Method::POST,
            &secrets,
            json!({"metadata": {"name": "bigsec"}, "data": {"a": data}}),
        )
        .await;
    assert_eq!(r.json(), too_long("Secret", "bigsec", "data", MIB));
    let r = t
        .api(
            Method::POST,
            &secrets,
            json!({"metadata": {"name": "bigsec2"}, "stringData": {"a": "x".repeat(MIB + 1)}}),
        )
        .await;
    assert_eq!(r.json(), too_long("Secret", "bigsec2", "data", MIB));
    // Annotations at most 256 KiB.
    let r = t
        .api(
            Method::POST,
            &t.configmaps(),
            json!({"metadata": {"name": "ann", "annotations": {"a": "x".repeat(300 * 1024)}}}),
        )
        .await;
    assert_eq!(
        r.json(),
        too_long("ConfigMap", "ann", "metadata.annotations", 256 * 1024)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_object_size_is_limited() {
    let t = Target::start().await;
    let group = format!("l{:08x}.kubewright.dev", rand_u64() as u32);
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("blobs.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": "blobs", "singular": "blob", "kind": "Blob", "listKind": "BlobList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let r = t.api(Method::POST, crds, crd).await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    let blobs = format!("/apis/{group}/v1/namespaces/{}/blobs", t.ns);
    let blob = |name: &str, size: usize| {
        json!({"apiVersion": format!("{group}/v1"), "kind": "Blob", "metadata": {"name": name},
            "data": {"a": "x".repeat(size)}})
    };
    // The resource is served a moment after the CRD is established.
    let mut served = false;
    for _ in 0..100 {
        let r = t.api(Method::POST, &blobs, blob("small", 100_000)).await;
        if r.status == StatusCode::CREATED {
            served = true;
            break;
        }
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{:?}", r.body);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(served, "blobs were never served");
    // Past etcd's 1.5 MiB (and below the 3 MiB body limit and gRPC's 2 MiB).
    let too_large = status(500, "", "etcdserver: request is too large");
    let r = t.api(Method::POST, &blobs, blob("big", 1_600_000)).await;
    assert_eq!(r.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(r.json(), too_large);
    // A JSON patch that stays under the copy limit but grows the object past it.
    let ops: Vec<Value> = (0..16)
        .map(|i| json!({"op": "copy", "from": "/data/a", "path": format!("/data/k{i}")}))
        .collect();
    let r = t
        .raw(
            Method::PATCH,
            &format!("{blobs}/small"),
            Some("application/json-patch+json"),
            serde_json::to_vec(&ops).unwrap(),
        )
        .await;
    assert_eq!(r.json(), too_large);
    // Under the limit: stored.
    let ops = &ops[..10];
    let r = t
        .raw(
            Method::PATCH,
            &format!("{blobs}/small"),
            Some("application/json-patch+json"),
            serde_json::to_vec(ops).unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let r = t
        .api(
            Method::DELETE,
            &format!("{crds}/blobs.{group}"),
            Value::Null,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
}

fn nested(depth: usize) -> Vec<u8> {
    format!(
        "{{\"metadata\":{{\"name\":\"deep\"}},\"data\":{}{}}}",
        "[".repeat(depth),
        "]".repeat(depth)
    )
    .into_bytes()
}

fn too_deep_status(kind: &str, body: &[u8]) -> Value {
    status(
        400,
        "BadRequest",
        &format!(
            "the object provided is unrecognized (must be of type {kind}): couldn't get version/kind; json parse error: invalid character '[' exceeded max depth ({} ...)",
            String::from_utf8_lossy(&body[..30])
        ),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_nesting_depth_is_limited() {
    let t = Target::start().await;
    // kube-apiserver's decoder stops at 10,000 levels.
    let body = nested(10_001);
    let r = t
        .raw(
            Method::POST,
            &t.configmaps(),
            Some("application/json"),
            body.clone(),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.json(), too_deep_status("ConfigMap", &body));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_nesting_past_127_levels_embedded_only() {
    if kubewright_testing::embedded_only("the embedded server's depth limit is lower") {
        return;
    }
    let t = Target::start().await;
    // 127 levels in `data`, 128 with the object: refused with kube-apiserver's text.
    let body = nested(127);
    let r = t
        .raw(
            Method::POST,
            &t.configmaps(),
            Some("application/json"),
            body.clone(),
        )
        .await;
    assert_eq!(r.json(), too_deep_status("ConfigMap", &body));
    // 127 levels in all: decoded (and refused as no ConfigMap).
    let r = t
        .raw(Method::POST, &t.configmaps(), None, nested(126))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let msg = r.json()["message"].as_str().unwrap().to_string();
    assert!(
        msg.starts_with("ConfigMap in version \"v1\" cannot be handled as a ConfigMap"),
        "{msg}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_need_a_supported_content_type() {
    let t = Target::start().await;
    let unsupported = status(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf",
    );
    let cm = |name: &str| serde_json::to_vec(&json!({"metadata": {"name": name}})).unwrap();
    for ct in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "text/yaml",
        "application/json;;",
        ";;;",
        "application/json-patch+json",
    ] {
        let r = t
            .raw(Method::POST, &t.configmaps(), Some(ct), cm("tp"))
            .await;
        assert_eq!(r.status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{ct}");
        assert_eq!(r.json(), unsupported, "{ct}");
    }
    for (i, ct) in [
        Some("Application/JSON"),
        Some("application/json; charset=utf-8"),
        Some("application/json;"),
        None,
    ]
    .into_iter()
    .enumerate()
    {
        let name = format!("ok{i}");
        let r = t.raw(Method::POST, &t.configmaps(), ct, cm(&name)).await;
        assert_eq!(r.status, StatusCode::CREATED, "{ct:?}: {:?}", r.body);
    }
    // Updates too.
    let r = t
        .raw(
            Method::PUT,
            &format!("{}/ok0", t.configmaps()),
            Some("text/plain"),
            cm("ok0"),
        )
        .await;
    assert_eq!(r.json(), unsupported);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_parameter_is_read_as_kube_apiserver_reads_it() {
    let t = Target::start().await;
    let r = t
        .api(
            Method::POST,
            &t.configmaps(),
            json!({"metadata": {"name": "w1"}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    let sel = "fieldSelector=metadata.name%3Dw1";
    // `False` in any case, and only the first value counts.
    for q in ["watch=False", "watch=FALSE", "watch=0&watch=true"] {
        let r = t
            .api(
                Method::GET,
                &format!("{}?{q}&{sel}", t.configmaps()),
                Value::Null,
            )
            .await;
        assert_eq!(r.json()["kind"], "ConfigMapList", "{q}");
    }
    // Anything else is a watch, even `maybe` or nothing.
    for q in ["watch=maybe", "watch=", "watch=1&watch=false"] {
        let r = t
            .api(
                Method::GET,
                &format!("{}?{q}&{sel}&timeoutSeconds=1", t.configmaps()),
                Value::Null,
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{q}");
        let first = r.body.split(|b| *b == b'\n').next().unwrap();
        let ev: Value = serde_json::from_slice(first).unwrap();
        assert_eq!(ev["type"], "ADDED", "{q}");
        assert_eq!(ev["object"]["metadata"]["name"], "w1", "{q}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_header_is_parsed_as_kube_apiserver_parses_it() {
    let t = Target::start().await;
    let path = t.configmaps();
    let get = |auth: String| {
        let t = &t;
        let path = path.clone();
        async move {
            t.request(Method::GET, &path, &[("authorization", auth.as_str())], "")
                .await
        }
    };
    for auth in [
        format!("bearer {}", t.token),
        format!("BEARER {}", t.token),
        format!("Bearer {} ignored", t.token),
    ] {
        let r = get(auth.replace(&t.token, "<token>")).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
        let r = get(auth).await;
        assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    }
    // An extra space: the token is empty, so ignored, with a warning: the request has no
    // credentials. kube-apiserver (anonymous authentication on, its default) serves it as
    // system:anonymous; a server without anonymous access answers 401.
    let r = get(format!("Bearer  {}", t.token)).await;
    assert_eq!(
        r.header("warning"),
        Some(
            "299 - \"the provided Authorization header contains extra space before the bearer token, and is ignored\""
        )
    );
    let anonymous = |r: &Resp| match r.status {
        StatusCode::FORBIDDEN => {
            let msg = r.json()["message"].as_str().unwrap().to_string();
            assert!(
                msg.contains("User \"system:anonymous\" cannot list"),
                "{msg}"
            );
        }
        _ => assert_eq!(r.json(), status(401, "Unauthorized", "Unauthorized")),
    };
    anonymous(&r);
    // Only spaces separate: a tab makes no bearer token at all (and no warning).
    let r = get(format!("Bearer\t{}", t.token)).await;
    assert_eq!(r.header("warning"), None);
    anonymous(&r);
    // A wrong token is 401 on both.
    let r = get("Bearer wrong".to_string()).await;
    assert_eq!(r.json(), status(401, "Unauthorized", "Unauthorized"));
}

/// Writes `raw` on a new connection and reads until the server closes it (or 30 s pass).
async fn exchange(t: &Target, raw: &[u8]) -> String {
    let mut io = t.connect().await;
    // The server may answer and close before it has read everything.
    let _ = io.write_all(raw).await;
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(30), io.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protocol_errors_are_answered_like_go_net_http() {
    let t = Target::start().await;
    // An unknown path outside the API: Go's text 404, not a Status.
    let auth = format!("Bearer {}", t.token);
    let r = t
        .request(Method::GET, "/foo", &[("authorization", &auth)], "")
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(r.body, "404 page not found\n");
    // HTTP/1.1 without Host.
    let out = exchange(&t, b"GET /version HTTP/1.1\r\nConnection: close\r\n\r\n").await;
    assert!(out.starts_with("HTTP/1.1 400 "), "{out}");
    assert!(
        out.ends_with("400 Bad Request: missing required Host header"),
        "{out}"
    );
    // 200 header fields are fine (Go bounds only their bytes).
    let names: Vec<String> = (0..200).map(|i| format!("x-h{i}")).collect();
    let headers: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "v")).collect();
    let r = t.request(Method::GET, "/version", &headers, "").await;
    assert_eq!(r.status, StatusCode::OK);
    // Just under 1 MiB of headers is fine, just over is 431 and the connection closes.
    let header = |size: usize| {
        format!(
            "GET /version HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Big: {}\r\n\r\n",
            "a".repeat(size)
        )
    };
    let out = exchange(&t, header(1024 * 1024 - 200).as_bytes()).await;
    assert!(
        out.starts_with("HTTP/1.1 200 OK"),
        "{}",
        &out[..out.len().min(200)]
    );
    let out = exchange(&t, header(1024 * 1024 + 8192).as_bytes()).await;
    assert!(
        out.starts_with("HTTP/1.1 431 "),
        "{}",
        &out[..out.len().min(200)]
    );
}

/// An embedded server with `limits`, an admin token and the users `alice` and `bob`.
async fn limited(limits: Limits) -> TestServer {
    TestServer::builder()
        .token(TOKEN)
        .user("alice-token", UserInfo::new("alice", &[]))
        .user("bob-token", UserInfo::new("bob", &[]))
        .limits(limits)
        .start()
        .await
        .unwrap()
}

/// Reads until the server closes the connection; false when it is still open after 10 s.
async fn closed_by_server(io: &mut TcpStream) -> bool {
    let mut buf = [0u8; 1024];
    let wait = async {
        loop {
            match io.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_and_idle_connections_are_closed_embedded_only() {
    if kubewright_testing::embedded_only("needs a short header read timeout") {
        return;
    }
    let server = limited(Limits {
        header_read_timeout: Duration::from_millis(300),
        ..Limits::default()
    })
    .await;
    let addr = server.addr();
    // 20 slowloris connections, one header byte every 50 ms: all closed.
    let slow = (0..20).map(|_| async move {
        let mut io = TcpStream::connect(addr).await.unwrap();
        let request = b"GET /version HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
        let mut buf = [0u8; 64];
        for byte in request.chunks(1) {
            if io.write_all(byte).await.is_err() {
                return true;
            }
            // Closed while waiting for the next byte's turn?
            match tokio::time::timeout(Duration::from_millis(50), io.read(&mut buf)).await {
                Ok(Ok(0) | Err(_)) => return true,
                Ok(Ok(_)) => panic!("answered a request whose headers never ended"),
                Err(_) => {}
            }
        }
        false
    });
    let closed = futures::future::join_all(slow).await;
    assert!(closed.iter().all(|c| *c), "{closed:?}");
    // A connection that sends nothing, and one idle after a request, are closed too.
    let mut idle = TcpStream::connect(addr).await.unwrap();
    assert!(closed_by_server(&mut idle).await);
    let mut kept = TcpStream::connect(addr).await.unwrap();
    kept.write_all(b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    assert!(closed_by_server(&mut kept).await);
    // A well-behaved client is served.
    let t = Target::embedded(server, TOKEN).await;
    let r = t.api(Method::GET, "/version", Value::Null).await;
    assert_eq!(r.status, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_http2_connection_gets_goaway_embedded_only() {
    if kubewright_testing::embedded_only("needs a short idle timeout") {
        return;
    }
    let server = limited(Limits {
        idle_timeout: Duration::from_millis(300),
        ..Limits::default()
    })
    .await;
    let io = TcpStream::connect(server.addr()).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        TokioIo::new(io),
    )
    .await
    .unwrap();
    let conn = tokio::spawn(conn);
    let req = Request::builder()
        .uri(format!("http://{}/version", server.addr()))
        .body(Full::new(Bytes::new()))
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    resp.into_body().collect().await.unwrap();
    // No stream open: the server ends the connection.
    let ended = tokio::time::timeout(Duration::from_secs(10), conn).await;
    assert!(ended.is_ok(), "the idle HTTP/2 connection stayed open");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_body_gets_504_after_the_request_timeout_embedded_only() {
    if kubewright_testing::embedded_only("needs a short request timeout") {
        return;
    }
    let server = limited(Limits {
        request_timeout: Duration::from_millis(300),
        ..Limits::default()
    })
    .await;
    let mut io = TcpStream::connect(server.addr()).await.unwrap();
    let head = format!(
        "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"metadata\""
    );
    io.write_all(head.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), io.read_to_end(&mut out))
        .await
        .expect("the connection stayed open")
        .unwrap();
    let out = String::from_utf8(out).unwrap();
    assert!(out.starts_with("HTTP/1.1 504 Gateway Timeout\r\n"), "{out}");
    assert!(
        out.to_ascii_lowercase()
            .contains("content-type: text/plain; charset=utf-8"),
        "{out}"
    );
    assert!(
        out.ends_with("{\"metadata\":{},\"status\":\"Failure\",\"message\":\"Timeout: request did not complete within the allotted timeout\",\"reason\":\"Timeout\",\"details\":{},\"code\":504}\n"),
        "{out}"
    );
}

/// Sends the headers of a POST whose body never comes: the request holds its seat.
async fn hold_a_seat(server: &TestServer, token: &str, method: &str) -> TcpStream {
    let mut io = TcpStream::connect(server.addr()).await.unwrap();
    let head = format!(
        "{method} /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
    );
    io.write_all(head.as_bytes()).await.unwrap();
    io
}

/// Repeats `request` until it is refused with 429 (the held request takes its seat as soon
/// as the server has read its headers); returns the 429.
async fn until_refused(t: &Target, token: &str, method: Method) -> Resp {
    for _ in 0..200 {
        let auth = format!("Bearer {token}");
        let r = t
            .request(
                method.clone(),
                "/api/v1/namespaces/default/configmaps?dryRun=All",
                &[
                    ("authorization", &auth),
                    ("content-type", "application/json"),
                ],
                r#"{"metadata":{"generateName":"x-"}}"#,
            )
            .await;
        if r.status == StatusCode::TOO_MANY_REQUESTS {
            return r;
        }
        // Served (bob and alice have no RBAC: 403).
        assert!(
            r.status.is_success() || r.status == StatusCode::FORBIDDEN,
            "{}: {:?}",
            r.status,
            r.body
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("never refused");
}

fn assert_too_many(r: &Resp) {
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.header("retry-after"), Some("1"));
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(r.body, "Too many requests, please try again later.\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_inflight_answers_429_embedded_only() {
    if kubewright_testing::embedded_only("needs a tiny in-flight limit") {
        return;
    }
    let server = limited(Limits {
        max_mutating_requests_inflight: 1,
        max_requests_inflight: 1,
        ..Limits::default()
    })
    .await;
    let held = hold_a_seat(&server, "alice-token", "POST").await;
    let t = Target::embedded(server, TOKEN).await;
    let r = until_refused(&t, "bob-token", Method::POST).await;
    assert_too_many(&r);
    // Read-only requests have seats of their own.
    let r = t
        .request(
            Method::GET,
            "/api/v1/namespaces/default/configmaps",
            &[("authorization", "Bearer bob-token")],
            "",
        )
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "bob has no RBAC: served");
    // system:masters are not limited on a server that authenticates.
    let r = t
        .raw(
            Method::POST,
            "/api/v1/namespaces/default/configmaps?dryRun=All",
            Some("application/json"),
            br#"{"metadata":{"name":"admin"}}"#.to_vec(),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    // The seat comes back with the held request.
    drop(held);
    let mut served = false;
    for _ in 0..200 {
        let r = t
            .request(
                Method::POST,
                "/api/v1/namespaces/default/configmaps",
                &[
                    ("authorization", "Bearer bob-token"),
                    ("content-type", "application/json"),
                ],
                r#"{"metadata":{"name":"b"}}"#,
            )
            .await;
        if r.status != StatusCode::TOO_MANY_REQUESTS {
            assert_eq!(r.status, StatusCode::FORBIDDEN);
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(served, "the seat was never given back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_user_inflight_limit_embedded_only() {
    if kubewright_testing::embedded_only("needs a per-user in-flight limit") {
        return;
    }
    let server = limited(Limits {
        max_requests_inflight_per_user: Some(1),
        ..Limits::default()
    })
    .await;
    let _held = hold_a_seat(&server, "alice-token", "POST").await;
    let t = Target::embedded(server, TOKEN).await;
    let r = until_refused(&t, "alice-token", Method::POST).await;
    assert_too_many(&r);
    // Bob still gets served (403: he may not create ConfigMaps).
    let r = t
        .request(
            Method::POST,
            "/api/v1/namespaces/default/configmaps",
            &[
                ("authorization", "Bearer bob-token"),
                ("content-type", "application/json"),
            ],
            r#"{"metadata":{"name":"b"}}"#,
        )
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_count_is_limited_embedded_only() {
    if kubewright_testing::embedded_only("needs a tiny watch limit") {
        return;
    }
    let server = limited(Limits {
        max_watches: 1,
        ..Limits::default()
    })
    .await;
    let t = Target::embedded(server, TOKEN).await;
    let open_watch = || async {
        let io = t.connect().await;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
            .await
            .unwrap();
        let conn = tokio::spawn(conn);
        let req = Request::builder()
            .uri("/api/v1/namespaces/default/configmaps?watch=true")
            .header("host", "x")
            .header("authorization", format!("Bearer {TOKEN}"))
            .body(Full::new(Bytes::new()))
            .unwrap();
        let resp = sender.send_request(req).await.unwrap();
        (resp, conn)
    };
    // The first watch streams (its headers are in: it holds its slot).
    let (first, first_conn) = open_watch().await;
    assert_eq!(first.status(), StatusCode::OK);
    // Even an administrator's second watch is refused.
    let (second, _c) = open_watch().await;
    assert_eq!(second.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        second.into_body().collect().await.unwrap().to_bytes(),
        "Too many requests, please try again later.\n"
    );
    // Lists are not watches.
    let r = t
        .api(
            Method::GET,
            "/api/v1/namespaces/default/configmaps",
            Value::Null,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    // Closing the first watch frees the slot.
    drop(first);
    first_conn.abort();
    let mut ok = false;
    for _ in 0..200 {
        let (resp, _c) = open_watch().await;
        if resp.status() == StatusCode::OK {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(ok, "the watch slot was never given back");
}

/// ServiceAccount tokens from `serviceaccounts/token` are as kube-apiserver's: at least
/// 10 minutes, and invalid (401) once their ServiceAccount, or the pod they are bound
/// to, is deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_account_tokens_die_with_what_they_are_bound_to() {
    let t = Target::start().await;
    let sas = format!("/api/v1/namespaces/{}/serviceaccounts", t.ns);
    let request = |secs: i64, bound: Value| {
        let mut spec = json!({"expirationSeconds": secs});
        if !bound.is_null() {
            spec["boundObjectRef"] = bound;
        }
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec})
    };
    let mint = |sa: &str, body: Value| {
        let path = format!("{sas}/{sa}/token");
        let t = &t;
        async move {
            let r = t.api(Method::POST, &path, body).await;
            assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
            r.json()["status"]["token"].as_str().unwrap().to_string()
        }
    };
    // Authenticated (any answer but 401) or not.
    let authenticated = |token: String| {
        let path = format!("/api/v1/namespaces/{}/configmaps", t.ns);
        let t = &t;
        async move {
            let auth = format!("Bearer {token}");
            let r = t
                .request(
                    Method::GET,
                    &path,
                    &[("authorization", auth.as_str())],
                    Vec::new(),
                )
                .await;
            r.status != StatusCode::UNAUTHORIZED
        }
    };
    // kube-apiserver caches a token's successful authentication for 10 s and checks bound
    // objects through its informers: a revocation shows within that, not at once.
    let revoked = |token: String| {
        let authenticated = &authenticated;
        async move {
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            while authenticated(token.clone()).await {
                if std::time::Instant::now() > deadline {
                    return false;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            true
        }
    };
    for sa in ["robot", "bound"] {
        let r = t
            .api(Method::POST, &sas, json!({"metadata": {"name": sa}}))
            .await;
        assert_eq!(r.status, StatusCode::CREATED);
    }

    // Shorter than 10 minutes: kube-apiserver's 422.
    let r = t
        .api(
            Method::POST,
            &format!("{sas}/robot/token"),
            request(60, Value::Null),
        )
        .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
    let mut want = status(
        422,
        "Invalid",
        "TokenRequest.authentication.k8s.io \"\" is invalid: spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes",
    );
    want["details"] = json!({"group": "authentication.k8s.io", "kind": "TokenRequest", "causes": [
        {"reason": "FieldValueInvalid", "message": "Invalid value: 60: may not specify a duration less than 10 minutes", "field": "spec.expirationSeconds"}]});
    assert_eq!(r.json(), want);

    // The ServiceAccount goes: its token stops working.
    let token = mint("robot", request(600, Value::Null)).await;
    assert!(authenticated(token.clone()).await);
    let r = t
        .api(Method::DELETE, &format!("{sas}/robot"), Value::Null)
        .await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(
        revoked(token).await,
        "a deleted ServiceAccount's token still works"
    );

    // Bound to a Secret: the Secret goes, the token stops working.
    let secrets = format!("/api/v1/namespaces/{}/secrets", t.ns);
    let r = t
        .api(
            Method::POST,
            &secrets,
            json!({"metadata": {"name": "anchor"}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    let uid = r.json()["metadata"]["uid"].as_str().unwrap().to_string();
    let token = mint(
        "bound",
        request(
            600,
            json!({"kind": "Secret", "apiVersion": "v1", "name": "anchor", "uid": uid}),
        ),
    )
    .await;
    assert!(authenticated(token.clone()).await);
    let r = t
        .api(Method::DELETE, &format!("{secrets}/anchor"), Value::Null)
        .await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(
        revoked(token).await,
        "a token bound to a deleted Secret still works"
    );
}
