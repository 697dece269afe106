//! Pod workers (upstream `pkg/kubelet/pod_workers.go`): one serial task per pod UID.
//! Updates that arrive while a worker is busy are coalesced: the worker only ever sees
//! the latest desired state. Once a pod is being terminated, syncs are ignored.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::kubelet::Kubelet;
use crate::metrics;

/// Attempts to clean up a terminated pod before giving up until housekeeping retries.
const TERMINATE_ATTEMPTS: u32 = 5;
/// Pause between termination attempts.
const TERMINATE_RETRY: Duration = Duration::from_secs(2);

/// What a pod worker should do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateType {
    /// Create or update the pod (SyncPod).
    Sync,
    /// Stop and remove the pod (SyncTerminatingPod), optionally overriding the grace period.
    Kill {
        /// Grace period in seconds instead of the pod's.
        grace_override: Option<i64>,
    },
}

#[derive(Clone)]
struct PodWork {
    pod: Arc<Pod>,
    update: UpdateType,
}

/// Reported to the SyncLoop when a worker finishes a unit of work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkerResult {
    /// A sync finished; sync again after `retry_after`.
    Synced {
        /// Pod UID.
        uid: String,
        /// When to sync again.
        retry_after: Duration,
    },
    /// The pod was terminated and its worker has exited.
    Terminated {
        /// Pod UID.
        uid: String,
    },
}

struct Worker {
    work: watch::Sender<PodWork>,
    terminating: bool,
    task: JoinHandle<()>,
}

/// What the pod workers hold, for readers outside the SyncLoop (the container GC): upstream's
/// `podWorkers.ShouldPodContentBeRemoved`.
#[derive(Clone, Default)]
pub struct PodWorkerStates(Arc<Mutex<WorkerStates>>);

#[derive(Default)]
struct WorkerStates {
    /// Set by the SyncLoop's first housekeeping with all sources ready, after it applied
    /// every update queued before (upstream `podsSynced`). Until then a pod read from a
    /// source may still be on its way to the workers.
    synced: bool,
    /// Pods with a worker: running, or terminating and not yet forgotten.
    workers: HashSet<String>,
    /// Pods whose termination finished and that have no worker since (until the SyncLoop
    /// drops them with [`PodWorkerStates::remove_terminated`]).
    terminated: HashSet<String>,
}

impl PodWorkerStates {
    fn lock(&self) -> std::sync::MutexGuard<'_, WorkerStates> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// True when pod `uid` may lose what it left on disk (log directories, dead containers):
    /// the workers were synced with the sources and no worker has the pod, i.e. it is not
    /// running and its termination has finished.
    pub fn should_pod_content_be_removed(&self, uid: &str) -> bool {
        let states = self.lock();
        states.synced && !states.workers.contains(uid)
    }

    /// True when pod `uid`'s termination finished: its containers are stopped and it has
    /// no worker (upstream `podWorkers.IsPodTerminationFinished`).
    pub fn is_terminated(&self, uid: &str) -> bool {
        self.lock().terminated.contains(uid)
    }

    /// Forgets that pod `uid` terminated (it left the kubelet).
    pub fn remove_terminated(&self, uid: &str) {
        self.lock().terminated.remove(uid);
    }

    /// Marks the workers synced with the sources' initial pods.
    pub(crate) fn mark_synced(&self) {
        self.lock().synced = true;
    }
}

/// The pod workers, driven by the SyncLoop.
pub struct PodWorkers {
    kubelet: Arc<Kubelet>,
    workers: HashMap<String, Worker>,
    results: mpsc::UnboundedSender<WorkerResult>,
    states: PodWorkerStates,
}

impl PodWorkers {
    /// Workers running `kubelet`'s sync functions, reporting to `results` and publishing
    /// which pods they hold in `states`.
    pub fn new(
        kubelet: Arc<Kubelet>,
        results: mpsc::UnboundedSender<WorkerResult>,
        states: PodWorkerStates,
    ) -> Self {
        Self {
            kubelet,
            workers: HashMap::new(),
            results,
            states,
        }
    }

    /// Marks the workers synced with the sources' initial pods (see [`PodWorkerStates`]).
    pub fn mark_synced(&self) {
        self.states.mark_synced();
    }

