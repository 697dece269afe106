//! Pods (upstream `pkg/registry/core/pod`): defaulting and validation from skiff-api,
//! status, selectable fields, graceful deletion, the table of `kubectl get pods`, warnings
//! on create, the `binding` and `eviction` subresources, and the `ephemeralcontainers` and
//! `resize` part subresources.

mod admission;
pub(super) mod binding;
mod eviction;
mod service_account;
mod table;

use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};
use serde_json::Value;
use skiff_api::core::pod::qos::pod_qos;
use skiff_api::core::pod::{
    default_pod, ephemeral, resize, validate_pod, validate_pod_update, warnings,
};
use skiff_api::field::ErrorList;

use crate::error::ApiError;
use crate::registry::{Context, ResourceInfo, Strategy, Subresource, TableColumn};

/// The pods kind.
pub struct Pods;

/// The subresource that adds ephemeral containers.
const EPHEMERAL_CONTAINERS: &str = "ephemeralcontainers";
/// The subresource that changes container resources.
const RESIZE: &str = "resize";

#[async_trait]
impl Strategy for Pods {
    type Object = Pod;

    fn info(&self) -> ResourceInfo {
        ResourceInfo {
            short_names: &["po"],
            categories: &["all"],
            ..ResourceInfo::of::<Pod>()
        }
    }

    fn status_subresource(&self) -> bool {
        true
    }

