//! WATCH: initial events, resumption from a resourceVersion, selector transitions,
//! bookmarks, timeouts and 410 for versions past the history window.

use crate::error::ApiError;
use crate::http::api::{ApiServer, Target};
use crate::http::{self as h, Body, Format, Req};
use crate::registry::ResourceDef;
use crate::registry::filter;
use crate::registry::meta::partial_meta;
use crate::storage::{Event, EventType};
use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use kubewright_core::{FieldSelector, LabelSelector};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, mpsc};

struct WatchSpec {
    def: Arc<ResourceDef>,
    key: String,
    /// How the resource's objects are kept under another resource's key (events are
    /// converted to this resource's form before they are matched and sent).
    view: Option<&'static crate::storage::View>,
    /// The objects' `apiVersion` (names the rendering events share among watchers).
    api_version: String,
    namespace: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
    format: Format,
    bookmarks: bool,
    /// Objects are converted by the CRD's conversion webhook (one review per event).
    convert: bool,
}

impl WatchSpec {
    fn matches(&self, obj: &Value) -> bool {
        filter::matches(&self.def, obj, &self.labels, &self.fields)
    }
    fn in_scope(&self, ev: &Event) -> bool {
        ev.resource == self.key
            && self
                .namespace
                .as_deref()
                .is_none_or(|ns| ns == ev.namespace)
    }
}

/// Serves a watch request as a streaming response.
pub async fn serve_watch(srv: Arc<ApiServer>, req: Req, t: Target) -> Response<Body> {
    match start(srv, req, t) {
        Ok(r) => r,
        Err(e) => h::error_response(&e),
    }
}

fn start(srv: Arc<ApiServer>, req: Req, t: Target) -> Result<Response<Body>, ApiError> {
    let format = h::negotiate(&req, true)?;
    let format = match format {
        Format::PartialMetaList { protobuf } => Format::PartialMeta { protobuf },
        // Custom resources have no protobuf form: JSON (406 without it was answered before).
        Format::Protobuf { .. } if !t.def.protobuf() => Format::Json,
        f => f,
    };
    let ct = match &format {
        Format::Table => "application/json;as=Table;v=v1;g=meta.k8s.io",
        f if f.is_protobuf() => "application/vnd.kubernetes.protobuf;stream=watch",
        _ => "application/json",
    };
    let send_initial = req.q("sendInitialEvents").map(|v| v == "true");
    let rv_match = req.q("resourceVersionMatch").filter(|s| !s.is_empty());
    if send_initial.is_some() && rv_match != Some("NotOlderThan") {
        return Err(ApiError::invalid_msg(
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ));
    }
    if send_initial.is_none() && rv_match.is_some() {
        return Err(ApiError::invalid_msg(
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
        ));
    }
    let bookmarks = req.q_bool("allowWatchBookmarks");
    let labels = match req.q("labelSelector") {
        Some(s) => LabelSelector::parse(s)
            .map_err(|e| ApiError::bad_request(format!("unable to parse requirement: {e}")))?,
        None => LabelSelector::default(),
    };
    let mut fields = match req.q("fieldSelector") {
        Some(s) => FieldSelector::parse(s).map_err(|e| ApiError::bad_request(e.to_string()))?,
        None => FieldSelector::default(),
    };
    filter::check_field_selector(&t.def, &fields)?;
    if let Some(name) = &t.name {
        if let Some(other) = fields.required_value("metadata.name")
            && other != name
        {
            return Err(ApiError::bad_request(
                "fieldSelector metadata.name doesn't match requested name",
            ));
        }
        fields
            .requirements
            .push(kubewright_core::selector::FieldRequirement {
                field: "metadata.name".into(),
                value: name.clone(),
                negated: false,
            });
    }
    let rv: Option<u64> = match req.q("resourceVersion").filter(|s| !s.is_empty()) {
        Some(s) => Some(
            s.parse()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version: {s}")))?,
        ),
        None => None,
    };
    let timeout = match req.q("timeoutSeconds") {
        Some(s) if !s.is_empty() => {
            let secs: u64 = s
                .parse()
                .map_err(|_| ApiError::bad_request(format!("invalid timeoutSeconds: {s}")))?;
            Duration::from_secs(secs)
        }
        _ => {
            // Like kube-apiserver: a random time between 30 and 60 minutes.
            Duration::from_secs(1800 + rand::random::<u64>() % 1800)
        }
    };
    let spec = WatchSpec {
        key: crate::storage::stored_key(&t.def.storage_key()).to_string(),
        view: crate::storage::view(&t.def.storage_key()),
        api_version: t.def.api_version(),
        def: t.def.clone(),
        namespace: t.namespace.clone(),
        labels,
        fields,
        format,
        bookmarks,
        convert: crate::http::conversion::by_webhook(&srv, &t.def),
    };
    {
        let mut w = srv.stats.watches.lock().unwrap_or_else(|e| e.into_inner());
        *w.entry(spec.key.clone()).or_default() += 1;
    }
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    let initial = send_initial == Some(true) || rv.is_none() || rv == Some(0);
    let initial_end_bookmark = bookmarks && (send_initial == Some(true) || rv.is_none());
    let srv2 = srv.clone();
    tokio::spawn(async move {
        run(srv2, spec, tx, rv, initial, initial_end_bookmark, timeout).await;
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, std::io::Error>(Frame::data(b)), rx))
    });
    let mut resp = Response::new(StreamBody::new(stream).boxed());
    *resp.status_mut() = StatusCode::OK;
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(ct));
    resp.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    Ok(resp)
}

