//! The container log manager (upstream `pkg/kubelet/logs/container_log_manager.go`):
//! rotates the CRI log files of running containers so that no container fills the node's
//! disk.
//!
//! Every `containerLogMonitorInterval` (10 s) the manager lists the running containers and,
//! with up to `containerLogMaxWorkers` (1) at a time, rotates each log larger than
//! `containerLogMaxSize` (10 MiB), as upstream does:
//! 1. leftovers of an interrupted rotation go (`*.tmp`, an uncompressed file whose `.gz`
//!    exists);
//! 2. the oldest rotated files go, so that with the new one at most
//!    `containerLogMaxFiles` (5) files exist, the live one included;
//! 3. every rotated file but the newest is gzipped (`<log>.<time>.gz`);
//! 4. the live file is renamed to `<log>.<YYYYMMDD-hhmmss>` and the runtime is asked to
//!    reopen it (CRI ReopenContainerLog); when that fails the rename is undone.
//!
//! A running container whose log file is missing gets it reopened. [`rotated_logs`] lists
//! a log's rotated files oldest first, for readers that span the rotation (the kubelet's
//! `/containerLogs`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_cri::v1::{
    ContainerFilter, ContainerState, ContainerStateValue, ContainerStatusRequest,
    ListContainersRequest, ReopenContainerLogRequest,
};
use tracing::{debug, warn};

use crate::cri::Cri;
use crate::error::{Error, Result};

/// Suffix of a compressed rotated log.
const GZ_SUFFIX: &str = ".gz";
/// Suffix of a file being written by the compression, renamed when complete.
const TMP_SUFFIX: &str = ".tmp";
/// Timestamp of a rotated log's name (upstream's Go layout `20060102-150405`).
const TIMESTAMP_FORMAT: &str = "%Y%m%d-%H%M%S";

/// Rotation settings (the `containerLog*` fields of KubeletConfiguration).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogRotatePolicy {
    /// A log larger than this many bytes is rotated (`containerLogMaxSize`, 10 MiB).
    pub max_size: u64,
    /// Files kept per container log, the live one included (`containerLogMaxFiles`, 5,
    /// at least 2).
    pub max_files: usize,
    /// Logs rotated at the same time (`containerLogMaxWorkers`, 1).
    pub max_workers: usize,
    /// How often logs are checked (`containerLogMonitorInterval`, 10 s).
    pub monitor_interval: Duration,
}

impl Default for LogRotatePolicy {
    fn default() -> Self {
        Self {
            max_size: 10 << 20,
            max_files: 5,
            max_workers: 1,
            monitor_interval: Duration::from_secs(10),
        }
    }
}

/// Rotates container logs through the runtime (see the module documentation).
pub struct ContainerLogManager {
    cri: Arc<dyn Cri>,
    policy: LogRotatePolicy,
}

impl ContainerLogManager {
    /// A manager rotating the logs of `cri`'s containers per `policy`.
    pub fn new(cri: Arc<dyn Cri>, policy: LogRotatePolicy) -> Self {
        Self { cri, policy }
    }

    /// Checks and rotates every `monitor_interval`, forever.
    pub async fn run(self) {
        let mut ticker = tokio::time::interval(self.policy.monitor_interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            if let Err(e) = self.rotate_logs().await {
                warn!(error = %e, "failed to rotate container logs");
            }
        }
    }

    /// One pass over the running containers. Errors only when the containers cannot be
    /// listed; a container whose log fails to rotate is logged and skipped.
    pub async fn rotate_logs(&self) -> Result<()> {
        let containers = self
            .cri
            .list_containers(ListContainersRequest {
                filter: Some(ContainerFilter {
                    state: Some(ContainerStateValue {
                        state: ContainerState::ContainerRunning as i32,
                    }),
                    ..Default::default()
                }),
            })
            .await
            .map_err(|e| Error::Log(format!("listing containers: {}", e.message())))?
            .containers;
        futures::stream::iter(containers)
            .for_each_concurrent(self.policy.max_workers.max(1), |container| async move {
                if let Err(e) = self.rotate_container(&container.id).await {
                    warn!(container = %container.id, error = %e, "failed to rotate the log of a container");
                }
            })
            .await;
        Ok(())
    }

