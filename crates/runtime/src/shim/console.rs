//! runc's `--console-socket`: runc connects to a unix socket and sends the pty master of
//! the container's terminal over it (`SCM_RIGHTS`); see runc's `docs/terminals.md`.

use std::io::{self, IoSliceMut};
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};

use super::protocol::{bind_in, open_dir, short_path};

/// File name of the console socket in the directory it is bound in.
const NAME: &str = "console.sock";

/// A bound console socket waiting for runc's connection.
pub struct ConsoleSocket {
    dir: OwnedFd,
    listener: UnixListener,
}

impl ConsoleSocket {
    /// Binds `<dir>/console.sock` (a stale one is replaced).
    pub fn bind(dir: &Path) -> io::Result<Self> {
        let dir = open_dir(dir)?;
        let listener = bind_in(&dir, NAME)?;
        Ok(Self { dir, listener })
    }

    /// The socket's path as this process' children (runc) can reach it.
    pub fn path(&self) -> PathBuf {
        short_path(std::process::id(), &self.dir, NAME)
    }

    /// Takes the pty master runc sent. Call once runc has returned: the connection is
    /// already queued then, so this does not block.
    pub fn receive(&self) -> anyhow::Result<OwnedFd> {
        self.listener.set_nonblocking(true)?;
        let (conn, _) = match self.listener.accept() {
            Ok(accepted) => accepted,
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {
                bail!("runc did not send the container's terminal")
            }
            Err(err) => return Err(err).context("accepting runc's console connection"),
        };
        conn.set_nonblocking(false)?;
        let mut buf = [0u8; 4096];
        let mut iov = [IoSliceMut::new(&mut buf)];
        let mut space = nix::cmsg_space!([std::os::fd::RawFd; 1]);
        let msg = recvmsg::<()>(
            conn.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        )
        .context("receiving the terminal from runc")?;
        let mut fds = Vec::new();
        for cmsg in msg.cmsgs().context("reading the control messages")? {
            if let ControlMessageOwned::ScmRights(received) = cmsg {
                // SAFETY: the kernel just installed these descriptors in this process;
                // nothing else owns them.
                fds.extend(
                    received
                        .into_iter()
                        .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
                );
            }
        }
        let mut fds = fds.into_iter();
        fds.next()
            .context("runc's console message carried no descriptor")
    }
}

impl Drop for ConsoleSocket {
    /// Removes the socket file.
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.path());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::socket::{ControlMessage, sendmsg};
    use std::io::{IoSlice, Read as _, Write as _};
    use std::os::unix::net::UnixStream;

    #[test]
    fn receives_a_descriptor_over_a_long_path() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("d".repeat(100));
        std::fs::create_dir(&dir).unwrap();
        let socket = ConsoleSocket::bind(&dir).unwrap();
        let (read, write) = nix::unistd::pipe().unwrap();
        let conn = UnixStream::connect(socket.path()).unwrap();
        let fds = [write.as_raw_fd()];
        sendmsg::<()>(
            conn.as_raw_fd(),
            &[IoSlice::new(b"/dev/pts/0")],
            &[ControlMessage::ScmRights(&fds)],
            MsgFlags::empty(),
            None,
        )
        .unwrap();
        drop(write);
        let received = socket.receive().unwrap();
        drop(socket);
        std::fs::File::from(received).write_all(b"hi").unwrap();
        let mut text = String::new();
        std::fs::File::from(read).read_to_string(&mut text).unwrap();
        assert_eq!(text, "hi");
        assert!(!dir.join(NAME).exists(), "socket file removed");
    }

    #[test]
    fn no_connection_is_an_error() {
        let tmp = tempfile::tempdir().unwrap();
        let socket = ConsoleSocket::bind(tmp.path()).unwrap();
        assert!(socket.receive().is_err());
    }
}
