//! StatefulSets: `SetDefaults_StatefulSet` (with the MaxUnavailableStatefulSet gate on, as
//! in 1.35+), `ValidateStatefulSet`, `ValidateStatefulSetUpdate`,
//! `ValidateStatefulSetStatusUpdate`.

use k8s_openapi::api::apps::v1::{
    RollingUpdateStatefulSetStrategy, StatefulSet, StatefulSetPersistentVolumeClaimRetentionPolicy,
    StatefulSetSpec, StatefulSetStatus,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::field::{ErrorList, FieldError, Path};
use crate::validation::{
    immutable, int_or_percent, int_or_percent_value, json, nonnegative, nonnegative_opt,
    not_more_than_100_percent,
};

/// podManagementPolicy OrderedReady; updateStrategy RollingUpdate with partition 0 and
/// maxUnavailable 1; persistentVolumeClaimRetentionPolicy Retain/Retain; replicas 1;
/// revisionHistoryLimit 10; pod template defaults.
pub fn default(stateful_set: &mut StatefulSet) {
    let spec = &mut stateful_set.spec;
    spec.pod_management_policy
        .get_or_insert_with(|| "OrderedReady".to_owned());
    let strategy = spec.update_strategy.get_or_insert_with(Default::default);
    if strategy.type_.is_none() {
        strategy.type_ = Some("RollingUpdate".to_owned());
        strategy.rolling_update.get_or_insert_with(Default::default);
    }
    if strategy.type_.as_deref() == Some("RollingUpdate")
        && let Some(rolling) = &mut strategy.rolling_update
    {
        rolling.partition.get_or_insert(0);
        rolling.max_unavailable.get_or_insert(IntOrString::Int(1));
    }
    let retention = spec
        .persistent_volume_claim_retention_policy
        .get_or_insert_with(Default::default);
    retention
        .when_deleted
        .get_or_insert_with(|| "Retain".to_owned());
    retention
        .when_scaled
        .get_or_insert_with(|| "Retain".to_owned());
    spec.replicas.get_or_insert(1);
    spec.revision_history_limit.get_or_insert(10);
    super::template::default(&mut spec.template);
}

/// `ValidateStatefulSetSpec` (metadata excepted).
pub fn validate(stateful_set: &StatefulSet) -> ErrorList {
    let path = Path::new("spec");
    let spec = &stateful_set.spec;
    let mut errors = Vec::new();
    let policy_path = path.child("podManagementPolicy");
    match spec.pod_management_policy.as_deref().unwrap_or("") {
        "" => errors.push(FieldError::required(&policy_path, "")),
        "OrderedReady" | "Parallel" => {}
        other => errors.push(FieldError::invalid(
            &policy_path,
            other,
            "must be 'OrderedReady' or 'Parallel'",
        )),
    }
    errors.extend(validate_update_strategy(
        spec,
        &path.child("updateStrategy"),
    ));
    errors.extend(validate_retention(
        spec.persistent_volume_claim_retention_policy.as_ref(),
        &path.child("persistentVolumeClaimRetentionPolicy"),
    ));
    errors.extend(nonnegative(
        spec.replicas.unwrap_or(0).into(),
        &path.child("replicas"),
    ));
    errors.extend(nonnegative_opt(
        spec.min_ready_seconds,
        &path.child("minReadySeconds"),
    ));
    if let Some(ordinals) = &spec.ordinals {
        errors.extend(nonnegative_opt(
            ordinals.start,
            &path.child("ordinals.start"),
        ));
    }
    errors.extend(super::template::validate(
        &spec.selector,
        true,
        &spec.template,
        "statefulset",
        "StatefulSet",
        &path,
    ));
    errors
}

/// The update strategy: OnDelete without rollingUpdate, or RollingUpdate with a valid
/// partition and maxUnavailable.
fn validate_update_strategy(spec: &StatefulSetSpec, path: &Path) -> ErrorList {
    let strategy = spec.update_strategy.as_ref();
    let rolling = strategy.and_then(|s| s.rolling_update.as_ref());
    match strategy.and_then(|s| s.type_.as_deref()).unwrap_or("") {
        "" => vec![FieldError::required(path, "")],
        "OnDelete" if rolling.is_some() => vec![FieldError::invalid(
            &path.child("rollingUpdate"),
            json(&rolling),
            "only allowed for updateStrategy 'RollingUpdate'",
        )],
        "OnDelete" => Vec::new(),
        "RollingUpdate" => rolling.map_or_else(Vec::new, |r| {
            validate_rolling_update(r, &path.child("rollingUpdate"))
        }),
        _ => vec![FieldError::invalid(
            path,
            json(&strategy),
            "must be 'RollingUpdate' or 'OnDelete'",
        )],
    }
}

/// `validateRollingUpdateStatefulSet`.
fn validate_rolling_update(rolling: &RollingUpdateStatefulSetStrategy, path: &Path) -> ErrorList {
    let mut errors = nonnegative_opt(rolling.partition, &path.child("partition"));
    if let Some(max_unavailable) = &rolling.max_unavailable {
        let at = path.child("maxUnavailable");
        errors.extend(int_or_percent(max_unavailable, &at));
        if int_or_percent_value(max_unavailable) == 0 {
            errors.push(FieldError::invalid(
                &at,
                json(max_unavailable),
                "cannot be 0",
            ));
        }
        errors.extend(not_more_than_100_percent(max_unavailable, &at));
    }
    errors
}

/// `ValidatePersistentVolumeClaimRetentionPolicy`.
fn validate_retention(
    policy: Option<&StatefulSetPersistentVolumeClaimRetentionPolicy>,
    path: &Path,
) -> ErrorList {
    let Some(policy) = policy else {
        return Vec::new();
    };
    [
        ("whenDeleted", &policy.when_deleted),
        ("whenScaled", &policy.when_scaled),
    ]
    .into_iter()
    .filter_map(|(name, value)| {
        let value = value.as_deref().unwrap_or("");
        (!matches!(value, "Retain" | "Delete"))
            .then(|| FieldError::not_supported(&path.child(name), value, &["Retain", "Delete"]))
    })
    .collect()
}

/// `ValidateStatefulSetUpdate`: only replicas, ordinals, template, updateStrategy,
/// persistentVolumeClaimRetentionPolicy and minReadySeconds may change; the status as
/// `ValidateStatefulSetStatusUpdate`.
pub fn validate_update(new: &StatefulSet, old: &StatefulSet) -> ErrorList {
    let mut errors = validate(new);
    {
        let (new_spec, old_spec) = (&new.spec, &old.spec);
        let mut masked = new_spec.clone();
        masked.replicas = old_spec.replicas;
        masked.template = old_spec.template.clone();
        masked.update_strategy = old_spec.update_strategy.clone();
        masked.min_ready_seconds = old_spec.min_ready_seconds;
        masked.ordinals = old_spec.ordinals.clone();
        masked.persistent_volume_claim_retention_policy =
            old_spec.persistent_volume_claim_retention_policy.clone();
        if masked != *old_spec {
            errors.push(FieldError::forbidden(
                &Path::new("spec"),
                "updates to statefulset spec for fields other than 'replicas', 'ordinals', \
                 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and \
                 'minReadySeconds' are forbidden",
            ));
        }
        errors.extend(immutable(
            &new_spec.selector,
            &old_spec.selector,
            &Path::new("spec").child("selector"),
        ));
    }
    errors.extend(validate_status_update(new, old));
    errors
}

/// `ValidateStatefulSetStatusUpdate` (metadata excepted).
pub fn validate_status_update(new: &StatefulSet, old: &StatefulSet) -> ErrorList {
    let path = Path::new("status");
    let default = StatefulSetStatus::default();
    let status = new.status.as_ref().unwrap_or(&default);
    let count = |v: Option<i32>| v.unwrap_or(0);
    let mut errors = nonnegative(status.replicas.into(), &path.child("replicas"));
    for (name, value) in [
        ("readyReplicas", status.ready_replicas),
        ("currentReplicas", status.current_replicas),
        ("updatedReplicas", status.updated_replicas),
        ("availableReplicas", status.available_replicas),
        ("collisionCount", status.collision_count),
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
            ("readyReplicas", count(status.ready_replicas)),
            ("currentReplicas", count(status.current_replicas)),
            ("updatedReplicas", count(status.updated_replicas)),
            ("availableReplicas", count(status.available_replicas)),
        ],
        &path,
    ));
    errors.extend(super::available_not_above_ready(
        count(status.available_replicas),
        count(status.ready_replicas),
        "status.readyReplicas",
        &path,
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

    fn stateful_set() -> StatefulSet {
        serde_json::from_value(json!({
            "spec": {
                "serviceName": "db",
                "selector": {"matchLabels": {"app": "db"}},
                "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}},
            },
        }))
        .unwrap()
    }

    #[test]
    fn defaults_match_upstream() {
        let mut sts = stateful_set();
        default(&mut sts);
        let spec = serde_json::to_value(&sts.spec).unwrap();
        assert_eq!(spec["podManagementPolicy"], "OrderedReady");
        assert_eq!(
            spec["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0, "maxUnavailable": 1}})
        );
        assert_eq!(
            spec["persistentVolumeClaimRetentionPolicy"],
            json!({"whenDeleted": "Retain", "whenScaled": "Retain"})
        );
        assert_eq!(spec["replicas"], 1);
        assert_eq!(spec["revisionHistoryLimit"], 10);
        assert!(validate(&sts).is_empty());
    }

    #[test]
    fn only_some_spec_fields_may_change() {
        let mut old = stateful_set();
        default(&mut old);
        let mut new = old.clone();
        new.spec.replicas = Some(3);
        assert!(validate_update(&new, &old).is_empty());
        new.spec.service_name = Some("other".into());
        let errors: Vec<String> = validate_update(&new, &old)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(errors.len(), 1);
        assert!(errors[0].starts_with(
            "spec: Forbidden: updates to statefulset spec for fields other than 'replicas'"
        ));
    }

    #[test]
    fn bad_policy_and_partition() {
        let mut sts = stateful_set();
        default(&mut sts);
        let spec = &mut sts.spec;
        spec.pod_management_policy = Some("Random".into());
        spec.update_strategy
            .as_mut()
            .unwrap()
            .rolling_update
            .as_mut()
            .unwrap()
            .partition = Some(-1);
        let errors: Vec<String> = validate(&sts).iter().map(ToString::to_string).collect();
        assert_eq!(
            errors,
            [
                r#"spec.podManagementPolicy: Invalid value: "Random": must be 'OrderedReady' or 'Parallel'"#,
                "spec.updateStrategy.rollingUpdate.partition: Invalid value: -1: must be greater than or equal to 0",
            ]
        );
    }
}
