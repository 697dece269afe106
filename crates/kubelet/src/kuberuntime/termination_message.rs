//! The termination message (upstream `kuberuntime_container.go` `makeMounts`,
//! `getTerminationMessage`, `readLastStringFromContainerLogs`): a host file mounted at the
//! container's terminationMessagePath, read back into `state.terminated.message` when
//! the container exits, or the tail of its log with `FallbackToLogsOnError`.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use k8s_cri::v1::{ContainerState, Mount};
use k8s_openapi::api::core::v1::Container;

use super::labels::{
    CONTAINER_TERMINATION_MESSAGE_PATH_ANNOTATION, CONTAINER_TERMINATION_MESSAGE_POLICY_ANNOTATION,
};
use crate::pod_dirs::PodDirs;

/// Largest termination message in bytes (upstream `MaxContainerTerminationMessageLength`).
pub const MAX_MESSAGE_LENGTH: u64 = 4096;
/// Log lines read for `FallbackToLogsOnError` (`MaxContainerTerminationMessageLogLines`).
pub const MAX_LOG_LINES: usize = 80;
/// Bytes kept of those lines (`MaxContainerTerminationMessageLogLength`).
pub const MAX_LOG_LENGTH: usize = 2048;
/// The policy that falls back to the log.
pub const FALLBACK_TO_LOGS_ON_ERROR: &str = "FallbackToLogsOnError";
/// Bytes read from the end of a log file to find its last lines (a CRI log line is at
/// most a 16 KiB chunk plus its prefix).
const LOG_TAIL_WINDOW: u64 = 256 * 1024;

/// Creates an empty world-writable file `<pod container dir>/<8 hex>` for `container`
/// of pod `uid` and returns its mount at terminationMessagePath, or `None` when the
/// container sets no path. Errors on I/O failures.
pub fn termination_message_mount(
    pod_dirs: &PodDirs,
    uid: &str,
    container: &Container,
) -> std::io::Result<Option<Mount>> {
    let Some(path) = container
        .termination_message_path
        .as_deref()
        .filter(|p| !p.is_empty())
    else {
        return Ok(None);
    };
    let dir = pod_dirs.pod_container_dir(uid, &container.name);
    std::fs::create_dir_all(&dir)?;
    let file = dir.join(hex::encode(rand_bytes()));
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&file)?;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666))?;
    Ok(Some(Mount {
        container_path: path.to_owned(),
        host_path: file.display().to_string(),
        ..Default::default()
    }))
}

/// Four random bytes from the OS (for the file name, as upstream's `utilrand.String(8)`).
fn rand_bytes() -> [u8; 4] {
    let mut bytes = [0u8; 4];
    if File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .is_err()
    {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        bytes = nanos.to_le_bytes();
    }
    bytes
}

/// The termination message of an exited container from its CRI status: the file
/// mounted at its terminationMessagePath (last 4096 bytes), or with
/// `FallbackToLogsOnError`, a non-zero exit and an empty or missing file, the last 80
/// lines / 2048 bytes of its log. `None` unless exited or when there is nothing to say.
pub fn termination_message(status: &k8s_cri::v1::ContainerStatus) -> Option<String> {
    if status.state != ContainerState::ContainerExited as i32 {
        return None;
    }
    let annotation = |key: &str| status.annotations.get(key).map_or("", String::as_str);
    let fallback_to_logs = annotation(CONTAINER_TERMINATION_MESSAGE_POLICY_ANNOTATION)
        == FALLBACK_TO_LOGS_ON_ERROR
        && status.exit_code != 0
        && status.reason != "ContainerCannotRun";
    let path = annotation(CONTAINER_TERMINATION_MESSAGE_PATH_ANNOTATION);
    let from_file = status
        .mounts
        .iter()
        .find(|m| !path.is_empty() && m.container_path == path)
        .map(|m| read_at_most(Path::new(&m.host_path), MAX_MESSAGE_LENGTH));
    let message = match from_file {
        Some(Ok(data)) if !data.is_empty() || !fallback_to_logs => data,
        Some(Err(e)) if e.kind() != std::io::ErrorKind::NotFound => {
            format!("Error on reading termination log {path}: {e}")
        }
        _ if fallback_to_logs => match log_tail(Path::new(&status.log_path)) {
            Ok(tail) => tail,
            Err(e) => format!("Error on reading termination message from logs: {e}"),
        },
        _ => String::new(),
    };
    (!message.is_empty()).then_some(message)
}

/// The last `max` bytes of the file at `path`, as text.
fn read_at_most(path: &Path, max: u64) -> std::io::Result<String> {
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(max)))?;
    let mut data = Vec::new();
    file.take(max).read_to_end(&mut data)?;
    Ok(String::from_utf8_lossy(&data).into_owned())
}

/// The content of the last [`MAX_LOG_LINES`] lines of a CRI log file, its last
/// [`MAX_LOG_LENGTH`] bytes.
fn log_tail(path: &Path) -> std::io::Result<String> {
    let raw = read_at_most(path, LOG_TAIL_WINDOW)?;
    Ok(cri_log_tail(&raw, MAX_LOG_LINES, MAX_LOG_LENGTH))
}

