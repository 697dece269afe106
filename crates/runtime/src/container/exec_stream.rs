//! Exec with live streams (CRI `Exec` through the streaming server): `runc exec` with the
//! client's streams on pipes, or on a terminal.
//!
//! With a terminal, runc runs in the foreground on a pty the runtime opens (`openpty`, no
//! fork): runc refuses `--console-socket` unless it detaches, and a detached exec'd process
//! would be reparented away from the runtime, losing its exit code. In the foreground runc
//! allocates the container-side terminal, relays it to our pty and exits with the process'
//! exit code; the runtime applies the client's sizes to its pty with `TIOCSWINSZ` and sends
//! runc SIGWINCH, on which runc copies the size to the container's terminal.

use std::fs::File;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context as _;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::mpsc::Receiver;
use tokio::task::JoinHandle;

use super::exec::exit_code;
use super::runc::Runc;
use crate::error::{Error, Result};
use crate::runtime::Runtime;
use crate::shim::protocol::CHUNK;
use crate::streaming::{Output, Streams, TerminalSize};

/// How long output is still relayed after the exec'd process exited: background processes
/// it left behind may hold its stdout open.
const DRAIN_DEADLINE: Duration = Duration::from_secs(2);

impl Runtime {
    /// Runs `cmd` in the running container `container_id` with `streams` connected and
    /// returns its exit code (`128 + signal` when killed) once it exited and its output was
    /// relayed. With `streams.tty` the process gets a terminal (stdout carries its output,
    /// `resize` its size). The client's end of stdin closes the process' stdin (no-op with
    /// a terminal). Errors: `InvalidArgument` (empty command), `NotFound`,
    /// `FailedPrecondition` (not running). Dropping the future kills the process' runc.
    pub(crate) async fn exec_streams(
        &self,
        container_id: &str,
        cmd: Vec<String>,
        streams: Streams,
    ) -> Result<i32> {
        if cmd.is_empty() {
            return Err(Error::InvalidArgument("exec command is required".into()));
        }
        let handler = self.running_container(container_id).await?.runtime_handler;
        let runc = self.runc(&handler);
        let pid_file = self
            .bundle(container_id)
            .join(format!("exec-{}.pid", crate::id::generate()?));
        let result = match streams.tty {
            true => exec_tty(&runc, container_id, &pid_file, &cmd, streams).await,
            false => exec_pipes(&runc, container_id, &pid_file, &cmd, streams).await,
        };
        let _ = crate::store::remove_file_if_exists(&pid_file);
        result
    }
}

async fn exec_pipes(
    runc: &Runc,
    id: &str,
    pid_file: &Path,
    cmd: &[String],
    streams: Streams,
) -> Result<i32> {
    let piped = |wanted: bool| match wanted {
        true => Stdio::piped(),
        false => Stdio::null(),
    };
    let mut child = runc
        .exec_command(id, pid_file, cmd, false)
        .stdin(piped(streams.stdin.is_some()))
        .stdout(piped(streams.stdout.is_some()))
        .stderr(piped(streams.stderr.is_some()))
        .spawn()
        .context("running runc exec")?;
    let input = match (streams.stdin, child.stdin.take()) {
        (Some(mut from), Some(mut to)) => Some(tokio::spawn(async move {
            // The process' stdin closes when `to` is dropped.
            let _ = tokio::io::copy(&mut from, &mut to).await;
        })),
        _ => None,
    };
    let outputs = [
        relay(child.stdout.take(), streams.stdout),
        relay(child.stderr.take(), streams.stderr),
    ];
    let status = child.wait().await.context("waiting for runc exec");
    finish(input, outputs).await;
    Ok(exit_code(status?))
}

async fn exec_tty(
    runc: &Runc,
    id: &str,
    pid_file: &Path,
    cmd: &[String],
    streams: Streams,
) -> Result<i32> {
    let pty = nix::pty::openpty(None, None).context("openpty")?;
    let mut resize = streams.resize;
    // Sizes already known are applied before runc reads the terminal.
    if let Some(sizes) = resize.as_mut() {
        while let Ok(size) = sizes.try_recv() {
            set_size(&pty.master, size)?;
        }
    }
    let terminal = |fd: &OwnedFd| fd.try_clone().map(Stdio::from);
    let mut command = runc.exec_command(id, pid_file, cmd, true);
    command
        .stdin(terminal(&pty.slave)?)
        .stdout(terminal(&pty.slave)?)
        .stderr(terminal(&pty.slave)?);
    let spawned = command.spawn().context("running runc exec --tty");
    drop(command); // only runc holds the slave now: its exit ends our reads
    drop(pty.slave);
    let mut child = spawned?;
    let runc = child.id().and_then(|pid| i32::try_from(pid).ok());
    let input = streams.stdin.map(|mut from| {
        let to = pty.master.try_clone().map(File::from);
        tokio::spawn(async move {
            if let Ok(to) = to {
                let mut to = tokio::fs::File::from_std(to);
                let _ = tokio::io::copy(&mut from, &mut to).await;
            }
        })
    });
    let resizer =
        resize.map(|sizes| tokio::spawn(resize_loop(pty.master.try_clone(), sizes, runc)));
    let output = tokio::fs::File::from_std(File::from(pty.master.try_clone()?));
    let outputs = [relay(Some(output), streams.stdout), None];
    let status = child.wait().await.context("waiting for runc exec");
    if let Some(resizer) = resizer {
        resizer.abort();
    }
    finish(input, outputs).await;
    Ok(exit_code(status?))
}

/// Applies each size to the terminal and tells runc (SIGWINCH) to pass it on.
async fn resize_loop(
    master: std::io::Result<OwnedFd>,
    mut sizes: Receiver<TerminalSize>,
    runc: Option<i32>,
) {
    let Ok(master) = master else { return };
    while let Some(size) = sizes.recv().await {
        if let Err(err) = set_size(&master, size) {
            tracing::warn!("resizing an exec terminal: {err:#}");
            continue;
        }
        if let Some(pid) = runc {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGWINCH,
            );
        }
    }
}

fn set_size(master: &OwnedFd, size: TerminalSize) -> Result<()> {
    crate::shim::set_window_size(master, size.width, size.height)
        .context("setting the terminal size")?;
    Ok(())
}

/// Copies `src` to `dst` until end of stream, in a task. A pty reports `EIO` once its other
/// side closed: that ends the stream too. When the client's side fails, the rest is read
/// and discarded so that the process never blocks on its output.
fn relay(
    src: Option<impl AsyncRead + Send + Unpin + 'static>,
    dst: Option<Output>,
) -> Option<JoinHandle<()>> {
    let mut src = src?;
    Some(tokio::spawn(async move {
        let mut dst = dst;
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = match src.read(&mut buf).await {
                Ok(0) => break,
                Ok(n) => n,
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break, // EIO of a pty, or a broken pipe: the end
            };
            if let Some(out) = dst.as_mut()
                && (out.write_all(&buf[..n]).await.is_err() || out.flush().await.is_err())
            {
                dst = None;
            }
        }
    }))
}

/// After the process exited: lets the output relays finish (at most [`DRAIN_DEADLINE`])
/// and stops the stdin relay.
async fn finish(input: Option<JoinHandle<()>>, outputs: [Option<JoinHandle<()>>; 2]) {
    let deadline = tokio::time::Instant::now() + DRAIN_DEADLINE;
    for mut output in outputs.into_iter().flatten() {
        if tokio::time::timeout_at(deadline, &mut output)
            .await
            .is_err()
        {
            output.abort();
        }
    }
    if let Some(input) = input {
        input.abort();
    }
}
