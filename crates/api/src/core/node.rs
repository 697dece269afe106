//! Nodes (upstream `SetDefaults_NodeStatus`, `ValidateNode`, `ValidateNodeUpdate`).

use k8s_openapi::api::core::v1::{Node, Taint};

use crate::core::one_of;
use crate::field::{ErrorList, FieldError, Path};
use crate::names;

/// Defaults a node: allocatable = capacity when not reported.
pub fn default_node(node: &mut Node) {
    if let Some(status) = node.status.as_mut()
        && status.allocatable.is_none()
    {
        status.allocatable.clone_from(&status.capacity);
    }
}

/// Checks a node: its capacity and allocatable are well-formed, non-negative quantities
/// (upstream rejects a malformed quantity when it decodes the object, with the same
/// message), pod CIDRs are CIDRs, taints have a key and a supported effect and are
/// unique by key and effect.
pub fn validate_node(node: &Node) -> ErrorList {
    let mut errors = Vec::new();
    if let Some(status) = &node.status {
        let status_path = Path::new("status");
        for (field, list) in [
            ("capacity", status.capacity.as_ref()),
            ("allocatable", status.allocatable.as_ref()),
        ] {
            crate::core::resources::validate_resource_list(
                &mut errors,
                &status_path.child(field),
                list,
            );
        }
    }
    let Some(spec) = &node.spec else {
        return errors;
    };
    let spec_path = Path::new("spec");
    let cidrs_path = spec_path.child("podCIDRs");
    for (i, cidr) in spec.pod_cidrs.iter().flatten().enumerate() {
        errors.extend(names::is_valid_cidr(&cidrs_path.index(i), cidr));
    }
    let taints_path = spec_path.child("taints");
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for (i, taint) in spec.taints.iter().flatten().enumerate() {
        validate_taint(&mut errors, &taints_path.index(i), taint);
        let key = (taint.key.as_str(), taint.effect.as_str());
        if seen.contains(&key) {
            errors.push(FieldError::duplicate(
                &taints_path.index(i),
                format!("{}:{}", taint.key, taint.effect),
            ));
        }
        seen.push(key);
    }
    errors
}

fn validate_taint(errors: &mut ErrorList, path: &Path, taint: &Taint) {
    if taint.key.is_empty() {
        errors.push(FieldError::required(&path.child("key"), ""));
    }
    one_of(
        errors,
        &path.child("effect"),
        Some(taint.effect.as_str()),
        &["NoExecute", "NoSchedule", "PreferNoSchedule"],
        true,
    );
}

/// Checks a node update: pod CIDRs and the provider ID are set at most once.
pub fn validate_node_update(new: &Node, old: &Node) -> ErrorList {
    let mut errors = validate_node(new);
    let (Some(new_spec), Some(old_spec)) = (&new.spec, &old.spec) else {
        return errors;
    };
    let spec_path = Path::new("spec");
    let old_cidrs = old_spec.pod_cidrs.as_deref().unwrap_or_default();
    if !old_cidrs.is_empty() && new_spec.pod_cidrs.as_deref().unwrap_or_default() != old_cidrs {
        errors.push(FieldError::forbidden(
            &spec_path.child("podCIDRs"),
            "node updates may not change podCIDR except from \"\" to valid",
        ));
    }
    let old_provider = old_spec.provider_id.as_deref().unwrap_or("");
    if !old_provider.is_empty() && new_spec.provider_id.as_deref() != Some(old_provider) {
        errors.push(FieldError::forbidden(
            &spec_path.child("providerID"),
            "node updates may not change providerID except from \"\" to valid",
        ));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The validation messages of the node in `value`.
    fn messages(value: serde_json::Value) -> Vec<String> {
        let node: Node = serde_json::from_value(value).unwrap_or_default();
        validate_node(&node)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn whole_number_resources_must_be_integers() {
        assert_eq!(
            messages(serde_json::json!({
                "status": {"capacity": {"pods": "1.5", "example.com/foo": "1500m", "cpu": "1.5",
                                        "example.com/bar": "2"}}
            })),
            [
                r#"status.capacity[example.com/foo]: Invalid value: "1500m": must be an integer"#,
                r#"status.capacity[pods]: Invalid value: "1500m": must be an integer"#,
            ]
        );
    }

    #[test]
    fn taints_and_cidrs() {
        assert_eq!(
            messages(serde_json::json!({
                "spec": {"podCIDRs": ["10.244.0.0/24", "10.244.0.0"],
                         "taints": [{"key": "k", "effect": "NoSchedule"}, {"key": "k", "effect": "NoSchedule"},
                                    {"key": "", "effect": "Sometimes"}]}
            })),
            [
                r#"spec.podCIDRs[1]: Invalid value: "10.244.0.0": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"#,
                r#"spec.taints[1]: Duplicate value: "k:NoSchedule""#,
                "spec.taints[2].key: Required value",
                r#"spec.taints[2].effect: Unsupported value: "Sometimes": supported values: "NoExecute", "NoSchedule", "PreferNoSchedule""#,
            ]
        );
    }

    #[test]
    fn capacities_must_be_quantities() {
        assert_eq!(
            messages(serde_json::json!({
                "status": {"capacity": {"cpu": "lots", "pods": "110"},
                           "allocatable": {"memory": "-1Gi"}}
            })),
            [
                r#"status.capacity[cpu]: Invalid value: "lots": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"#,
                r#"status.allocatable[memory]: Invalid value: "-1Gi": must be greater than or equal to 0"#,
            ]
        );
    }
}
