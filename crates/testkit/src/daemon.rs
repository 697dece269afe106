//! A server process the tests run (etcd, docker-registry, containerd, `skiff kubelet`,
//! `skiff apiserver`): spawned tied to the test process with its output appended to a log
//! file, waited for until it answers, then stopped or killed.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::{spawn, sys};

const POLL: Duration = Duration::from_millis(50);

/// A running server process. Dropping it kills the process (SIGKILL) and reaps it.
pub(crate) struct Daemon {
    name: String,
    log_path: PathBuf,
    child: Child,
}

impl Daemon {
    /// Spawns `cmd` as `name` (stdin from /dev/null, stdout and stderr appended to
    /// `log_path`) and calls `ready` every 50 ms until it succeeds.
    ///
    /// Errors: the process cannot be spawned, exits before it is ready, or `ready` has not
    /// succeeded within `timeout`; the message gives `ready`'s last error and the tail of
    /// the log. The process is killed on error.
    pub(crate) fn start(
        name: impl Into<String>,
        mut cmd: Command,
        log_path: &Path,
        timeout: Duration,
        mut ready: impl FnMut() -> anyhow::Result<()>,
    ) -> anyhow::Result<Daemon> {
        let name = name.into();
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(log_path)
            .with_context(|| format!("opening {}", log_path.display()))?;
        cmd.stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        let child = spawn::spawn_tied(cmd).with_context(|| format!("spawning {name}"))?;
        let mut daemon = Daemon {
            name,
            log_path: log_path.to_owned(),
            child,
        };
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = daemon.child.try_wait()? {
                bail!(
                    "{} exited with {status} before it was ready; {} (tail):\n{}",
                    daemon.name,
                    daemon.log_path.display(),
                    daemon.log_tail()
                );
            }
            let last = match ready() {
                Ok(()) => return Ok(daemon),
                Err(e) => e,
            };
            if Instant::now() >= deadline {
                bail!(
                    "{} not ready after {timeout:?} ({last:#}); {} (tail):\n{}",
                    daemon.name,
                    daemon.log_path.display(),
                    daemon.log_tail()
                );
            }
            std::thread::sleep(POLL);
        }
    }

    /// The process ID.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process still runs.
    pub(crate) fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Stops the process with SIGTERM (SIGKILL after `grace`) and returns its exit status.
    pub(crate) fn stop(mut self, grace: Duration) -> std::io::Result<ExitStatus> {
        sys::terminate(&mut self.child, grace)
    }

    /// The exit status if the process has exited (reaping it).
    pub(crate) fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        self.child.try_wait()
    }

    /// Kills the process with SIGKILL and reaps it.
    pub(crate) fn kill9(mut self) -> std::io::Result<()> {
        self.child.kill()?;
        self.child.wait().map(drop)
    }

    /// The last 60 lines of the log, for error messages.
    pub(crate) fn log_tail(&self) -> String {
        sys::tail(&self.log_path, sys::LOG_TAIL_LINES)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
