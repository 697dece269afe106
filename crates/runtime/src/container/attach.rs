//! Attach (CRI `Attach` through the streaming server): the client's streams connected to a
//! running container's own stdio, through its shim's socket ([`crate::shim::protocol`]),
//! which outlives runtime restarts.

use anyhow::Context as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{mpsc, oneshot};

use crate::error::{Error, Result};
use crate::runtime::Runtime;
use crate::shim::protocol::{self, CHUNK, Frame};
use crate::streaming::{Input, Output, Streams, TerminalSize};

/// Frames queued towards the shim.
const QUEUE: usize = 16;

impl Runtime {
    /// Connects `streams` to the running container's stdio until the container exits (its
    /// output delivered) or the client's output fails. The client's stdin reaches the
    /// container only when it was created with `stdin`. When the client's stdin ends,
    /// as containerd: with `stdin_once` and no tty the container's stdin is closed and the
    /// session goes on until the container exits; otherwise the session ends. Resizes
    /// apply to a tty container's terminal. What the container writes meanwhile still goes
    /// to the CRI log. Errors: `NotFound`, `FailedPrecondition` (not running).
    pub(crate) async fn attach_streams(&self, container_id: &str, streams: Streams) -> Result<()> {
        let config = self.running_container(container_id).await?.config;
        let stdin = streams.stdin.filter(|_| config.stdin);
        let stderr = streams.stderr.filter(|_| !config.tty);
        let hello = Frame::Attach {
            stdin: stdin.is_some(),
            stdout: streams.stdout.is_some(),
            stderr: stderr.is_some(),
        };
        let output_wanted = streams.stdout.is_some() || stderr.is_some();
        // Only a pipe closes for good (`stdin_once`); a terminal stays open.
        let closes_stdin = config.stdin_once && !config.tty;
        let ends_with_stdin = stdin.is_some() && !closes_stdin;
        let (reader, mut writer) = self.connect_shim(container_id).await?.into_split();
        writer
            .write_all(&hello.encode())
            .await
            .context("writing to the shim")?;
        let (stdin_done, stdin_ended) = oneshot::channel();
        let input = tokio::spawn(send_input(writer, stdin, stdin_done, streams.resize));
        let result = tokio::select! {
            result = receive_output(reader, streams.stdout, stderr) => result,
            _ = stdin_ended, if ends_with_stdin || !output_wanted => Ok(()),
        };
        input.abort();
        result
    }

    /// A connection to the shim of running container `id`; `FailedPrecondition` when no
    /// shim serves it (the container just exited, or its shim died).
    pub(crate) async fn connect_shim(&self, id: &str) -> Result<UnixStream> {
        protocol::connect(&self.bundle(id))
            .await
            .map_err(|err| match err.kind() {
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
                    Error::FailedPrecondition(format!(
                        "container {id} is not running (no shim serves it)"
                    ))
                }
                _ => Error::Internal(anyhow::Error::from(err).context("connecting to the shim")),
            })
    }
}

/// Relays the client's stdin ([`Frame::Stdin`], then [`Frame::CloseStdin`], then
/// `stdin_done` once that is written) and terminal sizes to the shim.
async fn send_input(
    mut writer: OwnedWriteHalf,
    stdin: Option<Input>,
    stdin_done: oneshot::Sender<()>,
    resize: Option<mpsc::Receiver<TerminalSize>>,
) {
    let (frames, mut queue) = mpsc::channel::<(Frame, Option<oneshot::Sender<()>>)>(QUEUE);
    if let Some(mut stdin) = stdin {
        let frames = frames.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; CHUNK];
            while let Ok(n) = stdin.read(&mut buf).await {
                let frame = Frame::Stdin(buf[..n].to_vec());
                if n == 0 || frames.send((frame, None)).await.is_err() {
                    break;
                }
            }
            let _ = frames.send((Frame::CloseStdin, Some(stdin_done))).await;
        });
    }
    if let Some(mut sizes) = resize {
        let frames = frames.clone();
        tokio::spawn(async move {
            while let Some(size) = sizes.recv().await {
                let frame = Frame::Resize {
                    width: size.width,
                    height: size.height,
                };
                if frames.send((frame, None)).await.is_err() {
                    break;
                }
            }
        });
    }
    drop(frames);
    while let Some((frame, written)) = queue.recv().await {
        if writer.write_all(&frame.encode()).await.is_err() {
            break;
        }
        if let Some(written) = written {
            let _ = written.send(());
        }
    }
}

/// Writes the shim's output frames to the client until the shim closes the connection.
async fn receive_output(
    mut reader: OwnedReadHalf,
    mut stdout: Option<Output>,
    mut stderr: Option<Output>,
) -> Result<()> {
    while let Some(frame) = Frame::read_async(&mut reader)
        .await
        .context("reading from the shim")?
    {
        let (dst, data) = match frame {
            Frame::Stdout(data) => (stdout.as_mut(), data),
            Frame::Stderr(data) => (stderr.as_mut(), data),
            _ => continue,
        };
        if let Some(dst) = dst
            && (dst.write_all(&data).await.is_err() || dst.flush().await.is_err())
        {
            return Ok(()); // the client hung up
        }
    }
    Ok(())
}
