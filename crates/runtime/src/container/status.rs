//! ContainerStatus and ListContainers.

use k8s_cri::v1::{
    Container as CriContainer, ContainerFilter, ContainerResources, ContainerStatus,
    ContainerStatusRequest, ContainerStatusResponse, ImageSpec, ListContainersRequest,
    ListContainersResponse,
};

use super::Container;
use crate::error::Result;
use crate::runtime::Runtime;

impl Runtime {
    /// Status of one container; `NotFound` when unknown. `image_ref` is the image's first
    /// repo digest (containerd's), `image_id` its ID.
    pub(crate) async fn container_status(
        &self,
        req: ContainerStatusRequest,
    ) -> Result<ContainerStatusResponse> {
        let container = self.current_container(&req.container_id).await?;
        let mut status = status(&container);
        // As containerd: the image's first repo digest (`repo@sha256:<manifest digest>`)
        // when the image is still known, which the kubelet shows as `imageID`; ListContainers
        // keeps the image ID.
        if let Some(digest) = self
            .images
            .get(&container.image_id)
            .and_then(|image| image.repo_digests.into_iter().next())
        {
            status.image_ref = digest;
        }
        Ok(ContainerStatusResponse {
            status: Some(status),
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
        resources: container
            .config
            .linux
            .as_ref()
            .and_then(|l| l.resources.clone())
            .map(|linux| ContainerResources {
                linux: Some(linux),
                windows: None,
            }),
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
