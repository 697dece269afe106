//! Namespaces (upstream `pkg/registry/core/namespace`) and the namespace controller's
//! content deletion (the REST layer refuses new content in a terminating namespace).
//!
//! Deleting a namespace marks it `Terminating`, deletes every namespaced object in it
//! (pods without waiting for their grace period) and then lets the REST layer remove the
//! namespace itself, all within the DELETE request. Upstream leaves the content to the
//! namespace controller and removes the namespace once its `kubernetes` finalizer is
//! gone; that moves to Skiff's controller manager when it exists.

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Namespace;
use serde_json::{Value, json};
use skiff_api::core::namespace::{
    default_namespace, prepare_namespace_for_create, validate_namespace,
};
use skiff_api::field::ErrorList;

use crate::error::{ApiError, GroupResource};
use crate::registry::printers::{AGE, NAME, age, column, name};
use crate::registry::{Context, Objects, ResourceInfo, Strategy, TableColumn};

/// Namespaces that may not be deleted.
const IMMORTAL: &[&str] = &["default", "kube-system", "kube-public"];

/// The phase of a namespace being deleted.
const TERMINATING: &str = "Terminating";

/// The namespaces kind.
pub struct Namespaces;

fn namespaces() -> GroupResource {
    GroupResource::new("", "namespaces")
}

#[async_trait]
impl Strategy for Namespaces {
    type Object = Namespace;

    fn info(&self) -> ResourceInfo {
        ResourceInfo {
            short_names: &["ns"],
            ..ResourceInfo::of::<Namespace>()
        }
    }

    fn status_subresource(&self) -> bool {
        true
    }

    fn default(&self, namespace: &mut Namespace) {
        default_namespace(namespace);
    }

    fn prepare_for_create(&self, namespace: &mut Namespace) {
        prepare_namespace_for_create(namespace);
    }

    /// Upstream PrepareForUpdate: the finalizers change only through `/finalize`.
    fn prepare_for_update(&self, new: &mut Namespace, old: &Namespace) {
        new.spec.clone_from(&old.spec);
    }

    fn validate(&self, namespace: &Namespace) -> ErrorList {
        validate_namespace(namespace)
    }

    /// Upstream `NamespaceToSelectableFields` (`name` kept for compatibility, as upstream).
    fn selectable_fields(&self, namespace: &Namespace) -> Vec<(&'static str, String)> {
        let phase = namespace.status.as_ref().and_then(|s| s.phase.clone());
        vec![
            ("status.phase", phase.unwrap_or_default()),
            ("name", name(&namespace.metadata)),
        ]
    }

    /// NAME STATUS AGE.
    fn columns(&self) -> Vec<TableColumn> {
        vec![
            NAME,
            column("Status", "string", "The status of the namespace", 0),
            AGE,
        ]
    }

    fn row(&self, namespace: &Namespace) -> Vec<Value> {
        let phase = namespace.status.as_ref().and_then(|s| s.phase.clone());
        vec![
            json!(name(&namespace.metadata)),
            json!(phase.unwrap_or_default()),
            json!(age(&namespace.metadata)),
        ]
    }

    /// Refuses to delete `default`, `kube-system` and `kube-public` (403); else marks the
    /// namespace Terminating and deletes its content.
    async fn before_delete(
        &self,
        ctx: &Context<'_>,
        namespace: &Namespace,
    ) -> Result<(), ApiError> {
        let name = name(&namespace.metadata);
        if IMMORTAL.contains(&name.as_str()) {
            return Err(ApiError::forbidden(
                &namespaces(),
                &name,
                "this namespace may not be deleted",
            ));
        }
        if ctx.dry_run {
            return Ok(());
        }
        ctx.objects
            .update(&namespaces(), None, &name, &mut |value: &mut Value| {
                if let Some(status) = value
                    .as_object_mut()
                    .map(|o| o.entry("status").or_insert_with(|| json!({})))
                {
                    status["phase"] = json!(TERMINATING);
                }
                Ok(())
            })
            .await?;
        delete_content(ctx.objects, &name).await
    }
}

/// Deletes every namespaced object in `namespace` at once (the namespace controller's
/// work upstream). Objects already gone are skipped.
async fn delete_content(objects: &dyn Objects, namespace: &str) -> Result<(), ApiError> {
    for resource in objects.namespaced_resources() {
        for object in objects.list(&resource, Some(namespace)).await? {
            let Some(object_name) = object.pointer("/metadata/name").and_then(Value::as_str) else {
                continue;
            };
            match objects
                .delete(&resource, Some(namespace), object_name, Some(0))
                .await
            {
                Err(e) if e.code != 404 => return Err(e),
                _ => {}
            }
        }
    }
    Ok(())
}
