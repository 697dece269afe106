//! The shim's socket protocol, served on `<bundle>/attach.sock` by the shim and spoken by
//! the runtime: attach sessions to the container's stdio and log reopening. The socket is
//! found by path, so a restarted runtime reaches the shims of the containers it recovers.
//!
//! A connection carries frames `<kind: u8> <length: u32 big endian> <payload>`. The client
//! opens it with [`Frame::Attach`] or [`Frame::ReopenLog`]:
//!
//! - attach: the client sends [`Frame::Stdin`], [`Frame::CloseStdin`] and
//!   [`Frame::Resize`]; the shim sends [`Frame::Stdout`] and [`Frame::Stderr`] (what the
//!   container writes from then on, also written to the CRI log) and closes the connection
//!   once the container exited and its output was delivered;
//! - reopen-log: the shim reopens the CRI log file and answers with one [`Frame::Reply`].

use std::io::{self, Read, Write};
use std::path::Path;

use tokio::io::{AsyncRead, AsyncReadExt as _};

/// File name of the socket in the bundle directory.
pub const SOCKET: &str = "attach.sock";

/// Largest payload accepted, bytes.
pub const MAX_PAYLOAD: usize = 1 << 20;

/// Largest chunk of stdio data the shim and the runtime put in one frame, bytes.
pub const CHUNK: usize = 32 * 1024;

const ATTACH: u8 = 1;
const REOPEN_LOG: u8 = 2;
const STDIN: u8 = 3;
const CLOSE_STDIN: u8 = 4;
const RESIZE: u8 = 5;
const STDOUT: u8 = 6;
const STDERR: u8 = 7;
const REPLY: u8 = 8;

/// One protocol message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// Client, first frame: attach to the streams asked for.
    Attach {
        /// Forward [`Frame::Stdin`] to the container's stdin.
        stdin: bool,
        /// Receive the container's stdout (the terminal's output with a tty).
        stdout: bool,
        /// Receive the container's stderr.
        stderr: bool,
    },
    /// Client, first frame: reopen the CRI log file (after log rotation).
    ReopenLog,
    /// Client: bytes for the container's stdin.
    Stdin(Vec<u8>),
    /// Client: its stdin ended. With `stdin_once` the container's stdin is closed.
    CloseStdin,
    /// Client: new terminal size, in character cells.
    Resize {
        /// Columns.
        width: u16,
        /// Rows.
        height: u16,
    },
    /// Shim: bytes the container wrote to stdout.
    Stdout(Vec<u8>),
    /// Shim: bytes the container wrote to stderr.
    Stderr(Vec<u8>),
    /// Shim: the outcome of a request; `Err` carries the error text.
    Reply(Result<(), String>),
}

impl Frame {
    /// The encoded frame.
    pub fn encode(&self) -> Vec<u8> {
        let (kind, payload): (u8, Vec<u8>) = match self {
            Frame::Attach {
                stdin,
                stdout,
                stderr,
            } => (
                ATTACH,
                vec![u8::from(*stdin) | u8::from(*stdout) << 1 | u8::from(*stderr) << 2],
            ),
            Frame::ReopenLog => (REOPEN_LOG, Vec::new()),
            Frame::Stdin(data) => (STDIN, data.clone()),
            Frame::CloseStdin => (CLOSE_STDIN, Vec::new()),
            Frame::Resize { width, height } => {
                (RESIZE, [width.to_be_bytes(), height.to_be_bytes()].concat())
            }
            Frame::Stdout(data) => (STDOUT, data.clone()),
            Frame::Stderr(data) => (STDERR, data.clone()),
            Frame::Reply(Ok(())) => (REPLY, Vec::new()),
            Frame::Reply(Err(text)) => (REPLY, text.as_bytes().to_vec()),
        };
        let mut out = Vec::with_capacity(5 + payload.len());
        out.push(kind);
        out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        out.extend_from_slice(&payload);
        out
    }

    fn decode(kind: u8, payload: Vec<u8>) -> io::Result<Frame> {
        Ok(match kind {
            ATTACH => {
                let flags = payload.first().copied().unwrap_or(0);
                Frame::Attach {
                    stdin: flags & 1 != 0,
                    stdout: flags & 2 != 0,
                    stderr: flags & 4 != 0,
                }
            }
            REOPEN_LOG => Frame::ReopenLog,
            STDIN => Frame::Stdin(payload),
            CLOSE_STDIN => Frame::CloseStdin,
            RESIZE => match payload[..] {
                [w0, w1, h0, h1] => Frame::Resize {
                    width: u16::from_be_bytes([w0, w1]),
                    height: u16::from_be_bytes([h0, h1]),
                },
                _ => return Err(invalid("resize frame of the wrong size")),
            },
            STDOUT => Frame::Stdout(payload),
            STDERR => Frame::Stderr(payload),
            REPLY if payload.is_empty() => Frame::Reply(Ok(())),
            REPLY => Frame::Reply(Err(String::from_utf8_lossy(&payload).into_owned())),
            other => return Err(invalid(&format!("unknown frame kind {other}"))),
        })
    }

    /// Writes the frame (blocking).
    pub fn write_to(&self, out: &mut impl Write) -> io::Result<()> {
        out.write_all(&self.encode())
    }

