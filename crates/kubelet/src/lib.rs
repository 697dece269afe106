//! Skiff's kubelet: runs the pods of a node through a CRI runtime.
//!
//! Laid out like the upstream kubelet: pod sources ([`config`]) feed the
//! [`syncloop`], which dispatches work to [`pod_workers`]; they drive the runtime through
//! [`kuberuntime`] over the [`cri::Cri`] trait; the [`pleg`] reports runtime changes,
//! the [`status`] manager keeps pod statuses, and [`server`] serves them read-only.

pub mod cm;
pub mod config;
pub mod cri;
pub mod kubelet;
pub mod kuberuntime;
pub mod pleg;
pub mod pod_dirs;
pub mod pod_manager;
pub mod pod_workers;
pub mod prober;
pub mod reason_cache;
pub mod server;
pub mod static_pod_starts;
pub mod status;
pub mod syncloop;
pub mod volume;

use std::collections::BTreeMap;
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, UdpSocket};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use k8s_cri::v1::VersionRequest;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tracing::{info, warn};

use config::file::FileSource;
use config::static_pod::FILE_SOURCE;
use config::{PodConfig, SourcesReady};
use cri::Cri;
use kuberuntime::{KubeGenericRuntimeManager, RuntimeManagerConfig};
use pleg::GenericPleg;
use pod_dirs::PodDirs;
use pod_manager::PodManager;
use pod_workers::PodWorkers;
use status::StatusManager;
use syncloop::{SyncLoop, SyncLoopInputs};
use volume::{NodeAllocatable, VolumeManager};

/// CRI API version the kubelet speaks.
const CRI_API_VERSION: &str = "v1";
/// Capacity of the PLEG event channel (upstream `plegChannelCapacity`).
const PLEG_CHANNEL_CAPACITY: usize = 1000;

/// Kubelet settings: what the flags and `KubeletConfiguration` (kubelet.config.k8s.io/v1beta1)
/// resolve to. [`Default`] gives upstream's defaults; durations are wall-clock periods and
/// resource amounts are Kubernetes quantity strings keyed by resource name.
#[derive(Debug, Clone)]
pub struct KubeletConfig {
    /// Node name; static pods are named `<name>-<node_name>`.
    pub node_name: String,
    /// Node IP for `status.hostIP`; detected from the default route when `None`.
    pub node_ip: Option<IpAddr>,
    /// Directory of static pod manifests (`staticPodPath`, `--pod-manifest-path`); `None`
    /// disables the file source.
    pub pod_manifest_path: Option<PathBuf>,
    /// URL of a pod manifest list (`staticPodURL`, `--manifest-url`); `None` disables the
    /// http source.
    pub manifest_url: Option<String>,
    /// Headers sent with each manifest URL request (`staticPodURLHeader`).
    pub manifest_url_header: BTreeMap<String, Vec<String>>,
    /// Kubelet state directory (`--root-dir`), created on start; pod directories live in
    /// `<root_dir>/pods/<uid>` (see [`pod_dirs`]).
    pub root_dir: PathBuf,
    /// Root of pod log directories (`/var/log/pods`).
    pub pod_logs_dir: PathBuf,
    /// Address of the main and read-only ports (`address`); loopback until the API
    /// server brings authentication.
    pub address: IpAddr,
    /// Main HTTPS port (`port`, 10250); 0 disables it.
    pub port: u16,
    /// Read-only HTTP port (`readOnlyPort`); 0 disables it.
    pub read_only_port: u16,
    /// Serving certificate and key of the main port (`tlsCertFile`, `tlsPrivateKeyFile`);
    /// self-signed into `<root_dir>/pki` when `None`.
    pub tls_cert_file: Option<PathBuf>,
    /// See `tls_cert_file`.
    pub tls_private_key_file: Option<PathBuf>,
    /// Manifest directory rescan period (`fileCheckFrequency`, 20 s).
    pub file_check_frequency: Duration,
    /// Manifest URL poll period (`httpCheckFrequency`, 20 s).
    pub http_check_frequency: Duration,
    /// Resync period of each pod (`syncFrequency`, 1 min).
    pub sync_frequency: Duration,
    /// cgroup root under which `kubepods` is placed (`cgroupRoot`, `/`).
    pub cgroup_root: PathBuf,
    /// cgroup driver (`cgroupDriver`): only `cgroupfs` is supported.
    pub cgroup_driver: String,
    /// QoS-level cgroups `kubepods/{burstable,besteffort}` (`cgroupsPerQOS`, true).
    pub cgroups_per_qos: bool,
    /// Resources reserved for system daemons (`systemReserved`), e.g. `memory: 1Gi`.
    pub system_reserved: BTreeMap<String, String>,
    /// Resources reserved for Kubernetes daemons (`kubeReserved`).
    pub kube_reserved: BTreeMap<String, String>,
    /// Which allocatable limits are enforced on cgroups (`enforceNodeAllocatable`,
    /// `["pods"]`).
    pub enforce_node_allocatable: Vec<String>,
    /// Hard eviction thresholds (`evictionHard`), signal to quantity or percentage, e.g.
    /// `memory.available: 100Mi`, `nodefs.available: 10%`. Upstream defaults:
    /// memory.available 100Mi, nodefs.available 10%, imagefs.available 15%,
    /// nodefs.inodesFree 5%.
    pub eviction_hard: BTreeMap<String, String>,
    /// How long a node condition holds after its pressure ends
    /// (`evictionPressureTransitionPeriod`, 5 min).
    pub eviction_pressure_transition_period: Duration,
    /// Eviction manager period (upstream `evictionMonitoringPeriod`, 10 s).
    pub eviction_monitoring_period: Duration,
    /// Image GC starts above this disk usage (`imageGCHighThresholdPercent`, 85).
    pub image_gc_high_threshold_percent: i32,
    /// Image GC frees down to this disk usage (`imageGCLowThresholdPercent`, 80).
    pub image_gc_low_threshold_percent: i32,
    /// Unused images younger than this are kept (`imageMinimumGCAge`, 2 min).
    pub image_minimum_gc_age: Duration,
    /// Dead containers younger than this are kept (`--minimum-container-ttl-duration`, 0).
    pub minimum_container_ttl: Duration,
    /// Dead containers kept per (pod, container name) (`--maximum-dead-containers-per-container`, 1).
    pub max_per_pod_container: i32,
    /// Dead containers kept on the node, -1 for no limit (`--maximum-dead-containers`, -1).
    pub max_containers: i32,
    /// Pull one image at a time (`serializeImagePulls`, true).
    pub serialize_image_pulls: bool,
}

