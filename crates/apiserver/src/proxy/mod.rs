//! Pod subresources served by the pod's kubelet (upstream `pkg/registry/core/pod/rest`
//! `LogREST`, `ExecREST`, `AttachREST`, `PortForwardREST`): the API server finds the
//! container and the node's kubelet and proxies the request to it over HTTPS with the
//! kubelet client certificate. Logs are streamed back; exec, attach and port-forward
//! are connection upgrades (SPDY/3.1 or WebSocket channel protocols), spliced byte for
//! byte once both sides switched protocols. The `proxy` subresources of pods, services
//! and nodes send any request on to the pod, a service endpoint or the node's kubelet
//! (see `resource` and `forward`).

mod client;
mod forward;
mod location;
mod log;
mod resource;
mod stream;
#[cfg(test)]
mod tests;

use std::sync::Arc;

pub use client::KubeletClient;
pub use location::DEFAULT_KUBELET_PORT;
pub use resource::{Proxied, ResourceProxy};

use crate::error::ApiError;
use crate::registry::{Context, Subresource};

/// The pods subresources this module serves: `log`, `exec`, `attach`, `portforward`,
/// `proxy`.
pub fn pod_subresources() -> Vec<Arc<dyn Subresource>> {
    vec![
        Arc::new(log::PodLog),
        Arc::new(stream::PodStream::EXEC),
        Arc::new(stream::PodStream::ATTACH),
        Arc::new(stream::PodStream::PORT_FORWARD),
        Arc::new(ResourceProxy(Proxied::Pods)),
    ]
}

/// The server's kubelet client, or 503 when it has none.
fn kubelet_client<'a>(ctx: &'a Context<'_>) -> Result<&'a KubeletClient, ApiError> {
    ctx.config
        .kubelet_client
        .as_deref()
        .ok_or_else(|| ApiError::unavailable("the API server has no kubelet client configured"))
}

/// The query pairs of a request.
fn query_pairs(uri: &axum::http::Uri) -> Result<Vec<(String, String)>, ApiError> {
    serde_urlencoded::from_str(uri.query().unwrap_or_default())
        .map_err(|e| ApiError::bad_request(format!("invalid query: {e}")))
}

/// An error for a kubelet's non-success answer (upstream `GenericHttpResponseChecker`):
/// the kubelet's code, its body as the message.
async fn kubelet_error(response: hyper::Response<hyper::body::Incoming>) -> ApiError {
    use http_body_util::BodyExt;
    let code = response.status().as_u16();
    let body = match response.into_body().collect().await {
        Ok(bytes) => String::from_utf8_lossy(&bytes.to_bytes()).trim().to_owned(),
        Err(e) => e.to_string(),
    };
    let reason = match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        409 => "Conflict",
        503 => "ServiceUnavailable",
        _ => "InternalError",
    };
    ApiError::new(code, reason, body)
}

/// 502-style error for a kubelet that cannot be reached (upstream answers 500 with the
/// dial error).
fn unreachable(err: anyhow::Error) -> ApiError {
    ApiError::internal(format!("{err:#}"))
}

/// 405 as upstream's for a method a subresource does not take.
fn method_not_allowed() -> ApiError {
    ApiError::new(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
    )
}
