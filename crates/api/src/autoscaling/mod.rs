//! autoscaling HorizontalPodAutoscalers, served as autoscaling/v2 (the storage version)
//! and autoscaling/v1: upstream's defaults (`pkg/apis/autoscaling/v{1,2}/defaults.go`),
//! validation (`pkg/apis/autoscaling/validation`, run on the v2 form as upstream runs it on
//! the internal form, so that v1 requests get the same messages and field paths), the
//! strategy's field rules (`pkg/registry/autoscaling/horizontalpodautoscaler/strategy.go`)
//! and, in [`conversion`], the v1 <-> v2 conversion with its round-trip annotations.
//! Upstream 1.33 with its default feature gates: no scale to zero (`HPAScaleToZero`), no
//! configurable tolerance (`HPAConfigurableTolerance`).

pub mod conversion;

use k8s_openapi::api::autoscaling::{v1, v2};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::field::{ErrorList, FieldError, Path};
use crate::names;
use crate::quantity;
use crate::validation::nonnegative;

/// Holds the v2 spec metrics that autoscaling/v1 cannot (all but the CPU utilization one).
pub const METRIC_SPECS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/metrics";
/// Holds the v2 status metrics in autoscaling/v1.
pub const METRIC_STATUSES_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/current-metrics";
/// Holds the v2 status conditions in autoscaling/v1.
pub const CONDITIONS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/conditions";
/// Holds the v2 scaling behavior in autoscaling/v1.
pub const BEHAVIOR_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/behavior";
/// Every annotation [`conversion`] uses to carry v2 fields through v1.
pub const ROUND_TRIP_ANNOTATIONS: [&str; 4] = [
    METRIC_SPECS_ANNOTATION,
    BEHAVIOR_ANNOTATION,
    METRIC_STATUSES_ANNOTATION,
    CONDITIONS_ANNOTATION,
];

/// The CPU utilization target of an autoscaler without metrics (percent).
pub const DEFAULT_CPU_UTILIZATION: i32 = 80;
/// The longest scaling policy period, in seconds.
pub const MAX_PERIOD_SECONDS: i32 = 1800;
/// The longest stabilization window, in seconds.
pub const MAX_STABILIZATION_WINDOW_SECONDS: i32 = 3600;

/// Removes the round-trip annotations from `metadata` (upstream's
/// `DropRoundTripHorizontalPodAutoscalerAnnotations`); an emptied map goes, as Go omits
/// it. Returns whether one was there.
pub fn drop_round_trip_annotations(metadata: &mut ObjectMeta) -> bool {
    let Some(annotations) = metadata.annotations.as_mut() else {
        return false;
    };
    let mut dropped = false;
    for key in ROUND_TRIP_ANNOTATIONS {
        dropped |= annotations.remove(key).is_some();
    }
    if annotations.is_empty() {
        metadata.annotations = None;
    }
    dropped
}

/// autoscaling/v1 defaults: `minReplicas` 1.
pub fn default_v1(hpa: &mut v1::HorizontalPodAutoscaler) {
    hpa.spec.min_replicas.get_or_insert(1);
}

/// autoscaling/v2 defaults: `minReplicas` 1, an 80% CPU utilization metric when there is
/// none, and, when a behavior is given, every unset field of its scale-up rules (no
/// stabilization, `Max` of 4 pods or 100% per 15 s) and scale-down rules (`Max` of 100%
/// per 15 s; the stabilization window stays unset: the controller's flag decides).
pub fn default_v2(hpa: &mut v2::HorizontalPodAutoscaler) {
    let spec = &mut hpa.spec;
    spec.min_replicas.get_or_insert(1);
    if spec.metrics.as_ref().is_none_or(Vec::is_empty) {
        spec.metrics = Some(vec![conversion::cpu_utilization(DEFAULT_CPU_UTILIZATION)]);
    }
    if let Some(behavior) = spec.behavior.as_mut() {
        let policy = |type_: &str, value| v2::HPAScalingPolicy {
            type_: type_.to_owned(),
            value,
            period_seconds: 15,
        };
        let up = v2::HPAScalingRules {
            stabilization_window_seconds: Some(0),
            select_policy: Some("Max".to_owned()),
            policies: Some(vec![policy("Pods", 4), policy("Percent", 100)]),
            tolerance: None,
        };
        let down = v2::HPAScalingRules {
            stabilization_window_seconds: None,
            select_policy: Some("Max".to_owned()),
            policies: Some(vec![policy("Percent", 100)]),
            tolerance: None,
        };
        behavior.scale_up = Some(fill_rules(behavior.scale_up.take(), up));
        behavior.scale_down = Some(fill_rules(behavior.scale_down.take(), down));
    }
}

