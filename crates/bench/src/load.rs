//! The parent's side of the embedded server: creating the pods, applying the updates, and
//! recording the list pages and the watch stream for replay.

use crate::BenchError;
use crate::pods;
use bytes::Bytes;
use futures::StreamExt;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// A plain-HTTP client for the embedded server (no gzip, no decoding of responses).
#[derive(Clone)]
pub(crate) struct Http {
    client: Client<HttpConnector, Full<Bytes>>,
    base: String,
}

impl Http {
    pub(crate) fn new(base: &str) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        Self {
            client: Client::builder(TokioExecutor::new())
                .pool_max_idle_per_host(256)
                .build(connector),
            base: base.trim_end_matches('/').to_string(),
        }
    }

    async fn send(
        &self,
        method: http::Method,
        path: &str,
        content_type: &str,
        body: Bytes,
    ) -> Result<(http::StatusCode, Bytes), BenchError> {
        let req = http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header(http::header::CONTENT_TYPE, content_type)
            .header(http::header::ACCEPT, "application/json")
            .body(Full::new(body))
            .map_err(|e| BenchError::Setup(format!("request {path}: {e}")))?;
        let resp = self
            .client
            .request(req)
            .await
            .map_err(|e| BenchError::Setup(format!("request {path}: {e}")))?;
        let status = resp.status();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| BenchError::Setup(format!("response {path}: {e}")))?
            .to_bytes();
        Ok((status, body))
    }

    async fn expect(
        &self,
        method: http::Method,
        path: &str,
        content_type: &str,
        body: Bytes,
    ) -> Result<Bytes, BenchError> {
        let (status, body) = self.send(method.clone(), path, content_type, body).await?;
        if !status.is_success() {
            return Err(BenchError::Setup(format!(
                "{method} {path}: {status}: {}",
                String::from_utf8_lossy(&body[..body.len().min(500)])
            )));
        }
        Ok(body)
    }

    pub(crate) async fn post_json(
        &self,
        path: &str,
        value: &serde_json::Value,
    ) -> Result<Bytes, BenchError> {
        let body = serde_json::to_vec(value)
            .map_err(|e| BenchError::Setup(format!("encode {path}: {e}")))?;
        self.expect(
            http::Method::POST,
            path,
            "application/json",
            Bytes::from(body),
        )
        .await
    }

    pub(crate) async fn get(&self, path: &str) -> Result<Bytes, BenchError> {
        self.expect(http::Method::GET, path, "application/json", Bytes::new())
            .await
    }

    /// Starts a watch and returns its body as a stream of chunks.
    async fn watch(
        &self,
        path: &str,
    ) -> Result<impl futures::Stream<Item = Result<Bytes, BenchError>> + use<>, BenchError> {
        let req = http::Request::get(format!("{}{path}", self.base))
            .header(http::header::ACCEPT, "application/json")
            .body(Full::new(Bytes::new()))
            .map_err(|e| BenchError::Setup(format!("watch {path}: {e}")))?;
        let resp = self
            .client
            .request(req)
            .await
            .map_err(|e| BenchError::Setup(format!("watch {path}: {e}")))?;
        if !resp.status().is_success() {
            return Err(BenchError::Setup(format!(
                "watch {path}: {}",
                resp.status()
            )));
        }
        Ok(http_body_util::BodyDataStream::new(resp.into_body())
            .map(|r| r.map_err(|e| BenchError::Setup(format!("watch body: {e}")))))
    }
}

