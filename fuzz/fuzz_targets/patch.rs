//! PATCH through the server's request handler: JSON patch, JSON merge patch, strategic
//! merge patch and server-side apply (patch.rs, fields.rs, schema.rs, CRD schemas and
//! CEL rules) applied to the seeded objects, with `dryRun=All` so every input meets the
//! same objects.
//!
//! Input: a first line `<kind> <resource>/<name>[/<subresource>] [force]` where kind is
//! `json`, `merge`, `strategic`, `apply` (any other word is sent as the Content-Type) and
//! resource one of the seeded kinds' plurals; then the patch body. Checks: no panic, no
//! 500.
//!
//! A JSON patch's `copy` operations may double the document each; the server's own bound
//! (the bytes copies may add, as kube-apiserver's) keeps a patch bomb from exhausting the
//! fuzzer's memory: the seed `json_copy_bomb` is one.
#![no_main]

use kubewright_fuzz::{first_line, runtime, seeded_server, send};
use libfuzzer_sys::fuzz_target;
use std::sync::{Arc, LazyLock};

static STATE: LazyLock<(
    tokio::runtime::Runtime,
    Arc<kubewright_apiserver::ApiServer>,
)> = LazyLock::new(|| {
    let rt = runtime();
    let srv = rt.block_on(seeded_server());
    (rt, srv)
});

fn prefix(resource: &str) -> Option<&'static str> {
    Some(match resource {
        "pods" | "services" | "configmaps" | "secrets" => "/api/v1/namespaces/default/",
        "deployments" => "/apis/apps/v1/namespaces/default/",
        "widgets" => "/apis/example.com/v1/namespaces/default/",
        "clusterroles" => "/apis/rbac.authorization.k8s.io/v1/",
        "namespaces" => "/api/v1/",
        _ => return None,
    })
}

fuzz_target!(|data: &[u8]| {
    let (head, body) = first_line(data);
    let Ok(head) = std::str::from_utf8(head) else {
        return;
    };
    let mut words = head.split_ascii_whitespace();
    let (Some(kind), Some(target)) = (words.next(), words.next()) else {
        return;
    };
    let force = words.next() == Some("force");
    let content_type = match kind {
        "json" => "application/json-patch+json",
        "merge" => "application/merge-patch+json",
        "strategic" => "application/strategic-merge-patch+json",
        "apply" => "application/apply-patch+yaml",
        other => other,
    };
    let Some(p) = prefix(target.split('/').next().unwrap_or("")) else {
        return;
    };
    let mut uri = format!("{p}{target}?dryRun=All&fieldManager=fuzz");
    if force {
        uri.push_str("&force=true");
    }
    let (rt, srv) = &*STATE;
    let Some(resp) = rt.block_on(send(
        srv,
        "PATCH",
        &uri,
        &[("content-type", content_type)],
        body,
    )) else {
        return;
    };
    resp.assert_handled(head);
});
