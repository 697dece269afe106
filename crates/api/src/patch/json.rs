//! JSON Patch (RFC 6902) and JSON Merge Patch (RFC 7386), as upstream applies them with
//! `evanphx/json-patch`.

use serde_json::Value;

use super::PatchError;
use super::messages::{BAD_JSON_PATCH, BAD_MERGE_PATCH};

/// The most operations upstream accepts in one JSON Patch (more is 413 Request Entity Too
/// Large: `The allowed maximum operations in a JSON patch is 10000, got N`).
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

fn decode(patch: &Value) -> Result<json_patch::Patch, PatchError> {
    serde_json::from_value(patch.clone()).map_err(|e| PatchError(format!("{BAD_JSON_PATCH}{e}")))
}

/// The number of operations of an RFC 6902 document, so the server can refuse more than
/// [`MAX_JSON_PATCH_OPERATIONS`]; a malformed document is a 400 error.
pub fn json_patch_operations(patch: &Value) -> Result<usize, PatchError> {
    decode(patch).map(|p| p.0.len())
}

/// Applies an RFC 6902 patch document. A malformed document is a 400 error, a failed
/// operation (missing path, failed `test`) a 422 one; the target is left untouched either
/// way.
pub fn json_patch(target: &Value, patch: &Value) -> Result<Value, PatchError> {
    let operations = decode(patch)?;
    let mut document = target.clone();
    json_patch::patch(&mut document, &operations).map_err(|e| PatchError(e.to_string()))?;
    Ok(document)
}

/// Applies an RFC 7386 merge patch: objects merge recursively, `null` deletes, anything else
/// replaces. A patch that is not an object is refused with upstream's `Invalid JSON Patch`
/// (400), as the API server does.
pub fn merge_patch(target: &Value, patch: &Value) -> Result<Value, PatchError> {
    if !patch.is_object() {
        return Err(PatchError(BAD_MERGE_PATCH.to_owned()));
    }
    let mut document = target.clone();
    json_patch::merge(&mut document, patch);
    Ok(document)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web", "tier": "fe"}},
            "spec": {"replicas": 1, "template": {"spec": {"containers": [
                {"name": "web", "image": "nginx:1.25"},
                {"name": "log", "image": "busybox"}
            ]}}}
        })
    }

    #[test]
    fn json_patch_applies_every_operation() {
        let patch = json!([
            {"op": "test", "path": "/spec/replicas", "value": 1},
            {"op": "replace", "path": "/spec/replicas", "value": 3},
            {"op": "add", "path": "/metadata/labels/env", "value": "prod"},
            {"op": "remove", "path": "/metadata/labels/tier"},
            {"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "nginx:1.27"},
            {"op": "copy", "from": "/metadata/labels/app", "path": "/metadata/labels/copy"},
            {"op": "move", "from": "/metadata/labels/copy", "path": "/metadata/labels/moved"},
            {"op": "add", "path": "/spec/template/spec/containers/-", "value": {"name": "x", "image": "y"}}
        ]);
        assert_eq!(json_patch_operations(&patch), Ok(8));
        let patched = json_patch(&deployment(), &patch).expect("applies");
        assert_eq!(patched["spec"]["replicas"], 3);
        assert_eq!(
            patched["metadata"]["labels"],
            json!({"app": "web", "env": "prod", "moved": "web"})
        );
        assert_eq!(
            patched["spec"]["template"]["spec"]["containers"][0]["image"],
            "nginx:1.27"
        );
        assert_eq!(
            patched["spec"]["template"]["spec"]["containers"][2]["name"],
            "x"
        );
    }

    #[test]
    fn json_patch_errors() {
        let failed_test = json!([{"op": "test", "path": "/spec/replicas", "value": 2}]);
        let err = json_patch(&deployment(), &failed_test).unwrap_err();
        assert_eq!(err.status_code(), 422);
        assert!(err.0.contains("/spec/replicas"), "{err}");
        let missing = json!([{"op": "remove", "path": "/metadata/annotations/x"}]);
        assert_eq!(
            json_patch(&deployment(), &missing)
                .unwrap_err()
                .status_code(),
            422
        );
        for malformed in [
            json!({"op": "add"}),
            json!([{"op": "frobnicate", "path": "/a"}]),
            json!([{"path": "/a"}]),
        ] {
            let err = json_patch(&deployment(), &malformed).unwrap_err();
            assert_eq!(err.status_code(), 400, "{err}");
            assert!(err.0.starts_with("invalid JSON Patch document: "), "{err}");
        }
    }

    #[test]
    fn merge_patch_semantics() {
        let patch = json!({
            "metadata": {"labels": {"tier": null, "env": "prod"}},
            "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "only"}]}}}
        });
        let patched = merge_patch(&deployment(), &patch).expect("applies");
        assert_eq!(
            patched["metadata"]["labels"],
            json!({"app": "web", "env": "prod"})
        );
        assert_eq!(patched["spec"]["replicas"], 2);
        // Lists are replaced as a whole.
        assert_eq!(
            patched["spec"]["template"]["spec"]["containers"],
            json!([{"name": "only"}])
        );
        assert_eq!(
            merge_patch(&deployment(), &json!({})).expect("no-op"),
            deployment()
        );
        let err = merge_patch(&deployment(), &json!([1])).unwrap_err();
        assert_eq!(err, PatchError("Invalid JSON Patch".into()));
        assert_eq!(err.status_code(), 400);
    }
}
