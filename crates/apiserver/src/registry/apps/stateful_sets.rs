//! StatefulSets (upstream `pkg/registry/apps/statefulset`).

use k8s_openapi::api::apps::v1::StatefulSet;
use serde_json::Value;
use skiff_api::apps::stateful_set;
use skiff_api::core::pod::warnings;
use skiff_api::field::ErrorList;

use crate::registry::printers::{self, AGE, CONTAINERS, IMAGES, NAME, column};
use crate::registry::{ResourceInfo, ScaleSpec, Strategy, TableColumn};

/// `sts`, in category `all`; status and scale subresources; names are DNS labels.
pub struct StatefulSets;

impl Strategy for StatefulSets {
    type Object = StatefulSet;

    fn info(&self) -> ResourceInfo {
        ResourceInfo {
            short_names: &["sts"],
            categories: &["all"],
            ..ResourceInfo::of::<StatefulSet>()
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

    /// Upstream `ValidateStatefulSetName`: a DNS label, since the name is part of its pods'
    /// names and hostnames (`<name>-<ordinal>`).
    fn name_rule(&self) -> skiff_api::names::ValidateNameFn {
        skiff_api::names::name_is_dns_label
    }

    fn default(&self, object: &mut StatefulSet) {
        stateful_set::default(object);
    }

    fn prepare_for_create(&self, object: &mut StatefulSet) {
        object.status = Some(Default::default());
    }

    fn validate(&self, object: &StatefulSet) -> ErrorList {
        stateful_set::validate(object)
    }

    fn warnings_on_create(&self, object: &StatefulSet) -> Vec<String> {
        warnings::stateful_set_warnings(object, None)
    }

    fn warnings_on_update(&self, new: &StatefulSet, old: &StatefulSet) -> Vec<String> {
        warnings::stateful_set_warnings(new, Some(old))
    }

    fn validate_update(&self, new: &StatefulSet, old: &StatefulSet) -> ErrorList {
        stateful_set::validate_update(new, old)
    }

    fn columns(&self) -> Vec<TableColumn> {
        vec![
            NAME,
            column("Ready", "string", "Number of the pod with ready state", 0),
            AGE,
            CONTAINERS,
            IMAGES,
        ]
    }

    fn row(&self, object: &StatefulSet) -> Vec<Value> {
        let ready = object
            .status
            .as_ref()
            .and_then(|s| s.ready_replicas)
            .unwrap_or(0);
        let [containers, images] =
            printers::containers_and_images(object.spec.template.spec.as_ref());
        vec![
            Value::from(object.metadata.name.clone().unwrap_or_default()),
            Value::from(format!("{ready}/{}", object.spec.replicas.unwrap_or(0))),
            printers::age(&object.metadata),
            containers,
            images,
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_are_dns_labels() {
        let rule = StatefulSets.name_rule();
        assert_eq!(rule("web-0", false), Vec::<String>::new());
        // Upstream's message for a valid subdomain that is no label.
        assert_eq!(rule("web.v1", false), ["must not contain dots"]);
        assert_eq!(rule("Web", false).len(), 1);
        assert_eq!(rule("web-", true), Vec::<String>::new());
    }

    #[test]
    fn row_matches_upstream_printer() {
        let sts: StatefulSet = serde_json::from_value(json!({
            "metadata": {"name": "db"},
            "spec": {"replicas": 3, "selector": {}, "template": {"spec": {"containers": [{"name": "pg", "image": "postgres"}]}}},
            "status": {"replicas": 3, "readyReplicas": 1},
        }))
        .unwrap();
        assert_eq!(
            StatefulSets.row(&sts),
            [
                json!("db"),
                json!("1/3"),
                json!("<unknown>"),
                json!("pg"),
                json!("postgres")
            ]
        );
    }
}