/// `defaults` with every field `given` sets (upstream's `copyHPAScalingRules`).
fn fill_rules(
    given: Option<v2::HPAScalingRules>,
    defaults: v2::HPAScalingRules,
) -> v2::HPAScalingRules {
    let Some(given) = given else {
        return defaults;
    };
    v2::HPAScalingRules {
        stabilization_window_seconds: given
            .stabilization_window_seconds
            .or(defaults.stabilization_window_seconds),
        select_policy: given.select_policy.or(defaults.select_policy),
        policies: given.policies.or(defaults.policies),
        tolerance: given.tolerance.or(defaults.tolerance),
    }
}

/// The strategy's PrepareForCreate: no status from the client, and no tolerance (its
/// feature gate is off).
pub fn prepare_for_create(hpa: &mut v2::HorizontalPodAutoscaler) {
    hpa.status = Some(Default::default());
    drop_disabled_fields(hpa, None);
}

/// The strategy's PrepareForUpdate of the main resource: the status stays `old`'s, and a
/// tolerance only stays when `old` already had one.
pub fn prepare_for_update(
    new: &mut v2::HorizontalPodAutoscaler,
    old: &v2::HorizontalPodAutoscaler,
) {
    new.status = old.status.clone();
    drop_disabled_fields(new, Some(old));
}

/// The `/status` strategy's PrepareForUpdate: the spec stays `old`'s.
pub fn prepare_for_status_update(
    new: &mut v2::HorizontalPodAutoscaler,
    old: &v2::HorizontalPodAutoscaler,
) {
    new.spec = old.spec.clone();
}

fn tolerance_in_use(hpa: &v2::HorizontalPodAutoscaler) -> bool {
    hpa.spec.behavior.as_ref().is_some_and(|b| {
        [&b.scale_up, &b.scale_down]
            .into_iter()
            .flatten()
            .any(|rules| rules.tolerance.is_some())
    })
}

/// Drops the scaling rules' `tolerance` unless `old` uses it (upstream's
/// `dropDisabledFields` with `HPAConfigurableTolerance` off, its 1.33 default).
pub fn drop_disabled_fields(
    new: &mut v2::HorizontalPodAutoscaler,
    old: Option<&v2::HorizontalPodAutoscaler>,
) {
    if old.is_some_and(tolerance_in_use) {
        return;
    }
    if let Some(behavior) = new.spec.behavior.as_mut() {
        for rules in [&mut behavior.scale_up, &mut behavior.scale_down]
            .into_iter()
            .flatten()
        {
            rules.tolerance = None;
        }
    }
}

/// Validation of a new autoscaler (`ValidateHorizontalPodAutoscaler` without the
/// metadata): `minReplicas` at least 1, the target reference, metrics and behavior.
pub fn validate(hpa: &v2::HorizontalPodAutoscaler) -> ErrorList {
    validate_spec(&hpa.spec, &Path::new("spec"), 1)
}

