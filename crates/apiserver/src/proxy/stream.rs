//! `pods/exec`, `pods/attach` and `pods/portforward` (upstream `ExecREST`, `AttachREST`,
//! `PortForwardREST` with the upgrade-aware proxy): the client's upgrade request goes to
//! the kubelet's `/exec/<ns>/<pod>/<container>`, `/attach/...` or `/portForward/<ns>/<pod>`
//! with its query (less `container`) and its headers (`Upgrade`, `Connection`,
//! `Sec-WebSocket-*`, `X-Stream-Protocol-Version`, ...). A `101 Switching Protocols`
//! answer is passed back and both upgraded connections are spliced; any other answer is
//! passed back as is.

use async_trait::async_trait;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{Method, StatusCode, header};
use axum::response::Response;
use hyper_util::rt::TokioIo;

use super::{kubelet_client, location, method_not_allowed, query_pairs, unreachable};
use crate::error::ApiError;
use crate::registry::{Context, Subresource};

/// One streaming subresource of pods.
pub struct PodStream {
    /// The subresource, `exec`.
    name: &'static str,
    /// The kubelet path segment, `exec` (`portForward` for `portforward`).
    kubelet_path: &'static str,
    /// Whether the request names a container (exec, attach).
    per_container: bool,
}

impl PodStream {
    pub const EXEC: PodStream = PodStream {
        name: "exec",
        kubelet_path: "exec",
        per_container: true,
    };
    pub const ATTACH: PodStream = PodStream {
        name: "attach",
        kubelet_path: "attach",
        per_container: true,
    };
    pub const PORT_FORWARD: PodStream = PodStream {
        name: "portforward",
        kubelet_path: "portForward",
        per_container: false,
    };
}

/// The request's query without `container` (the kubelet takes it in the path).
fn kubelet_query(pairs: Vec<(String, String)>) -> Result<(Option<String>, String), ApiError> {
    let mut container = None;
    let mut rest = Vec::new();
    for (key, value) in pairs {
        if key == "container" {
            container = Some(value);
        } else {
            rest.push((key, value));
        }
    }
    let query = serde_urlencoded::to_string(&rest).map_err(ApiError::internal)?;
    Ok((container, query))
}

#[async_trait]
impl Subresource for PodStream {
    fn name(&self) -> &'static str {
        self.name
    }

    fn verbs(&self) -> &'static [&'static str] {
        &["create", "get"]
    }

    fn kind(&self) -> Option<(&'static str, &'static str, &'static str)> {
        None
    }

    async fn handle(
        &self,
        ctx: &Context<'_>,
        namespace: Option<&str>,
        name: &str,
        mut request: Request,
    ) -> Result<Response, ApiError> {
        if request.method() != Method::GET && request.method() != Method::POST {
            return Err(method_not_allowed());
        }
        let (requested, query) = kubelet_query(query_pairs(request.uri())?)?;
        let pod = location::pod(ctx, namespace, name).await?;
        let ns = namespace.unwrap_or_default();
        let mut path = if self.per_container {
            let container = location::container(&pod, requested.as_deref())?;
            format!("/{}/{ns}/{name}/{container}", self.kubelet_path)
        } else {
            format!("/{}/{ns}/{name}", self.kubelet_path)
        };
        let node = location::node_name(&pod)?;
        let client = kubelet_client(ctx)?;
        let (host, port) = location::kubelet(ctx, &node).await?;
        if !query.is_empty() {
            path = format!("{path}?{query}");
        }
        let mut backend = hyper::Request::builder()
            .method(request.method().clone())
            .uri(path)
            .body(Body::empty())
            .map_err(ApiError::internal)?;
        for (key, value) in request.headers() {
            if key != header::HOST && key != header::CONTENT_LENGTH {
                backend.headers_mut().append(key.clone(), value.clone());
            }
        }
        let client_upgrade = hyper::upgrade::on(&mut request);
        let mut response = client
            .send(&host, port, backend)
            .await
            .map_err(unreachable)?;
        if response.status() != StatusCode::SWITCHING_PROTOCOLS {
            let (parts, body) = response.into_parts();
            return Ok(Response::from_parts(parts, Body::new(body)));
        }
        let backend_upgrade = hyper::upgrade::on(&mut response);
        tokio::spawn(async move {
            let (client, backend) = match tokio::try_join!(client_upgrade, backend_upgrade) {
                Ok(pair) => pair,
                Err(e) => {
                    tracing::warn!(error = %e, "stream upgrade to the kubelet failed");
                    return;
                }
            };
            let mut client = TokioIo::new(client);
            let mut backend = TokioIo::new(backend);
            if let Err(e) = tokio::io::copy_bidirectional(&mut client, &mut backend).await {
                tracing::debug!(error = %e, "stream proxy ended");
            }
        });
        let mut switched = Response::new(Body::empty());
        *switched.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
        *switched.headers_mut() = response.headers().clone();
        Ok(switched)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_the_container_into_the_path() {
        let pairs = serde_urlencoded::from_str(
            "command=sh&command=-c&command=echo%20hi&container=app&stdout=true",
        )
        .unwrap();
        let (container, query) = kubelet_query(pairs).unwrap();
        assert_eq!(container.as_deref(), Some("app"));
        assert_eq!(query, "command=sh&command=-c&command=echo+hi&stdout=true");
    }
}
