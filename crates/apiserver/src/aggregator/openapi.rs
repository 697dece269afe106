//! The OpenAPI documents of extension API servers, merged into the server's own (upstream
//! kube-aggregator `pkg/controllers/openapi` for v2 and `pkg/controllers/openapiv3`):
//!
//! - the availability controller fetches each available remote APIService's
//!   `/openapi/v2` (JSON) and `/openapi/v3` index with every passing check ([`fetch`]);
//! - `GET /openapi/v2` answers the server's document with the backends' paths,
//!   definitions and shared parameters added ([`merge_v2`], in JSON or gnostic
//!   protobuf). A path the server already has stays the server's; a definition or
//!   parameter whose name is taken by another schema is renamed `<name>_v2`, `<name>_v3`,
//!   ... in the backend's document first, as upstream's
//!   `MergeSpecsIgnorePathConflictRenamingDefinitionsAndParameters` does;
//! - `GET /openapi/v3` lists, next to the server's group versions, the
//!   `apis/<group>/<version>` entry each backend's index gives for its APIService; the
//!   document behind it is proxied to the backend.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use axum::extract::Request;
use axum::http::header::{ACCEPT, ETAG, IF_NONE_MATCH};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};
use bytes::Bytes;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use serde_json::{Map, Value, json};

use super::{Aggregator, Snapshot, spec_group, spec_version};
use crate::discovery::Document;
use crate::openapi::{JSON, V2_PROTOBUF, V2_PROTOBUF_DEPRECATED, gnostic, negotiate};
use crate::registry::Objects;

/// The largest OpenAPI document read from a backend or from the server itself.
const MAX_DOCUMENT: usize = 64 << 20;

/// What a backend's OpenAPI endpoints gave in one check.
#[derive(Debug, Default)]
pub struct Fetched {
    /// Its `/openapi/v2` document.
    pub v2: Option<Arc<Value>>,
    /// The `serverRelativeURL` of its index's `apis/<group>/<version>` entry.
    pub v3: Option<String>,
}

/// Fetches the OpenAPI v2 document and the v3 index entry of `api_service`'s backend.
/// A backend that serves neither (many serve only v3, or none) just adds nothing; the
/// failures are logged at debug level.
pub async fn fetch(
    aggregator: &Aggregator,
    objects: &dyn Objects,
    api_service: &APIService,
) -> Fetched {
    let name = api_service.metadata.name.as_deref().unwrap_or_default();
    let get_json = |path: &'static str| async move {
        let body =
            super::available::backend_get(aggregator, objects, api_service, path, MAX_DOCUMENT)
                .await?;
        serde_json::from_slice::<Value>(&body).map_err(|e| format!("decoding {path}: {e}"))
    };
    let (v2, index) = tokio::join!(get_json("/openapi/v2"), get_json("/openapi/v3"));
    let v2 = v2
        .inspect_err(|e| tracing::debug!(apiservice = name, error = %e, "no OpenAPI v2"))
        .ok()
        .filter(|doc| doc.is_object())
        .map(Arc::new);
    let key = format!(
        "apis/{}/{}",
        spec_group(api_service),
        spec_version(api_service)
    );
    let v3 = index
        .inspect_err(|e| tracing::debug!(apiservice = name, error = %e, "no OpenAPI v3"))
        .ok()
        .and_then(|index| {
            index["paths"][key.as_str()]["serverRelativeURL"]
                .as_str()
                .map(str::to_owned)
        });
    Fetched { v2, v3 }
}

/// The merged v2 document of one snapshot and one version of the server's own.
struct MergedV2 {
    snapshot: Arc<Snapshot>,
    local_etag: Option<HeaderValue>,
    json: Document,
    protobuf: OnceLock<Document>,
}

/// The last merged v2 document, rebuilt when the backends' documents or the server's own
/// changed.
#[derive(Default)]
pub struct Cache(Mutex<Option<Arc<MergedV2>>>);

