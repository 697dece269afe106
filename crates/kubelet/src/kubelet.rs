//! The per-pod work the pod workers run (upstream `kubelet.go` `SyncPod` and
//! `SyncTerminatingPod`): sync the runtime to the spec and publish the pod status.

use std::sync::Arc;
use std::time::Duration;

use k8s_cri::v1::ContainerState;
use k8s_openapi::api::core::v1::Pod;
use tracing::{info, warn};

use crate::active_deadline;
use crate::cm::ContainerManager;
use crate::eviction::{self, EvictedPods};
use crate::kuberuntime::KubeGenericRuntimeManager;
use crate::kuberuntime::labels::termination_grace_period;
use crate::kuberuntime::pod_status::PodStatus;
use crate::prober::ProbeManager;
use crate::prober::managers::ResultsManagers;
use crate::prober::results::ProbeResults;
use crate::reason_cache::ReasonCache;
use crate::status::generate::{StatusContext, generate_api_pod_status, mark_failed};
use crate::status::{StatusManager, is_terminal};
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
    /// Pod cgroups.
    pub container_manager: Arc<ContainerManager>,
    /// Evictions requested by the eviction manager.
    pub evictions: Arc<EvictedPods>,
    /// Probe workers of the pods' containers.
    pub probe_manager: ProbeManager,
    /// Latest liveness, readiness and startup results.
    pub probe_results: ProbeResults,
    /// Sets up pod volumes before containers start and tears them down after.
    pub volume_manager: Arc<VolumeManager>,
}

fn uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or("")
}

impl Kubelet {
    /// Syncs one pod and updates its status; returns when it should be synced again
    /// (the sync frequency, or sooner after a failure, a backoff, or before the pod's
    /// active deadline). A pod that finished (Succeeded or Failed) or passed its
    /// `activeDeadlineSeconds` is only kept stopped: it fails with reason
    /// DeadlineExceeded in the latter case (upstream `activeDeadlineHandler`).
    pub async fn sync_pod(&self, pod: &Pod) -> Duration {
        let uid = uid(pod);
        let name = pod.metadata.name.as_deref().unwrap_or("");
        if self.evictions.is_evicted(uid) {
            // An evicted pod stays terminated with its Failed status.
            return self.sync_frequency;
        }
        let before = match self.runtime.get_pod_status(uid).await {
            Ok(status) => status,
            Err(e) => {
                warn!(pod = %name, error = %e.message(), "cannot read pod status from the runtime");
                return BACKOFF_PERIOD;
            }
        };
        let probes = self.probe_results.managers();
        let previous = match self.status_manager.get_pod_status(uid) {
            Some(previous) => previous,
            None => {
                // Upstream publishes the status before starting anything: startTime (from
                // which the active deadline counts) comes first.
                let status = generate_api_pod_status(pod, &before, &self.status_context(probes));
                self.status_manager.set_pod_status(uid, status);
                self.status_manager.get_pod_status(uid).unwrap_or_default()
            }
        };
        let deadline_left =
            active_deadline::time_left(pod, previous.start_time.as_ref(), crate::status::now());
        let past_deadline = deadline_left == Some(Duration::ZERO);
        if past_deadline || is_terminal(&previous) {
            self.keep_stopped(pod, before, past_deadline, &probes).await;
            return self.sync_frequency;
        }
        if let Err(e) = self.container_manager.ensure_pod_cgroup(pod) {
            warn!(pod = %name, error = %format!("{e:#}"), "failed to ensure that the pod cgroups exist");
            return BACKOFF_PERIOD;
        }
        // Upstream `WaitForAttachAndMount`: no container starts before its volumes exist;
        // the status still shows the pod (its containers ContainerCreating).
        if let Err(e) = self.volume_manager.wait_for_attach_and_mount(pod) {
            // The reconciler's event per volume that failed (upstream
            // `MountVolume.SetUp failed for volume "v" : ...`).
            for (_, message) in e.unmounted.iter().chain(&e.failed_to_process) {
                self.runtime.recorder().pod_event(
                    pod,
                    crate::events::EventType::Warning,
                    crate::events::FAILED_MOUNT_VOLUME,
                    message,
                );
            }
            warn!(pod = %name, error = %format!("unable to attach or mount volumes: {e}"), "Unable to attach or mount volumes for pod; skipping pod");
            self.status_manager.set_pod_status(
                uid,
                generate_api_pod_status(pod, &before, &self.status_context(probes)),
            );
            return BACKOFF_PERIOD;
        }
        let result = self.runtime.sync_pod(pod, &before, &probes).await;
        self.reasons.update(uid, &result);
        let after = self.runtime.get_pod_status(uid).await.unwrap_or(before);
        self.status_manager.set_pod_status(
            uid,
            generate_api_pod_status(pod, &after, &self.status_context(probes)),
        );
        // After the status: new workers see the containers at once.
        self.probe_manager.add_pod(pod);
        let next = if !result.failed() {
            self.sync_frequency
        } else {
            if !result.errors.is_empty() {
                warn!(pod = %name, error = %result.error_message(), "error syncing pod");
            }
            result.retry_after.map_or(BACKOFF_PERIOD, |r| {
                r.clamp(Duration::from_secs(1), BACKOFF_PERIOD)
            })
        };
        deadline_left.map_or(next, |left| next.min(left))
    }

