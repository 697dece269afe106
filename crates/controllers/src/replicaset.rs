//! The ReplicaSet controller (upstream `pkg/controller/replicaset/replica_set.go`):
//! keeps `spec.replicas` active pods matching each ReplicaSet's selector, adopting
//! orphans that match and releasing owned pods that no longer do, and reports
//! `status.replicas`, `fullyLabeledReplicas`, `readyReplicas`, `availableReplicas`,
//! `observedGeneration` and the `ReplicaFailure` condition.
//!
//! Creates go in slow-start batches (1, 2, 4, ...), at most 500 per sync; surplus pods
//! are deleted in upstream's order ([`pods_to_delete`]). Expectations hold a ReplicaSet
//! back until the watch has shown the pods of its last sync, so that no pod is created
//! twice. Events: `SuccessfulCreate`, `FailedCreate`, `SuccessfulDelete`,
//! `FailedDelete`, from `replicaset-controller`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetCondition, ReplicaSetStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, PostParams};
use skiff_api::core::pod::conditions::{is_pod_active, is_pod_available, is_pod_ready};
use skiff_api::selector::LabelSelector;
use skiff_client::cache::{SharedInformer, SharedInformerFactory};
use skiff_client::events::EventRecorder;
use skiff_client::workqueue::{QueueMetrics, WorkQueue};
use tokio_util::sync::CancellationToken;

use crate::Error;
use crate::controller_utils::{
    BURST_REPLICAS, Expectations, SLOW_START_INITIAL_BATCH_SIZE, claim_for, controller_ref,
    pod_from_template, pod_key, pods_to_delete, run_controller, slow_start_batch,
    update_status_retrying,
};
use crate::owner_handlers::OwnerHandlers;

/// The controller's name (`--controllers`, the events' reporting controller).
pub const NAME: &str = "replicaset-controller";

/// The ReplicaSet controller; see the module doc.
pub struct ReplicaSetController {
    client: kube::Client,
    replica_sets: Arc<SharedInformer<ReplicaSet>>,
    pods: Arc<SharedInformer<Pod>>,
    queue: Arc<WorkQueue<String>>,
    expectations: Arc<Expectations>,
    recorder: EventRecorder,
}

impl std::fmt::Debug for ReplicaSetController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplicaSetController")
            .finish_non_exhaustive()
    }
}

impl ReplicaSetController {
    /// The controller over the factory's ReplicaSet and Pod informers, its handlers
    /// registered.
    pub fn new(
        client: kube::Client,
        factory: &SharedInformerFactory,
        recorder: EventRecorder,
        queue_metrics: Arc<dyn QueueMetrics>,
    ) -> Arc<Self> {
        let handlers = OwnerHandlers {
            owners: factory.informer::<ReplicaSet>(),
            queue: Arc::new(WorkQueue::new("replicaset").with_metrics(queue_metrics)),
            expectations: Arc::new(Expectations::default()),
        };
        let pods = factory.informer::<Pod>();
        let h = handlers.clone();
        handlers
            .owners
            .add_event_handler(Box::new(move |d| h.on_owner(d)));
        let h = handlers.clone();
        pods.add_event_handler(Box::new(move |d| h.on_pod(d)));
        Arc::new(Self {
            client,
            replica_sets: handlers.owners,
            pods,
            queue: handlers.queue,
            expectations: handlers.expectations,
            recorder,
        })
    }

