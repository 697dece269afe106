//! Field checks shared by the kinds' validations, as upstream's
//! `pkg/apis/core/validation` helpers (`ValidateNonnegativeField`, `ValidateImmutableField`)
//! and `pkg/apis/apps/validation`'s int-or-percent checks, with upstream's messages.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Serialize;
use serde_json::Value;

use crate::field::{ErrorList, FieldError, Path};
use crate::pending;

/// `must be greater than or equal to 0` for a negative `value`.
pub fn nonnegative(value: i64, path: &Path) -> ErrorList {
    if value < 0 {
        vec![FieldError::invalid(
            path,
            value,
            "must be greater than or equal to 0",
        )]
    } else {
        Vec::new()
    }
}

/// [`nonnegative`] for an optional field (absent is fine).
pub fn nonnegative_opt(value: Option<impl Into<i64>>, path: &Path) -> ErrorList {
    value.map_or_else(Vec::new, |v| nonnegative(v.into(), path))
}

/// The JSON form of a value for an error message (`null` when it cannot be encoded).
pub fn json<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// `field is immutable` when `new` differs from `old`.
pub fn immutable<T: Serialize + PartialEq>(new: &T, old: &T, path: &Path) -> ErrorList {
    if new == old {
        Vec::new()
    } else {
        vec![FieldError::invalid(path, json(new), "field is immutable")]
    }
}

/// `must be greater than 0` for a zero or negative `value` (`ValidatePositiveField`).
pub fn positive(value: i64, path: &Path) -> ErrorList {
    if value <= 0 {
        vec![FieldError::invalid(path, value, "must be greater than 0")]
    } else {
        Vec::new()
    }
}

/// An int-or-string's JSON form, as upstream prints it in messages.
fn int_or_string_value(value: &IntOrString) -> Value {
    match value {
        IntOrString::Int(i) => Value::from(*i),
        IntOrString::String(s) => Value::from(s.as_str()),
    }
}

/// The number of a percent string `25%` (`IsValidPercent`: digits then `%`).
pub fn percent(value: &str) -> Option<i64> {
    let digits = value.strip_suffix('%')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Digits only: the parse fails only on overflow, which counts as "very large".
    Some(digits.parse().unwrap_or(i64::MAX))
}

/// `ValidatePositiveIntOrPercent`: a non-negative integer or a percent string.
pub fn int_or_percent(value: &IntOrString, path: &Path) -> ErrorList {
    match value {
        IntOrString::Int(i) => nonnegative((*i).into(), path),
        IntOrString::String(s) if percent(s).is_none() => vec![FieldError::invalid(
            path,
            s.as_str(),
            "a valid percent string must be a numeric string followed by an ending '%' (e.g. \
             '1%',  or '93%', regex used for validation is '[0-9]+%')",
        )],
        IntOrString::String(_) => Vec::new(),
    }
}

/// The value an int-or-percent stands for in "is it zero" checks (`getIntOrPercentValue`):
/// the percent's number, the integer, or 0 for a string that is no percent.
pub fn int_or_percent_value(value: &IntOrString) -> i64 {
    match value {
        IntOrString::Int(i) => (*i).into(),
        IntOrString::String(s) => percent(s).unwrap_or(0),
    }
}

/// `IsNotMoreThan100Percent`.
pub fn not_more_than_100_percent(value: &IntOrString, path: &Path) -> ErrorList {
    match value {
        IntOrString::String(s) if percent(s).is_some_and(|p| p > 100) => vec![FieldError::invalid(
            path,
            int_or_string_value(value),
            "must not be greater than 100%",
        )],
        _ => Vec::new(),
    }
}