/// The messages of the last `lines` lines of CRI log text (`<time> <stream> <P|F> <msg>`),
/// partial (`P`) lines joined to the next, full (`F`) ones ended by a newline, then cut
/// to the last `max_bytes` bytes (at a character boundary). Malformed lines are skipped.
pub fn cri_log_tail(raw: &str, lines: usize, max_bytes: usize) -> String {
    let all: Vec<&str> = raw.lines().collect();
    let mut out = String::new();
    for line in &all[all.len().saturating_sub(lines)..] {
        let mut fields = line.splitn(4, ' ');
        let (Some(_time), Some(_stream), Some(tag)) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        out.push_str(fields.next().unwrap_or(""));
        if tag != "P" {
            out.push('\n');
        }
    }
    let mut start = out.len().saturating_sub(max_bytes);
    while !out.is_char_boundary(start) {
        start += 1;
    }
    out.split_off(start)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn exited(exit_code: i32, policy: &str, dir: &Path) -> k8s_cri::v1::ContainerStatus {
        k8s_cri::v1::ContainerStatus {
            state: ContainerState::ContainerExited as i32,
            exit_code,
            annotations: HashMap::from([
                (
                    CONTAINER_TERMINATION_MESSAGE_PATH_ANNOTATION.to_owned(),
                    "/dev/termination-log".to_owned(),
                ),
                (
                    CONTAINER_TERMINATION_MESSAGE_POLICY_ANNOTATION.to_owned(),
                    policy.to_owned(),
                ),
            ]),
            mounts: vec![Mount {
                container_path: "/dev/termination-log".into(),
                host_path: dir.join("msg").display().to_string(),
                ..Default::default()
            }],
            log_path: dir.join("0.log").display().to_string(),
            ..Default::default()
        }
    }

    #[test]
    fn mount_is_a_new_writable_file() {
        let dir = tempfile::tempdir().unwrap();
        let dirs = PodDirs::new(dir.path());
        let container = Container {
            name: "app".into(),
            termination_message_path: Some("/dev/termination-log".into()),
            ..Default::default()
        };
        let mount = termination_message_mount(&dirs, "u1", &container)
            .unwrap()
            .unwrap();
        assert_eq!(mount.container_path, "/dev/termination-log");
        let host = Path::new(&mount.host_path);
        assert_eq!(
            host.parent(),
            Some(dirs.pod_container_dir("u1", "app").as_path())
        );
        let mode = std::fs::metadata(host).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o666);
        let other = termination_message_mount(&dirs, "u1", &container)
            .unwrap()
            .unwrap();
        assert_ne!(other.host_path, mount.host_path);
        let none = Container {
            name: "x".into(),
            ..Default::default()
        };
        assert_eq!(termination_message_mount(&dirs, "u1", &none).unwrap(), None);
    }

    #[test]
    fn message_comes_from_the_file_or_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let log = "2024-01-01T00:00:00Z stdout F first\n\
                   2024-01-01T00:00:00Z stderr P par\n\
                   2024-01-01T00:00:00Z stderr F tial\n";
        std::fs::write(dir.path().join("0.log"), log).unwrap();
        // No file at all: File policy says nothing, the fallback reads the log.
        assert_eq!(termination_message(&exited(1, "File", dir.path())), None);
        assert_eq!(
            termination_message(&exited(1, FALLBACK_TO_LOGS_ON_ERROR, dir.path())).as_deref(),
            Some("first\npartial\n")
        );
        // Empty file: the fallback applies only to failures.
        std::fs::write(dir.path().join("msg"), "").unwrap();
        assert_eq!(
            termination_message(&exited(0, FALLBACK_TO_LOGS_ON_ERROR, dir.path())),
            None
        );
        assert_eq!(
            termination_message(&exited(2, FALLBACK_TO_LOGS_ON_ERROR, dir.path())).as_deref(),
            Some("first\npartial\n")
        );
        // A written file wins, cut to its last 4096 bytes.
        let long = format!("{}end", "x".repeat(5000));
        std::fs::write(dir.path().join("msg"), &long).unwrap();
        let msg = termination_message(&exited(2, FALLBACK_TO_LOGS_ON_ERROR, dir.path())).unwrap();
        assert_eq!(msg.len(), 4096);
        assert!(msg.ends_with("xend"));
        // Running containers have no message.
        let mut running = exited(2, "File", dir.path());
        running.state = ContainerState::ContainerRunning as i32;
        assert_eq!(termination_message(&running), None);
    }

    #[test]
    fn log_tail_keeps_the_last_lines_and_bytes() {
        let raw: String = (0..100)
            .map(|i| format!("2024-01-01T00:00:00Z stdout F line{i}\n"))
            .collect();
        let tail = cri_log_tail(&raw, 80, 2048);
        assert!(tail.starts_with("line20\n"));
        assert!(tail.ends_with("line99\n"));
        let cut = cri_log_tail(&raw, 80, 10);
        assert_eq!(cut, "98\nline99\n");
        assert_eq!(cri_log_tail("garbage\n", 80, 2048), "");
        assert_eq!(cri_log_tail("t s F ü\n", 80, 2), "\n");
    }
}
