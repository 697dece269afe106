//! storage.k8s.io/v1 (upstream `pkg/registry/storage`): csidrivers, csinodes,
//! csistoragecapacities, storageclasses and volumeattachments, with the table columns of
//! upstream's printers (`pkg/printers/internalversion/printers.go`).

use k8s_openapi::api::storage::v1::{
    CSIDriver, CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment,
};
use serde_json::Value;
use skiff_api::field::ErrorList;
use skiff_api::storage;

use super::printers::{self, AGE, NAME, column};
use super::{Registry, ResourceInfo, Strategy, TableColumn};

#[cfg(test)]
mod tests;

/// Adds the storage.k8s.io/v1 kinds in upstream's discovery order.
pub fn add(registry: &mut Registry) {
    registry.add(CsiDrivers);
    registry.add(CsiNodes);
    registry.add(CsiStorageCapacities);
    registry.add(StorageClasses);
    registry.add(VolumeAttachments);
}

// Column descriptions: the fields' API documentation, as upstream's printers take them
// from the types' SwaggerDoc.
const SC_PROVISIONER: &str = "provisioner indicates the type of the provisioner.";
const SC_RECLAIM: &str = "reclaimPolicy controls the reclaimPolicy for dynamically provisioned PersistentVolumes of this storage class. Defaults to Delete.";
const SC_BINDING: &str = "volumeBindingMode indicates how PersistentVolumeClaims should be provisioned and bound.  When unset, VolumeBindingImmediate is used. This field is only honored by servers that enable the VolumeScheduling feature.";
const SC_EXPANSION: &str =
    "allowVolumeExpansion shows whether the storage class allow volume expand.";
