//! The differential harness: raw HTTP against a server (embedded or real), response
//! normalisation, a field-by-field JSON diff and the recorded fixtures.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use kubewright_apiserver::{TestServer, UserInfo};
use serde_json::{Map, Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Set to re-record the fixtures from the real cluster of `KUBEWRIGHT_TEST_KUBECONFIG`.
pub const RECORD_ENV: &str = "KUBEWRIGHT_RECORD_FIXTURES";

/// Who sends a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Auth {
    /// The cluster administrator (`system:masters`).
    Admin,
    /// `alice`: authenticated, no RBAC rights.
    Alice,
    /// No credentials (`system:anonymous` where anonymous auth is on).
    Anonymous,
    /// A bearer token no authenticator knows.
    BadToken,
}

impl Auth {
    fn label(self) -> &'static str {
        match self {
            Auth::Admin => "admin",
            Auth::Alice => "alice",
            Auth::Anonymous => "anonymous",
            Auth::BadToken => "bad-token",
        }
    }
}

/// How a response body is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyKind {
    /// One JSON document (or text when it is not JSON).
    Json,
    /// A watch stream: newline-delimited JSON events, read until the server ends it.
    Stream,
}

/// A transformation applied to both sides before comparing (e.g. dropping discovery
/// entries of groups only one side serves).
pub type Transform = fn(&mut Value);

/// One request of a scenario.
#[derive(Clone)]
pub struct Step {
    /// Short name, unique in the scenario.
    pub name: &'static str,
    pub method: &'static str,
    /// Path and query; `{ns}` is the scenario's namespace, `{rv:<step>}` the
    /// resourceVersion of an earlier step's answer.
    pub path: String,
    pub headers: Vec<(&'static str, String)>,
    /// Request body; `{ns}` in strings is substituted.
    pub body: Option<Value>,
    /// Raw request body (malformed input), sent as is after `{ns}` substitution.
    pub raw_body: Option<String>,
    pub auth: Auth,
    pub body_kind: BodyKind,
    /// Repeat the request (up to 30 s) while it answers one of these codes (a new CRD
    /// that is not served yet) or until `until` holds.
    pub retry_on: Vec<u16>,
    pub until: Option<fn(&Value) -> bool>,
    /// Paths (`body.metadata.labels`, `*` matches any run of characters) whose
    /// differences are known and accepted, with the reason.
    pub ignore: Vec<(&'static str, &'static str)>,
    pub transform: Option<Transform>,
}

fn step(method: &'static str, name: &'static str, path: &str) -> Step {
    Step {
        name,
        method,
        path: path.to_string(),
        headers: vec![],
        body: None,
        raw_body: None,
        auth: Auth::Admin,
        body_kind: BodyKind::Json,
        retry_on: vec![],
        until: None,
        ignore: vec![],
        transform: None,
    }
}

/// GET.
pub fn get(name: &'static str, path: &str) -> Step {
    step("GET", name, path)
}
/// DELETE.
pub fn delete(name: &'static str, path: &str) -> Step {
    step("DELETE", name, path)
}
/// POST with a JSON body.
pub fn post(name: &'static str, path: &str, body: Value) -> Step {
    step("POST", name, path).json(body)
}
/// PUT with a JSON body.
pub fn put(name: &'static str, path: &str, body: Value) -> Step {
    step("PUT", name, path).json(body)
}
/// PATCH with a body of the given patch content type.
pub fn patch(name: &'static str, path: &str, content_type: &str, body: Value) -> Step {
    step("PATCH", name, path)
        .json(body)
        .header("Content-Type", content_type)
}

impl Step {
    /// Sends `body` as JSON.
    pub fn json(mut self, body: Value) -> Self {
        self.body = Some(body);
        if !self.headers.iter().any(|(k, _)| *k == "Content-Type") {
            self.headers
                .push(("Content-Type", "application/json".to_string()));
        }
        self
    }
    /// Adds (or replaces) a request header.
    pub fn header(mut self, k: &'static str, v: &str) -> Self {
        self.headers.retain(|(h, _)| *h != k);
        self.headers.push((k, v.to_string()));
        self
    }
    /// Sends `raw` as the body instead of JSON.
    pub fn raw(mut self, raw: &str) -> Self {
        self.body = None;
        self.raw_body = Some(raw.to_string());
        self
    }
    /// Sends as another identity.
    pub fn by(mut self, auth: Auth) -> Self {
        self.auth = auth;
        self
    }
    /// `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`.
    pub fn table(self) -> Self {
        self.header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
    }
    /// Reads a watch stream.
    pub fn stream(mut self) -> Self {
        self.body_kind = BodyKind::Stream;
        self
    }
    /// Retries while the server answers `code`.
    pub fn retry_on(mut self, code: u16) -> Self {
        self.retry_on.push(code);
        self
    }
    /// Retries until the normalised response (`{"status", "headers", "body"}`) satisfies
    /// `f`.
    pub fn until(mut self, f: fn(&Value) -> bool) -> Self {
        self.until = Some(f);
        self
    }
    /// Accepts differences under `path` for `reason`.
    pub fn ignore(mut self, path: &'static str, reason: &'static str) -> Self {
        self.ignore.push((path, reason));
        self
    }
    /// Transforms both responses before comparing.
    pub fn transform(mut self, f: Transform) -> Self {
        self.transform = Some(f);
        self
    }
}

/// A sequence of steps run in a fresh namespace.
pub struct Scenario {
    pub name: &'static str,
    pub steps: Vec<Step>,
}

// ---------------------------------------------------------------------------------------
// Targets and raw HTTP.

/// Where requests go: the embedded server or the real cluster.
pub struct Target {
    base: String,
    host: String,
    port: u16,
    tls: Option<Arc<rustls::ClientConfig>>,
    admin: String,
    alice: Option<String>,
    _server: Option<TestServer>,
}

const EMBEDDED_ADMIN: &str = "kwdiff-admin-token";
const EMBEDDED_ALICE: &str = "kwdiff-alice-token";

impl Target {
    /// An embedded server with an admin token and the user `alice` (no rights), like
    /// the real cluster the fixtures are recorded on.
    pub async fn embedded() -> Self {
        let mut alice = UserInfo::new("alice", &[]);
        alice.uid = "alice".into();
        // With the controllers a cluster runs beside it, as the real one has.
        let server = kubewright_testing::embedded_server()
            .token(EMBEDDED_ADMIN)
            .user(EMBEDDED_ALICE, alice)
            .start()
            .await
            .expect("embedded server");
        let addr = server.addr();
        Self {
            base: server.url(),
            host: addr.ip().to_string(),
            port: addr.port(),
            tls: None,
            admin: EMBEDDED_ADMIN.into(),
            alice: Some(EMBEDDED_ALICE.into()),
            _server: Some(server),
        }
    }