/// Validation of an update (`ValidateHorizontalPodAutoscalerUpdate`): as [`validate`],
/// except that `minReplicas` 0 stays allowed where `old` has it.
pub fn validate_update(
    new: &v2::HorizontalPodAutoscaler,
    old: &v2::HorizontalPodAutoscaler,
) -> ErrorList {
    let lower_bound = if old.spec.min_replicas == Some(0) {
        0
    } else {
        1
    };
    validate_spec(&new.spec, &Path::new("spec"), lower_bound)
}

/// Validation of a `/status` update (`ValidateHorizontalPodAutoscalerStatusUpdate`):
/// replica counts not negative.
pub fn validate_status_update(hpa: &v2::HorizontalPodAutoscaler) -> ErrorList {
    let status = hpa.status.clone().unwrap_or_default();
    let path = Path::new("status");
    let mut errors = nonnegative(
        i64::from(status.current_replicas.unwrap_or(0)),
        &path.child("currentReplicas"),
    );
    errors.extend(nonnegative(
        i64::from(status.desired_replicas),
        &path.child("desiredReplicas"),
    ));
    errors
}

fn validate_spec(
    spec: &v2::HorizontalPodAutoscalerSpec,
    path: &Path,
    min_replicas_lower_bound: i32,
) -> ErrorList {
    let mut errors = Vec::new();
    if let Some(min) = spec.min_replicas
        && min < min_replicas_lower_bound
    {
        errors.push(FieldError::invalid(
            &path.child("minReplicas"),
            min,
            format!("must be greater than or equal to {min_replicas_lower_bound}"),
        ));
    }
    let max = spec.max_replicas;
    if max < 1 {
        errors.push(FieldError::invalid(
            &path.child("maxReplicas"),
            max,
            "must be greater than 0",
        ));
    }
    if spec.min_replicas.is_some_and(|min| max < min) {
        errors.push(FieldError::invalid(
            &path.child("maxReplicas"),
            max,
            "must be greater than or equal to `minReplicas`",
        ));
    }
    errors.extend(validate_reference(
        &spec.scale_target_ref,
        &path.child("scaleTargetRef"),
    ));
    errors.extend(validate_metrics(
        spec.metrics.as_deref().unwrap_or_default(),
        &path.child("metrics"),
        spec.min_replicas,
    ));
    if let Some(behavior) = &spec.behavior {
        let path = path.child("behavior");
        if let Some(rules) = &behavior.scale_up {
            errors.extend(validate_scaling_rules(rules, &path.child("scaleUp")));
        }
        if let Some(rules) = &behavior.scale_down {
            errors.extend(validate_scaling_rules(rules, &path.child("scaleDown")));
        }
    }
    errors
}

/// `ValidateCrossVersionObjectReference`: kind and name required, each a valid path segment.
fn validate_reference(reference: &v2::CrossVersionObjectReference, path: &Path) -> ErrorList {
    let mut errors = Vec::new();
    for (field, value) in [("kind", &reference.kind), ("name", &reference.name)] {
        let path = path.child(field);
        if value.is_empty() {
            errors.push(FieldError::required(&path, ""));
        } else {
            for message in names::validate_path_segment_name(value, false) {
                errors.push(FieldError::invalid(&path, value.as_str(), message));
            }
        }
    }
    errors
}

fn validate_metrics(
    metrics: &[v2::MetricSpec],
    path: &Path,
    min_replicas: Option<i32>,
) -> ErrorList {
    let mut errors = Vec::new();
    for (i, metric) in metrics.iter().enumerate() {
        errors.extend(validate_metric_spec(metric, &path.index(i)));
    }
    let scales_on_objects = metrics
        .iter()
        .any(|m| m.type_ == "Object" || m.type_ == "External");
    if min_replicas == Some(0) && !scales_on_objects {
        errors.push(FieldError::forbidden(
            path,
            "must specify at least one Object or External metric to support scaling to zero replicas",
        ));
    }
    errors
}

/// The metric source types, sorted as upstream lists them.
const METRIC_SOURCE_TYPES: [&str; 5] = [
    "ContainerResource",
    "External",
    "Object",
    "Pods",
    "Resource",
];

