//! `serviceaccounts/token` (upstream `pkg/registry/core/serviceaccount/storage/token.go`):
//! `POST` an authentication.k8s.io/v1 TokenRequest, get it back with `status.token` and
//! `status.expirationTimestamp`. `spec.expirationSeconds` defaults to 3600 and must be at
//! least 600; `spec.audiences` defaults to the issuer; `spec.boundObjectRef` may bind the
//! token to a Pod or a Secret (the token stops working when that object is gone).

use std::sync::Arc;

use async_trait::async_trait;
use axum::Json;
use axum::extract::Request;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use skiff_api::field::{FieldError, Path};

use super::token::{ObjectRef, TokenSpec};
use crate::error::{ApiError, GroupResource};
use crate::registry::{Context, Subresource};
use crate::rest::negotiation::{PROTOBUF, content_type, decode_object, read_body};

/// The default validity of a requested token (upstream: one hour).
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
/// The shortest validity a request may ask for (10 minutes).
pub const MIN_EXPIRATION_SECONDS: i64 = 600;
/// The longest (2^32 seconds).
const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;

/// The `token` subresource of serviceaccounts, for the ServiceAccount strategy's
/// `subresources()`.
pub fn subresource() -> Arc<dyn Subresource> {
    Arc::new(ServiceAccountToken)
}

struct ServiceAccountToken;

/// The fields of a TokenRequest's spec this handler reads.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TokenRequestSpec {
    /// `null` reads as empty: kubectl 1.27–1.31 send `"audiences": null`, which upstream's
    /// decoding takes as a nil slice.
    #[serde(default, deserialize_with = "null_as_empty")]
    audiences: Vec<String>,
    expiration_seconds: Option<i64>,
    bound_object_ref: Option<BoundObjectReference>,
}

/// A list that may be `null`, read as empty.
fn null_as_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Ok(Option::<Vec<String>>::deserialize(d)?.unwrap_or_default())
}

/// Reads a TokenRequest body's `spec`; a missing or `null` spec is the empty one.
/// Errors: 400 `error decoding TokenRequest: ...` on a type mismatch.
fn parse_spec(object: &Value) -> Result<TokenRequestSpec, ApiError> {
    match object.get("spec") {
        None | Some(Value::Null) => Ok(TokenRequestSpec::default()),
        Some(spec) => serde_json::from_value(spec.clone())
            .map_err(|e| ApiError::bad_request(format!("error decoding TokenRequest: {e}"))),
    }
}

/// `spec.boundObjectRef`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct BoundObjectReference {
    api_version: Option<String>,
    kind: Option<String>,
    name: Option<String>,
    uid: Option<String>,
}