const VA_ATTACHER: &str = "attacher indicates the name of the volume driver that MUST handle this request. This is the name returned by GetPluginName().";
const VA_PV: &str = "persistentVolumeName represents the name of the persistent volume to attach.";
const VA_NODE: &str = "nodeName represents the node that the volume should be attached to.";
const VA_ATTACHED: &str = "attached indicates the volume is successfully attached. This field must only be set by the entity completing the attach operation, i.e. the external-attacher.";
const CD_ATTACH: &str = "attachRequired indicates this CSI volume driver requires an attach operation (because it implements the CSI ControllerPublishVolume() method), and that the Kubernetes attach detach controller should call the attach volume interface which checks the volumeattachment status and waits until the volume is attached before proceeding to mounting. The CSI external-attacher coordinates with CSI volume driver and updates the volumeattachment status when the attach operation is complete. If the CSIDriverRegistry feature gate is enabled and the value is specified to false, the attach operation will be skipped. Otherwise the attach operation will be called.\n\nThis field is immutable.";
const CD_PODINFO: &str = "podInfoOnMount indicates this CSI volume driver requires additional pod information (like podName, podUID, etc.) during mount operations, if set to true. If set to false, pod information will not be passed on mount. Default is false.\n\nThe CSI driver specifies podInfoOnMount as part of driver deployment. If true, Kubelet will pass pod information as VolumeContext in the CSI NodePublishVolume() calls. The CSI driver is responsible for parsing and validating the information passed in as VolumeContext.\n\nThe following VolumeContext will be passed if podInfoOnMount is set to true. This list might grow, but the prefix will be used. \"csi.storage.k8s.io/pod.name\": pod.Name \"csi.storage.k8s.io/pod.namespace\": pod.Namespace \"csi.storage.k8s.io/pod.uid\": string(pod.UID) \"csi.storage.k8s.io/ephemeral\": \"true\" if the volume is an ephemeral inline volume\ndefined by a CSIVolumeSource, otherwise \"false\"\n\n\"csi.storage.k8s.io/ephemeral\" is a new feature in Kubernetes 1.16. It is only required for drivers which support both the \"Persistent\" and \"Ephemeral\" VolumeLifecycleMode. Other drivers can leave pod info disabled and/or ignore this field. As Kubernetes 1.15 doesn't support this field, drivers can only support one mode when deployed on such a cluster and the deployment determines which mode that is, for example via a command line parameter of the driver.\n\nThis field was immutable in Kubernetes < 1.29 and now is mutable.";
const CD_CAPACITY: &str = "storageCapacity indicates that the CSI volume driver wants pod scheduling to consider the storage capacity that the driver deployment will report by creating CSIStorageCapacity objects with capacity information, if set to true.\n\nThe check can be enabled immediately when deploying a driver. In that case, provisioning new volumes with late binding will pause until the driver deployment has published some suitable CSIStorageCapacity object.\n\nAlternatively, the driver can be deployed with the field unset or false and it can be flipped later when storage capacity information has been published.\n\nThis field was immutable in Kubernetes <= 1.22 and now is mutable.";
const CD_TOKENS: &str = "tokenRequests indicates the CSI driver needs pods' service account tokens it is mounting volume for to do necessary authentication. Kubelet will pass the tokens in VolumeContext in the CSI NodePublishVolume calls. The CSI driver should parse and validate the following VolumeContext: \"csi.storage.k8s.io/serviceAccount.tokens\": {\n\"<audience>\": {\n\"token\": <token>,\n\"expirationTimestamp\": <expiration timestamp in RFC3339>,\n},\n...\n}\n\nNote: Audience in each TokenRequest should be different and at most one token is empty string. To receive a new token after expiry, RequiresRepublish can be used to trigger NodePublishVolume periodically.";
const CD_REPUBLISH: &str = "requiresRepublish indicates the CSI driver wants `NodePublishVolume` being periodically called to reflect any possible change in the mounted volume. This field defaults to false.\n\nNote: After a successful initial NodePublishVolume call, subsequent calls to NodePublishVolume should only update the contents of the volume. New mount points will not be seen by a running container.";
const CD_MODES: &str = "volumeLifecycleModes defines what kind of volumes this CSI volume driver supports. The default if the list is empty is \"Persistent\", which is the usage defined by the CSI specification and implemented in Kubernetes via the usual PV/PVC mechanism.\n\nThe other mode is \"Ephemeral\". In this mode, volumes are defined inline inside the pod spec with CSIVolumeSource and their lifecycle is tied to the lifecycle of that pod. A driver has to be aware of this because it is only going to get a NodePublishVolume call for such a volume.\n\nFor more information about implementing this mode, see https://kubernetes-csi.github.io/docs/ephemeral-local-volumes.html A driver can support one or more of these modes and more modes may be added in the future.\n\nThis field is beta. This field is immutable.";
const CSC_CLASS: &str = "storageClassName represents the name of the StorageClass that the reported capacity applies to. It must meet the same requirements as the name of a StorageClass object (non-empty, DNS subdomain). If that object no longer exists, the CSIStorageCapacity object is obsolete and should be removed by its creator. This field is immutable.";
const CSC_CAPACITY: &str = "capacity is the value reported by the CSI driver in its GetCapacityResponse for a GetCapacityRequest with topology and parameters that match the previous fields.\n\nThe semantic is currently (CSI spec 1.2) defined as: The available capacity, in bytes, of the storage that can be used to provision volumes. If not set, that information is currently unavailable.";

/// The annotations that mark the default storage class (upstream
/// `storageutil.IsDefaultAnnotation`).
const DEFAULT_CLASS_ANNOTATIONS: &[&str] = &[
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
];

/// `sc`; cluster-scoped; provisioner, parameters, reclaim policy and binding mode fixed
/// once created.
pub struct StorageClasses;

impl Strategy for StorageClasses {
    type Object = StorageClass;

    fn info(&self) -> ResourceInfo {
        ResourceInfo {
            short_names: &["sc"],
            ..ResourceInfo::of::<StorageClass>()
        }
    }

    fn default(&self, object: &mut StorageClass) {
        storage::default_storage_class(object);
    }

