//! Prototype of two changes to kubewright's informer path, measured by the
//! `kubewright-proto` and `kubewright-proto+skip` variants (opt-in with `--libs`). Both
//! plug into the unchanged runtime as a custom [`ListWatch`]:
//!
//! * **Newline-framed watch decoding.** `kubewright_client::watch::decode_events` tries to
//!   parse the buffer after every chunk and starts over when a document is incomplete, so
//!   an event split over chunks is (partly) decoded, with all its allocations, more than
//!   once. Kubernetes writes one event per line: find the newline, decode once.
//! * **Skipping `managedFields` while decoding** (`+skip`) instead of decoding it into a
//!   `serde_json::Value` tree and dropping it in the `strip_managed_fields` transform:
//!   the tree is about half of a pod's allocations. Here the prototype cuts the
//!   `"managedFields":[...]` member out of the bytes before decoding; the runtime would do
//!   it in serde (see the report for the proposed change).

use bytes::{Buf, Bytes, BytesMut};
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kubewright_client::{Client, Error as ClientError};
use kubewright_core::{ListParams, ObjectList, WatchEvent, WatchParams};
use kubewright_runtime::reflector::{ListWatch, WatchStream};
use serde::Deserialize;
use std::borrow::Cow;

/// Pods of one namespace, listed and watched with the prototype decoders.
pub(crate) struct ProtoPods {
    client: Client,
    path: String,
    skip_managed_fields: bool,
}

impl ProtoPods {
    pub(crate) fn new(client: Client, namespace: &str, skip_managed_fields: bool) -> Self {
        Self {
            client,
            path: format!("/api/v1/namespaces/{namespace}/pods"),
            skip_managed_fields,
        }
    }

    fn query(&self, pairs: &[(&str, Option<String>)]) -> String {
        let mut q = form_urlencoded::Serializer::new(String::new());
        for (k, v) in pairs {
            if let Some(v) = v {
                q.append_pair(k, v);
            }
        }
        let q = q.finish();
        if q.is_empty() {
            self.path.clone()
        } else {
            format!("{}?{q}", self.path)
        }
    }
}

fn request(path: String) -> Result<http::Request<Vec<u8>>, ClientError> {
    http::Request::get(path)
        .body(Vec::new())
        .map_err(|e| ClientError::Stream(format!("bad request: {e}")))
}

const KEY: &[u8] = b"\"managedFields\":";

/// `input` without its `"managedFields":<value>` members (and one adjacent comma each).
pub(crate) fn cut_managed_fields(input: &[u8]) -> Result<Cow<'_, [u8]>, serde_json::Error> {
    let finder = memchr::memmem::Finder::new(KEY);
    let Some(first) = finder.find(input) else {
        return Ok(Cow::Borrowed(input));
    };
    let mut out = Vec::with_capacity(input.len());
    let mut pos = 0;
    let mut next = Some(first);
    while let Some(start) = next {
        let value = start + KEY.len();
        let mut values = serde_json::Deserializer::from_slice(&input[value..])
            .into_iter::<serde::de::IgnoredAny>();
        match values.next() {
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(e),
            None => break,
        }
        let end = value + values.byte_offset();
        if input.get(end) == Some(&b',') {
            // `"managedFields":[..],` — drop the member and its comma.
            out.extend_from_slice(&input[pos..start]);
            pos = end + 1;
        } else {
            // Last member: drop the comma before it.
            let mut before = start;
            while before > pos && input[before - 1].is_ascii_whitespace() {
                before -= 1;
            }
            if before > pos && input[before - 1] == b',' {
                before -= 1;
            }
            out.extend_from_slice(&input[pos..before]);
            pos = end;
        }
        next = finder.find(&input[pos..]).map(|o| o + pos);
    }
    out.extend_from_slice(&input[pos..]);
    Ok(Cow::Owned(out))
}

fn decode<'a, T: Deserialize<'a>>(bytes: &'a [u8], what: &str) -> Result<T, ClientError> {
    serde_json::from_slice(bytes).map_err(|source| ClientError::Decode {
        what: what.to_string(),
        source,
    })
}

