//! Test kinds for the discovery and OpenAPI tests: trivial strategies over k8s-openapi
//! types with the names, subresources and scale of their upstream kinds.

use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};

use crate::error::ApiError;
use crate::registry::{Context, Registry, ResourceInfo, ScaleSpec, Strategy, Subresource};

pub struct ConfigMaps;
impl Strategy for ConfigMaps {
    type Object = ConfigMap;
    fn info(&self) -> ResourceInfo {
        ResourceInfo {
            short_names: &["cm"],
            ..ResourceInfo::of::<ConfigMap>()
        }
    }
}

pub struct Namespaces;
impl Strategy for Namespaces {
    type Object = Namespace;
    fn info(&self) -> ResourceInfo {
        ResourceInfo {
            short_names: &["ns"],
            ..ResourceInfo::of::<Namespace>()
        }
    }
    fn status_subresource(&self) -> bool {
        true
    }
}

/// `pods/log` (a stream) and `pods/binding` (a `Binding` body), as upstream lists them.
struct Log;
struct Binding;

#[async_trait]
impl Subresource for Log {
    fn name(&self) -> &'static str {
        "log"
    }
    fn verbs(&self) -> &'static [&'static str] {
        &["get"]
    }
    fn kind(&self) -> Option<(&'static str, &'static str, &'static str)> {
        None
    }
    async fn handle(
        &self,
        _ctx: &Context<'_>,
        _namespace: Option<&str>,
        _name: &str,
        _request: axum::extract::Request,
    ) -> Result<axum::response::Response, ApiError> {
        Err(ApiError::bad_request("test subresource"))
    }
}

#[async_trait]
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
        _ctx: &Context<'_>,
        _namespace: Option<&str>,
        _name: &str,
        _request: axum::extract::Request,
    ) -> Result<axum::response::Response, ApiError> {
        Err(ApiError::bad_request("test subresource"))
    }
}

pub struct Pods;
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
    fn subresources(&self) -> Vec<Arc<dyn Subresource>> {
        vec![Arc::new(Log), Arc::new(Binding)]
    }
}

pub struct Deployments;
impl Strategy for Deployments {
    type Object = Deployment;
    fn info(&self) -> ResourceInfo {
        ResourceInfo {
            short_names: &["deploy"],
            categories: &["all"],
            ..ResourceInfo::of::<Deployment>()
        }
    }
    fn status_subresource(&self) -> bool {
        true
    }
    fn scale(&self) -> Option<ScaleSpec> {
        Some(ScaleSpec {
            spec_replicas: "/spec/replicas".into(),
            status_replicas: "/status/replicas".into(),
            selector: Some("/spec/selector".into()),
        })
    }
}

/// A registry of the test kinds, added out of upstream's order.
pub fn registry() -> Registry {
    let mut registry = Registry::default();
    registry.add(Deployments);
    registry.add(Pods);
    registry.add(ConfigMaps);
    registry.add(Namespaces);
    registry
}

/// A server at 192.168.1.10:6443 with service network 10.96.0.0/12.
pub fn addresses() -> super::ServerAddresses {
    let network =
        ipnet::IpNet::from(ipnet::Ipv4Net::new([10, 96, 0, 0].into(), 12).unwrap_or_default());
    super::ServerAddresses::new(
        [192, 168, 1, 10].into(),
        6443,
        network,
        [10, 96, 0, 1].into(),
    )
}

/// `events.k8s.io/v1` events and `batch/v1` jobs: groups upstream orders by priority
/// (events before batch), not by name.
pub struct Events;
impl Strategy for Events {
    type Object = k8s_openapi::api::events::v1::Event;
}

pub struct Jobs;
impl Strategy for Jobs {
    type Object = k8s_openapi::api::batch::v1::Job;
}