    /// The cluster of a kubeconfig: the current context's server and token; `alice` is
    /// the kubeconfig user of that name.
    pub fn real(kubeconfig: &str) -> Self {
        let text = std::fs::read_to_string(kubeconfig).expect("read kubeconfig");
        let kc: Value = serde_saphyr::from_str(&text).expect("kubeconfig YAML");
        let find = |list: &str, name: &str| -> Value {
            kc[list]
                .as_array()
                .and_then(|a| a.iter().find(|e| e["name"] == name))
                .cloned()
                .unwrap_or(Value::Null)
        };
        let ctx_name = kc["current-context"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let ctx = find("contexts", &ctx_name);
        let cluster = find("clusters", ctx["context"]["cluster"].as_str().unwrap_or(""));
        let user = find("users", ctx["context"]["user"].as_str().unwrap_or(""));
        let admin = user["user"]["token"]
            .as_str()
            .expect("the current kubeconfig user needs a bearer token")
            .to_string();
        let alice = find("users", "alice")["user"]["token"]
            .as_str()
            .map(str::to_string);
        let server = cluster["cluster"]["server"]
            .as_str()
            .expect("cluster server")
            .to_string();
        let rest = server
            .strip_prefix("https://")
            .expect("the real cluster is served over HTTPS");
        let authority = rest.split('/').next().unwrap_or(rest);
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), p.parse().expect("port")),
            None => (authority.to_string(), 443),
        };
        use base64::Engine;
        let ca = cluster["cluster"]["certificate-authority-data"]
            .as_str()
            .map(|b| {
                base64::engine::general_purpose::STANDARD
                    .decode(b)
                    .expect("CA base64")
            })
            .expect("certificate-authority-data");
        let mut roots = rustls::RootCertStore::empty();
        use rustls_pki_types::pem::PemObject as _;
        for cert in rustls_pki_types::CertificateDer::pem_slice_iter(&ca) {
            roots.add(cert.expect("CA PEM")).expect("CA certificate");
        }
        #[allow(
            deprecated,
            reason = "ring by choice: rustls 0.23.48 deprecates its provider for lacking post-quantum key exchange, which aws-lc-rs has at the cost of a C and cmake build"
        )]
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
        Self {
            base: server.trim_end_matches('/').to_string(),
            host,
            port,
            tls: Some(Arc::new(tls)),
            admin,
            alice,
            _server: None,
        }
    }

    /// Sends one request on a new connection; reads the whole response.
    pub async fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, String)],
        body: Vec<u8>,
        auth: Auth,
    ) -> Result<(u16, http::HeaderMap, Vec<u8>), String> {
        let tcp = tokio::net::TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(|e| format!("connect {}: {e}", self.base))?;
        let mut req = http::Request::builder()
            .method(method)
            .uri(path)
            .header("Host", format!("{}:{}", self.host, self.port))
            .header("User-Agent", "kwdiff/v1.0.0");
        for (k, v) in headers {
            req = req.header(*k, v.as_str());
        }
        let token = match auth {
            Auth::Admin => Some(self.admin.clone()),
            Auth::Alice => Some(self.alice.clone().ok_or("no user `alice` configured")?),
            Auth::BadToken => Some("kwdiff-unknown-token".to_string()),
            Auth::Anonymous => None,
        };
        if let Some(t) = token {
            req = req.header("Authorization", format!("Bearer {t}"));
        }
        let req = req
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| e.to_string())?;
        let timeout = Duration::from_secs(60);
        let fut = async {
            match &self.tls {
                Some(cfg) => {
                    let name = rustls_pki_types::ServerName::try_from(self.host.clone())
                        .map_err(|e| e.to_string())?;
                    let tls = tokio_rustls::TlsConnector::from(cfg.clone())
                        .connect(name, tcp)
                        .await
                        .map_err(|e| format!("TLS: {e}"))?;
                    roundtrip(TokioIo::new(tls), req).await
                }
                None => roundtrip(TokioIo::new(tcp), req).await,
            }
        };
        tokio::time::timeout(timeout, fut)
            .await
            .map_err(|_| format!("{method} {path}: no answer within {timeout:?}"))?
    }
}

