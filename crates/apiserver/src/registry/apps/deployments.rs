//! Deployments (upstream `pkg/registry/apps/deployment`).

use k8s_openapi::api::apps::v1::Deployment;
use serde_json::Value;
use skiff_api::apps::deployment;
use skiff_api::core::pod::warnings;
use skiff_api::field::ErrorList;

use crate::registry::printers::{self, AGE, CONTAINERS, IMAGES, NAME, SELECTOR, column};
use crate::registry::{ResourceInfo, ScaleSpec, Strategy, TableColumn};

/// `deploy`, in category `all`; status and scale subresources.
pub struct Deployments;

impl Strategy for Deployments {
    type Object = Deployment;

    fn info(&self) -> ResourceInfo {
        ResourceInfo {
            short_names: &["deploy"],
            categories: &["all"],
            ..ResourceInfo::of::<Deployment>()
        }
    }

    fn status_subresource(&self) -> bool {
        true
    }

    /// Upstream `deploymentStatusStrategy` resets the spec and labels only: the
    /// controller writes the revision annotation with the status.
    fn status_meta_fields(&self) -> &'static [&'static str] {
        &["annotations"]
    }

    fn bumps_generation(&self) -> bool {
        true
    }

    fn scale(&self) -> Option<ScaleSpec> {
        Some(super::REPLICAS_SCALE)
    }

    fn default(&self, object: &mut Deployment) {
        deployment::default(object);
    }

    fn prepare_for_create(&self, object: &mut Deployment) {
        object.status = Some(Default::default());
    }

    fn validate(&self, object: &Deployment) -> ErrorList {
        deployment::validate(object)
    }

    fn validate_update(&self, new: &Deployment, old: &Deployment) -> ErrorList {
        deployment::validate_update(new, old)
    }

    fn warnings_on_create(&self, object: &Deployment) -> Vec<String> {
        warnings::workload_create_warnings(object.metadata.name.as_deref(), &object.spec.template)
    }

    /// The template's warnings when the generation changed.
    fn warnings_on_update(&self, new: &Deployment, old: &Deployment) -> Vec<String> {
        let changed = new.metadata.generation != old.metadata.generation;
        warnings::template_update_warnings(changed, &new.spec.template)
    }

    fn columns(&self) -> Vec<TableColumn> {
        vec![
            NAME,
            column("Ready", "string", "Number of the pod with ready state", 0),
            column(
                "Up-to-date",
                "string",
                "Total number of non-terminating pods targeted by this deployment that have the desired template spec.",
                0,
            ),
            column(
                "Available",
                "string",
                "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
                0,
            ),
            AGE,
            CONTAINERS,
            IMAGES,
            SELECTOR,
        ]
    }

    fn row(&self, object: &Deployment) -> Vec<Value> {
        let status = object.status.clone().unwrap_or_default();
        let desired = object.spec.replicas.unwrap_or(0);
        let [containers, images] =
            printers::containers_and_images(object.spec.template.spec.as_ref());
        vec![
            Value::from(object.metadata.name.clone().unwrap_or_default()),
            Value::from(format!("{}/{desired}", status.ready_replicas.unwrap_or(0))),
            Value::from(status.updated_replicas.unwrap_or(0)),
            Value::from(status.available_replicas.unwrap_or(0)),
            printers::age(&object.metadata),
            containers,
            images,
            Value::from(printers::selector_string(&object.spec.selector)),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn row_matches_upstream_printer() {
        let d: Deployment = serde_json::from_value(json!({
            "metadata": {"name": "web"},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"spec": {"containers": [
                    {"name": "nginx", "image": "nginx:1.27"},
                    {"name": "sidecar", "image": "busybox"},
                ]}},
            },
            "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2},
        }))
        .unwrap();
        let columns = Deployments.columns();
        let names: Vec<&str> = columns.iter().map(|c| &*c.name).collect();
        assert_eq!(
            names,
            [
                "Name",
                "Ready",
                "Up-to-date",
                "Available",
                "Age",
                "Containers",
                "Images",
                "Selector"
            ]
        );
        assert_eq!(
            Deployments.row(&d),
            [
                json!("web"),
                json!("2/3"),
                json!(3),
                json!(2),
                json!("<unknown>"),
                json!("nginx,sidecar"),
                json!("nginx:1.27,busybox"),
                json!("app=web"),
            ]
        );
    }
}
