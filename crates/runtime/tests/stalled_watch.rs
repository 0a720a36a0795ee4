//! A stalled watch over a real HTTP connection: the server answers with headers (or not
//! at all) and then sends nothing. The reflector must notice within its idle timeout and
//! watch again from the last resourceVersion it saw, without relisting.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kubewright_client::{Api, Client, Config};
use kubewright_runtime::reflector::{BackoffConfig, Error as ReflectorError};
use kubewright_runtime::{Delta, Reflector, ReflectorConfig};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

fn cm(name: &str, rv: &str) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","namespace":"ns","resourceVersion":"{rv}"}}}}"#
    )
}

fn chunk(s: &str) -> String {
    format!("{:x}\r\n{s}\r\n", s.len())
}

const STREAM_HEAD: &str =
    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";

/// What the server sends for the n-th watch request before going silent (the
/// connection stays open). `None`: not even response headers.
fn watch_script(n: usize) -> Option<String> {
    match n {
        // An event and a bookmark, then a stall.
        0 => Some(format!(
            "{STREAM_HEAD}{}{}",
            chunk(&format!(
                "{{\"type\":\"MODIFIED\",\"object\":{}}}\n",
                cm("a", "6")
            )),
            chunk(
                "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"7\"}}}\n"
            ),
        )),
        // Accepted, never answered.
        1 => None,
        // Healthy: one more event, then quiet (and kept open).
        _ => Some(format!(
            "{STREAM_HEAD}{}",
            chunk(&format!(
                "{{\"type\":\"MODIFIED\",\"object\":{}}}\n",
                cm("a", "8")
            ))
        )),
    }
}

/// Serves one list and scripted watches; records every request line.
async fn server() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let requests = Arc::new(Mutex::new(Vec::new()));
    let seen = requests.clone();
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            tokio::spawn(serve(sock, seen.clone()));
        }
    });
    (format!("http://{addr}"), requests)
}

async fn serve(mut sock: TcpStream, seen: Arc<Mutex<Vec<String>>>) {
    // HTTP/1.1 keep-alive: several requests may come on one connection.
    let mut buf = Vec::new();
    loop {
        let mut chunk = [0u8; 4096];
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            match sock.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        let head = String::from_utf8_lossy(&buf[..end]).to_string();
        buf.drain(..end);
        let line = head.lines().next().unwrap_or_default().to_string();
        let watches = {
            let mut seen = seen.lock().unwrap();
            seen.push(line.clone());
            seen.iter().filter(|l| l.contains("watch=true")).count()
        };
        if line.contains("watch=true") {
            if let Some(bytes) = watch_script(watches - 1) {
                let _ = sock.write_all(bytes.as_bytes()).await;
            }
            // Silent from now on, until the client goes away.
            while matches!(sock.read(&mut chunk).await, Ok(n) if n > 0) {}
            return;
        }
        let body = format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMapList","metadata":{{"resourceVersion":"5"}},"items":[{}]}}"#,
            cm("a", "3")
        );
        let resp = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        if sock.write_all(resp.as_bytes()).await.is_err() {
            return;
        }
    }
}

fn query_param(line: &str, key: &str) -> Option<String> {
    let query = line.split_whitespace().nth(1)?.split_once('?')?.1;
    form_pairs(query)
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
}

fn form_pairs(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[tokio::test]
async fn stalled_watch_restarts_from_the_last_resource_version() {
    let (url, requests) = server().await;
    let mut config = Config::new(url.parse().unwrap());
    config.qps = 0.0;
    config.proxy_env = kubewright_client::proxy::ProxyEnv::none();
    let api: Api<ConfigMap> = Api::namespaced(Client::new(config).unwrap(), "ns");
    // A 1 s server-side watch timeout makes the stall bound 2.1 s.
    // The hand-rolled server answers plain lists and watches only (no streaming list).
    let reflector_config = ReflectorConfig::default()
        .paged_list()
        .watch_timeout(Duration::from_secs(1))
        .idle_timeout(Duration::from_secs(1))
        .backoff(BackoffConfig {
            initial: Duration::from_millis(50),
            jitter: 0.0,
            ..Default::default()
        });
    let idle = reflector_config.effective_idle_timeout();
    assert_eq!(idle, Duration::from_millis(2100));
    let reflector = Reflector::new(api, reflector_config);
    let store = reflector.store();
    let mut deltas = reflector.into_stream();

    let started = Instant::now();
    let mut got = Vec::new();
    while got.len() < 6 {
        let item = tokio::time::timeout(Duration::from_secs(30), deltas.next())
            .await
            .expect("the reflector made no progress for 30 s")
            .expect("the reflector stream ended");
        got.push(match item {
            Ok(Delta::Added(o)) => {
                format!("added {}", o.metadata.resource_version.clone().unwrap())
            }
            Ok(Delta::Replaced { resource_version }) => format!("replaced {resource_version}"),
            Ok(Delta::Updated { new, .. }) => {
                format!("updated {}", new.metadata.resource_version.clone().unwrap())
            }
            Ok(other) => format!("{other:?}"),
            Err(ReflectorError::IdleTimeout(d)) => format!("idle {}ms", d.as_millis()),
            Err(e) => format!("error {e}"),
        });
    }
    assert_eq!(
        got,
        [
            "added 3",
            "replaced 5",
            "updated 6",
            // Headers, an event and a bookmark, then silence: restarted.
            "idle 2100ms",
            // Accepted but never answered: restarted too.
            "idle 2100ms",
            "updated 8",
        ]
    );
    // Two stalls of 2.1 s each, then success: well under the 2×320 s of the defaults.
    let elapsed = started.elapsed();
    assert!(elapsed >= 2 * idle, "restarted too early: {elapsed:?}");
    assert!(elapsed < Duration::from_secs(20), "took {elapsed:?}");
    let stored: Vec<Option<String>> = store
        .list()
        .iter()
        .map(|o| o.metadata.resource_version.clone())
        .collect();
    assert_eq!(stored, [Some("8".to_string())]);

    let requests = requests.lock().unwrap().clone();
    let lists = requests
        .iter()
        .filter(|l| !l.contains("watch=true"))
        .count();
    assert_eq!(lists, 1, "a stall must not relist: {requests:?}");
    let watch_rvs: Vec<String> = requests
        .iter()
        .filter(|l| l.contains("watch=true"))
        .map(|l| query_param(l, "resourceVersion").unwrap_or_default())
        .collect();
    // The first restart resumes after the bookmark, the second from the same place.
    assert_eq!(watch_rvs, ["5", "7", "7"]);
}
