//! networking.k8s.io/v1 (upstream `pkg/registry/networking`): ingressclasses, ingresses,
//! ipaddresses, networkpolicies and servicecidrs, with the table columns of upstream's
//! printers (`pkg/printers/internalversion/printers.go`, server-side, so wide).

use k8s_openapi::api::networking::v1::{
    IPAddress, Ingress, IngressClass, IngressRule, IngressStatus, NetworkPolicy, ServiceCIDR,
};
use serde_json::Value;
use skiff_api::field::ErrorList;
use skiff_api::names::ValidateNameFn;
use skiff_api::networking;

use super::printers::{self, AGE, NAME, column};
use super::{Registry, ResourceInfo, Strategy, TableColumn};

#[cfg(test)]
mod tests;

/// Adds the networking.k8s.io/v1 kinds in upstream's discovery order.
pub fn add(registry: &mut Registry) {
    registry.add(IngressClasses);
    registry.add(Ingresses);
    registry.add(IpAddresses);
    registry.add(NetworkPolicies);
    registry.add(ServiceCidrs);
}

const POD_SELECTOR: &str = "podSelector selects the pods to which this NetworkPolicy object applies. The array of ingress rules is applied to any pods selected by this field. Multiple network policies can select the same set of pods. In this case, the ingress rules for each are combined additively. This field is NOT optional and follows standard label selector semantics. An empty podSelector matches all pods in this namespace.";
const CIDRS: &str = "CIDRs defines the IP blocks in CIDR notation (e.g. \"192.168.0.0/24\" or \"2001:db8::/64\") from which to assign service cluster IPs. Max of two CIDRs is allowed, one of each IP family. This field is immutable.";
const PARENT_REF: &str = "ParentRef references the resource that an IPAddress is attached to. An IPAddress must reference a parent object.";

/// `ing`; namespaced; `/status`; generation follows the spec.
pub struct Ingresses;

/// Upstream's `formatHosts`: up to three hosts, then `+ N more...` (N counts every rule
/// past the third), `*` when no rule names one.
fn format_hosts(rules: &[IngressRule]) -> String {
    const MAX: usize = 3;
    let mut hosts: Vec<&str> = Vec::new();
    let mut more = false;
    for rule in rules {
        if hosts.len() == MAX {
            more = true;
        }
        let host = rule.host.as_deref().unwrap_or_default();
        if !more && !host.is_empty() {
            hosts.push(host);
        }
    }
    if hosts.is_empty() {
        return "*".to_owned();
    }
    let shown = hosts.join(",");
    if more {
        format!("{shown} + {} more...", rules.len() - MAX)
    } else {
        shown
    }
}

impl Strategy for Ingresses {
    type Object = Ingress;

    fn info(&self) -> ResourceInfo {
        ResourceInfo {
            short_names: &["ing"],
            ..ResourceInfo::of::<Ingress>()
        }
    }

    fn status_subresource(&self) -> bool {
        true
    }

    fn bumps_generation(&self) -> bool {
        true
    }

    /// A create may not set the status; upstream stores an empty one
    /// (`{"loadBalancer": {}}`).
    fn prepare_for_create(&self, object: &mut Ingress) {
        object.status = Some(IngressStatus {
            load_balancer: Some(Default::default()),
        });
    }

    fn validate(&self, object: &Ingress) -> ErrorList {
        networking::validate_ingress(object)
    }

    fn validate_update(&self, new: &Ingress, old: &Ingress) -> ErrorList {
        networking::validate_ingress_update(new, old)
    }

    fn columns(&self) -> Vec<TableColumn> {
        vec![
            NAME,
            column(
                "Class",
                "string",
                "The name of the IngressClass resource that should be used for additional configuration",
                0,
            ),
            column(
                "Hosts",
                "string",
                "Hosts that incoming requests are matched against before the ingress rule",
                0,
            ),
            column(
                "Address",
                "string",
                "Address is a list containing ingress points for the load-balancer",
                0,
            ),
            column(
                "Ports",
                "string",
                "Ports of TLS configurations that open",
                0,
            ),
            AGE,
        ]
    }

    /// The Address cell lists the load balancer's IPs (else hostnames), sorted and
    /// distinct, unclipped as in wide output.
    fn row(&self, object: &Ingress) -> Vec<Value> {
        let spec = object.spec.clone().unwrap_or_default();
        let mut addresses: Vec<String> = object
            .status
            .as_ref()
            .and_then(|s| s.load_balancer.as_ref())
            .and_then(|b| b.ingress.as_ref())
            .into_iter()
            .flatten()
            .filter_map(|i| {
                let ip = i.ip.as_deref().filter(|ip| !ip.is_empty());
                ip.or(i.hostname.as_deref().filter(|h| !h.is_empty()))
                    .map(str::to_owned)
            })
            .collect();
        addresses.sort();
        addresses.dedup();
        let has_tls = spec.tls.as_ref().is_some_and(|t| !t.is_empty());
        vec![
            Value::from(printers::name(&object.metadata)),
            Value::from(spec.ingress_class_name.as_deref().unwrap_or("<none>")),
            Value::from(format_hosts(spec.rules.as_deref().unwrap_or_default())),
            Value::from(addresses.join(",")),
            Value::from(if has_tls { "80, 443" } else { "80" }),
            printers::age(&object.metadata),
        ]
    }
}

/// Cluster-scoped; generation follows the spec; the controller is fixed once created.
/// The `ingressclass.kubernetes.io/is-default-class` annotation is not enforced here.
pub struct IngressClasses;

impl Strategy for IngressClasses {
    type Object = IngressClass;

