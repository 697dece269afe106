//! Validation of `metav1.ObjectMeta` as the built-in kinds get it upstream
//! (`k8s.io/apimachinery/pkg/api/validation/objectmeta.go`, wrapped by
//! `pkg/apis/core/validation`'s `ValidateObjectMeta[Update]`, which adds the Kubernetes
//! finalizer name rule), and of `metav1.LabelSelector`
//! (`pkg/apis/meta/v1/validation`). Every function returns the field errors found, in
//! upstream's order, with paths under the given root (`metadata`).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ManagedFieldsEntry, ObjectMeta, OwnerReference,
};
use serde::Serialize;
use serde_json::Value;

use crate::field::{ErrorList, FieldError, Path};
use crate::names::{self, ValidateNameFn};

/// The detail of an update that changes an immutable field.
pub const FIELD_IMMUTABLE_ERROR_MSG: &str = "field is immutable";
/// The detail of a negative count.
pub const IS_NEGATIVE_ERROR_MSG: &str = "must be greater than or equal to 0";
/// The limit on the summed length of all annotation keys and values, in bytes (256 KiB).
pub const TOTAL_ANNOTATION_SIZE_LIMIT_B: usize = 256 * 1024;
/// Finalizer asking the garbage collector to orphan the dependents first.
pub const FINALIZER_ORPHAN_DEPENDENTS: &str = "orphan";
/// Finalizer asking the garbage collector to delete the dependents first.
pub const FINALIZER_DELETE_DEPENDENTS: &str = "foregroundDeletion";
/// Finalizers that need no domain prefix (`kubernetes` is the namespace finalizer).
pub const STANDARD_FINALIZERS: [&str; 3] = [
    "kubernetes",
    FINALIZER_ORPHAN_DEPENDENTS,
    FINALIZER_DELETE_DEPENDENTS,
];
/// The longest field manager name.
pub const FIELD_MANAGER_MAX_LENGTH: usize = 128;
/// The longest subresource name in a managed fields entry.
pub const MAX_SUBRESOURCE_NAME_LENGTH: usize = 256;

/// JSON of a value for an error message (never fails for the API types).
fn json<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// Metadata of an object being created (after name generation): name (or generateName) by
/// `name_fn`, namespace required for namespaced kinds and forbidden otherwise, generation,
/// labels, annotations, owner references, finalizers and managed fields.
pub fn validate_object_meta(
    meta: &ObjectMeta,
    requires_namespace: bool,
    name_fn: ValidateNameFn,
    path: &Path,
) -> ErrorList {
    let mut errs = Vec::new();
    let generate_name = meta.generate_name.as_deref().unwrap_or_default();
    if !generate_name.is_empty() {
        for msg in name_fn(generate_name, true) {
            errs.push(FieldError::invalid(
                &path.child("generateName"),
                generate_name,
                msg,
            ));
        }
    }
    let name = meta.name.as_deref().unwrap_or_default();
    if name.is_empty() {
        errs.push(FieldError::required(
            &path.child("name"),
            "name or generateName is required",
        ));
    } else {
        for msg in name_fn(name, false) {
            errs.push(FieldError::invalid(&path.child("name"), name, msg));
        }
    }
    let namespace = meta.namespace.as_deref().unwrap_or_default();
    if requires_namespace {
        if namespace.is_empty() {
            errs.push(FieldError::required(&path.child("namespace"), ""));
        } else {
            for msg in names::name_is_dns_label(namespace, false) {
                errs.push(FieldError::invalid(
                    &path.child("namespace"),
                    namespace,
                    msg,
                ));
            }
        }
    } else if !namespace.is_empty() {
        errs.push(FieldError::forbidden(
            &path.child("namespace"),
            "not allowed on this type",
        ));
    }
    errs.extend(validate_nonnegative_field(
        meta.generation.unwrap_or_default(),
        &path.child("generation"),
    ));
    errs.extend(validate_common(meta, path));
    let finalizers = meta.finalizers.as_deref().unwrap_or_default();
    errs.extend(validate_finalizers(finalizers, &path.child("finalizers")));
    errs.extend(validate_managed_fields(
        meta.managed_fields.as_deref().unwrap_or_default(),
        &path.child("managedFields"),
    ));
    errs.extend(validate_kube_finalizers(
        finalizers,
        &path.child("finalizers"),
    ));
    errs
}

