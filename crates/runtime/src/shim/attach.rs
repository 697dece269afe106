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
