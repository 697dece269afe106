//! PersistentVolumes and PersistentVolumeClaims (upstream `pkg/registry/core/persistentvolume`,
//! `persistentvolumeclaim`).

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};
use skiff_api::core::persistent_volume::{
    default_persistent_volume, default_persistent_volume_claim, validate_persistent_volume,
    validate_persistent_volume_claim, validate_persistent_volume_claim_update,
};
use skiff_api::field::ErrorList;

use crate::registry::printers::{AGE, NAME, age, column, name, wide};
use crate::registry::{ResourceInfo, Strategy, TableColumn};

/// The beta annotation that named a storage class before `storageClassName`.
const STORAGE_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";

/// Upstream `GetAccessModesAsString`: `RWO,ROX,RWX,RWOP` in that order.
fn access_modes(modes: Option<&Vec<String>>) -> String {
    let modes = modes.map(Vec::as_slice).unwrap_or_default();
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .iter()
    .filter(|(mode, _)| modes.iter().any(|m| m == mode))
    .map(|(_, short)| *short)
    .collect::<Vec<_>>()
    .join(",")
}

/// The storage class: the beta annotation, else `storageClassName`.
fn storage_class(meta: &ObjectMeta, class_name: Option<&String>) -> String {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(STORAGE_CLASS_ANNOTATION))
        .or(class_name)
        .cloned()
        .unwrap_or_default()
}

/// `Terminating` for objects being deleted, else the phase.
fn phase(meta: &ObjectMeta, phase: Option<&String>) -> String {
    if meta.deletion_timestamp.is_some() {
        "Terminating".to_owned()
    } else {
        phase.cloned().unwrap_or_default()
    }
}

fn unset(value: Option<&String>) -> String {
    value
        .filter(|v| !v.is_empty())
        .cloned()
        .unwrap_or_else(|| "<unset>".to_owned())
}

/// The persistentvolumes kind.
pub struct PersistentVolumes;

impl Strategy for PersistentVolumes {
    type Object = PersistentVolume;

    fn info(&self) -> ResourceInfo {
        ResourceInfo {
            short_names: &["pv"],
            ..ResourceInfo::of::<PersistentVolume>()
        }
    }

    fn status_subresource(&self) -> bool {
        true
    }

    fn return_deleted_object(&self) -> bool {
        true
    }

    fn default(&self, object: &mut PersistentVolume) {
        default_persistent_volume(object);
    }

    /// Upstream PrepareForCreate: a new volume is `Pending`.
    fn prepare_for_create(&self, object: &mut PersistentVolume) {
        object.status = None;
        default_persistent_volume(object);
    }

    fn validate(&self, object: &PersistentVolume) -> ErrorList {
        validate_persistent_volume(object)
    }

    /// NAME CAPACITY ACCESS MODES RECLAIM POLICY STATUS CLAIM STORAGECLASS
    /// VOLUMEATTRIBUTESCLASS REASON AGE, and VOLUMEMODE with `-o wide`.
    fn columns(&self) -> Vec<TableColumn> {
        vec![
            NAME,
            column(
                "Capacity",
                "string",
                "capacity is the description of the persistent volume's resources and capacity.",
                0,
            ),
            column(
                "Access Modes",
                "string",
                "accessModes contains all ways the volume can be mounted.",
                0,
            ),
            column(
                "Reclaim Policy",
                "string",
                "persistentVolumeReclaimPolicy defines what happens to a persistent volume when released from its claim.",
                0,
            ),
            column(
                "Status",
                "string",
                "phase indicates if a volume is available, bound to a claim, or released by a claim.",
                0,
            ),
            column(
                "Claim",
                "string",
                "claimRef is part of a bi-directional binding between PersistentVolume and PersistentVolumeClaim.",
                0,
            ),
            column("StorageClass", "string", "StorageClass of the pv", 0),
            column(
                "VolumeAttributesClass",
                "string",
                "VolumeAttributesClass of the pv",
                0,
            ),
            column(
                "Reason",
                "string",
                "reason is a brief CamelCase string that describes any failure and is meant for machine parsing and tidy display in the CLI.",
                0,
            ),
            AGE,
            wide(
                "VolumeMode",
                "string",
                "volumeMode defines if a volume is intended to be used with a formatted filesystem or to remain in raw block state.",
            ),
        ]
    }

