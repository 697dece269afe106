//! StartContainer: hand the bundle to a new shim.

use std::time::Duration;

use anyhow::Context as _;
use k8s_cri::v1::{StartContainerRequest, StartContainerResponse};

use super::{Container, START_ERROR_EXIT_CODE, State};
use crate::error::{Error, Result};
use crate::runtime::Runtime;
use crate::shim::{Options, Started};

/// How long the shim may take to report that the container started.
const START_TIMEOUT: Duration = Duration::from_secs(60);

impl Runtime {
    /// Starts a CREATED container by spawning `<shim_binary> shim ...`, which runs
    /// `runc run --detach` and reports back. On failure the container becomes EXITED with
    /// reason `StartError` (exit code 128, as containerd) and the runc error is returned.
    pub(crate) async fn start_container(
        &self,
        req: StartContainerRequest,
    ) -> Result<StartContainerResponse> {
        let mut container = self
            .containers
            .require(&req.container_id)?
            .lock_owned()
            .await;
        if container.state != State::Created {
            return Err(Error::FailedPrecondition(format!(
                "container {} is not in CREATED state",
                container.id
            )));
        }
        match self.spawn_shim(&container).await {
            Ok(started) => {
                container.state = State::Running;
                container.init = Some(started.init);
                container.shim = Some(started.shim);
                container.started_at = crate::id::now_nanos();
                self.container_store.save(&container.id, &*container)?;
                Ok(StartContainerResponse {})
            }
            Err(err) => {
                container.state = State::Exited;
                container.finished_at = crate::id::now_nanos();
                container.exit_code = START_ERROR_EXIT_CODE;
                container.reason = "StartError".into();
                container.message = format!("{err:#}");
                self.container_store.save(&container.id, &*container)?;
                Err(Error::Internal(
                    err.context(format!("starting container {}", container.id)),
                ))
            }
        }
    }

    /// Shim options of a container.
    pub(crate) fn shim_options(&self, container: &Container) -> Options {
        let bundle = self.bundle(&container.id);
        Options {
            id: container.id.clone(),
            exit_file: self.exit_file(&container.id),
            bundle,
            runc: self.runc(&container.runtime_handler).binary,
            runc_root: self.runc_root(&container.runtime_handler),
            // Without a CRI log path the output is discarded.
            log_path: match container.log_path.as_os_str().is_empty() {
                true => "/dev/null".into(),
                false => container.log_path.clone(),
            },
            cgroup: container.cgroups_path.clone(),
            tty: container.config.tty,
            stdin: container.config.stdin,
            stdin_once: container.config.stdin_once,
        }
    }

    /// Runs the shim and waits for its report; returns the container's init and shim.
    async fn spawn_shim(&self, container: &Container) -> anyhow::Result<Started> {
        let options = self.shim_options(container);
        let output = tokio::time::timeout(
            START_TIMEOUT,
            tokio::process::Command::new(&self.config.shim_binary)
                .arg("shim")
                .args(options.to_args())
                .stdin(std::process::Stdio::null())
                .kill_on_drop(true)
                .output(),
        )
        .await
        .context("the shim did not report within the start timeout")?
        .with_context(|| format!("running the shim {}", self.config.shim_binary.display()))?;
        let report = String::from_utf8_lossy(&output.stdout);
        let report = report.trim();
        if let Some(started) = Started::parse(report) {
            return Ok(started);
        }
        match report.strip_prefix("error ") {
            Some(message) => Err(anyhow::anyhow!("{message}")),
            None => Err(anyhow::anyhow!(
                "the shim failed ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            )),
        }
    }
}
