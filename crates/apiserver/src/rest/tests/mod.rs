//! Handler tests: the router on an in-memory store with test kinds (ConfigMap without
//! hooks, a Deployment with status and scale, a Pod with graceful deletion, a Lease
//! created on update, Namespaces), driven with `tower::ServiceExt::oneshot`.

mod apply;
mod core_kinds;
mod memory;
mod namespace_deletion;
mod protobuf_kinds;
mod stored_list;
mod verbs;
mod watch;

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode};
use axum::response::IntoResponse;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use serde_json::Value;
use skiff_api::field::{ErrorList, FieldError, Path};
use tower::ServiceExt;

use super::{State, router};
use crate::config::ClusterConfig;
use crate::registry::{Context, Registry, ScaleSpec, Strategy, Subresource, TableColumn};

struct ConfigMaps;
impl Strategy for ConfigMaps {
    type Object = ConfigMap;
}

struct Namespaces;
impl Strategy for Namespaces {
    type Object = Namespace;
    fn verbs(&self) -> &'static [&'static str] {
        crate::registry::VERBS_WITHOUT_DELETECOLLECTION
    }
}

struct Leases;
impl Strategy for Leases {
    type Object = Lease;
    fn allow_create_on_update(&self) -> bool {
        true
    }
}

struct Deployments;
impl Strategy for Deployments {
    type Object = Deployment;
    fn status_subresource(&self) -> bool {
        true
    }
    fn bumps_generation(&self) -> bool {
        true
    }
    fn scale(&self) -> Option<ScaleSpec> {
        Some(ScaleSpec {
            spec_replicas: "/spec/replicas".into(),
            status_replicas: "/status/replicas".into(),
            selector: Some("/spec/selector".into()),
        })
    }
    fn validate(&self, object: &Deployment) -> ErrorList {
        let replicas = object.spec.replicas.unwrap_or(1);
        if replicas < 0 {
            let field = Path::new("spec").child("replicas");
            return vec![FieldError::invalid(
                &field,
                replicas,
                "must be greater than or equal to 0",
            )];
        }
        Vec::new()
    }
    fn columns(&self) -> Vec<TableColumn> {
        let column = |name: &'static str, type_: &'static str, priority| TableColumn {
            name: name.into(),
            type_: type_.into(),
            format: if name == "Name" { "name" } else { "" }.into(),
            description: "".into(),
            priority,
        };
        vec![
            column("Name", "string", 0),
            column("Replicas", "integer", 0),
            column("Selector", "string", 1),
        ]
    }
    fn row(&self, object: &Deployment) -> Vec<Value> {
        let replicas = object.spec.replicas.unwrap_or(1);
        vec![
            object.metadata.name.clone().into(),
            replicas.into(),
            "".into(),
        ]
    }
}

/// A `pods/binding`-like subresource: sets `spec.nodeName` through [`Objects::update`].
struct Binding;

#[async_trait::async_trait]
impl Subresource for Binding {
    fn name(&self) -> &'static str {
        "binding"
    }
    fn verbs(&self) -> &'static [&'static str] {
        &["create"]
    }
    fn kind(&self) -> Option<(&'static str, &'static str, &'static str)> {
        Some(("", "v1", "Binding"))
    }
    async fn handle(
        &self,
        ctx: &Context<'_>,
        namespace: Option<&str>,
        name: &str,
        request: axum::extract::Request,
    ) -> Result<axum::response::Response, crate::ApiError> {
        let body = crate::rest::negotiation::read_body(request.into_body()).await?;
        let binding = crate::rest::negotiation::parse_json(&body)?;
        let node = binding["target"]["name"].clone();
        let pods = crate::error::GroupResource::new("", "pods");
        let mut bind = |pod: &mut Value| {
            pod["spec"]["nodeName"] = node.clone();
            Ok(())
        };
        let bound = ctx
            .objects
            .update(&pods, namespace, name, &mut bind)
            .await?;
        Ok(axum::Json(bound).into_response())
    }
}

struct Pods;
impl Strategy for Pods {
    type Object = Pod;
    fn subresources(&self) -> Vec<Arc<dyn Subresource>> {
        vec![Arc::new(Binding)]
    }
    fn graceful_delete(&self, _pod: &Pod, requested: Option<i64>) -> Option<i64> {
        Some(requested.unwrap_or(30))
    }
    fn return_deleted_object(&self) -> bool {
        true
    }
    fn selectable_fields(&self, pod: &Pod) -> Vec<(&'static str, String)> {
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        vec![("spec.nodeName", node)]
    }
}

/// A test server with namespace `default`.
async fn server() -> (Router, Arc<State>) {
    let mut registry = Registry::default();
    registry.add(Namespaces);
    registry.add(ConfigMaps);
    registry.add(Pods);
    registry.add(Deployments);
    registry.add(Leases);
    let state = Arc::new(State::new(
        registry,
        Arc::new(memory::Memory::new()),
        ClusterConfig::default(),
    ));
    let app = router(state.clone());
    let reply = send(
        &app,
        "POST",
        "/api/v1/namespaces",
        r#"{"metadata":{"name":"default"}}"#,
    )
    .await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
    (app, state)
}

/// A response: status, headers and the body as JSON (a string when not JSON).
struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: Value,
}

/// Sends a JSON (or, for PATCH, merge-patch) request.
async fn send(app: &Router, method: &str, uri: &str, body: &str) -> Reply {
    let content_type = if method == "PATCH" {
        "application/merge-patch+json"
    } else {
        "application/json"
    };
    send_with(
        app,
        method,
        uri,
        &[("content-type", content_type)],
        body.to_owned(),
    )
    .await
}

async fn send_with(
    app: &Router,
    method: &str,
    uri: &str,
    headers: &[(&str, &str)],
    body: impl Into<Body>,
) -> Reply {
    let mut request = Request::builder().method(method).uri(uri);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = app
        .clone()
        .oneshot(request.body(body.into()).expect("request"))
        .await
        .expect("infallible");
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("body");
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    Reply {
        status,
        headers,
        body,
    }
}

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/default/deployments";
const PODS: &str = "/api/v1/namespaces/default/pods";

fn config_map(name: &str) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","labels":{{"app":"{name}"}}}},"data":{{"k":"v"}}}}"#
    )
}

fn deployment(name: &str, replicas: i32) -> String {
    serde_json::json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            },
        },
    })
    .to_string()
}
