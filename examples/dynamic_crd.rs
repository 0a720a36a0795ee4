//! The dynamic client on a custom resource: install the Monitor CRD (from the derive
//! macro), wait until it is Established, then create and list Monitors as
//! `DynamicObject`s, without any compiled-in type.

use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kubewright::Api;
use kubewright::core::{
    ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams, Scope, WatchEvent,
    WatchParams,
};
use kubewright_examples::Connection;
use kubewright_examples::monitor::Monitor;
use std::time::Duration;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    kubewright_examples::exit_code(run().await)
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let conn = Connection::from_env().await?;
    let crds: Api<CustomResourceDefinition> = Api::all(conn.client.clone());
    let crd = Monitor::crd();
    let name = crd.metadata.name.clone().unwrap_or_default();
    if crds.get_opt(&name).await?.is_none() {
        crds.create(&PostParams::default(), &crd).await?;
    }
    // Wait for Established with a deadline (watch, no polling).
    let wp = WatchParams::default()
        .fields(&format!("metadata.name={name}"))
        .timeout(30);
    let established = tokio::time::timeout(Duration::from_secs(30), async {
        let mut events = Box::pin(crds.watch(&wp, "").await?);
        while let Some(ev) = events.next().await {
            if let WatchEvent::Added(c) | WatchEvent::Modified(c) = ev? {
                let conds = c.status.and_then(|s| s.conditions).unwrap_or_default();
                if conds
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
                {
                    return Ok::<bool, kubewright::Error>(true);
                }
            }
        }
        Ok(false)
    })
    .await??;
    println!("CRD {name} established: {established}");

    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(kubewright_examples::monitor::GROUP, "v1", "Monitor"),
        "monitors",
        Scope::Namespaced,
    );
    let ns = conn.client.default_namespace().to_string();
    let monitors: Api<DynamicObject> = Api::namespaced_with(conn.client.clone(), &ns, &ar);
    let obj = DynamicObject::new("dynamic-example", &ar)
        .data(serde_json::json!({"spec": {"target": "https://example.com", "replicas": 1}}));
    let created = monitors.create(&PostParams::default(), &obj).await?;
    println!(
        "created {} with defaults applied: intervalSeconds = {}",
        created.metadata.name.clone().unwrap_or_default(),
        created.data["spec"]["intervalSeconds"]
    );
    for m in monitors.list(&ListParams::default()).await? {
        println!(
            "monitor {} -> {}",
            m.metadata.name.clone().unwrap_or_default(),
            m.data["spec"]["target"]
        );
    }
    // Invalid objects are rejected by the schema with the field named.
    let bad =
        DynamicObject::new("bad", &ar).data(serde_json::json!({"spec": {"target": "ftp://nope"}}));
    if let Err(e) = monitors.create(&PostParams::default(), &bad).await {
        println!("rejected as expected: {e}");
    }
    monitors
        .delete("dynamic-example", &Default::default())
        .await?;
    Ok(())
}
