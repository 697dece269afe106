//! The Container Runtime Interface as the kubelet sees it.
//!
//! [`Cri`] covers the CRI v1 RuntimeService and ImageService calls (upstream:
//! `internalapi.RuntimeService` + `internalapi.ImageManagerService`). Two
//! implementations: [`Embedded`] calls a runtime linked into this process, [`Remote`]
//! talks CRI v1 gRPC over a unix socket. Both are generated from one list of calls
//! ([`cri_calls`]) so that they cannot drift apart.

mod embedded;
#[cfg(test)]
pub(crate) mod fake;
mod remote;

pub use embedded::Embedded;
pub use remote::Remote;

use async_trait::async_trait;
use futures::stream::BoxStream;
use k8s_cri::v1::*;
use tonic::Status;

/// A stream of container lifecycle events (CRI `GetContainerEvents`).
pub type ContainerEventStream = BoxStream<'static, Result<ContainerEventResponse, Status>>;

/// Calls `$then!` with every unary CRI v1 call as
/// `#[doc] service method(Request) -> Response;`, where `service` is `runtime` or
/// `images`: the one list from which the [`Cri`] trait and its implementations are built.
macro_rules! cri_calls {
    ($then:ident) => {
        $then! {
            /// RuntimeService.Version: runtime name and version.
            runtime version(VersionRequest) -> VersionResponse;
            /// RuntimeService.Status: runtime and network readiness.
            runtime status(StatusRequest) -> StatusResponse;
            /// RuntimeService.RuntimeConfig: the runtime's cgroup driver.
            runtime runtime_config(RuntimeConfigRequest) -> RuntimeConfigResponse;
            /// RuntimeService.UpdateRuntimeConfig: the pod CIDR for the runtime's CNI config.
            runtime update_runtime_config(UpdateRuntimeConfigRequest) -> UpdateRuntimeConfigResponse;
            /// RuntimeService.RunPodSandbox: creates and starts a pod sandbox.
            runtime run_pod_sandbox(RunPodSandboxRequest) -> RunPodSandboxResponse;
            /// RuntimeService.StopPodSandbox: stops the sandbox and its containers.
            runtime stop_pod_sandbox(StopPodSandboxRequest) -> StopPodSandboxResponse;
            /// RuntimeService.RemovePodSandbox: removes a sandbox and its containers.
            runtime remove_pod_sandbox(RemovePodSandboxRequest) -> RemovePodSandboxResponse;
            /// RuntimeService.PodSandboxStatus.
            runtime pod_sandbox_status(PodSandboxStatusRequest) -> PodSandboxStatusResponse;
            /// RuntimeService.ListPodSandbox.
            runtime list_pod_sandbox(ListPodSandboxRequest) -> ListPodSandboxResponse;
            /// RuntimeService.CreateContainer: creates a container in a sandbox.
            runtime create_container(CreateContainerRequest) -> CreateContainerResponse;
            /// RuntimeService.StartContainer.
            runtime start_container(StartContainerRequest) -> StartContainerResponse;
            /// RuntimeService.StopContainer: stop signal, then SIGKILL after `timeout` seconds.
            runtime stop_container(StopContainerRequest) -> StopContainerResponse;
            /// RuntimeService.RemoveContainer.
            runtime remove_container(RemoveContainerRequest) -> RemoveContainerResponse;
            /// RuntimeService.ListContainers.
            runtime list_containers(ListContainersRequest) -> ListContainersResponse;
            /// RuntimeService.ContainerStatus.
            runtime container_status(ContainerStatusRequest) -> ContainerStatusResponse;
            /// RuntimeService.UpdateContainerResources.
            runtime update_container_resources(UpdateContainerResourcesRequest) -> UpdateContainerResourcesResponse;
            /// RuntimeService.ReopenContainerLog: the container's log file is reopened.
            runtime reopen_container_log(ReopenContainerLogRequest) -> ReopenContainerLogResponse;
            /// RuntimeService.ExecSync: runs a command to completion (`timeout` seconds, 0 = none).
            runtime exec_sync(ExecSyncRequest) -> ExecSyncResponse;
            /// RuntimeService.Exec: a streaming-server URL for an exec session.
            runtime exec(ExecRequest) -> ExecResponse;
            /// RuntimeService.Attach: a streaming-server URL for an attach session.
            runtime attach(AttachRequest) -> AttachResponse;
            /// RuntimeService.PortForward: a streaming-server URL for port forwarding.
            runtime port_forward(PortForwardRequest) -> PortForwardResponse;
            /// RuntimeService.ContainerStats.
            runtime container_stats(ContainerStatsRequest) -> ContainerStatsResponse;
            /// RuntimeService.ListContainerStats.
            runtime list_container_stats(ListContainerStatsRequest) -> ListContainerStatsResponse;
            /// RuntimeService.PodSandboxStats.
            runtime pod_sandbox_stats(PodSandboxStatsRequest) -> PodSandboxStatsResponse;
            /// RuntimeService.ListPodSandboxStats.
            runtime list_pod_sandbox_stats(ListPodSandboxStatsRequest) -> ListPodSandboxStatsResponse;
            /// RuntimeService.ListMetricDescriptors.
            runtime list_metric_descriptors(ListMetricDescriptorsRequest) -> ListMetricDescriptorsResponse;
            /// RuntimeService.ListPodSandboxMetrics.
            runtime list_pod_sandbox_metrics(ListPodSandboxMetricsRequest) -> ListPodSandboxMetricsResponse;
            /// ImageService.ListImages.
            images list_images(ListImagesRequest) -> ListImagesResponse;
            /// ImageService.ImageStatus: `image` is `None` in the response when absent.
            images image_status(ImageStatusRequest) -> ImageStatusResponse;
            /// ImageService.PullImage.
            images pull_image(PullImageRequest) -> PullImageResponse;
            /// ImageService.RemoveImage: removing an absent image is not an error.
            images remove_image(RemoveImageRequest) -> RemoveImageResponse;
            /// ImageService.ImageFsInfo: usage of the image and container filesystems.
            images image_fs_info(ImageFsInfoRequest) -> ImageFsInfoResponse;
        }
    };
}
pub(crate) use cri_calls;

