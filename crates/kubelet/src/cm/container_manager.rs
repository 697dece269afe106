//! The container manager (upstream `pkg/kubelet/cm`: `containerManagerImpl`,
//! `qosContainerManagerImpl`, `podContainerManagerImpl`, node allocatable enforcement):
//! the cgroup tree `<cgroupRoot>/kubepods/{burstable,besteffort}/pod<uid>` (Guaranteed pods
//! directly under `kubepods`), with the node allocatable on `kubepods`, the QoS tiers'
//! cpu shares, and each pod's limits.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use k8s_openapi::api::core::v1::Pod;
use tracing::{info, warn};

use super::allocatable::{self, PIDS};
use super::cgroupfs::CgroupFs;
use super::cgroups::{pod_cgroup_parent, qos_cgroup};
use super::qos::{QosClass, pod_qos};
use super::resources::{
    MIN_SHARES, ResourceAmounts, ResourceConfig, milli_cpu_to_shares, pod_requests,
    resource_config_for_pod,
};
use crate::eviction::threshold::Threshold;

/// The `enforceNodeAllocatable` key that limits the `kubepods` cgroup.
pub const ENFORCE_PODS: &str = "pods";
/// Prefix of pod cgroup names.
const POD_CGROUP_PREFIX: &str = "pod";

/// Lists the pods that should have cgroups (upstream `ActivePodsFunc`).
pub type ActivePods = Arc<dyn Fn() -> Vec<Arc<Pod>> + Send + Sync>;

/// Settings of the container manager (from `KubeletConfig`).
#[derive(Debug, Clone)]
pub struct ContainerManagerConfig {
    /// `cgroupRoot`.
    pub cgroup_root: PathBuf,
    /// `cgroupsPerQOS`: without it the manager creates no cgroups.
    pub cgroups_per_qos: bool,
    /// `enforceNodeAllocatable`.
    pub enforce_node_allocatable: Vec<String>,
    /// `systemReserved`, parsed.
    pub system_reserved: ResourceAmounts,
    /// `kubeReserved`, parsed.
    pub kube_reserved: ResourceAmounts,
    /// Reservation of the hard eviction thresholds.
    pub eviction_reserved: ResourceAmounts,
    /// `podPidsLimit` (-1: unlimited).
    pub pod_pids_limit: i64,
}

impl ContainerManagerConfig {
    /// The settings `config` and its parsed hard eviction `thresholds` give, and the
    /// machine capacity (ephemeral storage measured on the root directory).
    ///
    /// Errors on malformed reservations.
    pub fn from_kubelet_config(
        config: &crate::KubeletConfig,
        thresholds: &[Threshold],
    ) -> anyhow::Result<(Self, ResourceAmounts)> {
        let capacity = allocatable::machine_capacity(&config.root_dir);
        Ok((
            Self {
                cgroup_root: config.cgroup_root.clone(),
                cgroups_per_qos: config.cgroups_per_qos,
                enforce_node_allocatable: config.enforce_node_allocatable.clone(),
                system_reserved: allocatable::parse_reservation(&config.system_reserved)?,
                kube_reserved: allocatable::parse_reservation(&config.kube_reserved)?,
                eviction_reserved: allocatable::hard_eviction_reservation(thresholds, &capacity),
                pod_pids_limit: config.pod_pids_limit,
            },
            capacity,
        ))
    }
}

/// The container manager. Cheap to share (`Arc`); cgroup changes are serialized.
pub struct ContainerManager {
    /// `None` when cgroups per QoS are disabled.
    fs: Option<CgroupFs>,
    config: ContainerManagerConfig,
    capacity: ResourceAmounts,
    active_pods: ActivePods,
    lock: Mutex<()>,
}

impl ContainerManager {
    /// A manager for `config` on a machine with `capacity`, on the cgroup layout of this
    /// host.
    ///
    /// Errors when cgroups per QoS are enabled and no cgroup filesystem is mounted.
    pub fn new(
        config: ContainerManagerConfig,
        capacity: ResourceAmounts,
        active_pods: ActivePods,
    ) -> anyhow::Result<Self> {
        let fs = if config.cgroups_per_qos {
            Some(CgroupFs::detect()?)
        } else {
            None
        };
        Ok(Self::with_fs(fs, config, capacity, active_pods))
    }

    /// A manager on the given cgroup layout (tests use temporary directories).
    pub fn with_fs(
        fs: Option<CgroupFs>,
        config: ContainerManagerConfig,
        capacity: ResourceAmounts,
        active_pods: ActivePods,
    ) -> Self {
        Self {
            fs,
            config,
            capacity,
            active_pods,
            lock: Mutex::new(()),
        }
    }

