//! `pods/log` (upstream `LogREST`): `GET .../pods/<name>/log?container&follow&previous&
//! timestamps&sinceSeconds&sinceTime&tailLines&limitBytes`, streamed from the kubelet's
//! `/containerLogs/<ns>/<pod>/<container>`.

use async_trait::async_trait;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{Method, StatusCode, header};
use axum::response::Response;

use super::{
    kubelet_client, kubelet_error, location, method_not_allowed, query_pairs, unreachable,
};
use crate::error::ApiError;
use crate::registry::{Context, Subresource};

/// The `log` subresource of pods.
pub struct PodLog;

/// The kubelet query for the request's log options, checked as upstream's
/// `ValidatePodLogOptions`, and the requested container.
fn log_query(pairs: Vec<(String, String)>) -> Result<(Option<String>, String), ApiError> {
    let mut container = None;
    let mut out = Vec::new();
    for (key, value) in pairs {
        match key.as_str() {
            "container" => container = Some(value),
            "follow" | "previous" | "timestamps" if value != "false" => {
                out.push((key, "true".to_owned()));
            }
            "follow" | "previous" | "timestamps" => {}
            "sinceSeconds" | "tailLines" | "limitBytes" => {
                let n: i64 = value.parse().map_err(|_| {
                    ApiError::bad_request(format!("invalid value {value:?} for {key}"))
                })?;
                let min = if key == "tailLines" { 0 } else { 1 };
                if n < min {
                    let rule = if min == 0 {
                        "must be greater than or equal to 0"
                    } else {
                        "must be greater than 0"
                    };
                    return Err(ApiError::bad_request(format!("{key}: {rule}")));
                }
                out.push((key, n.to_string()));
            }
            "sinceTime" => out.push((key, value)),
            _ => {}
        }
    }
    if out.iter().any(|(k, _)| k == "sinceSeconds") && out.iter().any(|(k, _)| k == "sinceTime") {
        return Err(ApiError::bad_request(
            "at most one of `sinceTime` or `sinceSeconds` may be specified",
        ));
    }
    let query = serde_urlencoded::to_string(&out).map_err(ApiError::internal)?;
    Ok((container, query))
}

#[async_trait]
impl Subresource for PodLog {
    fn name(&self) -> &'static str {
        "log"
    }

    fn verbs(&self) -> &'static [&'static str] {
        &["get"]
    }

    fn kind(&self) -> Option<(&'static str, &'static str, &'static str)> {
        None
    }

    async fn handle(
        &self,
        ctx: &Context<'_>,
        namespace: Option<&str>,
        name: &str,
        request: Request,
    ) -> Result<Response, ApiError> {
        if request.method() != Method::GET {
            return Err(method_not_allowed());
        }
        let (requested, query) = log_query(query_pairs(request.uri())?)?;
        let pod = location::pod(ctx, namespace, name).await?;
        let container = location::container(&pod, requested.as_deref())?;
        let text = |body: Body| {
            Response::builder()
                .status(StatusCode::OK)
                .header(header::CONTENT_TYPE, "text/plain")
                .body(body)
                .map_err(ApiError::internal)
        };
        // Upstream: an unscheduled pod has no logs yet (an empty answer).
        let Ok(node) = location::node_name(&pod) else {
            return text(Body::empty());
        };
        let client = kubelet_client(ctx)?;
        let (host, port) = location::kubelet(ctx, &node).await?;
        let ns = namespace.unwrap_or_default();
        let mut path = format!("/containerLogs/{ns}/{name}/{container}");
        if !query.is_empty() {
            path = format!("{path}?{query}");
        }
        let backend = hyper::Request::get(path)
            .body(Body::empty())
            .map_err(ApiError::internal)?;
        let response = client
            .send(&host, port, backend)
            .await
            .map_err(unreachable)?;
        if !response.status().is_success() {
            return Err(kubelet_error(response).await);
        }
        text(Body::new(response.into_body()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Result<(Option<String>, String), ApiError> {
        log_query(serde_urlencoded::from_str(s).unwrap())
    }

    #[test]
    fn builds_the_kubelet_query() {
        assert_eq!(
            q("container=c&follow=true&tailLines=10&pretty=1").unwrap(),
            (Some("c".into()), "follow=true&tailLines=10".into())
        );
        assert_eq!(q("previous=false").unwrap(), (None, String::new()));
        assert_eq!(q("tailLines=-1").unwrap_err().code, 400);
        assert_eq!(q("limitBytes=0").unwrap_err().code, 400);
        assert_eq!(q("sinceSeconds=x").unwrap_err().code, 400);
        assert_eq!(
            q("sinceSeconds=5&sinceTime=2024-01-01T00:00:00Z")
                .unwrap_err()
                .message,
            "at most one of `sinceTime` or `sinceSeconds` may be specified"
        );
    }
}
