//! discovery.k8s.io/v1 endpointslices: `SetDefaults_EndpointPort`,
//! `ValidateEndpointSlice` and `ValidateEndpointSliceUpdate`
//! (`pkg/apis/discovery/validation`).

use std::collections::BTreeSet;
use std::net::IpAddr;

use k8s_openapi::api::discovery::v1::{Endpoint, EndpointPort, EndpointSlice};

use crate::field::{ErrorList, ErrorType, FieldError, Path};
use crate::names;
use crate::validation::immutable;

const ADDRESS_TYPES: &[&str] = &["FQDN", "IPv4", "IPv6"];
const PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];
const MAX_ENDPOINTS: usize = 1000;
const MAX_ADDRESSES: usize = 100;
const MAX_PORTS: usize = 20000;

/// Ports get name `""` and protocol TCP.
pub fn default(slice: &mut EndpointSlice) {
    for port in slice.ports.iter_mut().flatten() {
        port.name.get_or_insert_with(String::new);
        port.protocol.get_or_insert_with(|| "TCP".to_owned());
    }
}

/// The address type, the endpoints' addresses (as the type says), node names, hostnames,
/// and the ports.
pub fn validate(slice: &EndpointSlice) -> ErrorList {
    let path = Path::new("addressType");
    let mut errors = Vec::new();
    match slice.address_type.as_str() {
        "" => errors.push(FieldError::required(&path, "")),
        t if !ADDRESS_TYPES.contains(&t) => {
            errors.push(FieldError::not_supported(&path, t, ADDRESS_TYPES))
        }
        _ => {}
    }
    errors.extend(validate_endpoints(
        slice.endpoints.as_deref().unwrap_or_default(),
        &slice.address_type,
    ));
    errors.extend(validate_ports(slice.ports.as_deref().unwrap_or_default()));
    errors
}

/// [`validate`] and an immutable address type.
pub fn validate_update(new: &EndpointSlice, old: &EndpointSlice) -> ErrorList {
    let mut errors = validate(new);
    errors.extend(immutable(
        &new.address_type,
        &old.address_type,
        &Path::new("addressType"),
    ));
    errors
}

/// `field: Too many: <count>: must have at most <max> items`.
fn too_many(path: &Path, count: usize, max: usize) -> FieldError {
    FieldError {
        kind: ErrorType::TooMany,
        field: path.clone(),
        value: Some(count.into()),
        detail: format!("must have at most {max} items"),
    }
}

fn validate_endpoints(endpoints: &[Endpoint], address_type: &str) -> ErrorList {
    let path = Path::new("endpoints");
    if endpoints.len() > MAX_ENDPOINTS {
        return vec![too_many(&path, endpoints.len(), MAX_ENDPOINTS)];
    }
    let mut errors = Vec::new();
    for (i, endpoint) in endpoints.iter().enumerate() {
        let at = path.index(i);
        let addresses_path = at.child("addresses");
        if endpoint.addresses.is_empty() {
            errors.push(FieldError::required(
                &addresses_path,
                "must contain at least 1 address",
            ));
        } else if endpoint.addresses.len() > MAX_ADDRESSES {
            errors.push(too_many(
                &addresses_path,
                endpoint.addresses.len(),
                MAX_ADDRESSES,
            ));
        }
        for (j, address) in endpoint.addresses.iter().enumerate() {
            errors.extend(validate_address(
                address,
                address_type,
                &addresses_path.index(j),
            ));
        }
        if let Some(node_name) = &endpoint.node_name {
            errors.extend(
                names::is_dns1123_subdomain(node_name)
                    .into_iter()
                    .map(|m| FieldError::invalid(&at.child("nodeName"), node_name.as_str(), m)),
            );
        }
        if let Some(hostname) = &endpoint.hostname {
            errors.extend(
                names::is_dns1123_label(hostname)
                    .into_iter()
                    .map(|m| FieldError::invalid(&at.child("hostname"), hostname.as_str(), m)),
            );
        }
    }
    errors
}

