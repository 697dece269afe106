//! The eviction loop (upstream `managerImpl.synchronize`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::{info, warn};

use super::EvictedPods;
use super::rank::{eviction_message, rank};
use super::signals::{Observations, SignalSources, observe};
use super::threshold::{Signal, Threshold};
use super::usage::pod_usages;
use crate::cm::ContainerManager;
use crate::cm::container_manager::ActivePods;
use crate::cri::Cri;
use crate::images::gc::ImageGcManager;
use crate::kuberuntime::gc::ContainerGc;
use crate::pod_dirs::PodDirs;

/// Pods at or above this priority are critical and never evicted (upstream
/// `scheduling.SystemCriticalPriority`).
const SYSTEM_CRITICAL_PRIORITY: i32 = 2_000_000_000;
/// How long to wait for an evicted pod's termination (upstream `podCleanupTimeout`).
const POD_CLEANUP_TIMEOUT: Duration = Duration::from_secs(30);
/// How often to check for it (upstream `podCleanupPollFreq`).
const POD_CLEANUP_POLL: Duration = Duration::from_secs(1);

/// Settings of the eviction manager.
#[derive(Debug, Clone)]
pub struct EvictionManagerConfig {
    /// Hard thresholds (`evictionHard`).
    pub thresholds: Vec<Threshold>,
    /// Period of the loop (`evictionMonitoringPeriod`, 10 s).
    pub monitoring_period: Duration,
    /// How long a pressure condition outlives its signal
    /// (`evictionPressureTransitionPeriod`, 5 min).
    pub pressure_transition_period: Duration,
    /// The kubelet root directory (nodefs, pod volumes).
    pub root_dir: PathBuf,
    /// The pod log root (`/var/log/pods`).
    pub pod_logs_dir: PathBuf,
}

/// The node conditions the eviction manager reports (for the node status).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeConditions {
    /// `MemoryPressure`.
    pub memory_pressure: bool,
    /// `DiskPressure`.
    pub disk_pressure: bool,
}

/// What the eviction manager drives.
pub struct EvictionManager {
    config: EvictionManagerConfig,
    cri: Arc<dyn Cri>,
    container_manager: Arc<ContainerManager>,
    image_gc: Arc<ImageGcManager>,
    container_gc: Arc<ContainerGc>,
    evicted: Arc<EvictedPods>,
    active_pods: ActivePods,
    kill: mpsc::Sender<Arc<Pod>>,
    /// When each node condition's signal was last seen met.
    last_observed: Mutex<HashMap<&'static str, Instant>>,
}

