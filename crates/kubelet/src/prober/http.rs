//! The httpGet probe handler (upstream `pkg/probe/http`): a GET over HTTP or HTTPS (the
//! certificate is not verified), success on a status from 200 to 399. Redirects are
//! followed only to the same host; a redirect elsewhere ends the probe with a warning
//! (which counts as success), as upstream's kubelet does.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use hyper::Request;
use hyper::body::Bytes;
use hyper::header::{CONNECTION, HOST, LOCATION};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::{Container, HTTPGetAction};
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;

use super::USER_AGENT;
use super::probe::{Outcome, join_host_port, resolve_container_port};
use super::tcp::dial;
use crate::error::{Error, Result};
use crate::kuberuntime::insecure_tls;

/// Most bytes of a response body read (upstream `maxRespBodyLength`, 10 KiB).
const MAX_BODY: usize = 10 * 1024;
/// Redirects followed before giving up (Go's http client default).
const MAX_REDIRECTS: usize = 10;

/// `http` or `https`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scheme {
    Http,
    Https,
}

impl Scheme {
    fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }

    fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }
}

/// The GET request of an httpGet probe (upstream `NewRequestForHTTPGetAction`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeRequest {
    scheme: Scheme,
    host: String,
    port: u16,
    /// Path and query, starting with `/`.
    path: String,
    /// `httpHeaders` plus the defaults `User-Agent: kube-probe/<version>` and
    /// `Accept: */*` (an `Accept` set to the empty string removes it).
    headers: Vec<(String, String)>,
}

impl ProbeRequest {
    /// The request of `action` for `container`: the host defaults to `pod_ip`, the port is
    /// a number or one of the container's port names, the scheme defaults to HTTP.
    pub fn for_action(action: &HTTPGetAction, container: &Container, pod_ip: &str) -> Result<Self> {
        let scheme = match action
            .scheme
            .as_deref()
            .unwrap_or("")
            .to_ascii_lowercase()
            .as_str()
        {
            "" | "http" => Scheme::Http,
            "https" => Scheme::Https,
            other => return Err(Error::Probe(format!("unsupported scheme {other:?}"))),
        };
        let host = action
            .host
            .as_deref()
            .filter(|h| !h.is_empty())
            .unwrap_or(pod_ip);
        let port = resolve_container_port(&action.port, container)?;
        let path = action.path.as_deref().unwrap_or("");
        let mut headers: Vec<(String, String)> = action
            .http_headers
            .iter()
            .flatten()
            .map(|h| (h.name.clone(), h.value.clone()))
            .collect();
        let first = |headers: &[(String, String)], name: &str| {
            headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone())
        };
        if first(&headers, "User-Agent").is_none() {
            headers.push(("User-Agent".into(), USER_AGENT.into()));
        }
        match first(&headers, "Accept") {
            None => headers.push(("Accept".into(), "*/*".into())),
            Some(value) if value.is_empty() => {
                headers.retain(|(n, _)| !n.eq_ignore_ascii_case("Accept"));
            }
            Some(_) => {}
        }
        Ok(Self {
            scheme,
            host: host.to_owned(),
            port,
            path: with_leading_slash(path),
            headers,
        })
    }

    /// The request URL, as in failure messages.
    pub fn url(&self) -> String {
        format!(
            "{}://{}{}",
            self.scheme.as_str(),
            join_host_port(&self.host, self.port),
            self.path
        )
    }

    /// The request a `Location` header points to, relative to this one; `None` when it
    /// cannot be understood (another scheme, a bad port).
    fn redirect(&self, location: &str) -> Option<Self> {
        let lower = location.to_ascii_lowercase();
        let (scheme, rest) = if lower.starts_with("http://") {
            (Scheme::Http, Some(&location[7..]))
        } else if lower.starts_with("https://") {
            (Scheme::Https, Some(&location[8..]))
        } else if let Some(rest) = location.strip_prefix("//") {
            (self.scheme, Some(rest))
        } else if lower.contains("://") {
            return None;
        } else {
            (self.scheme, None)
        };
        let mut next = self.clone();
        next.scheme = scheme;
        match rest {
            Some(rest) => {
                let end = rest.find(['/', '?']).unwrap_or(rest.len());
                let (host, port) = split_authority(&rest[..end], scheme.default_port())?;
                next.host = host;
                next.port = port;
                next.path = with_leading_slash(&rest[end..]);
            }
            None if location.starts_with('/') => next.path = location.to_owned(),
            None => {
                let base = self.path.split('?').next().unwrap_or("");
                let dir = base.rfind('/').map_or("/", |i| &base[..=i]);
                next.path = format!("{dir}{location}");
            }
        }
        Some(next)
    }
}

fn with_leading_slash(path: &str) -> String {
    if path.starts_with('/') {
        path.to_owned()
    } else {
        format!("/{path}")
    }
}

/// `host`, `host:port`, `[v6]` or `[v6]:port` to host and port.
fn split_authority(authority: &str, default_port: u16) -> Option<(String, u16)> {
    let authority = authority.rsplit('@').next().unwrap_or(authority);
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => {
            let (host, after) = v6.split_once(']')?;
            (host, after.strip_prefix(':'))
        }
        None => match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    let port = match port {
        Some(p) if !p.is_empty() => p.parse().ok()?,
        _ => default_port,
    };
    (!host.is_empty()).then(|| (host.to_owned(), port))
}

