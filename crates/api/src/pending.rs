//! PLACEHOLDERS for the pod defaulting and validation that the core helper is moving from
//! the kubelet into skiff-api in this same session. The API group modules call them
//! through this one module so that switching to the real ones is a change here only; it
//! is removed when the core helper's version lands on main.

use k8s_openapi::api::core::v1::{PodSpec, PodTemplateSpec};

use crate::field::{ErrorList, Path};

/// PLACEHOLDER for the core helper's `SetDefaults_PodSpec` (pod templates get the pod
/// spec's defaults: restartPolicy, dnsPolicy, schedulerName, ...). Sets only what the
/// workload validations depend on.
pub fn default_pod_spec(spec: &mut PodSpec) {
    spec.restart_policy
        .get_or_insert_with(|| "Always".to_owned());
}

/// PLACEHOLDER for the core helper's `ValidatePodTemplateSpec`. Checks nothing yet.
pub fn validate_pod_template_spec(_template: &PodTemplateSpec, _path: &Path) -> ErrorList {
    Vec::new()
}
