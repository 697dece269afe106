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
pub mod pod_manager;
pub mod pod_workers;
pub mod reason_cache;
pub mod server;
pub mod static_pod_starts;
pub mod status;
pub mod syncloop;

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
use pod_manager::PodManager;
use pod_workers::PodWorkers;
use status::StatusManager;
use syncloop::{SyncLoop, SyncLoopInputs};

/// CRI API version the kubelet speaks.
const CRI_API_VERSION: &str = "v1";
/// Capacity of the PLEG event channel (upstream `plegChannelCapacity`).
const PLEG_CHANNEL_CAPACITY: usize = 1000;

/// Kubelet settings (the subset of upstream `KubeletConfiguration` and flags Skiff uses).
#[derive(Debug, Clone)]
pub struct KubeletConfig {
    /// Node name; static pods are named `<name>-<node_name>`.
    pub node_name: String,
    /// Node IP for `status.hostIP`; detected from the default route when `None`.
    pub node_ip: Option<IpAddr>,
    /// Directory of static pod manifests (`--pod-manifest-path`); `None` disables it.
    pub pod_manifest_path: Option<PathBuf>,
    /// Kubelet state directory (`--root-dir`), created on start.
    pub root_dir: PathBuf,
    /// Root of pod log directories (`/var/log/pods`).
    pub pod_logs_dir: PathBuf,
    /// Read-only HTTP port (`--read-only-port`); 0 disables it.
    pub read_only_port: u16,
    /// Manifest directory rescan period (`--file-check-frequency`).
    pub file_check_frequency: Duration,
    /// Resync period of each pod (`--sync-frequency`).
    pub sync_frequency: Duration,
    /// cgroup root under which `kubepods` is placed (`--cgroup-root`).
    pub cgroup_root: PathBuf,
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
    let version = cri
        .version(VersionRequest {
            version: CRI_API_VERSION.to_owned(),
        })
        .await
        .map_err(|e| anyhow::anyhow!("CRI Version call failed: {}", e.message()))?;
    info!(runtime = %version.runtime_name, version = %version.runtime_version, "connected to container runtime");
    let node_ip = config.node_ip.unwrap_or_else(detect_node_ip).to_string();

    let runtime = Arc::new(KubeGenericRuntimeManager::new(
        cri.clone(),
        RuntimeManagerConfig {
            pod_logs_dir: config.pod_logs_dir.clone(),
            cgroup_root: config.cgroup_root.clone(),
            node_ip: node_ip.clone(),
            resolv_conf: PathBuf::from("/etc/resolv.conf"),
            memory_capacity: cm::machine_memory_capacity(),
        },
    ));
    let status_manager = Arc::new(StatusManager::default());
    let pod_manager = Arc::new(PodManager::default());
    let kubelet = Arc::new(kubelet::Kubelet {
        runtime,
        status_manager: status_manager.clone(),
        reasons: Default::default(),
        node_ip,
        runtime_name: version.runtime_name,
        sync_frequency: config.sync_frequency,
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
            read_only_port: 0,
            file_check_frequency: Duration::from_secs(1),
            sync_frequency: Duration::from_secs(60),
            cgroup_root: "/skiff-unit-test-nonexistent".into(),
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
    }
}
