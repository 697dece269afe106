//! POST of a new object (upstream `handlers.CreateResource`): 201 with the stored object.

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::Response;

use super::negotiation::read_body;
use super::request::Call;
use crate::error::ApiError;

/// Serves `POST .../<plural>`.
pub async fn serve(call: &Call, request: Request) -> Result<Response, ApiError> {
    let (parts, body) = request.into_parts();
    let bytes = read_body(body).await?;
    let (object, mut warnings) = call.decode_body(&parts.headers, &bytes)?;
    let objects = call.objects();
    let ctx = objects.context();
    let store = call
        .store()
        .owned_by(super::managed::Ownership::of(call, &parts.headers));
    let created = store.create(&ctx, call.namespace(), object).await?;
    super::request::add_warnings(&mut warnings, store.take_warnings());
    Ok(call.respond(StatusCode::CREATED, &created, &warnings))
}
