//! Mirror pods (upstream `pkg/kubelet/pod/mirror_client.go` and the kubelet's mirror
//! handling in `SyncPod` and `HandlePodCleanups`): each running static pod has a copy in
//! the API server, annotated `kubernetes.io/config.mirror: <config hash>` and owned by
//! the Node, so that `kubectl get pods` shows it and its status can be posted.
//!
//! A mirror pod that is missing, outdated (another hash) or being deleted is (re)created;
//! a mirror pod whose static pod is gone is deleted. Deleting a mirror pod through the
//! API does not stop the static pod: the kubelet runs static pods from their source, and
//! creates the mirror pod again.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{DeleteParams, PostParams, Preconditions};

use crate::config::SourcesReady;
use crate::config::apiserver::{CONFIG_MIRROR_ANNOTATION, MirrorPods, full_name};
use crate::config::static_pod::{
    CONFIG_HASH_ANNOTATION, CONFIG_SOURCE_ANNOTATION, is_static_pod_source,
};
use crate::pod_manager::PodManager;
use crate::pod_workers::PodWorkerStates;

/// How often mirror pods are reconciled without a change of the API's mirror pods
/// (upstream does it in each pod sync and housekeeping, every 2 s).
const RECONCILE_PERIOD: Duration = Duration::from_secs(2);

/// Keeps the mirror pods of this node's static pods.
pub struct MirrorClient {
    client: kube::Client,
    node_name: String,
    pods: Arc<PodManager>,
    mirror_pods: Arc<MirrorPods>,
    workers: PodWorkerStates,
    sources_ready: SourcesReady,
    /// The Node's UID, once read (mirror pods are owned by the Node).
    node_uid: Option<String>,
}

impl MirrorClient {
    /// A mirror client for `node_name`'s static pods in `pods`, seeing the API's mirror
    /// pods in `mirror_pods`.
    pub fn new(
        client: kube::Client,
        node_name: String,
        pods: Arc<PodManager>,
        mirror_pods: Arc<MirrorPods>,
        workers: PodWorkerStates,
        sources_ready: SourcesReady,
    ) -> Self {
        Self {
            client,
            node_name,
            pods,
            mirror_pods,
            workers,
            sources_ready,
            node_uid: None,
        }
    }

