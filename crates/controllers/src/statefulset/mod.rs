//! The StatefulSet controller (upstream `pkg/controller/statefulset`): runs
//! `spec.replicas` pods with stable identities, `<set>-<ordinal>` from
//! `spec.ordinals.start`, each with its own PersistentVolumeClaims, and reports
//! `status.replicas`, `readyReplicas`, `availableReplicas`, `currentReplicas`,
//! `updatedReplicas`, `currentRevision`, `updateRevision`, `observedGeneration` and
//! `collisionCount`.
//!
//! - Pods carry `statefulset.kubernetes.io/pod-name`, `apps.kubernetes.io/pod-index`
//!   and `controller-revision-hash` (the name of their ControllerRevision), the hostname
//!   `<set>-<ordinal>` and the subdomain `spec.serviceName`; drifted labels and volumes
//!   are repaired.
//! - `volumeClaimTemplates`: the claim `<template>-<set>-<ordinal>` of each template is
//!   created before its pod, labelled with the selector's labels; the retention policy
//!   (`whenDeleted`, `whenScaled`: Retain or Delete) is carried out by owner references
//!   to the set or to a scaled-down pod, which the garbage collector follows.
//! - OrderedReady creates one pod at a time in ordinal order, each once the previous is
//!   Running, Ready and available, and scales down from the highest ordinal one at a
//!   time; Parallel creates and deletes without waiting. Ended pods are deleted and made
//!   again once gone; pods being deleted are waited for.
//! - Every template is a ControllerRevision `<set>-<hash>` (`history.rs`); RollingUpdate
//!   replaces the pods at or above `partition` from the highest ordinal, within
//!   `maxUnavailable`; OnDelete only makes again the pods users delete.
//!   `kubectl rollout status|history|undo` read and apply them.
//!
//! The decisions are pure (`control.rs`, `utils.rs`); this module holds the informers,
//! the work queue and the API calls. Expectations hold a set back until the watch has
//! shown the pods of its last sync. Events, with upstream's texts: `SuccessfulCreate`,
//! `FailedCreate`, `SuccessfulDelete`, `FailedDelete`, `SuccessfulUpdate`,
//! `FailedUpdate`, `RecreatingFailedPod`, `RecreatingTerminatedPod`,
//! `ConflictingController`, from `statefulset-controller`.

mod control;
mod history;
mod utils;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, PostParams};
use skiff_api::selector::LabelSelector;
use skiff_client::cache::{Delta, SharedInformer, SharedInformerFactory, object_key};
use skiff_client::events::EventRecorder;
use skiff_client::workqueue::{QueueMetrics, WorkQueue};
use tokio_util::sync::CancellationToken;

use self::control::{Counts, Step};
use self::utils::{
    Claims, Revisions, claim_owner_up_to_date, claims_for, claims_match_retention,
    has_unexpected_controller, identity_matches, is_member_of, is_rolling_update, ordinal,
    replicas, revision_template, storage_matches, update_claim_owner_refs, update_identity,
    update_storage,
};
use crate::Error;
use crate::controller_history::sort_controller_revisions;
use crate::controller_utils::{Expectations, claim_for, run_controller, update_status_retrying};
use crate::owner_handlers::OwnerHandlers;

/// The controller's name (`--controllers`, the events' reporting controller).
pub const NAME: &str = "statefulset-controller";

/// The StatefulSet controller; see the module doc.
pub struct StatefulSetController {
    client: kube::Client,
    sets: Arc<SharedInformer<StatefulSet>>,
    pods: Arc<SharedInformer<Pod>>,
    revisions: Arc<SharedInformer<ControllerRevision>>,
    claims: Arc<SharedInformer<PersistentVolumeClaim>>,
    queue: Arc<WorkQueue<String>>,
    expectations: Arc<Expectations>,
    recorder: EventRecorder,
}

impl std::fmt::Debug for StatefulSetController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatefulSetController")
            .finish_non_exhaustive()
    }
}

/// A claim that goes (or starts going) may hold back the pod of its name: its set
/// looks again. Claims carry their set's selector labels. (Upstream waits for a
/// resync instead.)
fn on_claim(h: &OwnerHandlers<StatefulSet>, delta: &Delta<PersistentVolumeClaim>) {
    let claim = match delta {
        Delta::Deleted(c) => c,
        Delta::Updated(old, new)
            if new.metadata.deletion_timestamp.is_some()
                || old.metadata.owner_references != new.metadata.owner_references =>
        {
            new
        }
        _ => return,
    };
    match h.owner(&claim.metadata) {
        Some(set) => h.queue.add(object_key(set.as_ref())),
        None => h.queue_matching(&claim.metadata),
    }
}

