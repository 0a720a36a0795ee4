//! HTTP plumbing: request view, content negotiation, response builders.

pub(crate) mod admission;
pub(crate) mod api;
pub(crate) mod conversion;
pub(crate) mod delete;
pub(crate) mod discovery;
pub(crate) mod extra;
pub(crate) mod limits;
pub(crate) mod openapi;
pub(crate) mod patch;
pub(crate) mod server;
/// SPDY/3.1 for kubectl port-forward.
pub(crate) mod spdy;
pub(crate) mod watch;

use crate::error::ApiError;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use serde_json::Value;
use std::collections::HashMap;

/// The response body type.
pub type Body = BoxBody<Bytes, std::io::Error>;

/// A fully read request.
#[derive(Debug)]
pub struct Req {
    /// Method.
    pub method: http::Method,
    /// Path, percent-decoded per segment later.
    pub path: String,
    /// Query parameters (last value wins) .
    pub query: HashMap<String, String>,
    /// Every query pair, in order (for repeated parameters).
    pub query_all: Vec<(String, String)>,
    /// Headers.
    pub headers: HeaderMap,
    /// Body.
    pub body: Bytes,
    /// The authenticated user.
    pub user: crate::auth::rbac::UserInfo,
    /// The connection's upgrade (HTTP/1.1 `Upgrade`, e.g. WebSocket for `pods/exec`).
    pub upgrade: Option<hyper::upgrade::OnUpgrade>,
}

impl Req {
    /// A query parameter.
    pub fn q(&self, k: &str) -> Option<&str> {
        self.query.get(k).map(String::as_str)
    }
    /// A header as text.
    pub fn header(&self, k: &str) -> Option<&str> {
        self.headers.get(k).and_then(|v| v.to_str().ok())
    }
    /// Whether the `watch` parameter asks for a watch, as kube-apiserver reads it: the
    /// first value, anything but `0` or `false` (in any case), even empty.
    pub fn watch_param(&self) -> bool {
        self.query_all
            .iter()
            .find(|(k, _)| k == "watch")
            .is_some_and(|(_, v)| !(v == "0" || v.eq_ignore_ascii_case("false")))
    }
    /// The boolean value of a query parameter (`true`/`1`).
    pub fn q_bool(&self, k: &str) -> bool {
        matches!(self.q(k), Some("true" | "1"))
    }
}

/// What representation the client asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Format {
    /// Plain JSON.
    Json,
    /// YAML.
    Yaml,
    /// `meta.k8s.io/v1 Table`.
    Table,
    /// `PartialObjectMetadata` (single object or watch events), in protobuf when the
    /// client asked for it so (any resource has this form, custom ones too).
    PartialMeta {
        /// Encoded as protobuf.
        protobuf: bool,
    },
    /// `PartialObjectMetadataList`, in protobuf when asked for so.
    PartialMetaList {
        /// Encoded as protobuf.
        protobuf: bool,
    },
    /// A `PartialObjectMetadata` form that does not fit the target: the list form on one
    /// object (`list_form`) or the single form on a list; answered with a 406.
    WrongShape {
        /// The list form was asked for.
        list_form: bool,
    },
    /// Aggregated discovery `APIGroupDiscoveryList` (with the version named).
    Discovery(&'static str),
    /// Kubernetes protobuf (`application/vnd.kubernetes.protobuf`); `json` tells whether
    /// the client also accepts JSON, the answer for kinds without a protobuf message.
    Protobuf {
        /// JSON is acceptable too.
        json: bool,
    },
}

impl Format {
    /// Whether the answer is Kubernetes protobuf.
    pub fn is_protobuf(&self) -> bool {
        matches!(
            self,
            Format::Protobuf { .. }
                | Format::PartialMeta { protobuf: true }
                | Format::PartialMetaList { protobuf: true }
        )
    }

    /// The encoding of a response body of this format: protobuf (with JSON for bodies
    /// that have no protobuf form) or JSON.
    pub fn encoding(&self) -> Format {
        if self.is_protobuf() {
            Format::Protobuf { json: true }
        } else {
            Format::Json
        }
    }
}

/// The Kubernetes protobuf media type.
pub const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

struct MediaRange {
    essence: String,
    params: HashMap<String, String>,
}

