//! ConfigMaps and Secrets: key rules, the 1 MiB size limit, immutability, secret types
//! (upstream `ValidateConfigMap*`, `ValidateSecret*`, `SetDefaults_Secret`).

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};

use crate::core::invalid_each;
use crate::field::{ErrorList, FieldError, Path};
use crate::names;

/// Upstream `MaxSecretSize`: the data of one ConfigMap or Secret, 1 MiB.
pub const MAX_DATA_SIZE: usize = 1024 * 1024;

const IMMUTABLE: &str = "field is immutable when `immutable` is set";

/// Checks one key at `path[key]`.
fn validate_key(errors: &mut ErrorList, path: &Path, key: &str) {
    invalid_each(errors, &path.key(key), key, names::is_config_map_key(key));
}

fn too_large(errors: &mut ErrorList, size: usize) {
    if size > MAX_DATA_SIZE {
        errors.push(FieldError::too_long(&Path::new(""), MAX_DATA_SIZE));
    }
}

/// Checks a ConfigMap: keys of `data` and `binaryData` valid and distinct, at most 1 MiB.
pub fn validate_config_map(config_map: &ConfigMap) -> ErrorList {
    let mut errors = Vec::new();
    let data_path = Path::new("data");
    let binary_path = Path::new("binaryData");
    let mut size = 0;
    for (key, value) in config_map.data.iter().flatten() {
        validate_key(&mut errors, &data_path, key);
        size += value.len();
    }
    for (key, value) in config_map.binary_data.iter().flatten() {
        validate_key(&mut errors, &binary_path, key);
        if config_map
            .data
            .as_ref()
            .is_some_and(|d| d.contains_key(key))
        {
            errors.push(FieldError::invalid(
                &data_path.key(key),
                key.as_str(),
                "duplicate of key present in binaryData",
            ));
        }
        size += value.0.len();
    }
    too_large(&mut errors, size);
    errors
}

/// Checks a ConfigMap update: an immutable one keeps its data and stays immutable.
pub fn validate_config_map_update(new: &ConfigMap, old: &ConfigMap) -> ErrorList {
    let mut errors = validate_config_map(new);
    if old.immutable == Some(true) {
        if new.immutable != Some(true) {
            errors.push(FieldError::forbidden(&Path::new("immutable"), IMMUTABLE));
        }
        if new.data != old.data {
            errors.push(FieldError::forbidden(&Path::new("data"), IMMUTABLE));
        }
        if new.binary_data != old.binary_data {
            errors.push(FieldError::forbidden(&Path::new("binaryData"), IMMUTABLE));
        }
    }
    errors
}

/// Defaults a Secret: type `Opaque`, and `stringData` merged into `data` (as upstream's
/// conversion does; stringData wins).
pub fn default_secret(secret: &mut Secret) {
    secret.type_.get_or_insert_with(|| "Opaque".to_owned());
    if let Some(string_data) = secret.string_data.take() {
        let data = secret.data.get_or_insert_with(BTreeMap::new);
        for (key, value) in string_data {
            data.insert(key, ByteString(value.into_bytes()));
        }
    }
}

/// The keys each well-known secret type requires.
fn required_keys(secret_type: &str) -> &'static [&'static str] {
    match secret_type {
        "kubernetes.io/dockercfg" => &[".dockercfg"],
        "kubernetes.io/dockerconfigjson" => &[".dockerconfigjson"],
        "kubernetes.io/ssh-auth" => &["ssh-privatekey"],
        "kubernetes.io/tls" => &["tls.crt", "tls.key"],
        _ => &[],
    }
}

