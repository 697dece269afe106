//! StopContainer: stop signal, grace period, SIGKILL.

use std::path::Path;
use std::time::Duration;

use k8s_cri::v1::{StopContainerRequest, StopContainerResponse};

use super::State;
use crate::error::{Error, Result};
use crate::runtime::Runtime;

/// How long to wait for the exit after SIGKILL before reporting an error.
const KILL_WAIT: Duration = Duration::from_secs(30);
/// Exit file polling interval.
const POLL: Duration = Duration::from_millis(50);

impl Runtime {
    /// Sends the image's StopSignal (SIGTERM by default), waits up to `timeout` seconds for
    /// the exit, then sends SIGKILL. Stopping a container that is not running is OK.
    pub(crate) async fn stop_container(
        &self,
        req: StopContainerRequest,
    ) -> Result<StopContainerResponse> {
        if self.containers.get(&req.container_id).is_none() {
            return Err(Error::not_found("container", &req.container_id));
        }
        self.stop_container_by_id(&req.container_id, req.timeout)
            .await?;
        Ok(StopContainerResponse {})
    }

    /// See [`Runtime::stop_container`]; an unknown container is a no-op. The container's
    /// lock is not held while waiting, so status calls are served meanwhile.
    pub(crate) async fn stop_container_by_id(&self, id: &str, timeout_secs: i64) -> Result<()> {
        let Some(entry) = self.containers.get(id) else {
            return Ok(());
        };
        let signal = {
            let mut container = entry.lock().await;
            self.refresh(&mut container)?;
            if container.state != State::Running {
                return Ok(());
            }
            match container.stop_signal.as_str() {
                "" => "SIGTERM".to_string(),
                signal => signal.to_string(),
            }
        };
        let exit_file = self.bundle(id).join("exit.json");
        let runc = self.runc();
        let mut exited = false;
        if timeout_secs > 0 {
            runc.kill(id, &signal).await?;
            exited = wait_for_file(&exit_file, Duration::from_secs(timeout_secs as u64)).await;
        }
        if !exited {
            runc.kill(id, "SIGKILL").await?;
            if !wait_for_file(&exit_file, KILL_WAIT).await {
                return Err(Error::Internal(anyhow::anyhow!(
                    "container {id} did not exit {KILL_WAIT:?} after SIGKILL"
                )));
            }
        }
        let mut container = entry.lock().await;
        self.refresh(&mut container)?;
        Ok(())
    }
}

/// Polls until `path` exists or `timeout` passed; returns whether it exists.
async fn wait_for_file(path: &Path, timeout: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if path.exists() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(POLL).await;
    }
}
