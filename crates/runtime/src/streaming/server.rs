//! The HTTP side of the streaming server: a listener bound when the runtime starts (so
//! the URLs CRI Exec / Attach / PortForward return are known), the request cache behind
//! them, and the routes `/exec/<token>`, `/attach/<token>`, `/portforward/<token>` that
//! upgrade to SPDY/3.1 or WebSocket.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use axum::Router;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{FromRequestParts as _, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse as _, Response};
use axum::routing::any;
use hyper_util::rt::TokioIo;
use k8s_cri::v1::{
    AttachRequest, AttachResponse, ExecRequest, ExecResponse, PortForwardRequest,
    PortForwardResponse,
};

use super::backend::StreamBackend;
use super::cache::{self, RequestCache};
use super::protocol::PROTOCOL_HEADER;
use super::{portforward, remotecommand, spdy};
use crate::config::StreamConfig;
use crate::error::{Error, Result};

/// The streaming server of one runtime.
pub struct StreamServer {
    address: SocketAddr,
    listener: Mutex<Option<std::net::TcpListener>>,
    cache: Arc<RequestCache>,
}

impl StreamServer {
    /// Binds `config.address:config.port` (port 0: a free port).
    pub fn bind(config: &StreamConfig) -> anyhow::Result<Self> {
        let listener =
            std::net::TcpListener::bind((config.address, config.port)).with_context(|| {
                format!(
                    "binding the streaming server on {}:{}",
                    config.address, config.port
                )
            })?;
        listener.set_nonblocking(true)?;
        Ok(Self {
            address: listener.local_addr()?,
            listener: Mutex::new(Some(listener)),
            cache: Arc::new(RequestCache::new(cache::TOKEN_TTL)),
        })
    }

    /// The address the server listens on.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Caches a validated CRI Exec request and returns its URL. `InvalidArgument` without
    /// a command, without any stream, or with both `tty` and `stderr` (upstream streaming
    /// server's checks).
    pub fn exec(&self, req: ExecRequest) -> Result<ExecResponse> {
        if req.cmd.is_empty() {
            return Err(Error::InvalidArgument("cmd is required".into()));
        }
        validate_streams(req.tty, req.stdin, req.stdout, req.stderr)?;
        let url = self.url("exec", cache::Request::Exec(req))?;
        Ok(ExecResponse { url })
    }

    /// Caches a validated CRI Attach request and returns its URL (the stream checks of
    /// [`StreamServer::exec`]).
    pub fn attach(&self, req: AttachRequest) -> Result<AttachResponse> {
        validate_streams(req.tty, req.stdin, req.stdout, req.stderr)?;
        let url = self.url("attach", cache::Request::Attach(req))?;
        Ok(AttachResponse { url })
    }

    /// Caches a CRI PortForward request and returns its URL.
    pub fn port_forward(&self, req: PortForwardRequest) -> Result<PortForwardResponse> {
        let url = self.url("portforward", cache::Request::PortForward(req))?;
        Ok(PortForwardResponse { url })
    }

    fn url(&self, method: &str, request: cache::Request) -> Result<String> {
        let token = self.cache.insert(request)?;
        Ok(format!("http://{}/{method}/{token}", self.address))
    }

    /// Serves the streaming endpoints with `backend` until `shutdown` completes (sessions
    /// already upgraded run on). Errors if called twice.
    pub fn serve(
        &self,
        backend: Arc<dyn StreamBackend>,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> impl Future<Output = anyhow::Result<()>> + Send + 'static {
        let listener = self
            .listener
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let state = AppState {
            cache: self.cache.clone(),
            backend,
        };
        async move {
            let listener = listener.context("the streaming server is already serving")?;
            let listener = tokio::net::TcpListener::from_std(listener)?;
            let app = Router::new()
                .route("/exec/{token}", any(exec))
                .route("/attach/{token}", any(attach))
                .route("/portforward/{token}", any(port_forward))
                .with_state(state);
            axum::serve(listener, app)
                .with_graceful_shutdown(shutdown)
                .await
                .context("serving the streaming endpoints")
        }
    }
}

/// Upstream `validateExecAttachRequest`.
fn validate_streams(tty: bool, stdin: bool, stdout: bool, stderr: bool) -> Result<()> {
    if tty && stderr {
        return Err(Error::InvalidArgument(
            "tty and stderr cannot both be true".into(),
        ));
    }
    if !stdin && !stdout && !stderr {
        return Err(Error::InvalidArgument(
            "one of stdin, stdout, or stderr must be set".into(),
        ));
    }
    Ok(())
}

#[derive(Clone)]
struct AppState {
    cache: Arc<RequestCache>,
    backend: Arc<dyn StreamBackend>,
}

fn not_found() -> Response {
    (StatusCode::NOT_FOUND, "404 page not found\n").into_response()
}

async fn exec(State(state): State<AppState>, Path(token): Path<String>, req: Request) -> Response {
    match state.cache.consume(&token) {
        Some(cache::Request::Exec(exec)) => remote_command(state.backend, exec.into(), req).await,
        _ => not_found(),
    }
}

