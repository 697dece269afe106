//! The status manager's API side (upstream `pkg/kubelet/status/status_manager.go`:
//! `syncBatch`, `syncPod`, `mergePodStatus`, `canBeDeleted`): each pod status that
//! changed is patched to `pods/<name>/status`, at once when it changes and again every
//! 10 s until the API server took it. A static pod's status goes to its mirror pod.
//!
//! Conditions the kubelet does not set (a scheduler's, a controller's
//! `DisruptionTarget`) are kept from the API's copy. A pod with a `deletionTimestamp`
//! whose termination has finished is then deleted by the kubelet, with grace period 0 and
//! its UID as precondition, which lets the API server remove it.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use serde_json::json;

use super::StatusManager;
use crate::config::apiserver::{API_SOURCE, MirrorPods, full_name};
use crate::config::static_pod::CONFIG_SOURCE_ANNOTATION;
use crate::pod_manager::PodManager;
use crate::pod_workers::PodWorkerStates;

/// How often every status not yet taken by the API server is posted again (upstream
/// `syncPeriod`, 10 s).
const SYNC_PERIOD: Duration = Duration::from_secs(10);

/// Posts pod statuses to the API server and deletes finished deleted pods.
pub struct StatusSync {
    client: kube::Client,
    statuses: Arc<StatusManager>,
    pods: Arc<PodManager>,
    mirror_pods: Arc<MirrorPods>,
    workers: PodWorkerStates,
    /// The status version last taken by the API server, by pod UID.
    synced: HashMap<String, u64>,
    /// Pods the kubelet deleted (by UID), so that each is deleted once.
    deleted: BTreeSet<String>,
}

/// Where a pod's status goes: the API object's namespace, name and UID.
struct Target {
    namespace: String,
    name: String,
    uid: String,
}

impl StatusSync {
    /// A sync of `statuses` for the pods of `pods`; static pods' statuses go to their
    /// mirror pods in `mirror_pods`; `workers` tells when a pod's termination finished.
    pub fn new(
        client: kube::Client,
        statuses: Arc<StatusManager>,
        pods: Arc<PodManager>,
        mirror_pods: Arc<MirrorPods>,
        workers: PodWorkerStates,
    ) -> Self {
        Self {
            client,
            statuses,
            pods,
            mirror_pods,
            workers,
            synced: HashMap::new(),
            deleted: BTreeSet::new(),
        }
    }

    /// Runs until the task is aborted.
    pub async fn run(mut self) {
        let mut resync = tokio::time::interval(SYNC_PERIOD);
        resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = self.statuses.wait_for_change() => {}
                _ = resync.tick() => {}
            }
            self.sync_batch().await;
        }
    }

    /// Posts every changed status, then deletes the deleted pods whose termination
    /// finished.
    async fn sync_batch(&mut self) {
        let known: BTreeSet<String> = self
            .pods
            .pods()
            .iter()
            .filter_map(|p| p.metadata.uid.clone())
            .collect();
        self.synced.retain(|uid, _| known.contains(uid));
        self.deleted.retain(|uid| known.contains(uid));
        for (uid, status, version) in self.statuses.changed_since(&self.synced) {
            let Some(pod) = self.pods.get(&uid) else {
                continue;
            };
            match self.sync_pod(&pod, &status).await {
                Ok(true) => {
                    self.synced.insert(uid, version);
                }
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(pod = %full_name(&pod), error = %e, "updating the pod status failed; will retry");
                }
            }
        }
        for pod in self.pods.pods() {
            if let Err(e) = self.delete_if_finished(&pod).await {
                tracing::warn!(pod = %full_name(&pod), error = %e, "deleting the terminated pod failed; will retry");
            }
        }
    }

    /// The API object a pod's status goes to: the pod itself, or a static pod's mirror
    /// pod; `None` while a static pod has no mirror pod.
    fn target(&self, pod: &Pod) -> Option<Target> {
        let source = pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(CONFIG_SOURCE_ANNOTATION))
            .map(String::as_str)
            .unwrap_or(API_SOURCE);
        let object = if source == API_SOURCE {
            pod.clone()
        } else {
            let mirror = self.mirror_pods.get(&full_name(pod))?;
            Pod::clone(&mirror)
        };
        Some(Target {
            namespace: object.metadata.namespace.clone().unwrap_or_default(),
            name: object.metadata.name.clone()?,
            uid: object.metadata.uid.clone()?,
        })
    }

    /// Patches `status` onto `pod`'s API object. `Ok(true)` when the API server has it
    /// (or the object is gone for good), `Ok(false)` when it must wait (a static pod
    /// without mirror pod yet).
    async fn sync_pod(&self, pod: &Pod, status: &PodStatus) -> Result<bool, kube::Error> {
        let Some(target) = self.target(pod) else {
            return Ok(false);
        };
        let api: kube::Api<Pod> = kube::Api::namespaced(self.client.clone(), &target.namespace);
        let current = match api.get_opt(&target.name).await? {
            Some(current) => current,
            None => return Ok(true),
        };
        if current.metadata.uid.as_deref() != Some(target.uid.as_str()) {
            // Deleted and created again: this status is not the new pod's.
            return Ok(true);
        }
        let old = current.status.clone().unwrap_or_default();
        let merged = merge_pod_status(&old, status);
        if merged == old {
            return Ok(true);
        }
        let patch = json!({"metadata": {"uid": target.uid}, "status": merged});
        api.patch_status(&target.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        Ok(true)
    }

    /// Deletes an API pod that has a `deletionTimestamp` once its termination finished
    /// (upstream `canBeDeleted`): grace period 0, UID precondition.
    async fn delete_if_finished(&mut self, pod: &Pod) -> Result<(), kube::Error> {
        let Some(uid) = pod.metadata.uid.clone() else {
            return Ok(());
        };
        let from_api = pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(CONFIG_SOURCE_ANNOTATION))
            .is_none_or(|s| s == API_SOURCE);
        if !from_api
            || pod.metadata.deletion_timestamp.is_none()
            || self.deleted.contains(&uid)
            || !self.workers.is_terminated(&uid)
            || self
                .statuses
                .changed_since(&self.synced)
                .iter()
                .any(|(u, _, _)| *u == uid)
        {
            return Ok(());
        }
        let api: kube::Api<Pod> = kube::Api::namespaced(
            self.client.clone(),
            pod.metadata.namespace.as_deref().unwrap_or_default(),
        );
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(uid.clone()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        let name = pod.metadata.name.clone().unwrap_or_default();
        match api.delete(&name, &params).await {
            Ok(_) => {
                tracing::info!(pod = %full_name(pod), "pod fully terminated and removed from the API");
            }
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
            Err(e) => return Err(e),
        }
        self.deleted.insert(uid);
        Ok(())
    }
}

