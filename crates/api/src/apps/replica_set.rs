//! ReplicaSets: `SetDefaults_ReplicaSet`, `ValidateReplicaSet`, `ValidateReplicaSetUpdate`,
//! `ValidateReplicaSetStatus`.

use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetStatus};

use crate::field::{ErrorList, Path};
use crate::validation::{immutable, nonnegative, nonnegative_opt};

/// Replicas 1; pod template defaults.
pub fn default(replica_set: &mut ReplicaSet) {
    let spec = &mut replica_set.spec;
    spec.replicas.get_or_insert(1);
    if let Some(template) = &mut spec.template {
        super::template::default(template);
    }
}

/// `ValidateReplicaSetSpec` (metadata excepted). Upstream's empty-selector message names
/// deployments here too.
pub fn validate(replica_set: &ReplicaSet) -> ErrorList {
    let path = Path::new("spec");
    let spec = &replica_set.spec;
    let mut errors = nonnegative(spec.replicas.unwrap_or(0).into(), &path.child("replicas"));
    errors.extend(nonnegative_opt(
        spec.min_ready_seconds,
        &path.child("minReadySeconds"),
    ));
    errors.extend(super::template::validate(
        &spec.selector,
        true,
        &spec.template.clone().unwrap_or_default(),
        "deployment",
        "ReplicaSet",
        &path,
    ));
    errors
}

/// `ValidateReplicaSetUpdate` plus apps/v1's immutable selector and the status checks.
pub fn validate_update(new: &ReplicaSet, old: &ReplicaSet) -> ErrorList {
    let mut errors = validate(new);
    {
        let (new_spec, old_spec) = (&new.spec, &old.spec);
        errors.extend(immutable(
            &new_spec.selector,
            &old_spec.selector,
            &Path::new("spec").child("selector"),
        ));
    }
    errors.extend(validate_status(new.status.as_ref()));
    errors
}

/// `ValidateReplicaSetStatus`.
pub fn validate_status(status: Option<&ReplicaSetStatus>) -> ErrorList {
    let path = Path::new("status");
    let Some(status) = status else {
        return Vec::new();
    };
    let count = |v: Option<i32>| v.unwrap_or(0);
    let mut errors = nonnegative(status.replicas.into(), &path.child("replicas"));
    for (name, value) in [
        ("fullyLabeledReplicas", status.fully_labeled_replicas),
        ("readyReplicas", status.ready_replicas),
        ("availableReplicas", status.available_replicas),
    ] {
        errors.extend(nonnegative_opt(value, &path.child(name)));
    }
    errors.extend(nonnegative_opt(
        status.observed_generation,
        &path.child("observedGeneration"),
    ));
    errors.extend(super::not_above_replicas(
        status.replicas,
        &[
            ("fullyLabeledReplicas", count(status.fully_labeled_replicas)),
            ("readyReplicas", count(status.ready_replicas)),
            ("availableReplicas", count(status.available_replicas)),
        ],
        &path,
    ));
    errors.extend(super::available_not_above_ready(
        count(status.available_replicas),
        count(status.ready_replicas),
        "readyReplicas",
        &path,
    ));
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_and_mismatched_selector() {
        let mut rs: ReplicaSet = serde_json::from_value(json!({
            "metadata": {"name": "web"},
            "spec": {
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "other"}},
                    "spec": {"containers": [{"name": "c", "image": "nginx"}]},
                },
            },
        }))
        .unwrap();
        default(&mut rs);
        assert_eq!(rs.spec.replicas, Some(1));
        let errors: Vec<String> = validate(&rs).iter().map(ToString::to_string).collect();
        assert_eq!(
            errors,
            [
                r#"spec.template.metadata.labels: Invalid value: {"app":"other"}: `selector` does not match template `labels`"#
            ]
        );
    }

    #[test]
    fn restart_policy_must_be_always() {
        let mut rs: ReplicaSet = serde_json::from_value(json!({
            "spec": {
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"restartPolicy": "Never", "activeDeadlineSeconds": 5, "containers": [{"name": "c", "image": "nginx"}]},
                },
            },
        }))
        .unwrap();
        default(&mut rs);
        let errors: Vec<String> = validate(&rs).iter().map(ToString::to_string).collect();
        assert_eq!(
            errors,
            [
                r#"spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always""#,
                "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in ReplicaSet is not Supported",
            ]
        );
    }
}
