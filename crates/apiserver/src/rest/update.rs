//! PUT of an object or its status (upstream `handlers.UpdateResource`): 200 with the
//! stored object, 201 when the kind creates missing objects on update.

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::Value;

use super::negotiation::read_body;
use super::request::Call;
use super::store::Target;
use crate::error::ApiError;

/// Serves `PUT .../<plural>/<name>` (`Target::Main`), `.../<name>/status` and the kind's
/// part subresources; the response carries the kind's warnings.
pub async fn serve(call: &Call, target: Target, request: Request) -> Result<Response, ApiError> {
    let (parts, body) = request.into_parts();
    let bytes = read_body(body).await?;
    let (object, mut warnings) = call.decode_body(&parts.headers, &bytes)?;
    let objects = call.objects();
    let ctx = objects.context();
    let mut build = |_: Option<&Value>| Ok(object.clone());
    let store = call
        .store()
        .owned_by(super::managed::Ownership::of(call, &parts.headers));
    let (updated, created) = store
        .update(
            &ctx,
            call.namespace(),
            call.name(),
            target,
            &mut build,
            false,
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
