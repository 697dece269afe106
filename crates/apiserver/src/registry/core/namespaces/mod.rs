//! Namespaces (upstream `pkg/registry/core/namespace`).
//!
//! Deleting a namespace marks it (deletionTimestamp, phase `Terminating`); the REST layer
//! then refuses new content in it. The controller manager's namespace controller deletes
//! its content and removes the `kubernetes` finalizer through `finalize`; the namespace
//! goes once no `spec.finalizers` remain.

mod finalize;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Namespace;
use serde_json::{Value, json};
use skiff_api::core::namespace::{
    default_namespace, prepare_namespace_for_create, validate_namespace,
};
use skiff_api::field::ErrorList;

use crate::error::{ApiError, GroupResource};
use crate::registry::printers::{AGE, NAME, age, column, name};
use crate::registry::{Context, ResourceInfo, Strategy, TableColumn};

/// Namespaces that may not be deleted.
const IMMORTAL: &[&str] = &["default", "kube-system", "kube-public"];

/// The phase of a namespace being deleted.
pub const TERMINATING: &str = "Terminating";

/// The namespaces kind.
pub struct Namespaces;

/// `namespaces`, as errors and [`crate::registry::Objects`] name the resource.
pub fn namespaces() -> GroupResource {
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

    /// Upstream's namespace storage has no DeleteCollection: `DELETE /api/v1/namespaces`
    /// is 405.
    fn verbs(&self) -> &'static [&'static str] {
        crate::registry::VERBS_WITHOUT_DELETECOLLECTION
    }

    /// `finalize`.
    fn subresources(&self) -> Vec<std::sync::Arc<dyn crate::registry::Subresource>> {
        vec![std::sync::Arc::new(finalize::FinalizeSubresource)]
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

    /// Refuses to delete `default`, `kube-system` and `kube-public` (403).
    async fn before_delete(
        &self,
        _ctx: &Context<'_>,
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
        Ok(())
    }

    /// Upstream's namespace REST Delete: the first delete only marks the namespace
    /// (deletionTimestamp, phase Terminating) and leaves the rest to the
    /// namespace controller; later deletes leave it as it is while `spec.finalizers` remain.
    fn hold_deletion(&self, old: &Namespace, marked: &mut Namespace) -> bool {
        if old.metadata.deletion_timestamp.is_none() {
            marked.status.get_or_insert_default().phase = Some(TERMINATING.to_owned());
            return true;
        }
        !finalized(marked)
    }
}

/// Whether no `spec.finalizers` remain (upstream's `finalized`).
pub fn finalized(namespace: &Namespace) -> bool {
    let finalizers = namespace.spec.as_ref().and_then(|s| s.finalizers.as_ref());
    finalizers.is_none_or(Vec::is_empty)
}
