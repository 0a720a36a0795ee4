//! Limits that keep one client from exhausting the server, each answered the way
//! kube-apiserver v1.36 answers it (status, reason, message, body shape): object and patch
//! sizes, JSON nesting depth, header sizes, connection timeouts, concurrent requests and
//! watches. `docs/ARCHITECTURE.md` ("Limits") lists them with kube-apiserver's answers.

use crate::error::ApiError;
pub(crate) use crate::error::{MAX_JSON_DEPTH, first_too_deep, json_too_deep, nesting_depth};
use crate::http::Body;
use crate::registry::ResourceDef;
use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::Value;
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

/// Operations a JSON patch may have (kube-apiserver's `maxJSONPatchOperations`).
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// Bytes that the `copy` operations of one JSON patch may add in total (kube-apiserver's
/// `JSONPatchMaxCopyBytes`, json-patch's `AccumulatedCopySizeLimit`): 3 MiB.
pub const JSON_PATCH_MAX_COPY_BYTES: usize = 3 * 1024 * 1024;

/// Total size of a ConfigMap's data or a Secret's data (`api.MaxSecretSize`): 1 MiB.
pub const MAX_DATA_BYTES: usize = 1024 * 1024;

/// Total size of an object's annotations (`TotalAnnotationSizeLimitB`): 256 KiB.
pub const MAX_ANNOTATION_BYTES: usize = 256 * 1024;

/// Server limits. The defaults are kube-apiserver's (and etcd's, for the object size);
/// `0` turns a count limit off.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Largest object that is stored, in bytes of its stored encoding (protobuf for
    /// built-in kinds, JSON for custom resources): etcd's `--max-request-bytes`, 1.5 MiB.
    /// A larger write fails with kube-apiserver's 500 `etcdserver: request is too large`.
    pub max_object_bytes: usize,
    /// Read-only requests (get, list) served at once: `--max-requests-inflight` (400).
    /// More are refused with 429 `Too many requests, please try again later.` and
    /// `Retry-After: 1`. Watches, health probes and, on a server that authenticates,
    /// `system:masters` are not counted, as in kube-apiserver.
    pub max_requests_inflight: usize,
    /// Mutating requests served at once: `--max-mutating-requests-inflight` (200).
    pub max_mutating_requests_inflight: usize,
    /// Requests (read-only and mutating) one user may have in flight at once; `None`
    /// (the default) for no per-user bound. A stand-in for API Priority and Fairness,
    /// which keeps one flow from taking every seat; the answer is the same 429.
    pub max_requests_inflight_per_user: Option<usize>,
    /// Watches open at once (kube-apiserver has no such bound; each watch holds a task
    /// and a buffer here). More are refused with the same 429. Default 10,000.
    pub max_watches: usize,
    /// Time a client has to send a request's headers, from when the server starts
    /// waiting for them; an HTTP/1 keep-alive connection with no request for this long
    /// is closed too. Also bounds the TLS handshake. kube-apiserver: `ReadHeaderTimeout`
    /// 32 s (Go bounds the handshake by it as well).
    pub header_read_timeout: Duration,
    /// A connection with no request in flight for this long is closed (HTTP/2: GOAWAY).
    /// kube-apiserver: `IdleTimeout` 90 s.
    pub idle_timeout: Duration,
    /// Time a client has to send a request's body (`--request-timeout`, 60 s). A body that
    /// is still incomplete is answered with kube-apiserver's 504 and the connection closes.
    pub request_timeout: Duration,
    /// Bytes of an HTTP/1 request line and headers; more are answered
    /// `431 Request Header Fields Too Large` and the connection closes. HTTP/2 announces
    /// it as `SETTINGS_MAX_HEADER_LIST_SIZE` (plus 320, as Go). kube-apiserver:
    /// `MaxHeaderBytes` 1 MiB.
    pub max_header_bytes: usize,
    /// Header fields of an HTTP/1 request; more are answered with 431 (kube-apiserver
    /// bounds only their bytes). Default 1,024.
    pub max_headers: usize,
    /// Concurrent streams of an HTTP/2 connection (kube-apiserver v1.36 announces 100).
    pub http2_max_concurrent_streams: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_object_bytes: 1024 * 1024 + 512 * 1024,
            max_requests_inflight: 400,
            max_mutating_requests_inflight: 200,
            max_requests_inflight_per_user: None,
            max_watches: 10_000,
            header_read_timeout: Duration::from_secs(32),
            idle_timeout: Duration::from_secs(90),
            request_timeout: Duration::from_secs(60),
            max_header_bytes: 1024 * 1024,
            max_headers: 1024,
            http2_max_concurrent_streams: 100,
        }
    }
}

