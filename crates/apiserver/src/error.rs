//! API errors as upstream's `k8s.io/apimachinery/pkg/api/errors`: an HTTP code and a
//! `metav1.Status` body whose `reason`, `message` and `details` match upstream's, so that
//! clients' `IsNotFound`, `IsConflict`, ... and kubectl's messages work unchanged.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Status, StatusCause, StatusDetails};
use skiff_api::field::{self, FieldError};

/// A resource as errors name it: `pods`, `deployments.apps`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GroupResource {
    /// API group, `""` for core.
    pub group: String,
    /// Plural resource name, `deployments`.
    pub resource: String,
}

impl GroupResource {
    pub fn new(group: &str, resource: &str) -> Self {
        GroupResource {
            group: group.to_owned(),
            resource: resource.to_owned(),
        }
    }
}

impl std::fmt::Display for GroupResource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.resource)
        } else {
            write!(f, "{}.{}", self.resource, self.group)
        }
    }
}

/// `Deployment.apps`, or `Pod` for the core group (upstream `GroupKind.String()`).
fn qualified_kind(group: &str, kind: &str) -> String {
    if group.is_empty() {
        kind.to_owned()
    } else {
        format!("{kind}.{group}")
    }
}

/// An error answered as a `metav1.Status` (kind Status, status Failure).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    /// HTTP status code, also `Status.code`.
    pub code: u16,
    /// `Status.reason`: `NotFound`, `AlreadyExists`, `Conflict`, `Invalid`, `BadRequest`, ...
    pub reason: &'static str,
    pub message: String,
    pub details: Option<StatusDetails>,
    /// `Status.metadata.continue`: where a client may resume a list whose continue token
    /// expired (see [`ApiError::with_continue`]).
    pub continue_token: Option<String>,
}

