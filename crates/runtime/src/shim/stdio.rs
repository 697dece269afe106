//! The container's stdio as the shim holds it: output copied into the CRI log and to the
//! attached clients, the write end of the container's stdin, and the terminal (pty master)
//! of a tty container for resizes.

use std::fs::File;
use std::io::{self, Read, Write as _};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::log::{Sink, Stream};
use super::protocol::{CHUNK, Frame};

/// How long a write to an attached client may block before the client is dropped: a
/// stalled client must not stall the container's output.
const CLIENT_WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// An attached client receiving output.
struct Client {
    id: u64,
    socket: UnixStream,
    stdout: bool,
    stderr: bool,
}

/// See the module documentation.
pub struct Stdio {
    sink: Sink<File>,
    log_path: PathBuf,
    stdin: Mutex<Option<File>>,
    stdin_once: bool,
    terminal: Option<OwnedFd>,
    clients: Mutex<Vec<Client>>,
    next_client: AtomicU64,
}

impl Stdio {
    /// `log` is the CRI log file opened from `log_path`; `stdin` the write end of the
    /// container's stdin (absent when it has none); `terminal` the pty master of a tty
    /// container.
    pub fn new(
        log: File,
        log_path: PathBuf,
        stdin: Option<File>,
        stdin_once: bool,
        terminal: Option<OwnedFd>,
    ) -> Self {
        Self {
            sink: Sink::new(log),
            log_path,
            stdin: Mutex::new(stdin),
            stdin_once,
            terminal,
            clients: Mutex::new(Vec::new()),
            next_client: AtomicU64::new(0),
        }
    }

    /// Copies one output stream until EOF into the log and to the attached clients.
    pub fn copy(&self, stream: Stream, src: File) -> io::Result<()> {
        self.sink.copy(
            stream,
            Tee {
                src,
                stream,
                stdio: self,
            },
        )
    }

    /// Sends `data` to every client attached to `stream`; clients that fail are dropped.
    fn broadcast(&self, stream: Stream, data: &[u8]) {
        let mut clients = lock(&self.clients);
        if clients.is_empty() {
            return;
        }
        let frame = match stream {
            Stream::Stdout => Frame::Stdout(data.to_vec()),
            Stream::Stderr => Frame::Stderr(data.to_vec()),
        }
        .encode();
        clients.retain_mut(|client| {
            let wanted = match stream {
                Stream::Stdout => client.stdout,
                Stream::Stderr => client.stderr,
            };
            !wanted || client.socket.write_all(&frame).is_ok()
        });
    }

    /// Registers an attached client for output; returns its ID for
    /// [`Stdio::remove_client`].
    pub fn add_client(&self, socket: &UnixStream, stdout: bool, stderr: bool) -> io::Result<u64> {
        let socket = socket.try_clone()?;
        socket.set_write_timeout(Some(CLIENT_WRITE_TIMEOUT))?;
        let id = self.next_client.fetch_add(1, Ordering::Relaxed);
        lock(&self.clients).push(Client {
            id,
            socket,
            stdout,
            stderr,
        });
        Ok(id)
    }

    /// Stops sending output to client `id`.
    pub fn remove_client(&self, id: u64) {
        lock(&self.clients).retain(|client| client.id != id);
    }

    /// Writes to the container's stdin; ignored when it has none or it was closed.
    pub fn write_stdin(&self, data: &[u8]) -> io::Result<()> {
        match lock(&self.stdin).as_mut() {
            Some(stdin) => stdin.write_all(data),
            None => Ok(()),
        }
    }

    /// An attach session's stdin ended: with `stdin_once` the container's stdin pipe is
    /// closed for good (CRI `ContainerConfig.stdin_once`), the container reads EOF. A
    /// terminal stays open (containerd closes stdin only without a tty).
    pub fn end_stdin(&self) {
        if self.stdin_once && self.terminal.is_none() {
            lock(&self.stdin).take();
        }
    }

    /// Sets the terminal size (no-op without a terminal).
    pub fn resize(&self, width: u16, height: u16) -> io::Result<()> {
        match &self.terminal {
            Some(master) => set_window_size(master, width, height),
            None => Ok(()),
        }
    }