fn parse_accept(accept: &str) -> Vec<MediaRange> {
    accept
        .split(',')
        .filter_map(|part| {
            let mut it = part.split(';');
            let essence = it.next()?.trim().to_ascii_lowercase();
            if essence.is_empty() {
                return None;
            }
            let params = it
                .filter_map(|p| p.split_once('='))
                .map(|(k, v)| (k.trim().to_string(), v.trim().trim_matches('"').to_string()))
                .collect();
            Some(MediaRange { essence, params })
        })
        .collect()
}

/// What kube-apiserver serves every resource as; named in its 406 answers.
const REPRESENTATIONS: &str =
    "application/json, application/yaml, application/vnd.kubernetes.protobuf";

/// The 406 of an Accept whose media types are known but whose `as` (or a protobuf
/// Table) is not served.
pub fn unsupported_form() -> ApiError {
    ApiError::not_acceptable(format!(
        "only the following media types are accepted: {REPRESENTATIONS}"
    ))
}

/// Negotiates the response format for a resource request. `list` tells whether the
/// target is a collection. As kube-apiserver, the first `PartialObjectMetadata(List)`
/// form asked for is the answer even when its shape does not fit the target (a list's
/// form on one object, [`Format::WrongShape`]): the handler answers that with a 406
/// naming the object's type ([`wrong_shape`]).
pub fn negotiate(req: &Req, list: bool) -> Result<Format, ApiError> {
    let Some(accept) = req.header("accept").filter(|a| !a.trim().is_empty()) else {
        return Ok(Format::Json);
    };
    let ranges = parse_accept(accept);
    let mut known = false;
    for (i, r) in ranges.iter().enumerate() {
        let protobuf = r.essence == PROTOBUF;
        // Objects and lists: protobuf, with JSON as the answer for kinds without it when
        // a later range allows JSON.
        if protobuf && !r.params.contains_key("as") {
            let json = ranges[i + 1..].iter().any(|r| {
                matches!(
                    r.essence.as_str(),
                    "application/json" | "*/*" | "application/*"
                ) && !r.params.contains_key("as")
            });
            return Ok(Format::Protobuf { json });
        }
        let json_like = matches!(
            r.essence.as_str(),
            "application/json" | "*/*" | "application/*"
        );
        let yaml = r.essence == "application/yaml";
        if !(json_like || yaml || protobuf) {
            continue;
        }
        known = true;
        match (
            r.params.get("as").map(String::as_str),
            r.params.get("g").map(String::as_str),
        ) {
            (None, _) => return Ok(if yaml { Format::Yaml } else { Format::Json }),
            // Tables have no protobuf form.
            (Some("Table"), Some("meta.k8s.io")) if !protobuf => return Ok(Format::Table),
            (Some("PartialObjectMetadataList"), Some("meta.k8s.io")) if !yaml => {
                return Ok(if list {
                    Format::PartialMetaList { protobuf }
                } else {
                    Format::WrongShape { list_form: true }
                });
            }
            (Some("PartialObjectMetadata"), Some("meta.k8s.io")) if !yaml => {
                return Ok(if !list || req.q_bool("watch") {
                    Format::PartialMeta { protobuf }
                } else {
                    Format::WrongShape { list_form: false }
                });
            }
            _ => {}
        }
    }
    Err(if known {
        unsupported_form()
    } else {
        let mut e = ApiError::not_acceptable(format!(
            "406: Not Acceptable\n\nAvailable representations: {REPRESENTATIONS}"
        ));
        e.status.details = Some(Default::default());
        e
    })
}

/// The 406 of a [`Format::WrongShape`] for objects of `def` (kube-apiserver names the Go
/// type it holds: `*core.ConfigMapList`, `*unstructured.Unstructured`).
pub fn wrong_shape(def: &crate::registry::ResourceDef, list_form: bool) -> ApiError {
    let ty = if def.crd.is_some() {
        "unstructured.Unstructured".to_string()
    } else {
        let pkg = match def.group.as_str() {
            "" | "events.k8s.io" => "core",
            "internal.apiserver.k8s.io" => "apiserverinternal",
            g => g.split('.').next().unwrap_or(g),
        };
        format!("{pkg}.{}", def.kind)
    };
    ApiError::not_acceptable(if list_form {
        format!(
            "you requested PartialObjectMetadataList, but the requested object is not a list (*{ty})"
        )
    } else {
        format!(
            "you requested PartialObjectMetadata, but the requested object is a list (*{ty}List)"
        )
    })
}

