//! The informer event handlers that the ReplicaSet, DaemonSet and StatefulSet
//! controllers share: each owns pods it finds by its selector, and upstream writes the
//! same `addPod`, `updatePod`, `deletePod` (and `addHistory`, `updateHistory`,
//! `deleteHistory` for ControllerRevisions) in each of them.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{self as meta, ObjectMeta};
use skiff_api::core::pod::conditions::is_pod_ready;
use skiff_api::selector::LabelSelector;
use skiff_client::cache::{Delta, SharedInformer, Watchable, object_key};
use skiff_client::workqueue::WorkQueue;

use crate::controller_utils::{Expectations, controller_of, pod_key, resolve_controller_ref};

/// A workload that owns the pods its selector matches, through a controller reference.
pub(crate) trait PodOwner: Watchable {
    /// `spec.selector`.
    fn selector(&self) -> &meta::LabelSelector;
    /// `spec.minReadySeconds`; 0 when absent.
    fn min_ready_seconds(&self) -> i32;
}

impl PodOwner for ReplicaSet {
    fn selector(&self) -> &meta::LabelSelector {
        &self.spec.selector
    }
    fn min_ready_seconds(&self) -> i32 {
        self.spec.min_ready_seconds.unwrap_or(0)
    }
}

impl PodOwner for DaemonSet {
    fn selector(&self) -> &meta::LabelSelector {
        &self.spec.selector
    }
    fn min_ready_seconds(&self) -> i32 {
        self.spec.min_ready_seconds.unwrap_or(0)
    }
}

impl PodOwner for StatefulSet {
    fn selector(&self) -> &meta::LabelSelector {
        &self.spec.selector
    }
    fn min_ready_seconds(&self) -> i32 {
        self.spec.min_ready_seconds.unwrap_or(0)
    }
}

/// The handlers over the owners' informer, the controller's work queue (keys
/// `namespace/name`) and its expectations.
pub(crate) struct OwnerHandlers<K> {
    pub(crate) owners: Arc<SharedInformer<K>>,
    pub(crate) queue: Arc<WorkQueue<String>>,
    pub(crate) expectations: Arc<Expectations>,
}

impl<K> Clone for OwnerHandlers<K> {
    fn clone(&self) -> Self {
        Self {
            owners: Arc::clone(&self.owners),
            queue: Arc::clone(&self.queue),
            expectations: Arc::clone(&self.expectations),
        }
    }
}

impl<K: PodOwner> OwnerHandlers<K> {
    /// The cached owner that controls the object (upstream `resolveControllerRef`).
    pub(crate) fn owner(&self, meta: &ObjectMeta) -> Option<Arc<K>> {
        resolve_controller_ref(self.owners.store(), meta)
    }

    /// Queues the owners of the object's namespace whose selector matches it: an
    /// orphan may be adopted (upstream `getPodReplicaSets`, `getDaemonSetsForPod`,
    /// `getStatefulSetsForPod`). An empty selector matches nothing.
    pub(crate) fn queue_matching(&self, meta: &ObjectMeta) {
        let ns = meta.namespace.as_deref();
        let labels = meta.labels.clone().unwrap_or_default();
        for owner in self.owners.store().list() {
            if owner.meta().namespace.as_deref() != ns {
                continue;
            }
            if LabelSelector::from_meta(owner.selector())
                .is_ok_and(|s| !s.is_empty() && s.matches(&labels))
            {
                self.queue.add(object_key(owner.as_ref()));
            }
        }
    }

    fn pod_deleted(&self, pod: &Pod) {
        if let Some(owner) = self.owner(&pod.metadata) {
            let key = object_key(owner.as_ref());
            self.expectations.deletion_observed(&key, &pod_key(pod));
            self.queue.add(key);
        }
    }

    /// Upstream `addPod`, `updatePod`, `deletePod`: the owner's expectations observe
    /// the pod, and the owner (or, for an orphan, every owner that may adopt it) is
    /// queued. A pod that turned ready queues its owner again after `minReadySeconds`,
    /// when it becomes available.
    pub(crate) fn on_pod(&self, delta: &Delta<Pod>) {
        match delta {
            Delta::Added(pod) => {
                if pod.metadata.deletion_timestamp.is_some() {
                    self.pod_deleted(pod);
                } else if let Some(owner) = self.owner(&pod.metadata) {
                    let key = object_key(owner.as_ref());
                    self.expectations.creation_observed(&key);
                    self.queue.add(key);
                } else if controller_of(&pod.metadata).is_none() {
                    self.queue_matching(&pod.metadata);
                }
            }
            Delta::Updated(old, new) => {
                let labels_changed = old.metadata.labels != new.metadata.labels;
                if new.metadata.deletion_timestamp.is_some() {
                    self.pod_deleted(new);
                    if labels_changed {
                        self.pod_deleted(old);
                    }
                    return;
                }
                let ref_changed = controller_of(&old.metadata) != controller_of(&new.metadata);
                if ref_changed && let Some(owner) = self.owner(&old.metadata) {
                    self.queue.add(object_key(owner.as_ref()));
                }
                if let Some(owner) = self.owner(&new.metadata) {
                    let key = object_key(owner.as_ref());
                    let min_ready = owner.min_ready_seconds();
                    if min_ready > 0 && !is_pod_ready(old) && is_pod_ready(new) {
                        self.queue.add_after(
                            key.clone(),
                            Duration::from_secs(u64::try_from(min_ready).unwrap_or(0) + 1),
                        );
                    }
                    self.queue.add(key);
                } else if (labels_changed || ref_changed) && controller_of(&new.metadata).is_none()
                {
                    self.queue_matching(&new.metadata);
                }
            }
            Delta::Deleted(pod) => self.pod_deleted(pod),
        }
    }

    /// Upstream `addHistory`, `updateHistory`, `deleteHistory`: the owner of a
    /// ControllerRevision is queued, or for an orphan every owner that may adopt it.
    pub(crate) fn on_revision(&self, delta: &Delta<ControllerRevision>) {
        match delta {
            Delta::Added(r) | Delta::Deleted(r) => {
                if let Some(owner) = self.owner(&r.metadata) {
                    self.queue.add(object_key(owner.as_ref()));
                } else if controller_of(&r.metadata).is_none() && matches!(delta, Delta::Added(_)) {
                    self.queue_matching(&r.metadata);
                }
            }
            Delta::Updated(old, new) => {
                let ref_changed = controller_of(&old.metadata) != controller_of(&new.metadata);
                if ref_changed && let Some(owner) = self.owner(&old.metadata) {
                    self.queue.add(object_key(owner.as_ref()));
                }
                if let Some(owner) = self.owner(&new.metadata) {
                    self.queue.add(object_key(owner.as_ref()));
                } else if controller_of(&new.metadata).is_none()
                    && (ref_changed || old.metadata.labels != new.metadata.labels)
                {
                    self.queue_matching(&new.metadata);
                }
            }
        }
    }

    /// The owner itself changed: queued; once deleted, its expectations are dropped.
    pub(crate) fn on_owner(&self, delta: &Delta<K>) {
        match delta {
            Delta::Added(o) | Delta::Updated(_, o) => self.queue.add(object_key(o.as_ref())),
            Delta::Deleted(o) => {
                let key = object_key(o.as_ref());
                self.expectations.delete(&key);
                self.queue.add(key);
            }
        }
    }
}