/// The seat a request takes: watches apart (kube-apiserver's long-running requests), GET
/// and HEAD read-only, every other method mutating.
pub(crate) fn classify(method: &http::Method, path: &str, query: Option<&str>) -> Class {
    if method != http::Method::GET && method != http::Method::HEAD {
        return Class::Mutating;
    }
    // As kube-apiserver's request info: the first `watch` value, anything but `false`
    // (in any case) or `0` is a watch; so is the legacy `/watch/` prefix.
    let watch_param = query.and_then(|q| {
        form_urlencoded::parse(q.as_bytes())
            .find(|(k, _)| k == "watch")
            .map(|(_, v)| !(v == "0" || v.eq_ignore_ascii_case("false")))
    });
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let legacy = match segs.first() {
        Some(&"api") => segs.get(2) == Some(&"watch"),
        Some(&"apis") => segs.get(3) == Some(&"watch"),
        _ => false,
    };
    if legacy || watch_param == Some(true) {
        Class::Watch
    } else {
        Class::ReadOnly
    }
}

/// Health probes, which kube-apiserver's default flow schemas exempt from limits.
pub(crate) fn is_probe(path: &str) -> bool {
    ["/healthz", "/livez", "/readyz"]
        .iter()
        .any(|p| path == *p || path.strip_prefix(p).is_some_and(|r| r.starts_with('/')))
}

/// Whether the server authenticates requests (tokens, users or client certificates);
/// without authentication everybody is the administrator, and nobody is exempt.
pub(crate) fn authenticates(options: &crate::http::api::ServerOptions) -> bool {
    !(options.tokens.is_empty() && options.users.is_empty() && options.client_ca_pem.is_none())
}

/// The kind of seat a request takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Class {
    /// get, list (GET and HEAD).
    ReadOnly,
    /// Every other method.
    Mutating,
    /// A watch: long-running, counted apart.
    Watch,
}

#[derive(Debug, Default)]
struct Counts {
    read_only: usize,
    mutating: usize,
    watches: usize,
    per_user: HashMap<String, usize>,
}

/// Requests and watches in flight, for [`Limits`].
#[derive(Debug, Default)]
pub(crate) struct Inflight(Arc<Mutex<Counts>>);

fn lock(m: &Mutex<Counts>) -> MutexGuard<'_, Counts> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Inflight {
    /// Takes a seat of `class` for `user` (`None`: exempt from the per-user bound), or
    /// `None` when the limit is reached.
    pub(crate) fn try_acquire(&self, limits: &Limits, class: Class, user: &str) -> Option<Seat> {
        let mut c = lock(&self.0);
        let (count, max) = match class {
            Class::ReadOnly => (c.read_only, limits.max_requests_inflight),
            Class::Mutating => (c.mutating, limits.max_mutating_requests_inflight),
            Class::Watch => (c.watches, limits.max_watches),
        };
        if max > 0 && count >= max {
            return None;
        }
        let per_user = match (class, limits.max_requests_inflight_per_user) {
            (Class::Watch, _) | (_, None) => None,
            (_, Some(max)) => {
                if c.per_user.get(user).is_some_and(|n| *n >= max) {
                    return None;
                }
                *c.per_user.entry(user.to_string()).or_default() += 1;
                Some(user.to_string())
            }
        };
        match class {
            Class::ReadOnly => c.read_only += 1,
            Class::Mutating => c.mutating += 1,
            Class::Watch => c.watches += 1,
        }
        Some(Seat {
            counts: self.0.clone(),
            class,
            user: per_user,
        })
    }

    /// Watches open now.
    #[cfg(test)]
    pub(crate) fn watches(&self) -> usize {
        lock(&self.0).watches
    }
}

