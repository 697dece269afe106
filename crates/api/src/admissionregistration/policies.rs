//! Validating admission policies and their bindings: `SetDefaults_ValidatingAdmissionPolicySpec`,
//! `SetDefaults_MatchResources`, `SetDefaults_Rule`, and the structural checks of
//! `ValidateValidatingAdmissionPolicy[Update|StatusUpdate]` and
//! `ValidateValidatingAdmissionPolicyBinding[Update]`. CEL is not compiled (see the
//! module above).

use k8s_openapi::api::admissionregistration::v1::{
    MatchResources, NamedRuleWithOperations, ParamKind, ParamRef, ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding, ValidatingAdmissionPolicyStatus, Validation, Variable,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};

use super::{
    FAILURE_POLICIES, MATCH_POLICIES, RuleView, validate_enum, validate_match_conditions,
    validate_qualified_name, validate_required_enum, validate_resource_names, validate_rule,
};
use crate::field::{ErrorList, FieldError, Path};
use crate::meta::{validate_label_name, validate_label_selector};
use crate::names::{
    is_dns1035_label, is_dns1123_subdomain, name_is_dns_subdomain, regex_error,
    validate_path_segment_name,
};
use crate::validation::json;

/// Validation `reason` values.
pub const VALIDATION_REASONS: &[&str] = &["Forbidden", "Invalid", "RequestEntityTooLarge"];
/// Binding `validationActions` values.
pub const VALIDATION_ACTIONS: &[&str] = &["Audit", "Deny", "Warn"];
/// `paramRef.parameterNotFoundAction` values, in upstream's order.
pub const PARAMETER_NOT_FOUND_ACTIONS: &[&str] = &["Deny", "Allow"];
/// The most audit annotations a policy may have.
pub const MAX_AUDIT_ANNOTATIONS: usize = 20;
/// The longest audit annotation value expression, in bytes.
pub const MAX_AUDIT_ANNOTATION_VALUE_EXPRESSION_LENGTH: usize = 5 * 1024;

fn default_named_rules(rules: Option<&mut Vec<NamedRuleWithOperations>>) {
    for rule in rules.into_iter().flatten() {
        rule.scope.get_or_insert_with(|| "*".to_owned());
    }
}

/// matchPolicy Equivalent, empty selectors, rule scope `*`.
fn default_match_resources(resources: &mut MatchResources) {
    resources
        .match_policy
        .get_or_insert_with(|| "Equivalent".to_owned());
    resources
        .namespace_selector
        .get_or_insert_with(LabelSelector::default);
    resources
        .object_selector
        .get_or_insert_with(LabelSelector::default);
    default_named_rules(resources.resource_rules.as_mut());
    default_named_rules(resources.exclude_resource_rules.as_mut());
}

/// failurePolicy Fail and the match constraints' defaults.
pub fn default_policy(policy: &mut ValidatingAdmissionPolicy) {
    let Some(spec) = policy.spec.as_mut() else {
        return;
    };
    spec.failure_policy.get_or_insert_with(|| "Fail".to_owned());
    if let Some(constraints) = spec.match_constraints.as_mut() {
        default_match_resources(constraints);
    }
}

/// The match resources' defaults.
pub fn default_binding(binding: &mut ValidatingAdmissionPolicyBinding) {
    if let Some(resources) = binding.spec.match_resources.as_mut() {
        default_match_resources(resources);
    }
}

fn validate_named_rule(rule: &NamedRuleWithOperations, path: &Path) -> ErrorList {
    let mut errs = validate_resource_names(
        rule.resource_names.as_deref().unwrap_or_default(),
        &path.child("resourceNames"),
    );
    let view = RuleView {
        operations: rule.operations.as_deref().unwrap_or_default(),
        api_groups: rule.api_groups.as_deref().unwrap_or_default(),
        api_versions: rule.api_versions.as_deref().unwrap_or_default(),
        resources: rule.resources.as_deref().unwrap_or_default(),
        scope: rule.scope.as_deref(),
    };
    errs.extend(validate_rule(&view, path));
    errs
}

