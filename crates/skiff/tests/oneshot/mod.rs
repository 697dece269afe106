//! Helpers of the security, resources and mounts CRI cases: pods with a custom config,
//! containers that run a shell script to the end and report what they saw in their log,
//! ExecSync of scripts, and gRPC codes of failed calls.

#![allow(dead_code)] // each test binary uses its own subset

use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use k8s_cri::v1::*;

use crate::common::cri::CriRuntime;

/// How long a one-shot container may run.
const EXIT_TIMEOUT: Duration = Duration::from_secs(60);

/// RunPodSandbox with `config` (and the default handler); returns the sandbox ID.
pub async fn run_pod(rt: &CriRuntime, config: &PodSandboxConfig) -> anyhow::Result<String> {
    Ok(rt
        .runtime_client()
        .run_pod_sandbox(RunPodSandboxRequest {
            config: Some(config.clone()),
            runtime_handler: String::new(),
        })
        .await
        .context("RunPodSandbox")?
        .into_inner()
        .pod_sandbox_id)
}

/// A container of the busybox image running `sh -c script`.
pub fn shell(rt: &CriRuntime, name: &str, script: &str) -> ContainerConfig {
    let mut config = rt.container_config(name, &rt.busybox(), ["sh", "-c", script]);
    config.command = Vec::new();
    config
}

/// The Linux security context of `config`, created if absent.
pub fn security(config: &mut ContainerConfig) -> &mut LinuxContainerSecurityContext {
    config
        .linux
        .get_or_insert_default()
        .security_context
        .get_or_insert_default()
}

/// The Linux resources of `config`, created if absent.
pub fn resources(config: &mut ContainerConfig) -> &mut LinuxContainerResources {
    config
        .linux
        .get_or_insert_default()
        .resources
        .get_or_insert_default()
}

/// CreateContainer in sandbox `sandbox_id` whose config is `sandbox` (the kubelet sends
/// it along; containerd reads some settings from it).
pub async fn create(
    rt: &CriRuntime,
    sandbox_id: &str,
    sandbox: &PodSandboxConfig,
    config: ContainerConfig,
) -> Result<String, tonic::Status> {
    rt.runtime_client()
        .create_container(CreateContainerRequest {
            pod_sandbox_id: sandbox_id.to_string(),
            config: Some(config),
            sandbox_config: Some(sandbox.clone()),
        })
        .await
        .map(|r| r.into_inner().container_id)
}

/// StartContainer.
pub async fn start(rt: &CriRuntime, id: &str) -> Result<(), tonic::Status> {
    rt.runtime_client()
        .start_container(StartContainerRequest {
            container_id: id.to_string(),
        })
        .await
        .map(drop)
}

/// CreateContainer + StartContainer; returns the container ID.
pub async fn create_start(
    rt: &CriRuntime,
    sandbox_id: &str,
    sandbox: &PodSandboxConfig,
    config: ContainerConfig,
) -> anyhow::Result<String> {
    let id = create(rt, sandbox_id, sandbox, config)
        .await
        .context("CreateContainer")?;
    start(rt, &id).await.context("StartContainer")?;
    Ok(id)
}

/// ContainerStatus.
pub async fn status(rt: &CriRuntime, id: &str) -> anyhow::Result<ContainerStatus> {
    rt.runtime_client()
        .container_status(ContainerStatusRequest {
            container_id: id.to_string(),
            verbose: false,
        })
        .await?
        .into_inner()
        .status
        .context("ContainerStatus without status")
}

