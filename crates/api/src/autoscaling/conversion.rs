//! autoscaling/v1 <-> autoscaling/v2 HorizontalPodAutoscalers, as upstream converts them
//! through its internal version (`pkg/apis/autoscaling/v1/conversion.go`, 1.33).
//!
//! autoscaling/v1 only holds a CPU utilization target. Whatever else a v2 object has is
//! kept in annotations of the v1 object, so that a v2 object read as v1 and written back
//! loses nothing:
//!
//! - [`METRIC_SPECS_ANNOTATION`]: the spec metrics other than CPU utilization, as a JSON
//!   list of autoscaling/v1 `MetricSpec` (the v2beta1 shape: `targetAverageUtilization`,
//!   `targetAverageValue`, `metricName`, ...);
//! - [`METRIC_STATUSES_ANNOTATION`]: every status metric, as v1 `MetricStatus`;
//! - [`CONDITIONS_ANNOTATION`]: the status conditions, as v1 `HorizontalPodAutoscalerCondition`;
//! - [`BEHAVIOR_ANNOTATION`]: the scaling behavior, encoded as upstream encodes its
//!   internal type (Go field names: `{"ScaleUp":{"StabilizationWindowSeconds":0,...}}`).
//!
//! Converting back reads them (a malformed one is ignored, as upstream does) and removes
//! them. As upstream, the CPU utilization metric goes after the others on the way back, a
//! v1 object without metrics gets the default 80% CPU target, and a metric's value that v1
//! declares required (`targetValue`, `currentAverageValue`, ...) reads back as `0` when
//! the v2 object had none.
//!
//! These are pure functions over the k8s-openapi types; the API server serves v1 by
//! converting to v2 (the storage version) on every write and back on every read.

use std::collections::BTreeMap;

use k8s_openapi::api::autoscaling::{v1, v2};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::{
    BEHAVIOR_ANNOTATION, CONDITIONS_ANNOTATION, DEFAULT_CPU_UTILIZATION, METRIC_SPECS_ANNOTATION,
    METRIC_STATUSES_ANNOTATION, drop_round_trip_annotations,
};

/// The name of the CPU resource (`v1.ResourceCPU`).
const CPU: &str = "cpu";
const RESOURCE: &str = "Resource";