/// `validateMatchResources`: matchPolicy and both selectors required (the defaults set
/// them), every rule.
fn validate_match_resources(resources: &MatchResources, path: &Path) -> ErrorList {
    let mut errs = validate_required_enum(
        resources.match_policy.as_deref(),
        MATCH_POLICIES,
        &path.child("matchPolicy"),
    );
    for (field, selector) in [
        ("namespaceSelector", &resources.namespace_selector),
        ("objectSelector", &resources.object_selector),
    ] {
        match selector {
            None => errs.push(FieldError::required(&path.child(field), "")),
            Some(s) => errs.extend(validate_label_selector(s, &path.child(field))),
        }
    }
    for (field, rules) in [
        ("resourceRules", &resources.resource_rules),
        ("excludeResourceRules", &resources.exclude_resource_rules),
    ] {
        for (i, rule) in rules.iter().flatten().enumerate() {
            errs.extend(validate_named_rule(rule, &path.child(field).index(i)));
        }
    }
    errs
}

/// `validateParamKind`: apiVersion (`group/version`) and kind required and well formed.
fn validate_param_kind(kind: &ParamKind, path: &Path) -> ErrorList {
    let mut errs = Vec::new();
    let at = path.child("apiVersion");
    match kind.api_version.as_deref().unwrap_or_default() {
        "" => errs.push(FieldError::required(&at, "")),
        api_version => {
            let (group, version) = match api_version.matches('/').count() {
                _ if api_version == "/" => ("", ""),
                0 => ("", api_version),
                1 => api_version.split_once('/').unwrap_or_default(),
                _ => {
                    errs.push(FieldError::invalid(
                        &at,
                        api_version,
                        format!("unexpected GroupVersion string: {api_version}"),
                    ));
                    return errs;
                }
            };
            if !group.is_empty() {
                let msgs = is_dns1123_subdomain(group);
                if !msgs.is_empty() {
                    errs.push(FieldError::invalid(&at, group, msgs.join(",")));
                }
            }
            if version.is_empty() {
                errs.push(FieldError::invalid(
                    &at,
                    api_version,
                    "version must be specified",
                ));
            } else {
                let msgs = is_dns1035_label(version);
                if !msgs.is_empty() {
                    errs.push(FieldError::invalid(&at, version, msgs.join(",")));
                }
            }
        }
    }
    let at = path.child("kind");
    match kind.kind.as_deref().unwrap_or_default() {
        "" => errs.push(FieldError::required(&at, "")),
        name => {
            let msgs = is_dns1035_label(&name.to_ascii_lowercase());
            if !msgs.is_empty() {
                errs.push(FieldError::invalid(
                    &at,
                    name,
                    format!(
                        "may have mixed case, but should otherwise match: {}",
                        msgs.join(",")
                    ),
                ));
            }
        }
    }
    errs
}

fn is_cel_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    let starts_well = chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic());
    starts_well
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
        && !crate::cel::RESERVED.contains(&name)
}

fn validate_variable(variable: &Variable, path: &Path) -> ErrorList {
    let mut errs = Vec::new();
    if variable.name.trim().is_empty() {
        errs.push(FieldError::required(
            &path.child("name"),
            "name is not specified",
        ));
    } else if !is_cel_identifier(&variable.name) {
        errs.push(FieldError::invalid(
            &path.child("name"),
            variable.name.as_str(),
            "name is not a valid CEL identifier",
        ));
    }
    if variable.expression.trim().is_empty() {
        errs.push(FieldError::required(
            &path.child("expression"),
            "expression is not specified",
        ));
    }
    errs
}

fn validate_validation(validation: &Validation, path: &Path) -> ErrorList {
    let mut errs = Vec::new();
    if validation.expression.trim().is_empty() {
        errs.push(FieldError::required(
            &path.child("expression"),
            "expression is not specified",
        ));
    }
    let message_expression = validation.message_expression.as_deref().unwrap_or_default();
    if !message_expression.is_empty() && message_expression.trim().is_empty() {
        errs.push(FieldError::invalid(
            &path.child("messageExpression"),
            message_expression,
            "must be non-empty if specified",
        ));
    }
    let message = validation.message.as_deref().unwrap_or_default();
    let trimmed = message.trim();
    if !message.is_empty() && trimmed.is_empty() {
        errs.push(FieldError::invalid(
            &path.child("message"),
            message,
            "message must be non-empty if specified",
        ));
    } else if trimmed.contains(['\n', '\r']) {
        errs.push(FieldError::invalid(
            &path.child("message"),
            message,
            "message must not contain line breaks",
        ));
    }
    errs.extend(validate_enum(
        validation.reason.as_deref(),
        VALIDATION_REASONS,
        &path.child("reason"),
    ));
    errs
}

/// `ValidateValidatingAdmissionPolicy` without metadata (and without compiling CEL).
pub fn validate_policy(policy: &ValidatingAdmissionPolicy) -> ErrorList {
    validate_policy_spec(policy, true)
}

