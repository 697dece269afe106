//! PersistentVolumes and PersistentVolumeClaims (upstream `SetDefaults_PersistentVolume`,
//! `SetDefaults_PersistentVolumeClaim`, `ValidatePersistentVolume`,
//! `ValidatePersistentVolumeClaim`).

use k8s_openapi::api::core::v1::{
    PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimStatus, PersistentVolumeStatus,
};

use crate::core::one_of;
use crate::core::pod::affinity::validate_node_selector;
use crate::core::resources::validate_resource_list;
use crate::field::{ErrorList, FieldError, Path};

const ACCESS_MODES: &[&str] = &[
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOnce",
    "ReadWriteOncePod",
];
const VOLUME_MODES: &[&str] = &["Block", "Filesystem"];

/// Defaults a PV: reclaim policy `Retain`, volume mode `Filesystem`, phase `Pending`.
pub fn default_persistent_volume(pv: &mut PersistentVolume) {
    if let Some(spec) = pv.spec.as_mut() {
        spec.persistent_volume_reclaim_policy
            .get_or_insert_with(|| "Retain".to_owned());
        spec.volume_mode
            .get_or_insert_with(|| "Filesystem".to_owned());
    }
    let status = pv
        .status
        .get_or_insert_with(PersistentVolumeStatus::default);
    status.phase.get_or_insert_with(|| "Pending".to_owned());
}

/// Defaults a PVC: volume mode `Filesystem`, phase `Pending`.
pub fn default_persistent_volume_claim(pvc: &mut PersistentVolumeClaim) {
    if let Some(spec) = pvc.spec.as_mut() {
        spec.volume_mode
            .get_or_insert_with(|| "Filesystem".to_owned());
    }
    let status = pvc
        .status
        .get_or_insert_with(PersistentVolumeClaimStatus::default);
    status.phase.get_or_insert_with(|| "Pending".to_owned());
}

fn validate_access_modes(errors: &mut ErrorList, path: &Path, modes: &[String]) {
    if modes.is_empty() {
        errors.push(FieldError::required(path, ""));
    }
    for mode in modes {
        one_of(errors, path, Some(mode), ACCESS_MODES, true);
    }
}

/// Checks a PV: access modes, a `storage` capacity, one volume source, reclaim policy
/// and volume mode.
pub fn validate_persistent_volume(pv: &PersistentVolume) -> ErrorList {
    let mut errors = Vec::new();
    let spec_path = Path::new("spec");
    let Some(spec) = &pv.spec else {
        errors.push(FieldError::required(&spec_path, ""));
        return errors;
    };
    validate_access_modes(
        &mut errors,
        &spec_path.child("accessModes"),
        spec.access_modes.as_deref().unwrap_or_default(),
    );
    let capacity_path = spec_path.child("capacity");
    match &spec.capacity {
        Some(capacity) if capacity.contains_key("storage") => {
            for key in capacity.keys().filter(|k| *k != "storage") {
                errors.push(FieldError::not_supported(
                    &capacity_path,
                    key.as_str(),
                    &["storage"],
                ));
            }
            validate_resource_list(&mut errors, &capacity_path, Some(capacity));
        }
        _ => errors.push(FieldError::required(&capacity_path, "")),
    }
    let sources = [
        spec.host_path.is_some(),
        spec.nfs.is_some(),
        spec.local.is_some(),
        spec.csi.is_some(),
        spec.iscsi.is_some(),
        spec.fc.is_some(),
        spec.rbd.is_some(),
        spec.cephfs.is_some(),
        spec.glusterfs.is_some(),
        spec.aws_elastic_block_store.is_some(),
        spec.gce_persistent_disk.is_some(),
        spec.azure_disk.is_some(),
        spec.azure_file.is_some(),
        spec.cinder.is_some(),
        spec.flex_volume.is_some(),
        spec.vsphere_volume.is_some(),
    ]
    .into_iter()
    .filter(|set| *set)
    .count();
    match sources {
        0 => errors.push(FieldError::required(
            &spec_path,
            "must specify a volume type",
        )),
        1 => {}
        _ => errors.push(FieldError::forbidden(
            &spec_path,
            "may not specify more than 1 volume type",
        )),
    }
    if let Some(host_path) = &spec.host_path
        && host_path.path.is_empty()
    {
        errors.push(FieldError::required(
            &spec_path.child("hostPath").child("path"),
            "",
        ));
    }
    // Upstream `validateVolumeNodeAffinity`, and a local volume needs it.
    match &spec.node_affinity {
        Some(affinity) => {
            let path = spec_path.child("nodeAffinity").child("required");
            match &affinity.required {
                Some(required) => validate_node_selector(&mut errors, &path, required),
                None => errors.push(FieldError::required(
                    &path,
                    "must specify required node constraints",
                )),
            }
        }
        None if spec.local.is_some() => errors.push(FieldError::required(
            &spec_path.child("nodeAffinity"),
            "Local volume requires node affinity",
        )),
        None => {}
    }
    one_of(
        &mut errors,
        &spec_path.child("persistentVolumeReclaimPolicy"),
        spec.persistent_volume_reclaim_policy.as_deref(),
        &["Delete", "Recycle", "Retain"],
        false,
    );
    one_of(
        &mut errors,
        &spec_path.child("volumeMode"),
        spec.volume_mode.as_deref(),
        VOLUME_MODES,
        false,
    );
    errors
}

