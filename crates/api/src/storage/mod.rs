//! storage.k8s.io/v1: defaulting and validation of storageclasses, csidrivers, csinodes,
//! csistoragecapacities and volumeattachments, as upstream's `pkg/apis/storage/v1`
//! (`SetDefaults_StorageClass`, `SetDefaults_CSIDriver`) and
//! `pkg/apis/storage/validation` (`ValidateStorageClass`, `ValidateCSIDriver`,
//! `ValidateCSINode`, `ValidateCSIStorageCapacity`, `ValidateVolumeAttachment` and their
//! update checks), with upstream's messages and field paths. Metadata is the API server's
//! to check, not these functions'.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use k8s_openapi::api::core::v1::TopologySelectorTerm;
use k8s_openapi::api::storage::v1::{
    CSIDriver, CSINode, CSINodeDriver, CSIStorageCapacity, StorageClass, VolumeAttachment,
    VolumeError,
};

use crate::core::invalid_each;
use crate::field::{ErrorList, FieldError, Path};
use crate::validation::{immutable, json, nonnegative};
use crate::{meta, names, quantity};

/// Provisioner parameters may hold this many entries...
const MAX_PARAMETERS: usize = 512;
/// ...of this many bytes of keys and values in all (also the cap of a volume attachment's
/// metadata).
const MAX_PARAMETERS_SIZE: usize = 256 * 1024;
/// A volume error's message may be this long.
const MAX_VOLUME_ERROR_MESSAGE: usize = 1024;
/// A CSI node ID's maximum length (upstream's `csiNodeIDLongerMaxLength`, allowed since
/// 1.22).
const MAX_NODE_ID: usize = 256;
/// A CSI driver name's maximum length.
const MAX_DRIVER_NAME: usize = 63;

const RECLAIM_POLICIES: &[&str] = &["Delete", "Retain"];
const BINDING_MODES: &[&str] = &["Immediate", "WaitForFirstConsumer"];
const FS_GROUP_POLICIES: &[&str] = &["File", "None", "ReadWriteOnceWithFSType"];
const LIFECYCLE_MODES: &[&str] = &["Persistent", "Ephemeral"];

/// `SetDefaults_StorageClass`: reclaimPolicy `Delete`, volumeBindingMode `Immediate`.
pub fn default_storage_class(class: &mut StorageClass) {
    class
        .reclaim_policy
        .get_or_insert_with(|| "Delete".to_owned());
    class
        .volume_binding_mode
        .get_or_insert_with(|| "Immediate".to_owned());
}

/// Upstream `ValidateQualifiedName` of `value` at `path`.
fn qualified_name(errors: &mut ErrorList, path: &Path, value: &str) {
    invalid_each(errors, path, value, names::is_qualified_name(value));
}

/// Provisioner required, a qualified name once lower-cased; parameters bounded; reclaim
/// policy and binding mode among upstream's; allowed topologies well formed.
pub fn validate_storage_class(class: &StorageClass) -> ErrorList {
    let mut errors = Vec::new();
    validate_provisioner(&mut errors, &class.provisioner, &Path::new("provisioner"));
    validate_parameters(
        &mut errors,
        class.parameters.as_ref(),
        &Path::new("parameters"),
    );
    if let Some(policy) = class.reclaim_policy.as_deref().filter(|p| !p.is_empty())
        && !RECLAIM_POLICIES.contains(&policy)
    {
        errors.push(FieldError::not_supported(
            &Path::new("reclaimPolicy"),
            policy,
            RECLAIM_POLICIES,
        ));
    }
    let mode_path = Path::new("volumeBindingMode");
    match class.volume_binding_mode.as_deref() {
        None => errors.push(FieldError::required(&mode_path, "")),
        Some(mode) if !BINDING_MODES.contains(&mode) => {
            errors.push(FieldError::not_supported(&mode_path, mode, BINDING_MODES));
        }
        Some(_) => {}
    }
    validate_allowed_topologies(
        &mut errors,
        class.allowed_topologies.as_deref().unwrap_or_default(),
        &Path::new("allowedTopologies"),
    );
    errors
}

