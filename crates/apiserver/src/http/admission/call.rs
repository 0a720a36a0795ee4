//! Calling a webhook (admission or CRD conversion) as kube-apiserver does: an HTTPS POST
//! of JSON to the `clientConfig`'s `url`, or to a Service (resolved to its clusterIP, or
//! its external name), trusting the `caBundle`, with `?timeout=Ns` appended and the whole
//! call bounded by that timeout. Failures are described with the texts of Go's HTTP client
//! and client-go's REST client (`Post "URL": dial tcp ...: connect: connection refused`,
//! `context deadline exceeded`, ...), which kube-apiserver wraps in its own messages.

use crate::storage::Storage;
use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, ServerName};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// The largest webhook response read (an AdmissionReview or ConversionReview answer).
const MAX_RESPONSE: usize = 64 << 20;

/// Where a webhook is reached.
struct Endpoint {
    /// The URL as Go prints it in errors: `https://host:port/path?timeout=10s`.
    shown: String,
    /// Host to dial (a name or an IP).
    dial_host: String,
    dial_port: u16,
    /// Name the certificate must be valid for.
    server_name: String,
    /// `Host` header.
    authority: String,
    /// Path and query sent.
    path_and_query: String,
}

/// POSTs `body` (JSON) to the webhook of `client_config` and returns the response body of a
/// 2xx answer. The error is the text client-go's REST client gives, after which
/// kube-apiserver puts its own prefix (`failed to call webhook: ...`).
pub(crate) async fn post(
    storage: &Storage,
    client_config: &Value,
    body: Vec<u8>,
    timeout: Duration,
) -> Result<Bytes, String> {
    let secs = timeout.as_secs().max(1);
    let endpoint = resolve(storage, client_config, secs)?;
    let shown = endpoint.shown.clone();
    let roots = ca_roots(client_config);
    match tokio::time::timeout(timeout, send(endpoint, roots, body)).await {
        Ok(Ok(b)) => Ok(b),
        Ok(Err(Failure::Transport(why))) => Err(format!("Post \"{shown}\": {why}")),
        Ok(Err(Failure::Status(why))) => Err(why),
        Err(_) => Err(format!("Post \"{shown}\": context deadline exceeded")),
    }
}

enum Failure {
    /// Before an answer came (Go prefixes these with `Post "URL": `).
    Transport(String),
    /// A non-2xx answer, as the REST client reports it.
    Status(String),
}

/// `url` with its password hidden, as Go's `url.Redacted` shows it in errors.
fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..end].rsplit_once('@') {
        Some((user, _)) => {
            let name = user.split(':').next().unwrap_or("");
            let hidden = if user.contains(':') {
                format!("{name}:xxxxx")
            } else {
                name.to_string()
            };
            let host = &rest[user.len() + 1..];
            format!("{scheme}://{hidden}@{host}")
        }
        None => url.to_string(),
    }
}

