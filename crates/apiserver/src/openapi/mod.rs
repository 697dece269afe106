//! OpenAPI: the schemas and endpoints of the served kinds, as `kubectl explain`, kubectl's
//! validation and client-side `apply` read them (upstream `k8s.io/kube-openapi` handlers).
//!
//! - `GET /openapi/v2`: the Swagger 2.0 document, JSON or gnostic protobuf
//!   (`application/com.github.proto-openapi.spec.v2@v1.0+protobuf`, [`gnostic`]);
//! - `GET /openapi/v3`: the index, `{"paths": {"api/v1": {"serverRelativeURL":
//!   "/openapi/v3/api/v1?hash=<sha512>"}, ...}}`;
//! - `GET /openapi/v3/api/v1`, `/openapi/v3/apis/<group>/<version>`: one OpenAPI 3.0
//!   document per group version (JSON; the protobuf form is refused with 406, and clients
//!   ask for JSON).
//!
//! [`OpenApi::build`] renders every document once from the [`Registry`]: [`schemas`]
//! (definitions from the kinds' schemars schemas, with the patch extensions of
//! `skiff_api::schema::Schemas`), [`endpoints`] (paths and operations), then [`v2`] and
//! [`v3`]. Every document is answered with an `ETag`; a v3 document requested with its
//! current `hash` may be cached for good (`Cache-Control: public, immutable`), as upstream
//! allows.

mod endpoints;
pub(crate) mod gnostic;
mod schemas;
mod v2;
mod v3;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::header::{ACCEPT, CACHE_CONTROL};
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Map, Value, json};

use crate::discovery::Document;
use crate::error::ApiError;
use crate::registry::{LiveRegistry, Registry};

/// The media type of the OpenAPI v2 document in protobuf, as answered in `Content-Type`.
pub const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
/// The deprecated spelling client-go asks for; its `@` is not valid in a media type (Go's
/// `mime.ParseMediaType` rejects it), so answers carry [`V2_PROTOBUF`].
pub(crate) const V2_PROTOBUF_DEPRECATED: &str =
    "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
pub(crate) const JSON: &str = "application/json";

/// Every OpenAPI document of a registry, encoded.
pub struct OpenApi {
    v2_json: Document,
    v2_protobuf: Document,
    /// v3 documents by index key (`api/v1`).
    v3: BTreeMap<String, Document>,
    v3_index: Document,
    /// What building took.
    pub stats: Stats,
}

/// The sizes and build time of the documents, for the log and the benchmark notes.
#[derive(Debug, Clone, Copy)]
pub struct Stats {
    pub build_time: Duration,
    /// Bytes of the v2 document in JSON.
    pub v2_json_bytes: usize,
    /// Bytes of the v2 document in protobuf.
    pub v2_protobuf_bytes: usize,
    /// Bytes of all v3 documents together.
    pub v3_bytes: usize,
    /// Definitions in the v2 document.
    pub definitions: usize,
    pub paths: usize,
}

impl OpenApi {
    /// Renders every document of `registry`.
    pub fn build(registry: &Registry) -> Self {
        let started = Instant::now();
        let catalog = schemas::Catalog::build(registry);
        let endpoints = endpoints::endpoints(registry, &catalog);

        let v2 = v2::document(&endpoints, &catalog);
        let v2_json = Document::json(&v2);
        let v2_protobuf = Document::new(gnostic::encode(&v2));

        let v3: BTreeMap<String, Document> = v3::documents(&endpoints, &catalog)
            .into_iter()
            .map(|(key, doc)| (key, Document::json(&doc)))
            .collect();
        let index: Map<String, Value> = v3
            .iter()
            .map(|(key, doc)| {
                let url = format!("/openapi/v3/{key}?hash={}", doc.hash());
                (key.clone(), json!({"serverRelativeURL": url}))
            })
            .collect();
        let v3_index = Document::json(&json!({"paths": index}));

        let stats = Stats {
            build_time: started.elapsed(),
            v2_json_bytes: v2_json.body().len(),
            v2_protobuf_bytes: v2_protobuf.body().len(),
            v3_bytes: v3.values().map(|d| d.body().len()).sum(),
            definitions: catalog.definitions.len(),
            paths: endpoints.len(),
        };
        OpenApi {
            v2_json,
            v2_protobuf,
            v3,
            v3_index,
            stats,
        }
    }
}