    fn bumps_generation(&self) -> bool {
        true
    }

    fn default(&self, object: &mut IngressClass) {
        networking::default_ingress_class(object);
    }

    fn validate(&self, object: &IngressClass) -> ErrorList {
        networking::validate_ingress_class(object)
    }

    fn validate_update(&self, new: &IngressClass, old: &IngressClass) -> ErrorList {
        networking::validate_ingress_class_update(new, old)
    }

    fn columns(&self) -> Vec<TableColumn> {
        vec![
            NAME,
            column(
                "Controller",
                "string",
                "Controller that is responsible for handling this class",
                0,
            ),
            column(
                "Parameters",
                "string",
                "A reference to a resource with additional parameters",
                0,
            ),
            AGE,
        ]
    }

    /// Parameters print as `Kind[.apiGroup]/name`, `<none>` without any.
    fn row(&self, object: &IngressClass) -> Vec<Value> {
        let spec = object.spec.clone().unwrap_or_default();
        let parameters = spec.parameters.map_or_else(
            || "<none>".to_owned(),
            |p| match p.api_group {
                Some(group) => format!("{}.{group}/{}", p.kind, p.name),
                None => format!("{}/{}", p.kind, p.name),
            },
        );
        vec![
            Value::from(printers::name(&object.metadata)),
            Value::from(spec.controller.unwrap_or_default()),
            Value::from(parameters),
            printers::age(&object.metadata),
        ]
    }
}

/// `netpol`; namespaced; generation follows the spec.
pub struct NetworkPolicies;

impl Strategy for NetworkPolicies {
    type Object = NetworkPolicy;

    fn info(&self) -> ResourceInfo {
        ResourceInfo {
            short_names: &["netpol"],
            ..ResourceInfo::of::<NetworkPolicy>()
        }
    }

    fn bumps_generation(&self) -> bool {
        true
    }

    fn default(&self, object: &mut NetworkPolicy) {
        networking::default_network_policy(object);
    }

    fn validate(&self, object: &NetworkPolicy) -> ErrorList {
        networking::validate_network_policy(object)
    }

    fn columns(&self) -> Vec<TableColumn> {
        vec![NAME, column("Pod-Selector", "string", POD_SELECTOR, 0), AGE]
    }

    fn row(&self, object: &NetworkPolicy) -> Vec<Value> {
        let selector = object
            .spec
            .as_ref()
            .and_then(|s| s.pod_selector.clone())
            .unwrap_or_default();
        vec![
            Value::from(printers::name(&object.metadata)),
            Value::from(printers::format_label_selector(Some(&selector))),
            printers::age(&object.metadata),
        ]
    }
}

/// Cluster-scoped; `/status`; the CIDRs are fixed once set (a single-stack range may only
/// gain a second family).
pub struct ServiceCidrs;

impl Strategy for ServiceCidrs {
    type Object = ServiceCIDR;

    fn status_subresource(&self) -> bool {
        true
    }

    fn validate(&self, object: &ServiceCIDR) -> ErrorList {
        networking::validate_service_cidr(object)
    }

    /// Upstream validates an update with the update rules alone.
    fn validate_update(&self, new: &ServiceCIDR, old: &ServiceCIDR) -> ErrorList {
        networking::validate_service_cidr_update(new, old)
    }

    fn columns(&self) -> Vec<TableColumn> {
        vec![NAME, column("CIDRs", "string", CIDRS, 0), AGE]
    }

    fn row(&self, object: &ServiceCIDR) -> Vec<Value> {
        let cidrs = object
            .spec
            .as_ref()
            .and_then(|s| s.cidrs.as_deref())
            .unwrap_or_default()
            .join(",");
        vec![
            Value::from(printers::name(&object.metadata)),
            Value::from(cidrs),
            printers::age(&object.metadata),
        ]
    }
}

/// `ip`; cluster-scoped; named by a canonical IP; the parentRef is required and fixed.
pub struct IpAddresses;

impl Strategy for IpAddresses {
    type Object = IPAddress;

    fn info(&self) -> ResourceInfo {
        ResourceInfo {
            short_names: &["ip"],
            ..ResourceInfo::of::<IPAddress>()
        }
    }

    fn name_rule(&self) -> ValidateNameFn {
        networking::validate_ip_address_name
    }

    fn validate(&self, object: &IPAddress) -> ErrorList {
        networking::validate_ip_address(object)
    }

    fn validate_update(&self, new: &IPAddress, old: &IPAddress) -> ErrorList {
        networking::validate_ip_address_update(new, old)
    }

    /// Upstream defines no Age column but still prints an age cell; both are kept.
    fn columns(&self) -> Vec<TableColumn> {
        vec![NAME, column("ParentRef", "string", PARENT_REF, 0)]
    }

    /// The parent prints as `resource[.group][/namespace]/name`, lower-cased.
    fn row(&self, object: &IPAddress) -> Vec<Value> {
        let parent = &object.spec.parent_ref;
        let reference = if *parent == Default::default() {
            "<none>".to_owned()
        } else {
            let mut text = match parent.group.as_deref().filter(|g| !g.is_empty()) {
                Some(group) => format!("{}.{group}", parent.resource),
                None => parent.resource.clone(),
            }
            .to_lowercase();
            if let Some(namespace) = parent.namespace.as_deref().filter(|n| !n.is_empty()) {
                text.push('/');
                text.push_str(namespace);
            }
            text.push('/');
            text.push_str(&parent.name);
            text
        };
        vec![
            Value::from(printers::name(&object.metadata)),
            Value::from(reference),
            printers::age(&object.metadata),
        ]
    }
}
