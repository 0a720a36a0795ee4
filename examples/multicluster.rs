//! One controller over a fleet of clusters: two embedded API servers stand in for
//! `east` and `west`; a third, `south`, joins while the controller runs and `west` leaves.
//!
//! The controller watches ConfigMaps labelled `app=greeter` in every cluster and writes,
//! in the same cluster, a `<name>-greeting` ConfigMap that says which cluster it is in.
//!
//! `cargo run -p kubewright-examples --example multicluster`

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kubewright::apiserver::TestServer;
use kubewright::client::config::{KubeConfigOptions, Kubeconfig};
use kubewright::core::{ObjectMeta, Patch, PatchParams, PostParams};
use kubewright::runtime::InformerParams;
use kubewright::runtime::controller::Action;
use kubewright::runtime::multicluster::{
    ClusterContext, ClusterStatus, Fleet, MultiClusterController,
};
use kubewright::{Api, Client};
use tokio_util::sync::CancellationToken;

const LABEL: &str = "app=greeter";

async fn client_for(server: &TestServer) -> Result<Client, Box<dyn std::error::Error>> {
    let kc = Kubeconfig::from_yaml(&server.kubeconfig())?;
    let mut config = kubewright::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())?;
    config.qps = 0.0; // the embedded server needs no client-side rate limit
    Ok(Client::new(config)?)
}

/// Writes `<name>-greeting` next to every `app=greeter` ConfigMap, in its own cluster.
async fn reconcile(
    cm: Arc<ConfigMap>,
    cx: Arc<ClusterContext<()>>,
) -> Result<Action, kubewright::Error> {
    let ns = cm.metadata.namespace.as_deref().unwrap_or("default");
    let name = cm.metadata.name.as_deref().unwrap_or_default();
    if name.ends_with("-greeting") {
        return Ok(Action::await_change());
    }
    let api: Api<ConfigMap> = Api::namespaced(cx.client.clone(), ns);
    let greeting = serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": format!("{name}-greeting")},
        "data": {"text": format!("hello from {}", cx.cluster)},
    });
    api.patch(
        &format!("{name}-greeting"),
        &PatchParams::apply("greeter").force(),
        &Patch::Apply(greeting),
    )
    .await?;
    Ok(Action::await_change())
}

fn greeter(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some([("app".to_string(), "greeter".to_string())].into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Waits for `<name>-greeting` in the cluster of `client`; returns its text.
async fn greeting(client: &Client, name: &str) -> Result<String, Box<dyn std::error::Error>> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(cm) = api.get_opt(&format!("{name}-greeting")).await?
            && let Some(text) = cm.data.as_ref().and_then(|d| d.get("text"))
        {
            return Ok(text.clone());
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!("no greeting for {name}").into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    kubewright_examples::exit_code(run().await)
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let (east, west, south) = (
        TestServer::start().await?,
        TestServer::start().await?,
        TestServer::start().await?,
    );
    let (east_c, west_c, south_c) = (
        client_for(&east).await?,
        client_for(&west).await?,
        client_for(&south).await?,
    );

    let fleet = Fleet::new();
    fleet.add("east", east_c.clone());
    fleet.add("west", west_c.clone());
    let stop = CancellationToken::new();
    let controller = MultiClusterController::<ConfigMap>::new(
        fleet.clone(),
        InformerParams::all().namespace("default").labels(LABEL),
    )
    .workers(2)
    .shutdown_on(stop.clone());
    let statuses = controller.statuses();
    let running = tokio::spawn(controller.run(reconcile, Arc::new(())));

    // The same name in two clusters: two keys, each reconciled with its own client.
    for client in [&east_c, &west_c] {
        Api::<ConfigMap>::namespaced(client.clone(), "default")
            .create(&PostParams::default(), &greeter("web"))
            .await?;
    }
    println!("east: {}", greeting(&east_c, "web").await?);
    println!("west: {}", greeting(&west_c, "web").await?);

    // South joins, west leaves, while the controller runs.
    fleet.add("south", south_c.clone());
    fleet.remove("west");
    tokio::time::timeout(
        Duration::from_secs(20),
        statuses.wait_for(|s| {
            matches!(s.get("south"), Some(ClusterStatus::Synced)) && !s.contains_key("west")
        }),
    )
    .await?;
    Api::<ConfigMap>::namespaced(south_c.clone(), "default")
        .create(&PostParams::default(), &greeter("api"))
        .await?;
    println!("south: {}", greeting(&south_c, "api").await?);
    println!("clusters: {:?}", statuses.snapshot());

    stop.cancel();
    running.await??;
    Ok(())
}
