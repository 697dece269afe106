//! The informer caches the scheduler and its plugins read (upstream's shared informers
//! and listers): a [`Store`] per kind, filled by an informer (`skiff_client::cache`).

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{
    Namespace, PersistentVolume, PersistentVolumeClaim, ReplicationController, Service,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, StorageClass};
use skiff_client::cache::Store;

/// The listers of every kind besides pods and nodes (which go to the scheduler cache).
#[derive(Debug, Default)]
pub struct Listers {
    /// PersistentVolumeClaims by `namespace/name`.
    pub pvcs: Store<PersistentVolumeClaim>,
    /// PersistentVolumes by name.
    pub pvs: Store<PersistentVolume>,
    /// StorageClasses by name.
    pub storage_classes: Store<StorageClass>,
    /// CSINodes by name.
    pub csi_nodes: Store<CSINode>,
    /// CSIDrivers by name.
    pub csi_drivers: Store<CSIDriver>,
    /// Namespaces by name.
    pub namespaces: Store<Namespace>,
    /// PodDisruptionBudgets by `namespace/name`.
    pub pdbs: Store<PodDisruptionBudget>,
    /// Services by `namespace/name` (PodTopologySpread's default constraints).
    pub services: Store<Service>,
    /// ReplicaSets by `namespace/name` (PodTopologySpread's default constraints).
    pub replica_sets: Store<ReplicaSet>,
    /// StatefulSets by `namespace/name` (PodTopologySpread's default constraints).
    pub stateful_sets: Store<StatefulSet>,
    /// ReplicationControllers by `namespace/name` (PodTopologySpread's default
    /// constraints).
    pub replication_controllers: Store<ReplicationController>,
}