    /// A manager that creates no cgroups (`cgroupsPerQOS: false`), for unit tests.
    #[cfg(test)]
    pub(crate) fn disabled() -> Self {
        let config = crate::KubeletConfig {
            cgroups_per_qos: false,
            ..Default::default()
        };
        let (config, capacity) = ContainerManagerConfig::from_kubelet_config(&config, &[])
            .unwrap_or_else(|e| panic!("default container manager config: {e:#}"));
        Self::with_fs(None, config, capacity, Arc::new(Vec::new))
    }

    /// The machine capacity (see [`allocatable::machine_capacity`]).
    pub fn capacity(&self) -> &ResourceAmounts {
        &self.capacity
    }

    /// The node allocatable, the one value the node status reports and the downward API
    /// defaults to: capacity − systemReserved − kubeReserved − hard eviction thresholds,
    /// and memory also less every huge page pool (upstream's `MachineInfo` node status
    /// setter), each floored at 0.
    pub fn node_allocatable(&self) -> ResourceAmounts {
        let mut amounts = allocatable::subtract(
            &self.capacity,
            &[
                &self.config.system_reserved,
                &self.config.kube_reserved,
                &self.config.eviction_reserved,
            ],
        );
        let hugepages: i64 = self
            .capacity
            .iter()
            .filter(|(name, _)| name.starts_with(allocatable::HUGEPAGES_PREFIX))
            .map(|(_, bytes)| *bytes)
            .sum();
        if let Some(memory) = amounts.get_mut("memory") {
            *memory = (*memory - hugepages).max(0);
        }
        amounts
    }

    /// What the `kubepods` cgroup is limited to: capacity − systemReserved − kubeReserved
    /// when `enforceNodeAllocatable` has `pods`, else the capacity (upstream
    /// `enforceNodeAllocatableCgroups`).
    pub fn pods_allocatable(&self) -> ResourceAmounts {
        if self.enforces_pods() {
            allocatable::subtract(
                &self.capacity,
                &[&self.config.system_reserved, &self.config.kube_reserved],
            )
        } else {
            self.capacity.clone()
        }
    }

    fn enforces_pods(&self) -> bool {
        self.config
            .enforce_node_allocatable
            .iter()
            .any(|e| e == ENFORCE_PODS)
    }

    /// `<cgroupRoot>/kubepods`.
    pub fn kubepods(&self) -> PathBuf {
        qos_cgroup(&self.config.cgroup_root, QosClass::Guaranteed)
    }

    fn qos_cgroup(&self, qos: QosClass) -> PathBuf {
        qos_cgroup(&self.config.cgroup_root, qos)
    }

    /// The memory working set of any `cgroup`, bytes (`None` without cgroups or when
    /// unreadable).
    pub fn memory_working_set(&self, cgroup: &std::path::Path) -> Option<u64> {
        self.fs.as_ref()?.memory_working_set(cgroup)
    }

    /// The pods' working set (the `kubepods` cgroup), bytes.
    pub fn pods_memory_working_set(&self) -> Option<u64> {
        self.fs.as_ref()?.memory_working_set(&self.kubepods())
    }

    /// Creates `kubepods` with the node allocatable (cpu shares, memory and pids limits)
    /// and the Burstable and BestEffort QoS cgroups (upstream `setupNode` +
    /// `qosContainerManager.Start`).
    pub fn start(&self) -> anyhow::Result<()> {
        let Some(fs) = &self.fs else {
            return Ok(());
        };
        let _guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        let kubepods = self.kubepods();
        fs.create(&kubepods)?;
        let allocatable = self.pods_allocatable();
        let config = ResourceConfig {
            cpu_shares: allocatable.get("cpu").map(|cpu| milli_cpu_to_shares(*cpu)),
            memory: allocatable.get("memory").copied(),
            pids_limit: allocatable.get(PIDS).copied(),
            ..Default::default()
        };
        fs.apply(&kubepods, &config)?;
        info!(cgroup = %kubepods.display(), ?config, "node allocatable cgroup configured");
        for qos in [QosClass::Burstable, QosClass::BestEffort] {
            fs.create(&self.qos_cgroup(qos))?;
        }
        self.update_qos_cgroups_locked(fs)
    }

    /// Sets the QoS tiers' cpu shares from the active pods (upstream
    /// `qosContainerManager.UpdateCgroups`): BestEffort 2, Burstable the shares of the
    /// Burstable pods' summed cpu requests.
    pub fn update_qos_cgroups(&self) -> anyhow::Result<()> {
        let Some(fs) = &self.fs else {
            return Ok(());
        };
        let _guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        self.update_qos_cgroups_locked(fs)
    }

