//! The OpenAPI schemas of the served kinds, with upstream's `x-kubernetes-patch-strategy`,
//! `x-kubernetes-patch-merge-key`, `x-kubernetes-list-type`, ... extensions that strategic
//! merge patch and client-side `kubectl apply` rely on.
//!
//! STUB: the machinery helper replaces the bodies; the signatures are the contract.

use serde_json::{Map, Value};

/// OpenAPI definitions by name (`io.k8s.api.core.v1.Pod` → JSON schema with `$ref`s of
/// the form `#/definitions/<name>`), decorated with the patch extensions.
#[derive(Debug, Clone, Default)]
pub struct Schemas {
    definitions: Map<String, Value>,
}

impl Schemas {
    /// Takes the definitions (as generated from the k8s-openapi types) and adds upstream's
    /// patch extensions.
    pub fn new(definitions: Map<String, Value>) -> Self {
        Schemas { definitions }
    }

    /// Every definition.
    pub fn definitions(&self) -> &Map<String, Value> {
        &self.definitions
    }
}
