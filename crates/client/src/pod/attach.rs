//! `exec` and `attach`: a process's stdin, stdout and stderr over a WebSocket.
//!
//! The sub-protocol is `v5.channel.k8s.io` (Kubernetes 1.30+), falling back to
//! `v4.channel.k8s.io`. Each binary message starts with a channel byte: 0 stdin, 1 stdout,
//! 2 stderr, 3 error (a `Status` with the exit code, sent last), 4 terminal resize. v5
//! adds `[255, channel]`, which closes a channel: the client sends `[255, 0]` when stdin
//! ends, so that `cat` and friends see end of file.

use crate::error::{Error, Result};
use crate::ws::WsStream;
use futures::{SinkExt, StreamExt};
use kubewright_core::{RequestError, Status};
use serde::Serialize;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream};
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message;

/// The sub-protocol with stream close (Kubernetes 1.30+).
pub(crate) const V5: &str = "v5.channel.k8s.io";
/// The sub-protocol before it.
pub(crate) const V4: &str = "v4.channel.k8s.io";

const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const ERROR: u8 = 3;
const RESIZE: u8 = 4;
const CLOSE: u8 = 255;

/// Buffer between the connection and each of the caller's streams.
const PIPE: usize = 64 * 1024;
/// The largest stdin chunk sent in one message.
const STDIN_CHUNK: usize = 32 * 1024;
/// The largest error-channel content kept (a Status is a few hundred bytes).
const MAX_STATUS: usize = 64 * 1024;

/// Which streams of a process to connect, and in which container.
///
/// The default connects stdout and stderr of the pod's only (or default) container.
///
/// ```
/// use kubewright_client::pod::AttachParams;
/// let ap = AttachParams::default().container("app").stdin(true);
/// let tty = AttachParams::interactive_tty();
/// # let _ = (ap, tty);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttachParams {
    /// The container; the server picks the default one when unset.
    pub container: Option<String>,
    /// Connect stdin.
    pub stdin: bool,
    /// Connect stdout.
    pub stdout: bool,
    /// Connect stderr (not with `tty`: a terminal merges it into stdout).
    pub stderr: bool,
    /// Allocate a terminal.
    pub tty: bool,
}

impl Default for AttachParams {
    fn default() -> Self {
        Self {
            container: None,
            stdin: false,
            stdout: true,
            stderr: true,
            tty: false,
        }
    }
}

impl AttachParams {
    /// stdin and stdout on a terminal, as `kubectl exec -it`.
    pub fn interactive_tty() -> Self {
        Self {
            container: None,
            stdin: true,
            stdout: true,
            stderr: false,
            tty: true,
        }
    }
    /// Sets the container.
    #[must_use]
    pub fn container(mut self, name: impl Into<String>) -> Self {
        self.container = Some(name.into());
        self
    }
    /// Connects stdin or not.
    #[must_use]
    pub fn stdin(mut self, on: bool) -> Self {
        self.stdin = on;
        self
    }
    /// Connects stdout or not.
    #[must_use]
    pub fn stdout(mut self, on: bool) -> Self {
        self.stdout = on;
        self
    }
    /// Connects stderr or not.
    #[must_use]
    pub fn stderr(mut self, on: bool) -> Self {
        self.stderr = on;
        self
    }
    /// Allocates a terminal or not.
    #[must_use]
    pub fn tty(mut self, on: bool) -> Self {
        self.tty = on;
        self
    }

    pub(crate) fn validate(&self) -> Result<()> {
        if !(self.stdin || self.stdout || self.stderr) {
            return Err(RequestError::Validation(
                "at least one of stdin, stdout and stderr must be connected".into(),
            )
            .into());
        }
        if self.tty && self.stderr {
            return Err(RequestError::Validation(
                "tty and stderr cannot both be set: a terminal merges stderr into stdout".into(),
            )
            .into());
        }
        Ok(())
    }

