//! PUT of an object or its status (upstream `handlers.UpdateResource`): 200 with the
//! stored object, 201 when the kind creates missing objects on update.

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::Value;

use super::negotiation::{content_type, decode_object, read_body};
use super::request::Call;
use super::store::Target;
use crate::error::ApiError;

/// Serves `PUT .../<plural>/<name>` (`Target::Main`) and `.../<name>/status`.
pub async fn serve(call: &Call, target: Target, request: Request) -> Result<Response, ApiError> {
    let (parts, body) = request.into_parts();
    let bytes = read_body(body).await?;
    let value = decode_object(&content_type(&parts.headers), &bytes)?;
    let (object, warnings) = call.decode_object(value)?;
    let objects = call.objects();
    let ctx = objects.context();
    let mut build = |_: Option<&Value>| Ok(object.clone());
    let (updated, created) = call
        .store()
        .update(
            &ctx,
            call.namespace(),
            call.name(),
            target,
            &mut build,
            false,
        )
        .await?;
    let code = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(call.respond(code, &updated, &warnings))
}
