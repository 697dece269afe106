//! `/exec`, `/attach` and `/portForward` (upstream `server.go` `getExec`, `getAttach`,
//! `getPortForward` with `proxyStream`): the kubelet asks the runtime for a streaming
//! URL (CRI Exec / Attach / PortForward) and proxies the client's upgrade request to it,
//! then splices the two upgraded connections. The proxy does not look inside the
//! stream, so SPDY/3.1 and WebSocket clients (kubectl's protocols) both work.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use hyper_util::rt::TokioIo;
use k8s_cri::v1::{AttachRequest, ExecRequest, PortForwardRequest};
use tokio::net::TcpStream;

use super::ServerState;
use super::lookup::{FoundPod, HttpError, find_pod, parse_bool};
use crate::cri::Cri;

/// Stream flags and command of an exec or attach request (upstream
/// `remotecommand.NewOptions`).
#[derive(Debug, Default, PartialEq)]
struct StreamOptions {
    command: Vec<String>,
    stdin: bool,
    stdout: bool,
    stderr: bool,
    tty: bool,
}

/// Reads `command` (repeated), `stdin`, `stdout`, `stderr` and `tty` from the query.
/// Errors (400) when no stream is asked for. With a terminal, stderr is merged into
/// stdout, so it is not opened.
fn stream_options(uri: &Uri) -> Result<StreamOptions, HttpError> {
    let pairs: Vec<(String, String)> =
        serde_urlencoded::from_str(uri.query().unwrap_or_default()).unwrap_or_default();
    let mut opts = StreamOptions::default();
    for (key, value) in pairs {
        let flag = || parse_bool(&value).unwrap_or(false);
        match key.as_str() {
            "command" => opts.command.push(value.clone()),
            "input" | "stdin" => opts.stdin = flag(),
            "output" | "stdout" => opts.stdout = flag(),
            "error" | "stderr" => opts.stderr = flag(),
            "tty" => opts.tty = flag(),
            _ => {}
        }
    }
    if opts.tty && opts.stderr {
        opts.stderr = false;
    }
    if !(opts.stdin || opts.stdout || opts.stderr) {
        return Err(HttpError(
            StatusCode::BAD_REQUEST,
            "you must specify at least 1 of stdin, stdout, stderr".to_owned(),
        ));
    }
    Ok(opts)
}

fn pod_or_404(state: &ServerState, namespace: &str, pod: &str) -> Result<FoundPod, HttpError> {
    find_pod(state, namespace, pod)
        .ok_or_else(|| HttpError(StatusCode::NOT_FOUND, "pod does not exist".to_owned()))
}

fn runtime_error(e: tonic::Status) -> HttpError {
    HttpError(StatusCode::INTERNAL_SERVER_ERROR, e.message().to_owned())
}

/// `/exec/{namespace}/{pod}/{container}?command=...&stdin&stdout&stderr&tty`.
pub async fn exec(
    State(state): State<ServerState>,
    Path((namespace, pod, container)): Path<(String, String, String)>,
    req: Request,
) -> Response {
    proxy_container_stream(
        &state,
        (&namespace, &pod, &container),
        req,
        |cri, container_id, opts| async move {
            let req = ExecRequest {
                container_id,
                cmd: opts.command,
                tty: opts.tty,
                stdin: opts.stdin,
                stdout: opts.stdout,
                stderr: opts.stderr,
            };
            cri.exec(req).await.map(|resp| resp.url)
        },
    )
    .await
}

/// `/attach/{namespace}/{pod}/{container}?stdin&stdout&stderr&tty`.
pub async fn attach(
    State(state): State<ServerState>,
    Path((namespace, pod, container)): Path<(String, String, String)>,
    req: Request,
) -> Response {
    proxy_container_stream(
        &state,
        (&namespace, &pod, &container),
        req,
        |cri, container_id, opts| async move {
            let req = AttachRequest {
                container_id,
                tty: opts.tty,
                stdin: opts.stdin,
                stdout: opts.stdout,
                stderr: opts.stderr,
            };
            cri.attach(req).await.map(|resp| resp.url)
        },
    )
    .await
}

/// The body shared by exec and attach: reads the stream options from the query, finds
/// the running container `(namespace, pod, container)`, asks the runtime for a streaming
/// URL with `start(cri, container_id, options)` and proxies `req` to it.
async fn proxy_container_stream<F, Fut>(
    state: &ServerState,
    (namespace, pod, container): (&str, &str, &str),
    req: Request,
    start: F,
) -> Response
where
    F: FnOnce(Arc<dyn Cri>, String, StreamOptions) -> Fut,
    Fut: Future<Output = Result<String, tonic::Status>>,
{
    let uri = req.uri().clone();
    let url = async {
        let opts = stream_options(&uri)?;
        let container_id = pod_or_404(state, namespace, pod)?.running_container_id(container)?;
        start(state.cri.clone(), container_id, opts)
            .await
            .map_err(runtime_error)
    }
    .await;
    proxy_or_error(url, req).await
}

