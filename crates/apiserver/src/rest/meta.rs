//! Metadata rules common to every kind (upstream `k8s.io/apiserver/pkg/registry/rest`
//! `BeforeCreate` / `BeforeUpdate` and `ValidateObjectMeta`): the namespace from the
//! path, generateName, uid, creationTimestamp, generation, and what an update may not
//! change.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;
use skiff_api::field::{ErrorList, Path};

use super::object::{self, meta_get, meta_str, set_meta};
use crate::error::ApiError;
use crate::registry::Kind;

/// Upstream's `maxGeneratedNameLength`: 63 less the 5 random characters.
const MAX_GENERATED_NAME_PREFIX: usize = 58;

/// The characters of generated name suffixes (upstream `utilrand.String`: no vowels, no
/// look-alikes).
const SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// Sets `apiVersion` and `kind` to the kind's, and the namespace from the request path.
/// Errors: 400 `the namespace of the provided object does not match the namespace sent on
/// the request` (upstream `rest.EnsureObjectNamespaceMatchesRequestNamespace`).
pub fn set_identity(
    kind: &dyn Kind,
    object: &mut Value,
    namespace: Option<&str>,
) -> Result<(), ApiError> {
    let info = kind.info();
    let map = object::as_map(object);
    map.insert("apiVersion".into(), info.api_version().into());
    map.insert("kind".into(), info.kind.as_str().into());
    let found = meta_str(object, "namespace").unwrap_or_default().to_owned();
    match (info.namespaced, namespace) {
        (true, Some(ns)) => {
            if found.is_empty() {
                set_meta(object, "namespace", Some(ns.into()));
            } else if found != ns {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
        }
        (true, None) => {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        (false, _) => {
            if !found.is_empty() {
                set_meta(object, "namespace", None);
            }
        }
    }
    Ok(())
}

/// Upstream's BeforeCreate for metadata: clears what clients may not set (managedFields
/// are the field manager's: see [`super::managed`]), fills uid,
/// creationTimestamp and generation (1 for kinds with a spec), and a name from
/// generateName. Errors: 500 when `resourceVersion` is set, as upstream's storage.
pub fn prepare_create(kind: &dyn Kind, object: &mut Value) -> Result<(), ApiError> {
    if meta_str(object, "resourceVersion").is_some_and(|rv| !rv.is_empty()) {
        return Err(ApiError::internal(
            "resourceVersion should not be set on objects to be created",
        ));
    }
    for field in [
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
        "resourceVersion",
    ] {
        set_meta(object, field, None);
    }
    set_meta(object, "uid", Some(object::new_uid().into()));
    set_meta(object, "creationTimestamp", Some(object::now().into()));
    let generation = kind.bumps_generation().then(|| Value::from(1));
    set_meta(object, "generation", generation);
    let generated = meta_str(object, "generateName")
        .filter(|prefix| !prefix.is_empty())
        .filter(|_| meta_str(object, "name").unwrap_or_default().is_empty())
        .map(generate_name);
    if let Some(name) = generated {
        set_meta(object, "name", Some(name.into()));
    }
    Ok(())
}

/// A name from generateName's prefix (cut to 58 characters) and 5 random characters.
pub fn generate_name(prefix: &str) -> String {
    let mut cut = prefix.len().min(MAX_GENERATED_NAME_PREFIX);
    while !prefix.is_char_boundary(cut) {
        cut -= 1;
    }
    let suffix: String = (0..5)
        .map(|_| {
            let i = rand::random_range(0..SUFFIX_ALPHABET.len());
            char::from(SUFFIX_ALPHABET[i])
        })
        .collect();
    format!("{}{suffix}", &prefix[..cut])
}

/// Upstream's BeforeUpdate for metadata: uid (when not sent), creationTimestamp,
/// deletionTimestamp, deletionGracePeriodSeconds and generation come from `old`; the
/// generation is bumped when the kind tracks it and anything outside metadata and status
/// changed.
pub fn prepare_update(kind: &dyn Kind, new: &mut Value, old: &Value) {
    if meta_str(new, "uid").unwrap_or_default().is_empty() {
        set_meta(new, "uid", meta_get(old, "uid").cloned());
    }
    for field in [
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
    ] {
        set_meta(new, field, meta_get(old, field).cloned());
    }
    set_meta(new, "selfLink", None);
    if kind.bumps_generation() && object::spec_part(new) != object::spec_part(old) {
        let next = object::generation(old) + 1;
        set_meta(new, "generation", Some(next.into()));
    }
}

/// The object's `metadata` as ObjectMeta. Errors: 400 when it is not one.
fn object_meta(object: &Value) -> Result<ObjectMeta, ApiError> {
    let metadata = object.get("metadata").cloned().unwrap_or(Value::Null);
    if metadata.is_null() {
        return Ok(ObjectMeta::default());
    }
    serde_json::from_value(metadata)
        .map_err(|e| ApiError::bad_request(format!("unable to decode metadata: {e}")))
}

/// Upstream's ValidateObjectMeta: name (or generateName) by the kind's name rule,
/// namespace, labels, annotations, owner references, finalizers.
pub fn validate(kind: &dyn Kind, object: &Value) -> Result<ErrorList, ApiError> {
    Ok(skiff_api::meta::validate_object_meta(
        &object_meta(object)?,
        kind.info().namespaced,
        kind.name_rule(),
        &Path::new("metadata"),
    ))
}

/// Upstream's ValidateObjectMetaUpdate: immutable identity and timestamps, no new
/// finalizers once deleting, and the create-time rules for labels and annotations.
pub fn validate_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    Ok(skiff_api::meta::validate_object_meta_update(
        &object_meta(new)?,
        &object_meta(old)?,
        &Path::new("metadata"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn generated_names_have_a_five_character_suffix() {
        let name = generate_name("web-");
        assert_eq!(name.len(), 9);
        assert!(name.starts_with("web-"));
        assert!(name[4..].bytes().all(|b| SUFFIX_ALPHABET.contains(&b)));
        assert_eq!(generate_name(&"x".repeat(80)).len(), 63);
    }

    #[test]
    fn metadata_is_validated_with_the_kind_name_rule() {
        let kind = crate::registry::Adapter::new(ConfigMaps);
        let ok = json!({"metadata": {"name": "a.b-c", "namespace": "default"}});
        assert!(validate(&kind, &ok).unwrap().is_empty());
        let bad = json!({"metadata": {"name": "Bad_Name", "namespace": "default"}});
        let errors = validate(&kind, &bad).unwrap();
        assert!(errors[0].to_string().starts_with(
            r#"metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain"#
        ));
        let nameless = json!({"metadata": {"namespace": "default"}});
        assert_eq!(
            validate(&kind, &nameless).unwrap()[0].to_string(),
            "metadata.name: Required value: name or generateName is required"
        );
        let mut renamed = ok.clone();
        renamed["metadata"]["name"] = "b".into();
        renamed["metadata"]["resourceVersion"] = "2".into();
        let errors = validate_update(&renamed, &ok).unwrap();
        assert_eq!(
            errors[0].to_string(),
            r#"metadata.name: Invalid value: "b": field is immutable"#
        );
    }

    struct ConfigMaps;
    impl crate::registry::Strategy for ConfigMaps {
        type Object = k8s_openapi::api::core::v1::ConfigMap;
    }
}