/// A taken seat, given back when dropped.
#[derive(Debug)]
pub(crate) struct Seat {
    counts: Arc<Mutex<Counts>>,
    class: Class,
    user: Option<String>,
}

impl Drop for Seat {
    fn drop(&mut self) {
        let mut c = lock(&self.counts);
        match self.class {
            Class::ReadOnly => c.read_only = c.read_only.saturating_sub(1),
            Class::Mutating => c.mutating = c.mutating.saturating_sub(1),
            Class::Watch => c.watches = c.watches.saturating_sub(1),
        }
        if let Some(u) = &self.user
            && let Some(n) = c.per_user.get_mut(u)
        {
            *n = n.saturating_sub(1);
            if *n == 0 {
                c.per_user.remove(u);
            }
        }
    }
}

/// kube-apiserver's 429 (max-in-flight and priority-and-fairness filters alike): Go's
/// `http.Error`, so plain text, not a Status.
pub(crate) fn too_many_requests() -> Response<Body> {
    let mut resp = plain(
        StatusCode::TOO_MANY_REQUESTS,
        "Too many requests, please try again later.\n",
    );
    resp.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    resp
}

/// kube-apiserver's answer to a request that outlived `--request-timeout`: the timeout
/// filter writes the Status with Go's JSON encoder and no Content-Type of its own, so the
/// body has no kind or apiVersion and is served as text.
pub(crate) fn request_timeout() -> Response<Body> {
    let mut resp = crate::http::response(
        StatusCode::GATEWAY_TIMEOUT,
        "text/plain; charset=utf-8",
        Bytes::from_static(
            b"{\"metadata\":{},\"status\":\"Failure\",\"message\":\"Timeout: request did not complete within the allotted timeout\",\"reason\":\"Timeout\",\"details\":{},\"code\":504}\n",
        ),
    );
    resp.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    resp
}

/// Go's `http.Error`: text with `X-Content-Type-Options: nosniff`.
pub(crate) fn plain(code: StatusCode, text: &'static str) -> Response<Body> {
    let mut resp = crate::http::response(
        code,
        "text/plain; charset=utf-8",
        Bytes::from_static(text.as_bytes()),
    );
    resp.headers_mut().insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    resp
}

/// What the `Authorization` header says, parsed as kube-apiserver's bearer token
/// authenticator does: trimmed, split on single spaces into at most three parts, the
/// scheme compared without case; the token is the second part, the rest is ignored.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Bearer<'a> {
    /// No bearer token.
    None,
    /// A token to check.
    Token(&'a str),
    /// `Bearer  token`: the token is empty and ignored, with a warning.
    ExtraSpace,
}

/// The warning kube-apiserver adds for [`Bearer::ExtraSpace`].
pub(crate) const EXTRA_SPACE_WARNING: &str = "the provided Authorization header contains extra space before the bearer token, and is ignored";

pub(crate) fn parse_bearer(header: Option<&str>) -> Bearer<'_> {
    let Some(auth) = header.map(str::trim).filter(|a| !a.is_empty()) else {
        return Bearer::None;
    };
    let mut parts = auth.splitn(3, ' ');
    let (Some(scheme), Some(token)) = (parts.next(), parts.next()) else {
        return Bearer::None;
    };
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Bearer::None;
    }
    match (token.is_empty(), parts.next().is_some()) {
        (false, _) => Bearer::Token(token),
        (true, true) => Bearer::ExtraSpace,
        (true, false) => Bearer::None,
    }
}

/// kube-apiserver's answer to a body nested too deeply: the decoder cannot even read
/// apiVersion and kind.
pub(crate) fn too_deep(kind: &str, body: &[u8]) -> ApiError {
    let at = first_too_deep(body, MAX_JSON_DEPTH).unwrap_or(b'[') as char;
    ApiError::bad_request(format!(
        "the object provided is unrecognized (must be of type {kind}): couldn't get version/kind; json parse error: invalid character '{at}' exceeded max depth ({})",
        summarize(body)
    ))
}

