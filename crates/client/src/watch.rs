//! Incremental decoding of watch streams: JSON documents may span read boundaries.

use crate::error::{Error, Result};
use bytes::{Bytes, BytesMut};
use futures::{Stream, StreamExt};
use kubewright_core::WatchEvent;
use serde::de::DeserializeOwned;
use std::collections::VecDeque;

/// Largest event accepted (a guard against a server that never ends a document).
const MAX_EVENT: usize = 64 * 1024 * 1024;

/// Decodes a stream of byte chunks into watch events.
///
/// The API server writes one event per line, so events are framed by newlines and each
/// is decoded exactly once, when its line is complete (an event split over many reads is
/// not re-parsed after every read). Several documents on one line, and a last document
/// without a newline, are accepted too. A stream that ends in the middle of a document
/// yields one [`Error::Stream`] and ends.
pub fn decode_events<K, S>(chunks: S) -> impl Stream<Item = Result<WatchEvent<K>>> + Send
where
    K: DeserializeOwned + Send + 'static,
    S: Stream<Item = Result<Bytes>> + Send + Unpin + 'static,
{
    let state = Framer {
        chunks,
        buf: BytesMut::new(),
        scanned: 0,
        pending: VecDeque::new(),
        done: false,
    };
    futures::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(ev) = st.pending.pop_front() {
                if ev.is_err() {
                    st.done = true;
                    st.pending.clear();
                }
                return Some((ev, st));
            }
            if st.done {
                return None;
            }
            if let Some(nl) = memchr::memchr(b'\n', &st.buf[st.scanned..]) {
                let line = st.buf.split_to(st.scanned + nl + 1);
                st.scanned = 0;
                if let Some(tail) = decode_line(&line, &mut st.pending) {
                    // A document spanning lines (pretty-printed): wait for the rest.
                    let mut rest = BytesMut::from(&line[tail..]);
                    st.scanned = rest.len();
                    rest.extend_from_slice(&st.buf);
                    st.buf = rest;
                }
                continue;
            }
            st.scanned = st.buf.len();
            if st.buf.len() > MAX_EVENT {
                st.done = true;
                return Some((
                    Err(Error::Stream(format!(
                        "watch event larger than {MAX_EVENT} bytes"
                    ))),
                    st,
                ));
            }
            match st.chunks.next().await {
                Some(Ok(bytes)) => st.buf.extend_from_slice(&bytes),
                Some(Err(e)) => {
                    st.done = true;
                    return Some((Err(e), st));
                }
                None => {
                    st.done = true;
                    let rest = st.buf.split();
                    if rest.iter().all(u8::is_ascii_whitespace) {
                        return None;
                    }
                    if let Some(tail) = decode_line(&rest, &mut st.pending) {
                        st.pending.push_back(Err(Error::Stream(format!(
                            "watch stream ended in the middle of an event ({} bytes pending)",
                            rest.len() - tail
                        ))));
                    }
                }
            }
        }
    })
}

/// Decodes a watch stream in the format the server answered with: newline-framed JSON,
/// or length-framed Kubernetes protobuf (`protobuf`).
pub(crate) fn decode_stream<K, S>(
    protobuf: bool,
    chunks: S,
) -> impl Stream<Item = Result<WatchEvent<K>>> + Send
where
    K: DeserializeOwned + Send + 'static,
    S: Stream<Item = Result<Bytes>> + Send + Unpin + 'static,
{
    if protobuf {
        decode_protobuf_events(chunks).left_stream()
    } else {
        decode_events(chunks).right_stream()
    }
}

/// Decodes a Kubernetes protobuf watch stream (`application/vnd.kubernetes.protobuf;
/// stream=watch`): each event is a 4-byte big-endian length and a `WatchEvent` message,
/// decoded once its frame is complete. A stream that ends inside a frame, a frame over
/// 64 MiB or a malformed one yields one [`Error::Stream`] and ends.
pub fn decode_protobuf_events<K, S>(chunks: S) -> impl Stream<Item = Result<WatchEvent<K>>> + Send
where
    K: DeserializeOwned + Send + 'static,
    S: Stream<Item = Result<Bytes>> + Send + Unpin + 'static,
{
    let state = (chunks, BytesMut::new(), false);
    futures::stream::unfold(state, |(mut chunks, mut buf, done)| async move {
        if done {
            return None;
        }
        loop {
            match kubewright_proto::watch::frame_len(&buf) {
                Err(e) => {
                    return Some((Err(Error::Stream(e.to_string())), (chunks, buf, true)));
                }
                Ok(Some(n)) => {
                    let frame = buf.split_to(n);
                    let ev = kubewright_proto::watch::from_frame::<WatchEvent<K>>(&frame[4..])
                        .map_err(|e| Error::Stream(format!("malformed watch event: {e}")));
                    let failed = ev.is_err();
                    return Some((ev, (chunks, buf, failed)));
                }
                Ok(None) => {}
            }
            match chunks.next().await {
                Some(Ok(bytes)) => buf.extend_from_slice(&bytes),
                Some(Err(e)) => return Some((Err(e), (chunks, buf, true))),
                None if buf.is_empty() => return None,
                None => {
                    let pending = buf.len();
                    return Some((
                        Err(Error::Stream(format!(
                            "watch stream ended in the middle of an event ({pending} bytes pending)"
                        ))),
                        (chunks, buf, true),
                    ));
                }
            }
        }
    })
}