    /// Waits for the informers, then syncs with `workers` workers until `cancel`
    /// (`--concurrent-replicaset-syncs`, default 5).
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        run_controller(
            NAME,
            &[&*self.replica_sets, &*self.pods],
            &self.queue,
            workers,
            cancel,
            &self,
            |this, key| async move { this.sync(&key).await },
        )
        .await;
    }

    /// One sync of the ReplicaSet `key` (upstream `syncReplicaSet`).
    async fn sync(&self, key: &str) -> Result<(), Error> {
        let Some(rs) = self.replica_sets.store().get(key) else {
            self.expectations.delete(key);
            return Ok(());
        };
        let needs_sync = self.expectations.satisfied(key);
        let spec = rs.spec.clone();
        let selector = LabelSelector::from_meta(&spec.selector)
            .map_err(|e| Error::Invalid(format!("invalid selector of {key}: {e}")))?;
        let ns = rs.metadata.namespace.clone().unwrap_or_default();
        let candidates: Vec<Arc<Pod>> = self
            .pods
            .store()
            .list()
            .into_iter()
            .filter(|p| p.metadata.namespace.as_deref() == Some(ns.as_str()) && is_pod_active(p))
            .collect();
        let pods = self.claim_pods(&rs, &selector, candidates).await?;
        let mut manage_err = None;
        if needs_sync && rs.metadata.deletion_timestamp.is_none() {
            manage_err = self.manage_replicas(key, &rs, &pods).await.err();
        }
        let now = Timestamp::now();
        let status = calculate_status(&rs, &pods, manage_err.as_ref(), now);
        let rs = self.update_status(&rs, status).await?;
        let want = spec.replicas.unwrap_or(1);
        let min_ready = spec.min_ready_seconds.unwrap_or(0);
        if let Some(e) = manage_err {
            return Err(e);
        }
        let st = rs.status.clone().unwrap_or_default();
        if min_ready > 0 && st.ready_replicas == Some(want) && st.available_replicas != Some(want) {
            self.queue.add_after(
                key.to_owned(),
                Duration::from_secs(u64::try_from(min_ready).unwrap_or(0)),
            );
        }
        Ok(())
    }

    /// Adopts the orphans that match and releases the owned pods that do not (upstream
    /// `ControllerRefManager.ClaimPods`); the pods the ReplicaSet owns afterwards.
    async fn claim_pods(
        &self,
        rs: &ReplicaSet,
        selector: &LabelSelector,
        candidates: Vec<Arc<Pod>>,
    ) -> Result<Vec<Arc<Pod>>, Error> {
        claim_for(&self.client, rs, None, selector, candidates).await
    }

    /// Creates or deletes pods toward `spec.replicas` (upstream `manageReplicas`).
    async fn manage_replicas(
        &self,
        key: &str,
        rs: &ReplicaSet,
        pods: &[Arc<Pod>],
    ) -> Result<(), Error> {
        let spec = rs.spec.clone();
        let want = usize::try_from(spec.replicas.unwrap_or(1)).unwrap_or(0);
        let ns = rs.metadata.namespace.clone().unwrap_or_default();
        let name = rs.metadata.name.clone().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
        if pods.len() < want {
            let diff = (want - pods.len()).min(BURST_REPLICAS);
            self.expectations.expect_creations(key, diff);
            tracing::debug!(
                replicaset = key,
                need = want,
                creating = diff,
                "too few replicas"
            );
            let template = spec.template.clone().unwrap_or_default();
            let owner = controller_ref(&rs.metadata, "apps/v1", "ReplicaSet");
            let (created, err) = slow_start_batch(diff, SLOW_START_INITIAL_BATCH_SIZE, || {
                let pod = pod_from_template(&template, &ns, &name, owner.clone());
                let api = api.clone();
                async move {
                    match api.create(&PostParams::default(), &pod).await {
                        Ok(p) => {
                            let note = format!(
                                "Created pod: {}",
                                p.metadata.name.as_deref().unwrap_or("")
                            );
                            self.recorder.event(rs, "Normal", "SuccessfulCreate", &note);
                            Ok(())
                        }
                        Err(e) => {
                            self.recorder.event(
                                rs,
                                "Warning",
                                "FailedCreate",
                                &format!("Error creating: {e}"),
                            );
                            Err(e.into())
                        }
                    }
                }
            })
            .await;
            for _ in created..diff {
                self.expectations.creation_observed(key);
            }
            return err.map_or(Ok(()), Err);
        }
        if pods.len() > want {
            let diff = (pods.len() - want).min(BURST_REPLICAS);
            let all: Vec<&Pod> = pods.iter().map(AsRef::as_ref).collect();
            let victims = pods_to_delete(&all, &all, diff, Timestamp::now());
            self.expectations
                .expect_deletions(key, victims.iter().map(|p| pod_key(p)).collect());
            tracing::debug!(
                replicaset = key,
                need = want,
                deleting = diff,
                "too many replicas"
            );
            let results = futures::future::join_all(victims.iter().map(|p| {
                let api = api.clone();
                async move {
                    let pname = p.metadata.name.as_deref().unwrap_or("");
                    match api.delete(pname, &DeleteParams::default()).await {
                        Ok(_) => {
                            self.recorder.event(
                                rs,
                                "Normal",
                                "SuccessfulDelete",
                                &format!("Deleted pod: {pname}"),
                            );
                            Ok(())
                        }
                        Err(e) => {
                            self.expectations.deletion_observed(key, &pod_key(p));
                            if matches!(&e, kube::Error::Api(s) if s.code == 404) {
                                return Ok(());
                            }
                            self.recorder.event(
                                rs,
                                "Warning",
                                "FailedDelete",
                                &format!("Error deleting: {e}"),
                            );
                            Err(Error::from(e))
                        }
                    }
                }
            }))
            .await;
            return results
                .into_iter()
                .find_map(Result::err)
                .map_or(Ok(()), Err);
        }
        Ok(())
    }

    /// Writes `status` unless the ReplicaSet already has it (upstream
    /// `updateReplicaSetStatus`); the ReplicaSet as written.
    async fn update_status(
        &self,
        rs: &Arc<ReplicaSet>,
        status: ReplicaSetStatus,
    ) -> Result<Arc<ReplicaSet>, Error> {
        if rs.status.as_ref() == Some(&status) {
            return Ok(Arc::clone(rs));
        }
        // The cache may be behind (a scale, a label): one retry on the object as it is
        // now, as upstream's statusUpdateRetries.
        let written = update_status_retrying(&self.client, &**rs, |rs| {
            rs.status = Some(status.clone());
        })
        .await?;
        Ok(Arc::new(written))
    }
}