/// Checks a Secret: keys valid, at most 1 MiB, and what its type requires.
pub fn validate_secret(secret: &Secret) -> ErrorList {
    let mut errors = Vec::new();
    let data_path = Path::new("data");
    let mut size = 0;
    for (key, value) in secret.data.iter().flatten() {
        validate_key(&mut errors, &data_path, key);
        size += value.0.len();
    }
    too_large(&mut errors, size);
    let secret_type = secret.type_.as_deref().unwrap_or("Opaque");
    let has = |key: &str| secret.data.as_ref().is_some_and(|d| d.contains_key(key));
    for key in required_keys(secret_type) {
        if !has(key) {
            errors.push(FieldError::required(&data_path.key(key), ""));
        }
    }
    if secret_type == "kubernetes.io/service-account-token" {
        let annotation = "kubernetes.io/service-account.name";
        let annotations = secret.metadata.annotations.as_ref();
        if annotations
            .and_then(|a| a.get(annotation))
            .is_none_or(String::is_empty)
        {
            let p = Path::new("metadata").child("annotations").key(annotation);
            errors.push(FieldError::required(&p, ""));
        }
    }
    if secret_type == "kubernetes.io/basic-auth" && !has("username") && !has("password") {
        errors.push(FieldError::required(
            &data_path.key("username"),
            "must have at least one of these keys: username, password",
        ));
    }
    errors
}

/// Checks a Secret update: the type never changes, an immutable one keeps its data.
pub fn validate_secret_update(new: &Secret, old: &Secret) -> ErrorList {
    let mut errors = validate_secret(new);
    if new.type_ != old.type_ {
        errors.push(FieldError::invalid(
            &Path::new("type"),
            new.type_.clone().unwrap_or_default(),
            "field is immutable",
        ));
    }
    if old.immutable == Some(true) {
        if new.immutable != Some(true) {
            errors.push(FieldError::forbidden(&Path::new("immutable"), IMMUTABLE));
        }
        if new.data != old.data {
            errors.push(FieldError::forbidden(&Path::new("data"), IMMUTABLE));
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(errors: &ErrorList) -> Vec<String> {
        errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn config_map_keys_and_size() {
        let cm: ConfigMap = serde_json::from_value(serde_json::json!({
            "data": {"ok.key": "v", "bad key": "v"},
            "binaryData": {"ok.key": "AAAA"}
        }))
        .unwrap_or_default();
        assert_eq!(
            messages(&validate_config_map(&cm)),
            [
                r#"data[bad key]: Invalid value: "bad key": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"#,
                r#"data[ok.key]: Invalid value: "ok.key": duplicate of key present in binaryData"#,
            ]
        );
        let big = ConfigMap {
            data: Some(BTreeMap::from([(
                "k".into(),
                "x".repeat(MAX_DATA_SIZE + 1),
            )])),
            ..Default::default()
        };
        assert_eq!(
            messages(&validate_config_map(&big)),
            [": Too long: may not be more than 1048576 bytes"]
        );
    }

    #[test]
    fn immutable_config_maps_keep_their_data() {
        let old = ConfigMap {
            immutable: Some(true),
            data: Some(BTreeMap::from([("k".into(), "a".into())])),
            ..Default::default()
        };
        let mut new = old.clone();
        new.data = Some(BTreeMap::from([("k".into(), "b".into())]));
        assert_eq!(
            messages(&validate_config_map_update(&new, &old)),
            ["data: Forbidden: field is immutable when `immutable` is set"]
        );
    }

    #[test]
    fn secrets_default_and_check_their_type() {
        let mut secret: Secret = serde_json::from_value(serde_json::json!({
            "stringData": {"tls.crt": "c"}, "type": "kubernetes.io/tls"
        }))
        .unwrap_or_default();
        default_secret(&mut secret);
        assert_eq!(secret.string_data, None);
        assert_eq!(
            messages(&validate_secret(&secret)),
            ["data[tls.key]: Required value"]
        );
        let mut opaque = Secret::default();
        default_secret(&mut opaque);
        assert_eq!(opaque.type_.as_deref(), Some("Opaque"));
        let mut changed = opaque.clone();
        changed.type_ = Some("kubernetes.io/tls".into());
        assert!(
            messages(&validate_secret_update(&changed, &opaque)).contains(
                &r#"type: Invalid value: "kubernetes.io/tls": field is immutable"#.to_owned()
            )
        );
    }
}
