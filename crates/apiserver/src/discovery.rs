//! Discovery: what the server serves, as kubectl and client-go learn it before any request
//! (upstream `k8s.io/apiserver/pkg/endpoints/discovery` and its `aggregated` package).
//!
//! - `GET /version`: `version.Info` ([`version_info`]);
//! - `GET /api`: `APIVersions` (`["v1"]`), or the aggregated `APIGroupDiscoveryList` of the
//!   core group;
//! - `GET /apis`: `APIGroupList`, or the aggregated `APIGroupDiscoveryList` of every named
//!   group, in upstream's group order ([`group_priority`]);
//! - `GET /api/v1`, `GET /apis/<group>/<version>`: `APIResourceList` with subresources
//!   (`pods/status`, `deployments/scale`, ...);
//! - `GET /apis/<group>`: `APIGroup`.
//!
//! Aggregated discovery (`apidiscovery.k8s.io` v2, and v2beta1 for kubectl 1.27) is chosen by
//! the `Accept` header (`application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList`)
//! and answered with the same media type and parameters as `Content-Type`. Every document is
//! built once, when the router is built, and answered with an `ETag`.

mod addresses;
mod aggregated;
mod document;
mod order;
#[cfg(test)]
mod smoke_tests;
#[cfg(test)]
pub(crate) mod testing;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::http::header::ACCEPT;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    APIGroup, APIGroupList, APIResource, APIResourceList, APIVersions, GroupVersionForDiscovery,
};
use k8s_openapi::apimachinery::pkg::version::Info;

use crate::error::ApiError;
use crate::registry::{Kind, LiveRegistry, Registry};

pub use addresses::ServerAddresses;
pub(crate) use document::Document;
pub(crate) use order::compare_versions;
pub use order::group_priority;

/// The Kubernetes release whose API Skiff serves (`/version`), the one the kubelet reports.
pub use skiff_api::version::{GIT_VERSION, KUBERNETES_MAJOR, KUBERNETES_MINOR};

/// The `application/json` media type of every discovery document but the aggregated ones.
const JSON: &str = "application/json";

/// The verbs of the generic `status` and `scale` subresources.
const SUBRESOURCE_VERBS: [&str; 3] = ["get", "patch", "update"];

/// `/version` (`k8s.io/apimachinery/pkg/version.Info`). Skiff is not built by Go: `compiler`
/// is `rustc` and `goVersion` names the minimum Rust toolchain.
pub fn version_info() -> Info {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        other => other,
    };
    Info {
        major: KUBERNETES_MAJOR.to_owned(),
        minor: KUBERNETES_MINOR.to_owned(),
        emulation_major: Some(KUBERNETES_MAJOR.to_owned()),
        emulation_minor: Some(KUBERNETES_MINOR.to_owned()),
        min_compatibility_major: Some(KUBERNETES_MAJOR.to_owned()),
        min_compatibility_minor: Some(KUBERNETES_MINOR.to_owned()),
        git_version: GIT_VERSION.to_owned(),
        git_commit: String::new(),
        git_tree_state: "clean".to_owned(),
        build_date: String::new(),
        go_version: format!("rust{}", env!("CARGO_PKG_RUST_VERSION")),
        compiler: "rustc".to_owned(),
        platform: format!("{}/{arch}", std::env::consts::OS),
    }
}

/// The routes of discovery and `/version`, answering from documents built here from
/// `registry`; `/api` names the server by `addresses`.
pub fn router<S: Clone + Send + Sync + 'static>(
    registry: Arc<LiveRegistry>,
    addresses: ServerAddresses,
) -> Router<S> {
    let documents = Arc::new(Discovery {
        registry,
        addresses,
        cache: Mutex::new(None),
    });
    Router::new()
        .route("/version", get(version))
        .route("/api", get(api))
        .route("/apis", get(apis))
        .route("/api/{version}", get(core_resources))
        .route("/apis/{group}", get(group))
        .route("/apis/{group}/{version}", get(group_resources))
        .with_state(documents)
}

