//! Services (upstream `pkg/registry/core/service`): defaulting and validation from
//! skiff-api, cluster IP and node port allocation, status, and the table of
//! `kubectl get services`.

mod allocator;
mod band;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use serde_json::{Value, json};
use skiff_api::core::service::{
    default_service, needs_node_ports, service_type, validate_service, validate_service_update,
};
use skiff_api::field::ErrorList;

use crate::error::ApiError;
use crate::registry::printers::{AGE, NAME, age, column, format_labels, name, wide};
use crate::registry::{Context, ResourceInfo, Strategy, TableColumn};

/// The services kind, with its allocator.
#[derive(Default)]
pub struct Services {
    allocator: allocator::Allocator,
}

#[async_trait]
impl Strategy for Services {
    type Object = Service;

    fn info(&self) -> ResourceInfo {
        ResourceInfo {
            short_names: &["svc"],
            categories: &["all"],
            ..ResourceInfo::of::<Service>()
        }
    }

    fn status_subresource(&self) -> bool {
        true
    }

    /// `proxy` (upstream `ProxyREST`): requests sent on to an endpoint of the service.
    fn subresources(&self) -> Vec<std::sync::Arc<dyn crate::registry::Subresource>> {
        vec![std::sync::Arc::new(crate::proxy::ResourceProxy(
            crate::proxy::Proxied::Services,
        ))]
    }

    fn allow_create_on_update(&self) -> bool {
        true
    }

    fn return_deleted_object(&self) -> bool {
        true
    }

    fn default(&self, service: &mut Service) {
        default_service(service);
    }

    /// Upstream PrepareForCreate: the status is the load balancer controller's.
    fn prepare_for_create(&self, service: &mut Service) {
        service.status = None;
    }

    /// Upstream `patchAllocatedValues`: an update that leaves out the cluster IP, the IP
    /// families or node ports keeps the allocated ones.
    fn prepare_for_update(&self, new: &mut Service, old: &Service) {
        let (Some(new_spec), Some(old_spec)) = (new.spec.as_mut(), old.spec.as_ref()) else {
            return;
        };
        let uses_ip = |s: &ServiceSpec| service_type(s) != "ExternalName";
        if uses_ip(old_spec) && uses_ip(new_spec) {
            if new_spec.cluster_ip.as_deref().unwrap_or("").is_empty() {
                new_spec.cluster_ip.clone_from(&old_spec.cluster_ip);
            }
            if new_spec.cluster_ips.as_ref().is_none_or(Vec::is_empty) {
                new_spec.cluster_ips.clone_from(&old_spec.cluster_ips);
            }
            if new_spec.ip_families.as_ref().is_none_or(Vec::is_empty) {
                new_spec.ip_families.clone_from(&old_spec.ip_families);
            }
            if new_spec.ip_family_policy.is_none() {
                new_spec
                    .ip_family_policy
                    .clone_from(&old_spec.ip_family_policy);
            }
        }
        if needs_node_ports(old_spec) && needs_node_ports(new_spec) {
            keep_node_ports(new_spec, old_spec);
        }
    }

    fn validate(&self, service: &Service) -> ErrorList {
        validate_service(service)
    }

    fn validate_update(&self, new: &Service, old: &Service) -> ErrorList {
        validate_service_update(new, old)
    }

    async fn admit_create(&self, ctx: &Context<'_>, service: &mut Service) -> Result<(), ApiError> {
        self.allocator.allocate(ctx, service, None).await
    }

    async fn admit_update(
        &self,
        ctx: &Context<'_>,
        new: &mut Service,
        old: &Service,
    ) -> Result<(), ApiError> {
        self.allocator.allocate(ctx, new, Some(old)).await
    }

    /// Upstream `ToSelectableFields`: the cluster IP (`None` for headless services, as
    /// the kubelet's `spec.clusterIP!=None` watch relies on) and the type.
    fn selectable_fields(&self, service: &Service) -> Vec<(&'static str, String)> {
        let spec = service.spec.as_ref();
        vec![
            (
                "spec.clusterIP",
                spec.and_then(|s| s.cluster_ip.clone()).unwrap_or_default(),
            ),
            (
                "spec.type",
                spec.and_then(|s| s.type_.clone()).unwrap_or_default(),
            ),
        ]
    }

    /// NAME TYPE CLUSTER-IP EXTERNAL-IP PORT(S) AGE, and SELECTOR with `-o wide`.
    fn columns(&self) -> Vec<TableColumn> {
        vec![
            NAME,
            column(
                "Type",
                "string",
                "type determines how the Service is exposed.",
                0,
            ),
            column(
                "Cluster-IP",
                "string",
                "clusterIP is the IP address of the service and is usually assigned randomly.",
                0,
            ),
            column(
                "External-IP",
                "string",
                "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.",
                0,
            ),
            column(
                "Port(s)",
                "string",
                "The list of ports that are exposed by this service.",
                0,
            ),
            AGE,
            wide(
                "Selector",
                "string",
                "Route service traffic to pods with label keys and values matching this selector.",
            ),
        ]
    }

