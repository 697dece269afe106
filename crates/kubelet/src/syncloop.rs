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

use crate::cm::ContainerManager;
use crate::config::{PodOperation, PodUpdate, SourcesReady};
use crate::eviction::EvictedPods;
use crate::lifecycle::PodAdmission;
use crate::lifecycle::admission::sort_by_creation_time;
use crate::pleg::{PodLifecycleEvent, PodLifecycleEventType, RuntimePods};
use crate::pod_manager::PodManager;
use crate::pod_workers::{PodWorkers, UpdateType, WorkerResult};
use crate::prober::results::{ProbeResult, ProbeUpdate, ProbeUpdates};
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
    /// Liveness, readiness and startup result changes.
    pub probes: ProbeUpdates,
    /// Pods the eviction manager evicts.
    pub evictions: mpsc::Receiver<Arc<Pod>>,
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
    /// Pods with a `deletionTimestamp` whose termination was started (until removed).
    deleted: HashSet<String>,
    evicted: Arc<EvictedPods>,
    container_manager: Arc<ContainerManager>,
    /// Pod admission (upstream `canAdmitPod`); without it every pod is admitted.
    admission: Option<PodAdmission>,
}

impl SyncLoop {
    /// A SyncLoop dispatching to `pod_workers`; `evicted` is forgotten for deleted pods,
    /// and housekeeping removes orphaned pod cgroups through `container_manager`.
    pub fn new(
        pod_manager: Arc<PodManager>,
        pod_workers: PodWorkers,
        sources_ready: SourcesReady,
        runtime_pods: RuntimePods,
        evicted: Arc<EvictedPods>,
        container_manager: Arc<ContainerManager>,
    ) -> Self {
        Self {
            pod_manager,
            pod_workers,
            work_queue: HashMap::new(),
            sources_ready,
            runtime_pods,
            static_pod_starts: StaticPodStarts::default(),
            deleted: HashSet::new(),
            evicted,
            container_manager,
            admission: None,
        }
    }