fn resolve(storage: &Storage, cc: &Value, secs: u64) -> Result<Endpoint, String> {
    if let Some(url) = cc.get("url").and_then(Value::as_str) {
        let uri: http::Uri = url
            .parse()
            .map_err(|e| format!("parse {}: {e}", crate::error::go_quote(&redacted(url))))?;
        let scheme = uri.scheme_str().unwrap_or("");
        let host = uri.host().unwrap_or("").to_string();
        if scheme != "https" || host.is_empty() {
            return Err(format!(
                "Post {}: unsupported protocol scheme {}",
                crate::error::go_quote(&redacted(url)),
                crate::error::go_quote(scheme)
            ));
        }
        let port = uri.port_u16().unwrap_or(443);
        let path = match uri.path() {
            "" => "/",
            p => p,
        };
        let query = match uri.query() {
            Some(q) if !q.is_empty() => format!("{q}&timeout={secs}s"),
            _ => format!("timeout={secs}s"),
        };
        // Validation refuses user information in a webhook URL; one stored before that
        // still never reaches the Host header or an error message.
        let authority = uri
            .authority()
            .map(|a| {
                let a = a.as_str();
                a.rsplit_once('@').map_or(a, |(_, host)| host).to_string()
            })
            .unwrap_or_default();
        let bare_host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let shown_path = if uri.path().is_empty() { "" } else { path };
        return Ok(Endpoint {
            shown: format!("https://{authority}{shown_path}?{query}"),
            dial_host: bare_host.clone(),
            dial_port: port,
            server_name: bare_host,
            authority,
            path_and_query: format!("{path}?{query}"),
        });
    }
    let Some(svc) = cc.get("service") else {
        return Err("webhook client config has neither url nor service".into());
    };
    let text = |k: &str| svc.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let (ns, name, path) = (text("namespace"), text("name"), text("path"));
    let port = svc
        .get("port")
        .and_then(Value::as_i64)
        .and_then(|p| u16::try_from(p).ok())
        .unwrap_or(443);
    let host = format!("{name}.{ns}.svc");
    let path = if path.is_empty() {
        "/".to_string()
    } else {
        path
    };
    let query = format!("timeout={secs}s");
    let shown = format!("https://{host}:{port}{path}?{query}");
    let fail = |why: String| format!("Post \"{shown}\": {why}");
    // kube-apiserver's cluster-IP resolver (`--enable-aggregator-routing=false`).
    let Some(service) = storage.get("/services", &ns, &name) else {
        return Err(fail(format!("service \"{name}\" not found")));
    };
    let spec = service.get("spec").cloned().unwrap_or(Value::Null);
    let ty = spec
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP");
    let dial_host = match ty {
        "ExternalName" => spec
            .get("externalName")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        "ClusterIP" | "NodePort" | "LoadBalancer" => {
            let ip = spec.get("clusterIP").and_then(Value::as_str).unwrap_or("");
            if ip == "None" {
                return Err(fail(
                    "cannot route to service with ClusterIP \"None\"".to_string(),
                ));
            }
            let has_port = spec
                .get("ports")
                .and_then(Value::as_array)
                .is_some_and(|ps| {
                    ps.iter()
                        .any(|p| p.get("port").and_then(Value::as_i64) == Some(i64::from(port)))
                });
            if !has_port {
                return Err(fail(format!(
                    "no service port {port} found for service \"{name}\""
                )));
            }
            ip.to_string()
        }
        other => return Err(fail(format!("unsupported service type \"{other}\""))),
    };
    Ok(Endpoint {
        shown,
        dial_host,
        dial_port: port,
        server_name: host.clone(),
        authority: format!("{host}:{port}"),
        path_and_query: format!("{path}?{query}"),
    })
}

/// The certificates of `caBundle` (base64 of PEM in JSON).
fn ca_roots(cc: &Value) -> Vec<CertificateDer<'static>> {
    let Some(b64) = cc.get("caBundle").and_then(Value::as_str) else {
        return Vec::new();
    };
    let Ok(pem) = base64::engine::general_purpose::STANDARD.decode(b64.trim()) else {
        return Vec::new();
    };
    CertificateDer::pem_slice_iter(&pem)
        .filter_map(Result::ok)
        .collect()
}

async fn send(
    ep: Endpoint,
    roots: Vec<CertificateDer<'static>>,
    body: Vec<u8>,
) -> Result<Bytes, Failure> {
    let t = Failure::Transport;
    let addr = format!("{}:{}", ep.dial_host, ep.dial_port);
    let shown_addr = if ep.dial_host.contains(':') {
        format!("[{}]:{}", ep.dial_host, ep.dial_port)
    } else {
        addr.clone()
    };
    let target = if ep.dial_host.contains(':') {
        shown_addr.clone()
    } else {
        addr
    };
    let mut addrs = tokio::net::lookup_host(target.as_str())
        .await
        .map_err(|_| t(format!("dial tcp: lookup {}: no such host", ep.dial_host)))?;
    let Some(sock) = addrs.next() else {
        return Err(t(format!(
            "dial tcp: lookup {}: no such host",
            ep.dial_host
        )));
    };
    let tcp = tokio::net::TcpStream::connect(sock).await.map_err(|e| {
        let why = match e.kind() {
            std::io::ErrorKind::ConnectionRefused => "connection refused".to_string(),
            std::io::ErrorKind::TimedOut => "i/o timeout".to_string(),
            _ => e.to_string(),
        };
        t(format!("dial tcp {sock}: connect: {why}"))
    })?;
    let mut store = rustls::RootCertStore::empty();
    for c in roots {
        let _ = store.add(c);
    }
    #[allow(
        deprecated,
        reason = "ring by choice: rustls 0.23.48 deprecates its provider for lacking post-quantum key exchange, which aws-lc-rs has at the cost of a C and cmake build"
    )]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| t(format!("tls: {e}")))?
        .with_root_certificates(store)
        .with_no_client_auth();
    let name = ServerName::try_from(ep.server_name.clone())
        .map_err(|_| t(format!("tls: invalid server name {}", ep.server_name)))?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| t(tls_error(&e, &ep.server_name)))?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
            .await
            .map_err(|e| t(e.to_string()))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let req = http::Request::post(ep.path_and_query.as_str())
        .header(http::header::HOST, ep.authority.as_str())
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::ACCEPT, "application/json, */*")
        .header(http::header::USER_AGENT, "kube-apiserver-admission")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| t(e.to_string()))?;
    let resp = sender.send_request(req).await.map_err(|e| {
        t(if e.is_incomplete_message() || e.is_canceled() {
            "EOF".to_string()
        } else {
            e.to_string()
        })
    })?;
    let status = resp.status();
    let text_plain = resp
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.starts_with("text/plain"));
    let bytes = Limited::new(resp.into_body(), MAX_RESPONSE)
        .collect()
        .await
        .map_err(|e| t(e.to_string()))?
        .to_bytes();
    if status.is_success() {
        Ok(bytes)
    } else {
        Err(Failure::Status(status_error(
            status.as_u16(),
            &bytes,
            text_plain,
        )))
    }
}

