//! Field checks shared by the kinds' validations, as upstream's
//! `pkg/apis/core/validation` helpers (`ValidateNonnegativeField`, `ValidateImmutableField`)
//! and `pkg/apis/apps/validation`'s int-or-percent checks, with upstream's messages.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Serialize;
use serde_json::Value;

use crate::field::{ErrorList, FieldError, Path};
use crate::selector::LabelSelector as Selector;
use crate::{meta, names};

/// `must be greater than or equal to 0` for a negative `value` (machinery's
/// `validate_nonnegative_field`).
pub use crate::meta::validate_nonnegative_field as nonnegative;

/// [`nonnegative`] for an optional field (absent is fine).
pub fn nonnegative_opt(value: Option<impl Into<i64>>, path: &Path) -> ErrorList {
    value.map_or_else(Vec::new, |v| nonnegative(v.into(), path))
}

/// The JSON form of a value for an error message (`null` when it cannot be encoded).
pub fn json<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// `field is immutable` when `new` differs from `old`, for any serializable field.
pub fn immutable<T: Serialize + PartialEq>(new: &T, old: &T, path: &Path) -> ErrorList {
    if new == old {
        return Vec::new();
    }
    meta::validate_immutable_field(json(new), &json(old), path)
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

/// The number of a percent string `25%` (`getPercentValue`), `None` for anything else.
pub fn percent(value: &str) -> Option<i64> {
    if !names::is_valid_percent(value).is_empty() {
        return None;
    }
    // Digits only: the parse fails only on overflow, which counts as "very large".
    Some(value.trim_end_matches('%').parse().unwrap_or(i64::MAX))
}

/// `ValidatePositiveIntOrPercent`: a non-negative integer or a percent string.
pub fn int_or_percent(value: &IntOrString, path: &Path) -> ErrorList {
    match value {
        IntOrString::Int(i) => nonnegative((*i).into(), path),
        IntOrString::String(s) => names::is_valid_percent(s)
            .into_iter()
            .map(|message| FieldError::invalid(path, s.as_str(), message))
            .collect(),
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

/// The integer an int-or-percent stands for out of `total` (upstream
/// `intstr.GetScaledValueFromIntOrPercent`): the integer itself, or the percent of
/// `total` rounded up or down. Errors: a string that is no percent, as upstream's
/// `invalid value for IntOrString`.
pub fn scaled_value(value: &IntOrString, total: i32, round_up: bool) -> Result<i32, String> {
    match value {
        IntOrString::Int(i) => Ok(*i),
        IntOrString::String(s) => {
            let p = percent(s)
                .filter(|_| s.ends_with('%'))
                .ok_or_else(|| format!("invalid value for IntOrString: invalid value {s:?}"))?;
            let scaled = i128::from(p) * i128::from(total);
            let v = if round_up {
                (scaled + 99).div_euclid(100)
            } else {
                scaled.div_euclid(100)
            };
            Ok(i32::try_from(v).unwrap_or(i32::MAX))
        }
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
        errors.extend(meta::validate_label_selector(selector, selector_path));
        if empty {
            errors.push(FieldError::invalid(
                selector_path,
                json(selector),
                format!("empty selector is invalid for {kind}"),
            ));
        }
    }
    let labels = template_labels.cloned().unwrap_or_default();
    match Selector::from_meta(selector) {
        Err(_) => errors.push(FieldError::invalid(
            selector_path,
            json(selector),
            "invalid label selector",
        )),
        // Upstream converts an absent selector to "nothing", which matches no labels.
        Ok(parsed) if empty || !parsed.matches(&labels) => errors.push(FieldError::invalid(
            &template_path.child("metadata").child("labels"),
            json(&labels),
            "`selector` does not match template `labels`",
        )),
        Ok(_) => {}
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaled_values_round_as_asked() {
        let pct = |s: &str| IntOrString::String(s.to_owned());
        assert_eq!(scaled_value(&IntOrString::Int(3), 10, true), Ok(3));
        assert_eq!(scaled_value(&pct("25%"), 10, true), Ok(3));
        assert_eq!(scaled_value(&pct("25%"), 10, false), Ok(2));
        assert_eq!(scaled_value(&pct("0%"), 10, true), Ok(0));
        assert_eq!(scaled_value(&pct("100%"), 7, false), Ok(7));
        assert!(scaled_value(&pct("abc"), 10, true).is_err());
    }

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