/// Parameters, provisioner and reclaim policy are forbidden to change, the binding mode is
/// immutable (upstream `ValidateStorageClassUpdate`, after [`validate_storage_class`]).
pub fn validate_storage_class_update(new: &StorageClass, old: &StorageClass) -> ErrorList {
    let mut errors = validate_storage_class(new);
    let empty = BTreeMap::new();
    if new.parameters.as_ref().unwrap_or(&empty) != old.parameters.as_ref().unwrap_or(&empty) {
        errors.push(FieldError::forbidden(
            &Path::new("parameters"),
            "updates to parameters are forbidden.",
        ));
    }
    if new.provisioner != old.provisioner {
        errors.push(FieldError::forbidden(
            &Path::new("provisioner"),
            "updates to provisioner are forbidden.",
        ));
    }
    if new.reclaim_policy != old.reclaim_policy {
        errors.push(FieldError::forbidden(
            &Path::new("reclaimPolicy"),
            "updates to reclaimPolicy are forbidden.",
        ));
    }
    errors.extend(immutable(
        &new.volume_binding_mode,
        &old.volume_binding_mode,
        &Path::new("volumeBindingMode"),
    ));
    errors
}

fn validate_provisioner(errors: &mut ErrorList, provisioner: &str, path: &Path) {
    if provisioner.is_empty() {
        errors.push(FieldError::required(path, ""));
    } else {
        qualified_name(errors, path, &provisioner.to_lowercase());
    }
}

fn validate_parameters(
    errors: &mut ErrorList,
    parameters: Option<&BTreeMap<String, String>>,
    path: &Path,
) {
    let Some(parameters) = parameters else {
        return;
    };
    if parameters.len() > MAX_PARAMETERS {
        errors.push(FieldError::too_long(path, MAX_PARAMETERS));
        return;
    }
    let mut size = 0;
    for (key, value) in parameters {
        if key.is_empty() {
            errors.push(FieldError::invalid(
                path,
                key.as_str(),
                "field can not be empty.",
            ));
        }
        size += key.len() + value.len();
    }
    if size > MAX_PARAMETERS_SIZE {
        errors.push(FieldError::too_long(path, MAX_PARAMETERS_SIZE));
    }
}

/// Upstream `validateAllowedTopologies` with core's `ValidateTopologySelectorTerm`: each
/// expression has values (no duplicates) and a label-name key used once per term; no two
/// terms alike.
fn validate_allowed_topologies(
    errors: &mut ErrorList,
    terms: &[TopologySelectorTerm],
    path: &Path,
) {
    let mut seen: Vec<BTreeMap<&str, BTreeSet<&str>>> = Vec::new();
    for (i, term) in terms.iter().enumerate() {
        let term_path = path.index(i);
        let expressions_path = term_path.child("matchLabelExpressions");
        let mut keys: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for (j, requirement) in term.match_label_expressions.iter().flatten().enumerate() {
            let requirement_path = expressions_path.index(j);
            let values_path = requirement_path.child("values");
            if requirement.values.is_empty() {
                errors.push(FieldError::required(&values_path, ""));
            }
            let mut values = BTreeSet::new();
            for (k, value) in requirement.values.iter().enumerate() {
                if !values.insert(value.as_str()) {
                    errors.push(FieldError::duplicate(&values_path.index(k), value.as_str()));
                }
            }
            errors.extend(meta::validate_label_name(
                &requirement.key,
                &requirement_path.child("key"),
            ));
            if keys.contains_key(requirement.key.as_str()) {
                errors.push(FieldError::duplicate(
                    &requirement_path.child("key"),
                    requirement.key.as_str(),
                ));
            }
            keys.insert(requirement.key.as_str(), values);
        }
        if seen.contains(&keys) {
            errors.push(FieldError::duplicate(&expressions_path, ""));
        }
        seen.push(keys);
    }
}

/// `SetDefaults_CSIDriver` with 1.33's default feature gates: attachRequired true;
/// podInfoOnMount, storageCapacity, requiresRepublish and seLinuxMount false; fsGroupPolicy
/// `ReadWriteOnceWithFSType`; volumeLifecycleModes `[Persistent]`.
pub fn default_csi_driver(driver: &mut CSIDriver) {
    let spec = &mut driver.spec;
    spec.attach_required.get_or_insert(true);
    spec.pod_info_on_mount.get_or_insert(false);
    spec.storage_capacity.get_or_insert(false);
    spec.fs_group_policy
        .get_or_insert_with(|| "ReadWriteOnceWithFSType".to_owned());
    if spec
        .volume_lifecycle_modes
        .as_ref()
        .is_none_or(Vec::is_empty)
    {
        spec.volume_lifecycle_modes = Some(vec!["Persistent".to_owned()]);
    }
    spec.requires_republish.get_or_insert(false);
    spec.se_linux_mount.get_or_insert(false);
}

