//! Entry points for the cargo-fuzz targets in `fuzz/` at the repository root.
//!
//! Not an API: hidden from the documentation and free to change with the targets. Each
//! function is a thin wrapper over the code the server itself runs, so that a limit the
//! server applies (body size, patch size, nesting depth) applies to the fuzzer's inputs too.

use crate::http::Req;
use crate::http::api::ApiServer;
use crate::registry::schema;
use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use serde_json::Value;
use std::sync::Arc;

/// Serves one request as the HTTP server does once a connection has delivered it:
/// authentication, impersonation, the body size limit, the query checks, routing and the
/// verb handlers. Returns the status, the headers and the body. A streamed body (a watch)
/// is read while it has data ready, letting the tasks behind it run a few times; when it
/// is still open after that it is dropped, closing the watch, and the body is `None`.
pub async fn handle(
    srv: &Arc<ApiServer>,
    req: http::Request<Bytes>,
) -> (http::response::Parts, Option<Bytes>) {
    use futures::FutureExt as _;
    let req = req.map(Full::new);
    let resp = match crate::http::server::handle(srv.clone(), req, None).await {
        Ok(r) => r,
        Err(never) => match never {},
    };
    let (parts, mut body) = resp.into_parts();
    let mut data = BytesMut::new();
    for _ in 0..8 {
        loop {
            match body.frame().now_or_never() {
                Some(Some(Ok(frame))) => {
                    if let Ok(d) = frame.into_data() {
                        data.extend_from_slice(&d);
                    }
                }
                Some(Some(Err(_))) => return (parts, None),
                Some(None) => return (parts, Some(data.freeze())),
                None => break,
            }
        }
        tokio::task::yield_now().await;
    }
    (parts, None)
}

/// One pass of the server's background controllers (CRD establishment, namespace
/// lifecycle, garbage collection, ClusterRole aggregation), which a running server does
/// after writes: it is what serves a new CRD's resources.
pub fn reconcile(srv: &Arc<ApiServer>) {
    crate::controllers::reconcile_all(srv);
}

/// Decodes a request body as create, update and delete do: Kubernetes protobuf, YAML or
/// JSON by `content_type` (JSON when `None`).
pub fn decode_body(content_type: Option<&str>, body: &[u8]) -> Result<Value, String> {
    let mut headers = http::HeaderMap::new();
    if let Some(ct) = content_type {
        let v = http::HeaderValue::from_str(ct).map_err(|e| e.to_string())?;
        headers.insert(http::header::CONTENT_TYPE, v);
    }
    let req = Req {
        method: http::Method::POST,
        path: String::new(),
        query: Default::default(),
        query_all: Vec::new(),
        headers,
        body: Bytes::copy_from_slice(body),
        user: crate::auth::rbac::UserInfo::admin(),
        upgrade: None,
    };
    crate::http::decode_body(&req).map_err(|e| e.status.message)
}

/// Decodes a Kubernetes protobuf body (`k8s\0` + `runtime.Unknown`) into JSON.
pub fn protobuf_decode(body: &[u8]) -> Result<Value, String> {
    crate::protobuf::decode(body)
}

/// Encodes an object with its `apiVersion` and `kind` as a Kubernetes protobuf body.
pub fn protobuf_encode(obj: &Value) -> Result<Vec<u8>, String> {
    crate::protobuf::encode(obj).map_err(|e| e.to_string())
}

/// Applies a strategic merge patch to `orig` with the list semantics of the built-in
/// OpenAPI definition `definition` (e.g. `io.k8s.api.core.v1.Pod`; none when unknown).
pub fn strategic_merge(orig: &mut Value, patch: &Value, definition: &str) -> Result<(), String> {
    crate::http::patch::strategic_merge(orig, patch, schema::builtin_def(definition))
        .map_err(|e| e.to_string())
}

/// The managedFields `fieldsV1` trie of the fields set in `obj`, an object of the built-in
/// definition `definition`, as server-side apply records it.
pub fn fields_v1_of(obj: &Value, definition: &str) -> Value {
    let ty = schema::builtin_def(definition);
    crate::registry::fields::to_fields_v1(&crate::registry::fields::paths_of(obj, ty))
}