    async fn rotate_container(&self, id: &str) -> Result<()> {
        let status = self
            .cri
            .container_status(ContainerStatusRequest {
                container_id: id.to_owned(),
                verbose: false,
            })
            .await
            .map_err(|e| Error::Log(format!("container status: {}", e.message())))?
            .status
            .unwrap_or_default();
        if status.log_path.is_empty() {
            return Ok(());
        }
        let path = PathBuf::from(&status.log_path);
        let size = match std::fs::metadata(&path) {
            Ok(meta) => meta.len(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // Removed from under the runtime: have it write a new file.
                return self.reopen(id).await;
            }
            Err(e) => return Err(Error::io("stat", &path, e)),
        };
        if size < self.policy.max_size {
            return Ok(());
        }
        let policy = self.policy;
        let prepared = {
            let path = path.clone();
            tokio::task::spawn_blocking(move || prepare_rotation(&path, policy.max_files))
                .await
                .map_err(|e| Error::Log(format!("preparing the rotation: {e}")))??
        };
        let rotated = rotated_name(&path, chrono::Utc::now());
        if rotated.exists() || prepared.iter().any(|p| p == &rotated) {
            // Rotated this very second already: next time.
            return Ok(());
        }
        std::fs::rename(&path, &rotated).map_err(|e| {
            Error::Log(format!(
                "renaming {} to {}: {e}",
                path.display(),
                rotated.display()
            ))
        })?;
        if let Err(e) = self.reopen(id).await {
            // The runtime still writes the renamed file: give it its name back.
            if let Err(undo) = std::fs::rename(&rotated, &path) {
                warn!(path = %path.display(), error = %undo, "cannot undo a log rotation");
            }
            return Err(e);
        }
        debug!(container = %id, log = %path.display(), rotated = %rotated.display(), size, "rotated container log");
        Ok(())
    }

    async fn reopen(&self, id: &str) -> Result<()> {
        self.cri
            .reopen_container_log(ReopenContainerLogRequest {
                container_id: id.to_owned(),
            })
            .await
            .map(|_| ())
            .map_err(|e| Error::Log(format!("reopening the container log: {}", e.message())))
    }
}

/// `<log>.<YYYYMMDD-hhmmss>` at `now` (UTC).
fn rotated_name(log: &Path, now: chrono::DateTime<chrono::Utc>) -> PathBuf {
    let mut name = log.as_os_str().to_owned();
    name.push(".");
    name.push(now.format(TIMESTAMP_FORMAT).to_string());
    PathBuf::from(name)
}

/// The rotated files of `log` (`<log>.<time>` and `<log>.<time>.gz`), oldest first, for
/// readers: files being written by a compression (`.tmp`) are left out, and while a file
/// is being compressed, its complete `.gz` stands for both (the original is removed next).
pub fn rotated_logs(log: &Path) -> Vec<PathBuf> {
    let mut found = rotated_files(log);
    let compressed: std::collections::HashSet<PathBuf> = found
        .iter()
        .filter(|p| is_gz(p))
        .map(|p| p.with_extension(""))
        .collect();
    found.retain(|p| is_gz(p) || !compressed.contains(p));
    found
}

/// Every rotated file of `log`, `.tmp` files excepted, sorted (by the timestamp, so oldest
/// first).
fn rotated_files(log: &Path) -> Vec<PathBuf> {
    let (Some(dir), Some(name)) = (log.parent(), log.file_name().and_then(|n| n.to_str())) else {
        return Vec::new();
    };
    let prefix = format!("{name}.");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let file_name = entry.file_name();
            let file_name = file_name.to_str()?;
            let rest = file_name.strip_prefix(&prefix)?;
            let stamp = rest.strip_suffix(GZ_SUFFIX).unwrap_or(rest);
            chrono::NaiveDateTime::parse_from_str(stamp, TIMESTAMP_FORMAT).ok()?;
            Some(entry.path())
        })
        .collect();
    found.sort();
    found
}

/// Steps 1 to 3 of a rotation of `log`: leftovers removed, the oldest rotated files removed
/// to leave `max_files - 2`, all but the newest compressed. Returns the rotated files left.
fn prepare_rotation(log: &Path, max_files: usize) -> Result<Vec<PathBuf>> {
    // 1. Leftovers of an interrupted rotation.
    if let (Some(dir), Some(name)) = (log.parent(), log.file_name().and_then(|n| n.to_str())) {
        let prefix = format!("{name}.");
        if let Ok(entries) = std::fs::read_dir(dir) {
            for entry in entries.filter_map(Result::ok) {
                let file_name = entry.file_name();
                let file_name = file_name.to_string_lossy();
                if file_name.starts_with(&prefix) && file_name.ends_with(TMP_SUFFIX) {
                    remove(&entry.path());
                }
            }
        }
    }
    let mut logs = Vec::new();
    for path in rotated_files(log) {
        let gz = gz_name(&path);
        if !is_gz(&path) && gz.exists() {
            // Compressed, but the original was not removed.
            remove(&path);
        } else {
            logs.push(path);
        }
    }
    // 2. Room for the file rotated now: `max_files - 2` old ones + it + the live one.
    let keep = max_files.saturating_sub(2);
    if logs.len() > keep {
        for old in logs.drain(..logs.len() - keep) {
            remove(&old);
        }
    }
    // 3. Every rotated file but the newest is compressed.
    let newest = logs.len().saturating_sub(1);
    for path in logs.iter_mut().take(newest) {
        if !is_gz(path) {
            *path = compress(path)?;
        }
    }
    Ok(logs)
}

fn is_gz(path: &Path) -> bool {
    path.as_os_str().to_string_lossy().ends_with(GZ_SUFFIX)
}

fn gz_name(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(GZ_SUFFIX);
    PathBuf::from(name)
}

fn remove(path: &Path) {
    if let Err(e) = std::fs::remove_file(path)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        warn!(path = %path.display(), error = %e, "cannot remove a rotated container log");
    }
}