    fn row(&self, pv: &PersistentVolume) -> Vec<Value> {
        let spec = pv.spec.clone().unwrap_or_default();
        let status = pv.status.clone().unwrap_or_default();
        let claim = spec.claim_ref.as_ref().map_or_else(String::new, |c| {
            format!(
                "{}/{}",
                c.namespace.clone().unwrap_or_default(),
                c.name.clone().unwrap_or_default()
            )
        });
        let capacity = spec
            .capacity
            .as_ref()
            .and_then(|c| c.get("storage"))
            .map_or("0".to_owned(), |q| q.0.clone());
        vec![
            json!(name(&pv.metadata)),
            json!(capacity),
            json!(access_modes(spec.access_modes.as_ref())),
            json!(spec.persistent_volume_reclaim_policy.unwrap_or_default()),
            json!(phase(&pv.metadata, status.phase.as_ref())),
            json!(claim),
            json!(storage_class(
                &pv.metadata,
                spec.storage_class_name.as_ref()
            )),
            json!(unset(spec.volume_attributes_class_name.as_ref())),
            json!(status.reason.unwrap_or_default()),
            json!(age(&pv.metadata)),
            json!(unset(spec.volume_mode.as_ref())),
        ]
    }
}

/// The persistentvolumeclaims kind.
pub struct PersistentVolumeClaims;

impl Strategy for PersistentVolumeClaims {
    type Object = PersistentVolumeClaim;

    fn info(&self) -> ResourceInfo {
        ResourceInfo {
            short_names: &["pvc"],
            ..ResourceInfo::of::<PersistentVolumeClaim>()
        }
    }

    fn status_subresource(&self) -> bool {
        true
    }

    fn return_deleted_object(&self) -> bool {
        true
    }

    fn default(&self, object: &mut PersistentVolumeClaim) {
        default_persistent_volume_claim(object);
    }

    /// Upstream PrepareForCreate: a new claim is `Pending`.
    fn prepare_for_create(&self, object: &mut PersistentVolumeClaim) {
        object.status = None;
        default_persistent_volume_claim(object);
    }

    fn validate(&self, object: &PersistentVolumeClaim) -> ErrorList {
        validate_persistent_volume_claim(object)
    }

    fn validate_update(
        &self,
        new: &PersistentVolumeClaim,
        old: &PersistentVolumeClaim,
    ) -> ErrorList {
        validate_persistent_volume_claim_update(new, old)
    }

    /// NAME STATUS VOLUME CAPACITY ACCESS MODES STORAGECLASS VOLUMEATTRIBUTESCLASS AGE, and
    /// VOLUMEMODE with `-o wide`.
    fn columns(&self) -> Vec<TableColumn> {
        vec![
            NAME,
            column(
                "Status",
                "string",
                "phase represents the current phase of PersistentVolumeClaim.",
                0,
            ),
            column(
                "Volume",
                "string",
                "volumeName is the binding reference to the PersistentVolume backing this claim.",
                0,
            ),
            column(
                "Capacity",
                "string",
                "capacity represents the actual resources of the underlying volume.",
                0,
            ),
            column(
                "Access Modes",
                "string",
                "accessModes contains the desired access modes the volume should have.",
                0,
            ),
            column("StorageClass", "string", "StorageClass of the pvc", 0),
            column(
                "VolumeAttributesClass",
                "string",
                "VolumeAttributesClass of the pvc",
                0,
            ),
            AGE,
            wide(
                "VolumeMode",
                "string",
                "volumeMode defines what type of volume is required by the claim.",
            ),
        ]
    }

    fn row(&self, pvc: &PersistentVolumeClaim) -> Vec<Value> {
        let spec = pvc.spec.clone().unwrap_or_default();
        let status = pvc.status.clone().unwrap_or_default();
        let volume = spec.volume_name.clone().unwrap_or_default();
        let (capacity, modes) = if volume.is_empty() {
            (String::new(), String::new())
        } else {
            let capacity = status
                .capacity
                .as_ref()
                .and_then(|c| c.get("storage"))
                .map_or("0".to_owned(), |q| q.0.clone());
            (capacity, access_modes(status.access_modes.as_ref()))
        };
        vec![
            json!(name(&pvc.metadata)),
            json!(phase(&pvc.metadata, status.phase.as_ref())),
            json!(volume),
            json!(capacity),
            json!(modes),
            json!(storage_class(
                &pvc.metadata,
                spec.storage_class_name.as_ref()
            )),
            json!(unset(spec.volume_attributes_class_name.as_ref())),
            json!(age(&pvc.metadata)),
            json!(unset(spec.volume_mode.as_ref())),
        ]
    }
}
