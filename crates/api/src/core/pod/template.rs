//! Pod templates of workloads (upstream `ValidatePodTemplateSpec`): the template's pod spec
//! is validated as a pod's.

use k8s_openapi::api::core::v1::PodTemplateSpec;

use super::validation::validate_pod_spec;
use crate::field::{ErrorList, FieldError, Path};

/// Validates `template` at `path` (`spec.template`).
pub fn validate_pod_template_spec(template: &PodTemplateSpec, path: &Path) -> ErrorList {
    match &template.spec {
        Some(spec) => validate_pod_spec(spec, &path.child("spec")),
        None => vec![FieldError::required(&path.child("spec"), "")],
    }
}