    /// Admits added pods through `admission` (see [`PodAdmission::handle_pod_addition`]).
    pub fn with_admission(mut self, admission: PodAdmission) -> Self {
        self.admission = Some(admission);
        self
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
                // Upstream: only a liveness failure needs a sync; any readiness or
                // startup change updates the status.
                Some(update) = inputs.probes.liveness.recv() => {
                    if update.result == ProbeResult::Failure {
                        self.handle_probe_sync(&update);
                    }
                }
                Some(update) = inputs.probes.readiness.recv() => self.handle_probe_sync(&update),
                Some(update) = inputs.probes.startup.recv() => self.handle_probe_sync(&update),
                Some(pod) = inputs.evictions.recv() => self.handle_eviction(pod),
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
                        self.pod_workers.mark_synced();
                    }
                }
            }
        }
        self.pod_workers.shutdown();
        info!("SyncLoop stopped; pods are left running");
    }

    /// Applies one config update (upstream `HandlePodAdditions`, `HandlePodUpdates`,
    /// `HandlePodRemoves`, `HandlePodReconcile`; DELETE is a graceful termination).
    fn handle_update(&mut self, mut update: PodUpdate) {
        if update.op == PodOperation::Add {
            sort_by_creation_time(&mut update.pods);
        }
        for pod in update.pods {
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            let name = pod.metadata.name.clone().unwrap_or_default();
            match update.op {
                PodOperation::Add | PodOperation::Update | PodOperation::Delete => {
                    info!(pod = %name, uid = %uid, op = ?update.op, source = %update.source, "pod update");
                    if let Some(pod) = self.pod_manager.add_or_update(pod) {
                        if update.op == PodOperation::Add
                            && let Some(admission) = self.admission.as_mut()
                            && !admission.handle_pod_addition(
                                &pod,
                                &self.pod_manager,
                                &self.pod_workers,
                            )
                        {
                            continue;
                        }
                        self.sync_pod(pod);
                    }
                }
                PodOperation::Reconcile => {
                    // Status only: the stored pod changes, its containers do not.
                    self.pod_manager.add_or_update(pod);
                }
                PodOperation::Remove => {
                    info!(pod = %name, uid = %uid, source = %update.source, "pod removed; terminating");
                    self.work_queue.remove(&uid);
                    let already_deleted = self.deleted.remove(&uid);
                    self.evicted.forget(&uid);
                    self.pod_workers.states().remove_terminated(&uid);
                    if let Some(admission) = self.admission.as_mut() {
                        admission.forget(&uid);
                    }
                    if !self.pod_workers.is_known(&uid) {
                        // A static pod still waiting for its name never started.
                        self.static_pod_starts.terminated(&uid);
                    }
                    if let Some(pod) = self.pod_manager.remove(&uid)
                        && !already_deleted
                    {
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

    /// Terminates a pod the eviction manager evicts, with no grace period (hard
    /// thresholds; the runtime still gives the minimum of 2 s).
    fn handle_eviction(&mut self, pod: Arc<Pod>) {
        if let Some(uid) = pod.metadata.uid.as_deref() {
            self.work_queue.remove(uid);
        }
        self.pod_workers.update_pod(
            pod,
            UpdateType::Kill {
                grace_override: Some(0),
            },
        );
    }

    fn handle_pleg_event(&mut self, event: &PodLifecycleEvent) {
        if event.kind == PodLifecycleEventType::ContainerRemoved {
            return;
        }
        if let Some(pod) = self.pod_manager.get(&event.id) {
            self.sync_pod(pod);
        }
    }

    /// Syncs the pod of a changed probe result (upstream `handleProbeSync`).
    fn handle_probe_sync(&mut self, update: &ProbeUpdate) {
        if let Some(pod) = self.pod_manager.get(&update.pod_uid) {
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
        // A pod rejected at admission is never started (upstream: it is Failed).
        let uid = pod.metadata.uid.as_deref().unwrap_or("");
        if self.admission.as_ref().is_some_and(|a| a.is_rejected(uid)) {
            return;
        }
        if pod.metadata.deletion_timestamp.is_some() {
            self.terminate_deleted_pod(pod);
            return;
        }
        if self.static_pod_starts.allow(&pod) {
            self.pod_workers.update_pod(pod, UpdateType::Sync);
        }
    }

    /// Terminates a pod that has a `deletionTimestamp`, once, with its
    /// `deletionGracePeriodSeconds` (else its `terminationGracePeriodSeconds`); it stays
    /// known until its source removes it, and is never started again.
    fn terminate_deleted_pod(&mut self, pod: Arc<Pod>) {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        if !self.deleted.insert(uid.clone()) {
            return;
        }
        info!(pod = pod.metadata.name.as_deref().unwrap_or(""), uid = %uid, "pod deleted; terminating it gracefully");
        self.work_queue.remove(&uid);
        if !self.pod_workers.is_known(&uid) {
            self.static_pod_starts.terminated(&uid);
        }
        let grace_override = pod.metadata.deletion_grace_period_seconds;
        self.pod_workers
            .update_pod(pod, UpdateType::Kill { grace_override });
    }

    /// Terminates pods that are no longer desired and pods found on the runtime that no
    /// source knows, and removes the cgroups of pods neither desired nor known to a pod
    /// worker (upstream `HandlePodCleanups`). Only once all sources were seen.
    fn handle_pod_cleanups(&mut self) {
        let desired: HashSet<String> = self
            .pod_manager
            .pods()
            .iter()
            .filter_map(|p| p.metadata.uid.clone())
            .collect();
        let keep: HashSet<String> = desired
            .iter()
            .cloned()
            .chain(
                self.pod_workers
                    .known_pods()
                    .into_iter()
                    .map(|(uid, _)| uid),
            )
            .collect();
        self.container_manager.cleanup_orphaned_pod_cgroups(&keep);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cri::fake::FakeCri;
    use crate::kubelet::Kubelet;
    use crate::kuberuntime::{KubeGenericRuntimeManager, RuntimeManagerConfig};
    use crate::pod_workers::PodWorkerStates;
    use k8s_openapi::api::core::v1::{Container, PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn pod(grace: i64) -> Pod {
        Pod {
            metadata: ObjectMeta {
                uid: Some("u1".into()),
                name: Some("web-n".into()),
                namespace: Some("default".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                termination_grace_period_seconds: Some(grace),
                containers: vec![Container {
                    name: "c".into(),
                    image: Some("busybox:1".into()),
                    image_pull_policy: Some("IfNotPresent".into()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: None,
        }
    }

    fn update(op: PodOperation, pod: Pod) -> PodUpdate {
        PodUpdate {
            op,
            pods: vec![pod],
            source: "http".into(),
        }
    }

    fn count(cri: &FakeCri, prefix: &str) -> usize {
        cri.calls().iter().filter(|c| c.starts_with(prefix)).count()
    }

    /// Runs worker results into the loop until `done` holds (10 s at most).
    async fn drive(
        sync_loop: &mut SyncLoop,
        results: &mut mpsc::UnboundedReceiver<WorkerResult>,
        mut done: impl FnMut(&SyncLoop) -> bool,
    ) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done(sync_loop) {
            match tokio::time::timeout_at(deadline, results.recv()).await {
                Ok(Some(result)) => sync_loop.handle_worker_result(result),
                _ => panic!("timed out"),
            }
        }
    }

    #[tokio::test]
    async fn reconcile_updates_the_pod_and_delete_terminates_it_once() {
        let dir = tempfile::tempdir().unwrap();
        let cri = Arc::new(FakeCri::default());
        let runtime = KubeGenericRuntimeManager::new(
            cri.clone(),
            RuntimeManagerConfig {
                pod_logs_dir: dir.path().to_owned(),
                cgroup_root: "/skiff-unit-test-nonexistent".into(),
                node_ip: "10.0.0.2".into(),
                resolv_conf: "/etc/resolv.conf".into(),
                cluster_dns: Vec::new(),
                cluster_domain: String::new(),
                memory_capacity: 1 << 30,
                pod_dirs: crate::pod_dirs::PodDirs::new(dir.path().join("root")),
                allocatable: Default::default(),
            },
        );
        let (probe_results, _probe_updates) = crate::prober::results::ProbeResults::new();
        let kubelet = Arc::new(Kubelet {
            runtime: Arc::new(runtime),
            status_manager: Default::default(),
            reasons: Default::default(),
            node_ip: "10.0.0.2".into(),
            runtime_name: "fake".into(),
            sync_frequency: Duration::from_secs(60),
            container_manager: Arc::new(ContainerManager::disabled()),
            evictions: Default::default(),
            probe_manager: crate::prober::ProbeManager::new(
                Arc::new(crate::prober::Prober::new(cri.clone())),
                Default::default(),
                probe_results.clone(),
            ),
            probe_results,
            volume_manager: Arc::new(crate::volume::VolumeManager::new(
                crate::pod_dirs::PodDirs::new(dir.path().join("root")),
                crate::volume::probe_volume_plugins(Default::default()),
            )),
        });
        let (results_tx, mut results) = mpsc::unbounded_channel();
        let pod_manager = Arc::new(PodManager::default());
        let mut sync_loop = SyncLoop::new(
            pod_manager.clone(),
            PodWorkers::new(kubelet.clone(), results_tx, PodWorkerStates::default()),
            SourcesReady::default(),
            RuntimePods::default(),
            kubelet.evictions.clone(),
            kubelet.container_manager.clone(),
        );

        sync_loop.handle_update(update(PodOperation::Add, pod(30)));
        drive(&mut sync_loop, &mut results, |l| {
            l.work_queue.contains_key("u1")
        })
        .await;
        assert_eq!(count(&cri, "StartContainer"), 1);

        let mut reconciled = pod(30);
        reconciled.status = Some(PodStatus {
            message: Some("from the source".into()),
            ..Default::default()
        });
        sync_loop.handle_update(update(PodOperation::Reconcile, reconciled.clone()));
        let stored = pod_manager.get("u1").map(|p| p.status.clone());
        assert_eq!(stored, Some(reconciled.status.clone()));

        let mut deleted = reconciled;
        deleted.metadata.deletion_timestamp = Some(Time(Default::default()));
        deleted.metadata.deletion_grace_period_seconds = Some(7);
        sync_loop.handle_update(update(PodOperation::Delete, deleted.clone()));
        drive(&mut sync_loop, &mut results, |l| {
            !l.pod_workers.is_known("u1")
        })
        .await;
        assert_eq!(cri.sandbox_count(), 0);
        assert_eq!(count(&cri, "StopContainer:7"), 1, "{:?}", cri.calls());
        assert!(
            pod_manager.get("u1").is_some(),
            "kept until its source removes it"
        );

        // Later events for the deleted pod never start it again.
        let calls = cri.calls().len();
        sync_loop.handle_update(update(PodOperation::Delete, deleted.clone()));
        sync_loop.sync_pod(Arc::new(deleted.clone()));
        assert!(!sync_loop.pod_workers.is_known("u1"));
        assert_eq!(cri.calls().len(), calls);
        assert_eq!(count(&cri, "StartContainer"), 1);

        sync_loop.handle_update(update(PodOperation::Remove, deleted));
        assert!(pod_manager.get("u1").is_none());
        assert!(
            !sync_loop.pod_workers.is_known("u1"),
            "nothing left to kill"
        );
        assert!(sync_loop.deleted.is_empty());
    }
}
