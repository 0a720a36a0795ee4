//! `pods/log`, `pods/exec`, `pods/attach` and `pods/portforward`: validation as
//! kube-apiserver does it, then the simulated kubelet.

use super::ws;
use super::{ContainerRef, Kubelet, LogBuf, PodRef, SessionKind};
use crate::error::ApiError;
use crate::http::api::{ApiServer, Target};
use crate::http::{self as h, Body, Req};
use crate::registry::meta::meta_str;
use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use serde_json::Value;
use std::sync::Arc;

/// Serves pod I/O; gives the request back when it is something else.
pub(crate) async fn serve(
    srv: &Arc<ApiServer>,
    req: Req,
    t: &Target,
) -> Result<Response<Body>, Req> {
    let (Some(name), Some(sub)) = (t.name.as_deref(), t.sub.as_deref()) else {
        return Err(req);
    };
    if t.def.group.is_empty() && t.def.plural == "nodes" && sub == "proxy" {
        return Ok(node_proxy(srv, t, name).unwrap_or_else(|e| h::error_response(&e)));
    }
    if !(t.def.group.is_empty() && t.def.plural == "pods") {
        return Err(req);
    }
    let get = req.method == http::Method::GET;
    let post = req.method == http::Method::POST;
    let result = match sub {
        "log" if get => log(srv, &req, t, name).await,
        "exec" | "attach" | "portforward" if get || post => stream(srv, req, t, name, sub).await,
        _ => return Err(req),
    };
    Ok(result.unwrap_or_else(|e| h::error_response(&e)))
}

/// `nodes/NAME/proxy/…`: kube-apiserver's answers up to the point where it would dial the
/// node's kubelet, which the embedded server never does (the simulated kubelet has no
/// HTTP endpoint, and its node's address is loopback, which kube-apiserver refuses).
fn node_proxy(srv: &ApiServer, t: &Target, name: &str) -> Result<Response<Body>, ApiError> {
    let node = srv
        .storage
        .get(&t.def.storage_key(), "", name)
        .ok_or_else(|| ApiError::not_found(&t.def, name))?;
    let addresses: Vec<(&str, &str)> = node
        .pointer("/status/addresses")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|x| {
                    (
                        x.get("type").and_then(Value::as_str).unwrap_or(""),
                        x.get("address").and_then(Value::as_str).unwrap_or(""),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    // kube-apiserver's default --kubelet-preferred-address-types.
    let preferred = [
        "Hostname",
        "InternalDNS",
        "InternalIP",
        "ExternalDNS",
        "ExternalIP",
    ]
    .iter()
    .find_map(|ty| addresses.iter().find(|(t, _)| t == ty).map(|(_, a)| *a));
    let Some(address) = preferred else {
        let known: Vec<String> = addresses
            .iter()
            .map(|(t, a)| format!("{{{t} {a}}}"))
            .collect();
        return Err(ApiError::new(
            500,
            "",
            format!(
                "no preferred addresses found; known addresses: [{}]",
                known.join(" ")
            ),
        ));
    };
    let proxyable = match address.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(ip)) => {
            !(ip.is_loopback() || ip.is_link_local() || ip.is_unspecified() || ip.is_multicast())
        }
        Ok(std::net::IpAddr::V6(ip)) => {
            !(ip.is_loopback()
                || ip.is_unspecified()
                || ip.is_unicast_link_local()
                || ip.is_multicast())
        }
        Err(_) => !address.eq_ignore_ascii_case("localhost"),
    };
    if !proxyable {
        return Err(ApiError::bad_request("address not allowed"));
    }
    Err(ApiError::new(
        503,
        "ServiceUnavailable",
        format!(
            "error trying to reach service: the embedded API server does not proxy to kubelets (node {name}, address {address})"
        ),
    ))
}

fn pod(srv: &ApiServer, t: &Target, name: &str) -> Result<Arc<Value>, ApiError> {
    srv.storage
        .get(
            &t.def.storage_key(),
            t.namespace.as_deref().unwrap_or(""),
            name,
        )
        .ok_or_else(|| ApiError::not_found(&t.def, name))
}

