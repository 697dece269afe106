//! An in-memory [`Cri`] for unit tests (upstream `pkg/kubelet/kuberuntime` fake runtime).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;

use async_trait::async_trait;
use k8s_cri::v1::*;
use tonic::Status;

use super::Cri;
use crate::kuberuntime::labels::{CONTAINER_NAME_LABEL, POD_NAME_LABEL, POD_UID_LABEL};

#[derive(Default)]
struct State {
    next_id: u64,
    clock: i64,
    sandboxes: BTreeMap<String, PodSandboxStatus>,
    containers: BTreeMap<String, (String, ContainerStatus)>,
    images: HashSet<String>,
    failing_pulls: HashSet<String>,
    calls: Vec<String>,
    exec_script: Option<ExecScript>,
    exec_requests: Vec<ExecSyncRequest>,
}

/// The answer of the fake's ExecSync, see [`FakeCri::script_exec`].
#[derive(Clone)]
struct ExecScript {
    exit_code: i32,
    stdout: String,
    stderr: String,
    takes: std::time::Duration,
}

/// A fake runtime: sandboxes and containers in maps, instant state changes.
#[derive(Default)]
pub struct FakeCri {
    state: Mutex<State>,
}

fn matches(labels: &HashMap<String, String>, selector: &HashMap<String, String>) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

impl FakeCri {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Calls made so far, as `Method[:detail]`.
    pub fn calls(&self) -> Vec<String> {
        self.lock().calls.clone()
    }

    /// Makes pulls of `image` fail.
    pub fn fail_pulls_of(&self, image: &str) {
        self.lock().failing_pulls.insert(image.to_owned());
    }

    /// Makes ExecSync take `takes` (tokio time) and then exit with `exit_code` and the
    /// given output, or fail with DeadlineExceeded when `takes` is over the request's
    /// timeout. Without a script ExecSync answers NotFound.
    pub fn script_exec(
        &self,
        exit_code: i32,
        stdout: &str,
        stderr: &str,
        takes: std::time::Duration,
    ) {
        self.lock().exec_script = Some(ExecScript {
            exit_code,
            stdout: stdout.to_owned(),
            stderr: stderr.to_owned(),
            takes,
        });
    }

    /// ExecSync requests received so far.
    pub fn exec_requests(&self) -> Vec<ExecSyncRequest> {
        self.lock().exec_requests.clone()
    }

    /// Adds a sandbox of pod `uid` directly; returns its ID.
    pub fn add_sandbox(&self, uid: &str, name: &str, ready: bool) -> String {
        let mut s = self.lock();
        let id = format!("sandbox-{}", s.next_id);
        s.next_id += 1;
        s.clock += 1;
        let labels = HashMap::from([
            (POD_UID_LABEL.to_owned(), uid.to_owned()),
            (POD_NAME_LABEL.to_owned(), name.to_owned()),
        ]);
        let status = PodSandboxStatus {
            id: id.clone(),
            metadata: Some(PodSandboxMetadata {
                name: name.into(),
                uid: uid.into(),
                namespace: "default".into(),
                attempt: 0,
            }),
            state: if ready { 0 } else { 1 },
            created_at: s.clock,
            network: Some(PodSandboxNetworkStatus {
                ip: "10.88.0.9".into(),
                additional_ips: vec![],
            }),
            labels,
            ..Default::default()
        };
        s.sandboxes.insert(id.clone(), status);
        id
    }

    /// Adds a container of pod `uid` in `sandbox` directly; returns its ID.
    pub fn add_container(
        &self,
        sandbox: &str,
        uid: &str,
        name: &str,
        state: ContainerState,
    ) -> String {
        let mut s = self.lock();
        let id = format!("container-{}", s.next_id);
        s.next_id += 1;
        s.clock += 1;
        let labels = HashMap::from([
            (POD_UID_LABEL.to_owned(), uid.to_owned()),
            (CONTAINER_NAME_LABEL.to_owned(), name.to_owned()),
        ]);
        let status = ContainerStatus {
            id: id.clone(),
            metadata: Some(ContainerMetadata {
                name: name.into(),
                attempt: 0,
            }),
            state: state as i32,
            created_at: s.clock,
            labels,
            ..Default::default()
        };
        s.containers
            .insert(id.clone(), (sandbox.to_owned(), status));
        id
    }

    /// Sets a container's state and exit code (exited containers finish "now").
    pub fn set_container_state(&self, id: &str, state: ContainerState, exit_code: i32) {
        let mut s = self.lock();
        let now = now_nanos();
        if let Some((_, c)) = s.containers.get_mut(id) {
            c.state = state as i32;
            c.exit_code = exit_code;
            if state == ContainerState::ContainerExited {
                c.finished_at = now;
            }
        }
    }

    /// Sets the (absolute) log path a container's status reports.
    pub fn set_log_path(&self, id: &str, path: &std::path::Path) {
        if let Some((_, c)) = self.lock().containers.get_mut(id) {
            c.log_path = path.to_string_lossy().into_owned();
        }
    }

