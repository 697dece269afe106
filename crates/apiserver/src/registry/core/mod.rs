//! The core/v1 kinds (upstream `pkg/registry/core/*`): namespaces, pods (with the binding
//! and eviction subresources), nodes, services (with cluster IP and node port allocation),
//! endpoints, configmaps, secrets, serviceaccounts, events, limitranges, resourcequotas,
//! persistentvolumes and persistentvolumeclaims, replicationcontrollers, podtemplates,
//! componentstatuses and the legacy bindings. Defaulting and validation live in
//! `skiff_api::core`, shared with the kubelet.

mod bindings;
mod component_statuses;
mod config;
mod endpoints;
mod events;
pub mod namespaces;
mod nodes;
mod pods;
mod policies;
mod replication_controllers;
mod service_accounts;
mod services;
mod volumes;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;

use crate::error::ApiError;
use crate::registry::Registry;
use crate::rest::negotiation::{content_type, decode_object};

/// Adds every core/v1 kind to `registry`.
pub fn add(registry: &mut Registry) {
    registry.add(namespaces::Namespaces);
    registry.add(pods::Pods);
    registry.add(nodes::Nodes);
    registry.add(services::Services::default());
    registry.add(endpoints::Endpoints);
    registry.add(config::ConfigMaps);
    registry.add(config::Secrets);
    registry.add(service_accounts::ServiceAccounts);
    registry.add(events::Events);
    registry.add(policies::LimitRanges);
    registry.add(policies::ResourceQuotas);
    registry.add(volumes::PersistentVolumes);
    registry.add(volumes::PersistentVolumeClaims);
    registry.add(replication_controllers::ReplicationControllers);
    registry.add(replication_controllers::PodTemplates);
    registry.add(component_statuses::ComponentStatuses);
    registry.add(bindings::Bindings);
}

/// Reads a subresource's body (JSON, YAML or protobuf, by `Content-Type`) as `T`.
/// Errors: 413 on a body that is too large, 400 on one that is not a `T`, 415 for another
/// media type.
async fn read_body<T: DeserializeOwned>(request: axum::extract::Request) -> Result<T, ApiError> {
    let media_type = content_type(request.headers());
    let bytes = crate::rest::negotiation::read_body(request.into_body()).await?;
    let value = decode_object(&media_type, &bytes)?;
    serde_json::from_value(value).map_err(|e| {
        ApiError::bad_request(format!("the body of the request could not be decoded: {e}"))
    })
}

/// Upstream's answer to a successful binding or eviction: 201 and a Success Status.
fn created() -> Response {
    let body = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": 201,
    });
    (StatusCode::CREATED, axum::Json(body)).into_response()
}