/// `ValidateValidatingAdmissionPolicyUpdate`: match conditions are checked again only when
/// they or the paramKind changed.
pub fn validate_policy_update(
    new: &ValidatingAdmissionPolicy,
    old: &ValidatingAdmissionPolicy,
) -> ErrorList {
    let spec = |p: &ValidatingAdmissionPolicy| {
        p.spec
            .as_ref()
            .map(|s| (s.param_kind.clone(), s.match_conditions.clone()))
    };
    validate_policy_spec(new, spec(new) != spec(old))
}

fn validate_policy_spec(
    policy: &ValidatingAdmissionPolicy,
    check_match_conditions: bool,
) -> ErrorList {
    let path = Path::new("spec");
    let default_spec = Default::default();
    let spec = policy.spec.as_ref().unwrap_or(&default_spec);
    let mut errs = validate_required_enum(
        spec.failure_policy.as_deref(),
        FAILURE_POLICIES,
        &path.child("failurePolicy"),
    );
    if let Some(kind) = &spec.param_kind {
        errs.extend(validate_param_kind(kind, &path.child("paramKind")));
    }
    match &spec.match_constraints {
        None => errs.push(FieldError::required(&path.child("matchConstraints"), "")),
        Some(constraints) => {
            errs.extend(validate_match_resources(
                constraints,
                &path.child("matchConstraints"),
            ));
            if constraints
                .resource_rules
                .as_ref()
                .is_none_or(Vec::is_empty)
            {
                errs.push(FieldError::required(
                    &path.child("matchConstraints").child("resourceRules"),
                    "",
                ));
            }
        }
    }
    if check_match_conditions {
        errs.extend(validate_match_conditions(
            spec.match_conditions.as_deref().unwrap_or_default(),
            &path.child("matchConditions"),
        ));
    }
    for (i, variable) in spec.variables.iter().flatten().enumerate() {
        errs.extend(validate_variable(
            variable,
            &path.child("variables").index(i),
        ));
    }
    let validations = spec.validations.as_deref().unwrap_or_default();
    let annotations = spec.audit_annotations.as_deref().unwrap_or_default();
    if validations.is_empty() && annotations.is_empty() {
        let why = "validations or auditAnnotations must contain at least one item";
        errs.push(FieldError::required(&path.child("validations"), why));
        errs.push(FieldError::required(&path.child("auditAnnotations"), why));
        return errs;
    }
    for (i, validation) in validations.iter().enumerate() {
        errs.extend(validate_validation(
            validation,
            &path.child("validations").index(i),
        ));
    }
    let at = path.child("auditAnnotations");
    if annotations.len() > MAX_AUDIT_ANNOTATIONS {
        errs.push(FieldError::invalid(
            &at,
            json(&annotations),
            format!("must not have more than {MAX_AUDIT_ANNOTATIONS} auditAnnotations"),
        ));
    }
    let name = policy.metadata.name.as_deref().unwrap_or_default();
    let mut keys: Vec<&str> = Vec::new();
    for (i, annotation) in annotations.iter().enumerate() {
        let at = at.index(i);
        if name.is_empty() {
            errs.push(FieldError::invalid(
                &at.child("key"),
                annotation.key.as_str(),
                "requires metadata.name be non-empty",
            ));
        } else {
            errs.extend(validate_qualified_name(
                &format!("{name}/{}", annotation.key),
                &at.child("key"),
            ));
        }
        let value = annotation.value_expression.trim();
        if value.is_empty() {
            errs.push(FieldError::required(
                &at.child("valueExpression"),
                "valueExpression is not specified",
            ));
        } else if value.len() > MAX_AUDIT_ANNOTATION_VALUE_EXPRESSION_LENGTH {
            errs.push(FieldError::required(
                &at.child("valueExpression"),
                format!(
                    "must not exceed {MAX_AUDIT_ANNOTATION_VALUE_EXPRESSION_LENGTH} bytes in length"
                ),
            ));
        }
        if keys.contains(&annotation.key.as_str()) {
            errs.push(FieldError::duplicate(
                &at.child("key"),
                annotation.key.as_str(),
            ));
        }
        keys.push(&annotation.key);
    }
    errs
}