async fn roundtrip<I>(
    io: I,
    req: http::Request<Full<Bytes>>,
) -> Result<(u16, http::HeaderMap, Vec<u8>), String>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| format!("request: {e}"))?;
    let (parts, body) = resp.into_parts();
    let bytes = body
        .collect()
        .await
        .map_err(|e| format!("body: {e}"))?
        .to_bytes();
    Ok((parts.status.as_u16(), parts.headers, bytes.to_vec()))
}

// ---------------------------------------------------------------------------------------
// Running a scenario.

/// The headers compared (others, like Date and Audit-Id, differ by nature).
const COMPARED_HEADERS: [&str; 8] = [
    "content-type",
    "cache-control",
    "warning",
    "retry-after",
    "vary",
    "etag",
    "content-encoding",
    "x-content-type-options",
];

/// One exchange, normalised: `{"step", "request": {...}, "response": {"status",
/// "headers", "body"}}`.
pub type Exchange = Value;

fn substitute(v: &Value, ns: &str) -> Value {
    match v {
        Value::String(s) => Value::String(s.replace("{ns}", ns)),
        Value::Array(a) => Value::Array(a.iter().map(|x| substitute(x, ns)).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, x)| (k.replace("{ns}", ns), substitute(x, ns)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// A unique name for a scenario's namespace.
fn namespace_name(scenario: &str) -> String {
    let short: String = scenario
        .chars()
        .map(|c| if c == '_' { '-' } else { c })
        .take(30)
        .collect();
    format!("kwdiff-{short}-{:08x}", rand::random::<u32>())
}

/// Runs a scenario's steps in a fresh namespace; returns the normalised exchanges.
pub async fn run(target: &Target, sc: &Scenario) -> Result<Vec<Exchange>, String> {
    let ns = namespace_name(sc.name);
    create_namespace(target, &ns).await?;
    let result = run_steps(target, sc, &ns).await;
    // Best effort: the namespace (and what is in it) goes away asynchronously.
    let _ = target
        .send(
            "DELETE",
            &format!("/api/v1/namespaces/{ns}"),
            &[],
            vec![],
            Auth::Admin,
        )
        .await;
    result
}

async fn create_namespace(target: &Target, ns: &str) -> Result<(), String> {
    let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
    let (code, _, b) = target
        .send(
            "POST",
            "/api/v1/namespaces",
            &[("Content-Type", "application/json".into())],
            body.to_string().into_bytes(),
            Auth::Admin,
        )
        .await?;
    if code != 201 {
        return Err(format!(
            "create namespace {ns}: {code} {}",
            String::from_utf8_lossy(&b)
        ));
    }
    // Pods need the namespace's default ServiceAccount on a real cluster.
    for _ in 0..300 {
        let (code, _, _) = target
            .send(
                "GET",
                &format!("/api/v1/namespaces/{ns}/serviceaccounts/default"),
                &[],
                vec![],
                Auth::Admin,
            )
            .await?;
        if code == 200 {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(format!(
        "namespace {ns}: no default ServiceAccount after 30 s"
    ))
}

async fn run_steps(target: &Target, sc: &Scenario, ns: &str) -> Result<Vec<Exchange>, String> {
    let mut out = Vec::new();
    // The resourceVersion each step's answer carried: `{rv:<step>}` in later paths.
    let mut rvs: Vec<(String, String)> = Vec::new();
    for s in &sc.steps {
        let mut path = s.path.replace("{ns}", ns);
        for (step, rv) in &rvs {
            path = path.replace(&format!("{{rv:{step}}}"), rv);
        }
        let headers: Vec<(&str, String)> = s
            .headers
            .iter()
            .map(|(k, v)| (*k, v.replace("{ns}", ns)))
            .collect();
        let body = match (&s.body, &s.raw_body) {
            (Some(b), _) => substitute(b, ns)
                .to_string()
                .replace("{alice-token}", target.alice.as_deref().unwrap_or(""))
                .into_bytes(),
            (None, Some(r)) => r.replace("{ns}", ns).into_bytes(),
            (None, None) => vec![],
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        let exchange = loop {
            let (code, hdrs, raw) = target
                .send(s.method, &path, &headers, body.clone(), s.auth)
                .await
                .map_err(|e| format!("{}/{}: {e}", sc.name, s.name))?;
            if let Some(rv) = serde_json::from_slice::<Value>(&raw)
                .ok()
                .and_then(|v| v.pointer("/metadata/resourceVersion").cloned())
                .and_then(|v| v.as_str().map(str::to_string))
            {
                rvs.retain(|(n, _)| n != s.name);
                rvs.push((s.name.to_string(), rv));
            }
            let response = normalize_response(code, &hdrs, &raw, s.body_kind, ns);
            let again = s.retry_on.contains(&code) || s.until.is_some_and(|f| !f(&response));
            if again && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
            break json!({
                "step": s.name,
                "request": request_record(s),
                "response": response,
            });
        };
        out.push(exchange);
    }
    Ok(out)
}

fn request_record(s: &Step) -> Value {
    let mut r = json!({"method": s.method, "path": s.path});
    if s.auth != Auth::Admin {
        r["auth"] = json!(s.auth.label());
    }
    if !s.headers.is_empty() {
        r["headers"] = Value::Object(
            s.headers
                .iter()
                .map(|(k, v)| (k.to_string(), json!(v)))
                .collect(),
        );
    }
    if let Some(b) = &s.body {
        r["body"] = b.clone();
    }
    if let Some(b) = &s.raw_body {
        r["rawBody"] = json!(b);
    }
    r
}

fn normalize_response(
    code: u16,
    headers: &http::HeaderMap,
    raw: &[u8],
    kind: BodyKind,
    ns: &str,
) -> Value {
    let mut h = Map::new();
    for name in COMPARED_HEADERS {
        let values: Vec<String> = headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(str::to_string)
            .collect();
        if values.is_empty() {
            continue;
        }
        let v = if name == "etag" {
            json!("<etag>")
        } else if values.len() == 1 {
            json!(values[0])
        } else {
            json!(values)
        };
        h.insert(name.to_string(), v);
    }
    let text = String::from_utf8_lossy(raw).to_string();
    let protobuf = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("application/vnd.kubernetes.protobuf"));
    let body = match kind {
        // Protobuf is compared as the JSON it decodes to (the Content-Type tells which).
        BodyKind::Stream if protobuf => Value::Array(protobuf_frames(raw)),
        BodyKind::Json if protobuf => {
            kubewright_proto::decode(raw).unwrap_or_else(|e| json!(format!("<protobuf: {e}>")))
        }
        BodyKind::Stream => Value::Array(
            text.lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| serde_json::from_str(l).unwrap_or_else(|_| json!(l)))
                .collect(),
        ),
        BodyKind::Json => serde_json::from_slice(raw)
            .ok()
            .or_else(|| {
                // YAML is compared as the data it holds (the layout differs by library).
                let yaml = headers
                    .get("content-type")
                    .and_then(|v| v.to_str().ok())
                    .is_some_and(|ct| ct.contains("yaml"));
                yaml.then(|| serde_saphyr::from_str::<Value>(&text).ok())
                    .flatten()
            })
            .unwrap_or(Value::String(text)),
    };
    let mut body = substitute_ns(body, ns);
    normalize(&mut body, None);
    // Warnings may name the namespace too.
    let h = substitute_ns(Value::Object(h), ns);
    json!({"status": code, "headers": h, "body": body})
}

/// The events of a protobuf watch stream (4-byte length, then a `WatchEvent`: 1 type,
/// 2 a `RawExtension` whose field 1 is the object's `k8s\0` body) as `{"type", "object"}`.
fn protobuf_frames(mut raw: &[u8]) -> Vec<Value> {
    fn varint(b: &mut &[u8]) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = b.split_first()?;
            *b = rest;
            v |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return Some(v);
            }
        }
        None
    }
    fn field<'a>(b: &mut &'a [u8]) -> Option<(u64, &'a [u8])> {
        let key = varint(b)?;
        if key & 7 != 2 {
            return None;
        }
        let n = usize::try_from(varint(b)?).ok()?;
        let (v, rest) = (b.get(..n)?, b.get(n..)?);
        *b = rest;
        Some((key >> 3, v))
    }
    let mut out = Vec::new();
    while raw.len() >= 4 {
        let n = u32::from_be_bytes([raw[0], raw[1], raw[2], raw[3]]) as usize;
        let Some(mut frame) = raw.get(4..4 + n) else {
            out.push(json!("<truncated protobuf frame>"));
            break;
        };
        raw = &raw[4 + n..];
        let mut event = Map::new();
        while let Some((num, bytes)) = field(&mut frame) {
            match num {
                1 => {
                    event.insert("type".into(), json!(String::from_utf8_lossy(bytes)));
                }
                2 => {
                    let mut ext = bytes;
                    while let Some((n, obj)) = field(&mut ext) {
                        if n == 1 {
                            let v = kubewright_proto::decode(obj)
                                .unwrap_or_else(|e| json!(format!("<protobuf: {e}>")));
                            event.insert("object".into(), v);
                        }
                    }
                }
                _ => {}
            }
        }
        out.push(Value::Object(event));
    }
    out
}