/// The routes of `/openapi/v2` and `/openapi/v3`, answering from the documents of the
/// kinds `registry` serves now. They are rendered on a thread (about a second in a debug
/// build, which the server's start need not wait for), at start and again for a request
/// after a custom resource's kind came or went; a request that comes first waits for them.
pub fn router<S: Clone + Send + Sync + 'static>(registry: Arc<LiveRegistry>) -> Router<S> {
    let documents = Documents(Arc::new(Inner {
        registry,
        rendering: Mutex::new(None),
    }));
    let background = documents.rendering();
    // Without the thread the first request renders them.
    let _ = std::thread::Builder::new()
        .name("openapi".to_owned())
        .spawn(move || {
            background.get();
        });
    Router::new()
        .route("/openapi/v2", get(v2_document))
        .route("/openapi/v3", get(v3_index))
        .route("/openapi/v3/{*path}", get(v3_document))
        .with_state(documents)
}

/// The [`OpenApi`] of the served kinds, rendered at most once per registry snapshot.
#[derive(Clone)]
struct Documents(Arc<Inner>);

struct Inner {
    registry: Arc<LiveRegistry>,
    /// The rendering of the newest snapshot a request asked for.
    rendering: Mutex<Option<Rendering>>,
}

/// The documents of one registry snapshot, rendered at most once.
#[derive(Clone)]
struct Rendering(Arc<(Arc<Registry>, OnceLock<OpenApi>)>);

impl Rendering {
    /// Renders the documents or waits for the rendering under way.
    fn get(&self) -> &OpenApi {
        self.0.1.get_or_init(|| {
            let openapi = OpenApi::build(&self.0.0);
            tracing::info!(stats = ?openapi.stats, "OpenAPI documents built");
            openapi
        })
    }
}

impl Documents {
    /// The rendering of the current snapshot (a new one when the snapshot changed).
    fn rendering(&self) -> Rendering {
        let registry = self.0.registry.current();
        let mut rendering = self
            .0
            .rendering
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match &*rendering {
            Some(current) if Arc::ptr_eq(&current.0.0, &registry) => current.clone(),
            _ => {
                let fresh = Rendering(Arc::new((registry, OnceLock::new())));
                *rendering = Some(fresh.clone());
                fresh
            }
        }
    }

    /// The current documents, rendered off the async runtime's threads.
    async fn ready(&self) -> Rendering {
        let rendering = self.rendering();
        if rendering.0.1.get().is_none() {
            let background = rendering.clone();
            let _ = tokio::task::spawn_blocking(move || {
                background.get();
            })
            .await;
        }
        rendering
    }
}

/// Which of `offers` the `Accept` header prefers (the first acceptable range in the
/// client's order, by `q`); an absent header or `*/*` takes the first offer.
pub(crate) fn negotiate<'a>(headers: &HeaderMap, offers: &[&'a str]) -> Option<&'a str> {
    let Some(accept) = headers.get(ACCEPT).and_then(|v| v.to_str().ok()) else {
        return offers.first().copied();
    };
    let mut ranges: Vec<(f32, &str)> = accept
        .split(',')
        .map(|range| {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or_default();
            let q = parts
                .filter_map(|p| p.strip_prefix("q="))
                .find_map(|q| q.parse().ok())
                .unwrap_or(1.0);
            (q, media)
        })
        .filter(|(q, media)| *q > 0.0 && !media.is_empty())
        .collect();
    if ranges.is_empty() {
        return offers.first().copied();
    }
    ranges.sort_by(|a, b| b.0.total_cmp(&a.0));
    ranges.into_iter().find_map(|(_, media)| match media {
        "*/*" | "application/*" => offers.first().copied(),
        media => offers
            .iter()
            .find(|offer| offer.eq_ignore_ascii_case(media))
            .copied(),
    })
}

fn not_acceptable(offers: &[&str]) -> Response {
    ApiError::new(
        406,
        "NotAcceptable",
        format!(
            "only the following media types are accepted: {}",
            offers.join(", ")
        ),
    )
    .into_response()
}