/// The status to post (upstream `mergePodStatus`): `new`, with the conditions of `old`
/// whose types the kubelet did not set kept (a scheduler's, a controller's
/// `DisruptionTarget`), and fields others own (`nominatedNodeName`, `resize`) as `old`
/// has them.
pub fn merge_pod_status(old: &PodStatus, new: &PodStatus) -> PodStatus {
    let mut merged = new.clone();
    let ours: BTreeSet<&str> = new
        .conditions
        .iter()
        .flatten()
        .map(|c| c.type_.as_str())
        .collect();
    let kept: Vec<_> = old
        .conditions
        .iter()
        .flatten()
        .filter(|c| !ours.contains(c.type_.as_str()))
        .cloned()
        .collect();
    if !kept.is_empty() {
        let conditions = merged.conditions.get_or_insert_with(Vec::new);
        let mut all = kept;
        all.append(conditions);
        *conditions = all;
    }
    if merged.nominated_node_name.is_none() {
        merged
            .nominated_node_name
            .clone_from(&old.nominated_node_name);
    }
    if merged.resize.is_none() {
        merged.resize.clone_from(&old.resize);
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodCondition;

    fn condition(type_: &str, status: &str) -> PodCondition {
        PodCondition {
            type_: type_.into(),
            status: status.into(),
            ..Default::default()
        }
    }

    #[test]
    fn conditions_of_others_are_kept_and_the_kubelets_replaced() {
        let old = PodStatus {
            phase: Some("Pending".into()),
            conditions: Some(vec![
                condition("PodScheduled", "True"),
                condition("DisruptionTarget", "True"),
                condition("Ready", "False"),
            ]),
            nominated_node_name: Some("n2".into()),
            ..Default::default()
        };
        let new = PodStatus {
            phase: Some("Running".into()),
            conditions: Some(vec![condition("Ready", "True")]),
            ..Default::default()
        };
        let merged = merge_pod_status(&old, &new);
        assert_eq!(merged.phase.as_deref(), Some("Running"));
        let types: Vec<(&str, &str)> = merged
            .conditions
            .iter()
            .flatten()
            .map(|c| (c.type_.as_str(), c.status.as_str()))
            .collect();
        assert_eq!(
            types,
            [
                ("PodScheduled", "True"),
                ("DisruptionTarget", "True"),
                ("Ready", "True")
            ]
        );
        assert_eq!(merged.nominated_node_name.as_deref(), Some("n2"));
        // Merging again changes nothing: an unchanged status is not posted twice.
        assert_eq!(merge_pod_status(&merged, &new), merged);
    }
}