    fn validate(&self, object: &StorageClass) -> ErrorList {
        storage::validate_storage_class(object)
    }

    fn validate_update(&self, new: &StorageClass, old: &StorageClass) -> ErrorList {
        storage::validate_storage_class_update(new, old)
    }

    fn columns(&self) -> Vec<TableColumn> {
        vec![
            NAME,
            column("Provisioner", "string", SC_PROVISIONER, 0),
            column("ReclaimPolicy", "string", SC_RECLAIM, 0),
            column("VolumeBindingMode", "string", SC_BINDING, 0),
            column("AllowVolumeExpansion", "string", SC_EXPANSION, 0),
            AGE,
        ]
    }

    /// The name gets ` (default)` when an is-default-class annotation says `true`.
    fn row(&self, object: &StorageClass) -> Vec<Value> {
        let annotations = object.metadata.annotations.as_ref();
        let is_default = DEFAULT_CLASS_ANNOTATIONS.iter().any(|key| {
            annotations
                .and_then(|a| a.get(*key))
                .is_some_and(|v| v == "true")
        });
        let mut name = printers::name(&object.metadata);
        if is_default {
            name.push_str(" (default)");
        }
        vec![
            Value::from(name),
            Value::from(object.provisioner.clone()),
            Value::from(object.reclaim_policy.as_deref().unwrap_or("Delete")),
            Value::from(object.volume_binding_mode.as_deref().unwrap_or("Immediate")),
            Value::from(object.allow_volume_expansion.unwrap_or(false)),
            printers::age(&object.metadata),
        ]
    }
}

/// Cluster-scoped; generation follows the spec; attachRequired and volumeLifecycleModes
/// fixed once created.
pub struct CsiDrivers;

impl Strategy for CsiDrivers {
    type Object = CSIDriver;

    fn bumps_generation(&self) -> bool {
        true
    }

    fn default(&self, object: &mut CSIDriver) {
        storage::default_csi_driver(object);
    }

    fn prepare_for_create(&self, object: &mut CSIDriver) {
        storage::drop_disabled_csi_driver_fields(object, None);
    }

    fn prepare_for_update(&self, new: &mut CSIDriver, old: &CSIDriver) {
        storage::drop_disabled_csi_driver_fields(new, Some(old));
    }

    fn validate(&self, object: &CSIDriver) -> ErrorList {
        storage::validate_csi_driver(object)
    }

    fn validate_update(&self, new: &CSIDriver, old: &CSIDriver) -> ErrorList {
        storage::validate_csi_driver_update(new, old)
    }

    fn columns(&self) -> Vec<TableColumn> {
        vec![
            NAME,
            column("AttachRequired", "boolean", CD_ATTACH, 0),
            column("PodInfoOnMount", "boolean", CD_PODINFO, 0),
            column("StorageCapacity", "boolean", CD_CAPACITY, 0),
            column("TokenRequests", "string", CD_TOKENS, 0),
            column("RequiresRepublish", "boolean", CD_REPUBLISH, 0),
            column("Modes", "string", CD_MODES, 0),
            AGE,
        ]
    }

    fn row(&self, object: &CSIDriver) -> Vec<Value> {
        let spec = &object.spec;
        let modes = spec
            .volume_lifecycle_modes
            .as_deref()
            .unwrap_or_default()
            .join(",");
        let tokens = spec.token_requests.as_ref().map_or_else(
            || "<unset>".to_owned(),
            |requests| {
                let audiences: Vec<&str> = requests.iter().map(|t| t.audience.as_str()).collect();
                audiences.join(",")
            },
        );
        vec![
            Value::from(printers::name(&object.metadata)),
            Value::from(spec.attach_required.unwrap_or(true)),
            Value::from(spec.pod_info_on_mount.unwrap_or(false)),
            Value::from(spec.storage_capacity.unwrap_or(false)),
            Value::from(tokens),
            Value::from(spec.requires_republish.unwrap_or(false)),
            Value::from(printers::or(Some(modes.as_str()), "<none>")),
            printers::age(&object.metadata),
        ]
    }
}