/// A v2 object as autoscaling/v1 shows it (upstream's internal -> v1 conversion).
pub fn v2_to_v1(hpa: v2::HorizontalPodAutoscaler) -> v1::HorizontalPodAutoscaler {
    let v2::HorizontalPodAutoscaler {
        mut metadata,
        spec,
        status,
    } = hpa;
    // Annotations a client set are never trusted: only the ones made here are kept.
    drop_round_trip_annotations(&mut metadata);
    let metrics = spec.metrics.unwrap_or_default();
    let status = status.unwrap_or_default();
    let current_metrics = status.current_metrics.unwrap_or_default();
    let conditions = status.conditions.unwrap_or_default();

    let other_metrics: Vec<V1MetricSpec> = metrics
        .iter()
        .filter(|m| !is_cpu_utilization_target(m))
        .map(metric_spec_to_v1)
        .collect();
    let mut annotations = BTreeMap::new();
    if !other_metrics.is_empty() {
        annotations.insert(METRIC_SPECS_ANNOTATION, to_json(&other_metrics));
    }
    if !current_metrics.is_empty() {
        let statuses: Vec<V1MetricStatus> =
            current_metrics.iter().map(metric_status_to_v1).collect();
        annotations.insert(METRIC_STATUSES_ANNOTATION, to_json(&statuses));
    }
    if !conditions.is_empty() {
        let conditions: Vec<V1Condition> = conditions.iter().map(V1Condition::from).collect();
        annotations.insert(CONDITIONS_ANNOTATION, to_json(&conditions));
    }
    if let Some(behavior) = &spec.behavior {
        annotations.insert(
            BEHAVIOR_ANNOTATION,
            to_json(&InternalBehavior::from(behavior)),
        );
    }
    if !annotations.is_empty() {
        let map = metadata.annotations.get_or_insert_with(BTreeMap::new);
        for (key, value) in annotations {
            map.insert(key.to_owned(), value);
        }
    }

    // The first CPU resource metric gives the target (none if it has no utilization).
    let target_cpu_utilization_percentage = metrics
        .iter()
        .find_map(|m| cpu_resource(m).map(|r| r.target.average_utilization))
        .flatten();
    // The last CPU resource status with a utilization gives the current value.
    let current_cpu_utilization_percentage = current_metrics
        .iter()
        .filter(|m| m.type_ == RESOURCE)
        .filter_map(|m| m.resource.as_ref())
        .filter(|r| r.name == CPU)
        .filter_map(|r| r.current.average_utilization)
        .next_back();

    v1::HorizontalPodAutoscaler {
        metadata,
        spec: v1::HorizontalPodAutoscalerSpec {
            max_replicas: spec.max_replicas,
            min_replicas: spec.min_replicas,
            scale_target_ref: v1::CrossVersionObjectReference {
                api_version: spec.scale_target_ref.api_version,
                kind: spec.scale_target_ref.kind,
                name: spec.scale_target_ref.name,
            },
            target_cpu_utilization_percentage,
        },
        status: Some(v1::HorizontalPodAutoscalerStatus {
            current_cpu_utilization_percentage,
            current_replicas: status.current_replicas.unwrap_or(0),
            desired_replicas: status.desired_replicas,
            last_scale_time: status.last_scale_time,
            observed_generation: status.observed_generation,
        }),
    }
}

/// A v1 object as autoscaling/v2 holds it (upstream's v1 -> internal conversion): the
/// round-trip annotations become fields again and are removed.
pub fn v1_to_v2(hpa: v1::HorizontalPodAutoscaler) -> v2::HorizontalPodAutoscaler {
    let v1::HorizontalPodAutoscaler {
        mut metadata,
        spec,
        status,
    } = hpa;
    let status = status.unwrap_or_default();

    let mut metrics: Vec<v2::MetricSpec> =
        annotation::<Vec<V1MetricSpec>>(&metadata, METRIC_SPECS_ANNOTATION)
            .unwrap_or_default()
            .into_iter()
            .map(metric_spec_to_v2)
            .collect();
    metrics.extend(spec.target_cpu_utilization_percentage.map(cpu_utilization));
    if metrics.is_empty() {
        // autoscaling/v1 had an implicit 80% CPU target; v2 makes it explicit.
        metrics.push(cpu_utilization(DEFAULT_CPU_UTILIZATION));
    }

    let behavior = annotation::<InternalBehavior>(&metadata, BEHAVIOR_ANNOTATION)
        .filter(|b| b.scale_up.is_some() || b.scale_down.is_some())
        .map(v2::HorizontalPodAutoscalerBehavior::from);

    // The annotation has more than the CPU percentage: it wins when present.
    let current_metrics =
        match annotation::<Vec<V1MetricStatus>>(&metadata, METRIC_STATUSES_ANNOTATION) {
            Some(statuses) => statuses.into_iter().map(metric_status_to_v2).collect(),
            None => status
                .current_cpu_utilization_percentage
                .map(|utilization| v2::MetricStatus {
                    type_: RESOURCE.to_owned(),
                    resource: Some(v2::ResourceMetricStatus {
                        name: CPU.to_owned(),
                        current: v2::MetricValueStatus {
                            average_utilization: Some(utilization),
                            ..Default::default()
                        },
                    }),
                    ..Default::default()
                })
                .into_iter()
                .collect(),
        };
    let conditions: Vec<v2::HorizontalPodAutoscalerCondition> =
        annotation::<Vec<V1Condition>>(&metadata, CONDITIONS_ANNOTATION)
            .unwrap_or_default()
            .into_iter()
            .map(v2::HorizontalPodAutoscalerCondition::from)
            .collect();
    drop_round_trip_annotations(&mut metadata);

    v2::HorizontalPodAutoscaler {
        metadata,
        spec: v2::HorizontalPodAutoscalerSpec {
            behavior,
            max_replicas: spec.max_replicas,
            metrics: Some(metrics),
            min_replicas: spec.min_replicas,
            scale_target_ref: v2::CrossVersionObjectReference {
                api_version: spec.scale_target_ref.api_version,
                kind: spec.scale_target_ref.kind,
                name: spec.scale_target_ref.name,
            },
        },
        status: Some(v2::HorizontalPodAutoscalerStatus {
            conditions: non_empty(conditions),
            current_metrics: non_empty(current_metrics),
            current_replicas: Some(status.current_replicas).filter(|r| *r != 0),
            desired_replicas: status.desired_replicas,
            last_scale_time: status.last_scale_time,
            observed_generation: status.observed_generation,
        }),
    }
}