    /// Upstream `printService`.
    fn row(&self, service: &Service) -> Vec<Value> {
        let spec = service.spec.clone().unwrap_or_default();
        let cluster_ip = spec
            .cluster_ips
            .as_ref()
            .and_then(|ips| ips.first().cloned())
            .unwrap_or_else(|| "<none>".to_owned());
        let ports = port_string(spec.ports.as_deref().unwrap_or_default());
        vec![
            json!(name(&service.metadata)),
            json!(spec.type_.clone().unwrap_or_default()),
            json!(cluster_ip),
            json!(external_ip(service)),
            json!(if ports.is_empty() {
                "<none>".to_owned()
            } else {
                ports
            }),
            json!(age(&service.metadata)),
            json!(format_labels(spec.selector.as_ref())),
        ]
    }
}

/// Node ports missing from `new` come from the old port of the same name, unless
/// another port of `new` uses them.
fn keep_node_ports(new: &mut ServiceSpec, old: &ServiceSpec) {
    let used: Vec<i32> = new
        .ports
        .iter()
        .flatten()
        .filter_map(|p| p.node_port)
        .collect();
    let old_ports = old.ports.as_deref().unwrap_or_default();
    for port in new.ports.iter_mut().flatten() {
        if port.node_port.unwrap_or(0) != 0 {
            continue;
        }
        let previous = old_ports
            .iter()
            .find(|p| p.name == port.name)
            .and_then(|p| p.node_port);
        if let Some(previous) = previous.filter(|p| !used.contains(p)) {
            port.node_port = Some(previous);
        }
    }
    if new.health_check_node_port.is_none() {
        new.health_check_node_port = old.health_check_node_port;
    }
}

/// Upstream `makePortString`: `80/TCP`, `80:30080/TCP`, comma-separated.
fn port_string(ports: &[ServicePort]) -> String {
    ports
        .iter()
        .map(|p| {
            let protocol = p.protocol.clone().unwrap_or_default();
            match p.node_port.filter(|n| *n > 0) {
                Some(node_port) => format!("{}:{node_port}/{protocol}", p.port),
                None => format!("{}/{protocol}", p.port),
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Upstream `getServiceExternalIP` (as the server prints it: not shortened).
fn external_ip(service: &Service) -> String {
    let spec = service.spec.clone().unwrap_or_default();
    let external_ips = spec.external_ips.clone().unwrap_or_default();
    match spec.type_.as_deref() {
        Some("ClusterIP" | "NodePort") => {
            if external_ips.is_empty() {
                "<none>".to_owned()
            } else {
                external_ips.join(",")
            }
        }
        Some("LoadBalancer") => {
            let ingress = service
                .status
                .as_ref()
                .and_then(|s| s.load_balancer.as_ref())
                .and_then(|lb| lb.ingress.clone())
                .unwrap_or_default();
            let mut addresses: Vec<String> = ingress
                .into_iter()
                .filter_map(|i| {
                    i.ip.filter(|ip| !ip.is_empty())
                        .or(i.hostname.filter(|h| !h.is_empty()))
                })
                .collect();
            addresses.extend(external_ips);
            if addresses.is_empty() {
                "<pending>".to_owned()
            } else {
                addresses.join(",")
            }
        }
        Some("ExternalName") => spec.external_name.unwrap_or_default(),
        _ => "<unknown>".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(value: Value) -> Service {
        let mut s: Service = serde_json::from_value(value).unwrap_or_default();
        default_service(&mut s);
        s
    }

    #[test]
    fn rows_as_upstream() {
        let s = service(json!({
            "metadata": {"name": "web"},
            "spec": {"type": "NodePort", "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
                     "selector": {"app": "web"},
                     "ports": [{"port": 80, "nodePort": 30080}, {"port": 53, "protocol": "UDP"}]}
        }));
        let row = <Services as Default>::default().row(&s);
        assert_eq!(
            row[..5],
            [
                json!("web"),
                json!("NodePort"),
                json!("10.96.0.10"),
                json!("<none>"),
                json!("80:30080/TCP,53/UDP")
            ]
        );
        assert_eq!(row[6], "app=web");
        let lb = service(
            json!({"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}}),
        );
        assert_eq!(<Services as Default>::default().row(&lb)[3], "<pending>");
        let ext = service(
            json!({"metadata": {"name": "x"}, "spec": {"type": "ExternalName", "externalName": "example.com"}}),
        );
        let row = <Services as Default>::default().row(&ext);
        assert_eq!(
            (row[2].clone(), row[3].clone(), row[4].clone()),
            (json!("<none>"), json!("example.com"), json!("<none>"))
        );
    }

    #[test]
    fn updates_keep_allocated_values() {
        let old = service(
            json!({"metadata": {"name": "web"}, "spec": {"type": "NodePort", "clusterIP": "10.96.0.10",
            "clusterIPs": ["10.96.0.10"], "ports": [{"name": "http", "port": 80, "nodePort": 30080}]}}),
        );
        let mut new = service(
            json!({"metadata": {"name": "web"}, "spec": {"type": "NodePort",
            "ports": [{"name": "http", "port": 8080}]}}),
        );
        <Services as Default>::default().prepare_for_update(&mut new, &old);
        let spec = new.spec.unwrap_or_default();
        assert_eq!(spec.cluster_ip.as_deref(), Some("10.96.0.10"));
        assert_eq!(spec.ports.unwrap_or_default()[0].node_port, Some(30080));
    }
}
