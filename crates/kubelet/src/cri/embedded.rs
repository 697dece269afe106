//! [`Cri`] over a runtime linked into this process: calls the tonic server traits directly.

use std::sync::Arc;

use async_trait::async_trait;
use k8s_cri::v1::image_service_server::ImageService;
use k8s_cri::v1::runtime_service_server::RuntimeService;
use k8s_cri::v1::*;
use tonic::{Request, Response, Status};

use super::Cri;

/// In-process CRI: `R` is the RuntimeService, `I` the ImageService (both tonic server traits).
pub struct Embedded<R, I> {
    runtime: Arc<R>,
    images: Arc<I>,
}

impl<R: RuntimeService, I: ImageService> Embedded<R, I> {
    /// Wraps the runtime and image services; no I/O.
    pub fn new(runtime: Arc<R>, images: Arc<I>) -> Self {
        Self { runtime, images }
    }
}

#[async_trait]
impl<R: RuntimeService, I: ImageService> Cri for Embedded<R, I> {
    async fn version(&self, req: VersionRequest) -> Result<VersionResponse, Status> {
        RuntimeService::version(&*self.runtime, Request::new(req))
            .await
            .map(Response::into_inner)
    }
    async fn status(&self, req: StatusRequest) -> Result<StatusResponse, Status> {
        RuntimeService::status(&*self.runtime, Request::new(req))
            .await
            .map(Response::into_inner)
    }
    async fn run_pod_sandbox(
        &self,
        req: RunPodSandboxRequest,
    ) -> Result<RunPodSandboxResponse, Status> {
        RuntimeService::run_pod_sandbox(&*self.runtime, Request::new(req))
            .await
            .map(Response::into_inner)
    }
    async fn stop_pod_sandbox(
        &self,
        req: StopPodSandboxRequest,
    ) -> Result<StopPodSandboxResponse, Status> {
        RuntimeService::stop_pod_sandbox(&*self.runtime, Request::new(req))
            .await
            .map(Response::into_inner)
    }
    async fn remove_pod_sandbox(
        &self,
        req: RemovePodSandboxRequest,
    ) -> Result<RemovePodSandboxResponse, Status> {
        RuntimeService::remove_pod_sandbox(&*self.runtime, Request::new(req))
            .await
            .map(Response::into_inner)
    }
    async fn pod_sandbox_status(
        &self,
        req: PodSandboxStatusRequest,
    ) -> Result<PodSandboxStatusResponse, Status> {
        RuntimeService::pod_sandbox_status(&*self.runtime, Request::new(req))
            .await
            .map(Response::into_inner)
    }
    async fn list_pod_sandbox(
        &self,
        req: ListPodSandboxRequest,
    ) -> Result<ListPodSandboxResponse, Status> {
        RuntimeService::list_pod_sandbox(&*self.runtime, Request::new(req))
            .await
            .map(Response::into_inner)
    }
    async fn create_container(
        &self,
        req: CreateContainerRequest,
    ) -> Result<CreateContainerResponse, Status> {
        RuntimeService::create_container(&*self.runtime, Request::new(req))
            .await
            .map(Response::into_inner)
    }
    async fn start_container(
        &self,
        req: StartContainerRequest,
    ) -> Result<StartContainerResponse, Status> {
        RuntimeService::start_container(&*self.runtime, Request::new(req))
            .await
            .map(Response::into_inner)
    }
    async fn stop_container(
        &self,
        req: StopContainerRequest,
    ) -> Result<StopContainerResponse, Status> {
        RuntimeService::stop_container(&*self.runtime, Request::new(req))
            .await
            .map(Response::into_inner)
    }
    async fn remove_container(
        &self,
        req: RemoveContainerRequest,
    ) -> Result<RemoveContainerResponse, Status> {
        RuntimeService::remove_container(&*self.runtime, Request::new(req))
            .await
            .map(Response::into_inner)
    }
    async fn list_containers(
        &self,
        req: ListContainersRequest,
    ) -> Result<ListContainersResponse, Status> {
        RuntimeService::list_containers(&*self.runtime, Request::new(req))
            .await
            .map(Response::into_inner)
    }
    async fn container_status(
        &self,
        req: ContainerStatusRequest,
    ) -> Result<ContainerStatusResponse, Status> {
        RuntimeService::container_status(&*self.runtime, Request::new(req))
            .await
            .map(Response::into_inner)
    }
    async fn pull_image(&self, req: PullImageRequest) -> Result<PullImageResponse, Status> {
        ImageService::pull_image(&*self.images, Request::new(req))
            .await
            .map(Response::into_inner)
    }
    async fn image_status(&self, req: ImageStatusRequest) -> Result<ImageStatusResponse, Status> {
        ImageService::image_status(&*self.images, Request::new(req))
            .await
            .map(Response::into_inner)
    }
}