/// A kind's group, version and resource names, grouped for discovery: named groups (in
/// upstream's order) with their versions (preferred first) and each version's kinds
/// (sorted by resource).
pub(crate) struct GroupVersions<'a> {
    /// `""` for core.
    pub name: &'a str,
    pub versions: Vec<(&'a str, Vec<&'a Arc<dyn Kind>>)>,
}

/// The registry's kinds by group and version, core first, then named groups in upstream's
/// order (higher [`group_priority`] first, then by name); versions by upstream's version
/// priority (`v1` before `v1beta1`); kinds by resource name.
pub(crate) fn grouped(registry: &Registry) -> Vec<GroupVersions<'_>> {
    type Versions<'a> = BTreeMap<&'a str, Vec<&'a Arc<dyn Kind>>>;
    let mut by_group: BTreeMap<&str, Versions<'_>> = BTreeMap::new();
    for kind in registry.kinds() {
        let info = kind.info();
        by_group
            .entry(info.group.as_str())
            .or_default()
            .entry(info.version.as_str())
            .or_default()
            .push(kind);
    }
    let mut groups: Vec<GroupVersions<'_>> = by_group
        .into_iter()
        .map(|(name, versions)| {
            let mut versions: Vec<_> = versions.into_iter().collect();
            versions.sort_by(|a, b| order::compare_versions(a.0, b.0));
            for (_, kinds) in &mut versions {
                kinds.sort_by(|a, b| a.info().plural.cmp(&b.info().plural));
            }
            GroupVersions { name, versions }
        })
        .collect();
    groups.sort_by(|a, b| {
        group_priority(b.name)
            .cmp(&group_priority(a.name))
            .then(a.name.cmp(b.name))
    });
    groups
}

/// Discovery of the kinds served now: the documents of the registry's current snapshot,
/// rendered again when a custom resource's kind comes or goes.
struct Discovery {
    registry: Arc<LiveRegistry>,
    addresses: ServerAddresses,
    /// The snapshot the documents were rendered from, and the documents.
    cache: Mutex<Option<(Arc<Registry>, Arc<Documents>)>>,
}

impl Discovery {
    /// The documents of the current snapshot (a few milliseconds to render after a change).
    fn documents(&self) -> Arc<Documents> {
        let registry = self.registry.current();
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        match &*cache {
            Some((rendered, documents)) if Arc::ptr_eq(rendered, &registry) => documents.clone(),
            _ => {
                let documents = Arc::new(Documents::build(&registry, self.addresses.clone()));
                *cache = Some((registry, documents.clone()));
                documents
            }
        }
    }
}

/// The discovery documents of one registry.
struct Documents {
    /// `/version`.
    version: Document,
    /// The versions of the core group (`/api`; its `serverAddressByClientCIDRs` depend on
    /// the client).
    core_versions: Vec<String>,
    /// Where clients reach the server.
    addresses: ServerAddresses,
    /// `/apis` as `APIGroupList`.
    group_list: Document,
    /// `/apis/<group>` by group.
    groups: BTreeMap<String, Document>,
    /// `APIResourceList`s by `v1` or `<group>/<version>`.
    resources: BTreeMap<String, Document>,
    /// Aggregated `/api` and `/apis`, v2 and v2beta1.
    aggregated: aggregated::Documents,
}

