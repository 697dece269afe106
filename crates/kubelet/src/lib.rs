//! Skiff's kubelet: runs the pods of a node through a CRI runtime.
//!
//! Laid out like the upstream kubelet: pod sources ([`config`]) feed the
//! [`syncloop`], which dispatches work to [`pod_workers`]; they drive the runtime through
//! [`kuberuntime`] over the [`cri::Cri`] trait; the [`pleg`] reports runtime changes,
//! the [`status`] manager keeps pod statuses, and [`server`] serves them read-only.

pub mod active_deadline;
pub mod client;
pub mod cm;
pub mod config;
pub mod cri;
pub mod csinode;
pub mod error;
pub mod events;
pub mod eviction;
pub mod garbage_collection;
pub mod images;
pub mod kubelet;
pub mod kubelet_config;
pub mod kuberuntime;
pub mod lifecycle;
pub mod logs;
pub mod metrics;
pub mod mirror_pods;
pub mod nodelease;
pub mod nodestatus;
pub mod objects;
pub mod pleg;
pub mod pod_dirs;
pub mod pod_manager;
pub mod pod_workers;
pub mod prober;
pub mod reason_cache;
pub mod server;
pub mod static_pod_starts;
pub mod stats;
pub mod status;
pub mod syncloop;
pub mod volume;

#[cfg(test)]
mod test_pods;

pub use kubelet_config::{AuthorizationMode, KubeletConfig};

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use k8s_cri::v1::VersionRequest;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tracing::{info, warn};

use cm::container_manager::ActivePods;
use cm::{ContainerManager, ContainerManagerConfig};
use config::SourcesReady;
use config::file::FileSource;
use config::http::HttpSource;
use config::static_pod::{FILE_SOURCE, HTTP_SOURCE};
use cri::Cri;
use eviction::threshold::parse_thresholds;
use eviction::{EvictedPods, EvictionManager, EvictionManagerConfig};
use images::gc::{ImageGcManager, ImageGcPolicy};
use kuberuntime::env::NodeAllocatable;
use kuberuntime::gc::{ContainerGc, GcPolicy};
use kuberuntime::{KubeGenericRuntimeManager, RuntimeManagerConfig};
use pleg::Pleg;
use pod_dirs::PodDirs;
use pod_manager::PodManager;
use pod_workers::{PodWorkerStates, PodWorkers};
use prober::results::ProbeResults;
use prober::{ProbeManager, Prober};
use status::StatusManager;
use syncloop::{SyncLoop, SyncLoopInputs};
use volume::VolumeManager;

