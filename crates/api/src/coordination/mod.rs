//! coordination.k8s.io/v1 leases: `ValidateLease` (`pkg/apis/coordination/validation`).

use k8s_openapi::api::coordination::v1::Lease;

use crate::field::{ErrorList, FieldError, Path};
use crate::names;

/// The coordinated leader election strategies upstream knows.
const STRATEGIES: &[&str] = &["OldestEmulationVersion"];

/// leaseDurationSeconds > 0, leaseTransitions ≥ 0, a known or qualified-name strategy,
/// preferredHolder only with a strategy.
pub fn validate(lease: &Lease) -> ErrorList {
    let path = Path::new("spec");
    let Some(spec) = &lease.spec else {
        return Vec::new();
    };
    let mut errors = Vec::new();
    if let Some(duration) = spec.lease_duration_seconds.filter(|d| *d <= 0) {
        errors.push(FieldError::invalid(
            &path.child("leaseDurationSeconds"),
            duration,
            "must be greater than 0",
        ));
    }
    if let Some(transitions) = spec.lease_transitions.filter(|t| *t < 0) {
        errors.push(FieldError::invalid(
            &path.child("leaseTransitions"),
            transitions,
            "must be greater than or equal to 0",
        ));
    }
    let strategy = spec.strategy.as_deref().unwrap_or("");
    if spec.strategy.is_some() {
        let at = path.child("strategy");
        if strategy.contains('/') {
            errors.extend(
                names::is_qualified_name(strategy)
                    .into_iter()
                    .map(|message| FieldError::invalid(&at, strategy, message)),
            );
        } else if !STRATEGIES.contains(&strategy) {
            errors.push(FieldError::not_supported(&at, strategy, STRATEGIES));
        }
    }
    if spec
        .preferred_holder
        .as_deref()
        .is_some_and(|h| !h.is_empty())
        && strategy.is_empty()
    {
        errors.push(FieldError::forbidden(
            &path.child("preferredHolder"),
            "may only be specified if `strategy` is defined",
        ));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;

    #[test]
    fn messages_match_upstream() {
        let lease = Lease {
            spec: Some(LeaseSpec {
                lease_duration_seconds: Some(0),
                lease_transitions: Some(-1),
                strategy: Some("Newest".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let errors: Vec<String> = validate(&lease).iter().map(ToString::to_string).collect();
        assert_eq!(
            errors,
            [
                "spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0",
                "spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0",
                r#"spec.strategy: Unsupported value: "Newest": supported values: "OldestEmulationVersion""#,
            ]
        );
        let preferred = Lease {
            spec: Some(LeaseSpec {
                preferred_holder: Some("a".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(
            validate(&preferred)[0].to_string(),
            "spec.preferredHolder: Forbidden: may only be specified if `strategy` is defined"
        );
    }
}