fn validate_metric_spec(spec: &v2::MetricSpec, path: &Path) -> ErrorList {
    let mut errors = Vec::new();
    if spec.type_.is_empty() {
        errors.push(FieldError::required(
            &path.child("type"),
            "must specify a metric source type",
        ));
    }
    if !METRIC_SOURCE_TYPES.contains(&spec.type_.as_str()) {
        errors.push(FieldError::not_supported(
            &path.child("type"),
            spec.type_.as_str(),
            &METRIC_SOURCE_TYPES,
        ));
    }

    // The sources given, in upstream's order; only the first is validated.
    let mut present: Vec<&str> = Vec::new();
    let mut check = |field: &'static str, given: bool, validate: &dyn Fn(&Path) -> ErrorList| {
        if given {
            present.push(field);
            if present.len() == 1 {
                errors.extend(validate(&path.child(field)));
            }
        }
    };
    check("object", spec.object.is_some(), &|p| {
        spec.object
            .as_ref()
            .map(|s| validate_object_source(s, p))
            .unwrap_or_default()
    });
    check("external", spec.external.is_some(), &|p| {
        spec.external
            .as_ref()
            .map(|s| validate_external_source(s, p))
            .unwrap_or_default()
    });
    check("pods", spec.pods.is_some(), &|p| {
        spec.pods
            .as_ref()
            .map(|s| validate_pods_source(s, p))
            .unwrap_or_default()
    });
    check("resource", spec.resource.is_some(), &|p| {
        spec.resource
            .as_ref()
            .map(|s| validate_resource_source(s, p))
            .unwrap_or_default()
    });
    check(
        "containerResource",
        spec.container_resource.is_some(),
        &|p| {
            spec.container_resource
                .as_ref()
                .map(|s| validate_container_resource_source(s, p))
                .unwrap_or_default()
        },
    );

    let expected = match spec.type_.as_str() {
        "Object" => Some(("object", spec.object.is_some())),
        "Pods" => Some(("pods", spec.pods.is_some())),
        "Resource" => Some(("resource", spec.resource.is_some())),
        "External" => Some(("external", spec.external.is_some())),
        "ContainerResource" => Some(("containerResource", spec.container_resource.is_some())),
        _ => None,
    };
    match expected {
        Some((field, false)) => errors.push(FieldError::required(
            &path.child(field),
            "must populate information for the given metric source",
        )),
        Some(_) => {}
        None => errors.push(FieldError::not_supported(
            &path.child("type"),
            spec.type_.as_str(),
            &METRIC_SOURCE_TYPES,
        )),
    }
    if present.len() != 1 {
        let expected = expected.map(|(field, _)| field);
        let mut others: Vec<&str> = present
            .into_iter()
            .filter(|f| Some(*f) != expected)
            .collect();
        others.sort_unstable();
        for field in others {
            errors.push(FieldError::forbidden(
                &path.child(field),
                "must populate the given metric source only",
            ));
        }
    }
    errors
}

fn validate_object_source(source: &v2::ObjectMetricSource, path: &Path) -> ErrorList {
    let mut errors = validate_reference(&source.described_object, &path.child("describedObject"));
    errors.extend(validate_metric_identifier(
        &source.metric,
        &path.child("metric"),
    ));
    errors.extend(validate_metric_target(
        &source.target,
        &path.child("target"),
    ));
    if source.target.value.is_none() && source.target.average_value.is_none() {
        errors.push(FieldError::required(
            &path.child("target").child("averageValue"),
            "must set either a target value or averageValue",
        ));
    }
    errors
}

