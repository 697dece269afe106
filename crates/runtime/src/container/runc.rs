//! Calls of the OCI runtime CLI (`runc --root <dir> kill|delete|exec ...`).

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use anyhow::{Context as _, bail};

/// How long a management call (kill, delete) may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// An OCI runtime binary with its state directory.
#[derive(Debug, Clone)]
pub struct Runc {
    /// The binary (`runc`, `crun`, or a path).
    pub binary: PathBuf,
    /// `--root` state directory.
    pub root: PathBuf,
}

impl Runc {
    fn command(&self) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(&self.binary);
        cmd.arg("--root")
            .arg(&self.root)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        cmd
    }

    async fn call(&self, args: &[&str]) -> anyhow::Result<Output> {
        let output = tokio::time::timeout(CALL_TIMEOUT, self.command().args(args).output())
            .await
            .with_context(|| format!("runc {} timed out", args.join(" ")))?
            .with_context(|| format!("running {}", self.binary.display()))?;
        Ok(output)
    }

    /// `runc kill <id> <signal>`. A container that no longer runs is not an error.
    pub async fn kill(&self, id: &str, signal: &str) -> anyhow::Result<()> {
        let output = self.call(&["kill", id, signal]).await?;
        if output.status.success() || is_gone(&output) {
            return Ok(());
        }
        bail!("runc kill {id} {signal}: {}", stderr(&output))
    }

    /// `runc delete --force <id>`. An unknown container is not an error.
    pub async fn delete(&self, id: &str) -> anyhow::Result<()> {
        let output = self.call(&["delete", "--force", id]).await?;
        if output.status.success() || is_gone(&output) {
            return Ok(());
        }
        bail!("runc delete {id}: {}", stderr(&output))
    }

    /// `runc update --resources - <id>`: new cgroup limits for a running container, as
    /// OCI `LinuxResources` JSON on stdin.
    pub async fn update(
        &self,
        id: &str,
        resources: &oci_spec::runtime::LinuxResources,
    ) -> anyhow::Result<()> {
        use tokio::io::AsyncWriteExt as _;
        let json = serde_json::to_vec(resources).context("serializing resources")?;
        let mut child = self
            .command()
            .args(["update", "--resources", "-", id])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .with_context(|| format!("running {}", self.binary.display()))?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(&json).await.context("writing resources")?;
        }
        let output = tokio::time::timeout(CALL_TIMEOUT, child.wait_with_output())
            .await
            .with_context(|| format!("runc update {id} timed out"))??;
        if output.status.success() {
            return Ok(());
        }
        bail!("runc update {id}: {}", stderr(&output))
    }

    /// `runc exec --pid-file <pid_file> <id> <cmd...>` with captured stdout and stderr.
    /// The child is killed when the returned future is dropped.
    pub fn exec(
        &self,
        id: &str,
        pid_file: &Path,
        cmd: &[String],
    ) -> anyhow::Result<tokio::process::Child> {
        self.exec_command(id, pid_file, cmd, false)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .with_context(|| format!("running {}", self.binary.display()))
    }

    /// The `runc exec [--tty --env TERM=xterm] --pid-file <pid_file> <id> <cmd...>` command,
    /// stdin from /dev/null until the caller sets it. With `tty`, runc runs in the
    /// foreground: it allocates the container-side terminal and relays it to its own stdio,
    /// and applies its stdin terminal's size to it on SIGWINCH. The child is killed when it
    /// is dropped.
    pub fn exec_command(
        &self,
        id: &str,
        pid_file: &Path,
        cmd: &[String],
        tty: bool,
    ) -> tokio::process::Command {
        let mut command = self.command();
        command.arg("exec");
        if tty {
            command.args(["--tty", "--env", crate::container::spec::TERM]);
        }
        command.arg("--pid-file").arg(pid_file).arg(id).args(cmd);
        command
    }
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).trim().to_string()
}

/// Whether runc failed because the container does not exist or is already stopped.
fn is_gone(output: &Output) -> bool {
    let text = stderr(output);
    text.contains("does not exist")
        || text.contains("not running")
        || text.contains("process already finished")
}
