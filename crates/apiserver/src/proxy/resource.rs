//! The `proxy` subresources of pods, services and nodes (upstream `ProxyREST` in
//! `pkg/registry/core/pod/rest/subresources.go`, `pkg/registry/core/service/proxy.go` and
//! `pkg/registry/core/node/rest/proxy.go`): `.../<name>/proxy[/<path>]`, where `<name>`
//! may also be `<name>:<port>` or `<scheme>:<name>:<port>`, is sent on to the object's
//! location (upstream `ResourceLocation` of each kind) with its method, query, headers and
//! body, and the answer comes back as is. See [`super::forward`] for the forwarding.
//!
//! - pods: the pod's first IP and the given port, else the first declared container port,
//!   else the scheme's default;
//! - services: an address of the service's Endpoints (a ready address of its
//!   EndpointSlices when it has no Endpoints object, as Skiff has no endpoints
//!   controller yet) whose port has the name of the requested service port;
//! - nodes: the kubelet's HTTPS API (with the kubelet client certificate) when no port
//!   or the kubelet port is given, else that port of the node's address over `scheme`.

use std::net::IpAddr;

use async_trait::async_trait;
use axum::extract::Request;
use axum::http::Method;
use axum::response::Response;
use k8s_openapi::api::core::v1::{Endpoints, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::Value;

use super::forward::{self, Backend};
use super::{location, method_not_allowed};
use crate::error::{ApiError, GroupResource};
use crate::registry::{Context, Subresource};

/// The kind a `proxy` subresource belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proxied {
    Pods,
    Services,
    Nodes,
}

impl Proxied {
    /// The kind's word in upstream's `invalid <kind> request "<id>"`.
    fn noun(self) -> &'static str {
        match self {
            Proxied::Pods => "pod",
            Proxied::Services => "service",
            Proxied::Nodes => "node",
        }
    }
}

/// The `proxy` subresource of one kind.
pub struct ResourceProxy(pub Proxied);

/// Where a proxied request goes: the scheme (`http` when empty, as upstream's
/// `normalizeLocation`), the host, the port (the scheme's default when empty) and whether
/// it goes through the kubelet client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    pub scheme: String,
    pub host: String,
    pub port: String,
    pub backend: Backend,
}

/// Splits a proxy id as upstream's `SplitSchemeNamePort`: `<name>`, `<name>:<port>` or
/// `<scheme>:<name>:<port>` into (scheme, name, port). `None` when the name is empty, the
/// scheme is neither `http` nor `https`, or there are more than three parts.
pub fn split_scheme_name_port(id: &str) -> Option<(&str, &str, &str)> {
    let parts: Vec<&str> = id.split(':').collect();
    let (scheme, name, port) = match parts.as_slice() {
        [name] => ("", *name, ""),
        [name, port] => ("", *name, *port),
        [scheme, name, port] => (*scheme, *name, *port),
        _ => return None,
    };
    let scheme_ok = matches!(scheme, "" | "http" | "https");
    (!name.is_empty() && scheme_ok).then_some((scheme, name, port))
}

/// Whether the API server may proxy to `ip`, as Go's `IP.IsGlobalUnicast` (not
/// unspecified, loopback, multicast, link-local or the IPv4 broadcast address). Unit tests
/// also allow loopback addresses, where their test servers listen.
pub fn proxyable(ip: IpAddr) -> bool {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    let global = match ip {
        IpAddr::V4(v4) => {
            !(v4.is_unspecified()
                || v4.is_loopback()
                || v4.is_multicast()
                || v4.is_link_local()
                || v4.is_broadcast())
        }
        IpAddr::V6(v6) => {
            let link_local = (v6.segments()[0] & 0xffc0) == 0xfe80;
            !(v6.is_unspecified() || v6.is_loopback() || v6.is_multicast() || link_local)
        }
    };
    global || (cfg!(test) && ip.is_loopback())
}

/// 400 `address not allowed`.
fn address_not_allowed() -> ApiError {
    ApiError::bad_request("address not allowed")
}

/// The pod's primary IP: `status.podIPs[0]`, else `status.podIP` (which the v1 API
/// converts to the first pod IP).
fn pod_ip(pod: &Pod) -> String {
    let status = pod.status.as_ref();
    status
        .and_then(|s| s.pod_ips.as_ref())
        .and_then(|ips| ips.first())
        .map(|ip| ip.ip.clone())
        .or_else(|| status.and_then(|s| s.pod_ip.clone()))
        .unwrap_or_default()
}

