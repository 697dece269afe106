//! The proxy to extension API servers (upstream `handler_proxy.go`): a request under a
//! remote APIService's `/apis/<group>/<version>` goes to an endpoint of its Service
//! with the authenticated user in the front-proxy headers, the client's own credentials
//! and identity headers dropped. Bodies stream both ways; an upgrade (exec, attach,
//! port-forward, WebSocket watch) is spliced once both sides switched protocols. An
//! APIService that is not Available, or whose Service has no endpoint, answers 503
//! `service unavailable`.

use std::net::IpAddr;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::Response;
use hyper_util::rt::TokioIo;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::{APIService, ServiceReference};
use serde_json::Value;
use skiff_api::apiregistration::{DEFAULT_SERVICE_PORT, is_available};

use super::Aggregator;
use super::client::Verify;
use crate::authn::UserInfo;
use crate::error::GroupResource;
use crate::registry::Objects;

/// The user name header of the front-proxy (requestheader) protocol.
pub const USER_HEADER: &str = "X-Remote-User";
/// The uid header, sent when the user has a uid.
pub const UID_HEADER: &str = "X-Remote-Uid";
/// The group header, once per group.
pub const GROUP_HEADER: &str = "X-Remote-Group";
/// The prefix of the extra headers, `X-Remote-Extra-<key>`.
pub const EXTRA_HEADER_PREFIX: &str = "X-Remote-Extra-";

/// A plain-text error as upstream's `proxyError` (Go's `http.Error`).
pub fn proxy_error(code: StatusCode, message: &str) -> Response {
    let mut response = Response::new(Body::from(format!("{message}\n")));
    *response.status_mut() = code;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(
        HeaderName::from_static("x-content-type-options"),
        HeaderValue::from_static("nosniff"),
    );
    response
}

fn service_unavailable() -> Response {
    proxy_error(StatusCode::SERVICE_UNAVAILABLE, "service unavailable")
}

/// Where a Service's traffic goes: an endpoint address and port (upstream
/// `ResolveEndpoint`, the `--enable-aggregator-routing` resolver). Errors: upstream's
/// messages (a missing Service's 404 as the store words it).
pub async fn resolve(
    objects: &dyn Objects,
    service: &ServiceReference,
) -> Result<(IpAddr, u16), String> {
    let namespace = service.namespace.as_deref().unwrap_or_default();
    let name = service.name.as_deref().unwrap_or_default();
    let port = service.port.unwrap_or(DEFAULT_SERVICE_PORT);
    let svc = objects
        .get(&GroupResource::new("", "services"), Some(namespace), name)
        .await
        .map_err(|e| e.message)?;
    let service_type = svc["spec"]["type"].as_str().unwrap_or("ClusterIP");
    if !matches!(service_type, "ClusterIP" | "NodePort" | "LoadBalancer") {
        return Err(format!("unsupported service type {service_type:?}"));
    }
    let port_name = svc["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["port"].as_i64() == Some(i64::from(port)))
        .map(|p| p["name"].as_str().unwrap_or_default().to_owned())
        .ok_or_else(|| format!("no service port {port} found for service {name:?}"))?;
    let endpoints = objects
        .get(&GroupResource::new("", "endpoints"), Some(namespace), name)
        .await
        .map_err(|e| e.message)?;
    let unavailable = || format!("no endpoints available for service {name:?}");
    let subsets: Vec<&Value> = endpoints["subsets"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    if subsets.is_empty() {
        return Err(unavailable());
    }
    let start = rand::random_range(0..subsets.len());
    for i in 0..subsets.len() {
        let subset = subsets[(start + i) % subsets.len()];
        let addresses: Vec<IpAddr> = subset["addresses"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| a["ip"].as_str()?.parse().ok())
            .collect();
        if addresses.is_empty() {
            continue;
        }
        let found = subset["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"].as_str().unwrap_or_default() == port_name)
            .and_then(|p| u16::try_from(p["port"].as_i64()?).ok());
        if let Some(port) = found {
            let ip = addresses[rand::random_range(0..addresses.len())];
            return Ok((ip, port));
        }
    }
    Err(unavailable())
}

/// How the backend of `api_service` is verified.
pub fn verify_of(api_service: &APIService) -> Verify<'_> {
    let spec = api_service.spec.as_ref();
    if spec.and_then(|s| s.insecure_skip_tls_verify) == Some(true) {
        return Verify::Insecure;
    }
    Verify::Bundle(
        spec.and_then(|s| s.ca_bundle.as_ref())
            .map_or(&[], |b| &b.0),
    )
}

/// The name the backend's certificate must carry: `<service>.<namespace>.svc`.
pub fn server_name(service: &ServiceReference) -> String {
    format!(
        "{}.{}.svc",
        service.name.as_deref().unwrap_or_default(),
        service.namespace.as_deref().unwrap_or_default()
    )
}

