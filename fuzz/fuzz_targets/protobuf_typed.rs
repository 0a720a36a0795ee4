//! The client's protobuf decoder: a serde `Deserializer` over the wire straight into the
//! k8s-openapi types, lists, watch frames, and the lean cache's managedFields stripping.
//!
//! Input: a protobuf body (`k8s\0` + `runtime.Unknown`) or a watch frame. Checks: no
//! panic, only typed errors; a body without managedFields decodes to the same pod after
//! stripping; the metadata read alone (the lean cache's arrivals) is the decoded pod's.
#![no_main]

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kubewright_core::{ObjectList, Status, WatchEvent};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let pod = kubewright_proto::from_slice::<Pod>(data);
    let _ = kubewright_proto::from_slice::<Deployment>(data);
    let _ = kubewright_proto::from_slice::<ConfigMap>(data);
    let _ = kubewright_proto::from_slice::<ObjectList<Pod>>(data);
    let _ = kubewright_proto::from_slice::<Status>(data);
    let _ = kubewright_proto::from_slice::<serde_json::Value>(data);
    let _ = kubewright_proto::watch::from_frame::<WatchEvent<Pod>>(data);
    let _ = kubewright_proto::watch::frame_len(data);
    if let Some(raw) = data.get(4..) {
        let _ = kubewright_proto::strip_managed_fields(raw);
        let stripped = kubewright_proto::strip_managed_fields(raw);
        let meta = kubewright_proto::metadata_from_raw::<ObjectMeta>("v1", "Pod", raw);
        if let Ok(p) = kubewright_proto::from_raw::<Pod>("v1", "Pod", raw) {
            let meta = meta.unwrap_or_else(|e| panic!("a decodable pod's metadata fails: {e}"));
            assert_eq!(
                meta, p.metadata,
                "the metadata alone differs from the pod's"
            );
            if let Ok(stripped) = stripped {
                let mut want = p;
                want.metadata.managed_fields = None;
                let got = kubewright_proto::from_raw::<Pod>("v1", "Pod", &stripped)
                    .unwrap_or_else(|e| panic!("a decodable pod fails after stripping: {e}"));
                assert_eq!(got, want, "stripping managedFields changed the pod");
            }
        }
    }
    drop(pod);
});
