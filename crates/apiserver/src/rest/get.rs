//! GET of one object (upstream `handlers.GetResource`), as the object, a Table or
//! PartialObjectMetadata.

use axum::response::Response;

use super::request::Call;
use crate::error::ApiError;

/// Serves `GET .../<plural>/<name>` (and `.../<name>/status`).
pub async fn serve(call: &Call) -> Result<Response, ApiError> {
    let object = call.store().get(call.namespace(), call.name()).await?;
    call.respond_object(object)
}
