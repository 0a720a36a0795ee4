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

/// A plain-HTTP client for the embedded server (no gzip, no decoding of responses), or a
/// kubewright client (rate limiter off) for a real cluster.
#[derive(Clone)]
pub(crate) struct Http {
    client: Client<HttpConnector, Full<Bytes>>,
    base: String,
    kube: Option<kubewright_client::Client>,
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
            kube: None,
        }
    }

    /// The cluster of a kubeconfig's current context, without client-side rate limits.
    pub(crate) fn kube(kubeconfig: &std::path::Path) -> Result<Self, BenchError> {
        let bad = |e: &dyn std::fmt::Display| {
            BenchError::Setup(format!("kubeconfig {}: {e}", kubeconfig.display()))
        };
        let kc =
            kubewright_client::config::Kubeconfig::read_from(kubeconfig).map_err(|e| bad(&e))?;
        let mut config = kubewright_client::Config::from_custom_kubeconfig(kc, &Default::default())
            .map_err(|e| bad(&e))?;
        config.qps = 0.0;
        let client = kubewright_client::Client::new(config).map_err(|e| bad(&e))?;
        let mut http = Self::new("http://unused.invalid");
        http.kube = Some(client);
        Ok(http)
    }

    pub(crate) async fn delete(&self, path: &str) -> Result<Bytes, BenchError> {
        self.expect(http::Method::DELETE, path, "application/json", Bytes::new())
            .await
    }

    async fn send(
        &self,
        method: http::Method,
        path: &str,
        content_type: &str,
        body: Bytes,
    ) -> Result<(http::StatusCode, Bytes), BenchError> {
        if let Some(kube) = &self.kube {
            let req = http::Request::builder()
                .method(method)
                .uri(path)
                .header(http::header::CONTENT_TYPE, content_type)
                .header(http::header::ACCEPT, "application/json")
                .body(body.to_vec())
                .map_err(|e| BenchError::Setup(format!("request {path}: {e}")))?;
            return match kube.request_bytes(req).await {
                Ok(r) => Ok(r),
                Err(kubewright_client::Error::Api(s)) => Ok((
                    http::StatusCode::from_u16(s.code).unwrap_or(http::StatusCode::BAD_GATEWAY),
                    Bytes::from(s.message.clone()),
                )),
                Err(e) => Err(BenchError::Setup(format!("request {path}: {e}"))),
            };
        }
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
    // The pods' Nodes (an existing one is left as it is: several runs may share a server).
    for i in 0..pods::NODES.min(n) {
        let node = serde_json::to_vec(&pods::node(i))
            .map_err(|e| BenchError::Setup(format!("encode a node: {e}")))?;
        let (status, body) = http
            .send(
                http::Method::POST,
                "/api/v1/nodes",
                "application/json",
                Bytes::from(node),
            )
            .await?;
        if !status.is_success() && status != http::StatusCode::CONFLICT {
            return Err(BenchError::Setup(format!(
                "POST /api/v1/nodes: {status}: {}",
                String::from_utf8_lossy(&body)
            )));
        }
    }
    // The pods run as this service account, which the ServiceAccount admission plugin
    // checks.
    http.post_json(
        &format!("/api/v1/namespaces/{namespace}/serviceaccounts"),
        &serde_json::json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "web"}}),
    )
    .await?;
    let owner = http
        .post_json(
            &format!("/api/v1/namespaces/{namespace}/configmaps"),
            &pods::owner(namespace),
        )
        .await?;
    let owner: serde_json::Value = serde_json::from_slice(&owner)
        .map_err(|e| BenchError::Setup(format!("owner response: {e}")))?;
    let uid = owner["metadata"]["uid"]
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

