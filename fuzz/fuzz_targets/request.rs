//! Whole requests through the server's handler, as a connection delivers them: the method,
//! path and query (ListOptions, PatchOptions, DeleteOptions, watch parameters, timeouts,
//! continue tokens, selectors), headers (content negotiation, impersonation) and the body
//! (JSON, YAML, protobuf). Each input gets a fresh seeded server, and the controllers run
//! after the request, as a running server would.
//!
//! Input: a request written like HTTP/1.1 without the version:
//!
//! ```text
//! POST /api/v1/namespaces/default/configmaps?fieldManager=me
//! content-type: application/json
//!
//! {"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}
//! ```
//!
//! Checks: no panic, no 500, and the server still lists the seeded kinds afterwards.
#![no_main]

use kubewright_fuzz::{first_line, runtime, seeded_server, send};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (line, mut rest) = first_line(data);
    let Ok(line) = std::str::from_utf8(line) else {
        return;
    };
    let Some((method, uri)) = line.split_once(' ') else {
        return;
    };
    let mut headers = Vec::new();
    loop {
        let (h, r) = first_line(rest);
        rest = r;
        if h.is_empty() {
            break;
        }
        let Ok(h) = std::str::from_utf8(h) else {
            return;
        };
        let Some((k, v)) = h.split_once(':') else {
            return;
        };
        headers.push((k.trim(), v.trim()));
    }
    let body = rest;
    let rt = runtime();
    rt.block_on(async {
        let srv = seeded_server().await;
        let Some(resp) = send(&srv, method, uri, &headers, body).await else {
            return;
        };
        resp.assert_handled(line);
        kubewright_apiserver::fuzzing::reconcile(&srv);
        for path in [
            "/api/v1/namespaces/default/pods",
            "/apis/example.com/v1/namespaces/default/widgets",
            "/api/v1/namespaces",
        ] {
            let after = send(
                &srv,
                "GET",
                path,
                &[(
                    "accept",
                    "application/vnd.kubernetes.protobuf, application/json",
                )],
                b"",
            )
            .await
            .expect("a valid request");
            after.assert_handled(&format!("GET {path} after {line}"));
        }
    });
});