/// The server's own answer to `request` in JSON, whole (no `304`): its status, `ETag` and
/// body.
async fn local_json(
    mut request: Request,
    next: Next,
) -> Result<(Option<HeaderValue>, Bytes), Response> {
    let headers = request.headers_mut();
    headers.remove(IF_NONE_MATCH);
    headers.insert(ACCEPT, HeaderValue::from_static(JSON));
    let response = next.run(request).await;
    if response.status() != StatusCode::OK {
        return Err(response);
    }
    let etag = response.headers().get(ETAG).cloned();
    let body = axum::body::to_bytes(response.into_body(), MAX_DOCUMENT)
        .await
        .map_err(|e| {
            crate::error::ApiError::internal(format!("reading the OpenAPI document: {e}"))
                .into_response()
        })?;
    Ok((etag, body))
}

/// `GET /openapi/v2` with the backends' documents of `snapshot` merged in.
pub async fn serve_v2(
    aggregator: &Aggregator,
    snapshot: Arc<Snapshot>,
    request: Request,
    next: Next,
) -> Response {
    let headers = request.headers().clone();
    let offers = [JSON, V2_PROTOBUF, V2_PROTOBUF_DEPRECATED];
    let Some(media) = negotiate(&headers, &offers) else {
        return next.run(request).await;
    };
    let (local_etag, body) = match local_json(request, next).await {
        Ok(local) => local,
        Err(response) => return response,
    };
    let merged = {
        let cached = aggregator
            .openapi
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        match cached {
            Some(m) if Arc::ptr_eq(&m.snapshot, &snapshot) && m.local_etag == local_etag => m,
            _ => {
                let Ok(mut document) = serde_json::from_slice::<Value>(&body) else {
                    return crate::error::ApiError::internal("the OpenAPI v2 document is not JSON")
                        .into_response();
                };
                for backend in snapshot.openapi_v2.values() {
                    merge_v2(&mut document, backend);
                }
                let merged = Arc::new(MergedV2 {
                    snapshot: snapshot.clone(),
                    local_etag,
                    json: Document::json(&document),
                    protobuf: OnceLock::new(),
                });
                *aggregator
                    .openapi
                    .0
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = Some(merged.clone());
                merged
            }
        }
    };
    if media == JSON {
        merged.json.respond(&headers, JSON)
    } else {
        let protobuf = merged.protobuf.get_or_init(|| {
            let document: Value = serde_json::from_slice(merged.json.body()).unwrap_or_default();
            Document::new(gnostic::encode(&document))
        });
        protobuf.respond(&headers, V2_PROTOBUF)
    }
}

/// `GET /openapi/v3`: the server's index with each backend's entry for its APIService.
pub async fn serve_v3_index(snapshot: &Snapshot, request: Request, next: Next) -> Response {
    let headers = request.headers().clone();
    if negotiate(&headers, &[JSON]).is_none() {
        return next.run(request).await;
    }
    let (_, body) = match local_json(request, next).await {
        Ok(local) => local,
        Err(response) => return response,
    };
    let Ok(mut index) = serde_json::from_slice::<Value>(&body) else {
        return crate::error::ApiError::internal("the OpenAPI v3 index is not JSON")
            .into_response();
    };
    if let Some(paths) = index["paths"].as_object_mut() {
        for (name, url) in &snapshot.openapi_v3 {
            if let Some(api_service) = snapshot.services.get(name) {
                let key = format!(
                    "apis/{}/{}",
                    spec_group(api_service),
                    spec_version(api_service)
                );
                paths.insert(key, json!({"serverRelativeURL": url}));
            }
        }
    }
    Document::json(&index).respond(&headers, JSON)
}

