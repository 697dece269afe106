//! ReplicationControllers and PodTemplates: `SetDefaults_ReplicationController`,
//! `ValidateReplicationController` (with `ValidatePodTemplateSpecForRC`),
//! `ValidateReplicationControllerStatus` and `ValidatePodTemplate` (upstream
//! `pkg/apis/core/v1/defaults.go`, `pkg/apis/core/validation/validation.go`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    PodTemplate, PodTemplateSpec, ReplicationController, ReplicationControllerStatus,
};

use super::pod::{default_pod_spec, validate_pod_template_spec};
use crate::field::{ErrorList, FieldError, Path};
use crate::validation::{json, nonnegative, nonnegative_opt};

/// `SetDefaults_ReplicationController`: an empty selector and empty labels take the pod
/// template's labels; replicas default to 1; the template's pod spec gets pod defaults.
pub fn default(controller: &mut ReplicationController) {
    let spec = controller.spec.get_or_insert_with(Default::default);
    let template_labels = spec
        .template
        .as_ref()
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.clone());
    if let Some(labels) = template_labels {
        if spec.selector.as_ref().is_none_or(BTreeMap::is_empty) {
            spec.selector = Some(labels.clone());
        }
        if controller
            .metadata
            .labels
            .as_ref()
            .is_none_or(BTreeMap::is_empty)
        {
            controller.metadata.labels = Some(labels);
        }
    }
    spec.replicas.get_or_insert(1);
    if let Some(template) = spec.template.as_mut() {
        default_template(template);
    }
}

/// Pod defaults for a template's pod spec.
fn default_template(template: &mut PodTemplateSpec) {
    if let Some(pod_spec) = template.spec.as_mut() {
        default_pod_spec(pod_spec);
    }
}

/// `ValidateReplicationControllerSpec` (metadata excepted): minReadySeconds and replicas
/// not negative, a non-empty selector, and the template (`ValidatePodTemplateSpecForRC`).
pub fn validate(controller: &ReplicationController) -> ErrorList {
    let path = Path::new("spec");
    let spec = controller.spec.clone().unwrap_or_default();
    let mut errors = nonnegative_opt(spec.min_ready_seconds, &path.child("minReadySeconds"));
    let selector = spec.selector.unwrap_or_default();
    if selector.is_empty() {
        errors.push(FieldError::required(&path.child("selector"), ""));
    }
    errors.extend(nonnegative(
        spec.replicas.unwrap_or(0).into(),
        &path.child("replicas"),
    ));
    let template_path = path.child("template");
    let Some(template) = spec.template else {
        errors.push(FieldError::required(&template_path, ""));
        return errors;
    };
    let labels = template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let selected = selector
        .iter()
        .all(|(key, value)| labels.get(key) == Some(value));
    if !selector.is_empty() && !selected {
        errors.push(FieldError::invalid(
            &template_path.child("metadata").child("labels"),
            json(&labels),
            "`selector` does not match template `labels`",
        ));
    }
    errors.extend(validate_pod_template_spec(&template, &template_path));
    let pod_spec = template.spec.as_ref();
    let pod_path = template_path.child("spec");
    let restart_policy = pod_spec
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("");
    if restart_policy != "Always" {
        errors.push(FieldError::not_supported(
            &pod_path.child("restartPolicy"),
            restart_policy,
            &["Always"],
        ));
    }
    if pod_spec.is_some_and(|s| s.active_deadline_seconds.is_some()) {
        errors.push(FieldError::forbidden(
            &pod_path.child("activeDeadlineSeconds"),
            "activeDeadlineSeconds in ReplicationController is not Supported",
        ));
    }
    errors
}

/// `ValidateReplicationControllerUpdate` (core/v1 lets the selector change) plus the
/// status checks, which the `/status` subresource also runs.
pub fn validate_update(new: &ReplicationController) -> ErrorList {
    let mut errors = validate(new);
    errors.extend(validate_status(new.status.as_ref()));
    errors
}

