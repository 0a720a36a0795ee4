//! The server's Kubernetes protobuf decoder (`application/vnd.kubernetes.protobuf`
//! request bodies) and its encoder.
//!
//! Input: a protobuf body (`k8s\0` + `runtime.Unknown`). Checks: no panic; an object
//! that decodes and that the encoder supports encodes to bytes that decode to the same
//! object.
#![no_main]

use kubewright_apiserver::fuzzing;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(obj) = fuzzing::protobuf_decode(data) else {
        return;
    };
    let Ok(bytes) = fuzzing::protobuf_encode(&obj) else {
        return;
    };
    let back = fuzzing::protobuf_decode(&bytes)
        .unwrap_or_else(|e| panic!("the encoding of {obj} does not decode: {e}"));
    assert_eq!(back, obj, "protobuf round trip");
});