struct Writer {
    tx: mpsc::Sender<Bytes>,
    first_table: bool,
    /// Protobuf frames instead of JSON lines.
    proto: bool,
    /// Frames not yet handed to the connection: events that are ready together are
    /// written as one chunk.
    pending: Vec<u8>,
    /// Whether frames are being batched (flushed by the caller).
    batching: bool,
}

impl Writer {
    async fn send(&mut self, srv: &ApiServer, spec: &WatchSpec, kind: &str, obj: &Value) -> bool {
        let converted;
        let obj = if spec.convert {
            match crate::http::conversion::to_version(srv, &spec.def, obj.clone()).await {
                Ok(v) => {
                    converted = v;
                    &converted
                }
                Err(e) => {
                    // The watch ends with the conversion failure as an ERROR event.
                    let status = serde_json::to_value(&*e.status).unwrap_or(Value::Null);
                    let _ = self.raw(json!({"type": "ERROR", "object": status})).await;
                    let _ = self.flush().await;
                    return false;
                }
            }
        } else {
            obj
        };
        let rendered = match &spec.format {
            Format::Table => {
                let cols = self.first_table;
                self.first_table = false;
                match crate::registry::table::table(
                    &spec.def,
                    &[Arc::new(srv.present(&spec.def, obj))],
                    None,
                    None,
                    Some(cols),
                ) {
                    Ok(t) => t,
                    Err(_) => return false,
                }
            }
            Format::PartialMeta { .. } => partial_meta(&srv.present(&spec.def, obj)),
            _ => srv.present(&spec.def, obj),
        };
        self.raw(json!({"type": kind, "object": rendered})).await
    }

    /// Sends an event of a stored change, reusing the JSON rendering shared by every
    /// watcher of the same version (plain JSON only).
    async fn send_event(
        &mut self,
        srv: &ApiServer,
        spec: &WatchSpec,
        kind: &str,
        ev: &Event,
    ) -> bool {
        if spec.convert {
            return self.send(srv, spec, kind, &ev.object).await;
        }
        if let Format::Protobuf { .. } = spec.format {
            // Shared by every protobuf watcher of this version; empty when the object
            // does not encode, which `send` then reports by ending the watch.
            let (version, bytes) = ev.rendered_pb.get_or_init(|| {
                let v = crate::protobuf::encode(&srv.present(&spec.def, &ev.object))
                    .unwrap_or_default();
                (spec.api_version.clone(), Bytes::from(v))
            });
            if *version == spec.api_version && !bytes.is_empty() {
                return self.push(pb_frame(kind, bytes)).await;
            }
            return self.send(srv, spec, kind, &ev.object).await;
        }
        if spec.format != Format::Json {
            return self.send(srv, spec, kind, &ev.object).await;
        }
        let (version, bytes) = ev.rendered.get_or_init(|| {
            let v = serde_json::to_vec(&srv.present(&spec.def, &ev.object)).unwrap_or_default();
            (spec.api_version.clone(), Bytes::from(v))
        });
        let owned;
        let obj_bytes = if *version == spec.api_version {
            bytes
        } else {
            owned = Bytes::from(
                serde_json::to_vec(&srv.present(&spec.def, &ev.object)).unwrap_or_default(),
            );
            &owned
        };
        let mut buf = Vec::with_capacity(obj_bytes.len() + 32);
        buf.extend_from_slice(b"{\"type\":\"");
        buf.extend_from_slice(kind.as_bytes());
        buf.extend_from_slice(b"\",\"object\":");
        buf.extend_from_slice(obj_bytes);
        buf.extend_from_slice(b"}\n");
        self.push(buf).await
    }

