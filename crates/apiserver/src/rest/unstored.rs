//! Requests on a kind that is not stored ([`Unstored`]: componentstatuses, bindings): the
//! kind computes its objects or handles its create, and this module applies what the REST
//! layer does for every list and get (selectors, Table and metadata-only output, content
//! negotiation). The router has already refused verbs the kind does not serve.

use axum::extract::Request;
use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde_json::json;

use super::list::list_object;
use super::negotiation::Shape;
use super::predicate::Predicate;
use super::request::Call;
use super::router::method_not_allowed;
use super::table;
use crate::error::ApiError;
use crate::registry::Unstored;

/// Serves one request on an unstored kind's main resource. Errors: 404 for a
/// subresource, 405 for a method the kind does not take, and the kind's own.
pub async fn serve(
    call: &Call,
    own: &dyn Unstored,
    request: Request,
) -> Result<Response, ApiError> {
    if call.subresource.is_some() {
        return Err(ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        ));
    }
    let warnings: Vec<String> = own.warning().map(str::to_owned).into_iter().collect();
    let objects = call.objects();
    let ctx = objects.context();
    let method = request.method().clone();
    match (call.name.as_deref(), method) {
        (None, Method::GET) => {
            let predicate = Predicate::new(
                call.kind.as_ref(),
                call.params.label_selector.as_deref(),
                call.params.field_selector.as_deref(),
            )?;
            let mut items = Vec::new();
            for object in own.list(&ctx, call.namespace()).await? {
                if predicate.matches(call.kind.as_ref(), &object)? {
                    items.push(object);
                }
            }
            let metadata = json!({});
            let body = match call.output.shape {
                Shape::Object => list_object(call.kind.info(), items, metadata),
                Shape::Table => table::table(
                    call.kind.as_ref(),
                    &items,
                    metadata,
                    call.params.include_object,
                )?,
                Shape::PartialObjectMetadata => {
                    table::partial_object_metadata_list(&items, metadata)
                }
            };
            Ok(call.respond(StatusCode::OK, &body, &warnings))
        }
        (Some(name), Method::GET) => {
            let object = own.get(&ctx, call.namespace(), name).await?;
            let mut response = call.respond_object(object)?;
            for warning in &warnings {
                if let Ok(value) = super::negotiation::warning_header(warning).parse() {
                    response.headers_mut().append("warning", value);
                }
            }
            Ok(response)
        }
        (None, Method::POST) => own.create(&ctx, call.namespace(), request).await,
        _ => Err(method_not_allowed()),
    }
}
