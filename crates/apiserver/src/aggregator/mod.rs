//! API aggregation (upstream `k8s.io/kube-aggregator`): APIServices name who serves each
//! `/apis/<group>/<version>`. Local ones are this server's own group versions
//! ([`builtin`]); the others are extension API servers reached through a Service, to
//! which requests are proxied ([`proxy`]) with the user in the front-proxy request
//! headers (`X-Remote-User`, `X-Remote-Group`, `X-Remote-Extra-*`) over TLS with the
//! front-proxy client certificate.
//!
//! - [`Aggregator::middleware`] sits behind authentication: it proxies the requests of
//!   remote group versions, answers `/apis/<group>` for their groups, and merges their
//!   groups into `/apis` (legacy `APIGroupList` and the aggregated
//!   `APIGroupDiscoveryList`, [`discovery`]);
//! - [`available::run`] is the availability controller: it watches APIServices, Services
//!   and Endpoints, checks each remote APIService (service, port, endpoints, a GET of its
//!   discovery document within 5 s) every 30 s and on changes, writes the `Available`
//!   condition with upstream's reasons and messages, and keeps the backends' discovery
//!   documents it fetched;
//! - [`openapi`] merges the backends' OpenAPI v2 documents and v3 index entries into
//!   the server's;
//! - [`crdregistration`] keeps a Local APIService for each custom resource group
//!   version;
//! - [`authentication`] writes `kube-system/extension-apiserver-authentication`, which
//!   tells extension API servers which client CA and front-proxy CA to trust;
//! - `sample` is a small extension API server for tests (feature `test-support`).
//!
//! Upstream resolves a Service to its cluster IP through kube-proxy unless
//! `--enable-aggregator-routing`; Skiff always routes to an endpoint address and port, as
//! with that flag.

pub mod authentication;
pub mod available;
pub mod builtin;
pub mod client;
pub mod crdregistration;
pub mod discovery;
pub mod openapi;
pub mod proxy;
#[cfg(any(test, feature = "test-support"))]
pub mod sample;

use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError, RwLock};

use axum::extract::Request;
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::{APIService, ServiceReference};

pub use builtin::ensure_local_api_services;
use client::BackendClient;
use skiff_bootstrap::pki::CertKey;

use crate::rest;

/// [`Aggregator::route`] for the [`Aggregator`] an outer layer put in the request's
/// extensions (`axum::Extension`); without one, the request goes on untouched (servers
/// and tests without aggregation).
pub async fn middleware(request: Request, next: Next) -> Response {
    match request.extensions().get::<Arc<Aggregator>>().cloned() {
        Some(aggregator) => aggregator.route(request, next).await,
        None => next.run(request).await,
    }
}

/// The APIServices as the availability controller last saw them, and the discovery
/// documents of the available remote ones.
#[derive(Debug, Default, Clone)]
pub struct Snapshot {
    /// Every APIService by name.
    pub services: BTreeMap<String, APIService>,
    /// The `APIResourceList` each available remote APIService (by name) served.
    pub discovery: BTreeMap<String, APIResourceList>,
    /// The OpenAPI v2 document each available remote APIService's backend served.
    pub openapi_v2: BTreeMap<String, Arc<serde_json::Value>>,
    /// The `serverRelativeURL` of each available remote APIService's OpenAPI v3 document,
    /// as its backend's index gave it.
    pub openapi_v3: BTreeMap<String, String>,
}

impl Snapshot {
    /// The remote APIService that serves `group`/`version`, if any.
    pub fn remote(&self, group: &str, version: &str) -> Option<&APIService> {
        self.services
            .get(&format!("{version}.{group}"))
            .filter(|s| service_ref(s).is_some())
    }

    /// The APIServices of `group`, when one of them is remote.
    pub fn remote_group(&self, group: &str) -> Option<Vec<&APIService>> {
        let all: Vec<&APIService> = self
            .services
            .values()
            .filter(|s| spec_group(s) == group)
            .collect();
        all.iter().any(|s| service_ref(s).is_some()).then_some(all)
    }
}

