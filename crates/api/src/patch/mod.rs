//! Patches as the `PATCH` verb takes them: JSON Patch (RFC 6902,
//! `application/json-patch+json`), JSON Merge Patch (RFC 7386,
//! `application/merge-patch+json`) and strategic merge patch
//! (`application/strategic-merge-patch+json`, upstream
//! `k8s.io/apimachinery/pkg/util/strategicpatch`, driven by the patch strategies and merge
//! keys of [`crate::schema`]).
//!
//! STUB: the machinery helper replaces the bodies; the signatures are the contract.

use serde_json::Value;

use crate::schema::Schemas;

/// Why a patch could not be applied (answered as 422 or 400 by the server, as upstream).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatchError(pub String);

impl std::fmt::Display for PatchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Applies an RFC 6902 patch document.
pub fn json_patch(_target: &Value, _patch: &Value) -> Result<Value, PatchError> {
    Err(PatchError("not implemented yet".into()))
}

/// Applies an RFC 7386 merge patch.
pub fn merge_patch(_target: &Value, _patch: &Value) -> Result<Value, PatchError> {
    Err(PatchError("not implemented yet".into()))
}

/// Applies a strategic merge patch to an object of OpenAPI type `definition`
/// (`io.k8s.api.apps.v1.Deployment`).
pub fn strategic_merge_patch(
    _schemas: &Schemas,
    _definition: &str,
    _target: &Value,
    _patch: &Value,
) -> Result<Value, PatchError> {
    Err(PatchError("not implemented yet".into()))
}