    fn update_qos_cgroups_locked(&self, fs: &CgroupFs) -> anyhow::Result<()> {
        let (best_effort, burstable) = qos_shares(&(self.active_pods)());
        fs.apply(
            &self.qos_cgroup(QosClass::BestEffort),
            &ResourceConfig {
                cpu_shares: Some(best_effort),
                ..Default::default()
            },
        )?;
        fs.apply(
            &self.qos_cgroup(QosClass::Burstable),
            &ResourceConfig {
                cpu_shares: Some(burstable),
                ..Default::default()
            },
        )
    }

    /// The pod's cgroup path (`<cgroupRoot>/kubepods[/<qos>]/pod<uid>`).
    pub fn pod_cgroup(&self, pod: &Pod) -> PathBuf {
        let uid = pod.metadata.uid.as_deref().unwrap_or("");
        pod_cgroup_parent(&self.config.cgroup_root, pod_qos(pod), uid)
    }

    /// Creates the pod's cgroup with its limits if it does not exist yet, updating the QoS
    /// tiers first (upstream `podContainerManager.EnsureExists`, called before the
    /// sandbox is created).
    pub fn ensure_pod_cgroup(&self, pod: &Pod) -> anyhow::Result<()> {
        let Some(fs) = &self.fs else {
            return Ok(());
        };
        let cgroup = self.pod_cgroup(pod);
        if fs.exists(&cgroup) {
            return Ok(());
        }
        let _guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        self.update_qos_cgroups_locked(fs)?;
        fs.create(&cgroup)?;
        fs.apply(
            &cgroup,
            &resource_config_for_pod(pod, self.config.pod_pids_limit),
        )
    }

    /// Kills what is left in the cgroup of pod `uid` and removes it, whatever its QoS tier
    /// (upstream `podContainerManager.Destroy`, after the pod terminated).
    pub fn destroy_pod_cgroup(&self, uid: &str) -> anyhow::Result<()> {
        let Some(fs) = &self.fs else {
            return Ok(());
        };
        let mut errors = Vec::new();
        for qos in [
            QosClass::Guaranteed,
            QosClass::Burstable,
            QosClass::BestEffort,
        ] {
            let cgroup = pod_cgroup_parent(&self.config.cgroup_root, qos, uid);
            if let Err(e) = fs.destroy(&cgroup) {
                errors.push(format!("{e:#}"));
            }
        }
        anyhow::ensure!(errors.is_empty(), "{}", errors.join("; "));
        Ok(())
    }

    /// UIDs of the pods that have a cgroup (upstream `GetAllPodsFromCgroups`).
    pub fn pods_with_cgroups(&self) -> Vec<String> {
        let Some(fs) = &self.fs else {
            return Vec::new();
        };
        let mut uids: Vec<String> = [
            QosClass::Guaranteed,
            QosClass::Burstable,
            QosClass::BestEffort,
        ]
        .into_iter()
        .flat_map(|qos| fs.children(&self.qos_cgroup(qos)))
        .filter_map(|name| name.strip_prefix(POD_CGROUP_PREFIX).map(str::to_owned))
        .collect();
        uids.sort();
        uids.dedup();
        uids
    }

    /// Destroys the cgroups of pods not in `keep` (upstream housekeeping
    /// `cleanupOrphanedPodCgroups`; `keep` holds the pods known to the pod manager or the
    /// pod workers).
    pub fn cleanup_orphaned_pod_cgroups(&self, keep: &HashSet<String>) {
        for uid in self.pods_with_cgroups() {
            if keep.contains(&uid) {
                continue;
            }
            info!(uid = %uid, "removing the cgroup of an orphaned pod");
            if let Err(e) = self.destroy_pod_cgroup(&uid) {
                warn!(uid = %uid, error = %e, "orphaned pod cgroup removal failed");
            }
        }
    }
}

