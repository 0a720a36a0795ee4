//! Incremental decoding of watch streams: JSON documents may span read boundaries.

use crate::error::{Error, Result};
use bytes::{Buf, Bytes, BytesMut};
use futures::{Stream, StreamExt};
use kubewright_core::WatchEvent;
use serde::de::DeserializeOwned;

/// Largest event accepted (a guard against a server that never ends a document).
const MAX_EVENT: usize = 64 * 1024 * 1024;

/// Decodes a stream of byte chunks into watch events.
///
/// A stream that ends in the middle of a document yields one [`Error::Stream`] and ends.
pub fn decode_events<K, S>(chunks: S) -> impl Stream<Item = Result<WatchEvent<K>>> + Send
where
    K: DeserializeOwned + Send + 'static,
    S: Stream<Item = Result<Bytes>> + Send + Unpin + 'static,
{
    futures::stream::unfold(
        (chunks, BytesMut::new(), false),
        |(mut chunks, mut buf, done)| async move {
            if done {
                return None;
            }
            loop {
                // Try to decode one complete document from the buffer.
                let start = buf
                    .iter()
                    .position(|b| !b.is_ascii_whitespace())
                    .unwrap_or(buf.len());
                buf.advance(start);
                if !buf.is_empty() {
                    let mut it =
                        serde_json::Deserializer::from_slice(&buf).into_iter::<WatchEvent<K>>();
                    match it.next() {
                        Some(Ok(ev)) => {
                            let used = it.byte_offset();
                            buf.advance(used);
                            return Some((Ok(ev), (chunks, buf, false)));
                        }
                        Some(Err(e)) if e.is_eof() => {}
                        Some(Err(e)) => {
                            return Some((
                                Err(Error::Stream(format!("malformed watch event: {e}"))),
                                (chunks, buf, true),
                            ));
                        }
                        None => {}
                    }
                    if buf.len() > MAX_EVENT {
                        return Some((
                            Err(Error::Stream(format!(
                                "watch event larger than {MAX_EVENT} bytes"
                            ))),
                            (chunks, buf, true),
                        ));
                    }
                }
                match chunks.next().await {
                    Some(Ok(bytes)) => buf.extend_from_slice(&bytes),
                    Some(Err(e)) => return Some((Err(e), (chunks, buf, true))),
                    None => {
                        if buf.iter().all(u8::is_ascii_whitespace) {
                            return None;
                        }
                        return Some((
                            Err(Error::Stream(format!(
                                "watch stream ended in the middle of an event ({} bytes pending)",
                                buf.len()
                            ))),
                            (chunks, buf, true),
                        ));
                    }
                }
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn events() -> String {
        let mut s = String::new();
        for i in 0..5 {
            s.push_str(&format!(
                "{{\"type\":\"ADDED\",\"object\":{{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{{\"name\":\"cm{i}\",\"resourceVersion\":\"{i}\"}},\"data\":{{\"k\":\"v \\u00e9 {i}\"}}}}}}\n"
            ));
        }
        s.push_str(r#"{"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"9"}}}"#);
        s
    }

    async fn decode_split(text: &str, sizes: &[usize]) -> Vec<Result<WatchEvent<ConfigMap>>> {
        let bytes = text.as_bytes().to_vec();
        let mut chunks = Vec::new();
        let mut i = 0;
        let mut k = 0;
        while i < bytes.len() {
            let n = sizes[k % sizes.len()].max(1);
            let end = (i + n).min(bytes.len());
            chunks.push(Ok(Bytes::copy_from_slice(&bytes[i..end])));
            i = end;
            k += 1;
        }
        decode_events::<ConfigMap, _>(futures::stream::iter(chunks))
            .collect()
            .await
    }

    #[tokio::test]
    async fn events_across_arbitrary_chunk_boundaries() {
        let text = events();
        for sizes in [vec![1], vec![2, 3], vec![7], vec![64, 1, 13], vec![100_000]] {
            let out = decode_split(&text, &sizes).await;
            assert_eq!(out.len(), 6, "{sizes:?}");
            for (i, ev) in out.iter().take(5).enumerate() {
                match ev {
                    Ok(WatchEvent::Added(cm)) => {
                        assert_eq!(cm.metadata.name.as_deref(), Some(format!("cm{i}").as_str()))
                    }
                    other => panic!("unexpected {other:?}"),
                }
            }
            assert!(matches!(out[5], Ok(WatchEvent::Bookmark(_))));
        }
    }

    #[tokio::test]
    async fn stream_cut_mid_object_is_an_error() {
        let text = events();
        let cut = &text[..text.len() - 20];
        let out = decode_split(cut, &[5]).await;
        assert_eq!(out.len(), 6);
        assert!(matches!(&out[5], Err(Error::Stream(m)) if m.contains("middle")));
    }

    #[tokio::test]
    async fn garbage_is_an_error_not_a_panic() {
        let out = decode_split("{\"type\":\"ADDED\",\"object\":{}}\nnot json at all", &[4]).await;
        assert!(out[0].is_ok());
        assert!(matches!(&out[1], Err(Error::Stream(m)) if m.contains("malformed")));
        assert_eq!(out.len(), 2);
        let out = decode_split("{\"type\":\"SURPRISE\",\"object\":{}}", &[4]).await;
        assert!(out[0].is_err());
    }
}