    /// The query pairs, after the `command` pairs of an exec.
    pub(crate) fn query_pairs(&self) -> Vec<(&'static str, String)> {
        let mut q = Vec::new();
        if let Some(c) = &self.container {
            q.push(("container", c.clone()));
        }
        for (key, on) in [
            ("stdin", self.stdin),
            ("stdout", self.stdout),
            ("stderr", self.stderr),
            ("tty", self.tty),
        ] {
            q.push((key, on.to_string()));
        }
        q
    }
}

/// A terminal size, sent on the resize channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct TerminalSize {
    /// Columns.
    #[serde(rename = "Width")]
    pub width: u16,
    /// Rows.
    #[serde(rename = "Height")]
    pub height: u16,
}

/// How a remote process ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExitStatus {
    /// The exit code: 0 for success.
    pub code: i32,
    /// The server's message for a non-zero code
    /// (`command terminated with non-zero exit code: …`).
    pub message: Option<String>,
}

impl ExitStatus {
    /// Whether the process exited with code 0.
    pub fn success(&self) -> bool {
        self.code == 0
    }
}

/// A process started by [`Api::exec`](crate::Api::exec) or attached to by
/// [`Api::attach`](crate::Api::attach).
///
/// Take its streams, use them, then [`join`](Self::join) for the exit status. Output is
/// buffered (64 KiB per stream) and then pushes back on the connection: read stdout and
/// stderr while writing stdin, or drop the ones you do not want (their output is then
/// discarded). Dropping or shutting down stdin sends end-of-file (on `v5.channel.k8s.io`;
/// older servers have no way to signal it).
#[derive(Debug)]
pub struct AttachedProcess {
    stdin: Option<DuplexStream>,
    stdout: Option<DuplexStream>,
    stderr: Option<DuplexStream>,
    resize: Option<mpsc::Sender<TerminalSize>>,
    done: oneshot::Receiver<Result<ExitStatus>>,
    task: tokio::task::JoinHandle<()>,
    protocol: String,
}