fn names(pod: &Value, path: &str) -> Vec<String> {
    pod.pointer(path)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|c| c.get("name").and_then(Value::as_str))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The container a request names, or the only one (kube-apiserver's texts).
fn container(pod: &Value, name: &str, asked: Option<&str>) -> Result<String, ApiError> {
    let main = names(pod, "/spec/containers");
    let init = names(pod, "/spec/initContainers");
    let eph = names(pod, "/spec/ephemeralContainers");
    match asked.filter(|c| !c.is_empty()) {
        Some(c) => {
            if main.iter().chain(&init).chain(&eph).any(|n| n == c) {
                Ok(c.to_string())
            } else {
                Err(ApiError::bad_request(format!(
                    "container {c} is not valid for pod {name}"
                )))
            }
        }
        None if main.len() == 1 => Ok(main[0].clone()),
        None => {
            let mut msg = format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                main.join(" ")
            );
            if !init.is_empty() {
                msg.push_str(&format!(
                    " or one of the init containers: [{}]",
                    init.join(" ")
                ));
            }
            if !eph.is_empty() {
                msg.push_str(&format!(
                    " or one of the ephemeral containers: [{}]",
                    eph.join(" ")
                ));
            }
            Err(ApiError::bad_request(msg))
        }
    }
}

/// The node's kubelet, when it is the simulated one; the errors of a real server when the
/// pod has no node (`Ok(None)`: for logs, an empty answer) or its node is unknown.
fn kubelet_for<'a>(
    srv: &'a ApiServer,
    t: &Target,
    pod: &Value,
    name: &str,
) -> Result<Option<&'a Kubelet>, ApiError> {
    let node = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or("");
    if node.is_empty() {
        return Ok(None);
    }
    if srv.storage.get("/nodes", "", node).is_none() {
        // (kube-apiserver names the resource "pods" here.)
        return Err(ApiError::not_found(&t.def, node));
    }
    match srv.options.kubelet.as_ref() {
        Some(k) if k.node == node => Ok(Some(k)),
        _ => Err(ApiError::internal(format!(
            "error dialing backend: no kubelet answers for node {node:?} (kubewright simulates a kubelet only with ServerBuilder::kubelet / kw serve --kubelet); pod {name}"
        ))),
    }
}

fn int_param(req: &Req, k: &str) -> Result<Option<i64>, ApiError> {
    match req.q(k) {
        None => Ok(None),
        Some(v) => v.parse::<i64>().map(Some).map_err(|_| {
            let why = if v.is_empty()
                || v.trim_start_matches('-')
                    .bytes()
                    .any(|b| !b.is_ascii_digit())
            {
                "invalid syntax"
            } else {
                "value out of range"
            };
            ApiError::bad_request(format!("strconv.ParseInt: parsing {v:?}: {why}"))
        }),
    }
}

fn bool_param(req: &Req, k: &str) -> Result<bool, ApiError> {
    match req.q(k) {
        None | Some("") => Ok(false),
        Some("1" | "t" | "T" | "true" | "TRUE" | "True") => Ok(true),
        Some("0" | "f" | "F" | "false" | "FALSE" | "False") => Ok(false),
        Some(v) => Err(ApiError::bad_request(format!(
            "strconv.ParseBool: parsing {v:?}: invalid syntax"
        ))),
    }
}

fn log_invalid(name: &str, field: &str, reason: &str, message: &str) -> ApiError {
    let text = match reason {
        "FieldValueForbidden" => format!("Forbidden: {message}"),
        _ => format!("Invalid value: {message}"),
    };
    let mut e = ApiError::new(
        422,
        "Invalid",
        format!("PodLogOptions \"{name}\" is invalid: {field}: {text}"),
    );
    e.status.details = Some(kubewright_core::StatusDetails {
        name: name.into(),
        kind: "PodLogOptions".into(),
        causes: vec![kubewright_core::StatusCause {
            reason: reason.into(),
            message: text,
            field: field.into(),
        }],
        ..Default::default()
    });
    e
}

/// Parsed `PodLogOptions`.
struct LogOptions {
    follow: bool,
    previous: bool,
    timestamps: bool,
    since: Option<jiff::Timestamp>,
    tail: Option<i64>,
    limit: Option<i64>,
}

