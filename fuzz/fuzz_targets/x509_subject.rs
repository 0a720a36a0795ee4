//! The x509 subject reader behind client-certificate authentication: DER elements with
//! any tag, length form and nesting, read for the subject's CN and O attributes.
//!
//! Input: a certificate's DER bytes (the TLS handshake has verified its signature, but
//! the CA that signed it may have put anything in it). Checks: no panic, and the reader
//! never returns text that is not in the input.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some((cn, orgs)) = kubewright_apiserver::fuzzing::x509_subject(data) {
        for text in cn.iter().chain(orgs.iter()) {
            assert!(
                data.windows(text.len().max(1))
                    .any(|w| w == text.as_bytes())
                    || text.is_empty(),
                "{text:?} is not in the certificate"
            );
        }
    }
});
