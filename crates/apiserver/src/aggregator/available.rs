//! The APIService availability controller (upstream `pkg/controllers/status`: the local
//! and the remote `AvailableConditionController`). It watches APIServices, Services and
//! Endpoints and re-checks every APIService on each change and every 30 s:
//!
//! - a Local one is `Available` with reason `Local`;
//! - a remote one is `False` with `ServiceNotFound`, `ServicePortError`,
//!   `EndpointsNotFound`, `MissingEndpoints` or `FailedDiscoveryCheck` (a GET of
//!   `/apis/<group>/<version>` on an endpoint, as `system:kube-aggregator` in
//!   `system:masters`, must answer 2xx within 5 s), `Unknown` when the store cannot be
//!   read, else `True` with `Passed`.
//!
//! The condition is written (through `/status` rules) only when it changes. The
//! discovery document each passing check got is kept for [`super::discovery`], and the
//! backend's OpenAPI documents are fetched for [`super::openapi`].

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use http_body_util::BodyExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{APIResourceList, Time};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::{
    APIService, APIServiceCondition,
};
use serde_json::Value;
use skiff_api::apiregistration::{
    AVAILABLE, DEFAULT_SERVICE_PORT, condition, local_available_condition, set_condition,
};

use super::client::{Verify, authority};
use super::proxy::{GROUP_HEADER, USER_HEADER, resolve, server_name};
use super::{Aggregator, Snapshot, service_ref, spec_group, spec_version};
use crate::error::{ApiError, GroupResource};
use crate::registry::Objects;
use crate::rest::objects::ServerObjects;

/// How often every APIService is checked again without a change (upstream's resync).
pub const RESYNC: Duration = Duration::from_secs(30);
/// How long the discovery check may take.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest discovery document read from a backend.
const MAX_BODY: usize = 16 << 20;
/// The user the discovery check runs as.
const CHECK_USER: &str = "system:kube-aggregator";

/// The prefixes whose changes trigger a check.
const WATCHED: [&str; 3] = [
    "/registry/apiservices/",
    "/registry/services/",
    "/registry/endpoints/",
];

fn api_services() -> GroupResource {
    GroupResource::new("apiregistration.k8s.io", "apiservices")
}