/// Upstream's csidriver PrepareForCreate and PrepareForUpdate: with the
/// MutableCSINodeAllocatableCount gate off (its 1.33 default),
/// `nodeAllocatableUpdatePeriodSeconds` is dropped unless `old` already has it.
pub fn drop_disabled_csi_driver_fields(driver: &mut CSIDriver, old: Option<&CSIDriver>) {
    if old.is_none_or(|o| o.spec.node_allocatable_update_period_seconds.is_none()) {
        driver.spec.node_allocatable_update_period_seconds = None;
    }
}

/// Upstream `validateCSIDriverSpec`: the defaulted booleans present, fsGroupPolicy and the
/// lifecycle modes among upstream's, token requests' audiences distinct and expirations in
/// range. Note upstream's path for attachRequired is `spec.attachedRequired`.
pub fn validate_csi_driver(driver: &CSIDriver) -> ErrorList {
    let mut errors = Vec::new();
    let spec = &driver.spec;
    let path = Path::new("spec");
    for (value, field) in [
        (spec.attach_required, "attachedRequired"),
        (spec.pod_info_on_mount, "podInfoOnMount"),
        (spec.storage_capacity, "storageCapacity"),
    ] {
        if value.is_none() {
            errors.push(FieldError::required(&path.child(field), ""));
        }
    }
    if let Some(policy) = spec.fs_group_policy.as_deref()
        && !FS_GROUP_POLICIES.contains(&policy)
    {
        errors.push(FieldError::not_supported(
            &path.child("fsGroupPolicy"),
            policy,
            FS_GROUP_POLICIES,
        ));
    }
    let mut audiences = HashSet::new();
    for (i, request) in spec.token_requests.iter().flatten().enumerate() {
        let request_path = path.child("tokenRequests").index(i);
        if !audiences.insert(request.audience.as_str()) {
            errors.push(FieldError::duplicate(
                &request_path.child("audience"),
                request.audience.as_str(),
            ));
            continue;
        }
        let Some(seconds) = request.expiration_seconds else {
            continue;
        };
        let seconds_path = request_path.child("expirationSeconds");
        if seconds < 600 {
            errors.push(FieldError::invalid(
                &seconds_path,
                seconds,
                "may not specify a duration less than 10 minutes",
            ));
        }
        if seconds > 1 << 32 {
            errors.push(FieldError::invalid(
                &seconds_path,
                seconds,
                "may not specify a duration larger than 2^32 seconds",
            ));
        }
    }
    for mode in spec.volume_lifecycle_modes.iter().flatten() {
        if !LIFECYCLE_MODES.contains(&mode.as_str()) {
            errors.push(FieldError::not_supported(
                &path.child("volumeLifecycleModes"),
                mode.as_str(),
                LIFECYCLE_MODES,
            ));
        }
    }
    if spec.se_linux_mount.is_none() {
        errors.push(FieldError::required(&path.child("seLinuxMount"), ""));
    }
    if let Some(period) = spec
        .node_allocatable_update_period_seconds
        .filter(|p| *p < 10)
    {
        errors.push(FieldError::invalid(
            &path.child("nodeAllocatableUpdatePeriodSeconds"),
            period,
            "must be greater than or equal to 10 seconds",
        ));
    }
    errors
}

/// [`validate_csi_driver`], then attachRequired and volumeLifecycleModes immutable (the
/// rest of the spec is mutable in 1.33).
pub fn validate_csi_driver_update(new: &CSIDriver, old: &CSIDriver) -> ErrorList {
    let mut errors = validate_csi_driver(new);
    let path = Path::new("spec");
    errors.extend(immutable(
        &new.spec.attach_required,
        &old.spec.attach_required,
        &path.child("attachedRequired"),
    ));
    errors.extend(immutable(
        &new.spec.volume_lifecycle_modes,
        &old.spec.volume_lifecycle_modes,
        &path.child("volumeLifecycleModes"),
    ));
    errors
}