impl Default for KubeletConfig {
    fn default() -> Self {
        let quantities = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        Self {
            node_name: String::new(),
            node_ip: None,
            pod_manifest_path: None,
            manifest_url: None,
            manifest_url_header: BTreeMap::new(),
            root_dir: PathBuf::from("/var/lib/skiff/kubelet"),
            pod_logs_dir: PathBuf::from("/var/log/pods"),
            address: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 10250,
            read_only_port: 10255,
            tls_cert_file: None,
            tls_private_key_file: None,
            file_check_frequency: Duration::from_secs(20),
            http_check_frequency: Duration::from_secs(20),
            sync_frequency: Duration::from_secs(60),
            cgroup_root: PathBuf::from("/"),
            cgroup_driver: "cgroupfs".to_owned(),
            cgroups_per_qos: true,
            system_reserved: BTreeMap::new(),
            kube_reserved: BTreeMap::new(),
            enforce_node_allocatable: vec!["pods".to_owned()],
            eviction_hard: quantities(&[
                ("memory.available", "100Mi"),
                ("nodefs.available", "10%"),
                ("imagefs.available", "15%"),
                ("nodefs.inodesFree", "5%"),
            ]),
            eviction_pressure_transition_period: Duration::from_secs(300),
            eviction_monitoring_period: Duration::from_secs(10),
            image_gc_high_threshold_percent: 85,
            image_gc_low_threshold_percent: 80,
            image_minimum_gc_age: Duration::from_secs(120),
            minimum_container_ttl: Duration::ZERO,
            max_per_pod_container: 1,
            max_containers: -1,
            serialize_image_pulls: true,
        }
    }
}

