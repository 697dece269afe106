//! Exec and attach sessions (upstream `kubelet/pkg/kubelet/cri/streaming/remotecommand`):
//! the client's streams arrive over SPDY (one stream per `streamType`) or WebSocket (one
//! channel each); the command runs through the [`StreamBackend`], and its outcome is
//! reported on the error stream, as a [`Status`] JSON from v4 on, as plain text before.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::WebSocket;
use k8s_cri::v1::{AttachRequest, ExecRequest};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::sync::mpsc;

use super::backend::{Input, Output, StreamBackend, Streams, TerminalSize};
use super::channel::Encoding;
use super::protocol::{Status, TerminalSizeMessage, channel, remotecommand, stream_type};
use super::spdy::{Role, Session};
use super::websocket::Connection;

/// How long the client has to open all its SPDY streams (upstream
/// `DefaultStreamCreationTimeout`).
const STREAM_CREATION_TIMEOUT: Duration = Duration::from_secs(30);

/// Sub-protocols accepted over SPDY, preferred first.
pub const SPDY_PROTOCOLS: &[&str] = &[
    remotecommand::V4,
    remotecommand::V3,
    remotecommand::V2,
    remotecommand::V1,
];

/// Sub-protocols accepted over WebSocket, preferred first (`""` is a client that names
/// none).
pub const WEBSOCKET_PROTOCOLS: &[&str] = &[
    remotecommand::V5,
    remotecommand::V4,
    remotecommand::V4_BASE64,
    remotecommand::V1,
    remotecommand::V1_BASE64,
    "",
];

/// Protocol generations, by what changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Version {
    /// Plain-text errors, no resize stream.
    V1,
    /// The error stream is always opened.
    V2,
    /// Adds the resize stream.
    V3,
    /// The error stream carries a `Status` JSON.
    V4,
    /// WebSocket: channels can be closed one at a time.
    V5,
}

fn version(protocol: &str) -> (Version, Encoding) {
    match protocol {
        remotecommand::V5 => (Version::V5, Encoding::Binary),
        remotecommand::V4 => (Version::V4, Encoding::Binary),
        remotecommand::V4_BASE64 => (Version::V4, Encoding::Base64),
        remotecommand::V3 => (Version::V3, Encoding::Binary),
        remotecommand::V2 => (Version::V2, Encoding::Binary),
        remotecommand::V1_BASE64 => (Version::V1, Encoding::Base64),
        _ => (Version::V1, Encoding::Binary),
    }
}

/// What to run and which streams the client asked for.
#[derive(Debug, Clone)]
pub struct Command {
    container_id: String,
    /// The command for exec; `None` for attach.
    cmd: Option<Vec<String>>,
    stdin: bool,
    stdout: bool,
    stderr: bool,
    tty: bool,
}

impl From<ExecRequest> for Command {
    fn from(req: ExecRequest) -> Self {
        Self {
            container_id: req.container_id,
            cmd: Some(req.cmd),
            stdin: req.stdin,
            stdout: req.stdout,
            stderr: req.stderr,
            tty: req.tty,
        }
    }
}

impl From<AttachRequest> for Command {
    fn from(req: AttachRequest) -> Self {
        Self {
            container_id: req.container_id,
            cmd: None,
            stdin: req.stdin,
            stdout: req.stdout,
            stderr: req.stderr,
            tty: req.tty,
        }
    }
}

/// The transport's ends of one session.
struct Wiring {
    stdin: Option<Input>,
    stdout: Option<Output>,
    stderr: Option<Output>,
    resize: Option<Input>,
    error: Output,
    /// Writers to end (SPDY FIN) once the command is over, before its status is sent.
    finish: Vec<Output>,
}

fn boxed_output<W: AsyncWrite + Send + Unpin + Clone + 'static>(
    writer: W,
    finish: &mut Vec<Output>,
) -> Output {
    finish.push(Box::new(writer.clone()));
    Box::new(writer)
}