fn validate_external_source(source: &v2::ExternalMetricSource, path: &Path) -> ErrorList {
    let mut errors = validate_metric_identifier(&source.metric, &path.child("metric"));
    errors.extend(validate_metric_target(
        &source.target,
        &path.child("target"),
    ));
    let target = &source.target;
    if target.value.is_none() && target.average_value.is_none() {
        errors.push(FieldError::required(
            &path.child("target").child("averageValue"),
            "must set either a target value for metric or a per-pod target",
        ));
    }
    if target.value.is_some() && target.average_value.is_some() {
        errors.push(FieldError::forbidden(
            &path.child("target").child("value"),
            "may not set both a target value for metric and a per-pod target",
        ));
    }
    errors
}

fn validate_pods_source(source: &v2::PodsMetricSource, path: &Path) -> ErrorList {
    let mut errors = validate_metric_identifier(&source.metric, &path.child("metric"));
    errors.extend(validate_metric_target(
        &source.target,
        &path.child("target"),
    ));
    if source.target.average_value.is_none() {
        errors.push(FieldError::required(
            &path.child("target").child("averageValue"),
            "must specify a positive target averageValue",
        ));
    }
    errors
}

/// A resource target needs a utilization or an average value, not both.
fn validate_resource_target(target: &v2::MetricTarget, path: &Path) -> ErrorList {
    let mut errors = validate_metric_target(target, path);
    if target.average_utilization.is_none() && target.average_value.is_none() {
        errors.push(FieldError::required(
            &path.child("averageUtilization"),
            "must set either a target raw value or a target utilization",
        ));
    }
    if target.average_utilization.is_some() && target.average_value.is_some() {
        errors.push(FieldError::forbidden(
            &path.child("averageValue"),
            "may not set both a target raw value and a target utilization",
        ));
    }
    errors
}

fn validate_resource_source(source: &v2::ResourceMetricSource, path: &Path) -> ErrorList {
    let mut errors = Vec::new();
    if source.name.is_empty() {
        errors.push(FieldError::required(
            &path.child("name"),
            "must specify a resource name",
        ));
    }
    errors.extend(validate_resource_target(
        &source.target,
        &path.child("target"),
    ));
    errors
}

fn validate_container_resource_source(
    source: &v2::ContainerResourceMetricSource,
    path: &Path,
) -> ErrorList {
    let mut errors = Vec::new();
    let name_path = path.child("name");
    if source.name.is_empty() {
        errors.push(FieldError::required(
            &name_path,
            "must specify a resource name",
        ));
    } else {
        errors.extend(validate_container_resource_name(&source.name, &name_path));
    }
    let container_path = path.child("container");
    if source.container.is_empty() {
        errors.push(FieldError::required(
            &container_path,
            "must specify a container",
        ));
    } else {
        for message in names::is_dns1123_label(&source.container) {
            errors.push(FieldError::invalid(
                &container_path,
                source.container.as_str(),
                message,
            ));
        }
    }
    errors.extend(validate_resource_target(
        &source.target,
        &path.child("target"),
    ));
    errors
}

/// A container's resource name (upstream core/v1 `ValidateContainerResourceName`): a
/// qualified name; unprefixed, one of the standard container resources; prefixed outside
/// `kubernetes.io`, an extended resource name.
fn validate_container_resource_name(name: &str, path: &Path) -> ErrorList {
    let mut errors: ErrorList = names::is_qualified_name(name)
        .into_iter()
        .map(|message| FieldError::invalid(path, name, message))
        .collect();
    if !name.contains('/') {
        let standard = matches!(name, "cpu" | "memory" | "ephemeral-storage")
            || name.starts_with("hugepages-");
        if !standard {
            errors.push(FieldError::invalid(
                path,
                name,
                "must be a standard resource for containers",
            ));
        }
    } else {
        let native = name.contains("kubernetes.io/");
        let extended = !native
            && !name.starts_with("requests.")
            && names::is_qualified_name(&format!("requests.{name}")).is_empty();
        if !native && !extended {
            errors.push(FieldError::invalid(
                path,
                name,
                "doesn't follow extended resource name standard",
            ));
        }
    }
    errors
}

