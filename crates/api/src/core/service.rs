//! Services: defaulting and validation (upstream `SetDefaults_Service`, `ValidateService`,
//! `ValidateServiceUpdate`).

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::core::{invalid_each, one_of};
use crate::field::{ErrorList, FieldError, Path};
use crate::names;

/// `spec.clusterIP: None`: a headless service.
pub const CLUSTER_IP_NONE: &str = "None";

/// The service type, `ClusterIP` when unset.
pub fn service_type(spec: &ServiceSpec) -> &str {
    spec.type_.as_deref().unwrap_or("ClusterIP")
}

/// Whether the type allocates node ports (NodePort and LoadBalancer).
pub fn needs_node_ports(spec: &ServiceSpec) -> bool {
    matches!(service_type(spec), "NodePort" | "LoadBalancer")
}

/// Defaults a service: type `ClusterIP`, sessionAffinity `None` (a ClientIP affinity gets
/// a 10800 s timeout), port protocol `TCP` and targetPort = port, externalTrafficPolicy
/// `Cluster` for NodePort and LoadBalancer, internalTrafficPolicy `Cluster` and
/// allocateLoadBalancerNodePorts for LoadBalancers.
pub fn default_service(service: &mut Service) {
    let Some(spec) = service.spec.as_mut() else {
        return;
    };
    spec.type_.get_or_insert_with(|| "ClusterIP".to_owned());
    spec.session_affinity
        .get_or_insert_with(|| "None".to_owned());
    if spec.session_affinity.as_deref() == Some("ClientIP") {
        let config = spec
            .session_affinity_config
            .get_or_insert_with(Default::default);
        let client_ip = config.client_ip.get_or_insert_with(Default::default);
        client_ip.timeout_seconds.get_or_insert(10800);
    }
    for port in spec.ports.iter_mut().flatten() {
        default_port(port);
    }
    let kind = service_type(spec).to_owned();
    if matches!(kind.as_str(), "NodePort" | "LoadBalancer") {
        spec.external_traffic_policy
            .get_or_insert_with(|| "Cluster".to_owned());
    }
    if kind != "ExternalName" {
        spec.internal_traffic_policy
            .get_or_insert_with(|| "Cluster".to_owned());
    }
    if kind == "LoadBalancer" {
        spec.allocate_load_balancer_node_ports.get_or_insert(true);
    }
}

fn default_port(port: &mut ServicePort) {
    port.protocol.get_or_insert_with(|| "TCP".to_owned());
    let unset = match &port.target_port {
        None => true,
        Some(IntOrString::Int(0)) => true,
        Some(IntOrString::String(s)) => s.is_empty(),
        Some(IntOrString::Int(_)) => false,
    };
    if unset {
        port.target_port = Some(IntOrString::Int(port.port));
    }
}

/// Checks a new service (name included: services are DNS-1035 labels).
pub fn validate_service(service: &Service) -> ErrorList {
    let mut errors = Vec::new();
    let name = service.metadata.name.as_deref().unwrap_or("");
    if !name.is_empty() {
        invalid_each(
            &mut errors,
            &Path::new("metadata").child("name"),
            name,
            names::is_dns1035_label(name),
        );
    }
    let spec_path = Path::new("spec");
    let Some(spec) = &service.spec else {
        errors.push(FieldError::required(&spec_path, ""));
        return errors;
    };
    let kind = service_type(spec);
    one_of(
        &mut errors,
        &spec_path.child("type"),
        spec.type_.as_deref(),
        &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"],
        false,
    );
    one_of(
        &mut errors,
        &spec_path.child("sessionAffinity"),
        spec.session_affinity.as_deref(),
        &["ClientIP", "None"],
        false,
    );
    let cluster_ip = spec.cluster_ip.as_deref().unwrap_or("");
    let headless = cluster_ip == CLUSTER_IP_NONE;
    let ports = spec.ports.as_deref().unwrap_or_default();
    let ports_path = spec_path.child("ports");
    if ports.is_empty() && !headless && kind != "ExternalName" {
        errors.push(FieldError::required(&ports_path, ""));
    }
    if kind == "ExternalName" {
        let external_name = spec.external_name.as_deref().unwrap_or("");
        let p = spec_path.child("externalName");
        if external_name.is_empty() {
            errors.push(FieldError::required(&p, ""));
        } else {
            invalid_each(
                &mut errors,
                &p,
                external_name,
                names::is_dns1123_subdomain(external_name),
            );
        }
    } else if !cluster_ip.is_empty() && !headless && names::parse_ip_sloppy(cluster_ip).is_none() {
        errors.push(FieldError::invalid(
            &spec_path.child("clusterIPs").index(0),
            cluster_ip,
            "must be empty, 'None', or a valid IP address",
        ));
    }
    let mut port_names = HashSet::new();
    let mut port_keys = HashSet::new();
    for (i, port) in ports.iter().enumerate() {
        let p = ports_path.index(i);
        validate_port(&mut errors, &p, port, ports.len() > 1, &mut port_names);
        if kind == "ClusterIP" && port.node_port.unwrap_or(0) != 0 {
            errors.push(FieldError::forbidden(
                &p.child("nodePort"),
                "may not be used when `type` is 'ClusterIP'",
            ));
        }
        let key = (port.port, port.protocol.clone().unwrap_or_default());
        if !port_keys.insert(key) {
            errors.push(FieldError::duplicate(
                &p,
                serde_json::to_value(port).unwrap_or_default(),
            ));
        }
    }
    errors
}