/// A workload's selector (upstream `ValidateDeploymentSpec` and kin): required, valid,
/// not empty (`empty selector is invalid for <kind>`), and matching the pod template's
/// labels (`` `selector` does not match template `labels` `` at
/// `<template>.metadata.labels`). An absent selector reads as empty (k8s-openapi decodes a
/// missing required selector so) and is reported `Required` when `required` (every
/// workload but daemonsets, whose upstream check has no such case).
pub fn workload_selector(
    selector: &LabelSelector,
    required: bool,
    template_labels: Option<&BTreeMap<String, String>>,
    kind: &str,
    selector_path: &Path,
    template_path: &Path,
) -> ErrorList {
    let mut errors = Vec::new();
    let empty = selector.match_labels.as_ref().is_none_or(|m| m.is_empty())
        && selector
            .match_expressions
            .as_ref()
            .is_none_or(|e| e.is_empty());
    if *selector == LabelSelector::default() {
        if required {
            errors.push(FieldError::required(selector_path, ""));
        }
    } else {
        errors.extend(pending::validate_label_selector(selector, selector_path));
        if empty {
            errors.push(FieldError::invalid(
                selector_path,
                json(selector),
                format!("empty selector is invalid for {kind}"),
            ));
        }
    }
    let labels = template_labels.cloned().unwrap_or_default();
    // Upstream converts an absent selector to "nothing", which matches no labels.
    if empty || !pending::selector_matches(selector, &labels) {
        errors.push(FieldError::invalid(
            &template_path.child("metadata").child("labels"),
            json(&labels),
            "`selector` does not match template `labels`",
        ));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_or_percent_messages_match_upstream() {
        let path = Path::new("maxSurge");
        assert!(int_or_percent(&IntOrString::String("25%".into()), &path).is_empty());
        assert_eq!(
            int_or_percent(&IntOrString::Int(-1), &path)[0].to_string(),
            "maxSurge: Invalid value: -1: must be greater than or equal to 0"
        );
        assert!(
            int_or_percent(&IntOrString::String("25".into()), &path)[0]
                .to_string()
                .starts_with("maxSurge: Invalid value: \"25\": a valid percent string")
        );
        assert_eq!(
            not_more_than_100_percent(&IntOrString::String("101%".into()), &path)[0].to_string(),
            "maxSurge: Invalid value: \"101%\": must not be greater than 100%"
        );
        assert_eq!(int_or_percent_value(&IntOrString::String("0%".into())), 0);
    }

    #[test]
    fn immutable_reports_the_new_value() {
        let path = Path::new("spec").child("selector");
        assert!(immutable(&1, &1, &path).is_empty());
        assert_eq!(
            immutable(&"b", &"a", &path)[0].to_string(),
            "spec.selector: Invalid value: \"b\": field is immutable"
        );
    }

    #[test]
    fn workload_selector_must_match_the_template() {
        let spec = Path::new("spec");
        let selector = LabelSelector {
            match_labels: Some([("app".to_owned(), "web".to_owned())].into()),
            ..Default::default()
        };
        let good: BTreeMap<_, _> = [("app".to_owned(), "web".to_owned())].into();
        let bad: BTreeMap<_, _> = [("app".to_owned(), "db".to_owned())].into();
        let template = spec.child("template");
        let selector_path = spec.child("selector");
        assert!(
            workload_selector(
                &selector,
                true,
                Some(&good),
                "deployment",
                &selector_path,
                &template
            )
            .is_empty()
        );
        let errors = workload_selector(
            &selector,
            true,
            Some(&bad),
            "deployment",
            &selector_path,
            &template,
        );
        assert_eq!(
            errors[0].to_string(),
            "spec.template.metadata.labels: Invalid value: {\"app\":\"db\"}: `selector` does not \
             match template `labels`"
        );
        let missing = workload_selector(
            &LabelSelector::default(),
            true,
            Some(&good),
            "deployment",
            &selector_path,
            &template,
        );
        let messages: Vec<String> = missing.iter().map(ToString::to_string).collect();
        assert_eq!(messages.len(), 2);
        assert_eq!(messages[0], "spec.selector: Required value");
    }
}