async fn attach(
    State(state): State<AppState>,
    Path(token): Path<String>,
    req: Request,
) -> Response {
    match state.cache.consume(&token) {
        Some(cache::Request::Attach(attach)) => {
            remote_command(state.backend, attach.into(), req).await
        }
        _ => not_found(),
    }
}

async fn remote_command(
    backend: Arc<dyn StreamBackend>,
    command: remotecommand::Command,
    req: Request,
) -> Response {
    if is_websocket(req.headers()) {
        websocket_upgrade(
            req,
            remotecommand::WEBSOCKET_PROTOCOLS,
            move |socket, protocol| {
                remotecommand::serve_websocket(socket, protocol, command, backend)
            },
        )
        .await
    } else {
        spdy_upgrade(req, remotecommand::SPDY_PROTOCOLS, move |io, protocol| {
            remotecommand::serve_spdy(io, protocol, command, backend)
        })
    }
}

async fn port_forward(
    State(state): State<AppState>,
    Path(token): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
    req: Request,
) -> Response {
    let Some(cache::Request::PortForward(forward)) = state.cache.consume(&token) else {
        return not_found();
    };
    let backend = state.backend;
    if !is_websocket(req.headers()) {
        let sandbox_id = forward.pod_sandbox_id;
        return spdy_upgrade(req, portforward::SPDY_PROTOCOLS, move |io, _| {
            portforward::serve_spdy(io, sandbox_id, backend)
        });
    }
    let ports = match websocket_ports(&forward.port, &query) {
        Ok(ports) => ports,
        Err(msg) => return (StatusCode::BAD_REQUEST, msg).into_response(),
    };
    let sandbox_id = forward.pod_sandbox_id;
    websocket_upgrade(
        req,
        portforward::WEBSOCKET_PROTOCOLS,
        move |socket, protocol| {
            portforward::serve_websocket(socket, protocol, sandbox_id, ports, backend)
        },
    )
    .await
}

/// The ports of a WebSocket port-forward: those of the CRI request (upstream
/// `BuildV4Options(pf.Port)`), else the `port` query parameters (the kubelet's own
/// endpoint); at least one, each 1-65535.
fn websocket_ports(
    requested: &[i32],
    query: &[(String, String)],
) -> std::result::Result<Vec<u16>, String> {
    let parse = |value: &str| match value.parse::<u16>() {
        Ok(port) if port > 0 => Ok(port),
        _ => Err(format!("invalid port {value:?}")),
    };
    let ports = if requested.is_empty() {
        query
            .iter()
            .filter(|(key, _)| key == "port")
            .map(|(_, value)| parse(value))
            .collect::<std::result::Result<Vec<_>, _>>()?
    } else {
        requested
            .iter()
            .map(|port| parse(&port.to_string()))
            .collect::<std::result::Result<Vec<_>, _>>()?
    };
    if ports.is_empty() {
        return Err("query parameter \"port\" is required".into());
    }
    if ports.len() > portforward::MAX_WEBSOCKET_PORTS {
        return Err(format!(
            "at most {} ports can be forwarded at once",
            portforward::MAX_WEBSOCKET_PORTS
        ));
    }
    Ok(ports)
}

/// Whether a header holds `token` in its comma-separated list (case-insensitive).
fn has_token(headers: &HeaderMap, name: header::HeaderName, token: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|item| item.trim().eq_ignore_ascii_case(token))
}

fn is_websocket(headers: &HeaderMap) -> bool {
    has_token(headers, header::CONNECTION, "upgrade")
        && has_token(headers, header::UPGRADE, "websocket")
}

/// The values of a comma-separated, possibly repeated header.
fn list(headers: &HeaderMap, name: &str) -> Vec<String> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|item| item.trim().to_string())
        .filter(|item| !item.is_empty())
        .collect()
}

