//! What the shim records about itself in the bundle, so that a runtime killed during
//! StartContainer finds the shim it spawned (containerd's shim keeps its address and PID
//! in the bundle for the same reason): `shim.json` (the shim daemon's [`ProcessId`]),
//! written before `runc run`, and `started.json` (a [`StartRecord`]) once the container
//! runs. Both are written atomically (renamed into place; the bundle is volatile state, so
//! not fsynced). After the exit, `deleted` marks that the shim ran
//! `runc delete` itself (containerd's shim deletes the task once it exited too), so that
//! RemoveContainer need not.

use std::path::Path;

use anyhow::Context as _;
use serde::de::DeserializeOwned;

use super::Started;
use crate::process::ProcessId;

/// `<bundle>/shim.json`: the shim daemon, from before `runc run` on.
pub const SHIM_FILE: &str = "shim.json";

/// `<bundle>/started.json`: the [`StartRecord`], once `runc run` succeeded.
pub const STARTED_FILE: &str = "started.json";

/// `<bundle>/deleted`: empty; the shim deleted the exited container from runc.
pub const DELETED_FILE: &str = "deleted";

/// Records in `bundle` that runc's container is deleted.
pub fn write_deleted(bundle: &Path) -> anyhow::Result<()> {
    crate::store::write_volatile(&bundle.join(DELETED_FILE), b"")
}

/// Whether the shim recorded in `bundle` that runc's container is deleted.
pub fn is_deleted(bundle: &Path) -> bool {
    bundle.join(DELETED_FILE).exists()
}

/// The processes of a started container and when it started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StartRecord {
    /// The container's init and its shim.
    pub started: Started,
    /// When `runc run` returned, nanoseconds since the Unix epoch.
    pub started_at: i64,
}

/// Records the shim daemon `shim` in `bundle`.
pub fn write_shim(bundle: &Path, shim: &ProcessId) -> anyhow::Result<()> {
    crate::store::write_volatile(&bundle.join(SHIM_FILE), &serde_json::to_vec(shim)?)
}

/// The shim daemon recorded in `bundle`; `Ok(None)` when none was started.
pub fn read_shim(bundle: &Path) -> anyhow::Result<Option<ProcessId>> {
    read(&bundle.join(SHIM_FILE))
}

/// Records in `bundle` that the container started.
pub fn write_started(bundle: &Path, record: &StartRecord) -> anyhow::Result<()> {
    crate::store::write_volatile(&bundle.join(STARTED_FILE), &serde_json::to_vec(record)?)
}

/// The [`StartRecord`] in `bundle`; `Ok(None)` when the container was not started.
pub fn read_started(bundle: &Path) -> anyhow::Result<Option<StartRecord>> {
    read(&bundle.join(STARTED_FILE))
}

fn read<T: DeserializeOwned>(path: &Path) -> anyhow::Result<Option<T>> {
    match std::fs::read(path) {
        Ok(data) => Ok(Some(
            serde_json::from_slice(&data).with_context(|| format!("parsing {}", path.display()))?,
        )),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(anyhow::Error::from(err).context(format!("reading {}", path.display()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_roundtrip() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_shim(dir.path()).unwrap(), None);
        assert_eq!(read_started(dir.path()).unwrap(), None);
        let shim = ProcessId {
            pid: 41,
            start_time: 999,
        };
        write_shim(dir.path(), &shim).unwrap();
        assert_eq!(read_shim(dir.path()).unwrap(), Some(shim));
        let record = StartRecord {
            started: Started {
                init: ProcessId {
                    pid: 42,
                    start_time: 1000,
                },
                shim,
            },
            started_at: 7,
        };
        write_started(dir.path(), &record).unwrap();
        assert_eq!(read_started(dir.path()).unwrap(), Some(record));
        std::fs::write(dir.path().join(STARTED_FILE), b"{").unwrap();
        assert!(read_started(dir.path()).is_err());
    }
}
