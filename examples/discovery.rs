//! Discovery and the RestMapper: what does the server serve, and what does `deploy` mean?

use kubewright::client::discovery::Discovery;
use kubewright_examples::Connection;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    kubewright_examples::exit_code(run().await)
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let conn = Connection::from_env().await?;
    let discovery = Discovery::run(&conn.client).await?;
    println!("aggregated discovery: {}", discovery.aggregated);
    for group in discovery.groups() {
        let name = if group.name.is_empty() {
            "core"
        } else {
            &group.name
        };
        println!(
            "{name:<36} {:?} ({} resources)",
            group.versions,
            group.preferred_resources().len()
        );
    }
    let mapper = discovery.rest_mapper();
    for typed in [
        "po",
        "deploy",
        "deployments.apps",
        "crd",
        "events.events.k8s.io",
        "Lease",
    ] {
        match mapper.resolve(typed) {
            Some(r) => println!(
                "{typed:<24} -> {}/{} {} ({:?}, subresources {:?})",
                r.group, r.version, r.plural, r.caps.scope, r.caps.subresources
            ),
            None => println!("{typed:<24} -> not served"),
        }
    }
    println!(
        "category all: {:?}",
        mapper
            .category("all")
            .iter()
            .map(|r| r.plural.as_str())
            .collect::<Vec<_>>()
    );
    Ok(())
}
