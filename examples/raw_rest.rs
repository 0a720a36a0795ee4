//! The raw REST client: any verb, path and body, with typed or raw responses.

use kubewright_examples::Connection;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    kubewright_examples::exit_code(run().await)
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let conn = Connection::from_env().await?;
    let client = &conn.client;
    // A typed response.
    let version: serde_json::Value = client
        .request(http::Request::get("/version").body(vec![])?)
        .await?;
    println!("server version: {}", version["gitVersion"]);
    // A text response.
    let ready = client
        .request_text(http::Request::get("/readyz?verbose").body(vec![])?)
        .await?;
    println!("readyz:\n{ready}");
    // A POST with a JSON body, then a raw GET of the same object.
    let ns = client.default_namespace().to_string();
    let body = serde_json::to_vec(&serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"generateName": "raw-"}, "data": {"made-by": "raw_rest example"}
    }))?;
    let req = http::Request::post(format!("/api/v1/namespaces/{ns}/configmaps"))
        .header("content-type", "application/json")
        .body(body)?;
    let created: serde_json::Value = client.request(req).await?;
    let name = created["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let (status, bytes) = client
        .request_bytes(
            http::Request::get(format!("/api/v1/namespaces/{ns}/configmaps/{name}"))
                .body(vec![])?,
        )
        .await?;
    println!("GET {name}: {status}, {} bytes", bytes.len());
    // Errors are typed.
    let missing = http::Request::get(format!("/api/v1/namespaces/{ns}/configmaps/does-not-exist"))
        .body(vec![])?;
    match client.request_bytes(missing).await {
        Err(err) => println!("missing object: is_not_found = {}", err.is_not_found()),
        Ok(_) => println!("unexpected: the object exists"),
    }
    client
        .request_bytes(
            http::Request::delete(format!("/api/v1/namespaces/{ns}/configmaps/{name}"))
                .body(vec![])?,
        )
        .await?;
    Ok(())
}
