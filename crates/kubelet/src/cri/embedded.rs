//! [`Cri`] over a runtime linked into this process: calls the tonic server traits directly.

use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use k8s_cri::v1::image_service_server::ImageService;
use k8s_cri::v1::runtime_service_server::RuntimeService;
use k8s_cri::v1::*;
use tonic::{Request, Response, Status};

use super::{ContainerEventStream, Cri, cri_calls};

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

macro_rules! embedded_impl {
    ($($(#[$doc:meta])* $service:ident $method:ident($req:ty) -> $resp:ty;)*) => {
        #[async_trait]
        impl<R: RuntimeService, I: ImageService> Cri for Embedded<R, I> {
            $(
                async fn $method(&self, req: $req) -> Result<$resp, Status> {
                    self.$service.$method(Request::new(req)).await.map(Response::into_inner)
                }
            )*
            async fn get_container_events(
                &self,
                req: GetEventsRequest,
            ) -> Result<ContainerEventStream, Status> {
                let events = self.runtime.get_container_events(Request::new(req)).await?;
                Ok(events.into_inner().boxed())
            }
        }
    };
}
cri_calls!(embedded_impl);
