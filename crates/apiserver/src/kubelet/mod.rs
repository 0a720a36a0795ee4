//! A simulated kubelet: one fake Node, pods bound to it that become Running and Ready,
//! graceful termination, and the pod I/O a kubelet serves (`pods/log`, `pods/exec`,
//! `pods/attach`, `pods/portforward`) answered by pluggable handlers.
//!
//! Nothing here runs host programs: the built-in handlers ([`Kubelet::new`]) produce
//! log lines that name their container, exec a tiny set of built-in commands and
//! forward ports to an echo service. Tests replace them with [`Kubelet::logs`],
//! [`Kubelet::exec`] and [`Kubelet::port_forward`].

mod builtin;
mod idle;
mod io;
mod run;
mod sim;
mod ws;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncRead, AsyncWrite};

pub(crate) use io::serve;
pub(crate) use sim::{graceful_delete, mark_terminating, run};
pub(crate) use ws::fuzz_session;

/// The default name of the simulated node.
pub const DEFAULT_NODE: &str = "kubewright-node";

/// A pod, as handlers see it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PodRef {
    /// Namespace.
    pub namespace: String,
    /// Pod name.
    pub name: String,
    /// Pod uid.
    pub uid: String,
}

/// One container of a pod, as handlers see it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ContainerRef {
    /// The pod.
    pub pod: PodRef,
    /// Container name.
    pub container: String,
    /// Container image, as in the pod spec.
    pub image: String,
}

/// Produces a container's log: called once when the container starts; every line the
/// stream yields (without its newline) is logged with the time it arrived. A stream that
/// stays open keeps adding lines (what `kubectl logs -f` shows).
pub trait LogSource: Send + Sync + 'static {
    /// The container's output lines.
    fn lines(&self, container: &ContainerRef) -> BoxStream<'static, String>;
}

impl<F, S> LogSource for F
where
    F: Fn(&ContainerRef) -> S + Send + Sync + 'static,
    S: futures::Stream<Item = String> + Send + 'static,
{
    fn lines(&self, container: &ContainerRef) -> BoxStream<'static, String> {
        Box::pin(self(container))
    }
}

/// Whether a session runs a new command or attaches to the container's main process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionKind {
    /// `pods/exec`: runs `command`.
    Exec,
    /// `pods/attach`: the container's main process (`command` is empty).
    Attach,
}

/// A terminal size, from the client's resize channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
pub struct TerminalSize {
    /// Columns.
    #[serde(rename = "Width")]
    pub width: u16,
    /// Rows.
    #[serde(rename = "Height")]
    pub height: u16,
}

/// The stdin of a session: reads end when the client closes stdin (or goes away).
pub type Stdin = Box<dyn AsyncRead + Send + Unpin>;
/// The stdout or stderr of a session; dropping it ends the stream.
pub type Output = Box<dyn AsyncWrite + Send + Unpin>;

/// One exec or attach session, handed to an [`ExecHandler`]. Each stream is present
/// only when the client asked for it. Writes wait while the client is slow to read (at
/// most a small buffer is held); they fail once the client is gone.
pub struct ExecSession {
    /// Exec or attach.
    pub kind: SessionKind,
    /// The container.
    pub container: ContainerRef,
    /// The command (exec; empty for attach).
    pub command: Vec<String>,
    /// Whether the client asked for a terminal (stderr is then merged away, as with a
    /// real TTY).
    pub tty: bool,
    /// The container's environment: literal `env` values of the pod spec, plus
    /// `HOSTNAME`.
    pub env: Vec<(String, String)>,
    /// Standard input.
    pub stdin: Option<Stdin>,
    /// Standard output.
    pub stdout: Option<Output>,
    /// Standard error (never with `tty`).
    pub stderr: Option<Output>,
    /// Terminal size changes (with `tty`).
    pub resize: tokio::sync::mpsc::Receiver<TerminalSize>,
}

