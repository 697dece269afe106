//! POST of a new object (upstream `handlers.CreateResource`): 201 with the stored object.

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::Response;

use super::negotiation::{content_type, decode_object, read_body};
use super::request::Call;
use crate::error::ApiError;

/// Serves `POST .../<plural>`.
pub async fn serve(call: &Call, request: Request) -> Result<Response, ApiError> {
    let (parts, body) = request.into_parts();
    let bytes = read_body(body).await?;
    let value = decode_object(&content_type(&parts.headers), &bytes)?;
    let (object, warnings) = call.decode_object(value)?;
    let objects = call.objects();
    let ctx = objects.context();
    let created = call.store().create(&ctx, call.namespace(), object).await?;
    Ok(call.respond(StatusCode::CREATED, &created, &warnings))
}