    fn status_meta_fields(&self) -> &'static [&'static str] {
        &["labels", "annotations"]
    }

    /// Pods track `metadata.generation` (PodObservedGenerationTracking).
    fn bumps_generation(&self) -> bool {
        true
    }

    /// Upstream ReturnDeletedObject.
    fn return_deleted_object(&self) -> bool {
        true
    }

    /// `binding`, `eviction`, and the kubelet-proxied `log`, `exec`, `attach`,
    /// `portforward`.
    fn subresources(&self) -> Vec<Arc<dyn Subresource>> {
        let mut subresources: Vec<Arc<dyn Subresource>> = vec![
            Arc::new(binding::BindingSubresource),
            Arc::new(eviction::EvictionSubresource),
        ];
        subresources.extend(crate::proxy::pod_subresources());
        subresources
    }

    fn default(&self, pod: &mut Pod) {
        default_pod(pod);
    }

    /// Upstream PrepareForCreate: the status is the server's: phase `Pending` and the QoS
    /// class; a pod with scheduling gates starts with PodScheduled False/SchedulingGated;
    /// a negative grace period becomes 1.
    fn prepare_for_create(&self, pod: &mut Pod) {
        let mut defaulted = pod.clone();
        default_pod(&mut defaulted);
        let gated = pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduling_gates.as_ref())
            .is_some_and(|g| !g.is_empty());
        pod.status = Some(PodStatus {
            phase: Some("Pending".to_owned()),
            qos_class: Some(pod_qos(&defaulted).as_str().to_owned()),
            conditions: gated.then(|| {
                vec![PodCondition {
                    type_: "PodScheduled".to_owned(),
                    status: "False".to_owned(),
                    reason: Some("SchedulingGated".to_owned()),
                    message: Some(
                        "Scheduling is blocked due to non-empty scheduling gates".to_owned(),
                    ),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        });
        if let Some(grace) = pod
            .spec
            .as_mut()
            .and_then(|s| s.termination_grace_period_seconds.as_mut())
            .filter(|g| **g < 0)
        {
            *grace = 1;
        }
    }

    /// Upstream ValidatePodCreate: also no ephemeral containers, and no `nodeName` while
    /// scheduling gates remain.
    fn validate(&self, pod: &Pod) -> ErrorList {
        let mut errors = validate_pod(pod);
        errors.extend(ephemeral::validate_no_ephemeral_containers_on_create(pod));
        errors.extend(
            skiff_api::core::pod::validation::validate_node_name_without_scheduling_gates(pod),
        );
        errors
    }

    fn validate_update(&self, new: &Pod, old: &Pod) -> ErrorList {
        validate_pod_update(new, old)
    }

    /// Upstream WarningsOnCreate: a name that is no DNS label, and the pod's warnings.
    /// Updates have none (upstream's WarningsOnUpdate returns nil).
    fn warnings_on_create(&self, pod: &Pod) -> Vec<String> {
        warnings::pod_create_warnings(pod)
    }

    /// `ephemeralcontainers` (what `kubectl debug` patches) and `resize` (in-place
    /// vertical scaling, beta and on by default in 1.33).
    fn part_subresources(&self) -> &'static [&'static str] {
        &[EPHEMERAL_CONTAINERS, RESIZE]
    }

    /// Upstream podEphemeralContainersStrategy and podResizeStrategy PrepareForUpdate.
    fn prepare_for_part_update(&self, subresource: &str, new: &mut Pod, old: &Pod) {
        match subresource {
            EPHEMERAL_CONTAINERS => ephemeral::drop_non_ephemeral_container_updates(new, old),
            RESIZE => resize::drop_non_resize_updates(new, old),
            _ => {}
        }
    }

    /// Upstream ValidatePodEphemeralContainersUpdate and ValidatePodResize.
    fn validate_part_update(&self, subresource: &str, new: &Pod, old: &Pod) -> ErrorList {
        match subresource {
            EPHEMERAL_CONTAINERS => ephemeral::validate_pod_ephemeral_containers_update(new, old),
            RESIZE => resize::validate_pod_resize(new, old),
            _ => Vec::new(),
        }
    }

    async fn mutate_create(&self, ctx: &Context<'_>, pod: &mut Pod) -> Result<(), ApiError> {
        admission::admit(ctx, pod).await
    }

    /// Upstream `ToSelectableFields`.
    fn selectable_fields(&self, pod: &Pod) -> Vec<(&'static str, String)> {
        let spec = pod.spec.clone().unwrap_or_default();
        let status = pod.status.clone().unwrap_or_default();
        let pod_ips: Vec<String> = status
            .pod_ips
            .iter()
            .flatten()
            .map(|ip| ip.ip.clone())
            .collect();
        vec![
            ("spec.nodeName", spec.node_name.unwrap_or_default()),
            (
                "spec.restartPolicy",
                spec.restart_policy.unwrap_or_default(),
            ),
            (
                "spec.schedulerName",
                spec.scheduler_name.unwrap_or_default(),
            ),
            (
                "spec.serviceAccountName",
                spec.service_account_name.unwrap_or_default(),
            ),
            (
                "spec.hostNetwork",
                spec.host_network.unwrap_or(false).to_string(),
            ),
            ("status.phase", status.phase.unwrap_or_default()),
            // `status.podIPs` is an accepted label that upstream never sets: it reads
            // as empty.
            ("status.podIP", pod_ips.first().cloned().unwrap_or_default()),
            (
                "status.nominatedNodeName",
                status.nominated_node_name.unwrap_or_default(),
            ),
        ]
    }

    fn columns(&self) -> Vec<TableColumn> {
        table::columns()
    }

    fn row(&self, pod: &Pod) -> Vec<Value> {
        table::row(pod)
    }

    /// Upstream CheckGracefulDelete: the requested period, else the pod's
    /// terminationGracePeriodSeconds; at once when the pod is not scheduled or has
    /// finished; a negative period is 1.
    fn graceful_delete(&self, pod: &Pod, requested: Option<i64>) -> Option<i64> {
        let spec = pod.spec.as_ref();
        let mut period = requested
            .or_else(|| spec.and_then(|s| s.termination_grace_period_seconds))
            .unwrap_or(0);
        let scheduled = spec
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty());
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        if !scheduled || matches!(phase, Some("Succeeded" | "Failed")) {
            period = 0;
        }
        if period < 0 {
            period = 1;
        }
        (period > 0).then_some(period)
    }
}

#[cfg(test)]
mod rest_tests;
#[cfg(test)]
mod tests;
