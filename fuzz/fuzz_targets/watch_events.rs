//! The client's watch stream decoder: newline-delimited JSON events arriving in chunks.
//!
//! Input: one byte choosing the chunk sizes (and, with its high bit, typed `Pod` events
//! instead of dynamic objects), then the stream's bytes. Checks: no panic; the events and
//! errors decoded do not depend on how the stream was cut into chunks.
#![no_main]

use bytes::Bytes;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kubewright_client::watch::decode_events;
use kubewright_core::DynamicObject;
use libfuzzer_sys::fuzz_target;
use serde::Serialize;
use serde::de::DeserializeOwned;

fn decode<K>(stream: &[u8], sizes: &[usize]) -> Vec<String>
where
    K: DeserializeOwned + Serialize + Send + 'static,
{
    let mut chunks = Vec::new();
    let mut i = 0;
    let mut k = 0;
    while i < stream.len() {
        let end = (i + sizes[k % sizes.len()]).min(stream.len());
        chunks.push(Ok(Bytes::copy_from_slice(&stream[i..end])));
        i = end;
        k += 1;
    }
    let events = futures::executor::block_on(
        decode_events::<K, _>(futures::stream::iter(chunks)).collect::<Vec<_>>(),
    );
    events
        .into_iter()
        .map(|e| match e {
            Ok(ev) => serde_json::to_string(&ev).expect("a decoded event serialises"),
            Err(e) => format!("error: {e}"),
        })
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let Some((&seed, stream)) = data.split_first() else {
        return;
    };
    let sizes = [
        1 + (seed & 0x0f) as usize,
        1 + ((seed >> 4) & 0x07) as usize * 5,
    ];
    let whole = [stream.len().max(1)];
    if seed & 0x80 == 0 {
        assert_eq!(
            decode::<DynamicObject>(stream, &sizes),
            decode::<DynamicObject>(stream, &whole)
        );
    } else {
        assert_eq!(decode::<Pod>(stream, &sizes), decode::<Pod>(stream, &whole));
    }
});
