//! Health probes in the Kubernetes format (`/healthz`, `/readyz`) and the small HTTP/1.1
//! server behind them and `/metrics`.
//!
//! A [`HealthChecks`] is a list of named checks. Its endpoint answers like the API
//! server's:
//!
//! * all pass: `200 ok` (with `?verbose`, one `[+]name ok` line per check, then
//!   `healthz check passed`);
//! * one fails: `500` with every check listed, `[-]name failed: reason withheld` for the
//!   failing ones, then `healthz check failed` (the reasons go to the log);
//! * `/<endpoint>/<check>` runs one check: `200 ok`, or `500 internal server error:
//!   <reason>`; an unknown check is `404`;
//! * `?exclude=<check>` (repeatable) skips checks.
//!
//! ```
//! use kubewright_runtime::health::HealthChecks;
//! let mut checks = HealthChecks::new("readyz");
//! checks.add("ping", || Ok(()));
//! checks.add("informer-sync", || Err("2 informers not synced".to_string()));
//! let (status, body) = checks.respond(None, None);
//! assert_eq!(status, 500);
//! assert_eq!(body, "[+]ping ok\n[-]informer-sync failed: reason withheld\nreadyz check failed\n");
//! assert_eq!(checks.respond(None, Some("exclude=informer-sync")), (200, "ok".to_string()));
//! ```

use bytes::Bytes;
use http::{Method, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

type CheckFn = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// Named health checks served under one endpoint; see the [module docs](self).
#[derive(Clone)]
pub struct HealthChecks {
    endpoint: String,
    checks: Vec<(String, CheckFn)>,
}

impl fmt::Debug for HealthChecks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HealthChecks")
            .field("endpoint", &self.endpoint)
            .field(
                "checks",
                &self.checks.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl HealthChecks {
    /// No checks, for `endpoint` (`healthz`, `readyz`, `livez`: used in the messages).
    pub fn new(endpoint: &str) -> Self {
        Self {
            endpoint: endpoint.trim_matches('/').to_string(),
            checks: Vec::new(),
        }
    }

    /// Adds a check; a later check with the same name replaces the earlier one.
    pub fn add(
        &mut self,
        name: &str,
        check: impl Fn() -> Result<(), String> + Send + Sync + 'static,
    ) {
        let check: CheckFn = Arc::new(check);
        match self.checks.iter_mut().find(|(n, _)| n == name) {
            Some(slot) => slot.1 = check,
            None => self.checks.push((name.to_string(), check)),
        }
    }

    /// The endpoint name.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The names of the checks, in order.
    pub fn names(&self) -> Vec<&str> {
        self.checks.iter().map(|(n, _)| n.as_str()).collect()
    }

    /// Runs every check; the failures with their reasons.
    pub fn failures(&self) -> Vec<(String, String)> {
        self.checks
            .iter()
            .filter_map(|(n, c)| c().err().map(|e| (n.clone(), e)))
            .collect()
    }

    /// The status code and body for a request: `check` is the sub-path (one check),
    /// `query` the raw query string (`verbose`, `exclude=<name>`).
    pub fn respond(&self, check: Option<&str>, query: Option<&str>) -> (u16, String) {
        let endpoint = &self.endpoint;
        if let Some(name) = check.filter(|c| !c.is_empty()) {
            return match self.checks.iter().find(|(n, _)| n == name) {
                None => (404, "404 page not found\n".to_string()),
                Some((_, c)) => match c() {
                    Ok(()) => (200, "ok".to_string()),
                    Err(e) => {
                        tracing::info!(endpoint = %endpoint, check = %name, reason = %e, "health check failed");
                        (500, format!("internal server error: {e}\n"))
                    }
                },
            };
        }
        let mut verbose = false;
        let mut excluded: Vec<String> = Vec::new();
        for (k, v) in form_pairs(query.unwrap_or("")) {
            match k.as_str() {
                "verbose" => verbose = true,
                "exclude" => excluded.push(v),
                _ => {}
            }
        }
        let mut lines = String::new();
        let mut failed = false;
        for (name, c) in &self.checks {
            if excluded.iter().any(|e| e == name) {
                lines.push_str(&format!("[+]{name} excluded: ok\n"));
                continue;
            }
            match c() {
                Ok(()) => lines.push_str(&format!("[+]{name} ok\n")),
                Err(e) => {
                    failed = true;
                    tracing::info!(endpoint = %endpoint, check = %name, reason = %e, "health check failed");
                    lines.push_str(&format!("[-]{name} failed: reason withheld\n"));
                }
            }
        }
        if failed {
            lines.push_str(&format!("{endpoint} check failed\n"));
            (500, lines)
        } else if verbose {
            lines.push_str(&format!("{endpoint} check passed\n"));
            (200, lines)
        } else {
            (200, "ok".to_string())
        }
    }
}

/// Splits `a=b&c` into pairs (no percent-decoding needed for check names).
fn form_pairs(query: &str) -> impl Iterator<Item = (String, String)> + '_ {
    query.split('&').filter(|s| !s.is_empty()).map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (k.to_string(), v.to_string())
    })
}