/// `metav1validation.ValidateConditions` (lastTransitionTime excepted: the typed form
/// cannot tell an unset time from the epoch).
pub fn validate_conditions(conditions: &[Condition], path: &Path) -> ErrorList {
    const REASON_FMT: &str = "[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?";
    let mut errs = Vec::new();
    let mut types: Vec<&str> = Vec::new();
    for (i, condition) in conditions.iter().enumerate() {
        let at = path.index(i);
        if types.contains(&condition.type_.as_str()) {
            errs.push(FieldError::duplicate(
                &at.child("type"),
                condition.type_.as_str(),
            ));
        }
        types.push(&condition.type_);
        errs.extend(validate_label_name(&condition.type_, &at.child("type")));
        let statuses = ["False", "True", "Unknown"];
        if !statuses.contains(&condition.status.as_str()) {
            errs.push(FieldError::not_supported(
                &at.child("status"),
                condition.status.as_str(),
                &statuses,
            ));
        }
        if let Some(generation) = condition.observed_generation
            && generation < 0
        {
            errs.push(FieldError::invalid(
                &at.child("observedGeneration"),
                generation,
                "must be greater than or equal to zero",
            ));
        }
        let reason = condition.reason.as_str();
        if reason.is_empty() {
            errs.push(FieldError::required(&at.child("reason"), "must be set"));
        } else {
            let mut chars = reason.chars();
            let valid = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
                && reason
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_,:".contains(c))
                && reason.ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                errs.push(FieldError::invalid(
                    &at.child("reason"),
                    reason,
                    regex_error(
                        "a condition reason must start with alphabetic character, optionally \
                         followed by a string of alphanumeric characters or '_,:', and must end \
                         with an alphanumeric character or '_'",
                        REASON_FMT,
                        &[
                            "my_name",
                            "MY_NAME",
                            "MyName",
                            "ReasonA,ReasonB",
                            "ReasonA:ReasonB",
                        ],
                    ),
                ));
            }
            if reason.len() > 1024 {
                errs.push(FieldError::too_long(&at.child("reason"), 1024));
            }
        }
        if condition.message.len() > 32768 {
            errs.push(FieldError::too_long(&at.child("message"), 32768));
        }
    }
    errs
}

/// `validateValidatingAdmissionPolicyStatus`: expression warnings and conditions.
pub fn validate_policy_status(status: Option<&ValidatingAdmissionPolicyStatus>) -> ErrorList {
    let Some(status) = status else {
        return Vec::new();
    };
    let path = Path::new("status");
    let mut errs = Vec::new();
    let warnings = status
        .type_checking
        .as_ref()
        .and_then(|t| t.expression_warnings.as_deref())
        .unwrap_or_default();
    let at = path.child("typeChecking").child("expressionWarnings");
    for (i, warning) in warnings.iter().enumerate() {
        if warning.warning.is_empty() {
            errs.push(FieldError::required(&at.index(i).child("warning"), ""));
        }
        if warning.field_ref.trim().is_empty() {
            errs.push(FieldError::required(&at.index(i).child("fieldRef"), ""));
        }
    }
    errs.extend(validate_conditions(
        status.conditions.as_deref().unwrap_or_default(),
        &path.child("conditions"),
    ));
    errs
}

/// `validateParamRef`: a name or a selector (not both), and the not-found action.
fn validate_param_ref(param_ref: &ParamRef, path: &Path) -> ErrorList {
    let mut errs = Vec::new();
    let name = param_ref.name.as_deref().unwrap_or_default();
    const EXCLUSIVE: &str = "name and selector are mutually exclusive";
    if !name.is_empty() {
        for msg in validate_path_segment_name(name, false) {
            errs.push(FieldError::invalid(&path.child("name"), name, msg));
        }
        if param_ref.selector.is_some() {
            errs.push(FieldError::forbidden(&path.child("name"), EXCLUSIVE));
        }
    }
    if let Some(selector) = &param_ref.selector {
        errs.extend(validate_label_selector(selector, &path.child("selector")));
        if !name.is_empty() {
            errs.push(FieldError::forbidden(&path.child("selector"), EXCLUSIVE));
        }
    }
    if name.is_empty() && param_ref.selector.is_none() {
        errs.push(FieldError::required(
            path,
            "one of name or selector must be specified",
        ));
    }
    let at = path.child("parameterNotFoundAction");
    match param_ref
        .parameter_not_found_action
        .as_deref()
        .unwrap_or_default()
    {
        "" => errs.push(FieldError::required(&at, "")),
        action if !PARAMETER_NOT_FOUND_ACTIONS.contains(&action) => {
            errs.push(FieldError::not_supported(
                &at,
                action,
                PARAMETER_NOT_FOUND_ACTIONS,
            ));
        }
        _ => {}
    }
    errs
}

