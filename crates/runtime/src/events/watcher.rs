//! The exit watcher: notices a container that exits by itself, without anyone calling
//! ContainerStatus, and publishes its STOPPED event.
//!
//! The shim records the exit by renaming `exit.json` into the container's bundle
//! directory ([`crate::shim::exit`]). Each bundle directory is watched with inotify
//! (not recursively: the bundle holds the container's rootfs) from CreateContainer until
//! RemoveContainer; an `exit.json` appearing there makes the runtime refresh the
//! container's record ([`Runtime::refresh`]) and publish STOPPED, typically within
//! milliseconds of the exit.

use std::path::Path;
use std::sync::{Arc, Mutex, Weak};

use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher as _};
use tokio::sync::mpsc;

use crate::container::State;
use crate::runtime::Runtime;

/// Name of the shim's exit file in a bundle directory.
const EXIT_FILE: &str = "exit.json";

/// The inotify watcher of the bundle directories; dropping it ends the watcher task.
#[derive(Default)]
pub struct ExitWatcher {
    watcher: Mutex<Option<RecommendedWatcher>>,
    /// Woken whenever an exit file appears, so that waiters (StopContainer) need not poll.
    exited: tokio::sync::Notify,
}

impl std::fmt::Debug for ExitWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ExitWatcher")
    }
}

impl ExitWatcher {
    /// Notified (`notify_waiters`) each time some container's exit file appears; a waiter
    /// re-checks its own container. Without a running watcher it is never notified.
    pub(crate) fn exits(&self) -> &tokio::sync::Notify {
        &self.exited
    }

    fn with<T>(&self, f: impl FnOnce(&mut RecommendedWatcher) -> T) -> Option<T> {
        self.watcher
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .as_mut()
            .map(f)
    }
}

/// Starts watching the bundles of `runtime`'s containers, on the current tokio runtime.
/// Without one (or when inotify is unavailable) exits are still seen by status calls,
/// only not pushed; this is logged.
pub fn start(runtime: &Arc<Runtime>) {
    let Ok(handle) = tokio::runtime::Handle::try_current() else {
        tracing::warn!("no async runtime: container exits are not watched");
        return;
    };
    let (sender, receiver) = mpsc::unbounded_channel();
    let watcher =
        notify::recommended_watcher(move |event: notify::Result<notify::Event>| match event {
            Ok(event) if !matches!(event.kind, EventKind::Access(_) | EventKind::Remove(_)) => {
                for id in event.paths.iter().filter_map(|p| exited_container(p)) {
                    let _ = sender.send(id);
                }
            }
            Ok(_) => {}
            Err(err) => tracing::warn!("watching container exits: {err}"),
        });
    match watcher {
        Ok(watcher) => {
            *runtime
                .exit_watcher
                .watcher
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(watcher);
        }
        Err(err) => {
            tracing::warn!("container exits are not watched: {err}");
            return;
        }
    }
    for entry in runtime.containers.ids() {
        runtime.watch_exit(&entry);
    }
    handle.spawn(run(Arc::downgrade(runtime), receiver));
}

/// The container ID when `path` is `<bundle of id>/exit.json`.
fn exited_container(path: &Path) -> Option<String> {
    if path.file_name()? != EXIT_FILE {
        return None;
    }
    Some(path.parent()?.file_name()?.to_str()?.to_string())
}

async fn run(runtime: Weak<Runtime>, mut exits: mpsc::UnboundedReceiver<String>) {
    while let Some(id) = exits.recv().await {
        let Some(runtime) = runtime.upgrade() else {
            return;
        };
        runtime.exit_watcher.exited.notify_waiters();
        runtime.on_exit_file(&id).await;
    }
}

impl Runtime {
    /// Starts watching container `id`'s bundle for its exit file (after CreateContainer).
    pub(crate) fn watch_exit(&self, id: &str) {
        let bundle = self.bundle(id);
        if let Some(Err(err)) = self
            .exit_watcher
            .with(|w| w.watch(&bundle, RecursiveMode::NonRecursive))
        {
            tracing::warn!(id, "watching the container's exit: {err}");
        }
    }

    /// Stops watching container `id`'s bundle (after RemoveContainer; a bundle already
    /// gone is fine).
    pub(crate) fn unwatch_exit(&self, id: &str) {
        let bundle = self.bundle(id);
        let _ = self.exit_watcher.with(|w| w.unwatch(&bundle));
    }

    /// The shim wrote container `id`'s exit file: record the exit, publish STOPPED.
    async fn on_exit_file(&self, id: &str) {
        let Some(entry) = self.containers.get(id) else {
            return;
        };
        if self.events.is_starting(id) {
            return;
        }
        let (state, sandbox_id) = {
            let mut container = entry.lock().await;
            if let Err(err) = self.refresh(&mut container) {
                tracing::warn!(id, "recording the container's exit: {err:#}");
            }
            (container.state, container.sandbox_id.clone())
        };
        if state == State::Exited {
            self.emit_stopped(id, &sandbox_id).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_file_paths() {
        assert_eq!(
            exited_container(Path::new("/run/skiff/containers/abc/exit.json")).as_deref(),
            Some("abc")
        );
        assert_eq!(
            exited_container(Path::new("/run/skiff/containers/abc/.exit.json.tmp")),
            None
        );
        assert_eq!(exited_container(Path::new("exit.json")), None);
    }
}
