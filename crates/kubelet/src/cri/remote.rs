//! [`Cri`] over CRI v1 gRPC on a unix socket (upstream: `remote.NewRemoteRuntimeService`).

use std::path::PathBuf;

use anyhow::Context;
use async_trait::async_trait;
use hyper_util::rt::TokioIo;
use k8s_cri::v1::image_service_client::ImageServiceClient;
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use k8s_cri::v1::*;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint, Uri};
use tonic::{Response, Status};

use super::Cri;

/// Largest gRPC message accepted from the runtime (upstream `maxMsgSize`, 16 MiB).
const MAX_MESSAGE_SIZE: usize = 16 * 1024 * 1024;

/// CRI client for a runtime listening on a unix socket.
#[derive(Clone)]
pub struct Remote {
    runtime: RuntimeServiceClient<Channel>,
    images: ImageServiceClient<Channel>,
}

impl Remote {
    /// Connects to `endpoint`, either `unix:///path/to/socket` or a bare socket path.
    ///
    /// Errors when the endpoint has another scheme or the socket cannot be connected.
    pub async fn connect(endpoint: &str) -> anyhow::Result<Self> {
        let path = socket_path(endpoint)?;
        let connector_path = path.clone();
        let channel = Endpoint::try_from("http://[::]:50051")?
            .connect_with_connector(tower::service_fn(move |_: Uri| {
                let path = connector_path.clone();
                async move { UnixStream::connect(path).await.map(TokioIo::new) }
            }))
            .await
            .with_context(|| format!("connecting to CRI socket {}", path.display()))?;
        Ok(Self {
            runtime: RuntimeServiceClient::new(channel.clone())
                .max_decoding_message_size(MAX_MESSAGE_SIZE),
            images: ImageServiceClient::new(channel).max_decoding_message_size(MAX_MESSAGE_SIZE),
        })
    }
}

/// Extracts the socket path from `unix:///path` or a bare path.
fn socket_path(endpoint: &str) -> anyhow::Result<PathBuf> {
    if let Some(path) = endpoint.strip_prefix("unix://") {
        return Ok(PathBuf::from(path));
    }
    if endpoint.contains("://") {
        anyhow::bail!("unsupported CRI endpoint {endpoint:?}: only unix:// sockets are supported");
    }
    Ok(PathBuf::from(endpoint))
}

#[async_trait]
impl Cri for Remote {
    async fn version(&self, req: VersionRequest) -> Result<VersionResponse, Status> {
        self.runtime
            .clone()
            .version(req)
            .await
            .map(Response::into_inner)
    }
    async fn status(&self, req: StatusRequest) -> Result<StatusResponse, Status> {
        self.runtime
            .clone()
            .status(req)
            .await
            .map(Response::into_inner)
    }
    async fn run_pod_sandbox(
        &self,
        req: RunPodSandboxRequest,
    ) -> Result<RunPodSandboxResponse, Status> {
        self.runtime
            .clone()
            .run_pod_sandbox(req)
            .await
            .map(Response::into_inner)
    }
    async fn stop_pod_sandbox(
        &self,
        req: StopPodSandboxRequest,
    ) -> Result<StopPodSandboxResponse, Status> {
        self.runtime
            .clone()
            .stop_pod_sandbox(req)
            .await
            .map(Response::into_inner)
    }
    async fn remove_pod_sandbox(
        &self,
        req: RemovePodSandboxRequest,
    ) -> Result<RemovePodSandboxResponse, Status> {
        self.runtime
            .clone()
            .remove_pod_sandbox(req)
            .await
            .map(Response::into_inner)
    }
    async fn pod_sandbox_status(
        &self,
        req: PodSandboxStatusRequest,
    ) -> Result<PodSandboxStatusResponse, Status> {
        self.runtime
            .clone()
            .pod_sandbox_status(req)
            .await
            .map(Response::into_inner)
    }
    async fn list_pod_sandbox(
        &self,
        req: ListPodSandboxRequest,
    ) -> Result<ListPodSandboxResponse, Status> {
        self.runtime
            .clone()
            .list_pod_sandbox(req)
            .await
            .map(Response::into_inner)
    }
    async fn create_container(
        &self,
        req: CreateContainerRequest,
    ) -> Result<CreateContainerResponse, Status> {
        self.runtime
            .clone()
            .create_container(req)
            .await
            .map(Response::into_inner)
    }
    async fn start_container(
        &self,
        req: StartContainerRequest,
    ) -> Result<StartContainerResponse, Status> {
        self.runtime
            .clone()
            .start_container(req)
            .await
            .map(Response::into_inner)
    }
    async fn stop_container(
        &self,
        req: StopContainerRequest,
    ) -> Result<StopContainerResponse, Status> {
        self.runtime
            .clone()
            .stop_container(req)
            .await
            .map(Response::into_inner)
    }
    async fn remove_container(
        &self,
        req: RemoveContainerRequest,
    ) -> Result<RemoveContainerResponse, Status> {
        self.runtime
            .clone()
            .remove_container(req)
            .await
            .map(Response::into_inner)
    }
    async fn list_containers(
        &self,
        req: ListContainersRequest,
    ) -> Result<ListContainersResponse, Status> {
        self.runtime
            .clone()
            .list_containers(req)
            .await
            .map(Response::into_inner)
    }
    async fn container_status(
        &self,
        req: ContainerStatusRequest,
    ) -> Result<ContainerStatusResponse, Status> {
        self.runtime
            .clone()
            .container_status(req)
            .await
            .map(Response::into_inner)
    }
    async fn pull_image(&self, req: PullImageRequest) -> Result<PullImageResponse, Status> {
        self.images
            .clone()
            .pull_image(req)
            .await
            .map(Response::into_inner)
    }
    async fn image_status(&self, req: ImageStatusRequest) -> Result<ImageStatusResponse, Status> {
        self.images
            .clone()
            .image_status(req)
            .await
            .map(Response::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_path_accepts_unix_urls_and_paths() {
        assert_eq!(
            socket_path("unix:///run/skiff/skiff.sock").ok(),
            Some(PathBuf::from("/run/skiff/skiff.sock"))
        );
        assert_eq!(
            socket_path("/run/x.sock").ok(),
            Some(PathBuf::from("/run/x.sock"))
        );
        assert!(socket_path("tcp://127.0.0.1:1").is_err());
    }
}
