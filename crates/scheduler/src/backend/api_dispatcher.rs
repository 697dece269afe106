//! The scheduler's status patches, in order per pod (after upstream's
//! `backend/api_dispatcher`, KEP-5229 asynchronous API calls).
//!
//! A failed cycle patches the pod's `PodScheduled` condition without waiting for the API
//! server. Patches of different pods run concurrently; patches of one pod run one after
//! another, and a patch queued while an earlier one is still in flight replaces any
//! other queued patch of that pod (the newest wins, as upstream merges calls per
//! object). Without this, two quick failures could land out of order and leave the
//! older message on the pod.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::framework::types::{pod_key, pod_uid};
use crate::scheduler::Nominating;

/// One status patch: the pod as the informer last saw it (to skip a patch that changes
/// nothing), the condition's reason and message, and the nominated node.
#[derive(Debug)]
pub(crate) struct StatusPatch {
    pub pod: Arc<Pod>,
    pub reason: &'static str,
    pub message: String,
    pub nominating: Nominating,
}

/// Sends [`StatusPatch`]es, one pod's in order (see the module doc).
pub(crate) struct StatusPatches {
    client: kube::Client,
    /// The pods with a patch in flight, by uid, each with the patch queued behind it.
    queued: Mutex<HashMap<String, Option<StatusPatch>>>,
}

impl StatusPatches {
    pub(crate) fn new(client: kube::Client) -> Arc<Self> {
        Arc::new(Self {
            client,
            queued: Mutex::new(HashMap::new()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Option<StatusPatch>>> {
        self.queued.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sends `patch` now, or after the pod's patch in flight (replacing one queued
    /// before). Failures are logged, as upstream's (the next cycle patches again).
    pub(crate) fn send(self: &Arc<Self>, patch: StatusPatch) {
        let uid = pod_uid(&patch.pod).to_owned();
        {
            let mut queued = self.lock();
            if let Some(next) = queued.get_mut(&uid) {
                *next = Some(patch);
                return;
            }
            queued.insert(uid.clone(), None);
        }
        let this = Arc::clone(self);
        tokio::spawn(async move {
            let mut patch = patch;
            loop {
                if let Err(e) = update_pod_status(
                    &this.client,
                    &patch.pod,
                    patch.reason,
                    &patch.message,
                    &patch.nominating,
                )
                .await
                {
                    tracing::warn!(pod = %pod_key(&patch.pod), error = %e, "updating the pod's PodScheduled condition");
                }
                let mut queued = this.lock();
                match queued.get_mut(&uid).and_then(Option::take) {
                    Some(next) => patch = next,
                    None => {
                        queued.remove(&uid);
                        return;
                    }
                }
            }
        });
    }
}

/// Patches the pod's `PodScheduled=False` condition and nominated node when they change
/// (upstream `updatePod`): `lastTransitionTime` moves only when the status changes.
async fn update_pod_status(
    client: &kube::Client,
    pod: &Pod,
    reason: &str,
    message: &str,
    nominating: &Nominating,
) -> Result<(), kube::Error> {
    let status = pod.status.clone().unwrap_or_default();
    let existing = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "PodScheduled");
    let unchanged = existing.is_some_and(|c| {
        c.status == "False"
            && c.reason.as_deref() == Some(reason)
            && c.message.as_deref() == Some(message)
    });
    let nominated_now = status.nominated_node_name.clone().filter(|n| !n.is_empty());
    let nnn_update = match nominating {
        Nominating::Keep => None,
        Nominating::Set(n) if *n == nominated_now => None,
        Nominating::Set(n) => Some(n.clone()),
    };
    if unchanged && nnn_update.is_none() {
        return Ok(());
    }
    let transition = match existing {
        Some(c) if c.status == "False" => c.last_transition_time.clone(),
        _ => None,
    }
    .unwrap_or_else(|| Time(k8s_openapi::jiff::Timestamp::now()));
    let mut patch = json!({"status": {"conditions": [{
        "type": "PodScheduled",
        "status": "False",
        "reason": reason,
        "message": message,
        "lastProbeTime": null,
        "lastTransitionTime": transition,
    }]}});
    if let Some(n) = nnn_update {
        patch["status"]["nominatedNodeName"] = json!(n);
    }
    let pods: Api<Pod> = Api::namespaced(
        client.clone(),
        pod.metadata.namespace.as_deref().unwrap_or("default"),
    );
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    pods.patch_status(name, &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .map(drop)
}

#[cfg(test)]
mod tests {
    use axum::Router;
    use axum::extract::State;
    use axum::routing::patch;
    use tokio::sync::{Semaphore, mpsc};

    use super::*;

    struct Api {
        seen: mpsc::UnboundedSender<String>,
        /// Holds the first patch until the test adds a permit.
        gate: Semaphore,
    }

    async fn patch_status(
        State(api): State<Arc<Api>>,
        axum::Json(body): axum::Json<serde_json::Value>,
    ) -> axum::Json<serde_json::Value> {
        let message = body["status"]["conditions"][0]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if message == "first"
            && let Ok(permit) = api.gate.acquire().await
        {
            permit.forget();
        }
        let _ = api.seen.send(message);
        axum::Json(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}))
    }

    fn pod(uid: &str) -> Arc<Pod> {
        let mut p = Pod::default();
        p.metadata.name = Some("p".into());
        p.metadata.namespace = Some("default".into());
        p.metadata.uid = Some(uid.into());
        Arc::new(p)
    }

    fn condition(pod: &Arc<Pod>, message: &str) -> StatusPatch {
        StatusPatch {
            pod: Arc::clone(pod),
            reason: "Unschedulable",
            message: message.into(),
            nominating: Nominating::Keep,
        }
    }

    #[tokio::test]
    async fn one_pods_patches_land_in_order_and_the_newest_queued_wins() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let api = Arc::new(Api {
            seen: tx,
            gate: Semaphore::new(0),
        });
        let router = Router::new()
            .route(
                "/api/v1/namespaces/{ns}/pods/{name}/status",
                patch(patch_status),
            )
            .with_state(Arc::clone(&api));
        let patches = StatusPatches::new(kube::Client::new(router, "default"));
        let p = pod("uid-p");
        patches.send(condition(&p, "first"));
        // Queued behind the first, which the API holds: the third replaces the second.
        patches.send(condition(&p, "second"));
        patches.send(condition(&p, "third"));
        // Another pod is not held up by the first.
        patches.send(condition(&pod("uid-q"), "other pod"));
        assert_eq!(rx.recv().await.as_deref(), Some("other pod"));
        api.gate.add_permits(1);
        assert_eq!(rx.recv().await.as_deref(), Some("first"));
        assert_eq!(rx.recv().await.as_deref(), Some("third"));
        while !patches.lock().is_empty() {
            tokio::task::yield_now().await;
        }
        assert!(rx.try_recv().is_err(), "the replaced patch was sent");
    }
}
