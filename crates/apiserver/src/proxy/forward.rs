//! Forwarding of a `proxy` request (upstream `k8s.io/apimachinery/pkg/util/proxy`
//! `UpgradeAwareHandler` with its rewriting `Transport`): the request goes to the
//! location with its method, query, headers (less hop-by-hop ones and the credentials the
//! API server consumed) and streamed body, plus `X-Forwarded-Uri`; the answer comes back
//! with its status, headers and streamed body, a same-host `Location` rewritten to go
//! through the proxy path. A connection upgrade (WebSocket, SPDY) answered `101` is
//! spliced byte for byte. An empty path of a GET or HEAD is redirected (301) to the
//! proxy path with a trailing slash. A backend that cannot be reached is a 500
//! `error trying to reach service: <dial error>`.
//!
//! Not done (upstream rewrites links in `text/html` answers to go through the proxy).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::kubelet_client;
use super::resource::Location;
use crate::error::ApiError;
use crate::registry::Context;

/// How the API server reaches a location.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// A plain connection (TLS without verification for `https`), as upstream's proxy
    /// transport.
    Direct,
    /// The kubelet client (HTTPS with the kubelet client certificate).
    Kubelet,
}

/// Headers that belong to one connection (RFC 9110 7.6.1 and Go's `httputil` list).
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "proxy-connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
];

/// Whether the request asks for a protocol upgrade (`Connection: upgrade` and `Upgrade`).
fn is_upgrade(headers: &HeaderMap) -> bool {
    let connection_upgrade = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|token| token.trim().eq_ignore_ascii_case("upgrade"));
    connection_upgrade && headers.contains_key(header::UPGRADE)
}

/// `headers` less the hop-by-hop ones (and `Upgrade` unless `upgrade`).
fn end_to_end(headers: &HeaderMap, upgrade: bool) -> HeaderMap {
    let mut out = HeaderMap::new();
    for (key, value) in headers {
        let name = key.as_str();
        let hop = HOP_BY_HOP.contains(&name) || name == "upgrade";
        if hop && !(upgrade && (name == "connection" || name == "upgrade")) {
            continue;
        }
        out.append(key.clone(), value.clone());
    }
    out
}

/// The error of a backend that cannot be reached (upstream: the proxy transport's
/// `error trying to reach service: %w`, answered as a Status of code 500 and no reason).
fn unreachable(err: impl std::fmt::Display) -> ApiError {
    ApiError::new(500, "", format!("error trying to reach service: {err}"))
}

/// A dial error in Go's words (`dial tcp 10.0.0.1:80: connect: connection refused`).
fn dial_error(authority: &str, err: &std::io::Error) -> String {
    let why = match err.kind() {
        std::io::ErrorKind::ConnectionRefused => "connection refused".to_owned(),
        std::io::ErrorKind::TimedOut => "i/o timeout".to_owned(),
        _ => err.to_string(),
    };
    format!("dial tcp {authority}: connect: {why}")
}

/// `host:port`, with IPv6 hosts in brackets.
fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// The numeric port of a location: the scheme's default when empty; an error in Go's
/// dial words for anything else.
fn port_number(location: &Location) -> Result<u16, String> {
    if location.port.is_empty() {
        return Ok(if location.scheme == "https" { 443 } else { 80 });
    }
    match location.port.parse::<u64>() {
        Ok(n) => u16::try_from(n)
            .map_err(|_| format!("dial tcp: address {}: invalid port", location.port)),
        Err(_) => Err(format!(
            "dial tcp: lookup tcp/{}: unknown port",
            location.port
        )),
    }
}

/// Sends `request` over one HTTP/1.1 connection on `io` that allows upgrades.
async fn exchange<IO>(
    io: IO,
    request: hyper::Request<Body>,
) -> Result<hyper::Response<Incoming>, String>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        if let Err(e) = conn.with_upgrades().await {
            tracing::debug!(error = %e, "proxy backend connection");
        }
    });
    sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())
}

