//! autoscaling horizontalpodautoscalers (upstream
//! `pkg/registry/autoscaling/horizontalpodautoscaler`), the first kind served in two
//! versions: autoscaling/v2 is the storage version, autoscaling/v1 is converted to it on
//! every write and back on every read ([`converted`], with the conversion itself in
//! `skiff_api::autoscaling::conversion`).

pub mod converted;
#[cfg(test)]
mod tests;

use k8s_openapi::api::autoscaling::{v1, v2};
use serde_json::Value;
use skiff_api::autoscaling::{self as hpa, conversion};
use skiff_api::field::ErrorList;

use super::printers::{self, AGE, NAME, column};
use super::{Registry, ResourceInfo, Strategy, TableColumn};
use converted::{Conversion, Converted};

/// The key segment both versions share.
const STORAGE: &str = "horizontalpodautoscalers";

/// Adds autoscaling/v2 (the storage version, first so that it answers for the resource)
/// and autoscaling/v1 horizontalpodautoscalers.
pub fn add(registry: &mut Registry) {
    registry.add(HorizontalPodAutoscalers);
    registry.add(Converted::new(
        HorizontalPodAutoscalers,
        V1,
        ResourceInfo {
            short_names: &["hpa"],
            categories: &["all"],
            storage: STORAGE,
            ..ResourceInfo::of::<v1::HorizontalPodAutoscaler>()
        },
    ));
}

/// autoscaling/v2 `hpa`, in category `all`, with `/status`.
pub struct HorizontalPodAutoscalers;

impl Strategy for HorizontalPodAutoscalers {
    type Object = v2::HorizontalPodAutoscaler;

    fn info(&self) -> ResourceInfo {
        ResourceInfo {
            short_names: &["hpa"],
            categories: &["all"],
            storage: STORAGE,
            ..ResourceInfo::of::<v2::HorizontalPodAutoscaler>()
        }
    }

    fn status_subresource(&self) -> bool {
        true
    }

    fn default(&self, object: &mut v2::HorizontalPodAutoscaler) {
        // v2 carries no round-trip annotations: a client's copies are dropped on decode.
        hpa::drop_round_trip_annotations(&mut object.metadata);
        hpa::default_v2(object);
    }

    fn prepare_for_create(&self, object: &mut v2::HorizontalPodAutoscaler) {
        hpa::prepare_for_create(object);
    }

    fn prepare_for_update(
        &self,
        new: &mut v2::HorizontalPodAutoscaler,
        old: &v2::HorizontalPodAutoscaler,
    ) {
        hpa::prepare_for_update(new, old);
    }

    fn validate(&self, object: &v2::HorizontalPodAutoscaler) -> ErrorList {
        hpa::validate(object)
    }

    /// Upstream validates the spec on updates of the main resource and the replica counts
    /// on `/status`; each one's other half is the unchanged, already valid, old object's.
    fn validate_update(
        &self,
        new: &v2::HorizontalPodAutoscaler,
        old: &v2::HorizontalPodAutoscaler,
    ) -> ErrorList {
        let mut errors = hpa::validate_update(new, old);
        errors.extend(hpa::validate_status_update(new));
        errors
    }

    fn columns(&self) -> Vec<TableColumn> {
        vec![
            NAME,
            column(
                "Reference",
                "string",
                "scaleTargetRef points to the target resource to scale, and is used to the pods for which metrics should be collected, as well as to actually change the replica count.",
                0,
            ),
            column(
                "Targets",
                "string",
                "metrics contains the specifications for which to use to calculate the desired replica count (the maximum replica count across all metrics will be used).  The desired replica count is calculated multiplying the ratio between the target value and the current value by the current number of pods.  Ergo, metrics used must decrease as the pod count is increased, and vice-versa.  See the individual metric source types for more information about how each type of metric must respond. If not set, the default metric will be set to 80% average CPU utilization.",
                0,
            ),
            column(
                "MinPods",
                "string",
                "minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down.  It defaults to 1 pod.  minReplicas is allowed to be 0 if the alpha feature gate HPAScaleToZero is enabled and at least one Object or External metric is configured.  Scaling is active as long as at least one metric value is available.",
                0,
            ),
            column(
                "MaxPods",
                "string",
                "maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up. It cannot be less that minReplicas.",
                0,
            ),
            column(
                "Replicas",
                "string",
                "currentReplicas is current number of replicas of pods managed by this autoscaler, as last seen by the autoscaler.",
                0,
            ),
            AGE,
        ]
    }