struct Framer<S, K> {
    chunks: S,
    buf: BytesMut,
    /// Bytes of `buf` already searched for a newline.
    scanned: usize,
    /// Decoded events of the last line, not yet yielded.
    pending: VecDeque<Result<WatchEvent<K>>>,
    done: bool,
}

/// Decodes the documents of one line (normally exactly one) into `out`. Returns the
/// offset of a last document that the line leaves incomplete.
fn decode_line<K: DeserializeOwned>(
    line: &[u8],
    out: &mut VecDeque<Result<WatchEvent<K>>>,
) -> Option<usize> {
    let mut docs = serde_json::Deserializer::from_slice(line).into_iter::<WatchEvent<K>>();
    loop {
        let start = docs.byte_offset();
        match docs.next()? {
            Ok(ev) => out.push_back(Ok(ev)),
            Err(e) if e.is_eof() => return Some(start),
            Err(e) => {
                out.push_back(Err(Error::Stream(format!("malformed watch event: {e}"))));
                return None;
            }
        }
    }
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
    async fn documents_spanning_lines_or_sharing_one_are_decoded() {
        let one = r#"{"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}}"#;
        let pretty =
            serde_json::to_string_pretty(&serde_json::from_str::<serde_json::Value>(one).unwrap())
                .unwrap();
        assert!(pretty.lines().count() > 3);
        let text = format!("{one}{one}\n{pretty}\n\n{one}");
        for sizes in [vec![1], vec![3, 17], vec![100_000]] {
            let out = decode_split(&text, &sizes).await;
            assert_eq!(out.len(), 4, "{sizes:?}: {out:?}");
            assert!(out.iter().all(|e| matches!(e, Ok(WatchEvent::Added(_)))));
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

    fn pb_events() -> Vec<u8> {
        let mut out = Vec::new();
        for i in 0..5 {
            let cm = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("cm{i}"), "resourceVersion": i.to_string()},
                "data": {"k": format!("v é {i}")}});
            out.extend(kubewright_proto::watch::encode_frame(
                "ADDED",
                &kubewright_proto::encode(&cm).unwrap(),
            ));
        }
        let bm = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"resourceVersion": "9"}});
        out.extend(kubewright_proto::watch::encode_frame(
            "BOOKMARK",
            &kubewright_proto::encode(&bm).unwrap(),
        ));
        out
    }

    async fn decode_pb(bytes: &[u8], sizes: &[usize]) -> Vec<Result<WatchEvent<ConfigMap>>> {
        let mut chunks = Vec::new();
        let (mut i, mut k) = (0, 0);
        while i < bytes.len() {
            let end = (i + sizes[k % sizes.len()].max(1)).min(bytes.len());
            chunks.push(Ok(Bytes::copy_from_slice(&bytes[i..end])));
            i = end;
            k += 1;
        }
        decode_protobuf_events::<ConfigMap, _>(futures::stream::iter(chunks))
            .collect()
            .await
    }

    #[tokio::test]
    async fn protobuf_events_across_arbitrary_chunk_boundaries() {
        let bytes = pb_events();
        for sizes in [vec![1], vec![2, 3], vec![7], vec![64, 1, 13], vec![100_000]] {
            let out = decode_pb(&bytes, &sizes).await;
            assert_eq!(out.len(), 6, "{sizes:?}");
            for (i, ev) in out.iter().take(5).enumerate() {
                match ev {
                    Ok(WatchEvent::Added(cm)) => {
                        assert_eq!(cm.metadata.name.as_deref(), Some(format!("cm{i}").as_str()));
                        assert_eq!(cm.data.as_ref().unwrap()["k"], format!("v é {i}"));
                    }
                    other => panic!("unexpected {other:?}"),
                }
            }
            assert!(
                matches!(&out[5], Ok(WatchEvent::Bookmark(b)) if b.metadata.resource_version == "9")
            );
        }
    }

    #[tokio::test]
    async fn protobuf_stream_cut_or_corrupt_is_an_error() {
        let bytes = pb_events();
        let out = decode_pb(&bytes[..bytes.len() - 3], &[5]).await;
        assert_eq!(out.len(), 6);
        assert!(matches!(&out[5], Err(Error::Stream(m)) if m.contains("middle")));
        // A length over the limit.
        let out = decode_pb(&[0xff, 0xff, 0xff, 0xff, 1, 2], &[3]).await;
        assert!(matches!(&out[..], [Err(Error::Stream(m))] if m.contains("larger")));
        // A frame that is not a WatchEvent.
        let mut bad = vec![0, 0, 0, 3, 0xff, 0xff, 0xff];
        bad.extend(pb_events());
        let out = decode_pb(&bad, &[4]).await;
        assert!(matches!(&out[..], [Err(Error::Stream(m))] if m.contains("malformed")));
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