/// Core's `ValidateCSIDriverName`: required, at most 63 characters, a DNS subdomain once
/// lower-cased.
pub fn validate_csi_driver_name(errors: &mut ErrorList, name: &str, path: &Path) {
    if name.is_empty() {
        errors.push(FieldError::required(path, ""));
    }
    if name.len() > MAX_DRIVER_NAME {
        errors.push(FieldError::too_long(path, MAX_DRIVER_NAME));
    }
    invalid_each(
        errors,
        path,
        name,
        names::is_dns1123_subdomain(&name.to_lowercase()),
    );
}

/// Upstream `validateCSINodeDrivers`: each driver's name, node ID (required, at most 256
/// characters), allocatable count, distinct names and topology keys (qualified names,
/// reported at the driver's path as upstream does).
pub fn validate_csi_node(node: &CSINode) -> ErrorList {
    let mut errors = Vec::new();
    let path = Path::new("spec").child("drivers");
    let mut names_seen = HashSet::new();
    for (i, driver) in node.spec.drivers.iter().enumerate() {
        let driver_path = path.index(i);
        validate_csi_driver_name(&mut errors, &driver.name, &driver_path.child("name"));
        let id_path = driver_path.child("nodeID");
        if driver.node_id.is_empty() {
            errors.push(FieldError::required(&id_path, ""));
        }
        if driver.node_id.len() > MAX_NODE_ID {
            errors.push(FieldError::invalid(
                &id_path,
                driver.node_id.as_str(),
                format!("must be {MAX_NODE_ID} characters or less"),
            ));
        }
        if let Some(count) = driver.allocatable.as_ref().and_then(|a| a.count) {
            errors.extend(nonnegative(
                count.into(),
                &driver_path.child("allocatable").child("count"),
            ));
        }
        if !names_seen.insert(driver.name.as_str()) {
            errors.push(FieldError::duplicate(
                &driver_path.child("name"),
                driver.name.as_str(),
            ));
        }
        let mut keys = HashSet::new();
        for key in driver.topology_keys.iter().flatten() {
            if key.is_empty() {
                errors.push(FieldError::required(&driver_path, ""));
            }
            if !keys.insert(key.as_str()) {
                errors.push(FieldError::duplicate(&driver_path, key.as_str()));
            }
            qualified_name(&mut errors, &driver_path, key);
        }
    }
    errors
}

/// [`validate_csi_node`], then a driver present before and after may not change
/// (`spec.drivers: Invalid value: <driver>: field is immutable`).
pub fn validate_csi_node_update(new: &CSINode, old: &CSINode) -> ErrorList {
    let mut errors = validate_csi_node(new);
    let path = Path::new("spec").child("drivers");
    for old_driver in &old.spec.drivers {
        let same = |d: &&CSINodeDriver| d.name == old_driver.name;
        for new_driver in new.spec.drivers.iter().filter(same) {
            errors.extend(immutable(new_driver, old_driver, &path));
        }
    }
    errors
}

/// Upstream `ValidateCSIStorageCapacity`: the node topology selector, a DNS-subdomain
/// storage class name and a non-negative capacity.
pub fn validate_csi_storage_capacity(capacity: &CSIStorageCapacity) -> ErrorList {
    let mut errors = Vec::new();
    if let Some(topology) = &capacity.node_topology {
        errors.extend(meta::validate_label_selector(
            topology,
            &Path::new("nodeTopology"),
        ));
    }
    invalid_each(
        &mut errors,
        &Path::new("storageClassName"),
        capacity.storage_class_name.as_str(),
        names::name_is_dns_subdomain(&capacity.storage_class_name, false),
    );
    if let Some(value) = &capacity.capacity
        && quantity::parse(value).is_some_and(|v| v < 0.0)
    {
        errors.push(FieldError::invalid(
            &Path::new("capacity"),
            value.0.as_str(),
            "must be greater than or equal to 0",
        ));
    }
    errors
}

/// [`validate_csi_storage_capacity`], then the node topology and the storage class name
/// immutable.
pub fn validate_csi_storage_capacity_update(
    new: &CSIStorageCapacity,
    old: &CSIStorageCapacity,
) -> ErrorList {
    let mut errors = validate_csi_storage_capacity(new);
    if new.node_topology != old.node_topology {
        errors.push(FieldError::invalid(
            &Path::new("nodeTopology"),
            json(&new.node_topology),
            "field is immutable",
        ));
    }
    if new.storage_class_name != old.storage_class_name {
        errors.push(FieldError::invalid(
            &Path::new("storageClassName"),
            new.storage_class_name.as_str(),
            "field is immutable",
        ));
    }
    errors
}

