//! The desired pods (upstream `pkg/kubelet/pod/pod_manager.go`), by UID.

use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError, RwLock};

use k8s_openapi::api::core::v1::Pod;

/// The pods the kubelet should run, as delivered by the pod sources.
#[derive(Default)]
pub struct PodManager {
    pods: RwLock<BTreeMap<String, Arc<Pod>>>,
}

impl PodManager {
    /// Adds or replaces a pod (keyed by its UID; pods without UID are ignored).
    pub fn add_or_update(&self, pod: Pod) -> Option<Arc<Pod>> {
        let uid = pod.metadata.uid.clone()?;
        let pod = Arc::new(pod);
        self.write().insert(uid, pod.clone());
        Some(pod)
    }

    /// Removes a pod, returning it.
    pub fn remove(&self, uid: &str) -> Option<Arc<Pod>> {
        self.write().remove(uid)
    }

    /// The pod with `uid`.
    pub fn get(&self, uid: &str) -> Option<Arc<Pod>> {
        self.pods
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(uid)
            .cloned()
    }

    /// All desired pods, ordered by UID.
    pub fn pods(&self) -> Vec<Arc<Pod>> {
        self.pods
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect()
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Arc<Pod>>> {
        self.pods.write().unwrap_or_else(PoisonError::into_inner)
    }
}