impl Documents {
    fn build(registry: &Registry, addresses: ServerAddresses) -> Self {
        let grouped = grouped(registry);
        let mut core_versions = Vec::new();
        let mut api_groups = Vec::new();
        let mut resources = BTreeMap::new();
        for group in &grouped {
            for (version, kinds) in &group.versions {
                let group_version = group_version(group.name, version);
                let list = APIResourceList {
                    group_version: group_version.clone(),
                    resources: kinds
                        .iter()
                        .flat_map(|k| api_resources(k.as_ref()))
                        .collect(),
                };
                resources.insert(group_version, Document::json(&list));
            }
            if group.name.is_empty() {
                core_versions = group.versions.iter().map(|(v, _)| v.to_string()).collect();
            } else {
                api_groups.push(api_group(group));
            }
        }
        let groups = api_groups
            .iter()
            .map(|g| (g.name.clone(), Document::json(g)))
            .collect();
        Documents {
            version: Document::json(&version_info()),
            core_versions,
            addresses,
            group_list: Document::json(&group_list(api_groups)),
            groups,
            resources,
            aggregated: aggregated::Documents::build(&grouped),
        }
    }
}

/// `v1` for core, else `<group>/<version>`.
pub(crate) fn group_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    }
}

/// `APIGroupList` as upstream writes it: the groups inside without their own `kind` and
/// `apiVersion` (which k8s-openapi writes for every `APIGroup`).
fn group_list(groups: Vec<APIGroup>) -> serde_json::Value {
    let mut list = serde_json::to_value(APIGroupList { groups }).unwrap_or_default();
    if let Some(groups) = list.get_mut("groups").and_then(|g| g.as_array_mut()) {
        for group in groups.iter_mut().filter_map(|g| g.as_object_mut()) {
            group.remove("kind");
            group.remove("apiVersion");
        }
    }
    list
}

fn api_group(group: &GroupVersions<'_>) -> APIGroup {
    let versions: Vec<GroupVersionForDiscovery> = group
        .versions
        .iter()
        .map(|(version, _)| GroupVersionForDiscovery {
            group_version: group_version(group.name, version),
            version: version.to_string(),
        })
        .collect();
    APIGroup {
        name: group.name.to_owned(),
        preferred_version: versions.first().cloned(),
        server_address_by_client_cidrs: None,
        versions,
    }
}

/// A subresource as discovery lists it: name, verbs and the group, version and kind of
/// its body.
pub(crate) struct SubresourceInfo<'a> {
    pub name: &'a str,
    pub verbs: Vec<&'static str>,
    pub group: &'a str,
    pub version: &'a str,
    pub kind: &'a str,
}

/// The subresources of `kind`, sorted by name: `status` and the part subresources (the
/// kind itself), `scale` (`autoscaling/v1 Scale`) and the kind's own; a subresource without a body kind (a
/// stream such as `pods/log`) is listed with the kind of its parent, as upstream does.
pub(crate) fn subresources(kind: &dyn Kind) -> Vec<SubresourceInfo<'_>> {
    let info = kind.info();
    let mut out = Vec::new();
    if kind.status_subresource() {
        out.push(SubresourceInfo {
            name: "status",
            verbs: SUBRESOURCE_VERBS.to_vec(),
            group: &info.group,
            version: &info.version,
            kind: &info.kind,
        });
    }
    for name in kind.part_subresources() {
        out.push(SubresourceInfo {
            name,
            verbs: SUBRESOURCE_VERBS.to_vec(),
            group: &info.group,
            version: &info.version,
            kind: &info.kind,
        });
    }
    if kind.scale().is_some() {
        out.push(SubresourceInfo {
            name: "scale",
            verbs: SUBRESOURCE_VERBS.to_vec(),
            group: "autoscaling",
            version: "v1",
            kind: "Scale",
        });
    }
    for sub in kind.subresources() {
        let (group, version, body) = sub
            .kind()
            .unwrap_or((&info.group, &info.version, &info.kind));
        let mut verbs = sub.verbs().to_vec();
        verbs.sort_unstable();
        out.push(SubresourceInfo {
            name: sub.name(),
            verbs,
            group,
            version,
            kind: body,
        });
    }
    out.sort_by_key(|s| s.name);
    out
}

