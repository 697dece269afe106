//! ReplicaSets (upstream `pkg/registry/apps/replicaset`).

use k8s_openapi::api::apps::v1::ReplicaSet;
use serde_json::Value;
use skiff_api::apps::replica_set;
use skiff_api::core::pod::warnings;
use skiff_api::field::ErrorList;

use crate::registry::printers::{self, AGE, CONTAINERS, IMAGES, NAME, SELECTOR, column};
use crate::registry::{ResourceInfo, ScaleSpec, Strategy, TableColumn};

/// `rs`, in category `all`; status and scale subresources; field selector
/// `status.replicas`.
pub struct ReplicaSets;

impl Strategy for ReplicaSets {
    type Object = ReplicaSet;

    fn info(&self) -> ResourceInfo {
        ResourceInfo {
            short_names: &["rs"],
            categories: &["all"],
            ..ResourceInfo::of::<ReplicaSet>()
        }
    }

    fn status_subresource(&self) -> bool {
        true
    }

    fn bumps_generation(&self) -> bool {
        true
    }

    fn scale(&self) -> Option<ScaleSpec> {
        Some(super::REPLICAS_SCALE)
    }

    fn default(&self, object: &mut ReplicaSet) {
        replica_set::default(object);
    }

    fn prepare_for_create(&self, object: &mut ReplicaSet) {
        object.status = Some(Default::default());
    }

    fn validate(&self, object: &ReplicaSet) -> ErrorList {
        replica_set::validate(object)
    }

    fn warnings_on_create(&self, object: &ReplicaSet) -> Vec<String> {
        let template = object.spec.template.clone().unwrap_or_default();
        warnings::workload_create_warnings(object.metadata.name.as_deref(), &template)
    }

    /// The template's warnings when the generation changed.
    fn warnings_on_update(&self, new: &ReplicaSet, old: &ReplicaSet) -> Vec<String> {
        let changed = new.metadata.generation != old.metadata.generation;
        let template = new.spec.template.clone().unwrap_or_default();
        warnings::template_update_warnings(changed, &template)
    }

    fn validate_update(&self, new: &ReplicaSet, old: &ReplicaSet) -> ErrorList {
        replica_set::validate_update(new, old)
    }

    fn selectable_fields(&self, object: &ReplicaSet) -> Vec<(&'static str, String)> {
        let replicas = object.status.as_ref().map_or(0, |s| s.replicas);
        vec![("status.replicas", replicas.to_string())]
    }

    fn columns(&self) -> Vec<TableColumn> {
        vec![
            NAME,
            column(
                "Desired",
                "integer",
                "Replicas is the number of desired pods.",
                0,
            ),
            column(
                "Current",
                "integer",
                "Replicas is the most recently observed number of replicas.",
                0,
            ),
            column(
                "Ready",
                "integer",
                "The number of ready replicas for this replica set.",
                0,
            ),
            AGE,
            CONTAINERS,
            IMAGES,
            SELECTOR,
        ]
    }

    fn row(&self, object: &ReplicaSet) -> Vec<Value> {
        let status = object.status.clone().unwrap_or_default();
        let spec = object.spec.template.as_ref().and_then(|t| t.spec.as_ref());
        let [containers, images] = printers::containers_and_images(spec);
        vec![
            Value::from(object.metadata.name.clone().unwrap_or_default()),
            Value::from(object.spec.replicas.unwrap_or(0)),
            Value::from(status.replicas),
            Value::from(status.ready_replicas.unwrap_or(0)),
            printers::age(&object.metadata),
            containers,
            images,
            Value::from(printers::format_label_selector(Some(&object.spec.selector))),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn row_and_fields() {
        let rs: ReplicaSet = serde_json::from_value(json!({
            "metadata": {"name": "web-1"},
            "spec": {"replicas": 2, "selector": {}},
            "status": {"replicas": 1, "readyReplicas": 1},
        }))
        .unwrap();
        assert_eq!(
            ReplicaSets.row(&rs)[..4],
            [json!("web-1"), json!(2), json!(1), json!(1)]
        );
        assert_eq!(ReplicaSets.row(&rs)[7], json!("<none>"));
        assert_eq!(
            ReplicaSets.selectable_fields(&rs),
            [("status.replicas", "1".to_owned())]
        );
    }
}