/// Sends `request` straight to the location (TLS without verification for `https`).
async fn send_direct(
    location: &Location,
    port: u16,
    mut request: hyper::Request<Body>,
) -> Result<hyper::Response<Incoming>, String> {
    let authority = join_host_port(&location.host, port);
    if !request.headers().contains_key(header::HOST) {
        let host = HeaderValue::from_str(&authority).map_err(|e| e.to_string())?;
        request.headers_mut().insert(header::HOST, host);
    }
    let tcp = TcpStream::connect((location.host.as_str(), port))
        .await
        .map_err(|e| dial_error(&authority, &e))?;
    if location.scheme != "https" {
        return exchange(tcp, request).await;
    }
    let mut config = skiff_bootstrap::tls::insecure_client_config()
        .map_err(|e| e.to_string())?
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let name = ServerName::try_from(location.host.clone()).map_err(|e| e.to_string())?;
    let tls = TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())?;
    exchange(tls, request).await
}

/// Upstream `rewriteURL` for a `Location` answer: a same-host URL (or an absolute path)
/// is moved under the proxy path `prefix`; other hosts and relative paths are kept.
fn rewrite_location(
    target: &str,
    backend_authority: &str,
    request_host: &str,
    prefix: &str,
) -> String {
    let (origin, rest) = match target.split_once("://") {
        Some((scheme, after)) if scheme == "http" || scheme == "https" => {
            let end = after.find(['/', '?', '#']).unwrap_or(after.len());
            let host = &after[..end];
            if host != backend_authority && host != request_host {
                return target.to_owned();
            }
            let origin = (host == request_host).then(|| format!("{scheme}://{host}"));
            (origin, &after[end..])
        }
        Some(_) => return target.to_owned(),
        None => (None, target),
    };
    let end = rest.find(['?', '#']).unwrap_or(rest.len());
    let (path, tail) = rest.split_at(end);
    if !path.starts_with('/') || path.starts_with("//") {
        return target.to_owned();
    }
    let path = if path.starts_with(prefix) {
        path.to_owned()
    } else {
        format!("{}{path}", prefix.trim_end_matches('/'))
    };
    format!("{}{path}{tail}", origin.unwrap_or_default())
}

