//! The kubelet's garbage collection loops (upstream `StartGarbageCollection`): dead
//! containers every minute, images every 5 minutes.

use std::sync::Arc;

use tracing::warn;

use crate::eviction::EvictedPods;
use crate::images::gc::{IMAGE_GC_PERIOD, ImageGcManager};
use crate::kuberuntime::gc::{CONTAINER_GC_PERIOD, ContainerGc, PodStateProvider};
use crate::pod_manager::PodManager;
use crate::pod_workers::PodWorkerStates;

/// Pod states for the container GC: a pod is deleted when no source has it any more and
/// the pod workers hold it no longer (they were synced with the sources and finished its
/// termination), terminated when deleted or evicted.
pub struct PodStates {
    /// Desired pods.
    pub pod_manager: Arc<PodManager>,
    /// The pods the pod workers hold.
    pub pod_workers: PodWorkerStates,
    /// Evicted pods.
    pub evictions: Arc<EvictedPods>,
}

impl PodStateProvider for PodStates {
    fn should_pod_content_be_removed(&self, uid: &str) -> bool {
        self.pod_manager.get(uid).is_none() && self.pod_workers.should_pod_content_be_removed(uid)
    }

    fn should_pod_runtime_be_removed(&self, uid: &str) -> bool {
        self.should_pod_content_be_removed(uid) || self.evictions.is_evicted(uid)
    }
}

/// Runs the container GC every [`CONTAINER_GC_PERIOD`], forever.
pub async fn container_gc_loop(gc: Arc<ContainerGc>) {
    let mut ticker = tokio::time::interval(CONTAINER_GC_PERIOD);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        for e in gc.garbage_collect(false).await {
            warn!(error = %e, "container garbage collection failed");
        }
    }
}

/// Runs the image GC every [`IMAGE_GC_PERIOD`], forever.
pub async fn image_gc_loop(gc: Arc<ImageGcManager>) {
    let mut ticker = tokio::time::interval(IMAGE_GC_PERIOD);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        if let Err(e) = gc.garbage_collect().await {
            warn!(error = %e, "image garbage collection failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;

    use super::*;

    #[test]
    fn unknown_pods_keep_their_content_until_the_workers_are_synced() {
        let pod_manager = Arc::new(PodManager::default());
        let mut known = Pod::default();
        known.metadata.uid = Some("known".into());
        pod_manager.add_or_update(known);
        let states = PodStates {
            pod_manager,
            pod_workers: PodWorkerStates::default(),
            evictions: Arc::new(EvictedPods::default()),
        };
        // At start, a pod read from a manifest may not have reached the SyncLoop yet.
        assert!(!states.should_pod_content_be_removed("unknown"));
        states.pod_workers.mark_synced();
        assert!(states.should_pod_content_be_removed("unknown"));
        assert!(!states.should_pod_content_be_removed("known"));
        assert!(!states.should_pod_runtime_be_removed("known"));
    }
}
