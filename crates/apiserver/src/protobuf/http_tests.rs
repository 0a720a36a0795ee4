//! Protobuf responses over HTTP from a running server.

use super::decode;
use crate::server::TestServer;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use serde_json::{Value, json};

const PB: &str = "application/vnd.kubernetes.protobuf";

struct Client {
    url: String,
}

impl Client {
    async fn send(
        &self,
        method: &str,
        path: &str,
        accept: &str,
        body: Option<(&str, Vec<u8>)>,
    ) -> http::Response<Incoming> {
        let uri: http::Uri = format!("{}{path}", self.url).parse().unwrap();
        let host = uri.authority().unwrap().to_string();
        let stream = tokio::net::TcpStream::connect(&host).await.unwrap();
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .unwrap();
        tokio::spawn(conn);
        let mut b = http::Request::builder()
            .method(method)
            .uri(uri.path_and_query().unwrap().as_str())
            .header("host", host)
            .header("accept", accept);
        let data = match body {
            Some((ct, data)) => {
                b = b.header("content-type", ct);
                data
            }
            None => Vec::new(),
        };
        sender
            .send_request(b.body(Full::new(Bytes::from(data))).unwrap())
            .await
            .unwrap()
    }

    /// Sends a request; the status, the content type and the whole body.
    async fn call(
        &self,
        method: &str,
        path: &str,
        accept: &str,
        body: Option<(&str, Vec<u8>)>,
    ) -> (u16, String, Vec<u8>) {
        let resp = self.send(method, path, accept, body).await;
        let status = resp.status().as_u16();
        let ct = resp
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        let body = resp
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec();
        (status, ct, body)
    }

    async fn json(&self, method: &str, path: &str, body: Value) -> Value {
        let (code, _, b) = self
            .call(
                method,
                path,
                "application/json",
                Some(("application/json", serde_json::to_vec(&body).unwrap())),
            )
            .await;
        assert!(code < 300, "{code} {}", String::from_utf8_lossy(&b));
        serde_json::from_slice(&b).unwrap()
    }
}

async fn start() -> (TestServer, Client) {
    let server = TestServer::start().await.unwrap();
    let client = Client { url: server.url() };
    (server, client)
}

