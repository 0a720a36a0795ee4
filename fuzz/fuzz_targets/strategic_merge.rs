//! Strategic merge patch and the managedFields (`fieldsV1`) encoding of server-side apply,
//! on a fuzzed object and a fuzzed patch.
//!
//! Input: a built-in OpenAPI definition name on the first line (e.g.
//! `io.k8s.api.core.v1.Pod`), then two JSON documents: the object and the patch.
//! Checks: no panic; the fieldsV1 of the result decodes to the same field set; any
//! fieldsV1 trie (the patch read as one) re-encodes stably.
#![no_main]

use kubewright_apiserver::fuzzing;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let (def, rest) = kubewright_fuzz::first_line(data);
    let Ok(def) = std::str::from_utf8(def) else {
        return;
    };
    let mut docs = serde_json::Deserializer::from_slice(rest).into_iter::<Value>();
    let (Some(Ok(mut obj)), Some(Ok(patch))) = (docs.next(), docs.next()) else {
        return;
    };
    if fuzzing::strategic_merge(&mut obj, &patch, def).is_ok() {
        let fields = fuzzing::fields_v1_of(&obj, def);
        assert_eq!(
            fuzzing::fields_v1_reencode(&fields),
            fields,
            "fieldsV1 of {obj}"
        );
    }
    let once = fuzzing::fields_v1_reencode(&patch);
    assert_eq!(fuzzing::fields_v1_reencode(&once), once, "fieldsV1 {patch}");
});