/// Upstream `pod.ResourceLocation`.
async fn pod_location(
    ctx: &Context<'_>,
    namespace: Option<&str>,
    (scheme, name, port): (&str, &str, &str),
) -> Result<Location, ApiError> {
    let pod = location::pod(ctx, namespace, name).await?;
    let mut port = port.to_owned();
    if port.is_empty() {
        let spec = pod.spec.as_ref();
        let first = spec
            .into_iter()
            .flat_map(|s| &s.containers)
            .find_map(|c| c.ports.as_ref().and_then(|p| p.first()));
        if let Some(p) = first {
            port = p.container_port.to_string();
        }
    }
    let ip = pod_ip(&pod);
    match ip.parse::<IpAddr>() {
        Ok(addr) if proxyable(addr) => Ok(Location {
            scheme: scheme.to_owned(),
            host: ip,
            port,
            backend: Backend::Direct,
        }),
        _ => Err(address_not_allowed()),
    }
}

/// A candidate address of a service: its IP, the pod it belongs to (namespace, name) and
/// the port.
struct Candidate {
    ip: String,
    pod: Option<(String, String)>,
    port: i32,
}

/// The addresses of the Endpoints subsets with a port named `port_name` (upstream skips
/// subsets without ready addresses). `None` when the Endpoints have no subsets.
fn endpoints_candidates(endpoints: &Endpoints, port_name: &str) -> Option<Vec<Candidate>> {
    let subsets = endpoints.subsets.as_deref().unwrap_or_default();
    if subsets.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    for subset in subsets {
        let addresses = subset.addresses.as_deref().unwrap_or_default();
        for port in subset.ports.iter().flatten() {
            if port.name.as_deref().unwrap_or_default() != port_name {
                continue;
            }
            out.extend(addresses.iter().map(|a| Candidate {
                ip: a.ip.clone(),
                pod: a.target_ref.as_ref().and_then(pod_ref),
                port: port.port,
            }));
        }
    }
    Some(out)
}

/// The (namespace, name) of a target reference to a pod.
fn pod_ref(target: &k8s_openapi::api::core::v1::ObjectReference) -> Option<(String, String)> {
    let kind = target.kind.as_deref().unwrap_or("Pod");
    (kind == "Pod").then(|| {
        (
            target.namespace.clone().unwrap_or_default(),
            target.name.clone().unwrap_or_default(),
        )
    })
}

/// The ready addresses of EndpointSlices with a port named `port_name`.
fn slice_candidates(slices: &[EndpointSlice], port_name: &str) -> Vec<Candidate> {
    let mut out = Vec::new();
    for slice in slices {
        for port in slice.ports.iter().flatten() {
            if port.name.as_deref().unwrap_or_default() != port_name {
                continue;
            }
            let Some(number) = port.port else { continue };
            for endpoint in slice.endpoints.iter().flatten() {
                let ready = endpoint
                    .conditions
                    .as_ref()
                    .and_then(|c| c.ready)
                    .unwrap_or(true);
                if !ready {
                    continue;
                }
                out.extend(endpoint.addresses.iter().map(|ip| Candidate {
                    ip: ip.clone(),
                    pod: endpoint.target_ref.as_ref().and_then(pod_ref),
                    port: number,
                }));
            }
        }
    }
    out
}

/// Upstream `isValidAddress`: the address names a pod of the service's namespace whose
/// IPs include the address.
async fn valid_address(ctx: &Context<'_>, namespace: &str, candidate: &Candidate) -> bool {
    let Some((pod_namespace, pod_name)) = &candidate.pod else {
        return false;
    };
    if pod_namespace != namespace {
        return false;
    }
    let Ok(pod) = location::pod(ctx, Some(namespace), pod_name).await else {
        return false;
    };
    let status = pod.status.unwrap_or_default();
    let ips = status.pod_ips.unwrap_or_default();
    if ips.is_empty() {
        return status.pod_ip.as_deref() == Some(candidate.ip.as_str());
    }
    ips.iter().any(|ip| ip.ip == candidate.ip)
}

/// 503 `no endpoints available for service "<name>"`.
fn no_endpoints(name: &str) -> ApiError {
    ApiError::unavailable(format!("no endpoints available for service {name:?}"))
}