async fn v2_document(State(documents): State<Documents>, headers: HeaderMap) -> Response {
    let rendering = documents.ready().await;
    let openapi = rendering.get();
    let offers = [JSON, V2_PROTOBUF, V2_PROTOBUF_DEPRECATED];
    match negotiate(&headers, &offers) {
        Some(JSON) => openapi.v2_json.respond(&headers, JSON),
        Some(_) => openapi.v2_protobuf.respond(&headers, V2_PROTOBUF),
        None => not_acceptable(&offers),
    }
}

async fn v3_index(State(documents): State<Documents>, headers: HeaderMap) -> Response {
    let rendering = documents.ready().await;
    let openapi = rendering.get();
    match negotiate(&headers, &[JSON]) {
        Some(_) => openapi.v3_index.respond(&headers, JSON),
        None => not_acceptable(&[JSON]),
    }
}

async fn v3_document(
    State(documents): State<Documents>,
    Path(path): Path<String>,
    Query(query): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let rendering = documents.ready().await;
    let openapi = rendering.get();
    let Some(doc) = openapi.v3.get(path.trim_end_matches('/')) else {
        return ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .into_response();
    };
    if negotiate(&headers, &[JSON]).is_none() {
        return not_acceptable(&[JSON]);
    }
    let mut response = doc.respond(&headers, JSON);
    // With the current hash the URL names this exact document: cacheable for good.
    let cache = if query.get("hash").map(String::as_str) == Some(doc.hash()) {
        "public, immutable"
    } else {
        "no-cache, private"
    };
    response
        .headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static(cache));
    response
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::header::{CONTENT_TYPE, IF_NONE_MATCH};
    use axum::http::{Request, StatusCode};
    use prost::Message;
    use tower::ServiceExt;

    use super::*;
    use crate::discovery::testing::registry;

    async fn get(
        router: &Router,
        uri: &str,
        accept: Option<&str>,
    ) -> (StatusCode, HeaderMap, Vec<u8>) {
        let mut request = Request::get(uri);
        if let Some(accept) = accept {
            request = request.header(ACCEPT, accept);
        }
        let response = router
            .clone()
            .oneshot(request.body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (status, headers, body.to_vec())
    }

    #[tokio::test]
    async fn v3_index_points_at_cacheable_documents() {
        let router: Router = router(LiveRegistry::shared(registry()));
        let (status, _, body) = get(&router, "/openapi/v3", None).await;
        assert_eq!(status, StatusCode::OK);
        let index: Value = serde_json::from_slice(&body).unwrap();
        let paths = index["paths"].as_object().unwrap();
        assert_eq!(
            paths.keys().map(String::as_str).collect::<Vec<_>>(),
            ["api/v1", "apis/apps/v1"]
        );
        let url = paths["api/v1"]["serverRelativeURL"].as_str().unwrap();
        assert!(url.starts_with("/openapi/v3/api/v1?hash="), "{url}");

        let (status, headers, body) = get(&router, url, Some("application/json")).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(headers[CACHE_CONTROL], "public, immutable");
        let etag = headers["etag"].to_str().unwrap().to_owned();
        assert!(etag.contains(url.rsplit('=').next().unwrap()));
        let doc: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(doc["openapi"], "3.0.0");

        let (_, headers, _) = get(&router, "/openapi/v3/api/v1", None).await;
        assert_eq!(headers[CACHE_CONTROL], "no-cache, private");
        let request = Request::get("/openapi/v3/api/v1")
            .header(IF_NONE_MATCH, etag)
            .body(Body::empty())
            .unwrap();
        let cached = router.clone().oneshot(request).await.unwrap();
        assert_eq!(cached.status(), StatusCode::NOT_MODIFIED);

        let (status, _, _) = get(&router, "/openapi/v3/apis/batch/v1", None).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        let protobuf = "application/com.github.proto-openapi.spec.v3@v1.0+protobuf";
        let (status, _, _) = get(&router, "/openapi/v3/api/v1", Some(protobuf)).await;
        assert_eq!(status, StatusCode::NOT_ACCEPTABLE);
    }

    /// What `kubectl explain` and kubectl's field validation check look for in v3.
    #[tokio::test]
    async fn v3_operations_and_schemas_carry_group_version_kinds() {
        let router: Router = router(LiveRegistry::shared(registry()));
        let (_, _, body) = get(&router, "/openapi/v3/api/v1", None).await;
        let doc: Value = serde_json::from_slice(&body).unwrap();
        let pod = json!({"group": "", "kind": "Pod", "version": "v1"});
        let list = &doc["paths"]["/api/v1/namespaces/{namespace}/pods"]["get"];
        assert_eq!(list["x-kubernetes-group-version-kind"], pod);
        assert_eq!(list["x-kubernetes-action"], "list");
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        assert!(
            schemas["io.k8s.api.core.v1.Pod"]["x-kubernetes-group-version-kind"]
                .as_array()
                .unwrap()
                .contains(&pod)
        );
        let patch = &doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"];
        assert_eq!(patch["x-kubernetes-group-version-kind"], pod);
        assert!(
            patch["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["name"] == "fieldValidation")
        );
        assert_eq!(
            patch["requestBody"]["content"]["application/strategic-merge-patch+json"]["schema"]["$ref"],
            "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Patch"
        );
        // Only what api/v1 reaches: no apps kinds.
        assert!(!schemas.contains_key("io.k8s.api.apps.v1.Deployment"));
        assert!(schemas.contains_key("io.k8s.api.core.v1.Binding"));
        let spec = &schemas["io.k8s.api.core.v1.Pod"]["properties"]["spec"];
        assert_eq!(
            spec["allOf"][0]["$ref"],
            "#/components/schemas/io.k8s.api.core.v1.PodSpec"
        );
        assert!(schemas[schemas::QUANTITY]["oneOf"].is_array());
    }

    /// Upstream's enum fields carry `enum` and a `Possible enum values:` paragraph, in v3
    /// and v2 (what `kubectl explain` prints as `ENUM:`).
    #[tokio::test]
    async fn enum_fields_list_their_values() {
        let router: Router = router(LiveRegistry::shared(registry()));
        let (_, _, body) = get(&router, "/openapi/v3/api/v1", None).await;
        let doc: Value = serde_json::from_slice(&body).unwrap();
        let schemas = &doc["components"]["schemas"];
        let pull = &schemas["io.k8s.api.core.v1.Container"]["properties"]["imagePullPolicy"];
        assert_eq!(pull["enum"], json!(["Always", "IfNotPresent", "Never"]));
        let description = pull["description"].as_str().unwrap();
        assert!(
            description.starts_with("Image pull policy. One of Always, Never, IfNotPresent.")
                && description.ends_with(
                    "\n\nPossible enum values:\n - `\"Always\"` means that kubelet always attempts to pull the latest image. Container will fail If the pull fails.\n - `\"IfNotPresent\"` means that kubelet pulls if the image isn't present on disk. Container will fail if the image isn't present and the pull fails.\n - `\"Never\"` means that kubelet never pulls an image, but only uses a local image. Container will fail if the image isn't present"
                ),
            "{description}"
        );
        let restart = &schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["restartPolicy"];
        assert_eq!(restart["enum"], json!(["Always", "Never", "OnFailure"]));
        let (_, _, body) = get(&router, "/openapi/v2", None).await;
        let v2: Value = serde_json::from_slice(&body).unwrap();
        let strategy =
            &v2["definitions"]["io.k8s.api.apps.v1.DeploymentStrategy"]["properties"]["type"];
        assert_eq!(strategy["enum"], json!(["Recreate", "RollingUpdate"]));
        let pull =
            &v2["definitions"]["io.k8s.api.core.v1.Container"]["properties"]["imagePullPolicy"];
        assert_eq!(pull["enum"], json!(["Always", "IfNotPresent", "Never"]));
    }

    #[tokio::test]
    async fn v2_is_served_as_json_and_gnostic_protobuf() {
        let router: Router = router(LiveRegistry::shared(registry()));
        let (status, headers, body) = get(&router, "/openapi/v2", None).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(headers[CONTENT_TYPE], "application/json");
        let json: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(json["swagger"], "2.0");
        let deployment = &json["definitions"]["io.k8s.api.apps.v1.Deployment"];
        assert_eq!(
            deployment["x-kubernetes-group-version-kind"],
            json!([{"group": "apps", "kind": "Deployment", "version": "v1"}])
        );

        // client-go's OpenAPISchema() asks with the deprecated spelling.
        let accept = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
        let (status, headers, body) = get(&router, "/openapi/v2", Some(accept)).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(headers[CONTENT_TYPE], V2_PROTOBUF);
        let doc = gnostic::Document::decode(body.as_slice()).unwrap();
        assert_eq!(doc.swagger, "2.0");
        let definitions = doc.definitions.unwrap().additional_properties;
        assert_eq!(
            definitions.len(),
            json["definitions"].as_object().unwrap().len()
        );
        let paths = doc.paths.unwrap().path;
        let patch = paths
            .iter()
            .find(|p| p.name == "/apis/apps/v1/namespaces/{namespace}/deployments/{name}")
            .and_then(|p| p.value.as_ref()?.patch.clone())
            .unwrap();
        assert!(patch.parameters.iter().any(|p| {
            p.parameter
                .as_ref()
                .and_then(|p| p.non_body_parameter.as_ref())
                .and_then(|p| p.query_parameter_sub_schema.as_ref())
                .is_some_and(|q| q.name == "fieldValidation")
        }));

        let (status, _, _) = get(&router, "/openapi/v2", Some("text/html")).await;
        assert_eq!(status, StatusCode::NOT_ACCEPTABLE);
    }
}

/// Checks every document of a registry for what clients rely on.
#[cfg(test)]
mod completeness {
    use super::*;
    use crate::discovery::testing;

    fn refs_of<'a>(value: &'a Value, prefix: &str) -> Vec<&'a str> {
        let mut out = Vec::new();
        schemas::refs(value, prefix, &mut out);
        out
    }

    /// Every `$ref` resolves; every kind has a schema tagged with its group, version and
    /// kind, a list, and a PATCH operation with `fieldValidation` in v2 and v3.
    fn assert_complete(registry: &Registry) {
        let openapi = OpenApi::build(registry);
        let v2: Value = serde_json::from_slice(openapi.v2_json.body()).unwrap();
        let definitions = v2["definitions"].as_object().unwrap();
        for name in refs_of(&v2, "#/definitions/") {
            assert!(definitions.contains_key(name), "v2: dangling {name}");
        }
        let v3: BTreeMap<&str, Value> = openapi
            .v3
            .iter()
            .map(|(key, doc)| (key.as_str(), serde_json::from_slice(doc.body()).unwrap()))
            .collect();
        for (key, doc) in &v3 {
            let schemas = doc["components"]["schemas"].as_object().unwrap();
            for name in refs_of(doc, "#/components/schemas/") {
                assert!(schemas.contains_key(name), "{key}: dangling {name}");
            }
        }
        for kind in registry.kinds() {
            let info = kind.info();
            let gvk = json!({"group": info.group, "kind": info.kind, "version": info.version});
            let name = kind.schema_name();
            let tagged = |schema: &Value| {
                schema["x-kubernetes-group-version-kind"]
                    .as_array()
                    .is_some_and(|gvks| gvks.contains(&gvk))
            };
            assert!(tagged(&definitions[&name]), "v2: {name}");
            assert!(
                definitions.contains_key(&format!("{name}List")),
                "{name}List"
            );
            let key = endpoints::document_of(&info.group, &info.version);
            let doc = &v3[key.as_str()];
            assert!(
                tagged(&doc["components"]["schemas"][&name]),
                "{key}: {name}"
            );
            let patched = kind.verbs().contains(&"patch");
            for paths in [&v2["paths"], &doc["paths"]] {
                let listed = paths.as_object().unwrap().values().any(|item| {
                    item.as_object().unwrap().values().any(|op| {
                        op["x-kubernetes-group-version-kind"] == gvk
                            && op["x-kubernetes-action"] == "list"
                    })
                });
                assert_eq!(
                    listed,
                    kind.verbs().contains(&"list"),
                    "LIST of {gvk} as its verbs say"
                );
                if !patched {
                    continue;
                }
                let validated = paths.as_object().unwrap().values().any(|item| {
                    let patch = &item["patch"];
                    patch["x-kubernetes-group-version-kind"] == gvk
                        && patch["parameters"]
                            .as_array()
                            .is_some_and(|p| p.iter().any(|p| p["name"] == "fieldValidation"))
                });
                assert!(validated, "no PATCH with fieldValidation for {gvk}");
            }
        }
    }

    #[test]
    fn test_kinds_have_complete_documents() {
        assert_complete(&testing::registry());
    }

    #[test]
    fn builtin_kinds_have_complete_documents() {
        assert_complete(&Registry::builtin());
    }
}