/// Forwards `request` to `path` at `location` and answers with the backend's answer.
/// `prefix` is the API server path up to `proxy` (for `X-Forwarded-Uri` and `Location`).
pub async fn serve(
    ctx: &Context<'_>,
    location: &Location,
    prefix: &str,
    path: String,
    mut request: Request,
) -> Result<Response, ApiError> {
    let upgrade = is_upgrade(request.headers());
    let method = request.method().clone();
    let query = request.uri().query().map(str::to_owned);
    if path.is_empty() && !upgrade && (method == Method::GET || method == Method::HEAD) {
        let mut target = format!("{}/", request.uri().path());
        if let Some(q) = query.as_deref().filter(|q| !q.is_empty()) {
            target = format!("{target}?{q}");
        }
        return Response::builder()
            .status(StatusCode::MOVED_PERMANENTLY)
            .header(header::LOCATION, target)
            .body(Body::empty())
            .map_err(ApiError::internal);
    }
    let path = if path.is_empty() {
        "/".to_owned()
    } else {
        path
    };
    let uri = match query.as_deref().filter(|q| !q.is_empty()) {
        Some(q) => format!("{path}?{q}"),
        None => path.clone(),
    };
    let request_host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let client_upgrade = upgrade.then(|| hyper::upgrade::on(&mut request));
    let (parts, body) = request.into_parts();
    let mut headers = end_to_end(&parts.headers, upgrade);
    // The API server consumed the credentials (upstream's authentication filter drops
    // the Authorization header).
    headers.remove(header::AUTHORIZATION);
    let forwarded = format!("{}{path}", prefix.trim_end_matches('/'));
    if let Ok(value) = HeaderValue::from_str(&forwarded) {
        headers.insert(HeaderName::from_static("x-forwarded-uri"), value);
    }
    let mut backend = hyper::Request::builder()
        .method(method)
        .uri(uri)
        .body(body)
        .map_err(ApiError::internal)?;
    *backend.headers_mut() = headers;

    let port = port_number(location).map_err(unreachable)?;
    let mut response = match location.backend {
        Backend::Direct => send_direct(location, port, backend)
            .await
            .map_err(unreachable)?,
        Backend::Kubelet => kubelet_client(ctx)?
            .send(&location.host, port, backend)
            .await
            .map_err(|e| unreachable(format!("{e:#}")))?,
    };

    if response.status() == StatusCode::SWITCHING_PROTOCOLS {
        let Some(client_upgrade) = client_upgrade else {
            return Err(unreachable("the backend switched protocols unasked"));
        };
        let backend_upgrade = hyper::upgrade::on(&mut response);
        tokio::spawn(async move {
            let (client, backend) = match tokio::try_join!(client_upgrade, backend_upgrade) {
                Ok(pair) => pair,
                Err(e) => {
                    tracing::warn!(error = %e, "proxy upgrade failed");
                    return;
                }
            };
            let mut client = TokioIo::new(client);
            let mut backend = TokioIo::new(backend);
            if let Err(e) = tokio::io::copy_bidirectional(&mut client, &mut backend).await {
                tracing::debug!(error = %e, "proxied stream ended");
            }
        });
        let mut switched = Response::new(Body::empty());
        *switched.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
        *switched.headers_mut() = response.headers().clone();
        return Ok(switched);
    }

    let (mut parts, body) = response.into_parts();
    parts.headers = end_to_end(&parts.headers, false);
    if let Some(target) = parts
        .headers
        .get(header::LOCATION)
        .and_then(|v| v.to_str().ok())
    {
        let authority = join_host_port(&location.host, port);
        let rewritten = rewrite_location(target, &authority, &request_host, prefix);
        if let Ok(value) = HeaderValue::from_str(&rewritten) {
            parts.headers.insert(header::LOCATION, value);
        }
    }
    Ok(Response::from_parts(parts, Body::new(body)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn location_answers_go_through_the_proxy() {
        let prefix = "/api/v1/namespaces/default/services/web/proxy";
        let rewrite = |t: &str| rewrite_location(t, "10.0.0.5:8080", "api.example:6443", prefix);
        assert_eq!(rewrite("/login?next=/"), format!("{prefix}/login?next=/"));
        assert_eq!(rewrite("http://10.0.0.5:8080/a"), format!("{prefix}/a"));
        assert_eq!(
            rewrite("https://api.example:6443/b"),
            format!("https://api.example:6443{prefix}/b")
        );
        assert_eq!(rewrite("https://other.example/"), "https://other.example/");
        assert_eq!(rewrite("relative/path"), "relative/path");
        assert_eq!(rewrite(&format!("{prefix}/x")), format!("{prefix}/x"));
    }

    #[test]
    fn hop_by_hop_headers_are_dropped() {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
        headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        headers.insert(header::TE, HeaderValue::from_static("trailers"));
        headers.insert("x-custom", HeaderValue::from_static("1"));
        assert!(is_upgrade(&headers));
        let kept = end_to_end(&headers, true);
        assert!(kept.contains_key(header::UPGRADE) && kept.contains_key(header::CONNECTION));
        assert!(!kept.contains_key(header::TE));
        let plain = end_to_end(&headers, false);
        assert_eq!(plain.len(), 1);
        assert_eq!(
            port_number(&Location {
                scheme: String::new(),
                host: "10.0.0.1".into(),
                port: "http".into(),
                backend: Backend::Direct,
            })
            .unwrap_err(),
            "dial tcp: lookup tcp/http: unknown port"
        );
    }
}
