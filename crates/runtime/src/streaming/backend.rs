//! What the streaming server needs from the runtime: run a command with live streams,
//! attach to a container's streams, and open a TCP connection inside a pod's network
//! namespace. The server (SPDY / WebSocket protocol handling) is written against this
//! trait only.

use tokio::io::{AsyncRead, AsyncWrite};

use crate::error::Result;

/// A byte source from the client (stdin).
pub type Input = Box<dyn AsyncRead + Send + Unpin>;
/// A byte sink towards the client (stdout, stderr).
pub type Output = Box<dyn AsyncWrite + Send + Unpin>;

/// A terminal size in character cells (the `resize` channel's `{"Width":..,"Height":..}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TerminalSize {
    /// Columns.
    pub width: u16,
    /// Rows.
    pub height: u16,
}

/// The client's streams for one exec or attach session. Absent streams were not asked
/// for. With `tty`, there is no stderr (the terminal merges it into stdout) and resize
/// events arrive on `resize`.
pub struct Streams {
    /// The client's stdin; end of stream closes the process' stdin.
    pub stdin: Option<Input>,
    /// Where the process' stdout (or the terminal's output) goes.
    pub stdout: Option<Output>,
    /// Where the process' stderr goes (never with `tty`).
    pub stderr: Option<Output>,
    /// Allocate a terminal (exec) / the container has one (attach).
    pub tty: bool,
    /// Terminal size changes, first one included (only with `tty`).
    pub resize: Option<tokio::sync::mpsc::Receiver<TerminalSize>>,
}

/// The runtime operations behind the CRI streaming endpoints (`Exec`, `Attach`,
/// `PortForward`).
#[async_trait::async_trait]
pub trait StreamBackend: Send + Sync + 'static {
    /// Runs `cmd` in the running container `container_id` with `streams` connected and
    /// returns its exit code once it has exited and its output has been delivered.
    /// Errors: `NotFound` (no such container), `FailedPrecondition` (not running).
    async fn exec(&self, container_id: &str, cmd: Vec<String>, streams: Streams) -> Result<i32>;

    /// Connects `streams` to the running container's own stdio (as `kubectl attach`)
    /// until the client hangs up or the container exits.
    async fn attach(&self, container_id: &str, streams: Streams) -> Result<()>;

    /// A TCP connection to `port` on the loopback address inside the network namespace of
    /// pod sandbox `sandbox_id`. Errors: `NotFound`, `FailedPrecondition` (sandbox not
    /// ready), or the connect error.
    async fn port_forward(&self, sandbox_id: &str, port: u16) -> Result<tokio::net::TcpStream>;
}