/// Labels, annotations and owner references, checked on create and on update.
fn validate_common(meta: &ObjectMeta, path: &Path) -> ErrorList {
    let empty = BTreeMap::new();
    let mut errs = validate_labels(
        meta.labels.as_ref().unwrap_or(&empty),
        &path.child("labels"),
    );
    errs.extend(validate_annotations(
        meta.annotations.as_ref().unwrap_or(&empty),
        &path.child("annotations"),
    ));
    errs.extend(validate_owner_references(
        meta.owner_references.as_deref().unwrap_or_default(),
        &path.child("ownerReferences"),
    ));
    errs
}

/// Metadata of an object being updated from `old`: no new finalizers once deleting,
/// resourceVersion present, generation not decremented, name, namespace, uid,
/// creationTimestamp, deletionTimestamp and deletionGracePeriodSeconds unchanged
/// (`field is immutable`), and the create-time rules for labels, annotations, owner
/// references, managed fields and finalizer names.
pub fn validate_object_meta_update(new: &ObjectMeta, old: &ObjectMeta, path: &Path) -> ErrorList {
    let mut errs = Vec::new();
    let new_finalizers = new.finalizers.as_deref().unwrap_or_default();
    if old.deletion_timestamp.is_some() {
        errs.extend(validate_no_new_finalizers(
            new_finalizers,
            old.finalizers.as_deref().unwrap_or_default(),
            &path.child("finalizers"),
        ));
    }
    let resource_version = new.resource_version.as_deref().unwrap_or_default();
    if resource_version.is_empty() {
        errs.push(FieldError::invalid(
            &path.child("resourceVersion"),
            resource_version,
            "must be specified for an update",
        ));
    }
    let generation = new.generation.unwrap_or_default();
    if generation < old.generation.unwrap_or_default() {
        errs.push(FieldError::invalid(
            &path.child("generation"),
            generation,
            "must not be decremented",
        ));
    }
    let immutable = [
        ("name", json(&new.name), json(&old.name)),
        ("namespace", json(&new.namespace), json(&old.namespace)),
        ("uid", json(&new.uid), json(&old.uid)),
        (
            "creationTimestamp",
            json(&new.creation_timestamp),
            json(&old.creation_timestamp),
        ),
        (
            "deletionTimestamp",
            json(&new.deletion_timestamp),
            json(&old.deletion_timestamp),
        ),
        (
            "deletionGracePeriodSeconds",
            json(&new.deletion_grace_period_seconds),
            json(&old.deletion_grace_period_seconds),
        ),
    ];
    for (field, new_value, old_value) in immutable {
        // An absent string and an empty one are the same value upstream.
        let blank = |v: &Value| v.is_null() || v.as_str() == Some("");
        if !(new_value == old_value || (blank(&new_value) && blank(&old_value))) {
            let shown = if new_value.is_null() && matches!(old_value, Value::String(_)) {
                Value::String(String::new())
            } else {
                new_value
            };
            errs.extend(validate_immutable_field(
                shown,
                &old_value,
                &path.child(field),
            ));
        }
    }
    errs.extend(validate_common(new, path));
    errs.extend(validate_managed_fields(
        new.managed_fields.as_deref().unwrap_or_default(),
        &path.child("managedFields"),
    ));
    errs.extend(validate_kube_finalizers(
        new_finalizers,
        &path.child("finalizers"),
    ));
    errs
}

