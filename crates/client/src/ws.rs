//! WebSocket connections to the API server, for exec, attach and port-forward.
//!
//! The handshake is an HTTP/1.1 `Upgrade` sent through the client's own transport, so
//! authentication, proxies, TLS, retries and rate limiting are those of every other
//! request. The server's answer to a refused upgrade (400, 403, 404…) becomes
//! [`Error::Api`] with the server's Status.

use crate::client::Client;
use crate::error::{Error, Result};
use http::{Request, StatusCode, header};
use hyper_util::rt::TokioIo;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::client::generate_key;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};

/// What a WebSocket runs over: an upgraded API server connection (memory, in the fuzz
/// targets).
pub(crate) trait WsIo: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> WsIo for T {}

/// A WebSocket over an upgraded API server connection.
pub(crate) type WsStream = WebSocketStream<Box<dyn WsIo>>;

/// The client side of a WebSocket over `io`, with the message and frame bounds.
pub(crate) async fn client_socket(io: Box<dyn WsIo>) -> WsStream {
    let config = WebSocketConfig::default()
        .max_message_size(Some(MAX_MESSAGE))
        .max_frame_size(Some(MAX_MESSAGE));
    WebSocketStream::from_raw_socket(io, Role::Client, Some(config)).await
}

/// The largest message accepted from the server. The kubelet sends at most 32 KiB per
/// message; anything much larger is a broken or hostile peer.
pub(crate) const MAX_MESSAGE: usize = 16 << 20;

/// Opens a WebSocket to `path_and_query` offering `protocols` in order of preference;
/// returns the stream and the sub-protocol the server chose.
pub(crate) async fn connect(
    client: &Client,
    path_and_query: &str,
    protocols: &[&str],
) -> Result<(WsStream, String)> {
    let key = generate_key();
    let req = Request::get(path_and_query)
        .header(header::CONNECTION, "Upgrade")
        .header(header::UPGRADE, "websocket")
        .header(header::SEC_WEBSOCKET_VERSION, "13")
        .header(header::SEC_WEBSOCKET_KEY, &key)
        .header(header::SEC_WEBSOCKET_PROTOCOL, protocols.join(", "))
        .body(Vec::new())
        .map_err(|e| Error::Transport {
            url: client.url_for_errors(path_and_query),
            source: Box::new(e),
        })?;
    let mut resp = client.send_upgrade(req).await?;
    if resp.status() != StatusCode::SWITCHING_PROTOCOLS {
        return Err(client.upgrade_refused(resp).await);
    }
    let url = || client.url_for_errors(path_and_query);
    let accept = resp
        .headers()
        .get(header::SEC_WEBSOCKET_ACCEPT)
        .and_then(|v| v.to_str().ok());
    if accept != Some(derive_accept_key(key.as_bytes()).as_str()) {
        return Err(Error::Protocol(format!(
            "{}: the server switched protocols without a valid Sec-WebSocket-Accept",
            url()
        )));
    }
    let chosen = resp
        .headers()
        .get(header::SEC_WEBSOCKET_PROTOCOL)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_string())
        .unwrap_or_default();
    if !protocols.contains(&chosen.as_str()) {
        return Err(Error::Protocol(format!(
            "{}: the server chose sub-protocol {chosen:?}, not one of {protocols:?}",
            url()
        )));
    }
    let upgraded = hyper::upgrade::on(&mut resp)
        .await
        .map_err(|e| Error::WebSocket(Box::new(e)))?;
    let upgraded: Box<dyn WsIo> = Box::new(TokioIo::new(upgraded));
    Ok((client_socket(upgraded).await, chosen))
}

/// A query string from pairs (`?a=1&b=2`, or empty).
pub(crate) fn query(pairs: &[(&str, String)]) -> String {
    if pairs.is_empty() {
        return String::new();
    }
    let mut ser = form_urlencoded::Serializer::for_suffix(String::from("?"), 1);
    for (k, v) in pairs {
        ser.append_pair(k, v);
    }
    ser.finish()
}
