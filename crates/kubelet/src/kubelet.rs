//! The per-pod work the pod workers run (upstream `kubelet.go` `SyncPod` and
//! `SyncTerminatingPod`): sync the runtime to the spec and publish the pod status.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use tracing::warn;

use crate::kuberuntime::KubeGenericRuntimeManager;
use crate::kuberuntime::labels::termination_grace_period;
use crate::reason_cache::ReasonCache;
use crate::status::StatusManager;
use crate::status::generate::{StatusContext, generate_api_pod_status};
use crate::volume::VolumeManager;

/// Resync delay after a failed sync (upstream `backOffPeriod`).
pub const BACKOFF_PERIOD: Duration = Duration::from_secs(10);

/// Shared state of the pod workers.
pub struct Kubelet {
    /// The runtime manager.
    pub runtime: Arc<KubeGenericRuntimeManager>,
    /// Latest API statuses.
    pub status_manager: Arc<StatusManager>,
    /// Last start failures.
    pub reasons: ReasonCache,
    /// The node's IP.
    pub node_ip: String,
    /// Runtime name from CRI Version (for container IDs).
    pub runtime_name: String,
    /// Resync period of a healthy pod.
    pub sync_frequency: Duration,
    /// Sets up pod volumes before containers start and tears them down after.
    pub volume_manager: Arc<VolumeManager>,
}

fn uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or("")
}

impl Kubelet {
    /// Syncs one pod and updates its status; returns when it should be synced again
    /// (the sync frequency, or sooner after a failure or backoff).
    pub async fn sync_pod(&self, pod: &Pod) -> Duration {
        let uid = uid(pod);
        let name = pod.metadata.name.as_deref().unwrap_or("");
        let before = match self.runtime.get_pod_status(uid).await {
            Ok(status) => status,
            Err(e) => {
                warn!(pod = %name, error = %e.message(), "cannot read pod status from the runtime");
                return BACKOFF_PERIOD;
            }
        };
        // Upstream `WaitForAttachAndMount`: no container starts before its volumes exist;
        // the status still shows the pod (its containers ContainerCreating).
        if let Err(e) = self.volume_manager.wait_for_attach_and_mount(pod) {
            warn!(pod = %name, error = %format!("unable to attach or mount volumes: {e}"), "Unable to attach or mount volumes for pod; skipping pod");
            let ctx = StatusContext {
                host_ip: &self.node_ip,
                runtime_name: &self.runtime_name,
                reasons: &self.reasons,
            };
            self.status_manager
                .set_pod_status(uid, generate_api_pod_status(pod, &before, &ctx));
            return BACKOFF_PERIOD;
        }
        let result = self.runtime.sync_pod(pod, &before).await;
        self.reasons.update(uid, &result);
        let after = self.runtime.get_pod_status(uid).await.unwrap_or(before);
        let ctx = StatusContext {
            host_ip: &self.node_ip,
            runtime_name: &self.runtime_name,
            reasons: &self.reasons,
        };
        self.status_manager
            .set_pod_status(uid, generate_api_pod_status(pod, &after, &ctx));
        if !result.failed() {
            return self.sync_frequency;
        }
        if !result.errors.is_empty() {
            warn!(pod = %name, error = %result.error_message(), "error syncing pod");
        }
        result.retry_after.map_or(BACKOFF_PERIOD, |r| {
            r.clamp(Duration::from_secs(1), BACKOFF_PERIOD)
        })
    }

    /// Stops all containers and sandboxes of the pod (grace period `grace_override` or
    /// the pod's), removes them, its log directory and cgroup, and forgets its status.
    /// Returns false when something could not be cleaned up.
    pub async fn sync_terminating_pod(&self, pod: &Pod, grace_override: Option<i64>) -> bool {
        let uid = uid(pod);
        let name = pod.metadata.name.as_deref().unwrap_or("");
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
        let grace = grace_override.unwrap_or_else(|| termination_grace_period(pod));
        let status = match self.runtime.get_pod_status(uid).await {
            Ok(status) => status,
            Err(e) => {
                warn!(pod = %name, error = %e.message(), "cannot read pod status to terminate it");
                return false;
            }
        };
        let mut errors = self.runtime.kill_pod(&status, grace).await;
        let stopped = self.runtime.get_pod_status(uid).await.unwrap_or(status);
        errors.extend(self.runtime.remove_pod(&stopped, namespace, name).await);
        // Volumes go once no container uses them (upstream: the volume manager unmounts
        // the volumes of terminated pods).
        if errors.is_empty()
            && let Err(e) = self.volume_manager.unmount_pod_volumes(uid)
        {
            errors.push(e);
        }
        self.reasons.remove_pod(uid);
        self.status_manager.remove_pod(uid);
        if !errors.is_empty() {
            warn!(pod = %name, error = %errors.join("; "), "pod termination incomplete");
        }
        errors.is_empty()
    }
}
