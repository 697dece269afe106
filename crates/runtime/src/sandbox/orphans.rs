//! Sandboxes and containers a crash left half made: a RunPodSandbox interrupted (the
//! runtime SIGKILLed) after it pinned namespaces, mounted the pod's shm, started the PID
//! namespace holder or attached the network, or a CreateContainer after it mounted the
//! rootfs, but before the record was saved. Nobody knows their IDs, so nobody would ever
//! remove them: the restarted runtime does, from what is on disk.

use std::collections::HashSet;
use std::path::Path;

use nix::sys::signal::Signal;

use super::{ns, shm};
use crate::runtime::Runtime;

/// IDs that have a directory in one of `dirs` under `state` (`ns` and `sandboxes` for
/// sandboxes, `containers` for container bundles) but are not in `known` (the loaded
/// records). Call before serving requests, so that no call in progress can be taken for
/// an orphan.
pub fn find(state: &Path, dirs: &[&str], known: &HashSet<String>) -> Vec<String> {
    let mut out: Vec<String> = dirs
        .iter()
        .filter_map(|dir| std::fs::read_dir(state.join(dir)).ok())
        .flat_map(|entries| entries.flatten())
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|id| is_id(id) && !known.contains(id))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// A sandbox ID: 64 lowercase hex characters.
fn is_id(name: &str) -> bool {
    name.len() == 64 && name.bytes().all(|b| b.is_ascii_hexdigit())
}

/// SIGKILLs the PID namespace holders started for sandbox `id`: `pod-init` processes whose
/// command line names a pin of the sandbox's namespace directory.
fn kill_holders(ns_dir: &Path) {
    let needle = ns_dir.to_string_lossy().into_owned();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let is_holder = args.get(1).is_some_and(|a| a == super::pid::SUBCOMMAND)
            && args.iter().any(|a| a.starts_with(&needle));
        if is_holder {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}

impl Runtime {
    /// Releases the half-made containers `ids`: rootfs mount, snapshot, bundle.
    pub(crate) fn release_orphan_bundles(&self, ids: &[String]) {
        for id in ids {
            tracing::warn!(%id, "removing a container whose creation was interrupted");
            if let Err(err) = self.release_bundle(id) {
                tracing::warn!(%id, "cleaning up an interrupted container: {err:#}");
            }
        }
    }

    /// Releases what the half-made sandboxes `ids` hold: their PID namespace holder, the
    /// CNI attachment (DEL by sandbox ID, in the pinned network namespace), the shm
    /// mount, the namespace pins and the directories. Best effort: failures are logged.
    pub(crate) async fn release_orphans(&self, ids: Vec<String>) {
        for id in ids {
            tracing::warn!(%id, "removing a pod sandbox whose creation was interrupted");
            let paths = self.sandbox_paths(&id);
            kill_holders(&paths.ns);
            let pin = ns::pin_path(&paths.ns, ns::Kind::Net);
            if ns::is_pinned(&pin) {
                let netns = pin.to_string_lossy().into_owned();
                let attachment = crate::cni::Attachment {
                    sandbox_id: &id,
                    netns: &netns,
                    pod_name: "",
                    pod_namespace: "",
                    pod_uid: "",
                    port_mappings: &[],
                };
                if let Err(err) = self.cni.del(&attachment, None).await {
                    tracing::warn!(%id, "CNI DEL of an interrupted sandbox: {err:#}");
                }
            }
            let result = shm::unmount(&paths.files)
                .and_then(|()| ns::unpin(&paths.ns))
                .and_then(|()| crate::store::remove_dir_if_exists(&paths.files));
            if let Err(err) = result {
                tracing::warn!(%id, "cleaning up an interrupted sandbox: {err:#}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_directories_without_records() {
        let dir = tempfile::tempdir().unwrap();
        let (known, orphan) = ("a".repeat(64), "b".repeat(64));
        for sub in ["ns", "sandboxes"] {
            for id in [&known, &orphan] {
                std::fs::create_dir_all(dir.path().join(sub).join(id)).unwrap();
            }
        }
        std::fs::create_dir_all(dir.path().join("ns/not-an-id")).unwrap();
        let found = find(dir.path(), &["ns", "sandboxes"], &HashSet::from([known]));
        assert_eq!(found, [orphan]);
    }
}
