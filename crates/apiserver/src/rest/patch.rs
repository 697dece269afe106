//! PATCH (upstream `handlers.PatchResource`): JSON Patch, JSON Merge Patch and strategic
//! merge patch applied to the current object, then written as an update that is retried
//! on conflicts (a `resourceVersion` in the patch is a precondition); and server-side
//! apply (`application/apply-patch+yaml`, YAML or JSON), which merges the configuration
//! with field ownership ([`skiff_api::apply`]), answers 409 on conflicts unless `force`,
//! and creates a missing object.

use axum::extract::Request;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::Value;
use skiff_api::patch::{self, PatchError};
use skiff_api::schema::Schemas;

use super::managed::{self, Ownership};
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
    /// Server-side apply.
    Apply,
}

impl PatchType {
    /// Errors: 415 for other media types.
    pub fn from_media_type(media_type: &str) -> Result<Self, ApiError> {
        match media_type {
            "application/json-patch+json" => Ok(PatchType::Json),
            "application/merge-patch+json" => Ok(PatchType::Merge),
            "application/strategic-merge-patch+json" => Ok(PatchType::StrategicMerge),
            "application/apply-patch+yaml" => Ok(PatchType::Apply),
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
    let mut definitions = generator.take_definitions(true);
    // Patches and field ownership read only the structure: the documentation (most of
    // the definitions' size; the OpenAPI documents render their own) is not kept.
    definitions.values_mut().for_each(drop_descriptions);
    Schemas::new(definitions)
}

/// Removes every `description` keyword of a schema.
fn drop_descriptions(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            if map.get("description").is_some_and(Value::is_string) {
                map.remove("description");
            }
            map.values_mut().for_each(drop_descriptions);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_descriptions),
        _ => {}
    }
}

/// Applies `document` of `patch_type` to `target`, an object of OpenAPI type
/// `definition`. Errors: 400 for a malformed patch, 422 when it cannot be applied, as
/// upstream. Server-side apply is not a patch of a document (see [`serve`]): 415 here.
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
        PatchType::Apply => {
            return Err(ApiError::unsupported_media_type(
                "application/apply-patch+yaml",
                ApiError::PATCH_MEDIA_TYPES,
            ));
        }
    };
    result.map_err(|e: PatchError| match e.status_code() {
        400 => ApiError::bad_request(e.0),
        code => ApiError::new(code, "Invalid", e.0),
    })
}

/// Serves `PATCH .../<plural>/<name>` (`Target::Main`), `.../<name>/status` and the
/// kind's part subresources; the response carries the kind's warnings.
pub async fn serve(call: &Call, target: Target, request: Request) -> Result<Response, ApiError> {
    let (parts, body) = request.into_parts();
    let media_type = content_type(&parts.headers);
    let patch_type = PatchType::from_media_type(&media_type)?;
    if patch_type == PatchType::StrategicMerge && call.kind.definition().is_some() {
        return Err(ApiError::unsupported_media_type(
            &media_type,
            ApiError::CUSTOM_RESOURCE_PATCH_MEDIA_TYPES,
        ));
    }
    managed::validate_patch_options(call, patch_type == PatchType::Apply)?;
    let bytes = read_body(body).await?;
    if patch_type == PatchType::Apply {
        return serve_apply(call, target, &parts.headers, &bytes).await;
    }
    let document = parse_json(&bytes)?;
    let valid_shape = match patch_type {
        PatchType::Json => document.is_array(),
        PatchType::Merge | PatchType::StrategicMerge | PatchType::Apply => document.is_object(),
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
    let store = call.store().owned_by(Ownership::of(call, &parts.headers));
    let (updated, _) = store
        .update(
            &ctx,
            call.namespace(),
            call.name(),
            target,
            &mut build,
            true,
        )
        .await?;
    super::request::add_warnings(&mut warnings, store.take_warnings());
    Ok(call.respond(StatusCode::OK, &updated, &warnings))
}

/// Server-side apply (upstream `applyPatcher`): the configuration merged into the current
/// object (an empty one when missing, which the apply creates: 201) by the kind's field
/// manager, then written as an update. Errors: 400 `error decoding patch: ...` for a body
/// that is no YAML object, the field manager's 400/409/500 (see [`managed::apply_error`]).
async fn serve_apply(
    call: &Call,
    target: Target,
    headers: &HeaderMap,
    bytes: &[u8],
) -> Result<Response, ApiError> {
    let config = match skiff_api::yaml::to_json(bytes) {
        Ok(Value::Object(map)) => Value::Object(map),
        Ok(Value::Null) => Value::Object(Default::default()),
        Ok(other) => {
            let found = match other {
                Value::Array(_) => "array",
                Value::String(_) => "string",
                Value::Bool(_) => "bool",
                _ => "number",
            };
            return Err(ApiError::bad_request(format!(
                "error decoding patch: json: cannot unmarshal {found} into Go value of type map[string]interface {{}}"
            )));
        }
        Err(e) => {
            return Err(ApiError::bad_request(format!("error decoding patch: {e}")));
        }
    };
    let manager = call.params.field_manager.clone().unwrap_or_default();
    let force = call.params.force.unwrap_or(false);
    let definition = call.kind.schema_name();
    let fm = managed::field_manager(
        &call.state.schemas,
        &definition,
        call.kind.as_ref(),
        call.subresource.as_deref(),
    );
    let now = chrono::Utc::now();
    let mut warnings = Vec::new();
    let objects = call.objects();
    let ctx = objects.context();
    let mut build = |current: Option<&Value>| -> Result<Value, ApiError> {
        let live = current.cloned().unwrap_or_else(|| fm.empty_object());
        let applied = fm
            .apply(&live, &config, &manager, force, now)
            .map_err(managed::apply_error)?;
        let (object, found) = call.decode_object(applied, &[])?;
        warnings = found;
        Ok(object)
    };
    let mut ownership = Ownership::of(call, headers);
    ownership.applied = true;
    let store = call.store().owned_by(ownership);
    let (updated, created) = store
        .update(
            &ctx,
            call.namespace(),
            call.name(),
            target,
            &mut build,
            true,
        )
        .await?;
    super::request::add_warnings(&mut warnings, store.take_warnings());
    let code = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(call.respond(code, &updated, &warnings))
}
