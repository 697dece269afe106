//! The legacy `POST /api/v1/namespaces/{ns}/bindings` (upstream `LegacyBindingREST`): binds
//! the pod the Binding names, exactly as `pods/{name}/binding` does. Not stored; create is
//! its only verb.

use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Binding;

use super::pods::binding::bind;
use super::read_body;
use crate::error::ApiError;
use crate::registry::{Context, Strategy, Unstored};

/// The `bindings` kind.
pub struct Bindings;

impl Strategy for Bindings {
    type Object = Binding;

    fn verbs(&self) -> &'static [&'static str] {
        &["create"]
    }

    fn unstored(&self) -> Option<Arc<dyn Unstored>> {
        Some(Arc::new(LegacyBinding))
    }
}

/// The create of the `bindings` collection.
struct LegacyBinding;

#[async_trait]
impl Unstored for LegacyBinding {
    /// Binds the pod named by the Binding's `metadata.name` and answers 201 with a Success
    /// Status. Errors: as `pods/binding` (422 without a target, 404 for a missing pod, 409
    /// for a bound one).
    async fn create(
        &self,
        ctx: &Context<'_>,
        namespace: Option<&str>,
        request: axum::extract::Request,
    ) -> Result<axum::response::Response, ApiError> {
        let binding: Binding = read_body(request).await?;
        let name = binding.metadata.name.clone().unwrap_or_default();
        bind(ctx, namespace, &name, &binding).await
    }
}
