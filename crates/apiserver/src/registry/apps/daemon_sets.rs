//! DaemonSets (upstream `pkg/registry/apps/daemonset`).

use k8s_openapi::api::apps::v1::DaemonSet;
use serde_json::Value;
use skiff_api::apps::daemon_set;
use skiff_api::core::pod::warnings;
use skiff_api::field::ErrorList;

use crate::registry::printers::{self, AGE, CONTAINERS, IMAGES, NAME, SELECTOR, column};
use crate::registry::{ResourceInfo, Strategy, TableColumn};

/// Upstream keeps apps/v1's hidden template generation in this annotation: 1 on create,
/// incremented on every template change.
const TEMPLATE_GENERATION: &str = "deprecated.daemonset.template.generation";

/// `ds`, in category `all`; status subresource.
pub struct DaemonSets;

fn template_generation(daemon_set: &DaemonSet) -> i64 {
    daemon_set
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(TEMPLATE_GENERATION))
        .and_then(|g| g.parse().ok())
        .unwrap_or(0)
}

fn set_template_generation(daemon_set: &mut DaemonSet, generation: i64) {
    daemon_set
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(TEMPLATE_GENERATION.to_owned(), generation.to_string());
}

impl Strategy for DaemonSets {
    type Object = DaemonSet;

    fn info(&self) -> ResourceInfo {
        ResourceInfo {
            short_names: &["ds"],
            categories: &["all"],
            ..ResourceInfo::of::<DaemonSet>()
        }
    }

    fn status_subresource(&self) -> bool {
        true
    }

    fn bumps_generation(&self) -> bool {
        true
    }

    fn default(&self, object: &mut DaemonSet) {
        daemon_set::default(object);
    }

    fn prepare_for_create(&self, object: &mut DaemonSet) {
        object.status = Some(Default::default());
        set_template_generation(object, 1);
    }

    fn prepare_for_update(&self, new: &mut DaemonSet, old: &DaemonSet) {
        let generation = template_generation(old);
        let changed = new.spec.template != old.spec.template;
        set_template_generation(new, if changed { generation + 1 } else { generation });
    }

    fn validate(&self, object: &DaemonSet) -> ErrorList {
        daemon_set::validate(object)
    }

    fn warnings_on_create(&self, object: &DaemonSet) -> Vec<String> {
        warnings::daemon_set_create_warnings(object)
    }

    /// The template's warnings when the template (and so its template generation) changed.
    fn warnings_on_update(&self, new: &DaemonSet, old: &DaemonSet) -> Vec<String> {
        let changed = new.spec.template != old.spec.template;
        warnings::template_update_warnings(changed, &new.spec.template)
    }

    fn validate_update(&self, new: &DaemonSet, old: &DaemonSet) -> ErrorList {
        daemon_set::validate_update(new, old)
    }

    fn columns(&self) -> Vec<TableColumn> {
        vec![
            NAME,
            column(
                "Desired",
                "integer",
                "The total number of nodes that should be running the daemon pod (including nodes correctly running the daemon pod).",
                0,
            ),
            column(
                "Current",
                "integer",
                "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod.",
                0,
            ),
            column(
                "Ready",
                "integer",
                "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and ready.",
                0,
            ),
            column(
                "Up-to-date",
                "integer",
                "The total number of nodes that are running updated daemon pod",
                0,
            ),
            column(
                "Available",
                "integer",
                "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available (ready for at least spec.minReadySeconds)",
                0,
            ),
            column(
                "Node Selector",
                "string",
                "NodeSelector is a selector which must be true for the pod to fit on a node. Selector which must match a node's labels for the pod to be scheduled on that node.",
                0,
            ),
            AGE,
            CONTAINERS,
            IMAGES,
            SELECTOR,
        ]
    }

    fn row(&self, object: &DaemonSet) -> Vec<Value> {
        let status = object.status.clone().unwrap_or_default();
        let pod_spec = object.spec.template.spec.as_ref();
        let [containers, images] = printers::containers_and_images(pod_spec);
        vec![
            Value::from(object.metadata.name.clone().unwrap_or_default()),
            Value::from(status.desired_number_scheduled),
            Value::from(status.current_number_scheduled),
            Value::from(status.number_ready),
            Value::from(status.updated_number_scheduled.unwrap_or(0)),
            Value::from(status.number_available.unwrap_or(0)),
            Value::from(printers::format_labels(
                pod_spec.and_then(|s| s.node_selector.as_ref()),
            )),
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

    fn daemon_set() -> DaemonSet {
        serde_json::from_value(json!({
            "metadata": {"name": "agent"},
            "spec": {
                "selector": {"matchLabels": {"app": "agent"}},
                "template": {"spec": {
                    "nodeSelector": {"kubernetes.io/os": "linux"},
                    "containers": [{"name": "a", "image": "agent:1"}],
                }},
            },
            "status": {"desiredNumberScheduled": 2, "currentNumberScheduled": 2, "numberReady": 1, "numberMisscheduled": 0},
        }))
        .unwrap()
    }

    #[test]
    fn template_generation_follows_template_changes() {
        let mut old = daemon_set();
        DaemonSets.prepare_for_create(&mut old);
        assert_eq!(template_generation(&old), 1);
        let mut same = old.clone();
        DaemonSets.prepare_for_update(&mut same, &old);
        assert_eq!(template_generation(&same), 1);
        let mut changed = old.clone();
        changed.spec.template.spec.as_mut().unwrap().containers[0].image = Some("agent:2".into());
        DaemonSets.prepare_for_update(&mut changed, &old);
        assert_eq!(template_generation(&changed), 2);
    }

    #[test]
    fn row_matches_upstream_printer() {
        let row = DaemonSets.row(&daemon_set());
        assert_eq!(
            row[..7],
            [
                json!("agent"),
                json!(2),
                json!(2),
                json!(1),
                json!(0),
                json!(0),
                json!("kubernetes.io/os=linux")
            ]
        );
        assert_eq!(row[10], json!("app=agent"));
    }
}
