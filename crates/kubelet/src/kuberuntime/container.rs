//! Starting containers (upstream `kuberuntime_container.go` `startContainer`,
//! `generateContainerConfig`) and the crash-loop backoff check (`doBackOff`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_cri::v1::{
    ContainerConfig, ContainerMetadata, ContainerState, CreateContainerRequest, ImageSpec,
    KeyValue, Mount, PodSandboxConfig, StartContainerRequest,
};
use k8s_openapi::api::core::v1::{Container, Pod};
use tracing::{info, warn};

use super::KubeGenericRuntimeManager;
use super::backoff::{Backoff, go_duration};
use super::container_linux::linux_container_config;
use super::env::{EnvContext, NodeAllocatable, expand_command_and_args, make_environment};
use super::labels::termination_grace_period;
use super::labels::{container_annotations, container_hash, container_labels};
use super::lifecycle::{HookTarget, format_pod, run_handler};
use super::pod_status::PodStatus;
use super::sync_result::{
    CRASH_LOOP_BACK_OFF, CREATE_CONTAINER_CONFIG_ERROR, CREATE_CONTAINER_ERROR,
    POST_START_HOOK_ERROR, RUN_CONTAINER_ERROR, SyncError,
};
use super::termination_message::termination_message_mount;
use crate::volume::mounts::make_mounts;

/// Inputs of a container config that come from the sandbox and node.
pub struct ContainerContext<'a> {
    /// The pod's IPs, primary first.
    pub pod_ips: &'a [String],
    /// The node's IP.
    pub host_ip: &'a str,
    /// Machine memory in bytes (for the Burstable OOM score).
    pub memory_capacity: i64,
    /// The node's allocatable resources (for `resourceFieldRef` env vars).
    pub allocatable: NodeAllocatable,
    /// Host paths mounted into the container: its volume mounts and the kubelet's own
    /// files (such as the termination message file), in mount order.
    pub mounts: Vec<Mount>,
}

/// Builds the CreateContainer config of `container` for restart number `restart_count`
/// from image `image_ref`. Errors when the environment cannot be resolved.
pub fn generate_container_config(
    pod: &Pod,
    container: &Container,
    restart_count: i32,
    image_ref: &str,
    ctx: &ContainerContext<'_>,
) -> Result<ContainerConfig, String> {
    let env = make_environment(
        pod,
        container,
        &EnvContext {
            pod_ips: ctx.pod_ips,
            host_ip: ctx.host_ip,
            allocatable: ctx.allocatable,
        },
    )?;
    let (command, args) = expand_command_and_args(container, &env);
    Ok(ContainerConfig {
        metadata: Some(ContainerMetadata {
            name: container.name.clone(),
            attempt: restart_count.max(0) as u32,
        }),
        image: Some(ImageSpec {
            image: image_ref.to_owned(),
            user_specified_image: container.image.clone().unwrap_or_default(),
            ..Default::default()
        }),
        command,
        args,
        working_dir: container.working_dir.clone().unwrap_or_default(),
        envs: env
            .into_iter()
            .map(|(key, value)| KeyValue { key, value })
            .collect(),
        labels: container_labels(pod, container),
        annotations: container_annotations(pod, container, restart_count),
        log_path: format!("{}/{restart_count}.log", container.name),
        stdin: container.stdin.unwrap_or(false),
        stdin_once: container.stdin_once.unwrap_or(false),
        tty: container.tty.unwrap_or(false),
        mounts: ctx.mounts.clone(),
        linux: Some(linux_container_config(pod, container, ctx.memory_capacity)),
        ..Default::default()
    })
}

/// Key of a container in the crash-loop backoff (upstream `getStableKey`).
fn backoff_key(pod: &Pod, container: &Container) -> String {
    let meta = &pod.metadata;
    format!(
        "{}_{}_{}_{}_{}",
        meta.name.as_deref().unwrap_or(""),
        meta.namespace.as_deref().unwrap_or(""),
        meta.uid.as_deref().unwrap_or(""),
        container.name,
        container_hash(container)
    )
}

fn from_unix_nanos(nanos: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(nanos.max(0) as u64)
}

/// The crash-loop backoff check of `container` at `now` (upstream `doBackOff`): when its
/// newest instance exited and `now` is within the current backoff of that exit, errors
/// with `CrashLoopBackOff`, upstream's message and the time left; otherwise records this
/// restart, so the first restart is immediate and the next ones wait 10 s, 20 s, ... 5 min.
pub fn check_crash_backoff(
    backoff: &mut Backoff,
    pod: &Pod,
    container: &Container,
    status: &PodStatus,
    now: SystemTime,
) -> Result<(), (SyncError, Duration)> {
    let Some(exited) = status
        .find_container_status_by_name(&container.name)
        .filter(|c| c.state == ContainerState::ContainerExited)
    else {
        return Ok(());
    };
    let key = backoff_key(pod, container);
    let finished = from_unix_nanos(exited.finished_at);
    if backoff.is_in_backoff_since(&key, finished, now) {
        // Upstream formats the pod as `name_namespace(uid)` (`format.Pod`).
        let meta = &pod.metadata;
        let message = format!(
            "back-off {} restarting failed container={} pod={}_{}({})",
            go_duration(backoff.get(&key)),
            container.name,
            meta.name.as_deref().unwrap_or(""),
            meta.namespace.as_deref().unwrap_or(""),
            meta.uid.as_deref().unwrap_or("")
        );
        return Err((
            SyncError::new(CRASH_LOOP_BACK_OFF, message),
            backoff.remaining_since(&key, finished, now),
        ));
    }
    backoff.next(&key, finished, now);
    Ok(())
}

