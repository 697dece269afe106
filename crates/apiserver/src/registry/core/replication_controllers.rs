//! ReplicationControllers (upstream `pkg/registry/core/replicationcontroller`) and
//! PodTemplates (upstream `pkg/registry/core/podtemplate`); defaulting and validation
//! from `skiff_api::core::replication_controller`.

use k8s_openapi::api::core::v1::{PodTemplate, ReplicationController};
use serde_json::{Value, json};
use skiff_api::core::pod::warnings;
use skiff_api::core::replication_controller as rc;
use skiff_api::field::ErrorList;

use crate::registry::printers::{
    AGE, CONTAINERS, IMAGES, NAME, age, column, containers_and_images, format_labels, name, wide,
};
use crate::registry::{ResourceInfo, ScaleSpec, Strategy, TableColumn};

/// `rc`, in category `all`, with the status and scale subresources and the
/// `status.replicas` field selector. The selector stays mutable in core/v1, as upstream.
pub struct ReplicationControllers;

impl Strategy for ReplicationControllers {
    type Object = ReplicationController;

    fn info(&self) -> ResourceInfo {
        ResourceInfo {
            short_names: &["rc"],
            categories: &["all"],
            ..ResourceInfo::of::<ReplicationController>()
        }
    }

    fn status_subresource(&self) -> bool {
        true
    }

    fn bumps_generation(&self) -> bool {
        true
    }

    /// The Scale's selector is the map selector in query form (`app=web`).
    fn scale(&self) -> Option<ScaleSpec> {
        Some(crate::registry::REPLICAS_SCALE)
    }

    fn default(&self, object: &mut ReplicationController) {
        rc::default(object);
    }

    /// Upstream PrepareForCreate: an empty status.
    fn prepare_for_create(&self, object: &mut ReplicationController) {
        object.status = Some(Default::default());
    }

    fn validate(&self, object: &ReplicationController) -> ErrorList {
        rc::validate(object)
    }

    fn warnings_on_create(&self, object: &ReplicationController) -> Vec<String> {
        warnings::replication_controller_warnings(object, None)
    }

    fn warnings_on_update(
        &self,
        new: &ReplicationController,
        old: &ReplicationController,
    ) -> Vec<String> {
        warnings::replication_controller_warnings(new, Some(old))
    }

    fn validate_update(
        &self,
        new: &ReplicationController,
        _old: &ReplicationController,
    ) -> ErrorList {
        rc::validate_update(new)
    }

    /// Upstream `ControllerToSelectableFields`.
    fn selectable_fields(&self, object: &ReplicationController) -> Vec<(&'static str, String)> {
        let replicas = object.status.as_ref().map_or(0, |s| s.replicas);
        vec![("status.replicas", replicas.to_string())]
    }

    /// NAME DESIRED CURRENT READY AGE, and with `-o wide` CONTAINERS IMAGES SELECTOR.
    fn columns(&self) -> Vec<TableColumn> {
        vec![
            NAME,
            column(
                "Desired",
                "integer",
                "Replicas is the number of desired replicas. This is a pointer to distinguish \
                 between explicit zero and unspecified. Defaults to 1. More info: \
                 https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller#what-is-a-replicationcontroller",
                0,
            ),
            column(
                "Current",
                "integer",
                "Replicas is the most recently observed number of replicas. More info: \
                 https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller#what-is-a-replicationcontroller",
                0,
            ),
            column(
                "Ready",
                "integer",
                "The number of ready replicas for this replication controller.",
                0,
            ),
            AGE,
            CONTAINERS,
            IMAGES,
            wide(
                "Selector",
                "string",
                "Selector is a label query over pods that should match the Replicas count. If \
                 Selector is empty, it is defaulted to the labels present on the Pod template. \
                 Label keys and values that must match in order to be controlled by this \
                 replication controller, if empty defaulted to labels on Pod template. More \
                 info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
            ),
        ]
    }

    fn row(&self, object: &ReplicationController) -> Vec<Value> {
        let spec = object.spec.as_ref();
        let status = object.status.as_ref();
        let [containers, images] = containers_and_images(
            spec.and_then(|s| s.template.as_ref())
                .and_then(|t| t.spec.as_ref()),
        );
        vec![
            json!(name(&object.metadata)),
            json!(spec.and_then(|s| s.replicas).unwrap_or(0)),
            json!(status.map_or(0, |s| s.replicas)),
            json!(status.and_then(|s| s.ready_replicas).unwrap_or(0)),
            age(&object.metadata),
            containers,
            images,
            json!(format_labels(spec.and_then(|s| s.selector.as_ref()))),
        ]
    }
}

/// Pod templates: namespaced, no subresources.
pub struct PodTemplates;

impl Strategy for PodTemplates {
    type Object = PodTemplate;

    fn default(&self, object: &mut PodTemplate) {
        rc::default_pod_template(object);
    }

    fn warnings_on_create(&self, object: &PodTemplate) -> Vec<String> {
        warnings::pod_template_warnings(object, None)
    }

    fn warnings_on_update(&self, new: &PodTemplate, old: &PodTemplate) -> Vec<String> {
        warnings::pod_template_warnings(new, Some(old))
    }

    fn validate(&self, object: &PodTemplate) -> ErrorList {
        rc::validate_pod_template(object)
    }

    /// NAME CONTAINERS IMAGES POD LABELS.
    fn columns(&self) -> Vec<TableColumn> {
        vec![
            NAME,
            column(
                "Containers",
                "string",
                "Names of each container in the template.",
                0,
            ),
            column(
                "Images",
                "string",
                "Images referenced by each container in the template.",
                0,
            ),
            column(
                "Pod Labels",
                "string",
                "The labels for the pod template.",
                0,
            ),
        ]
    }

    fn row(&self, object: &PodTemplate) -> Vec<Value> {
        let template = object.template.as_ref();
        let [containers, images] = containers_and_images(template.and_then(|t| t.spec.as_ref()));
        vec![
            json!(name(&object.metadata)),
            containers,
            images,
            json!(format_labels(
                template
                    .and_then(|t| t.metadata.as_ref())
                    .and_then(|m| m.labels.as_ref())
            )),
        ]
    }
}
