//! Validation of static pods: the API server's pod validation
//! (`skiff_api::core::pod::validate_pod`, upstream `ValidatePodCreate`) plus its metadata
//! rules (`ValidateObjectMeta`: name, namespace, label keys and values, annotations).

use crate::error::{Error, Result};
use k8s_openapi::api::core::v1::Pod;
use skiff_api::field::Path;
use skiff_api::meta::validate_object_meta;
use skiff_api::names::name_is_dns_subdomain;

/// Checks a defaulted pod; the error lists every problem as upstream prints a field error
/// (`spec.containers[0].image: Required value`), joined by `; `.
pub fn validate_pod(pod: &Pod) -> Result<()> {
    let mut errors = validate_object_meta(
        &pod.metadata,
        true,
        name_is_dns_subdomain,
        &Path::new("metadata"),
    );
    errors.extend(skiff_api::core::pod::validate_pod(pod));
    if errors.is_empty() {
        Ok(())
    } else {
        let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
        Err(Error::InvalidPod(messages.join("; ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_and_spec_problems_are_joined() {
        let mut pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "Bad_Name", "namespace": "default"},
            "spec": {"containers": [{"name": "c"}]}
        }))
        .unwrap_or_default();
        skiff_api::core::pod::default_pod(&mut pod);
        let errors = validate_pod(&pod).unwrap_err().to_string();
        assert!(
            errors.starts_with(
                r#"metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain"#
            ),
            "{errors}"
        );
        assert!(
            errors.ends_with("; spec.containers[0].image: Required value"),
            "{errors}"
        );
    }
}