    async fn push(&mut self, frame: Vec<u8>) -> bool {
        self.pending.extend_from_slice(&frame);
        if self.batching && self.pending.len() < 256 * 1024 {
            return true;
        }
        self.flush().await
    }

    async fn flush(&mut self) -> bool {
        if self.pending.is_empty() {
            return true;
        }
        let chunk = Bytes::from(std::mem::take(&mut self.pending));
        self.tx.send(chunk).await.is_ok()
    }

    /// Sends one `{"type", "object"}` event: a JSON line, or a length-prefixed protobuf
    /// WatchEvent for protobuf watchers.
    async fn raw(&mut self, v: Value) -> bool {
        if self.proto {
            let kind = v.get("type").and_then(Value::as_str).unwrap_or("");
            let obj = v.get("object").unwrap_or(&Value::Null);
            return match crate::protobuf::encode(obj) {
                Ok(bytes) => self.push(pb_frame(kind, &bytes)).await,
                Err(e) => {
                    // Skipping the event would leave the client's cache wrong without a
                    // trace; like kube-apiserver, end the watch instead (the client
                    // watches again from its last resourceVersion, or relists).
                    tracing::warn!("ending a watch: an event is not encodable as protobuf: {e}");
                    let _ = self.flush().await;
                    false
                }
            };
        }
        let mut buf = serde_json::to_vec(&v).unwrap_or_default();
        buf.push(b'\n');
        self.push(buf).await
    }

    async fn bookmark(&mut self, spec: &WatchSpec, rv: u64, initial_end: bool) -> bool {
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let obj = match spec.format {
            Format::PartialMeta { .. } => {
                json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": meta})
            }
            _ => {
                json!({"kind": spec.def.kind, "apiVersion": spec.def.api_version(), "metadata": meta})
            }
        };
        self.raw(json!({"type": "BOOKMARK", "object": obj})).await
    }
}

/// A protobuf watch frame (client-go's length-delimited framing), written by the codec
/// the client reads it with.
fn pb_frame(kind: &str, object: &[u8]) -> Vec<u8> {
    kubewright_proto::watch::encode_frame(kind, object)
}

async fn run(
    srv: Arc<ApiServer>,
    spec: WatchSpec,
    tx: mpsc::Sender<Bytes>,
    rv: Option<u64>,
    initial: bool,
    initial_end_bookmark: bool,
    timeout: Duration,
) {
    let mut w = Writer {
        tx,
        first_table: true,
        proto: spec.format.is_protobuf(),
        pending: Vec::new(),
        batching: false,
    };
    let deadline = deadline_after(timeout);
    let (mut rx, mut last_rv) = if initial {
        let (objs, rx, snap_rv) = srv
            .storage
            .snapshot_and_watch(&spec.key, spec.namespace.as_deref());
        for o in objs.iter().filter(|o| spec.matches(o)) {
            if !w.send(&srv, &spec, "ADDED", o).await {
                return;
            }
        }
        if initial_end_bookmark && !w.bookmark(&spec, snap_rv, true).await {
            return;
        }
        (rx, snap_rv)
    } else {
        let from = rv.unwrap_or(0);
        match srv.storage.watch_from(from) {
            Ok((past, rx, _)) => {
                let mut last = from;
                for ev in past {
                    last = ev.rv;
                    if !emit(&srv, &spec, &mut w, &ev).await {
                        return;
                    }
                }
                (rx, last)
            }
            Err(too_old) => {
                let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": format!("too old resource version: {from} ({})", too_old.oldest), "reason": "Expired", "code": 410});
                let _ = w.raw(json!({"type": "ERROR", "object": status})).await;
                return;
            }
        }
    };
    let mut last_sent = last_rv;
    let mut epoch = srv.watch_epoch.subscribe();
    epoch.mark_unchanged();
    let mut ticker = tokio::time::interval(srv.options.bookmark_interval);
    ticker.tick().await;
    loop {
        tokio::select! {
            ev = rx.recv() => match ev {
                Ok(first) => {
                    // Take everything already queued and write it as one chunk.
                    w.batching = true;
                    let mut next = Some(first);
                    let mut taken = 0;
                    while let Some(ev) = next.take() {
                        if ev.rv > last_rv {
                            last_rv = ev.rv;
                            if spec.in_scope(&ev) {
                                if !emit(&srv, &spec, &mut w, &ev).await {
                                    return;
                                }
                                last_sent = ev.rv;
                            }
                        }
                        taken += 1;
                        if taken < 1024 {
                            next = rx.try_recv().ok();
                        }
                    }
                    w.batching = false;
                    if !w.flush().await {
                        return;
                    }
                }
                // Too slow to keep up: close; the client resumes from its last version.
                Err(broadcast::error::RecvError::Lagged(_)) | Err(broadcast::error::RecvError::Closed) => return,
            },
            _ = ticker.tick() => {
                if spec.bookmarks && last_rv > last_sent {
                    if !w.bookmark(&spec, last_rv, false).await {
                        return;
                    }
                    last_sent = last_rv;
                }
            }
            _ = tokio::time::sleep_until(deadline) => {
                if spec.bookmarks {
                    let _ = w.bookmark(&spec, last_rv, false).await;
                }
                return;
            }
            _ = w.tx.closed() => return,
            // Fault injection: drop the stream like a broken connection (no bookmark).
            _ = epoch.changed() => return,
        }
    }
}

