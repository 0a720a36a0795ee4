//! Pod I/O: logs, exec, attach, port-forward, eviction, and proxying to pods, services
//! and nodes.
//!
//! All of it goes through the client's transport (auth, proxies, TLS, rate limiting).
//! exec, attach and port-forward open a WebSocket with an HTTP/1.1 upgrade on a
//! connection of their own.
//!
//! ```no_run
//! # async fn run(client: kubewright_client::Client) -> Result<(), kubewright_client::Error> {
//! use k8s_openapi::api::core::v1::Pod;
//! use kubewright_client::Api;
//! use kubewright_client::pod::{AttachParams, LogParams};
//! use tokio::io::AsyncReadExt;
//!
//! let pods: Api<Pod> = Api::namespaced(client, "default");
//! let tail = pods.logs("web-0", &LogParams { tail_lines: Some(10), ..Default::default() }).await?;
//! print!("{tail}");
//!
//! let mut p = pods.exec("web-0", ["sh", "-c", "echo hi"], &AttachParams::default()).await?;
//! let mut out = String::new();
//! if let Some(mut stdout) = p.stdout() {
//!     stdout.read_to_string(&mut out).await.ok();
//! }
//! assert!(p.join().await?.success());
//! # Ok(()) }
//! ```

mod attach;
mod portforward;

pub use attach::{AttachParams, AttachedProcess, ExitStatus, TerminalSize};
pub use portforward::{LocalForward, Portforwarder};

use crate::api::Api;
use crate::error::{Error, Result};
use bytes::Bytes;
use futures::{Stream, StreamExt};
use http::{Request, StatusCode, header};
use k8s_openapi::api::core::v1::Pod;
use kubewright_core::{DeleteParams, PostParams, RequestError, Resource, Status};
use std::net::SocketAddr;

/// Options of a log request (`PodLogOptions`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LogParams {
    /// The container; required when the pod has more than one.
    pub container: Option<String>,
    /// Keep streaming as the container writes (only with [`Api::log_stream`]).
    pub follow: bool,
    /// The previous, terminated instance of the container.
    pub previous: bool,
    /// Only lines newer than this many seconds.
    pub since_seconds: Option<i64>,
    /// Only lines since this time (exclusive with `since_seconds`).
    pub since_time: Option<jiff::Timestamp>,
    /// Prefix each line with its RFC 3339 timestamp.
    pub timestamps: bool,
    /// Only the last this many lines.
    pub tail_lines: Option<i64>,
    /// Stop after this many bytes.
    pub limit_bytes: Option<i64>,
    /// Skip verifying the kubelet's serving certificate.
    pub insecure_skip_tls_verify_backend: bool,
}

impl LogParams {
    fn query_pairs(&self) -> Result<Vec<(&'static str, String)>> {
        if self.since_seconds.is_some() && self.since_time.is_some() {
            return Err(RequestError::Validation(
                "at most one of sinceSeconds and sinceTime may be set".into(),
            )
            .into());
        }
        for (name, v) in [
            ("sinceSeconds", self.since_seconds),
            ("limitBytes", self.limit_bytes),
        ] {
            if v.is_some_and(|v| v < 1) {
                return Err(
                    RequestError::Validation(format!("{name} must be greater than 0")).into(),
                );
            }
        }
        if self.tail_lines.is_some_and(|v| v < 0) {
            return Err(RequestError::Validation("tailLines must be 0 or more".into()).into());
        }
        let mut q = Vec::new();
        if let Some(c) = &self.container {
            q.push(("container", c.clone()));
        }
        for (key, on) in [
            ("follow", self.follow),
            ("previous", self.previous),
            ("timestamps", self.timestamps),
            (
                "insecureSkipTLSVerifyBackend",
                self.insecure_skip_tls_verify_backend,
            ),
        ] {
            if on {
                q.push((key, "true".into()));
            }
        }
        if let Some(s) = self.since_seconds {
            q.push(("sinceSeconds", s.to_string()));
        }
        if let Some(t) = self.since_time {
            q.push(("sinceTime", t.to_string()));
        }
        if let Some(n) = self.tail_lines {
            q.push(("tailLines", n.to_string()));
        }
        if let Some(n) = self.limit_bytes {
            q.push(("limitBytes", n.to_string()));
        }
        Ok(q)
    }
}

/// Options of an eviction.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EvictParams {
    /// Delete options for the pod (grace period, preconditions, dry-run).
    pub delete_options: Option<DeleteParams>,
    /// Options of the POST (dry-run, field manager).
    pub post_options: PostParams,
}