/// Checks a PVC: access modes, a `storage` request, volume mode.
pub fn validate_persistent_volume_claim(pvc: &PersistentVolumeClaim) -> ErrorList {
    let mut errors = Vec::new();
    let spec_path = Path::new("spec");
    let Some(spec) = &pvc.spec else {
        errors.push(FieldError::required(&spec_path, ""));
        return errors;
    };
    validate_access_modes(
        &mut errors,
        &spec_path.child("accessModes"),
        spec.access_modes.as_deref().unwrap_or_default(),
    );
    let requests = spec.resources.as_ref().and_then(|r| r.requests.as_ref());
    let resources_path = spec_path.child("resources");
    if requests.is_none_or(|r| !r.contains_key("storage")) {
        errors.push(FieldError::required(&resources_path.key("storage"), ""));
    }
    validate_resource_list(&mut errors, &resources_path.child("requests"), requests);
    one_of(
        &mut errors,
        &spec_path.child("volumeMode"),
        spec.volume_mode.as_deref(),
        VOLUME_MODES,
        false,
    );
    errors
}

/// Checks a PVC update: the spec is immutable but for the storage request and the
/// volume attributes class.
pub fn validate_persistent_volume_claim_update(
    new: &PersistentVolumeClaim,
    old: &PersistentVolumeClaim,
) -> ErrorList {
    let mut errors = validate_persistent_volume_claim(new);
    let (Some(new_spec), Some(old_spec)) = (&new.spec, &old.spec) else {
        return errors;
    };
    let mut munged = new_spec.clone();
    munged.resources.clone_from(&old_spec.resources);
    munged
        .volume_attributes_class_name
        .clone_from(&old_spec.volume_attributes_class_name);
    // The binder fills volumeName once.
    if old_spec.volume_name.as_deref().unwrap_or("").is_empty() {
        munged.volume_name.clone_from(&old_spec.volume_name);
    }
    if munged != *old_spec {
        errors.push(FieldError::forbidden(
            &Path::new("spec"),
            "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
        ));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_checks() {
        let mut pv: PersistentVolume = serde_json::from_value(serde_json::json!({
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/d"}}
        }))
        .unwrap_or_default();
        default_persistent_volume(&mut pv);
        let spec = pv.spec.clone().unwrap_or_default();
        assert_eq!(
            spec.persistent_volume_reclaim_policy.as_deref(),
            Some("Retain")
        );
        assert_eq!(spec.volume_mode.as_deref(), Some("Filesystem"));
        assert!(validate_persistent_volume(&pv).is_empty());
        let mut pvc: PersistentVolumeClaim =
            serde_json::from_value(serde_json::json!({"spec": {"accessModes": ["Sometimes"]}}))
                .unwrap_or_default();
        default_persistent_volume_claim(&mut pvc);
        let got: Vec<String> = validate_persistent_volume_claim(&pvc)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            got,
            [
                r#"spec.accessModes: Unsupported value: "Sometimes": supported values: "ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod""#,
                "spec.resources[storage]: Required value",
            ]
        );
    }

    #[test]
    fn node_affinity_is_validated_and_local_volumes_need_it() {
        let check = |spec: serde_json::Value| -> Vec<String> {
            let pv: PersistentVolume =
                serde_json::from_value(serde_json::json!({ "spec": spec })).unwrap_or_default();
            validate_persistent_volume(&pv)
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        let base = serde_json::json!({"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "local": {"path": "/mnt/disk"}});
        assert_eq!(
            check(base.clone()),
            ["spec.nodeAffinity: Required value: Local volume requires node affinity"]
        );
        let mut empty = base.clone();
        empty["nodeAffinity"] = serde_json::json!({});
        assert_eq!(
            check(empty),
            ["spec.nodeAffinity.required: Required value: must specify required node constraints"]
        );
        let mut bad = base;
        bad["nodeAffinity"] = serde_json::json!({"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In"}]}]}});
        assert_eq!(
            check(bad),
            [
                "spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"
            ]
        );
    }
}