/// Serves `/healthz` (and `/healthz/<check>`) from `healthz` and `/readyz` (and
/// `/readyz/<check>`) from `readyz` on `listener` until `cancel` fires.
#[inline(never)]
#[allow(clippy::manual_async_fn, reason = "boxed where it is built")]
pub fn serve_health(
    listener: TcpListener,
    healthz: HealthChecks,
    readyz: HealthChecks,
    cancel: CancellationToken,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    // Boxed where it is built: an `async fn`'s body (and all it awaits) is otherwise
    // compiled again in every crate that awaits it.
    let boxed: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'static>> =
        Box::pin(serve_health_inner(listener, healthz, readyz, cancel));
    boxed
}

async fn serve_health_inner(
    listener: TcpListener,
    healthz: HealthChecks,
    readyz: HealthChecks,
    cancel: CancellationToken,
) {
    serve_http(listener, cancel, move |path, query| {
        for checks in [&healthz, &readyz] {
            let base = format!("/{}", checks.endpoint());
            let Some(rest) = path.strip_prefix(&base) else {
                continue;
            };
            let check = match rest {
                "" | "/" => None,
                r if r.starts_with('/') => Some(&r[1..]),
                _ => continue,
            };
            let (status, body) = checks.respond(check, query);
            return HttpResponse {
                status,
                content_type: "text/plain; charset=utf-8",
                body,
            };
        }
        HttpResponse::not_found()
    })
    .await;
}

/// A response of [`serve_http`].
pub(crate) struct HttpResponse {
    pub(crate) status: u16,
    pub(crate) content_type: &'static str,
    pub(crate) body: String,
}

impl HttpResponse {
    pub(crate) fn ok(content_type: &'static str, body: String) -> Self {
        Self {
            status: 200,
            content_type,
            body,
        }
    }
    pub(crate) fn not_found() -> Self {
        Self {
            status: 404,
            content_type: "text/plain; charset=utf-8",
            body: "404 page not found\n".to_string(),
        }
    }
}

/// How long open connections get to finish once the server is cancelled.
const CONNECTION_GRACE: Duration = Duration::from_secs(2);

/// A minimal HTTP/1.1 server: `GET`/`HEAD` requests go to `handler(path, query)`, other
/// methods get 405. Runs until `cancel` fires, then lets open connections finish their
/// current request (briefly).
pub(crate) async fn serve_http<F>(listener: TcpListener, cancel: CancellationToken, handler: F)
where
    F: Fn(&str, Option<&str>) -> HttpResponse + Send + Sync + 'static,
{
    let handler = Arc::new(handler);
    let mut connections = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            () = cancel.cancelled() => break,
            a = listener.accept() => a,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        let (stream, _peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // E.g. too many open files: do not spin.
                tracing::warn!(error = %e, "accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let handler = handler.clone();
        let cancel = cancel.clone();
        connections.spawn(async move {
            let service = service_fn(move |req: http::Request<Incoming>| {
                let response = respond(&*handler, req.method(), req.uri());
                async move { Ok::<_, Infallible>(response) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            let mut conn = std::pin::pin!(conn);
            tokio::select! {
                r = conn.as_mut() => {
                    if let Err(e) = r {
                        tracing::debug!(error = %e, "HTTP connection ended with an error");
                    }
                }
                () = cancel.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(CONNECTION_GRACE, conn).await;
                }
            }
        });
    }
    while connections.join_next().await.is_some() {}
}

fn respond<F>(handler: &F, method: &Method, uri: &http::Uri) -> Response<Full<Bytes>>
where
    F: Fn(&str, Option<&str>) -> HttpResponse,
{
    let (status, content_type, body) = if method == Method::GET || method == Method::HEAD {
        let r = handler(uri.path(), uri.query());
        (r.status, r.content_type, r.body)
    } else {
        (
            405,
            "text/plain; charset=utf-8",
            "405 method not allowed\n".to_string(),
        )
    };
    let body = if method == Method::HEAD {
        Bytes::new()
    } else {
        Bytes::from(body)
    };
    let mut response = Response::new(Full::new(body));
    *response.status_mut() =
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if let Ok(v) = header::HeaderValue::from_str(content_type) {
        response.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    response.headers_mut().insert(
        header::X_CONTENT_TYPE_OPTIONS,
        header::HeaderValue::from_static("nosniff"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checks() -> HealthChecks {
        let mut c = HealthChecks::new("healthz");
        c.add("ping", || Ok(()));
        c.add("leaderElection", || Err("renewal overdue".into()));
        c
    }

    #[test]
    fn kubernetes_format() {
        let c = checks();
        assert_eq!(
            c.respond(None, None),
            (
                500,
                "[+]ping ok\n[-]leaderElection failed: reason withheld\nhealthz check failed\n"
                    .to_string()
            )
        );
        assert_eq!(c.respond(Some("ping"), None), (200, "ok".to_string()));
        assert_eq!(
            c.respond(Some("leaderElection"), None),
            (500, "internal server error: renewal overdue\n".to_string())
        );
        assert_eq!(c.respond(Some("nope"), None).0, 404);
        assert_eq!(
            c.respond(None, Some("verbose&exclude=leaderElection")),
            (
                200,
                "[+]ping ok\n[+]leaderElection excluded: ok\nhealthz check passed\n".to_string()
            )
        );
    }

    #[test]
    fn replacing_a_check() {
        let mut c = checks();
        c.add("leaderElection", || Ok(()));
        assert_eq!(c.names(), vec!["ping", "leaderElection"]);
        assert_eq!(c.respond(None, None), (200, "ok".to_string()));
        assert!(c.failures().is_empty());
    }
}