impl ListWatch<Pod> for ProtoPods {
    fn list<'a>(
        &'a self,
        lp: &'a ListParams,
    ) -> BoxFuture<'a, Result<ObjectList<Pod>, ClientError>> {
        async move {
            let path = self.query(&[
                ("labelSelector", lp.label_selector.clone()),
                ("fieldSelector", lp.field_selector.clone()),
                ("limit", lp.limit.map(|l| l.to_string())),
                ("continue", lp.continue_token.clone()),
                ("resourceVersion", lp.resource_version.clone()),
            ]);
            let (_, body) = self.client.request_bytes(request(path)?).await?;
            if self.skip_managed_fields {
                let cut = cut_managed_fields(&body).map_err(|source| ClientError::Decode {
                    what: "PodList".into(),
                    source,
                })?;
                decode(&cut, "PodList")
            } else {
                decode(&body, "PodList")
            }
        }
        .boxed()
    }

    fn watch<'a>(
        &'a self,
        wp: &'a WatchParams,
        resource_version: &'a str,
    ) -> BoxFuture<'a, Result<WatchStream<Pod>, ClientError>> {
        async move {
            let path = self.query(&[
                ("watch", Some("true".into())),
                ("labelSelector", wp.label_selector.clone()),
                ("fieldSelector", wp.field_selector.clone()),
                ("timeoutSeconds", wp.timeout.map(|t| t.to_string())),
                ("allowWatchBookmarks", wp.bookmarks.then(|| "true".into())),
                (
                    "sendInitialEvents",
                    wp.send_initial_events.then(|| "true".into()),
                ),
                (
                    "resourceVersion",
                    Some(resource_version.to_string()).filter(|v| !v.is_empty()),
                ),
            ]);
            let chunks = self.client.request_stream(request(path)?).await?;
            Ok(decode_lines(Box::pin(chunks), self.skip_managed_fields).boxed())
        }
        .boxed()
    }

    fn describe(&self) -> String {
        format!("{} (prototype decoder)", self.path)
    }
}

/// Newline-framed watch decoding: each event is decoded exactly once, when its line is
/// complete.
fn decode_lines<S>(
    chunks: S,
    skip_managed_fields: bool,
) -> impl futures::Stream<Item = Result<WatchEvent<Pod>, ClientError>> + Send
where
    S: futures::Stream<Item = Result<Bytes, ClientError>> + Send + Unpin + 'static,
{
    futures::stream::unfold(
        (chunks, BytesMut::new(), 0usize, false),
        move |(mut chunks, mut buf, mut scanned, done)| async move {
            if done {
                return None;
            }
            loop {
                if let Some(nl) = memchr::memchr(b'\n', &buf[scanned..]) {
                    let line = buf.split_to(scanned + nl + 1);
                    scanned = 0;
                    let line = line.trim_ascii();
                    if line.is_empty() {
                        continue;
                    }
                    let event = if skip_managed_fields {
                        cut_managed_fields(line)
                            .map_err(|source| ClientError::Decode {
                                what: "watch event".into(),
                                source,
                            })
                            .and_then(|l| decode::<WatchEvent<Pod>>(&l, "watch event"))
                    } else {
                        decode(line, "watch event")
                    };
                    return Some((event, (chunks, buf, 0, false)));
                }
                scanned = buf.len();
                match chunks.next().await {
                    Some(Ok(bytes)) => buf.extend_from_slice(&bytes),
                    Some(Err(e)) => return Some((Err(e), (chunks, buf, 0, true))),
                    None => {
                        if buf.iter().all(u8::is_ascii_whitespace) {
                            return None;
                        }
                        // A last event without a newline.
                        let rest = buf.split().freeze();
                        let event = decode(rest.chunk(), "watch event");
                        return Some((event, (chunks, buf, 0, true)));
                    }
                }
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_managed_fields_members() {
        let cases = [
            (
                r#"{"metadata":{"name":"a","managedFields":[{"f":{"x":{}}}],"uid":"u"}}"#,
                r#"{"metadata":{"name":"a","uid":"u"}}"#,
            ),
            (
                r#"{"metadata":{"name":"a","managedFields":[{"f":"]"}]}}"#,
                r#"{"metadata":{"name":"a"}}"#,
            ),
            (r#"{"metadata":{"managedFields":[]}}"#, r#"{"metadata":{}}"#),
            (
                r#"{"items":[{"metadata":{"managedFields":[1],"a":"\"managedFields\":"}},{"metadata":{"b":1,"managedFields":[2]}}]}"#,
                r#"{"items":[{"metadata":{"a":"\"managedFields\":"}},{"metadata":{"b":1}}]}"#,
            ),
            (r#"{"a":1}"#, r#"{"a":1}"#),
        ];
        for (input, want) in cases {
            let got = cut_managed_fields(input.as_bytes()).expect("valid");
            assert_eq!(std::str::from_utf8(&got).expect("utf8"), want);
        }
    }

    #[tokio::test]
    async fn decodes_lines_across_chunks() {
        let line = r#"{"type":"MODIFIED","object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","managedFields":[{"manager":"m"}]}}}"#;
        let text = format!("{line}\n{line}\n");
        for size in [1, 5, 64, 1000] {
            for skip in [false, true] {
                let chunks: Vec<Result<Bytes, ClientError>> = text
                    .as_bytes()
                    .chunks(size)
                    .map(|c| Ok(Bytes::copy_from_slice(c)))
                    .collect();
                let out: Vec<_> = decode_lines(futures::stream::iter(chunks), skip)
                    .collect()
                    .await;
                assert_eq!(out.len(), 2, "size {size}");
                for ev in out {
                    match ev {
                        Ok(WatchEvent::Modified(p)) => {
                            assert_eq!(p.metadata.managed_fields.is_none(), skip)
                        }
                        other => panic!("unexpected {other:?}"),
                    }
                }
            }
        }
    }
}
