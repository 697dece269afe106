//! The last start failure of each container (upstream `pkg/kubelet/reason_cache.go`),
//! shown as the waiting reason of containers that are due to be (re)started.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::kuberuntime::sync_result::{PodSyncResult, SyncError};

/// Last start failure per pod UID and container name.
#[derive(Default)]
pub struct ReasonCache {
    reasons: Mutex<HashMap<(String, String), SyncError>>,
}

impl ReasonCache {
    /// Records the start results of a SyncPod: failures are remembered, successes clear.
    pub fn update(&self, uid: &str, result: &PodSyncResult) {
        let mut reasons = self.lock();
        for (name, error) in &result.start_results {
            let key = (uid.to_owned(), name.clone());
            match error {
                Some(e) => reasons.insert(key, e.clone()),
                None => reasons.remove(&key),
            };
        }
    }

    /// The last failure of container `name` of pod `uid`.
    pub fn get(&self, uid: &str, name: &str) -> Option<SyncError> {
        self.lock().get(&(uid.to_owned(), name.to_owned())).cloned()
    }

    /// Forgets a pod.
    pub fn remove_pod(&self, uid: &str) {
        self.lock().retain(|(u, _), _| u != uid);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), SyncError>> {
        self.reasons
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
