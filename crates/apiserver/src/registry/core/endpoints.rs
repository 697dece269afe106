//! Endpoints (upstream `pkg/registry/core/endpoint`).

use k8s_openapi::api::core::v1::{EndpointSubset, Endpoints as EndpointsObject};
use serde_json::{Value, json};
use skiff_api::core::{invalid_each, one_of};
use skiff_api::field::{ErrorList, FieldError, Path};
use skiff_api::names;

use crate::registry::printers::{AGE, NAME, age, column, name};
use crate::registry::{ResourceInfo, Strategy, TableColumn};

/// How many addresses the ENDPOINTS cell lists before `+ N more...`.
const SHOWN_ENDPOINTS: usize = 3;

/// The endpoints kind.
pub struct Endpoints;

impl Strategy for Endpoints {
    type Object = EndpointsObject;

    fn info(&self) -> ResourceInfo {
        ResourceInfo {
            short_names: &["ep"],
            ..ResourceInfo::of::<EndpointsObject>()
        }
    }

    fn allow_create_on_update(&self) -> bool {
        true
    }

    /// Ports default to protocol TCP.
    fn default(&self, object: &mut EndpointsObject) {
        let ports = object
            .subsets
            .iter_mut()
            .flatten()
            .flat_map(|s| s.ports.iter_mut().flatten());
        for port in ports {
            port.protocol.get_or_insert_with(|| "TCP".to_owned());
        }
    }

    /// Upstream `ValidateEndpoints`: addresses are IPs, ports valid and named when several.
    fn validate(&self, object: &EndpointsObject) -> ErrorList {
        let mut errors = Vec::new();
        let subsets = Path::new("subsets");
        for (i, subset) in object.subsets.iter().flatten().enumerate() {
            validate_subset(&mut errors, &subsets.index(i), subset);
        }
        errors
    }

    /// NAME ENDPOINTS AGE.
    fn columns(&self) -> Vec<TableColumn> {
        vec![
            NAME,
            column(
                "Endpoints",
                "string",
                "The set of all endpoints is the union of all subsets.",
                0,
            ),
            AGE,
        ]
    }

    fn row(&self, object: &EndpointsObject) -> Vec<Value> {
        vec![
            json!(name(&object.metadata)),
            json!(format_endpoints(
                object.subsets.as_deref().unwrap_or_default()
            )),
            json!(age(&object.metadata)),
        ]
    }
}

fn validate_subset(errors: &mut ErrorList, path: &Path, subset: &EndpointSubset) {
    for (field, addresses) in [
        ("addresses", subset.addresses.as_deref()),
        ("notReadyAddresses", subset.not_ready_addresses.as_deref()),
    ] {
        for (i, address) in addresses.unwrap_or_default().iter().enumerate() {
            let p = path.child(field).index(i).child("ip");
            errors.extend(names::is_valid_ip(&p, &address.ip));
        }
    }
    let ports = subset.ports.as_deref().unwrap_or_default();
    for (i, port) in ports.iter().enumerate() {
        let p = path.child("ports").index(i);
        let port_name = port.name.as_deref().unwrap_or("");
        if port_name.is_empty() && ports.len() > 1 {
            errors.push(FieldError::required(&p.child("name"), ""));
        } else if !port_name.is_empty() {
            invalid_each(
                errors,
                &p.child("name"),
                port_name,
                names::is_dns1123_label(port_name),
            );
        }
        invalid_each(
            errors,
            &p.child("port"),
            port.port,
            names::is_valid_port_num(i64::from(port.port)),
        );
        one_of(
            errors,
            &p.child("protocol"),
            port.protocol.as_deref(),
            &["SCTP", "TCP", "UDP"],
            true,
        );
    }
}

/// Upstream `formatEndpoints`: `ip:port` for the first three, then `+ N more...`;
/// `<none>` without subsets.
fn format_endpoints(subsets: &[EndpointSubset]) -> String {
    if subsets.is_empty() {
        return "<none>".to_owned();
    }
    let mut shown = Vec::new();
    let mut count = 0;
    for subset in subsets {
        let addresses = subset.addresses.as_deref().unwrap_or_default();
        let ports = subset.ports.as_deref().unwrap_or_default();
        if ports.is_empty() {
            count += addresses.len();
            shown.extend(addresses.iter().map(|a| a.ip.clone()));
        } else {
            for port in ports {
                count += addresses.len();
                shown.extend(addresses.iter().map(|a| host_port(&a.ip, port.port)));
            }
        }
    }
    if count > SHOWN_ENDPOINTS {
        shown.truncate(SHOWN_ENDPOINTS);
        format!("{} + {} more...", shown.join(","), count - SHOWN_ENDPOINTS)
    } else {
        shown.join(",")
    }
}

/// Go's `net.JoinHostPort`: IPv6 addresses in brackets.
fn host_port(ip: &str, port: i32) -> String {
    if ip.contains(':') {
        format!("[{ip}]:{port}")
    } else {
        format!("{ip}:{port}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_cell_lists_three_then_counts() {
        let subsets: Vec<EndpointSubset> = serde_json::from_value(json!([
            {"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}], "ports": [{"port": 80}, {"port": 443}]}
        ]))
        .unwrap_or_default();
        assert_eq!(
            format_endpoints(&subsets),
            "10.0.0.1:80,10.0.0.2:80,10.0.0.1:443 + 1 more..."
        );
        assert_eq!(format_endpoints(&[]), "<none>");
        let headless: Vec<EndpointSubset> =
            serde_json::from_value(json!([{"addresses": [{"ip": "fd00::1"}]}])).unwrap_or_default();
        assert_eq!(format_endpoints(&headless), "fd00::1");
    }
}
