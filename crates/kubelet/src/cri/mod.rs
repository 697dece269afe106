//! The Container Runtime Interface as the kubelet sees it.
//!
//! [`Cri`] covers the RuntimeService and ImageService calls the kubelet makes
//! (upstream: `internalapi.RuntimeService` + `internalapi.ImageManagerService`).
//! Two implementations: [`Embedded`] calls a runtime linked into this process,
//! [`Remote`] talks CRI v1 gRPC over a unix socket.

mod embedded;
#[cfg(test)]
pub(crate) mod fake;
mod remote;

pub use embedded::Embedded;
pub use remote::Remote;

use async_trait::async_trait;
use k8s_cri::v1::{
    ContainerStatusRequest, ContainerStatusResponse, CreateContainerRequest,
    CreateContainerResponse, ImageStatusRequest, ImageStatusResponse, ListContainersRequest,
    ListContainersResponse, ListPodSandboxRequest, ListPodSandboxResponse, PodSandboxStatusRequest,
    PodSandboxStatusResponse, PullImageRequest, PullImageResponse, RemoveContainerRequest,
    RemoveContainerResponse, RemovePodSandboxRequest, RemovePodSandboxResponse,
    RunPodSandboxRequest, RunPodSandboxResponse, StartContainerRequest, StartContainerResponse,
    StatusRequest, StatusResponse, StopContainerRequest, StopContainerResponse,
    StopPodSandboxRequest, StopPodSandboxResponse, VersionRequest, VersionResponse,
};
use tonic::Status;

/// The CRI v1 calls the kubelet uses. Every call takes the CRI request message and
/// returns the response message or the runtime's gRPC [`Status`].
///
/// Object-safe: the kubelet holds an `Arc<dyn Cri>`.
#[async_trait]
pub trait Cri: Send + Sync {
    /// RuntimeService.Version: runtime name and version.
    async fn version(&self, req: VersionRequest) -> Result<VersionResponse, Status>;
    /// RuntimeService.Status: runtime and network readiness.
    async fn status(&self, req: StatusRequest) -> Result<StatusResponse, Status>;
    /// RuntimeService.RunPodSandbox: creates and starts a pod sandbox.
    async fn run_pod_sandbox(
        &self,
        req: RunPodSandboxRequest,
    ) -> Result<RunPodSandboxResponse, Status>;
    /// RuntimeService.StopPodSandbox: stops the sandbox and its containers.
    async fn stop_pod_sandbox(
        &self,
        req: StopPodSandboxRequest,
    ) -> Result<StopPodSandboxResponse, Status>;
    /// RuntimeService.RemovePodSandbox: removes a sandbox and its containers.
    async fn remove_pod_sandbox(
        &self,
        req: RemovePodSandboxRequest,
    ) -> Result<RemovePodSandboxResponse, Status>;
    /// RuntimeService.PodSandboxStatus.
    async fn pod_sandbox_status(
        &self,
        req: PodSandboxStatusRequest,
    ) -> Result<PodSandboxStatusResponse, Status>;
    /// RuntimeService.ListPodSandbox.
    async fn list_pod_sandbox(
        &self,
        req: ListPodSandboxRequest,
    ) -> Result<ListPodSandboxResponse, Status>;
    /// RuntimeService.CreateContainer: creates a container in a sandbox.
    async fn create_container(
        &self,
        req: CreateContainerRequest,
    ) -> Result<CreateContainerResponse, Status>;
    /// RuntimeService.StartContainer.
    async fn start_container(
        &self,
        req: StartContainerRequest,
    ) -> Result<StartContainerResponse, Status>;
    /// RuntimeService.StopContainer: SIGTERM, then SIGKILL after `timeout` seconds.
    async fn stop_container(
        &self,
        req: StopContainerRequest,
    ) -> Result<StopContainerResponse, Status>;
    /// RuntimeService.RemoveContainer.
    async fn remove_container(
        &self,
        req: RemoveContainerRequest,
    ) -> Result<RemoveContainerResponse, Status>;
    /// RuntimeService.ListContainers.
    async fn list_containers(
        &self,
        req: ListContainersRequest,
    ) -> Result<ListContainersResponse, Status>;
    /// RuntimeService.ContainerStatus.
    async fn container_status(
        &self,
        req: ContainerStatusRequest,
    ) -> Result<ContainerStatusResponse, Status>;
    /// ImageService.PullImage.
    async fn pull_image(&self, req: PullImageRequest) -> Result<PullImageResponse, Status>;
    /// ImageService.ImageStatus: `image` is `None` in the response when absent.
    async fn image_status(&self, req: ImageStatusRequest) -> Result<ImageStatusResponse, Status>;
}
