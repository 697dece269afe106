//! admissionregistration.k8s.io/v1 webhook configurations, validating admission policies
//! and their bindings: upstream's defaults (`pkg/apis/admissionregistration/v1/defaults.go`)
//! and the structural checks of `pkg/apis/admissionregistration/validation` (metadata
//! names are the REST layer's).
//!
//! CEL expressions (match conditions, validations, message expressions, variables, audit
//! annotations) are checked for presence and shape only: Skiff does not compile CEL, so an
//! expression upstream would reject as uncompilable is accepted here.
//!
//! - [`webhooks`]: validating and mutating webhook configurations;
//! - [`policies`]: validating admission policies and policy bindings.

pub mod policies;
pub mod webhooks;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::field::{ErrorList, ErrorType, FieldError, Path};
use crate::meta::validate_label_selector;
use crate::names::{is_qualified_name, validate_path_segment_name};
use crate::validation::json;

/// `failurePolicy` values, as upstream lists them (sorted).
pub const FAILURE_POLICIES: &[&str] = &["Fail", "Ignore"];
/// `matchPolicy` values.
pub const MATCH_POLICIES: &[&str] = &["Equivalent", "Exact"];
/// Rule `scope` values.
pub const SCOPES: &[&str] = &["*", "Cluster", "Namespaced"];
/// Rule `operations` values.
pub const OPERATIONS: &[&str] = &["*", "CONNECT", "CREATE", "DELETE", "UPDATE"];
/// The most match conditions a webhook or policy may have.
pub const MAX_MATCH_CONDITIONS: usize = 64;

/// The fields every rule shape shares (`admissionregistration.Rule` with its operations).
struct RuleView<'a> {
    operations: &'a [String],
    api_groups: &'a [String],
    api_versions: &'a [String],
    resources: &'a [String],
    scope: Option<&'a str>,
}

fn has_wildcard(values: &[String]) -> bool {
    values.iter().any(|v| v == "*")
}

/// A rule's resources (`validateResources`, subresources allowed): required, no empty
/// entries, and wildcards that do not overlap.
fn validate_resources(resources: &[String], path: &Path) -> ErrorList {
    let mut errs = Vec::new();
    if resources.is_empty() {
        errs.push(FieldError::required(path, ""));
    }
    let mut wildcard_subresources = Vec::new();
    let mut wildcard_resources = Vec::new();
    let mut double_wildcard = false;
    let mut single_wildcard = false;
    let mut without_subresource = false;
    for (i, item) in resources.iter().enumerate() {
        if item.is_empty() {
            errs.push(FieldError::required(&path.index(i), ""));
            continue;
        }
        double_wildcard |= item == "*/*";
        single_wildcard |= item == "*";
        let Some((resource, sub)) = item.split_once('/') else {
            // Upstream keeps only the last entry's answer here.
            without_subresource = item != "*";
            continue;
        };
        if wildcard_subresources.contains(&resource) {
            errs.push(FieldError::invalid(
                &path.index(i),
                item.as_str(),
                format!("if '{resource}/*' is present, must not specify {item}"),
            ));
        }
        if wildcard_resources.contains(&sub) {
            errs.push(FieldError::invalid(
                &path.index(i),
                item.as_str(),
                format!("if '*/{sub}' is present, must not specify {item}"),
            ));
        }
        if sub == "*" {
            wildcard_subresources.push(resource);
        }
        if resource == "*" {
            wildcard_resources.push(sub);
        }
    }
    if resources.len() > 1 && double_wildcard {
        errs.push(FieldError::invalid(
            path,
            json(&resources),
            "if '*/*' is present, must not specify other resources",
        ));
    }
    if single_wildcard && without_subresource {
        errs.push(FieldError::invalid(
            path,
            json(&resources),
            "if '*' is present, must not specify other resources without subresources",
        ));
    }
    errs
}

