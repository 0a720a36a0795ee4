//! The runtime's webhook server reading an AdmissionReview (and a ConversionReview) from
//! the API server, or from whoever reaches its port: JSON of any shape, objects of the
//! wrong kind, missing requests, old objects, patches computed from a handler's change.
//!
//! Input: the first byte chooses the endpoint (mutating ConfigMaps, validating Pods,
//! converting); the rest is the request body. Checks: no panic; every admission answer is
//! HTTP 200 with a review whose response carries the request's uid when it had one (a
//! request the server cannot read is denied in the review, never answered with an HTTP
//! error that `failurePolicy: Ignore` would admit); a conversion answer is that or a 400
//! Status.
#![no_main]

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kubewright_fuzz::runtime;
use kubewright_runtime::webhook::{Mutation, Verdict, WebhookServer, WebhookServerBuilder};
use libfuzzer_sys::fuzz_target;
use std::sync::LazyLock;

static RT: LazyLock<tokio::runtime::Runtime> = LazyLock::new(runtime);

static SERVER: LazyLock<WebhookServerBuilder> = LazyLock::new(|| {
    WebhookServer::builder(([127, 0, 0, 1], 0).into())
        .mutate::<ConfigMap, _, _>("/mutate", |req| async move {
            let Some(mut cm) = req.object else {
                return Mutation::allow();
            };
            cm.metadata
                .labels
                .get_or_insert_with(Default::default)
                .insert("fuzzed".into(), "yes".into());
            Mutation::patch(cm)
        })
        .validate::<Pod, _, _>("/validate", |req| async move {
            match req.object.and_then(|p| p.metadata.name) {
                Some(n) if n.contains('x') => Verdict::deny("no x"),
                _ => Verdict::allow(),
            }
        })
        .convert("/convert", |obj, desired| {
            let mut obj = obj;
            obj["apiVersion"] = serde_json::Value::String(desired.to_string());
            Ok(obj)
        })
});

fuzz_target!(|data: &[u8]| {
    let Some((&which, body)) = data.split_first() else {
        return;
    };
    let path = ["/mutate", "/validate", "/convert"][usize::from(which % 3)];
    let Some((status, out)) = RT.block_on(SERVER.call_for_fuzzing(path, body)) else {
        panic!("no endpoint at {path}");
    };
    let answer: serde_json::Value = serde_json::from_slice(&out).expect("a JSON answer");
    if path == "/convert" && status == 400 {
        // A conversion has no failure policy: controller-runtime answers a body it cannot
        // read with 400, and the API server fails the conversion.
        assert_eq!(answer["kind"], "Status", "{answer}");
        return;
    }
    assert_eq!(status, 200, "{answer}");
    assert!(answer["response"].is_object(), "{answer}");
    if let Some(uid) = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| {
            v.pointer("/request/uid")
                .and_then(|u| u.as_str())
                .map(str::to_string)
        })
    {
        assert_eq!(
            answer["response"]["uid"].as_str(),
            Some(uid.as_str()),
            "{answer}"
        );
    }
});
