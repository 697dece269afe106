//! Service environment variables (upstream `pkg/kubelet/envvars` `FromServices` and the
//! kubelet's `getServiceEnvVarMap`): `<SVC>_SERVICE_HOST`, `<SVC>_SERVICE_PORT`,
//! `<SVC>_SERVICE_PORT_<PORT NAME>` and the Docker-link style `<SVC>_PORT...` variables
//! of the Services in the pod's namespace (with `enableServiceLinks`) and always of the
//! master service `default/kubernetes`.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, Service};

/// Namespace of the master services.
const MASTER_SERVICE_NAMESPACE: &str = "default";
/// The master services (upstream `masterServices`).
const MASTER_SERVICES: &[&str] = &["kubernetes"];

/// A Service name as a variable prefix (upstream `makeEnvVariableName`): upper case, `-`
/// becomes `_`.
fn env_name(name: &str) -> String {
    name.replace('-', "_").to_uppercase()
}

/// True when the Service has a cluster IP (upstream `IsServiceIPSet`: neither empty nor
/// `None`).
fn has_cluster_ip(service: &Service) -> bool {
    service
        .spec
        .as_ref()
        .and_then(|s| s.cluster_ip.as_deref())
        .is_some_and(|ip| !ip.is_empty() && ip != "None")
}

/// `host:port`, with brackets around an IPv6 host (Go's `net.JoinHostPort`).
fn join_host_port(host: &str, port: i32) -> String {
    match host.parse::<IpAddr>() {
        Ok(IpAddr::V6(_)) => format!("[{host}]:{port}"),
        _ => format!("{host}:{port}"),
    }
}

/// The variables of `services` (upstream `FromServices`), in order.
pub fn from_services(services: &[Arc<Service>]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for service in services.iter().filter(|s| has_cluster_ip(s)) {
        let Some(spec) = service.spec.as_ref() else {
            continue;
        };
        let ports = spec.ports.as_deref().unwrap_or_default();
        let Some(first) = ports.first() else {
            continue;
        };
        let ip = spec.cluster_ip.clone().unwrap_or_default();
        let prefix = env_name(service.metadata.name.as_deref().unwrap_or(""));
        out.push((format!("{prefix}_SERVICE_HOST"), ip.clone()));
        let port_var = format!("{prefix}_SERVICE_PORT");
        out.push((port_var.clone(), first.port.to_string()));
        for port in ports {
            if let Some(name) = port.name.as_deref().filter(|n| !n.is_empty()) {
                out.push((
                    format!("{port_var}_{}", env_name(name)),
                    port.port.to_string(),
                ));
            }
        }
        // Docker-compatible link variables (upstream `makeLinkVariables`).
        for (i, port) in ports.iter().enumerate() {
            let protocol = port
                .protocol
                .as_deref()
                .filter(|p| !p.is_empty())
                .unwrap_or("TCP");
            let lower = protocol.to_lowercase();
            let url = format!("{lower}://{}", join_host_port(&ip, port.port));
            if i == 0 {
                out.push((format!("{prefix}_PORT"), url.clone()));
            }
            let port_prefix = format!("{prefix}_PORT_{}_{}", port.port, protocol.to_uppercase());
            out.push((port_prefix.clone(), url));
            out.push((format!("{port_prefix}_PROTO"), lower));
            out.push((format!("{port_prefix}_PORT"), port.port.to_string()));
            out.push((format!("{port_prefix}_ADDR"), ip.clone()));
        }
    }
    out
}