fn validate_port<'a>(
    errors: &mut ErrorList,
    path: &Path,
    port: &'a ServicePort,
    name_required: bool,
    names_seen: &mut HashSet<&'a str>,
) {
    let name = port.name.as_deref().unwrap_or("");
    let name_path = path.child("name");
    if name.is_empty() {
        if name_required {
            errors.push(FieldError::required(&name_path, ""));
        }
    } else {
        invalid_each(errors, &name_path, name, names::is_dns1123_label(name));
        if !names_seen.insert(name) {
            errors.push(FieldError::duplicate(&name_path, name));
        }
    }
    invalid_each(
        errors,
        &path.child("port"),
        port.port,
        names::is_valid_port_num(i64::from(port.port)),
    );
    one_of(
        errors,
        &path.child("protocol"),
        port.protocol.as_deref(),
        &["SCTP", "TCP", "UDP"],
        true,
    );
    let target_path = path.child("targetPort");
    match &port.target_port {
        Some(IntOrString::Int(n)) => {
            invalid_each(
                errors,
                &target_path,
                *n,
                names::is_valid_port_num(i64::from(*n)),
            );
        }
        Some(IntOrString::String(s)) => {
            invalid_each(
                errors,
                &target_path,
                s.as_str(),
                names::is_valid_port_name(s),
            );
        }
        None => {}
    }
    if let Some(node_port) = port.node_port.filter(|p| *p != 0) {
        invalid_each(
            errors,
            &path.child("nodePort"),
            node_port,
            names::is_valid_port_num(i64::from(node_port)),
        );
    }
}

/// Checks an update: the new service as on create, and a cluster IP that stays as it was
/// (unless the type changes to or from ExternalName).
pub fn validate_service_update(new: &Service, old: &Service) -> ErrorList {
    let mut errors = validate_service(new);
    let (Some(new_spec), Some(old_spec)) = (&new.spec, &old.spec) else {
        return errors;
    };
    let uses_ip = |s: &ServiceSpec| service_type(s) != "ExternalName";
    let old_ip = old_spec.cluster_ip.as_deref().unwrap_or("");
    let new_ip = new_spec.cluster_ip.as_deref().unwrap_or("");
    if uses_ip(old_spec) && uses_ip(new_spec) && !old_ip.is_empty() && new_ip != old_ip {
        errors.push(FieldError::invalid(
            &Path::new("spec").child("clusterIPs").index(0),
            serde_json::json!([new_ip]),
            "may not change once set",
        ));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(value: serde_json::Value) -> Service {
        let mut s: Service = serde_json::from_value(value).unwrap_or_default();
        default_service(&mut s);
        s
    }

    fn messages(errors: &ErrorList) -> Vec<String> {
        errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn defaults_follow_upstream() {
        let s = service(serde_json::json!({
            "metadata": {"name": "web"},
            "spec": {"type": "NodePort", "ports": [{"port": 80}, {"port": 53, "protocol": "UDP", "targetPort": "dns"}]}
        }));
        let spec = s.spec.unwrap_or_default();
        assert_eq!(spec.session_affinity.as_deref(), Some("None"));
        assert_eq!(spec.external_traffic_policy.as_deref(), Some("Cluster"));
        assert_eq!(spec.internal_traffic_policy.as_deref(), Some("Cluster"));
        let ports = spec.ports.unwrap_or_default();
        assert_eq!(ports[0].protocol.as_deref(), Some("TCP"));
        assert_eq!(ports[0].target_port, Some(IntOrString::Int(80)));
        assert_eq!(
            ports[1].target_port,
            Some(IntOrString::String("dns".into()))
        );
        let plain = service(serde_json::json!({"spec": {"ports": [{"port": 80}]}}));
        assert_eq!(
            plain.spec.unwrap_or_default().type_.as_deref(),
            Some("ClusterIP")
        );
    }

    #[test]
    fn validation_messages() {
        let s = service(serde_json::json!({
            "metadata": {"name": "1web"},
            "spec": {"type": "Bogus", "clusterIP": "10.0.0", "ports": [
                {"port": 0, "nodePort": 30000}, {"port": 80, "name": "a"}]}
        }));
        let got = messages(&validate_service(&s));
        for expected in [
            r#"metadata.name: Invalid value: "1web": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"#,
            r#"spec.type: Unsupported value: "Bogus": supported values: "ClusterIP", "ExternalName", "LoadBalancer", "NodePort""#,
            r#"spec.clusterIPs[0]: Invalid value: "10.0.0": must be empty, 'None', or a valid IP address"#,
            "spec.ports[0].name: Required value",
            "spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive",
        ] {
            assert!(
                got.contains(&expected.to_owned()),
                "{expected}\nmissing from {got:#?}"
            );
        }
        let none = service(serde_json::json!({"metadata": {"name": "x"}, "spec": {}}));
        assert_eq!(
            messages(&validate_service(&none)),
            ["spec.ports: Required value"]
        );
        let headless =
            service(serde_json::json!({"metadata": {"name": "x"}, "spec": {"clusterIP": "None"}}));
        assert!(validate_service(&headless).is_empty());
        let cluster_only = service(
            serde_json::json!({"metadata": {"name": "x"}, "spec": {"ports": [{"port": 1, "nodePort": 30001}]}}),
        );
        assert_eq!(
            messages(&validate_service(&cluster_only)),
            ["spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"]
        );
    }

    #[test]
    fn cluster_ip_is_immutable() {
        let old = service(
            serde_json::json!({"metadata": {"name": "x"}, "spec": {"clusterIP": "10.96.0.10", "ports": [{"port": 1}]}}),
        );
        let mut new = old.clone();
        if let Some(spec) = new.spec.as_mut() {
            spec.cluster_ip = Some("10.96.0.11".into());
        }
        assert_eq!(
            messages(&validate_service_update(&new, &old)),
            [r#"spec.clusterIPs[0]: Invalid value: ["10.96.0.11"]: may not change once set"#]
        );
    }
}
