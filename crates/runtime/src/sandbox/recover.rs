//! Recovery of sandboxes cut short by a runtime crash, when the runtime starts: sandboxes
//! whose RunPodSandbox never finished (the kubelet never got their ID) are torn down, and
//! per-sandbox directories without any record are removed.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use super::{Sandbox, ns, shm};
use crate::runtime::Runtime;

impl Runtime {
    /// Tears down, in the background on the current tokio runtime, the sandboxes whose
    /// RunPodSandbox was cut short (records still `creating`): CNI DEL with the pinned
    /// network namespace and the sandbox ID, PID namespace holder, pins, shm, files, cgroup
    /// parent, then the record. The record goes last, so a runtime killed again during the
    /// cleanup resumes it on its next start. Nobody can reach these sandboxes: they are
    /// not listed.
    pub(crate) fn clean_up_half_created(self: &Arc<Self>, sandboxes: Vec<Sandbox>) {
        if sandboxes.is_empty() {
            return;
        }
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(
                count = sandboxes.len(),
                "no async runtime: half-created sandboxes are left for the next start"
            );
            return;
        };
        let runtime = Arc::clone(self);
        handle.spawn(async move {
            for mut sandbox in sandboxes {
                tracing::info!(id = %sandbox.id, "cleaning up a sandbox whose creation was cut short");
                runtime.abandon_sandbox(&mut sandbox).await;
            }
        });
    }

    /// Kills the PID namespace holders and removes the namespace pins (`<state>/ns/<id>`)
    /// and files, shm included
    /// (`<state>/sandboxes/<id>`), of sandboxes without a record (`known` holds the IDs of
    /// every record). Failures are logged.
    pub(crate) fn sweep_orphaned_sandbox_dirs(&self, known: &HashSet<String>) {
        let state = &self.config.state;
        for (parent, release) in [
            (
                state.join("ns"),
                release_ns as fn(&Path) -> anyhow::Result<()>,
            ),
            (state.join("sandboxes"), release_files),
        ] {
            for dir in crate::store::unknown_dirs(&parent, known) {
                tracing::info!(dir = %dir.display(), "removing the leftovers of an unknown sandbox");
                if let Err(err) = release(&dir) {
                    tracing::warn!(dir = %dir.display(), "removing an orphaned directory: {err:#}");
                }
            }
        }
    }
}

/// Kills the sandbox's recorded PID namespace holder and unpins its namespaces.
fn release_ns(ns_dir: &Path) -> anyhow::Result<()> {
    super::pid::kill_recorded_holder(ns_dir);
    ns::unpin(ns_dir)
}

/// Unmounts the sandbox's shm and removes its files directory.
fn release_files(files: &Path) -> anyhow::Result<()> {
    shm::unmount(files)?;
    crate::store::remove_dir_if_exists(files)
}