#[tokio::test]
async fn get_list_create_delete_in_protobuf() {
    let (_server, c) = start().await;
    let created = c
        .json(
            "POST",
            "/api/v1/namespaces/default/configmaps",
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "a", "labels": {"x": "y"}},
                   "data": {"k": "v"}, "binaryData": {"b": "AAE="}}),
        )
        .await;

    // GET: the stored object, in protobuf, decodes to what JSON clients get.
    let (code, ct, body) = c
        .call("GET", "/api/v1/namespaces/default/configmaps/a", PB, None)
        .await;
    assert_eq!((code, ct.as_str()), (200, PB));
    assert!(body.starts_with(b"k8s\0"));
    let got = decode(&body).unwrap();
    assert_eq!(got, created);

    // Preferred over JSON when listed first.
    let (_, ct, _) = c
        .call(
            "GET",
            "/api/v1/namespaces/default/configmaps/a",
            &format!("{PB}, application/json"),
            None,
        )
        .await;
    assert_eq!(ct, PB);
    let (_, ct, _) = c
        .call(
            "GET",
            "/api/v1/namespaces/default/configmaps/a",
            &format!("application/json, {PB}"),
            None,
        )
        .await;
    assert_eq!(ct, "application/json");

    // LIST: a ConfigMapList message.
    let (code, ct, body) = c
        .call("GET", "/api/v1/namespaces/default/configmaps", PB, None)
        .await;
    assert_eq!((code, ct.as_str()), (200, PB));
    let list = decode(&body).unwrap();
    assert_eq!(list["kind"], "ConfigMapList");
    assert_eq!(list["apiVersion"], "v1");
    assert!(list["metadata"]["resourceVersion"].as_str().is_some());
    let items = list["items"].as_array().unwrap();
    let a = items.iter().find(|i| i["metadata"]["name"] == "a").unwrap();
    assert_eq!(a["data"], json!({"k": "v"}));

    // CREATE with a protobuf body and a protobuf answer.
    let body = super::encode(&json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx",
                    "resources": {"limits": {"cpu": "500m"}}}]}}}}))
    .unwrap();
    let (code, ct, resp) = c
        .call(
            "POST",
            "/apis/apps/v1/namespaces/default/deployments",
            PB,
            Some((PB, body)),
        )
        .await;
    assert_eq!(
        (code, ct.as_str()),
        (201, PB),
        "{}",
        String::from_utf8_lossy(&resp)
    );
    let dep = decode(&resp).unwrap();
    assert_eq!(dep["spec"]["replicas"], 2);
    assert_eq!(
        dep["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"],
        "500m"
    );
    assert!(dep["metadata"]["uid"].as_str().is_some());
    assert!(dep["metadata"]["creationTimestamp"].as_str().is_some());

    // PATCH and DELETE answer protobuf too.
    let (code, ct, resp) = c
        .call(
            "PATCH",
            "/api/v1/namespaces/default/configmaps/a",
            PB,
            Some((
                "application/merge-patch+json",
                br#"{"data":{"k":"w"}}"#.to_vec(),
            )),
        )
        .await;
    assert_eq!((code, ct.as_str()), (200, PB));
    assert_eq!(decode(&resp).unwrap()["data"]["k"], "w");
    let (code, ct, resp) = c
        .call(
            "DELETE",
            "/api/v1/namespaces/default/configmaps/a",
            PB,
            None,
        )
        .await;
    assert_eq!((code, ct.as_str()), (200, PB));
    assert_eq!(decode(&resp).unwrap()["status"], "Success");

    // Errors are protobuf Status messages.
    let (code, ct, resp) = c
        .call("GET", "/api/v1/namespaces/default/configmaps/a", PB, None)
        .await;
    assert_eq!((code, ct.as_str()), (404, PB));
    let status = decode(&resp).unwrap();
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "NotFound");
    assert_eq!(status["code"], 404);

    // Table requests stay JSON.
    let (code, ct, _) = c
        .call(
            "GET",
            "/api/v1/namespaces/default/configmaps",
            "application/json;as=Table;v=v1;g=meta.k8s.io",
            None,
        )
        .await;
    assert_eq!((code, ct.as_str()), (200, "application/json"));
}

#[tokio::test]
async fn custom_resources_fall_back_to_json() {
    let (_server, c) = start().await;
    c.json(
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object",
                        "x-kubernetes-preserve-unknown-fields": true}}}]}}),
    )
    .await;
    // The CRD itself is a built-in kind.
    let (code, ct, body) = c
        .call(
            "GET",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com",
            PB,
            None,
        )
        .await;
    assert_eq!((code, ct.as_str()), (200, PB));
    let crd = decode(&body).unwrap();
    assert_eq!(crd["spec"]["names"]["kind"], "Widget");
    let path = "/apis/example.com/v1/namespaces/default/widgets";
    let mut created = false;
    for _ in 0..100 {
        let (code, _, _) = c
            .call(
                "POST",
                path,
                "application/json",
                Some((
                    "application/json",
                    br#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"a":1}}"#.to_vec(),
                )),
            )
            .await;
        if code == 201 {
            created = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(created, "the CRD was never established");
    let accept = format!("{PB}, application/json");
    let (code, ct, body) = c.call("GET", &format!("{path}/w"), &accept, None).await;
    assert_eq!((code, ct.as_str()), (200, "application/json"));
    let w: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(w["spec"]["a"], 1);
    let (code, ct, _) = c.call("GET", path, &accept, None).await;
    assert_eq!((code, ct.as_str()), (200, "application/json"));
    // Protobuf only: 406, as kube-apiserver answers for custom resources.
    let (code, _, body) = c.call("GET", &format!("{path}/w"), PB, None).await;
    assert_eq!(code, 406, "{}", String::from_utf8_lossy(&body));
    let (code, _, _) = c.call("GET", path, PB, None).await;
    assert_eq!(code, 406);
}