fn log_options(req: &Req, name: &str) -> Result<LogOptions, ApiError> {
    let since_seconds = int_param(req, "sinceSeconds")?;
    let since_time = match req.q("sinceTime").filter(|s| !s.is_empty()) {
        None => None,
        Some(s) => Some(s.parse::<jiff::Timestamp>().map_err(|_| {
            ApiError::bad_request(format!(
                "parsing time {s:?} as \"2006-01-02T15:04:05Z07:00\": cannot parse {s:?} as \"2006\""
            ))
        })?),
    };
    let tail = int_param(req, "tailLines")?;
    let limit = int_param(req, "limitBytes")?;
    let opts = LogOptions {
        follow: bool_param(req, "follow")?,
        previous: bool_param(req, "previous")?,
        timestamps: bool_param(req, "timestamps")?,
        since: None,
        tail,
        limit,
    };
    // kube's ValidatePodLogOptions, in its order.
    if let Some(n) = tail.filter(|n| *n < 0) {
        return Err(log_invalid(
            name,
            "tailLines",
            "FieldValueInvalid",
            &format!("{n}: must be greater than or equal to 0"),
        ));
    }
    if let Some(n) = limit.filter(|n| *n < 1) {
        return Err(log_invalid(
            name,
            "limitBytes",
            "FieldValueInvalid",
            &format!("{n}: must be greater than 0"),
        ));
    }
    if since_seconds.is_some() && since_time.is_some() {
        return Err(log_invalid(
            name,
            "[]",
            "FieldValueForbidden",
            "at most one of `sinceTime` or `sinceSeconds` may be specified",
        ));
    }
    if let Some(n) = since_seconds.filter(|n| *n < 1) {
        return Err(log_invalid(
            name,
            "sinceSeconds",
            "FieldValueInvalid",
            &format!("{n}: must be greater than 0"),
        ));
    }
    let since = match (since_seconds, since_time) {
        (Some(s), _) => jiff::Timestamp::now()
            .checked_sub(jiff::SignedDuration::from_secs(s))
            .ok(),
        (None, t) => t,
    };
    Ok(LogOptions { since, ..opts })
}

/// Go's RFC3339Nano: nanoseconds without trailing zeros.
pub(crate) fn rfc3339_nano(t: jiff::Timestamp) -> String {
    let secs = t.strftime("%Y-%m-%dT%H:%M:%S").to_string();
    let ns = t.subsec_nanosecond();
    if ns == 0 {
        return format!("{secs}Z");
    }
    let frac = format!("{ns:09}");
    format!("{secs}.{}Z", frac.trim_end_matches('0'))
}

fn render(line: &super::LogLine, timestamps: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(line.text.len() + 40);
    if timestamps {
        out.extend_from_slice(rfc3339_nano(line.time).as_bytes());
        out.push(b' ');
    }
    out.extend_from_slice(line.text.as_bytes());
    out.push(b'\n');
    out
}

async fn log(
    srv: &Arc<ApiServer>,
    req: &Req,
    t: &Target,
    name: &str,
) -> Result<Response<Body>, ApiError> {
    let opts = log_options(req, name)?;
    let pod = pod(srv, t, name)?;
    let c = container(&pod, name, req.q("container"))?;
    let Some(k) = kubelet_for(srv, t, &pod, name)? else {
        // No node: kube-apiserver answers with no content.
        return Ok(Response::builder()
            .status(StatusCode::NO_CONTENT)
            .body(Full::new(Bytes::new()).map_err(|n| match n {}).boxed())
            .unwrap_or_else(|_| h::text(StatusCode::NO_CONTENT, "")));
    };
    let uid = meta_str(&pod, "uid").unwrap_or("");
    if opts.previous {
        return Err(ApiError::bad_request(format!(
            "previous terminated container {c:?} in pod {name:?} not found"
        )));
    }
    let Some(buf) = k.log_buf(uid, &c) else {
        return Err(ApiError::bad_request(format!(
            "container {c:?} in pod {name:?} is waiting to start: ContainerCreating"
        )));
    };
    // The lines so far, filtered and cut as the kubelet does.
    let (mut first, seen) = {
        let lines = buf.lines.lock().unwrap_or_else(|e| e.into_inner());
        let selected: Vec<&super::LogLine> = lines
            .iter()
            .filter(|l| opts.since.is_none_or(|s| l.time >= s))
            .collect();
        let skip = match opts.tail {
            Some(n) => selected
                .len()
                .saturating_sub(usize::try_from(n).unwrap_or(0)),
            None => 0,
        };
        let mut out = Vec::new();
        for l in &selected[skip..] {
            out.extend(render(l, opts.timestamps));
        }
        (out, lines.len())
    };
    let mut budget = opts.limit.map(|n| usize::try_from(n).unwrap_or(usize::MAX));
    if let Some(b) = budget {
        first.truncate(b);
        budget = Some(b - first.len());
    }
    let mut resp = if !opts.follow || budget == Some(0) {
        Response::new(
            Full::new(Bytes::from(first))
                .map_err(|n| match n {})
                .boxed(),
        )
    } else {
        let stream = follow(buf, seen, first, opts.timestamps, budget);
        Response::new(StreamBody::new(stream).boxed())
    };
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain"),
    );
    Ok(resp)
}

