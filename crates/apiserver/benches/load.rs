//! Load benchmark of the embedded API server (a benchmark, not a test):
//! N ConfigMaps created by concurrent writers, listed in pages, and watched by W
//! watchers. Reports objects/s, page latency, event fan-out and memory per object.
//!
//! `cargo bench -p kubewright-apiserver --bench load` (KW_LOAD_OBJECTS, KW_LOAD_WATCHERS
//! override the defaults of 50,000 objects and 100 watchers; KW_LOAD_KIND=pods creates
//! pods instead of ConfigMaps). Also reports the server's CPU while idle afterwards: the
//! controllers' periodic passes over what is stored.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use kubewright_apiserver::TestServer;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u64>().ok())
        })
        .map(|pages| pages * 4096)
        .unwrap_or(0)
}

/// CPU time (user + system) of this process so far.
fn cpu_time() -> Duration {
    let ticks = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            let rest = s.rsplit_once(')')?.1.to_string();
            let f: Vec<u64> = rest
                .split_whitespace()
                .skip(11)
                .take(2)
                .filter_map(|x| x.parse().ok())
                .collect();
            Some(f.iter().sum::<u64>())
        })
        .unwrap_or(0);
    // USER_HZ is 100 on Linux.
    Duration::from_millis(ticks * 10)
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let objects = env_usize("KW_LOAD_OBJECTS", 50_000);
    let watchers = env_usize("KW_LOAD_WATCHERS", 100);
    let writers = 32;
    let pods = std::env::var("KW_LOAD_KIND").is_ok_and(|k| k == "pods");
    let plural = if pods { "pods" } else { "configmaps" };
    let server = TestServer::builder()
        .history(objects + 10_000)
        .start()
        .await
        .expect("server");
    let base = server.url();
    let http: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let ns = "load";
    let create_ns = hyper::Request::post(format!("{base}/api/v1/namespaces"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(format!(
            r#"{{"apiVersion":"v1","kind":"Namespace","metadata":{{"name":"{ns}"}}}}"#
        ))))
        .expect("request");
    http.request(create_ns).await.expect("namespace");

    // Watchers from "now".
    let rv0 = {
        let r = http
            .request(
                hyper::Request::get(format!("{base}/api/v1/namespaces/{ns}/{plural}?limit=1"))
                    .body(Full::new(Bytes::new()))
                    .expect("req"),
            )
            .await
            .expect("list");
        let v: serde_json::Value =
            serde_json::from_slice(&r.into_body().collect().await.expect("body").to_bytes())
                .expect("json");
        v["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or("0")
            .to_string()
    };
    let received = Arc::new(AtomicU64::new(0));
    let mut watch_tasks = Vec::new();
    for _ in 0..watchers {
        let http = http.clone();
        let url = format!(
            "{base}/api/v1/namespaces/{ns}/{plural}?watch=true&resourceVersion={rv0}&timeoutSeconds=600"
        );
        let received = received.clone();
        watch_tasks.push(tokio::spawn(async move {
            let resp = http
                .request(
                    hyper::Request::get(url)
                        .body(Full::new(Bytes::new()))
                        .expect("req"),
                )
                .await
                .expect("watch");
            let mut body = resp.into_body();
            let mut seen = 0usize;
            while let Some(Ok(frame)) = body.frame().await {
                if let Ok(data) = frame.into_data() {
                    let n = data.iter().filter(|b| **b == b'\n').count();
                    seen += n;
                    received.fetch_add(n as u64, Ordering::Relaxed);
                    if seen >= objects {
                        break;
                    }
                }
            }
        }));
    }

    let rss_before = rss_bytes();
    let start = Instant::now();
    let next = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..writers {
        let http = http.clone();
        let base = base.clone();
        let next = next.clone();
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                if i >= objects {
                    break;
                }
                let body = if pods {
                    format!(
                        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"pod-{i:06}","labels":{{"app":"load","shard":"{}"}}}},"spec":{{"containers":[{{"name":"app","image":"registry.example.com/app:1.2.3","args":["--replica={i}"]}}]}}}}"#,
                        i % 10
                    )
                } else {
                    format!(
                        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"cm-{i:06}","labels":{{"app":"load","shard":"{}"}}}},"data":{{"config.yaml":"key: value-{i}\nreplicas: 3\nimage: registry.example.com/app:1.2.3\n"}}}}"#,
                        i % 10
                    )
                };
                let req = hyper::Request::post(format!("{base}/api/v1/namespaces/{ns}/{plural}"))
                    .header("content-type", "application/json")
                    .body(Full::new(Bytes::from(body)))
                    .expect("request");
                let resp = http.request(req).await.expect("create");
                assert_eq!(resp.status(), 201);
                let _ = resp.into_body().collect().await;
            }
        }));
    }
    for t in tasks {
        t.await.expect("writer");
    }
    let create_secs = start.elapsed().as_secs_f64();
    let rss_after = rss_bytes();

    // Paged list (500 per page, like client-go's pager).
    let mut page_times = Vec::new();
    let list_start = Instant::now();
    let mut token: Option<String> = None;
    let mut listed = 0usize;
    loop {
        let mut url =
            format!("{base}/api/v1/namespaces/{ns}/{plural}?limit=500&labelSelector=app%3Dload");
        if let Some(t) = &token {
            url.push_str(&format!("&continue={t}"));
        }
        let t0 = Instant::now();
        let resp = http
            .request(
                hyper::Request::get(url)
                    .body(Full::new(Bytes::new()))
                    .expect("req"),
            )
            .await
            .expect("list");
        let bytes = resp.into_body().collect().await.expect("body").to_bytes();
        page_times.push(t0.elapsed());
        let v: serde_json::Value = serde_json::from_slice(&bytes).expect("json");
        listed += v["items"].as_array().map_or(0, Vec::len);
        token = v["metadata"]["continue"]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(str::to_string);
        if token.is_none() {
            break;
        }
    }
    let list_secs = list_start.elapsed().as_secs_f64();
    page_times.sort();

    let fanout_deadline = Instant::now() + Duration::from_secs(120);
    while received.load(Ordering::Relaxed) < (objects * watchers) as u64
        && Instant::now() < fanout_deadline
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let fanout_secs = start.elapsed().as_secs_f64();
    for t in watch_tasks {
        t.abort();
    }
    // Idle: nothing is written; the controllers still pass over what is stored (every
    // second), and that is all the CPU spent here.
    let idle = Duration::from_secs(5);
    let cpu0 = cpu_time();
    tokio::time::sleep(idle).await;
    let idle_cpu = cpu_time().saturating_sub(cpu0);

    println!("embedded API server load benchmark");
    println!("  objects created          {objects} {plural} by {writers} concurrent writers");
    println!(
        "  create throughput        {:.0} objects/s ({create_secs:.2} s)",
        objects as f64 / create_secs
    );
    println!(
        "  paged list (500/page, label-selected)  {listed} objects in {list_secs:.3} s; page p50 {:?}, p99 {:?}",
        percentile(&page_times, 0.5),
        percentile(&page_times, 0.99)
    );
    println!(
        "  watch fan-out            {} of {} events delivered to {watchers} watchers ({:.0} events/s)",
        received.load(Ordering::Relaxed),
        objects * watchers,
        received.load(Ordering::Relaxed) as f64 / fanout_secs
    );
    println!(
        "  memory                   RSS +{:.1} MiB during creation, {:.0} bytes/object (includes the watch history)",
        (rss_after.saturating_sub(rss_before)) as f64 / 1048576.0,
        rss_after.saturating_sub(rss_before) as f64 / objects as f64
    );
    println!(
        "  idle CPU                 {:.1}% of one core over {idle:?} ({:?})",
        idle_cpu.as_secs_f64() * 100.0 / idle.as_secs_f64(),
        idle_cpu
    );
    assert_eq!(listed, objects, "the paged list must return every object");
}