impl AttachedProcess {
    pub(crate) fn start(ws: WsStream, protocol: String, ap: &AttachParams) -> Self {
        let pipe = || tokio::io::duplex(PIPE);
        let (stdin, stdin_rx) = if ap.stdin {
            let (a, b) = pipe();
            (Some(a), Some(b))
        } else {
            (None, None)
        };
        let (stdout, stdout_tx) = if ap.stdout {
            let (a, b) = pipe();
            (Some(a), Some(b))
        } else {
            (None, None)
        };
        let (stderr, stderr_tx) = if ap.stderr {
            let (a, b) = pipe();
            (Some(a), Some(b))
        } else {
            (None, None)
        };
        let (resize, resize_rx) = if ap.tty {
            let (tx, rx) = mpsc::channel(8);
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        let (done_tx, done) = oneshot::channel();
        let session = Session {
            v5: protocol == V5,
            stdin: stdin_rx,
            stdout: stdout_tx,
            stderr: stderr_tx,
            resize: resize_rx,
        };
        let task = tokio::spawn(async move {
            let result = session.run(ws).await;
            let _ = done_tx.send(result);
        });
        Self {
            stdin,
            stdout,
            stderr,
            resize,
            done,
            task,
            protocol,
        }
    }

    /// The process's stdin (once; `None` if not connected).
    pub fn stdin(&mut self) -> Option<impl AsyncWrite + Unpin + Send + use<>> {
        self.stdin.take()
    }
    /// The process's stdout (once; `None` if not connected).
    pub fn stdout(&mut self) -> Option<impl AsyncRead + Unpin + Send + use<>> {
        self.stdout.take()
    }
    /// The process's stderr (once; `None` if not connected).
    pub fn stderr(&mut self) -> Option<impl AsyncRead + Unpin + Send + use<>> {
        self.stderr.take()
    }
    /// A sender of terminal sizes (once; only with `tty`).
    pub fn terminal_size(&mut self) -> Option<mpsc::Sender<TerminalSize>> {
        self.resize.take()
    }
    /// The sub-protocol the server chose (`v5.channel.k8s.io` or `v4.channel.k8s.io`).
    pub fn protocol(&self) -> &str {
        &self.protocol
    }

    /// Waits for the process to end. A process that ran gives its [`ExitStatus`]; an
    /// error the server reported instead (no such container, …) is [`Error::Api`]; a
    /// connection that broke is [`Error::WebSocket`] or [`Error::Protocol`].
    pub async fn join(self) -> Result<ExitStatus> {
        drop(self.stdin);
        match self.done.await {
            Ok(r) => r,
            Err(_) => Err(Error::Protocol(
                "the stream task ended without a result".into(),
            )),
        }
    }

    /// Closes the connection at once.
    pub fn abort(&self) {
        self.task.abort();
    }
}

struct Session {
    v5: bool,
    stdin: Option<DuplexStream>,
    stdout: Option<DuplexStream>,
    stderr: Option<DuplexStream>,
    resize: Option<mpsc::Receiver<TerminalSize>>,
}

impl Session {
    async fn run(mut self, ws: WsStream) -> Result<ExitStatus> {
        let (mut sink, mut source) = ws.split();
        let mut status = Vec::new();
        let mut buf = vec![0u8; STDIN_CHUNK + 1];
        let mut sending = true;
        let outcome: Result<()> = loop {
            tokio::select! {
                msg = source.next() => match msg {
                    None => break Ok(()),
                    Some(Err(e)) => break closed_or(e),
                    Some(Ok(Message::Binary(data))) => {
                        let Some((&channel, payload)) = data.split_first() else { continue };
                        match channel {
                            STDOUT => deliver(&mut self.stdout, payload).await,
                            STDERR => deliver(&mut self.stderr, payload).await,
                            ERROR => {
                                if status.len() + payload.len() > MAX_STATUS {
                                    break Err(Error::Protocol(format!(
                                        "the error channel carried more than {MAX_STATUS} bytes"
                                    )));
                                }
                                status.extend_from_slice(payload);
                            }
                            other => break Err(Error::Protocol(format!(
                                "the server sent data on channel {other}, which exec and attach do not have"
                            ))),
                        }
                    }
                    Some(Ok(Message::Text(_))) => break Err(Error::Protocol(
                        "the server sent a text message on a binary channel protocol".into(),
                    )),
                    Some(Ok(Message::Close(_))) => break Ok(()),
                    Some(Ok(_)) => {}
                },
                read = read_opt(&mut self.stdin, &mut buf[1..]), if sending && self.stdin.is_some() => {
                    match read {
                        Ok(0) | Err(_) => {
                            self.stdin = None;
                            if self.v5 && sink.send(Message::Binary(vec![CLOSE, STDIN].into())).await.is_err() {
                                sending = false;
                            }
                        }
                        Ok(n) => {
                            buf[0] = STDIN;
                            if sink.send(Message::Binary(buf[..=n].to_vec().into())).await.is_err() {
                                // The server went away; its close is read above.
                                sending = false;
                            }
                        }
                    }
                }
                size = recv_opt(&mut self.resize), if sending && self.resize.is_some() => {
                    match size {
                        None => self.resize = None,
                        Some(size) => {
                            let mut msg = vec![RESIZE];
                            // A struct of two integers always serializes.
                            msg.extend(serde_json::to_vec(&size).unwrap_or_default());
                            if sink.send(Message::Binary(msg.into())).await.is_err() {
                                sending = false;
                            }
                        }
                    }
                }
            }
        };
        // End of output for the caller's readers.
        drop(self.stdout.take());
        drop(self.stderr.take());
        let _ = tokio::time::timeout(Duration::from_secs(1), sink.close()).await;
        outcome?;
        exit_status(&status)
    }
}

/// Writes output to the caller's stream; once the caller has dropped it, output is
/// discarded.
async fn deliver(out: &mut Option<DuplexStream>, data: &[u8]) {
    if let Some(w) = out
        && w.write_all(data).await.is_err()
    {
        *out = None;
    }
}

async fn read_opt(r: &mut Option<DuplexStream>, buf: &mut [u8]) -> std::io::Result<usize> {
    match r {
        Some(r) => r.read(buf).await,
        None => std::future::pending().await,
    }
}

async fn recv_opt<T>(r: &mut Option<mpsc::Receiver<T>>) -> Option<T> {
    match r {
        Some(r) => r.recv().await,
        None => std::future::pending().await,
    }
}

/// A read error that only means the peer closed is the end of the session.
pub(crate) fn closed_or(e: tokio_tungstenite::tungstenite::Error) -> Result<()> {
    use tokio_tungstenite::tungstenite::Error as WsError;
    match e {
        WsError::ConnectionClosed | WsError::AlreadyClosed => Ok(()),
        other => Err(Error::WebSocket(Box::new(other))),
    }
}

/// The process's end from the error channel's Status.
fn exit_status(raw: &[u8]) -> Result<ExitStatus> {
    if raw.is_empty() {
        return Err(Error::Protocol(
            "the connection closed before the server sent the exit status".into(),
        ));
    }
    let status: Status = serde_json::from_slice(raw)
        .map_err(|e| Error::Protocol(format!("the exit status is not a Status object: {e}")))?;
    if status.status == "Success" {
        return Ok(ExitStatus {
            code: 0,
            message: None,
        });
    }
    if status.reason == "NonZeroExitCode" {
        let code = status
            .details
            .as_ref()
            .and_then(|d| d.causes.iter().find(|c| c.reason == "ExitCode"))
            .and_then(|c| c.message.trim().parse::<i32>().ok())
            .ok_or_else(|| {
                Error::Protocol(format!(
                    "a NonZeroExitCode status without an ExitCode cause: {}",
                    status.message
                ))
            })?;
        return Ok(ExitStatus {
            code,
            message: Some(status.message),
        });
    }
    let mut status = status;
    if status.code == 0 {
        // Errors on this channel carry no HTTP code; 500 is what the server means.
        status.code = 500;
    }
    Err(Error::Api(Box::new(status)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_statuses() {
        assert_eq!(
            exit_status(br#"{"metadata":{},"status":"Success"}"#).ok(),
            Some(ExitStatus {
                code: 0,
                message: None
            })
        );
        let s = exit_status(br#"{"metadata":{},"status":"Failure","message":"command terminated with non-zero exit code: error executing command [sh -c exit 3], exit code 3","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"3"}]}}"#);
        assert_eq!(s.as_ref().map(|s| s.code).ok(), Some(3));
        let err = exit_status(br#"{"metadata":{},"status":"Failure","message":"container not found (\"x\")","reason":"InternalError"}"#);
        assert!(matches!(err, Err(Error::Api(s)) if s.message.contains("container not found")));
        assert!(matches!(exit_status(b""), Err(Error::Protocol(_))));
        assert!(matches!(exit_status(b"{nope"), Err(Error::Protocol(_))));
        let no_code = exit_status(br#"{"status":"Failure","reason":"NonZeroExitCode"}"#);
        assert!(matches!(no_code, Err(Error::Protocol(_))));
    }

    #[test]
    fn params() {
        assert!(AttachParams::default().validate().is_ok());
        assert!(AttachParams::interactive_tty().validate().is_ok());
        assert!(
            AttachParams::default()
                .stdout(false)
                .stderr(false)
                .validate()
                .is_err()
        );
        assert!(AttachParams::default().tty(true).validate().is_err());
        let q = AttachParams::default().container("c").query_pairs();
        assert_eq!(q[0], ("container", "c".to_string()));
        assert!(q.contains(&("stdin", "false".to_string())));
        assert!(q.contains(&("stdout", "true".to_string())));
    }

    #[test]
    fn resize_json() {
        let v = serde_json::to_string(&TerminalSize {
            width: 80,
            height: 24,
        })
        .ok();
        assert_eq!(v.as_deref(), Some(r#"{"Width":80,"Height":24}"#));
    }
}
