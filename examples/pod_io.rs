//! Pod I/O: logs (once and followed), exec with stdin and an exit code, port-forward
//! through a local listener, and eviction against a PodDisruptionBudget.
//!
//! Runs against $KUBECONFIG when set, else against a freshly started embedded API server
//! with its simulated kubelet (pods run there: built-in commands, an echo service on
//! every port). A cluster whose nodes run no pod within 30 s (such as a control plane
//! without nodes) gets the answers for a pod that runs nowhere instead.

use futures::StreamExt;
use kubewright::apiserver::{Kubelet, TestServer};
use kubewright::client::config::{KubeConfigOptions, Kubeconfig};
use kubewright::client::pod::{AttachParams, EvictParams, LogParams};
use kubewright::core::{DeleteParams, ObjectMeta, PostParams};
use kubewright::k8s_openapi::api::core::v1::{Namespace, Pod};
use kubewright::k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kubewright::{Api, Client, Config};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::main]
async fn main() -> std::process::ExitCode {
    kubewright_examples::exit_code(run().await)
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    // The embedded server with its kubelet, unless a cluster is given.
    let (client, _server) = match std::env::var("KUBECONFIG").ok().filter(|k| !k.is_empty()) {
        Some(path) => {
            let config = Config::from_custom_kubeconfig(
                Kubeconfig::read_from(path)?,
                &KubeConfigOptions::default(),
            )?;
            println!("connected to the cluster from the kubeconfig");
            (Client::new(config)?, None)
        }
        None => {
            let server = TestServer::builder()
                .kubelet(Kubelet::new())
                .start()
                .await?;
            let config = Config::from_custom_kubeconfig(
                Kubeconfig::from_yaml(&server.kubeconfig())?,
                &KubeConfigOptions::default(),
            )?;
            println!(
                "started an embedded API server with a simulated kubelet at {}",
                server.url()
            );
            (Client::new(config)?, Some(server))
        }
    };
    let ns = format!("pod-io-{}", std::process::id());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &Namespace {
                metadata: ObjectMeta {
                    name: Some(ns.clone()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await?;
    let result = demo(&client, &ns).await;
    let _ = namespaces.delete(&ns, &DeleteParams::default()).await;
    result
}

fn pod(name: &str) -> Result<Pod, serde_json::Error> {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "app", "image": "busybox:1.36",
                                 "command": ["sh", "-c", "echo started; sleep 3600"]}]}
    }))
}

/// Waits until the pod runs; false when no node ran it in time.
async fn running(pods: &Api<Pod>, name: &str) -> Result<bool, kubewright::Error> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        let p = pods.get(name).await?;
        if p.status.and_then(|s| s.phase).as_deref() == Some("Running") {
            return Ok(true);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(false)
}

async fn demo(client: &Client, ns: &str) -> Result<(), Box<dyn std::error::Error>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    for name in ["web-0", "web-1"] {
        pods.create(&PostParams::default(), &pod(name)?).await?;
    }
    if !running(&pods, "web-0").await? {
        println!("no node ran web-0 within 30 s; what a pod that runs nowhere answers:");
        let log = pods.logs("web-0", &LogParams::default()).await?;
        println!("  logs: {:?} (no node, no log yet)", log);
        match pods.exec("web-0", ["true"], &AttachParams::default()).await {
            Err(e) => println!("  exec: {e}"),
            Ok(_) => return Err("exec on a pod that runs nowhere was accepted".into()),
        }
        return Ok(());
    }

    // Logs: all of them, then the last line followed for a moment.
    let log = pods.logs("web-0", &LogParams::default()).await?;
    println!("1. logs of web-0:\n{}", log.trim_end());
    let follow = LogParams {
        follow: true,
        tail_lines: Some(1),
        ..Default::default()
    };
    let mut lines = pods.log_stream("web-0", &follow).await?;
    if let Ok(Some(line)) = tokio::time::timeout(Duration::from_secs(5), lines.next()).await {
        println!("   followed: {}", line?);
    }
    drop(lines);

    // exec: stdin through `cat`, then an exit code.
    let mut cat = pods
        .exec(
            "web-0",
            ["cat"],
            &AttachParams::default().stdin(true).stderr(false),
        )
        .await?;
    let (mut stdin, mut stdout) = (
        cat.stdin().ok_or("no stdin")?,
        cat.stdout().ok_or("no stdout")?,
    );
    stdin.write_all(b"hello through stdin\n").await?;
    drop(stdin);
    let mut echoed = String::new();
    stdout.read_to_string(&mut echoed).await?;
    let status = cat.join().await?;
    println!(
        "2. exec cat: {:?}, exit code {}",
        echoed.trim_end(),
        status.code
    );
    let failing = pods
        .exec("web-0", ["sh", "-c", "exit 3"], &AttachParams::default())
        .await?;
    let status = failing.join().await?;
    println!("   exec sh -c 'exit 3': exit code {}", status.code);

    // port-forward: a local listener, each connection a WebSocket to port 8080.
    let forward = pods
        .forward_local("web-0", 8080, "127.0.0.1:0".parse()?)
        .await?;
    let mut conn = tokio::net::TcpStream::connect(forward.local_addr()).await?;
    conn.write_all(b"ping").await?;
    let mut answer = [0u8; 4];
    tokio::time::timeout(Duration::from_secs(10), conn.read_exact(&mut answer)).await??;
    println!(
        "3. port-forward {} -> web-0:8080 answered {:?}",
        forward.local_addr(),
        String::from_utf8_lossy(&answer)
    );

    // Eviction against a budget that wants both pods up.
    running(&pods, "web-1").await?;
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), ns);
    let budget: PodDisruptionBudget = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}
    }))?;
    pdbs.create(&PostParams::default(), &budget).await?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match pods.evict("web-0", &EvictParams::default()).await {
            Err(kubewright::Error::EvictionBlocked(status)) => {
                println!("4. eviction of web-0 blocked: {}", status.message);
                break;
            }
            // The budget's status is computed by the disruption controller: until then
            // the eviction is refused as well, with another message.
            Err(e) if e.is_too_many_requests() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => return Err(e.into()),
            Ok(_) => return Err("web-0 was evicted despite the budget".into()),
        }
    }
    Ok(())
}