/// CRI API version the kubelet speaks.
const CRI_API_VERSION: &str = "v1";
/// Capacity of the PLEG event channel (upstream `plegChannelCapacity`).
const PLEG_CHANNEL_CAPACITY: usize = 1000;

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
    let cri: Arc<dyn Cri> = Arc::new(metrics::InstrumentedCri::new(cri));
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
    // In a cluster: the API server named by `--kubeconfig`. Without it the kubelet is
    // standalone and runs static pods only.
    let api = match &config.kubeconfig {
        Some(path) => {
            // i32 to f32: QPS values are small; precision loss above 2^24 is irrelevant.
            Some(
                skiff_client::connect(
                    path,
                    config.kube_api_qps as f32,
                    config.kube_api_burst,
                    &config.api_connector,
                )
                .await?,
            )
        }
        None => None,
    };
    let node_ip_addr = config.node_ip.unwrap_or_else(detect_node_ip);
    let node_ip = node_ip_addr.to_string();
    metrics::metrics().set_node_name(&config.node_name);

    let pod_manager = Arc::new(PodManager::default());
    let evictions = Arc::new(EvictedPods::default());
    let active_pods: ActivePods = {
        let (pod_manager, evictions) = (pod_manager.clone(), evictions.clone());
        Arc::new(move || {
            pod_manager
                .pods()
                .into_iter()
                .filter(|p| !evictions.is_evicted(p.metadata.uid.as_deref().unwrap_or("")))
                .collect()
        })
    };
    let allocatable_enforced = config
        .enforce_node_allocatable
        .iter()
        .any(|e| e == cm::container_manager::ENFORCE_PODS);
    let thresholds = parse_thresholds(&config.eviction_hard, allocatable_enforced)?;
    let (cm_config, capacity) = ContainerManagerConfig::from_kubelet_config(&config, &thresholds)?;
    let container_manager = Arc::new(ContainerManager::new(
        cm_config,
        capacity,
        active_pods.clone(),
    )?);
    container_manager
        .start()
        .context("setting up the kubepods cgroups")?;

    let allocatable = NodeAllocatable::from_amounts(&container_manager.node_allocatable());
    // ConfigMaps, Secrets, Services, claims and tokens for volumes and environments:
    // watch-based caches on the API server, or failures with upstream's standalone
    // messages without one.
    let (objects, services_watch): (Arc<dyn objects::ObjectSource>, _) = match &api {
        Some(client) => {
            let (objects, services_watch) = objects::api::ApiObjects::new(client.clone());
            (objects, Some(services_watch))
        }
        None => (Arc::new(objects::Standalone), None),
    };
    let volume_manager = Arc::new(VolumeManager::new(
        PodDirs::new(&config.root_dir),
        volume::probe_volume_plugins_with_objects(allocatable, objects.clone()),
    ));
    // Events go to the API server when there is one (one sender task), else to the log.
    let (recorder, event_broadcaster) = match &api {
        Some(client) => {
            let sink = events::ApiEventSink::new(client.clone());
            let (recorder, broadcaster) = events::EventRecorder::with_sink(&config.node_name, sink);
            (recorder, Some(broadcaster))
        }
        None => (events::EventRecorder::log_only(&config.node_name), None),
    };
    let runtime = Arc::new(
        KubeGenericRuntimeManager::new(
            cri.clone(),
            RuntimeManagerConfig {
                pod_logs_dir: config.pod_logs_dir.clone(),
                cgroup_root: config.cgroup_root.clone(),
                node_ip: node_ip.clone(),
                resolv_conf: PathBuf::from("/etc/resolv.conf"),
                cluster_dns: config.cluster_dns.clone(),
                cluster_domain: config.cluster_domain.clone(),
                memory_capacity: cm::machine_memory_capacity(),
                pod_dirs: PodDirs::new(&config.root_dir),
                allocatable,
            },
        )
        .with_volume_manager(volume_manager.clone())
        .with_object_source(objects)
        .with_recorder(recorder.clone()),
    );
    let status_manager = Arc::new(StatusManager::default());
    let (probe_results, probe_updates) = ProbeResults::new();
    let probe_manager = ProbeManager::new(
        Arc::new(Prober::new(cri.clone()).with_recorder(recorder.clone())),
        status_manager.clone(),
        probe_results.clone(),
    );
    let kubelet = Arc::new(kubelet::Kubelet {
        runtime,
        status_manager: status_manager.clone(),
        reasons: Default::default(),
        node_ip,
        runtime_name: version.runtime_name.clone(),
        sync_frequency: config.sync_frequency,
        probe_manager,
        probe_results,
        container_manager: container_manager.clone(),
        evictions: evictions.clone(),
        volume_manager,
    });
    let sources_ready = SourcesReady::default();
    let pod_worker_states = PodWorkerStates::default();

    let mut tasks = JoinSet::new();
    if let Some(broadcaster) = event_broadcaster {
        tasks.spawn(broadcaster.run());
    }
    if let Some(services_watch) = services_watch {
        tasks.spawn(services_watch);
    }
    let (server_cri, server_cri_state) = (cri.clone(), cri.clone());
    let mut pleg = Pleg::new(cri.clone());
    if let Err(e) = pleg.relist().await {
        warn!(error = %e.message(), "initial PLEG relist failed");
    }
    let runtime_pods = pleg.runtime_pods();
    let pleg_health = pleg.health();
    metrics::metrics().set_pleg(pleg.relist_stats(), pleg_health.clone());
    let (pleg_tx, pleg_rx) = mpsc::channel(PLEG_CHANNEL_CAPACITY);
    tasks.spawn(pleg.run(pleg_tx));

    let container_gc = Arc::new(ContainerGc::new(
        cri.clone(),
        GcPolicy {
            min_age: config.minimum_container_ttl,
            max_per_pod_container: config.max_per_pod_container,
            max_containers: config.max_containers,
        },
        config.pod_logs_dir.clone(),
        Arc::new(garbage_collection::PodStates {
            pod_manager: pod_manager.clone(),
            pod_workers: pod_worker_states.clone(),
            evictions: evictions.clone(),
        }),
        sources_ready.clone(),
    ));
    let image_gc = Arc::new(ImageGcManager::new(
        cri.clone(),
        ImageGcPolicy {
            high_threshold_percent: config.image_gc_high_threshold_percent,
            low_threshold_percent: config.image_gc_low_threshold_percent,
            min_age: config.image_minimum_gc_age,
        },
    ));
    tasks.spawn(garbage_collection::container_gc_loop(container_gc.clone()));
    tasks.spawn(garbage_collection::image_gc_loop(image_gc.clone()));
    let (eviction_tx, eviction_rx) = mpsc::channel(8);
    let eviction_manager = Arc::new(EvictionManager::new(
        EvictionManagerConfig {
            thresholds,
            monitoring_period: config.eviction_monitoring_period,
            pressure_transition_period: config.eviction_pressure_transition_period,
            root_dir: config.root_dir.clone(),
            pod_logs_dir: config.pod_logs_dir.clone(),
        },
        cri.clone(),
        container_manager.clone(),
        image_gc,
        container_gc,
        evictions.clone(),
        active_pods,
        eviction_tx,
    ));
    tasks.spawn(eviction_manager.clone().run());
    tasks.spawn(logs::ContainerLogManager::new(cri.clone(), config.container_log).run());

    let (update_tx, update_rx) = mpsc::channel(64);
    let (snapshot_tx, snapshots) = mpsc::channel(4);
    let mut sources = Vec::new();
    // The API server's pods of this node, and the mirror pods of its static pods.
    let mirror_pods = Arc::new(config::apiserver::MirrorPods::default());
    if let Some(client) = &api {
        sources.push(config::apiserver::API_SOURCE);
        let source = config::apiserver::ApiSource::new(
            client.clone(),
            config.node_name.clone(),
            mirror_pods.clone(),
        );
        tasks.spawn(source.run(snapshot_tx.clone()));
        tasks.spawn(
            status::sync::StatusSync::new(
                client.clone(),
                status_manager.clone(),
                pod_manager.clone(),
                mirror_pods.clone(),
                pod_worker_states.clone(),
            )
            .run(),
        );
        tasks.spawn(
            mirror_pods::MirrorClient::new(
                client.clone(),
                config.node_name.clone(),
                pod_manager.clone(),
                mirror_pods.clone(),
                pod_worker_states.clone(),
                sources_ready.clone(),
            )
            .run(),
        );
    }
    if let Some(dir) = config.pod_manifest_path.clone() {
        info!(path = %dir.display(), "watching static pod manifests");
        sources.push(FILE_SOURCE);
        let source = FileSource::new(dir, config.node_name.clone(), config.file_check_frequency);
        tasks.spawn(source.run(snapshot_tx.clone()));
    }
    if let Some(url) = config.manifest_url.clone() {
        info!(url = %url, "polling the static pod manifest URL");
        sources.push(HTTP_SOURCE);
        let source = HttpSource::new(
            url,
            config.manifest_url_header.clone(),
            config.node_name.clone(),
            config.http_check_frequency,
        );
        tasks.spawn(source.run(snapshot_tx));
    }
    let ready = sources_ready.clone();
    tasks.spawn(async move { config::run(&sources, snapshots, update_tx, ready).await });

    let server_state = server::ServerState {
        pod_manager: pod_manager.clone(),
        status_manager,
        summary: stats::SummaryProvider::new(
            server_cri,
            config.node_name.clone(),
            config.root_dir.clone(),
            config.pod_logs_dir.clone(),
        )
        .with_pods_cgroup(config.cgroup_root.join("kubepods")),
        cri: server_cri_state,
        pod_logs_dir: config.pod_logs_dir.clone(),
        log_root: PathBuf::from("/var/log"),
    };
    // Node registration and status, the node Lease and the CSINode (upstream: whenever there is a
    // client; `registerNode` only decides the registration).
    if let Some(client) = &api {
        let pressure = eviction_manager.clone();
        let node_status = nodestatus::NodeStatusSync::new(nodestatus::NodeStatusInputs {
            client: client.clone(),
            config: config.clone(),
            cri: cri.clone(),
            runtime_name: version.runtime_name,
            runtime_version: version.runtime_version,
            capacity: container_manager.capacity().clone(),
            allocatable: container_manager.node_allocatable(),
            pressure: Arc::new(move || pressure.node_conditions()),
            pleg: pleg_health.clone(),
            node_ip: node_ip_addr,
            recorder: recorder.clone(),
        });
        // Upstream `Kubelet.Run`: `Starting kubelet.` on the Node.
        recorder.event(
            &events::node_ref(&config.node_name),
            events::EventType::Normal,
            events::STARTING_KUBELET,
            "Starting kubelet.",
        );
        tasks.spawn(node_status.run());
        let lease = nodelease::NodeLeaseController::new(
            client.clone(),
            &config.node_name,
            config.node_lease_duration_seconds,
        );
        tasks.spawn(lease.run());
        tasks.spawn(csinode::CsiNodeInitializer::new(client.clone(), &config.node_name).run());
    }
    serve_ports(
        &config,
        node_ip_addr,
        server_state,
        pleg_health,
        api.as_ref(),
        &mut tasks,
    )
    .await?;

    let (results_tx, results_rx) = mpsc::unbounded_channel();
    let pod_workers = PodWorkers::new(kubelet, results_tx, pod_worker_states);
    let inputs = SyncLoopInputs {
        updates: update_rx,
        pleg: pleg_rx,
        results: results_rx,
        probes: probe_updates,
        evictions: eviction_rx,
    };
    let admission = lifecycle::PodAdmission::new(lifecycle::AdmissionNode::from_config(
        &config,
        container_manager.node_allocatable(),
    ));
    SyncLoop::new(
        pod_manager,
        pod_workers,
        sources_ready,
        runtime_pods,
        evictions,
        container_manager,
    )
    .with_admission(admission)
    .run(inputs, shutdown)
    .await;
    tasks.shutdown().await;
    Ok(())
}

