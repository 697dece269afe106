//! `POST pods/<name>/eviction`: deletes a pod unless a PodDisruptionBudget forbids it
//! (upstream `EvictionREST`), what `kubectl drain` uses.

use std::collections::BTreeMap;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::{Eviction, PodDisruptionBudget};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, StatusCause, StatusDetails, Time};
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

/// The budgets selecting `pod`. Unlike the disruption controller, a budget whose
/// selector is null or empty selects nothing here, as upstream's eviction guards
/// against such a budget blocking every pod.
fn matching_budgets(budgets: Vec<Value>, pod: &Pod) -> Vec<PodDisruptionBudget> {
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    budgets
        .into_iter()
        .filter_map(|v| serde_json::from_value::<PodDisruptionBudget>(v).ok())
        .filter(|pdb| {
            let selector = pdb.spec.as_ref().and_then(|s| s.selector.as_ref());
            selector
                .and_then(|s| LabelSelector::from_meta(s).ok())
                .is_some_and(|s| !s.is_empty() && s.matches(&labels))
        })
        .collect()
}

/// Upstream's `MaxDisruptedPodSize`: evictions the disruption controller has not yet
/// confirmed beyond which a budget refuses more.
const MAX_DISRUPTED_POD_SIZE: usize = 2000;

/// Takes one disruption from the pod's budget, or refuses.
async fn check_budgets(
    ctx: &Context<'_>,
    namespace: Option<&str>,
    pod: &Pod,
) -> Result<(), ApiError> {
    let resource = GroupResource::new("policy", "poddisruptionbudgets");
    let mut budgets = matching_budgets(ctx.objects.list(&resource, namespace).await?, pod);
    let mut pdb = match budgets.len() {
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
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    if ctx.dry_run {
        return check_and_decrement(&mut pdb, &pod_name);
    }
    // The checks run again on the budget as stored, inside the update, so that two
    // evictions racing for the last disruption cannot both have it.
    ctx.objects
        .update(&resource, namespace, &pdb_name, &mut |value: &mut Value| {
            let mut pdb: PodDisruptionBudget =
                serde_json::from_value(value.clone()).map_err(ApiError::internal)?;
            check_and_decrement(&mut pdb, &pod_name)?;
            *value = serde_json::to_value(&pdb).map_err(ApiError::internal)?;
            Ok(())
        })
        .await?;
    Ok(())
}

/// Refuses the eviction unless the budget allows a disruption; otherwise takes one
/// (`disruptionsAllowed` − 1, `DisruptionAllowed=False`/`InsufficientPods` when none is
/// left) and records the pod in `disruptedPods` for the disruption controller (upstream
/// `checkAndDecrement`).
///
/// Errors: 429 while the controller has not observed the budget's generation or when
/// no disruption is allowed; 403 when `disruptionsAllowed` is negative or more than
/// [`MAX_DISRUPTED_POD_SIZE`] evictions are unconfirmed.
fn check_and_decrement(pdb: &mut PodDisruptionBudget, pod_name: &str) -> Result<(), ApiError> {
    let pdb_name = pdb.metadata.name.clone().unwrap_or_default();
    let generation = pdb.metadata.generation.unwrap_or(0);
    let status = pdb.status.get_or_insert_with(Default::default);
    if status.observed_generation.unwrap_or(0) < generation {
        return Err(violation(format!(
            "The disruption budget {pdb_name} is still being processed by the server."
        )));
    }
    let budget = GroupResource::new("policy", "poddisruptionbudget");
    let allowed = status.disruptions_allowed.unwrap_or(0);
    if allowed < 0 {
        return Err(ApiError::forbidden(
            &budget,
            &pdb_name,
            "pdb disruptions allowed is negative",
        ));
    }
    if status.disrupted_pods.as_ref().map_or(0, BTreeMap::len) > MAX_DISRUPTED_POD_SIZE {
        return Err(ApiError::forbidden(
            &budget,
            &pdb_name,
            "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
        ));
    }
    if allowed == 0 {
        return Err(violation(format!(
            "The disruption budget {pdb_name} needs {} healthy pods and has {} currently",
            status.desired_healthy.unwrap_or(0),
            status.current_healthy.unwrap_or(0)
        )));
    }
    status.disruptions_allowed = Some(allowed - 1);
    if allowed == 1 {
        let conditions = status.conditions.get_or_insert_with(Vec::new);
        let insufficient = Condition {
            type_: "DisruptionAllowed".to_owned(),
            status: "False".to_owned(),
            reason: "InsufficientPods".to_owned(),
            message: String::new(),
            observed_generation: status.observed_generation,
            last_transition_time: Time(now()),
        };
        match conditions
            .iter_mut()
            .find(|c| c.type_ == "DisruptionAllowed")
        {
            Some(c) => {
                if c.status != insufficient.status {
                    c.last_transition_time = insufficient.last_transition_time;
                    c.status = insufficient.status;
                }
                c.reason = insufficient.reason;
                c.message = insufficient.message;
                c.observed_generation = insufficient.observed_generation;
            }
            None => conditions.push(insufficient),
        }
    }
    status
        .disrupted_pods
        .get_or_insert_with(Default::default)
        .insert(pod_name.to_owned(), Time(now()));
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