    /// Reopens the log file at its path (created if it was moved away), for later records.
    pub fn reopen_log(&self) -> io::Result<()> {
        let file = open_log(&self.log_path)?;
        drop(self.sink.replace(file));
        Ok(())
    }
}

/// Opens (creates) a CRI log file for appending.
pub fn open_log(path: &std::path::Path) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
}

/// `TIOCSWINSZ` on a terminal.
pub fn set_window_size(
    terminal: &impl std::os::fd::AsRawFd,
    width: u16,
    height: u16,
) -> io::Result<()> {
    let size = libc::winsize {
        ws_row: height,
        ws_col: width,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads one `winsize` from the pointer, which outlives the call.
    let rc = unsafe { libc::ioctl(terminal.as_raw_fd(), libc::TIOCSWINSZ, &size) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A reader passing what it reads on to the attached clients. A pty master reports `EIO`
/// once the last slave descriptor is closed: that is its end of stream.
struct Tee<'a> {
    src: File,
    stream: Stream,
    stdio: &'a Stdio,
}

impl Read for Tee<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let len = buf.len().min(CHUNK);
        match self.src.read(&mut buf[..len]) {
            Ok(n) => {
                if n > 0 {
                    self.stdio.broadcast(self.stream, &buf[..n]);
                }
                Ok(n)
            }
            Err(err) if err.raw_os_error() == Some(libc::EIO) => Ok(0),
            Err(err) => Err(err),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stdio(dir: &std::path::Path, stdin: Option<File>, stdin_once: bool) -> Stdio {
        let path = dir.join("0.log");
        Stdio::new(open_log(&path).unwrap(), path, stdin, stdin_once, None)
    }

    #[test]
    fn output_goes_to_log_and_attached_clients() {
        let dir = tempfile::tempdir().unwrap();
        let stdio = stdio(dir.path(), None, false);
        let (ours, mut theirs) = UnixStream::pair().unwrap();
        let id = stdio.add_client(&ours, false, true).unwrap();
        let (read, write) = nix::unistd::pipe().unwrap();
        File::from(write).write_all(b"oops\n").unwrap();
        stdio.copy(Stream::Stderr, File::from(read)).unwrap();
        assert_eq!(
            Frame::read_from(&mut theirs).unwrap(),
            Some(Frame::Stderr(b"oops\n".to_vec()))
        );
        stdio.remove_client(id);
        drop(ours);
        drop(stdio);
        assert_eq!(Frame::read_from(&mut theirs).unwrap(), None);
        let log = std::fs::read_to_string(dir.path().join("0.log")).unwrap();
        assert!(log.ends_with(" stderr F oops\n"), "{log:?}");
    }

    #[test]
    fn stdin_once_closes_stdin_after_the_session() {
        let dir = tempfile::tempdir().unwrap();
        for once in [false, true] {
            let (read, write) = nix::unistd::pipe().unwrap();
            let stdio = stdio(dir.path(), Some(File::from(write)), once);
            stdio.write_stdin(b"abc").unwrap();
            stdio.end_stdin();
            stdio.write_stdin(b"def").unwrap();
            let mut read = File::from(read);
            let mut buf = [0u8; 16];
            assert_eq!(read.read(&mut buf).unwrap(), 6 - 3 * usize::from(once));
            if once {
                assert_eq!(read.read(&mut buf).unwrap(), 0, "EOF once closed");
            }
        }
    }

    #[test]
    fn reopen_log_follows_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let stdio = stdio(dir.path(), None, false);
        let copy = |text: &'static [u8]| {
            let (read, write) = nix::unistd::pipe().unwrap();
            File::from(write).write_all(text).unwrap();
            stdio.copy(Stream::Stdout, File::from(read)).unwrap();
        };
        copy(b"one\n");
        std::fs::rename(dir.path().join("0.log"), dir.path().join("0.log.1")).unwrap();
        copy(b"two\n");
        stdio.reopen_log().unwrap();
        copy(b"three\n");
        let old = std::fs::read_to_string(dir.path().join("0.log.1")).unwrap();
        let new = std::fs::read_to_string(dir.path().join("0.log")).unwrap();
        assert_eq!(old.lines().count(), 2);
        assert!(new.ends_with(" stdout F three\n") && new.lines().count() == 1);
    }
}