fn validate_metric_target(target: &v2::MetricTarget, path: &Path) -> ErrorList {
    let mut errors = Vec::new();
    if target.type_.is_empty() {
        errors.push(FieldError::required(
            &path.child("type"),
            "must specify a metric target type",
        ));
    }
    if !matches!(
        target.type_.as_str(),
        "Utilization" | "Value" | "AverageValue"
    ) {
        errors.push(FieldError::invalid(
            &path.child("type"),
            target.type_.as_str(),
            "must be either Utilization, Value, or AverageValue",
        ));
    }
    for (field, value) in [
        ("value", &target.value),
        ("averageValue", &target.average_value),
    ] {
        if let Some(value) = value
            && !quantity::parse(value).is_some_and(|v| v > 0.0)
        {
            errors.push(FieldError::invalid(
                &path.child(field),
                value.0.as_str(),
                "must be positive",
            ));
        }
    }
    if let Some(utilization) = target.average_utilization
        && utilization < 1
    {
        errors.push(FieldError::invalid(
            &path.child("averageUtilization"),
            utilization,
            "must be greater than 0",
        ));
    }
    errors
}

fn validate_metric_identifier(identifier: &v2::MetricIdentifier, path: &Path) -> ErrorList {
    let path = path.child("name");
    if identifier.name.is_empty() {
        return vec![FieldError::required(&path, "must specify a metric name")];
    }
    names::validate_path_segment_name(&identifier.name, false)
        .into_iter()
        .map(|message| FieldError::invalid(&path, identifier.name.as_str(), message))
        .collect()
}

