//! The pod garbage collector (upstream `pkg/controller/podgc/gc_controller.go`), every
//! 20 s:
//!
//! - **terminated pods** (Succeeded or Failed) beyond `--terminated-pod-gc-threshold`
//!   (12,500; 0 turns it off) are deleted, oldest first;
//! - **orphaned pods**, bound to a Node that no longer exists (absent from the cache,
//!   then confirmed by a live read after a 40 s quarantine), are marked Failed with the
//!   `DisruptionTarget` condition (reason `DeletionByPodGC`) and force-deleted;
//! - **unscheduled terminating pods** (a deletion timestamp and no node: no kubelet will
//!   ever confirm them) are force-deleted.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;
use skiff_client::cache::{SharedInformer, SharedInformerFactory};
use tokio_util::sync::CancellationToken;

use crate::Error;
use crate::controller_utils::wait_for_cache_sync;

/// The controller's name (`--controllers`).
pub const NAME: &str = "pod-garbage-collector-controller";
/// How often the collector looks (upstream `gcCheckPeriod`).
const GC_CHECK_PERIOD: Duration = Duration::from_secs(20);
/// How long a Node must be missing before its pods are orphans (upstream
/// `quarantineTime`).
const QUARANTINE: Duration = Duration::from_secs(40);

/// The pod garbage collector; see the module doc.
pub struct PodGc {
    client: kube::Client,
    pods: Arc<SharedInformer<Pod>>,
    nodes: Arc<SharedInformer<Node>>,
    threshold: usize,
    /// Nodes seen missing, and since when.
    missing_since: Mutex<HashMap<String, Instant>>,
}

impl std::fmt::Debug for PodGc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PodGc")
            .field("threshold", &self.threshold)
            .finish_non_exhaustive()
    }
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

fn node_name(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()?
        .node_name
        .as_deref()
        .filter(|n| !n.is_empty())
}

/// The terminated pods to delete so that at most `threshold` remain, oldest first
/// (upstream `gcTerminated`); `threshold` 0 deletes none.
fn terminated_over_threshold(pods: &[Arc<Pod>], threshold: usize) -> Vec<Arc<Pod>> {
    if threshold == 0 {
        return Vec::new();
    }
    let mut terminated: Vec<&Arc<Pod>> = pods
        .iter()
        .filter(|p| matches!(phase(p), "Succeeded" | "Failed"))
        .collect();
    if terminated.len() <= threshold {
        return Vec::new();
    }
    terminated.sort_by(|a, b| {
        let t = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
        t(a).cmp(&t(b))
            .then_with(|| a.metadata.name.cmp(&b.metadata.name))
    });
    let excess = terminated.len() - threshold;
    terminated.into_iter().take(excess).cloned().collect()
}

impl PodGc {
    /// The collector over the factory's Pod and Node informers, keeping at most
    /// `threshold` terminated pods.
    pub fn new(
        client: kube::Client,
        factory: &SharedInformerFactory,
        threshold: usize,
    ) -> Arc<Self> {
        Arc::new(Self {
            client,
            pods: factory.informer::<Pod>(),
            nodes: factory.informer::<Node>(),
            threshold,
            missing_since: Mutex::new(HashMap::new()),
        })
    }

