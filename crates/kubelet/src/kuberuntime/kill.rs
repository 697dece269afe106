//! Stopping and removing a pod's runtime objects (upstream `killPodWithSyncResult`,
//! `killContainer`, and the pod cleanup the kubelet and its garbage collector do).

use std::path::Path;
use std::time::Instant;

use futures::future::join_all;
use k8s_cri::v1::{
    ContainerState, RemoveContainerRequest, RemovePodSandboxRequest, StopContainerRequest,
    StopPodSandboxRequest,
};
use k8s_openapi::api::core::v1::Pod;
use tracing::{info, warn};

use super::KubeGenericRuntimeManager;
use super::pod_status::{ContainerStatus, PodStatus};
use super::sandbox::pod_log_directory;
use super::termination_order::termination_order;

/// Shortest grace period given to a container (upstream `minimumGracePeriodInSeconds`).
const MIN_GRACE_PERIOD: i64 = 2;

impl KubeGenericRuntimeManager {
    /// Stops one container, giving it `grace_period` seconds (at least 2) before SIGKILL.
    pub(crate) async fn kill_container(
        &self,
        id: &str,
        name: &str,
        grace_period: i64,
        why: &str,
    ) -> Result<(), String> {
        info!(container = %name, id = %id, grace_period, reason = %why, "killing container");
        self.cri
            .stop_container(StopContainerRequest {
                container_id: id.to_owned(),
                timeout: grace_period.max(MIN_GRACE_PERIOD),
            })
            .await
            .map(|_| ())
            .map_err(|e| format!("stopping container {name} ({id}): {}", e.message()))
    }

    /// Stops every running or created container of the pod with `grace_period`: the
    /// regular containers in parallel, then the native sidecars of `pod` one by one in
    /// reverse order with what is left of the grace period (see [`termination_order`]);
    /// then stops all its sandboxes. Returns the failures.
    pub async fn kill_pod(&self, pod: &Pod, status: &PodStatus, grace_period: i64) -> Vec<String> {
        let live: Vec<&ContainerStatus> = status
            .containers
            .iter()
            .filter(|c| {
                matches!(
                    c.state,
                    ContainerState::ContainerRunning
                        | ContainerState::ContainerCreated
                        | ContainerState::ContainerUnknown
                )
            })
            .collect();
        let started = Instant::now();
        let mut errors = Vec::new();
        for round in termination_order(pod, &live) {
            let elapsed = i64::try_from(started.elapsed().as_secs()).unwrap_or(i64::MAX);
            let grace = grace_period.saturating_sub(elapsed);
            let stops = round
                .iter()
                .map(|c| self.kill_container(&c.id, &c.name, grace, "pod is being killed"));
            errors.extend(join_all(stops).await.into_iter().filter_map(Result::err));
        }
        for sandbox in &status.sandboxes {
            let req = StopPodSandboxRequest {
                pod_sandbox_id: sandbox.id.clone(),
            };
            if let Err(e) = self.cri.stop_pod_sandbox(req).await {
                errors.push(format!("stopping sandbox {}: {}", sandbox.id, e.message()));
            }
        }
        errors
    }

    /// Removes a killed pod: its containers, sandboxes and log directory
    /// (`<pod_logs_dir>/<ns>_<name>_<uid>`); the container manager removes its cgroup.
    /// `namespace`/`name` are used when no sandbox tells them. Returns the failures.
    pub async fn remove_pod(&self, status: &PodStatus, namespace: &str, name: &str) -> Vec<String> {
        let mut errors = Vec::new();
        for c in &status.containers {
            if let Err(e) = self
                .cri
                .remove_container(RemoveContainerRequest {
                    container_id: c.id.clone(),
                })
                .await
            {
                errors.push(format!("removing container {}: {}", c.id, e.message()));
            }
        }
        let mut log_dirs = vec![pod_log_directory(
            &self.config.pod_logs_dir,
            namespace,
            name,
            &status.uid,
        )];
        for sandbox in &status.sandboxes {
            if let Some(m) = sandbox.metadata.as_ref() {
                log_dirs.push(pod_log_directory(
                    &self.config.pod_logs_dir,
                    &m.namespace,
                    &m.name,
                    &status.uid,
                ));
            }
            if let Err(e) = self
                .cri
                .remove_pod_sandbox(RemovePodSandboxRequest {
                    pod_sandbox_id: sandbox.id.clone(),
                })
                .await
            {
                errors.push(format!("removing sandbox {}: {}", sandbox.id, e.message()));
            }
        }
        log_dirs.dedup();
        for dir in log_dirs {
            remove_dir_if_present(&dir, &mut errors);
        }
        if !errors.is_empty() {
            warn!(uid = %status.uid, errors = %errors.join("; "), "pod cleanup incomplete");
        }
        errors
    }
}

fn remove_dir_if_present(dir: &Path, errors: &mut Vec<String>) {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            errors.push(format!("removing {}: {e}", dir.display()));
        }
        _ => {}
    }
}