/// Adds `backend`'s paths, definitions and shared parameters to `local` (two Swagger 2.0
/// documents). Paths `local` has are skipped; a definition or parameter named as one of
/// `local`'s but different is renamed, with every reference to it in `backend`'s copy.
pub fn merge_v2(local: &mut Value, backend: &Value) {
    let mut backend = backend.clone();
    for (section, prefix) in [
        ("definitions", "#/definitions/"),
        ("parameters", "#/parameters/"),
    ] {
        let taken: BTreeMap<String, Value> = local[section]
            .as_object()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default();
        let Some(theirs) = backend[section].as_object() else {
            continue;
        };
        let mut used: BTreeSet<String> = taken.keys().cloned().collect();
        used.extend(theirs.keys().cloned());
        let renames: BTreeMap<String, String> = theirs
            .iter()
            .filter(|(name, schema)| taken.get(*name).is_some_and(|ours| ours != *schema))
            .map(|(name, _)| {
                let fresh = (2..)
                    .map(|n| format!("{name}_v{n}"))
                    .find(|candidate| !used.contains(candidate))
                    .unwrap_or_default();
                used.insert(fresh.clone());
                (name.clone(), fresh)
            })
            .collect();
        if !renames.is_empty() {
            let refs: BTreeMap<String, String> = renames
                .iter()
                .map(|(old, new)| (format!("{prefix}{old}"), format!("{prefix}{new}")))
                .collect();
            rewrite_refs(&mut backend, &refs);
            if let Some(theirs) = backend[section].as_object_mut() {
                for (old, new) in &renames {
                    if let Some(schema) = theirs.remove(old) {
                        theirs.insert(new.clone(), schema);
                    }
                }
            }
        }
        let additions: Vec<(String, Value)> = backend[section]
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(name, _)| !taken.contains_key(*name))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if additions.is_empty() {
            continue;
        }
        if !local[section].is_object() {
            local[section] = Value::Object(Map::new());
        }
        if let Some(ours) = local[section].as_object_mut() {
            ours.extend(additions);
        }
    }
    let paths: Vec<(String, Value)> = backend["paths"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(path, _)| local["paths"].get(path.as_str()).is_none())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if !paths.is_empty() {
        if !local["paths"].is_object() {
            local["paths"] = Value::Object(Map::new());
        }
        if let Some(ours) = local["paths"].as_object_mut() {
            ours.extend(paths);
        }
    }
}

/// Replaces every `"$ref": <old>` in `value` by its new name in `renames`.
fn rewrite_refs(value: &mut Value, renames: &BTreeMap<String, String>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                match child {
                    Value::String(target) if key == "$ref" => {
                        if let Some(new) = renames.get(target.as_str()) {
                            *target = new.clone();
                        }
                    }
                    child => rewrite_refs(child, renames),
                }
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|item| rewrite_refs(item, renames)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_paths_and_definitions_are_added_and_clashes_renamed() {
        let mut local = json!({
            "swagger": "2.0",
            "paths": {"/api/v1/pods": {"get": {}}},
            "definitions": {
                "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {"type": "object"},
                "shared": {"type": "string"},
            },
        });
        let backend = json!({
            "swagger": "2.0",
            "paths": {
                "/api/v1/pods": {"get": {"description": "theirs"}},
                "/apis/wardle.example.com/v1alpha1/flunders": {"get": {"responses": {"200": {
                    "schema": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"},
                }}}},
            },
            "definitions": {
                "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {"type": "object", "description": "older"},
                "shared": {"type": "string"},
                "com.example.wardle.v1alpha1.Flunder": {"type": "object"},
            },
        });
        merge_v2(&mut local, &backend);
        // The server's own path and definitions win.
        assert_eq!(local["paths"]["/api/v1/pods"], json!({"get": {}}));
        assert_eq!(
            local["definitions"]["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"],
            json!({"type": "object"})
        );
        // The backend's different ObjectMeta is renamed, and its reference follows.
        assert_eq!(
            local["definitions"]["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta_v2"]["description"],
            "older"
        );
        assert_eq!(
            local["paths"]["/apis/wardle.example.com/v1alpha1/flunders"]["get"]["responses"]["200"]
                ["schema"]["$ref"],
            "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta_v2"
        );
        // Equal definitions are kept once; new ones are added.
        assert!(local["definitions"].get("shared_v2").is_none());
        assert_eq!(
            local["definitions"]["com.example.wardle.v1alpha1.Flunder"],
            json!({"type": "object"})
        );
    }
}
