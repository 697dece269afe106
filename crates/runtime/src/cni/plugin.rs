//! Running one CNI plugin binary (CNI spec 1.0, "Section 3: Execution Protocol").

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail};
use serde_json::Value;
use tokio::io::AsyncWriteExt as _;

/// How long a single plugin invocation may take before it is killed.
const TIMEOUT: Duration = Duration::from_secs(60);

/// The CNI verb (`CNI_COMMAND`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Attach the container to the network.
    Add,
    /// Detach and release everything the matching ADD allocated.
    Del,
}

impl Command {
    fn as_str(self) -> &'static str {
        match self {
            Command::Add => "ADD",
            Command::Del => "DEL",
        }
    }
}

/// Environment of one invocation besides `CNI_COMMAND`.
#[derive(Debug, Clone)]
pub struct Invocation<'a> {
    /// `CNI_CONTAINERID`.
    pub container_id: &'a str,
    /// `CNI_NETNS`: path of the network namespace; may be empty on DEL.
    pub netns: &'a str,
    /// `CNI_IFNAME`.
    pub ifname: &'a str,
    /// `CNI_ARGS` (`K=V;K=V`).
    pub args: &'a str,
}

/// Runs plugin `conf["type"]`, found in `bin_dirs`, with `conf` on stdin. Returns the parsed
/// stdout for ADD (the result) and `Value::Null` for DEL. A failing plugin's error object
/// (`{"code", "msg", "details"}`) becomes the error text.
pub async fn run(
    bin_dirs: &[PathBuf],
    command: Command,
    inv: &Invocation<'_>,
    conf: &Value,
) -> anyhow::Result<Value> {
    let kind = conf
        .get("type")
        .and_then(Value::as_str)
        .context("CNI plugin config has no \"type\"")?;
    let binary = find(bin_dirs, kind)?;
    let cni_path = std::env::join_paths(bin_dirs)?;
    let mut child = tokio::process::Command::new(&binary)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("CNI_COMMAND", command.as_str())
        .env("CNI_CONTAINERID", inv.container_id)
        .env("CNI_NETNS", inv.netns)
        .env("CNI_IFNAME", inv.ifname)
        .env("CNI_ARGS", inv.args)
        .env("CNI_PATH", cni_path)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting CNI plugin {}", binary.display()))?;
    let input = serde_json::to_vec(conf)?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(&input)
            .await
            .context("writing CNI plugin stdin")?;
    }
    let output = tokio::time::timeout(TIMEOUT, child.wait_with_output())
        .await
        .with_context(|| {
            format!(
                "CNI plugin {kind} {} timed out after {TIMEOUT:?}",
                command.as_str()
            )
        })??;
    if !output.status.success() {
        bail!(
            "CNI plugin {kind} {} failed: {}",
            command.as_str(),
            describe_failure(&output.stdout, &output.stderr)
        );
    }
    if command == Command::Del || output.stdout.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Null);
    }
    serde_json::from_slice(&output.stdout)
        .with_context(|| format!("parsing the result of CNI plugin {kind}"))
}

/// Finds plugin `kind` in `bin_dirs` (first match wins, like libcni's `FindInPath`).
fn find(bin_dirs: &[PathBuf], kind: &str) -> anyhow::Result<PathBuf> {
    if kind.contains('/') {
        bail!("invalid CNI plugin type {kind:?}");
    }
    bin_dirs
        .iter()
        .map(|dir| dir.join(kind))
        .find(|path| Path::new(path).is_file())
        .with_context(|| format!("CNI plugin {kind:?} not found in {bin_dirs:?}"))
}

/// Text of a plugin failure: the spec's error object when stdout holds one, else stderr.
fn describe_failure(stdout: &[u8], stderr: &[u8]) -> String {
    if let Ok(err) = serde_json::from_slice::<Value>(stdout) {
        let code = err.get("code").and_then(Value::as_u64).unwrap_or_default();
        let msg = err.get("msg").and_then(Value::as_str).unwrap_or_default();
        let details = err
            .get("details")
            .and_then(Value::as_str)
            .unwrap_or_default();
        return match details {
            "" => format!("error {code}: {msg}"),
            details => format!("error {code}: {msg}: {details}"),
        };
    }
    let text = String::from_utf8_lossy(if stdout.is_empty() { stderr } else { stdout });
    text.trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_object_is_described() {
        let out = br#"{"cniVersion":"1.0.0","code":7,"msg":"bad config","details":"no subnet"}"#;
        assert_eq!(describe_failure(out, b""), "error 7: bad config: no subnet");
        assert_eq!(describe_failure(b"", b"boom\n"), "boom");
    }
}
