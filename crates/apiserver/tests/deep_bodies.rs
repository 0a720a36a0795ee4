//! Request bodies nested deeply, in every format the server decodes (YAML, protobuf), get a
//! 400 and leave the server up: decoding them recurses once per level, on the stack of the
//! thread serving the request (2 MiB for the test runtime's workers, as for tokio's).
//! Embedded server only: the content types need a client of their own.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use kubewright_apiserver::TestServer;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Sends one HTTP/1.1 request; returns the status and the body as JSON.
async fn send(
    server: &TestServer,
    method: &str,
    path: &str,
    ct: &str,
    body: &[u8],
) -> (u16, Value) {
    let mut s = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: {ct}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(body).await.unwrap();
    let mut resp = Vec::new();
    s.read_to_end(&mut resp).await.unwrap();
    let text = String::from_utf8_lossy(&resp);
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    };
    (
        status,
        serde_json::from_str(&body).unwrap_or(Value::String(body)),
    )
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        s = &rest[n + 2..];
    }
    out
}

async fn alive(server: &TestServer) {
    let (status, v) = send(
        server,
        "GET",
        "/api/v1/namespaces/default",
        "application/json",
        b"",
    )
    .await;
    assert_eq!(status, 200, "{v}");
}

const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

/// kube-apiserver's answer to a body its JSON decoder finds nested too deeply, the body
/// quoted as apimachinery's `summarizeData` does (hex unless it is a JSON object).
fn too_deep(kind: &str, open: char, body: &[u8]) -> String {
    let hex: String = body[..30].iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "the object provided is unrecognized (must be of type {kind}): couldn't get version/kind; json parse error: invalid character '{open}' exceeded max depth ({hex} ...)"
    )
}

/// YAML nested 100,000 deep (2,000 in block style, whose indentation grows with the depth)
/// is refused as the JSON it converts to would be. Decoding 64 levels took 1.8 MiB of the
/// request thread's 2 MiB of stack in a debug build; the test runs on workers of 512 KiB.
#[test]
fn deep_yaml_bodies_are_refused() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_stack_size(512 << 10)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let server = TestServer::builder().start().await.unwrap();
        let n = 100_000;
        let head = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deep\nbinaryData: ";
        let mut block =
            String::from("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deep\nbinaryData:\n");
        for i in 1..2_000 {
            block.push_str(&" ".repeat(i));
            block.push_str("a:\n");
        }
        let bodies = [
            (
                format!("{head}{}{}\n", "[".repeat(n), "]".repeat(n)),
                Some('['),
            ),
            (
                format!("{head}{}1{}\n", "{a: ".repeat(n), "}".repeat(n)),
                Some('{'),
            ),
            (block, Some('{')),
            // not YAML: block entries on one line
            (format!("{head}{}1\n", "- ".repeat(n)), None),
        ];
        for (body, open) in bodies {
            for (path, kind) in [
                (CONFIGMAPS, "ConfigMap"),
                ("/apis/apps/v1/namespaces/default/deployments", "Deployment"),
            ] {
                let (status, v) =
                    send(&server, "POST", path, "application/yaml", body.as_bytes()).await;
                assert_eq!(status, 400, "{}: {v}", &body[..100]);
                assert_eq!(v["reason"], "BadRequest", "{v}");
                if let Some(open) = open {
                    assert_eq!(v["message"], too_deep(kind, open, body.as_bytes()));
                }
            }
            alive(&server).await;
        }
    });
}