fn substitute_ns(v: Value, ns: &str) -> Value {
    match v {
        Value::String(s) => Value::String(s.replace(ns, "{ns}")),
        Value::Array(a) => Value::Array(a.into_iter().map(|x| substitute_ns(x, ns)).collect()),
        Value::Object(o) => Value::Object(
            o.into_iter()
                .map(|(k, x)| (k.replace(ns, "{ns}"), substitute_ns(x, ns)))
                .collect(),
        ),
        other => other,
    }
}

fn is_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

/// `s` with every uid in it replaced by `<uid>`.
fn mask_uuids(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s.is_char_boundary(i) && s.get(i..i + 36).is_some_and(is_uuid) {
            out.push_str("<uid>");
            i += 36;
        } else if let Some(c) = s[i..].chars().next() {
            out.push(c);
            i += c.len_utf8();
        } else {
            break;
        }
    }
    out
}

fn is_timestamp(s: &str) -> bool {
    // 2026-01-02T03:04:05Z or with fractional seconds.
    let b = s.as_bytes();
    b.len() >= 20
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && s.ends_with('Z')
        && b[..4].iter().all(u8::is_ascii_digit)
}

/// Replaces values that differ between servers or runs by placeholders: uids, times,
/// resourceVersions, continue tokens, generated name suffixes, cluster IPs, tokens,
/// server addresses and versions.
pub fn normalize(v: &mut Value, key: Option<&str>) {
    // Allocated node ports are random.
    if matches!(key, Some("nodePort" | "healthCheckNodePort")) && v.is_number() {
        *v = json!("<port>");
        return;
    }
    match v {
        Value::String(s) => {
            let placeholder = match key {
                Some("resourceVersion") if !s.is_empty() => Some("<rv>"),
                Some("continue") if !s.is_empty() => Some("<continue>"),
                Some("clusterIP") if s != "None" && !s.is_empty() => Some("<ip>"),
                Some("token") if !s.is_empty() => Some("<token>"),
                Some("serverAddress") => Some("<address>"),
                _ if is_uuid(s) => Some("<uid>"),
                _ if is_timestamp(s) => Some("<time>"),
                _ => None,
            };
            match placeholder {
                Some(p) => *s = p.to_string(),
                // Uids inside messages (preconditions) vary too.
                None => *s = mask_uuids(s),
            }
        }
        Value::Array(a) => {
            if key == Some("clusterIPs") {
                for x in a.iter_mut() {
                    *x = json!("<ip>");
                }
                return;
            }
            for x in a.iter_mut() {
                normalize(x, None);
            }
            // Entries are ordered by time (seconds) first: with times masked, order them
            // by what is left.
            if key == Some("managedFields") {
                let k = |e: &Value| {
                    ["operation", "manager", "apiVersion", "subresource"]
                        .map(|f| e.get(f).and_then(Value::as_str).unwrap_or("").to_string())
                };
                a.sort_by_key(k);
            }
        }
        Value::Object(o) => {
            for (k, x) in o.iter_mut() {
                normalize(x, Some(k));
            }
            // A generated name: keep the prefix.
            if let Some(Value::Object(m)) = o.get_mut("metadata")
                && let Some(prefix) = m.get("generateName").and_then(Value::as_str)
                && let Some(name) = m.get("name").and_then(Value::as_str)
                && name.starts_with(prefix)
                && name.len() == prefix.len() + 5
            {
                let n = format!("{prefix}<suffix>");
                m.insert("name".into(), json!(n));
            }
            // Table cells of columns that vary by nature.
            if o.get("kind").and_then(Value::as_str) == Some("Table") {
                let cols: Vec<String> = o
                    .get("columnDefinitions")
                    .and_then(Value::as_array)
                    .map(|c| {
                        c.iter()
                            .map(|c| c["name"].as_str().unwrap_or("").to_string())
                            .collect()
                    })
                    .unwrap_or_default();
                if let Some(rows) = o.get_mut("rows").and_then(Value::as_array_mut) {
                    for row in rows {
                        if let Some(cells) = row.get_mut("cells").and_then(Value::as_array_mut) {
                            for (i, c) in cells.iter_mut().enumerate() {
                                let col = cols.get(i).map(String::as_str);
                                if matches!(col, Some("Age" | "Cluster-IP")) {
                                    *c = json!("<varies>");
                                }
                                // Times since: the placeholders for none stay.
                                if matches!(
                                    col,
                                    Some("Last Seen" | "First Seen" | "Duration" | "Last Schedule")
                                ) && !matches!(c.as_str(), Some("<unknown>" | "<none>" | ""))
                                {
                                    *c = json!("<varies>");
                                }
                            }
                        }
                    }
                }
            }
        }
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------
// Comparing.

/// The identity of an array element for keyed comparison, when every element has one.
fn element_key(v: &Value) -> Option<String> {
    let o = v.as_object()?;
    for k in ["name", "resource", "subresource", "version", "groupVersion"] {
        if let Some(s) = o.get(k).and_then(Value::as_str) {
            return Some(format!("{k}={s}"));
        }
    }
    let name = o.get("metadata")?.get("name")?.as_str()?;
    Some(format!("name={name}"))
}

/// Two strings that differ, each cut to the part around their first difference.
fn string_diff(a: &str, b: &str) -> (String, String) {
    let common = a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    let cut = |s: &str| {
        let skip = common.saturating_sub(20);
        let tail: String = s.chars().skip(skip).take(140).collect();
        let more = s.chars().count() > skip + 140;
        format!(
            "{}\"{}{}\"",
            if skip > 0 { "…" } else { "" },
            tail.replace('"', "\\\""),
            if more { "…" } else { "" }
        )
    };
    (cut(a), cut(b))
}

fn short(v: Option<&Value>) -> String {
    match v {
        None => "(missing)".into(),
        Some(v) => {
            let s = v.to_string();
            if s.chars().count() > 160 {
                format!("{}…", s.chars().take(160).collect::<String>())
            } else {
                s
            }
        }
    }
}

fn glob(pattern: &str, text: &str) -> bool {
    let (p, t) = (pattern.as_bytes(), text.as_bytes());
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && p[pi] != b'*' && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == b'*' {
        pi += 1;
    }
    pi == p.len()
}

/// Whether `path` (or a parent of it) is ignored.
fn ignored(path: &str, ignore: &[(&str, &str)]) -> bool {
    ignore.iter().any(|(p, _)| {
        glob(p, path)
            || path
                .char_indices()
                .filter(|(_, c)| *c == '.' || *c == '[')
                .any(|(i, _)| glob(p, &path[..i]))
    })
}

/// Appends `path: expected …, got …` lines for every difference.
pub fn diff(path: &str, want: &Value, got: &Value, ignore: &[(&str, &str)], out: &mut Vec<String>) {
    if ignored(path, ignore) {
        return;
    }
    match (want, got) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let p = join(path, k);
                match (a.get(k), b.get(k)) {
                    (Some(x), Some(y)) => diff(&p, x, y, ignore, out),
                    (x, y) => {
                        if !ignored(&p, ignore) {
                            out.push(format!("{p}: expected {}, got {}", short(x), short(y)));
                        }
                    }
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            let ka: Option<Vec<String>> = a.iter().map(element_key).collect();
            let kb: Option<Vec<String>> = b.iter().map(element_key).collect();
            match (ka, kb) {
                (Some(ka), Some(kb))
                    if !a.is_empty() && !b.is_empty() && unique(&ka) && unique(&kb) =>
                {
                    for (i, k) in ka.iter().enumerate() {
                        let p = format!("{path}[{k}]");
                        match kb.iter().position(|x| x == k) {
                            Some(j) => diff(&p, &a[i], &b[j], ignore, out),
                            None => {
                                if !ignored(&p, ignore) {
                                    out.push(format!(
                                        "{p}: expected {}, got (missing)",
                                        short(Some(&a[i]))
                                    ));
                                }
                            }
                        }
                    }
                    for (j, k) in kb.iter().enumerate() {
                        let p = format!("{path}[{k}]");
                        if !ka.contains(k) && !ignored(&p, ignore) {
                            out.push(format!(
                                "{p}: expected (missing), got {}",
                                short(Some(&b[j]))
                            ));
                        }
                    }
                    let common_a: Vec<&String> = ka.iter().filter(|k| kb.contains(k)).collect();
                    let common_b: Vec<&String> = kb.iter().filter(|k| ka.contains(k)).collect();
                    if common_a != common_b && !ignored(&format!("{path}[order]"), ignore) {
                        out.push(format!(
                            "{path}: order differs: expected {common_a:?}, got {common_b:?}"
                        ));
                    }
                }
                _ => {
                    for i in 0..a.len().max(b.len()) {
                        let p = format!("{path}[{i}]");
                        match (a.get(i), b.get(i)) {
                            (Some(x), Some(y)) => diff(&p, x, y, ignore, out),
                            (x, y) => {
                                if !ignored(&p, ignore) {
                                    out.push(format!(
                                        "{p}: expected {}, got {}",
                                        short(x),
                                        short(y)
                                    ));
                                }
                            }
                        }
                    }
                }
            }
        }
        (a, b) if a == b => {}
        (Value::String(a), Value::String(b)) if a.chars().count() > 60 => {
            let (x, y) = string_diff(a, b);
            out.push(format!("{path}: expected {x}, got {y}"));
        }
        (a, b) => out.push(format!(
            "{path}: expected {}, got {}",
            short(Some(a)),
            short(Some(b))
        )),
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn unique(keys: &[String]) -> bool {
    let mut k: Vec<&String> = keys.iter().collect();
    k.sort();
    k.windows(2).all(|w| w[0] != w[1])
}

/// Compares the exchanges of two runs of `sc` (`want`: the real server); returns the
/// readable differences, one per line.
pub fn compare(sc: &Scenario, want: &[Exchange], got: &[Exchange]) -> Vec<String> {
    let mut out = Vec::new();
    let steps: Vec<&Step> = sc.steps.iter().collect();
    if want.len() != steps.len() {
        out.push(format!(
            "the fixture has {} steps, the scenario {}: re-record it",
            want.len(),
            steps.len()
        ));
        return out;
    }
    for ((s, w), g) in steps.iter().zip(want).zip(got) {
        if w["step"] != s.name || w["request"] != request_record(s) {
            out.push(format!(
                "step {}: the recorded request differs from the scenario's: re-record it",
                s.name
            ));
            continue;
        }
        let (mut w, mut g) = (w["response"].clone(), g["response"].clone());
        if let Some(t) = s.transform {
            t(&mut w["body"]);
            t(&mut g["body"]);
        }
        let mut lines = Vec::new();
        diff("", &w, &g, &s.ignore, &mut lines);
        for l in lines {
            out.push(format!("{} {} ({}): {}", s.method, s.path, s.name, l));
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// Fixtures.

fn fixture_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/differential")
        .join(format!("{name}.json"))
}

/// The recorded exchanges of a scenario.
pub fn load_fixture(name: &str) -> Result<Vec<Exchange>, String> {
    let path = fixture_path(name);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        format!(
            "{}: {e}; record it against a real cluster: {RECORD_ENV}=1 KUBEWRIGHT_TEST_KUBECONFIG=... cargo nextest run -p kubewright-apiserver --test differential",
            path.display()
        )
    })?;
    let v: Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(v["exchanges"].as_array().cloned().unwrap_or_default())
}

/// Writes a scenario's fixture.
pub fn save_fixture(name: &str, server_version: &Value, ex: &[Exchange]) -> Result<(), String> {
    let path = fixture_path(name);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    }
    let doc = json!({
        "scenario": name,
        "recordedFrom": server_version,
        "exchanges": ex,
    });
    let mut text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
    text.push('\n');
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Runs a scenario: against the embedded server, compared with the recorded real
/// answers; with `KUBEWRIGHT_TEST_KUBECONFIG`, also against the live real server (the
/// embedded answers are compared with the live ones, and the live ones with the
/// fixture, unless `KUBEWRIGHT_RECORD_FIXTURES` asks to rewrite it).
pub async fn check(sc: Scenario) {
    let embedded = Target::embedded().await;
    let got = match run(&embedded, &sc).await {
        Ok(g) => g,
        Err(e) => panic!("embedded server: {e}"),
    };
    // For development: the embedded answers, normalised, next to the fixtures' form.
    if let Ok(dir) = std::env::var("KUBEWRIGHT_DIFF_DUMP") {
        let _ = std::fs::create_dir_all(&dir);
        let text = serde_json::to_string_pretty(&got).unwrap_or_default();
        let _ = std::fs::write(format!("{dir}/{}.json", sc.name), text);
    }
    let mut failures = Vec::new();
    match std::env::var(kubewright_testing::KUBECONFIG_ENV) {
        Ok(kc) if !kc.is_empty() => {
            let real = Target::real(&kc);
            let live = match run(&real, &sc).await {
                Ok(l) => l,
                Err(e) => panic!("real cluster: {e}"),
            };
            if std::env::var(RECORD_ENV).is_ok_and(|v| !v.is_empty() && v != "0") {
                let version = real
                    .send("GET", "/version", &[], vec![], Auth::Admin)
                    .await
                    .ok()
                    .and_then(|(_, _, b)| serde_json::from_slice::<Value>(&b).ok())
                    .map(|v| v["gitVersion"].clone())
                    .unwrap_or(Value::Null);
                if let Err(e) = save_fixture(sc.name, &version, &live) {
                    panic!("record {}: {e}", sc.name);
                }
            } else {
                match load_fixture(sc.name) {
                    Ok(recorded) => {
                        let drift = compare(&sc, &recorded, &live);
                        if !drift.is_empty() {
                            failures.push(format!(
                                "the live real server no longer answers as recorded (re-record with {RECORD_ENV}=1):\n  {}",
                                drift.join("\n  ")
                            ));
                        }
                    }
                    Err(e) => failures.push(e),
                }
            }
            let d = compare(&sc, &live, &got);
            if !d.is_empty() {
                failures.push(format!(
                    "embedded vs live real server (expected = real):\n  {}",
                    d.join("\n  ")
                ));
            }
        }
        _ => match load_fixture(sc.name) {
            Ok(recorded) => {
                let d = compare(&sc, &recorded, &got);
                if !d.is_empty() {
                    failures.push(format!(
                        "embedded vs recorded real answers (expected = real):\n  {}",
                        d.join("\n  ")
                    ));
                }
            }
            Err(e) => failures.push(e),
        },
    }
    if !failures.is_empty() {
        panic!("scenario {}:\n{}", sc.name, failures.join("\n"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_reports_paths() {
        let want =
            json!({"a": {"b": 1, "c": [1, 2]}, "items": [{"name": "x", "v": 1}, {"name": "y"}]});
        let got = json!({"a": {"b": "1", "c": [1]}, "items": [{"name": "y"}, {"name": "x", "v": 2}], "extra": true});
        let mut out = vec![];
        diff("", &want, &got, &[], &mut out);
        assert_eq!(
            out,
            [
                "a.b: expected 1, got \"1\"",
                "a.c[1]: expected 2, got (missing)",
                "extra: expected (missing), got true",
                "items[name=x].v: expected 1, got 2",
                "items: order differs: expected [\"name=x\", \"name=y\"], got [\"name=y\", \"name=x\"]",
            ]
        );
        let mut out = vec![];
        diff(
            "",
            &want,
            &got,
            &[("a.*", "r"), ("items*", "r"), ("extra", "r")],
            &mut out,
        );
        assert!(out.is_empty(), "{out:?}");
    }

    #[test]
    fn normalization_masks_what_varies() {
        let mut v = json!({"metadata": {"name": "web-abcde", "generateName": "web-", "uid": "0e2f9a52-3c4f-4e7b-9d1a-2b3c4d5e6f70", "resourceVersion": "12", "creationTimestamp": "2026-01-01T00:00:00Z"}, "spec": {"clusterIP": "10.0.0.1", "clusterIPs": ["10.0.0.1"]}});
        normalize(&mut v, None);
        assert_eq!(
            v,
            json!({"metadata": {"name": "web-<suffix>", "generateName": "web-", "uid": "<uid>", "resourceVersion": "<rv>", "creationTimestamp": "<time>"}, "spec": {"clusterIP": "<ip>", "clusterIPs": ["<ip>"]}})
        );
    }
}