    /// Hands `update` for `pod` to its worker, starting one if needed. A pending update
    /// not yet picked up is replaced; a Sync for a terminating pod is ignored.
    pub fn update_pod(&mut self, pod: Arc<Pod>, update: UpdateType) {
        let Some(uid) = pod.metadata.uid.clone() else {
            return;
        };
        if let Some(worker) = self.workers.get_mut(&uid) {
            if worker.terminating && update == UpdateType::Sync {
                return;
            }
            worker.terminating |= matches!(update, UpdateType::Kill { .. });
            worker.work.send_replace(PodWork { pod, update });
            return;
        }
        let (tx, rx) = watch::channel(PodWork { pod, update });
        let task = tokio::spawn(pod_worker_loop(
            uid.clone(),
            self.kubelet.clone(),
            rx,
            self.results.clone(),
        ));
        let terminating = matches!(update, UpdateType::Kill { .. });
        {
            let mut states = self.states.lock();
            states.workers.insert(uid.clone());
            states.terminated.remove(&uid);
        }
        self.workers.insert(
            uid,
            Worker {
                work: tx,
                terminating,
                task,
            },
        );
    }

    /// True when a worker exists for `uid`.
    pub fn is_known(&self, uid: &str) -> bool {
        self.workers.contains_key(uid)
    }

    /// The kubelet the workers run.
    pub fn kubelet(&self) -> &Arc<Kubelet> {
        &self.kubelet
    }

    /// True when pod `uid` is being terminated.
    pub fn is_terminating(&self, uid: &str) -> bool {
        self.workers.get(uid).is_some_and(|w| w.terminating)
    }

    /// UIDs and latest pods of all workers.
    pub fn known_pods(&self) -> Vec<(String, Arc<Pod>)> {
        self.workers
            .iter()
            .map(|(uid, w)| (uid.clone(), w.work.borrow().pod.clone()))
            .collect()
    }

    /// Drops the worker of a terminated pod.
    pub fn forget(&mut self, uid: &str) {
        self.workers.remove(uid);
        let mut states = self.states.lock();
        states.workers.remove(uid);
        states.terminated.insert(uid.to_owned());
    }

    /// The states the workers publish.
    pub fn states(&self) -> &PodWorkerStates {
        &self.states
    }

    /// Stops all workers without touching their pods.
    pub fn shutdown(&mut self) {
        for (_, worker) in self.workers.drain() {
            worker.task.abort();
        }
    }
}

/// The phase of the pod's latest status.
fn pod_phase(kubelet: &Kubelet, uid: &str) -> Option<String> {
    kubelet.status_manager.get_pod_status(uid)?.phase
}

/// Runs the work of one pod, one unit at a time, until the pod is terminated.
async fn pod_worker_loop(
    uid: String,
    kubelet: Arc<Kubelet>,
    mut work: watch::Receiver<PodWork>,
    results: mpsc::UnboundedSender<WorkerResult>,
) {
    work.mark_changed();
    let first_seen = Instant::now();
    let mut seen_running = false;
    let mut synced_once = false;
    while work.changed().await.is_ok() {
        let PodWork { pod, update } = work.borrow_and_update().clone();
        match update {
            UpdateType::Sync => {
                let started = Instant::now();
                let retry_after = kubelet.sync_pod(&pod).await;
                let m = metrics::metrics();
                m.observe_pod_worker(if synced_once { "sync" } else { "create" }, started);
                synced_once = true;
                if !seen_running && pod_phase(&kubelet, &uid).as_deref() == Some("Running") {
                    seen_running = true;
                    m.pod_start_duration
                        .observe(first_seen.elapsed().as_secs_f64());
                }
                let _ = results.send(WorkerResult::Synced {
                    uid: uid.clone(),
                    retry_after,
                });
            }
            UpdateType::Kill { grace_override } => {
                let started = Instant::now();
                for attempt in 1..=TERMINATE_ATTEMPTS {
                    if kubelet.sync_terminating_pod(&pod, grace_override).await
                        || attempt == TERMINATE_ATTEMPTS
                    {
                        break;
                    }
                    tokio::time::sleep(TERMINATE_RETRY).await;
                }
                metrics::metrics().observe_pod_worker("kill", started);
                let _ = results.send(WorkerResult::Terminated { uid });
                return;
            }
        }
    }
}

#[cfg(test)]
mod states_tests {
    use super::*;

    #[test]
    fn a_pod_keeps_its_content_while_a_worker_holds_it() {
        let states = PodWorkerStates::default();
        assert!(
            !states.should_pod_content_be_removed("u1"),
            "before the sync"
        );
        states.mark_synced();
        states.lock().workers.insert("u1".to_owned());
        assert!(
            !states.should_pod_content_be_removed("u1"),
            "still terminating"
        );
        assert!(states.should_pod_content_be_removed("u2"));
        states.lock().workers.remove("u1");
        assert!(states.should_pod_content_be_removed("u1"));
    }
}