/// Log lines: splits a byte stream at `\n`, keeping a line cut across chunks whole.
/// The longest log line kept whole: a longer one is cut into lines of this length (the
/// kubelet writes container logs in lines of at most 16 KiB anyway).
pub const MAX_LOG_LINE: usize = 1 << 20;

fn lines<S>(chunks: S) -> impl Stream<Item = Result<String>> + Send
where
    S: Stream<Item = Result<Bytes>> + Send + Unpin,
{
    // `scanned`: bytes of `pending` known to hold no newline.
    futures::stream::unfold(
        (chunks, Vec::<u8>::new(), 0usize, false),
        |(mut chunks, mut pending, mut scanned, mut ended)| async move {
            loop {
                if let Some(pos) = memchr::memchr(b'\n', &pending[scanned..]) {
                    let mut line: Vec<u8> = pending.drain(..=scanned + pos).collect();
                    line.pop();
                    let text = String::from_utf8_lossy(&line).into_owned();
                    return Some((Ok(text), (chunks, pending, 0, ended)));
                }
                scanned = pending.len();
                if pending.len() >= MAX_LOG_LINE {
                    let line: Vec<u8> = pending.drain(..MAX_LOG_LINE).collect();
                    let text = String::from_utf8_lossy(&line).into_owned();
                    return Some((Ok(text), (chunks, pending, 0, ended)));
                }
                if ended {
                    if pending.is_empty() {
                        return None;
                    }
                    let text = String::from_utf8_lossy(&pending).into_owned();
                    pending.clear();
                    return Some((Ok(text), (chunks, pending, 0, ended)));
                }
                match chunks.next().await {
                    Some(Ok(b)) => pending.extend_from_slice(&b),
                    Some(Err(e)) => {
                        ended = true;
                        return Some((Err(e), (chunks, pending, scanned, ended)));
                    }
                    None => ended = true,
                }
            }
        },
    )
}

impl Api<Pod> {
    fn subresource_path(&self, name: &str, sub: &str, query: &[(&str, String)]) -> Result<String> {
        if name.is_empty() || name.contains('/') {
            return Err(
                RequestError::Validation(format!("invalid pod name {name:?} for {sub}")).into(),
            );
        }
        Ok(format!(
            "{}/{name}/{sub}{}",
            self.url_path(),
            crate::ws::query(query)
        ))
    }

    fn log_request(&self, name: &str, lp: &LogParams) -> Result<Request<Vec<u8>>> {
        let path = self.subresource_path(name, "log", &lp.query_pairs()?)?;
        Request::get(path)
            .header(header::ACCEPT, "text/plain, */*")
            .body(Vec::new())
            .map_err(|e| RequestError::Build(e).into())
    }

    /// A container's log as one string (`follow` is ignored: see
    /// [`log_stream`](Self::log_stream)).
    ///
    /// A pod that is not running on a node gets the server's 400, e.g. `pod "x" does
    /// not have a host assigned`.
    pub async fn logs(&self, name: &str, lp: &LogParams) -> Result<String> {
        let lp = LogParams {
            follow: false,
            ..lp.clone()
        };
        let req = self.log_request(name, &lp)?;
        self.client().request_text(req).await
    }

    /// A container's log as a stream of lines (without their `\n`); with `follow`, the
    /// stream goes on until the container ends or the stream is dropped.
    pub async fn log_stream(
        &self,
        name: &str,
        lp: &LogParams,
    ) -> Result<impl Stream<Item = Result<String>> + Send + Unpin + use<>> {
        let req = self.log_request(name, lp)?;
        let chunks = Box::pin(self.client().request_stream(req).await?);
        Ok(Box::pin(lines(chunks)))
    }

    /// Runs `command` in a container of the pod (`kubectl exec`).
    ///
    /// Returns once the server has accepted the connection; errors before that (no such
    /// pod or container, pod not running, forbidden) come back here as [`Error::Api`].
    pub async fn exec<I, T>(
        &self,
        name: &str,
        command: I,
        ap: &AttachParams,
    ) -> Result<AttachedProcess>
    where
        I: IntoIterator<Item = T>,
        T: Into<String>,
    {
        ap.validate()?;
        let mut query: Vec<(&str, String)> =
            command.into_iter().map(|c| ("command", c.into())).collect();
        if query.is_empty() {
            return Err(RequestError::Validation("exec needs a command".into()).into());
        }
        query.extend(ap.query_pairs());
        let path = self.subresource_path(name, "exec", &query)?;
        let (ws, protocol) =
            crate::ws::connect(self.client(), &path, &[attach::V5, attach::V4]).await?;
        Ok(AttachedProcess::start(ws, protocol, ap))
    }

