//! StopContainer: stop signal, grace period, SIGKILL.

use std::sync::Arc;
use std::time::Duration;

use k8s_cri::v1::{StopContainerRequest, StopContainerResponse};

use super::{Container, State};
use crate::error::{Error, Result};
use crate::runtime::Runtime;

/// How long to wait for the exit after SIGKILL before reporting an error.
const KILL_WAIT: Duration = Duration::from_secs(30);
/// Interval of the exit checks (exit file, shim and init liveness).
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

    /// See [`Runtime::stop_container`]; an unknown container is a no-op. The container's
    /// lock is not held while waiting, so status calls are served meanwhile. The exit is
    /// noticed as [`Runtime::refresh`] sees it, so a container whose shim died is stopped too.
    pub(crate) async fn stop_container_by_id(&self, id: &str, timeout_secs: i64) -> Result<()> {
        let Some(entry) = self.containers.get(id) else {
            return Ok(());
        };
        let (signal, runc) = {
            let mut container = entry.lock().await;
            self.refresh(&mut container)?;
            if container.state != State::Running {
                return Ok(());
            }
            let signal = match container.stop_signal.as_str() {
                "" => "SIGTERM".to_string(),
                signal => signal.to_string(),
            };
            (signal, self.runc(&container.runtime_handler))
        };
        if timeout_secs > 0 {
            runc.kill(id, &signal).await?;
            let grace = Duration::from_secs(timeout_secs as u64);
            if self.wait_for_exit(&entry, grace).await? {
                return Ok(());
            }
        }
        runc.kill(id, "SIGKILL").await?;
        if !self.wait_for_exit(&entry, KILL_WAIT).await? {
            return Err(Error::Internal(anyhow::anyhow!(
                "container {id} did not exit {KILL_WAIT:?} after SIGKILL"
            )));
        }
        Ok(())
    }

    /// Refreshes the container every [`POLL`] until it is no longer RUNNING or `timeout`
    /// passed; returns whether it exited.
    async fn wait_for_exit(
        &self,
        entry: &Arc<tokio::sync::Mutex<Container>>,
        timeout: Duration,
    ) -> Result<bool> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            {
                let mut container = entry.lock().await;
                self.refresh(&mut container)?;
                if container.state != State::Running {
                    return Ok(true);
                }
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(false);
            }
            tokio::time::sleep(POLL).await;
        }
    }
}
