//! PLACEHOLDERS for checks that other helpers are moving into skiff-api in this same
//! session (pod defaulting and validation from the kubelet: core helper; name rules and
//! label selectors: machinery helper). The API group modules call them through this one
//! module so that switching to the real ones is a change here only; each is removed when
//! its owner's version lands on main.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

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

/// PLACEHOLDER for the machinery helper's `metav1validation.ValidateLabelSelector`.
/// Checks only the operators.
pub fn validate_label_selector(selector: &LabelSelector, path: &Path) -> ErrorList {
    let mut errors = Vec::new();
    for (i, requirement) in selector.match_expressions.iter().flatten().enumerate() {
        let at = path.child("matchExpressions").index(i);
        let values = requirement.values.as_deref().unwrap_or_default();
        match requirement.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => errors.push(crate::field::FieldError::required(
                &at.child("values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if !values.is_empty() => {
                errors.push(crate::field::FieldError::forbidden(
                    &at.child("values"),
                    "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                ))
            }
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => errors.push(crate::field::FieldError::invalid(
                &at.child("operator"),
                other,
                "not a valid selector operator",
            )),
        }
    }
    errors
}

/// PLACEHOLDER for the machinery helper's `LabelSelector::from_meta(..).matches(..)`:
/// whether `labels` satisfy `selector` (an empty selector matches everything).
pub fn selector_matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let by_labels = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let by_expressions = selector.match_expressions.iter().flatten().all(|r| {
        let values = r.values.as_deref().unwrap_or_default();
        let value = labels.get(&r.key);
        match r.operator.as_str() {
            "In" => value.is_some_and(|v| values.contains(v)),
            "NotIn" => value.is_none_or(|v| !values.contains(v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            _ => false,
        }
    });
    by_labels && by_expressions
}

/// PLACEHOLDER for the machinery helper's `IsDNS1123Label`: upstream's messages.
pub fn is_dns1123_label(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > 63 {
        errors.push("must be no more than 63 characters".to_owned());
    }
    let ok = !value.is_empty()
        && value
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !value.starts_with('-')
        && !value.ends_with('-');
    if !ok {
        errors.push(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or \
             '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or \
             '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
                .to_owned(),
        );
    }
    errors
}

/// PLACEHOLDER for the machinery helper's `IsDNS1123Subdomain`: upstream's messages.
pub fn is_dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > 253 {
        errors.push("must be no more than 253 characters".to_owned());
    }
    let ok = !value.is_empty()
        && value.split('.').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        });
    if !ok {
        errors.push(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, \
             '-' or '.', and must start and end with an alphanumeric character (e.g. \
             'example.com', regex used for validation is \
             '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
                .to_owned(),
        );
    }
    errors
}

/// PLACEHOLDER for the machinery helper's `IsQualifiedName` (`prefix/name`).
pub fn is_qualified_name(value: &str) -> Vec<String> {
    let (prefix, name) = match value.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, value),
    };
    let mut errors = Vec::new();
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            errors.push("prefix part must be non-empty".to_owned());
        } else {
            errors.extend(
                is_dns1123_subdomain(prefix)
                    .into_iter()
                    .map(|e| format!("prefix part {e}")),
            );
        }
    }
    if name.is_empty() {
        errors.push("name part must be non-empty".to_owned());
    } else if name.len() > 63 {
        errors.push("name part must be no more than 63 characters".to_owned());
    }
    let bytes = name.as_bytes();
    let alnum = |b: &u8| b.is_ascii_alphanumeric();
    if !name.is_empty()
        && !(bytes.first().is_some_and(alnum)
            && bytes.last().is_some_and(alnum)
            && bytes
                .iter()
                .all(|b| alnum(b) || matches!(b, b'-' | b'_' | b'.')))
    {
        errors.push(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start \
             and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or \
             '123-abc', regex used for validation is \
             '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
                .to_owned(),
        );
    }
    errors
}
