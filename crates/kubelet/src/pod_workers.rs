//! Pod workers (upstream `pkg/kubelet/pod_workers.go`): one serial task per pod UID.
//! Updates that arrive while a worker is busy are coalesced: the worker only ever sees
//! the latest desired state. Once a pod is being terminated, syncs are ignored.
//!
//! The per-pod work itself sits behind [`PodSyncer`] (upstream's `podSyncer` interface),
//! which the [`Kubelet`] implements; the workers only order and coalesce it.

use std::collections::{HashMap, HashSet};
use std::future::Future;
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

/// The per-pod work the pod workers run (upstream `podSyncer` in
/// `pkg/kubelet/pod_workers.go`). A worker calls one method at a time for its pod, never
/// two for the same pod at once; different pods run concurrently.
pub(crate) trait PodSyncer: Send + Sync + 'static {
    /// Brings the pod to its desired state and publishes its status (upstream
    /// `SyncPod`); returns when the worker should sync it again.
    fn sync_pod(&self, pod: &Pod) -> impl Future<Output = Duration> + Send;

    /// Stops the pod's containers with the grace period `grace_override` (seconds) or
    /// the pod's, and cleans up what it left (upstream `SyncTerminatingPod` followed by
    /// `SyncTerminatedPod`). Returns false when something could not be cleaned up: the
    /// worker retries a few times and reports the pod terminated either way.
    fn sync_terminating_pod(
        &self,
        pod: &Pod,
        grace_override: Option<i64>,
    ) -> impl Future<Output = bool> + Send;

    /// The phase of pod `uid`'s latest status (`Running`, ...), for the pod start
    /// duration metric; `None` before the pod has a status.
    fn pod_phase(&self, uid: &str) -> Option<String>;
}

impl PodSyncer for Kubelet {
    async fn sync_pod(&self, pod: &Pod) -> Duration {
        Kubelet::sync_pod(self, pod).await
    }

    async fn sync_terminating_pod(&self, pod: &Pod, grace_override: Option<i64>) -> bool {
        Kubelet::sync_terminating_pod(self, pod, grace_override).await
    }

    fn pod_phase(&self, uid: &str) -> Option<String> {
        self.status_manager.get_pod_status(uid)?.phase
    }
}

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

/// The pod workers, driven by the SyncLoop; `S` runs the per-pod work (the [`Kubelet`]
/// outside tests).
pub struct PodWorkers<S = Kubelet> {
    syncer: Arc<S>,
    workers: HashMap<String, Worker>,
    results: mpsc::UnboundedSender<WorkerResult>,
    states: PodWorkerStates,
}

impl PodWorkers<Kubelet> {
    /// The kubelet the workers run.
    pub fn kubelet(&self) -> &Arc<Kubelet> {
        &self.syncer
    }
}