/// Runs the kubelet against `cri` until `shutdown` completes.
///
/// On start it asks the runtime its version, relists the runtime (PLEG) so that existing
/// sandboxes and containers of known pods are adopted (not restarted), then watches the
/// manifest directory and serves the read-only port. On shutdown it stops its loops and
/// leaves pods running.
///
/// Errors when the runtime does not answer Version, the root directory cannot be
/// created, or the read-only port cannot be bound.
pub async fn run(
    config: KubeletConfig,
    cri: Arc<dyn Cri>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(&config.root_dir).with_context(|| {
        format!(
            "creating kubelet root directory {}",
            config.root_dir.display()
        )
    })?;
    // Upstream `setupDataDirs`: volume mounts with HostToContainer or Bidirectional
    // propagation need the root directory on a shared mount.
    volume::mount::make_rshared(&config.root_dir)
        .map_err(|e| anyhow::anyhow!("error configuring root directory: {e}"))?;
    let version = cri
        .version(VersionRequest {
            version: CRI_API_VERSION.to_owned(),
        })
        .await
        .map_err(|e| anyhow::anyhow!("CRI Version call failed: {}", e.message()))?;
    info!(runtime = %version.runtime_name, version = %version.runtime_version, "connected to container runtime");
    let node_ip = config.node_ip.unwrap_or_else(detect_node_ip).to_string();

    let volume_manager = Arc::new(VolumeManager::new(
        PodDirs::new(&config.root_dir),
        volume::probe_volume_plugins(node_allocatable(&config)),
    ));
    let runtime = Arc::new(
        KubeGenericRuntimeManager::new(
            cri.clone(),
            RuntimeManagerConfig {
                pod_logs_dir: config.pod_logs_dir.clone(),
                cgroup_root: config.cgroup_root.clone(),
                node_ip: node_ip.clone(),
                resolv_conf: PathBuf::from("/etc/resolv.conf"),
                memory_capacity: cm::machine_memory_capacity(),
            },
        )
        .with_volume_manager(volume_manager.clone()),
    );
    let status_manager = Arc::new(StatusManager::default());
    let pod_manager = Arc::new(PodManager::default());
    let kubelet = Arc::new(kubelet::Kubelet {
        runtime,
        status_manager: status_manager.clone(),
        reasons: Default::default(),
        node_ip,
        runtime_name: version.runtime_name,
        sync_frequency: config.sync_frequency,
        volume_manager,
    });

    let mut tasks = JoinSet::new();
    let mut pleg = GenericPleg::new(cri);
    if let Err(e) = pleg.relist().await {
        warn!(error = %e.message(), "initial PLEG relist failed");
    }
    let runtime_pods = pleg.runtime_pods();
    let (pleg_tx, pleg_rx) = mpsc::channel(PLEG_CHANNEL_CAPACITY);
    tasks.spawn(pleg.run(pleg_tx));

    let sources_ready = SourcesReady::default();
    let (update_tx, update_rx) = mpsc::channel(64);
    match config.pod_manifest_path.clone() {
        Some(dir) => {
            info!(path = %dir.display(), "watching static pod manifests");
            let (snapshot_tx, mut snapshots) = mpsc::channel(4);
            tasks.spawn(
                FileSource::new(dir, config.node_name.clone(), config.file_check_frequency)
                    .run(snapshot_tx),
            );
            let mut pod_config = PodConfig::new(&[FILE_SOURCE]);
            let sources_ready = sources_ready.clone();
            tasks.spawn(async move {
                while let Some(snapshot) = snapshots.recv().await {
                    for update in pod_config.merge(FILE_SOURCE, snapshot) {
                        if update_tx.send(update).await.is_err() {
                            return;
                        }
                    }
                    // Only now: the SyncLoop applies queued updates before it trusts this.
                    if pod_config.all_sources_seen() {
                        sources_ready.mark_ready();
                    }
                }
            });
        }
        // No source configured: all (zero) sources are ready at once.
        None => sources_ready.mark_ready(),
    }

    if config.read_only_port != 0 {
        let listener = server::bind(config.read_only_port)
            .await
            .with_context(|| format!("binding read-only port {}", config.read_only_port))?;
        info!(
            port = config.read_only_port,
            "serving read-only kubelet API"
        );
        let app = server::router(server::ServerState {
            pod_manager: pod_manager.clone(),
            status_manager,
        });
        tasks.spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                warn!(error = %e, "read-only server stopped");
            }
        });
    }

    let (results_tx, results_rx) = mpsc::unbounded_channel();
    let pod_workers = PodWorkers::new(kubelet, results_tx);
    let inputs = SyncLoopInputs {
        updates: update_rx,
        pleg: pleg_rx,
        results: results_rx,
    };
    SyncLoop::new(pod_manager, pod_workers, sources_ready, runtime_pods)
        .run(inputs, shutdown)
        .await;
    tasks.shutdown().await;
    Ok(())
}