impl std::fmt::Debug for ExecSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecSession")
            .field("kind", &self.kind)
            .field("container", &self.container)
            .field("command", &self.command)
            .field("tty", &self.tty)
            .field("stdin", &self.stdin.is_some())
            .field("stdout", &self.stdout.is_some())
            .field("stderr", &self.stderr.is_some())
            .finish()
    }
}

/// Runs exec and attach sessions; the future's output is the exit code (0: success).
pub trait ExecHandler: Send + Sync + 'static {
    /// Serves one session.
    fn handle(&self, session: ExecSession) -> BoxFuture<'static, i32>;
}

impl<F, Fut> ExecHandler for F
where
    F: Fn(ExecSession) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = i32> + Send + 'static,
{
    fn handle(&self, session: ExecSession) -> BoxFuture<'static, i32> {
        Box::pin(self(session))
    }
}

/// Where a forwarded pod port leads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PortTarget {
    /// Dial this TCP address.
    Tcp(SocketAddr),
    /// A built-in echo service: every byte sent comes back.
    Echo,
    /// Nothing listens: the client gets this text on the port's error channel.
    Refuse(String),
}

/// Chooses the target of each forwarded port.
pub trait PortForwarder: Send + Sync + 'static {
    /// The target of `port` of `pod`.
    fn target(&self, pod: &PodRef, port: u16) -> PortTarget;
}

impl<F> PortForwarder for F
where
    F: Fn(&PodRef, u16) -> PortTarget + Send + Sync + 'static,
{
    fn target(&self, pod: &PodRef, port: u16) -> PortTarget {
        self(pod, port)
    }
}

/// The simulated kubelet's configuration, for [`crate::ServerBuilder::kubelet`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use kubewright_apiserver::{Kubelet, PortTarget, TestServer};
/// let kubelet = Kubelet::new()
///     .logs(|c: &kubewright_apiserver::ContainerRef| {
///         futures::stream::iter(vec![format!("hello from {}", c.container)])
///     })
///     .exec(|s: kubewright_apiserver::ExecSession| async move {
///         if s.command == ["false"] { 1 } else { 0 }
///     })
///     .port_forward(|_: &kubewright_apiserver::PodRef, _port| PortTarget::Echo);
/// let server = TestServer::builder().kubelet(kubelet).start().await.unwrap();
/// # drop(server);
/// # }
/// ```
#[derive(Clone)]
pub struct Kubelet {
    node: String,
    /// A streaming session with no byte in either direction for this long is closed.
    idle_timeout: std::time::Duration,
    /// Streaming sessions open at once.
    max_sessions: usize,
    logs: Arc<dyn LogSource>,
    exec: Arc<dyn ExecHandler>,
    ports: Arc<dyn PortForwarder>,
    state: Arc<State>,
}

impl std::fmt::Debug for Kubelet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kubelet").field("node", &self.node).finish()
    }
}

impl Default for Kubelet {
    fn default() -> Self {
        Self::new()
    }
}

impl Kubelet {
    /// A kubelet with the safe built-in behaviour: logs that name their container, the
    /// built-in commands (`echo`, `cat`, `env`, `hostname`, `true`, `false`,
    /// `sh -c "…"`, `sleep`; anything else exits 127) and an echo service on every
    /// forwarded port. It never runs host programs.
    pub fn new() -> Self {
        Self {
            node: DEFAULT_NODE.to_string(),
            idle_timeout: DEFAULT_STREAMING_IDLE_TIMEOUT,
            max_sessions: DEFAULT_MAX_STREAMING_SESSIONS,
            logs: Arc::new(builtin::logs),
            exec: Arc::new(builtin::exec),
            ports: Arc::new(|_: &PodRef, _: u16| PortTarget::Echo),
            state: Arc::default(),
        }
    }

    /// How long an exec, attach or port-forward session may go without a byte in either
    /// direction before it is closed: the kubelet's `--streaming-connection-idle-timeout`
    /// (default [`DEFAULT_STREAMING_IDLE_TIMEOUT`], 4 hours).
    #[must_use]
    pub fn streaming_idle_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// How many exec, attach and port-forward sessions may be open at once (default
    /// [`DEFAULT_MAX_STREAMING_SESSIONS`]); more are refused with 429. Each holds a task
    /// and buffers, and none holds one of the server's in-flight seats once upgraded.
    #[must_use]
    pub fn max_streaming_sessions(mut self, max: usize) -> Self {
        self.max_sessions = max;
        self
    }