/// Gzips `path` into `<path>.gz` (through `<path>.gz.tmp`), then removes `path`.
fn compress(path: &Path) -> Result<PathBuf> {
    let gz = gz_name(path);
    let mut tmp = gz.as_os_str().to_owned();
    tmp.push(TMP_SUFFIX);
    let tmp = PathBuf::from(tmp);
    let result = (|| -> std::io::Result<()> {
        let mut input = std::fs::File::open(path)?;
        let output = std::fs::File::create(&tmp)?;
        let mut encoder = flate2::write::GzEncoder::new(output, flate2::Compression::default());
        std::io::copy(&mut input, &mut encoder)?;
        encoder.finish()?.sync_all()?;
        std::fs::rename(&tmp, &gz)
    })();
    if let Err(e) = result {
        remove(&tmp);
        return Err(Error::io("compressing", path, e));
    }
    remove(path);
    Ok(gz)
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;
    use crate::cri::fake::FakeCri;

    fn write(path: &Path, size: usize) {
        std::fs::write(path, vec![b'x'; size]).unwrap();
    }

    #[test]
    fn rotation_keeps_max_files_and_compresses_all_but_the_newest() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("0.log");
        for stamp in [
            "20260101-000001",
            "20260101-000002",
            "20260101-000003",
            "20260101-000004",
        ] {
            write(&dir.path().join(format!("0.log.{stamp}")), 100);
        }
        // Leftovers: a partial compression, and a file compressed but not removed.
        write(&dir.path().join("0.log.20260101-000004.gz.tmp"), 3);
        std::fs::copy(
            dir.path().join("0.log.20260101-000003"),
            dir.path().join("0.log.20260101-000003.gz"),
        )
        .unwrap();
        // Files of another log and unrelated names are not touched.
        write(&dir.path().join("1.log.20260101-000001"), 1);
        write(&dir.path().join("0.log.notes"), 1);

        let left = prepare_rotation(&log, 5).unwrap();
        let names: Vec<String> = left
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        // max_files 5: these 3, the one rotated next and the live file.
        assert_eq!(
            names,
            [
                "0.log.20260101-000002.gz",
                "0.log.20260101-000003.gz",
                "0.log.20260101-000004"
            ]
        );
        let mut all: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        all.sort();
        assert_eq!(
            all,
            [
                "0.log.20260101-000002.gz",
                "0.log.20260101-000003.gz",
                "0.log.20260101-000004",
                "0.log.notes",
                "1.log.20260101-000001"
            ]
        );
    }

    #[test]
    fn compression_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("0.log");
        let one = dir.path().join("0.log.20260101-000001");
        std::fs::write(&one, "2026-01-01T00:00:01Z stdout F hello\n").unwrap();
        write(&dir.path().join("0.log.20260101-000002"), 10);
        prepare_rotation(&log, 5).unwrap();
        assert!(!one.exists());
        let mut text = String::new();
        flate2::read::GzDecoder::new(std::fs::File::open(gz_name(&one)).unwrap())
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, "2026-01-01T00:00:01Z stdout F hello\n");
        assert_eq!(rotated_logs(&log).len(), 2);
    }

    /// Readers see one file per rotation: the `.gz` while its original is not removed yet.
    #[test]
    fn readers_see_one_file_per_rotation() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("0.log");
        for name in [
            "0.log.20260101-000001.gz",
            "0.log.20260101-000002",
            "0.log.20260101-000002.gz",
            "0.log.20260101-000002.gz.tmp",
            "0.log.20260101-000003",
        ] {
            write(&dir.path().join(name), 1);
        }
        let names: Vec<String> = rotated_logs(&log)
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "0.log.20260101-000001.gz",
                "0.log.20260101-000002.gz",
                "0.log.20260101-000003"
            ]
        );
    }

    #[tokio::test]
    async fn large_logs_of_running_containers_are_rotated_and_reopened() {
        let dir = tempfile::tempdir().unwrap();
        let cri = Arc::new(FakeCri::default());
        let sandbox = cri.add_sandbox("uid1", "p", true);
        let big = cri.add_container(&sandbox, "uid1", "big", ContainerState::ContainerRunning);
        let small = cri.add_container(&sandbox, "uid1", "small", ContainerState::ContainerRunning);
        let big_log = dir.path().join("big.log");
        let small_log = dir.path().join("small.log");
        cri.set_log_path(&big, &big_log);
        cri.set_log_path(&small, &small_log);
        write(&big_log, 2048);
        write(&small_log, 10);
        let manager = ContainerLogManager::new(
            cri.clone(),
            LogRotatePolicy {
                max_size: 1024,
                ..Default::default()
            },
        );
        manager.rotate_logs().await.unwrap();
        assert_eq!(rotated_logs(&big_log).len(), 1);
        assert!(rotated_logs(&small_log).is_empty());
        assert!(
            cri.calls().contains(&"ReopenContainerLog".to_owned()),
            "{:?}",
            cri.calls()
        );
        // The fake's reopen creates the new live file, as a runtime does.
        assert_eq!(std::fs::metadata(&big_log).unwrap().len(), 0);
    }
}