/// The status a sync leaves (upstream `updateStatefulSet`'s status with
/// `completeRollingUpdate`): the counts, the revisions, the collision count, the
/// generation when `observed_generation` is given (else the one observed before), and
/// the conditions as they were. A RollingUpdate whose pods are all updated and ready
/// makes the update revision current.
fn status_for(
    set: &StatefulSet,
    c: Counts,
    (current, update): (&str, &str),
    collision_count: i32,
    observed_generation: Option<i64>,
) -> StatefulSetStatus {
    let old = set.status.clone().unwrap_or_default();
    let nonzero = |n: i32| (n != 0).then_some(n);
    let mut s = StatefulSetStatus {
        observed_generation: observed_generation.or(old.observed_generation),
        replicas: c.replicas,
        ready_replicas: nonzero(c.ready),
        available_replicas: Some(c.available),
        current_replicas: nonzero(c.current),
        updated_replicas: nonzero(c.updated),
        current_revision: Some(current.to_owned()),
        update_revision: Some(update.to_owned()),
        collision_count: Some(collision_count),
        conditions: old.conditions,
    };
    let want = replicas(set);
    if is_rolling_update(set) && c.updated == want && c.ready == want && c.replicas == want {
        s.current_replicas = s.updated_replicas;
        s.current_revision.clone_from(&s.update_revision);
    }
    s
}

/// True when `new` says something `old` does not (upstream `inconsistentStatus`, plus
/// the collision count); an absent count equals 0.
fn status_differs(old: Option<&StatefulSetStatus>, new: &StatefulSetStatus) -> bool {
    let Some(old) = old else { return true };
    let n = |v: Option<i32>| v.unwrap_or(0);
    old.observed_generation != new.observed_generation
        || old.replicas != new.replicas
        || n(old.ready_replicas) != n(new.ready_replicas)
        || n(old.available_replicas) != n(new.available_replicas)
        || n(old.current_replicas) != n(new.current_replicas)
        || n(old.updated_replicas) != n(new.updated_replicas)
        || old.current_revision != new.current_revision
        || old.update_revision != new.update_revision
        || n(old.collision_count) != n(new.collision_count)
}

/// `namespace` and `name` of an object.
fn names(meta: &ObjectMeta) -> (&str, &str) {
    (
        meta.namespace.as_deref().unwrap_or(""),
        meta.name.as_deref().unwrap_or(""),
    )
}

fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

impl StatefulSetController {
    /// The controller over the factory's StatefulSet, Pod, ControllerRevision and
    /// PersistentVolumeClaim informers, its handlers registered.
    pub fn new(
        client: kube::Client,
        factory: &SharedInformerFactory,
        recorder: EventRecorder,
        queue_metrics: Arc<dyn QueueMetrics>,
    ) -> Arc<Self> {
        let handlers = OwnerHandlers {
            owners: factory.informer::<StatefulSet>(),
            queue: Arc::new(WorkQueue::new("statefulset").with_metrics(queue_metrics)),
            expectations: Arc::new(Expectations::default()),
        };
        let pods = factory.informer::<Pod>();
        let revisions = factory.informer::<ControllerRevision>();
        let claims = factory.informer::<PersistentVolumeClaim>();
        let h = handlers.clone();
        handlers
            .owners
            .add_event_handler(Box::new(move |d| h.on_owner(d)));
        let h = handlers.clone();
        pods.add_event_handler(Box::new(move |d| h.on_pod(d)));
        let h = handlers.clone();
        revisions.add_event_handler(Box::new(move |d| h.on_revision(d)));
        let h = handlers.clone();
        claims.add_event_handler(Box::new(move |d| on_claim(&h, d)));
        Arc::new(Self {
            client,
            sets: handlers.owners,
            pods,
            revisions,
            claims,
            queue: handlers.queue,
            expectations: handlers.expectations,
            recorder,
        })
    }