/// Creates the namespace and `n` pods on a real cluster, then sets their status (which a
/// create ignores). Unlike [`create_pods`] they have no node and no owner, so that
/// kube-controller-manager (pod GC, the ReplicaSet controller) leaves them alone.
pub(crate) async fn create_cluster_pods(
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
    // The pods run as this service account, which the ServiceAccount admission plugin
    // checks.
    http.post_json(
        &format!("/api/v1/namespaces/{namespace}/serviceaccounts"),
        &serde_json::json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "web"}}),
    )
    .await?;
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..concurrency.max(1) {
        let (http, next, ns) = (http.clone(), next.clone(), namespace.to_string());
        tasks.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    return Ok::<(), BenchError>(());
                }
                let mut pod = pods::pod(&ns, i, "");
                if let Some(meta) = pod["metadata"].as_object_mut() {
                    meta.remove("ownerReferences");
                }
                if let Some(spec) = pod["spec"].as_object_mut() {
                    spec.remove("nodeName");
                }
                let status = pod["status"].take();
                http.post_json(&format!("/api/v1/namespaces/{ns}/pods"), &pod)
                    .await?;
                let body = serde_json::to_vec(&serde_json::json!({"status": status}))
                    .map_err(|e| BenchError::Setup(format!("status patch: {e}")))?;
                http.expect(
                    http::Method::PATCH,
                    &format!("/api/v1/namespaces/{ns}/pods/{}/status", pods::pod_name(i)),
                    "application/merge-patch+json",
                    Bytes::from(body),
                )
                .await?;
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
    /// The same state as one unpaged list: what kube-apiserver's watch cache answers to
    /// `resourceVersion=0` (client-go's and kube-rs's first list), whatever the `limit`.
    pub full_list: Bytes,
    /// The watch stream from the list's resourceVersion, as received (chunk boundaries
    /// included), cut right after the last update event.
    pub watch: Vec<Bytes>,
    /// Objects in the list.
    pub objects: usize,
    /// Total bytes of the list pages.
    pub list_bytes: usize,
    /// Total bytes of the watch stream.
    pub watch_bytes: usize,
    /// Update events recorded from the server (the rest were synthesized).
    pub server_events: usize,
    /// Chunks the server's part of the stream arrived in.
    pub server_chunks: usize,
    /// How many of those end at an event boundary.
    pub server_aligned_chunks: usize,
}

/// A [`Recording`] in Kubernetes protobuf, for clients that ask for it: the same list
/// pages, full list and watch events, encoded as kube-apiserver encodes them.
#[derive(Clone, Debug, Default)]
pub(crate) struct ProtoRecording {
    pub pages: HashMap<String, Bytes>,
    pub full_list: Bytes,
    /// Length-prefixed watch frames; chunk `i` holds the events whose JSON line ends in
    /// chunk `i` of the JSON stream (empty chunks left out), so both pace alike.
    pub watch: Vec<Bytes>,
}

fn to_protobuf(json: &[u8]) -> Result<Vec<u8>, BenchError> {
    let v: serde_json::Value = serde_json::from_slice(json)
        .map_err(|e| BenchError::Setup(format!("recorded body is not JSON: {e}")))?;
    kubewright_proto::encode(&v)
        .map_err(|e| BenchError::Setup(format!("recorded body to protobuf: {e}")))
}

impl Recording {
    /// The same recording in protobuf.
    pub(crate) fn protobuf(&self) -> Result<ProtoRecording, BenchError> {
        let mut pages = HashMap::with_capacity(self.pages.len());
        for (token, page) in &self.pages {
            pages.insert(token.clone(), Bytes::from(to_protobuf(page)?));
        }
        let full_list = Bytes::from(to_protobuf(&self.full_list)?);
        let mut watch = Vec::with_capacity(self.watch.len());
        let mut line = Vec::new();
        for chunk in &self.watch {
            let mut frames = Vec::new();
            let mut rest = &chunk[..];
            while let Some(end) = rest.iter().position(|b| *b == b'\n') {
                line.extend_from_slice(&rest[..end]);
                rest = &rest[end + 1..];
                if line.iter().all(u8::is_ascii_whitespace) {
                    line.clear();
                    continue;
                }
                let ev: serde_json::Value = serde_json::from_slice(&line)
                    .map_err(|e| BenchError::Setup(format!("recorded event is not JSON: {e}")))?;
                line.clear();
                let kind = ev["type"].as_str().unwrap_or("");
                let object = kubewright_proto::encode(&ev["object"])
                    .map_err(|e| BenchError::Setup(format!("recorded event to protobuf: {e}")))?;
                frames.extend_from_slice(&kubewright_proto::watch::encode_frame(kind, &object));
            }
            line.extend_from_slice(rest);
            if !frames.is_empty() {
                watch.push(Bytes::from(frames));
            }
        }
        Ok(ProtoRecording {
            pages,
            full_list,
            watch,
        })
    }