/// Cluster-scoped; a driver's entry may not change while it stays registered.
pub struct CsiNodes;

impl Strategy for CsiNodes {
    type Object = CSINode;

    fn validate(&self, object: &CSINode) -> ErrorList {
        storage::validate_csi_node(object)
    }

    fn validate_update(&self, new: &CSINode, old: &CSINode) -> ErrorList {
        storage::validate_csi_node_update(new, old)
    }

    fn columns(&self) -> Vec<TableColumn> {
        vec![
            NAME,
            column(
                "Drivers",
                "integer",
                "Drivers indicates the number of CSI drivers registered on the node",
                0,
            ),
            AGE,
        ]
    }

    fn row(&self, object: &CSINode) -> Vec<Value> {
        vec![
            Value::from(printers::name(&object.metadata)),
            Value::from(object.spec.drivers.len()),
            printers::age(&object.metadata),
        ]
    }
}

/// Namespaced; node topology and storage class fixed once created.
pub struct CsiStorageCapacities;

impl Strategy for CsiStorageCapacities {
    type Object = CSIStorageCapacity;

    fn validate(&self, object: &CSIStorageCapacity) -> ErrorList {
        storage::validate_csi_storage_capacity(object)
    }

    fn validate_update(&self, new: &CSIStorageCapacity, old: &CSIStorageCapacity) -> ErrorList {
        storage::validate_csi_storage_capacity_update(new, old)
    }

    /// Upstream prints no Age column for these.
    fn columns(&self) -> Vec<TableColumn> {
        vec![
            NAME,
            column("StorageClassName", "string", CSC_CLASS, 0),
            column("Capacity", "string", CSC_CAPACITY, 0),
        ]
    }

    fn row(&self, object: &CSIStorageCapacity) -> Vec<Value> {
        vec![
            Value::from(printers::name(&object.metadata)),
            Value::from(object.storage_class_name.clone()),
            Value::from(printers::or(
                object.capacity.as_ref().map(|q| q.0.as_str()),
                "<unset>",
            )),
        ]
    }
}

/// Cluster-scoped; `/status`; the spec is fixed once created.
pub struct VolumeAttachments;

impl Strategy for VolumeAttachments {
    type Object = VolumeAttachment;

    fn status_subresource(&self) -> bool {
        true
    }

    /// A v1 create may not set the status (upstream keeps it only for v1beta1) and stores
    /// an empty one (`{"attached": false}`).
    fn prepare_for_create(&self, object: &mut VolumeAttachment) {
        object.status = Some(Default::default());
    }

    fn validate(&self, object: &VolumeAttachment) -> ErrorList {
        storage::validate_volume_attachment(object)
    }

    fn validate_update(&self, new: &VolumeAttachment, old: &VolumeAttachment) -> ErrorList {
        storage::validate_volume_attachment_update(new, old)
    }

    fn columns(&self) -> Vec<TableColumn> {
        let attacher = TableColumn {
            format: "name".into(),
            ..column("Attacher", "string", VA_ATTACHER, 0)
        };
        vec![
            NAME,
            attacher,
            column("PV", "string", VA_PV, 0),
            column("Node", "string", VA_NODE, 0),
            column("Attached", "boolean", VA_ATTACHED, 0),
            AGE,
        ]
    }

    fn row(&self, object: &VolumeAttachment) -> Vec<Value> {
        let spec = &object.spec;
        vec![
            Value::from(printers::name(&object.metadata)),
            Value::from(spec.attacher.clone()),
            Value::from(
                spec.source
                    .persistent_volume_name
                    .clone()
                    .unwrap_or_default(),
            ),
            Value::from(spec.node_name.clone()),
            Value::from(object.status.as_ref().is_some_and(|s| s.attached)),
            printers::age(&object.metadata),
        ]
    }
}
