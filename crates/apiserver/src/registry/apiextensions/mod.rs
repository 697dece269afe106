//! apiextensions.k8s.io/v1: CustomResourceDefinitions (upstream
//! `k8s.io/apiextensions-apiserver`: `pkg/registry/customresourcedefinition` for the
//! definitions, `pkg/registry/customresource` for the objects they define, and the
//! controllers that name, establish and finalize them).
//!
//! - [`CustomResourceDefinitions`]: the definitions' strategy (defaults, validation,
//!   the deletion hold that adds upstream's cleanup finalizer; upstream prints them with
//!   the default Name and Created At columns, as here).
//! - [`custom_resource`]: each served version of an established definition, a [`Kind`]
//!   the registry gains while the server runs.
//! - [`conversion`] and [`webhook`]: the definition's version conversion (`None`, or its
//!   conversion webhook called over TLS).
//! - [`controller`]: accepts names, establishes definitions, installs and removes their
//!   kinds in the [`LiveRegistry`], and deletes a definition's objects before the
//!   definition itself.
//!
//! [`Kind`]: crate::registry::Kind
//! [`LiveRegistry`]: crate::registry::LiveRegistry

pub(crate) mod controller;
pub(crate) mod conversion;
pub(crate) mod custom_resource;
pub(crate) mod schema;
pub(crate) mod webhook;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use skiff_api::field::ErrorList;

use super::{Registry, ResourceInfo, Strategy};

/// The finalizer that holds a deleted definition until its objects are gone.
pub(crate) const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// Adds the group's kinds.
pub fn add(registry: &mut Registry) {
    registry.add(CustomResourceDefinitions);
}

/// `customresourcedefinitions` (`crd`, `crds`), cluster-scoped, with `/status`.
pub struct CustomResourceDefinitions;

impl Strategy for CustomResourceDefinitions {
    type Object = CustomResourceDefinition;

    fn info(&self) -> ResourceInfo {
        ResourceInfo {
            short_names: &["crd", "crds"],
            categories: &["api-extensions"],
            ..ResourceInfo::of::<CustomResourceDefinition>()
        }
    }

    fn status_subresource(&self) -> bool {
        true
    }

    fn bumps_generation(&self) -> bool {
        true
    }

    fn default(&self, crd: &mut CustomResourceDefinition) {
        schema::default_definition(crd);
    }

    fn prepare_for_create(&self, crd: &mut CustomResourceDefinition) {
        skiff_api::apiextensions::prepare_for_create(crd);
    }

    fn prepare_for_update(
        &self,
        new: &mut CustomResourceDefinition,
        old: &CustomResourceDefinition,
    ) {
        skiff_api::apiextensions::prepare_for_update(new, old);
    }

    fn validate(&self, crd: &CustomResourceDefinition) -> ErrorList {
        schema::validate_definition(crd, None)
    }

    fn validate_update(
        &self,
        new: &CustomResourceDefinition,
        old: &CustomResourceDefinition,
    ) -> ErrorList {
        schema::validate_definition(new, Some(old))
    }

    /// The first delete of a definition adds [`CLEANUP_FINALIZER`] (upstream's CRD REST
    /// Delete), so that the [`controller`] deletes the objects before the definition.
    fn hold_deletion(
        &self,
        old: &CustomResourceDefinition,
        marked: &mut CustomResourceDefinition,
    ) -> bool {
        if old.metadata.deletion_timestamp.is_some() {
            return false;
        }
        let finalizers = marked.metadata.finalizers.get_or_insert_with(Vec::new);
        if !finalizers.iter().any(|f| f == CLEANUP_FINALIZER) {
            finalizers.push(CLEANUP_FINALIZER.to_owned());
        }
        true
    }
}

#[cfg(test)]
mod conversion_tests;
#[cfg(test)]
mod tests;
