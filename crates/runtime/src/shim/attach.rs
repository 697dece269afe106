//! The shim side of [`super::protocol`]: one thread accepting on `<bundle>/attach.sock`,
//! one thread per connection.

use std::io;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::Arc;

use super::protocol::Frame;
use super::stdio::Stdio;

/// Stack size of the shim's threads: they only copy bytes.
pub const THREAD_STACK: usize = 64 * 1024;

/// Serves `listener` on a background thread for as long as the shim runs.
pub fn serve(listener: UnixListener, stdio: Arc<Stdio>) -> io::Result<()> {
    std::thread::Builder::new()
        .stack_size(THREAD_STACK)
        .spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else {
                    // Out of descriptors, most likely: let connections finish.
                    std::thread::sleep(std::time::Duration::from_millis(100));
                    continue;
                };
                let stdio = stdio.clone();
                let spawned =
                    std::thread::Builder::new()
                        .stack_size(THREAD_STACK)
                        .spawn(move || {
                            if let Err(err) = handle(conn, &stdio) {
                                eprintln!("shim connection: {err}");
                            }
                        });
                if let Err(err) = spawned {
                    eprintln!("shim connection thread: {err}");
                }
            }
        })?;
    Ok(())
}

fn handle(mut conn: UnixStream, stdio: &Stdio) -> io::Result<()> {
    match Frame::read_from(&mut conn)? {
        Some(Frame::Attach {
            stdin,
            stdout,
            stderr,
        }) => attach(conn, stdio, stdin, stdout, stderr),
        Some(Frame::ReopenLog) => {
            let result = stdio.reopen_log().map_err(|err| err.to_string());
            Frame::Reply(result).write_to(&mut conn)
        }
        Some(other) => {
            let reply = Frame::Reply(Err(format!("unexpected first frame {other:?}")));
            reply.write_to(&mut conn)
        }
        None => Ok(()),
    }
}

/// An attach session: output is sent by the copiers ([`Stdio::copy`]); this thread reads
/// the client's frames until it hangs up.
fn attach(
    mut conn: UnixStream,
    stdio: &Stdio,
    stdin: bool,
    stdout: bool,
    stderr: bool,
) -> io::Result<()> {
    let client = (stdout || stderr)
        .then(|| stdio.add_client(&conn, stdout, stderr))
        .transpose()?;
    let mut stdin_open = stdin;
    let result = loop {
        match Frame::read_from(&mut conn) {
            Ok(Some(Frame::Stdin(data))) if stdin_open => {
                if let Err(err) = stdio.write_stdin(&data) {
                    break Err(err);
                }
            }
            Ok(Some(Frame::CloseStdin)) if stdin_open => {
                stdin_open = false;
                stdio.end_stdin();
            }
            Ok(Some(Frame::Resize { width, height })) => {
                if let Err(err) = stdio.resize(width, height) {
                    eprintln!("resizing the terminal: {err}");
                }
            }
            Ok(Some(_)) => {}
            Ok(None) => break Ok(()),
            Err(err) => break Err(err),
        }
    };
    if let Some(id) = client {
        stdio.remove_client(id);
    }
    if stdin_open {
        stdio.end_stdin();
    }
    result
}

#[cfg(test)]
mod tests {
    use std::fs::File;
    use std::io::{Read as _, Write as _};

    use super::*;
    use crate::shim::log::Stream;

    #[test]
    fn sessions_feed_stdin_receive_output_and_reopen_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("0.log");
        let (stdin_read, stdin_write) = nix::unistd::pipe().unwrap();
        let stdio = Arc::new(Stdio::new(
            crate::shim::stdio::open_log(&log).unwrap(),
            log.clone(),
            Some(File::from(stdin_write)),
            true,
            None,
        ));
        let socket = dir.path().join("attach.sock");
        serve(UnixListener::bind(&socket).unwrap(), stdio.clone()).unwrap();

        let mut session = UnixStream::connect(&socket).unwrap();
        let hello = Frame::Attach {
            stdin: true,
            stdout: true,
            stderr: false,
        };
        hello.write_to(&mut session).unwrap();
        Frame::Stdin(b"ping".to_vec())
            .write_to(&mut session)
            .unwrap();
        Frame::CloseStdin.write_to(&mut session).unwrap();
        let mut received = String::new();
        File::from(stdin_read)
            .read_to_string(&mut received)
            .unwrap();
        assert_eq!(
            received, "ping",
            "stdin_once: EOF after the session's stdin"
        );

        // The session is registered once its stdin was handled: output reaches it.
        let (out_read, out_write) = nix::unistd::pipe().unwrap();
        File::from(out_write).write_all(b"pong\n").unwrap();
        stdio.copy(Stream::Stdout, File::from(out_read)).unwrap();
        assert_eq!(
            Frame::read_from(&mut session).unwrap(),
            Some(Frame::Stdout(b"pong\n".to_vec()))
        );

        std::fs::rename(&log, dir.path().join("0.log.1")).unwrap();
        let mut request = UnixStream::connect(&socket).unwrap();
        Frame::ReopenLog.write_to(&mut request).unwrap();
        assert_eq!(
            Frame::read_from(&mut request).unwrap(),
            Some(Frame::Reply(Ok(())))
        );
        assert!(log.exists(), "reopened at the log path");
    }
}
