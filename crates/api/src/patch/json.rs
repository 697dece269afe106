//! JSON Patch (RFC 6902) and JSON Merge Patch (RFC 7386), as upstream applies them with
//! `evanphx/json-patch`.

use json_patch::{PatchErrorKind, PatchOperation};
use serde_json::Value;

use super::PatchError;
use super::messages::{BAD_MERGE_PATCH, NOT_AN_OBJECT};

/// The most operations upstream accepts in one JSON Patch (more is 413 Request Entity Too
/// Large: `The allowed maximum operations in a JSON patch is 10000, got N`).
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// The operations of a patch document: a JSON array of objects, or a 400 error with the
/// message of upstream's decoder.
fn operations(patch: &Value) -> Result<&[Value], PatchError> {
    let Value::Array(operations) = patch else {
        return Err(PatchError(format!(
            "{NOT_AN_OBJECT} {} into Go value of type jsonpatch.Patch",
            super::go_kind(patch)
        )));
    };
    if let Some(bad) = operations.iter().find(|o| !o.is_object()) {
        return Err(PatchError(format!(
            "{NOT_AN_OBJECT} {} into Go value of type jsonpatch.Operation",
            super::go_kind(bad)
        )));
    }
    Ok(operations)
}

/// The number of operations of an RFC 6902 document, so the server can refuse more than
/// [`MAX_JSON_PATCH_OPERATIONS`]; a document that is not an array of objects is a 400
/// error.
pub fn json_patch_operations(patch: &Value) -> Result<usize, PatchError> {
    operations(patch).map(<[Value]>::len)
}

/// Applies an RFC 6902 patch document, one operation after the other, as upstream
/// (`evanphx/json-patch`): `replace` of a missing object key adds it. A document that is not
/// an array of objects is a 400 error; an operation that fails (unknown `op`, missing path,
/// failed `test`) a 422 one with upstream's message. The target is left untouched.
pub fn json_patch(target: &Value, patch: &Value) -> Result<Value, PatchError> {
    let mut document = target.clone();
    for raw in operations(patch)? {
        let kind = raw.get("op").and_then(Value::as_str).unwrap_or_default();
        let operation: PatchOperation = match serde_json::from_value(raw.clone()) {
            Ok(operation) => operation,
            Err(_) if !KNOWN_OPERATIONS.contains(&kind) => {
                return Err(PatchError(format!("Unexpected kind: {kind}")));
            }
            Err(e) => {
                return Err(PatchError(format!(
                    "{kind} operation failed to decode: {e}"
                )));
            }
        };
        let operation = match operation {
            PatchOperation::Replace(replace) if replaces_missing_key(&document, &replace) => {
                PatchOperation::Add(json_patch::AddOperation {
                    path: replace.path,
                    value: replace.value,
                })
            }
            other => other,
        };
        if let Err(e) = json_patch::patch(&mut document, std::slice::from_ref(&operation)) {
            return Err(PatchError(failure_message(&document, &operation, &e.kind)));
        }
    }
    Ok(document)
}

const KNOWN_OPERATIONS: [&str; 6] = ["add", "remove", "replace", "move", "copy", "test"];

/// A `replace` whose parent is an object that lacks the key (upstream adds it).
fn replaces_missing_key(document: &Value, replace: &json_patch::ReplaceOperation) -> bool {
    let (Some(parent), Some(key)) = (replace.path.parent(), replace.path.last()) else {
        return false;
    };
    match document.pointer(parent.as_str()) {
        Some(Value::Object(map)) => !map.contains_key(key.decoded().as_ref()),
        _ => false,
    }
}