/// A followed log: what was there, then each new line until the log ends.
fn follow(
    buf: Arc<LogBuf>,
    seen: usize,
    first: Vec<u8>,
    timestamps: bool,
    budget: Option<usize>,
) -> impl futures::Stream<Item = Result<Frame<Bytes>, std::io::Error>> + Send + 'static {
    let rx = buf.changed.subscribe();
    let state = (buf, rx, seen, Some(first), budget);
    futures::stream::unfold(
        state,
        move |(buf, mut rx, seen, first, budget)| async move {
            if let Some(f) = first {
                return Some((
                    Ok(Frame::data(Bytes::from(f))),
                    (buf, rx, seen, None, budget),
                ));
            }
            if budget == Some(0) {
                return None;
            }
            loop {
                let chunk: Vec<u8> = {
                    let lines = buf.lines.lock().unwrap_or_else(|e| e.into_inner());
                    lines[seen.min(lines.len())..]
                        .iter()
                        .flat_map(|l| render(l, timestamps))
                        .collect()
                };
                if !chunk.is_empty() {
                    let seen = buf.lines.lock().unwrap_or_else(|e| e.into_inner()).len();
                    let mut chunk = chunk;
                    let budget = budget.map(|b| {
                        chunk.truncate(b);
                        b - chunk.len()
                    });
                    return Some((
                        Ok(Frame::data(Bytes::from(chunk))),
                        (buf, rx, seen, None, budget),
                    ));
                }
                if buf.is_closed() {
                    return None;
                }
                rx.mark_unchanged();
                // Re-check after subscribing to the next change (no line is missed).
                let now = buf.lines.lock().unwrap_or_else(|e| e.into_inner()).len();
                if now > seen || buf.is_closed() {
                    continue;
                }
                if rx.changed().await.is_err() {
                    return None;
                }
            }
        },
    )
}

/// The secondary check of kube-apiserver 1.36 for a GET of a streaming subresource
/// (WebSocket): the `create` verb is required too, and a failure has no reason text.
fn authorize_create(srv: &ApiServer, req: &Req, t: &Target, name: &str) -> Result<(), ApiError> {
    let attrs = crate::auth::rbac::Attributes {
        verb: "create",
        group: "",
        resource: "pods",
        subresource: t.sub.as_deref(),
        namespace: t.namespace.as_deref().unwrap_or(""),
        name,
    };
    if crate::auth::rbac::authorize(&srv.storage, &req.user, &attrs) {
        Ok(())
    } else {
        Err(
            ApiError::forbidden(&t.def, name, format!("pods {name:?} is forbidden: "))
                .authorization_failure(),
        )
    }
}

/// The answer when every streaming session slot is taken.
fn too_many_sessions() -> Response<Body> {
    let mut resp = h::text(
        StatusCode::TOO_MANY_REQUESTS,
        "too many streaming sessions (exec, attach, port-forward) are open; try again later",
    );
    resp.headers_mut().insert(
        http::header::RETRY_AFTER,
        http::HeaderValue::from_static("1"),
    );
    resp
}

fn text_400(msg: impl Into<String>) -> Response<Body> {
    h::text(StatusCode::BAD_REQUEST, msg)
}

/// Parses `ports` (repeated or comma-separated) as kube-apiserver converts it.
fn ports(req: &Req) -> Result<Vec<u16>, ApiError> {
    let mut out = Vec::new();
    for (k, v) in &req.query_all {
        if k != "ports" {
            continue;
        }
        for p in v.split(',') {
            let port = p.parse::<u16>().map_err(|_| {
                let why = if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) {
                    "value out of range"
                } else {
                    "invalid syntax"
                };
                ApiError::bad_request(format!(
                    "cannot convert to []int32: strconv.ParseUint: parsing {p:?}: {why}"
                ))
            })?;
            out.push(port);
        }
    }
    Ok(out)
}