/// Go's TLS error texts for what rustls reports.
fn tls_error(e: &std::io::Error, host: &str) -> String {
    let inner = e
        .get_ref()
        .and_then(|i| i.downcast_ref::<rustls::Error>())
        .cloned();
    match inner {
        Some(rustls::Error::InvalidCertificate(c)) => {
            let why = match c {
                rustls::CertificateError::UnknownIssuer => {
                    "x509: certificate signed by unknown authority".to_string()
                }
                rustls::CertificateError::NotValidForName
                | rustls::CertificateError::NotValidForNameContext { .. } => {
                    format!("x509: certificate is not valid for {host}")
                }
                rustls::CertificateError::Expired
                | rustls::CertificateError::ExpiredContext { .. }
                | rustls::CertificateError::NotValidYet
                | rustls::CertificateError::NotValidYetContext { .. } => {
                    "x509: certificate has expired or is not yet valid".to_string()
                }
                other => format!("x509: {other:?}"),
            };
            format!("tls: failed to verify certificate: {why}")
        }
        Some(other) => format!("remote error: tls: {other}"),
        None if e.kind() == std::io::ErrorKind::UnexpectedEof => "EOF".into(),
        None => e.to_string(),
    }
}

/// client-go's error for a non-2xx answer: the message of a Status body, else the generic
/// text for the code (`newUnstructuredResponseError`).
fn status_error(code: u16, body: &[u8], text_plain: bool) -> String {
    if let Ok(v) = serde_json::from_slice::<Value>(body)
        && v.get("kind").and_then(Value::as_str) == Some("Status")
    {
        let msg = v.get("message").and_then(Value::as_str).unwrap_or("");
        if !msg.is_empty() {
            return msg.to_string();
        }
    }
    let server_message = if text_plain && !body.is_empty() {
        String::from_utf8_lossy(&body[..body.len().min(1024)])
            .trim()
            .to_string()
    } else {
        "unknown".to_string()
    };
    match code {
        409 => "the server reported a conflict".into(),
        404 => "the server could not find the requested resource".into(),
        400 => "the server rejected our request for an unknown reason".into(),
        401 => "the server has asked for the client to provide credentials".into(),
        403 => server_message,
        405 => "the server does not allow this method on the requested resource".into(),
        406 => {
            "the server was unable to respond with a content type that the client supports".into()
        }
        415 => "the server was unable to handle the media type of the request".into(),
        422 => "the server rejected our request due to an error in our request".into(),
        429 => {
            "the server has received too many requests and has asked us to try again later".into()
        }
        500.. => format!(
            "an error on the server ({}) has prevented the request from succeeding",
            crate::error::go_quote(&server_message)
        ),
        _ => format!(
            "the server responded with the status code {code} but did not return more information"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_information_never_reaches_the_host_or_errors() {
        assert_eq!(
            redacted("https://user:pw@h.example:8443/p?q"),
            "https://user:xxxxx@h.example:8443/p?q"
        );
        assert_eq!(redacted("https://tok@h/"), "https://tok@h/");
        assert_eq!(redacted("https://h/a@b"), "https://h/a@b");
        let storage = Storage::new(100);
        let cc = serde_json::json!({"url": "https://user:pw@h.example:8443/p"});
        let Ok(endpoint) = resolve(&storage, &cc, 10) else {
            panic!("resolves");
        };
        assert_eq!(endpoint.authority, "h.example:8443");
        assert!(!endpoint.shown.contains("pw"), "{}", endpoint.shown);
        let cc = serde_json::json!({"url": "http://user:pw@h.example/"});
        let Err(e) = resolve(&storage, &cc, 10) else {
            panic!("refused");
        };
        assert!(!e.contains(":pw@"), "{e}");
    }
}
