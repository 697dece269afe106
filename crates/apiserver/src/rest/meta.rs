//! Metadata rules common to every kind (upstream `k8s.io/apiserver/pkg/registry/rest`
//! `BeforeCreate` / `BeforeUpdate` and `ValidateObjectMeta`): the namespace from the
//! path, generateName, uid, creationTimestamp, generation, and what an update may not
//! change.

use serde_json::Value;
use skiff_api::field::{ErrorList, FieldError, Path};

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
    map.insert("kind".into(), info.kind.into());
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

/// Upstream's BeforeCreate for metadata: clears what clients may not set, fills uid,
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
        "managedFields",
        "resourceVersion",
    ] {
        set_meta(object, field, None);
    }
    set_meta(object, "uid", Some(object::new_uid().into()));
    set_meta(object, "creationTimestamp", Some(object::now().into()));
    let generation = kind.bumps_generation().then(|| Value::from(1));
    set_meta(object, "generation", generation);
    if meta_str(object, "name").unwrap_or_default().is_empty() {
        if let Some(prefix) = meta_str(object, "generateName").filter(|p| !p.is_empty()) {
            let name = generate_name(prefix);
            set_meta(object, "name", Some(name.into()));
        }
    }
    Ok(())
}

/// Whether the object's name came from generateName (and may be regenerated on a
/// collision).
pub fn has_generated_name(object: &Value) -> bool {
    let name = meta_str(object, "name").unwrap_or_default();
    meta_str(object, "generateName")
        .is_some_and(|prefix| !prefix.is_empty() && name.starts_with(prefix))
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
    set_meta(new, "managedFields", None);
    set_meta(new, "selfLink", None);
    if kind.bumps_generation() && object::spec_part(new) != object::spec_part(old) {
        let next = object::generation(old) + 1;
        set_meta(new, "generation", Some(next.into()));
    }
}

/// Upstream's ValidateObjectMeta (the parts every kind shares): a name or generateName,
/// a DNS-1123 subdomain name.
pub fn validate(object: &Value) -> ErrorList {
    let mut errors = Vec::new();
    let metadata = Path::new("metadata");
    let name = meta_str(object, "name").unwrap_or_default();
    if name.is_empty() {
        errors.push(FieldError::required(
            &metadata.child("name"),
            "name or generateName is required",
        ));
    } else if let Some(why) = dns1123_subdomain_error(name) {
        errors.push(FieldError::invalid(&metadata.child("name"), name, why));
    }
    errors
}

/// Upstream's ValidateObjectMetaUpdate: name, namespace and uid may not change.
pub fn validate_update(new: &Value, old: &Value) -> ErrorList {
    let metadata = Path::new("metadata");
    ["name", "namespace", "uid"]
        .into_iter()
        .filter(|field| meta_get(new, field) != meta_get(old, field))
        .map(|field| {
            FieldError::invalid(
                &metadata.child(field),
                meta_get(new, field)
                    .cloned()
                    .unwrap_or(Value::String(String::new())),
                "field is immutable",
            )
        })
        .collect()
}

/// Why `name` is not a DNS-1123 subdomain (upstream `IsDNS1123Subdomain`), or `None`.
fn dns1123_subdomain_error(name: &str) -> Option<String> {
    if name.len() > 253 {
        return Some("must be no more than 253 characters".into());
    }
    let label_ok = |label: &str| {
        let bytes = label.as_bytes();
        let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
        !bytes.is_empty()
            && bytes.first().is_some_and(alnum)
            && bytes.last().is_some_and(alnum)
            && bytes.iter().all(|b| alnum(b) || *b == b'-')
    };
    if name.split('.').all(label_ok) {
        None
    } else {
        Some("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".into())
    }
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
    fn names_must_be_dns_subdomains() {
        assert!(validate(&json!({"metadata": {"name": "a.b-c"}})).is_empty());
        let errors = validate(&json!({"metadata": {"name": "Bad_Name"}}));
        assert_eq!(errors.len(), 1);
        assert!(errors[0].to_string().starts_with(
            r#"metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain"#
        ));
        assert_eq!(
            validate(&json!({"metadata": {}}))[0].to_string(),
            "metadata.name: Required value: name or generateName is required"
        );
    }
}