/// Upstream's `storageVersionHash`: the first 8 bytes of the SHA-256 of
/// `<group>/<version>/<kind>`, base64 (`xPOwRZ+Yhw8=` for `/v1/Pod`). Clients compare it to
/// notice a changed storage version.
pub(crate) fn storage_version_hash(group: &str, version: &str, kind: &str) -> String {
    use base64::Engine;
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("{group}/{version}/{kind}").as_bytes());
    base64::engine::general_purpose::STANDARD.encode(&digest[..8])
}

/// The `APIResource`s of a kind: the resource, then its subresources.
fn api_resources(kind: &dyn Kind) -> Vec<APIResource> {
    let info = kind.info();
    let strings = |list: &[String]| (!list.is_empty()).then(|| list.to_vec());
    let mut out = vec![APIResource {
        name: info.plural.to_owned(),
        singular_name: info.singular.clone(),
        namespaced: info.namespaced,
        kind: info.kind.to_owned(),
        verbs: kind.verbs().iter().map(|v| v.to_string()).collect(),
        short_names: strings(&info.short_names),
        categories: strings(&info.categories),
        // Kinds without a store (componentstatuses, bindings, reviews) have none, as
        // upstream's.
        storage_version_hash: kind
            .unstored()
            .is_none()
            .then(|| storage_version_hash(&info.group, &info.version, &info.kind)),
        group: None,
        version: None,
    }];
    for sub in subresources(kind) {
        let foreign = (sub.group, sub.version) != (&info.group, &info.version);
        out.push(APIResource {
            name: format!("{}/{}", info.plural, sub.name),
            singular_name: String::new(),
            namespaced: info.namespaced,
            kind: sub.kind.to_owned(),
            verbs: sub.verbs.iter().map(|v| v.to_string()).collect(),
            short_names: None,
            categories: None,
            storage_version_hash: None,
            group: foreign.then(|| sub.group.to_owned()),
            version: foreign.then(|| sub.version.to_owned()),
        });
    }
    out
}

/// 404 for a group or version the server does not serve (upstream's message).
fn not_found() -> Response {
    ApiError::new(
        404,
        "NotFound",
        "the server could not find the requested resource",
    )
    .into_response()
}

/// 406 for an `Accept` header that names no format discovery serves.
fn not_acceptable() -> Response {
    ApiError::new(
        406,
        "NotAcceptable",
        "only the following media types are accepted: application/json, \
         application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList, \
         application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList",
    )
    .into_response()
}

fn accept(headers: &HeaderMap) -> Option<&str> {
    headers.get(ACCEPT).and_then(|v| v.to_str().ok())
}

async fn version(State(discovery): State<Arc<Discovery>>, headers: HeaderMap) -> Response {
    let docs = discovery.documents();
    match aggregated::negotiate(accept(&headers), false) {
        Some(_) => docs.version.respond(&headers, JSON),
        None => not_acceptable(),
    }
}

async fn api(
    State(discovery): State<Arc<Discovery>>,
    headers: HeaderMap,
    extensions: axum::http::Extensions,
) -> Response {
    let docs = discovery.documents();
    match aggregated::negotiate(accept(&headers), true) {
        Some(aggregated::Format::Legacy) => {
            let client = addresses::client_ip(&headers, &extensions);
            let versions = APIVersions {
                versions: docs.core_versions.clone(),
                server_address_by_client_cidrs: docs.addresses.for_client(client),
            };
            Document::json(&versions).respond(&headers, JSON)
        }
        Some(format) => docs.aggregated.respond(true, format, &headers),
        None => not_acceptable(),
    }
}

async fn apis(State(discovery): State<Arc<Discovery>>, headers: HeaderMap) -> Response {
    let docs = discovery.documents();
    match aggregated::negotiate(accept(&headers), true) {
        Some(aggregated::Format::Legacy) => docs.group_list.respond(&headers, JSON),
        Some(format) => docs.aggregated.respond(false, format, &headers),
        None => not_acceptable(),
    }
}

async fn core_resources(
    State(discovery): State<Arc<Discovery>>,
    Path(version): Path<String>,
    headers: HeaderMap,
) -> Response {
    let docs = discovery.documents();
    resource_list(&docs, &version, &headers)
}

