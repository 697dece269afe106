//! StopContainer: stop signal, grace period, SIGKILL.

use std::sync::Arc;
use std::time::Duration;

use k8s_cri::v1::{StopContainerRequest, StopContainerResponse};

use super::{Container, State};
use crate::error::{Error, Result};
use crate::runtime::Runtime;

/// How long StopContainer and RemoveContainer wait for the shim of an exited container to
/// end (it deletes the container from runc first).
const SHIM_EXIT_WAIT: Duration = Duration::from_secs(10);
/// How long to wait for the exit after SIGKILL before reporting an error.
const KILL_WAIT: Duration = Duration::from_secs(30);
/// Interval of the exit checks between exit-file events (a shim that died writes no exit
/// file, so its container's exit is only seen by checking).
const POLL: Duration = Duration::from_millis(50);

impl Runtime {
    /// Sends the image's StopSignal (SIGTERM by default), waits up to `timeout` seconds for
    /// the exit, then sends SIGKILL. Stopping a container that is not running is OK.
    pub(crate) async fn stop_container(
        &self,
        req: StopContainerRequest,
    ) -> Result<StopContainerResponse> {
        self.containers.require(&req.container_id)?;
        self.stop_container_by_id(&req.container_id, req.timeout)
            .await?;
        Ok(StopContainerResponse {})
    }

    /// See [`Runtime::stop_container`]; an unknown container is a no-op. Returns once the
    /// container exited and its shim deleted it from runc. The container's lock is not held
    /// while waiting, so status calls are served meanwhile. The exit is
    /// noticed as [`Runtime::refresh`] sees it, so a container whose shim died is stopped too.
    pub(crate) async fn stop_container_by_id(&self, id: &str, timeout_secs: i64) -> Result<()> {
        let Some(entry) = self.containers.get(id) else {
            return Ok(());
        };
        let (signal, runc, init) = {
            let mut container = entry.lock().await;
            self.refresh(&mut container)?;
            if container.state != State::Running {
                return Ok(());
            }
            let signal = match container.stop_signal.as_str() {
                "" => "SIGTERM".to_string(),
                signal => signal.to_string(),
            };
            (
                signal,
                self.runc(&container.runtime_handler),
                container.init,
            )
        };
        let kill = async |signal: &str| -> Result<()> {
            // The init, signalled directly, as `runc kill` (without --all) does; runc for
            // records without an init and for signal names only runc knows.
            if let (Some(init), Some(number)) = (init, signal_number(signal)) {
                match init.signal(number) {
                    Ok(_) => return Ok(()),
                    Err(err) => tracing::debug!(id, "signalling the init: {err}; using runc"),
                }
            }
            Ok(runc.kill(id, signal).await?)
        };
        if timeout_secs > 0 {
            kill(&signal).await?;
            let grace = Duration::from_secs(timeout_secs as u64);
            if self.wait_for_exit(&entry, grace).await? {
                self.wait_for_shim(id).await;
                return Ok(());
            }
        }
        kill("SIGKILL").await?;
        if !self.wait_for_exit(&entry, KILL_WAIT).await? {
            return Err(Error::Internal(anyhow::anyhow!(
                "container {id} did not exit {KILL_WAIT:?} after SIGKILL"
            )));
        }
        self.wait_for_shim(id).await;
        Ok(())
    }

    /// Waits (up to [`SHIM_EXIT_WAIT`]) for the shim of exited container `id` to end: after
    /// recording the exit it deletes the container from runc, as containerd's StopContainer
    /// returns once the task is deleted. A shim already gone returns at once.
    pub(crate) async fn wait_for_shim(&self, id: &str) {
        let shim = match crate::shim::record::read_shim(&self.bundle(id)) {
            Ok(Some(shim)) => shim,
            Ok(None) => return,
            Err(err) => {
                tracing::debug!(id, "reading the shim record: {err:#}");
                return;
            }
        };
        if !shim.wait_exit(SHIM_EXIT_WAIT).await {
            tracing::warn!(id, "the shim did not end {SHIM_EXIT_WAIT:?} after the exit");
        }
    }

    /// Refreshes the container whenever an exit file appears, and at least every [`POLL`],
    /// until it is no longer RUNNING or `timeout` passed; returns whether it exited.
    async fn wait_for_exit(
        &self,
        entry: &Arc<tokio::sync::Mutex<Container>>,
        timeout: Duration,
    ) -> Result<bool> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            // Registered before the check, so that an exit right after it still wakes us.
            let exited = self.exit_watcher.exits().notified();
            tokio::pin!(exited);
            exited.as_mut().enable();
            {
                let mut container = entry.lock().await;
                self.refresh(&mut container)?;
                if container.state != State::Running {
                    return Ok(true);
                }
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Ok(false);
            }
            let next_check = (now + POLL).min(deadline);
            tokio::select! {
                () = &mut exited => {}
                () = tokio::time::sleep_until(next_check) => {}
            }
        }
    }
}

/// The number of stop signal `name`: `SIGTERM`, `TERM` or `15`. `None` for names that
/// only runc resolves (`SIGRTMIN+3`).
fn signal_number(name: &str) -> Option<i32> {
    if let Ok(number) = name.parse::<i32>() {
        return Some(number);
    }
    let upper = name.to_ascii_uppercase();
    let full = match upper.strip_prefix("SIG") {
        Some(_) => upper,
        None => format!("SIG{upper}"),
    };
    full.parse::<nix::sys::signal::Signal>()
        .ok()
        .map(|signal| signal as i32)
}

#[cfg(test)]
mod tests {
    use super::signal_number;

    #[test]
    fn stop_signal_names() {
        assert_eq!(signal_number("SIGTERM"), Some(libc::SIGTERM));
        assert_eq!(signal_number("term"), Some(libc::SIGTERM));
        assert_eq!(signal_number("SIGKILL"), Some(libc::SIGKILL));
        assert_eq!(signal_number("10"), Some(10));
        assert_eq!(signal_number("SIGRTMIN+3"), None);
        assert_eq!(signal_number("NOPE"), None);
    }
}