    /// Reconciles on every change of the API's mirror pods and every 2 s, until the task
    /// is aborted.
    pub async fn run(mut self) {
        let mut tick = tokio::time::interval(RECONCILE_PERIOD);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = self.mirror_pods.changed.notified() => {}
                _ = tick.tick() => {}
            }
            if let Err(e) = self.reconcile().await {
                tracing::warn!(error = %e, "mirror pods: reconcile failed; will retry");
            }
        }
    }

    /// One pass: creates, replaces and deletes mirror pods. Errors: the API server's.
    async fn reconcile(&mut self) -> Result<(), kube::Error> {
        if !self.mirror_pods.listed() {
            return Ok(());
        }
        let statics: BTreeMap<String, Arc<Pod>> = self
            .pods
            .pods()
            .into_iter()
            .filter(|p| is_static(p))
            .map(|p| (full_name(&p), p))
            .collect();
        let mirrors = self.mirror_pods.all();
        for (name, pod) in &statics {
            let uid = pod.metadata.uid.as_deref().unwrap_or_default();
            if pod.metadata.deletion_timestamp.is_some() || self.workers.is_terminated(uid) {
                continue;
            }
            let hash = config_hash(pod);
            match mirrors.get(name) {
                Some(mirror)
                    if mirror.metadata.deletion_timestamp.is_none()
                        && mirror_hash(mirror) == Some(hash) => {}
                Some(mirror) => {
                    tracing::info!(pod = %name, "mirror pod outdated; deleting it");
                    self.delete(mirror).await?;
                }
                None => self.create(pod).await?,
            }
        }
        // Upstream `deleteOrphanedMirrorPods`: only once every source was seen.
        if self.sources_ready.all_ready() {
            for (name, mirror) in &mirrors {
                if !statics.contains_key(name) && mirror.metadata.deletion_timestamp.is_none() {
                    tracing::info!(pod = %name, "static pod gone; deleting its mirror pod");
                    self.delete(mirror).await?;
                }
            }
        }
        Ok(())
    }

    /// The Node's UID (read once). `None` while the Node is not registered.
    async fn node_uid(&mut self) -> Result<Option<String>, kube::Error> {
        if self.node_uid.is_none() {
            let nodes: kube::Api<Node> = kube::Api::all(self.client.clone());
            self.node_uid = nodes
                .get_opt(&self.node_name)
                .await?
                .and_then(|n| n.metadata.uid);
        }
        Ok(self.node_uid.clone())
    }

    /// Creates the mirror pod of `pod` (upstream `CreateMirrorPod`).
    async fn create(&mut self, pod: &Pod) -> Result<(), kube::Error> {
        let Some(node_uid) = self.node_uid().await? else {
            return Ok(());
        };
        let mirror = mirror_of(pod, &self.node_name, &node_uid);
        let api: kube::Api<Pod> = kube::Api::namespaced(
            self.client.clone(),
            pod.metadata.namespace.as_deref().unwrap_or("default"),
        );
        match api.create(&PostParams::default(), &mirror).await {
            Ok(_) => {
                tracing::info!(pod = %full_name(pod), "created the mirror pod");
                Ok(())
            }
            // Upstream: an existing mirror pod is fine; the next pass checks its hash.
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Deletes `mirror` at once, if it is still the same object (upstream
    /// `DeleteMirrorPod`).
    async fn delete(&self, mirror: &Pod) -> Result<(), kube::Error> {
        let api: kube::Api<Pod> = kube::Api::namespaced(
            self.client.clone(),
            mirror.metadata.namespace.as_deref().unwrap_or("default"),
        );
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: mirror.metadata.uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match api
            .delete(mirror.metadata.name.as_deref().unwrap_or_default(), &params)
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// True for a pod from a static source (file, http).
fn is_static(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CONFIG_SOURCE_ANNOTATION))
        .is_some_and(|s| is_static_pod_source(s))
}

/// A static pod's `kubernetes.io/config.hash` (its UID when unset).
fn config_hash(pod: &Pod) -> &str {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CONFIG_HASH_ANNOTATION))
        .or(pod.metadata.uid.as_ref())
        .map(String::as_str)
        .unwrap_or_default()
}

/// The hash a mirror pod mirrors.
fn mirror_hash(mirror: &Pod) -> Option<&str> {
    mirror
        .metadata
        .annotations
        .as_ref()?
        .get(CONFIG_MIRROR_ANNOTATION)
        .map(String::as_str)
}

/// The mirror pod of static pod `pod`: its metadata (no UID, no resourceVersion) with the
/// mirror annotation, owned by the Node, and its spec; no status.
pub fn mirror_of(pod: &Pod, node_name: &str, node_uid: &str) -> Pod {
    let mut annotations = pod.metadata.annotations.clone().unwrap_or_default();
    annotations.insert(
        CONFIG_MIRROR_ANNOTATION.to_owned(),
        config_hash(pod).to_owned(),
    );
    Pod {
        metadata: ObjectMeta {
            name: pod.metadata.name.clone(),
            namespace: pod.metadata.namespace.clone(),
            labels: pod.metadata.labels.clone(),
            annotations: Some(annotations),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".to_owned(),
                kind: "Node".to_owned(),
                name: node_name.to_owned(),
                uid: node_uid.to_owned(),
                controller: Some(true),
                block_owner_deletion: None,
            }]),
            ..ObjectMeta::default()
        },
        spec: pod.spec.clone(),
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mirror_pod_copies_the_static_pod_with_its_hash_and_node_owner() {
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some("web-node1".into()),
                namespace: Some("default".into()),
                uid: Some("abc".into()),
                resource_version: Some("7".into()),
                annotations: Some(BTreeMap::from([
                    (CONFIG_SOURCE_ANNOTATION.to_owned(), "file".to_owned()),
                    (CONFIG_HASH_ANNOTATION.to_owned(), "abc".to_owned()),
                ])),
                ..Default::default()
            },
            ..Default::default()
        };
        assert!(is_static(&pod));
        let mirror = mirror_of(&pod, "node1", "node-uid");
        assert_eq!(mirror.metadata.uid, None);
        assert_eq!(mirror.metadata.resource_version, None);
        assert_eq!(mirror_hash(&mirror), Some("abc"));
        let owner = &mirror.metadata.owner_references.unwrap_or_default()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("Node", "node-uid")
        );
    }
}
