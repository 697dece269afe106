//! discovery.k8s.io/v1 endpointslices (upstream `pkg/registry/discovery/endpointslice`).

use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::Value;
use skiff_api::discovery;
use skiff_api::field::ErrorList;

use super::printers::{self, AGE, NAME, column};
use super::{Registry, Strategy, TableColumn};

/// Adds endpointslices.
pub fn add(registry: &mut Registry) {
    registry.add(EndpointSlices);
}

/// No short names; generation bumps on changes to endpoints or ports.
pub struct EndpointSlices;

/// Upstream's `listWithMoreString`: up to three items, then `+ N more...`, `<unset>`
/// for none.
fn list_with_more(items: impl Iterator<Item = String>) -> String {
    const MAX: usize = 3;
    let all: Vec<String> = items.collect();
    let shown = all[..all.len().min(MAX)].join(",");
    if all.len() > MAX {
        format!("{shown} + {} more...", all.len() - MAX)
    } else if shown.is_empty() {
        "<unset>".to_owned()
    } else {
        shown
    }
}

impl Strategy for EndpointSlices {
    type Object = EndpointSlice;

    fn bumps_generation(&self) -> bool {
        true
    }

    fn default(&self, object: &mut EndpointSlice) {
        discovery::default(object);
    }

    fn validate(&self, object: &EndpointSlice) -> ErrorList {
        discovery::validate(object)
    }

    fn validate_update(&self, new: &EndpointSlice, old: &EndpointSlice) -> ErrorList {
        discovery::validate_update(new, old)
    }

    fn columns(&self) -> Vec<TableColumn> {
        vec![
            NAME,
            column("AddressType", "string", "The IP protocol for this slice", 0),
            column("Ports", "string", "The ports contained by this slice", 0),
            column(
                "Endpoints",
                "string",
                "The endpoints contained by this slice",
                0,
            ),
            AGE,
        ]
    }

    fn row(&self, object: &EndpointSlice) -> Vec<Value> {
        let ports = object
            .ports
            .iter()
            .flatten()
            .map(|p| match (&p.port, &p.name) {
                (Some(port), _) => port.to_string(),
                (None, Some(name)) => name.clone(),
                (None, None) => "*".to_owned(),
            });
        let addresses = object
            .endpoints
            .iter()
            .flatten()
            .flat_map(|e| e.addresses.iter().cloned());
        vec![
            Value::from(object.metadata.name.clone().unwrap_or_default()),
            Value::from(object.address_type.clone()),
            Value::from(list_with_more(ports)),
            Value::from(list_with_more(addresses)),
            printers::age(&object.metadata),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn row_matches_upstream_printer() {
        let slice: EndpointSlice = serde_json::from_value(json!({
            "metadata": {"name": "web-abc"},
            "addressType": "IPv4",
            "endpoints": [
                {"addresses": ["10.0.0.1", "10.0.0.2"]},
                {"addresses": ["10.0.0.3", "10.0.0.4", "10.0.0.5"]},
            ],
            "ports": [{"port": 80, "name": "http"}, {"name": "metrics"}],
        }))
        .unwrap();
        assert_eq!(
            EndpointSlices.row(&slice)[..4],
            [
                json!("web-abc"),
                json!("IPv4"),
                json!("80,metrics"),
                json!("10.0.0.1,10.0.0.2,10.0.0.3 + 2 more...")
            ]
        );
        let empty: EndpointSlice = serde_json::from_value(json!({"addressType": "IPv6"})).unwrap();
        assert_eq!(
            EndpointSlices.row(&empty)[2..4],
            [json!("<unset>"), json!("<unset>")]
        );
    }
}
