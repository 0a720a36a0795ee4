//! The data directory keeps its promises through HTTP: a write that cannot be persisted
//! (full disk) fails with 500 InternalError and changes nothing, later writes succeed once
//! there is space again, and resourceVersions never go backwards across a restart (a watch
//! from the last revision a client saw gets new events; older ones get 410 Expired), not
//! even when acknowledged changes are lost from the end of the log, and a log damaged in
//! the middle stops the start unless salvaged. A watch or exact list from before the
//! server started gets 410 with kube-apiserver's texts.
//! Embedded-only: a real cluster has its own storage.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::{Client, connect::HttpConnector};
use hyper_util::rt::TokioExecutor;
use kubewright_apiserver::TestServer;
use serde_json::{Value, json};
use std::time::Duration;

const CMS: &str = "/api/v1/namespaces/default/configmaps";

struct Http {
    base: String,
    client: Client<HttpConnector, Full<Bytes>>,
}

impl Http {
    fn new(server: &TestServer) -> Self {
        Self {
            base: server.url(),
            client: Client::builder(TokioExecutor::new()).build_http(),
        }
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> hyper::Response<Incoming> {
        let req = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(
                body.map(|b| b.to_string()).unwrap_or_default(),
            )))
            .unwrap();
        self.client.request(req).await.unwrap()
    }

    /// The status and the JSON body (Null when the body is not JSON).
    async fn call(&self, method: Method, path: &str, body: Option<&Value>) -> (StatusCode, Value) {
        let resp = self.send(method, path, body).await;
        let status = resp.status();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    async fn watch(&self, path: &str) -> Watch {
        let resp = self.send(Method::GET, path, None).await;
        assert_eq!(resp.status(), StatusCode::OK);
        Watch {
            body: resp.into_body(),
            buf: Vec::new(),
        }
    }
}

struct Watch {
    body: Incoming,
    buf: Vec<u8>,
}

impl Watch {
    /// The next event (waits for it, up to 10 s); None when the stream ended.
    async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(i) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=i).collect();
                return Some(serde_json::from_slice(&line).unwrap());
            }
            let frame = tokio::time::timeout(Duration::from_secs(10), self.body.frame())
                .await
                .expect("no watch event within 10 s");
            match frame {
                Some(f) => {
                    if let Ok(data) = f.unwrap().into_data() {
                        self.buf.extend_from_slice(&data);
                    }
                }
                None => return None,
            }
        }
    }
}

fn cm(name: &str, v: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"v": v}})
}

fn rv(obj: &Value) -> u64 {
    obj["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no resourceVersion in {obj}"))
}

