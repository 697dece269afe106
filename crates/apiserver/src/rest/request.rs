//! One API call as the verbs see it ([`Call`]): the kind, namespace, name and
//! subresource from the path, the query parameters, the negotiated output and the user;
//! and the decoding of object bodies with upstream's apiVersion/kind and unknown-field
//! rules.

use std::sync::Arc;

use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::{Value, json};

use super::State;
use super::duplicates::duplicate_fields;
use super::negotiation::{Output, Shape, content_type, decode_object};
use super::objects::ServerObjects;
use super::params::{FieldValidation, Params};
use super::store::Store;
use super::table;
use crate::authn::UserInfo;
use crate::error::ApiError;
use crate::registry::Kind;

/// Appends the kind's warnings of a write to those of decoding, each text once (upstream
/// records a request's warnings once each).
pub fn add_warnings(warnings: &mut Vec<String>, found: Vec<String>) {
    for text in found {
        if !warnings.contains(&text) {
            warnings.push(text);
        }
    }
}

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
        Store::new(&self.state, self.kind.clone())
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

    /// Decodes a request body (JSON or YAML, by `Content-Type`) as an object of this kind
    /// with [`Call::decode_object`], duplicate JSON fields included.
    pub fn decode_body(
        &self,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<(Value, Vec<String>), ApiError> {
        let media_type = content_type(headers);
        let value = decode_object(&media_type, body)?;
        let duplicates = match (media_type.as_str(), self.params.field_validation) {
            (_, FieldValidation::Ignore) => Vec::new(),
            ("application/json", _) => duplicate_fields(body),
            _ => Vec::new(),
        };
        self.decode_object(value, &duplicates)
    }

    /// Decodes an object for this kind: the apiVersion and kind must be the kind's
    /// (defaulted when absent); fields the kind does not know (and `duplicates`, paths of
    /// fields sent twice) are dropped, with a warning each (`fieldValidation=Warn`, the
    /// default), silently (`Ignore`) or rejected with 400 (`Strict`, upstream's
    /// `<Kind> in version "v1" cannot be handled as a <Kind>: strict decoding error: ...`).
    /// Returns the object and the warnings.
    pub fn decode_object(
        &self,
        mut object: Value,
        duplicates: &[String],
    ) -> Result<(Value, Vec<String>), ApiError> {
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
                map.insert("kind".into(), info.kind.as_str().into());
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
            .chain(
                duplicates
                    .iter()
                    .map(|path| format!("duplicate field {path:?}")),
            )
            .collect();
        match self.params.field_validation {
            FieldValidation::Strict if !messages.is_empty() => Err(ApiError::bad_request(format!(
                "{kind} in version {version:?} cannot be handled as a {kind}: strict decoding error: {}",
                messages.join(", "),
                kind = info.kind,
                version = info.version,
            ))),
            FieldValidation::Warn => Ok((decoded, messages)),
            _ => Ok((decoded, Vec::new())),
        }
    }
}
