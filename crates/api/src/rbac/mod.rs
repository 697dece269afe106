//! rbac.authorization.k8s.io/v1 roles, cluster roles and their bindings: upstream's
//! `SetDefaults_RoleBinding`, `SetDefaults_ClusterRoleBinding`, `SetDefaults_Subject`
//! (`pkg/apis/rbac/v1/defaults.go`), the checks of `pkg/apis/rbac/validation` (metadata
//! names are the REST layer's), and `SubjectsStrings` (`pkg/apis/rbac/helpers.go`) for the
//! binding printers.

use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};

use crate::field::{ErrorList, FieldError, Path};
use crate::names::{name_is_dns_subdomain, validate_path_segment_name};
use crate::validation::json;

/// The API group of roles and bindings.
pub const GROUP_NAME: &str = "rbac.authorization.k8s.io";
/// The subject kinds a binding may name.
pub const SERVICE_ACCOUNT_KIND: &str = "ServiceAccount";
pub const USER_KIND: &str = "User";
pub const GROUP_KIND: &str = "Group";

/// A role reference without an API group refers to this group.
fn default_role_ref(role_ref: &mut RoleRef) {
    if role_ref.api_group.as_deref().unwrap_or_default().is_empty() {
        role_ref.api_group = Some(GROUP_NAME.to_owned());
    }
}

/// User and Group subjects without an API group get this group; ServiceAccounts keep `""`.
fn default_subjects(subjects: Option<&mut Vec<Subject>>) {
    for subject in subjects.into_iter().flatten() {
        if subject.api_group.as_deref().unwrap_or_default().is_empty() {
            subject.api_group = match subject.kind.as_str() {
                USER_KIND | GROUP_KIND => Some(GROUP_NAME.to_owned()),
                SERVICE_ACCOUNT_KIND => Some(String::new()),
                _ => subject.api_group.take(),
            };
        }
    }
}

/// Defaults of a RoleBinding: the roleRef's and subjects' API groups.
pub fn default_role_binding(binding: &mut RoleBinding) {
    default_role_ref(&mut binding.role_ref);
    default_subjects(binding.subjects.as_mut());
}

/// Defaults of a ClusterRoleBinding: the roleRef's and subjects' API groups.
pub fn default_cluster_role_binding(binding: &mut ClusterRoleBinding) {
    default_role_ref(&mut binding.role_ref);
    default_subjects(binding.subjects.as_mut());
}

/// One rule: verbs are required; a non-resource rule (cluster roles only) names no API
/// group, resource or resource name; a resource rule needs API groups and resources.
fn validate_policy_rule(rule: &PolicyRule, namespaced: bool, path: &Path) -> ErrorList {
    let mut errs = Vec::new();
    if rule.verbs.is_empty() {
        errs.push(FieldError::required(
            &path.child("verbs"),
            "verbs must contain at least one value",
        ));
    }
    let non_resource_urls = rule.non_resource_urls.as_deref().unwrap_or_default();
    let api_groups = rule.api_groups.as_deref().unwrap_or_default();
    let resources = rule.resources.as_deref().unwrap_or_default();
    let resource_names = rule.resource_names.as_deref().unwrap_or_default();
    if !non_resource_urls.is_empty() {
        let at = path.child("nonResourceURLs");
        if namespaced {
            errs.push(FieldError::invalid(
                &at,
                json(&non_resource_urls),
                "namespaced rules cannot apply to non-resource URLs",
            ));
        }
        if !api_groups.is_empty() || !resources.is_empty() || !resource_names.is_empty() {
            errs.push(FieldError::invalid(
                &at,
                json(&non_resource_urls),
                "rules cannot apply to both regular resources and non-resource URLs",
            ));
        }
        return errs;
    }
    if api_groups.is_empty() {
        errs.push(FieldError::required(
            &path.child("apiGroups"),
            "resource rules must supply at least one api group",
        ));
    }
    if resources.is_empty() {
        errs.push(FieldError::required(
            &path.child("resources"),
            "resource rules must supply at least one resource",
        ));
    }
    if !resource_names.is_empty() && resources.len() > 1 {
        errs.push(FieldError::required(
            &path.child("resourceNames"),
            "resource names cannot apply to multiple resources",
        ));
    }
    errs
}