    /// The name of the fake Node (default [`DEFAULT_NODE`]).
    #[must_use]
    pub fn node_name(mut self, name: impl Into<String>) -> Self {
        self.node = name.into();
        self
    }

    /// Replaces the log source.
    #[must_use]
    pub fn logs(mut self, source: impl LogSource) -> Self {
        self.logs = Arc::new(source);
        self
    }

    /// Replaces the exec and attach handler.
    #[must_use]
    pub fn exec(mut self, handler: impl ExecHandler) -> Self {
        self.exec = Arc::new(handler);
        self
    }

    /// Replaces the port-forward targets.
    #[must_use]
    pub fn port_forward(mut self, forwarder: impl PortForwarder) -> Self {
        self.ports = Arc::new(forwarder);
        self
    }

    /// Forwards every port to one TCP address.
    #[must_use]
    pub fn port_forward_to(self, addr: SocketAddr) -> Self {
        self.port_forward(move |_: &PodRef, _: u16| PortTarget::Tcp(addr))
    }

    /// The built-in exec and attach behaviour, for handlers that fall back to it.
    pub fn builtin_exec(session: ExecSession) -> BoxFuture<'static, i32> {
        Box::pin(builtin::exec(session))
    }

    /// The fake Node's name.
    pub fn node(&self) -> &str {
        &self.node
    }
}

/// One logged line.
#[derive(Clone, Debug)]
pub(crate) struct LogLine {
    pub time: jiff::Timestamp,
    pub text: String,
}

/// A container's log: its lines and a signal for followers.
#[derive(Debug)]
pub(crate) struct LogBuf {
    pub lines: Mutex<Vec<LogLine>>,
    /// Bumped on every new line and when the log ends (`closed`).
    pub changed: tokio::sync::watch::Sender<u64>,
    pub closed: std::sync::atomic::AtomicBool,
}

impl LogBuf {
    fn new() -> Self {
        Self {
            lines: Mutex::new(Vec::new()),
            changed: tokio::sync::watch::Sender::new(0),
            closed: false.into(),
        }
    }
    pub(crate) fn push(&self, text: String) {
        self.lines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(LogLine {
                time: jiff::Timestamp::now(),
                text,
            });
        self.changed.send_modify(|n| *n += 1);
    }
    pub(crate) fn close(&self) {
        self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        self.changed.send_modify(|n| *n += 1);
    }
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Runtime state: container logs by (pod uid, container).
#[derive(Debug, Default)]
pub(crate) struct State {
    pub logs: Mutex<HashMap<(String, String), Arc<LogBuf>>>,
    pub next_ip: std::sync::atomic::AtomicU32,
    /// Streaming sessions open now.
    pub sessions: Arc<std::sync::atomic::AtomicUsize>,
}

/// The kubelet's default `--streaming-connection-idle-timeout`: 4 hours.
pub const DEFAULT_STREAMING_IDLE_TIMEOUT: std::time::Duration =
    std::time::Duration::from_secs(4 * 3600);
/// Streaming sessions open at once by default.
pub const DEFAULT_MAX_STREAMING_SESSIONS: usize = 1024;

impl Kubelet {
    /// A slot for a new streaming session, or None when all are taken.
    pub(crate) fn session_slot(&self) -> Option<idle::SessionSlot> {
        idle::take_slot(&self.state.sessions, self.max_sessions)
    }

    /// See [`Kubelet::streaming_idle_timeout`].
    pub(crate) fn idle_timeout(&self) -> std::time::Duration {
        self.idle_timeout
    }

    pub(crate) fn log_buf(&self, uid: &str, container: &str) -> Option<Arc<LogBuf>> {
        self.state
            .logs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(uid.to_string(), container.to_string()))
            .cloned()
    }
}
