//! The exit file: how a container's end is recorded by its shim and read by the runtime,
//! also when the runtime was not running at the time.

use std::path::Path;

use anyhow::Context as _;

/// Contents of `<bundle>/exit.json`, written atomically once the container's init exited.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ExitStatus {
    /// Exit code; `128 + signal` when the process was killed by a signal.
    pub exit_code: i32,
    /// When the exit was observed, nanoseconds since the Unix epoch.
    pub finished_at: i64,
    /// Whether the container's memory cgroup recorded an OOM kill.
    pub oom_killed: bool,
}

impl ExitStatus {
    /// Reads an exit file; `Ok(None)` when it does not exist (yet).
    pub fn read(path: &Path) -> anyhow::Result<Option<Self>> {
        match std::fs::read(path) {
            Ok(data) => Ok(Some(
                serde_json::from_slice(&data)
                    .with_context(|| format!("parsing {}", path.display()))?,
            )),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(err) => {
                Err(anyhow::Error::from(err).context(format!("reading {}", path.display())))
            }
        }
    }

    /// Writes the exit file atomically (it lives in the volatile state directory).
    pub fn write(&self, path: &Path) -> anyhow::Result<()> {
        crate::store::write_volatile(path, &serde_json::to_vec(self)?)
    }
}
