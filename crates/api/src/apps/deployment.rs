//! Deployments: `SetDefaults_Deployment`, `ValidateDeployment`, `ValidateDeploymentUpdate`,
//! `ValidateDeploymentStatus`.

use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentStatus, DeploymentStrategy, RollingUpdateDeployment,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::field::{ErrorList, FieldError, Path};
use crate::validation::{
    immutable, int_or_percent, int_or_percent_value, json, nonnegative, nonnegative_opt,
    not_more_than_100_percent,
};

/// Replicas 1, strategy RollingUpdate with maxUnavailable and maxSurge 25%,
/// revisionHistoryLimit 10, progressDeadlineSeconds 600; pod template defaults.
pub fn default(deployment: &mut Deployment) {
    let spec = &mut deployment.spec;
    spec.replicas.get_or_insert(1);
    let strategy = spec.strategy.get_or_insert_with(Default::default);
    let kind = strategy
        .type_
        .get_or_insert_with(|| "RollingUpdate".to_owned());
    if kind == "RollingUpdate" {
        let rolling = strategy.rolling_update.get_or_insert_with(Default::default);
        rolling
            .max_unavailable
            .get_or_insert_with(|| IntOrString::String("25%".to_owned()));
        rolling
            .max_surge
            .get_or_insert_with(|| IntOrString::String("25%".to_owned()));
    }
    spec.revision_history_limit.get_or_insert(10);
    spec.progress_deadline_seconds.get_or_insert(600);
    super::template::default(&mut spec.template);
}

/// `ValidateDeploymentSpec` (metadata excepted).
pub fn validate(deployment: &Deployment) -> ErrorList {
    let path = Path::new("spec");
    let spec = &deployment.spec;
    let mut errors = nonnegative(spec.replicas.unwrap_or(0).into(), &path.child("replicas"));
    errors.extend(super::template::validate(
        &spec.selector,
        true,
        &spec.template,
        "deployment",
        "ReplicaSet",
        &path,
    ));
    errors.extend(validate_strategy(
        spec.strategy.as_ref(),
        &path.child("strategy"),
    ));
    let min_ready = spec.min_ready_seconds.unwrap_or(0);
    errors.extend(nonnegative(
        min_ready.into(),
        &path.child("minReadySeconds"),
    ));
    errors.extend(nonnegative_opt(
        spec.revision_history_limit,
        &path.child("revisionHistoryLimit"),
    ));
    if let Some(deadline) = spec.progress_deadline_seconds {
        let at = path.child("progressDeadlineSeconds");
        errors.extend(nonnegative(deadline.into(), &at));
        if deadline <= min_ready {
            errors.push(FieldError::invalid(
                &at,
                deadline,
                "must be greater than minReadySeconds",
            ));
        }
    }
    errors
}

/// `ValidateDeploymentStrategy`.
fn validate_strategy(strategy: Option<&DeploymentStrategy>, path: &Path) -> ErrorList {
    let kind = strategy.and_then(|s| s.type_.as_deref()).unwrap_or("");
    let rolling = strategy.and_then(|s| s.rolling_update.as_ref());
    match (kind, rolling) {
        ("Recreate", Some(_)) => vec![FieldError::forbidden(
            &path.child("rollingUpdate"),
            "may not be specified when strategy `type` is 'Recreate'",
        )],
        ("Recreate", None) => Vec::new(),
        ("RollingUpdate", None) => vec![FieldError::required(
            &path.child("rollingUpdate"),
            "this should be defaulted and never be nil",
        )],
        ("RollingUpdate", Some(rolling)) => {
            validate_rolling_update(rolling, &path.child("rollingUpdate"))
        }
        _ => vec![FieldError::not_supported(
            path,
            json(&strategy),
            &["Recreate", "RollingUpdate"],
        )],
    }
}

/// `ValidateRollingUpdateDeployment`.
fn validate_rolling_update(rolling: &RollingUpdateDeployment, path: &Path) -> ErrorList {
    let zero = IntOrString::Int(0);
    let max_unavailable = rolling.max_unavailable.as_ref().unwrap_or(&zero);
    let max_surge = rolling.max_surge.as_ref().unwrap_or(&zero);
    let unavailable_path = path.child("maxUnavailable");
    let mut errors = int_or_percent(max_unavailable, &unavailable_path);
    errors.extend(int_or_percent(max_surge, &path.child("maxSurge")));
    if int_or_percent_value(max_unavailable) == 0 && int_or_percent_value(max_surge) == 0 {
        errors.push(FieldError::invalid(
            &unavailable_path,
            json(max_unavailable),
            "may not be 0 when `maxSurge` is 0",
        ));
    }
    errors.extend(not_more_than_100_percent(
        max_unavailable,
        &unavailable_path,
    ));
    errors
}

