//! The server's request body decoding for create, update and delete: JSON, YAML or
//! Kubernetes protobuf by Content-Type.
//!
//! Input: the Content-Type on the first line (empty: none), then the body. Checks: no
//! panic; a protobuf body (by the media type's essence, as the server reads it)
//! decodes to an object with its `apiVersion` and `kind`.
#![no_main]

use kubewright_apiserver::fuzzing;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (ct, body) = kubewright_fuzz::first_line(data);
    let Ok(ct) = std::str::from_utf8(ct) else {
        return;
    };
    let ct = (!ct.is_empty()).then_some(ct);
    let Ok(v) = fuzzing::decode_body(ct, body) else {
        return;
    };
    let essence = ct
        .and_then(|c| c.split(';').next())
        .map(|e| e.trim().to_ascii_lowercase());
    if essence.as_deref() == Some("application/vnd.kubernetes.protobuf") {
        assert!(v.get("apiVersion").is_some_and(|a| a.is_string()), "{v}");
        assert!(v.get("kind").is_some_and(|k| k.is_string()), "{v}");
    }
});
