//! `POST pods/<name>/binding`: assigns a pod to a node (upstream `BindingREST`), what the
//! scheduler does for every pod.

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Binding, Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::Deserialize;
use serde_json::Value;
use skiff_api::field::{FieldError, Path};

use crate::error::{ApiError, GroupResource};
use crate::registry::core::{created, read_body};
use crate::registry::printers::now;
use crate::registry::{Context, Subresource};

/// The `binding` subresource of pods.
pub struct BindingSubresource;

#[async_trait]
impl Subresource for BindingSubresource {
    fn name(&self) -> &'static str {
        "binding"
    }

    fn verbs(&self) -> &'static [&'static str] {
        &["create"]
    }

    fn kind(&self) -> Option<(&'static str, &'static str, &'static str)> {
        Some(("", "v1", "Binding"))
    }

    /// Errors: 400 when the body names another pod, 422 without a target node, 404 for a
    /// missing pod, 409 when the pod is already bound or being deleted.
    async fn handle(
        &self,
        ctx: &Context<'_>,
        namespace: Option<&str>,
        name: &str,
        request: axum::extract::Request,
    ) -> Result<axum::response::Response, ApiError> {
        let binding: Binding = read_body(request).await?;
        bind(ctx, namespace, name, &binding).await
    }
}

/// Binds pod `name` as `binding` says (upstream `BindingREST.Create`), for `pods/binding`
/// and the legacy `bindings` collection. Errors as [`BindingSubresource::handle`].
pub(crate) async fn bind(
    ctx: &Context<'_>,
    namespace: Option<&str>,
    name: &str,
    binding: &Binding,
) -> Result<axum::response::Response, ApiError> {
    if binding.metadata.name.as_deref().is_some_and(|n| n != name) {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Binding object",
        ));
    }
    validate(binding, name)?;
    let node = binding.target.name.clone().unwrap_or_default();
    let pods = GroupResource::new("", "pods");
    let annotations = binding.metadata.annotations.clone().unwrap_or_default();
    let uid = binding.metadata.uid.clone().filter(|u| !u.is_empty());
    let mut assign = |value: &mut Value| -> Result<(), ApiError> {
        let mut pod = Pod::deserialize(&*value).map_err(ApiError::internal)?;
        // Upstream's assignPod updates with the Binding's UID as precondition: a pod
        // deleted and created again under the same name is not bound by a stale decision.
        if let Some(uid) = uid.as_deref() {
            let current = pod.metadata.uid.as_deref().unwrap_or_default();
            if uid != current {
                return Err(ApiError::conflict(
                    &pods,
                    name,
                    &format!(
                        "Precondition failed: UID in precondition: {uid}, UID in object meta: {current}"
                    ),
                ));
            }
        }
        assign_pod(&mut pod, name, &node, &annotations)?;
        *value = serde_json::to_value(&pod).map_err(ApiError::internal)?;
        Ok(())
    };
    if ctx.dry_run {
        let mut pod = ctx.objects.get(&pods, namespace, name).await?;
        assign(&mut pod)?;
    } else {
        ctx.objects
            .update(&pods, namespace, name, &mut assign)
            .await?;
    }
    Ok(created())
}

/// Upstream `ValidatePodBinding`: a target node, of kind Node if any.
fn validate(binding: &Binding, name: &str) -> Result<(), ApiError> {
    let mut errors = Vec::new();
    let target = Path::new("target");
    if let Some(kind) = binding
        .target
        .kind
        .as_deref()
        .filter(|k| !k.is_empty() && *k != "Node")
    {
        errors.push(FieldError::not_supported(
            &target.child("kind"),
            kind,
            &["Node", "<empty>"],
        ));
    }
    if binding.target.name.as_deref().unwrap_or("").is_empty() {
        errors.push(FieldError::required(&target.child("name"), ""));
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid("", "Binding", name, &errors))
    }
}

/// Upstream `setPodNodeNameAndMetadata`: sets spec.nodeName, merges the binding's
/// annotations and marks the pod PodScheduled.
fn assign_pod(
    pod: &mut Pod,
    name: &str,
    node: &str,
    annotations: &std::collections::BTreeMap<String, String>,
) -> Result<(), ApiError> {
    let binding = GroupResource::new("", "pods/binding");
    if pod.metadata.deletion_timestamp.is_some() {
        return Err(ApiError::conflict(
            &binding,
            name,
            &format!("pod {name} is being deleted, cannot be assigned to a host"),
        ));
    }
    let spec = pod.spec.get_or_insert_with(Default::default);
    if let Some(bound) = spec.node_name.as_deref().filter(|n| !n.is_empty()) {
        return Err(ApiError::conflict(
            &binding,
            name,
            &format!("pod {name} is already assigned to node {bound:?}"),
        ));
    }
    spec.node_name = Some(node.to_owned());
    if !annotations.is_empty() {
        let merged = pod
            .metadata
            .annotations
            .get_or_insert_with(Default::default);
        merged.extend(annotations.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    let status = pod.status.get_or_insert_with(Default::default);
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let now = Time(now());
    match conditions.iter_mut().find(|c| c.type_ == "PodScheduled") {
        Some(c) => {
            if c.status != "True" {
                c.last_transition_time = Some(now);
            }
            c.status = "True".to_owned();
            c.reason = None;
            c.message = None;
        }
        None => conditions.push(PodCondition {
            type_: "PodScheduled".to_owned(),
            status: "True".to_owned(),
            last_transition_time: Some(now),
            ..Default::default()
        }),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binding_sets_the_node_once() {
        let mut pod = Pod::default();
        assign_pod(&mut pod, "p", "node-1", &Default::default()).unwrap_or_default();
        assert_eq!(
            pod.spec.as_ref().and_then(|s| s.node_name.as_deref()),
            Some("node-1")
        );
        let conditions = pod
            .status
            .clone()
            .and_then(|s| s.conditions)
            .unwrap_or_default();
        assert_eq!(
            (conditions[0].type_.as_str(), conditions[0].status.as_str()),
            ("PodScheduled", "True")
        );
        let err = assign_pod(&mut pod, "p", "node-2", &Default::default()).err();
        assert_eq!(
            err.map(|e| (e.code, e.message)),
            Some((409, r#"Operation cannot be fulfilled on pods/binding "p": pod p is already assigned to node "node-1""#.to_owned()))
        );
        let binding = Binding::default();
        let err = validate(&binding, "p").err().map(|e| e.message);
        assert_eq!(
            err.as_deref(),
            Some(r#"Binding "p" is invalid: target.name: Required value"#)
        );
    }
}