/// Runs the probe within `timeout` (connect, TLS, request, body and redirects together).
/// Failures carry upstream's messages: `HTTP probe failed with statuscode: 500`, or the
/// request error as `Get "<url>": <error>`.
pub async fn probe(request: &ProbeRequest, timeout: Duration) -> (Outcome, String) {
    match tokio::time::timeout(timeout, follow(request, timeout)).await {
        Ok(result) => result,
        Err(_) => (
            Outcome::Failure,
            format!(
                "Get {:?}: context deadline exceeded (Client.Timeout exceeded while awaiting headers)",
                request.url()
            ),
        ),
    }
}

/// The response of one GET.
struct Fetched {
    status: u16,
    location: Option<String>,
    body: String,
}

async fn follow(first: &ProbeRequest, timeout: Duration) -> (Outcome, String) {
    let mut current = first.clone();
    let mut redirects = 0;
    loop {
        let response = match fetch(&current, timeout).await {
            Ok(response) => response,
            Err(error) => {
                return (
                    Outcome::Failure,
                    format!("Get {:?}: {error}", current.url()),
                );
            }
        };
        let is_redirect = matches!(response.status, 301 | 302 | 303 | 307 | 308);
        if let Some(location) = response.location.as_deref().filter(|_| is_redirect) {
            match current.redirect(location) {
                None => {
                    return (
                        Outcome::Failure,
                        format!(
                            "Get {:?}: failed to parse Location header {location:?}",
                            current.url()
                        ),
                    );
                }
                Some(next) if next.host == first.host => {
                    if redirects == MAX_REDIRECTS {
                        return (
                            Outcome::Failure,
                            format!("Get {:?}: stopped after 10 redirects", next.url()),
                        );
                    }
                    redirects += 1;
                    current = next;
                    continue;
                }
                // Another host: the redirect itself is the answer.
                Some(_) => {}
            }
        }
        return classify(response.status, response.body);
    }
}

/// Upstream `DoHTTPProbe`'s verdict on a final response.
fn classify(status: u16, body: String) -> (Outcome, String) {
    match status {
        200..=299 => (Outcome::Success, body),
        300..=399 => (
            Outcome::Warning,
            format!("Probe terminated redirects, Response body: {body}"),
        ),
        _ => (
            Outcome::Failure,
            format!("HTTP probe failed with statuscode: {status}"),
        ),
    }
}

/// One GET without keep-alive, reading at most [`MAX_BODY`] bytes of the body.
async fn fetch(request: &ProbeRequest, timeout: Duration) -> Result<Fetched> {
    let addr = join_host_port(&request.host, request.port);
    let host_header = request
        .headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("Host"))
        .map_or(addr.as_str(), |(_, v)| v.as_str());
    let mut builder = Request::get(request.path.as_str())
        .header(HOST, host_header)
        .header(CONNECTION, "close");
    for (name, value) in request
        .headers
        .iter()
        .filter(|(n, _)| !n.eq_ignore_ascii_case("Host"))
    {
        builder = builder.header(name.as_str(), value.as_str());
    }
    let http_request = builder
        .body(Empty::<Bytes>::new())
        .map_err(|e| Error::Probe(e.to_string()))?;
    let tcp = dial(&addr, timeout).await?;
    match request.scheme {
        Scheme::Http => exchange(TokioIo::new(tcp), http_request).await,
        Scheme::Https => {
            let tls = tls_connect(&request.host, tcp).await?;
            exchange(TokioIo::new(tls), http_request).await
        }
    }
}

/// Aborts the connection task when the exchange ends or is cancelled by the timeout.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn exchange<T>(io: T, request: Request<Empty<Bytes>>) -> Result<Fetched>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| Error::Probe(e.to_string()))?;
    let _connection = AbortOnDrop(tokio::spawn(async move {
        let _ = connection.await;
    }));
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| Error::Probe(e.to_string()))?;
    let status = response.status().as_u16();
    let location = response
        .headers()
        .get(LOCATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let mut body = response.into_body();
    let mut bytes = Vec::new();
    while bytes.len() < MAX_BODY {
        match body.frame().await {
            None => break,
            Some(Err(e)) => return Err(Error::Probe(e.to_string())),
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    bytes.extend_from_slice(&data);
                }
            }
        }
    }
    bytes.truncate(MAX_BODY);
    Ok(Fetched {
        status,
        location,
        body: String::from_utf8_lossy(&bytes).into_owned(),
    })
}

/// A TLS session to `host` over `tcp` that accepts any server certificate (upstream
/// probes use `InsecureSkipVerify`); handshake signatures are still checked.
async fn tls_connect(
    host: &str,
    tcp: TcpStream,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let config = insecure_tls::client_config().map_err(|e| Error::Probe(e.to_string()))?;
    let name = ServerName::try_from(host.to_owned()).map_err(|e| Error::Probe(e.to_string()))?;
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| Error::Probe(e.to_string()))
}

#[cfg(test)]
mod tests;