/// `ValidateReplicationControllerStatus`: counts not negative, none above `replicas`, and
/// no more available than ready replicas.
pub fn validate_status(status: Option<&ReplicationControllerStatus>) -> ErrorList {
    let Some(status) = status else {
        return Vec::new();
    };
    let path = Path::new("status");
    let count = |v: Option<i32>| v.unwrap_or(0);
    let mut errors = nonnegative(status.replicas.into(), &path.child("replicas"));
    let counts = [
        ("fullyLabeledReplicas", count(status.fully_labeled_replicas)),
        ("readyReplicas", count(status.ready_replicas)),
        ("availableReplicas", count(status.available_replicas)),
    ];
    for (name, value) in counts {
        errors.extend(nonnegative(value.into(), &path.child(name)));
    }
    errors.extend(nonnegative(
        status.observed_generation.unwrap_or(0),
        &path.child("observedGeneration"),
    ));
    for (name, value) in counts {
        if value > status.replicas {
            errors.push(FieldError::invalid(
                &path.child(name),
                value,
                "cannot be greater than status.replicas",
            ));
        }
    }
    let (ready, available) = (counts[1].1, counts[2].1);
    if available > ready {
        errors.push(FieldError::invalid(
            &path.child("availableReplicas"),
            available,
            "cannot be greater than readyReplicas",
        ));
    }
    errors
}

/// Pod defaults for a PodTemplate's pod spec.
pub fn default_pod_template(template: &mut PodTemplate) {
    if let Some(spec) = template.template.as_mut() {
        default_template(spec);
    }
}

/// `ValidatePodTemplate` (metadata excepted): the template at `template`, as a workload's.
pub fn validate_pod_template(template: &PodTemplate) -> ErrorList {
    validate_pod_template_spec(
        &template.template.clone().unwrap_or_default(),
        &Path::new("template"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(errors: &ErrorList) -> Vec<String> {
        errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn selector_and_labels_default_from_the_template() {
        let mut rc: ReplicationController = serde_json::from_value(json!({
            "metadata": {"name": "web"},
            "spec": {"template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            }},
        }))
        .unwrap();
        default(&mut rc);
        let spec = rc.spec.as_ref().unwrap();
        assert_eq!(spec.replicas, Some(1));
        assert_eq!(spec.selector.as_ref().unwrap()["app"], "web");
        assert_eq!(rc.metadata.labels.as_ref().unwrap()["app"], "web");
        let pod = spec.template.as_ref().unwrap().spec.as_ref().unwrap();
        assert_eq!(pod.restart_policy.as_deref(), Some("Always"));
        assert!(validate(&rc).is_empty(), "{:?}", messages(&validate(&rc)));
    }

    #[test]
    fn mismatched_selector_and_negative_replicas() {
        let mut rc: ReplicationController = serde_json::from_value(json!({
            "spec": {
                "replicas": -1,
                "selector": {"app": "db"},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "c", "image": "nginx"}]},
                },
            },
        }))
        .unwrap();
        default(&mut rc);
        assert_eq!(
            messages(&validate(&rc)),
            [
                "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
                r#"spec.template.metadata.labels: Invalid value: {"app":"web"}: `selector` does not match template `labels`"#,
            ]
        );
        let missing: ReplicationController = serde_json::from_value(json!({"spec": {}})).unwrap();
        assert_eq!(
            messages(&validate(&missing)),
            [
                "spec.selector: Required value",
                "spec.template: Required value"
            ]
        );
    }

    #[test]
    fn status_counts_are_bounded() {
        let status: ReplicationControllerStatus = serde_json::from_value(
            json!({"replicas": 1, "readyReplicas": 2, "availableReplicas": 3}),
        )
        .unwrap();
        assert_eq!(
            messages(&validate_status(Some(&status))),
            [
                "status.readyReplicas: Invalid value: 2: cannot be greater than status.replicas",
                "status.availableReplicas: Invalid value: 3: cannot be greater than status.replicas",
                "status.availableReplicas: Invalid value: 3: cannot be greater than readyReplicas",
            ]
        );
    }

    #[test]
    fn pod_templates_validate_their_template() {
        let mut template: PodTemplate = serde_json::from_value(json!({
            "metadata": {"name": "t"},
            "template": {"spec": {"containers": []}},
        }))
        .unwrap();
        default_pod_template(&mut template);
        assert_eq!(
            messages(&validate_pod_template(&template)),
            ["template.spec.containers: Required value"]
        );
    }
}