fn boxed_input<R: AsyncRead + Send + Unpin + 'static>(reader: R) -> Input {
    Box::new(reader)
}

/// Serves an exec / attach session over an upgraded SPDY connection.
pub async fn serve_spdy<IO>(
    io: IO,
    protocol: &str,
    command: Command,
    backend: Arc<dyn StreamBackend>,
) where
    IO: AsyncRead + AsyncWrite + Send + 'static,
{
    let (version, _) = version(protocol);
    let (session, mut incoming) = Session::new(io, Role::Server);
    let mut expected = vec![stream_type::ERROR];
    for (wanted, kind) in [
        (command.stdin, stream_type::STDIN),
        (command.stdout, stream_type::STDOUT),
        (command.stderr && !command.tty, stream_type::STDERR),
        (command.tty && version >= Version::V3, stream_type::RESIZE),
    ] {
        if wanted {
            expected.push(kind);
        }
    }
    let mut streams = HashMap::new();
    let deadline = tokio::time::Instant::now() + STREAM_CREATION_TIMEOUT;
    while streams.len() < expected.len() {
        let stream = match tokio::time::timeout_at(deadline, incoming.recv()).await {
            Ok(Some(stream)) => stream,
            Ok(None) => return,
            Err(_) => {
                tracing::warn!("streaming client did not open its streams in time");
                session.close().await;
                return;
            }
        };
        let kind = stream
            .header(super::protocol::STREAM_TYPE_HEADER)
            .and_then(|kind| expected.iter().find(|wanted| **wanted == kind));
        match kind {
            Some(kind) if !streams.contains_key(kind) => {
                streams.insert(*kind, stream);
            }
            _ => {
                let _ = session.reset(stream.id).await;
            }
        }
    }
    let mut finish = Vec::new();
    let mut take = |kind| streams.remove(kind);
    let Some(error) = take(stream_type::ERROR) else {
        return;
    };
    let stdin = take(stream_type::STDIN).map(|s| boxed_input(s.reader));
    let stdout = take(stream_type::STDOUT).map(|s| boxed_output(s.writer, &mut finish));
    let stderr = take(stream_type::STDERR).map(|s| boxed_output(s.writer, &mut finish));
    let resize = take(stream_type::RESIZE).map(|s| boxed_input(s.reader));
    let wiring = Wiring {
        stdin,
        stdout,
        stderr,
        resize,
        error: Box::new(error.writer),
        finish,
    };
    run(&*backend, &command, version, wiring).await;
    session.close().await;
}

/// Serves an exec / attach session over an upgraded WebSocket.
pub async fn serve_websocket(
    socket: WebSocket,
    protocol: &str,
    command: Command,
    backend: Arc<dyn StreamBackend>,
) {
    let (version, encoding) = version(protocol);
    let mut inbound = Vec::new();
    if command.stdin {
        inbound.push(channel::STDIN);
    }
    if command.tty {
        inbound.push(channel::RESIZE);
    }
    let mut conn = Connection::new(socket, encoding, &inbound);
    // An empty message on the lowest writable channel tells the client the session is up.
    let first = match (command.stdout, command.stderr && !command.tty) {
        (true, _) => channel::STDOUT,
        (false, true) => channel::STDERR,
        (false, false) => channel::ERROR,
    };
    conn.announce(first).await;
    let mut finish = Vec::new();
    let wiring = Wiring {
        stdin: conn.reader(channel::STDIN).map(boxed_input),
        stdout: command
            .stdout
            .then(|| boxed_output(conn.writer(channel::STDOUT), &mut finish)),
        stderr: (command.stderr && !command.tty)
            .then(|| boxed_output(conn.writer(channel::STDERR), &mut finish)),
        resize: conn.reader(channel::RESIZE).map(boxed_input),
        error: Box::new(conn.writer(channel::ERROR)),
        finish,
    };
    run(&*backend, &command, version, wiring).await;
    conn.close().await;
}