/// Creates the namespace, the owning ReplicaSet and `n` pods, `concurrency` at a time.
pub(crate) async fn create_pods(
    http: &Http,
    namespace: &str,
    n: usize,
    concurrency: usize,
) -> Result<(), BenchError> {
    http.post_json(
        "/api/v1/namespaces",
        &serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
    )
    .await?;
    let rs = http
        .post_json(
            &format!("/apis/apps/v1/namespaces/{namespace}/replicasets"),
            &pods::owner_replicaset(namespace),
        )
        .await?;
    let rs: serde_json::Value = serde_json::from_slice(&rs)
        .map_err(|e| BenchError::Setup(format!("replicaset response: {e}")))?;
    let uid = rs["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let next = Arc::new(AtomicUsize::new(0));
    let path = format!("/api/v1/namespaces/{namespace}/pods");
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..concurrency.max(1) {
        let (http, next, path, uid, ns) = (
            http.clone(),
            next.clone(),
            path.clone(),
            uid.clone(),
            namespace.to_string(),
        );
        tasks.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    return Ok::<(), BenchError>(());
                }
                http.post_json(&path, &pods::pod(&ns, i, &uid)).await?;
            }
        });
    }
    join_all(tasks).await
}

async fn join_all(
    mut tasks: tokio::task::JoinSet<Result<(), BenchError>>,
) -> Result<(), BenchError> {
    while let Some(r) = tasks.join_next().await {
        r.map_err(|e| BenchError::Setup(format!("task failed: {e}")))??;
    }
    Ok(())
}

/// Applies updates `first..first + count` (update `k` patches pod `k % pods` and sets its
/// generation label to `k / pods + 1`), `concurrency` at a time.
pub(crate) async fn apply_updates(
    http: &Http,
    namespace: &str,
    pods: usize,
    first: usize,
    count: usize,
    concurrency: usize,
) -> Result<(), BenchError> {
    let next = Arc::new(AtomicUsize::new(first));
    let end = first + count;
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..concurrency.max(1) {
        let (http, next, ns) = (http.clone(), next.clone(), namespace.to_string());
        tasks.spawn(async move {
            loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                if k >= end {
                    return Ok::<(), BenchError>(());
                }
                let path = format!("/api/v1/namespaces/{ns}/pods/{}", pods::pod_name(k % pods));
                let body = Bytes::from(pods::patch(k, k / pods + 1));
                http.expect(
                    http::Method::PATCH,
                    &path,
                    "application/merge-patch+json",
                    body,
                )
                .await?;
            }
        });
    }
    join_all(tasks).await
}

/// A recorded initial list and watch stream, served byte for byte to every replay child.
#[derive(Clone, Debug, Default)]
pub(crate) struct Recording {
    /// List pages by the continue token that asks for them ("" for the first page).
    pub pages: HashMap<String, Bytes>,
    /// The watch stream from the list's resourceVersion, as received (chunk boundaries
    /// included), cut right after the last update event.
    pub watch: Vec<Bytes>,
    /// Objects in the list.
    pub objects: usize,
    /// Total bytes of the list pages.
    pub list_bytes: usize,
    /// Total bytes of the watch stream.
    pub watch_bytes: usize,
}

#[derive(serde::Deserialize)]
struct PageHead {
    metadata: PageMeta,
    items: Vec<serde::de::IgnoredAny>,
}

#[derive(serde::Deserialize)]
struct PageMeta {
    #[serde(default, rename = "continue")]
    continue_: Option<String>,
    #[serde(default, rename = "resourceVersion")]
    resource_version: Option<String>,
}

/// Counts complete MODIFIED events in a newline-delimited watch stream.
#[derive(Default)]
struct EventCounter {
    head: Vec<u8>,
    modified: usize,
}

impl EventCounter {
    /// Feeds one chunk; returns the offset just past the `target`-th MODIFIED event's
    /// newline if this chunk completes it.
    fn feed(&mut self, chunk: &[u8], target: usize) -> Option<usize> {
        let mut pos = 0;
        while pos < chunk.len() {
            match chunk[pos..].iter().position(|b| *b == b'\n') {
                Some(nl) => {
                    let take = nl.min(48usize.saturating_sub(self.head.len()));
                    self.head.extend_from_slice(&chunk[pos..pos + take]);
                    // The server writes the type first: `{"type":"MODIFIED","object":...}`.
                    let is_modified = self.head.starts_with(b"{\"type\":\"MODIFIED\"");
                    self.head.clear();
                    pos += nl + 1;
                    if is_modified {
                        self.modified += 1;
                        if self.modified == target {
                            return Some(pos);
                        }
                    }
                }
                None => {
                    let rest = &chunk[pos..];
                    let take = rest.len().min(48usize.saturating_sub(self.head.len()));
                    self.head.extend_from_slice(&rest[..take]);
                    pos = chunk.len();
                }
            }
        }
        None
    }
}