/// A Resource `cpu` metric with a target average utilization of `percent`.
pub fn cpu_utilization(percent: i32) -> v2::MetricSpec {
    v2::MetricSpec {
        type_: RESOURCE.to_owned(),
        resource: Some(v2::ResourceMetricSource {
            name: CPU.to_owned(),
            target: v2::MetricTarget {
                type_: "Utilization".to_owned(),
                average_utilization: Some(percent),
                ..Default::default()
            },
        }),
        ..Default::default()
    }
}

fn cpu_resource(metric: &v2::MetricSpec) -> Option<&v2::ResourceMetricSource> {
    metric
        .resource
        .as_ref()
        .filter(|r| metric.type_ == RESOURCE && r.name == CPU)
}

/// The metrics v1's `targetCPUUtilizationPercentage` stands for (left out of the annotation).
fn is_cpu_utilization_target(metric: &v2::MetricSpec) -> bool {
    cpu_resource(metric).is_some_and(|r| r.target.average_utilization.is_some())
}

fn non_empty<T>(items: Vec<T>) -> Option<Vec<T>> {
    Some(items).filter(|i| !i.is_empty())
}

/// Go's encoding of a value that cannot fail to encode (plain data).
fn to_json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// The annotation `key` decoded, `None` when absent or malformed.
fn annotation<T: DeserializeOwned>(metadata: &ObjectMeta, key: &str) -> Option<T> {
    let text = metadata.annotations.as_ref()?.get(key)?;
    serde_json::from_str(text).ok()
}

/// Go's zero `resource.Quantity`, as v1 encodes a required quantity left unset.
fn zero() -> Quantity {
    Quantity("0".to_owned())
}

/// autoscaling/v1 `CrossVersionObjectReference`, in Go's field order.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct V1Reference {
    kind: String,
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    api_version: Option<String>,
}

impl From<&v2::CrossVersionObjectReference> for V1Reference {
    fn from(r: &v2::CrossVersionObjectReference) -> Self {
        V1Reference {
            kind: r.kind.clone(),
            name: r.name.clone(),
            api_version: r.api_version.clone(),
        }
    }
}

impl From<V1Reference> for v2::CrossVersionObjectReference {
    fn from(r: V1Reference) -> Self {
        v2::CrossVersionObjectReference {
            api_version: r.api_version,
            kind: r.kind,
            name: r.name,
        }
    }
}