/// YAML is decoded as deep as JSON (127 levels); one level deeper it is refused with
/// kube-apiserver's text for a body too deep for its decoder, and an apply patch with its
/// text for YAML too deep to convert (kube-apiserver's limits being 10,000 levels).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn yaml_is_decoded_as_deep_as_json() {
    let server = TestServer::builder().start().await.unwrap();
    let cm = |name: &str, n: usize| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  x: \"1\"\nbinaryData: {}{}\n",
            "{a: ".repeat(n),
            "}".repeat(n)
        )
    };
    // 126 levels in `binaryData`, 127 with the object: decoded (and not a ConfigMap).
    let (status, v) = send(
        &server,
        "POST",
        CONFIGMAPS,
        "application/yaml",
        cm("d", 126).as_bytes(),
    )
    .await;
    assert_eq!(status, 400, "{v}");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .starts_with("ConfigMap in version \"v1\" cannot be handled as a ConfigMap: "),
        "{v}"
    );
    let body = cm("d", 127);
    let (status, v) = send(
        &server,
        "POST",
        CONFIGMAPS,
        "application/yaml",
        body.as_bytes(),
    )
    .await;
    assert_eq!(status, 400, "{v}");
    assert_eq!(v["message"], too_deep("ConfigMap", '{', body.as_bytes()));

    // Server-side apply: the same depth, kube-apiserver's text for YAML it cannot convert.
    let apply = format!("{CONFIGMAPS}/ap?fieldManager=t");
    let ct = "application/apply-patch+yaml";
    let (status, v) = send(&server, "PATCH", &apply, ct, cm("ap", 127).as_bytes()).await;
    assert_eq!(status, 400, "{v}");
    assert_eq!(
        v["message"],
        "error decoding YAML: error converting YAML to JSON: yaml: line 7: exceeded max depth of 127"
    );
    let (status, v) = send(&server, "PATCH", &apply, ct, cm("ap", 100_000).as_bytes()).await;
    assert_eq!(status, 400, "{v}");
    let shallow = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ap\ndata:\n  x: \"1\"\n";
    let (status, v) = send(&server, "PATCH", &apply, ct, shallow.as_bytes()).await;
    assert_eq!(status, 201, "{v}");
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// A protobuf field: `tag`, then `body`'s length and `body`.
fn field(tag: &[u8], body: &[u8]) -> Vec<u8> {
    let mut out = tag.to_vec();
    let mut n = body.len();
    while n >= 0x80 {
        out.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
    out.extend_from_slice(body);
    out
}

/// A CRD `x.deep.test` in Kubernetes protobuf whose schema nests `depth` objects under
/// `properties.a` (2 messages a level: the map entry and the schema).
fn protobuf_crd(depth: usize) -> Vec<u8> {
    // JSONSchemaProps {type: string} and the fields around `properties` of {type: object}
    let mut schema =
        hex("0a00120022002a06737472696e6732003a00500060007a00900100a80200b80200c00200");
    for _ in 0..depth {
        let entry = [hex("0a0161"), field(&[0x12], &schema)].concat();
        schema = [
            hex("0a00120022002a066f626a65637432003a00500060007a00900100"),
            field(&[0xea, 0x01], &entry),
            hex("a80200b80200c00200"),
        ]
        .concat();
    }
    let version = [
        hex("0a0276311001180122"),
        field(&[], &field(&[0x0a], &schema)),
        hex("3800"),
    ]
    .concat();
    let spec = [
        hex("0a09646565702e746573741a0a0a017812002201582a002207436c7573746572"),
        field(&[0x3a], &version),
        hex("5000"),
    ]
    .concat();
    let crd = [
        field(
            &[0x0a],
            &hex("0a0b782e646565702e7465737412001a0022002a00320038004200"),
        ),
        field(&[0x12], &spec),
    ]
    .concat();
    [
        b"k8s\0".to_vec(),
        field(
            &[0x0a],
            &[
                field(&[0x0a], b"apiextensions.k8s.io/v1"),
                field(&[0x12], b"CustomResourceDefinition"),
            ]
            .concat(),
        ),
        field(&[0x12], &crd),
        hex("1a002200"),
    ]
    .concat()
}

/// A CRD in protobuf nested as deeply as JSON bodies may be (127 levels: a schema 60
/// objects deep) is created; one level deeper, or past the decoder's own limit of 100
/// messages, or 5,000 deep, a 400. (A CRD with a schema 95 objects deep, which the decoder
/// let through, took all of a 2 MiB stack to create in a debug build.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_protobuf_bodies_are_refused() {
    let server = TestServer::builder().start().await.unwrap();
    let path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let pb = "application/vnd.kubernetes.protobuf";
    for (depth, error) in [
        (
            61,
            "invalid protobuf body: the object is nested more than 127 levels deep",
        ),
        (
            95,
            "invalid protobuf body: the object is nested more than 127 levels deep",
        ),
        (
            96,
            "invalid protobuf body: messages are nested more than 100 deep (at spec.versions.schema.openAPIV3Schema.properties.a.",
        ),
        (
            5_000,
            "invalid protobuf body: messages are nested more than 100 deep (at spec.versions.schema.openAPIV3Schema.properties.a.",
        ),
    ] {
        let (status, v) = send(&server, "POST", path, pb, &protobuf_crd(depth)).await;
        assert_eq!(status, 400, "{depth}: {v}");
        let message = v["message"].as_str().unwrap();
        assert!(message.starts_with(error), "{depth}: {message}");
        alive(&server).await;
    }
    let (status, v) = send(&server, "POST", path, pb, &protobuf_crd(60)).await;
    assert_eq!(status, 201, "{v}");
    let mut schema = &v["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    for _ in 0..60 {
        assert_eq!(schema["type"], "object");
        schema = &schema["properties"]["a"];
    }
    assert_eq!(schema, &serde_json::json!({"type": "string"}));
}

