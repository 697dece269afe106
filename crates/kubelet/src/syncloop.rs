//! The SyncLoop (upstream `syncLoop` / `syncLoopIteration`): the one place where work
//! is dispatched to pod workers, from config updates, PLEG events, the work queue
//! (periodic resync and expired backoffs) and housekeeping.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::info;

use crate::config::{PodOperation, PodUpdate, SourcesReady};
use crate::pleg::{PodLifecycleEvent, PodLifecycleEventType, RuntimePods};
use crate::pod_manager::PodManager;
use crate::pod_workers::{PodWorkers, UpdateType, WorkerResult};
use crate::static_pod_starts::StaticPodStarts;

/// How often the work queue is checked for pods due to sync (upstream `syncCh`, 1 s).
const SYNC_CHECK_PERIOD: Duration = Duration::from_secs(1);
/// Housekeeping period (upstream `housekeepingPeriod`, 2 s).
const HOUSEKEEPING_PERIOD: Duration = Duration::from_secs(2);
/// Grace period for pods found on the runtime that no source knows (upstream uses 1 s).
const ORPHAN_GRACE_PERIOD: i64 = 1;

/// Channels feeding the SyncLoop.
pub struct SyncLoopInputs {
    /// Pod updates from the pod config.
    pub updates: mpsc::Receiver<PodUpdate>,
    /// Pod lifecycle events from the PLEG.
    pub pleg: mpsc::Receiver<PodLifecycleEvent>,
    /// Completions reported by the pod workers.
    pub results: mpsc::UnboundedReceiver<WorkerResult>,
}

/// The SyncLoop and the state only it touches.
pub struct SyncLoop {
    pod_manager: Arc<PodManager>,
    pod_workers: PodWorkers,
    /// When each pod is next due for a sync (upstream `workQueue`).
    work_queue: HashMap<String, Instant>,
    sources_ready: SourcesReady,
    runtime_pods: RuntimePods,
    static_pod_starts: StaticPodStarts,
}

impl SyncLoop {
    /// A SyncLoop dispatching to `pod_workers`.
    pub fn new(
        pod_manager: Arc<PodManager>,
        pod_workers: PodWorkers,
        sources_ready: SourcesReady,
        runtime_pods: RuntimePods,
    ) -> Self {
        Self {
            pod_manager,
            pod_workers,
            work_queue: HashMap::new(),
            sources_ready,
            runtime_pods,
            static_pod_starts: StaticPodStarts::default(),
        }
    }