/// Admission of a CONNECT (kube-apiserver admits it after decoding the options and
/// before looking at the pod): mutating then validating admission, with the
/// `PodExecOptions`, `PodAttachOptions` or `PodPortForwardOptions` as the object.
async fn connect_admission(
    srv: &Arc<ApiServer>,
    req: &Req,
    t: &Target,
    name: &str,
    sub: &str,
    ports: &[u16],
) -> Result<(), ApiError> {
    use crate::http::admission::{self, Admission, Attributes, Operation};
    let flag = |k: &str| req.q(k).is_some_and(|v| v == "true" || v == "1");
    let mut options = serde_json::Map::new();
    let kind = match sub {
        "exec" => "PodExecOptions",
        "attach" => "PodAttachOptions",
        _ => "PodPortForwardOptions",
    };
    options.insert("kind".into(), kind.into());
    options.insert("apiVersion".into(), "v1".into());
    if sub == "portforward" {
        options.insert("ports".into(), serde_json::json!(ports));
    } else {
        for k in ["stdin", "stdout", "stderr", "tty"] {
            if flag(k) {
                options.insert(k.into(), true.into());
            }
        }
        if let Some(c) = req.q("container").filter(|c| !c.is_empty()) {
            options.insert("container".into(), c.into());
        }
        if sub == "exec" {
            let command: Vec<&str> = req
                .query_all
                .iter()
                .filter(|(k, _)| k == "command")
                .map(|(_, v)| v.as_str())
                .collect();
            options.insert("command".into(), serde_json::json!(command));
        }
    }
    let mut attrs = Attributes::new(
        Operation::Connect,
        &t.def,
        Some(sub),
        t.namespace.as_deref().unwrap_or(""),
        name,
        &req.user,
        false,
    );
    // kube-apiserver names the options' kind, not the pod's.
    attrs.kind = kind.to_string();
    attrs.object = Some(Value::Object(options));
    let mut adm = Admission::new(attrs);
    admission::mutate(srv, &mut adm).await?;
    admission::validate(srv, &mut adm).await
}

