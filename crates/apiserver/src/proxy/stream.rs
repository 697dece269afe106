//! `pods/exec`, `pods/attach` and `pods/portforward` (upstream `ExecREST`, `AttachREST`,
//! `PortForwardREST` with the upgrade-aware proxy): the client's upgrade request goes to
//! the kubelet's `/exec/<ns>/<pod>/<container>`, `/attach/...` or `/portForward/<ns>/<pod>`
//! with its query (less `container`) and its headers (`Upgrade`, `Connection`,
//! `Sec-WebSocket-*`, `X-Stream-Protocol-Version`, ...). The query is translated as
//! upstream's `streamParams` does: the API's `PodExecOptions` / `PodAttachOptions`
//! (`stdin`, `stdout`, `stderr`, `tty`, `command`) become the kubelet's `input`, `output`,
//! `error`, `tty` and `command`, and `PodPortForwardOptions.ports` becomes `port`. A
//! `101 Switching Protocols`
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

/// A boolean query parameter of an options kind, as upstream's
/// `Convert_Slice_string_To_bool`: only `0` and `false` (any case) are false; any other
/// value, the empty one included, is true.
fn option_is_set(value: &str) -> bool {
    !(value == "0" || value.eq_ignore_ascii_case("false"))
}

/// The container the request names (`container`, taken by the kubelet in the path) and
/// the kubelet's query for it (upstream `streamParams`): for exec and attach, `input`,
/// `output`, `error` and `tty` set to `1` for the set `stdin`, `stdout`, `stderr` and
/// `tty`, then each `command`; for port-forward, `port` with the `ports` joined by commas.
/// Other parameters are not passed on, as upstream decodes the query into the options
/// kind and encodes only these.
fn kubelet_query(pairs: Vec<(String, String)>) -> Result<(Option<String>, String), ApiError> {
    let mut container = None;
    // The kubelet's name, whether set, whether seen (upstream takes a parameter's first
    // value).
    let mut streams = [
        ("input", false, false),
        ("output", false, false),
        ("error", false, false),
        ("tty", false, false),
    ];
    let mut commands = Vec::new();
    let mut ports = Vec::new();
    for (key, value) in pairs {
        let stream = match key.as_str() {
            "container" => {
                container = Some(value);
                continue;
            }
            "command" => {
                commands.push(value);
                continue;
            }
            "ports" => {
                ports.push(value);
                continue;
            }
            "stdin" => 0,
            "stdout" => 1,
            "stderr" => 2,
            "tty" => 3,
            _ => continue,
        };
        let (_, set, seen) = &mut streams[stream];
        if !*seen {
            *seen = true;
            *set = option_is_set(&value);
        }
    }
    let mut query: Vec<(&str, &str)> = streams
        .iter()
        .filter(|(_, set, _)| *set)
        .map(|(name, _, _)| (*name, "1"))
        .collect();
    query.extend(commands.iter().map(|c| ("command", c.as_str())));
    let joined = ports.join(",");
    if !ports.is_empty() {
        query.push(("port", &joined));
    }
    let query = serde_urlencoded::to_string(&query).map_err(ApiError::internal)?;
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

    fn translate(query: &str) -> (Option<String>, String) {
        kubelet_query(serde_urlencoded::from_str(query).unwrap()).unwrap()
    }

    #[test]
    fn exec_options_become_the_kubelets_parameters() {
        let (container, query) = translate(
            "command=sh&command=-c&command=echo%20hi&container=app&stdout=true&stdin=false&stderr=1&tty=0",
        );
        assert_eq!(container.as_deref(), Some("app"));
        assert_eq!(
            query,
            "output=1&error=1&command=sh&command=-c&command=echo+hi"
        );
        // kubectl attach -it: the empty value counts as set, `FALSE` does not; unknown
        // parameters are dropped.
        let (container, query) =
            translate("stdin=&stdout=TRUE&stderr=FALSE&tty=true&tty=false&x=1");
        assert_eq!(container, None);
        assert_eq!(query, "input=1&output=1&tty=1");
    }

    #[test]
    fn port_forward_ports_are_joined() {
        let (_, query) = translate("ports=8080&ports=9090");
        assert_eq!(query, "port=8080%2C9090");
        assert_eq!(translate("").1, "");
    }
}
