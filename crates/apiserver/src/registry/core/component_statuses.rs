//! ComponentStatuses (upstream `pkg/registry/core/componentstatus`, deprecated since 1.19):
//! computed on each read, never stored; get and list only.
//!
//! Upstream probes each control-plane component's health endpoint. Skiff's scheduler and
//! controller manager run with the API server and have no health endpoint of their own:
//! they are reported as upstream reports healthy components (`ok`). `etcd-0` is Skiff's
//! store, probed with a read through it: a failing read makes it Unhealthy with the error.

use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::ComponentStatus;
use serde_json::{Value, json};

use crate::error::{ApiError, GroupResource};
use crate::registry::printers::{NAME, column, name};
use crate::registry::{Context, ResourceInfo, Strategy, TableColumn, Unstored};

/// `cs`, cluster-scoped.
pub struct ComponentStatuses;

impl Strategy for ComponentStatuses {
    type Object = ComponentStatus;

    fn info(&self) -> ResourceInfo {
        ResourceInfo {
            short_names: &["cs"],
            ..ResourceInfo::of::<ComponentStatus>()
        }
    }

    fn verbs(&self) -> &'static [&'static str] {
        &["get", "list"]
    }

    fn unstored(&self) -> Option<Arc<dyn Unstored>> {
        Some(Arc::new(Probes))
    }

    /// NAME STATUS MESSAGE ERROR.
    fn columns(&self) -> Vec<TableColumn> {
        vec![
            NAME,
            column("Status", "string", "Status of the component conditions", 0),
            column(
                "Message",
                "string",
                "Message of the component conditions",
                0,
            ),
            column("Error", "string", "Error of the component conditions", 0),
        ]
    }

    /// Upstream `printComponentStatus`: the Healthy condition as `Healthy`, `Unhealthy`
    /// or, without one, `Unknown`.
    fn row(&self, object: &ComponentStatus) -> Vec<Value> {
        let healthy = object
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "Healthy");
        let status = match healthy.map(|c| c.status.as_str()) {
            Some("True") => "Healthy",
            Some(_) => "Unhealthy",
            None => "Unknown",
        };
        let text = |f: fn(&k8s_openapi::api::core::v1::ComponentCondition) -> Option<&String>| {
            healthy.and_then(f).cloned().unwrap_or_default()
        };
        vec![
            json!(name(&object.metadata)),
            json!(status),
            json!(text(|c| c.message.as_ref())),
            json!(text(|c| c.error.as_ref())),
        ]
    }
}

/// The components, in upstream's order of registration.
const COMPONENTS: [&str; 3] = ["scheduler", "controller-manager", "etcd-0"];

/// The health checks behind the list and get.
struct Probes;

impl Probes {
    /// The status of `component` (upstream `getComponentStatus`): one Healthy condition,
    /// `True` with message `ok`, or `False` with the probe's error.
    async fn status(ctx: &Context<'_>, component: &str) -> Value {
        let probe = if component == "etcd-0" {
            ctx.objects
                .list(&GroupResource::new("", "namespaces"), None)
                .await
                .map(|_| ())
        } else {
            Ok(())
        };
        let condition = match probe {
            Ok(()) => json!({"type": "Healthy", "status": "True", "message": "ok"}),
            Err(e) => json!({"type": "Healthy", "status": "False", "error": e.message}),
        };
        json!({
            "apiVersion": "v1",
            "kind": "ComponentStatus",
            "metadata": {"name": component},
            "conditions": [condition],
        })
    }
}

#[async_trait]
impl Unstored for Probes {
    fn warning(&self) -> Option<&'static str> {
        Some("v1 ComponentStatus is deprecated in v1.19+")
    }

    async fn list(
        &self,
        ctx: &Context<'_>,
        _namespace: Option<&str>,
    ) -> Result<Vec<Value>, ApiError> {
        let mut statuses = Vec::new();
        for component in COMPONENTS {
            statuses.push(Self::status(ctx, component).await);
        }
        Ok(statuses)
    }

    /// Errors: upstream's plain error for an unknown component, a 500
    /// `Component not found: <name>`.
    async fn get(
        &self,
        ctx: &Context<'_>,
        _namespace: Option<&str>,
        name: &str,
    ) -> Result<Value, ApiError> {
        if !COMPONENTS.contains(&name) {
            return Err(ApiError::new(
                500,
                "",
                format!("Component not found: {name}"),
            ));
        }
        Ok(Self::status(ctx, name).await)
    }
}
