//! DaemonSets: `SetDefaults_DaemonSet`, `ValidateDaemonSet`, `ValidateDaemonSetUpdate`,
//! `ValidateDaemonSetStatusUpdate`.

use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetUpdateStrategy, RollingUpdateDaemonSet};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::field::{ErrorList, FieldError, Path};
use crate::validation::{
    immutable, int_or_percent, int_or_percent_value, json, nonnegative, nonnegative_opt,
    not_more_than_100_percent,
};

/// updateStrategy RollingUpdate with maxUnavailable 1 and maxSurge 0,
/// revisionHistoryLimit 10; pod template defaults.
pub fn default(daemon_set: &mut DaemonSet) {
    let spec = &mut daemon_set.spec;
    let strategy = spec.update_strategy.get_or_insert_with(Default::default);
    let kind = strategy
        .type_
        .get_or_insert_with(|| "RollingUpdate".to_owned());
    if kind == "RollingUpdate" {
        let rolling = strategy.rolling_update.get_or_insert_with(Default::default);
        rolling.max_unavailable.get_or_insert(IntOrString::Int(1));
        rolling.max_surge.get_or_insert(IntOrString::Int(0));
    }
    spec.revision_history_limit.get_or_insert(10);
    super::template::default(&mut spec.template);
}

/// `ValidateDaemonSetSpec` (metadata excepted).
pub fn validate(daemon_set: &DaemonSet) -> ErrorList {
    let path = Path::new("spec");
    let spec = &daemon_set.spec;
    let mut errors = super::template::validate(
        &spec.selector,
        false,
        &spec.template,
        "daemonset",
        "DaemonSet",
        &path,
    );
    errors.extend(nonnegative_opt(
        spec.min_ready_seconds,
        &path.child("minReadySeconds"),
    ));
    errors.extend(validate_strategy(
        spec.update_strategy.as_ref(),
        &path.child("updateStrategy"),
    ));
    errors.extend(nonnegative_opt(
        spec.revision_history_limit,
        &path.child("revisionHistoryLimit"),
    ));
    errors
}

/// `ValidateDaemonSetUpdateStrategy`.
fn validate_strategy(strategy: Option<&DaemonSetUpdateStrategy>, path: &Path) -> ErrorList {
    let kind = strategy.and_then(|s| s.type_.as_deref()).unwrap_or("");
    match (kind, strategy.and_then(|s| s.rolling_update.as_ref())) {
        ("OnDelete", _) => Vec::new(),
        ("RollingUpdate", None) => vec![FieldError::required(&path.child("rollingUpdate"), "")],
        ("RollingUpdate", Some(rolling)) => {
            validate_rolling_update(rolling, &path.child("rollingUpdate"))
        }
        _ => vec![FieldError::not_supported(
            path,
            json(&strategy),
            &["RollingUpdate", "OnDelete"],
        )],
    }
}

/// `ValidateRollingUpdateDaemonSet`: exactly one of maxUnavailable and maxSurge non-zero.
fn validate_rolling_update(rolling: &RollingUpdateDaemonSet, path: &Path) -> ErrorList {
    let zero = IntOrString::Int(0);
    let max_unavailable = rolling.max_unavailable.as_ref().unwrap_or(&zero);
    let max_surge = rolling.max_surge.as_ref().unwrap_or(&zero);
    let unavailable_path = path.child("maxUnavailable");
    let surge_path = path.child("maxSurge");
    let mut errors = int_or_percent(max_unavailable, &unavailable_path);
    errors.extend(int_or_percent(max_surge, &surge_path));
    errors.extend(not_more_than_100_percent(
        max_unavailable,
        &unavailable_path,
    ));
    errors.extend(not_more_than_100_percent(max_surge, &surge_path));
    let has_unavailable = int_or_percent_value(max_unavailable) != 0;
    let has_surge = int_or_percent_value(max_surge) != 0;
    if has_unavailable && has_surge {
        errors.push(FieldError::invalid(
            &surge_path,
            json(max_surge),
            "may not be set when maxUnavailable is non-zero",
        ));
    } else if !has_unavailable && !has_surge {
        errors.push(FieldError::required(
            &unavailable_path,
            "cannot be 0 when maxSurge is 0",
        ));
    }
    errors
}

/// `ValidateDaemonSetUpdate` plus apps/v1's immutable selector and the status checks.
pub fn validate_update(new: &DaemonSet, old: &DaemonSet) -> ErrorList {
    let mut errors = validate(new);
    {
        let (new_spec, old_spec) = (&new.spec, &old.spec);
        errors.extend(immutable(
            &new_spec.selector,
            &old_spec.selector,
            &Path::new("spec").child("selector"),
        ));
    }
    errors.extend(validate_status_update(new, old));
    errors
}

/// `ValidateDaemonSetStatusUpdate` (metadata excepted).
pub fn validate_status_update(new: &DaemonSet, old: &DaemonSet) -> ErrorList {
    let path = Path::new("status");
    let Some(status) = &new.status else {
        return Vec::new();
    };
    let mut errors = Vec::new();
    for (name, value) in [
        (
            "currentNumberScheduled",
            Some(status.current_number_scheduled),
        ),
        ("numberMisscheduled", Some(status.number_misscheduled)),
        (
            "desiredNumberScheduled",
            Some(status.desired_number_scheduled),
        ),
        ("numberReady", Some(status.number_ready)),
        ("updatedNumberScheduled", status.updated_number_scheduled),
        ("numberAvailable", status.number_available),
        ("numberUnavailable", status.number_unavailable),
        ("collisionCount", status.collision_count),
    ] {
        errors.extend(nonnegative_opt(value, &path.child(name)));
    }
    errors.extend(nonnegative(
        status.observed_generation.unwrap_or(0),
        &path.child("observedGeneration"),
    ));
    errors.extend(super::collision_count_not_decremented(
        status.collision_count,
        old.status.as_ref().and_then(|s| s.collision_count),
        &path,
    ));
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn daemon_set() -> DaemonSet {
        serde_json::from_value(json!({
            "spec": {
                "selector": {"matchLabels": {"app": "agent"}},
                "template": {"metadata": {"labels": {"app": "agent"}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}},
            },
        }))
        .unwrap()
    }

    #[test]
    fn defaults_match_upstream() {
        let mut ds = daemon_set();
        default(&mut ds);
        let spec = serde_json::to_value(&ds.spec).unwrap();
        assert_eq!(
            spec["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
        );
        assert_eq!(spec["revisionHistoryLimit"], 10);
        assert!(validate(&ds).is_empty());
    }

    #[test]
    fn surge_and_unavailable_are_exclusive() {
        let mut ds = daemon_set();
        default(&mut ds);
        let strategy = ds.spec.update_strategy.as_mut().unwrap();
        strategy.rolling_update.as_mut().unwrap().max_surge = Some(IntOrString::Int(1));
        let errors: Vec<String> = validate(&ds).iter().map(ToString::to_string).collect();
        assert_eq!(
            errors,
            [
                "spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: 1: may not be set when maxUnavailable is non-zero"
            ]
        );
    }
}