    fn status_context<'a>(&'a self, probes: ResultsManagers<'a>) -> StatusContext<'a> {
        StatusContext {
            host_ip: &self.node_ip,
            runtime_name: &self.runtime_name,
            reasons: &self.reasons,
            probes,
        }
    }

    /// Stops whatever still runs of a finished pod (keeping it listed) and publishes its
    /// status: Failed with DeadlineExceeded when `past_deadline`.
    async fn keep_stopped(
        &self,
        pod: &Pod,
        status: PodStatus,
        past_deadline: bool,
        probes: &ResultsManagers<'_>,
    ) {
        let uid = uid(pod);
        let live = status
            .containers
            .iter()
            .any(|c| c.state != ContainerState::ContainerExited)
            || status.sandbox_ready();
        let status = if live {
            if past_deadline {
                info!(
                    pod = pod.metadata.name.as_deref().unwrap_or(""),
                    "pod passed its active deadline; killing it"
                );
            }
            let errors = self
                .runtime
                .kill_pod(pod, &status, termination_grace_period(pod))
                .await;
            if !errors.is_empty() {
                warn!(error = %errors.join("; "), "stopping a finished pod");
            }
            self.runtime.get_pod_status(uid).await.unwrap_or(status)
        } else {
            status
        };
        let mut api_status = generate_api_pod_status(pod, &status, &self.status_context(*probes));
        if past_deadline {
            mark_failed(
                &mut api_status,
                active_deadline::DEADLINE_EXCEEDED_REASON,
                active_deadline::DEADLINE_EXCEEDED_MESSAGE,
            );
        }
        self.status_manager.set_pod_status(uid, api_status);
    }

    /// Stops all containers and sandboxes of the pod (grace period `grace_override` or
    /// the pod's), removes them, its log directory and cgroup, and forgets its status,
    /// unless the pod is being evicted: then its status becomes Failed with reason
    /// `Evicted` (upstream `SyncTerminatingPod` with the eviction's status function).
    /// Returns false when something could not be cleaned up.
    pub async fn sync_terminating_pod(&self, pod: &Pod, grace_override: Option<i64>) -> bool {
        let uid = uid(pod);
        let name = pod.metadata.name.as_deref().unwrap_or("");
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
        let grace = grace_override.unwrap_or_else(|| termination_grace_period(pod));
        self.probe_manager.remove_pod(uid);
        let status = match self.runtime.get_pod_status(uid).await {
            Ok(status) => status,
            Err(e) => {
                warn!(pod = %name, error = %e.message(), "cannot read pod status to terminate it");
                return false;
            }
        };
        let mut errors = self.runtime.kill_pod(pod, &status, grace).await;
        let stopped = self.runtime.get_pod_status(uid).await.unwrap_or(status);
        match self.evictions.message(uid) {
            Some(message) => {
                let ctx = self.status_context(self.probe_results.managers());
                let mut status = generate_api_pod_status(pod, &stopped, &ctx);
                evicted_status(&mut status, message);
                self.status_manager.set_pod_status(uid, status);
                self.evictions.complete(uid);
            }
            None => self.status_manager.remove_pod(uid),
        }
        errors.extend(self.runtime.remove_pod(&stopped, namespace, name).await);
        if let Err(e) = self.container_manager.destroy_pod_cgroup(uid) {
            errors.push(format!("{e:#}"));
        }
        // The Burstable tier's shares shrink with the pod gone (upstream
        // `UpdateQOSCgroups` in `SyncTerminatedPod`).
        if let Err(e) = self.container_manager.update_qos_cgroups() {
            warn!(error = %format!("{e:#}"), "updating the QoS cgroups");
        }
        // Volumes go once no container uses them (upstream: the volume manager unmounts
        // the volumes of terminated pods).
        if errors.is_empty()
            && let Err(e) = self.volume_manager.unmount_pod_volumes(uid)
        {
            errors.push(e.to_string());
        }
        self.reasons.remove_pod(uid);
        if !errors.is_empty() {
            warn!(pod = %name, error = %errors.join("; "), "pod termination incomplete");
        }
        errors.is_empty()
    }
}

/// Turns a terminated pod's status into an evicted one (upstream eviction `statusFn`):
/// phase Failed, reason `Evicted`, the eviction message, and a `DisruptionTarget`
/// condition with reason `TerminationByKubelet`.
fn evicted_status(status: &mut k8s_openapi::api::core::v1::PodStatus, message: String) {
    use k8s_openapi::api::core::v1::PodCondition;
    status.phase = Some("Failed".to_owned());
    status.reason = Some(eviction::REASON.to_owned());
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    conditions.retain(|c| c.type_ != eviction::DISRUPTION_TARGET);
    conditions.push(PodCondition {
        type_: eviction::DISRUPTION_TARGET.to_owned(),
        status: "True".to_owned(),
        reason: Some(eviction::TERMINATION_BY_KUBELET.to_owned()),
        message: Some(message.clone()),
        ..Default::default()
    });
    status.message = Some(message);
}
