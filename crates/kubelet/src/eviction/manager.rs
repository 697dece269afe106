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
    /// the pressure transition period after. Read by the node status setters
    /// (`MemoryPressure`, `DiskPressure` conditions, [`crate::nodestatus`]).
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
        // Upstream checks local storage limits first (`localStorageEviction`).
        if let Some(uid) = self.local_storage_eviction().await {
            return Some(uid);
        }
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

    /// Evicts the first active pod with a disk-backed emptyDir grown beyond its
    /// `sizeLimit` (upstream `localStorageEviction` / `emptyDirLimitEviction`, message
    /// `Usage of EmptyDir volume "v" exceeds the limit "1Mi". `), with no grace period.
    /// Critical pods are exempt, and here static pods are critical, as upstream's
    /// `IsCriticalPod` has them. Returns the UID of the evicted pod.
    async fn local_storage_eviction(&self) -> Option<String> {
        let dirs = PodDirs::new(&self.config.root_dir);
        let pods: Vec<Arc<Pod>> = (self.active_pods)()
            .into_iter()
            .filter(|p| {
                !self
                    .evicted
                    .is_evicted(p.metadata.uid.as_deref().unwrap_or(""))
            })
            .filter(|p| !is_critical(p) && !is_static(p))
            .collect();
        let over = tokio::task::spawn_blocking(move || {
            pods.into_iter()
                .find_map(|pod| empty_dir_over_limit(&pod, &dirs).map(|message| (pod, message)))
        })
        .await
        .ok()
        .flatten();
        let (pod, message) = over?;
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        info!(pod = pod.metadata.name.as_deref().unwrap_or(""), uid = %uid, message = %message, "evicting pod");
        self.evicted.request(&uid, message);
        if self.kill.send(pod).await.is_err() {
            self.evicted.forget(&uid);
            return None;
        }
        Some(uid)
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

/// The message of the first disk-backed emptyDir of `pod` that uses more than its
/// `sizeLimit` (upstream `emptyDirMessageFmt`), if any.
fn empty_dir_over_limit(pod: &Pod, dirs: &PodDirs) -> Option<String> {
    let uid = pod.metadata.uid.as_deref().unwrap_or("");
    pod.spec
        .as_ref()?
        .volumes
        .iter()
        .flatten()
        .find_map(|volume| {
            let source = volume.empty_dir.as_ref()?;
            if source.medium.as_deref() == Some("Memory") {
                // A tmpfs sized to the limit cannot outgrow it.
                return None;
            }
            let limit = crate::volume::empty_dir::size_limit_bytes(source)?;
            let dir = dirs.pod_volume_dir(
                uid,
                crate::volume::empty_dir::EMPTY_DIR_PLUGIN_NAME,
                &volume.name,
            );
            let (used, _) = crate::stats::host::disk_usage(&dir);
            (used > limit.unsigned_abs()).then(|| {
                let shown = source.size_limit.as_ref().map_or("", |q| q.0.as_str());
                format!(
                    "Usage of EmptyDir volume {:?} exceeds the limit {shown:?}. ",
                    volume.name
                )
            })
        })
}

/// Static pods (from a manifest file or URL), which upstream's `IsCriticalPod` counts as
/// critical.
fn is_static(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(crate::config::static_pod::CONFIG_SOURCE_ANNOTATION))
        .is_some_and(|source| crate::config::static_pod::is_static_pod_source(source))
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

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{EmptyDirVolumeSource, PodSpec, Volume};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::volume::empty_dir::EMPTY_DIR_PLUGIN_NAME;

    fn pod(source: Option<&str>, medium: Option<&str>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                uid: Some("u1".into()),
                annotations: source.map(|s| {
                    [(
                        crate::config::static_pod::CONFIG_SOURCE_ANNOTATION.to_owned(),
                        s.to_owned(),
                    )]
                    .into()
                }),
                ..Default::default()
            },
            spec: Some(PodSpec {
                volumes: Some(vec![
                    Volume {
                        name: "free".into(),
                        empty_dir: Some(EmptyDirVolumeSource::default()),
                        ..Default::default()
                    },
                    Volume {
                        name: "scratch".into(),
                        empty_dir: Some(EmptyDirVolumeSource {
                            size_limit: Some(Quantity("4Ki".into())),
                            medium: medium.map(str::to_owned),
                            ..Default::default()
                        }),
                        ..Default::default()
                    },
                ]),
                ..Default::default()
            }),
            status: None,
        }
    }

    #[test]
    fn empty_dirs_over_their_size_limit_are_found() {
        let root = tempfile::tempdir().unwrap();
        let dirs = PodDirs::new(root.path());
        let scratch = dirs.pod_volume_dir("u1", EMPTY_DIR_PLUGIN_NAME, "scratch");
        let free = dirs.pod_volume_dir("u1", EMPTY_DIR_PLUGIN_NAME, "free");
        std::fs::create_dir_all(&scratch).unwrap();
        std::fs::create_dir_all(&free).unwrap();
        std::fs::write(free.join("big"), vec![1u8; 64 * 1024]).unwrap();
        let api_pod = pod(None, None);
        assert_eq!(
            empty_dir_over_limit(&api_pod, &dirs),
            None,
            "within the limit"
        );

        std::fs::write(scratch.join("big"), vec![1u8; 64 * 1024]).unwrap();
        assert_eq!(
            empty_dir_over_limit(&api_pod, &dirs).as_deref(),
            Some(r#"Usage of EmptyDir volume "scratch" exceeds the limit "4Ki". "#)
        );
        assert_eq!(
            empty_dir_over_limit(&pod(None, Some("Memory")), &dirs),
            None
        );
        // Static pods are critical for local storage eviction.
        assert!(!is_static(&api_pod));
        assert!(is_static(&pod(Some("file"), None)));
        assert!(is_static(&pod(Some("http"), None)));
    }
}
