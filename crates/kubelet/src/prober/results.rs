//! Probe results (upstream `pkg/kubelet/prober/results`): the latest result per container
//! ID, and a stream of changes that the SyncLoop turns into pod syncs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::mpsc;

use super::managers::ResultsManagers;

/// Outcome of a probe (upstream `results.Result`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeResult {
    /// The probe succeeded `successThreshold` times in a row.
    Success,
    /// The probe failed `failureThreshold` times in a row.
    Failure,
    /// Not known yet (initial delay, or the container just started).
    Unknown,
}

/// A changed result, sent to the SyncLoop (upstream `results.Update`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeUpdate {
    /// Runtime container ID.
    pub container_id: String,
    /// The new result.
    pub result: ProbeResult,
    /// UID of the container's pod.
    pub pod_uid: String,
}

/// Latest results of one probe type, by runtime container ID.
pub struct ResultsManager {
    results: Mutex<HashMap<String, ProbeResult>>,
    updates: mpsc::UnboundedSender<ProbeUpdate>,
}

impl ResultsManager {
    /// A manager that reports each change on the returned receiver.
    pub fn new() -> (Self, mpsc::UnboundedReceiver<ProbeUpdate>) {
        let (updates, rx) = mpsc::unbounded_channel();
        let manager = Self {
            results: Mutex::new(HashMap::new()),
            updates,
        };
        (manager, rx)
    }

    /// The latest result of container `container_id`, `None` if it was never probed.
    pub fn get(&self, container_id: &str) -> Option<ProbeResult> {
        self.lock().get(container_id).copied()
    }

    /// Records `result`; reports an update when it differs from the previous one.
    pub fn set(&self, container_id: &str, result: ProbeResult, pod_uid: &str) {
        let previous = self.lock().insert(container_id.to_owned(), result);
        if previous != Some(result) {
            // The SyncLoop is gone only at shutdown; nothing is waiting for the update then.
            let _ = self.updates.send(ProbeUpdate {
                container_id: container_id.to_owned(),
                result,
                pod_uid: pod_uid.to_owned(),
            });
        }
    }

    /// Forgets container `container_id` (its probe worker stopped).
    pub fn remove(&self, container_id: &str) {
        self.lock().remove(container_id);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, ProbeResult>> {
        self.results.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The three results managers of a kubelet (upstream `livenessManager`,
/// `readinessManager`, `startupManager`), shared by the probe workers that write them and
/// the runtime manager, status generation and SyncLoop that read them.
#[derive(Clone)]
pub struct ProbeResults {
    /// Liveness results: a Failure makes SyncPod restart the container.
    pub liveness: Arc<ResultsManager>,
    /// Readiness results: `ready` and the Ready condition.
    pub readiness: Arc<ResultsManager>,
    /// Startup results: `started`; a Failure restarts the container.
    pub startup: Arc<ResultsManager>,
}

/// The change streams of [`ProbeResults`], read by the SyncLoop (upstream
/// `syncLoopIteration`'s `livenessManager.Updates()` etc.).
pub struct ProbeUpdates {
    /// Liveness changes.
    pub liveness: mpsc::UnboundedReceiver<ProbeUpdate>,
    /// Readiness changes.
    pub readiness: mpsc::UnboundedReceiver<ProbeUpdate>,
    /// Startup changes.
    pub startup: mpsc::UnboundedReceiver<ProbeUpdate>,
}

impl ProbeResults {
    /// The managers as SyncPod and the status generation read them.
    pub fn managers(&self) -> ResultsManagers<'_> {
        ResultsManagers {
            liveness: Some(&self.liveness),
            readiness: Some(&self.readiness),
            startup: Some(&self.startup),
        }
    }

    /// Three empty managers and their change streams.
    pub fn new() -> (Self, ProbeUpdates) {
        let (liveness, liveness_rx) = ResultsManager::new();
        let (readiness, readiness_rx) = ResultsManager::new();
        let (startup, startup_rx) = ResultsManager::new();
        let results = Self {
            liveness: Arc::new(liveness),
            readiness: Arc::new(readiness),
            startup: Arc::new(startup),
        };
        let updates = ProbeUpdates {
            liveness: liveness_rx,
            readiness: readiness_rx,
            startup: startup_rx,
        };
        (results, updates)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_changes_are_reported() {
        let (manager, mut rx) = ResultsManager::new();
        assert_eq!(manager.get("c1"), None);
        manager.set("c1", ProbeResult::Failure, "pod");
        manager.set("c1", ProbeResult::Failure, "pod");
        manager.set("c1", ProbeResult::Success, "pod");
        assert_eq!(manager.get("c1"), Some(ProbeResult::Success));
        let results: Vec<_> = std::iter::from_fn(|| rx.try_recv().ok())
            .map(|u| u.result)
            .collect();
        assert_eq!(results, [ProbeResult::Failure, ProbeResult::Success]);
        manager.remove("c1");
        assert_eq!(manager.get("c1"), None);
    }
}