/// kube-apiserver's `summarizeData(body, 30)`.
fn summarize(body: &[u8]) -> String {
    if body.is_empty() {
        return "<empty>".into();
    }
    if body.len() > 30 {
        format!("{} ...", String::from_utf8_lossy(&body[..30]))
    } else {
        String::from_utf8_lossy(body).into_owned()
    }
}

/// Bytes `v` takes as compact JSON, without building the text.
pub(crate) fn json_len(v: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    match serde_json::to_writer(&mut c, v) {
        Ok(()) => c.0,
        Err(_) => usize::MAX,
    }
}

/// Size validation of an object about to be stored, as kube-apiserver's validation does
/// it (422): annotations at most 256 KiB, a ConfigMap's or Secret's data at most 1 MiB.
pub(crate) fn validate_sizes(def: &ResourceDef, obj: &Value) -> Result<(), ApiError> {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let too_long = |field: &str, max: usize| {
        ApiError::invalid_field(
            def,
            name,
            field,
            "FieldValueTooLong",
            format!("may not be more than {max} bytes"),
        )
    };
    let annotations: usize = obj
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .map(|a| {
            a.iter()
                .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
                .sum()
        })
        .unwrap_or(0);
    if annotations > MAX_ANNOTATION_BYTES {
        return Err(too_long("metadata.annotations", MAX_ANNOTATION_BYTES));
    }
    if !def.group.is_empty() {
        return Ok(());
    }
    let strings = |field: &str| -> usize {
        obj.get(field)
            .and_then(Value::as_object)
            .map(|m| m.values().map(|v| v.as_str().map_or(0, str::len)).sum())
            .unwrap_or(0)
    };
    // base64 text: the decoded length.
    let decoded = |field: &str, except: Option<&serde_json::Map<String, Value>>| -> usize {
        obj.get(field)
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| except.is_none_or(|e| !e.contains_key(*k)))
                    .map(|(_, v)| v.as_str().map_or(0, base64_decoded_len))
                    .sum()
            })
            .unwrap_or(0)
    };
    match def.plural.as_str() {
        "configmaps" if strings("data") + decoded("binaryData", None) > MAX_DATA_BYTES => {
            // Upstream names no field: the error is about the whole object.
            Err(too_long("[]", MAX_DATA_BYTES))
        }
        "secrets" => {
            let string_data = obj.get("stringData").and_then(Value::as_object);
            if strings("stringData") + decoded("data", string_data) > MAX_DATA_BYTES {
                return Err(too_long("data", MAX_DATA_BYTES));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn base64_decoded_len(s: &str) -> usize {
    let s = s.trim_end_matches('=');
    s.len() / 4 * 3 + (s.len() % 4).saturating_sub(1)
}

/// The storage size check (etcd's `--max-request-bytes`): kube-apiserver passes etcd's
/// error on as a 500 without a reason.
pub(crate) fn check_stored_size(
    def: &ResourceDef,
    obj: &Value,
    limits: &Limits,
) -> Result<(), ApiError> {
    let max = limits.max_object_bytes;
    if max == 0 {
        return Ok(());
    }
    let mut size = json_len(obj);
    if size > max && def.protobuf() {
        // Built-in kinds are stored as protobuf, usually smaller than their JSON.
        size = crate::protobuf::encode(obj).map_or(size, |b| b.len());
    }
    if size <= max {
        return Ok(());
    }
    Err(ApiError::new(500, "", "etcdserver: request is too large"))
}

/// kube-apiserver's answer to a patch it cannot apply (a failed JSON patch `test`, a
/// missing path, an unknown operation, a strategic merge of lists of lists):
/// `NewGenericServerResponse(422, ...)`, which drops the cause.
pub(crate) fn json_patch_rejected() -> ApiError {
    let mut e =
        ApiError::invalid_msg("the server rejected our request due to an error in our request");
    e.status.details = Some(Default::default());
    e
}

/// Why a JSON patch was not applied by [`apply_json_patch_bounded`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum JsonPatchFailure {
    /// The `copy` operations would have added more than [`JSON_PATCH_MAX_COPY_BYTES`]:
    /// `accumulated` bytes, counting the copy that went over.
    CopyLimit { accumulated: usize },
    /// Operation `index` would nest the document deeper than [`MAX_JSON_DEPTH`].
    TooDeep { index: usize },
    /// Operation `index` does not apply (a missing path, a failed `test`).
    Op { index: usize },
}

impl JsonPatchFailure {
    /// The JSON patch library's (evanphx/json-patch v4) text for this failure, as
    /// kube-apiserver passes it on for a webhook's or a policy's patch.
    pub(crate) fn message(&self, ops: &[json_patch::PatchOperation]) -> String {
        match self {
            Self::CopyLimit { accumulated } => format!(
                "Unable to complete the copy, the accumulated size increase of copy is {accumulated}, exceeding the limit {JSON_PATCH_MAX_COPY_BYTES}"
            ),
            Self::TooDeep { .. } => {
                format!("the patched object would nest deeper than {MAX_JSON_DEPTH} levels")
            }
            Self::Op { index } => ops
                .get(*index)
                .map(crate::http::admission::webhook::patch_error)
                .unwrap_or_default(),
        }
    }
}

/// Applies a JSON patch one operation at a time, stopping, as kube-apiserver does, once
/// its `copy` operations have added more than [`JSON_PATCH_MAX_COPY_BYTES`] (without that
/// bound a patch of a few dozen copies doubles the object each time), or once the document
/// would nest deeper than [`MAX_JSON_DEPTH`]. kube-apiserver sets the copy limit for the
/// whole process, so it bounds every patch it applies: a user's, a mutating webhook's and
/// a MutatingAdmissionPolicy's alike. `doc` is a scratch copy: on an error it is left
/// half-patched.
pub(crate) fn apply_json_patch_bounded(
    doc: &mut Value,
    ops: &[json_patch::PatchOperation],
) -> Result<(), JsonPatchFailure> {
    let mut copied = 0usize;
    // The document may nest no deeper than a JSON body (kube-apiserver: its decoder's limit,
    // on the patched object): an `add` at a deep path, or a `copy` below its own source,
    // doubling the depth each time, would grow it without bound, past what walking, cloning
    // and dropping an object recursively can take.
    let mut depth = nesting_depth(doc);
    for (index, op) in ops.iter().enumerate() {
        if let json_patch::PatchOperation::Copy(c) = op {
            let size = doc.pointer(c.from.as_str()).map_or(0, json_len);
            copied = copied.saturating_add(size);
            if copied > JSON_PATCH_MAX_COPY_BYTES {
                return Err(JsonPatchFailure::CopyLimit {
                    accumulated: copied,
                });
            }
        }
        if let Some(placed) = placed_depth(doc, op, depth) {
            if placed > MAX_JSON_DEPTH {
                return Err(JsonPatchFailure::TooDeep { index });
            }
            depth = depth.max(placed);
        }
        json_patch::patch_unsafe(doc, std::slice::from_ref(op))
            .map_err(|_| JsonPatchFailure::Op { index })?;
    }
    Ok(())
}

/// A user's JSON patch, applied under [`apply_json_patch_bounded`]'s limits; every failure
/// is kube-apiserver's generic 422 ([`json_patch_rejected`]).
pub(crate) fn apply_json_patch(
    doc: &mut Value,
    ops: &[json_patch::PatchOperation],
) -> Result<(), ApiError> {
    apply_json_patch_bounded(doc, ops).map_err(|_| json_patch_rejected())
}

/// How deeply a JSON patch operation nests what it puts in `doc`, whose nesting `depth`
/// bounds: the tokens of its path and the nesting of the value (`None` for `remove`, `test`).
fn placed_depth(doc: &Value, op: &json_patch::PatchOperation, depth: usize) -> Option<usize> {
    use json_patch::PatchOperation as Op;
    let tokens = |pointer: &str| pointer.matches('/').count();
    // what a pointer leads to nests at most what remains of the document's depth below it
    let moved = |path: &str, from: &str| {
        let bound = tokens(path) + depth.saturating_sub(tokens(from));
        if bound <= MAX_JSON_DEPTH {
            bound
        } else {
            tokens(path) + doc.pointer(from).map_or(0, nesting_depth)
        }
    };
    match op {
        Op::Add(o) => Some(tokens(o.path.as_str()) + nesting_depth(&o.value)),
        Op::Replace(o) => Some(tokens(o.path.as_str()) + nesting_depth(&o.value)),
        Op::Copy(o) => Some(moved(o.path.as_str(), o.from.as_str())),
        Op::Move(o) => Some(moved(o.path.as_str(), o.from.as_str())),
        Op::Remove(_) | Op::Test(_) => None,
    }
}

/// A response body that keeps `G` (a seat, a connection's busy mark) until hyper is done
/// with it: written out, or dropped when the client goes away.
struct Held<G> {
    inner: Body,
    _guard: G,
}

impl<G: Unpin> http_body::Body for Held<G> {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, std::io::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }
    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }
    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// Ties `guard` to the response body.
pub(crate) fn hold<G>(resp: Response<Body>, guard: G) -> Response<Body>
where
    G: Send + Sync + Unpin + 'static,
{
    resp.map(|inner| {
        Held {
            inner,
            _guard: guard,
        }
        .boxed()
    })
}

/// Requests in flight on one connection and requests served, for the idle timeout.
#[derive(Clone, Debug)]
pub(crate) struct Activity(Arc<tokio::sync::watch::Sender<(usize, u64)>>);

/// One request in flight on a connection (dropped with its response body).
#[derive(Debug)]
pub(crate) struct Busy(Arc<tokio::sync::watch::Sender<(usize, u64)>>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.send_modify(|(n, _)| *n = n.saturating_sub(1));
    }
}

