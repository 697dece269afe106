//! The informer caches the scheduler and its plugins read (upstream's shared informers
//! and listers): a [`Store`] per kind, filled by `kube::runtime::watcher` (LIST, WATCH
//! with bookmarks, relist after `410 Gone`).

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{
    Namespace, PersistentVolume, PersistentVolumeClaim, ReplicationController, Service,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, StorageClass};

/// Objects of one kind by key (`namespace/name`, or `name` for cluster-scoped kinds).
#[derive(Debug)]
pub struct Store<K> {
    objects: RwLock<HashMap<String, Arc<K>>>,
    changed: tokio::sync::Notify,
}

impl<K> Default for Store<K> {
    fn default() -> Self {
        Self {
            objects: RwLock::new(HashMap::new()),
            changed: tokio::sync::Notify::new(),
        }
    }
}

impl<K> Store<K> {
    /// The object under `key`.
    pub fn get(&self, key: &str) -> Option<Arc<K>> {
        self.objects
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
            .cloned()
    }

    /// Every object.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.objects
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect()
    }

    /// Stores `obj` under `key`; the previous object, if any. Wakes the waiters of
    /// [`changed`](Self::changed).
    pub fn insert(&self, key: String, obj: Arc<K>) -> Option<Arc<K>> {
        let old = self
            .objects
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, obj);
        self.changed.notify_waiters();
        old
    }

    /// Removes `key`; the object, if it was there. Wakes the waiters of
    /// [`changed`](Self::changed).
    pub fn remove(&self, key: &str) -> Option<Arc<K>> {
        let old = self
            .objects
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(key);
        self.changed.notify_waiters();
        old
    }

    /// Notified (`notify_waiters`) after every insert and remove: a waiter creates and
    /// `enable`s a `notified()` future, checks the store, then awaits it (as VolumeBinding's
    /// PreBind does while it waits for claims to be bound).
    pub fn changed(&self) -> &tokio::sync::Notify {
        &self.changed
    }

    /// The number of objects.
    pub fn len(&self) -> usize {
        self.objects
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

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