    /// Attaches to the running process of a container (`kubectl attach`).
    pub async fn attach(&self, name: &str, ap: &AttachParams) -> Result<AttachedProcess> {
        ap.validate()?;
        let path = self.subresource_path(name, "attach", &ap.query_pairs())?;
        let (ws, protocol) =
            crate::ws::connect(self.client(), &path, &[attach::V5, attach::V4]).await?;
        Ok(AttachedProcess::start(ws, protocol, ap))
    }

    /// Opens connections to `ports` of the pod, one stream per port.
    pub async fn portforward(&self, name: &str, ports: &[u16]) -> Result<Portforwarder> {
        if ports.is_empty() || ports.len() > 127 {
            return Err(RequestError::Validation(format!(
                "port-forward needs 1 to 127 ports, got {}",
                ports.len()
            ))
            .into());
        }
        if ports.contains(&0) {
            return Err(RequestError::Validation("port 0 cannot be forwarded".into()).into());
        }
        let list = ports
            .iter()
            .map(u16::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let path = self.subresource_path(name, "portforward", &[("ports", list)])?;
        let (ws, _) = crate::ws::connect(self.client(), &path, &[portforward::V4]).await?;
        Ok(Portforwarder::start(ws, ports))
    }

    /// Listens on `bind` (port 0 picks a free one) and forwards each connection to
    /// `port` of the pod, as `kubectl port-forward` does.
    pub async fn forward_local(
        &self,
        name: &str,
        port: u16,
        bind: SocketAddr,
    ) -> Result<LocalForward> {
        self.subresource_path(name, "portforward", &[])?;
        LocalForward::start(self.clone(), name.to_string(), port, bind).await
    }

    /// Evicts the pod (policy/v1 `Eviction`): deletes it unless that would violate a
    /// PodDisruptionBudget, in which case the answer is [`Error::EvictionBlocked`].
    pub async fn evict(&self, name: &str, ep: &EvictParams) -> Result<Status> {
        let mut body = serde_json::json!({
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": { "name": name },
        });
        if let Some(ns) = self.namespace() {
            body["metadata"]["namespace"] = ns.into();
        }
        if let Some(d) = &ep.delete_options {
            body["deleteOptions"] = serde_json::to_value(d).map_err(RequestError::Serialize)?;
        }
        let path = self.subresource_path(name, "eviction", &ep.post_options.query_pairs())?;
        let req = Request::post(path)
            .header(header::CONTENT_TYPE, "application/json")
            .body(serde_json::to_vec(&body).map_err(RequestError::Serialize)?)
            .map_err(RequestError::Build)?;
        match self.client().request::<Status>(req).await {
            Err(Error::Api(s)) if is_disruption_budget(&s) => Err(Error::EvictionBlocked(s)),
            other => other,
        }
    }

    /// Binds a pod to a node (`pods/binding`), as a scheduler does: the server sets
    /// `spec.nodeName`, copies `annotations` onto the pod and marks it `PodScheduled`.
    /// A pod already on a node is a 409 Conflict.
    ///
    /// ```no_run
    /// # async fn run(pods: kubewright_client::Api<k8s_openapi::api::core::v1::Pod>) -> Result<(), kubewright_client::Error> {
    /// pods.bind("web-0", "node-1", &Default::default(), &Default::default()).await?;
    /// # Ok(()) }
    /// ```
    pub async fn bind(
        &self,
        name: &str,
        node: &str,
        annotations: &std::collections::BTreeMap<String, String>,
        pp: &PostParams,
    ) -> Result<Status> {
        let mut body = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": { "name": name },
            "target": { "apiVersion": "v1", "kind": "Node", "name": node },
        });
        if let Some(ns) = self.namespace() {
            body["metadata"]["namespace"] = ns.into();
        }
        if !annotations.is_empty() {
            body["metadata"]["annotations"] =
                serde_json::to_value(annotations).map_err(RequestError::Serialize)?;
        }
        let path = self.subresource_path(name, "binding", &pp.query_pairs())?;
        let req = Request::post(path)
            .header(header::CONTENT_TYPE, "application/json")
            .body(serde_json::to_vec(&body).map_err(RequestError::Serialize)?)
            .map_err(RequestError::Build)?;
        self.client().request::<Status>(req).await
    }
}