/// Upstream `ValidateVolumeAttachment` with the v1 additions (`ValidateVolumeAttachmentV1`):
/// an attacher that is a CSI driver name, exactly one source (a persistent volume name
/// that is a DNS subdomain, or an inline spec with a CSI source), a node name, and the
/// status' metadata size and errors.
pub fn validate_volume_attachment(attachment: &VolumeAttachment) -> ErrorList {
    let mut errors = Vec::new();
    let spec = &attachment.spec;
    let path = Path::new("spec");
    let attacher_path = path.child("attacher");
    if spec.attacher.is_empty() {
        errors.push(FieldError::required(&attacher_path, ""));
    }
    let source_path = path.child("source");
    let exactly_one = "must specify exactly one of inlineVolumeSpec and persistentVolumeName";
    match (
        &spec.source.inline_volume_spec,
        &spec.source.persistent_volume_name,
    ) {
        (None, None) => errors.push(FieldError::required(&source_path, exactly_one)),
        (Some(_), Some(_)) => errors.push(FieldError::forbidden(&source_path, exactly_one)),
        (None, Some(name)) if name.is_empty() => errors.push(FieldError::required(
            &source_path.child("persistentVolumeName"),
            "must specify non empty persistentVolumeName",
        )),
        (Some(inline), None) => {
            // The inline-volume rules of core's ValidatePersistentVolumeSpec.
            let inline_path = source_path.child("inlineVolumeSpec");
            let context = "in the context of inline volumes";
            if inline.claim_ref.is_some() {
                errors.push(FieldError::forbidden(
                    &inline_path.child("claimRef"),
                    format!("may not be specified {context}"),
                ));
            }
            if inline.capacity.as_ref().is_some_and(|c| !c.is_empty()) {
                errors.push(FieldError::forbidden(
                    &inline_path.child("capacity"),
                    format!("may not be specified {context}"),
                ));
            }
            if inline.csi.is_none() {
                errors.push(FieldError::required(
                    &inline_path.child("csi"),
                    format!("has to be specified {context}"),
                ));
            }
        }
        (None, Some(_)) => {}
    }
    invalid_each(
        &mut errors,
        &path.child("nodeName"),
        spec.node_name.as_str(),
        names::name_is_dns_subdomain(&spec.node_name, false),
    );
    if let Some(status) = &attachment.status {
        let status_path = Path::new("status");
        let size: usize = status
            .attachment_metadata
            .iter()
            .flatten()
            .map(|(k, v)| k.len() + v.len())
            .sum();
        if size > MAX_PARAMETERS_SIZE {
            errors.push(FieldError::too_long(
                &status_path.child("attachmentMetadata"),
                MAX_PARAMETERS_SIZE,
            ));
        }
        validate_volume_error(
            &mut errors,
            status.attach_error.as_ref(),
            &status_path.child("attachError"),
        );
        validate_volume_error(
            &mut errors,
            status.detach_error.as_ref(),
            &status_path.child("detachError"),
        );
    }
    // ValidateVolumeAttachmentV1.
    validate_csi_driver_name(&mut errors, &spec.attacher, &attacher_path);
    if let Some(name) = &spec.source.persistent_volume_name {
        invalid_each(
            &mut errors,
            &source_path.child("persistentVolumeName"),
            name.as_str(),
            names::name_is_dns_subdomain(name, false),
        );
    }
    errors
}

/// A volume error's message length (upstream reports the metadata cap, 262144, as the
/// limit) and a non-negative error code.
fn validate_volume_error(errors: &mut ErrorList, error: Option<&VolumeError>, path: &Path) {
    let Some(error) = error else {
        return;
    };
    if error
        .message
        .as_ref()
        .is_some_and(|m| m.len() > MAX_VOLUME_ERROR_MESSAGE)
    {
        errors.push(FieldError::too_long(
            &path.child("message"),
            MAX_PARAMETERS_SIZE,
        ));
    }
    if let Some(code) = error.error_code.filter(|c| *c < 0) {
        errors.push(FieldError::invalid(
            &path.child("errorCode"),
            code,
            names::inclusive_range_error(0, i32::MAX.into()),
        ));
    }
}