    /// Waits for the informers, then syncs with `workers` workers until `cancel`
    /// (`--concurrent-statefulset-syncs`, default 5).
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        run_controller(
            NAME,
            &[&*self.sets, &*self.pods, &*self.revisions, &*self.claims],
            &self.queue,
            workers,
            cancel,
            &self,
            |this, key| async move { this.sync(&key).await },
        )
        .await;
    }

    /// Upstream `recordPodEvent`: `Successful<Verb>` or `Failed<Verb>` about the pod.
    fn pod_event(&self, set: &StatefulSet, verb: &str, pod: &str, err: Option<&Error>) {
        let (_, name) = names(&set.metadata);
        let title = match verb {
            "create" => "Create",
            "delete" => "Delete",
            _ => "Update",
        };
        match err {
            None => {
                let note = format!("{verb} Pod {pod} in StatefulSet {name} successful");
                self.recorder
                    .event(set, "Normal", &format!("Successful{title}"), &note);
            }
            Some(e) => {
                let note = format!(
                    "{verb} Pod {pod} in StatefulSet {name} failed error: {}",
                    e.message()
                );
                self.recorder
                    .event(set, "Warning", &format!("Failed{title}"), &note);
            }
        }
    }

    /// One sync of the set `key` (upstream `sync`, `syncStatefulSet` and
    /// `UpdateStatefulSet`).
    async fn sync(&self, key: &str) -> Result<(), Error> {
        let Some(set) = self.sets.store().get(key) else {
            self.expectations.delete(key);
            return Ok(());
        };
        let selector = match LabelSelector::from_meta(&set.spec.selector) {
            Ok(s) => s,
            Err(e) => {
                // Upstream does not retry a selector that cannot parse.
                tracing::warn!(statefulset = key, error = %e, "invalid selector");
                return Ok(());
            }
        };
        let (ns, _) = names(&set.metadata);
        let candidates = self
            .revisions
            .store()
            .list()
            .into_iter()
            .filter(|r| r.metadata.namespace.as_deref() == Some(ns))
            .collect();
        let mut revisions: Vec<ControllerRevision> = self
            .claim(&set, &selector, candidates)
            .await?
            .into_iter()
            .map(|r| (*r).clone())
            .collect();
        sort_controller_revisions(&mut revisions);
        let candidates = self
            .pods
            .store()
            .list()
            .into_iter()
            .filter(|p| p.metadata.namespace.as_deref() == Some(ns) && is_member_of(&set, p))
            .collect();
        let pods = self.claim(&set, &selector, candidates).await?;

        let (current, update, collisions) = self.revisions_of(&set, &revisions).await?;
        let current_name = current.metadata.name.clone().unwrap_or_default();
        let update_name = update.metadata.name.clone().unwrap_or_default();
        let template = |r: &ControllerRevision| {
            revision_template(r).map_err(|e| {
                Error::Invalid(format!(
                    "revision {} of {key}: {e}",
                    r.metadata.name.as_deref().unwrap_or("")
                ))
            })
        };
        let (current_template, update_template) = (template(&current)?, template(&update)?);
        let rev = Revisions {
            current: &current_name,
            current_template: &current_template,
            update: &update_name,
            update_template: &update_template,
        };
        let claims: Claims = self
            .claims
            .store()
            .list()
            .into_iter()
            .filter(|c| c.metadata.namespace.as_deref() == Some(ns))
            .filter_map(|c| Some((c.metadata.name.clone()?, c)))
            .collect();
        let plan = control::plan(&set, &pods, &claims, &rev, Timestamp::now());

        let acting = self.expectations.satisfied(key);
        let synced = if acting {
            self.execute(key, &set, &plan, &claims).await
        } else {
            Ok(())
        };
        let generation = set.metadata.generation.filter(|_| acting);
        let status = status_for(
            &set,
            plan.counts,
            (&current_name, &update_name),
            collisions,
            generation,
        );
        let status_result = self.update_status(&set, status).await;
        let history = self
            .truncate_history(&set, &pods, &revisions, &current_name, &update_name)
            .await;
        let min_ready = set.spec.min_ready_seconds.unwrap_or(0);
        if min_ready > 0 && plan.counts.available != replicas(&set) {
            self.queue.add_after(
                key.to_owned(),
                Duration::from_secs(u64::try_from(min_ready).unwrap_or(0)),
            );
        }
        if let (Err(e), Err(s)) = (&synced, &status_result) {
            tracing::warn!(statefulset = key, error = %s, "status update failed; {e}");
        }
        synced.and(status_result).and(history)
    }

    /// Adopts and releases `candidates` for the set (upstream `ControllerRefManager`,
    /// with an uncached recheck of the set before adopting).
    async fn claim<K>(
        &self,
        set: &StatefulSet,
        selector: &LabelSelector,
        candidates: Vec<Arc<K>>,
    ) -> Result<Vec<Arc<K>>, Error>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        claim_for(&self.client, set, None, selector, candidates).await
    }

    /// Carries out the plan's steps in order, stopping at the first failure; the watch
    /// events of its creates and deletes are expected first.
    async fn execute(
        &self,
        key: &str,
        set: &StatefulSet,
        plan: &control::Plan,
        claims: &Claims,
    ) -> Result<(), Error> {
        let (ns, _) = names(&set.metadata);
        let (adds, dels) = plan.expected(ns);
        self.expectations.expect(key, adds, dels);
        for (i, step) in plan.steps.iter().enumerate() {
            let result = self.run_step(set, step, claims).await;
            let unseen = match &result {
                Ok(seen) => usize::from(!seen),
                Err(_) => plan.steps.len() - i,
            };
            // Creates and deletes that were not made, or whose events will never come.
            for s in plan.steps.iter().skip(i).take(unseen) {
                match s {
                    Step::Create(_) => self.expectations.creation_observed(key),
                    Step::DeleteEnded { name, .. } | Step::Condemn(name) | Step::Replace(name) => {
                        self.expectations
                            .deletion_observed(key, &format!("{ns}/{name}"));
                    }
                    _ => {}
                }
            }
            result?;
        }
        Ok(())
    }

    /// One step; Ok(false) when the watch will show nothing of it (a pod already gone).
    async fn run_step(
        &self,
        set: &StatefulSet,
        step: &Step,
        claims: &Claims,
    ) -> Result<bool, Error> {
        let (ns, set_name) = names(&set.metadata);
        match step {
            Step::DeleteEnded { name, failed } => {
                let (reason, type_, what) = if *failed {
                    ("RecreatingFailedPod", "Warning", "failed")
                } else {
                    ("RecreatingTerminatedPod", "Normal", "terminated")
                };
                let note = format!("StatefulSet {ns}/{set_name} is recreating {what} Pod {name}");
                self.recorder.event(set, type_, reason, &note);
                self.delete_pod(set, name).await
            }
            Step::Create(pod) => self.create_pod(set, pod, claims).await.map(|()| true),
            Step::CreateClaims(pod) => {
                self.create_claims(set, pod, claims).await?;
                self.update_claims_retention(set, pod, claims)
                    .await
                    .inspect_err(|e| {
                        self.pod_event(set, "update", pod_name_of(pod), Some(e));
                    })?;
                Ok(true)
            }
            Step::Update(pod) => self.update_pod(set, pod, claims).await.map(|()| true),
            Step::FixClaims(pod) => self
                .update_claims_retention(set, pod, claims)
                .await
                .map(|()| true),
            Step::Condemn(name) | Step::Replace(name) => {
                tracing::debug!(statefulset = set_name, pod = name, ?step, "deleting pod");
                self.delete_pod(set, name).await
            }
        }
    }

    /// Upstream `DeleteStatefulPod`; a pod already gone is Ok(false).
    async fn delete_pod(&self, set: &StatefulSet, name: &str) -> Result<bool, Error> {
        let (ns, _) = names(&set.metadata);
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {
                self.pod_event(set, "delete", name, None);
                Ok(true)
            }
            Err(e) if is_status(&e, 404) => Ok(false),
            Err(e) => {
                let e = Error::from(e);
                self.pod_event(set, "delete", name, Some(&e));
                Err(e)
            }
        }
    }

    /// Upstream `CreateStatefulPod`: the claims, then the pod, then the claims' owner
    /// references for the retention policy. A pod that exists already is an error
    /// without an event (the cache was behind).
    async fn create_pod(&self, set: &StatefulSet, pod: &Pod, claims: &Claims) -> Result<(), Error> {
        let name = pod_name_of(pod);
        if let Err(e) = self.create_claims(set, pod, claims).await {
            self.pod_event(set, "create", name, Some(&e));
            return Err(e);
        }
        let (ns, _) = names(&set.metadata);
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let created = match api.create(&PostParams::default(), pod).await {
            Ok(p) => p,
            Err(e) if is_status(&e, 409) => return Err(e.into()),
            Err(e) => {
                let e = Error::from(e);
                self.pod_event(set, "create", name, Some(&e));
                return Err(e);
            }
        };
        if let Err(e) = self.update_claims_retention(set, &created, claims).await {
            self.pod_event(set, "update", name, Some(&e));
            return Err(e);
        }
        self.pod_event(set, "create", name, None);
        Ok(())
    }

    /// Creates the pod's claims that are missing (upstream
    /// `createPersistentVolumeClaims`), with the owner references of the retention
    /// policy. Errors: a claim could not be created, or is being deleted (after trying
    /// the others).
    async fn create_claims(
        &self,
        set: &StatefulSet,
        pod: &Pod,
        claims: &Claims,
    ) -> Result<(), Error> {
        let (ns, set_name) = names(&set.metadata);
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), ns);
        let pod_name = pod_name_of(pod);
        let mut errors = Vec::new();
        for mut claim in claims_for(set, ordinal(pod)).into_values() {
            let name = claim.metadata.name.clone().unwrap_or_default();
            if let Some(existing) = claims.get(&name) {
                if existing.metadata.deletion_timestamp.is_some() {
                    errors.push(Error::Invalid(format!("pvc {name} is being deleted")));
                }
                continue;
            }
            update_claim_owner_refs(&mut claim, set, pod);
            match api.create(&PostParams::default(), &claim).await {
                Ok(_) => {
                    let note = format!(
                        "create Claim {name} Pod {pod_name} in StatefulSet {set_name} success"
                    );
                    self.recorder
                        .event(set, "Normal", "SuccessfulCreate", &note);
                }
                Err(e) if is_status(&e, 409) => {}
                Err(e) => {
                    let e = Error::from(e);
                    let note = format!(
                        "create Claim {name} for Pod {pod_name} in StatefulSet {set_name} \
                         failed error: {}",
                        e.message()
                    );
                    self.recorder.event(set, "Warning", "FailedCreate", &note);
                    errors.push(Error::Invalid(format!(
                        "failed to create PVC {name}: {}",
                        e.message()
                    )));
                }
            }
        }
        errors.into_iter().next().map_or(Ok(()), Err)
    }

    /// Gives the pod's existing claims the owner references of the retention policy
    /// (upstream `UpdatePodClaimForRetentionPolicy`).
    async fn update_claims_retention(
        &self,
        set: &StatefulSet,
        pod: &Pod,
        claims: &Claims,
    ) -> Result<(), Error> {
        let (ns, _) = names(&set.metadata);
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), ns);
        for wanted in claims_for(set, ordinal(pod)).into_values() {
            let name = wanted.metadata.name.unwrap_or_default();
            // A claim made moments ago may not be in the cache yet; skipping it would
            // leave the claim of a condemned pod without the owner that deletes it.
            let fetched;
            let existing = match claims.get(&name) {
                Some(existing) => existing,
                None => match api.get_opt(&name).await? {
                    Some(claim) => {
                        fetched = Arc::new(claim);
                        &fetched
                    }
                    None => continue,
                },
            };
            if has_unexpected_controller(existing, set, pod) {
                let note = format!(
                    "PersistentVolumeClaim {name} has a conflicting OwnerReference that acts as \
                     a manging controller, the retention policy is ignored for this claim"
                );
                self.recorder
                    .event(set, "Warning", "ConflictingController", &note);
            }
            if claim_owner_up_to_date(existing, set, pod) {
                continue;
            }
            let mut claim = (**existing).clone();
            update_claim_owner_refs(&mut claim, set, pod);
            api.replace(&name, &PostParams::default(), &claim)
                .await
                .map_err(|e| {
                    Error::Invalid(format!(
                        "could not update claim {name} for delete policy ownerRefs: {}",
                        Error::from(e).message()
                    ))
                })?;
        }
        Ok(())
    }

    /// Repairs the pod's identity and storage and its claims' owner references
    /// (upstream `UpdateStatefulPod`); a conflicting update is retried once on the pod
    /// read afresh.
    async fn update_pod(&self, set: &StatefulSet, pod: &Pod, claims: &Claims) -> Result<(), Error> {
        let name = pod_name_of(pod).to_owned();
        if !claims_match_retention(set, pod, claims) {
            self.update_claims_retention(set, pod, claims)
                .await
                .inspect_err(|e| self.pod_event(set, "update", &name, Some(e)))?;
        }
        let (ns, _) = names(&set.metadata);
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let mut pod = pod.clone();
        for attempt in 0..2 {
            let mut consistent = true;
            if !identity_matches(set, &pod) {
                update_identity(set, &mut pod);
                consistent = false;
            }
            if !storage_matches(set, &pod) {
                update_storage(set, &mut pod);
                consistent = false;
                self.create_claims(set, &pod, claims)
                    .await
                    .inspect_err(|e| self.pod_event(set, "update", &name, Some(e)))?;
            }
            if consistent {
                return Ok(());
            }
            match api.replace(&name, &PostParams::default(), &pod).await {
                Ok(_) => {
                    self.pod_event(set, "update", &name, None);
                    return Ok(());
                }
                Err(e) if attempt == 0 && is_status(&e, 409) => {
                    pod = api.get(&name).await?;
                }
                Err(e) => {
                    let e = Error::from(e);
                    self.pod_event(set, "update", &name, Some(&e));
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Writes `status` unless the set has it already (upstream
    /// `updateStatefulSetStatus`): one retry on a conflict, with the set read afresh.
    async fn update_status(
        &self,
        set: &StatefulSet,
        status: StatefulSetStatus,
    ) -> Result<(), Error> {
        if !status_differs(set.status.as_ref(), &status) {
            return Ok(());
        }
        // The set's conditions are kept as they are when it is written (`status` holds
        // those of `set`).
        update_status_retrying(&self.client, set, |set| {
            let conditions = set.status.take().and_then(|s| s.conditions);
            set.status = Some(StatefulSetStatus {
                conditions,
                ..status.clone()
            });
        })
        .await?;
        Ok(())
    }
}

fn pod_name_of(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::StatefulSetUpdateStrategy;

    use super::utils::tests::stateful_set;
    use super::*;

    fn counts(replicas: i32, ready: i32, current: i32, updated: i32) -> Counts {
        Counts {
            replicas,
            ready,
            available: ready,
            current,
            updated,
        }
    }

    #[test]
    fn status_completes_a_rolling_update() {
        let mut set = stateful_set(3);
        set.metadata.generation = Some(4);
        let s = status_for(&set, counts(3, 3, 1, 2), ("a", "b"), 0, Some(4));
        assert_eq!(
            (
                s.current_revision.as_deref(),
                s.current_replicas,
                s.updated_replicas
            ),
            (Some("a"), Some(1), Some(2))
        );
        assert_eq!(
            (s.observed_generation, s.collision_count),
            (Some(4), Some(0))
        );
        let s = status_for(&set, counts(3, 3, 0, 3), ("a", "b"), 0, Some(4));
        assert_eq!(
            (s.current_revision.as_deref(), s.current_replicas),
            (Some("b"), Some(3))
        );
        // Not ready yet: not complete. OnDelete: never.
        let s = status_for(&set, counts(3, 2, 0, 3), ("a", "b"), 0, Some(4));
        assert_eq!(s.current_revision.as_deref(), Some("a"));
        set.spec.update_strategy = Some(StatefulSetUpdateStrategy {
            type_: Some("OnDelete".into()),
            rolling_update: None,
        });
        let s = status_for(&set, counts(3, 3, 0, 3), ("a", "b"), 0, Some(4));
        assert_eq!(s.current_revision.as_deref(), Some("a"));
    }

    #[test]
    fn status_is_written_only_when_it_changes() {
        let mut set = stateful_set(1);
        let s = status_for(&set, counts(1, 1, 1, 1), ("a", "a"), 0, Some(1));
        assert!(status_differs(None, &s));
        assert!(!status_differs(Some(&s), &s));
        // Zero counts read back absent are the same.
        let zero = status_for(&set, counts(0, 0, 0, 0), ("a", "a"), 0, Some(1));
        let mut read_back = zero.clone();
        read_back.available_replicas = None;
        read_back.collision_count = Some(0);
        assert!(!status_differs(Some(&read_back), &zero));
        // Without observing, the generation observed before is kept.
        set.status = Some(s.clone());
        let later = status_for(&set, counts(1, 1, 1, 1), ("a", "a"), 0, None);
        assert_eq!(later.observed_generation, Some(1));
        assert!(!status_differs(Some(&s), &later));
    }
}