    /// Removes a container or sandbox.
    pub fn remove(&self, id: &str) {
        let mut s = self.lock();
        s.containers.remove(id);
        s.sandboxes.remove(id);
    }

    /// IDs of containers, oldest first.
    pub fn container_ids(&self) -> Vec<String> {
        let s = self.lock();
        let mut ids: Vec<(i64, String)> = s
            .containers
            .values()
            .map(|(_, c)| (c.created_at, c.id.clone()))
            .collect();
        ids.sort();
        ids.into_iter().map(|(_, id)| id).collect()
    }

    /// A container's status.
    pub fn container(&self, id: &str) -> Option<ContainerStatus> {
        self.lock().containers.get(id).map(|(_, c)| c.clone())
    }

    /// Number of sandboxes.
    pub fn sandbox_count(&self) -> usize {
        self.lock().sandboxes.len()
    }
}

fn now_nanos() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

fn not_found(what: &str) -> Status {
    Status::not_found(format!("{what} not found"))
}

#[async_trait]
impl Cri for FakeCri {
    async fn version(&self, _: VersionRequest) -> Result<VersionResponse, Status> {
        Ok(VersionResponse {
            runtime_name: "fake".into(),
            ..Default::default()
        })
    }
    async fn status(&self, _: StatusRequest) -> Result<StatusResponse, Status> {
        Ok(StatusResponse::default())
    }
    async fn run_pod_sandbox(
        &self,
        req: RunPodSandboxRequest,
    ) -> Result<RunPodSandboxResponse, Status> {
        let config = req.config.unwrap_or_default();
        let meta = config.metadata.clone().unwrap_or_default();
        let id = self.add_sandbox(&meta.uid, &meta.name, true);
        let mut s = self.lock();
        s.calls.push(format!("RunPodSandbox:{}", meta.attempt));
        if let Some(sb) = s.sandboxes.get_mut(&id) {
            sb.metadata = Some(meta);
            sb.labels = config.labels;
        }
        Ok(RunPodSandboxResponse { pod_sandbox_id: id })
    }
    async fn stop_pod_sandbox(
        &self,
        req: StopPodSandboxRequest,
    ) -> Result<StopPodSandboxResponse, Status> {
        let mut s = self.lock();
        s.calls.push("StopPodSandbox".into());
        if let Some(sb) = s.sandboxes.get_mut(&req.pod_sandbox_id) {
            sb.state = PodSandboxState::SandboxNotready as i32;
        }
        let now = now_nanos();
        for (sandbox, c) in s.containers.values_mut() {
            if *sandbox == req.pod_sandbox_id && c.state == ContainerState::ContainerRunning as i32
            {
                c.state = ContainerState::ContainerExited as i32;
                c.exit_code = 137;
                c.finished_at = now;
            }
        }
        Ok(StopPodSandboxResponse {})
    }
    async fn remove_pod_sandbox(
        &self,
        req: RemovePodSandboxRequest,
    ) -> Result<RemovePodSandboxResponse, Status> {
        let mut s = self.lock();
        s.calls.push("RemovePodSandbox".into());
        s.sandboxes.remove(&req.pod_sandbox_id);
        s.containers
            .retain(|_, (sandbox, _)| *sandbox != req.pod_sandbox_id);
        Ok(RemovePodSandboxResponse {})
    }
    async fn pod_sandbox_status(
        &self,
        req: PodSandboxStatusRequest,
    ) -> Result<PodSandboxStatusResponse, Status> {
        let s = self.lock();
        let status = s
            .sandboxes
            .get(&req.pod_sandbox_id)
            .cloned()
            .ok_or_else(|| not_found("sandbox"))?;
        Ok(PodSandboxStatusResponse {
            status: Some(status),
            ..Default::default()
        })
    }
    async fn list_pod_sandbox(
        &self,
        req: ListPodSandboxRequest,
    ) -> Result<ListPodSandboxResponse, Status> {
        let selector = req.filter.map(|f| f.label_selector).unwrap_or_default();
        let s = self.lock();
        let items = s
            .sandboxes
            .values()
            .filter(|sb| matches(&sb.labels, &selector))
            .map(|sb| PodSandbox {
                id: sb.id.clone(),
                metadata: sb.metadata.clone(),
                state: sb.state,
                created_at: sb.created_at,
                labels: sb.labels.clone(),
                ..Default::default()
            })
            .collect();
        Ok(ListPodSandboxResponse { items })
    }
    async fn create_container(
        &self,
        req: CreateContainerRequest,
    ) -> Result<CreateContainerResponse, Status> {
        let config = req.config.unwrap_or_default();
        let name = config.metadata.clone().unwrap_or_default().name;
        let uid = config
            .labels
            .get(POD_UID_LABEL)
            .cloned()
            .unwrap_or_default();
        let id = self.add_container(
            &req.pod_sandbox_id,
            &uid,
            &name,
            ContainerState::ContainerCreated,
        );
        let mut s = self.lock();
        s.calls.push(format!("CreateContainer:{name}"));
        if let Some((_, c)) = s.containers.get_mut(&id) {
            c.labels = config.labels;
            c.annotations = config.annotations;
            c.image = config.image;
            c.log_path = config.log_path;
            c.metadata = config.metadata;
            c.mounts = config.mounts;
        }
        Ok(CreateContainerResponse { container_id: id })
    }
    async fn start_container(
        &self,
        req: StartContainerRequest,
    ) -> Result<StartContainerResponse, Status> {
        let mut s = self.lock();
        s.calls.push("StartContainer".into());
        let (_, c) = s
            .containers
            .get_mut(&req.container_id)
            .ok_or_else(|| not_found("container"))?;
        c.state = ContainerState::ContainerRunning as i32;
        c.started_at = now_nanos();
        Ok(StartContainerResponse {})
    }
    async fn stop_container(
        &self,
        req: StopContainerRequest,
    ) -> Result<StopContainerResponse, Status> {
        let mut s = self.lock();
        s.calls.push(format!("StopContainer:{}", req.timeout));
        let now = now_nanos();
        if let Some((_, c)) = s.containers.get_mut(&req.container_id)
            && c.state != ContainerState::ContainerExited as i32
        {
            c.state = ContainerState::ContainerExited as i32;
            c.exit_code = 143;
            c.finished_at = now;
        }
        Ok(StopContainerResponse {})
    }
    async fn remove_container(
        &self,
        req: RemoveContainerRequest,
    ) -> Result<RemoveContainerResponse, Status> {
        let mut s = self.lock();
        s.calls.push("RemoveContainer".into());
        s.containers.remove(&req.container_id);
        Ok(RemoveContainerResponse {})
    }
    async fn list_containers(
        &self,
        req: ListContainersRequest,
    ) -> Result<ListContainersResponse, Status> {
        let filter = req.filter.unwrap_or_default();
        let s = self.lock();
        let containers = s
            .containers
            .values()
            .filter(|(_, c)| {
                matches(&c.labels, &filter.label_selector)
                    && filter.state.as_ref().is_none_or(|f| f.state == c.state)
            })
            .map(|(sandbox, c)| Container {
                id: c.id.clone(),
                pod_sandbox_id: sandbox.clone(),
                metadata: c.metadata.clone(),
                state: c.state,
                created_at: c.created_at,
                labels: c.labels.clone(),
                annotations: c.annotations.clone(),
                ..Default::default()
            })
            .collect();
        Ok(ListContainersResponse { containers })
    }
    /// Creates the container's log file anew when it is missing, as a runtime reopening
    /// its log does.
    async fn reopen_container_log(
        &self,
        req: ReopenContainerLogRequest,
    ) -> Result<ReopenContainerLogResponse, Status> {
        let mut s = self.lock();
        s.calls.push("ReopenContainerLog".into());
        let (_, c) = s
            .containers
            .get(&req.container_id)
            .ok_or_else(|| not_found("container"))?;
        if !c.log_path.is_empty() {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&c.log_path)
                .map_err(|e| Status::internal(e.to_string()))?;
        }
        Ok(ReopenContainerLogResponse {})
    }
    async fn container_status(
        &self,
        req: ContainerStatusRequest,
    ) -> Result<ContainerStatusResponse, Status> {
        let s = self.lock();
        let (_, c) = s
            .containers
            .get(&req.container_id)
            .ok_or_else(|| not_found("container"))?;
        Ok(ContainerStatusResponse {
            status: Some(c.clone()),
            ..Default::default()
        })
    }
    async fn pull_image(&self, req: PullImageRequest) -> Result<PullImageResponse, Status> {
        let image = req.image.unwrap_or_default().image;
        let mut s = self.lock();
        s.calls.push(format!("PullImage:{image}"));
        if s.failing_pulls.contains(&image) {
            return Err(Status::unavailable("registry unreachable"));
        }
        s.images.insert(image.clone());
        Ok(PullImageResponse {
            image_ref: format!("sha256:{image}"),
        })
    }
    async fn image_status(&self, req: ImageStatusRequest) -> Result<ImageStatusResponse, Status> {
        let image = req.image.unwrap_or_default().image;
        let s = self.lock();
        let found = s.images.contains(&image).then(|| Image {
            id: format!("sha256:{image}"),
            ..Default::default()
        });
        Ok(ImageStatusResponse {
            image: found,
            ..Default::default()
        })
    }
    async fn exec_sync(&self, req: ExecSyncRequest) -> Result<ExecSyncResponse, Status> {
        let script = {
            let mut s = self.lock();
            s.exec_requests.push(req.clone());
            s.exec_script.clone()
        };
        let script = script.ok_or_else(|| not_found("container"))?;
        let timeout = std::time::Duration::from_secs(u64::try_from(req.timeout).unwrap_or(0));
        if req.timeout > 0 && script.takes > timeout {
            tokio::time::sleep(timeout).await;
            return Err(Status::deadline_exceeded("exec timed out"));
        }
        tokio::time::sleep(script.takes).await;
        Ok(ExecSyncResponse {
            stdout: script.stdout.into_bytes(),
            stderr: script.stderr.into_bytes(),
            exit_code: script.exit_code,
        })
    }
}