/// Upstream `REST.ResourceLocation` of services: a numeric port is the service port of
/// that number (503 when there is none), a named one the endpoint port of that name.
async fn service_location(
    ctx: &Context<'_>,
    namespace: Option<&str>,
    id: &str,
    (scheme, name, port): (&str, &str, &str),
) -> Result<Location, ApiError> {
    let ns = namespace.unwrap_or_default();
    let mut port_name = port.to_owned();
    if let Ok(number) = port.parse::<i64>() {
        let value = ctx
            .objects
            .get(&GroupResource::new("", "services"), namespace, name)
            .await?;
        let service: Service = serde_json::from_value(value).map_err(ApiError::internal)?;
        let ports = service.spec.and_then(|s| s.ports).unwrap_or_default();
        let declared = ports.iter().find(|p| i64::from(p.port) == number);
        match declared {
            Some(p) => port_name = p.name.clone().unwrap_or_default(),
            None => {
                return Err(ApiError::unavailable(format!(
                    "no service port {number} found for service {name:?}"
                )));
            }
        }
    }
    let endpoints_resource = GroupResource::new("", "endpoints");
    let candidates = match ctx.objects.get(&endpoints_resource, namespace, name).await {
        Ok(value) => {
            let endpoints: Endpoints = serde_json::from_value(value).map_err(ApiError::internal)?;
            endpoints_candidates(&endpoints, &port_name).ok_or_else(|| no_endpoints(name))?
        }
        Err(not_found) if not_found.code == 404 => {
            let slices = service_slices(ctx, namespace, name).await?;
            if slices.is_empty() {
                return Err(not_found);
            }
            slice_candidates(&slices, &port_name)
        }
        Err(e) => return Err(e),
    };
    for candidate in &candidates {
        if valid_address(ctx, ns, candidate).await {
            return Ok(Location {
                scheme: scheme.to_owned(),
                host: candidate.ip.clone(),
                port: candidate.port.to_string(),
                backend: Backend::Direct,
            });
        }
        tracing::debug!(address = %candidate.ip, service = %name, "endpoint address is not a pod's");
    }
    Err(no_endpoints(id))
}

/// The EndpointSlices of service `name` (label `kubernetes.io/service-name`).
async fn service_slices(
    ctx: &Context<'_>,
    namespace: Option<&str>,
    name: &str,
) -> Result<Vec<EndpointSlice>, ApiError> {
    let all = ctx
        .objects
        .list(
            &GroupResource::new("discovery.k8s.io", "endpointslices"),
            namespace,
        )
        .await?;
    let of_service =
        |v: &Value| v["metadata"]["labels"]["kubernetes.io/service-name"].as_str() == Some(name);
    Ok(all
        .into_iter()
        .filter(of_service)
        .filter_map(|v| serde_json::from_value(v).ok())
        .collect())
}

/// Upstream `isProxyableHostname`: every address the host resolves to must be proxyable.
async fn check_proxyable_host(host: &str) -> Result<(), ApiError> {
    let addresses: Vec<IpAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![ip],
        Err(_) => tokio::net::lookup_host((host, 0))
            .await
            .map_err(|e| ApiError::bad_request(format!("lookup {host}: {e}")))?
            .map(|a| a.ip())
            .collect(),
    };
    if addresses.is_empty() {
        return Err(ApiError::bad_request("no addresses for hostname"));
    }
    if addresses.into_iter().all(proxyable) {
        Ok(())
    } else {
        Err(address_not_allowed())
    }
}

/// Upstream `node.ResourceLocation`.
async fn node_location(
    ctx: &Context<'_>,
    (scheme, name, port): (&str, &str, &str),
) -> Result<Location, ApiError> {
    let (host, kubelet_port) = location::kubelet(ctx, name).await?;
    check_proxyable_host(&host).await?;
    let kubelet_port = kubelet_port.to_string();
    if port.is_empty() || port == kubelet_port {
        return Ok(Location {
            scheme: "https".to_owned(),
            host,
            port: kubelet_port,
            backend: Backend::Kubelet,
        });
    }
    Ok(Location {
        scheme: scheme.to_owned(),
        host,
        port: port.to_owned(),
        backend: Backend::Direct,
    })
}

/// The path of the API server request up to its `proxy` segment, and what follows it
/// (the segments of `.../pods/<name>/proxy/<path>`, with a trailing slash kept).
pub fn split_request_path(path: &str, namespaced: bool) -> (String, String) {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    // api, v1, [namespaces, <ns>,] <plural>, <name>, proxy
    let at = if namespaced { 6 } else { 4 };
    if segments.get(at) != Some(&"proxy") {
        return (path.to_owned(), String::new());
    }
    let prefix = format!("/{}", segments[..=at].join("/"));
    (prefix, segments[at + 1..].join("/"))
}

/// The backend path, as upstream's `JoinPreservingTrailingSlash` of the location path and
/// the proxy path, then the trailing slash of the request: the request's subpath when it
/// has one, else the `path` option; cleaned of empty, `.` and `..` segments.
pub fn backend_path(subpath: &str, option_path: Option<&str>, request_path: &str) -> String {
    let chosen = if subpath.trim_matches('/').is_empty() {
        option_path.unwrap_or_default()
    } else {
        subpath
    };
    let mut cleaned: Vec<&str> = Vec::new();
    for segment in chosen.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                cleaned.pop();
            }
            s => cleaned.push(s),
        }
    }
    let mut path = if chosen.is_empty() {
        String::new()
    } else {
        format!("/{}", cleaned.join("/"))
    };
    let wants_slash = chosen.ends_with('/') || request_path.ends_with('/');
    if wants_slash && !path.ends_with('/') {
        path.push('/');
    }
    path
}