fn validate_scaling_rules(rules: &v2::HPAScalingRules, path: &Path) -> ErrorList {
    let mut errors = Vec::new();
    if let Some(window) = rules.stabilization_window_seconds {
        let window_path = path.child("stabilizationWindowSeconds");
        if window < 0 {
            errors.push(FieldError::invalid(
                &window_path,
                window,
                "must be greater than or equal to zero",
            ));
        }
        if window > MAX_STABILIZATION_WINDOW_SECONDS {
            errors.push(FieldError::invalid(
                &window_path,
                window,
                format!("must be less than or equal to {MAX_STABILIZATION_WINDOW_SECONDS}"),
            ));
        }
    }
    if let Some(policy) = &rules.select_policy
        && !matches!(policy.as_str(), "Disabled" | "Max" | "Min")
    {
        errors.push(FieldError::not_supported(
            &path.child("selectPolicy"),
            policy.as_str(),
            &["Disabled", "Max", "Min"],
        ));
    }
    let policies_path = path.child("policies");
    let policies = rules.policies.as_deref().unwrap_or_default();
    if policies.is_empty() {
        errors.push(FieldError::required(
            &policies_path,
            "must specify at least one Policy",
        ));
    }
    for (i, policy) in policies.iter().enumerate() {
        let path = policies_path.index(i);
        if !matches!(policy.type_.as_str(), "Pods" | "Percent") {
            errors.push(FieldError::not_supported(
                &path.child("type"),
                policy.type_.as_str(),
                &["Percent", "Pods"],
            ));
        }
        if policy.value <= 0 {
            errors.push(FieldError::invalid(
                &path.child("value"),
                policy.value,
                "must be greater than zero",
            ));
        }
        let period_path = path.child("periodSeconds");
        if policy.period_seconds <= 0 {
            errors.push(FieldError::invalid(
                &period_path,
                policy.period_seconds,
                "must be greater than zero",
            ));
        }
        if policy.period_seconds > MAX_PERIOD_SECONDS {
            errors.push(FieldError::invalid(
                &period_path,
                policy.period_seconds,
                format!("must be less than or equal to {MAX_PERIOD_SECONDS}"),
            ));
        }
    }
    if let Some(tolerance) = &rules.tolerance
        && quantity::parse(tolerance).is_some_and(|v| v < 0.0)
    {
        errors.push(FieldError::invalid(
            &path.child("tolerance"),
            tolerance.0.as_str(),
            "must be greater than or equal to zero",
        ));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn hpa(spec: serde_json::Value) -> v2::HorizontalPodAutoscaler {
        serde_json::from_value(json!({"metadata": {"name": "web"}, "spec": spec})).expect("hpa")
    }

    fn messages(errors: &ErrorList) -> Vec<String> {
        errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn defaults_fill_min_replicas_metrics_and_behavior() {
        let mut object = hpa(json!({
            "scaleTargetRef": {"kind": "Deployment", "name": "web"},
            "maxReplicas": 5,
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}},
        }));
        default_v2(&mut object);
        assert_eq!(
            serde_json::to_value(&object.spec).expect("json"),
            json!({
                "scaleTargetRef": {"kind": "Deployment", "name": "web"},
                "minReplicas": 1,
                "maxReplicas": 5,
                "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                             "target": {"type": "Utilization", "averageUtilization": 80}}}],
                "behavior": {
                    "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [
                        {"type": "Pods", "value": 4, "periodSeconds": 15},
                        {"type": "Percent", "value": 100, "periodSeconds": 15}]},
                    "scaleDown": {"stabilizationWindowSeconds": 60, "selectPolicy": "Max", "policies": [
                        {"type": "Percent", "value": 100, "periodSeconds": 15}]},
                },
            })
        );
    }

    #[test]
    fn validation_messages_and_paths_are_upstreams() {
        let object = hpa(json!({
            "scaleTargetRef": {"kind": "", "name": "a/b"},
            "minReplicas": 0,
            "maxReplicas": -1,
            "metrics": [
                {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 0}}},
                {"type": "Pods", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "1"}}},
            ],
            "behavior": {"scaleUp": {"selectPolicy": "Most", "policies": [{"type": "Pods", "value": 0, "periodSeconds": 1801}]}},
        }));
        assert_eq!(
            messages(&validate(&object)),
            [
                "spec.minReplicas: Invalid value: 0: must be greater than or equal to 1",
                "spec.maxReplicas: Invalid value: -1: must be greater than 0",
                "spec.maxReplicas: Invalid value: -1: must be greater than or equal to `minReplicas`",
                "spec.scaleTargetRef.kind: Required value",
                "spec.scaleTargetRef.name: Invalid value: \"a/b\": may not contain '/'",
                "spec.metrics[0].resource.target.averageUtilization: Invalid value: 0: must be greater than 0",
                "spec.metrics[1].pods: Required value: must populate information for the given metric source",
                "spec.metrics: Forbidden: must specify at least one Object or External metric to support scaling to zero replicas",
                "spec.behavior.scaleUp.selectPolicy: Unsupported value: \"Most\": supported values: \"Disabled\", \"Max\", \"Min\"",
                "spec.behavior.scaleUp.policies[0].value: Invalid value: 0: must be greater than zero",
                "spec.behavior.scaleUp.policies[0].periodSeconds: Invalid value: 1801: must be less than or equal to 1800",
            ]
        );
        // An autoscaler already at zero may stay there.
        let mut old = object.clone();
        old.spec.min_replicas = Some(0);
        assert!(
            !messages(&validate_update(&object, &old))
                .iter()
                .any(|m| m.starts_with("spec.minReplicas"))
        );
    }

    #[test]
    fn tolerance_is_dropped_unless_already_used() {
        let mut object = hpa(json!({
            "scaleTargetRef": {"kind": "Deployment", "name": "web"},
            "maxReplicas": 5,
            "behavior": {"scaleUp": {"tolerance": "0.05"}},
        }));
        let old = object.clone();
        prepare_for_update(&mut object, &old);
        assert!(tolerance_in_use(&object));
        prepare_for_create(&mut object);
        assert!(!tolerance_in_use(&object));
        assert_eq!(object.status, Some(Default::default()));
    }
}