    /// Re-frames the watch stream into chunks of `size` bytes.
    pub(crate) fn rechunk(&mut self, size: usize) {
        let mut all = bytes::BytesMut::with_capacity(self.watch_bytes);
        for c in self.watch.drain(..) {
            all.extend_from_slice(&c);
        }
        let mut all = all.freeze();
        while !all.is_empty() {
            self.watch.push(all.split_to(size.max(1).min(all.len())));
        }
    }
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
/// resourceVersion while applying the first `from_server` updates through the server, and
/// records the watch stream up to the last of them. Updates `from_server..updates` are
/// then synthesized from the listed pods and the server's own first update event (see
/// [`synthesize`]), so a large recording does not wait for the server's patch throughput.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn record(
    http: &Http,
    namespace: &str,
    pods: usize,
    updates: usize,
    from_server: usize,
    page_size: u32,
    concurrency: usize,
    timeout: Duration,
) -> Result<Recording, BenchError> {
    let from_server = from_server.min(updates);
    let base = format!("/api/v1/namespaces/{namespace}/pods");
    let mut rec = Recording::default();
    let mut token = String::new();
    let mut pages_in_order = Vec::new();
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
        pages_in_order.push(body.clone());
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
    // Nothing writes between the pages and this list: the same state in one response.
    rec.full_list = http.get(&base).await?;
    let head: PageHead = serde_json::from_slice(&rec.full_list)
        .map_err(|e| BenchError::Setup(format!("full list: {e}")))?;
    if head.items.len() != pods
        || head.metadata.resource_version.as_deref() != Some(&resource_version)
    {
        return Err(BenchError::Setup(format!(
            "the unpaged list ({} pods at {:?}) differs from the paged one ({pods} at {resource_version})",
            head.items.len(),
            head.metadata.resource_version
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
            if let Some(end) = counter.feed(&chunk, from_server) {
                chunks.push(chunk.slice(..end));
                return Ok(chunks);
            }
            chunks.push(chunk);
        }
        Err(BenchError::Setup(format!(
            "watch ended after {} of {from_server} update events",
            counter.modified
        )))
    };
    let load = apply_updates(http, namespace, pods, 0, from_server, concurrency);
    let (mut chunks, ()) = tokio::time::timeout(timeout, async {
        if from_server == 0 {
            return Ok((Vec::new(), ()));
        }
        tokio::try_join!(recorder, load)
    })
    .await
    .map_err(|_| BenchError::Setup(format!("recording did not finish in {timeout:?}")))??;
    drop(stream);
    rec.server_events = from_server;
    rec.server_chunks = chunks.len();
    rec.server_aligned_chunks = chunks.iter().filter(|c| c.ends_with(b"\n")).count();
    if updates > from_server {
        // Frame the synthesized events like the server frames its own: whole events,
        // as many per chunk as the server put on average.
        let per_chunk = (from_server as f64 / chunks.len().max(1) as f64)
            .round()
            .max(1.0) as usize;
        let (events, ends) = synthesize(&pages_in_order, &chunks, pods, from_server, updates)?;
        let events = Bytes::from(events);
        let mut start = 0;
        for group in ends.chunks(per_chunk) {
            if let Some(&end) = group.last() {
                chunks.push(events.slice(start..end));
                start = end;
            }
        }
    }
    rec.watch_bytes = chunks.iter().map(Bytes::len).sum();
    rec.watch = chunks;
    Ok(rec)
}

/// Objects of the recorded list, in pod order.
fn listed_pods(pages: &[Bytes], pods: usize) -> Result<Vec<serde_json::Value>, BenchError> {
    #[derive(serde::Deserialize)]
    struct Page {
        items: Vec<serde_json::Value>,
    }
    let mut out = vec![serde_json::Value::Null; pods];
    for page in pages {
        let page: Page = serde_json::from_slice(page)
            .map_err(|e| BenchError::Setup(format!("list page: {e}")))?;
        for item in page.items {
            let index = item["metadata"]["name"]
                .as_str()
                .and_then(|n| n.rsplit('-').next())
                .and_then(|i| i.parse::<usize>().ok())
                .filter(|i| *i < pods)
                .ok_or_else(|| BenchError::Setup("unexpected pod in the list".into()))?;
            out[index] = item;
        }
    }
    Ok(out)
}

/// The MODIFIED events of the server's part of the stream, parsed.
fn server_events(chunks: &[Bytes]) -> Result<Vec<serde_json::Value>, BenchError> {
    let all: Vec<u8> = chunks.iter().flat_map(|c| c.iter().copied()).collect();
    let mut out = Vec::new();
    for line in all.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let ev: serde_json::Value = serde_json::from_slice(line)
            .map_err(|e| BenchError::Setup(format!("recorded event: {e}")))?;
        if ev["type"] == "MODIFIED" {
            out.push(ev);
        }
    }
    Ok(out)
}

/// The MODIFIED event of update `k` as the server renders it: pod `k % pods` as listed,
/// with the generation label and the annotation of [`pods::patch`], the `managedFields`
/// the server wrote for that pod's first patch, and the next resourceVersion.
fn synthetic_event(
    listed: &serde_json::Value,
    managed_fields: &serde_json::Value,
    k: usize,
    pods: usize,
    resource_version: u64,
) -> Result<Vec<u8>, BenchError> {
    let mut obj = listed.clone();
    // List items carry no apiVersion and kind (as kube-apiserver writes them); events do.
    if let Some(o) = obj.as_object_mut() {
        o.insert("apiVersion".into(), "v1".into());
        o.insert("kind".into(), "Pod".into());
    }
    let meta = obj
        .get_mut("metadata")
        .and_then(|m| m.as_object_mut())
        .ok_or_else(|| BenchError::Setup("listed pod without metadata".into()))?;
    let set = |meta: &mut serde_json::Map<String, serde_json::Value>,
               map: &str,
               key: &str,
               value: String| {
        if let Some(m) = meta
            .entry(map)
            .or_insert_with(|| serde_json::json!({}))
            .as_object_mut()
        {
            m.insert(key.to_string(), serde_json::Value::String(value));
        }
    };
    set(meta, "labels", pods::GEN_LABEL, (k / pods + 1).to_string());
    set(
        meta,
        "annotations",
        "kw-bench/last-update",
        format!("update-{k:08}"),
    );
    meta.insert("managedFields".into(), managed_fields.clone());
    meta.insert(
        "resourceVersion".into(),
        serde_json::Value::String(resource_version.to_string()),
    );
    let mut line = br#"{"type":"MODIFIED","object":"#.to_vec();
    serde_json::to_writer(&mut line, &obj)
        .map_err(|e| BenchError::Setup(format!("encode event: {e}")))?;
    line.extend_from_slice(b"}\n");
    Ok(line)
}

/// Where two JSON values first differ (a JSON pointer, and the two values there).
fn first_difference(a: &serde_json::Value, b: &serde_json::Value, at: String) -> String {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for k in x.keys().chain(y.keys()) {
                let (u, v) = (&x.get(k), &y.get(k));
                if u != v {
                    let (u, v) = (u.unwrap_or(&Value::Null), v.unwrap_or(&Value::Null));
                    return first_difference(u, v, format!("{at}/{k}"));
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (u, v)) in x.iter().zip(y).enumerate() {
                if u != v {
                    return first_difference(u, v, format!("{at}/{i}"));
                }
            }
        }
        _ => {}
    }
    format!("{at}: server {a}, synthesized {b}")
}

