//! policy/v1 poddisruptionbudgets: `ValidatePodDisruptionBudget` and the status checks
//! (`pkg/apis/policy/validation`).

use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};

use crate::field::{ErrorList, FieldError, Path};
use crate::meta;
use crate::validation::{int_or_percent, json, nonnegative_opt, not_more_than_100_percent};

/// minAvailable xor maxUnavailable, each an int or percent up to 100%; a valid selector; a
/// known unhealthyPodEvictionPolicy.
pub fn validate(pdb: &PodDisruptionBudget) -> ErrorList {
    let path = Path::new("spec");
    let Some(spec) = &pdb.spec else {
        return Vec::new();
    };
    let mut errors = Vec::new();
    if spec.min_available.is_some() && spec.max_unavailable.is_some() {
        errors.push(FieldError::invalid(
            &path,
            json(spec),
            "minAvailable and maxUnavailable cannot be both set",
        ));
    }
    for (name, value) in [
        ("minAvailable", &spec.min_available),
        ("maxUnavailable", &spec.max_unavailable),
    ] {
        if let Some(value) = value {
            errors.extend(int_or_percent(value, &path.child(name)));
            errors.extend(not_more_than_100_percent(value, &path.child(name)));
        }
    }
    if let Some(selector) = &spec.selector {
        errors.extend(meta::validate_label_selector(
            selector,
            &path.child("selector"),
        ));
    }
    if let Some(policy) = spec.unhealthy_pod_eviction_policy.as_deref()
        && !matches!(policy, "AlwaysAllow" | "IfHealthyBudget")
    {
        errors.push(FieldError::not_supported(
            &path.child("unhealthyPodEvictionPolicy"),
            policy,
            &["AlwaysAllow", "IfHealthyBudget"],
        ));
    }
    errors
}

/// [`validate`] and the status counts (non-negative).
pub fn validate_update(new: &PodDisruptionBudget, _old: &PodDisruptionBudget) -> ErrorList {
    let mut errors = validate(new);
    errors.extend(validate_status(new.status.as_ref()));
    errors
}

fn validate_status(status: Option<&PodDisruptionBudgetStatus>) -> ErrorList {
    let path = Path::new("status");
    let Some(status) = status else {
        return Vec::new();
    };
    let mut errors: ErrorList = [
        ("disruptionsAllowed", status.disruptions_allowed),
        ("currentHealthy", status.current_healthy),
        ("desiredHealthy", status.desired_healthy),
        ("expectedPods", status.expected_pods),
    ]
    .into_iter()
    .flat_map(|(name, value)| nonnegative_opt(value, &path.child(name)))
    .collect();
    errors.extend(nonnegative_opt(
        status.observed_generation,
        &path.child("observedGeneration"),
    ));
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn min_available_and_max_unavailable_are_exclusive() {
        let pdb: PodDisruptionBudget = serde_json::from_value(json!({
            "spec": {"minAvailable": 1, "maxUnavailable": "120%"},
        }))
        .unwrap();
        let errors: Vec<String> = validate(&pdb).iter().map(ToString::to_string).collect();
        assert_eq!(
            errors,
            [
                r#"spec: Invalid value: {"maxUnavailable":"120%","minAvailable":1}: minAvailable and maxUnavailable cannot be both set"#,
                r#"spec.maxUnavailable: Invalid value: "120%": must not be greater than 100%"#,
            ]
        );
    }
}
