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
mod gnostic;
mod schemas;
mod v2;
mod v3;

use std::collections::BTreeMap;
use std::sync::Arc;
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
use crate::registry::Registry;

/// The media type of the OpenAPI v2 document in protobuf.
pub const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
/// The older spelling upstream still accepts.
const V2_PROTOBUF_OLD: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
const JSON: &str = "application/json";

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

/// The routes of `/openapi/v2` and `/openapi/v3`, answering from the documents of
/// `registry`, rendered here once.
pub fn router<S: Clone + Send + Sync + 'static>(registry: &Registry) -> Router<S> {
    let openapi = OpenApi::build(registry);
    tracing::info!(stats = ?openapi.stats, "OpenAPI documents built");
    Router::new()
        .route("/openapi/v2", get(v2_document))
        .route("/openapi/v3", get(v3_index))
        .route("/openapi/v3/{*path}", get(v3_document))
        .with_state(Arc::new(openapi))
}

/// Which of `offers` the `Accept` header prefers (the first acceptable range in the
/// client's order, by `q`); an absent header or `*/*` takes the first offer.
fn negotiate<'a>(headers: &HeaderMap, offers: &[&'a str]) -> Option<&'a str> {
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

async fn v2_document(State(openapi): State<Arc<OpenApi>>, headers: HeaderMap) -> Response {
    let offers = [JSON, V2_PROTOBUF, V2_PROTOBUF_OLD];
    match negotiate(&headers, &offers) {
        Some(JSON) => openapi.v2_json.respond(&headers, JSON),
        Some(protobuf) => openapi.v2_protobuf.respond(&headers, protobuf),
        None => not_acceptable(&offers),
    }
}

async fn v3_index(State(openapi): State<Arc<OpenApi>>, headers: HeaderMap) -> Response {
    match negotiate(&headers, &[JSON]) {
        Some(_) => openapi.v3_index.respond(&headers, JSON),
        None => not_acceptable(&[JSON]),
    }
}

async fn v3_document(
    State(openapi): State<Arc<OpenApi>>,
    Path(path): Path<String>,
    Query(query): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
) -> Response {
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