impl Activity {
    pub(crate) fn new() -> Self {
        Self(Arc::new(tokio::sync::watch::Sender::new((0, 0))))
    }

    /// Marks a request in flight until the returned value drops.
    pub(crate) fn busy(&self) -> Busy {
        self.0.send_modify(|(n, total)| {
            *n += 1;
            *total += 1;
        });
        Busy(self.0.clone())
    }

    /// Resolves once the connection has had no request in flight for `idle`, or, before
    /// its first request, for `first` (Go's header read deadline starts at accept).
    pub(crate) async fn idle(&self, first: Duration, idle: Duration) {
        let mut rx = self.0.subscribe();
        loop {
            // The sender lives in `self`: this cannot fail.
            let _ = rx.wait_for(|(n, _)| *n == 0).await;
            let limit = if rx.borrow().1 == 0 { first } else { idle };
            tokio::select! {
                _ = tokio::time::sleep(limit) => {
                    if rx.borrow().0 == 0 {
                        return;
                    }
                }
                _ = rx.changed() => {}
            }
        }
    }
}

/// Bytes of a request's line and headers as sent on an HTTP/1 connection (what Go's
/// `MaxHeaderBytes` counts).
pub(crate) fn head_bytes<B>(req: &http::Request<B>) -> usize {
    let line = req.method().as_str().len()
        + req.uri().path_and_query().map_or(1, |p| p.as_str().len())
        + " HTTP/1.1\r\n".len()
        + 1;
    let headers: usize = req
        .headers()
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len() + ": \r\n".len())
        .sum();
    line + headers + 2
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bearer_parsing_follows_kube_apiserver() {
        assert_eq!(parse_bearer(Some("Bearer abc")), Bearer::Token("abc"));
        assert_eq!(parse_bearer(Some("bearer abc")), Bearer::Token("abc"));
        assert_eq!(parse_bearer(Some("BEARER abc")), Bearer::Token("abc"));
        assert_eq!(parse_bearer(Some("  Bearer abc  ")), Bearer::Token("abc"));
        assert_eq!(parse_bearer(Some("Bearer abc junk")), Bearer::Token("abc"));
        assert_eq!(parse_bearer(Some("Bearer  abc")), Bearer::ExtraSpace);
        assert_eq!(parse_bearer(Some("Bearer\tabc")), Bearer::None);
        assert_eq!(parse_bearer(Some("Bearer")), Bearer::None);
        assert_eq!(parse_bearer(Some("Basic abc")), Bearer::None);
        assert_eq!(parse_bearer(Some("")), Bearer::None);
        assert_eq!(parse_bearer(None), Bearer::None);
    }

    #[test]
    fn depth_scan_ignores_strings_and_agrees_with_serde_json() {
        let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(!json_too_deep(
            nested(MAX_JSON_DEPTH).as_bytes(),
            MAX_JSON_DEPTH
        ));
        assert!(json_too_deep(
            nested(MAX_JSON_DEPTH + 1).as_bytes(),
            MAX_JSON_DEPTH
        ));
        // serde_json accepts exactly what the scan lets through.
        assert!(serde_json::from_str::<Value>(&nested(MAX_JSON_DEPTH)).is_ok());
        assert!(serde_json::from_str::<Value>(&nested(MAX_JSON_DEPTH + 1)).is_err());
        let in_string = format!("{{\"a\":\"{}\\\"{}\"}}", "[".repeat(500), "{".repeat(500));
        assert!(!json_too_deep(in_string.as_bytes(), MAX_JSON_DEPTH));
        let e = too_deep("ConfigMap", nested(200).as_bytes());
        assert_eq!(
            e.status.message,
            format!(
                "the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; json parse error: invalid character '[' exceeded max depth ({} ...)",
                "[".repeat(30)
            )
        );
    }

    #[test]
    fn copy_bomb_is_refused_and_small_copies_pass() {
        let mut doc = json!({"data": {"a": "x".repeat(100)}});
        let ops: Vec<json_patch::PatchOperation> = serde_json::from_value(Value::Array(
            (0..30)
                .map(|i| json!({"op": "copy", "from": "/data", "path": format!("/data/k{i}")}))
                .collect(),
        ))
        .unwrap();
        let e = apply_json_patch(&mut doc, &ops).unwrap_err();
        assert_eq!(e.code(), 422);
        // Everything kept small: the object never grew past about twice the limit.
        assert!(json_len(&doc) < 2 * JSON_PATCH_MAX_COPY_BYTES + 1024);
        let mut doc = json!({"data": {"a": "x"}});
        apply_json_patch(&mut doc, &ops[..3]).unwrap();
        assert_eq!(doc["data"]["k2"]["k1"]["k0"]["a"], "x");
    }

    #[test]
    fn seats_are_counted_per_class_and_user_and_given_back() {
        let limits = Limits {
            max_requests_inflight: 2,
            max_mutating_requests_inflight: 1,
            max_requests_inflight_per_user: Some(1),
            max_watches: 1,
            ..Limits::default()
        };
        let inflight = Inflight::default();
        let a = inflight
            .try_acquire(&limits, Class::ReadOnly, "alice")
            .unwrap();
        // Alice's one seat is taken; Bob still gets one.
        assert!(
            inflight
                .try_acquire(&limits, Class::ReadOnly, "alice")
                .is_none()
        );
        let b = inflight
            .try_acquire(&limits, Class::ReadOnly, "bob")
            .unwrap();
        assert!(
            inflight
                .try_acquire(&limits, Class::ReadOnly, "carol")
                .is_none()
        );
        let m = inflight
            .try_acquire(&limits, Class::Mutating, "carol")
            .unwrap();
        assert!(
            inflight
                .try_acquire(&limits, Class::Mutating, "dave")
                .is_none()
        );
        let w = inflight
            .try_acquire(&limits, Class::Watch, "alice")
            .unwrap();
        assert_eq!(inflight.watches(), 1);
        assert!(inflight.try_acquire(&limits, Class::Watch, "bob").is_none());
        drop((a, b, m, w));
        assert!(
            inflight
                .try_acquire(&limits, Class::ReadOnly, "alice")
                .is_some()
        );
        assert_eq!(inflight.watches(), 0);
        assert!(lock(&inflight.0).per_user.is_empty());
    }

    #[test]
    fn base64_lengths() {
        for n in 0..10 {
            let text =
                base64::Engine::encode(&base64::engine::general_purpose::STANDARD, vec![0u8; n]);
            assert_eq!(base64_decoded_len(&text), n, "{text}");
        }
    }
}
