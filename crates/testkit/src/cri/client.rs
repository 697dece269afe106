//! gRPC channels to a CRI unix socket.

use std::path::{Path, PathBuf};

use anyhow::Context;
use hyper_util::rt::TokioIo;
use k8s_cri::v1::VersionRequest;
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint, Uri};

/// A channel to the CRI server on `socket`, checked with a Version call. It reconnects
/// by itself after the server restarts. Must be used from the tokio runtime it was made
/// in.
///
/// Errors: nothing accepts on the socket, or Version fails.
pub async fn connect(socket: &Path) -> anyhow::Result<Channel> {
    let channel = lazy_channel(socket.to_path_buf());
    RuntimeServiceClient::new(channel.clone())
        .version(VersionRequest::default())
        .await
        .with_context(|| format!("Version on {}", socket.display()))?;
    Ok(channel)
}

/// A channel that connects to `socket` on first use.
pub(super) fn lazy_channel(socket: PathBuf) -> Channel {
    Endpoint::from_static("http://[::]:50051").connect_with_connector_lazy(tower::service_fn(
        move |_: Uri| {
            let path = socket.clone();
            async move { UnixStream::connect(path).await.map(TokioIo::new) }
        },
    ))
}