/// Lists the pods page by page (recording the pages), then watches from the list's
/// resourceVersion while applying `updates` updates (starting at update 0), and records
/// the watch stream up to the last update event.
pub(crate) async fn record(
    http: &Http,
    namespace: &str,
    pods: usize,
    updates: usize,
    page_size: u32,
    concurrency: usize,
    timeout: Duration,
) -> Result<Recording, BenchError> {
    let base = format!("/api/v1/namespaces/{namespace}/pods");
    let mut rec = Recording::default();
    let mut token = String::new();
    let resource_version = loop {
        let mut path = format!("{base}?limit={page_size}");
        if !token.is_empty() {
            path.push_str("&continue=");
            path.extend(form_urlencoded::byte_serialize(token.as_bytes()));
        }
        let body = http.get(&path).await?;
        let head: PageHead = serde_json::from_slice(&body)
            .map_err(|e| BenchError::Setup(format!("list page: {e}")))?;
        rec.objects += head.items.len();
        rec.list_bytes += body.len();
        rec.pages.insert(std::mem::take(&mut token), body);
        match head.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(c) => token = c,
            None => break head.metadata.resource_version.unwrap_or_default(),
        }
    };
    if rec.objects != pods {
        return Err(BenchError::Setup(format!(
            "listed {} pods, expected {pods}",
            rec.objects
        )));
    }
    let mut stream = Box::pin(
        http.watch(&format!(
            "{base}?watch=true&resourceVersion={resource_version}&allowWatchBookmarks=true&timeoutSeconds=3600"
        ))
        .await?,
    );
    let recorder = async {
        let mut counter = EventCounter::default();
        let mut chunks = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk?;
            if let Some(end) = counter.feed(&chunk, updates) {
                chunks.push(chunk.slice(..end));
                return Ok(chunks);
            }
            chunks.push(chunk);
        }
        Err(BenchError::Setup(format!(
            "watch ended after {} of {updates} update events",
            counter.modified
        )))
    };
    let load = apply_updates(http, namespace, pods, 0, updates, concurrency);
    let (chunks, ()) = tokio::time::timeout(timeout, async {
        if updates == 0 {
            return Ok((Vec::new(), ()));
        }
        tokio::try_join!(recorder, load)
    })
    .await
    .map_err(|_| BenchError::Setup(format!("recording did not finish in {timeout:?}")))??;
    rec.watch_bytes = chunks.iter().map(Bytes::len).sum();
    rec.watch = chunks;
    Ok(rec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_modified_events_across_chunks() {
        let stream = concat!(
            "{\"type\":\"MODIFIED\",\"object\":{\"a\":1}}\n",
            "{\"type\":\"BOOKMARK\",\"object\":{\"b\":\"MODIFIED\"}}\n",
            "{\"type\":\"MODIFIED\",\"object\":{\"a\":2}}\n",
            "{\"type\":\"MODIFIED\",\"object\":{\"a\":3}}\n",
        )
        .as_bytes();
        for size in [1, 3, 7, 40, 1000] {
            let mut c = EventCounter::default();
            let mut total = 0;
            let mut found = None;
            for chunk in stream.chunks(size) {
                if let Some(end) = c.feed(chunk, 2) {
                    found = Some(total + end);
                    break;
                }
                total += chunk.len();
            }
            let cut = found.expect("second update found");
            assert!(stream[..cut].ends_with(b"{\"a\":2}}\n"), "size {size}");
        }
    }
}