// `PodSyncer` stays crate-private: outside the crate only `PodWorkers<Kubelet>` is used.
#[allow(private_bounds)]
impl<S: PodSyncer> PodWorkers<S> {
    /// Workers running `syncer`'s sync functions, reporting to `results` and publishing
    /// which pods they hold in `states`.
    pub fn new(
        syncer: Arc<S>,
        results: mpsc::UnboundedSender<WorkerResult>,
        states: PodWorkerStates,
    ) -> Self {
        Self {
            syncer,
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
            self.syncer.clone(),
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

/// Runs the work of one pod, one unit at a time, until the pod is terminated.
async fn pod_worker_loop<S: PodSyncer>(
    uid: String,
    syncer: Arc<S>,
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
                let retry_after = syncer.sync_pod(&pod).await;
                let m = metrics::metrics();
                m.observe_pod_worker(if synced_once { "sync" } else { "create" }, started);
                synced_once = true;
                if !seen_running && syncer.pod_phase(&uid).as_deref() == Some("Running") {
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
                    if syncer.sync_terminating_pod(&pod, grace_override).await
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

#[cfg(test)]
mod worker_tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use tokio::sync::Semaphore;

    /// One call a worker made, with the pod's resource version (the update's "version").
    #[derive(Debug, Clone, PartialEq, Eq)]
    enum Call {
        Sync(String),
        Terminate(String, Option<i64>),
    }

    /// A syncer whose calls block until the test hands out a permit: the worker is busy
    /// for as long as the test wants. Terminations fail `failing_terminations` times.
    struct FakeSyncer {
        calls: Mutex<Vec<Call>>,
        started: mpsc::UnboundedSender<Call>,
        permits: Semaphore,
        failing_terminations: Mutex<u32>,
    }

    impl FakeSyncer {
        async fn run(&self, call: Call) {
            self.calls
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(call.clone());
            let _ = self.started.send(call);
            if let Ok(permit) = self.permits.acquire().await {
                permit.forget();
            }
        }
    }

    fn version(pod: &Pod) -> String {
        pod.metadata.resource_version.clone().unwrap_or_default()
    }

    impl PodSyncer for FakeSyncer {
        async fn sync_pod(&self, pod: &Pod) -> Duration {
            self.run(Call::Sync(version(pod))).await;
            Duration::from_secs(60)
        }

        async fn sync_terminating_pod(&self, pod: &Pod, grace_override: Option<i64>) -> bool {
            self.run(Call::Terminate(version(pod), grace_override))
                .await;
            let mut failing = self
                .failing_terminations
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if *failing > 0 {
                *failing -= 1;
                return false;
            }
            true
        }

        fn pod_phase(&self, _uid: &str) -> Option<String> {
            None
        }
    }

    fn pod(uid: &str, version: &str) -> Arc<Pod> {
        Arc::new(Pod {
            metadata: ObjectMeta {
                name: Some("web".to_owned()),
                namespace: Some("default".to_owned()),
                uid: Some(uid.to_owned()),
                resource_version: Some(version.to_owned()),
                ..Default::default()
            },
            ..Default::default()
        })
    }

    /// Upstream's worker semantics: updates sent while the worker is busy are coalesced
    /// into the latest; a Sync after a Kill is ignored; Terminated is reported once, even
    /// when termination needs several attempts and more kills arrive.
    #[tokio::test(start_paused = true)]
    async fn a_busy_worker_sees_only_the_latest_update_and_terminates_once() {
        let uid = "pod-workers-coalescing-uid";
        let (started_tx, mut started) = mpsc::unbounded_channel();
        let syncer = Arc::new(FakeSyncer {
            calls: Mutex::new(Vec::new()),
            started: started_tx,
            permits: Semaphore::new(0),
            failing_terminations: Mutex::new(1),
        });
        let (results_tx, mut results) = mpsc::unbounded_channel();
        let states = PodWorkerStates::default();
        let mut workers = PodWorkers::new(syncer.clone(), results_tx, states.clone());

        workers.update_pod(pod(uid, "1"), UpdateType::Sync);
        assert_eq!(started.recv().await, Some(Call::Sync("1".into())));
        // Busy with version 1: versions 2..4 arrive; only 4 may be synced.
        for v in ["2", "3", "4"] {
            workers.update_pod(pod(uid, v), UpdateType::Sync);
        }
        syncer.permits.add_permits(1);
        assert_eq!(started.recv().await, Some(Call::Sync("4".into())));
        // Busy with version 4: a kill, then a sync that must be ignored.
        let kill = UpdateType::Kill {
            grace_override: Some(3),
        };
        workers.update_pod(pod(uid, "k"), kill);
        assert!(workers.is_terminating(uid));
        workers.update_pod(pod(uid, "5"), UpdateType::Sync);
        syncer.permits.add_permits(1);
        assert_eq!(
            started.recv().await,
            Some(Call::Terminate("k".into(), Some(3)))
        );
        // The first attempt fails; the worker retries after its pause.
        syncer.permits.add_permits(1);
        assert_eq!(
            started.recv().await,
            Some(Call::Terminate("k".into(), Some(3)))
        );
        // A second kill while terminating replaces the pending work, not the outcome.
        workers.update_pod(pod(uid, "k2"), kill);
        syncer.permits.add_permits(1);

        let mut reported = Vec::new();
        while let Ok(Some(result)) =
            tokio::time::timeout(Duration::from_secs(30), results.recv()).await
        {
            reported.push(result);
        }
        let synced = WorkerResult::Synced {
            uid: uid.to_owned(),
            retry_after: Duration::from_secs(60),
        };
        assert_eq!(
            reported,
            vec![
                synced.clone(),
                synced,
                WorkerResult::Terminated {
                    uid: uid.to_owned()
                },
            ]
        );
        assert_eq!(
            *syncer.calls.lock().unwrap_or_else(PoisonError::into_inner),
            vec![
                Call::Sync("1".into()),
                Call::Sync("4".into()),
                Call::Terminate("k".into(), Some(3)),
                Call::Terminate("k".into(), Some(3)),
            ],
            "stale updates, the sync after the kill and the second kill must not run"
        );
        assert!(!states.should_pod_content_be_removed(uid));
        workers.forget(uid);
        assert!(states.is_terminated(uid));
        assert!(!workers.is_known(uid));
        workers.shutdown();
    }
}
