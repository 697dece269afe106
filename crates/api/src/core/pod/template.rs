//! Pod templates of workloads (upstream `ValidatePodTemplateSpec`): the template's labels
//! and annotations (at `<path>.labels` and `<path>.annotations`, as upstream names them),
//! its pod spec as a pod's, and no ephemeral containers.

use k8s_openapi::api::core::v1::PodTemplateSpec;

use super::validation::validate_pod_spec;
use crate::field::{ErrorList, FieldError, Path};
use crate::meta::{validate_annotations, validate_labels};

/// Validates `template` at `path` (`spec.template`).
pub fn validate_pod_template_spec(template: &PodTemplateSpec, path: &Path) -> ErrorList {
    let mut errors = Vec::new();
    if let Some(metadata) = &template.metadata {
        if let Some(labels) = &metadata.labels {
            errors.extend(validate_labels(labels, &path.child("labels")));
        }
        if let Some(annotations) = &metadata.annotations {
            errors.extend(validate_annotations(
                annotations,
                &path.child("annotations"),
            ));
        }
    }
    let spec_path = path.child("spec");
    match &template.spec {
        Some(spec) => {
            errors.extend(validate_pod_spec(spec, &spec_path));
            if spec
                .ephemeral_containers
                .as_ref()
                .is_some_and(|c| !c.is_empty())
            {
                errors.push(FieldError::forbidden(
                    &spec_path.child("ephemeralContainers"),
                    "ephemeral containers not allowed in pod template",
                ));
            }
        }
        None => errors.push(FieldError::required(&spec_path, "")),
    }
    errors
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn messages(template: serde_json::Value) -> Vec<String> {
        let mut template: PodTemplateSpec = serde_json::from_value(template).unwrap();
        if let Some(spec) = template.spec.as_mut() {
            super::super::default_pod_spec(spec);
        }
        let path = Path::new("spec").child("template");
        let errors = validate_pod_template_spec(&template, &path);
        errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn template_metadata_is_validated_as_upstream() {
        let containers = json!([{"name": "c", "image": "i"}]);
        let ok = messages(json!({
            "metadata": {"labels": {"app": "web"}, "annotations": {"example.com/a": "b"}},
            "spec": {"containers": containers},
        }));
        assert_eq!(ok, Vec::<String>::new());
        let bad = messages(json!({
            "metadata": {"labels": {"app": "-bad-"}, "annotations": {"a b": "c"}},
            "spec": {"containers": containers,
                     "ephemeralContainers": [{"name": "debug", "image": "busybox"}]},
        }));
        assert_eq!(bad.len(), 3, "{bad:#?}");
        assert!(
            bad[0].starts_with(
                "spec.template.labels: Invalid value: \"-bad-\": a valid label must be"
            ),
            "{bad:#?}"
        );
        assert!(
            bad[1].starts_with(
                "spec.template.annotations: Invalid value: \"a b\": name part must consist of"
            ),
            "{bad:#?}"
        );
        assert_eq!(
            bad[2],
            "spec.template.spec.ephemeralContainers: Forbidden: ephemeral containers not allowed in pod template"
        );
    }
}