/// The first of the client's protocols the server supports (upstream
/// `httpstream.Handshake` / `wsstream` negotiation: the client's order wins); `""` when
/// the client names none and `""` is in `supported`.
fn negotiate(client: &[String], supported: &[&'static str]) -> Option<&'static str> {
    if client.is_empty() {
        return supported
            .iter()
            .copied()
            .find(|p| p.is_empty())
            .or(supported.first().copied());
    }
    client.iter().find_map(|wanted| {
        supported
            .iter()
            .copied()
            .find(|p| !p.is_empty() && p == wanted)
    })
}

/// Answers `101 Switching Protocols` to a SPDY/3.1 upgrade with a negotiated
/// `X-Stream-Protocol-Version` and runs `session` on the upgraded connection.
fn spdy_upgrade<F, Fut>(mut req: Request, supported: &[&'static str], session: F) -> Response
where
    F: FnOnce(TokioIo<hyper::upgrade::Upgraded>, &'static str) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let headers = req.headers();
    if !has_token(headers, header::CONNECTION, "upgrade")
        || !has_token(headers, header::UPGRADE, spdy::UPGRADE)
    {
        return (
            StatusCode::BAD_REQUEST,
            "unable to upgrade: missing upgrade headers in request\n",
        )
            .into_response();
    }
    let client = list(headers, PROTOCOL_HEADER);
    let Some(protocol) = negotiate(&client, supported) else {
        let mut response = (
            StatusCode::FORBIDDEN,
            format!(
                "unable to upgrade: unable to negotiate protocol: client supports {client:?}, server accepts {supported:?}\n"
            ),
        )
            .into_response();
        for accepted in supported {
            response.headers_mut().append(
                "X-Accepted-Stream-Protocol-Versions",
                HeaderValue::from_static(accepted),
            );
        }
        return response;
    };
    let upgrade = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        match upgrade.await {
            Ok(upgraded) => session(TokioIo::new(upgraded), protocol).await,
            Err(err) => tracing::debug!("SPDY upgrade failed: {err}"),
        }
    });
    let mut response = StatusCode::SWITCHING_PROTOCOLS.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    headers.insert(header::UPGRADE, HeaderValue::from_static(spdy::UPGRADE));
    headers.insert(PROTOCOL_HEADER, HeaderValue::from_static(protocol));
    response
}

/// Accepts a WebSocket upgrade with a negotiated `Sec-WebSocket-Protocol` and runs
/// `session` on the socket.
async fn websocket_upgrade<F, Fut>(req: Request, supported: &[&'static str], session: F) -> Response
where
    F: FnOnce(axum::extract::ws::WebSocket, &'static str) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let (mut parts, _) = req.into_parts();
    let client = list(&parts.headers, header::SEC_WEBSOCKET_PROTOCOL.as_str());
    let Some(protocol) = negotiate(&client, supported) else {
        return (
            StatusCode::BAD_REQUEST,
            format!("unable to upgrade: unable to negotiate protocol: client supports {client:?}, server supports {supported:?}\n"),
        )
            .into_response();
    };
    let upgrade = match WebSocketUpgrade::from_request_parts(&mut parts, &()).await {
        Ok(upgrade) => upgrade,
        Err(rejection) => return rejection.into_response(),
    };
    let upgrade = if protocol.is_empty() {
        upgrade
    } else {
        upgrade.protocols([protocol])
    };
    upgrade.on_upgrade(move |socket| session(socket, protocol))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_follows_the_client_order() {
        let client = |items: &[&str]| items.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let spdy = remotecommand::SPDY_PROTOCOLS;
        assert_eq!(
            negotiate(&client(&["v3.channel.k8s.io", "v4.channel.k8s.io"]), spdy),
            Some("v3.channel.k8s.io")
        );
        assert_eq!(negotiate(&client(&["v9.channel.k8s.io"]), spdy), None);
        assert_eq!(negotiate(&[], spdy), Some("v4.channel.k8s.io"));
        assert_eq!(negotiate(&[], remotecommand::WEBSOCKET_PROTOCOLS), Some(""));
        assert_eq!(
            negotiate(
                &client(&["v5.channel.k8s.io", "v4.channel.k8s.io"]),
                remotecommand::WEBSOCKET_PROTOCOLS
            ),
            Some("v5.channel.k8s.io")
        );
    }

    #[test]
    fn websocket_ports_come_from_the_request_or_the_query() {
        let query = |items: &[(&str, &str)]| {
            items
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            websocket_ports(&[], &query(&[("port", "80"), ("port", "8080")])),
            Ok(vec![80, 8080])
        );
        assert_eq!(
            websocket_ports(&[81], &query(&[("port", "80")])),
            Ok(vec![81])
        );
        assert!(websocket_ports(&[], &query(&[])).is_err());
        assert!(websocket_ports(&[70000], &[]).is_err());
        assert!(websocket_ports(&[], &query(&[("port", "0")])).is_err());
        assert!(websocket_ports(&[], &query(&[("port", "x")])).is_err());
    }

    #[test]
    fn exec_and_attach_requests_are_validated() {
        let server = StreamServer::bind(&StreamConfig {
            address: std::net::Ipv4Addr::LOCALHOST.into(),
            port: 0,
        })
        .unwrap();
        let exec = |tty, stdin, stdout, stderr| ExecRequest {
            container_id: "c".into(),
            cmd: vec!["sh".into()],
            tty,
            stdin,
            stdout,
            stderr,
        };
        let url = server.exec(exec(false, true, true, true)).unwrap().url;
        let prefix = format!("http://{}/exec/", server.address());
        assert!(url.starts_with(&prefix), "{url}");
        assert!(matches!(
            server.exec(exec(true, true, true, true)),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            server.exec(exec(false, false, false, false)),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            server.exec(ExecRequest {
                cmd: vec![],
                ..exec(false, true, false, false)
            }),
            Err(Error::InvalidArgument(_))
        ));
        assert!(
            server
                .port_forward(PortForwardRequest::default())
                .unwrap()
                .url
                .contains("/portforward/")
        );
    }
}
