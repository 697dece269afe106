//! `certificatesigningrequests/approval` (upstream's approval REST storage): GET reads the
//! request; PUT and PATCH change only `status.conditions`, with the approval rules
//! (Approved or Denied may be added, not removed; the certificate is untouched). Condition
//! timestamps the client left empty are set to now.

use async_trait::async_trait;
use axum::extract::Request;
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;
use skiff_api::certificates;

use crate::error::{ApiError, GroupResource};
use crate::registry::{Context, Subresource, printers};
use crate::rest::negotiation::{PROTOBUF, decode_object};

/// The approval subresource.
pub struct Approval;

fn resource() -> GroupResource {
    GroupResource::new("certificates.k8s.io", "certificatesigningrequests")
}

fn json_response(object: &Value) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        object.to_string(),
    )
        .into_response()
}

/// How the requested object is made from the stored one.
enum Change {
    Replace(Value),
    JsonPatch(Value),
    MergePatch(Value),
}

impl Change {
    fn apply(&self, current: &Value) -> Result<Value, ApiError> {
        let patched = match self {
            Change::Replace(object) => return Ok(object.clone()),
            Change::JsonPatch(patch) => skiff_api::patch::json_patch(current, patch),
            Change::MergePatch(patch) => skiff_api::patch::merge_patch(current, patch),
        };
        patched.map_err(|e| ApiError::new(422, "Invalid", e.to_string()))
    }
}

/// The stored object with the requested conditions, validated as an approval update.
/// Errors: 409 on a stale `metadata.resourceVersion`, 422 on invalid conditions.
fn approve(current: &Value, requested: &Value, name: &str) -> Result<Value, ApiError> {
    let requested_version = requested["metadata"]["resourceVersion"].as_str();
    if requested_version.is_some_and(|v| Some(v) != current["metadata"]["resourceVersion"].as_str())
    {
        return Err(ApiError::modified(&resource(), name));
    }
    let decode = |value: &Value| {
        serde_json::from_value::<CertificateSigningRequest>(value.clone()).map_err(|e| {
            ApiError::bad_request(format!("unable to decode CertificateSigningRequest: {e}"))
        })
    };
    let old = decode(current)?;
    let wanted = decode(requested)?;
    let conditions = wanted.status.and_then(|s| s.conditions).unwrap_or_default();
    let mut new = old.clone();
    new.status.get_or_insert_with(Default::default).conditions =
        (!conditions.is_empty()).then_some(conditions);
    super::populate_condition_timestamps(&mut new, &old, Time(printers::now()));
    let errors = certificates::validate_approval_update(&new, &old);
    if !errors.is_empty() {
        return Err(ApiError::invalid(
            "certificates.k8s.io",
            "CertificateSigningRequest",
            name,
            &errors,
        ));
    }
    serde_json::to_value(&new).map_err(ApiError::internal)
}

async fn read_change(request: Request) -> Result<Change, ApiError> {
    let method = request.method().clone();
    let content_type = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_owned();
    let body = crate::rest::negotiation::read_body(request.into_body()).await?;
    let value = parse_body(&body, &content_type)?;
    match (method, content_type.as_str()) {
        (Method::PUT, _) => Ok(Change::Replace(value)),
        (_, "application/json-patch+json") => Ok(Change::JsonPatch(value)),
        // The conditions are an atomic list in both patch kinds.
        (_, "application/merge-patch+json" | "application/strategic-merge-patch+json") => {
            Ok(Change::MergePatch(value))
        }
        _ => Err(ApiError::unsupported_media_type(
            &content_type,
            ApiError::PATCH_MEDIA_TYPES,
        )),
    }
}

fn parse_body(body: &[u8], content_type: &str) -> Result<Value, ApiError> {
    if content_type == PROTOBUF {
        return decode_object(content_type, body);
    }
    let parsed = if content_type.contains("yaml") {
        serde_yaml_ng::from_slice(body).map_err(|e| e.to_string())
    } else {
        serde_json::from_slice(body).map_err(|e| e.to_string())
    };
    parsed.map_err(|e| {
        ApiError::bad_request(format!(
            "the body of the request was in an unknown format: {e}"
        ))
    })
}

#[async_trait]
impl Subresource for Approval {
    fn name(&self) -> &'static str {
        "approval"
    }

    fn verbs(&self) -> &'static [&'static str] {
        &["get", "patch", "update"]
    }

    fn kind(&self) -> Option<(&'static str, &'static str, &'static str)> {
        Some(("certificates.k8s.io", "v1", "CertificateSigningRequest"))
    }

    async fn handle(
        &self,
        ctx: &Context<'_>,
        _namespace: Option<&str>,
        name: &str,
        request: Request,
    ) -> Result<Response, ApiError> {
        let resource = resource();
        let method = request.method().clone();
        match method {
            Method::GET => Ok(json_response(
                &ctx.objects.get(&resource, None, name).await?,
            )),
            Method::PUT | Method::PATCH => {
                let change = read_change(request).await?;
                if ctx.dry_run {
                    let current = ctx.objects.get(&resource, None, name).await?;
                    let approved = approve(&current, &change.apply(&current)?, name)?;
                    return Ok(json_response(&approved));
                }
                let updated = ctx
                    .objects
                    .update(&resource, None, name, &mut |current: &mut Value| {
                        *current = approve(current, &change.apply(current)?, name)?;
                        Ok(())
                    })
                    .await?;
                Ok(json_response(&updated))
            }
            other => Err(ApiError::method_not_supported(&resource, other.as_str())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stored() -> Value {
        json!({
            "apiVersion": "certificates.k8s.io/v1",
            "kind": "CertificateSigningRequest",
            "metadata": {"name": "c", "resourceVersion": "5"},
            "spec": {"request": "", "signerName": "example.com/s", "usages": ["client auth"]},
            "status": {},
        })
    }

    #[test]
    fn approval_sets_only_the_conditions() {
        let mut requested = stored();
        requested["spec"]["signerName"] = json!("example.com/other");
        requested["status"] = json!({
            "conditions": [{"type": "Approved", "status": "True", "reason": "AutoApproved"}],
            "certificate": "YWJj",
        });
        // The stored request is not a valid PEM, so the result is rejected for that alone.
        let error = approve(&stored(), &requested, "c").unwrap_err();
        let message = error.status_json()["message"].as_str().unwrap().to_owned();
        assert!(message.contains("spec.request"), "{message}");
        assert!(!message.contains("status.certificate"), "{message}");
        assert!(!message.contains("signerName"), "{message}");
    }

    #[test]
    fn stale_resource_version_conflicts() {
        let mut requested = stored();
        requested["metadata"]["resourceVersion"] = json!("4");
        assert_eq!(
            approve(&stored(), &requested, "c")
                .unwrap_err()
                .status()
                .code,
            Some(409)
        );
    }
}