fn validate_rules(rules: Option<&Vec<PolicyRule>>, namespaced: bool) -> ErrorList {
    let path = Path::new("rules");
    rules
        .into_iter()
        .flatten()
        .enumerate()
        .flat_map(|(i, rule)| validate_policy_rule(rule, namespaced, &path.index(i)))
        .collect()
}

/// `ValidateRole` without metadata: every rule, none on non-resource URLs.
pub fn validate_role(role: &Role) -> ErrorList {
    validate_rules(role.rules.as_ref(), true)
}

/// `ValidateClusterRole` without metadata: every rule. The aggregation rule's selectors are
/// not validated upstream either (only the label selector type's own decoding).
pub fn validate_cluster_role(role: &ClusterRole) -> ErrorList {
    validate_rules(role.rules.as_ref(), false)
}

/// The roleRef (kinds `Role`/`ClusterRole` for namespaced bindings, `ClusterRole` for
/// cluster ones) and the subjects.
fn validate_binding(
    role_ref: &RoleRef,
    subjects: Option<&Vec<Subject>>,
    namespaced: bool,
) -> ErrorList {
    let mut errs = Vec::new();
    let at = Path::new("roleRef");
    let api_group = role_ref.api_group.as_deref().unwrap_or_default();
    if api_group != GROUP_NAME {
        errs.push(FieldError::not_supported(
            &at.child("apiGroup"),
            api_group,
            &[GROUP_NAME],
        ));
    }
    let kinds: &[&str] = if namespaced {
        &["Role", "ClusterRole"]
    } else {
        &["ClusterRole"]
    };
    if !kinds.contains(&role_ref.kind.as_str()) {
        errs.push(FieldError::not_supported(
            &at.child("kind"),
            role_ref.kind.as_str(),
            kinds,
        ));
    }
    if role_ref.name.is_empty() {
        errs.push(FieldError::required(&at.child("name"), ""));
    } else {
        for msg in validate_path_segment_name(&role_ref.name, false) {
            errs.push(FieldError::invalid(
                &at.child("name"),
                role_ref.name.as_str(),
                msg,
            ));
        }
    }
    let path = Path::new("subjects");
    for (i, subject) in subjects.into_iter().flatten().enumerate() {
        errs.extend(validate_subject(subject, namespaced, &path.index(i)));
    }
    errs
}

/// `validateRoleBindingSubject`: a name; ServiceAccounts have API group `""` (and a
/// namespace in cluster bindings); Users and Groups have this group.
fn validate_subject(subject: &Subject, namespaced: bool, path: &Path) -> ErrorList {
    let mut errs = Vec::new();
    let name = subject.name.as_str();
    if name.is_empty() {
        errs.push(FieldError::required(&path.child("name"), ""));
    }
    let api_group = subject.api_group.as_deref().unwrap_or_default();
    match subject.kind.as_str() {
        SERVICE_ACCOUNT_KIND => {
            if !name.is_empty() {
                for msg in name_is_dns_subdomain(name, false) {
                    errs.push(FieldError::invalid(&path.child("name"), name, msg));
                }
            }
            if !api_group.is_empty() {
                errs.push(FieldError::not_supported(
                    &path.child("apiGroup"),
                    api_group,
                    &[""],
                ));
            }
            if !namespaced && subject.namespace.as_deref().unwrap_or_default().is_empty() {
                errs.push(FieldError::required(&path.child("namespace"), ""));
            }
        }
        kind @ (USER_KIND | GROUP_KIND) => {
            if name.is_empty() {
                let what = if kind == USER_KIND { "user" } else { "group" };
                errs.push(FieldError::invalid(
                    &path.child("name"),
                    name,
                    format!("{what} name cannot be empty"),
                ));
            }
            if api_group != GROUP_NAME {
                errs.push(FieldError::not_supported(
                    &path.child("apiGroup"),
                    api_group,
                    &[GROUP_NAME],
                ));
            }
        }
        other => errs.push(FieldError::not_supported(
            &path.child("kind"),
            other,
            &[SERVICE_ACCOUNT_KIND, USER_KIND, GROUP_KIND],
        )),
    }
    errs
}

