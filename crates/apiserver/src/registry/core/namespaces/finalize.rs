//! `PUT namespaces/<name>/finalize` (upstream `FinalizeREST`): replaces the namespace's
//! `spec.finalizers` and nothing else; what the namespace controller (and
//! `kubectl replace --raw .../finalize`) uses to release a terminating namespace.

use async_trait::async_trait;
use axum::http::{Method, StatusCode};
use axum::response::IntoResponse;
use k8s_openapi::api::core::v1::Namespace;
use serde_json::{Value, json};
use skiff_api::core::namespace::validate_namespace_finalizers;

use super::namespaces;
use crate::error::ApiError;
use crate::registry::core::read_body;
use crate::registry::{Context, Subresource};

/// The `finalize` subresource of namespaces.
pub struct FinalizeSubresource;

#[async_trait]
impl Subresource for FinalizeSubresource {
    fn name(&self) -> &'static str {
        "finalize"
    }

    fn verbs(&self) -> &'static [&'static str] {
        &["update"]
    }

    fn kind(&self) -> Option<(&'static str, &'static str, &'static str)> {
        Some(("", "v1", "Namespace"))
    }

    /// Answers 200 with the namespace as updated (it is gone when its last finalizer went
    /// while it was being deleted). Errors: 405 but for PUT, 400 when the body names
    /// another namespace, 422 for a finalizer name upstream refuses, 404 for a missing
    /// namespace, 409 for a stale `resourceVersion`.
    async fn handle(
        &self,
        ctx: &Context<'_>,
        _namespace: Option<&str>,
        name: &str,
        request: axum::extract::Request,
    ) -> Result<axum::response::Response, ApiError> {
        if request.method() != Method::PUT {
            return Err(crate::rest::router::method_not_allowed());
        }
        let body: Namespace = read_body(request).await?;
        if body.metadata.name.as_deref().is_some_and(|n| n != name) {
            return Err(ApiError::bad_request(
                "the name of the object does not match the name on the URL",
            ));
        }
        let errors = validate_namespace_finalizers(&body);
        if !errors.is_empty() {
            return Err(ApiError::invalid("", "Namespace", name, &errors));
        }
        let finalizers = json!(
            body.spec
                .as_ref()
                .and_then(|s| s.finalizers.clone())
                .unwrap_or_default()
        );
        let expected = body.metadata.resource_version.clone().unwrap_or_default();
        let mut last = None;
        let mut finalize = |ns: &mut Value| -> Result<(), ApiError> {
            let current = ns
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if !expected.is_empty() && expected != current {
                return Err(ApiError::conflict(
                    &namespaces(),
                    name,
                    "the object has been modified; please apply your changes to the latest version and try again",
                ));
            }
            ns["spec"]["finalizers"] = finalizers.clone();
            last = Some(ns.clone());
            Ok(())
        };
        let updated = if ctx.dry_run {
            let mut ns = ctx.objects.get(&namespaces(), None, name).await?;
            finalize(&mut ns)?;
            ns
        } else {
            match ctx
                .objects
                .update(&namespaces(), None, name, &mut finalize)
                .await
            {
                Ok(ns) => ns,
                // The emptied finalizers released a terminating namespace.
                Err(e) if e.code == 404 => last.ok_or(e)?,
                Err(e) => return Err(e),
            }
        };
        Ok((StatusCode::OK, axum::Json(updated)).into_response())
    }
}