/// `validateRuleWithOperations`: operations, API groups and versions, resources, scope.
fn validate_rule(rule: &RuleView<'_>, path: &Path) -> ErrorList {
    let mut errs = Vec::new();
    let operations = path.child("operations");
    if rule.operations.is_empty() {
        errs.push(FieldError::required(&operations, ""));
    }
    if rule.operations.len() > 1 && has_wildcard(rule.operations) {
        errs.push(FieldError::invalid(
            &operations,
            json(&rule.operations),
            "if '*' is present, must not specify other operations",
        ));
    }
    for (i, operation) in rule.operations.iter().enumerate() {
        if !OPERATIONS.contains(&operation.as_str()) {
            errs.push(FieldError::not_supported(
                &operations.index(i),
                operation.as_str(),
                OPERATIONS,
            ));
        }
    }
    let groups = path.child("apiGroups");
    if rule.api_groups.is_empty() {
        errs.push(FieldError::required(&groups, ""));
    }
    if rule.api_groups.len() > 1 && has_wildcard(rule.api_groups) {
        errs.push(FieldError::invalid(
            &groups,
            json(&rule.api_groups),
            "if '*' is present, must not specify other API groups",
        ));
    }
    let versions = path.child("apiVersions");
    if rule.api_versions.is_empty() {
        errs.push(FieldError::required(&versions, ""));
    }
    if rule.api_versions.len() > 1 && has_wildcard(rule.api_versions) {
        errs.push(FieldError::invalid(
            &versions,
            json(&rule.api_versions),
            "if '*' is present, must not specify other API versions",
        ));
    }
    for (i, version) in rule.api_versions.iter().enumerate() {
        if version.is_empty() {
            errs.push(FieldError::required(&versions.index(i), ""));
        }
    }
    errs.extend(validate_resources(rule.resources, &path.child("resources")));
    if let Some(scope) = rule.scope
        && !SCOPES.contains(&scope)
    {
        errs.push(FieldError::not_supported(
            &path.child("scope"),
            scope,
            SCOPES,
        ));
    }
    errs
}

/// An optional enum value: `Unsupported value` when set to something else.
fn validate_enum(value: Option<&str>, supported: &[&str], path: &Path) -> ErrorList {
    match value {
        Some(v) if !supported.contains(&v) => vec![FieldError::not_supported(path, v, supported)],
        _ => Vec::new(),
    }
}

/// A required enum value: `Required value` when unset, `Unsupported value` when unknown.
fn validate_required_enum(value: Option<&str>, supported: &[&str], path: &Path) -> ErrorList {
    match value {
        None => vec![FieldError::required(path, "")],
        some => validate_enum(some, supported, path),
    }
}

/// A selector that the defaults always set: validated when present.
fn validate_selector(selector: Option<&LabelSelector>, path: &Path) -> ErrorList {
    selector.map_or_else(Vec::new, |s| validate_label_selector(s, path))
}

/// `ValidateQualifiedName`: one `Invalid value` per problem.
fn validate_qualified_name(value: &str, path: &Path) -> ErrorList {
    is_qualified_name(value)
        .into_iter()
        .map(|msg| FieldError::invalid(path, value, msg))
        .collect()
}

/// `validateMatchConditions` without compiling the expressions: at most 64, each with a
/// non-blank expression and a qualified, unique name.
fn validate_match_conditions(
    conditions: &[k8s_openapi::api::admissionregistration::v1::MatchCondition],
    path: &Path,
) -> ErrorList {
    let mut errs = Vec::new();
    if conditions.len() > MAX_MATCH_CONDITIONS {
        errs.push(FieldError {
            kind: ErrorType::TooMany,
            field: path.clone(),
            value: Some(conditions.len().into()),
            detail: format!("must have at most {MAX_MATCH_CONDITIONS} items"),
        });
    }
    let mut names: Vec<&str> = Vec::new();
    for (i, condition) in conditions.iter().enumerate() {
        let at = path.index(i);
        if condition.expression.trim().is_empty() {
            errs.push(FieldError::required(&at.child("expression"), ""));
        }
        if condition.name.is_empty() {
            errs.push(FieldError::required(&at.child("name"), ""));
        } else {
            errs.extend(validate_qualified_name(&condition.name, &at.child("name")));
            if names.contains(&condition.name.as_str()) {
                errs.push(FieldError::duplicate(
                    &at.child("name"),
                    condition.name.as_str(),
                ));
            } else {
                names.push(&condition.name);
            }
        }
    }
    errs
}

/// Names in `resourceNames` (path segments, unique).
fn validate_resource_names(names: &[String], path: &Path) -> ErrorList {
    let mut errs = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for (i, name) in names.iter().enumerate() {
        for msg in validate_path_segment_name(name, false) {
            errs.push(FieldError::invalid(&path.index(i), name.as_str(), msg));
        }
        if seen.contains(&name.as_str()) {
            errs.push(FieldError::duplicate(&path.index(i), name.as_str()));
        } else {
            seen.push(name);
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(values: &[&str]) -> Vec<String> {
        values.iter().map(|v| (*v).to_owned()).collect()
    }

    #[test]
    fn resources_wildcards_match_upstream() {
        let path = Path::new("rules").index(0).child("resources");
        let errs = validate_resources(&strings(&["*/*", "pods"]), &path);
        assert_eq!(
            errs[0].to_string(),
            "rules[0].resources: Invalid value: [\"*/*\",\"pods\"]: if '*/*' is present, must not specify other resources"
        );
        let errs = validate_resources(&strings(&["pods/*", "pods/status"]), &path);
        assert_eq!(
            errs[0].to_string(),
            "rules[0].resources[1]: Invalid value: \"pods/status\": if 'pods/*' is present, must not specify pods/status"
        );
        assert!(validate_resources(&strings(&["pods", "pods/status"]), &path).is_empty());
    }
}