    /// Waits for the informers, then collects every 20 s until `cancel`.
    pub async fn run(self: Arc<Self>, cancel: CancellationToken) {
        if !wait_for_cache_sync(&cancel, &[&*self.pods, &*self.nodes]).await {
            return;
        }
        let mut tick = tokio::time::interval(GC_CHECK_PERIOD);
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                _ = tick.tick() => {}
            }
            if let Err(e) = self.gc().await {
                tracing::warn!(controller = NAME, error = %e, "pod garbage collection failed");
            }
        }
    }

    /// One pass (upstream `gc`).
    async fn gc(&self) -> Result<(), Error> {
        let pods = self.pods.store().list();
        let mut first_err = None;
        for pod in terminated_over_threshold(&pods, self.threshold) {
            tracing::info!(pod = %crate::controller_utils::pod_key(&pod), "deleting a terminated pod over the threshold");
            if let Err(e) = self.delete(&pod, None).await {
                first_err.get_or_insert(e);
            }
        }
        for pod in self.orphaned(&pods).await {
            if let Err(e) = self.fail_and_delete(&pod).await {
                first_err.get_or_insert(e);
            }
        }
        for pod in pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_some() && node_name(p).is_none())
        {
            tracing::info!(pod = %crate::controller_utils::pod_key(pod), "force-deleting an unscheduled terminating pod");
            if let Err(e) = self.delete(pod, Some(0)).await {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// The pods bound to nodes missing for longer than the quarantine and confirmed
    /// gone by a live read (upstream `gcOrphaned` and `discoverDeletedNodes`).
    async fn orphaned(&self, pods: &[Arc<Pod>]) -> Vec<Arc<Pod>> {
        let known: HashSet<String> = self
            .nodes
            .store()
            .list()
            .iter()
            .filter_map(|n| n.metadata.name.clone())
            .collect();
        let missing: HashSet<&str> = pods
            .iter()
            .filter_map(|p| node_name(p))
            .filter(|n| !known.contains(*n))
            .collect();
        let now = Instant::now();
        let due: Vec<String> = {
            let mut since = self
                .missing_since
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            since.retain(|n, _| missing.contains(n.as_str()));
            for n in &missing {
                since.entry((*n).to_owned()).or_insert(now);
            }
            since
                .iter()
                .filter(|(_, t)| now.duration_since(**t) >= QUARANTINE)
                .map(|(n, _)| n.clone())
                .collect()
        };
        let api: Api<Node> = Api::all(self.client.clone());
        let mut gone = HashSet::new();
        for name in due {
            if matches!(api.get(&name).await, Err(kube::Error::Api(s)) if s.code == 404) {
                gone.insert(name);
            }
        }
        pods.iter()
            .filter(|p| node_name(p).is_some_and(|n| gone.contains(n)))
            .cloned()
            .collect()
    }

    /// Marks the pod Failed with the `DisruptionTarget` condition, then force-deletes
    /// it (upstream `markFailedAndDeletePodWithCondition`).
    async fn fail_and_delete(&self, pod: &Pod) -> Result<(), Error> {
        let key = crate::controller_utils::pod_key(pod);
        tracing::info!(pod = %key, node = node_name(pod).unwrap_or(""), "deleting an orphaned pod");
        let api: Api<Pod> = Api::namespaced(
            self.client.clone(),
            pod.metadata.namespace.as_deref().unwrap_or(""),
        );
        let name = pod.metadata.name.as_deref().unwrap_or("");
        if !matches!(phase(pod), "Succeeded" | "Failed") {
            let now = k8s_openapi::jiff::Timestamp::now().to_string();
            let patch = json!({"status": {"phase": "Failed", "conditions": [{
                "type": "DisruptionTarget", "status": "True", "reason": "DeletionByPodGC",
                "message": "PodGC: node no longer exists", "lastTransitionTime": now,
            }]}});
            match api
                .patch_status(name, &PatchParams::default(), &Patch::Strategic(patch))
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
                Err(e) => return Err(e.into()),
            }
        }
        self.delete(pod, Some(0)).await
    }

    async fn delete(&self, pod: &Pod, grace: Option<u32>) -> Result<(), Error> {
        let api: Api<Pod> = Api::namespaced(
            self.client.clone(),
            pod.metadata.namespace.as_deref().unwrap_or(""),
        );
        let params = DeleteParams {
            grace_period_seconds: grace,
            preconditions: pod
                .metadata
                .uid
                .clone()
                .map(|uid| kube::api::Preconditions {
                    uid: Some(uid),
                    resource_version: None,
                }),
            ..DeleteParams::default()
        };
        match api
            .delete(pod.metadata.name.as_deref().unwrap_or(""), &params)
            .await
        {
            Ok(_) => Ok(()),
            // Gone already, or replaced by a pod of the same name.
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(name: &str, phase: &str, created: &str) -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "creationTimestamp": created},
                "status": {"phase": phase},
            }))
            .expect("a pod"),
        )
    }

    #[test]
    fn oldest_terminated_pods_over_the_threshold_go_first() {
        let pods = vec![
            pod("new", "Succeeded", "2026-01-03T00:00:00Z"),
            pod("running", "Running", "2026-01-01T00:00:00Z"),
            pod("old", "Failed", "2026-01-01T00:00:00Z"),
            pod("mid", "Succeeded", "2026-01-02T00:00:00Z"),
        ];
        let names = |v: Vec<Arc<Pod>>| {
            v.iter()
                .map(|p| p.metadata.name.clone().unwrap_or_default())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(terminated_over_threshold(&pods, 1)), ["old", "mid"]);
        assert!(terminated_over_threshold(&pods, 3).is_empty());
        assert!(terminated_over_threshold(&pods, 0).is_empty());
    }
}
