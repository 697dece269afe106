//! ControllerRevisions: `ValidateControllerRevision`, `ValidateControllerRevisionUpdate`.

use k8s_openapi::api::apps::v1::ControllerRevision;

use crate::field::{ErrorList, FieldError, Path};
use crate::validation::{immutable, nonnegative};

/// `data is mandatory`; revision ≥ 0.
pub fn validate(revision: &ControllerRevision) -> ErrorList {
    let mut errors = Vec::new();
    if revision.data.0.is_null() {
        errors.push(FieldError::required(
            &Path::new("data"),
            "data is mandatory",
        ));
    }
    errors.extend(nonnegative(
        revision.revision.unwrap_or(0),
        &Path::new("revision"),
    ));
    errors
}

/// [`validate`] and immutable data.
pub fn validate_update(new: &ControllerRevision, old: &ControllerRevision) -> ErrorList {
    let mut errors = validate(new);
    errors.extend(immutable(&new.data, &old.data, &Path::new("data")));
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::runtime::RawExtension;

    #[test]
    fn data_is_required_and_immutable() {
        let empty = ControllerRevision::default();
        assert_eq!(
            validate(&empty)[0].to_string(),
            "data: Required value: data is mandatory"
        );
        let old = ControllerRevision {
            data: RawExtension(serde_json::json!({"spec": 1})),
            revision: Some(1),
            ..Default::default()
        };
        let mut new = old.clone();
        assert!(validate_update(&new, &old).is_empty());
        new.data = RawExtension(serde_json::json!({"spec": 2}));
        assert_eq!(
            validate_update(&new, &old)[0].to_string(),
            r#"data: Invalid value: {"spec":2}: field is immutable"#
        );
    }
}
