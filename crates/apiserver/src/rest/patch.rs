//! PATCH (upstream `handlers.PatchResource`): JSON Patch, JSON Merge Patch and strategic
//! merge patch applied to the current object, then written as an update that is retried
//! on conflicts (a `resourceVersion` in the patch is a precondition). Server-side apply
//! (`application/apply-patch+yaml`) is answered 415.

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::Value;
use skiff_api::patch::{self, PatchError};
use skiff_api::schema::Schemas;

use super::negotiation::{content_type, parse_json, read_body};
use super::request::Call;
use super::store::Target;
use crate::error::ApiError;
use crate::registry::Registry;

/// The patch types of the `Content-Type` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    Json,
    Merge,
    StrategicMerge,
}

impl PatchType {
    /// Errors: 415 for other media types (including server-side apply).
    pub fn from_media_type(media_type: &str) -> Result<Self, ApiError> {
        match media_type {
            "application/json-patch+json" => Ok(PatchType::Json),
            "application/merge-patch+json" => Ok(PatchType::Merge),
            "application/strategic-merge-patch+json" => Ok(PatchType::StrategicMerge),
            other => Err(ApiError::unsupported_media_type(
                other,
                ApiError::PATCH_MEDIA_TYPES,
            )),
        }
    }
}

/// The OpenAPI schemas of `registry`'s kinds (with the types they reference), for
/// strategic merge patch.
pub fn schemas(registry: &Registry) -> Schemas {
    let mut generator = schemars::generate::SchemaSettings::draft07().into_generator();
    for kind in registry.kinds() {
        kind.json_schema(&mut generator);
    }
    Schemas::new(generator.take_definitions(true))
}

/// Applies `document` of `patch_type` to `target`, an object of OpenAPI type
/// `definition`. Errors: 400 for a malformed patch, 422 when it cannot be applied, as
/// upstream.
pub fn apply(
    schemas: &Schemas,
    definition: &str,
    patch_type: PatchType,
    target: &Value,
    document: &Value,
) -> Result<Value, ApiError> {
    let result = match patch_type {
        PatchType::Json => patch::json_patch(target, document),
        PatchType::Merge => patch::merge_patch(target, document),
        PatchType::StrategicMerge => {
            patch::strategic_merge_patch(schemas, definition, target, document)
        }
    };
    result.map_err(|e: PatchError| match e.status_code() {
        400 => ApiError::bad_request(e.0),
        code => ApiError::new(code, "Invalid", e.0),
    })
}

/// Serves `PATCH .../<plural>/<name>` (`Target::Main`) and `.../<name>/status`.
pub async fn serve(call: &Call, target: Target, request: Request) -> Result<Response, ApiError> {
    let (parts, body) = request.into_parts();
    let patch_type = PatchType::from_media_type(&content_type(&parts.headers))?;
    let bytes = read_body(body).await?;
    let document = parse_json(&bytes)?;
    let valid_shape = match patch_type {
        PatchType::Json => document.is_array(),
        PatchType::Merge | PatchType::StrategicMerge => document.is_object(),
    };
    if !valid_shape {
        return Err(ApiError::bad_request(format!(
            "the body of the request was not a valid {patch_type:?} patch"
        )));
    }
    let definition = call.kind.schema_name();
    let mut warnings = Vec::new();
    let objects = call.objects();
    let ctx = objects.context();
    let mut build = |current: Option<&Value>| -> Result<Value, ApiError> {
        let current = current
            .ok_or_else(|| ApiError::not_found(&call.kind.info().group_resource(), call.name()))?;
        let patched = apply(
            &call.state.schemas,
            &definition,
            patch_type,
            current,
            &document,
        )?;
        let (object, found) = call.decode_object(patched, &[])?;
        warnings = found;
        Ok(object)
    };
    let (updated, _) = call
        .store()
        .update(
            &ctx,
            call.namespace(),
            call.name(),
            target,
            &mut build,
            true,
        )
        .await?;
    Ok(call.respond(StatusCode::OK, &updated, &warnings))
}