/// A `fieldsV1` trie decoded into field paths (as the server reads managedFields) and
/// encoded again.
pub fn fields_v1_reencode(fields_v1: &Value) -> Value {
    crate::registry::fields::to_fields_v1(&crate::registry::fields::from_fields_v1(fields_v1))
}

/// Serves kubectl's port-forward protocol over SPDY on `input`, the client's bytes
/// followed by end of file, with every port refused except 80 (an echo), as the simulated
/// kubelet serves it; the server's frames are read and dropped. Returns when the session
/// ends (at the end of the input, or on a protocol error, as `Err`), or after 5 seconds
/// of virtual time at most.
pub async fn spdy_session(input: &[u8]) -> Result<(), String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (client, server) = tokio::io::duplex(1 << 16);
    let (mut rd, mut wr) = tokio::io::split(client);
    let input = input.to_vec();
    let feed = tokio::spawn(async move {
        let _ = wr.write_all(&input).await;
        let _ = wr.shutdown().await;
        // Keep our side open until the server is done (a drop would cut its output).
        std::future::pending::<()>().await;
    });
    let drain = tokio::spawn(async move {
        let mut buf = vec![0u8; 1 << 16];
        while matches!(rd.read(&mut buf).await, Ok(n) if n > 0) {}
    });
    let dial = |port: u16| async move {
        if port != 80 {
            return Err(format!("connection refused on port {port}"));
        }
        let (a, mut b) = tokio::io::duplex(1024);
        tokio::spawn(async move {
            let mut buf = [0u8; 1024];
            while let Ok(n) = b.read(&mut buf).await {
                if n == 0 || b.write_all(&buf[..n]).await.is_err() {
                    break;
                }
            }
        });
        Ok(a)
    };
    let session = crate::http::spdy::portforward(server, dial);
    let result = match tokio::time::timeout(std::time::Duration::from_secs(5), session).await {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(_) => Ok(()),
    };
    feed.abort();
    drain.abort();
    result
}

/// An exec (`sh -c cat`) or port-forward (port 80 echo, 81 refused) session over a
/// WebSocket whose client sends `input` as raw frames and closes; `protocol` picks the
/// sub-protocol (v5, v4, v4.base64, base64, channel). Returns what the server sent.
pub async fn websocket_session(protocol: u8, port_forward: bool, input: &[u8]) -> Vec<u8> {
    crate::kubelet::fuzz_session(protocol, port_forward, input).await
}

/// Parses an uncompressed SPDY header block as the port-forward server does: the number
/// of header values, or why the block is refused.
pub fn spdy_header_block(block: &[u8]) -> Result<usize, String> {
    crate::http::spdy::parse_header_block(block)
        .map(|h| h.len())
        .map_err(|e| e.to_string())
}

/// The subject common name and organizations the server reads from a client
/// certificate (DER), as its x509 authenticator does.
pub fn x509_subject(der: &[u8]) -> Option<(Option<String>, Vec<String>)> {
    crate::http::server::x509_subject(der)
}

/// What recovery makes of a data directory's log (`objects.wal`): the objects it holds
/// (resource, namespace, name) and the revision, or why the start is refused.
pub fn wal_recover(log: &[u8], salvage: bool) -> Result<crate::storage::Recovered, String> {
    crate::storage::recover_for_fuzzing(log, salvage)
}

