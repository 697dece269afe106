//! The probe manager (upstream `prober_manager.go`): one [`Worker`] per pod, container
//! and probe type, started when the pod is synced and stopped when it terminates.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

use super::ProbeType;
use super::probe::ProbeRunner;
use super::results::{ProbeResults, ResultsManager};
use super::worker::{ProbeTiming, Worker};
use crate::status::StatusManager;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct WorkerKey {
    pod_uid: String,
    container: String,
    probe_type: ProbeType,
}

/// A running worker: dropping it stops the worker.
struct WorkerHandle {
    _stop: oneshot::Sender<()>,
    trigger: Arc<Notify>,
}

/// Runs the probe workers of all pods.
pub struct ProbeManager {
    results: ProbeResults,
    status_manager: Arc<StatusManager>,
    prober: Arc<dyn ProbeRunner>,
    workers: Mutex<HashMap<WorkerKey, WorkerHandle>>,
    /// When the manager was created: workers started within one period of it spread
    /// their first probe over the period (upstream's jitter after a kubelet restart).
    start: Instant,
}

impl ProbeManager {
    /// A manager probing with `prober`, reading pod statuses from `status_manager` and
    /// writing `results`.
    pub fn new(
        prober: Arc<dyn ProbeRunner>,
        status_manager: Arc<StatusManager>,
        results: ProbeResults,
    ) -> Self {
        Self {
            results,
            status_manager,
            prober,
            workers: Mutex::new(HashMap::new()),
            start: Instant::now(),
        }
    }

    /// Starts a worker for each probe of the pod's containers (and sidecar init
    /// containers) that has none yet (upstream `AddPod`), and asks the existing readiness
    /// workers to probe now if their container is not ready yet (upstream
    /// `UpdatePodStatus`'s manual trigger). Called after every sync of the pod.
    pub fn add_pod(&self, pod: &Pod) {
        let Some(uid) = pod.metadata.uid.as_deref().filter(|u| !u.is_empty()) else {
            return;
        };
        let Some(spec) = pod.spec.as_ref() else {
            return;
        };
        let sidecars = spec
            .init_containers
            .iter()
            .flatten()
            .filter(|c| c.restart_policy.as_deref() == Some("Always"));
        let mut shared_pod: Option<Arc<Pod>> = None;
        let mut workers = self.lock();
        for container in spec.containers.iter().chain(sidecars) {
            for probe_type in ProbeType::ALL {
                let Some(probe) = probe_type.spec(container) else {
                    continue;
                };
                let key = WorkerKey {
                    pod_uid: uid.to_owned(),
                    container: container.name.clone(),
                    probe_type,
                };
                match workers.entry(key) {
                    Entry::Occupied(existing) => {
                        if probe_type == ProbeType::Readiness {
                            existing.get().trigger.notify_one();
                        }
                    }
                    Entry::Vacant(slot) => {
                        let pod = shared_pod.get_or_insert_with(|| Arc::new(pod.clone()));
                        let jitter = self.jitter(ProbeTiming::of(probe).period);
                        slot.insert(self.start_worker(probe_type, pod.clone(), container, jitter));
                    }
                }
            }
        }
    }

    /// Stops all workers of pod `uid` (upstream `RemovePod`); each removes its result.
    pub fn remove_pod(&self, uid: &str) {
        self.lock().retain(|key, _| key.pod_uid != uid);
    }

    fn start_worker(
        &self,
        probe_type: ProbeType,
        pod: Arc<Pod>,
        container: &Container,
        jitter: Duration,
    ) -> WorkerHandle {
        let (stop_tx, stop_rx) = oneshot::channel();
        let trigger = Arc::new(Notify::new());
        let worker = Worker::new(
            probe_type,
            pod,
            container.clone(),
            self.results_of(probe_type).clone(),
            self.status_manager.clone(),
            self.prober.clone(),
        );
        tokio::spawn(worker.run(jitter, stop_rx, trigger.clone()));
        WorkerHandle {
            _stop: stop_tx,
            trigger,
        }
    }

    fn results_of(&self, probe_type: ProbeType) -> &Arc<ResultsManager> {
        match probe_type {
            ProbeType::Liveness => &self.results.liveness,
            ProbeType::Readiness => &self.results.readiness,
            ProbeType::Startup => &self.results.startup,
        }
    }

    /// A random part of `period` while the manager is younger than `period`, else zero:
    /// workers started together right after a kubelet (re)start do not probe in lockstep.
    fn jitter(&self, period: Duration) -> Duration {
        if self.start.elapsed() >= period {
            return Duration::ZERO;
        }
        let random = RandomState::new().hash_one(self.start.elapsed());
        period.mul_f64(random as f64 / u64::MAX as f64)
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<WorkerKey, WorkerHandle>> {
        self.workers.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
impl ProbeManager {
    /// Number of workers (running or finished but not removed).
    pub(crate) fn worker_count(&self) -> usize {
        self.lock().len()
    }
}