/// `field is immutable` when `new != old` (the error shows the new value).
pub fn validate_immutable_field(new: impl Into<Value>, old: &Value, path: &Path) -> ErrorList {
    let new = new.into();
    if &new == old {
        Vec::new()
    } else {
        vec![FieldError::invalid(path, new, FIELD_IMMUTABLE_ERROR_MSG)]
    }
}

/// `must be greater than or equal to 0`.
pub fn validate_nonnegative_field(value: i64, path: &Path) -> ErrorList {
    if value < 0 {
        vec![FieldError::invalid(path, value, IS_NEGATIVE_ERROR_MSG)]
    } else {
        Vec::new()
    }
}

/// A label key (a qualified name); errors at `path` itself, as upstream.
pub fn validate_label_name(name: &str, path: &Path) -> ErrorList {
    names::is_qualified_name(name)
        .into_iter()
        .map(|msg| FieldError::invalid(path, name, msg))
        .collect()
}

/// Label keys and values; errors at `path` (not `path[key]`), as upstream.
pub fn validate_labels(labels: &BTreeMap<String, String>, path: &Path) -> ErrorList {
    let mut errs = Vec::new();
    for (key, value) in labels {
        errs.extend(validate_label_name(key, path));
        for msg in names::is_valid_label_value(value) {
            errs.push(FieldError::invalid(path, value.as_str(), msg));
        }
    }
    errs
}

/// Annotation keys (qualified names, case-insensitive) and their total size
/// (keys plus values at most [`TOTAL_ANNOTATION_SIZE_LIMIT_B`] bytes).
pub fn validate_annotations(annotations: &BTreeMap<String, String>, path: &Path) -> ErrorList {
    let mut errs = Vec::new();
    for key in annotations.keys() {
        for msg in names::is_qualified_name(&key.to_lowercase()) {
            errs.push(FieldError::invalid(path, key.as_str(), msg));
        }
    }
    let size: usize = annotations.iter().map(|(k, v)| k.len() + v.len()).sum();
    if size > TOTAL_ANNOTATION_SIZE_LIMIT_B {
        errs.push(FieldError::too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT_B));
    }
    errs
}

/// Splits an apiVersion into group and version (`apps/v1` → `("apps", "v1")`,
/// `v1` → `("", "v1")`); more than one `/` gives an empty version, as upstream.
fn group_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        None => ("", api_version),
        Some((_, version)) if version.contains('/') => ("", ""),
        Some(pair) => pair,
    }
}

fn validate_owner_reference(reference: &OwnerReference, path: &Path) -> ErrorList {
    let mut errs = Vec::new();
    let (group, version) = group_version(&reference.api_version);
    if version.is_empty() {
        errs.push(FieldError::invalid(
            &path.child("apiVersion"),
            reference.api_version.as_str(),
            "version must not be empty",
        ));
    }
    let must_not_be_empty = [
        ("kind", &reference.kind),
        ("name", &reference.name),
        ("uid", &reference.uid),
    ];
    for (field, value) in must_not_be_empty {
        if value.is_empty() {
            errs.push(FieldError::invalid(
                &path.child(field),
                "",
                "must not be empty",
            ));
        }
    }
    if group.is_empty() && version == "v1" && reference.kind == "Event" {
        errs.push(FieldError::invalid(
            path,
            json(reference),
            "/v1, Kind=Event is disallowed from being an owner",
        ));
    }
    errs
}

/// Owner references: apiVersion, kind, name and uid set, no core/v1 Event owner, at most one
/// controller.
pub fn validate_owner_references(references: &[OwnerReference], path: &Path) -> ErrorList {
    let mut errs = Vec::new();
    let mut first_controller: Option<String> = None;
    for reference in references {
        errs.extend(validate_owner_reference(reference, path));
        if reference.controller == Some(true) {
            let current = format!("{}/{}", reference.kind, reference.name);
            match &first_controller {
                Some(first) => errs.push(FieldError::invalid(
                    path,
                    json(&references),
                    format!(
                        "Only one reference can have Controller set to true. Found \"true\" in references for {first} and {current}"
                    ),
                )),
                None => first_controller = Some(current),
            }
        }
    }
    errs
}

