//! Validation of pod volumes and volume mounts (upstream `ValidateVolumes`,
//! `validateVolumeSource`, `ValidateVolumeMounts`, `validateLocalDescendingPath`).

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{KeyToPath, Volume, VolumeMount};

use crate::core::pod::defaults::source_count;
use crate::core::{one_of, validate_dns1123_label};
use crate::field::{ErrorList, FieldError, Path};

/// Supported `hostPath.type`s.
const HOST_PATH_TYPES: &[&str] = &[
    "",
    "BlockDevice",
    "CharDevice",
    "Directory",
    "DirectoryOrCreate",
    "File",
    "FileOrCreate",
    "Socket",
];

/// Checks `volumes` at `path` (`spec.volumes`) and returns the names declared.
pub fn validate_volumes<'a>(
    errors: &mut ErrorList,
    path: &Path,
    volumes: &'a [Volume],
) -> HashSet<&'a str> {
    let mut names = HashSet::new();
    for (i, volume) in volumes.iter().enumerate() {
        let vol_path = path.index(i);
        let name_path = vol_path.child("name");
        validate_dns1123_label(errors, &name_path, &volume.name);
        if !volume.name.is_empty() && !names.insert(volume.name.as_str()) {
            errors.push(FieldError::duplicate(&name_path, volume.name.as_str()));
        }
        validate_source(errors, &vol_path, volume);
    }
    names
}

fn validate_source(errors: &mut ErrorList, path: &Path, volume: &Volume) {
    match source_count(volume) {
        0 => errors.push(FieldError::required(path, "must specify a volume type")),
        1 => {}
        _ => errors.push(FieldError::forbidden(
            path,
            "may not specify more than 1 volume type",
        )),
    }
    if let Some(host_path) = &volume.host_path {
        let p = path.child("hostPath");
        if host_path.path.is_empty() {
            errors.push(FieldError::required(&p.child("path"), ""));
        }
        one_of(
            errors,
            &p.child("type"),
            host_path.type_.as_deref(),
            HOST_PATH_TYPES,
            false,
        );
    }
    if let Some(secret) = &volume.secret {
        let p = path.child("secret");
        if secret.secret_name.as_deref().unwrap_or("").is_empty() {
            errors.push(FieldError::required(&p.child("secretName"), ""));
        }
        validate_mode(errors, &p.child("defaultMode"), secret.default_mode);
        validate_items(errors, &p.child("items"), secret.items.as_deref());
    }
    if let Some(config_map) = &volume.config_map {
        let p = path.child("configMap");
        if config_map.name.is_empty() {
            errors.push(FieldError::required(&p.child("name"), ""));
        }
        validate_mode(errors, &p.child("defaultMode"), config_map.default_mode);
        validate_items(errors, &p.child("items"), config_map.items.as_deref());
    }
    if let Some(downward) = &volume.downward_api {
        validate_mode(
            errors,
            &path.child("downwardAPI").child("defaultMode"),
            downward.default_mode,
        );
    }
    if let Some(projected) = &volume.projected {
        validate_mode(
            errors,
            &path.child("projected").child("defaultMode"),
            projected.default_mode,
        );
    }
    if let Some(claim) = &volume.persistent_volume_claim
        && claim.claim_name.is_empty()
    {
        let p = path.child("persistentVolumeClaim").child("claimName");
        errors.push(FieldError::required(&p, ""));
    }
}

/// File modes are 0 to 0777.
fn validate_mode(errors: &mut ErrorList, path: &Path, mode: Option<i32>) {
    if let Some(mode) = mode.filter(|m| !(0..=0o777).contains(m)) {
        errors.push(FieldError::invalid(
            path,
            mode,
            "must be a number between 0 and 0777 (octal), both inclusive",
        ));
    }
}

fn validate_items(errors: &mut ErrorList, path: &Path, items: Option<&[KeyToPath]>) {
    for (i, item) in items.unwrap_or_default().iter().enumerate() {
        let p = path.index(i);
        if item.key.is_empty() {
            errors.push(FieldError::required(&p.child("key"), ""));
        }
        if item.path.is_empty() {
            errors.push(FieldError::required(&p.child("path"), ""));
        }
        validate_local_descending_path(errors, &p.child("path"), &item.path);
        validate_mode(errors, &p.child("mode"), item.mode);
    }
}

/// Checks the mounts of one container (`path` is `spec.containers[0].volumeMounts`):
/// a declared volume, a unique mount path, a relative subPath that does not climb out of
/// the volume, a supported propagation.
pub fn validate_volume_mounts(
    errors: &mut ErrorList,
    path: &Path,
    mounts: &[VolumeMount],
    volumes: &HashSet<&str>,
    privileged: bool,
) {
    let mut mount_paths = HashSet::new();
    for (i, mount) in mounts.iter().enumerate() {
        let p = path.index(i);
        if mount.name.is_empty() {
            errors.push(FieldError::required(&p.child("name"), ""));
        } else if !volumes.contains(mount.name.as_str()) {
            errors.push(FieldError::not_found(&p.child("name"), mount.name.as_str()));
        }
        if mount.mount_path.is_empty() {
            errors.push(FieldError::required(&p.child("mountPath"), ""));
        } else if !mount_paths.insert(mount.mount_path.as_str()) {
            errors.push(FieldError::invalid(
                &p.child("mountPath"),
                mount.mount_path.as_str(),
                "must be unique",
            ));
        }
        let sub_path = mount.sub_path.as_deref().unwrap_or("");
        let sub_path_expr = mount.sub_path_expr.as_deref().unwrap_or("");
        if !sub_path.is_empty() && !sub_path_expr.is_empty() {
            errors.push(FieldError::invalid(
                &p.child("subPathExpr"),
                sub_path_expr,
                "subPathExpr and subPath are mutually exclusive",
            ));
        }
        validate_local_descending_path(errors, &p.child("subPath"), sub_path);
        validate_local_descending_path(errors, &p.child("subPathExpr"), sub_path_expr);
        let propagation = mount.mount_propagation.as_deref();
        one_of(
            errors,
            &p.child("mountPropagation"),
            propagation,
            &["Bidirectional", "HostToContainer", "None"],
            false,
        );
        if propagation == Some("Bidirectional") && !privileged {
            errors.push(FieldError::forbidden(
                &p.child("mountPropagation"),
                "Bidirectional mount propagation is available only to privileged containers",
            ));
        }
    }
}

/// A path inside a volume: relative, without `..` elements.
fn validate_local_descending_path(errors: &mut ErrorList, path: &Path, value: &str) {
    if value.starts_with('/') {
        errors.push(FieldError::invalid(path, value, "must be a relative path"));
    }
    if value.split('/').any(|part| part == "..") {
        errors.push(FieldError::invalid(path, value, "must not contain '..'"));
    }
}