/// IPv4 and IPv6 addresses must parse as that family and not be special (unspecified,
/// loopback, link-local); FQDNs must be domain names with two or more labels.
fn validate_address(address: &str, address_type: &str, path: &Path) -> ErrorList {
    let invalid = |message: &str| vec![FieldError::invalid(path, address, message.to_owned())];
    let ip = match (address_type, address.parse::<IpAddr>()) {
        ("IPv4", Ok(ip @ IpAddr::V4(_))) | ("IPv6", Ok(ip @ IpAddr::V6(_))) => ip,
        ("IPv4", _) => return invalid("must be a valid IPv4 address"),
        ("IPv6", _) => return invalid("must be a valid IPv6 address"),
        ("FQDN", _) => {
            let labels: Vec<&str> = address.split('.').collect();
            if labels.len() < 2 {
                return invalid("should be a domain with at least two segments separated by dots");
            }
            return names::is_dns1123_subdomain(&address.to_ascii_lowercase())
                .into_iter()
                .map(|m| FieldError::invalid(path, address, m))
                .collect();
        }
        _ => return Vec::new(),
    };
    let special = match ip {
        IpAddr::V4(v4) if v4.is_unspecified() => Some("may not be unspecified (0.0.0.0, ::)"),
        IpAddr::V6(v6) if v6.is_unspecified() => Some("may not be unspecified (0.0.0.0, ::)"),
        IpAddr::V4(v4) if v4.is_loopback() => {
            Some("may not be in the loopback range (127.0.0.0/8, ::1/128)")
        }
        IpAddr::V6(v6) if v6.is_loopback() => {
            Some("may not be in the loopback range (127.0.0.0/8, ::1/128)")
        }
        IpAddr::V4(v4) if v4.is_link_local() => {
            Some("may not be in the link-local range (169.254.0.0/16, fe80::/10)")
        }
        IpAddr::V6(v6) if v6.is_unicast_link_local() => {
            Some("may not be in the link-local range (169.254.0.0/16, fe80::/10)")
        }
        _ => None,
    };
    special.map_or_else(Vec::new, invalid)
}

fn validate_ports(ports: &[EndpointPort]) -> ErrorList {
    let path = Path::new("ports");
    if ports.len() > MAX_PORTS {
        return vec![too_many(&path, ports.len(), MAX_PORTS)];
    }
    let mut errors = Vec::new();
    let mut names = BTreeSet::new();
    for (i, port) in ports.iter().enumerate() {
        let at = path.index(i);
        let name = port.name.as_deref().unwrap_or("");
        if !name.is_empty() {
            errors.extend(
                names::is_dns1123_label(name)
                    .into_iter()
                    .map(|m| FieldError::invalid(&at.child("name"), name, m)),
            );
        }
        if !names.insert(name) {
            errors.push(FieldError::duplicate(&at.child("name"), name));
        }
        match port.protocol.as_deref() {
            None => errors.push(FieldError::required(&at.child("protocol"), "")),
            Some(p) if !PROTOCOLS.contains(&p) => errors.push(FieldError::not_supported(
                &at.child("protocol"),
                p,
                PROTOCOLS,
            )),
            Some(_) => {}
        }
        if let Some(app_protocol) = &port.app_protocol {
            errors.extend(
                names::is_qualified_name(app_protocol).into_iter().map(|m| {
                    FieldError::invalid(&at.child("appProtocol"), app_protocol.as_str(), m)
                }),
            );
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn slice(value: serde_json::Value) -> EndpointSlice {
        let mut slice: EndpointSlice = serde_json::from_value(value).unwrap();
        default(&mut slice);
        slice
    }

    #[test]
    fn ports_are_defaulted_and_valid() {
        let s = slice(json!({
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.0.0.5"]}],
            "ports": [{"port": 80}],
        }));
        let port = &s.ports.as_ref().unwrap()[0];
        assert_eq!(
            (port.name.as_deref(), port.protocol.as_deref()),
            (Some(""), Some("TCP"))
        );
        assert!(validate(&s).is_empty());
    }

    #[test]
    fn messages_match_upstream() {
        let s = slice(json!({
            "addressType": "IPv5",
            "endpoints": [{"addresses": []}],
            "ports": [{"name": "http", "port": 80}, {"name": "http", "protocol": "ICMP"}],
        }));
        let errors: Vec<String> = validate(&s).iter().map(ToString::to_string).collect();
        assert_eq!(
            errors,
            [
                r#"addressType: Unsupported value: "IPv5": supported values: "FQDN", "IPv4", "IPv6""#,
                "endpoints[0].addresses: Required value: must contain at least 1 address",
                r#"ports[1].name: Duplicate value: "http""#,
                r#"ports[1].protocol: Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP""#,
            ]
        );
        let loopback = slice(
            json!({"addressType": "IPv4", "endpoints": [{"addresses": ["127.0.0.1", "fe80::1"]}]}),
        );
        let errors: Vec<String> = validate(&loopback)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errors,
            [
                r#"endpoints[0].addresses[0]: Invalid value: "127.0.0.1": may not be in the loopback range (127.0.0.0/8, ::1/128)"#,
                r#"endpoints[0].addresses[1]: Invalid value: "fe80::1": must be a valid IPv4 address"#,
            ]
        );
    }
}
