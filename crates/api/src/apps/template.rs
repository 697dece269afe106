//! The pod template rules every replicated workload shares
//! (`ValidatePodTemplateSpecForReplicaSet` and kin).

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::core::pod;
use crate::field::{ErrorList, FieldError, Path};
use crate::validation;

/// Pod spec defaults for a workload's template.
pub(crate) fn default(template: &mut PodTemplateSpec) {
    pod::default_pod_spec(template.spec.get_or_insert_with(Default::default));
}

/// Selector (required or not, see [`validation::workload_selector`]) against the template's labels, the pod template itself, `restartPolicy: Always`
/// and no `activeDeadlineSeconds` (`<Kind> is not Supported`). `kind` is upstream's
/// lower-case name in messages (`deployment`), `title` its type name (`ReplicaSet`).
pub(crate) fn validate(
    selector: &LabelSelector,
    selector_required: bool,
    template: &PodTemplateSpec,
    kind: &str,
    title: &str,
    spec_path: &Path,
) -> ErrorList {
    let template_path = spec_path.child("template");
    let labels = template.metadata.as_ref().and_then(|m| m.labels.as_ref());
    let mut errors = validation::workload_selector(
        selector,
        selector_required,
        labels,
        kind,
        &spec_path.child("selector"),
        &template_path,
    );
    errors.extend(pod::validate_pod_template_spec(template, &template_path));
    let spec = template.spec.as_ref();
    let restart_policy = spec.and_then(|s| s.restart_policy.as_deref()).unwrap_or("");
    let pod_path = template_path.child("spec");
    if restart_policy != "Always" {
        errors.push(FieldError::not_supported(
            &pod_path.child("restartPolicy"),
            restart_policy,
            &["Always"],
        ));
    }
    if spec.is_some_and(|s| s.active_deadline_seconds.is_some()) {
        errors.push(FieldError::forbidden(
            &pod_path.child("activeDeadlineSeconds"),
            format!("activeDeadlineSeconds in {title} is not Supported"),
        ));
    }
    errors
}
