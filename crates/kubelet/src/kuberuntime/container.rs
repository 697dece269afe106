//! Starting containers (upstream `kuberuntime_container.go` `startContainer`,
//! `generateContainerConfig`) and the crash-loop backoff check (`doBackOff`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_cri::v1::{
    ContainerConfig, ContainerMetadata, ContainerState, CreateContainerRequest, ImageSpec,
    ImageStatusRequest, KeyValue, Mount, PodSandboxConfig, StartContainerRequest,
};
use k8s_openapi::api::core::v1::{Container, Pod};
use tracing::{info, warn};

use super::KubeGenericRuntimeManager;
use super::backoff::{Backoff, go_duration};
use super::container_linux::linux_container_config;
use super::env::{
    EnvContext, NodeAllocatable, expand_command_and_args, make_environment,
    make_environment_reporting,
};
use super::labels::termination_grace_period;
use super::labels::{container_annotations, container_hash, container_labels};
use super::lifecycle::{HookTarget, format_pod_object, run_handler};
use super::pod_status::PodStatus;
use super::sync_result::{
    CRASH_LOOP_BACK_OFF, CREATE_CONTAINER_CONFIG_ERROR, CREATE_CONTAINER_ERROR,
    ERR_IMAGE_NEVER_PULL, ERR_IMAGE_PULL, IMAGE_PULL_BACK_OFF, INVALID_IMAGE_NAME,
    POST_START_HOOK_ERROR, RUN_CONTAINER_ERROR, SyncError,
};
use super::termination_message::termination_message_mount;
use crate::error::{Error, Result};
use crate::events::{self, EventType};
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
    /// ConfigMaps, Secrets and Services of the environment (`None`: standalone).
    pub objects: Option<&'a dyn crate::objects::ObjectSource>,
    /// Where the `InvalidEnvironmentVariableNames` warnings go.
    pub recorder: Option<&'a crate::events::EventRecorder>,
}

