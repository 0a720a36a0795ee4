//! The standard output of an exec credential plugin (`client.authentication.k8s.io/v1`
//! ExecCredential): JSON of any shape, tokens, PEM certificates and keys, timestamps.
//!
//! Input: the plugin's output. Checks: no panic, and an error never repeats the token or
//! key the output carried.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Err(e) = kubewright_client::fuzzing::exec_credential(data) else {
        return;
    };
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    for field in ["token", "clientKeyData"] {
        if let Some(secret) = v.pointer(&format!("/status/{field}")).and_then(|s| s.as_str())
            && secret.len() >= 12
            // The error may quote the kind and apiVersion, which are no secret.
            && !["/kind", "/apiVersion"]
                .iter()
                .filter_map(|p| v.pointer(p).and_then(|s| s.as_str()))
                .any(|shown| shown.contains(secret))
        {
            assert!(!e.contains(secret), "the error shows the {field}: {e}");
        }
    }
});