/// Upstream's `SetAuthProxyHeaders`: the client's own identity headers removed, then the
/// user, uid, groups and extras (none: Skiff's users carry no extras) set.
pub fn set_auth_proxy_headers(headers: &mut HeaderMap, user: &UserInfo) {
    let extra_prefix = EXTRA_HEADER_PREFIX.to_ascii_lowercase();
    let stale: Vec<HeaderName> = headers
        .keys()
        .filter(|k| {
            let k = k.as_str();
            k == "x-remote-user"
                || k == "x-remote-uid"
                || k == "x-remote-group"
                || k.starts_with(&extra_prefix)
        })
        .cloned()
        .collect();
    for key in stale {
        headers.remove(key);
    }
    headers.remove(header::AUTHORIZATION);
    if let Ok(name) = HeaderValue::from_str(&user.name) {
        headers.insert(USER_HEADER, name);
    }
    if !user.uid.is_empty()
        && let Ok(uid) = HeaderValue::from_str(&user.uid)
    {
        headers.insert(UID_HEADER, uid);
    }
    for group in &user.groups {
        if let Ok(group) = HeaderValue::from_str(group) {
            headers.append(GROUP_HEADER, group);
        }
    }
}

/// Proxies `request` to `api_service`'s backend.
pub async fn serve(
    aggregator: &Aggregator,
    api_service: &APIService,
    mut request: Request,
) -> Response {
    let Some(service) = super::service_ref(api_service) else {
        return proxy_error(StatusCode::NOT_FOUND, "");
    };
    if !is_available(api_service) {
        return service_unavailable();
    }
    let Some(user) = request.extensions().get::<UserInfo>().cloned() else {
        return proxy_error(StatusCode::INTERNAL_SERVER_ERROR, "missing user");
    };
    let system = crate::bootstrap::system_user();
    let objects = crate::rest::objects::ServerObjects::new(&aggregator.state, &system, false);
    let (ip, port) = match resolve(&objects, service).await {
        Ok(location) => location,
        Err(e) => {
            let name = api_service.metadata.name.as_deref().unwrap_or_default();
            tracing::warn!(apiservice = name, error = %e, "resolving the extension API server");
            return service_unavailable();
        }
    };
    let path_and_query = request
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    let client_upgrade = hyper::upgrade::on(&mut request);
    let (parts, body) = request.into_parts();
    let mut backend = hyper::Request::new(body);
    *backend.method_mut() = parts.method.clone();
    *backend.uri_mut() = match path_and_query.parse() {
        Ok(uri) => uri,
        Err(_) => return proxy_error(StatusCode::BAD_REQUEST, "invalid request URI"),
    };
    let headers = backend.headers_mut();
    for (key, value) in &parts.headers {
        if key != header::HOST {
            headers.append(key.clone(), value.clone());
        }
    }
    set_auth_proxy_headers(headers, &user);
    let upgrading = parts.headers.contains_key(header::UPGRADE);
    let name = server_name(service);
    let response = aggregator
        .client
        .send(ip, port, &name, verify_of(api_service), backend)
        .await;
    let mut response = match response {
        Ok(response) => response,
        Err(e) => {
            // Upstream's responder answers a failed dial or handshake with 503.
            let message = format!("{e:#}");
            tracing::warn!(error = %message, "proxying to the extension API server");
            return proxy_error(StatusCode::SERVICE_UNAVAILABLE, &message);
        }
    };
    if !(upgrading && response.status() == StatusCode::SWITCHING_PROTOCOLS) {
        let (parts, body) = response.into_parts();
        return Response::from_parts(parts, Body::new(body));
    }
    let backend_upgrade = hyper::upgrade::on(&mut response);
    tokio::spawn(async move {
        let (client, backend) = match tokio::try_join!(client_upgrade, backend_upgrade) {
            Ok(pair) => pair,
            Err(e) => {
                tracing::warn!(error = %e, "upgrade through the aggregator failed");
                return;
            }
        };
        let mut client = TokioIo::new(client);
        let mut backend = TokioIo::new(backend);
        if let Err(e) = tokio::io::copy_bidirectional(&mut client, &mut backend).await {
            tracing::debug!(error = %e, "aggregated stream ended");
        }
    });
    let mut switched = Response::new(Body::empty());
    *switched.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    *switched.headers_mut() = response.headers().clone();
    switched
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_proxy_headers_replace_the_clients() {
        let mut headers = HeaderMap::new();
        headers.insert("authorization", HeaderValue::from_static("Bearer secret"));
        headers.insert("x-remote-user", HeaderValue::from_static("mallory"));
        headers.insert("x-remote-extra-scopes", HeaderValue::from_static("all"));
        headers.insert("accept", HeaderValue::from_static("application/json"));
        let user = UserInfo {
            name: "alice".to_owned(),
            uid: String::new(),
            groups: vec!["dev".to_owned(), "system:authenticated".to_owned()],
        };
        set_auth_proxy_headers(&mut headers, &user);
        assert!(headers.get("authorization").is_none());
        assert!(headers.get("x-remote-extra-scopes").is_none());
        assert!(headers.get("x-remote-uid").is_none());
        assert_eq!(headers["x-remote-user"], "alice");
        let groups: Vec<_> = headers.get_all("x-remote-group").iter().collect();
        assert_eq!(groups, ["dev", "system:authenticated"]);
        assert_eq!(headers["accept"], "application/json");
    }

    #[test]
    fn unavailable_is_plain_text() {
        let response = service_unavailable();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            response.headers()["content-type"],
            "text/plain; charset=utf-8"
        );
    }
}