async fn group(
    State(discovery): State<Arc<Discovery>>,
    Path(group): Path<String>,
    headers: HeaderMap,
) -> Response {
    let docs = discovery.documents();
    if aggregated::negotiate(accept(&headers), false).is_none() {
        return not_acceptable();
    }
    match docs.groups.get(&group) {
        Some(doc) => doc.respond(&headers, JSON),
        None => not_found(),
    }
}

async fn group_resources(
    State(discovery): State<Arc<Discovery>>,
    Path((group, version)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let docs = discovery.documents();
    resource_list(&docs, &format!("{group}/{version}"), &headers)
}

fn resource_list(docs: &Documents, group_version: &str, headers: &HeaderMap) -> Response {
    if aggregated::negotiate(accept(headers), false).is_none() {
        return not_acceptable();
    }
    match docs.resources.get(group_version) {
        Some(doc) => doc.respond(headers, JSON),
        None => not_found(),
    }
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use serde_json::{Value, json};
    use tower::ServiceExt;

    use super::*;

    async fn get(path: &str, accept: Option<&str>) -> (StatusCode, HeaderMap, Value) {
        let router: Router = router(
            LiveRegistry::shared(testing::registry()),
            testing::addresses(),
        );
        let mut request = Request::get(path);
        if let Some(accept) = accept {
            request = request.header(ACCEPT, accept);
        }
        let response = router
            .oneshot(request.body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        let value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        (status, headers, value)
    }

    fn names(list: &Value) -> Vec<&str> {
        list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect()
    }

    #[tokio::test]
    async fn core_resources_list_subresources_with_their_kinds() {
        let (status, headers, list) = get("/api/v1", None).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(headers["content-type"], "application/json");
        assert_eq!(list["groupVersion"], "v1");
        assert_eq!(
            names(&list),
            [
                "configmaps",
                "namespaces",
                "namespaces/status",
                "pods",
                "pods/binding",
                "pods/log",
                "pods/status"
            ]
        );
        let resources = list["resources"].as_array().unwrap();
        let pods = &resources[3];
        assert_eq!(pods["singularName"], "pod");
        assert_eq!(pods["namespaced"], true);
        assert_eq!(pods["shortNames"], json!(["po"]));
        assert_eq!(pods["categories"], json!(["all"]));
        assert_eq!(pods["storageVersionHash"], "xPOwRZ+Yhw8=");
        assert_eq!(
            pods["verbs"],
            json!([
                "create",
                "delete",
                "deletecollection",
                "get",
                "list",
                "patch",
                "update",
                "watch"
            ])
        );
        assert_eq!(resources[4]["kind"], "Binding");
        assert_eq!(resources[4]["verbs"], json!(["create"]));
        // A stream carries its parent's kind, as upstream's pods/log.
        assert_eq!(resources[5]["kind"], "Pod");
        assert_eq!(resources[6]["verbs"], json!(["get", "patch", "update"]));
        assert_eq!(resources[1]["namespaced"], false);
    }

    #[tokio::test]
    async fn scale_names_its_own_group_and_version() {
        let (_, _, list) = get("/apis/apps/v1", None).await;
        assert_eq!(
            names(&list),
            ["deployments", "deployments/scale", "deployments/status"]
        );
        let scale = &list["resources"][1];
        assert_eq!(
            (&scale["group"], &scale["version"], &scale["kind"]),
            (&json!("autoscaling"), &json!("v1"), &json!("Scale"))
        );
        assert!(list["resources"][2].get("group").is_none());
    }

    #[tokio::test]
    async fn groups_and_versions() {
        let (_, _, api) = get("/api", None).await;
        assert_eq!(api["versions"], json!(["v1"]));
        assert_eq!(
            api["serverAddressByClientCIDRs"],
            json!([{"clientCIDR": "0.0.0.0/0", "serverAddress": "192.168.1.10:6443"}])
        );
        let (_, _, apis) = get("/apis", None).await;
        assert_eq!(apis["kind"], "APIGroupList");
        assert_eq!(
            apis["groups"],
            json!([{
                "name": "apps",
                "versions": [{"groupVersion": "apps/v1", "version": "v1"}],
                "preferredVersion": {"groupVersion": "apps/v1", "version": "v1"},
            }])
        );
        let (status, _, group) = get("/apis/apps", None).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(group["name"], "apps");
    }

    #[tokio::test]
    async fn unknown_groups_are_not_found() {
        for path in ["/apis/batch", "/apis/batch/v1", "/apis/apps/v2", "/api/v2"] {
            let (status, _, body) = get(path, None).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
            assert_eq!(body["reason"], "NotFound");
        }
    }

    #[tokio::test]
    async fn aggregated_discovery_answers_the_version_asked() {
        let v2 =
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";
        let (status, headers, list) = get("/apis", Some(v2)).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            headers["content-type"],
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        );
        assert_eq!(list["apiVersion"], "apidiscovery.k8s.io/v2");
        assert_eq!(list["kind"], "APIGroupDiscoveryList");
        let apps = &list["items"][0];
        assert_eq!(apps["metadata"]["name"], "apps");
        let version = &apps["versions"][0];
        assert_eq!(version["version"], "v1");
        assert_eq!(version["freshness"], "Current");
        let deployments = &version["resources"][0];
        assert_eq!(deployments["resource"], "deployments");
        assert_eq!(
            deployments["responseKind"],
            json!({"group": "apps", "version": "v1", "kind": "Deployment"})
        );
        assert_eq!(deployments["scope"], "Namespaced");
        assert_eq!(deployments["singularResource"], "deployment");
        assert_eq!(deployments["shortNames"], json!(["deploy"]));
        assert_eq!(
            deployments["subresources"],
            json!([
                {"subresource": "scale", "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"}, "verbs": ["get", "patch", "update"]},
                {"subresource": "status", "responseKind": {"group": "apps", "version": "v1", "kind": "Deployment"}, "verbs": ["get", "patch", "update"]},
            ])
        );

        let v2beta1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        let (_, headers, core) = get("/api", Some(v2beta1)).await;
        assert_eq!(
            headers["content-type"],
            "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
        );
        assert_eq!(core["apiVersion"], "apidiscovery.k8s.io/v2beta1");
        assert_eq!(core["items"].as_array().unwrap().len(), 1);
        assert!(core["items"][0]["metadata"].get("name").is_none());
        let resources = core["items"][0]["versions"][0]["resources"]
            .as_array()
            .unwrap();
        let kinds: Vec<_> = resources.iter().map(|r| &r["resource"]).collect();
        assert_eq!(kinds, ["configmaps", "namespaces", "pods"]);
        assert_eq!(resources[1]["scope"], "Cluster");
    }

    #[tokio::test]
    async fn refuses_formats_it_cannot_write() {
        let (status, _, body) = get("/api/v1", Some("application/vnd.kubernetes.protobuf")).await;
        assert_eq!(status, StatusCode::NOT_ACCEPTABLE);
        assert_eq!(body["reason"], "NotAcceptable");
    }

    #[tokio::test]
    async fn version_reports_the_emulated_release() {
        let (status, _, version) = get("/version", None).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(version["major"], "1");
        assert_eq!(version["minor"], "37");
        assert_eq!(version["gitVersion"], "v1.37.0+skiff");
        assert!(version["platform"].as_str().unwrap().starts_with("linux/"));
    }

    #[test]
    fn groups_are_ordered_as_upstream() {
        let mut registry = testing::registry();
        registry.add(testing::Jobs);
        registry.add(testing::Events);
        let groups: Vec<_> = grouped(&registry).iter().map(|g| g.name).collect();
        assert_eq!(groups, ["", "apps", "events.k8s.io", "batch"]);
    }
}