async fn stream(
    srv: &Arc<ApiServer>,
    mut req: Req,
    t: &Target,
    name: &str,
    sub: &str,
) -> Result<Response<Body>, ApiError> {
    if req.method == http::Method::GET {
        authorize_create(srv, &req, t, name)?;
    }
    let forward = sub == "portforward";
    let port_list = if forward { ports(&req)? } else { Vec::new() };
    connect_admission(srv, &req, t, name, sub, &port_list).await?;
    let pod = pod(srv, t, name)?;
    let c = if forward {
        String::new()
    } else {
        container(&pod, name, req.q("container"))?
    };
    let Some(k) = kubelet_for(srv, t, &pod, name)? else {
        return Err(ApiError::bad_request(format!(
            "pod {name} does not have a host assigned"
        )));
    };
    let k = k.clone();
    // From here on the kubelet answers (plain text errors, like its HTTP server).
    let pod_ref = PodRef {
        namespace: meta_str(&pod, "namespace").unwrap_or("").to_string(),
        name: name.to_string(),
        uid: meta_str(&pod, "uid").unwrap_or("").to_string(),
    };
    let spdy = req
        .header("upgrade")
        .is_some_and(|u| u.eq_ignore_ascii_case("SPDY/3.1"));
    if forward && spdy && !ws::is_websocket(&req.headers) {
        // kubectl port-forward's fallback: a plain SPDY/3.1 upgrade.
        let Some(on_upgrade) = req.upgrade.take() else {
            return Ok(text_400(
                "unable to upgrade connection: SPDY needs HTTP/1.1",
            ));
        };
        let offered = req.header("x-stream-protocol-version").unwrap_or("");
        if !offered.is_empty() && !offered.split(',').any(|p| p.trim() == "portforward.k8s.io") {
            return Ok(h::text(
                StatusCode::FORBIDDEN,
                format!(
                    "unable to upgrade: unable to negotiate protocol: client supports [{offered}], server supports [portforward.k8s.io]"
                ),
            ));
        }
        let Some(slot) = k.session_slot() else {
            return Ok(too_many_sessions());
        };
        tokio::spawn(async move {
            let _slot = slot;
            if let Ok(io) = on_upgrade.await {
                let timeout = k.idle_timeout();
                let (io, activity) = super::idle::Watched::new(hyper_util::rt::TokioIo::new(io));
                super::idle::until_idle(spdy_forward(io, k, pod_ref), activity, timeout).await;
            }
        });
        let mut resp = Response::new(
            http_body_util::Empty::<Bytes>::new()
                .map_err(|n| match n {})
                .boxed(),
        );
        *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
        let hd = resp.headers_mut();
        hd.insert(
            http::header::CONNECTION,
            http::HeaderValue::from_static("Upgrade"),
        );
        hd.insert(
            http::header::UPGRADE,
            http::HeaderValue::from_static("SPDY/3.1"),
        );
        hd.insert(
            "x-stream-protocol-version",
            http::HeaderValue::from_static("portforward.k8s.io"),
        );
        return Ok(resp);
    }
    if !ws::is_websocket(&req.headers) {
        if spdy {
            return Ok(text_400(
                "unable to upgrade connection: the kubewright kubelet speaks WebSocket (v5.channel.k8s.io, v4.channel.k8s.io), not SPDY",
            ));
        }
        return Ok(text_400(
            "unable to upgrade connection: missing upgrade headers in request",
        ));
    }
    let Some(on_upgrade) = req.upgrade.take() else {
        return Ok(text_400(
            "unable to upgrade connection: WebSocket needs HTTP/1.1",
        ));
    };
    if forward {
        let proto = match ws::negotiate(&req.headers, ws::PORTFORWARD_PROTOCOLS) {
            Ok(p) => p,
            Err(msg) => return Ok(text_400(msg)),
        };
        if proto.name == ws::SPDY_TUNNEL {
            // kubectl 1.31+: SPDY tunnelled through the WebSocket.
            let resp = ws::accept(&req.headers, &proto)?;
            let Some(slot) = k.session_slot() else {
                return Ok(too_many_sessions());
            };
            tokio::spawn(async move {
                let _slot = slot;
                if let Some((sock, activity)) = ws::upgrade(on_upgrade).await {
                    let timeout = k.idle_timeout();
                    let session = spdy_forward(crate::http::spdy::tunnel(sock), k, pod_ref);
                    super::idle::until_idle(session, activity, timeout).await;
                }
            });
            return Ok(resp);
        }
        if port_list.is_empty() {
            return Ok(text_400("query parameter \"port\" is required"));
        }
        if let Some(p) = port_list.iter().find(|p| **p == 0) {
            return Ok(text_400(format!("port \"{p}\" must be > 0")));
        }
        // Each port takes two channels, named by one byte (by one ASCII digit in the
        // base64 protocols): more ports than the protocol can name are refused.
        let max = ws::max_forwarded_ports(&proto);
        if port_list.len() > max {
            return Ok(text_400(format!(
                "{} ports requested; {} carries at most {max}",
                port_list.len(),
                if proto.name.is_empty() {
                    "channel.k8s.io"
                } else {
                    &proto.name
                }
            )));
        }
        let targets: Vec<(u16, super::PortTarget)> = port_list
            .iter()
            .map(|p| (*p, k.ports.target(&pod_ref, *p)))
            .collect();
        let resp = ws::accept(&req.headers, &proto)?;
        let Some(slot) = k.session_slot() else {
            return Ok(too_many_sessions());
        };
        let timeout = k.idle_timeout();
        tokio::spawn(async move {
            let _slot = slot;
            if let Some((sock, activity)) = ws::upgrade(on_upgrade).await {
                let session = ws::port_forward(sock, proto, pod_ref, targets);
                super::idle::until_idle(session, activity, timeout).await;
            }
        });
        return Ok(resp);
    }
    let running = pod
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|s| {
                s.get("name").and_then(Value::as_str) == Some(c.as_str())
                    && s.pointer("/state/running").is_some()
            })
        });
    if !running {
        return Ok(text_400(format!(
            "unable to upgrade connection: container not found ({c:?})"
        )));
    }
    let tty = bool_param(&req, "tty")?;
    let stdin = bool_param(&req, "stdin")?;
    let stdout = bool_param(&req, "stdout")?;
    // As the kubelet: no stderr with a terminal.
    let stderr = bool_param(&req, "stderr")? && !tty;
    if !(stdin || stdout || bool_param(&req, "stderr")?) {
        return Ok(text_400(
            "you must specify at least 1 of stdin, stdout, stderr",
        ));
    }
    let kind = if sub == "exec" {
        SessionKind::Exec
    } else {
        SessionKind::Attach
    };
    let command: Vec<String> = req
        .query_all
        .iter()
        .filter(|(k, _)| k == "command")
        .map(|(_, v)| v.clone())
        .collect();
    if kind == SessionKind::Exec && command.is_empty() {
        return Ok(text_400("you must specify a command"));
    }
    let proto = match ws::negotiate(&req.headers, ws::EXEC_PROTOCOLS) {
        Ok(p) => p,
        Err(msg) => return Ok(text_400(msg)),
    };
    let spec = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .and_then(|cs| {
            cs.iter()
                .find(|x| x.get("name").and_then(Value::as_str) == Some(c.as_str()))
        })
        .cloned()
        .unwrap_or_default();
    let env = container_env(name, &spec);
    let session = ws::ExecParams {
        kind,
        container: ContainerRef {
            pod: pod_ref,
            container: c,
            image: spec
                .get("image")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
        },
        command,
        tty,
        env,
        stdin,
        stdout,
        stderr,
    };
    let resp = ws::accept(&req.headers, &proto)?;
    let handler = k.exec.clone();
    let Some(slot) = k.session_slot() else {
        return Ok(too_many_sessions());
    };
    let timeout = k.idle_timeout();
    tokio::spawn(async move {
        let _slot = slot;
        if let Some((sock, activity)) = ws::upgrade(on_upgrade).await {
            let session = ws::exec(sock, proto, session, handler);
            super::idle::until_idle(session, activity, timeout).await;
        }
    });
    Ok(resp)
}