/// Builds the CreateContainer config of `container` for restart number `restart_count`
/// from image `image_ref`. Errors when the environment cannot be resolved.
pub fn generate_container_config(
    pod: &Pod,
    container: &Container,
    restart_count: i32,
    image_ref: &str,
    ctx: &ContainerContext<'_>,
) -> Result<ContainerConfig> {
    let env = make_environment_reporting(
        pod,
        container,
        &EnvContext {
            pod_ips: ctx.pod_ips,
            host_ip: ctx.host_ip,
            allocatable: ctx.allocatable,
            objects: ctx.objects,
        },
        &mut |message| {
            if let Some(recorder) = ctx.recorder {
                recorder.pod_event(
                    pod,
                    EventType::Warning,
                    events::INVALID_ENVIRONMENT_VARIABLE_NAMES,
                    &message,
                );
            }
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

/// The effective `runAsNonRoot` and `runAsUser` of `container`: the container's security
/// context over the pod's (upstream `securitycontext.DetermineEffectiveSecurityContext`).
fn effective_non_root(pod: &Pod, container: &Container) -> (bool, Option<i64>) {
    let pod_sc = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
    let sc = container.security_context.as_ref();
    let non_root = sc
        .and_then(|s| s.run_as_non_root)
        .or_else(|| pod_sc.and_then(|s| s.run_as_non_root))
        .unwrap_or(false);
    let run_as_user = sc
        .and_then(|s| s.run_as_user)
        .or_else(|| pod_sc.and_then(|s| s.run_as_user));
    (non_root, run_as_user)
}

/// Whether the image's user matters to [`verify_run_as_non_root`]: `runAsNonRoot` is set
/// and no `runAsUser` overrides the image's user.
pub fn needs_image_user(pod: &Pod, container: &Container) -> bool {
    matches!(effective_non_root(pod, container), (true, None))
}

/// The `runAsNonRoot` check of upstream's `verifyRunAsNonRoot`
/// (`kuberuntime/security_context_others.go`): with `runAsNonRoot: true` (container over
/// pod), the container must not run as uid 0. `image_uid` / `image_username` are the
/// image's user as CRI ImageStatus reports it (`uid` when numeric, else `username`; neither
/// means root). Errors with upstream's messages, which become the container's
/// `CreateContainerConfigError` message:
/// - `container's runAsUser breaks non-root policy (pod: "p_ns(uid)", container: c)`;
/// - `container has runAsNonRoot and image will run as root (pod: ..., container: c)`;
/// - `container has runAsNonRoot and image has non-numeric user (nobody), cannot verify
///   user is non-root (pod: ..., container: c)`.
pub fn verify_run_as_non_root(
    pod: &Pod,
    container: &Container,
    image_uid: Option<i64>,
    image_username: &str,
) -> Result<()> {
    let (non_root, run_as_user) = effective_non_root(pod, container);
    if !non_root {
        return Ok(());
    }
    let pod_name = format_pod_object(pod);
    let name = &container.name;
    match (run_as_user, image_uid) {
        (Some(0), _) => Err(Error::Runtime(format!(
            "container's runAsUser breaks non-root policy (pod: {pod_name:?}, container: {name})"
        ))),
        (Some(_), _) => Ok(()),
        (None, Some(0)) => Err(Error::Runtime(format!(
            "container has runAsNonRoot and image will run as root (pod: {pod_name:?}, container: {name})"
        ))),
        (None, Some(_)) => Ok(()),
        (None, None) if !image_username.is_empty() => Err(Error::Runtime(format!(
            "container has runAsNonRoot and image has non-numeric user ({image_username}), cannot verify user is non-root (pod: {pod_name:?}, container: {name})"
        ))),
        // No user in the image: it runs as root.
        (None, None) => Err(Error::Runtime(format!(
            "container has runAsNonRoot and image will run as root (pod: {pod_name:?}, container: {name})"
        ))),
    }
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
/// newest exited instance (newer ones may run) exited within the current backoff, errors
/// with `CrashLoopBackOff`, upstream's message and the time left; otherwise records this
/// restart, so the first restart is immediate and the next ones wait 10 s, 20 s, ... 5 min.
pub fn check_crash_backoff(
    backoff: &mut Backoff,
    pod: &Pod,
    container: &Container,
    status: &PodStatus,
    now: SystemTime,
) -> Result<(), (SyncError, Duration)> {
    // The newest *exited* instance, even when a newer one runs: a container killed
    // while running (a failed liveness probe) restarts under the backoff of the instance
    // that exited before it, as upstream's `doBackOff` looks it up.
    let Some(exited) = status
        .containers
        .iter()
        .find(|c| c.name == container.name && c.state == ContainerState::ContainerExited)
    else {
        return Ok(());
    };
    let key = backoff_key(pod, container);
    let finished = from_unix_nanos(exited.finished_at);
    if backoff.is_in_backoff_since(&key, finished, now) {
        let message = format!(
            "back-off {} restarting failed container={} pod={}",
            go_duration(backoff.get(&key)),
            container.name,
            format_pod_object(pod)
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
        let checked = {
            let mut backoff = self.lock_crash_backoff();
            check_crash_backoff(&mut backoff, pod, container, status, SystemTime::now())
        };
        if checked.is_err() {
            self.recorder.container_event(
                pod,
                &container.name,
                "",
                EventType::Warning,
                events::BACK_OFF_START_CONTAINER,
                &format!(
                    "Back-off restarting failed container {} in pod {}",
                    container.name,
                    format_pod_object(pod)
                ),
            );
        }
        checked
    }

    /// The registry credentials of the pod's `imagePullSecrets` for `container`'s image
    /// (upstream `getPullSecretsForPod` and the keyring lookup). Secrets that cannot be
    /// read are skipped with upstream's `FailedToRetrieveImagePullSecret` warning.
    fn pull_credentials(&self, pod: &Pod, container: &Container) -> Vec<k8s_cri::v1::AuthConfig> {
        let names: Vec<&str> = pod
            .spec
            .iter()
            .flat_map(|s| s.image_pull_secrets.iter().flatten())
            .map(|r| r.name.as_str())
            .filter(|n| !n.is_empty())
            .collect();
        if names.is_empty() {
            return Vec::new();
        }
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
        let mut secrets = Vec::new();
        let mut failed = Vec::new();
        for name in names {
            match self.objects.get_secret(namespace, name) {
                Ok(secret) => secrets.push(secret),
                Err(e) => {
                    info!(pod = pod.metadata.name.as_deref().unwrap_or(""), secret = %name, error = %e, "Unable to retrieve pull secret, the image pull may not succeed.");
                    failed.push(name);
                }
            }
        }
        if !failed.is_empty() {
            self.recorder.pod_event(
                pod,
                EventType::Warning,
                events::FAILED_TO_RETRIEVE_IMAGE_PULL_SECRET,
                &format!(
                    "Unable to retrieve some image pull secrets ({}); attempting to pull the image may not succeed.",
                    failed.join(", ")
                ),
            );
        }
        let refs: Vec<&k8s_openapi::api::core::v1::Secret> =
            secrets.iter().map(|s| s.as_ref()).collect();
        let keyring = super::keyring::DockerKeyring::from_pull_secrets(&refs);
        keyring.lookup(&super::keyring::repository_to_pull(
            container.image.as_deref().unwrap_or(""),
        ))
    }

    /// The CRI mounts of `container`'s volumeMounts, from the volumes the volume manager
    /// set up for the pod (upstream `makeMounts`, called from `GenerateRunContainerOptions`).
    fn volume_mounts(
        &self,
        pod: &Pod,
        container: &Container,
        pod_ips: &[String],
    ) -> Result<Vec<Mount>> {
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
            objects: Some(self.objects.as_ref()),
        };
        make_mounts(container, &volumes, || {
            make_environment(pod, container, &env_ctx)
        })
    }

    /// Pulls the image if needed, then creates and starts one container in sandbox
    /// `sandbox_id` with its termination message file mounted, and runs its postStart
    /// hook; a failed hook kills the container (`PostStartHookError`). Its restart count
    /// continues from the newest container of that name. Records upstream's events:
    /// the image manager's, `Created`, `Started`, and `Failed` ("Error: ...") when a step
    /// fails.
    pub(crate) async fn start_container(
        &self,
        pod: &Pod,
        container: &Container,
        sandbox_id: &str,
        sandbox_config: &PodSandboxConfig,
        status: &PodStatus,
        pod_ips: &[String],
    ) -> Result<(), SyncError> {
        let started = self
            .start_container_steps(pod, container, sandbox_id, sandbox_config, status, pod_ips)
            .await;
        if let Err(e) = &started {
            // Image errors show their reason ("Error: ErrImagePull"), the others their
            // message; a failed postStart hook has its own event.
            let detail = match e.reason {
                ERR_IMAGE_PULL | IMAGE_PULL_BACK_OFF | ERR_IMAGE_NEVER_PULL
                | INVALID_IMAGE_NAME => Some(e.reason),
                POST_START_HOOK_ERROR => None,
                _ => Some(e.message.as_str()),
            };
            if let Some(detail) = detail {
                let reason = if e.reason == RUN_CONTAINER_ERROR {
                    events::FAILED_TO_START_CONTAINER
                } else {
                    events::FAILED_TO_CREATE_CONTAINER
                };
                self.recorder.container_event(
                    pod,
                    &container.name,
                    "",
                    EventType::Warning,
                    reason,
                    &format!("Error: {detail}"),
                );
            }
        }
        started
    }

    /// The steps of [`Self::start_container`].
    async fn start_container_steps(
        &self,
        pod: &Pod,
        container: &Container,
        sandbox_id: &str,
        sandbox_config: &PodSandboxConfig,
        status: &PodStatus,
        pod_ips: &[String],
    ) -> Result<(), SyncError> {
        let credentials = self.pull_credentials(pod, container);
        let image_ref = self
            .image_manager
            .ensure_image_exists(
                &*self.cri,
                &self.recorder,
                pod,
                container,
                sandbox_config,
                &credentials,
            )
            .await?;
        // The image's user matters only when runAsNonRoot is set and no runAsUser
        // overrides it: only then is the image asked for it.
        let image_user = if needs_image_user(pod, container) {
            self.cri
                .image_status(ImageStatusRequest {
                    image: Some(ImageSpec {
                        image: image_ref.clone(),
                        ..Default::default()
                    }),
                    verbose: false,
                })
                .await
                .map_err(|e| {
                    SyncError::new(
                        CREATE_CONTAINER_CONFIG_ERROR,
                        format!("getting the user of image {image_ref:?}: {}", e.message()),
                    )
                })?
                .image
                .unwrap_or_default()
        } else {
            Default::default()
        };
        verify_run_as_non_root(
            pod,
            container,
            image_user.uid.map(|u| u.value),
            &image_user.username,
        )
        .map_err(|e| SyncError::new(CREATE_CONTAINER_CONFIG_ERROR, e.to_string()))?;
        // A newest instance that was created but never started (the kubelet died between
        // CreateContainer and StartContainer) did not run: it is removed and its restart
        // count reused, so restartCount counts only real restarts.
        let restart_count = match status.find_container_status_by_name(&container.name) {
            Some(c) if c.state == ContainerState::ContainerCreated => {
                self.remove_never_started(pod, c).await;
                c.restart_count
            }
            Some(c) => c.restart_count + 1,
            None => 0,
        };
        let mounts = self
            .volume_mounts(pod, container, pod_ips)
            .map_err(|e| SyncError::new(CREATE_CONTAINER_CONFIG_ERROR, e.to_string()))?;
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
            objects: Some(self.objects.as_ref()),
            recorder: Some(&self.recorder),
        };
        let config = generate_container_config(pod, container, restart_count, &image_ref, &ctx)
            .map_err(|e| SyncError::new(CREATE_CONTAINER_CONFIG_ERROR, e.to_string()))?;
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
        self.recorder.container_event(
            pod,
            &container.name,
            &created.container_id,
            EventType::Normal,
            events::CREATED_CONTAINER,
            &format!("Created container: {}", container.name),
        );
        self.cri
            .start_container(StartContainerRequest {
                container_id: created.container_id.clone(),
            })
            .await
            .map_err(|e| SyncError::new(RUN_CONTAINER_ERROR, e.message().to_owned()))?;
        self.recorder.container_event(
            pod,
            &container.name,
            &created.container_id,
            EventType::Normal,
            events::STARTED_CONTAINER,
            &format!("Started container {}", container.name),
        );
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

    /// Removes a container that was created but never started; a failure is logged (the
    /// container GC removes it later).
    async fn remove_never_started(&self, pod: &Pod, c: &super::pod_status::ContainerStatus) {
        match self
            .cri
            .remove_container(k8s_cri::v1::RemoveContainerRequest {
                container_id: c.id.clone(),
            })
            .await
        {
            Ok(_) => info!(
                pod = pod.metadata.name.as_deref().unwrap_or(""),
                container = %c.name,
                id = %c.id,
                "removed a container that was created but never started"
            ),
            Err(e) => warn!(
                pod = pod.metadata.name.as_deref().unwrap_or(""),
                container = %c.name,
                id = %c.id,
                error = %e.message(),
                "cannot remove a container that was created but never started"
            ),
        }
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
        let pod_name = format_pod_object(pod);
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
        // Not the hook's message: it could leak secrets into the API.
        self.recorder.container_event(
            pod,
            &container.name,
            container_id,
            EventType::Warning,
            events::FAILED_POST_START_HOOK,
            "PostStartHook failed",
        );
        if let Err(e) = self
            .kill_container(
                pod,
                container_id,
                &container.name,
                termination_grace_period(pod),
                "FailedPostStartHook",
            )
            .await
        {
            warn!(pod = %pod_name, container = %container.name, error = %e, "killing the container after its failed postStart hook");
        }
        Err(SyncError::new(POST_START_HOOK_ERROR, message.to_string()))
    }
}

#[cfg(test)]
mod non_root_tests {
    use k8s_openapi::api::core::v1::{PodSecurityContext, PodSpec, SecurityContext};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn pod(pod_sc: Option<PodSecurityContext>, sc: Option<SecurityContext>) -> (Pod, Container) {
        let container = Container {
            name: "c".into(),
            security_context: sc,
            ..Default::default()
        };
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns".into()),
                uid: Some("u1".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                security_context: pod_sc,
                containers: vec![container.clone()],
                ..Default::default()
            }),
            status: None,
        };
        (pod, container)
    }

    #[test]
    fn run_as_non_root_as_upstream() {
        let non_root = Some(PodSecurityContext {
            run_as_non_root: Some(true),
            ..Default::default()
        });
        let (p, c) = pod(non_root.clone(), None);
        assert!(needs_image_user(&p, &c));
        assert_eq!(
            verify_run_as_non_root(&p, &c, None, "")
                .unwrap_err()
                .to_string(),
            r#"container has runAsNonRoot and image will run as root (pod: "p_ns(u1)", container: c)"#
        );
        assert!(verify_run_as_non_root(&p, &c, Some(0), "").is_err());
        assert!(verify_run_as_non_root(&p, &c, Some(1000), "").is_ok());
        assert_eq!(
            verify_run_as_non_root(&p, &c, None, "nobody")
                .unwrap_err()
                .to_string(),
            r#"container has runAsNonRoot and image has non-numeric user (nobody), cannot verify user is non-root (pod: "p_ns(u1)", container: c)"#
        );

        // The container's runAsUser decides; the image's user does not matter.
        let (p, c) = pod(
            non_root.clone(),
            Some(SecurityContext {
                run_as_user: Some(0),
                ..Default::default()
            }),
        );
        assert!(!needs_image_user(&p, &c));
        assert_eq!(
            verify_run_as_non_root(&p, &c, Some(1000), "")
                .unwrap_err()
                .to_string(),
            r#"container's runAsUser breaks non-root policy (pod: "p_ns(u1)", container: c)"#
        );
        let (p, c) = pod(
            non_root,
            Some(SecurityContext {
                run_as_user: Some(1000),
                ..Default::default()
            }),
        );
        assert!(verify_run_as_non_root(&p, &c, None, "nobody").is_ok());

        // The container's runAsNonRoot: false overrides the pod's true.
        let (p, c) = pod(
            Some(PodSecurityContext {
                run_as_non_root: Some(true),
                ..Default::default()
            }),
            Some(SecurityContext {
                run_as_non_root: Some(false),
                ..Default::default()
            }),
        );
        assert!(!needs_image_user(&p, &c));
        assert!(verify_run_as_non_root(&p, &c, Some(0), "").is_ok());
        let (p, c) = pod(None, None);
        assert!(verify_run_as_non_root(&p, &c, Some(0), "").is_ok());
    }
}
