//! What an admission webhook answers the embedded server: the AdmissionReview it reads
//! (apiVersion, kind, uid, allowed, status, warnings, base64 patch and patchType) and the
//! JSON patch it then applies within the server's bounds.
//!
//! Input: the first byte chooses a mutating (odd) or validating webhook; the rest is the
//! answer's body. Checks: no panic; a validating webhook's patch is refused; a patched
//! object stays within the server's size bound.
#![no_main]

use kubewright_apiserver::fuzzing;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&which, body)) = data.split_first() else {
        return;
    };
    let mutating = which % 2 == 1;
    if let Ok((allowed, patched)) = fuzzing::webhook_answer(body, mutating) {
        if let Some(obj) = patched {
            assert!(
                mutating && allowed,
                "a patch applied for a validating webhook"
            );
            let size = serde_json::to_vec(&obj).map(|v| v.len()).unwrap_or(0);
            assert!(size <= body.len() * 2 + 4 * 1024 * 1024, "{size} bytes");
        }
    }
});