fn assert_storage_error(status: StatusCode, body: &Value) {
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
    assert_eq!(body["kind"], "Status", "{body}");
    assert_eq!(body["reason"], "InternalError", "{body}");
    let msg = body["message"].as_str().unwrap();
    assert!(
        msg.starts_with("Internal error occurred: storage: resourceVersion"),
        "{msg}"
    );
    assert!(msg.contains("no space left on device"), "{msg}");
    assert_eq!(
        body["details"]["causes"][0]["message"]
            .as_str()
            .map(|m| msg.ends_with(m)),
        Some(true)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_disk_write_fails_with_500_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::builder()
        .data_dir(dir.path())
        .start()
        .await
        .unwrap();
    let http = Http::new(&server);
    let (status, a) = http.call(Method::POST, CMS, Some(&cm("a", "1"))).await;
    assert_eq!(status, StatusCode::CREATED, "{a}");

    server.state().storage.set_free_space(Some(0));
    let (status, body) = http.call(Method::POST, CMS, Some(&cm("b", "1"))).await;
    assert_storage_error(status, &body);
    // generateName does not turn the failure into a retry or a 409.
    let generated =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "g-"}});
    let (status, body) = http.call(Method::POST, CMS, Some(&generated)).await;
    assert_storage_error(status, &body);
    let mut update = a.clone();
    update["data"]["v"] = json!("2");
    let (status, body) = http
        .call(Method::PUT, &format!("{CMS}/a"), Some(&update))
        .await;
    assert_storage_error(status, &body);
    let (status, body) = http.call(Method::DELETE, &format!("{CMS}/a"), None).await;
    assert_storage_error(status, &body);
    // Nothing changed, and the server still serves reads.
    let (status, got) = http.call(Method::GET, &format!("{CMS}/a"), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(got, a);
    let (status, _) = http.call(Method::GET, &format!("{CMS}/b"), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, list) = http.call(Method::GET, CMS, None).await;
    assert_eq!(status, StatusCode::OK);
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| o["metadata"]["name"].as_str())
        .collect();
    assert!(names.contains(&"a") && !names.contains(&"b"), "{names:?}");
    assert!(rv(&list) >= rv(&a));
    let (status, _) = http.call(Method::GET, "/readyz", None).await;
    assert_eq!(
        status,
        StatusCode::INTERNAL_SERVER_ERROR,
        "readyz reports the storage"
    );

    // Space returns: writes succeed again.
    server.state().storage.set_free_space(None);
    let (status, b) = http.call(Method::POST, CMS, Some(&cm("b", "1"))).await;
    assert_eq!(status, StatusCode::CREATED, "{b}");
    assert!(rv(&b) > rv(&list));
    let (status, a2) = http
        .call(Method::PUT, &format!("{CMS}/a"), Some(&update))
        .await;
    assert_eq!(status, StatusCode::OK, "{a2}");
    let (status, _) = http.call(Method::GET, "/readyz", None).await;
    assert_eq!(status, StatusCode::OK);
    server.stop();
    drop(server);

    // A restart has every acknowledged write and none of the failed ones.
    let server = TestServer::builder()
        .data_dir(dir.path())
        .start()
        .await
        .unwrap();
    let http = Http::new(&server);
    let (_, got) = http.call(Method::GET, &format!("{CMS}/a"), None).await;
    assert_eq!(got, a2);
    let (_, got) = http.call(Method::GET, &format!("{CMS}/b"), None).await;
    assert_eq!(got, b);
    let (_, list) = http.call(Method::GET, CMS, None).await;
    assert!(
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|o| !o["metadata"]["name"].as_str().unwrap().starts_with("g-")),
        "{list}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revisions_continue_after_a_restart_whose_newest_changes_were_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let last_seen;
    {
        let server = TestServer::builder()
            .data_dir(dir.path())
            .start()
            .await
            .unwrap();
        let http = Http::new(&server);
        for name in ["x", "y", "z"] {
            let (status, _) = http.call(Method::POST, CMS, Some(&cm(name, "1"))).await;
            assert_eq!(status, StatusCode::CREATED);
        }
        for name in ["y", "z"] {
            let (status, _) = http
                .call(Method::DELETE, &format!("{CMS}/{name}"), None)
                .await;
            assert_eq!(status, StatusCode::OK);
        }
        let (_, list) = http.call(Method::GET, CMS, None).await;
        last_seen = rv(&list);
        server.stop();
    }
    let server = TestServer::builder()
        .data_dir(dir.path())
        .start()
        .await
        .unwrap();
    let http = Http::new(&server);
    let (_, list) = http.call(Method::GET, CMS, None).await;
    assert!(rv(&list) >= last_seen, "{} < {last_seen}", rv(&list));

    // An older revision is gone: 410 Expired, not silence.
    let mut old = http
        .watch(&format!(
            "{CMS}?watch=true&resourceVersion={}",
            last_seen - 1
        ))
        .await;
    let ev = old.next().await.unwrap();
    assert_eq!(ev["type"], "ERROR", "{ev}");
    assert_eq!(ev["object"]["code"], 410, "{ev}");
    assert_eq!(ev["object"]["reason"], "Expired", "{ev}");

    // The last revision clients saw: the watch gets the next change.
    let mut w = http
        .watch(&format!("{CMS}?watch=true&resourceVersion={}", rv(&list)))
        .await;
    let (status, created) = http.call(Method::POST, CMS, Some(&cm("after", "1"))).await;
    assert_eq!(status, StatusCode::CREATED);
    assert!(rv(&created) > last_seen);
    let ev = w.next().await.unwrap();
    assert_eq!(ev["type"], "ADDED", "{ev}");
    assert_eq!(ev["object"]["metadata"]["name"], "after", "{ev}");
    assert_eq!(rv(&ev["object"]), rv(&created));
}

/// Starts a server on `dir`, creates the ConfigMaps `names` one by one, and returns each
/// one's revision and the log's length right after it was acknowledged.
async fn create_logged(dir: &std::path::Path, names: &[&str]) -> Vec<(u64, u64)> {
    let server = TestServer::builder().data_dir(dir).start().await.unwrap();
    let http = Http::new(&server);
    let mut out = Vec::new();
    for name in names {
        let (status, created) = http.call(Method::POST, CMS, Some(&cm(name, "1"))).await;
        assert_eq!(status, StatusCode::CREATED, "{created}");
        let len = std::fs::metadata(dir.join("objects.wal")).unwrap().len();
        out.push((rv(&created), len));
    }
    server.shutdown().await;
    out
}

async fn configmap_names(http: &Http) -> Vec<String> {
    let (_, list) = http.call(Method::GET, CMS, None).await;
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
        .filter(|n| n.len() == 1)
        .collect()
}