/// cpu shares of the BestEffort and Burstable tiers for `pods`.
fn qos_shares(pods: &[Arc<Pod>]) -> (u64, u64) {
    let burstable_milli_cpu: i64 = pods
        .iter()
        .filter(|p| pod_qos(p) == QosClass::Burstable)
        .map(|p| {
            pod_requests(p, &Default::default())
                .get("cpu")
                .copied()
                .unwrap_or(0)
        })
        .sum();
    (MIN_SHARES, milli_cpu_to_shares(burstable_milli_cpu))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_pods::{self, Pairs};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use std::path::Path;

    fn pod(uid: &str, requests: Pairs<'_>, limits: Pairs<'_>) -> Arc<Pod> {
        Arc::new(Pod {
            metadata: ObjectMeta {
                uid: Some(uid.into()),
                ..Default::default()
            },
            ..test_pods::pod(vec![test_pods::container("c", requests, limits)])
        })
    }

    fn manager(root: &Path, pods: Vec<Arc<Pod>>) -> ContainerManager {
        std::fs::write(root.join("cgroup.controllers"), "cpu memory pids").unwrap();
        let config = ContainerManagerConfig {
            cgroup_root: "/".into(),
            cgroups_per_qos: true,
            enforce_node_allocatable: vec!["pods".into()],
            system_reserved: [("memory".to_owned(), 1 << 30)].into(),
            kube_reserved: ResourceAmounts::new(),
            eviction_reserved: [("memory".to_owned(), 100 << 20)].into(),
            pod_pids_limit: -1,
        };
        let capacity = [
            ("cpu".to_owned(), 2000),
            ("memory".to_owned(), 4 << 30),
            ("hugepages-2Mi".to_owned(), 10 << 21),
            (PIDS.to_owned(), 32768),
        ]
        .into();
        ContainerManager::with_fs(
            Some(CgroupFs::V2 {
                root: root.to_path_buf(),
            }),
            config,
            capacity,
            Arc::new(move || pods.clone()),
        )
    }

    #[test]
    fn kubepods_qos_and_pod_cgroups_on_v2() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let burstable = pod("b1", &[("cpu", "250m")], &[]);
        let other = pod("b2", &[("cpu", "250m"), ("memory", "1Mi")], &[]);
        let guaranteed = pod(
            "g1",
            &[("cpu", "1"), ("memory", "64Mi")],
            &[("cpu", "1"), ("memory", "64Mi")],
        );
        let best_effort = pod("e1", &[], &[]);
        let cm = manager(root, vec![burstable.clone(), other, guaranteed.clone()]);
        cm.start().unwrap();
        let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap();
        assert_eq!(read("kubepods/memory.max"), (3u64 << 30).to_string());
        assert_eq!(read("kubepods/cpu.weight"), "79");
        assert_eq!(read("kubepods/pids.max"), "32768");
        assert_eq!(read("kubepods/besteffort/cpu.weight"), "1");
        // 500m of Burstable requests: 512 shares.
        assert_eq!(read("kubepods/burstable/cpu.weight"), "20");
        // The node allocatable's memory leaves out the huge page pools too; the kubepods
        // limit does not.
        assert_eq!(
            cm.node_allocatable()["memory"],
            (3 << 30) - (100 << 20) - (20 << 20)
        );

        for p in [&burstable, &guaranteed, &best_effort] {
            cm.ensure_pod_cgroup(p).unwrap();
        }
        assert_eq!(read("kubepods/burstable/podb1/cpu.weight"), "10");
        assert_eq!(read("kubepods/podg1/memory.max"), (64u64 << 20).to_string());
        assert_eq!(read("kubepods/podg1/cpu.max"), "100000 100000");
        assert_eq!(read("kubepods/besteffort/pode1/cpu.weight"), "1");
        assert_eq!(cm.pods_with_cgroups(), vec!["b1", "e1", "g1"]);

        // Control files of a real cgroupfs go with rmdir; drop the test's.
        for d in [
            "kubepods/burstable/podb1",
            "kubepods/podg1",
            "kubepods/besteffort/pode1",
        ] {
            for e in std::fs::read_dir(root.join(d)).unwrap().flatten() {
                std::fs::remove_file(e.path()).unwrap();
            }
        }
        cm.cleanup_orphaned_pod_cgroups(&["b1".to_owned()].into());
        assert_eq!(cm.pods_with_cgroups(), vec!["b1"]);
        cm.destroy_pod_cgroup("b1").unwrap();
        assert!(cm.pods_with_cgroups().is_empty());
        assert!(root.join("kubepods/burstable").is_dir());
    }

    #[test]
    fn disabled_without_cgroups_per_qos() {
        let config = ContainerManagerConfig {
            cgroup_root: "/".into(),
            cgroups_per_qos: false,
            enforce_node_allocatable: Vec::new(),
            system_reserved: ResourceAmounts::new(),
            kube_reserved: ResourceAmounts::new(),
            eviction_reserved: ResourceAmounts::new(),
            pod_pids_limit: -1,
        };
        let cm = ContainerManager::new(config, ResourceAmounts::new(), Arc::new(Vec::new)).unwrap();
        cm.start().unwrap();
        cm.ensure_pod_cgroup(&pod("x", &[], &[])).unwrap();
        assert!(cm.pods_with_cgroups().is_empty());
    }
}
