//! Small checks every kind's validation shares, with upstream's messages.

use serde_json::Value;

use crate::field::{ErrorList, FieldError, Path};
use crate::names;

/// One `Invalid value` error at `path` per problem in `problems` (the result of a
/// [`crate::names`] check of `value`).
pub fn invalid_each(
    errors: &mut ErrorList,
    path: &Path,
    value: impl Into<Value>,
    problems: Vec<String>,
) {
    let value = value.into();
    for problem in problems {
        errors.push(FieldError::invalid(path, value.clone(), problem));
    }
}

/// Upstream's enum checks: `Required value` when `value` is absent or empty and
/// `required`, `Unsupported value` when not one of `supported` (listed as given).
pub fn one_of(
    errors: &mut ErrorList,
    path: &Path,
    value: Option<&str>,
    supported: &[&str],
    required: bool,
) {
    match value {
        None | Some("") if required => errors.push(FieldError::required(path, "")),
        None => {}
        Some(v) if !supported.contains(&v) => {
            errors.push(FieldError::not_supported(path, v, supported));
        }
        Some(_) => {}
    }
}

/// Upstream `ValidateNonnegativeField`: `must be greater than or equal to 0`.
pub fn non_negative(errors: &mut ErrorList, path: &Path, value: Option<i64>) {
    if let Some(v) = value.filter(|v| *v < 0) {
        errors.push(FieldError::invalid(
            path,
            v,
            "must be greater than or equal to 0",
        ));
    }
}

/// A required DNS-1123 label (`Required value` when empty).
pub fn validate_dns1123_label(errors: &mut ErrorList, path: &Path, value: &str) {
    if value.is_empty() {
        errors.push(FieldError::required(path, ""));
    } else {
        invalid_each(errors, path, value, names::is_dns1123_label(value));
    }
}

/// A required DNS-1123 subdomain (`Required value` when empty).
pub fn validate_dns1123_subdomain(errors: &mut ErrorList, path: &Path, value: &str) {
    if value.is_empty() {
        errors.push(FieldError::required(path, ""));
    } else {
        invalid_each(errors, path, value, names::is_dns1123_subdomain(value));
    }
}