/// Runs the command with the wired streams and reports how it ended on the error stream.
async fn run(backend: &dyn StreamBackend, command: &Command, version: Version, wiring: Wiring) {
    let Wiring {
        stdin,
        stdout,
        stderr,
        resize,
        mut error,
        finish,
    } = wiring;
    let (resize_tx, resize_rx) = mpsc::channel(16);
    let resizer = resize
        .filter(|_| command.tty)
        .map(|reader| tokio::spawn(decode_resizes(reader, resize_tx)));
    let streams = Streams {
        stdin,
        stdout,
        stderr,
        tty: command.tty,
        resize: resizer.is_some().then_some(resize_rx),
    };
    let status = match &command.cmd {
        Some(cmd) => match backend
            .exec(&command.container_id, cmd.clone(), streams)
            .await
        {
            Ok(0) => Status::success(),
            Ok(code) => Status::exit_code(cmd, code),
            Err(err) => {
                Status::internal_error(&format!("error executing command in container: {err}"))
            }
        },
        None => match backend.attach(&command.container_id, streams).await {
            Ok(()) => Status::success(),
            Err(err) => Status::internal_error(&format!("error attaching to container: {err}")),
        },
    };
    if let Some(resizer) = resizer {
        resizer.abort();
    }
    for mut writer in finish {
        let _ = writer.shutdown().await;
    }
    let report = if version >= Version::V4 {
        let mut json = serde_json::to_vec(&status).unwrap_or_default();
        json.push(b'\n');
        json
    } else if status.status == "Success" {
        Vec::new()
    } else {
        status.message.into_bytes()
    };
    if !report.is_empty() {
        let _ = error.write_all(&report).await;
    }
    let _ = error.shutdown().await;
}

/// Reads the resize stream (a sequence of `{"Width":..,"Height":..}` JSON values, in any
/// chunking) and forwards each size.
async fn decode_resizes(mut reader: Input, sizes: mpsc::Sender<TerminalSize>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        let n = match reader.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        let (messages, consumed, bad) = parse_sizes(&buf);
        buf.drain(..consumed);
        for message in messages {
            let size = TerminalSize {
                width: message.width,
                height: message.height,
            };
            if sizes.send(size).await.is_err() {
                return;
            }
        }
        if bad {
            tracing::warn!("malformed terminal resize message; ignoring further resizes");
            return;
        }
    }
}

/// The complete messages at the start of `buf`, the bytes they use, and whether a
/// malformed one follows.
fn parse_sizes(buf: &[u8]) -> (Vec<TerminalSizeMessage>, usize, bool) {
    let mut iter = serde_json::Deserializer::from_slice(buf).into_iter::<TerminalSizeMessage>();
    let mut messages = Vec::new();
    let mut consumed = 0;
    loop {
        match iter.next() {
            Some(Ok(message)) => {
                messages.push(message);
                consumed = iter.byte_offset();
            }
            None => return (messages, iter.byte_offset(), false),
            Some(Err(err)) => return (messages, consumed, !err.is_eof()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resize_messages_are_parsed_across_chunks() {
        let size = |width, height| TerminalSizeMessage { width, height };
        let (messages, consumed, bad) = parse_sizes(br#"{"Width":80,"Height":24}{"Width":100,"He"#);
        assert_eq!(messages, vec![size(80, 24)]);
        assert_eq!(consumed, 24);
        assert!(!bad);
        let (messages, consumed, bad) = parse_sizes(b"{\"Width\":1,\"Height\":2}\n ");
        assert_eq!((messages, consumed, bad), (vec![size(1, 2)], 24, false));
        assert!(parse_sizes(b"[1]").2);
    }

    #[test]
    fn protocols_map_to_generations() {
        assert_eq!(
            version("v5.channel.k8s.io"),
            (Version::V5, Encoding::Binary)
        );
        assert_eq!(
            version("v4.base64.channel.k8s.io"),
            (Version::V4, Encoding::Base64)
        );
        assert_eq!(version(""), (Version::V1, Encoding::Binary));
        assert!(Version::V3 >= Version::V3 && Version::V2 < Version::V4);
    }
}