/// Synthesizes the events of updates `first..updates` (see [`synthetic_event`]), after
/// checking that the same synthesis reproduces the server's own events. Returns the
/// stream and the offset just past each event.
fn synthesize(
    pages: &[Bytes],
    server_chunks: &[Bytes],
    pods: usize,
    first: usize,
    updates: usize,
) -> Result<(Vec<u8>, Vec<usize>), BenchError> {
    let listed = listed_pods(pages, pods)?;
    let real = server_events(server_chunks)?;
    let template = real
        .first()
        .ok_or_else(|| BenchError::Setup("no server event to synthesize from".into()))?;
    let managed_fields = template["object"]["metadata"]["managedFields"].clone();
    let rv_of = |ev: &serde_json::Value| {
        ev["object"]["metadata"]["resourceVersion"]
            .as_str()
            .and_then(|v| v.parse::<u64>().ok())
    };
    let mut rv = real
        .iter()
        .filter_map(rv_of)
        .max()
        .ok_or_else(|| BenchError::Setup("server events without resourceVersion".into()))?;
    // The synthesis must reproduce the server's bytes (but for the managedFields
    // timestamps) for the server's own first updates (each pod's first patch).
    for ev in real.iter().take(64) {
        let Some(want_rv) = rv_of(ev) else { continue };
        let meta = &ev["object"]["metadata"];
        let name = meta["name"].as_str().unwrap_or("");
        let Some(i) = (0..pods).find(|i| pods::pod_name(*i) == name) else {
            continue;
        };
        let generation = meta["labels"][pods::GEN_LABEL]
            .as_str()
            .and_then(|g| g.parse::<usize>().ok())
            .unwrap_or(1);
        let k = (generation.max(1) - 1) * pods + i;
        let mut want = ev["object"].clone();
        let line = synthetic_event(&listed[i], &managed_fields, k, pods, want_rv)?;
        let mut got: serde_json::Value = serde_json::from_slice::<serde_json::Value>(&line)
            .map_err(|e| BenchError::Setup(format!("synthetic event: {e}")))?["object"]
            .take();
        for v in [&mut want, &mut got] {
            v["metadata"]["managedFields"] = serde_json::Value::Null;
            v["metadata"]["annotations"]["kw-bench/last-update"] = serde_json::Value::Null;
        }
        if want != got {
            return Err(BenchError::Setup(format!(
                "synthesized events differ from the server's (pod {name}, at {}); record every event with --events-from-server",
                first_difference(&want, &got, String::new())
            )));
        }
    }
    let mut out = Vec::with_capacity((updates - first) * (template.to_string().len() + 64));
    let mut ends = Vec::with_capacity(updates - first);
    for k in first..updates {
        rv += 1;
        out.extend_from_slice(&synthetic_event(
            &listed[k % pods],
            &managed_fields,
            k,
            pods,
            rv,
        )?);
        ends.push(out.len());
    }
    Ok((out, ends))
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
