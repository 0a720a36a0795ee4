//! Kubernetes protobuf (`application/vnd.kubernetes.protobuf`) bodies, through the
//! shared codec of `kubewright-proto` (the same schema table the client decodes with).

pub use kubewright_proto::{encode, supports};

/// The wire writers, for hand-built messages (watch frames, OpenAPI v2).
pub mod encode {
    pub use kubewright_proto::write::{key, ld, varint};
}

#[cfg(test)]
mod http_tests;

/// Decodes a Kubernetes protobuf request body into the JSON object a JSON client would
/// send, with `apiVersion` and `kind` taken from the envelope.
pub fn decode(body: &[u8]) -> Result<serde_json::Value, String> {
    let v = kubewright_proto::decode(body).map_err(|e| e.to_string())?;
    // Maps, lists and embedded JSON nest deeper than messages: the object is bounded as a
    // JSON body is, which every recursive walk of an object relies on (a CRD's schema
    // nested 95 deep took all of a 2 MiB stack to create in a debug build).
    let max = crate::error::MAX_JSON_DEPTH;
    if crate::error::nesting_depth(&v) > max {
        return Err(format!(
            "invalid protobuf body: the object is nested more than {max} levels deep"
        ));
    }
    Ok(v)
}