#[async_trait]
impl Subresource for ResourceProxy {
    fn name(&self) -> &'static str {
        "proxy"
    }

    fn verbs(&self) -> &'static [&'static str] {
        &["create", "delete", "get", "patch", "update"]
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
        let allowed = [
            Method::GET,
            Method::POST,
            Method::PUT,
            Method::PATCH,
            Method::DELETE,
            Method::HEAD,
            Method::OPTIONS,
        ];
        if !allowed.contains(request.method()) {
            return Err(method_not_allowed());
        }
        let parts = split_scheme_name_port(name).ok_or_else(|| {
            ApiError::bad_request(format!("invalid {} request {name:?}", self.0.noun()))
        })?;
        let location = match self.0 {
            Proxied::Pods => pod_location(ctx, namespace, parts).await?,
            Proxied::Services => service_location(ctx, namespace, name, parts).await?,
            Proxied::Nodes => node_location(ctx, parts).await?,
        };
        let request_path = request.uri().path().to_owned();
        let (prefix, subpath) = split_request_path(&request_path, self.0 != Proxied::Nodes);
        let option_path = super::query_pairs(request.uri())
            .unwrap_or_default()
            .into_iter()
            .find(|(k, _)| k == "path")
            .map(|(_, v)| v);
        let path = backend_path(&subpath, option_path.as_deref(), &request_path);
        forward::serve(ctx, &location, &prefix, path, request).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_ids_as_upstream() {
        assert_eq!(split_scheme_name_port("web"), Some(("", "web", "")));
        assert_eq!(split_scheme_name_port("web:80"), Some(("", "web", "80")));
        assert_eq!(
            split_scheme_name_port("https:web:http"),
            Some(("https", "web", "http"))
        );
        assert_eq!(split_scheme_name_port("ftp:web:21"), None);
        assert_eq!(split_scheme_name_port(":80"), None);
        assert_eq!(split_scheme_name_port("a:b:c:d"), None);
    }

    #[test]
    fn only_global_unicast_addresses_are_proxyable() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(proxyable(ip("10.244.0.5")));
        assert!(proxyable(ip("2001:db8::1")));
        for bad in [
            "0.0.0.0",
            "169.254.169.254",
            "224.0.0.1",
            "255.255.255.255",
            "fe80::1",
            "::",
            "::ffff:169.254.1.1",
        ] {
            assert!(!proxyable(ip(bad)), "{bad}");
        }
    }

    #[test]
    fn ready_slice_endpoints_of_the_port_are_candidates() {
        let slice: EndpointSlice = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web-abc"},
            "addressType": "IPv4",
            "endpoints": [
                {"addresses": ["10.0.0.1"], "targetRef": {"kind": "Pod", "namespace": "d", "name": "a"}},
                {"addresses": ["10.0.0.2"], "conditions": {"ready": false}},
            ],
            "ports": [{"name": "http", "port": 8080}, {"name": "metrics", "port": 9090}],
        }))
        .unwrap();
        let found = slice_candidates(std::slice::from_ref(&slice), "http");
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].ip, "10.0.0.1");
        assert_eq!(found[0].port, 8080);
        assert_eq!(found[0].pod, Some(("d".into(), "a".into())));
        assert!(slice_candidates(&[slice], "").is_empty());
    }

    #[test]
    fn paths_as_upstream() {
        let request = "/api/v1/namespaces/default/pods/web:8080/proxy/a//b/../c/";
        let (prefix, sub) = split_request_path(request, true);
        assert_eq!(prefix, "/api/v1/namespaces/default/pods/web:8080/proxy");
        assert_eq!(sub, "a//b/../c/");
        assert_eq!(backend_path(&sub, None, request), "/a/c/");
        let (prefix, sub) = split_request_path("/api/v1/nodes/n1/proxy/metrics", false);
        assert_eq!(prefix, "/api/v1/nodes/n1/proxy");
        assert_eq!(backend_path(&sub, None, "/metrics"), "/metrics");
        // No subpath: the `path` option, else empty (a redirect to `proxy/`), or `/`.
        assert_eq!(backend_path("", Some("/healthz"), "/x/proxy"), "/healthz");
        assert_eq!(backend_path("", None, "/x/proxy"), "");
        assert_eq!(backend_path("", None, "/x/proxy/"), "/");
        assert_eq!(
            backend_path("../../etc", None, "/x/proxy/../../etc"),
            "/etc"
        );
    }
}
