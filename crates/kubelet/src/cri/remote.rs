//! [`Cri`] over CRI v1 gRPC on a unix socket (upstream: `remote.NewRemoteRuntimeService`).

use std::path::PathBuf;

use anyhow::Context;
use async_trait::async_trait;
use futures::StreamExt;
use hyper_util::rt::TokioIo;
use k8s_cri::v1::image_service_client::ImageServiceClient;
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use k8s_cri::v1::*;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint, Uri};
use tonic::{Response, Status};

use super::{ContainerEventStream, Cri, cri_calls};

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

macro_rules! remote_impl {
    ($($(#[$doc:meta])* $service:ident $method:ident($req:ty) -> $resp:ty;)*) => {
        #[async_trait]
        impl Cri for Remote {
            $(
                async fn $method(&self, req: $req) -> Result<$resp, Status> {
                    self.$service.clone().$method(req).await.map(Response::into_inner)
                }
            )*
            async fn get_container_events(
                &self,
                req: GetEventsRequest,
            ) -> Result<ContainerEventStream, Status> {
                let events = self.runtime.clone().get_container_events(req).await?;
                Ok(events.into_inner().boxed())
            }
        }
    };
}
cri_calls!(remote_impl);

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