/// kubectl's SPDY port-forward protocol on `io`, each stream pair dialled through the
/// kubelet's port-forward targets.
async fn spdy_forward<IO>(io: IO, k: Kubelet, pod: PodRef)
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let dial = move |port: u16| {
        let target = k.ports.target(&pod, port);
        let pod = pod.clone();
        async move {
            ws::connect(target).await.map_err(|e| {
                format!(
                    "error forwarding port {port} to pod {}_{}, uid {}: {e}",
                    pod.name, pod.namespace, pod.uid
                )
            })
        }
    };
    if let Err(e) = crate::http::spdy::portforward(io, dial).await {
        tracing::debug!("port-forward (SPDY): {e}");
    }
}

/// A container's environment as the built-in commands see it: `PATH`, `HOSTNAME` (the pod's
/// name) and the literal `env` values of its spec.
pub(super) fn container_env(pod_name: &str, spec: &Value) -> Vec<(String, String)> {
    let mut env = vec![
        (
            "PATH".to_string(),
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".to_string(),
        ),
        ("HOSTNAME".to_string(), pod_name.to_string()),
    ];
    for e in spec
        .get("env")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let (Some(n), Some(v)) = (
            e.get("name").and_then(Value::as_str),
            e.get("value").and_then(Value::as_str),
        ) {
            env.push((n.to_string(), v.to_string()));
        }
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_nano_trims_zeros() {
        let t: jiff::Timestamp = "2024-01-02T03:04:05.120Z".parse().unwrap_or_default();
        assert_eq!(rfc3339_nano(t), "2024-01-02T03:04:05.12Z");
        let t: jiff::Timestamp = "2024-01-02T03:04:05Z".parse().unwrap_or_default();
        assert_eq!(rfc3339_nano(t), "2024-01-02T03:04:05Z");
    }

    #[test]
    fn container_errors_match_kube() {
        let pod = serde_json::json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}],
            "initContainers": [{"name": "i"}]}});
        let e = container(&pod, "p", None)
            .err()
            .map(|e| e.status.message)
            .unwrap_or_default();
        assert_eq!(
            e,
            "a container name must be specified for pod p, choose one of: [a b] or one of the init containers: [i]"
        );
        let e = container(&pod, "p", Some("z"))
            .err()
            .map(|e| e.status.message)
            .unwrap_or_default();
        assert_eq!(e, "container z is not valid for pod p");
        assert_eq!(container(&pod, "p", Some("i")).ok().as_deref(), Some("i"));
    }
}
