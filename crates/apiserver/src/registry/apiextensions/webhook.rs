//! The HTTPS client of a webhook's `clientConfig` (upstream
//! `k8s.io/apiserver/pkg/util/webhook`: `ClientConfig`, the client manager's
//! `HookClient`, and the kube-apiserver's service resolver), for conversion webhooks.
//!
//! A config names the webhook by `url` (`https://host[:port]/path`) or by `service`
//! (namespace, name, path, port 443 by default). The server's certificate is verified
//! against `caBundle` (PEM): for a service under the name `<service>.<namespace>.svc`, as
//! upstream. Each call POSTs JSON over a new HTTP/1.1 connection and must be answered
//! within [`TIMEOUT`], upstream's webhook timeout, which the URL carries as
//! `?timeout=30s` (client-go adds it the same way). Failures read as client-go's:
//! `Post "https://...?timeout=30s": dial tcp 127.0.0.1:9443: connect: connection refused`.
//!
//! There is no kube-proxy in Skiff yet, so a service is resolved to one of its endpoints
//! by the API server itself, as upstream's kube-apiserver does with
//! `--enable-aggregator-routing`: the Service's port whose `port` is the config's, then a
//! ready address of its EndpointSlices (or, without any, its Endpoints) with the port of
//! the same name (the service port's `targetPort` as the endpoints controllers resolved
//! it). The client reads Services and endpoints straight from the store.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::WebhookClientConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::storage::Storage;

/// How long a call may take (upstream's default webhook timeout; a conversion webhook
/// has no `timeoutSeconds` of its own).
pub(crate) const TIMEOUT: Duration = Duration::from_secs(30);

/// Where the webhook listens.
#[derive(Debug, Clone)]
enum Target {
    /// `clientConfig.url`, split.
    Url {
        host: String,
        port: u16,
        /// The path (`/` when empty).
        path: String,
    },
    /// `clientConfig.service`.
    Service {
        namespace: String,
        name: String,
        port: u16,
        /// The path as configured (may be empty).
        path: String,
    },
}

/// A webhook's client.
pub(crate) struct WebhookClient {
    target: Target,
    /// The TLS client trusting `caBundle`, or why it could not be made (a bad bundle),
    /// reported by each call as upstream fails to make the client.
    tls: Result<TlsConnector, String>,
    /// The URL as errors show it, with `?timeout=30s`.
    shown_url: String,
    storage: Arc<dyn Storage>,
}

impl std::fmt::Debug for WebhookClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookClient")
            .field("url", &self.shown_url)
            .finish_non_exhaustive()
    }
}

/// A webhook's answer: the HTTP status and the body.
pub(crate) struct Answer {
    pub status: u16,
    pub body: Bytes,
}

impl WebhookClient {
    /// The client of `config`; Services and endpoints are read from `storage`. A config
    /// the CRD's validation would refuse (neither url nor service, a URL that does not
    /// parse) gives a client whose calls fail with the reason.
    pub(crate) fn new(config: &WebhookClientConfig, storage: Arc<dyn Storage>) -> Self {
        let target = match (&config.url, &config.service) {
            (Some(url), _) => parse_url(url),
            (None, Some(service)) => Ok(Target::Service {
                namespace: service.namespace.clone(),
                name: service.name.clone(),
                port: service
                    .port
                    .and_then(|p| u16::try_from(p).ok())
                    .unwrap_or(443),
                path: service.path.clone().unwrap_or_default(),
            }),
            (None, None) => Err("exactly one of url or service is required".to_owned()),
        };
        let ca_bundle = config.ca_bundle.as_ref().map_or(&[][..], |b| &b.0[..]);
        let (target, tls) = match target {
            Ok(target) => (target, tls_connector(ca_bundle)),
            Err(why) => (
                Target::Url {
                    host: String::new(),
                    port: 443,
                    path: "/".to_owned(),
                },
                Err(why),
            ),
        };
        let shown_url = match &target {
            Target::Url { host, port, path } => {
                format!("https://{}:{port}{path}", bracketed(host))
            }
            Target::Service {
                namespace,
                name,
                port,
                path,
            } => format!("https://{name}.{namespace}.svc:{port}{path}"),
        };
        WebhookClient {
            target,
            tls,
            shown_url: format!("{shown_url}?timeout={}s", TIMEOUT.as_secs()),
            storage,
        }
    }

