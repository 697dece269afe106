//! Child processes tied to the lifetime of the test process.
//!
//! `PR_SET_PDEATHSIG` fires when the *thread* that forked the child exits, not the
//! process. Test harnesses run every test on its own thread, so children are forked
//! from one long-lived spawner thread: they get SIGKILL when the test process dies
//! (even by SIGKILL), never when the test thread that asked for them ends.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::OnceLock;
use std::sync::mpsc;

type Request = (Command, mpsc::Sender<io::Result<Child>>);

static SPAWNER: OnceLock<mpsc::Sender<Request>> = OnceLock::new();

/// Spawns `cmd` with `PR_SET_PDEATHSIG=SIGKILL`, from the process-wide spawner thread.
pub(crate) fn spawn_tied(mut cmd: Command) -> io::Result<Child> {
    // SAFETY: the closure only calls prctl(2), which is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Request>();
        // If the thread cannot be created, `rx` is dropped and every send below fails.
        let _ = std::thread::Builder::new()
            .name("testkit-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            });
        tx
    });
    let (reply_tx, reply_rx) = mpsc::channel();
    let unavailable = || io::Error::other("testkit spawner thread is not running");
    spawner.send((cmd, reply_tx)).map_err(|_| unavailable())?;
    reply_rx.recv().map_err(|_| unavailable())?
}