/// [`validate_volume_attachment`], then the whole spec immutable.
pub fn validate_volume_attachment_update(
    new: &VolumeAttachment,
    old: &VolumeAttachment,
) -> ErrorList {
    let mut errors = validate_volume_attachment(new);
    if new.spec != old.spec {
        errors.push(FieldError::invalid(
            &Path::new("spec"),
            json(&new.spec),
            "field is immutable",
        ));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json as j;

    fn messages(errors: &ErrorList) -> Vec<String> {
        errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn storage_class_rules_match_upstream() {
        let mut class: StorageClass =
            serde_json::from_value(j!({"metadata": {"name": "fast"}, "provisioner": "x/y/z"}))
                .unwrap();
        default_storage_class(&mut class);
        assert_eq!(class.reclaim_policy.as_deref(), Some("Delete"));
        assert_eq!(class.volume_binding_mode.as_deref(), Some("Immediate"));
        let errors = messages(&validate_storage_class(&class));
        assert_eq!(errors.len(), 1);
        assert!(errors[0].starts_with("provisioner: Invalid value: \"x/y/z\": a valid label key"));

        class.provisioner = "example.com/fast".into();
        class.reclaim_policy = Some("Recycle".into());
        assert_eq!(
            messages(&validate_storage_class(&class)),
            [
                r#"reclaimPolicy: Unsupported value: "Recycle": supported values: "Delete", "Retain""#
            ]
        );
        class.reclaim_policy = Some("Delete".into());
        let mut changed = class.clone();
        changed.provisioner = "example.com/slow".into();
        changed.reclaim_policy = Some("Retain".into());
        changed.volume_binding_mode = Some("WaitForFirstConsumer".into());
        changed.parameters = Some([("type".to_owned(), "ssd".to_owned())].into());
        assert_eq!(
            messages(&validate_storage_class_update(&changed, &class)),
            [
                "parameters: Forbidden: updates to parameters are forbidden.",
                "provisioner: Forbidden: updates to provisioner are forbidden.",
                "reclaimPolicy: Forbidden: updates to reclaimPolicy are forbidden.",
                r#"volumeBindingMode: Invalid value: "WaitForFirstConsumer": field is immutable"#,
            ]
        );
    }

    #[test]
    fn csi_driver_defaults_and_immutable_fields() {
        let mut driver: CSIDriver =
            serde_json::from_value(j!({"metadata": {"name": "d.example.com"}, "spec": {}}))
                .unwrap();
        default_csi_driver(&mut driver);
        assert!(validate_csi_driver(&driver).is_empty());
        assert_eq!(driver.spec.attach_required, Some(true));
        assert_eq!(
            driver.spec.volume_lifecycle_modes,
            Some(vec!["Persistent".to_owned()])
        );
        let mut changed = driver.clone();
        changed.spec.attach_required = Some(false);
        changed.spec.pod_info_on_mount = Some(true);
        assert_eq!(
            messages(&validate_csi_driver_update(&changed, &driver)),
            ["spec.attachedRequired: Invalid value: false: field is immutable"]
        );
        changed.spec.fs_group_policy = Some("Always".into());
        assert_eq!(
            messages(&validate_csi_driver(&changed)),
            [
                r#"spec.fsGroupPolicy: Unsupported value: "Always": supported values: "File", "None", "ReadWriteOnceWithFSType""#
            ]
        );
    }

    #[test]
    fn csi_node_drivers_are_checked() {
        let node: CSINode = serde_json::from_value(j!({
            "metadata": {"name": "n1"},
            "spec": {"drivers": [
                {"name": "a.example.com", "nodeID": "n1", "topologyKeys": ["zone", "zone"]},
                {"name": "a.example.com", "nodeID": ""},
            ]},
        }))
        .unwrap();
        assert_eq!(
            messages(&validate_csi_node(&node)),
            [
                r#"spec.drivers[0]: Duplicate value: "zone""#,
                "spec.drivers[1].nodeID: Required value",
                r#"spec.drivers[1].name: Duplicate value: "a.example.com""#,
            ]
        );
    }

    #[test]
    fn volume_attachment_needs_one_source() {
        let attachment: VolumeAttachment = serde_json::from_value(j!({
            "metadata": {"name": "va"},
            "spec": {"attacher": "csi.example.com", "nodeName": "n1", "source": {}},
        }))
        .unwrap();
        assert_eq!(
            messages(&validate_volume_attachment(&attachment)),
            [
                "spec.source: Required value: must specify exactly one of inlineVolumeSpec and persistentVolumeName"
            ]
        );
    }
}
