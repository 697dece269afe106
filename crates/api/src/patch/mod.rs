//! Patches as the `PATCH` verb takes them: JSON Patch (RFC 6902,
//! `application/json-patch+json`), JSON Merge Patch (RFC 7386,
//! `application/merge-patch+json`) and strategic merge patch
//! (`application/strategic-merge-patch+json`, upstream
//! `k8s.io/apimachinery/pkg/util/strategicpatch`, driven by the patch strategies and merge
//! keys of [`crate::schema`]).

mod json;
mod strategic;

pub use json::{MAX_JSON_PATCH_OPERATIONS, json_patch, json_patch_operations, merge_patch};
pub use strategic::strategic_merge_patch;

/// Why a patch could not be applied. [`PatchError::status_code`] tells how upstream answers
/// it: 400 Bad Request for a malformed patch document, 422 Unprocessable Entity for a
/// well-formed patch that cannot be applied to the object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatchError(pub String);

/// Messages of malformed patches (upstream `mergepatch` errors answered as 400, JSON
/// decoding errors).
pub(crate) mod messages {
    pub const BAD_JSON_DOC: &str = "invalid JSON document";
    pub const BAD_MERGE_PATCH: &str = "Invalid JSON Patch";
    pub const BAD_PRIMITIVE_LIST: &str = "invalid patch format of primitive list";
    pub const BAD_RETAIN_KEYS: &str = "invalid patch format of retainKeys";
    pub const BAD_SET_ELEMENT_ORDER: &str = "invalid patch format of setElementOrder list";
    pub const NOT_AN_OBJECT: &str = "json: cannot unmarshal";
}

impl PatchError {
    /// The HTTP status upstream answers this error with (400 or 422).
    pub fn status_code(&self) -> u16 {
        use messages::*;
        let exact = [
            BAD_JSON_DOC,
            BAD_MERGE_PATCH,
            BAD_PRIMITIVE_LIST,
            BAD_RETAIN_KEYS,
            BAD_SET_ELEMENT_ORDER,
        ];
        if exact.contains(&self.0.as_str()) || self.0.starts_with(NOT_AN_OBJECT) {
            400
        } else {
            422
        }
    }
}

/// The JSON kind as Go's decoder names it in its errors (`cannot unmarshal array into ...`).
fn go_kind(value: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

impl std::fmt::Display for PatchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PatchError {}