/// A 429 whose cause is a PodDisruptionBudget.
fn is_disruption_budget(s: &Status) -> bool {
    s.code == 429
        && s.details
            .as_ref()
            .is_some_and(|d| d.causes.iter().any(|c| c.reason == "DisruptionBudget"))
}

impl<K: Resource> Api<K> {
    /// Sends `req` through the API server's proxy to the object `name` (a pod, service
    /// or node; `name` may carry a port or scheme: `web-0:8080`, `https:web-0:8443`). The
    /// request's path and query are appended after `…/{name}/proxy`. Returns the status
    /// and body; an error status of the proxy itself becomes [`Error::Api`].
    pub async fn proxy(&self, name: &str, req: Request<Vec<u8>>) -> Result<(StatusCode, Bytes)> {
        if name.is_empty() || name.contains('/') {
            return Err(RequestError::Validation(format!("invalid proxy target {name:?}")).into());
        }
        let (mut parts, body) = req.into_parts();
        let tail = parts
            .uri
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/");
        let tail = if tail.starts_with('/') {
            tail.to_string()
        } else {
            format!("/{tail}")
        };
        parts.uri = format!("{}/{name}/proxy{tail}", self.url_path())
            .parse()
            .map_err(|e: http::uri::InvalidUri| RequestError::Validation(e.to_string()))?;
        self.client()
            .request_bytes(Request::from_parts(parts, body))
            .await
    }

    /// `GET` `path` through the API server's proxy to `name`; see [`proxy`](Self::proxy).
    pub async fn proxy_get(&self, name: &str, path: &str) -> Result<Bytes> {
        let path = if path.starts_with('/') {
            path.to_string()
        } else {
            format!("/{path}")
        };
        let req = Request::get(path)
            .body(Vec::new())
            .map_err(RequestError::Build)?;
        Ok(self.proxy(name, req).await?.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_line_without_end_is_cut_at_the_limit() {
        let big = vec![b'x'; MAX_LOG_LINE * 2 + 10];
        let chunks = futures::stream::iter(
            big.chunks(64 * 1024)
                .map(|c| Ok(Bytes::copy_from_slice(c)))
                .chain([Ok(Bytes::from_static(b"\nnext\n"))])
                .collect::<Vec<_>>(),
        );
        let got: Vec<String> = lines(chunks).map(|l| l.unwrap_or_default()).collect().await;
        let lens: Vec<usize> = got.iter().map(String::len).collect();
        assert_eq!(lens, [MAX_LOG_LINE, MAX_LOG_LINE, 10, 4]);
        assert_eq!(got[3], "next");
    }

    #[tokio::test]
    async fn lines_across_chunks() {
        let chunks = futures::stream::iter(
            ["a\nb", "c\n", "", "d\ne"]
                .into_iter()
                .map(|s| Ok(Bytes::from(s))),
        );
        let got: Vec<String> = lines(chunks).map(|l| l.unwrap_or_default()).collect().await;
        assert_eq!(got, ["a", "bc", "d", "e"]);
    }

    #[test]
    fn log_query() {
        let lp = LogParams {
            container: Some("app".into()),
            follow: true,
            tail_lines: Some(5),
            timestamps: true,
            ..Default::default()
        };
        let q = lp.query_pairs().unwrap_or_default();
        assert_eq!(
            q,
            [
                ("container", "app".to_string()),
                ("follow", "true".into()),
                ("timestamps", "true".into()),
                ("tailLines", "5".into())
            ]
        );
        let both = LogParams {
            since_seconds: Some(1),
            since_time: Some(jiff::Timestamp::UNIX_EPOCH),
            ..Default::default()
        };
        assert!(both.query_pairs().is_err());
        let bad = LogParams {
            limit_bytes: Some(0),
            ..Default::default()
        };
        assert!(bad.query_pairs().is_err());
    }

    #[test]
    fn disruption_budget_detection() {
        let s: Status = serde_json::from_str(r#"{"kind":"Status","status":"Failure","message":"Cannot evict pod as it would violate the pod's disruption budget.","reason":"TooManyRequests","details":{"causes":[{"reason":"DisruptionBudget","message":"The disruption budget pdb needs 2 healthy pods and has 2 currently"}]},"code":429}"#).unwrap_or_default();
        assert!(is_disruption_budget(&s));
        let plain = Status::from_http(429, "slow down");
        assert!(!is_disruption_budget(&plain));
    }
}
