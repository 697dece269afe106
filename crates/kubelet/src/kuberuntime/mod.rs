//! The runtime manager (upstream `pkg/kubelet/kuberuntime`): turns pod specs into CRI
//! calls: sandboxes, image pulls, containers, kills, and reads pod state back.

pub mod backoff;
pub mod container;
pub mod container_linux;
pub mod dns;
pub mod env;
pub mod envvars;
pub mod gc;
pub mod image;
pub mod image_ref;
pub mod insecure_tls;
pub mod keyring;
pub mod kill;
pub mod labels;
pub mod lifecycle;
pub mod pod_actions;
pub mod pod_status;
pub mod sandbox;
pub mod sync;
pub mod sync_result;
pub mod termination_message;
pub mod termination_order;

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::cri::Cri;
use crate::events::EventRecorder;
use crate::pod_dirs::PodDirs;
use crate::volume::VolumeManager;
use backoff::Backoff;
use dns::DnsConfigurer;
use env::NodeAllocatable;
use image::ImageManager;
use pod_status::PodStatus;

/// Node-level settings of the runtime manager.
#[derive(Debug, Clone)]
pub struct RuntimeManagerConfig {
    /// Root of pod log directories (`/var/log/pods`).
    pub pod_logs_dir: PathBuf,
    /// cgroup root under which `kubepods` lives (`/`).
    pub cgroup_root: PathBuf,
    /// The node's IP (for `status.hostIP` env vars).
    pub node_ip: String,
    /// The host resolv.conf used for pod DNS (`--resolv-conf`); empty: none.
    pub resolv_conf: PathBuf,
    /// Nameservers of cluster-DNS pods (`--cluster-dns`).
    pub cluster_dns: Vec<IpAddr>,
    /// The cluster's DNS domain (`--cluster-domain`); empty: no cluster searches.
    pub cluster_domain: String,
    /// Machine memory in bytes.
    pub memory_capacity: i64,
    /// The kubelet's pod directories (termination message files live in
    /// `pod_container_dir`).
    pub pod_dirs: PodDirs,
    /// The node's allocatable resources (defaults of `resourceFieldRef` limits).
    pub allocatable: NodeAllocatable,
}

/// The kuberuntime manager: SyncPod, KillPod and GetPodStatus over a [`Cri`].
pub struct KubeGenericRuntimeManager {
    cri: Arc<dyn Cri>,
    config: RuntimeManagerConfig,
    image_manager: ImageManager,
    crash_backoff: Mutex<Backoff>,
    /// Where the pods' set-up volumes are; without one, no volume can be mounted.
    volume_manager: Option<Arc<VolumeManager>>,
    /// Where the runtime manager's events go (log-only by default).
    recorder: EventRecorder,
    /// ConfigMaps, Secrets and Services of container environments (standalone by
    /// default).
    objects: Arc<dyn crate::objects::ObjectSource>,
    /// Pod DNS of the sandboxes.
    dns: DnsConfigurer,
}

impl KubeGenericRuntimeManager {
    /// A manager driving `cri`.
    pub fn new(cri: Arc<dyn Cri>, config: RuntimeManagerConfig) -> Self {
        let dns = DnsConfigurer::new(
            config.cluster_dns.clone(),
            config.cluster_domain.clone(),
            config.resolv_conf.clone(),
            config.node_ip.parse().into_iter().collect(),
        );
        Self {
            cri,
            dns,
            recorder: EventRecorder::default(),
            config,
            image_manager: ImageManager::default(),
            crash_backoff: Mutex::new(Backoff::default()),
            volume_manager: None,
            objects: Arc::new(crate::objects::Standalone),
        }
    }

    /// This manager, resolving `envFrom`, `configMapKeyRef`, `secretKeyRef` and service
    /// variables through `objects`.
    pub fn with_object_source(mut self, objects: Arc<dyn crate::objects::ObjectSource>) -> Self {
        self.objects = objects;
        self
    }

    /// This manager, mounting the volumes that `volume_manager` set up into containers.
    pub fn with_volume_manager(mut self, volume_manager: Arc<VolumeManager>) -> Self {
        self.volume_manager = Some(volume_manager);
        self
    }

    /// This manager, recording its events (Pulled, Created, Started, Killing, ...)
    /// through `recorder`.
    pub fn with_recorder(mut self, recorder: EventRecorder) -> Self {
        self.recorder = recorder;
        self
    }

    /// The event recorder of this manager.
    pub fn recorder(&self) -> &EventRecorder {
        &self.recorder
    }

    /// The pod's sandboxes and containers as the runtime reports them.
    pub async fn get_pod_status(&self, uid: &str) -> Result<PodStatus, tonic::Status> {
        pod_status::get_pod_status(&*self.cri, uid).await
    }

    fn lock_crash_backoff(&self) -> MutexGuard<'_, Backoff> {
        self.crash_backoff
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests;