/// Finalizer names (qualified names) and the `orphan` / `foregroundDeletion` conflict.
pub fn validate_finalizers(finalizers: &[String], path: &Path) -> ErrorList {
    let mut errs = Vec::new();
    for finalizer in finalizers {
        errs.extend(validate_label_name(finalizer, path));
    }
    let has = |name: &str| finalizers.iter().any(|f| f == name);
    if has(FINALIZER_ORPHAN_DEPENDENTS) && has(FINALIZER_DELETE_DEPENDENTS) {
        errs.push(FieldError::invalid(
            path,
            json(&finalizers),
            format!(
                "finalizer {FINALIZER_ORPHAN_DEPENDENTS} and {FINALIZER_DELETE_DEPENDENTS} cannot be both set"
            ),
        ));
    }
    errs
}

/// The built-in kinds' extra finalizer rule (core validation's `validateKubeFinalizerName`):
/// a valid name without a `/` prefix must be one of [`STANDARD_FINALIZERS`]; errors at
/// `path[i]`.
fn validate_kube_finalizers(finalizers: &[String], path: &Path) -> ErrorList {
    let mut errs = Vec::new();
    for (i, finalizer) in finalizers.iter().enumerate() {
        let at = path.index(i);
        let invalid = validate_label_name(finalizer, &at);
        if invalid.is_empty()
            && !finalizer.contains('/')
            && !STANDARD_FINALIZERS.contains(&finalizer.as_str())
        {
            errs.push(FieldError::invalid(
                &at,
                finalizer.as_str(),
                "name is neither a standard finalizer name nor is it fully qualified",
            ));
        }
        errs.extend(invalid);
    }
    errs
}

/// Once deletion started, finalizers may only be removed.
pub fn validate_no_new_finalizers(new: &[String], old: &[String], path: &Path) -> ErrorList {
    let mut extra: Vec<&str> = new
        .iter()
        .filter(|f| !old.contains(f))
        .map(String::as_str)
        .collect();
    extra.sort_unstable();
    extra.dedup();
    if extra.is_empty() {
        return Vec::new();
    }
    let quoted: Vec<String> = extra.iter().map(|f| format!("{f:?}")).collect();
    vec![FieldError::forbidden(
        path,
        format!(
            "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
            quoted.join(", ")
        ),
    )]
}

/// A field manager name: at most 128 printable characters.
pub fn validate_field_manager(manager: &str, path: &Path) -> ErrorList {
    let mut errs = Vec::new();
    if manager.len() > FIELD_MANAGER_MAX_LENGTH {
        errs.push(FieldError::too_long(path, FIELD_MANAGER_MAX_LENGTH));
    }
    for (position, c) in manager.char_indices() {
        if c.is_control() {
            errs.push(FieldError::invalid(
                path,
                manager,
                format!(
                    "invalid character U+{:04X} (at position {position})",
                    u32::from(c)
                ),
            ));
        }
    }
    errs
}

/// Managed fields entries: operation `Apply` or `Update`, fieldsType `FieldsV1`, manager
/// name, subresource length.
pub fn validate_managed_fields(entries: &[ManagedFieldsEntry], path: &Path) -> ErrorList {
    let mut errs = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        let at = path.index(i);
        let operation = entry.operation.as_deref().unwrap_or_default();
        if !matches!(operation, "Apply" | "Update") {
            errs.push(FieldError::invalid(
                &at.child("operation"),
                operation,
                "must be `Apply` or `Update`",
            ));
        }
        let fields_type = entry.fields_type.as_deref().unwrap_or_default();
        if !fields_type.is_empty() && fields_type != "FieldsV1" {
            errs.push(FieldError::invalid(
                &at.child("fieldsType"),
                fields_type,
                "must be `FieldsV1`",
            ));
        }
        errs.extend(validate_field_manager(
            entry.manager.as_deref().unwrap_or_default(),
            &at.child("manager"),
        ));
        if entry.subresource.as_deref().unwrap_or_default().len() > MAX_SUBRESOURCE_NAME_LENGTH {
            errs.push(FieldError::too_long(
                &at.child("subresource"),
                MAX_SUBRESOURCE_NAME_LENGTH,
            ));
        }
    }
    errs
}