impl ApiError {
    /// An error without details.
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
            continue_token: None,
        }
    }

    /// The error with `Status.metadata.continue` set, as upstream's 410 for an expired
    /// continue token carries a token to resume from.
    pub fn with_continue(mut self, token: String) -> Self {
        self.continue_token = Some(token);
        self
    }

    fn with_details(mut self, resource: &GroupResource, name: &str) -> Self {
        self.details = Some(StatusDetails {
            name: Some(name.to_owned()),
            group: Some(resource.group.clone()).filter(|g| !g.is_empty()),
            kind: Some(resource.resource.clone()),
            ..Default::default()
        });
        self
    }

    /// 404 `pods "x" not found`.
    pub fn not_found(resource: &GroupResource, name: &str) -> Self {
        Self::new(404, "NotFound", format!("{resource} {name:?} not found"))
            .with_details(resource, name)
    }

    /// 409 `pods "x" already exists`.
    pub fn already_exists(resource: &GroupResource, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{resource} {name:?} already exists"),
        )
        .with_details(resource, name)
    }

    /// 409 `Operation cannot be fulfilled on pods "x": <why>`.
    pub fn conflict(resource: &GroupResource, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {resource} {name:?}: {why}"),
        )
        .with_details(resource, name)
    }

    /// The conflict of a stale resourceVersion (optimistic concurrency).
    pub fn modified(resource: &GroupResource, name: &str) -> Self {
        Self::conflict(
            resource,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 `Pod "x" is invalid: <errors>` (`Deployment.apps "x" ...` for named groups, as
    /// upstream's GroupKind) with one cause per field error. `kind` is the kind (`Pod`),
    /// `group` its API group.
    pub fn invalid(group: &str, kind: &str, name: &str, errors: &[FieldError]) -> Self {
        let causes = errors
            .iter()
            .map(|e| StatusCause {
                reason: Some(e.kind.reason().to_owned()),
                message: Some(e.body()),
                field: Some(e.field.to_string()),
            })
            .collect();
        ApiError {
            code: 422,
            reason: "Invalid",
            message: format!(
                "{} {name:?} is invalid: {}",
                qualified_kind(group, kind),
                field::aggregate(errors)
            ),
            details: Some(StatusDetails {
                name: Some(name.to_owned()),
                group: Some(group.to_owned()).filter(|g| !g.is_empty()),
                kind: Some(kind.to_owned()),
                causes: Some(causes),
                ..Default::default()
            }),
            continue_token: None,
        }
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 401 Unauthorized.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// 403 `pods "x" is forbidden: <why>` (admission refusals, immortal namespaces).
    pub fn forbidden(resource: &GroupResource, name: &str, why: &str) -> Self {
        Self::new(
            403,
            "Forbidden",
            format!("{resource} {name:?} is forbidden: {why}"),
        )
        .with_details(resource, name)
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_supported(resource: &GroupResource, action: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!("{action} is not supported on resources of kind {resource:?}"),
        )
    }

    /// 410 Gone (`too old resource version: 5 (200)`, an expired continue token).
    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 413 RequestEntityTooLarge.
    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(413, "RequestEntityTooLarge", message)
    }

    /// 415 UnsupportedMediaType.
    pub fn unsupported_media_type(content_type: &str, accepted: &[&str]) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: {}; got {content_type:?}",
                accepted.join(", ")
            ),
        )
    }

    /// The media types of object bodies (create, update, subresources).
    pub const OBJECT_MEDIA_TYPES: &[&str] = &[
        "application/json",
        "application/yaml",
        "application/vnd.kubernetes.protobuf",
    ];

    /// The media types of patch bodies (server-side apply is not served).
    pub const PATCH_MEDIA_TYPES: &[&str] = &[
        "application/json-patch+json",
        "application/merge-patch+json",
        "application/strategic-merge-patch+json",
        "application/apply-patch+yaml",
    ];

    /// The patch media types of custom resources: no strategic merge patch, as upstream.
    pub const CUSTOM_RESOURCE_PATCH_MEDIA_TYPES: &[&str] = &[
        "application/json-patch+json",
        "application/merge-patch+json",
        "application/apply-patch+yaml",
    ];

    /// 429 TooManyRequests (e.g. an eviction a PodDisruptionBudget blocks).
    pub fn too_many_requests(message: impl Into<String>) -> Self {
        Self::new(429, "TooManyRequests", message)
    }

    /// 500 InternalError: `Internal error occurred: <err>`.
    pub fn internal(err: impl std::fmt::Display) -> Self {
        Self::new(
            500,
            "InternalError",
            format!("Internal error occurred: {err}"),
        )
    }

    /// 503 ServiceUnavailable (the store cannot be reached).
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(503, "ServiceUnavailable", message)
    }

    /// The `metav1.Status` body.
    pub fn status(&self) -> Status {
        Status {
            code: Some(i32::from(self.code)),
            details: self.details.clone(),
            message: Some(self.message.clone()),
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta {
                continue_: self.continue_token.clone(),
                ..Default::default()
            },
            // Upstream omits an empty reason (`ErrorToAPIStatus` of a plain error).
            reason: (!self.reason.is_empty()).then(|| self.reason.to_owned()),
            status: Some("Failure".to_owned()),
        }
    }

    /// The Status as JSON with `kind` and `apiVersion`, as written on the wire and in
    /// watch ERROR events.
    pub fn status_json(&self) -> serde_json::Value {
        let mut value = serde_json::to_value(self.status()).unwrap_or_default();
        if let Some(map) = value.as_object_mut() {
            map.insert("kind".into(), "Status".into());
            map.insert("apiVersion".into(), "v1".into());
        }
        value
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (code, axum::Json(self.status_json())).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use skiff_api::field::Path;

    #[test]
    fn messages_match_upstream() {
        let deployments = GroupResource::new("apps", "deployments");
        assert_eq!(
            ApiError::not_found(&deployments, "web").message,
            r#"deployments.apps "web" not found"#
        );
        let pods = GroupResource::new("", "pods");
        assert_eq!(
            ApiError::modified(&pods, "p").message,
            r#"Operation cannot be fulfilled on pods "p": the object has been modified; please apply your changes to the latest version and try again"#
        );
        let err = ApiError::invalid(
            "",
            "Pod",
            "p",
            &[FieldError::required(
                &Path::new("spec").child("containers"),
                "",
            )],
        );
        assert_eq!(err.code, 422);
        assert_eq!(
            err.message,
            r#"Pod "p" is invalid: spec.containers: Required value"#
        );
        let body = err.status_json();
        assert_eq!(body["kind"], "Status");
        assert_eq!(body["details"]["causes"][0]["reason"], "FieldValueRequired");
        assert_eq!(body["details"]["causes"][0]["field"], "spec.containers");
    }
}