/// RFC 3339 in UTC with seconds, as metav1.Time serializes.
fn rfc3339(seconds: i64) -> String {
    chrono::DateTime::from_timestamp(seconds, 0)
        .unwrap_or_default()
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Checks `spec.expirationSeconds` as upstream's `ValidateTokenRequest`.
fn validate(spec: &TokenRequestSpec, name: &str) -> Result<(), ApiError> {
    let seconds = spec
        .expiration_seconds
        .unwrap_or(DEFAULT_EXPIRATION_SECONDS);
    let field = Path::new("spec").child("expirationSeconds");
    let error = if seconds < MIN_EXPIRATION_SECONDS {
        Some("may not specify a duration less than 10 minutes")
    } else if seconds > MAX_EXPIRATION_SECONDS {
        Some("may not specify a duration larger than 2^32 seconds")
    } else {
        None
    };
    match error {
        Some(detail) => Err(ApiError::invalid(
            "authentication.k8s.io",
            "TokenRequest",
            name,
            &[FieldError::invalid(&field, seconds, detail)],
        )),
        None => Ok(()),
    }
}

/// The name and uid of the bound object, checked to exist (and match the given uid).
async fn bound_object(
    ctx: &Context<'_>,
    namespace: Option<&str>,
    service_account: &str,
    spec: &TokenRequestSpec,
) -> Result<(Option<ObjectRef>, Option<ObjectRef>), ApiError> {
    let Some(reference) = &spec.bound_object_ref else {
        return Ok((None, None));
    };
    let api_version = reference.api_version.as_deref().unwrap_or("v1");
    let kind = reference.kind.as_deref().unwrap_or_default();
    let resource = match (api_version, kind) {
        ("v1", "Pod") => "pods",
        ("v1", "Secret") => "secrets",
        _ => {
            return Err(ApiError::bad_request(format!(
                "cannot bind token to object of type {}, Kind={kind}",
                if api_version == "v1" {
                    "/v1"
                } else {
                    api_version
                }
            )));
        }
    };
    let name = reference.name.as_deref().unwrap_or_default();
    let object = ctx
        .objects
        .get(&GroupResource::new("", resource), namespace, name)
        .await?;
    if resource == "pods" && object["spec"]["serviceAccountName"].as_str() != Some(service_account)
    {
        return Err(ApiError::bad_request(format!(
            "cannot bind token for serviceaccount {service_account:?} to pod running with different serviceaccount name."
        )));
    }
    let uid = object["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    if let Some(wanted) = reference.uid.as_deref().filter(|u| !u.is_empty())
        && wanted != uid
    {
        return Err(ApiError::conflict(
            &GroupResource::new("", kind),
            name,
            &format!(
                "the UID in the bound object reference ({wanted}) does not match the UID in record. The object might have been deleted and then recreated"
            ),
        ));
    }
    let bound = Some(ObjectRef {
        name: name.to_owned(),
        uid,
    });
    Ok(if resource == "pods" {
        (bound, None)
    } else {
        (None, bound)
    })
}

#[async_trait]
impl Subresource for ServiceAccountToken {
    fn name(&self) -> &'static str {
        "token"
    }

    fn verbs(&self) -> &'static [&'static str] {
        &["create"]
    }

    fn kind(&self) -> Option<(&'static str, &'static str, &'static str)> {
        Some(("authentication.k8s.io", "v1", "TokenRequest"))
    }

    async fn handle(
        &self,
        ctx: &Context<'_>,
        namespace: Option<&str>,
        name: &str,
        request: Request,
    ) -> Result<Response, ApiError> {
        if request.method() != Method::POST {
            return Err(ApiError::new(
                405,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
            ));
        }
        let issuer = ctx
            .config
            .service_account_tokens
            .as_deref()
            .ok_or_else(|| {
                ApiError::unavailable("the API server has no service-account signing key")
            })?;
        let media_type = content_type(request.headers());
        let body = read_body(request.into_body()).await?;
        let mut object: Value = if media_type == PROTOBUF {
            decode_object(&media_type, &body)?
        } else {
            // Bounded as every other body (nesting depth).
            skiff_api::yaml::to_json(&body)
                .map_err(|e| ApiError::bad_request(format!("error decoding TokenRequest: {e}")))?
        };
        let mut spec = parse_spec(&object)?;
        validate(&spec, name)?;
        let service_account = ctx
            .objects
            .get(&GroupResource::new("", "serviceaccounts"), namespace, name)
            .await?;
        let (pod, secret) = bound_object(ctx, namespace, name, &spec).await?;
        let expiration_seconds = spec
            .expiration_seconds
            .unwrap_or(DEFAULT_EXPIRATION_SECONDS);
        if spec.audiences.is_empty() {
            spec.audiences = vec![issuer.issuer().to_owned()];
        }
        let token_spec = TokenSpec {
            namespace: namespace.unwrap_or_default().to_owned(),
            service_account: ObjectRef {
                name: name.to_owned(),
                uid: service_account["metadata"]["uid"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            },
            pod,
            secret,
            audiences: spec.audiences.clone(),
            expiration_seconds,
        };
        let now = chrono::Utc::now().timestamp();
        let (token, expiry) = issuer.issue(&token_spec, now).map_err(ApiError::internal)?;
        if !object.is_object() {
            object = json!({});
        }
        object["apiVersion"] = "authentication.k8s.io/v1".into();
        object["kind"] = "TokenRequest".into();
        if !object["metadata"].is_object() {
            object["metadata"] = json!({});
        }
        object["metadata"]["name"] = name.into();
        object["metadata"]["namespace"] = namespace.into();
        object["metadata"]["creationTimestamp"] = rfc3339(now).into();
        if !object["spec"].is_object() {
            object["spec"] = json!({});
        }
        object["spec"]["audiences"] = json!(spec.audiences);
        object["spec"]["expirationSeconds"] = expiration_seconds.into();
        object["status"] = json!({"token": token, "expirationTimestamp": rfc3339(expiry)});
        let out = object;
        Ok((StatusCode::CREATED, Json(out)).into_response())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(seconds: Option<i64>) -> TokenRequestSpec {
        TokenRequestSpec {
            expiration_seconds: seconds,
            ..Default::default()
        }
    }

    #[test]
    fn null_audiences_read_as_none() {
        // kubectl 1.27–1.31's `kubectl create token` body.
        let body = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"audiences": null, "expirationSeconds": null, "boundObjectRef": null}});
        let spec = parse_spec(&body).unwrap();
        assert!(spec.audiences.is_empty());
        assert_eq!(spec.expiration_seconds, None);
        let spec = parse_spec(&json!({"spec": {"audiences": ["a", "b"]}})).unwrap();
        assert_eq!(spec.audiences, ["a", "b"]);
        let err = parse_spec(&json!({"spec": {"audiences": "a"}})).unwrap_err();
        assert_eq!(err.code, 400);
        assert!(
            err.message.starts_with("error decoding TokenRequest: "),
            "{}",
            err.message
        );
        assert!(
            parse_spec(&json!({"spec": null}))
                .unwrap()
                .audiences
                .is_empty()
        );
    }

    #[test]
    fn formats_times_as_metav1() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
    }

    #[test]
    fn validates_expiration_as_upstream() {
        assert!(validate(&request(None), "sa").is_ok());
        assert!(validate(&request(Some(600)), "sa").is_ok());
        let err = validate(&request(Some(599)), "sa").unwrap_err();
        assert_eq!(err.code, 422);
        assert_eq!(
            err.message,
            "TokenRequest.authentication.k8s.io \"sa\" is invalid: spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 10 minutes"
        );
        assert_eq!(
            validate(&request(Some((1 << 32) + 1)), "sa")
                .unwrap_err()
                .code,
            422
        );
    }
}
