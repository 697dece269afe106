//! ContainerStatus and ListContainers, and folding the shim's exit file into the record.

use k8s_cri::v1::{
    Container as CriContainer, ContainerFilter, ContainerStatus, ContainerStatusRequest,
    ContainerStatusResponse, ImageSpec, ListContainersRequest, ListContainersResponse,
};

use super::{Container, State};
use crate::error::{Error, Result};
use crate::runtime::Runtime;
use crate::shim::exit::ExitStatus;

impl Runtime {
    /// Status of one container; `NotFound` when unknown.
    pub(crate) async fn container_status(
        &self,
        req: ContainerStatusRequest,
    ) -> Result<ContainerStatusResponse> {
        let entry = self
            .containers
            .get(&req.container_id)
            .ok_or_else(|| Error::not_found("container", &req.container_id))?;
        let mut container = entry.lock().await;
        self.refresh(&mut container)?;
        Ok(ContainerStatusResponse {
            status: Some(status(&container)),
            ..Default::default()
        })
    }

    /// Containers matching the filter (ID prefix, state, sandbox, labels).
    pub(crate) async fn list_containers(
        &self,
        req: ListContainersRequest,
    ) -> Result<ListContainersResponse> {
        let filter = req.filter.unwrap_or_default();
        let mut containers = Vec::new();
        for entry in self.containers.all() {
            let mut container = entry.lock().await;
            self.refresh(&mut container)?;
            if matches(&container, &filter) {
                containers.push(CriContainer {
                    id: container.id.clone(),
                    pod_sandbox_id: container.sandbox_id.clone(),
                    metadata: container.config.metadata.clone(),
                    image: Some(image_spec(&container)),
                    image_ref: container.image_id.clone(),
                    state: container.state.to_cri() as i32,
                    created_at: container.created_at,
                    labels: container.config.labels.clone(),
                    annotations: container.config.annotations.clone(),
                    image_id: container.image_id.clone(),
                });
            }
        }
        containers.sort_by_key(|c| c.created_at);
        Ok(ListContainersResponse { containers })
    }

    /// Moves a RUNNING container to EXITED when its shim wrote the exit file (persisted).
    pub(crate) fn refresh(&self, container: &mut Container) -> anyhow::Result<()> {
        if container.state != State::Running {
            return Ok(());
        }
        let Some(exit) = ExitStatus::read(&self.bundle(&container.id).join("exit.json"))? else {
            return Ok(());
        };
        container.state = State::Exited;
        container.exit_code = exit.exit_code;
        container.finished_at = exit.finished_at;
        container.reason = match (exit.oom_killed, exit.exit_code) {
            (true, _) => "OOMKilled",
            (false, 0) => "Completed",
            (false, _) => "Error",
        }
        .to_string();
        container.pid = 0;
        self.container_store.save(&container.id, &*container)
    }
}

fn image_spec(container: &Container) -> ImageSpec {
    let mut spec = container.config.image.clone().unwrap_or_default();
    spec.image = container.image_name.clone();
    spec
}

fn status(container: &Container) -> ContainerStatus {
    ContainerStatus {
        id: container.id.clone(),
        metadata: container.config.metadata.clone(),
        state: container.state.to_cri() as i32,
        created_at: container.created_at,
        started_at: container.started_at,
        finished_at: container.finished_at,
        exit_code: container.exit_code,
        image: Some(image_spec(container)),
        image_ref: container.image_id.clone(),
        reason: container.reason.clone(),
        message: container.message.clone(),
        labels: container.config.labels.clone(),
        annotations: container.config.annotations.clone(),
        mounts: container.config.mounts.clone(),
        log_path: container.log_path.to_string_lossy().into_owned(),
        image_id: container.image_id.clone(),
        ..Default::default()
    }
}

fn matches(container: &Container, filter: &ContainerFilter) -> bool {
    (filter.id.is_empty() || container.id.starts_with(&filter.id))
        && filter
            .state
            .as_ref()
            .is_none_or(|s| s.state == container.state.to_cri() as i32)
        && (filter.pod_sandbox_id.is_empty()
            || container.sandbox_id.starts_with(&filter.pod_sandbox_id))
        && filter
            .label_selector
            .iter()
            .all(|(k, v)| container.config.labels.get(k) == Some(v))
}