/// `ValidateDeploymentUpdate` plus apps/v1's immutable selector; the status as
/// `ValidateDeploymentStatusUpdate`.
pub fn validate_update(new: &Deployment, old: &Deployment) -> ErrorList {
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

/// `ValidateDeploymentStatusUpdate` (metadata excepted).
pub fn validate_status_update(new: &Deployment, old: &Deployment) -> ErrorList {
    let path = Path::new("status");
    let default = DeploymentStatus::default();
    let status = new.status.as_ref().unwrap_or(&default);
    let mut errors = validate_status(status, &path);
    errors.extend(super::collision_count_not_decremented(
        status.collision_count,
        old.status.as_ref().and_then(|s| s.collision_count),
        &path,
    ));
    errors
}

/// `ValidateDeploymentStatus`.
fn validate_status(status: &DeploymentStatus, path: &Path) -> ErrorList {
    let count = |v: Option<i32>| v.unwrap_or(0);
    let replicas = count(status.replicas);
    let mut errors = nonnegative_opt(
        status.observed_generation,
        &path.child("observedGeneration"),
    );
    for (name, value) in [
        ("replicas", status.replicas),
        ("updatedReplicas", status.updated_replicas),
        ("readyReplicas", status.ready_replicas),
        ("availableReplicas", status.available_replicas),
        ("unavailableReplicas", status.unavailable_replicas),
        ("collisionCount", status.collision_count),
    ] {
        errors.extend(nonnegative_opt(value, &path.child(name)));
    }
    errors.extend(super::not_above_replicas(
        replicas,
        &[
            ("updatedReplicas", count(status.updated_replicas)),
            ("readyReplicas", count(status.ready_replicas)),
            ("availableReplicas", count(status.available_replicas)),
        ],
        path,
    ));
    errors.extend(super::available_not_above_ready(
        count(status.available_replicas),
        count(status.ready_replicas),
        "readyReplicas",
        path,
    ));
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment(value: serde_json::Value) -> Deployment {
        serde_json::from_value(value).unwrap()
    }

    fn nginx() -> Deployment {
        deployment(json!({
            "metadata": {"name": "web"},
            "spec": {
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "nginx", "image": "nginx"}]},
                },
            },
        }))
    }

    fn messages(errors: &ErrorList) -> Vec<String> {
        errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn defaults_match_upstream() {
        let mut d = nginx();
        default(&mut d);
        let spec = serde_json::to_value(&d.spec).unwrap();
        assert_eq!(spec["replicas"], 1);
        assert_eq!(
            spec["strategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
        );
        assert_eq!(spec["revisionHistoryLimit"], 10);
        assert_eq!(spec["progressDeadlineSeconds"], 600);
        assert_eq!(spec["template"]["spec"]["restartPolicy"], "Always");
    }

    #[test]
    fn recreate_gets_no_rolling_update_defaults() {
        let mut d = nginx();
        d.spec.strategy = Some(DeploymentStrategy {
            type_: Some("Recreate".into()),
            rolling_update: None,
        });
        default(&mut d);
        assert!(validate(&d).is_empty());
        assert!(d.spec.strategy.unwrap().rolling_update.is_none());
    }

    #[test]
    fn validation_messages_match_upstream() {
        let mut d = nginx();
        default(&mut d);
        assert_eq!(messages(&validate(&d)), Vec::<String>::new());
        let spec = &mut d.spec;
        spec.replicas = Some(-1);
        spec.progress_deadline_seconds = Some(5);
        spec.min_ready_seconds = Some(10);
        let rolling = spec
            .strategy
            .as_mut()
            .unwrap()
            .rolling_update
            .as_mut()
            .unwrap();
        rolling.max_unavailable = Some(IntOrString::Int(0));
        rolling.max_surge = Some(IntOrString::String("0%".into()));
        assert_eq!(
            messages(&validate(&d)),
            [
                "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
                "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: 0: may not be 0 when `maxSurge` is 0",
                "spec.progressDeadlineSeconds: Invalid value: 5: must be greater than minReadySeconds",
            ]
        );
    }

    #[test]
    fn unknown_strategy_is_not_supported() {
        let mut d = nginx();
        d.spec.strategy = Some(DeploymentStrategy {
            type_: Some("BlueGreen".into()),
            rolling_update: None,
        });
        default(&mut d);
        let errors = messages(&validate(&d));
        assert_eq!(errors.len(), 1);
        assert!(
            errors[0].starts_with("spec.strategy: Unsupported value: "),
            "{errors:?}"
        );
        assert!(errors[0].ends_with(r#"supported values: "Recreate", "RollingUpdate""#));
    }

    #[test]
    fn selector_is_immutable() {
        let mut old = nginx();
        default(&mut old);
        let mut new = old.clone();
        let spec = &mut new.spec;
        spec.selector.match_labels = Some([("app".to_owned(), "web2".to_owned())].into());
        spec.template.metadata.as_mut().unwrap().labels =
            Some([("app".to_owned(), "web2".to_owned())].into());
        assert_eq!(
            messages(&validate_update(&new, &old)),
            [r#"spec.selector: Invalid value: {"matchLabels":{"app":"web2"}}: field is immutable"#]
        );
    }

    #[test]
    fn status_counts_are_bounded_by_replicas() {
        let old = nginx();
        let mut new = old.clone();
        new.status = Some(DeploymentStatus {
            replicas: Some(1),
            ready_replicas: Some(2),
            available_replicas: Some(2),
            ..Default::default()
        });
        assert_eq!(
            messages(&validate_status_update(&new, &old)),
            [
                "status.readyReplicas: Invalid value: 2: cannot be greater than status.replicas",
                "status.availableReplicas: Invalid value: 2: cannot be greater than status.replicas",
            ]
        );
    }
}
