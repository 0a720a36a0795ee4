//! Leader election over a Lease: two candidates, one leads; when it stops (releasing the
//! lease) the other takes over at once.

use kubewright::runtime::leaderelection::{LeaderElector, LeaseLock};
use kubewright_examples::Connection;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    kubewright_examples::exit_code(run().await)
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let conn = Connection::from_env().await?;
    let ns = conn.client.default_namespace().to_string();
    let lease = format!("example-lease-{:06x}", std::process::id());
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    let mut candidates = Vec::new();
    for id in ["alpha", "beta"] {
        let lock = LeaseLock::new(conn.client.clone(), &ns, &lease, id);
        let tx = tx.clone();
        let elector = LeaderElector::builder(lock)
            .lease_duration(Duration::from_secs(4))
            .renew_deadline(Duration::from_secs(3))
            .retry_period(Duration::from_millis(500))
            .release_on_cancel(true)
            .on_started_leading(move |leading: CancellationToken| {
                let tx = tx.clone();
                async move {
                    let _ = tx.send(id.to_string());
                    leading.cancelled().await; // the leader's work goes here
                }
            })
            .on_new_leader(move |leader| println!("[{id}] sees leader {leader}"))
            .build()?;
        let stop = CancellationToken::new();
        let handle = tokio::spawn({
            let stop = stop.clone();
            async move { elector.run(stop).await }
        });
        candidates.push((id, stop, Some(handle)));
    }
    let first = tokio::time::timeout(Duration::from_secs(30), rx.recv())
        .await?
        .ok_or("no leader")?;
    println!("{first} leads");
    // Stop the leader: it releases the lease and the other candidate takes over.
    let started = Instant::now();
    for (id, stop, handle) in &mut candidates {
        if *id == first {
            stop.cancel();
            if let Some(h) = handle.take() {
                let _ = h.await;
            }
        }
    }
    let second = tokio::time::timeout(Duration::from_secs(30), rx.recv())
        .await?
        .ok_or("no new leader")?;
    println!(
        "{second} took over {:?} after {first} stopped (lease duration 4s: the release made it immediate)",
        started.elapsed()
    );
    for (_, stop, handle) in candidates {
        stop.cancel();
        if let Some(h) = handle {
            let _ = h.await;
        }
    }
    Ok(())
}
