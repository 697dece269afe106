//! SyncPod (upstream `kubeGenericRuntimeManager.SyncPod`): apply the computed actions.

use k8s_cri::v1::{PodSandboxStatusRequest, RunPodSandboxRequest};
use k8s_openapi::api::core::v1::{Container, Pod};
use tracing::{info, warn};

use super::KubeGenericRuntimeManager;
use super::labels::termination_grace_period;
use super::lifecycle::format_pod_object;
use super::pod_actions::{
    compute_pod_actions, containers, init_containers, is_restartable_init_container,
};
use super::pod_status::PodStatus;
use super::sandbox::generate_pod_sandbox_config;
use super::sync_result::PodSyncResult;
use crate::events::{self, EventType};
use crate::prober::managers::ResultsManagers;

impl KubeGenericRuntimeManager {
    /// Brings the pod's runtime state to its spec: kills the pod or the containers that
    /// must go, creates a sandbox when needed (and its log directory), then starts each
    /// init container due to start (in order; a regular one that fails to start stops the
    /// sync), then each container due to start, honouring crash-loop and image-pull
    /// backoff. `probes` gives the liveness and startup results (see
    /// [`compute_pod_actions`]).
    pub async fn sync_pod(
        &self,
        pod: &Pod,
        status: &PodStatus,
        probes: &ResultsManagers<'_>,
    ) -> PodSyncResult {
        let actions = compute_pod_actions(pod, status, probes);
        let mut result = PodSyncResult::default();
        let grace = termination_grace_period(pod);
        let pod_name = pod.metadata.name.clone().unwrap_or_default();
        if actions.create_sandbox && !actions.sandbox_id.is_empty() {
            self.recorder.pod_event(
                pod,
                EventType::Normal,
                events::SANDBOX_CHANGED,
                "Pod sandbox changed, it will be killed and re-created.",
            );
        }
        if actions.kill_pod {
            if !status.sandboxes.is_empty() || !status.containers.is_empty() {
                info!(pod = %pod_name, "killing pod: sandbox changed or nothing left to run");
                result
                    .errors
                    .extend(self.kill_pod(pod, status, grace).await);
            }
            if !actions.create_sandbox {
                return result;
            }
        } else {
            for kill in &actions.containers_to_kill {
                if let Err(e) = self
                    .kill_container(pod, &kill.id, &kill.name, grace, &kill.message)
                    .await
                {
                    result.errors.push(e.to_string());
                }
            }
        }
        let dns_config = match self.dns.get_pod_dns(pod, &self.recorder) {
            Ok(dns_config) => dns_config,
            Err(e) => {
                warn!(pod = %pod_name, error = %e, "Failed to generate sandbox config for pod");
                if actions.create_sandbox {
                    self.record_failed_create_sandbox(pod, &e.to_string());
                }
                result.errors.push(format!(
                    "GeneratePodSandboxConfig for pod {:?} failed: {e}",
                    format_pod_object(pod)
                ));
                return result;
            }
        };
        let sandbox_config = generate_pod_sandbox_config(
            pod,
            actions.attempt,
            &self.config.pod_logs_dir,
            &self.config.cgroup_root,
            dns_config,
        );
        let mut sandbox_id = actions.sandbox_id.clone();
        let mut pod_ips = status.ips.clone();
        if actions.create_sandbox {
            if let Err(e) = std::fs::create_dir_all(&sandbox_config.log_directory) {
                self.record_failed_create_sandbox(pod, &e.to_string());
                result.errors.push(format!(
                    "creating pod log directory {}: {e}",
                    sandbox_config.log_directory
                ));
                return result;
            }
            let req = RunPodSandboxRequest {
                config: Some(sandbox_config.clone()),
                runtime_handler: String::new(),
            };
            match self.cri.run_pod_sandbox(req).await {
                Ok(resp) => sandbox_id = resp.pod_sandbox_id,
                Err(e) => {
                    warn!(pod = %pod_name, error = %e.message(), "RunPodSandbox failed");
                    self.record_failed_create_sandbox(pod, e.message());
                    result
                        .errors
                        .push(format!("creating pod sandbox: {}", e.message()));
                    return result;
                }
            }
            info!(pod = %pod_name, sandbox = %sandbox_id, attempt = actions.attempt, "created pod sandbox");
            let req = PodSandboxStatusRequest {
                pod_sandbox_id: sandbox_id.clone(),
                verbose: false,
            };
            pod_ips = match self.cri.pod_sandbox_status(req).await {
                Ok(resp) => resp
                    .status
                    .and_then(|s| s.network)
                    .map(|n| {
                        std::iter::once(n.ip)
                            .chain(n.additional_ips.into_iter().map(|i| i.ip))
                            .filter(|ip| !ip.is_empty())
                            .collect()
                    })
                    .unwrap_or_default(),
                Err(e) => {
                    result
                        .errors
                        .push(format!("reading new sandbox status: {}", e.message()));
                    return result;
                }
            };
        }
        let start = StartContext {
            sandbox_id: &sandbox_id,
            sandbox_config: &sandbox_config,
            status,
            pod_ips: &pod_ips,
        };
        let inits = init_containers(pod);
        for index in &actions.init_containers_to_start {
            let Some(container) = inits.get(*index) else {
                continue;
            };
            let failed = !self.start_one(pod, container, &start, &mut result).await;
            if failed && !is_restartable_init_container(container) {
                // The pod cannot initialize further until this one runs.
                return result;
            }
        }
        let containers = containers(pod);
        for index in &actions.containers_to_start {
            if let Some(container) = containers.get(*index) {
                self.start_one(pod, container, &start, &mut result).await;
            }
        }
        result
    }
}

impl KubeGenericRuntimeManager {
    /// The `FailedCreatePodSandBox` warning of upstream's SyncPod.
    fn record_failed_create_sandbox(&self, pod: &Pod, error: &str) {
        self.recorder.pod_event(
            pod,
            EventType::Warning,
            events::FAILED_CREATE_POD_SANDBOX,
            &format!("Failed to create pod sandbox: {error}"),
        );
    }
}

/// Where the containers of one SyncPod are started.
struct StartContext<'a> {
    sandbox_id: &'a str,
    sandbox_config: &'a k8s_cri::v1::PodSandboxConfig,
    status: &'a PodStatus,
    pod_ips: &'a [String],
}

impl KubeGenericRuntimeManager {
    /// Starts `container` unless its crash-loop backoff holds it back; records the
    /// outcome (and the backoff's time left) in `result`. Returns true when it started.
    async fn start_one(
        &self,
        pod: &Pod,
        container: &Container,
        ctx: &StartContext<'_>,
        result: &mut PodSyncResult,
    ) -> bool {
        if let Err((error, remaining)) = self.do_backoff(pod, container, ctx.status) {
            result.retry_after = Some(result.retry_after.map_or(remaining, |r| r.min(remaining)));
            result
                .start_results
                .push((container.name.clone(), Some(error)));
            return false;
        }
        let started = self
            .start_container(
                pod,
                container,
                ctx.sandbox_id,
                ctx.sandbox_config,
                ctx.status,
                ctx.pod_ips,
            )
            .await;
        if let Err(e) = &started {
            let pod_name = pod.metadata.name.as_deref().unwrap_or("");
            warn!(pod = %pod_name, container = %container.name, reason = e.reason, error = %e.message, "container start failed");
        }
        let ok = started.is_ok();
        result
            .start_results
            .push((container.name.clone(), started.err()));
        ok
    }
}