impl KubeGenericRuntimeManager {
    /// [`check_crash_backoff`] with the manager's backoff, now.
    pub(crate) fn do_backoff(
        &self,
        pod: &Pod,
        container: &Container,
        status: &PodStatus,
    ) -> Result<(), (SyncError, Duration)> {
        let mut backoff = self.lock_crash_backoff();
        check_crash_backoff(&mut backoff, pod, container, status, SystemTime::now())
    }

    /// The CRI mounts of `container`'s volumeMounts, from the volumes the volume manager
    /// set up for the pod (upstream `makeMounts`, called from `GenerateRunContainerOptions`).
    fn volume_mounts(
        &self,
        pod: &Pod,
        container: &Container,
        pod_ips: &[String],
    ) -> Result<Vec<Mount>, String> {
        let uid = pod.metadata.uid.as_deref().unwrap_or("");
        let volumes = self
            .volume_manager
            .as_ref()
            .map(|v| v.get_mounted_volumes_for_pod(uid))
            .unwrap_or_default();
        let env_ctx = EnvContext {
            pod_ips,
            host_ip: &self.config.node_ip,
            allocatable: self.config.allocatable,
        };
        make_mounts(container, &volumes, || {
            make_environment(pod, container, &env_ctx)
        })
    }

    /// Pulls the image if needed, then creates and starts one container in sandbox
    /// `sandbox_id` with its termination message file mounted, and runs its postStart
    /// hook; a failed hook kills the container (`PostStartHookError`). Its restart count
    /// continues from the newest container of that name.
    pub(crate) async fn start_container(
        &self,
        pod: &Pod,
        container: &Container,
        sandbox_id: &str,
        sandbox_config: &PodSandboxConfig,
        status: &PodStatus,
        pod_ips: &[String],
    ) -> Result<(), SyncError> {
        let image_ref = self
            .image_manager
            .ensure_image_exists(&*self.cri, pod, container, sandbox_config)
            .await?;
        let restart_count = status
            .find_container_status_by_name(&container.name)
            .map_or(0, |c| c.restart_count + 1);
        let mounts = self
            .volume_mounts(pod, container, pod_ips)
            .map_err(|e| SyncError::new(CREATE_CONTAINER_CONFIG_ERROR, e))?;
        let uid = pod.metadata.uid.as_deref().unwrap_or("");
        let termination_mount = termination_message_mount(&self.config.pod_dirs, uid, container)
            .map_err(|e| {
                SyncError::new(
                    CREATE_CONTAINER_CONFIG_ERROR,
                    format!("creating the termination message file: {e}"),
                )
            })?;
        let ctx = ContainerContext {
            pod_ips,
            host_ip: &self.config.node_ip,
            memory_capacity: self.config.memory_capacity,
            allocatable: self.config.allocatable,
            mounts: mounts.into_iter().chain(termination_mount).collect(),
        };
        let config = generate_container_config(pod, container, restart_count, &image_ref, &ctx)
            .map_err(|e| SyncError::new(CREATE_CONTAINER_CONFIG_ERROR, e))?;
        let log_dir = std::path::Path::new(&sandbox_config.log_directory).join(&container.name);
        std::fs::create_dir_all(&log_dir).map_err(|e| {
            SyncError::new(
                CREATE_CONTAINER_CONFIG_ERROR,
                format!("creating log directory {}: {e}", log_dir.display()),
            )
        })?;
        let created = self
            .cri
            .create_container(CreateContainerRequest {
                pod_sandbox_id: sandbox_id.to_owned(),
                config: Some(config),
                sandbox_config: Some(sandbox_config.clone()),
            })
            .await
            .map_err(|e| SyncError::new(CREATE_CONTAINER_ERROR, e.message().to_owned()))?;
        self.cri
            .start_container(StartContainerRequest {
                container_id: created.container_id.clone(),
            })
            .await
            .map_err(|e| SyncError::new(RUN_CONTAINER_ERROR, e.message().to_owned()))?;
        info!(
            pod = pod.metadata.name.as_deref().unwrap_or(""),
            container = %container.name,
            id = %created.container_id,
            restart_count,
            "started container"
        );
        self.run_post_start_hook(pod, container, &created.container_id, pod_ips)
            .await
    }

    /// Runs the container's postStart hook, if any; when it fails, kills the container
    /// (upstream reason `FailedPostStartHook`) and errors with `PostStartHookError`.
    async fn run_post_start_hook(
        &self,
        pod: &Pod,
        container: &Container,
        container_id: &str,
        pod_ips: &[String],
    ) -> Result<(), SyncError> {
        let Some(hook) = container
            .lifecycle
            .as_ref()
            .and_then(|l| l.post_start.as_ref())
        else {
            return Ok(());
        };
        let meta = &pod.metadata;
        let pod_name = format_pod(
            meta.name.as_deref().unwrap_or(""),
            meta.namespace.as_deref().unwrap_or(""),
            meta.uid.as_deref().unwrap_or(""),
        );
        let target = HookTarget {
            container_id,
            container_name: &container.name,
            pod: &pod_name,
            pod_ip: pod_ips.first().map(String::as_str),
            ports: container.ports.as_deref().unwrap_or_default(),
        };
        let Err(message) = run_handler(&*self.cri, hook, &target).await else {
            return Ok(());
        };
        warn!(pod = %pod_name, container = %container.name, error = %message, "postStart hook failed");
        if let Err(e) = self
            .kill_container(
                container_id,
                &container.name,
                termination_grace_period(pod),
                "FailedPostStartHook",
            )
            .await
        {
            warn!(pod = %pod_name, container = %container.name, error = %e, "killing the container after its failed postStart hook");
        }
        Err(SyncError::new(POST_START_HOOK_ERROR, message))
    }
}