    /// Dispatches until `shutdown` completes, then stops the workers, leaving pods running.
    pub async fn run(mut self, mut inputs: SyncLoopInputs, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        let mut sync_ticker = tokio::time::interval(SYNC_CHECK_PERIOD);
        let mut housekeeping = tokio::time::interval(HOUSEKEEPING_PERIOD);
        sync_ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        housekeeping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                Some(update) = inputs.updates.recv() => self.handle_update(update),
                Some(event) = inputs.pleg.recv() => self.handle_pleg_event(&event),
                Some(result) = inputs.results.recv() => self.handle_worker_result(result),
                _ = sync_ticker.tick() => self.sync_due_pods(),
                _ = housekeeping.tick() => {
                    // Read readiness first, then apply every update queued before it was
                    // marked: otherwise their pods would look orphaned.
                    let sources_ready = self.sources_ready.all_ready();
                    while let Ok(update) = inputs.updates.try_recv() {
                        self.handle_update(update);
                    }
                    if sources_ready {
                        self.handle_pod_cleanups();
                    }
                }
            }
        }
        self.pod_workers.shutdown();
        info!("SyncLoop stopped; pods are left running");
    }

    fn handle_update(&mut self, update: PodUpdate) {
        for pod in update.pods {
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            let name = pod.metadata.name.clone().unwrap_or_default();
            match update.op {
                PodOperation::Add | PodOperation::Update => {
                    info!(pod = %name, uid = %uid, op = ?update.op, source = %update.source, "pod update");
                    if let Some(pod) = self.pod_manager.add_or_update(pod) {
                        self.sync_pod(pod);
                    }
                }
                PodOperation::Remove => {
                    info!(pod = %name, uid = %uid, source = %update.source, "pod removed; terminating");
                    self.work_queue.remove(&uid);
                    if !self.pod_workers.is_known(&uid) {
                        // A static pod still waiting for its name never started.
                        self.static_pod_starts.terminated(&uid);
                    }
                    if let Some(pod) = self.pod_manager.remove(&uid) {
                        self.pod_workers.update_pod(
                            pod,
                            UpdateType::Kill {
                                grace_override: None,
                            },
                        );
                    }
                }
            }
        }
    }

    fn handle_pleg_event(&mut self, event: &PodLifecycleEvent) {
        if event.kind == PodLifecycleEventType::ContainerRemoved {
            return;
        }
        if let Some(pod) = self.pod_manager.get(&event.id) {
            self.sync_pod(pod);
        }
    }

    fn handle_worker_result(&mut self, result: WorkerResult) {
        match result {
            WorkerResult::Synced { uid, retry_after } => {
                self.work_queue.insert(uid, Instant::now() + retry_after);
            }
            WorkerResult::Terminated { uid } => {
                self.pod_workers.forget(&uid);
                let next = self.static_pod_starts.terminated(&uid);
                // The same pod may have been added again while it was terminating, and a
                // static pod of the same name may wait for this one.
                for uid in std::iter::once(uid).chain(next) {
                    if let Some(pod) = self.pod_manager.get(&uid) {
                        self.sync_pod(pod);
                    }
                }
            }
        }
    }

    fn sync_due_pods(&mut self) {
        let now = Instant::now();
        let due: Vec<String> = self
            .work_queue
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(uid, _)| uid.clone())
            .collect();
        for uid in due {
            self.work_queue.remove(&uid);
            if let Some(pod) = self.pod_manager.get(&uid) {
                self.sync_pod(pod);
            }
        }
    }

    /// Sends a sync to the pod's worker, unless another static pod of the same full name
    /// still runs: then it waits for that one's termination.
    fn sync_pod(&mut self, pod: Arc<Pod>) {
        if self.static_pod_starts.allow(&pod) {
            self.pod_workers.update_pod(pod, UpdateType::Sync);
        }
    }

    /// Terminates pods that are no longer desired and pods found on the runtime that no
    /// source knows (upstream `HandlePodCleanups`). Only once all sources were seen.
    fn handle_pod_cleanups(&mut self) {
        let desired: HashSet<String> = self
            .pod_manager
            .pods()
            .iter()
            .filter_map(|p| p.metadata.uid.clone())
            .collect();
        for (uid, pod) in self.pod_workers.known_pods() {
            if !desired.contains(&uid) && !self.pod_workers.is_terminating(&uid) {
                self.pod_workers.update_pod(
                    pod,
                    UpdateType::Kill {
                        grace_override: None,
                    },
                );
            }
        }
        let runtime_pods = self
            .runtime_pods
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let on_runtime: HashSet<String> = runtime_pods.keys().cloned().collect();
        for (uid, runtime_pod) in runtime_pods {
            if desired.contains(&uid) || self.pod_workers.is_known(&uid) {
                continue;
            }
            info!(pod = %runtime_pod.name, uid = %uid, "found pod on the runtime that no source knows; removing it");
            let pod = Pod {
                metadata: ObjectMeta {
                    uid: Some(uid),
                    name: Some(runtime_pod.name),
                    namespace: Some(runtime_pod.namespace),
                    ..Default::default()
                },
                ..Default::default()
            };
            self.pod_workers.update_pod(
                Arc::new(pod),
                UpdateType::Kill {
                    grace_override: Some(ORPHAN_GRACE_PERIOD),
                },
            );
        }
        // Upstream `cleanupOrphanedPodDirs`: directories of pods that no source, worker
        // or runtime knows any more.
        let workers = &self.pod_workers;
        workers
            .kubelet()
            .volume_manager
            .cleanup_orphaned_pod_dirs(|uid| {
                desired.contains(uid) || workers.is_known(uid) || on_runtime.contains(uid)
            });
    }
}
