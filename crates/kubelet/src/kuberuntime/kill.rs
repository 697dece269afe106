//! Stopping and removing a pod's runtime objects (upstream `killPodWithSyncResult`,
//! `killContainer`, `executePreStopHook`, and the pod cleanup the kubelet and its
//! garbage collector do).

use std::path::Path;
use std::time::{Duration, Instant};

use futures::future::join_all;
use k8s_cri::v1::{
    ContainerFilter, ContainerState, ContainerStatusRequest, ListContainersRequest,
    PodSandboxStatusRequest, RemoveContainerRequest, RemovePodSandboxRequest, StopContainerRequest,
    StopPodSandboxRequest,
};
use k8s_openapi::api::core::v1::{ContainerPort, LifecycleHandler, Pod};
use tracing::{info, warn};

use super::KubeGenericRuntimeManager;
use super::labels::{
    CONTAINER_PORTS_ANNOTATION, CONTAINER_PRE_STOP_HANDLER_ANNOTATION, POD_NAME_LABEL,
    POD_NAMESPACE_LABEL, POD_UID_LABEL,
};
use super::lifecycle::{HookTarget, format_pod, run_handler};
use super::pod_status::{ContainerStatus, PodStatus};
use super::sandbox::pod_log_directory;
use super::termination_order::termination_order;
use crate::error::{Error, Result};
use crate::events::{self, EventType};

/// Shortest grace period given to a container (upstream `minimumGracePeriodInSeconds`).
const MIN_GRACE_PERIOD: i64 = 2;

impl KubeGenericRuntimeManager {
    /// Stops one container of `pod` gracefully: records the `Killing` event (`why`, or
    /// "Stopping container <name>" when empty), runs its preStop hook (from the
    /// container's annotations) for at most `grace_period` seconds, then StopContainer
    /// with what is left of the grace period (at least 2 s): the runtime sends the image's
    /// StopSignal or SIGTERM, and SIGKILL when that time is up.
    pub(crate) async fn kill_container(
        &self,
        pod: &Pod,
        id: &str,
        name: &str,
        grace_period: i64,
        why: &str,
    ) -> Result<()> {
        let message = if why.is_empty() {
            format!("Stopping container {name}")
        } else {
            why.to_owned()
        };
        info!(container = %name, id = %id, grace_period, reason = %message, "killing container");
        self.recorder.container_event(
            pod,
            name,
            id,
            EventType::Normal,
            events::KILLING_CONTAINER,
            &message,
        );
        let mut remaining = grace_period;
        if remaining > 0 {
            remaining -= self.execute_pre_stop_hook(pod, id, name, remaining).await;
        }
        self.cri
            .stop_container(StopContainerRequest {
                container_id: id.to_owned(),
                timeout: remaining.max(MIN_GRACE_PERIOD),
            })
            .await
            .map(|_| ())
            .map_err(|e| {
                Error::Runtime(format!("stopping container {name} ({id}): {}", e.message()))
            })
    }

    /// Runs the preStop hook of running container `id`, if it has one, waiting at most
    /// `grace_period` seconds; returns the whole seconds it took. A failed hook is logged
    /// and recorded as a `FailedPreStopHook` event (without the hook's message, which could
    /// leak secrets); the container is stopped anyway.
    async fn execute_pre_stop_hook(
        &self,
        pod: &Pod,
        id: &str,
        name: &str,
        grace_period: i64,
    ) -> i64 {
        let req = ContainerStatusRequest {
            container_id: id.to_owned(),
            verbose: false,
        };
        let Some(status) = self
            .cri
            .container_status(req)
            .await
            .ok()
            .and_then(|r| r.status)
            .filter(|s| s.state == ContainerState::ContainerRunning as i32)
        else {
            return 0;
        };
        let Some(handler) = status
            .annotations
            .get(CONTAINER_PRE_STOP_HANDLER_ANNOTATION)
            .and_then(|json| serde_json::from_str::<LifecycleHandler>(json).ok())
        else {
            return 0;
        };
        let ports: Vec<ContainerPort> = status
            .annotations
            .get(CONTAINER_PORTS_ANNOTATION)
            .and_then(|json| serde_json::from_str(json).ok())
            .unwrap_or_default();
        let label = |key: &str| status.labels.get(key).map_or("", String::as_str);
        let pod_name = format_pod(
            label(POD_NAME_LABEL),
            label(POD_NAMESPACE_LABEL),
            label(POD_UID_LABEL),
        );
        let needs_pod_ip = handler
            .http_get
            .as_ref()
            .is_some_and(|g| g.host.as_deref().unwrap_or("").is_empty());
        let pod_ip = if needs_pod_ip {
            self.container_pod_ip(id).await
        } else {
            None
        };
        let target = HookTarget {
            container_id: id,
            container_name: name,
            pod: &pod_name,
            pod_ip: pod_ip.as_deref(),
            ports: &ports,
        };
        let start = Instant::now();
        let grace = Duration::from_secs(grace_period.max(0) as u64);
        match tokio::time::timeout(grace, run_handler(&*self.cri, &handler, &target)).await {
            Ok(Ok(())) => {}
            Ok(Err(message)) => {
                warn!(container = %name, pod = %pod_name, error = %message, "PreStopHook failed");
                self.recorder.container_event(
                    pod,
                    name,
                    id,
                    EventType::Warning,
                    events::FAILED_PRE_STOP_HOOK,
                    "PreStopHook failed",
                );
            }
            Err(_) => {
                info!(container = %name, pod = %pod_name, grace_period, "PreStop hook not completed in grace period");
            }
        }
        start.elapsed().as_secs() as i64
    }

    /// The primary IP of the sandbox of container `id`, if it has one.
    async fn container_pod_ip(&self, id: &str) -> Option<String> {
        let containers = self
            .cri
            .list_containers(ListContainersRequest {
                filter: Some(ContainerFilter {
                    id: id.to_owned(),
                    ..Default::default()
                }),
            })
            .await
            .ok()?
            .containers;
        let sandbox_id = containers.into_iter().next()?.pod_sandbox_id;
        let req = PodSandboxStatusRequest {
            pod_sandbox_id: sandbox_id,
            verbose: false,
        };
        let ip = self
            .cri
            .pod_sandbox_status(req)
            .await
            .ok()?
            .status?
            .network?
            .ip;
        (!ip.is_empty()).then_some(ip)
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
                .map(|c| self.kill_container(pod, &c.id, &c.name, grace, ""));
            errors.extend(
                join_all(stops)
                    .await
                    .into_iter()
                    .filter_map(|r| r.err().map(|e| e.to_string())),
            );
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

    /// Removes a killed pod: its containers, sandboxes, log directory
    /// (`<pod_logs_dir>/<ns>_<name>_<uid>`) and termination message files
    /// (`<root>/pods/<uid>/containers`); the container manager removes its cgroup.
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
        // The termination message files; the pod directory goes too once it is empty.
        let pod_dir = self.config.pod_dirs.pod_dir(&status.uid);
        remove_dir_if_present(&pod_dir.join("containers"), &mut errors);
        let _ = std::fs::remove_dir(&pod_dir);
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