/// The format of a response that is always a whole object: protobuf when negotiated,
/// else JSON.
pub fn object_format(req: &Req) -> Format {
    match negotiate(req, false) {
        Ok(f @ Format::Protobuf { .. }) => f,
        _ => Format::Json,
    }
}

/// Negotiates discovery documents: aggregated v2 (or v2beta1) or legacy.
pub fn negotiate_discovery(req: &Req) -> Format {
    let Some(accept) = req.header("accept") else {
        return Format::Json;
    };
    for r in parse_accept(accept) {
        if r.essence == "application/json" || r.essence == "*/*" {
            match (
                r.params.get("as").map(String::as_str),
                r.params.get("g").map(String::as_str),
                r.params.get("v").map(String::as_str),
            ) {
                (Some("APIGroupDiscoveryList"), Some("apidiscovery.k8s.io"), Some("v2")) => {
                    return Format::Discovery("v2");
                }
                (Some("APIGroupDiscoveryList"), Some("apidiscovery.k8s.io"), Some("v2beta1")) => {
                    return Format::Discovery("v2beta1");
                }
                (None, _, _) => return Format::Json,
                _ => {}
            }
        }
    }
    Format::Json
}

/// Builds a response with the standard headers.
pub fn response(code: StatusCode, content_type: &str, body: Bytes) -> Response<Body> {
    let mut resp = Response::new(Full::new(body).map_err(|never| match never {}).boxed());
    *resp.status_mut() = code;
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(content_type) {
        h.insert(header::CONTENT_TYPE, v);
    }
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    resp
}

/// Serialises a value as JSON, YAML or protobuf (JSON for kinds without a protobuf
/// message).
pub fn encode(code: StatusCode, v: &Value, format: &Format) -> Response<Body> {
    // A write answered to a metadata-only client: the object's PartialObjectMetadata.
    if let Format::PartialMeta { .. } = format
        && v.get("kind").and_then(Value::as_str) != Some("PartialObjectMetadata")
        && v.get("metadata").is_some()
    {
        return encode(
            code,
            &crate::registry::meta::partial_meta(v),
            &format.encoding(),
        );
    }
    if let Format::Protobuf { .. } | Format::PartialMetaList { protobuf: true } = format {
        match crate::protobuf::encode(v) {
            Ok(body) => return response(code, PROTOBUF, Bytes::from(body)),
            Err(e) => tracing::debug!("answering JSON: {e}"),
        }
    }
    if *format == Format::Yaml
        && let Ok(text) = serde_saphyr::to_string(v)
    {
        return response(code, "application/yaml", Bytes::from(text));
    }
    let body = serde_json::to_vec(v).unwrap_or_default();
    response(code, "application/json", Bytes::from(body))
}

/// Renders an error.
pub fn error_response(e: &ApiError) -> Response<Body> {
    error_response_as(e, &Format::Json)
}