/// The group an APIService names (`""` for core).
pub fn spec_group(api_service: &APIService) -> &str {
    api_service
        .spec
        .as_ref()
        .and_then(|s| s.group.as_deref())
        .unwrap_or_default()
}

/// The version an APIService names.
pub fn spec_version(api_service: &APIService) -> &str {
    api_service
        .spec
        .as_ref()
        .and_then(|s| s.version.as_deref())
        .unwrap_or_default()
}

/// The Service of a remote APIService, `None` for a Local one.
pub fn service_ref(api_service: &APIService) -> Option<&ServiceReference> {
    api_service.spec.as_ref()?.service.as_ref()
}

/// The aggregator: the server's state, the front-proxy client and the current
/// [`Snapshot`].
pub struct Aggregator {
    pub(crate) state: Arc<rest::State>,
    pub(crate) client: BackendClient,
    snapshot: RwLock<Arc<Snapshot>>,
    /// The last merged OpenAPI v2 document.
    openapi: openapi::Cache,
}

impl Aggregator {
    /// An aggregator over `state`'s objects that presents `front_proxy_client` to
    /// backends. Errors: the certificate or key is not valid PEM.
    pub fn new(state: Arc<rest::State>, front_proxy_client: &CertKey) -> anyhow::Result<Arc<Self>> {
        Ok(Arc::new(Aggregator {
            state,
            client: BackendClient::new(front_proxy_client)?,
            snapshot: RwLock::new(Arc::new(Snapshot::default())),
            openapi: openapi::Cache::default(),
        }))
    }

    /// The APIServices now.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn publish(&self, snapshot: Snapshot) {
        *self
            .snapshot
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Arc::new(snapshot);
    }

    /// The aggregator's routes in front of the server's own: remote group versions are
    /// proxied, their groups answered and merged into `/apis`; anything else goes on to
    /// `next`. Runs after authentication (the user is in the request's extensions).
    pub async fn route(self: Arc<Self>, request: Request, next: Next) -> Response {
        let aggregator = self;
        let path = request.uri().path().to_owned();
        let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let snapshot = aggregator.snapshot();
        match segments.as_slice() {
            ["apis"] if request.method() == Method::GET => {
                // The merged document has its own ETag: the server's must not answer 304.
                let mut request = request;
                if snapshot.services.values().any(|s| service_ref(s).is_some()) {
                    request
                        .headers_mut()
                        .remove(axum::http::header::IF_NONE_MATCH);
                }
                let response = next.run(request).await;
                discovery::merge_into_apis(&snapshot, response).await
            }
            ["apis", group] if request.method() == Method::GET => {
                match snapshot.remote_group(group) {
                    Some(services) => {
                        discovery::group_document(group, &services, request.headers())
                    }
                    None => next.run(request).await,
                }
            }
            ["openapi", "v2"]
                if request.method() == Method::GET && !snapshot.openapi_v2.is_empty() =>
            {
                openapi::serve_v2(&aggregator, snapshot, request, next).await
            }
            ["openapi", "v3"]
                if request.method() == Method::GET && !snapshot.openapi_v3.is_empty() =>
            {
                openapi::serve_v3_index(&snapshot, request, next).await
            }
            ["openapi", "v3", "apis", group, version] if request.method() == Method::GET => {
                match snapshot.remote(group, version) {
                    Some(api_service) => {
                        let api_service = api_service.clone();
                        proxy::serve(&aggregator, &api_service, request).await
                    }
                    None => next.run(request).await,
                }
            }
            ["apis", group, version, ..] => match snapshot.remote(group, version) {
                Some(api_service) => {
                    let api_service = api_service.clone();
                    proxy::serve(&aggregator, &api_service, request).await
                }
                None => next.run(request).await,
            },
            _ => next.run(request).await,
        }
    }
}