    /// POSTs `body` (JSON) and reads the answer, within [`TIMEOUT`]. Errors: client-go's
    /// text of a failed POST, `Post "<url>": <cause>` (the cause of a service: `service
    /// "x" not found`, `no endpoints available for service "x"`), or the reason the
    /// client could not be made.
    pub(crate) async fn post(&self, body: Vec<u8>) -> Result<Answer, String> {
        let connector = self.tls.as_ref().map_err(Clone::clone)?;
        let call = self.call(connector, body);
        match tokio::time::timeout(TIMEOUT, call).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(cause)) => Err(format!("Post \"{}\": {cause}", self.shown_url)),
            Err(_) => Err(format!(
                "Post \"{}\": context deadline exceeded",
                self.shown_url
            )),
        }
    }

    async fn call(&self, connector: &TlsConnector, body: Vec<u8>) -> Result<Answer, String> {
        let (address, port, server_name, authority, path) = match &self.target {
            Target::Url { host, port, path } => {
                let authority = format!("{}:{port}", bracketed(host));
                (host.clone(), *port, host.clone(), authority, path.clone())
            }
            Target::Service {
                namespace,
                name,
                port,
                path,
            } => {
                let (ip, target_port) = self.resolve(namespace, name, *port).await?;
                let server_name = format!("{name}.{namespace}.svc");
                let authority = format!("{server_name}:{port}");
                let path = if path.is_empty() { "/" } else { path };
                (ip, target_port, server_name, authority, path.to_owned())
            }
        };
        let shown = format!("{}:{port}", bracketed(&address));
        let tcp = TcpStream::connect((address.as_str(), port))
            .await
            .map_err(|e| dial_error(&shown, &e))?;
        let name = ServerName::try_from(server_name.clone())
            .map_err(|_| format!("invalid server name {server_name:?}"))?;
        let tls = connector
            .connect(name, tcp)
            .await
            .map_err(|e| tls_error(&e))?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "webhook connection");
            }
        });
        let request = hyper::Request::post(format!("{path}?timeout={}s", TIMEOUT.as_secs()))
            .header(hyper::header::HOST, authority)
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .header(hyper::header::ACCEPT, "application/json, */*")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| e.to_string())?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok(Answer { status, body })
    }

    /// The address and port of a ready endpoint of Service `namespace/name` behind its
    /// port `port` (upstream's `ResolveEndpoint`). Errors: upstream's texts.
    async fn resolve(
        &self,
        namespace: &str,
        name: &str,
        port: u16,
    ) -> Result<(String, u16), String> {
        let service = self
            .read(&format!("/registry/services/{namespace}/{name}"))
            .await?
            .ok_or_else(|| format!("service \"{name}\" not found"))?;
        let type_ = service
            .pointer("/spec/type")
            .and_then(Value::as_str)
            .unwrap_or("ClusterIP");
        if !matches!(type_, "ClusterIP" | "NodePort" | "LoadBalancer") {
            return Err(format!("unsupported service type \"{type_}\""));
        }
        let service_port = service
            .pointer("/spec/ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|p| p.get("port").and_then(Value::as_u64) == Some(u64::from(port)))
            .ok_or_else(|| format!("no service port {port} found for service \"{name}\""))?;
        let port_name = service_port
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let candidates = self.endpoints(namespace, name, port_name).await?;
        if candidates.is_empty() {
            return Err(format!("no endpoints available for service \"{name}\""));
        }
        let pick = rand::random_range(0..candidates.len());
        Ok(candidates[pick].clone())
    }

    /// The ready addresses of the Service's endpoints with the port named `port_name`:
    /// from its EndpointSlices (`kubernetes.io/service-name`), else from its Endpoints.
    async fn endpoints(
        &self,
        namespace: &str,
        name: &str,
        port_name: &str,
    ) -> Result<Vec<(String, u16)>, String> {
        let page = self
            .storage
            .list(
                &format!("/registry/endpointslices/{namespace}/"),
                None,
                0,
                None,
            )
            .await
            .map_err(|e| e.to_string())?;
        let slices: Vec<Value> = page
            .items
            .iter()
            .filter_map(|kv| serde_json::from_slice::<Value>(&kv.value).ok())
            .filter(|slice| {
                slice
                    .pointer("/metadata/labels/kubernetes.io~1service-name")
                    .and_then(Value::as_str)
                    == Some(name)
            })
            .collect();
        let named =
            |port: &&Value| port.get("name").and_then(Value::as_str).unwrap_or("") == port_name;
        let number = |port: &Value| {
            port.get("port")
                .and_then(Value::as_u64)
                .and_then(|p| u16::try_from(p).ok())
        };
        let mut found = Vec::new();
        if !slices.is_empty() {
            for slice in &slices {
                let ports = slice.get("ports").and_then(Value::as_array);
                let Some(port) = ports.into_iter().flatten().find(named).and_then(number) else {
                    continue;
                };
                let endpoints = slice.get("endpoints").and_then(Value::as_array);
                for endpoint in endpoints.into_iter().flatten() {
                    let ready = endpoint
                        .pointer("/conditions/ready")
                        .and_then(Value::as_bool);
                    if ready == Some(false) {
                        continue;
                    }
                    let address = endpoint.pointer("/addresses/0").and_then(Value::as_str);
                    if let Some(address) = address {
                        found.push((address.to_owned(), port));
                    }
                }
            }
            return Ok(found);
        }
        let endpoints = self
            .read(&format!("/registry/endpoints/{namespace}/{name}"))
            .await?
            .ok_or_else(|| format!("endpoints \"{name}\" not found"))?;
        let subsets = endpoints.get("subsets").and_then(Value::as_array);
        for subset in subsets.into_iter().flatten() {
            let ports = subset.get("ports").and_then(Value::as_array);
            let Some(port) = ports.into_iter().flatten().find(named).and_then(number) else {
                continue;
            };
            let addresses = subset.get("addresses").and_then(Value::as_array);
            for address in addresses.into_iter().flatten() {
                if let Some(ip) = address.get("ip").and_then(Value::as_str) {
                    found.push((ip.to_owned(), port));
                }
            }
        }
        Ok(found)
    }

    async fn read(&self, key: &str) -> Result<Option<Value>, String> {
        let found = self.storage.get(key).await.map_err(|e| e.to_string())?;
        Ok(found.and_then(|kv| serde_json::from_slice(&kv.value).ok()))
    }
}