/// Runs the controller until the task is aborted; a failed watch restarts after a second.
pub async fn run(aggregator: Arc<Aggregator>) {
    loop {
        if let Err(e) = watch_and_check(&aggregator).await {
            tracing::warn!(error = %e.message, "APIService availability: watch ended");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn watch_and_check(aggregator: &Aggregator) -> Result<(), ApiError> {
    let storage = aggregator.state.storage.clone();
    let revision = storage
        .current_revision()
        .await
        .map_err(ApiError::internal)?;
    let mut streams = Vec::new();
    for prefix in WATCHED {
        streams.push(
            storage
                .watch(prefix, revision)
                .await
                .map_err(ApiError::internal)?,
        );
    }
    let mut changes = futures::stream::select_all(streams);
    let mut resync = tokio::time::interval(RESYNC);
    resync.tick().await;
    loop {
        check_all(aggregator).await;
        tokio::select! {
            item = changes.next() => {
                match item {
                    None => return Ok(()),
                    Some(Err(e)) => return Err(ApiError::internal(e)),
                    Some(Ok(_)) => {}
                }
                // Take the burst of changes a kubectl apply makes in one pass.
                tokio::time::sleep(Duration::from_millis(100)).await;
                while let Some(Some(item)) = futures::FutureExt::now_or_never(changes.next()) {
                    item.map_err(ApiError::internal)?;
                }
            }
            _ = resync.tick() => {}
        }
    }
}

/// Checks every APIService, writes the conditions that changed and publishes the new
/// snapshot.
pub async fn check_all(aggregator: &Aggregator) {
    let user = crate::bootstrap::system_user();
    let objects = ServerObjects::new(&aggregator.state, &user, false);
    let listed = match objects.list(&api_services(), None).await {
        Ok(list) => list,
        Err(e) => {
            tracing::warn!(error = %e.message, "APIService availability: listing");
            return;
        }
    };
    let services: Vec<APIService> = listed
        .into_iter()
        .filter_map(|v| serde_json::from_value(v).ok())
        .collect();
    let checks =
        futures::future::join_all(services.iter().map(|s| check(aggregator, &objects, s))).await;
    let mut snapshot = Snapshot::default();
    for (mut api_service, (wanted, discovery)) in services.into_iter().zip(checks) {
        let Some(name) = api_service.metadata.name.clone() else {
            continue;
        };
        if changes(&api_service, &wanted) {
            match write_condition(&objects, &name, &wanted).await {
                Ok(stored) => api_service = stored,
                Err(e) => {
                    tracing::warn!(apiservice = %name, error = %e.message, "writing the Available condition");
                    set_condition(&mut api_service, wanted.clone());
                }
            }
        }
        if let Some(list) = discovery {
            snapshot.discovery.insert(name.clone(), list);
            let fetched = super::openapi::fetch(aggregator, &objects, &api_service).await;
            if let Some(v2) = fetched.v2 {
                snapshot.openapi_v2.insert(name.clone(), v2);
            }
            if let Some(v3) = fetched.v3 {
                snapshot.openapi_v3.insert(name.clone(), v3);
            }
        }
        snapshot.services.insert(name, api_service);
    }
    aggregator.publish(snapshot);
}

/// Whether setting `wanted` changes the stored condition (transition times aside).
fn changes(api_service: &APIService, wanted: &APIServiceCondition) -> bool {
    condition(api_service, AVAILABLE).is_none_or(|c| {
        (c.status.as_str(), c.reason.as_deref(), c.message.as_deref())
            != (
                wanted.status.as_str(),
                wanted.reason.as_deref(),
                wanted.message.as_deref(),
            )
    })
}

async fn write_condition(
    objects: &ServerObjects<'_>,
    name: &str,
    wanted: &APIServiceCondition,
) -> Result<APIService, ApiError> {
    let mut mutate = |value: &mut Value| -> Result<(), ApiError> {
        let mut current: APIService =
            serde_json::from_value(value.clone()).map_err(ApiError::internal)?;
        set_condition(&mut current, wanted.clone());
        *value = serde_json::to_value(&current).map_err(ApiError::internal)?;
        Ok(())
    };
    let stored = objects
        .update(&api_services(), None, name, &mut mutate)
        .await?;
    serde_json::from_value(stored).map_err(ApiError::internal)
}

fn now() -> Time {
    Time(crate::registry::printers::now())
}

fn condition_of(status: &str, reason: &str, message: String) -> APIServiceCondition {
    APIServiceCondition {
        type_: AVAILABLE.to_owned(),
        status: status.to_owned(),
        last_transition_time: Some(now()),
        reason: Some(reason.to_owned()),
        message: Some(message),
    }
}

/// The `Available` condition `api_service` should have, and the discovery document its
/// backend served when the check passed.
pub async fn check(
    aggregator: &Aggregator,
    objects: &dyn Objects,
    api_service: &APIService,
) -> (APIServiceCondition, Option<APIResourceList>) {
    let Some(service) = service_ref(api_service) else {
        return (local_available_condition(now()), None);
    };
    let namespace = service.namespace.as_deref().unwrap_or_default();
    let name = service.name.as_deref().unwrap_or_default();
    let false_because =
        |reason: &str, message: String| (condition_of("False", reason, message), None);
    let svc = match objects
        .get(&GroupResource::new("", "services"), Some(namespace), name)
        .await
    {
        Ok(svc) => svc,
        Err(e) if e.code == 404 => {
            return false_because(
                "ServiceNotFound",
                format!("service/{name} in {namespace:?} is not present"),
            );
        }
        Err(e) => {
            let message = format!(
                "service/{name} in {namespace:?} cannot be checked due to: {}",
                e.message
            );
            return (condition_of("Unknown", "ServiceAccessError", message), None);
        }
    };
    if svc["spec"]["type"].as_str().unwrap_or("ClusterIP") == "ClusterIP" {
        let port = service.port.unwrap_or(DEFAULT_SERVICE_PORT);
        let Some(port_name) = svc["spec"]["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["port"].as_i64() == Some(i64::from(port)))
            .map(|p| p["name"].as_str().unwrap_or_default().to_owned())
        else {
            return false_because(
                "ServicePortError",
                format!("service/{name} in {namespace:?} is not listening on port {port}"),
            );
        };
        let endpoints = match objects
            .get(&GroupResource::new("", "endpoints"), Some(namespace), name)
            .await
        {
            Ok(endpoints) => endpoints,
            Err(e) if e.code == 404 => {
                return false_because(
                    "EndpointsNotFound",
                    format!("cannot find endpoints for service/{name} in {namespace:?}"),
                );
            }
            Err(e) => {
                let message = format!(
                    "service/{name} in {namespace:?} cannot be checked due to: {}",
                    e.message
                );
                return (
                    condition_of("Unknown", "EndpointsAccessError", message),
                    None,
                );
            }
        };
        let active = endpoints["subsets"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|subset| {
                subset["addresses"]
                    .as_array()
                    .is_some_and(|a| !a.is_empty())
                    && subset["ports"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|p| p["name"].as_str().unwrap_or_default() == port_name)
            });
        if !active {
            return false_because(
                "MissingEndpoints",
                format!(
                    "endpoints for service/{name} in {namespace:?} have no addresses with port name {port_name:?}"
                ),
            );
        }
    }
    match discovery_check(aggregator, objects, api_service).await {
        Ok(list) => (
            condition_of("True", "Passed", "all checks passed".to_owned()),
            list,
        ),
        Err(message) => false_because("FailedDiscoveryCheck", message),
    }
}

/// A GET of the APIService's discovery path on an endpoint of its Service (TLS not
/// verified, as upstream's check), within [`CHECK_TIMEOUT`]. Returns the document when
/// it is an `APIResourceList`; errors carry upstream's message.
async fn discovery_check(
    aggregator: &Aggregator,
    objects: &dyn Objects,
    api_service: &APIService,
) -> Result<Option<APIResourceList>, String> {
    let path = if api_service.metadata.name.as_deref() == Some("v1.") {
        format!("/api/{}", spec_version(api_service))
    } else {
        format!(
            "/apis/{}/{}",
            spec_group(api_service),
            spec_version(api_service)
        )
    };
    let body = backend_get(aggregator, objects, api_service, &path, MAX_BODY).await?;
    Ok(serde_json::from_slice::<APIResourceList>(&body).ok())
}

/// A GET of `path` (JSON) on an endpoint of `api_service`'s Service, as
/// `system:kube-aggregator` in `system:masters`, TLS not verified (as upstream's
/// availability and OpenAPI controllers), within [`CHECK_TIMEOUT`], reading at most
/// `limit` bytes. Errors: upstream's discovery-check messages; a Local APIService has
/// nothing to get (an empty body).
pub(crate) async fn backend_get(
    aggregator: &Aggregator,
    objects: &dyn Objects,
    api_service: &APIService,
    path: &str,
    limit: usize,
) -> Result<bytes::Bytes, String> {
    let Some(service) = service_ref(api_service) else {
        return Ok(bytes::Bytes::new());
    };
    let (ip, port) = resolve(objects, service).await?;
    let url = format!("https://{}{path}", authority(ip, port));
    let failing = |why: String| format!("failing or missing response from {url}: {why}");
    let request = hyper::Request::get(path)
        .header(USER_HEADER, CHECK_USER)
        .header(GROUP_HEADER, "system:masters")
        .header(hyper::header::ACCEPT, "application/json")
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .map_err(|e| failing(e.to_string()))?;
    let name = server_name(service);
    let exchange = async {
        let response = aggregator
            .client
            .send(ip, port, &name, Verify::Insecure, request)
            .await
            .map_err(|e| failing(format!("Get {url:?}: {e:#}")))?;
        let status = response.status();
        if !status.is_success() {
            return Err(failing(format!(
                "bad status from {url}: {}",
                status.as_u16()
            )));
        }
        Ok(http_body_util::Limited::new(response.into_body(), limit)
            .collect()
            .await
            .map_err(|e| failing(format!("Get {url:?}: {e}")))?
            .to_bytes())
    };
    match tokio::time::timeout(CHECK_TIMEOUT, exchange).await {
        Ok(result) => result,
        Err(_) => Err(failing(format!(
            "Get {url:?}: context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
        ))),
    }
}
