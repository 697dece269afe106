//! coordination.k8s.io/v1 leases (upstream `pkg/registry/coordination/lease`).

use k8s_openapi::api::coordination::v1::Lease;
use serde_json::Value;
use skiff_api::coordination;
use skiff_api::field::ErrorList;

use super::printers::{self, AGE, NAME, column};
use super::{Registry, Strategy, TableColumn};

/// Adds leases.
pub fn add(registry: &mut Registry) {
    registry.add(Leases);
}

/// No short names; a PUT of a missing lease creates it, as upstream.
pub struct Leases;

/// Drops the fields of coordinated leader election (its feature gate is off by default
/// upstream) unless the stored lease already used them.
fn drop_disabled_fields(lease: &mut Lease, old: Option<&Lease>) {
    let used = old
        .and_then(|o| o.spec.as_ref())
        .is_some_and(|s| s.strategy.is_some() || s.preferred_holder.is_some());
    if let (false, Some(spec)) = (used, &mut lease.spec) {
        spec.strategy = None;
        spec.preferred_holder = None;
    }
}

impl Strategy for Leases {
    type Object = Lease;

    fn allow_create_on_update(&self) -> bool {
        true
    }

    fn prepare_for_create(&self, object: &mut Lease) {
        drop_disabled_fields(object, None);
    }

    fn prepare_for_update(&self, new: &mut Lease, old: &Lease) {
        drop_disabled_fields(new, Some(old));
    }

    fn validate(&self, object: &Lease) -> ErrorList {
        coordination::validate(object)
    }

    fn columns(&self) -> Vec<TableColumn> {
        vec![
            NAME,
            column("Holder", "string", "The holder of the lease", 0),
            AGE,
        ]
    }

    fn row(&self, object: &Lease) -> Vec<Value> {
        let holder = object
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.clone())
            .unwrap_or_default();
        vec![
            Value::from(object.metadata.name.clone().unwrap_or_default()),
            Value::from(holder),
            printers::age(&object.metadata),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn row_and_dropped_fields() {
        let mut lease: Lease = serde_json::from_value(json!({
            "metadata": {"name": "node-1"},
            "spec": {"holderIdentity": "node-1", "strategy": "OldestEmulationVersion"},
        }))
        .unwrap();
        Leases.prepare_for_create(&mut lease);
        assert_eq!(lease.spec.as_ref().unwrap().strategy, None);
        assert_eq!(Leases.row(&lease)[..2], [json!("node-1"), json!("node-1")]);
    }
}