/// autoscaling/v1 `MetricSpec` (only in the annotation; the v2beta1 shape).
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct V1MetricSpec {
    #[serde(rename = "type")]
    type_: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    object: Option<V1ObjectSource>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pods: Option<V1PodsSource>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resource: Option<V1ResourceSource>,
    #[serde(skip_serializing_if = "Option::is_none")]
    container_resource: Option<V1ResourceSource>,
    #[serde(skip_serializing_if = "Option::is_none")]
    external: Option<V1ExternalSource>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct V1ObjectSource {
    target: V1Reference,
    metric_name: String,
    target_value: Option<Quantity>,
    #[serde(skip_serializing_if = "Option::is_none")]
    selector: Option<LabelSelector>,
    #[serde(skip_serializing_if = "Option::is_none")]
    average_value: Option<Quantity>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct V1PodsSource {
    metric_name: String,
    target_average_value: Option<Quantity>,
    #[serde(skip_serializing_if = "Option::is_none")]
    selector: Option<LabelSelector>,
}

/// `ResourceMetricSource`, and `ContainerResourceMetricSource` with `container`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct V1ResourceSource {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    target_average_utilization: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    target_average_value: Option<Quantity>,
    #[serde(skip_serializing_if = "Option::is_none")]
    container: Option<String>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct V1ExternalSource {
    metric_name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    metric_selector: Option<LabelSelector>,
    #[serde(skip_serializing_if = "Option::is_none")]
    target_value: Option<Quantity>,
    #[serde(skip_serializing_if = "Option::is_none")]
    target_average_value: Option<Quantity>,
}

/// autoscaling/v1 `MetricStatus` (only in the annotation).
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct V1MetricStatus {
    #[serde(rename = "type")]
    type_: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    object: Option<V1ObjectStatus>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pods: Option<V1PodsStatus>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resource: Option<V1ResourceStatus>,
    #[serde(skip_serializing_if = "Option::is_none")]
    container_resource: Option<V1ResourceStatus>,
    #[serde(skip_serializing_if = "Option::is_none")]
    external: Option<V1ExternalStatus>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct V1ObjectStatus {
    target: V1Reference,
    metric_name: String,
    current_value: Option<Quantity>,
    #[serde(skip_serializing_if = "Option::is_none")]
    selector: Option<LabelSelector>,
    #[serde(skip_serializing_if = "Option::is_none")]
    average_value: Option<Quantity>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct V1PodsStatus {
    metric_name: String,
    current_average_value: Option<Quantity>,
    #[serde(skip_serializing_if = "Option::is_none")]
    selector: Option<LabelSelector>,
}

/// `ResourceMetricStatus`, and `ContainerResourceMetricStatus` with `container`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct V1ResourceStatus {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    current_average_utilization: Option<i32>,
    current_average_value: Option<Quantity>,
    #[serde(skip_serializing_if = "Option::is_none")]
    container: Option<String>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct V1ExternalStatus {
    metric_name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    metric_selector: Option<LabelSelector>,
    current_value: Option<Quantity>,
    #[serde(skip_serializing_if = "Option::is_none")]
    current_average_value: Option<Quantity>,
}

/// autoscaling/v1 `HorizontalPodAutoscalerCondition`. Go encodes an unset
/// `lastTransitionTime` as `null`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct V1Condition {
    #[serde(rename = "type")]
    type_: String,
    status: String,
    last_transition_time: Option<Time>,
    #[serde(skip_serializing_if = "String::is_empty")]
    reason: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    message: String,
}

impl From<&v2::HorizontalPodAutoscalerCondition> for V1Condition {
    fn from(c: &v2::HorizontalPodAutoscalerCondition) -> Self {
        V1Condition {
            type_: c.type_.clone(),
            status: c.status.clone(),
            last_transition_time: c.last_transition_time.clone(),
            reason: c.reason.clone().unwrap_or_default(),
            message: c.message.clone().unwrap_or_default(),
        }
    }
}

impl From<V1Condition> for v2::HorizontalPodAutoscalerCondition {
    fn from(c: V1Condition) -> Self {
        v2::HorizontalPodAutoscalerCondition {
            last_transition_time: c.last_transition_time,
            message: Some(c.message).filter(|m| !m.is_empty()),
            reason: Some(c.reason).filter(|r| !r.is_empty()),
            status: c.status,
            type_: c.type_,
            ..Default::default()
        }
    }
}

/// Upstream's internal `HorizontalPodAutoscalerBehavior` as Go encodes it (no JSON tags:
/// Go field names, `null` for unset pointers). Go decodes field names case-insensitively;
/// the camel-case spellings are accepted too.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
struct InternalBehavior {
    #[serde(rename = "ScaleUp", alias = "scaleUp", alias = "scaleup")]
    scale_up: Option<InternalRules>,
    #[serde(rename = "ScaleDown", alias = "scaleDown", alias = "scaledown")]
    scale_down: Option<InternalRules>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
struct InternalRules {
    #[serde(
        rename = "StabilizationWindowSeconds",
        alias = "stabilizationWindowSeconds"
    )]
    stabilization_window_seconds: Option<i32>,
    #[serde(rename = "SelectPolicy", alias = "selectPolicy")]
    select_policy: Option<String>,
    #[serde(rename = "Policies", alias = "policies")]
    policies: Option<Vec<InternalPolicy>>,
    #[serde(rename = "Tolerance", alias = "tolerance")]
    tolerance: Option<Quantity>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
struct InternalPolicy {
    #[serde(rename = "Type", alias = "type")]
    type_: String,
    #[serde(rename = "Value", alias = "value")]
    value: i32,
    #[serde(rename = "PeriodSeconds", alias = "periodSeconds")]
    period_seconds: i32,
}

impl From<&v2::HorizontalPodAutoscalerBehavior> for InternalBehavior {
    fn from(b: &v2::HorizontalPodAutoscalerBehavior) -> Self {
        let rules = |r: &v2::HPAScalingRules| InternalRules {
            stabilization_window_seconds: r.stabilization_window_seconds,
            select_policy: r.select_policy.clone(),
            policies: r.policies.as_ref().map(|policies| {
                policies
                    .iter()
                    .map(|p| InternalPolicy {
                        type_: p.type_.clone(),
                        value: p.value,
                        period_seconds: p.period_seconds,
                    })
                    .collect()
            }),
            tolerance: r.tolerance.clone(),
        };
        InternalBehavior {
            scale_up: b.scale_up.as_ref().map(rules),
            scale_down: b.scale_down.as_ref().map(rules),
        }
    }
}

impl From<InternalBehavior> for v2::HorizontalPodAutoscalerBehavior {
    fn from(b: InternalBehavior) -> Self {
        let rules = |r: InternalRules| v2::HPAScalingRules {
            policies: r.policies.map(|policies| {
                policies
                    .into_iter()
                    .map(|p| v2::HPAScalingPolicy {
                        period_seconds: p.period_seconds,
                        type_: p.type_,
                        value: p.value,
                    })
                    .collect()
            }),
            select_policy: r.select_policy,
            stabilization_window_seconds: r.stabilization_window_seconds,
            tolerance: r.tolerance,
        };
        v2::HorizontalPodAutoscalerBehavior {
            scale_down: b.scale_down.map(rules),
            scale_up: b.scale_up.map(rules),
        }
    }
}

fn metric_spec_to_v1(m: &v2::MetricSpec) -> V1MetricSpec {
    V1MetricSpec {
        type_: m.type_.clone(),
        object: m.object.as_ref().map(|o| V1ObjectSource {
            target: V1Reference::from(&o.described_object),
            metric_name: o.metric.name.clone(),
            target_value: Some(o.target.value.clone().unwrap_or_else(zero)),
            selector: o.metric.selector.clone(),
            average_value: o.target.average_value.clone(),
        }),
        pods: m.pods.as_ref().map(|p| V1PodsSource {
            metric_name: p.metric.name.clone(),
            target_average_value: Some(p.target.average_value.clone().unwrap_or_else(zero)),
            selector: p.metric.selector.clone(),
        }),
        resource: m.resource.as_ref().map(|r| V1ResourceSource {
            name: r.name.clone(),
            target_average_utilization: r.target.average_utilization,
            target_average_value: r.target.average_value.clone(),
            container: None,
        }),
        container_resource: m.container_resource.as_ref().map(|r| V1ResourceSource {
            name: r.name.clone(),
            target_average_utilization: r.target.average_utilization,
            target_average_value: r.target.average_value.clone(),
            container: Some(r.container.clone()),
        }),
        external: m.external.as_ref().map(|e| V1ExternalSource {
            metric_name: e.metric.name.clone(),
            metric_selector: e.metric.selector.clone(),
            target_value: e.target.value.clone(),
            target_average_value: e.target.average_value.clone(),
        }),
    }
}

/// A v1 resource target: Utilization when a utilization is set, else AverageValue.
fn resource_target(utilization: Option<i32>, average_value: Option<Quantity>) -> v2::MetricTarget {
    v2::MetricTarget {
        type_: if utilization.is_some() {
            "Utilization"
        } else {
            "AverageValue"
        }
        .to_owned(),
        average_utilization: utilization,
        average_value,
        value: None,
    }
}

fn metric_spec_to_v2(m: V1MetricSpec) -> v2::MetricSpec {
    v2::MetricSpec {
        type_: m.type_,
        object: m.object.map(|o| v2::ObjectMetricSource {
            target: v2::MetricTarget {
                type_: if o.average_value.is_some() {
                    "AverageValue"
                } else {
                    "Value"
                }
                .to_owned(),
                value: Some(o.target_value.unwrap_or_else(zero)),
                average_value: o.average_value,
                average_utilization: None,
            },
            described_object: o.target.into(),
            metric: v2::MetricIdentifier {
                name: o.metric_name,
                selector: o.selector,
            },
        }),
        pods: m.pods.map(|p| v2::PodsMetricSource {
            metric: v2::MetricIdentifier {
                name: p.metric_name,
                selector: p.selector,
            },
            target: v2::MetricTarget {
                type_: "AverageValue".to_owned(),
                average_value: Some(p.target_average_value.unwrap_or_else(zero)),
                ..Default::default()
            },
        }),
        resource: m.resource.map(|r| v2::ResourceMetricSource {
            name: r.name,
            target: resource_target(r.target_average_utilization, r.target_average_value),
        }),
        container_resource: m
            .container_resource
            .map(|r| v2::ContainerResourceMetricSource {
                container: r.container.unwrap_or_default(),
                name: r.name,
                target: resource_target(r.target_average_utilization, r.target_average_value),
            }),
        external: m.external.map(|e| v2::ExternalMetricSource {
            metric: v2::MetricIdentifier {
                name: e.metric_name,
                selector: e.metric_selector,
            },
            target: v2::MetricTarget {
                type_: if e.target_value.is_some() {
                    "Value"
                } else {
                    "AverageValue"
                }
                .to_owned(),
                value: e.target_value,
                average_value: e.target_average_value,
                average_utilization: None,
            },
        }),
    }
}

fn metric_status_to_v1(m: &v2::MetricStatus) -> V1MetricStatus {
    let resource =
        |name: &str, current: &v2::MetricValueStatus, container: Option<&str>| V1ResourceStatus {
            name: name.to_owned(),
            current_average_utilization: current.average_utilization,
            current_average_value: Some(current.average_value.clone().unwrap_or_else(zero)),
            container: container.map(str::to_owned),
        };
    V1MetricStatus {
        type_: m.type_.clone(),
        object: m.object.as_ref().map(|o| V1ObjectStatus {
            target: V1Reference::from(&o.described_object),
            metric_name: o.metric.name.clone(),
            current_value: Some(o.current.value.clone().unwrap_or_else(zero)),
            selector: o.metric.selector.clone(),
            average_value: o.current.average_value.clone(),
        }),
        pods: m.pods.as_ref().map(|p| V1PodsStatus {
            metric_name: p.metric.name.clone(),
            current_average_value: Some(p.current.average_value.clone().unwrap_or_else(zero)),
            selector: p.metric.selector.clone(),
        }),
        resource: m
            .resource
            .as_ref()
            .map(|r| resource(&r.name, &r.current, None)),
        container_resource: m
            .container_resource
            .as_ref()
            .map(|r| resource(&r.name, &r.current, Some(&r.container))),
        external: m.external.as_ref().map(|e| V1ExternalStatus {
            metric_name: e.metric.name.clone(),
            metric_selector: e.metric.selector.clone(),
            current_value: Some(e.current.value.clone().unwrap_or_else(zero)),
            current_average_value: e.current.average_value.clone(),
        }),
    }
}

fn metric_status_to_v2(m: V1MetricStatus) -> v2::MetricStatus {
    let resource_current = |r: &mut V1ResourceStatus| v2::MetricValueStatus {
        average_utilization: r.current_average_utilization,
        average_value: Some(r.current_average_value.take().unwrap_or_else(zero)),
        value: None,
    };
    v2::MetricStatus {
        type_: m.type_,
        object: m.object.map(|o| v2::ObjectMetricStatus {
            current: v2::MetricValueStatus {
                value: Some(o.current_value.unwrap_or_else(zero)),
                average_value: o.average_value,
                average_utilization: None,
            },
            described_object: o.target.into(),
            metric: v2::MetricIdentifier {
                name: o.metric_name,
                selector: o.selector,
            },
        }),
        pods: m.pods.map(|p| v2::PodsMetricStatus {
            current: v2::MetricValueStatus {
                average_value: Some(p.current_average_value.unwrap_or_else(zero)),
                ..Default::default()
            },
            metric: v2::MetricIdentifier {
                name: p.metric_name,
                selector: p.selector,
            },
        }),
        resource: m.resource.map(|mut r| v2::ResourceMetricStatus {
            current: resource_current(&mut r),
            name: r.name,
        }),
        container_resource: m
            .container_resource
            .map(|mut r| v2::ContainerResourceMetricStatus {
                current: resource_current(&mut r),
                container: r.container.unwrap_or_default(),
                name: r.name,
            }),
        external: m.external.map(|e| v2::ExternalMetricStatus {
            current: v2::MetricValueStatus {
                value: Some(e.current_value.unwrap_or_else(zero)),
                average_value: e.current_average_value,
                average_utilization: None,
            },
            metric: v2::MetricIdentifier {
                name: e.metric_name,
                selector: e.metric_selector,
            },
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn v2_object(value: serde_json::Value) -> v2::HorizontalPodAutoscaler {
        serde_json::from_value(value).expect("v2 HorizontalPodAutoscaler")
    }

    fn full_v2() -> v2::HorizontalPodAutoscaler {
        v2_object(json!({
            "metadata": {"name": "web", "namespace": "default", "annotations": {"team": "a"}},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "minReplicas": 2,
                "maxReplicas": 10,
                "metrics": [
                    {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "10"}}},
                    {"type": "External", "external": {"metric": {"name": "queue"}, "target": {"type": "Value", "value": "30"}}},
                    {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "100Mi"}}},
                    {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}},
                ],
                "behavior": {
                    "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                                "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15}]},
                },
            },
            "status": {
                "currentReplicas": 3,
                "desiredReplicas": 4,
                "observedGeneration": 2,
                "lastScaleTime": "2026-01-02T03:04:05Z",
                "currentMetrics": [
                    {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 70, "averageValue": "350m"}}},
                ],
                "conditions": [
                    {"type": "AbleToScale", "status": "True", "lastTransitionTime": "2026-01-02T03:04:05Z",
                     "reason": "SucceededGetScale", "message": "the HPA controller was able to get the target's current scale"},
                ],
            },
        }))
    }

    #[test]
    fn v2_reads_as_v1_with_annotations_and_back_losslessly() {
        let original = full_v2();
        let v1 = v2_to_v1(original.clone());
        assert_eq!(v1.spec.target_cpu_utilization_percentage, Some(60));
        assert_eq!(v1.spec.min_replicas, Some(2));
        assert_eq!(v1.spec.max_replicas, 10);
        assert_eq!(v1.spec.scale_target_ref.kind, "Deployment");
        let status = v1.status.clone().expect("status");
        assert_eq!(status.current_cpu_utilization_percentage, Some(70));
        assert_eq!((status.current_replicas, status.desired_replicas), (3, 4));
        assert_eq!(status.observed_generation, Some(2));
        let annotations = v1.metadata.annotations.clone().expect("annotations");
        assert_eq!(annotations["team"], "a");
        assert_eq!(
            annotations[METRIC_SPECS_ANNOTATION],
            r#"[{"type":"Pods","pods":{"metricName":"qps","targetAverageValue":"10"}},{"type":"External","external":{"metricName":"queue","targetValue":"30"}},{"type":"Resource","resource":{"name":"memory","targetAverageValue":"100Mi"}}]"#
        );
        assert_eq!(
            annotations[METRIC_STATUSES_ANNOTATION],
            r#"[{"type":"Resource","resource":{"name":"cpu","currentAverageUtilization":70,"currentAverageValue":"350m"}}]"#
        );
        assert_eq!(
            annotations[CONDITIONS_ANNOTATION],
            r#"[{"type":"AbleToScale","status":"True","lastTransitionTime":"2026-01-02T03:04:05Z","reason":"SucceededGetScale","message":"the HPA controller was able to get the target's current scale"}]"#
        );
        assert_eq!(
            annotations[BEHAVIOR_ANNOTATION],
            r#"{"ScaleUp":{"StabilizationWindowSeconds":0,"SelectPolicy":"Max","Policies":[{"Type":"Pods","Value":4,"PeriodSeconds":15}],"Tolerance":null},"ScaleDown":null}"#
        );

        // Back to v2: the annotations are fields again and gone; nothing is lost.
        assert_eq!(v1_to_v2(v1), original);
    }

    #[test]
    fn v1_converts_to_v2_with_the_implicit_cpu_target() {
        let v1: v1::HorizontalPodAutoscaler = serde_json::from_value(json!({
            "metadata": {"name": "web"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 3},
            "status": {"currentReplicas": 1, "desiredReplicas": 2, "currentCPUUtilizationPercentage": 40},
        }))
        .expect("v1");
        let v2 = v1_to_v2(v1);
        assert_eq!(
            serde_json::to_value(&v2.spec.metrics).expect("json"),
            json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}])
        );
        let status = v2.status.expect("status");
        assert_eq!(
            serde_json::to_value(&status.current_metrics).expect("json"),
            json!([{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 40}}}])
        );
        assert_eq!(status.current_replicas, Some(1));
        assert_eq!(v2.metadata.annotations, None);
    }

    #[test]
    fn malformed_or_foreign_annotations_are_ignored_and_dropped() {
        let v1: v1::HorizontalPodAutoscaler = serde_json::from_value(json!({
            "metadata": {"name": "web", "annotations": {
                METRIC_SPECS_ANNOTATION: "not json",
                BEHAVIOR_ANNOTATION: "{}",
            }},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 3,
                     "targetCPUUtilizationPercentage": 50},
        }))
        .expect("v1");
        let v2 = v1_to_v2(v1);
        assert_eq!(v2.spec.behavior, None);
        assert_eq!(v2.spec.metrics, Some(vec![cpu_utilization(50)]));
        assert_eq!(v2.metadata.annotations, None);

        // A v2 object's own copies of the annotations never reach v1 readers.
        let mut v2 = v2;
        v2.metadata.annotations = Some(BTreeMap::from([(
            CONDITIONS_ANNOTATION.to_owned(),
            "[]".to_owned(),
        )]));
        assert_eq!(v2_to_v1(v2).metadata.annotations, None);
    }
}
