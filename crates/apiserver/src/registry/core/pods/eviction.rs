//! `POST pods/<name>/eviction`: deletes a pod unless a PodDisruptionBudget forbids it
//! (upstream `EvictionREST`), what `kubectl drain` uses.

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::{Eviction, PodDisruptionBudget};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{StatusCause, StatusDetails, Time};
use serde_json::Value;
use skiff_api::selector::LabelSelector;

use crate::error::{ApiError, GroupResource};
use crate::registry::core::{created, read_body};
use crate::registry::printers::now;
use crate::registry::{Context, Subresource};

/// The message of a refused eviction.
const VIOLATION: &str = "Cannot evict pod as it would violate the pod's disruption budget.";

/// The `eviction` subresource of pods.
pub struct EvictionSubresource;

#[async_trait]
impl Subresource for EvictionSubresource {
    fn name(&self) -> &'static str {
        "eviction"
    }

    fn verbs(&self) -> &'static [&'static str] {
        &["create"]
    }

    fn kind(&self) -> Option<(&'static str, &'static str, &'static str)> {
        Some(("policy", "v1", "Eviction"))
    }

    /// Errors: 400 when the body names another pod, 404 for a missing pod, 429 when the
    /// pod's budget allows no disruption, 500 when more than one budget selects the pod.
    async fn handle(
        &self,
        ctx: &Context<'_>,
        namespace: Option<&str>,
        name: &str,
        request: axum::extract::Request,
    ) -> Result<axum::response::Response, ApiError> {
        let eviction: Eviction = read_body(request).await?;
        if eviction.metadata.name.as_deref().is_some_and(|n| n != name) {
            return Err(ApiError::bad_request(
                "name in URL does not match name in Eviction object",
            ));
        }
        let pods = GroupResource::new("", "pods");
        let pod: Pod = serde_json::from_value(ctx.objects.get(&pods, namespace, name).await?)
            .map_err(ApiError::internal)?;
        if !ignores_budgets(&pod) {
            check_budgets(ctx, namespace, &pod).await?;
        }
        if !ctx.dry_run {
            let grace = eviction.delete_options.and_then(|o| o.grace_period_seconds);
            ctx.objects.delete(&pods, namespace, name, grace).await?;
        }
        Ok(created())
    }
}

/// Pods that have not started, have finished or are being deleted are evicted without
/// asking their budgets.
fn ignores_budgets(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    matches!(phase, Some("Succeeded" | "Failed" | "Pending"))
        || pod.metadata.deletion_timestamp.is_some()
}

fn is_ready(pod: &Pod) -> bool {
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// The budgets selecting `pod` (a budget without selector selects nothing, an empty one
/// everything).
fn matching_budgets(budgets: Vec<Value>, pod: &Pod) -> Vec<PodDisruptionBudget> {
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    budgets
        .into_iter()
        .filter_map(|v| serde_json::from_value::<PodDisruptionBudget>(v).ok())
        .filter(|pdb| {
            let selector = pdb.spec.as_ref().and_then(|s| s.selector.as_ref());
            selector
                .and_then(|s| LabelSelector::from_meta(s).ok())
                .is_some_and(|s| s.matches(&labels))
        })
        .collect()
}

/// Takes one disruption from the pod's budget, or refuses.
async fn check_budgets(
    ctx: &Context<'_>,
    namespace: Option<&str>,
    pod: &Pod,
) -> Result<(), ApiError> {
    let resource = GroupResource::new("policy", "poddisruptionbudgets");
    let mut budgets = matching_budgets(ctx.objects.list(&resource, namespace).await?, pod);
    let pdb = match budgets.len() {
        0 => return Ok(()),
        1 => budgets.remove(0),
        _ => {
            return Err(ApiError::internal(
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            ));
        }
    };
    let pdb_name = pdb.metadata.name.clone().unwrap_or_default();
    let status = pdb.status.clone().unwrap_or_default();
    let (desired, current) = (
        status.desired_healthy.unwrap_or(0),
        status.current_healthy.unwrap_or(0),
    );
    let policy = pdb
        .spec
        .as_ref()
        .and_then(|s| s.unhealthy_pod_eviction_policy.as_deref());
    if !is_ready(pod) && (policy == Some("AlwaysAllow") || current >= desired && desired > 0) {
        return Ok(());
    }
    if status.observed_generation.unwrap_or(0) < pdb.metadata.generation.unwrap_or(0) {
        return Err(violation(format!(
            "The disruption budget {pdb_name} is still being processed by the server."
        )));
    }
    let allowed = status.disruptions_allowed.unwrap_or(0);
    if allowed < 0 {
        return Err(ApiError::forbidden(
            &GroupResource::new("", "pods/eviction"),
            pod.metadata.name.as_deref().unwrap_or(""),
            "pdb disruptions allowed is negative",
        ));
    }
    if allowed == 0 {
        return Err(violation(format!(
            "The disruption budget {pdb_name} needs {desired} healthy pods and has {current} currently"
        )));
    }
    if ctx.dry_run {
        return Ok(());
    }
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    ctx.objects
        .update(&resource, namespace, &pdb_name, &mut |value: &mut Value| {
            let mut pdb: PodDisruptionBudget =
                serde_json::from_value(value.clone()).map_err(ApiError::internal)?;
            let status = pdb.status.get_or_insert_with(Default::default);
            let allowed = status.disruptions_allowed.unwrap_or(0);
            if allowed <= 0 {
                return Err(violation(format!(
                    "The disruption budget {pdb_name} does not allow further disruptions"
                )));
            }
            status.disruptions_allowed = Some(allowed - 1);
            status
                .disrupted_pods
                .get_or_insert_with(Default::default)
                .insert(pod_name.clone(), Time(now()));
            *value = serde_json::to_value(&pdb).map_err(ApiError::internal)?;
            Ok(())
        })
        .await?;
    Ok(())
}

/// 429 with a `DisruptionBudget` cause.
fn violation(cause: String) -> ApiError {
    let mut err = ApiError::too_many_requests(VIOLATION);
    err.details = Some(StatusDetails {
        causes: Some(vec![StatusCause {
            reason: Some("DisruptionBudget".to_owned()),
            message: Some(cause),
            field: None,
        }]),
        ..Default::default()
    });
    err
}