/// The service variables of `pod` from every Service of the cluster (upstream
/// `getServiceEnvVarMap`): the master services of `default` always, the Services of
/// the pod's namespace when `enableServiceLinks` is true or unset (the API server
/// defaults it to true).
pub fn service_env_var_map(pod: &Pod, services: &[Arc<Service>]) -> BTreeMap<String, String> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
    let links = pod
        .spec
        .as_ref()
        .and_then(|s| s.enable_service_links)
        .unwrap_or(true);
    let mut by_name: BTreeMap<String, Arc<Service>> = BTreeMap::new();
    for service in services.iter().filter(|s| has_cluster_ip(s)) {
        let name = service.metadata.name.clone().unwrap_or_default();
        let service_ns = service.metadata.namespace.as_deref().unwrap_or("");
        if service_ns == MASTER_SERVICE_NAMESPACE && MASTER_SERVICES.contains(&name.as_str()) {
            by_name.entry(name).or_insert_with(|| service.clone());
        } else if service_ns == namespace && links {
            by_name.insert(name, service.clone());
        }
    }
    let selected: Vec<Arc<Service>> = by_name.into_values().collect();
    from_services(&selected).into_iter().collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodSpec, ServicePort, ServiceSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    pub(crate) fn service(
        ns: &str,
        name: &str,
        ip: &str,
        ports: &[(Option<&str>, i32, Option<&str>)],
    ) -> Service {
        Service {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(ns.into()),
                ..Default::default()
            },
            spec: Some(ServiceSpec {
                cluster_ip: Some(ip.into()),
                ports: Some(
                    ports
                        .iter()
                        .map(|(n, p, proto)| ServicePort {
                            name: n.map(Into::into),
                            port: *p,
                            protocol: proto.map(Into::into),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn pod(ns: &str, links: Option<bool>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                namespace: Some(ns.into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                enable_service_links: links,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn variables_follow_upstream_names() {
        let services = [Arc::new(service(
            "ns",
            "my-db",
            "10.0.0.5",
            &[
                (Some("sql"), 5432, None),
                (Some("metrics-udp"), 9000, Some("UDP")),
            ],
        ))];
        let vars: BTreeMap<String, String> = from_services(&services).into_iter().collect();
        let expect = [
            ("MY_DB_SERVICE_HOST", "10.0.0.5"),
            ("MY_DB_SERVICE_PORT", "5432"),
            ("MY_DB_SERVICE_PORT_SQL", "5432"),
            ("MY_DB_SERVICE_PORT_METRICS_UDP", "9000"),
            ("MY_DB_PORT", "tcp://10.0.0.5:5432"),
            ("MY_DB_PORT_5432_TCP", "tcp://10.0.0.5:5432"),
            ("MY_DB_PORT_5432_TCP_PROTO", "tcp"),
            ("MY_DB_PORT_5432_TCP_PORT", "5432"),
            ("MY_DB_PORT_5432_TCP_ADDR", "10.0.0.5"),
            ("MY_DB_PORT_9000_UDP", "udp://10.0.0.5:9000"),
            ("MY_DB_PORT_9000_UDP_PROTO", "udp"),
            ("MY_DB_PORT_9000_UDP_PORT", "9000"),
            ("MY_DB_PORT_9000_UDP_ADDR", "10.0.0.5"),
        ];
        assert_eq!(
            vars,
            expect
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>()
        );
        let v6 = [Arc::new(service("ns", "s", "fd00::1", &[(None, 80, None)]))];
        let vars: BTreeMap<String, String> = from_services(&v6).into_iter().collect();
        assert_eq!(vars["S_PORT"], "tcp://[fd00::1]:80");
    }

    #[test]
    fn namespace_links_and_the_master_service() {
        let services: Vec<Arc<Service>> = [
            service(
                "default",
                "kubernetes",
                "10.96.0.1",
                &[(Some("https"), 443, None)],
            ),
            service("ns", "web", "10.96.0.2", &[(None, 80, None)]),
            service("other", "far", "10.96.0.3", &[(None, 80, None)]),
            service("ns", "headless", "None", &[(None, 80, None)]),
        ]
        .into_iter()
        .map(Arc::new)
        .collect();
        let vars = service_env_var_map(&pod("ns", Some(true)), &services);
        assert_eq!(vars["KUBERNETES_SERVICE_HOST"], "10.96.0.1");
        assert_eq!(vars["KUBERNETES_SERVICE_PORT_HTTPS"], "443");
        assert_eq!(vars["WEB_SERVICE_HOST"], "10.96.0.2");
        assert!(!vars.contains_key("FAR_SERVICE_HOST"));
        assert!(!vars.keys().any(|k| k.starts_with("HEADLESS")));
        let no_links = service_env_var_map(&pod("ns", Some(false)), &services);
        assert!(no_links.contains_key("KUBERNETES_SERVICE_HOST"));
        assert!(!no_links.contains_key("WEB_SERVICE_HOST"));
        // A pod of `default` with links sees the master service once.
        let default = service_env_var_map(&pod("default", None), &services);
        assert_eq!(default["KUBERNETES_PORT"], "tcp://10.96.0.1:443");
    }
}