/// `{"a": ... 1 ...}`, `n` objects deep.
fn chain(n: usize) -> String {
    format!("{}1{}", r#"{"a":"#.repeat(n), "}".repeat(n))
}

/// JSON patches may not nest an object deeper than a JSON body may be: an `add` at a deep
/// path (100 levels a patch, 11 patches aborted the server), or `copy`s below their own
/// source, get kube-apiserver's 422 for a patched object its decoder refuses, and change
/// nothing; patches within the limit apply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_patches_cannot_nest_objects_past_the_limit() {
    let server = TestServer::builder().start().await.unwrap();
    let crd = r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"things.deep.test"},"spec":{"group":"deep.test","scope":"Cluster","names":{"plural":"things","kind":"Thing"},"versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","properties":{"x":{"x-kubernetes-preserve-unknown-fields":true}}}}}]}}"#;
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let (status, v) = send(&server, "POST", crds, "application/json", crd.as_bytes()).await;
    assert_eq!(status, 201, "{v}");
    let obj = r#"{"apiVersion":"deep.test/v1","kind":"Thing","metadata":{"name":"t"},"x":{"a":1}}"#;
    let mut created = false;
    for _ in 0..50 {
        let (status, _) = send(
            &server,
            "POST",
            "/apis/deep.test/v1/things",
            "application/json",
            obj.as_bytes(),
        )
        .await;
        if status == 201 {
            created = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(created, "the custom resource was never served");
    let thing = "/apis/deep.test/v1/things/t";
    let srv = &server;
    let patch = |ops: String| async move {
        send(
            srv,
            "PATCH",
            thing,
            "application/json-patch+json",
            ops.as_bytes(),
        )
        .await
    };
    let rejected = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "the server rejected our request due to an error in our request",
        "reason": "Invalid", "details": {}, "code": 422
    });

    // `x.a` holding 125 objects: 127 levels with the object and `x`, the limit
    let (status, v) = patch(format!(
        r#"[{{"op":"add","path":"/x/a","value":{}}}]"#,
        chain(125)
    ))
    .await;
    assert_eq!(status, 200, "{v}");
    // one level deeper (the value one level down: the patch itself is at the limit)
    let (status, v) = patch(format!(
        r#"[{{"op":"add","path":"/x/a/a","value":{}}}]"#,
        chain(125)
    ))
    .await;
    assert_eq!((status, &v), (422, &rejected));
    // deeper inside
    let deep = format!("/x{}", "/a".repeat(100));
    let (status, v) = patch(format!(
        r#"[{{"op":"add","path":"{deep}/b","value":{}}}]"#,
        chain(100)
    ))
    .await;
    assert_eq!((status, &v), (422, &rejected));

    // copies of `x` below itself, each one level deeper: refused when one goes over, as a
    // whole
    let (status, v) = patch(format!(
        r#"[{{"op":"replace","path":"/x","value":{}}}]"#,
        chain(60)
    ))
    .await;
    assert_eq!(status, 200, "{v}");
    let copies: Vec<String> = (0..100)
        .map(|_| r#"{"op":"copy","from":"/x","path":"/x/c"}"#.to_string())
        .collect();
    let (status, v) = patch(format!("[{}]", copies.join(","))).await;
    assert_eq!((status, &v), (422, &rejected));
    let (status, v) = patch(format!("[{}]", copies[..60].join(","))).await;
    assert_eq!(status, 200, "{v}");
    // and below its own leaf, doubling the depth
    let leaf = format!("/x{}", "/a".repeat(60));
    let (status, v) = patch(format!(r#"[{{"op":"copy","from":"/x","path":"{leaf}"}}]"#)).await;
    assert_eq!((status, &v), (422, &rejected));
    // a move as deep
    let (status, v) = patch(format!(
        r#"[{{"op":"move","from":"/x/c","path":"{leaf}"}}]"#
    ))
    .await;
    assert_eq!((status, &v), (422, &rejected));
    alive(&server).await;
}