/// `clientConfig.url` as a target. Errors: not an `https` URL with a host.
fn parse_url(url: &str) -> Result<Target, String> {
    let uri: hyper::Uri = url.parse().map_err(|e| format!("parse {url:?}: {e}"))?;
    if uri.scheme_str() != Some("https") {
        return Err(format!("webhook URL {url:?} must use https"));
    }
    let host = uri
        .host()
        .ok_or_else(|| format!("webhook URL {url:?} has no host"))?;
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let path = match uri.path() {
        "" => "/".to_owned(),
        path => path.to_owned(),
    };
    Ok(Target::Url {
        host,
        port: uri.port_u16().unwrap_or(443),
        path,
    })
}

/// An IPv6 address in brackets, as URLs and `host:port` write it.
fn bracketed(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_owned()
    }
}

/// A TLS client trusting the certificates of `ca_bundle` (PEM). Errors: client-go's
/// `unable to load root certificates: ...`. An empty bundle trusts nothing (upstream
/// falls back to the system's roots, which Skiff does not read).
fn tls_connector(ca_bundle: &[u8]) -> Result<TlsConnector, String> {
    let mut roots = rustls::RootCertStore::empty();
    if !ca_bundle.is_empty() {
        let certificates = CertificateDer::pem_slice_iter(ca_bundle)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| "unable to load root certificates: unable to parse bytes as PEM block")?;
        if certificates.is_empty() {
            return Err(
                "unable to load root certificates: unable to parse bytes as PEM block".to_owned(),
            );
        }
        for certificate in certificates {
            roots
                .add(certificate)
                .map_err(|e| format!("unable to load root certificates: {e}"))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsConnector::from(Arc::new(config)))
}

/// Go's text of a failed dial: `dial tcp 127.0.0.1:9443: connect: connection refused`.
fn dial_error(address: &str, error: &std::io::Error) -> String {
    match error.kind() {
        std::io::ErrorKind::ConnectionRefused => {
            format!("dial tcp {address}: connect: connection refused")
        }
        std::io::ErrorKind::TimedOut => format!("dial tcp {address}: i/o timeout"),
        _ => format!("dial tcp {address}: {error}"),
    }
}

/// Go's text of a failed TLS handshake (`tls: failed to verify certificate: x509:
/// certificate signed by unknown authority`).
fn tls_error(error: &std::io::Error) -> String {
    let rustls_error = error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>());
    match rustls_error {
        Some(rustls::Error::InvalidCertificate(why)) => {
            let x509 = match why {
                rustls::CertificateError::UnknownIssuer => {
                    "certificate signed by unknown authority".to_owned()
                }
                rustls::CertificateError::NotValidForName
                | rustls::CertificateError::NotValidForNameContext { .. } => {
                    "certificate is not valid for the requested name".to_owned()
                }
                rustls::CertificateError::Expired
                | rustls::CertificateError::ExpiredContext { .. } => {
                    "certificate has expired or is not yet valid".to_owned()
                }
                other => format!("{other:?}"),
            };
            format!("tls: failed to verify certificate: x509: {x509}")
        }
        _ => format!("remote error: tls: {error}"),
    }
}