    /// Reads one frame (blocking); `None` at end of stream before a frame started.
    pub fn read_from(input: &mut impl Read) -> io::Result<Option<Frame>> {
        let mut header = [0u8; 5];
        match input.read_exact(&mut header[..1]) {
            Err(err) if err.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            other => other?,
        }
        input.read_exact(&mut header[1..])?;
        let mut payload = vec![0u8; payload_len(&header)?];
        input.read_exact(&mut payload)?;
        Frame::decode(header[0], payload).map(Some)
    }

    /// Reads one frame; `None` at end of stream before a frame started.
    pub async fn read_async(input: &mut (impl AsyncRead + Unpin)) -> io::Result<Option<Frame>> {
        let mut header = [0u8; 5];
        match input.read_exact(&mut header[..1]).await {
            Err(err) if err.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            other => other?,
        };
        input.read_exact(&mut header[1..]).await?;
        let mut payload = vec![0u8; payload_len(&header)?];
        input.read_exact(&mut payload).await?;
        Frame::decode(header[0], payload).map(Some)
    }
}

fn payload_len(header: &[u8; 5]) -> io::Result<usize> {
    let len = u32::from_be_bytes([header[1], header[2], header[3], header[4]]) as usize;
    if len > MAX_PAYLOAD {
        return Err(invalid(&format!("frame of {len} bytes is too large")));
    }
    Ok(len)
}

fn invalid(text: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, text.to_string())
}

/// A path that names `name` in the directory open as `dir`, short enough for a unix
/// socket address (at most 108 bytes, which bundle paths can exceed):
/// `/proc/<pid>/fd/<fd>/<name>`. `pid` is the process holding `dir` open (the one asking,
/// or the parent of a child that should reach the socket).
pub fn short_path(pid: u32, dir: &impl std::os::fd::AsRawFd, name: &str) -> std::path::PathBuf {
    format!("/proc/{pid}/fd/{}/{name}", dir.as_raw_fd()).into()
}

/// Opens a directory for [`short_path`] (an `O_PATH` descriptor, close-on-exec).
pub fn open_dir(dir: &Path) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(dir)?;
    Ok(file.into())
}

/// Binds a listening unix socket named `name` in the directory open as `dir`, replacing a
/// stale socket file.
pub fn bind_in(
    dir: &std::os::fd::OwnedFd,
    name: &str,
) -> io::Result<std::os::unix::net::UnixListener> {
    let path = short_path(std::process::id(), dir, name);
    match std::fs::remove_file(&path) {
        Err(err) if err.kind() != io::ErrorKind::NotFound => return Err(err),
        _ => {}
    }
    std::os::unix::net::UnixListener::bind(&path)
}

/// Connects to the shim socket of the bundle `bundle`. `NotFound` / `ConnectionRefused`
/// when no shim serves it (the container is not running).
pub async fn connect(bundle: &Path) -> io::Result<tokio::net::UnixStream> {
    let dir = open_dir(bundle)?;
    let path = short_path(std::process::id(), &dir, SOCKET);
    let stream = tokio::net::UnixStream::connect(&path).await;
    drop(dir); // kept open until the connect completed
    stream
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_roundtrip() {
        let frames = [
            Frame::Attach {
                stdin: true,
                stdout: false,
                stderr: true,
            },
            Frame::ReopenLog,
            Frame::Stdin(b"abc".to_vec()),
            Frame::CloseStdin,
            Frame::Resize {
                width: 300,
                height: 2,
            },
            Frame::Stdout(Vec::new()),
            Frame::Stderr(vec![0, 1, 2]),
            Frame::Reply(Ok(())),
            Frame::Reply(Err("no space".into())),
        ];
        let mut wire = Vec::new();
        for frame in &frames {
            frame.write_to(&mut wire).unwrap();
        }
        let mut input = &wire[..];
        for frame in &frames {
            assert_eq!(Frame::read_from(&mut input).unwrap().as_ref(), Some(frame));
        }
        assert_eq!(Frame::read_from(&mut input).unwrap(), None);
    }

    #[test]
    fn rejects_bad_frames() {
        let truncated = &Frame::Stdin(b"abc".to_vec()).encode()[..6];
        assert!(Frame::read_from(&mut &truncated[..]).is_err());
        assert!(Frame::read_from(&mut &[99u8, 0, 0, 0, 0][..]).is_err());
        assert!(Frame::read_from(&mut &[RESIZE, 0, 0, 0, 1, 7][..]).is_err());
        assert!(Frame::read_from(&mut &[STDIN, 0xff, 0, 0, 0][..]).is_err());
    }

    #[tokio::test]
    async fn async_reader_agrees() {
        let wire = [
            Frame::Stdout(b"x".to_vec()).encode(),
            Frame::Reply(Ok(())).encode(),
        ]
        .concat();
        let mut input = &wire[..];
        assert_eq!(
            Frame::read_async(&mut input).await.unwrap(),
            Some(Frame::Stdout(b"x".to_vec()))
        );
        assert_eq!(
            Frame::read_async(&mut input).await.unwrap(),
            Some(Frame::Reply(Ok(())))
        );
        assert_eq!(Frame::read_async(&mut input).await.unwrap(), None);
    }
}
