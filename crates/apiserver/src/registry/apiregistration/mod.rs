//! apiregistration.k8s.io/v1 apiservices (the kube-aggregator's
//! `pkg/registry/apiservice`: strategy, status strategy and the table of `etcd.go`).
//! Cluster-scoped, category `api-extensions`, with `/status`. A Local APIService (no
//! `spec.service`) is Available from its creation; the aggregator's availability
//! controller ([`crate::aggregator`]) keeps the others' condition.

use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use serde_json::Value;
use skiff_api::apiregistration;
use skiff_api::field::ErrorList;

use super::printers::{self, AGE, NAME, column};
use super::{Registry, ResourceInfo, Strategy, TableColumn};

/// Adds apiservices.
pub fn add(registry: &mut Registry) {
    registry.add(ApiServices);
}

/// The APIService kind.
pub struct ApiServices;

impl Strategy for ApiServices {
    type Object = APIService;

    fn info(&self) -> ResourceInfo {
        ResourceInfo {
            categories: &["api-extensions"],
            ..ResourceInfo::of::<APIService>()
        }
    }

    fn status_subresource(&self) -> bool {
        true
    }

    fn name_rule(&self) -> skiff_api::names::ValidateNameFn {
        skiff_api::names::validate_path_segment_name
    }

    fn default(&self, object: &mut APIService) {
        apiregistration::default(object);
    }

    fn prepare_for_create(&self, object: &mut APIService) {
        object.status = None;
        let local = object.spec.as_ref().is_none_or(|s| s.service.is_none());
        if local {
            let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(printers::now());
            apiregistration::set_condition(object, apiregistration::local_available_condition(now));
        }
    }

    fn validate(&self, object: &APIService) -> ErrorList {
        apiregistration::validate(object)
    }

    /// The main resource's update keeps the stored status and `/status` the stored spec
    /// (the REST layer's), so one rule serves both: upstream's spec validation and its
    /// status strategy's condition check.
    fn validate_update(&self, new: &APIService, _old: &APIService) -> ErrorList {
        let mut errors = apiregistration::validate(new);
        errors.extend(apiregistration::validate_status(new));
        errors
    }

    fn columns(&self) -> Vec<TableColumn> {
        vec![
            NAME,
            column(
                "Service",
                "string",
                "The reference to the service that hosts this API endpoint.",
                0,
            ),
            column(
                "Available",
                "string",
                "Whether this service is available.",
                0,
            ),
            AGE,
        ]
    }

    fn row(&self, object: &APIService) -> Vec<Value> {
        vec![
            Value::from(printers::name(&object.metadata)),
            Value::from(service_cell(object)),
            Value::from(available_cell(object)),
            printers::age(&object.metadata),
        ]
    }
}

/// `Local`, or `<namespace>/<name>` of the service.
fn service_cell(object: &APIService) -> String {
    match object.spec.as_ref().and_then(|s| s.service.as_ref()) {
        None => "Local".to_owned(),
        Some(service) => format!(
            "{}/{}",
            service.namespace.as_deref().unwrap_or_default(),
            service.name.as_deref().unwrap_or_default()
        ),
    }
}

/// `True`, `False (<reason>)`, the bare status without a reason, `Unknown` without the
/// condition.
fn available_cell(object: &APIService) -> String {
    match apiregistration::condition(object, apiregistration::AVAILABLE) {
        None => "Unknown".to_owned(),
        Some(c) if c.status == "True" => c.status.clone(),
        Some(c) => match c.reason.as_deref().filter(|r| !r.is_empty()) {
            Some(reason) => format!("{} ({reason})", c.status),
            None => c.status.clone(),
        },
    }
}

#[cfg(test)]
mod tests;