/// Renders an error as JSON or, for protobuf clients, as a protobuf `Status`.
pub fn error_response_as(e: &ApiError, format: &Format) -> Response<Body> {
    let code = StatusCode::from_u16(e.status.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    // Only a plain protobuf Accept gets a protobuf Status: a metadata-only client's
    // `as=PartialObjectMetadata` ranges do not name Status, so kube-apiserver answers JSON.
    let mut resp = match format {
        Format::Protobuf { .. } => {
            let mut v = serde_json::to_value(&e.status).unwrap_or_default();
            if let Some(o) = v.as_object_mut() {
                o.insert("apiVersion".into(), Value::String("v1".into()));
                o.insert("kind".into(), Value::String("Status".into()));
            }
            encode(code, &v, format)
        }
        _ => response(
            code,
            "application/json",
            Bytes::from(serde_json::to_vec(&e.status).unwrap_or_default()),
        ),
    };
    if e.nosniff {
        resp.headers_mut().insert(
            "x-content-type-options",
            HeaderValue::from_static("nosniff"),
        );
    }
    if let Some(secs) = e.retry_after.filter(|s| *s > 0)
        && let Ok(v) = HeaderValue::from_str(&secs.to_string())
    {
        resp.headers_mut().insert(header::RETRY_AFTER, v);
    }
    resp
}

/// Plain text (with `X-Content-Type-Options: nosniff`, as Go's handlers send it).
pub fn text(code: StatusCode, s: impl Into<String>) -> Response<Body> {
    let mut resp = response(code, "text/plain; charset=utf-8", Bytes::from(s.into()));
    resp.headers_mut().insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    resp
}

/// Decodes a request body as JSON or YAML by Content-Type.
pub fn decode_body(req: &Req) -> Result<Value, ApiError> {
    decode_body_as(req, None)
}

/// Why a YAML body does not decode.
pub(crate) enum YamlError {
    /// It nests more than [`crate::http::limits::MAX_JSON_DEPTH`] levels: the JSON it converts to
    /// would be refused; `open` is the bracket of that JSON at which it goes over (`[` for a
    /// sequence, `{` for a mapping), `line` where in the YAML.
    TooDeep {
        line: u64,
        open: char,
    },
    Invalid(serde_saphyr::Error),
}

/// Decodes YAML as deep as the JSON bodies decoded (`MAX_JSON_DEPTH` levels), on a stack with
/// room for them: the YAML deserializer takes ~30 KiB of stack a level in a debug build,
/// 1.8 MiB of a request thread's 2 MiB for its own default limit of 64 levels.
pub(crate) fn decode_yaml(text: &str) -> Result<Value, YamlError> {
    const STACK: usize = 16 << 20;
    let mut budget = serde_saphyr::Budget::default();
    budget.max_depth = crate::http::limits::MAX_JSON_DEPTH;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    let decoded = stacker::maybe_grow(STACK, STACK, || {
        serde_saphyr::from_str_with_options::<Value>(text, options)
    });
    decoded.map_err(|e| {
        // over the budget's depth, or the parser's own bound on flow collections (`[[[...`)
        let too_deep = matches!(
            e.without_snippet(),
            serde_saphyr::Error::Budget {
                breach: serde_saphyr::budget::BudgetBreach::Depth { .. },
                ..
            }
        ) || e.to_string().contains("recursion limit exceeded");
        match (too_deep, e.location()) {
            (true, Some(at)) => {
                // the node that goes too deep: `[` or `- ` starts a sequence, a key a mapping
                let nth = |n: u64| usize::try_from(n.saturating_sub(1)).unwrap_or(usize::MAX);
                let c = text
                    .lines()
                    .nth(nth(at.line()))
                    .and_then(|l| l.chars().nth(nth(at.column())));
                let open = if matches!(c, Some('[' | '-')) {
                    '['
                } else {
                    '{'
                };
                YamlError::TooDeep {
                    line: at.line(),
                    open,
                }
            }
            _ => YamlError::Invalid(e),
        }
    })
}

/// apimachinery's `summarizeData(data, 30)`, which error messages quote a body with: JSON
/// objects as text, other bodies in hex.
fn summarize_data(data: &[u8]) -> String {
    let (head, more) = if data.len() > 30 {
        (&data[..30], " ...")
    } else {
        (data, "")
    };
    if data.first() == Some(&b'{') {
        format!("{}{more}", String::from_utf8_lossy(head))
    } else {
        let hex: String = head.iter().map(|b| format!("{b:02x}")).collect();
        format!("{hex}{more}")
    }
}

/// The media types a request body may have.
const BODY_MEDIA_TYPES: &str =
    "application/json, application/yaml, application/vnd.kubernetes.protobuf";

/// The media type of a Content-Type value as Go's `mime.ParseMediaType` reads it
/// (lowercased type/subtype, well-formed parameters), `None` when it does not parse.
fn media_type(ct: &str) -> Option<String> {
    fn token(s: &str) -> (&str, &str) {
        let end = s
            .find(|c: char| {
                !c.is_ascii() || c <= ' ' || c == '\x7f' || "()<>@,;:\\\"/[]?=".contains(c)
            })
            .unwrap_or(s.len());
        s.split_at(end)
    }
    let (ty, mut rest) = ct.split_once(';').map_or((ct, ""), |(t, r)| (t, r));
    let ty = ty.trim().to_ascii_lowercase();
    let (main, after) = token(&ty);
    if main.is_empty() {
        return None;
    }
    if let Some(sub) = after.strip_prefix('/') {
        let (sub, after) = token(sub);
        if sub.is_empty() || !after.is_empty() {
            return None;
        }
    } else if !after.is_empty() {
        return None;
    }
    let mut seen = std::collections::HashSet::new();
    loop {
        rest = rest.trim_start();
        if rest.is_empty() {
            return Some(ty);
        }
        let (key, after) = token(rest);
        let value = after.trim_start().strip_prefix('=')?.trim_start();
        let after = if let Some(quoted) = value.strip_prefix('"') {
            let mut escaped = false;
            let end = quoted
                .char_indices()
                .find_map(|(i, c)| match (escaped, c) {
                    (true, _) => {
                        escaped = false;
                        None
                    }
                    (false, '\\') => {
                        escaped = true;
                        None
                    }
                    (false, '"') => Some(i),
                    _ => None,
                })?;
            &quoted[end + 1..]
        } else {
            let (v, after) = token(value);
            if v.is_empty() {
                return None;
            }
            after
        };
        if key.is_empty() || !seen.insert(key.to_ascii_lowercase()) {
            return None;
        }
        let after = after.trim_start();
        match after.strip_prefix(';') {
            Some(r) => rest = r,
            None if after.is_empty() => return Some(ty),
            None => return None,
        }
    }
}

/// Like [`decode_body`], for an object of `kind`: a body nested too deeply gets
/// kube-apiserver's message, which names the kind.
pub fn decode_body_as(req: &Req, kind: Option<&str>) -> Result<Value, ApiError> {
    // Like kube-apiserver: an absent or empty Content-Type is JSON; one that does not
    // parse or names another type is refused before the body is looked at.
    let ct = req.header("content-type").unwrap_or("").trim();
    let essence = if ct.is_empty() {
        "application/json".to_string()
    } else {
        media_type(ct)
            .filter(|m| BODY_MEDIA_TYPES.split(", ").any(|t| t == m))
            .ok_or_else(|| {
                ApiError::unsupported_media_type(format!(
                    "the body of the request was in an unknown format - accepted media types include: {BODY_MEDIA_TYPES}"
                ))
            })?
    };
    if req.body.is_empty() {
        return Err(ApiError::bad_request("the request body is empty"));
    }
    if essence == "application/json"
        && crate::http::limits::json_too_deep(&req.body, crate::http::limits::MAX_JSON_DEPTH)
    {
        return Err(crate::http::limits::too_deep(
            kind.unwrap_or("Object"),
            &req.body,
        ));
    }
    let v: Value = if essence == "application/vnd.kubernetes.protobuf" {
        crate::protobuf::decode(&req.body).map_err(ApiError::bad_request)?
    } else if essence == "application/yaml" {
        let text = std::str::from_utf8(&req.body).map_err(|e| {
            ApiError::bad_request(format!("the request body is not valid UTF-8: {e}"))
        })?;
        decode_yaml(text).map_err(|e| match e {
            YamlError::TooDeep { open, .. } => ApiError::bad_request(format!(
                "the object provided is unrecognized (must be of type {}): couldn't get version/kind; json parse error: invalid character '{open}' exceeded max depth ({})",
                kind.unwrap_or("Object"),
                summarize_data(&req.body)
            )),
            YamlError::Invalid(e) => ApiError::bad_request(format!("error decoding YAML: {e}")),
        })?
    } else {
        serde_json::from_slice(&req.body).map_err(|e| {
            ApiError::bad_request(format!(
                "the body of the request could not be decoded as JSON: {e}"
            ))
        })?
    };
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::media_type;

    #[test]
    fn media_types_parse_as_go_parses_them() {
        let ok = |ct: &str| media_type(ct);
        assert_eq!(ok("Application/JSON").as_deref(), Some("application/json"));
        assert_eq!(
            ok("application/json; charset=utf-8").as_deref(),
            Some("application/json")
        );
        assert_eq!(ok("application/json;").as_deref(), Some("application/json"));
        assert_eq!(
            ok(r#"application/json; a="x;\"y"; b=z"#).as_deref(),
            Some("application/json")
        );
        assert_eq!(ok("application").as_deref(), Some("application"));
        for bad in [
            "",
            ";;;",
            "application/json;;",
            "application/",
            "application/json x",
            "application/json; a",
            "application/json; a=",
            "application/json; a=1; A=2",
            r#"application/json; a="unterminated"#,
        ] {
            assert_eq!(media_type(bad), None, "{bad}");
        }
    }
}
