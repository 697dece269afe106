//! ExecSync: run a command in a running container and collect its output.

use std::time::Duration;

use anyhow::Context as _;
use k8s_cri::v1::{ExecSyncRequest, ExecSyncResponse};
use tokio::io::AsyncReadExt as _;

use crate::error::{Error, Result};
use crate::runtime::Runtime;

impl Runtime {
    /// Runs `cmd` with `runc exec` (the container's process settings) and returns stdout,
    /// stderr and the exit code. `timeout` seconds (0 = none) bound the run; on expiry the
    /// exec'd process is SIGKILLed and the call fails with `DeadlineExceeded`.
    pub(crate) async fn exec_sync(&self, req: ExecSyncRequest) -> Result<ExecSyncResponse> {
        if req.cmd.is_empty() {
            return Err(Error::InvalidArgument("exec command is required".into()));
        }
        let handler = self
            .running_container(&req.container_id)
            .await?
            .runtime_handler;
        let pid_file = self
            .bundle(&req.container_id)
            .join(format!("exec-{}.pid", crate::id::generate()?));
        let result = self.run_exec(&req, &handler, &pid_file).await;
        let _ = crate::store::remove_file_if_exists(&pid_file);
        result
    }

    async fn run_exec(
        &self,
        req: &ExecSyncRequest,
        handler: &str,
        pid_file: &std::path::Path,
    ) -> Result<ExecSyncResponse> {
        let mut child = self
            .runc(handler)
            .exec(&req.container_id, pid_file, &req.cmd)?;
        let mut stdout_pipe = child.stdout.take().context("exec stdout")?;
        let mut stderr_pipe = child.stderr.take().context("exec stderr")?;
        let run = async {
            let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
            let (out, err, status) = tokio::join!(
                stdout_pipe.read_to_end(&mut stdout),
                stderr_pipe.read_to_end(&mut stderr),
                child.wait()
            );
            out.and(err).context("reading exec output")?;
            let status = status.context("waiting for runc exec")?;
            anyhow::Ok(ExecSyncResponse {
                stdout,
                stderr,
                exit_code: exit_code(status),
            })
        };
        if req.timeout <= 0 {
            return Ok(run.await?);
        }
        match tokio::time::timeout(Duration::from_secs(req.timeout as u64), run).await {
            Ok(result) => Ok(result?),
            Err(_) => {
                kill_exec(pid_file);
                Err(Error::Timeout(format!(
                    "command {:?} timed out after {}s",
                    req.cmd, req.timeout
                )))
            }
        }
    }
}

/// The exit code of `runc exec`, which is the exec'd process' one (`128 + signal` when it
/// was killed by a signal).
pub(super) fn exit_code(status: std::process::ExitStatus) -> i32 {
    status.code().unwrap_or_else(|| {
        128 + std::os::unix::process::ExitStatusExt::signal(&status).unwrap_or(0)
    })
}

/// SIGKILLs the exec'd process named in `pid_file` (runc does not forward SIGKILL).
fn kill_exec(pid_file: &std::path::Path) {
    let pid = std::fs::read_to_string(pid_file)
        .ok()
        .and_then(|text| text.trim().parse::<i32>().ok());
    if let Some(pid) = pid.filter(|pid| *pid > 0) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}