/// `ValidateValidatingAdmissionPolicyBinding[Update]` without metadata. The match
/// resources' errors carry upstream's misspelt path `spec.matchResouces`.
pub fn validate_binding(binding: &ValidatingAdmissionPolicyBinding) -> ErrorList {
    let path = Path::new("spec");
    let spec = &binding.spec;
    let mut errs = Vec::new();
    let at = path.child("policyName");
    if spec.policy_name.is_empty() {
        errs.push(FieldError::required(&at, ""));
    } else {
        for msg in name_is_dns_subdomain(&spec.policy_name, false) {
            errs.push(FieldError::invalid(&at, spec.policy_name.as_str(), msg));
        }
    }
    if let Some(param_ref) = &spec.param_ref {
        errs.extend(validate_param_ref(param_ref, &path.child("paramRef")));
    }
    if let Some(resources) = &spec.match_resources {
        errs.extend(validate_match_resources(
            resources,
            &path.child("matchResouces"),
        ));
    }
    let at = path.child("validationActions");
    let mut seen: Vec<&str> = Vec::new();
    for (i, action) in spec.validation_actions.iter().enumerate() {
        if !VALIDATION_ACTIONS.contains(&action.as_str()) {
            errs.push(FieldError::not_supported(
                &at.index(i),
                action.as_str(),
                VALIDATION_ACTIONS,
            ));
        }
        if seen.contains(&action.as_str()) {
            errs.push(FieldError::duplicate(&at.index(i), action.as_str()));
        }
        seen.push(action);
    }
    if seen.contains(&"Deny") && seen.contains(&"Warn") {
        errs.push(FieldError::invalid(
            &at,
            json(&spec.validation_actions),
            "must not contain both Deny and Warn (repeating the same validation failure \
             information in the API response and headers serves no purpose)",
        ));
    }
    if seen.is_empty() {
        errs.push(FieldError::required(
            &at,
            "at least one validation action is required",
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(errs: &ErrorList) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn policies_default_and_validate_structure() {
        let mut policy: ValidatingAdmissionPolicy = serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "spec": {
                "matchConstraints": {"resourceRules": [{"operations": ["CREATE"], "apiGroups": ["apps"],
                                                        "apiVersions": ["v1"], "resources": ["deployments"]}]},
                "validations": [{"expression": "  ", "reason": "Teapot"}],
                "variables": [{"name": "in", "expression": "1"}],
                "matchConditions": [{"name": "m", "expression": "true"}, {"name": "m", "expression": ""}],
            },
        }))
        .unwrap();
        default_policy(&mut policy);
        let spec = policy.spec.as_ref().unwrap();
        assert_eq!(spec.failure_policy.as_deref(), Some("Fail"));
        let constraints = spec.match_constraints.as_ref().unwrap();
        assert_eq!(constraints.match_policy.as_deref(), Some("Equivalent"));
        assert_eq!(
            constraints.resource_rules.as_ref().unwrap()[0]
                .scope
                .as_deref(),
            Some("*")
        );
        assert_eq!(
            messages(&validate_policy(&policy)),
            [
                "spec.matchConditions[1].expression: Required value",
                "spec.matchConditions[1].name: Duplicate value: \"m\"",
                "spec.variables[0].name: Invalid value: \"in\": name is not a valid CEL identifier",
                "spec.validations[0].expression: Required value: expression is not specified",
                "spec.validations[0].reason: Unsupported value: \"Teapot\": supported values: \"Forbidden\", \"Invalid\", \"RequestEntityTooLarge\"",
            ]
        );
    }

    #[test]
    fn bindings_validate_like_upstream() {
        let binding: ValidatingAdmissionPolicyBinding = serde_json::from_value(json!({
            "metadata": {"name": "b"},
            "spec": {"policyName": "", "validationActions": ["Deny", "Warn"],
                     "paramRef": {"name": "x", "selector": {}}},
        }))
        .unwrap();
        assert_eq!(
            messages(&validate_binding(&binding)),
            [
                "spec.policyName: Required value",
                "spec.paramRef.name: Forbidden: name and selector are mutually exclusive",
                "spec.paramRef.selector: Forbidden: name and selector are mutually exclusive",
                "spec.paramRef.parameterNotFoundAction: Required value",
                "spec.validationActions: Invalid value: [\"Deny\",\"Warn\"]: must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
            ]
        );
    }
}