impl EvictionManager {
    /// A manager evicting among `active_pods` by sending them to `kill` (the SyncLoop
    /// terminates them) after recording the eviction in `evicted`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        config: EvictionManagerConfig,
        cri: Arc<dyn Cri>,
        container_manager: Arc<ContainerManager>,
        image_gc: Arc<ImageGcManager>,
        container_gc: Arc<ContainerGc>,
        evicted: Arc<EvictedPods>,
        active_pods: ActivePods,
        kill: mpsc::Sender<Arc<Pod>>,
    ) -> Self {
        Self {
            config,
            cri,
            container_manager,
            image_gc,
            container_gc,
            evicted,
            active_pods,
            kill,
            last_observed: Mutex::new(HashMap::new()),
        }
    }

    /// Runs [`EvictionManager::synchronize`] every monitoring period, forever; after an
    /// eviction it waits (up to 30 s) for the pod's termination first.
    pub async fn run(self: Arc<Self>) {
        let mut ticker = tokio::time::interval(self.config.monitoring_period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            if let Some(uid) = self.synchronize().await {
                let deadline = Instant::now() + POD_CLEANUP_TIMEOUT;
                while self.evicted.is_pending(&uid) && Instant::now() < deadline {
                    tokio::time::sleep(POD_CLEANUP_POLL).await;
                }
            }
        }
    }

    /// The pressure conditions: set while a threshold of their signals is met and for
    /// the pressure transition period after. API for the node status (`MemoryPressure`,
    /// `DiskPressure` conditions), which comes with the API server in a later issue; no
    /// caller yet.
    pub fn node_conditions(&self) -> NodeConditions {
        let last = self
            .last_observed
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let holds = |condition: &str| {
            last.get(condition)
                .is_some_and(|at| at.elapsed() < self.config.pressure_transition_period)
        };
        NodeConditions {
            memory_pressure: holds("MemoryPressure"),
            disk_pressure: holds("DiskPressure"),
        }
    }

    async fn observe(&self) -> (Observations, bool) {
        let sources = SignalSources {
            container_manager: &self.container_manager,
            cri: &*self.cri,
            root_dir: &self.config.root_dir,
        };
        let (observations, layout) = observe(&sources).await;
        (observations, layout.dedicated_image_fs)
    }

    fn thresholds_met(&self, observations: &Observations) -> Vec<Threshold> {
        self.config
            .thresholds
            .iter()
            .filter(|t| {
                observations
                    .get(&t.signal)
                    .is_some_and(|o| t.is_met(o.available, o.capacity))
            })
            .cloned()
            .collect()
    }

    /// One cycle: observe; when a hard threshold is met, reclaim node-level resources
    /// for disk signals (dead containers, unused images; only unused images for imagefs
    /// with a dedicated image filesystem, nothing for nodefs then), observe again, and if
    /// still met evict the first evictable pod of the ranking. Returns the UID of the
    /// evicted pod.
    pub async fn synchronize(&self) -> Option<String> {
        let (observations, dedicated_image_fs) = self.observe().await;
        let met = self.thresholds_met(&observations);
        {
            let mut last = self
                .last_observed
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            for t in &met {
                last.insert(t.signal.node_condition(), Instant::now());
            }
        }
        // Memory signals first (upstream `byEvictionPriority`); the list is sorted by signal.
        let threshold = met.first()?.clone();
        let observed = observations.get(&threshold.signal).copied()?;
        info!(
            signal = threshold.signal.as_str(),
            available = observed.available,
            threshold = threshold.quantity(observed.capacity),
            "eviction threshold met"
        );
        let observations = if self.reclaim(threshold.signal, dedicated_image_fs).await {
            let (again, _) = self.observe().await;
            if !self
                .thresholds_met(&again)
                .iter()
                .any(|t| t.signal == threshold.signal)
            {
                info!(
                    signal = threshold.signal.as_str(),
                    "node-level reclaim relieved the pressure"
                );
                return None;
            }
            again
        } else {
            observations
        };
        let observed = observations
            .get(&threshold.signal)
            .copied()
            .unwrap_or(observed);
        let mut pods: Vec<Arc<Pod>> = (self.active_pods)()
            .into_iter()
            .filter(|p| {
                !self
                    .evicted
                    .is_evicted(p.metadata.uid.as_deref().unwrap_or(""))
            })
            .collect();
        let dirs = PodDirs::new(&self.config.root_dir);
        let usages = pod_usages(&*self.cri, &pods, &self.config.pod_logs_dir, &dirs).await;
        rank(&mut pods, threshold.signal, &usages, dedicated_image_fs);
        let resource = threshold.signal.resource();
        for pod in pods {
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            let name = pod.metadata.name.clone().unwrap_or_default();
            if is_critical(&pod) {
                warn!(pod = %name, "eviction manager: cannot evict a critical pod");
                continue;
            }
            let message = eviction_message(
                resource,
                &pod,
                usages.get(&uid),
                &threshold.display_quantity(observed.capacity),
                observed.available,
            );
            info!(pod = %name, uid = %uid, message = %message, "evicting pod");
            self.evicted.request(&uid, message);
            if self.kill.send(pod).await.is_err() {
                self.evicted.forget(&uid);
                return None;
            }
            return Some(uid);
        }
        warn!(
            signal = threshold.signal.as_str(),
            "eviction manager: no pod to evict"
        );
        None
    }

    /// Node-level reclaim for `signal` (upstream `buildSignalToNodeReclaimFuncs`); true
    /// when something was tried.
    async fn reclaim(&self, signal: Signal, dedicated_image_fs: bool) -> bool {
        let disk = !matches!(
            signal,
            Signal::MemoryAvailable | Signal::AllocatableMemoryAvailable
        );
        let nodefs_only = matches!(signal, Signal::NodeFsAvailable | Signal::NodeFsInodesFree);
        if !disk || (dedicated_image_fs && nodefs_only) {
            return false;
        }
        for e in self.container_gc.garbage_collect(true).await {
            warn!(error = %e, "eviction: dead container removal failed");
        }
        match self.image_gc.delete_unused_images().await {
            Ok(freed) => info!(bytes = freed, "eviction: removed unused images"),
            Err(e) => warn!(error = %e, "eviction: unused image removal failed"),
        }
        true
    }
}

/// Critical pods are never evicted: system-critical priority (upstream
/// `IsCriticalPodBasedOnPriority`). Upstream also counts every static and mirror pod as
/// critical; Skiff evicts ordinary static pods so that the node's own pods obey the
/// thresholds until API-server pods exist.
fn is_critical(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.priority)
        .is_some_and(|p| p >= SYSTEM_CRITICAL_PRIORITY)
}
