//! Protobuf responses over HTTP from a running server.

use super::decode;
use crate::http::server::TestServer;
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

/// Reads length-prefixed protobuf watch frames from a streaming body.
struct Frames {
    body: Incoming,
    buf: Vec<u8>,
}

impl Frames {
    /// The next WatchEvent: (type, decoded object).
    async fn next(&mut self) -> (String, Value) {
        loop {
            if self.buf.len() >= 4 {
                let n = u32::from_be_bytes(self.buf[..4].try_into().unwrap()) as usize;
                if self.buf.len() >= 4 + n {
                    let ev: Vec<u8> = self.buf.drain(..4 + n).skip(4).collect();
                    return watch_event(&ev);
                }
            }
            let frame = tokio::time::timeout(std::time::Duration::from_secs(10), self.body.frame())
                .await
                .expect("a watch event in time")
                .expect("the stream is open")
                .unwrap();
            if let Ok(data) = frame.into_data() {
                self.buf.extend_from_slice(&data);
            }
        }
    }
}

/// metav1.WatchEvent{type = 1, object = 2: RawExtension{raw = 1}}.
fn watch_event(ev: &[u8]) -> (String, Value) {
    fn fields(b: &[u8]) -> Vec<(u8, Vec<u8>)> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < b.len() {
            let key = b[i];
            assert_eq!(key & 7, 2, "length-delimited fields only");
            let (mut n, mut shift) = (0usize, 0);
            loop {
                i += 1;
                n |= usize::from(b[i] & 0x7f) << shift;
                shift += 7;
                if b[i] & 0x80 == 0 {
                    break;
                }
            }
            i += 1;
            out.push((key >> 3, b[i..i + n].to_vec()));
            i += n;
        }
        out
    }
    let f = fields(ev);
    assert_eq!(f.len(), 2, "type and object");
    assert_eq!((f[0].0, f[1].0), (1, 2));
    let raw = fields(&f[1].1);
    assert_eq!(raw[0].0, 1);
    (
        String::from_utf8(f[0].1.clone()).unwrap(),
        decode(&raw[0].1).unwrap(),
    )
}

#[tokio::test]
async fn watch_in_protobuf() {
    let (server, c) = start().await;
    let cm = |name: &str, v: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "labels": {"t": "pb"}}, "data": {"v": v}})
    };
    c.json(
        "POST",
        "/api/v1/namespaces/default/configmaps",
        cm("a", "1"),
    )
    .await;
    let resp = c
        .send(
            "GET",
            "/api/v1/namespaces/default/configmaps?labelSelector=t%3Dpb&watch=true&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
            PB,
            None,
        )
        .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.headers()["content-type"],
        "application/vnd.kubernetes.protobuf;stream=watch"
    );
    // A second watcher shares the rendering of each event.
    let resp2 = c
        .send(
            "GET",
            "/api/v1/namespaces/default/configmaps?labelSelector=t%3Dpb&watch=true&resourceVersion=0",
            &format!("{PB}, application/json"),
            None,
        )
        .await;
    let mut w = Frames {
        body: resp.into_body(),
        buf: Vec::new(),
    };
    let mut w2 = Frames {
        body: resp2.into_body(),
        buf: Vec::new(),
    };
    let (ty, obj) = w.next().await;
    assert_eq!(ty, "ADDED");
    assert_eq!(obj["kind"], "ConfigMap");
    assert_eq!(obj["metadata"]["name"], "a");
    assert_eq!(obj["data"], json!({"v": "1"}));
    let (ty, obj) = w.next().await;
    assert_eq!(ty, "BOOKMARK");
    assert_eq!(
        obj["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    assert_eq!(w2.next().await.0, "ADDED");

    c.json(
        "POST",
        "/api/v1/namespaces/default/configmaps",
        cm("b", "2"),
    )
    .await;
    c.json(
        "PUT",
        "/api/v1/namespaces/default/configmaps/b",
        cm("b", "3"),
    )
    .await;
    let (code, _, _) = c
        .call(
            "DELETE",
            "/api/v1/namespaces/default/configmaps/b",
            PB,
            None,
        )
        .await;
    assert_eq!(code, 200);
    for w in [&mut w, &mut w2] {
        let (ty, obj) = w.next().await;
        assert_eq!((ty.as_str(), &obj["data"]), ("ADDED", &json!({"v": "2"})));
        let (ty, obj) = w.next().await;
        assert_eq!(
            (ty.as_str(), &obj["data"]),
            ("MODIFIED", &json!({"v": "3"}))
        );
        let (ty, obj) = w.next().await;
        assert_eq!(ty, "DELETED");
        assert_eq!(obj["metadata"]["name"], "b");
        assert!(obj["metadata"]["resourceVersion"].as_str().is_some());
    }

    // A resourceVersion past the history: an ERROR event carrying a Status.
    let rv = c
        .json(
            "POST",
            "/api/v1/namespaces/default/configmaps",
            cm("c", "4"),
        )
        .await["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    c.json(
        "PUT",
        "/api/v1/namespaces/default/configmaps/c",
        cm("c", "5"),
    )
    .await;
    server.compact();
    let resp = c
        .send(
            "GET",
            &format!("/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv}"),
            PB,
            None,
        )
        .await;
    assert_eq!(resp.status(), 200);
    let mut w = Frames {
        body: resp.into_body(),
        buf: Vec::new(),
    };
    let (ty, obj) = w.next().await;
    assert_eq!(ty, "ERROR");
    assert_eq!(obj["kind"], "Status");
    assert_eq!(obj["reason"], "Expired");
    assert_eq!(obj["code"], 410);
}

#[tokio::test]
async fn watch_of_a_custom_resource_falls_back_to_json() {
    let (_server, c) = start().await;
    c.json(
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "gadgets.example.com"},
            "spec": {"group": "example.com", "scope": "Cluster",
                "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object"}}}]}}),
    )
    .await;
    let path = "/apis/example.com/v1/gadgets?watch=true";
    let mut resp = None;
    for _ in 0..100 {
        let r = c
            .send("GET", path, &format!("{PB}, application/json"), None)
            .await;
        if r.status() == 200 {
            resp = Some(r);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let resp = resp.expect("the CRD was never established");
    assert_eq!(resp.headers()["content-type"], "application/json");
    let (code, _, _) = c.call("GET", path, PB, None).await;
    assert_eq!(code, 406);
}
