//! node.k8s.io/v1 runtimeclasses (upstream `pkg/registry/node/runtimeclass`).

use k8s_openapi::api::node::v1::RuntimeClass;
use serde_json::Value;
use skiff_api::field::ErrorList;
use skiff_api::node;

use super::printers::{self, AGE, NAME, column};
use super::{Registry, Strategy, TableColumn};

/// Adds runtimeclasses.
pub fn add(registry: &mut Registry) {
    registry.add(RuntimeClasses);
}

/// Cluster-scoped, no short names.
pub struct RuntimeClasses;

impl Strategy for RuntimeClasses {
    type Object = RuntimeClass;

    fn validate(&self, object: &RuntimeClass) -> ErrorList {
        node::validate(object)
    }

    fn validate_update(&self, new: &RuntimeClass, old: &RuntimeClass) -> ErrorList {
        node::validate_update(new, old)
    }

    fn columns(&self) -> Vec<TableColumn> {
        vec![
            NAME,
            column(
                "Handler",
                "string",
                "Handler specifies the underlying runtime and configuration that the CRI implementation will use to handle pods of this class.",
                0,
            ),
            AGE,
        ]
    }

    fn row(&self, object: &RuntimeClass) -> Vec<Value> {
        vec![
            Value::from(object.metadata.name.clone().unwrap_or_default()),
            Value::from(object.handler.clone()),
            printers::age(&object.metadata),
        ]
    }
}
