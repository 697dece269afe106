//! The benchmark's pods: one sandbox with one container each, driven through [`Cri`].

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use skiff_kubelet::cri::Cri;
use skiff_runtime::k8s_cri::v1::*;

use super::memory::CONTAINER_COMMAND;
use super::stats::Timing;

/// The namespace of every benchmark pod.
const NAMESPACE: &str = "skiff-bench";

/// The socket path of a `unix://` endpoint (or a bare path).
pub fn socket_path(endpoint: &str) -> anyhow::Result<PathBuf> {
    match endpoint.strip_prefix("unix://") {
        Some(path) => Ok(PathBuf::from(path)),
        None if !endpoint.contains("://") => Ok(PathBuf::from(endpoint)),
        None => anyhow::bail!("{endpoint:?}: only unix:// endpoints are supported"),
    }
}

/// Pods made by this benchmark run: named `bench-<n>` with uid `skiff-bench-<pid>-<n>`,
/// logs under `/tmp/skiff-bench-<pid>`, no cgroup parent (the runtime's default, as with
/// crictl).
pub struct Pods<'a> {
    cri: &'a dyn Cri,
    image: String,
    log_root: PathBuf,
    next: usize,
    /// Sandbox IDs of the pods kept running.
    running: Vec<String>,
}

impl<'a> Pods<'a> {
    pub fn new(cri: &'a dyn Cri, image: &str) -> anyhow::Result<Pods<'a>> {
        let log_root = std::env::temp_dir().join(format!("skiff-bench-{}", std::process::id()));
        std::fs::create_dir_all(&log_root)
            .with_context(|| format!("creating {}", log_root.display()))?;
        Ok(Pods {
            cri,
            image: image.to_string(),
            log_root,
            next: 0,
            running: Vec::new(),
        })
    }

    pub async fn pull(&self) -> anyhow::Result<()> {
        self.cri
            .pull_image(PullImageRequest {
                image: Some(ImageSpec {
                    image: self.image.clone(),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .await
            .with_context(|| format!("PullImage {}", self.image))?;
        Ok(())
    }

    fn sandbox_config(&mut self) -> anyhow::Result<PodSandboxConfig> {
        let n = self.next;
        self.next += 1;
        let name = format!("bench-{n}");
        let uid = format!("skiff-bench-{}-{n}", std::process::id());
        let log_directory = self.log_root.join(&uid);
        std::fs::create_dir_all(&log_directory)?;
        Ok(PodSandboxConfig {
            metadata: Some(PodSandboxMetadata {
                name: name.clone(),
                uid,
                namespace: NAMESPACE.into(),
                attempt: 0,
            }),
            hostname: name,
            log_directory: log_directory.to_string_lossy().into_owned(),
            linux: Some(LinuxPodSandboxConfig {
                security_context: Some(LinuxSandboxSecurityContext {
                    namespace_options: Some(kubelet_namespaces()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    fn container_config(&self) -> ContainerConfig {
        ContainerConfig {
            metadata: Some(ContainerMetadata {
                name: "main".into(),
                attempt: 0,
            }),
            image: Some(ImageSpec {
                image: self.image.clone(),
                ..Default::default()
            }),
            command: CONTAINER_COMMAND.iter().map(|s| s.to_string()).collect(),
            log_path: "main/0.log".into(),
            linux: Some(LinuxContainerConfig {
                security_context: Some(LinuxContainerSecurityContext {
                    namespace_options: Some(kubelet_namespaces()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// RunPodSandbox, CreateContainer, StartContainer; returns the IDs and the time each
    /// call took.
    async fn start_pod(&mut self) -> anyhow::Result<(String, String, [Duration; 3])> {
        let config = self.sandbox_config()?;
        let started = Instant::now();
        let sandbox_id = self
            .cri
            .run_pod_sandbox(RunPodSandboxRequest {
                config: Some(config.clone()),
                runtime_handler: String::new(),
            })
            .await
            .context("RunPodSandbox")?
            .pod_sandbox_id;
        let run = started.elapsed();
        let started = Instant::now();
        let container_id = self
            .cri
            .create_container(CreateContainerRequest {
                pod_sandbox_id: sandbox_id.clone(),
                config: Some(self.container_config()),
                sandbox_config: Some(config),
            })
            .await
            .context("CreateContainer")?
            .container_id;
        let create = started.elapsed();
        let started = Instant::now();
        self.cri
            .start_container(StartContainerRequest {
                container_id: container_id.clone(),
            })
            .await
            .context("StartContainer")?;
        Ok((sandbox_id, container_id, [run, create, started.elapsed()]))
    }

    async fn remove_pod(&self, sandbox_id: &str) -> anyhow::Result<()> {
        self.cri
            .stop_pod_sandbox(StopPodSandboxRequest {
                pod_sandbox_id: sandbox_id.to_string(),
            })
            .await
            .context("StopPodSandbox")?;
        self.cri
            .remove_pod_sandbox(RemovePodSandboxRequest {
                pod_sandbox_id: sandbox_id.to_string(),
            })
            .await
            .context("RemovePodSandbox")?;
        Ok(())
    }

    /// `count` full cycles of one pod, timing each CRI call.
    pub async fn time_cycles(&mut self, count: usize) -> anyhow::Result<Vec<Timing>> {
        let mut timings = [
            "RunPodSandbox",
            "CreateContainer",
            "StartContainer",
            "StopContainer (timeout 0)",
            "RemoveContainer",
            "StopPodSandbox",
            "RemovePodSandbox",
        ]
        .map(|operation| Timing {
            operation,
            samples: Vec::with_capacity(count),
        });
        for _ in 0..count {
            let (sandbox_id, container_id, [run, create, start]) = self.start_pod().await?;
            let started = Instant::now();
            self.cri
                .stop_container(StopContainerRequest {
                    container_id: container_id.clone(),
                    timeout: 0,
                })
                .await
                .context("StopContainer")?;
            let stop = started.elapsed();
            let started = Instant::now();
            self.cri
                .remove_container(RemoveContainerRequest { container_id })
                .await
                .context("RemoveContainer")?;
            let remove = started.elapsed();
            let started = Instant::now();
            self.cri
                .stop_pod_sandbox(StopPodSandboxRequest {
                    pod_sandbox_id: sandbox_id.clone(),
                })
                .await
                .context("StopPodSandbox")?;
            let stop_pod = started.elapsed();
            let started = Instant::now();
            self.cri
                .remove_pod_sandbox(RemovePodSandboxRequest {
                    pod_sandbox_id: sandbox_id,
                })
                .await
                .context("RemovePodSandbox")?;
            let remove_pod = started.elapsed();
            let samples = [run, create, start, stop, remove, stop_pod, remove_pod];
            for (timing, sample) in timings.iter_mut().zip(samples) {
                timing.samples.push(sample);
            }
        }
        Ok(timings.into())
    }

    /// Starts pods until `count` are running.
    pub async fn run_until(&mut self, count: usize) -> anyhow::Result<()> {
        while self.running.len() < count {
            let (sandbox_id, ..) = self.start_pod().await?;
            self.running.push(sandbox_id);
        }
        Ok(())
    }

    /// Stops and removes the running pods and the log directories; the first error is
    /// returned after trying them all.
    pub async fn remove_all(&mut self) -> anyhow::Result<()> {
        let mut first_error = None;
        for sandbox_id in std::mem::take(&mut self.running) {
            if let Err(e) = self.remove_pod(&sandbox_id).await {
                first_error.get_or_insert(e);
            }
        }
        if let Err(e) = std::fs::remove_dir_all(&self.log_root) {
            first_error.get_or_insert(e.into());
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// The namespaces the kubelet asks for a pod without `shareProcessNamespace`: the pod's
/// network and IPC namespaces, a PID namespace per container (kuberuntime
/// `namespacesForPod`).
fn kubelet_namespaces() -> NamespaceOption {
    NamespaceOption {
        network: NamespaceMode::Pod as i32,
        pid: NamespaceMode::Container as i32,
        ipc: NamespaceMode::Pod as i32,
        ..Default::default()
    }
}
