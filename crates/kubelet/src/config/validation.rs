//! Validation of static pods: the API server's pod validation
//! (`skiff_api::core::pod::validate_pod`, upstream `ValidatePodCreate`) plus the name and
//! namespace checks the API server's metadata rules would make.

use k8s_openapi::api::core::v1::Pod;
use skiff_api::core::{validate_dns1123_label, validate_dns1123_subdomain};
use skiff_api::field::Path;

/// Checks a defaulted pod; the error lists every problem as upstream prints a field error
/// (`spec.containers[0].image: Required value`), joined by `; `.
pub fn validate_pod(pod: &Pod) -> Result<(), String> {
    let mut errors = Vec::new();
    let meta = Path::new("metadata");
    let name = pod.metadata.name.as_deref().unwrap_or("");
    validate_dns1123_subdomain(&mut errors, &meta.child("name"), name);
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
    validate_dns1123_label(&mut errors, &meta.child("namespace"), namespace);
    errors.extend(skiff_api::core::pod::validate_pod(pod));
    if errors.is_empty() {
        Ok(())
    } else {
        let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
        Err(messages.join("; "))
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
        let errors = validate_pod(&pod).unwrap_err();
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