/// A `metav1.LabelSelector`: matchLabels as labels, each matchExpression's operator, values
/// and key.
pub fn validate_label_selector(selector: &LabelSelector, path: &Path) -> ErrorList {
    let empty = BTreeMap::new();
    let mut errs = validate_labels(
        selector.match_labels.as_ref().unwrap_or(&empty),
        &path.child("matchLabels"),
    );
    let expressions = selector.match_expressions.as_deref().unwrap_or_default();
    for (i, requirement) in expressions.iter().enumerate() {
        errs.extend(validate_label_selector_requirement(
            requirement,
            &path.child("matchExpressions").index(i),
        ));
    }
    errs
}

/// One matchExpression: In/NotIn need values, Exists/DoesNotExist forbid them; the key is
/// a label name and each value a label value (upstream `ValidateLabelSelectorRequirement`
/// without `AllowInvalidLabelValueInSelector`).
pub fn validate_label_selector_requirement(
    requirement: &LabelSelectorRequirement,
    path: &Path,
) -> ErrorList {
    let mut errs = Vec::new();
    let has_values = requirement.values.as_ref().is_some_and(|v| !v.is_empty());
    match requirement.operator.as_str() {
        "In" | "NotIn" if !has_values => errs.push(FieldError::required(
            &path.child("values"),
            "must be specified when `operator` is 'In' or 'NotIn'",
        )),
        "Exists" | "DoesNotExist" if has_values => errs.push(FieldError::forbidden(
            &path.child("values"),
            "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        )),
        "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
        other => errs.push(FieldError::invalid(
            &path.child("operator"),
            other,
            "not a valid selector operator",
        )),
    }
    errs.extend(validate_label_name(&requirement.key, &path.child("key")));
    let values_path = path.child("values");
    for (i, value) in requirement.values.iter().flatten().enumerate() {
        for msg in names::is_valid_label_value(value) {
            errs.push(FieldError::invalid(
                &values_path.index(i),
                value.as_str(),
                msg,
            ));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::aggregate;
    use crate::names::name_is_dns_subdomain;

    fn meta(value: Value) -> ObjectMeta {
        serde_json::from_value(value).expect("test metadata")
    }

    fn messages(errs: &ErrorList) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    fn root() -> Path {
        Path::new("metadata")
    }

    #[test]
    fn valid_metadata_passes() {
        let m = meta(serde_json::json!({
            "name": "web", "namespace": "default",
            "labels": {"app.kubernetes.io/name": "web", "tier": ""},
            "annotations": {"Example.com/Note": "x"},
            "finalizers": ["kubernetes", "example.com/cleanup", "foregroundDeletion"],
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1",
                                 "uid": "u1", "controller": true}],
            "managedFields": [{"manager": "kubectl", "operation": "Update", "fieldsType": "FieldsV1"}],
        }));
        assert_eq!(
            validate_object_meta(&m, true, name_is_dns_subdomain, &root()),
            vec![]
        );
    }

    #[test]
    fn name_and_namespace_rules() {
        let errs = validate_object_meta(
            &meta(serde_json::json!({})),
            true,
            name_is_dns_subdomain,
            &root(),
        );
        assert_eq!(
            messages(&errs),
            vec![
                "metadata.name: Required value: name or generateName is required",
                "metadata.namespace: Required value",
            ]
        );
        let errs = validate_object_meta(
            &meta(serde_json::json!({"name": "Web", "generateName": "Web-", "namespace": "x"})),
            false,
            name_is_dns_subdomain,
            &root(),
        );
        assert_eq!(errs.len(), 3);
        assert_eq!(errs[0].field.as_str(), "metadata.generateName");
        assert!(
            errs[1].to_string().starts_with(
                r#"metadata.name: Invalid value: "Web": a lowercase RFC 1123 subdomain"#
            )
        );
        assert_eq!(
            errs[2].to_string(),
            "metadata.namespace: Forbidden: not allowed on this type"
        );
        let errs = validate_object_meta(
            &meta(serde_json::json!({"name": "a", "namespace": "a.b", "generation": -1})),
            true,
            name_is_dns_subdomain,
            &root(),
        );
        assert_eq!(
            messages(&errs),
            vec![
                r#"metadata.namespace: Invalid value: "a.b": must not contain dots"#,
                "metadata.generation: Invalid value: -1: must be greater than or equal to 0",
            ]
        );
    }

    #[test]
    fn labels_annotations_finalizers() {
        let m = meta(serde_json::json!({
            "name": "a",
            "labels": {"a/b/c": "ok", "k": "-bad"},
            "annotations": {"x/": "v"},
            "finalizers": ["custom", "orphan", "foregroundDeletion", "bad/"],
        }));
        let errs = validate_object_meta(&m, false, name_is_dns_subdomain, &root());
        let text = messages(&errs);
        assert!(
            text[0]
                .starts_with(r#"metadata.labels: Invalid value: "a/b/c": a valid label key must"#)
        );
        assert!(
            text[1].starts_with(r#"metadata.labels: Invalid value: "-bad": a valid label must be"#)
        );
        assert!(text[2].starts_with(
            r#"metadata.annotations: Invalid value: "x/": name part must be non-empty"#
        ));
        assert!(text.contains(&r#"metadata.finalizers[0]: Invalid value: "custom": name is neither a standard finalizer name nor is it fully qualified"#.to_owned()));
        assert!(text.contains(&r#"metadata.finalizers: Invalid value: ["custom","orphan","foregroundDeletion","bad/"]: finalizer orphan and foregroundDeletion cannot be both set"#.to_owned()));
        // The invalid finalizer is reported twice, at the list and at its index, as upstream.
        assert!(
            text.iter()
                .any(|t| t.starts_with(r#"metadata.finalizers: Invalid value: "bad/""#))
        );
        assert!(
            text.iter()
                .any(|t| t.starts_with(r#"metadata.finalizers[3]: Invalid value: "bad/""#))
        );
    }

    #[test]
    fn annotation_size_limit() {
        let mut annotations = BTreeMap::new();
        annotations.insert(
            "a".to_owned(),
            "x".repeat(TOTAL_ANNOTATION_SIZE_LIMIT_B - 1),
        );
        assert!(validate_annotations(&annotations, &root().child("annotations")).is_empty());
        annotations.insert("b".to_owned(), String::new());
        assert_eq!(
            aggregate(&validate_annotations(
                &annotations,
                &root().child("annotations")
            )),
            "metadata.annotations: Too long: may not be more than 262144 bytes"
        );
    }

    #[test]
    fn owner_references() {
        let m = meta(serde_json::json!({
            "name": "a",
            "ownerReferences": [
                {"apiVersion": "", "kind": "", "name": "", "uid": ""},
                {"apiVersion": "v1", "kind": "Event", "name": "e", "uid": "1"},
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r1", "uid": "2", "controller": true},
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r2", "uid": "3", "controller": true},
            ],
        }));
        let errs = validate_object_meta(&m, false, name_is_dns_subdomain, &root());
        let text = messages(&errs);
        assert_eq!(
            text[..4],
            [
                r#"metadata.ownerReferences.apiVersion: Invalid value: "": version must not be empty"#,
                r#"metadata.ownerReferences.kind: Invalid value: "": must not be empty"#,
                r#"metadata.ownerReferences.name: Invalid value: "": must not be empty"#,
                r#"metadata.ownerReferences.uid: Invalid value: "": must not be empty"#,
            ]
        );
        assert!(text[4].ends_with("/v1, Kind=Event is disallowed from being an owner"));
        assert!(text[5].ends_with(
            r#"Only one reference can have Controller set to true. Found "true" in references for ReplicaSet/r1 and ReplicaSet/r2"#
        ));
        assert_eq!(text.len(), 6);
    }

    #[test]
    fn update_rules() {
        let old = meta(serde_json::json!({
            "name": "a", "namespace": "ns", "uid": "u1", "resourceVersion": "5", "generation": 3,
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "deletionTimestamp": "2026-01-02T00:00:00Z", "deletionGracePeriodSeconds": 30,
            "finalizers": ["example.com/a"],
        }));
        let mut new = old.clone();
        assert_eq!(validate_object_meta_update(&new, &old, &root()), vec![]);
        new.name = Some("b".into());
        new.namespace = None;
        new.uid = Some("u2".into());
        new.resource_version = None;
        new.generation = Some(2);
        new.creation_timestamp = None;
        new.finalizers = Some(vec!["example.com/a".into(), "example.com/b".into()]);
        let text = messages(&validate_object_meta_update(&new, &old, &root()));
        assert_eq!(
            text,
            vec![
                r#"metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{"example.com/b"}"#,
                r#"metadata.resourceVersion: Invalid value: "": must be specified for an update"#,
                "metadata.generation: Invalid value: 2: must not be decremented",
                r#"metadata.name: Invalid value: "b": field is immutable"#,
                r#"metadata.namespace: Invalid value: "": field is immutable"#,
                r#"metadata.uid: Invalid value: "u2": field is immutable"#,
                r#"metadata.creationTimestamp: Invalid value: "": field is immutable"#,
            ]
        );
    }

    #[test]
    fn managed_fields_rules() {
        let m = meta(serde_json::json!({
            "name": "a",
            "managedFields": [{"manager": "m\u{7}", "operation": "Patch", "fieldsType": "FieldsV2"}],
        }));
        let text = messages(&validate_object_meta(
            &m,
            false,
            name_is_dns_subdomain,
            &root(),
        ));
        assert_eq!(
            text,
            vec![
                r#"metadata.managedFields[0].operation: Invalid value: "Patch": must be `Apply` or `Update`"#,
                r#"metadata.managedFields[0].fieldsType: Invalid value: "FieldsV2": must be `FieldsV1`"#,
                "metadata.managedFields[0].manager: Invalid value: \"m\\u{7}\": invalid character U+0007 (at position 1)",
            ]
        );
    }

    #[test]
    fn label_selector_rules() {
        let selector: LabelSelector = serde_json::from_value(serde_json::json!({
            "matchLabels": {"app": "-x"},
            "matchExpressions": [
                {"key": "a", "operator": "In", "values": []},
                {"key": "b", "operator": "Exists", "values": ["x"]},
                {"key": "c/", "operator": "Within"},
            ],
        }))
        .expect("selector");
        let text = messages(&validate_label_selector(
            &selector,
            &Path::new("spec").child("selector"),
        ));
        assert!(text[0].starts_with(r#"spec.selector.matchLabels: Invalid value: "-x""#));
        assert_eq!(
            text[1..4],
            [
                "spec.selector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
                "spec.selector.matchExpressions[1].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                r#"spec.selector.matchExpressions[2].operator: Invalid value: "Within": not a valid selector operator"#,
            ]
        );
        assert!(text[4].starts_with(r#"spec.selector.matchExpressions[2].key: Invalid value: "c/": name part must be non-empty"#));
    }
}