async fn emit(srv: &ApiServer, spec: &WatchSpec, w: &mut Writer, ev: &Event) -> bool {
    if !spec.in_scope(ev) {
        return true;
    }
    let viewed;
    let ev = match spec.view {
        Some(v) => {
            viewed = Event {
                object: Arc::new((v.read)(&ev.object)),
                prev: ev.prev.as_ref().map(|p| Arc::new((v.read)(p))),
                rendered: Default::default(),
                rendered_pb: Default::default(),
                resource: ev.resource.clone(),
                namespace: ev.namespace.clone(),
                name: ev.name.clone(),
                ..*ev
            };
            &viewed
        }
        None => ev,
    };
    let now = spec.matches(&ev.object);
    let before = ev.prev.as_ref().is_some_and(|p| spec.matches(p));
    match ev.kind {
        EventType::Added if now => w.send_event(srv, spec, "ADDED", ev).await,
        EventType::Modified if now && before => w.send_event(srv, spec, "MODIFIED", ev).await,
        EventType::Modified if now => w.send_event(srv, spec, "ADDED", ev).await,
        EventType::Modified if before => {
            // Leaving the selector: the previous content, stamped with the new version.
            let mut last = ev.prev.as_deref().cloned().unwrap_or(Value::Null);
            if let Some(m) = last.get_mut("metadata").and_then(Value::as_object_mut) {
                m.insert("resourceVersion".into(), Value::String(ev.rv.to_string()));
            }
            w.send(srv, spec, "DELETED", &last).await
        }
        EventType::Deleted if before => w.send_event(srv, spec, "DELETED", ev).await,
        _ => true,
    }
}

/// When a watch of `timeout` ends; a timeout past what an `Instant` can hold (say
/// `timeoutSeconds=18446744073709551615`) never ends it, instead of overflowing.
fn deadline_after(timeout: Duration) -> tokio::time::Instant {
    let now = tokio::time::Instant::now();
    now.checked_add(timeout)
        .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 86_400))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An event protobuf cannot carry ends the watch (the client starts over) instead of
    /// being skipped, which would leave the client's cache silently wrong.
    #[tokio::test]
    async fn an_unencodable_protobuf_event_ends_the_watch() {
        let (tx, mut rx) = mpsc::channel(8);
        let mut w = Writer {
            tx,
            first_table: false,
            proto: true,
            pending: Vec::new(),
            batching: false,
        };
        let good = json!({"type": "ADDED", "object": {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a"}}});
        assert!(w.raw(good).await);
        let bad = json!({"type": "MODIFIED", "object": {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "generation": "not a number"}}});
        assert!(
            !w.raw(bad).await,
            "the watch goes on after an event it could not send"
        );
        let first = rx.recv().await.unwrap();
        assert!(
            kubewright_proto::watch::frame_len(&first)
                .unwrap()
                .is_some()
        );
        assert!(rx.try_recv().is_err(), "nothing was sent for the bad event");
    }

    /// Found by the `request` fuzz target: a watch with `timeoutSeconds=u64::MAX`
    /// panicked in its task computing the deadline (the stream ended at once).
    #[test]
    fn huge_watch_timeouts_do_not_overflow() {
        let now = tokio::time::Instant::now();
        let far = deadline_after(Duration::from_secs(u64::MAX));
        assert!(far > now + Duration::from_secs(50 * 365 * 86_400));
        let soon = deadline_after(Duration::from_secs(5));
        assert!(soon >= now + Duration::from_secs(5));
        assert!(soon < now + Duration::from_secs(60));
    }
}