/// Node allocatable CPU and memory (capacity minus `systemReserved`, `kubeReserved` and,
/// for memory, the hard `memory.available` threshold) and the root directory's filesystem
/// size as ephemeral storage (upstream `GetNodeAllocatableAbsolute`).
fn node_allocatable(config: &KubeletConfig) -> NodeAllocatable {
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    let reserved = |name: &str, milli: bool| -> i64 {
        [&config.system_reserved, &config.kube_reserved]
            .iter()
            .filter_map(|r| r.get(name))
            .map(|q| {
                let q = Quantity(q.clone());
                if milli {
                    cm::quantity::milli_value(&q)
                } else {
                    cm::quantity::value(&q)
                }
            })
            .sum()
    };
    let memory_capacity = cm::machine_memory_capacity();
    let eviction =
        config
            .eviction_hard
            .get("memory.available")
            .map_or(0, |t| match t.strip_suffix('%') {
                Some(pct) => pct
                    .trim()
                    .parse::<f64>()
                    .map_or(0, |p| (memory_capacity as f64 * p / 100.0) as i64),
                None => cm::quantity::value(&Quantity(t.clone())),
            });
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as i64);
    let storage = nix::sys::statvfs::statvfs(&config.root_dir).map_or(0, |s| {
        (s.blocks() as i64).saturating_mul(s.fragment_size() as i64)
    });
    NodeAllocatable {
        cpu_millis: (cpus * 1000 - reserved("cpu", true)).max(0),
        memory_bytes: (memory_capacity - reserved("memory", false) - eviction).max(0),
        ephemeral_storage_bytes: (storage - reserved("ephemeral-storage", false)).max(0),
    }
}

/// The source address of the default route, or 127.0.0.1 without one.
fn detect_node_ip() -> IpAddr {
    UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))
        .and_then(|s| s.connect((Ipv4Addr::new(192, 0, 2, 1), 9)).map(|()| s))
        .and_then(|s| s.local_addr())
        .map(|a| a.ip())
        .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST))
}

#[cfg(test)]
mod tests {
    use super::*;
    use cri::fake::FakeCri;

    async fn wait_for(what: &str, mut check: impl FnMut() -> bool) {
        for _ in 0..100 {
            if check() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("timed out waiting for {what}");
    }

    #[tokio::test]
    async fn static_pod_lifecycle_through_run() {
        let dir = tempfile::tempdir().unwrap();
        let manifests = dir.path().join("manifests");
        std::fs::create_dir_all(&manifests).unwrap();
        let manifest = manifests.join("web.yaml");
        std::fs::write(&manifest, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: c\n    image: busybox\n").unwrap();
        let cri = Arc::new(FakeCri::default());
        let config = KubeletConfig {
            node_name: "node1".into(),
            node_ip: Some(IpAddr::V4(Ipv4Addr::new(192, 168, 0, 2))),
            pod_manifest_path: Some(manifests.clone()),
            root_dir: dir.path().join("root"),
            pod_logs_dir: dir.path().join("logs"),
            port: 0,
            read_only_port: 0,
            file_check_frequency: Duration::from_secs(1),
            cgroup_root: "/skiff-unit-test-nonexistent".into(),
            ..KubeletConfig::default()
        };
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let kubelet = tokio::spawn(run(config, cri.clone(), async move {
            let _ = stop_rx.await;
        }));
        let running = |cri: &FakeCri| {
            cri.container_ids()
                .iter()
                .filter_map(|id| cri.container(id))
                .any(|c| c.state == k8s_cri::v1::ContainerState::ContainerRunning as i32)
        };
        wait_for("container running", || running(&cri)).await;
        std::fs::remove_file(&manifest).unwrap();
        wait_for("pod removed", || {
            cri.sandbox_count() == 0 && cri.container_ids().is_empty()
        })
        .await;
        let _ = stop_tx.send(());
        kubelet.await.unwrap().unwrap();
        // The rshared bind mount of the root directory stays after the kubelet, as upstream.
        let _ = volume::mount::unmount(&dir.path().join("root"));
    }
}