/// Waits until container `id` exited; returns its status.
pub async fn wait_exit(rt: &CriRuntime, id: &str) -> anyhow::Result<ContainerStatus> {
    let deadline = Instant::now() + EXIT_TIMEOUT;
    loop {
        let status = status(rt, id).await?;
        if status.state == ContainerState::ContainerExited as i32 {
            return Ok(status);
        }
        if Instant::now() >= deadline {
            bail!("container {id} still runs after {EXIT_TIMEOUT:?}: {status:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The text of a CRI log file (the content after the timestamp, stream and tag fields),
/// lines joined with `\n`.
pub fn log_text(path: &std::path::Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|line| line.splitn(4, ' ').nth(3).unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Runs `config` (a container named `name`) in the sandbox to its exit; returns its exit
/// code and output.
pub async fn run_to_exit(
    rt: &CriRuntime,
    sandbox_id: &str,
    sandbox: &PodSandboxConfig,
    config: ContainerConfig,
) -> anyhow::Result<(i32, String)> {
    let name = config
        .metadata
        .as_ref()
        .map(|m| m.name.clone())
        .unwrap_or_default();
    let id = create_start(rt, sandbox_id, sandbox, config).await?;
    let status = wait_exit(rt, &id).await?;
    let pod = sandbox
        .metadata
        .as_ref()
        .map(|m| m.name.as_str())
        .unwrap_or_default();
    Ok((status.exit_code, log_text(&rt.log_path(pod, &name))))
}

/// Runs `sh -c script` in the sandbox to its exit and requires exit code 0; returns the
/// output.
pub async fn output_of(
    rt: &CriRuntime,
    sandbox_id: &str,
    sandbox: &PodSandboxConfig,
    config: ContainerConfig,
) -> anyhow::Result<String> {
    let (code, output) = run_to_exit(rt, sandbox_id, sandbox, config).await?;
    ensure!(code == 0, "exit code {code}, output:\n{output}");
    Ok(output)
}

/// ExecSync `sh -c script` in a running container; requires exit code 0 and returns
/// stdout.
pub async fn exec(rt: &CriRuntime, id: &str, script: &str) -> anyhow::Result<String> {
    let out = rt
        .runtime_client()
        .exec_sync(ExecSyncRequest {
            container_id: id.to_string(),
            cmd: vec!["sh".into(), "-c".into(), script.into()],
            timeout: 30,
        })
        .await
        .with_context(|| format!("ExecSync {script:?}"))?
        .into_inner();
    ensure!(
        out.exit_code == 0,
        "{script:?} exited {}: {}{}",
        out.exit_code,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Stops and removes the sandboxes, then waits until nothing is left on the host.
pub async fn remove_pods(rt: &CriRuntime, sandbox_ids: &[&str]) -> anyhow::Result<()> {
    let mut client = rt.runtime_client();
    for id in sandbox_ids {
        client
            .stop_pod_sandbox(StopPodSandboxRequest {
                pod_sandbox_id: id.to_string(),
            })
            .await?;
        client
            .remove_pod_sandbox(RemovePodSandboxRequest {
                pod_sandbox_id: id.to_string(),
            })
            .await?;
    }
    rt.wait_clean(Duration::from_secs(20)).await
}

/// [`remove_pods`] of one sandbox.
pub async fn remove_pod(rt: &CriRuntime, sandbox_id: &str) -> anyhow::Result<()> {
    remove_pods(rt, &[sandbox_id]).await
}

/// Whether the host mixes cgroup v1 controllers with a cgroup v2 hierarchy that has
/// controllers of its own (crun refuses such hosts).
pub fn cgroup_hybrid_with_v2_controllers() -> bool {
    std::fs::read_to_string("/sys/fs/cgroup/unified/cgroup.controllers")
        .is_ok_and(|c| !c.trim().is_empty())
}

/// The value of field `name` (e.g. `CapEff`) in a `/proc/<pid>/status` text.
pub fn status_field<'a>(status: &'a str, name: &str) -> Option<&'a str> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

/// Whether the host runs the unified cgroup v2 hierarchy only.
pub fn cgroup_v2() -> bool {
    std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists()
}

/// An image with a few busybox applets, named users and groups, and a declared volume,
/// pushed to the shared registry once per process; returns its reference.
///
/// `/etc/passwd`: root, `app` (1001, primary group 1002). `/etc/group`: root, `appgrp`
/// (1002), `extra` (3000, members `app`). `/data/seed` holds `seed`; the config declares
/// `Volumes: {"/data": {}}`, `User: "app"`.
pub async fn users_image(rt: &CriRuntime) -> anyhow::Result<String> {
    static REFERENCE: tokio::sync::OnceCell<String> = tokio::sync::OnceCell::const_new();
    let host = rt.registry_host().to_string();
    REFERENCE
        .get_or_try_init(|| async move {
            tokio::task::spawn_blocking(move || build_users_image(&host)).await?
        })
        .await
        .cloned()
}

fn build_users_image(host: &str) -> anyhow::Result<String> {
    use skiff_testkit::{Compression, ImageBuilder, Layer, Platform, TarEntry, layer_tar};
    let busybox = std::fs::read("/bin/busybox").context("reading /bin/busybox")?;
    let mut entries = vec![
        TarEntry::dir("bin", 0o755),
        TarEntry::dir("etc", 0o755),
        TarEntry::dir("tmp", 0o1777),
        TarEntry::dir("data", 0o755),
        TarEntry::file("bin/busybox", 0o755, busybox),
        TarEntry::file(
            "etc/passwd",
            0o644,
            "root:x:0:0:root:/root:/bin/sh\napp:x:1001:1002:app:/tmp:/bin/sh\n",
        ),
        TarEntry::file(
            "etc/group",
            0o644,
            "root:x:0:\nappgrp:x:1002:\nextra:x:3000:app\n",
        ),
        TarEntry::file("data/seed", 0o644, "seed\n"),
    ];
    for applet in ["sh", "cat", "id", "ls", "echo", "grep", "touch", "sleep"] {
        entries.push(TarEntry::symlink(format!("bin/{applet}"), "busybox"));
    }
    let layer = Layer::new(layer_tar(&entries)?, Compression::Gzip);
    let config = serde_json::json!({
        "Env": ["PATH=/bin"],
        "Cmd": ["sh"],
        "User": "app",
        "Volumes": {"/data": {}},
    });
    let image = ImageBuilder::new()
        .platform(Platform::new("amd64", vec![layer]).config(config))
        .build()?;
    skiff_testkit::push(host, "skiff/users", "test", &image)
}
