//! CRI v1 gRPC services: RuntimeService and ImageService on a unix socket.

mod image_service;
mod info;
mod runtime_service;

use std::future::Future;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use k8s_cri::v1::image_service_server::ImageServiceServer;
use k8s_cri::v1::runtime_service_server::RuntimeServiceServer;

use crate::image::ImageManager;
use crate::runtime::Runtime;

/// Serves CRI v1 (RuntimeService backed by `runtime`, ImageService backed by `images`) on
/// the unix socket `socket`, and the runtime's streaming server (exec / attach /
/// port-forward URLs), until `shutdown` completes or one of them fails. A stale socket file is replaced;
/// the socket file is removed on shutdown. The returned future owns its arguments
/// (`'static`), so it can be spawned.
pub fn serve(
    socket: &Path,
    runtime: Arc<Runtime>,
    images: Arc<ImageManager>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> impl Future<Output = anyhow::Result<()>> + Send + 'static {
    let socket = socket.to_path_buf();
    async move { serve_owned(&socket, runtime, images, shutdown).await }
}

async fn serve_owned(
    socket: &Path,
    runtime: Arc<Runtime>,
    images: Arc<ImageManager>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    if let Some(dir) = socket.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    crate::store::remove_file_if_exists(socket)?;
    let listener = tokio::net::UnixListener::bind(socket)
        .with_context(|| format!("binding {}", socket.display()))?;
    let incoming = tokio_stream::wrappers::UnixListenerStream::new(listener);
    // Open GetContainerEvents streams would keep the graceful shutdown waiting.
    let events_runtime = runtime.clone();
    let runtime_for_network = runtime.clone();
    let shutdown = async move {
        shutdown.await;
        events_runtime.events.close();
    };
    let stop = tokio_util::sync::CancellationToken::new();
    let streaming = runtime
        .streaming
        .serve(runtime.clone(), stop.clone().cancelled_owned());
    let cri = tonic::transport::Server::builder()
        .add_service(RuntimeServiceServer::from_arc(runtime))
        .add_service(ImageServiceServer::from_arc(images))
        .serve_with_incoming_shutdown(incoming, {
            let stop = stop.clone();
            async move {
                tokio::select! {
                    () = shutdown => {}
                    () = stop.cancelled() => {}
                }
            }
        });
    // Whichever ends first (shutdown, or a failure) stops the other.
    let stopping = |result: anyhow::Result<()>| {
        stop.cancel();
        result
    };
    let (cri, streaming) = tokio::join!(
        async { stopping(cri.await.context("serving CRI")) },
        async { stopping(streaming.await) }
    );
    let _ = crate::store::remove_file_if_exists(socket);
    if let Err(err) = runtime_for_network.cni.shutdown().await {
        tracing::warn!("removing the pod network's masquerade rules: {err:#}");
    }
    cri.and(streaming)
}
