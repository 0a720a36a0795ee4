//! Entry points for the cargo-fuzz targets in `fuzz/` at the repository root.
//!
//! Not an API: hidden from the documentation and free to change with the targets. Each
//! function runs the code the client itself runs on bytes another party controls.

use crate::config::ExecConfig;
use crate::proxy::ProxyTarget;
use tokio::io::AsyncWriteExt;

/// Reads an exec credential plugin's standard output as the client does (for a plugin
/// configured for `client.authentication.k8s.io/v1`). The error text names no secret.
pub fn exec_credential(stdout: &[u8]) -> Result<(), String> {
    let config = ExecConfig {
        api_version: crate::config::exec::EXEC_API_V1.to_string(),
        command: "fuzz-plugin".to_string(),
        ..ExecConfig::default()
    };
    crate::config::exec::parse_exec_credential(&config, stdout)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// The password in the proxy URL of [`proxy_reply`], which no error may show.
pub const PROXY_PASSWORD: &str = "Zq8pw7Rk2xVt";

/// Opens a tunnel through a proxy whose replies are `reply` (then end of stream): an
/// HTTP `CONNECT` (`socks` false) or a SOCKS5 handshake with username and password.
/// What the client sends is discarded.
pub async fn proxy_reply(socks: bool, reply: &[u8]) -> Result<(), String> {
    let url = if socks {
        format!("socks5://user:{PROXY_PASSWORD}@proxy.example:1080")
    } else {
        format!("http://user:{PROXY_PASSWORD}@proxy.example:3128")
    };
    let target = ProxyTarget::from_uri(&url.parse().map_err(|e| format!("{e}"))?, "proxy-url")
        .map_err(|e| e.to_string())?;
    let (mut client, server) = tokio::io::duplex(64 * 1024);
    let (mut from_client, mut to_client) = tokio::io::split(server);
    let reply = reply.to_vec();
    let proxy = tokio::spawn(async move {
        let _ = to_client.write_all(&reply).await;
        let _ = to_client.shutdown().await;
        // Keep the other direction open so what the client sends is taken, not refused.
        let _ = tokio::io::copy(&mut from_client, &mut tokio::io::sink()).await;
    });
    let result = crate::proxy::tunnel_for_fuzzing(&mut client, &target, "api.example", 443)
        .await
        .map_err(|e| e.to_string());
    drop(client);
    let _ = proxy.await;
    result
}

/// An exec session (stdin, stdout, stderr; `v5.channel.k8s.io` when `v5`, else v4) or a
/// port-forward of ports 80 and 81, whose server sends `input` as raw WebSocket frames
/// and then closes. The client's stdin gets a few bytes and is closed; its outputs are
/// read to their end. Returns the bytes read from stdout and the forwarded ports.
pub async fn websocket_session(port_forward: bool, v5: bool, input: &[u8]) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let (client, server) = tokio::io::duplex(1 << 16);
    let (mut from_client, mut to_client) = tokio::io::split(server);
    let input = input.to_vec();
    let peer = tokio::spawn(async move {
        let _ = to_client.write_all(&input).await;
        let _ = to_client.shutdown().await;
        let _ = tokio::io::copy(&mut from_client, &mut tokio::io::sink()).await;
    });
    let ws = crate::ws::client_socket(Box::new(client)).await;
    let mut out = Vec::new();
    let read_all = |mut r: Box<dyn tokio::io::AsyncRead + Unpin + Send>| async move {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf).await;
        buf
    };
    let work = async {
        if port_forward {
            let mut pf = crate::pod::Portforwarder::start(ws, &[80, 81]);
            for port in [80, 81] {
                if let Some(s) = pf.take_stream(port) {
                    out.extend(read_all(Box::new(s)).await);
                }
                if let Some(e) = pf.take_error(port) {
                    let _ = e.await;
                }
            }
            let _ = pf.join().await;
        } else {
            let protocol = if v5 {
                "v5.channel.k8s.io"
            } else {
                "v4.channel.k8s.io"
            };
            let params = crate::pod::AttachParams::default()
                .stdin(true)
                .stdout(true)
                .stderr(true);
            let mut proc = crate::pod::AttachedProcess::start(ws, protocol.to_string(), &params);
            if let Some(mut stdin) = proc.stdin() {
                let _ = stdin.write_all(b"hello").await;
                let _ = stdin.shutdown().await;
            }
            let stdout = proc.stdout();
            let stderr = proc.stderr();
            if let Some(s) = stdout {
                out.extend(read_all(Box::new(s)).await);
            }
            if let Some(s) = stderr {
                let _ = read_all(Box::new(s)).await;
            }
            let _ = proc.join().await;
        }
    };
    // The peer has closed: everything ends once the client has read what was sent.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), work).await;
    peer.abort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server's (unmasked) binary frame.
    fn frame(payload: &[u8], opcode: u8) -> Vec<u8> {
        let mut f = vec![0x80 | opcode, u8::try_from(payload.len()).unwrap_or(0)];
        f.extend_from_slice(payload);
        f
    }

    #[tokio::test]
    async fn a_websocket_session_reads_what_the_server_sends() {
        let mut input = frame(b"\x01", 2);
        input.extend(frame(b"\x01from the pod", 2));
        input.extend(frame(br#"\x03{"metadata":{},"status":"Success"}"#, 2));
        let out = websocket_session(false, true, &input).await;
        assert_eq!(out, b"from the pod");
        // Port-forward: each channel's first message is its port; then data.
        let mut input = Vec::new();
        for (ch, port) in [(0u8, 80u16), (1, 80), (2, 81), (3, 81)] {
            let mut m = vec![ch];
            m.extend_from_slice(&port.to_le_bytes());
            input.extend(frame(&m, 2));
        }
        input.extend(frame(b"\x00forwarded", 2));
        let out = websocket_session(true, false, &input).await;
        assert_eq!(out, b"forwarded");
    }
}
