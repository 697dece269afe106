//! node.k8s.io/v1 runtimeclasses: `ValidateRuntimeClass` and `ValidateRuntimeClassUpdate`
//! (`pkg/apis/node/validation`).

use k8s_openapi::api::node::v1::RuntimeClass;

use crate::field::{ErrorList, FieldError, Path};
use crate::names;
use crate::validation::immutable;

/// The handler is a DNS label (the CRI runtime handler name).
pub fn validate(runtime_class: &RuntimeClass) -> ErrorList {
    let handler = &runtime_class.handler;
    names::is_dns1123_label(handler)
        .into_iter()
        .map(|message| FieldError::invalid(&Path::new("handler"), handler.as_str(), message))
        .collect()
}

/// [`validate`] and an immutable handler.
pub fn validate_update(new: &RuntimeClass, old: &RuntimeClass) -> ErrorList {
    let mut errors = validate(new);
    errors.extend(immutable(&new.handler, &old.handler, &Path::new("handler")));
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handler_is_a_dns_label_and_immutable() {
        let old = RuntimeClass {
            handler: "runc".into(),
            ..Default::default()
        };
        assert!(validate(&old).is_empty());
        let bad = RuntimeClass {
            handler: "Run_C".into(),
            ..Default::default()
        };
        assert!(validate(&bad)[0].to_string().starts_with(
            r#"handler: Invalid value: "Run_C": a lowercase RFC 1123 label must consist of"#
        ));
        let new = RuntimeClass {
            handler: "crun".into(),
            ..Default::default()
        };
        assert_eq!(
            validate_update(&new, &old)[0].to_string(),
            r#"handler: Invalid value: "crun": field is immutable"#
        );
    }
}