/// A webhook's answer to the review with uid `fuzz`, read as the server reads it; an
/// allowed mutation's JSON patch is then applied, within the server's bounds, to a
/// ConfigMap. Returns whether it was allowed and the patched object, or the error.
pub fn webhook_answer(raw: &[u8], mutating: bool) -> Result<(bool, Option<Value>), String> {
    let answer =
        crate::http::admission::webhook::read_answer(raw, "fuzz", mutating).map_err(|e| e.0)?;
    let Some(patch) = answer.patch.filter(|_| answer.allowed) else {
        return Ok((answer.allowed, None));
    };
    let ops: Vec<json_patch::PatchOperation> =
        serde_json::from_slice(&patch).map_err(|e| e.to_string())?;
    let mut doc = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cm", "namespace": "default", "labels": {"a": "b"}},
        "data": {"k": "v"}});
    crate::http::limits::apply_json_patch_bounded(&mut doc, &ops)
        .map_err(|_| "the patch could not be applied".to_string())?;
    Ok((true, Some(doc)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::api::ServerOptions;
    use serde_json::json;

    /// A client's masked binary frame.
    fn masked(payload: &[u8], opcode: u8) -> Vec<u8> {
        let key = [0x11u8, 0x22, 0x33, 0x44];
        let mut f = vec![0x80 | opcode, 0x80 | u8::try_from(payload.len()).unwrap()];
        f.extend_from_slice(&key);
        f.extend(payload.iter().enumerate().map(|(i, b)| b ^ key[i % 4]));
        f
    }

    #[tokio::test]
    async fn a_websocket_exec_session_runs_the_frames_it_is_fed() {
        let mut input = masked(b"\x00hello from stdin\n", 2);
        input.extend(masked(b"\xff\x00", 2)); // v5: stdin closed
        let out = websocket_session(0, false, &input).await;
        let text = String::from_utf8_lossy(&out);
        assert!(
            text.contains("hello from stdin"),
            "cat echoed nothing: {text:?}"
        );
        assert!(text.contains(r#""status":"Success""#), "{text:?}");
        // Port-forward, v4 binary: the first data on a channel starts with its port
        // (little endian); the data is echoed.
        let input = masked(b"\x00\x50\x00ping", 2);
        let out = websocket_session(1, true, &input).await;
        assert!(out.windows(4).any(|w| w == b"ping"), "{out:?}");
    }

    #[tokio::test]
    async fn handle_serves_like_the_http_server() {
        let srv = ApiServer::new(ServerOptions::default());
        let req = |method: &str, uri: &str, body: &str| {
            http::Request::builder()
                .method(method)
                .uri(uri)
                .header("content-type", "application/json")
                .body(Bytes::from(body.to_string()))
                .unwrap()
        };
        let cm =
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"k":"v"}}"#;
        let (parts, body) = handle(
            &srv,
            req("POST", "/api/v1/namespaces/default/configmaps", cm),
        )
        .await;
        assert_eq!(parts.status, 201);
        let created: Value = serde_json::from_slice(&body.unwrap()).unwrap();
        assert_eq!(created["data"], json!({"k": "v"}));
        let (parts, body) = handle(
            &srv,
            req("GET", "/api/v1/namespaces/default/configmaps/c", ""),
        )
        .await;
        assert_eq!(parts.status, 200);
        assert_eq!(parts.headers["cache-control"], "no-cache, private");
        assert!(body.is_some());
        // An open watch has no complete body.
        let (parts, body) = handle(
            &srv,
            req("GET", "/api/v1/namespaces/default/configmaps?watch=1", ""),
        )
        .await;
        assert_eq!(parts.status, 200);
        assert!(body.is_none());
        // The server's body limit applies.
        let big = "x".repeat(ServerOptions::default().max_body + 1);
        let (parts, _) = handle(
            &srv,
            req("POST", "/api/v1/namespaces/default/configmaps", &big),
        )
        .await;
        assert_eq!(parts.status, 413);
    }

    #[test]
    fn decode_body_by_content_type() {
        let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n";
        let v = decode_body(Some("application/yaml"), yaml.as_bytes()).unwrap();
        assert_eq!(v["metadata"]["name"], "c");
        let v = decode_body(None, br#"{"kind":"ConfigMap"}"#).unwrap();
        assert_eq!(v["kind"], "ConfigMap");
        let e = decode_body(Some("application/vnd.kubernetes.protobuf"), b"{}").unwrap_err();
        assert!(e.contains("k8s"), "{e}");
        assert!(decode_body(None, b"").is_err());
    }

    #[test]
    fn fields_v1_helpers_round_trip() {
        let pod = json!({"metadata": {"labels": {"a": "b"}},
            "spec": {"containers": [{"name": "web", "image": "x"}]}});
        let f = fields_v1_of(&pod, "io.k8s.api.core.v1.Pod");
        assert_eq!(
            f,
            json!({"f:metadata": {"f:labels": {"f:a": {}}},
                "f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:image": {}, "f:name": {}}}}})
        );
        assert_eq!(fields_v1_reencode(&f), f);
        let mut p = json!({"spec": {"containers": [{"name": "a"}]}});
        strategic_merge(
            &mut p,
            &json!({"spec": {"containers": [{"name": "b"}]}}),
            "io.k8s.api.core.v1.Pod",
        )
        .unwrap();
        assert_eq!(p["spec"]["containers"].as_array().unwrap().len(), 2);
    }
}