macro_rules! define_cri_trait {
    ($($(#[$doc:meta])* $service:ident $method:ident($req:ty) -> $resp:ty;)*) => {
        /// The CRI v1 calls. Every call takes the CRI request message and returns the
        /// response message or the runtime's gRPC [`Status`].
        ///
        /// Every call defaults to `Unimplemented`, as a runtime that lacks it answers
        /// (containerd 1.6 lacks GetContainerEvents and the metrics calls); [`Embedded`]
        /// and [`Remote`] implement them all. Object-safe: the kubelet holds an
        /// `Arc<dyn Cri>`.
        #[async_trait]
        pub trait Cri: Send + Sync {
            $(
                $(#[$doc])*
                async fn $method(&self, req: $req) -> Result<$resp, Status> {
                    let _ = req;
                    Err(Status::unimplemented(concat!(stringify!($method), " is not implemented")))
                }
            )*
            /// RuntimeService.GetContainerEvents: a stream of container lifecycle events,
            /// from now on (no history).
            async fn get_container_events(
                &self,
                req: GetEventsRequest,
            ) -> Result<ContainerEventStream, Status> {
                let _ = req;
                Err(Status::unimplemented("get_container_events is not implemented"))
            }
        }
    };
}
cri_calls!(define_cri_trait);

/// Every pod sandbox and every container the runtime has (unfiltered ListPodSandbox,
/// then ListContainers): the runtime-side view PLEG relists, stats and `/runningpods/`
/// start from. Errors with the first call's failure.
pub async fn list_all(cri: &dyn Cri) -> Result<(Vec<PodSandbox>, Vec<Container>), Status> {
    let sandboxes = cri
        .list_pod_sandbox(ListPodSandboxRequest::default())
        .await?
        .items;
    let containers = cri
        .list_containers(ListContainersRequest::default())
        .await?
        .containers;
    Ok((sandboxes, containers))
}
