//! Field ownership of the REST layer's writes (upstream's `FieldManager` in
//! `k8s.io/apiserver/pkg/endpoints/handlers`): who a request's write is recorded for
//! ([`Ownership`], from `fieldManager` or the user agent), the [`FieldManager`] of a kind
//! (typed by the kind's OpenAPI definition), the reset fields of the main resource and
//! `/status`, and upstream's options validation and errors of server-side apply.

use axum::http::HeaderMap;
use axum::http::header::USER_AGENT;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{StatusCause, StatusDetails};
use skiff_api::apply::{ApplyError, FieldManager, Path, Set, TypeSource};
use skiff_api::field::{FieldError, Path as FieldPath};
use skiff_api::schema::Schemas;

use super::request::Call;
use crate::error::ApiError;
use crate::registry::Kind;

/// Upstream's `FieldManagerMaxLength`.
pub const FIELD_MANAGER_MAX_LENGTH: usize = 128;

/// Who a write's fields are recorded for, and how.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ownership {
    /// The manager (`fieldManager`, or the user agent's prefix); `None`: the write does not
    /// touch managedFields (writes of the server's own hooks).
    pub manager: Option<String>,
    /// `status` or `scale` for writes through those subresources.
    pub subresource: Option<String>,
    /// The write is a server-side apply whose object already carries its managedFields;
    /// it creates the object when missing.
    pub applied: bool,
}

impl Ownership {
    /// The ownership of `call`'s writes: `fieldManager`, else the user agent's prefix
    /// (upstream `managerOrUserAgent`), through the call's subresource.
    pub fn of(call: &Call, headers: &HeaderMap) -> Self {
        let manager = call
            .params
            .field_manager
            .clone()
            .unwrap_or_else(|| prefix_from_user_agent(headers));
        Ownership {
            manager: Some(manager),
            subresource: call.subresource.clone(),
            applied: false,
        }
    }
}

/// Upstream `prefixFromUserAgent`: the user agent up to its first `/`, printable
/// characters only, cut to 128 bytes.
pub fn prefix_from_user_agent(headers: &HeaderMap) -> String {
    let agent = headers
        .get(USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let prefix = agent.split('/').next().unwrap_or_default();
    let mut out = String::new();
    for c in prefix.chars().filter(|c| !c.is_control()) {
        if out.len() + c.len_utf8() > FIELD_MANAGER_MAX_LENGTH {
            break;
        }
        out.push(c);
    }
    out
}

/// The reset fields of a write (upstream strategies' `GetResetFields`): the main
/// resource of a kind with `/status` never sets the status, `/status` never the spec.
pub fn reset_fields(kind: &dyn Kind, subresource: Option<&str>) -> Set {
    match subresource {
        Some("status") => Set::from_paths([Path::fields(&["spec"])]),
        _ if kind.status_subresource() => Set::from_paths([Path::fields(&["status"])]),
        _ => Set::new(),
    }
}

/// The field manager of `kind`, for writes through `subresource`: typed by its OpenAPI
/// `definition` in `schemas` for a built-in kind, by its version's `openAPIV3Schema` for
/// a custom resource ([`Kind::structural_schema`]).
pub fn field_manager<'a>(
    schemas: &'a Schemas,
    definition: &'a str,
    kind: &'a dyn Kind,
    subresource: Option<&str>,
) -> FieldManager<'a> {
    let info = kind.info();
    let types = match kind.structural_schema() {
        Some(schema) => TypeSource::Structural(schema),
        None => TypeSource::Definition {
            schemas,
            definition,
        },
    };
    FieldManager::new(types, &info.api_version(), &info.kind)
        .subresource(subresource.unwrap_or_default())
        .reset_fields(reset_fields(kind, subresource))
}

/// Upstream `ValidatePatchOptions`: `force` only for apply, `fieldManager` required for
/// apply and at most 128 bytes. Errors: 422 `PatchOptions.meta.k8s.io "" is invalid: ...`.
pub fn validate_patch_options(call: &Call, apply: bool) -> Result<(), ApiError> {
    let mut errors = Vec::new();
    let manager = call.params.field_manager.as_deref().unwrap_or_default();
    if !apply && call.params.force.is_some() {
        errors.push(FieldError::forbidden(
            &FieldPath::new("force"),
            "may not be specified for non-apply patch",
        ));
    }
    if apply && manager.is_empty() {
        errors.push(FieldError::required(
            &FieldPath::new("fieldManager"),
            "is required for apply patch",
        ));
    }
    if manager.len() > FIELD_MANAGER_MAX_LENGTH {
        errors.push(FieldError::too_long(
            &FieldPath::new("fieldManager"),
            FIELD_MANAGER_MAX_LENGTH,
        ));
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(
            "meta.k8s.io",
            "PatchOptions",
            "",
            &errors,
        ))
    }
}

/// An apply error as upstream answers it: 409 with one `FieldManagerConflict` cause per
/// conflicting field (upstream `NewApplyConflict`), 400, or 500.
pub fn apply_error(error: ApplyError) -> ApiError {
    match &error {
        ApplyError::Conflicts(conflicts) => {
            let causes = conflicts
                .iter()
                .map(|c| StatusCause {
                    reason: Some("FieldManagerConflict".to_owned()),
                    message: Some(c.message()),
                    field: Some(c.path.to_string()),
                })
                .collect();
            let mut err = ApiError::new(409, "Conflict", error.message());
            err.details = Some(StatusDetails {
                causes: Some(causes),
                ..Default::default()
            });
            err
        }
        ApplyError::BadRequest(message) => ApiError::bad_request(message.clone()),
        ApplyError::Internal(message) => ApiError::new(500, "InternalError", message.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn user_agents_give_their_prefix() {
        let mut headers = HeaderMap::new();
        assert_eq!(prefix_from_user_agent(&headers), "");
        headers.insert(
            USER_AGENT,
            HeaderValue::from_static("kubectl/v1.33.0 (linux/amd64) kubernetes/abc"),
        );
        assert_eq!(prefix_from_user_agent(&headers), "kubectl");
        headers.insert(USER_AGENT, HeaderValue::from_str(&"x".repeat(200)).unwrap());
        assert_eq!(prefix_from_user_agent(&headers).len(), 128);
    }
}