/// Acknowledged changes lost from the end of the log after the fact (blocks a disk
/// dropped): the restarted server hands out none of their resourceVersions again, and a
/// watch from one of them gets 410 instead of a different object under that revision.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revisions_lost_with_the_end_of_the_log_are_not_reused() {
    let dir = tempfile::tempdir().unwrap();
    let logged = create_logged(dir.path(), &["a", "b", "c"]).await;
    let (_, after_a) = logged[0];
    let (highest, _) = logged[2];
    let log = dir.path().join("objects.wal");
    let bytes = std::fs::read(&log).unwrap();
    std::fs::write(&log, &bytes[..usize::try_from(after_a).unwrap()]).unwrap();

    let server = TestServer::builder()
        .data_dir(dir.path())
        .start()
        .await
        .unwrap();
    let http = Http::new(&server);
    assert_eq!(configmap_names(&http).await, ["a"], "b and c were lost");
    let (status, created) = http.call(Method::POST, CMS, Some(&cm("d", "1"))).await;
    assert_eq!(status, StatusCode::CREATED);
    assert!(
        rv(&created) > highest,
        "{} was handed out before",
        rv(&created)
    );
    let mut w = http
        .watch(&format!("{CMS}?watch=true&resourceVersion={highest}"))
        .await;
    let ev = w.next().await.unwrap();
    assert_eq!(ev["object"]["code"], 410, "{ev}");
}

/// Damage in the middle of the log stops the start with an error naming the log (as
/// etcd refuses a corrupt WAL), leaves the log as it was, and salvage starts from every
/// intact record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_damaged_in_the_middle_stops_the_start_until_salvaged() {
    let dir = tempfile::tempdir().unwrap();
    create_logged(dir.path(), &["a", "b", "c"]).await;
    let log = dir.path().join("objects.wal");
    let mut bytes = std::fs::read(&log).unwrap();
    let needle = br#""r":"/configmaps","ns":"default","n":"b""#;
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle)
        .unwrap();
    bytes[at + needle.len() + 8] ^= 0x01;
    std::fs::write(&log, &bytes).unwrap();

    let err = TestServer::builder()
        .data_dir(dir.path())
        .start()
        .await
        .expect_err("a damaged log was opened");
    let msg = err.to_string();
    assert!(
        msg.contains("objects.wal") && msg.contains("refusing to start"),
        "{msg}"
    );
    assert!(msg.contains("--salvage-corrupt-log"), "{msg}");
    let now = std::fs::read(&log).unwrap();
    assert!(
        now == bytes,
        "the log was changed: {} bytes, was {}",
        now.len(),
        bytes.len()
    );

    let server = TestServer::builder()
        .data_dir(dir.path())
        .salvage_corrupt_log(true)
        .start()
        .await
        .unwrap();
    let http = Http::new(&server);
    assert_eq!(configmap_names(&http).await, ["a", "c"]);
}

/// A server's history starts after its bootstrap, as kube-apiserver's does once its
/// revisions from before the last etcd compaction are gone (it compacts every 5 minutes,
/// so a real cluster only a few minutes old still serves them: hence a test of the
/// embedded server, with the texts v1.36 answered on a cluster past its first
/// compaction). Client tests of 410 handling rely on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revisions_from_before_the_server_started_are_gone() {
    let server = TestServer::builder().start().await.unwrap();
    let http = Http::new(&server);
    for bookmarks in ["", "&allowWatchBookmarks=true"] {
        let mut w = http
            .watch(&format!("{CMS}?watch=true&resourceVersion=1{bookmarks}"))
            .await;
        let ev = w.next().await.unwrap();
        assert_eq!(ev["type"], "ERROR", "{ev}");
        assert_eq!(ev["object"]["code"], 410, "{ev}");
        assert_eq!(ev["object"]["reason"], "Expired", "{ev}");
        let msg = ev["object"]["message"].as_str().unwrap();
        assert!(msg.starts_with("too old resource version: 1 ("), "{msg}");
    }
    for limit in ["", "&limit=1"] {
        let (status, body) = http
            .call(
                Method::GET,
                &format!("{CMS}?resourceVersion=1&resourceVersionMatch=Exact{limit}"),
                None,
            )
            .await;
        assert_eq!(status, StatusCode::GONE, "{body}");
        assert_eq!(
            body["message"],
            "The resourceVersion for the provided list is too old."
        );
    }
    // `{"v":"meta.k8s.io/v1","rv":2,"start":"a"}`
    let (status, body) = http
        .call(
            Method::GET,
            &format!(
                "{CMS}?limit=1&continue=eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6Miwic3RhcnQiOiJhIn0"
            ),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::GONE, "{body}");
    assert!(
        body["message"].as_str().unwrap().starts_with(
            "The provided continue parameter is too old to display a consistent list result."
        ),
        "{body}"
    );
    // What the server wrote since it started is there to watch.
    let (_, list) = http.call(Method::GET, CMS, None).await;
    let mut w = http
        .watch(&format!("{CMS}?watch=true&resourceVersion={}", rv(&list)))
        .await;
    let (status, _) = http.call(Method::POST, CMS, Some(&cm("fresh", "1"))).await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(w.next().await.unwrap()["type"], "ADDED");
}
