//! One API call as the verbs see it ([`Call`]): the kind, namespace, name and
//! subresource from the path, the query parameters, the negotiated output and the user;
//! and the decoding of object bodies with upstream's apiVersion/kind and unknown-field
//! rules.

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use super::State;
use super::negotiation::{Output, Shape};
use super::objects::ServerObjects;
use super::params::{FieldValidation, Params};
use super::store::Store;
use super::table;
use crate::authn::UserInfo;
use crate::error::ApiError;
use crate::registry::Kind;

/// One call of a verb on a kind.
pub struct Call {
    pub state: Arc<State>,
    pub kind: Arc<dyn Kind>,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
    pub params: Params,
    pub output: Output,
    pub user: UserInfo,
}

impl Call {
    /// The kind's store.
    pub fn store(&self) -> Store<'_> {
        Store::new(&self.state, self.kind.as_ref())
    }

    /// Other objects, for the kind's hooks (dry run as the call).
    pub fn objects(&self) -> ServerObjects<'_> {
        ServerObjects::new(&self.state, &self.user, self.params.dry_run)
    }

    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// The object's name (empty for collection calls, which never ask).
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or_default()
    }

    /// `value` encoded as negotiated, without transformation.
    pub fn respond(&self, code: StatusCode, value: &Value, warnings: &[String]) -> Response {
        self.output.respond(code, value, warnings)
    }

    /// One object of the kind, as a Table or PartialObjectMetadata when asked.
    pub fn respond_object(&self, object: Value) -> Result<Response, ApiError> {
        let shaped = match self.output.shape {
            Shape::Object => object,
            Shape::Table => table::table(
                self.kind.as_ref(),
                std::slice::from_ref(&object),
                json!({}),
                self.params.include_object,
            )?,
            Shape::PartialObjectMetadata => table::partial_object_metadata(&object),
        };
        Ok(self.respond(StatusCode::OK, &shaped, &[]))
    }

    /// Decodes an object body for this kind: the apiVersion and kind must be the kind's
    /// (defaulted when absent); fields the kind does not know are dropped, with a warning
    /// each (`fieldValidation=Warn`, the default), silently (`Ignore`) or rejected with 400
    /// (`Strict`). Returns the object and the warnings.
    pub fn decode_object(&self, mut object: Value) -> Result<(Value, Vec<String>), ApiError> {
        let info = self.kind.info();
        let expected = info.api_version();
        let map = super::object::as_map(&mut object);
        match map.get("apiVersion").and_then(Value::as_str) {
            None | Some("") => {
                map.insert("apiVersion".into(), expected.clone().into());
            }
            Some(found) if found != expected => {
                return Err(ApiError::bad_request(format!(
                    "the API version in the data ({found}) does not match the expected API version ({expected})"
                )));
            }
            Some(_) => {}
        }
        match map.get("kind").and_then(Value::as_str) {
            None | Some("") => {
                map.insert("kind".into(), info.kind.into());
            }
            Some(found) if found != info.kind => {
                return Err(ApiError::bad_request(format!(
                    "the kind in the data ({found}) does not match the expected kind ({})",
                    info.kind
                )));
            }
            Some(_) => {}
        }
        let (decoded, unknown) = self.kind.decode(object)?;
        let messages: Vec<String> = unknown
            .iter()
            .map(|path| format!("unknown field {path:?}"))
            .collect();
        match self.params.field_validation {
            FieldValidation::Strict if !messages.is_empty() => Err(ApiError::bad_request(format!(
                "strict decoding error: {}",
                messages.join(", ")
            ))),
            FieldValidation::Warn => Ok((decoded, messages)),
            _ => Ok((decoded, Vec::new())),
        }
    }
}
