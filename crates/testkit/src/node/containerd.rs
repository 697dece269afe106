//! The containerd 1.6 a [`Node`](super::Node) runs its kubelet against
//! ([`NodeRuntime::Containerd`](super::NodeRuntime::Containerd)): the CRI suite's
//! containerd flavor ([`crate::cri::containerd`]) on the node's own directories.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::bail;

use crate::cri::{containerd, teardown};
use crate::daemon::Daemon;

const READY_TIMEOUT: Duration = Duration::from_secs(60);
const STOP_GRACE: Duration = Duration::from_secs(10);

/// A running containerd with root `<dir>/rt`, state `<dir>/st`, CNI config `<dir>/cni`,
/// socket `<dir>/containerd.sock` and log `<dir>/containerd.log`.
pub(crate) struct Containerd {
    daemon: Daemon,
    socket: PathBuf,
}

impl Containerd {
    /// Pushes the pause stand-in to `registry` (`IP:PORT`, reached over plain HTTP), starts
    /// containerd in `dir` and waits (up to 60 s) until Version answers on its socket.
    ///
    /// Errors: the image cannot be pushed, containerd cannot be spawned, exits, or does
    /// not answer in time (with the tail of its log). The process is killed on error.
    pub(crate) fn start(dir: &Path, registry: &str) -> anyhow::Result<Containerd> {
        let pause = crate::push(registry, "skiff/pause", "test", &crate::pause()?)?;
        let cmd = containerd::command(dir, registry, &pause)?;
        let socket = containerd::socket(dir);
        let answering = || {
            if !answers(&socket) {
                bail!("no answer to Version on {}", socket.display());
            }
            Ok(())
        };
        let daemon = Daemon::start(
            "containerd",
            cmd,
            &dir.join("containerd.log"),
            READY_TIMEOUT,
            answering,
        )?;
        Ok(Containerd { daemon, socket })
    }

    /// The CRI endpoint for `--container-runtime-endpoint`, `unix://<dir>/containerd.sock`.
    pub(crate) fn endpoint(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    /// The CRI socket.
    pub(crate) fn socket(&self) -> &Path {
        &self.socket
    }

    /// containerd's PID.
    pub(crate) fn pid(&self) -> u32 {
        self.daemon.pid()
    }

    /// Stops and removes every pod sandbox through the CRI, then stops containerd
    /// (SIGTERM, SIGKILL after 10 s). Errors are ignored: the forced cleanup follows.
    pub(crate) fn stop(mut self) {
        if self.daemon.is_running() {
            teardown::remove_pods(&self.socket);
        }
        let _ = self.daemon.stop(STOP_GRACE);
    }
}

/// Whether a CRI Version call on `socket` succeeds (from a thread of its own: callers
/// may be inside an async runtime).
fn answers(socket: &Path) -> bool {
    let socket = socket.to_path_buf();
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .is_ok_and(|rt| rt.block_on(crate::cri::connect(&socket)).is_ok())
    })
    .join()
    .unwrap_or(false)
}