    fn row(&self, object: &v2::HorizontalPodAutoscaler) -> Vec<Value> {
        let spec = &object.spec;
        let status = object.status.clone().unwrap_or_default();
        let reference = format!(
            "{}/{}",
            spec.scale_target_ref.kind, spec.scale_target_ref.name
        );
        let min_pods = spec
            .min_replicas
            .map_or_else(|| "<unset>".to_owned(), |m| m.to_string());
        vec![
            Value::from(printers::name(&object.metadata)),
            Value::from(reference),
            Value::from(format_metrics(
                spec.metrics.as_deref().unwrap_or_default(),
                status.current_metrics.as_deref().unwrap_or_default(),
            )),
            Value::from(min_pods),
            Value::from(spec.max_replicas),
            Value::from(status.current_replicas.unwrap_or(0)),
            printers::age(&object.metadata),
        ]
    }
}

/// autoscaling/v1 through [`conversion`], with v1's own default (`minReplicas` 1).
pub struct V1;

impl Conversion for V1 {
    type Served = v1::HorizontalPodAutoscaler;
    type Stored = v2::HorizontalPodAutoscaler;

    fn to_stored(&self, served: v1::HorizontalPodAutoscaler) -> v2::HorizontalPodAutoscaler {
        conversion::v1_to_v2(served)
    }

    fn to_served(&self, stored: v2::HorizontalPodAutoscaler) -> v1::HorizontalPodAutoscaler {
        conversion::v2_to_v1(stored)
    }

    fn default(&self, served: &mut v1::HorizontalPodAutoscaler) {
        hpa::default_v1(served);
    }
}

/// A quantity as the printer shows it; Go prints a missing one as `<nil>`.
fn quantity(value: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>) -> &str {
    value.map_or("<nil>", |q| q.0.as_str())
}

/// The Targets cell (upstream `formatHPAMetrics`): `current/target` of the first two
/// metrics (`cpu: 40%/80%`, `<unknown>` before the first reading, `(avg)` for average
/// values of Object and External metrics), then `+ N more...`; `<none>` without metrics.
fn format_metrics(specs: &[v2::MetricSpec], statuses: &[v2::MetricStatus]) -> String {
    const SHOWN: usize = 2;
    const UNKNOWN: &str = "<unknown>";
    if specs.is_empty() {
        return "<none>".to_owned();
    }
    let mut list = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let status = statuses.get(i);
        let entry = match spec.type_.as_str() {
            "External" => spec.external.as_ref().map(|external| {
                let current = status.and_then(|s| s.external.as_ref()).map(|s| &s.current);
                value_or_average(&external.target, current)
            }),
            "Object" => spec.object.as_ref().map(|object| {
                let current = status.and_then(|s| s.object.as_ref()).map(|s| &s.current);
                value_or_average(&object.target, current)
            }),
            "Pods" => spec.pods.as_ref().map(|pods| {
                let current = status
                    .and_then(|s| s.pods.as_ref())
                    .map_or(UNKNOWN, |s| quantity(s.current.average_value.as_ref()));
                format!("{current}/{}", quantity(pods.target.average_value.as_ref()))
            }),
            "Resource" => spec.resource.as_ref().map(|resource| {
                let current = status.and_then(|s| s.resource.as_ref()).map(|s| &s.current);
                resource_cell(&resource.name, &resource.target, current)
            }),
            "ContainerResource" => spec.container_resource.as_ref().map(|resource| {
                let current = status
                    .and_then(|s| s.container_resource.as_ref())
                    .map(|s| &s.current);
                resource_cell(&resource.name, &resource.target, current)
            }),
            _ => None,
        };
        list.push(entry.unwrap_or_else(|| "<unknown type>".to_owned()));
    }
    let count = list.len();
    if count > SHOWN {
        list.truncate(SHOWN);
        return format!("{} + {} more...", list.join(", "), count - SHOWN);
    }
    list.join(", ")
}

/// An Object or External metric: `current/target (avg)` for an average value target,
/// else `current/target`.
fn value_or_average(target: &v2::MetricTarget, current: Option<&v2::MetricValueStatus>) -> String {
    match &target.average_value {
        Some(average) => {
            let current = current
                .and_then(|c| c.average_value.as_ref())
                .map_or("<unknown>", |q| q.0.as_str());
            format!("{current}/{} (avg)", average.0)
        }
        None => {
            let current = current.map_or("<unknown>", |c| quantity(c.value.as_ref()));
            format!("{current}/{}", quantity(target.value.as_ref()))
        }
    }
}

/// A Resource or ContainerResource metric: `cpu: 40%/80%`, `memory: 100Mi/200Mi`.
fn resource_cell(
    name: &str,
    target: &v2::MetricTarget,
    current: Option<&v2::MetricValueStatus>,
) -> String {
    match &target.average_value {
        Some(average) => {
            let current = current.map_or("<unknown>", |c| quantity(c.average_value.as_ref()));
            format!("{name}: {current}/{}", average.0)
        }
        None => {
            let current = current
                .and_then(|c| c.average_utilization)
                .map_or_else(|| "<unknown>".to_owned(), |u| format!("{u}%"));
            let target = target
                .average_utilization
                .map_or_else(|| "<auto>".to_owned(), |u| format!("{u}%"));
            format!("{name}: {current}/{target}")
        }
    }
}
