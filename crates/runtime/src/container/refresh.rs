//! Keeping a RUNNING container's record true: the shim's exit file when there is one, else
//! whether the shim and the container's init still run.

use tokio::sync::OwnedMutexGuard;

use super::{Container, State, UNKNOWN_EXIT_CODE};
use crate::error::{Error, Result};
use crate::runtime::Runtime;
use crate::shim::exit::ExitStatus;

/// CRI message of a container whose shim and init both vanished without an exit file.
const LOST_MESSAGE: &str =
    "the container's monitor (shim) died; the container is gone and its exit status is unknown";

impl Runtime {
    /// The container `id`, locked, its record brought up to date with [`Runtime::refresh`].
    /// `NotFound` when unknown.
    pub(crate) async fn current_container(&self, id: &str) -> Result<OwnedMutexGuard<Container>> {
        let mut container = self.containers.require(id)?.lock_owned().await;
        self.refresh(&mut container)?;
        Ok(container)
    }

    /// A copy of the up-to-date record of container `id`. `NotFound` when unknown,
    /// `FailedPrecondition` when it is not RUNNING (as containerd answers exec, attach and
    /// ReopenContainerLog).
    pub(crate) async fn running_container(&self, id: &str) -> Result<Container> {
        let container = self.current_container(id).await?;
        if container.state != State::Running {
            return Err(Error::FailedPrecondition(format!(
                "container {id} is not running"
            )));
        }
        Ok(container.clone())
    }

    /// Brings a RUNNING container's record up to date (persisted when it changes):
    ///
    /// - the shim wrote the exit file: EXITED with the recorded code and reason;
    /// - no exit file, the shim runs: still RUNNING;
    /// - no exit file, the shim is gone but the init runs: still RUNNING, unmonitored (its
    ///   output is no longer logged; warned about once);
    /// - no exit file, both gone (the shim was SIGKILLed): EXITED with exit code 255, reason
    ///   `Error` and a message saying the exit status is unknown, as containerd reports a
    ///   task whose shim died.
    ///
    /// Records without a shim identity (written before it was recorded) only follow the
    /// exit file.
    pub(crate) fn refresh(&self, container: &mut Container) -> anyhow::Result<()> {
        if container.state != State::Running {
            return Ok(());
        }
        let exit_file = self.exit_file(&container.id);
        if let Some(exit) = ExitStatus::read(&exit_file)? {
            return self.record_exit(container, &exit);
        }
        if container.shim.is_none_or(|shim| shim.is_alive()) {
            return Ok(());
        }
        if container.init.is_some_and(|init| init.is_alive()) {
            if !container.shim_lost {
                tracing::warn!(
                    id = %container.id,
                    "the container's shim died: its output is no longer logged and its exit \
                     status will be unknown"
                );
                container.shim_lost = true;
                self.container_store.save(&container.id, &*container)?;
            }
            return Ok(());
        }
        // The shim may have written the file just before it exited.
        match ExitStatus::read(&exit_file)? {
            Some(exit) => self.record_exit(container, &exit),
            None => {
                container.state = State::Exited;
                container.exit_code = UNKNOWN_EXIT_CODE;
                container.finished_at = crate::id::now_nanos();
                container.reason = "Error".into();
                container.message = LOST_MESSAGE.into();
                self.forget_processes(container)
            }
        }
    }

    fn record_exit(&self, container: &mut Container, exit: &ExitStatus) -> anyhow::Result<()> {
        container.state = State::Exited;
        container.exit_code = exit.exit_code;
        container.finished_at = exit.finished_at;
        container.reason = match (exit.oom_killed, exit.exit_code) {
            (true, _) => "OOMKilled",
            (false, 0) => "Completed",
            (false, _) => "Error",
        }
        .to_string();
        self.forget_processes(container)
    }

    /// Drops the process identities of an exited container and persists the record.
    fn forget_processes(&self, container: &mut Container) -> anyhow::Result<()> {
        container.init = None;
        container.shim = None;
        self.container_store.save(&container.id, &*container)
    }
}