/// Upstream's message (`evanphx/json-patch`) for an operation that failed on `document`.
fn failure_message(document: &Value, operation: &PatchOperation, kind: &PatchErrorKind) -> String {
    let path = operation.path().as_str();
    let parent = operation
        .path()
        .parent()
        .and_then(|p| document.pointer(p.as_str()));
    let key = operation
        .path()
        .last()
        .map(|t| t.decoded().into_owned())
        .unwrap_or_default();
    let missing_from = |verb: &str, from: &str| {
        format!("{verb} operation does not apply: doc is missing from path: {from}: missing value")
    };
    let from_parent_exists = |from: &json_patch::jsonptr::Pointer| {
        from.parent()
            .is_some_and(|p| document.pointer(p.as_str()).is_some())
    };
    match (operation, parent) {
        (PatchOperation::Test(_), _) => format!("testing value {path} failed: test failed"),
        (PatchOperation::Move(m), _) if matches!(kind, PatchErrorKind::InvalidFromPointer) => {
            if from_parent_exists(&m.from) {
                let key = m
                    .from
                    .last()
                    .map(|t| t.decoded().into_owned())
                    .unwrap_or_default();
                format!(
                    "error in move for path: '{key}': Unable to remove nonexistent key: {key}: missing value"
                )
            } else {
                missing_from("move", m.from.as_str())
            }
        }
        (PatchOperation::Copy(c), _) if matches!(kind, PatchErrorKind::InvalidFromPointer) => {
            missing_from("copy", c.from.as_str())
        }
        (PatchOperation::Add(_), None) => {
            format!("add operation does not apply: doc is missing path: \"{path}\": missing value")
        }
        (PatchOperation::Remove(_), None) => format!(
            "remove operation does not apply: doc is missing path: \"{path}\": missing value"
        ),
        (PatchOperation::Replace(_), None) => {
            format!("replace operation does not apply: doc is missing path: {path}: missing value")
        }
        (PatchOperation::Add(_) | PatchOperation::Remove(_), Some(Value::Array(_))) => {
            let verb = if matches!(operation, PatchOperation::Add(_)) {
                "add"
            } else {
                "remove"
            };
            format!(
                "error in {verb} for path: '{path}': Unable to access invalid index: {key}: invalid index referenced"
            )
        }
        (PatchOperation::Replace(_), Some(Value::Array(_))) => {
            format!("replace operation does not apply: doc is missing key: {path}: missing value")
        }
        (PatchOperation::Remove(_), Some(_)) => format!(
            "error in remove for path: '{path}': Unable to remove nonexistent key: {key}: missing value"
        ),
        _ => format!("{kind} at path '{path}'"),
    }
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
        let cases = [
            (
                json!({"op": "test", "path": "/spec/replicas", "value": 2}),
                "testing value /spec/replicas failed: test failed",
            ),
            (
                json!({"op": "remove", "path": "/metadata/annotations/x"}),
                "remove operation does not apply: doc is missing path: \"/metadata/annotations/x\": missing value",
            ),
            (
                json!({"op": "remove", "path": "/metadata/labels/x"}),
                "error in remove for path: '/metadata/labels/x': Unable to remove nonexistent key: x: missing value",
            ),
            (
                json!({"op": "remove", "path": "/spec/template/spec/containers/5"}),
                "error in remove for path: '/spec/template/spec/containers/5': Unable to access invalid index: 5: invalid index referenced",
            ),
            (
                json!({"op": "add", "path": "/spec/x/y", "value": 1}),
                "add operation does not apply: doc is missing path: \"/spec/x/y\": missing value",
            ),
            (
                json!({"op": "replace", "path": "/spec/template/spec/containers/7", "value": {}}),
                "replace operation does not apply: doc is missing key: /spec/template/spec/containers/7: missing value",
            ),
            (
                json!({"op": "replace", "path": "/status/x", "value": 1}),
                "replace operation does not apply: doc is missing path: /status/x: missing value",
            ),
            (
                json!({"op": "move", "from": "/nope", "path": "/x"}),
                "error in move for path: 'nope': Unable to remove nonexistent key: nope: missing value",
            ),
            (
                json!({"op": "move", "from": "/a/b", "path": "/x"}),
                "move operation does not apply: doc is missing from path: /a/b: missing value",
            ),
            (json!({"op": "frob", "path": "/x"}), "Unexpected kind: frob"),
        ];
        for (operation, message) in cases {
            // A first operation that succeeds: the message describes the document it left.
            let patch =
                json!([{"op": "add", "path": "/metadata/labels/y", "value": "1"}, operation]);
            let err = json_patch(&deployment(), &patch).unwrap_err();
            assert_eq!(err.0, message);
            assert_eq!(err.status_code(), 422);
        }
        let malformed = [
            (
                json!({"op": "add"}),
                "json: cannot unmarshal object into Go value of type jsonpatch.Patch",
            ),
            (
                json!([1]),
                "json: cannot unmarshal number into Go value of type jsonpatch.Operation",
            ),
        ];
        for (patch, message) in malformed {
            let err = json_patch(&deployment(), &patch).unwrap_err();
            assert_eq!(err.0, message);
            assert_eq!(err.status_code(), 400, "{err}");
            assert_eq!(json_patch_operations(&patch), Err(err));
        }
        // An operation without a path fails when it is reached, as upstream.
        let err = json_patch(&deployment(), &json!([{"op": "add"}])).unwrap_err();
        assert_eq!(err.status_code(), 422, "{err}");
    }

    #[test]
    fn replace_of_a_missing_key_adds_it_as_upstream() {
        let patch = json!([{"op": "replace", "path": "/spec/paused", "value": true}]);
        let patched = json_patch(&deployment(), &patch).expect("applies");
        assert_eq!(patched["spec"]["paused"], true);
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