/// `/portForward/{namespace}/{pod}` (ports in the SPDY stream headers, or `ports=` for
/// WebSocket clients; the query is passed on).
pub async fn port_forward(
    State(state): State<ServerState>,
    Path((namespace, pod)): Path<(String, String)>,
    req: Request,
) -> Response {
    let url = async {
        let pod = pod_or_404(&state, &namespace, &pod)?;
        let pod_sandbox_id = pod.sandbox_id(&state).await?;
        let resp = state
            .cri
            .port_forward(PortForwardRequest {
                pod_sandbox_id,
                port: Vec::new(),
            })
            .await
            .map_err(runtime_error)?;
        Ok::<_, HttpError>(resp.url)
    }
    .await;
    proxy_or_error(url, req).await
}

async fn proxy_or_error(url: Result<String, HttpError>, req: Request) -> Response {
    match url {
        Ok(url) => proxy(&url, req).await.unwrap_or_else(|e| {
            HttpError(StatusCode::BAD_GATEWAY, format!("{e:#}")).into_response()
        }),
        Err(e) => e.into_response(),
    }
}

/// Forwards `req` (method, headers, the original query) to the streaming `url`. A `101
/// Switching Protocols` answer is passed back and both upgraded connections are
/// spliced; any other answer is passed back as is.
async fn proxy(url: &str, mut req: Request) -> anyhow::Result<Response> {
    let (authority, path) = split_url(url)?;
    let tcp = TcpStream::connect(&authority).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await?;
    tokio::spawn(async move {
        if let Err(e) = conn.with_upgrades().await {
            tracing::debug!(error = %e, "streaming backend connection");
        }
    });
    let path_and_query = match req.uri().query() {
        Some(q) if !path.contains('?') => format!("{path}?{q}"),
        _ => path,
    };
    let mut backend_req = hyper::Request::builder()
        .method(req.method().clone())
        .uri(path_and_query)
        .body(Body::empty())?;
    for (name, value) in req.headers() {
        if name != header::HOST {
            backend_req
                .headers_mut()
                .append(name.clone(), value.clone());
        }
    }
    backend_req
        .headers_mut()
        .insert(header::HOST, HeaderValue::from_str(&authority)?);
    let client_upgrade = hyper::upgrade::on(&mut req);
    let mut backend_resp = sender.send_request(backend_req).await?;
    if backend_resp.status() != StatusCode::SWITCHING_PROTOCOLS {
        let (parts, body) = backend_resp.into_parts();
        return Ok(Response::from_parts(parts, Body::new(body)));
    }
    let backend_upgrade = hyper::upgrade::on(&mut backend_resp);
    tokio::spawn(async move {
        let (client, backend) = match tokio::try_join!(client_upgrade, backend_upgrade) {
            Ok(pair) => pair,
            Err(e) => {
                tracing::warn!(error = %e, "streaming upgrade failed");
                return;
            }
        };
        let mut client = TokioIo::new(client);
        let mut backend = TokioIo::new(backend);
        if let Err(e) = tokio::io::copy_bidirectional(&mut client, &mut backend).await {
            tracing::debug!(error = %e, "streaming proxy ended");
        }
    });
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    *response.headers_mut() = backend_resp.headers().clone();
    Ok(response)
}

/// `http://host:port/path` -> (`host:port`, `/path`).
fn split_url(url: &str) -> anyhow::Result<(String, String)> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| anyhow::anyhow!("unsupported streaming URL {url:?}"))?;
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let path = if path.is_empty() { "/" } else { path };
    Ok((authority.to_owned(), path.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stream_options() {
        let uri: Uri =
            "/exec/ns/p/c?command=sh&command=-c&command=echo%20hi&stdout=1&stderr=true&tty=0"
                .parse()
                .unwrap();
        assert_eq!(
            stream_options(&uri).unwrap(),
            StreamOptions {
                command: vec!["sh".into(), "-c".into(), "echo hi".into()],
                stdout: true,
                stderr: true,
                ..Default::default()
            }
        );
        let tty: Uri = "/attach/ns/p/c?stdin=1&stderr=1&tty=1".parse().unwrap();
        let opts = stream_options(&tty).unwrap();
        assert!(opts.stdin && opts.tty && !opts.stderr);
        let none: Uri = "/exec/ns/p/c?command=ls".parse().unwrap();
        assert_eq!(
            stream_options(&none).unwrap_err().0,
            StatusCode::BAD_REQUEST
        );
    }

    #[test]
    fn splits_streaming_urls() {
        assert_eq!(
            split_url("http://127.0.0.1:3456/exec/abc").unwrap(),
            ("127.0.0.1:3456".into(), "/exec/abc".into())
        );
        assert!(split_url("https://x/").is_err());
    }
}