/// The status the pods give (upstream `calculateStatus`).
fn calculate_status(
    rs: &ReplicaSet,
    pods: &[Arc<Pod>],
    manage_err: Option<&Error>,
    now: Timestamp,
) -> ReplicaSetStatus {
    let spec = rs.spec.clone();
    let template_labels: BTreeMap<String, String> = spec
        .template
        .as_ref()
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let min_ready = spec.min_ready_seconds.unwrap_or(0);
    let count = |f: &dyn Fn(&Pod) -> bool| {
        i32::try_from(pods.iter().filter(|p| f(p)).count()).unwrap_or(i32::MAX)
    };
    let fully_labeled = count(&|p: &Pod| {
        let labels = p.metadata.labels.clone().unwrap_or_default();
        template_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
    });
    let ready = count(&|p: &Pod| is_pod_ready(p));
    let available = count(&|p: &Pod| is_pod_available(p, min_ready, now));
    let old = rs.status.clone().unwrap_or_default();
    let mut conditions: Vec<ReplicaSetCondition> = old.conditions.clone().unwrap_or_default();
    let has_failure = conditions
        .iter()
        .any(|c| c.type_.as_deref() == Some("ReplicaFailure"));
    match manage_err {
        Some(e) if !has_failure => {
            let want = usize::try_from(spec.replicas.unwrap_or(1)).unwrap_or(0);
            let reason = if pods.len() < want {
                "FailedCreate"
            } else {
                "FailedDelete"
            };
            conditions.push(ReplicaSetCondition {
                type_: Some("ReplicaFailure".to_owned()),
                status: Some("True".to_owned()),
                reason: Some(reason.to_owned()),
                message: Some(e.to_string()),
                last_transition_time: Some(Time(now)),
            });
        }
        None if has_failure => conditions.retain(|c| c.type_.as_deref() != Some("ReplicaFailure")),
        _ => {}
    }
    let nonzero = |n: i32| (n != 0).then_some(n);
    ReplicaSetStatus {
        replicas: i32::try_from(pods.len()).unwrap_or(i32::MAX),
        fully_labeled_replicas: nonzero(fully_labeled),
        ready_replicas: nonzero(ready),
        available_replicas: nonzero(available),
        observed_generation: rs.metadata.generation,
        conditions: (!conditions.is_empty()).then_some(conditions),
        terminating_replicas: old.terminating_replicas,
    }
}