/// Serves the read-only port (plain HTTP) and the main port (HTTPS) on
/// `config.address`, each unless its port is 0.
///
/// Errors when a port cannot be bound, the serving certificate cannot be loaded or
/// created, or the client CA file cannot be read.
async fn serve_ports(
    config: &KubeletConfig,
    node_ip: IpAddr,
    state: server::ServerState,
    pleg_health: pleg::PlegHealth,
    api: Option<&kube::Client>,
    tasks: &mut JoinSet<()>,
) -> anyhow::Result<()> {
    if config.read_only_port != 0 {
        let addr = SocketAddr::new(config.address, config.read_only_port);
        let listener = server::bind(addr)
            .await
            .with_context(|| format!("binding read-only port {addr}"))?;
        info!(%addr, "serving read-only kubelet API");
        let app = server::router(state.clone()).merge(server::healthz::router(pleg_health.clone()));
        tasks.spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                warn!(error = %e, "read-only server stopped");
            }
        });
    }
    if config.port != 0 {
        let source = match (&config.tls_cert_file, &config.tls_private_key_file) {
            (Some(cert), Some(key)) => server::tls::CertSource::Files {
                cert: cert.clone(),
                key: key.clone(),
            },
            _ => server::tls::CertSource::SelfSigned {
                dir: config.root_dir.join("pki"),
                node_name: config.node_name.clone(),
                node_ip,
            },
        };
        // Authentication and authorization of the main port (upstream `BuildAuth`).
        let auth = server::auth::build(config, api)?;
        let tls = server::tls::server_config(&source, auth.client_verifier)?;
        let addr = SocketAddr::new(config.address, config.port);
        let listener = server::bind(addr)
            .await
            .with_context(|| format!("binding kubelet port {addr}"))?;
        info!(%addr, "serving kubelet API over HTTPS");
        let app = server::main_router(state)
            .merge(server::healthz::router(pleg_health))
            .layer(axum::middleware::from_fn_with_state(
                auth.auth,
                server::auth::filter,
            ));
        tasks.spawn(server::serve_tls(listener, tls, app));
    }
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
    use std::collections::BTreeMap;
    use std::time::Duration;

    use super::*;
    use cri::fake::FakeCri;

    /// Polls `check` for up to 10 s; fails at once with the kubelet's error if it ends.
    async fn wait_for(
        what: &str,
        kubelet: &mut tokio::task::JoinHandle<anyhow::Result<()>>,
        mut check: impl FnMut() -> bool,
    ) {
        for _ in 0..100 {
            if check() {
                return;
            }
            if kubelet.is_finished() {
                let ended = kubelet.await;
                panic!("the kubelet ended while waiting for {what}: {ended:?}");
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
            cgroups_per_qos: false,
            // No thresholds: the host's free disk must not decide whether this pod runs
            // (a CI checkout once left less than the default 10% and the pod was evicted).
            eviction_hard: BTreeMap::new(),
            ..KubeletConfig::default()
        };
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let mut kubelet = tokio::spawn(run(config, cri.clone(), async move {
            let _ = stop_rx.await;
        }));
        let running = |cri: &FakeCri| {
            cri.container_ids()
                .iter()
                .filter_map(|id| cri.container(id))
                .any(|c| c.state == k8s_cri::v1::ContainerState::ContainerRunning as i32)
        };
        wait_for("container running", &mut kubelet, || running(&cri)).await;
        std::fs::remove_file(&manifest).unwrap();
        wait_for("pod removed", &mut kubelet, || {
            cri.sandbox_count() == 0 && cri.container_ids().is_empty()
        })
        .await;
        let _ = stop_tx.send(());
        kubelet.await.unwrap().unwrap();
        // The rshared bind mount of the root directory stays after the kubelet, as upstream.
        let _ = volume::mount::unmount(&dir.path().join("root"));
    }
}
