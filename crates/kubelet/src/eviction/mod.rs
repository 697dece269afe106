//! The eviction manager (upstream `pkg/kubelet/eviction`): watches memory and disk
//! signals against the hard thresholds, reclaims node-level resources (dead containers,
//! unused images) and, if that is not enough, evicts one pod per cycle, ranked by usage
//! above requests and priority; the pod ends `Failed` with reason `Evicted`.

mod manager;
pub mod rank;
pub mod signals;
pub mod threshold;
pub mod usage;

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, PoisonError};

pub use manager::{EvictionManager, EvictionManagerConfig, NodeConditions};

/// The pod status reason of an evicted pod (upstream `eviction.Reason`).
pub const REASON: &str = "Evicted";
/// The condition added to an evicted pod (upstream `v1.DisruptionTarget`).
pub const DISRUPTION_TARGET: &str = "DisruptionTarget";
/// Its reason (upstream `v1.PodReasonTerminationByKubelet`).
pub const TERMINATION_BY_KUBELET: &str = "TerminationByKubelet";

#[derive(Default)]
struct State {
    /// Eviction messages by pod UID.
    messages: HashMap<String, String>,
    /// Pods whose eviction waits for their termination.
    pending: HashSet<String>,
}

/// Pods being or having been evicted, shared between the eviction manager (which requests
/// evictions) and the pod workers (which apply them when they terminate the pod, and never
/// restart an evicted pod).
#[derive(Default)]
pub struct EvictedPods {
    state: Mutex<State>,
}

impl EvictedPods {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records the eviction of pod `uid` with its status `message`.
    pub fn request(&self, uid: &str, message: String) {
        let mut state = self.lock();
        state.messages.insert(uid.to_owned(), message);
        state.pending.insert(uid.to_owned());
    }

    /// The eviction message of pod `uid`, if it is being or was evicted.
    pub fn message(&self, uid: &str) -> Option<String> {
        self.lock().messages.get(uid).cloned()
    }

    /// Marks the eviction of `uid` done: the pod is terminated.
    pub fn complete(&self, uid: &str) {
        self.lock().pending.remove(uid);
    }

    /// True when pod `uid` is being or was evicted.
    pub fn is_evicted(&self, uid: &str) -> bool {
        self.lock().messages.contains_key(uid)
    }

    /// True while the eviction of `uid` waits for the pod's termination.
    pub fn is_pending(&self, uid: &str) -> bool {
        self.lock().pending.contains(uid)
    }

    /// Forgets pod `uid` (it was deleted).
    pub fn forget(&self, uid: &str) {
        let mut state = self.lock();
        state.pending.remove(uid);
        state.messages.remove(uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eviction_lifecycle() {
        let e = EvictedPods::default();
        assert!(!e.is_evicted("u"));
        e.request("u", "low".into());
        assert!(e.is_evicted("u") && e.is_pending("u"));
        assert_eq!(e.message("u").as_deref(), Some("low"));
        e.complete("u");
        assert!(e.is_evicted("u") && !e.is_pending("u"));
        assert_eq!(e.message("u").as_deref(), Some("low"));
        e.forget("u");
        assert!(!e.is_evicted("u") && e.message("u").is_none());
    }
}
