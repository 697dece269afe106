//! StartContainer: hand the bundle to a new shim.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_cri::v1::{StartContainerRequest, StartContainerResponse};

use super::{Container, START_ERROR_EXIT_CODE, State};
use crate::error::{Error, Result};
use crate::runtime::Runtime;
use crate::shim::{Options, Started, record};

/// How long the shim may take to report that the container started.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// How often the shim of a start cut short by a runtime crash is checked on.
const POLL_INTERVAL: Duration = Duration::from_millis(50);

impl Runtime {
    /// Starts a CREATED container by spawning `<shim_binary> shim ...`, which runs
    /// `runc run --detach` and reports back. On failure the container becomes EXITED with
    /// reason `StartError` (exit code 128, as containerd) and the runc error is returned.
    /// A container that already started, also by a StartContainer cut short by a runtime
    /// crash (see [`Runtime::settle_previous_start`]), fails with `FailedPrecondition`
    /// ("already running"), as containerd refuses to start a container twice.
    pub(crate) async fn start_container(
        &self,
        req: StartContainerRequest,
    ) -> Result<StartContainerResponse> {
        let entry = self.containers.require(&req.container_id)?;
        // One start (or remove) at a time; the state lock is held only to check and to
        // record, never while the shim runs `runc run`, so status and list calls, and
        // every call about other containers, go on meanwhile.
        let busy = entry.lock().await.busy.clone();
        let _busy = busy.lock().await;
        let snapshot = {
            let mut container = entry.lock().await;
            self.settle_previous_start(&mut container).await?;
            match container.state {
                State::Created => {}
                State::Running => {
                    return Err(Error::FailedPrecondition(format!(
                        "container {} is already running",
                        container.id
                    )));
                }
                State::Exited => {
                    return Err(Error::FailedPrecondition(format!(
                        "container {} is not in CREATED state",
                        container.id
                    )));
                }
            }
            container.clone()
        };
        let spawned = self.spawn_shim(&snapshot).await;
        let mut container = entry.lock().await;
        match spawned {
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

    /// Settles a CREATED container whose start was cut short by a runtime crash, as found
    /// from the shim's records in the bundle ([`record`]): waits (up to the start timeout)
    /// while that shim still runs without having started the container, then adopts the
    /// container when it started ([`Runtime::adopt_start`]; it may have exited since),
    /// else `runc delete --force`s what the dead shim's `runc run` may have left, so that
    /// the container can be run again.
    async fn settle_previous_start(&self, container: &mut Container) -> Result<()> {
        if container.state != State::Created {
            return Ok(());
        }
        let bundle = self.bundle(&container.id);
        let Some(shim) = record::read_shim(&bundle)? else {
            return Ok(());
        };
        let deadline = Instant::now() + START_TIMEOUT;
        while shim.is_alive() && record::read_started(&bundle)?.is_none() {
            if Instant::now() >= deadline {
                return Err(Error::Unknown(format!(
                    "container {} is still being started by shim {}",
                    container.id, shim.pid
                )));
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
        if self.adopt_start(container)? {
            self.refresh(container)?;
            return Ok(());
        }
        self.runc(&container.runtime_handler)
            .delete(&container.id)
            .await?;
        Ok(())
    }

    /// Marks a CREATED container RUNNING (persisted) when its shim recorded that it started
    /// it ([`record::STARTED_FILE`]): the start whose report the runtime did not live to
    /// read. Returns whether it did.
    pub(crate) fn adopt_start(&self, container: &mut Container) -> anyhow::Result<bool> {
        if container.state != State::Created {
            return Ok(false);
        }
        let Some(start) = record::read_started(&self.bundle(&container.id))? else {
            return Ok(false);
        };
        container.state = State::Running;
        container.init = Some(start.started.init);
        container.shim = Some(start.started.shim);
        container.started_at = start.started_at;
        self.container_store.save(&container.id, &*container)?;
        tracing::info!(id = %container.id, "adopted a container started by a previous runtime");
        Ok(true)
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
        // The log file exists from the start, as containerd creates it before its task: a
        // container whose process never ran has an empty log, not a missing one (the
        // kubelet's FallbackToLogsOnError reads it).
        if !container.log_path.as_os_str().is_empty() {
            if let Some(dir) = container.log_path.parent() {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("creating log directory {}", dir.display()))?;
            }
            crate::shim::stdio::open_log(&container.log_path)
                .with_context(|| format!("creating log {}", container.log_path.display()))?;
        }
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