/// `ValidateRoleBinding` without metadata.
pub fn validate_role_binding(binding: &RoleBinding) -> ErrorList {
    validate_binding(&binding.role_ref, binding.subjects.as_ref(), true)
}

/// `ValidateClusterRoleBinding` without metadata.
pub fn validate_cluster_role_binding(binding: &ClusterRoleBinding) -> ErrorList {
    validate_binding(&binding.role_ref, binding.subjects.as_ref(), false)
}

/// A binding's roleRef cannot change: `roleRef: Invalid value: {...}: cannot change roleRef`.
pub fn validate_role_ref_update(new: &RoleRef, old: &RoleRef) -> ErrorList {
    if new == old {
        return Vec::new();
    }
    vec![FieldError::invalid(
        &Path::new("roleRef"),
        json(new),
        "cannot change roleRef",
    )]
}

/// Subjects by kind, as upstream's `SubjectsStrings`: user names, group names,
/// `namespace/name` of service accounts, and `kind/namespace/name` of the others.
pub fn subjects_strings(subjects: &[Subject]) -> [Vec<String>; 4] {
    let mut out: [Vec<String>; 4] = Default::default();
    for subject in subjects {
        let namespace = subject.namespace.as_deref().unwrap_or_default();
        match subject.kind.as_str() {
            USER_KIND => out[0].push(subject.name.clone()),
            GROUP_KIND => out[1].push(subject.name.clone()),
            SERVICE_ACCOUNT_KIND => out[2].push(format!("{namespace}/{}", subject.name)),
            kind => out[3].push(format!("{kind}/{namespace}/{}", subject.name)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(errs: &ErrorList) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn rules_match_upstream() {
        let role: Role = serde_json::from_value(json!({
            "metadata": {"name": "r"},
            "rules": [
                {"verbs": [], "apiGroups": [""], "resources": ["pods"]},
                {"verbs": ["get"], "nonResourceURLs": ["/healthz"]},
                {"verbs": ["get"], "resources": ["pods", "services"], "resourceNames": ["a"]},
            ],
        }))
        .unwrap();
        assert_eq!(
            messages(&validate_role(&role)),
            [
                "rules[0].verbs: Required value: verbs must contain at least one value",
                "rules[1].nonResourceURLs: Invalid value: [\"/healthz\"]: namespaced rules cannot apply to non-resource URLs",
                "rules[2].apiGroups: Required value: resource rules must supply at least one api group",
                "rules[2].resourceNames: Required value: resource names cannot apply to multiple resources",
            ]
        );
        let cluster: ClusterRole = serde_json::from_value(json!({
            "metadata": {"name": "c"},
            "rules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}],
        }))
        .unwrap();
        assert!(validate_cluster_role(&cluster).is_empty());
    }

    #[test]
    fn bindings_default_and_validate() {
        let mut binding: ClusterRoleBinding = serde_json::from_value(json!({
            "metadata": {"name": "b"},
            "roleRef": {"kind": "Role", "name": "view"},
            "subjects": [
                {"kind": "User", "name": "alice"},
                {"kind": "ServiceAccount", "name": "default"},
                {"kind": "Robot", "name": "r2"},
            ],
        }))
        .unwrap();
        default_cluster_role_binding(&mut binding);
        assert_eq!(binding.role_ref.api_group.as_deref(), Some(GROUP_NAME));
        let subjects = binding.subjects.as_deref().unwrap();
        assert_eq!(subjects[0].api_group.as_deref(), Some(GROUP_NAME));
        assert_eq!(subjects[1].api_group.as_deref(), Some(""));
        assert_eq!(
            messages(&validate_cluster_role_binding(&binding)),
            [
                "roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\"",
                "subjects[1].namespace: Required value",
                "subjects[2].kind: Unsupported value: \"Robot\": supported values: \"ServiceAccount\", \"User\", \"Group\"",
            ]
        );
        let [users, groups, sas, others] = subjects_strings(subjects);
        assert_eq!(
            (users, groups, sas),
            (
                vec!["alice".to_owned()],
                vec![],
                vec!["/default".to_owned()]
            )
        );
        assert_eq!(others, ["Robot//r2"]);
    }
}
