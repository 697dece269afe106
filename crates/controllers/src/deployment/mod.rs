//! The Deployment controller (upstream `pkg/controller/deployment`): each Deployment
//! owns ReplicaSets, one per pod template (named `<deployment>-<pod-template-hash>`,
//! annotated with its revision); the controller rolls pods from the old ones to the
//! new one as the strategy says and reports the Deployment's status.
//!
//! - **RollingUpdate** (`rolling.go`): the new ReplicaSet grows while all pods stay
//!   within `replicas + maxSurge`, old ones shrink while at least
//!   `replicas - maxUnavailable` pods are available; unhealthy old pods go first.
//! - **Recreate** (`recreate.go`): old ReplicaSets go to 0, and once their pods are
//!   gone the new one is scaled up.
//! - Scaling a Deployment mid-rollout spreads the change over its active ReplicaSets in
//!   proportion to their size (`sync.go` `scale`); a paused Deployment is only scaled.
//! - Status (`sync.go`, `progress.go`): replicas, updated, ready, available and
//!   unavailable replicas, `collisionCount`, and the `Available`
//!   (`MinimumReplicasAvailable`) and `Progressing` (`ReplicaSetUpdated`,
//!   `NewReplicaSetAvailable`, `ProgressDeadlineExceeded`, `DeploymentPaused`,
//!   `DeploymentResumed`) conditions with upstream's messages.
//! - Old ReplicaSets beyond `revisionHistoryLimit` are deleted once empty.
//!
//! `kubectl rollout undo` rolls back on the client side (it copies an old ReplicaSet's
//! template into the Deployment); `kubectl rollout restart` changes an annotation of
//! the template; both are ordinary rollouts here.

pub mod util;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet, ReplicaSetSpec,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, PostParams};
use skiff_api::core::pod::conditions::pod_phase;
use skiff_api::selector::LabelSelector;
use skiff_client::cache::{Delta, SharedInformer, SharedInformerFactory, object_key};
use skiff_client::events::EventRecorder;
use skiff_client::workqueue::{QueueMetrics, WorkQueue};
use tokio_util::sync::CancellationToken;

use self::util::{
    DESIRED_REPLICAS_ANNOTATION, MAX_REPLICAS_ANNOTATION, POD_TEMPLATE_HASH_LABEL,
    REVISION_ANNOTATION, REVISION_HISTORY_ANNOTATION, REVISION_HISTORY_LIMIT_IN_CHARS,
    compute_hash, condition, deployment_complete, deployment_progressing, deployment_timed_out,
    equal_ignore_hash, is_rolling_update, is_saturated, max_surge, max_unavailable,
    new_rs_new_replicas, replicas, revision, rs_available, rs_replicas, skip_annotation,
};
use crate::Error;
use crate::controller_utils::{
    claim_for, controller_of, controller_ref, resolve_controller_ref, run_controller,
};

/// The controller's name (`--controllers`, the events' reporting controller).
pub const NAME: &str = "deployment-controller";

const PROGRESSING: &str = "Progressing";
const AVAILABLE: &str = "Available";
const TIMED_OUT_REASON: &str = "ProgressDeadlineExceeded";
const PAUSED_REASON: &str = "DeploymentPaused";
const RESUMED_REASON: &str = "DeploymentResumed";

/// The Deployment controller; see the module doc.
pub struct DeploymentController {
    client: kube::Client,
    deployments: Arc<SharedInformer<Deployment>>,
    replica_sets: Arc<SharedInformer<ReplicaSet>>,
    pods: Arc<SharedInformer<Pod>>,
    queue: Arc<WorkQueue<String>>,
    recorder: EventRecorder,
}

impl std::fmt::Debug for DeploymentController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeploymentController")
            .finish_non_exhaustive()
    }
}

#[derive(Clone)]
struct Handlers {
    deployments: Arc<SharedInformer<Deployment>>,
    replica_sets: Arc<SharedInformer<ReplicaSet>>,
    queue: Arc<WorkQueue<String>>,
}

impl Handlers {
    fn owner(&self, meta: &ObjectMeta) -> Option<Arc<Deployment>> {
        resolve_controller_ref(self.deployments.store(), meta)
    }

    fn queue_matching(&self, rs: &ReplicaSet) {
        let ns = rs.metadata.namespace.as_deref();
        let labels = rs.metadata.labels.clone().unwrap_or_default();
        for d in self.deployments.store().list() {
            if d.metadata.namespace.as_deref() != ns {
                continue;
            }
            if LabelSelector::from_meta(&d.spec.selector)
                .is_ok_and(|s| !s.is_empty() && s.matches(&labels))
            {
                self.queue.add(object_key(d.as_ref()));
            }
        }
    }

    fn on_replica_set(&self, delta: &Delta<ReplicaSet>) {
        match delta {
            Delta::Added(rs) | Delta::Deleted(rs) => {
                if let Some(d) = self.owner(&rs.metadata) {
                    self.queue.add(object_key(d.as_ref()));
                } else if controller_of(&rs.metadata).is_none() && matches!(delta, Delta::Added(_))
                {
                    self.queue_matching(rs);
                }
            }
            Delta::Updated(old, new) => {
                if controller_of(&old.metadata) != controller_of(&new.metadata)
                    && let Some(d) = self.owner(&old.metadata)
                {
                    self.queue.add(object_key(d.as_ref()));
                }
                if let Some(d) = self.owner(&new.metadata) {
                    self.queue.add(object_key(d.as_ref()));
                } else if controller_of(&new.metadata).is_none()
                    && old.metadata.labels != new.metadata.labels
                {
                    self.queue_matching(new);
                }
            }
        }
    }

    /// A Recreate Deployment waits for its old pods to go: a deleted pod may let it on.
    fn on_pod(&self, delta: &Delta<Pod>) {
        let Delta::Deleted(pod) = delta else { return };
        let Some(rs) = resolve_controller_ref(self.replica_sets.store(), &pod.metadata) else {
            return;
        };
        if let Some(d) = self.owner(&rs.metadata)
            && !is_rolling_update(&d)
        {
            self.queue.add(object_key(d.as_ref()));
        }
    }
}

impl DeploymentController {
    /// The controller over the factory's Deployment, ReplicaSet and Pod informers, its
    /// handlers registered.
    pub fn new(
        client: kube::Client,
        factory: &SharedInformerFactory,
        recorder: EventRecorder,
        queue_metrics: Arc<dyn QueueMetrics>,
    ) -> Arc<Self> {
        let h = Handlers {
            deployments: factory.informer::<Deployment>(),
            replica_sets: factory.informer::<ReplicaSet>(),
            queue: Arc::new(WorkQueue::new("deployment").with_metrics(queue_metrics)),
        };
        let pods = factory.informer::<Pod>();
        let q = Arc::clone(&h.queue);
        h.deployments.add_event_handler(Box::new(move |d| match d {
            Delta::Added(d) | Delta::Updated(_, d) | Delta::Deleted(d) => {
                q.add(object_key(d.as_ref()));
            }
        }));
        let hh = h.clone();
        h.replica_sets
            .add_event_handler(Box::new(move |d| hh.on_replica_set(d)));
        let hh = h.clone();
        pods.add_event_handler(Box::new(move |d| hh.on_pod(d)));
        Arc::new(Self {
            client,
            deployments: h.deployments,
            replica_sets: h.replica_sets,
            pods,
            queue: h.queue,
            recorder,
        })
    }

    /// Waits for the informers, then syncs with `workers` workers until `cancel`
    /// (`--concurrent-deployment-syncs`, default 5).
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        run_controller(
            NAME,
            &[&*self.deployments, &*self.replica_sets, &*self.pods],
            &self.queue,
            workers,
            cancel,
            &self,
            |this, key| async move { this.sync(&key).await },
        )
        .await;
    }

    fn rs_api(&self, ns: &str) -> Api<ReplicaSet> {
        Api::namespaced(self.client.clone(), ns)
    }

    /// One sync of the Deployment `key` (upstream `syncDeployment`).
    async fn sync(&self, key: &str) -> Result<(), Error> {
        let Some(d) = self.deployments.store().get(key) else {
            return Ok(());
        };
        let mut d = (*d).clone();
        let ns = d.metadata.namespace.clone().unwrap_or_default();
        let selector = LabelSelector::from_meta(&d.spec.selector)
            .map_err(|e| Error::Invalid(format!("invalid selector of {key}: {e}")))?;
        if selector.is_empty() {
            self.recorder.event(
                &d,
                "Warning",
                "SelectingAll",
                "This deployment is selecting all pods. A non-empty selector is required.",
            );
            let mut status = d.status.clone().unwrap_or_default();
            if status.observed_generation < d.metadata.generation {
                status.observed_generation = d.metadata.generation;
                self.update_status(&mut d, status).await?;
            }
            return Ok(());
        }
        let candidates: Vec<Arc<ReplicaSet>> = self
            .replica_sets
            .store()
            .list()
            .into_iter()
            .filter(|rs| rs.metadata.namespace.as_deref() == Some(ns.as_str()))
            .collect();
        let rs_list: Vec<ReplicaSet> = claim_for(&self.client, &d, None, &selector, candidates)
            .await?
            .into_iter()
            .map(|rs| (*rs).clone())
            .collect();
        if d.metadata.deletion_timestamp.is_some() {
            return self.sync_status_only(&mut d, rs_list).await;
        }
        self.check_paused_conditions(&mut d).await?;
        if d.spec.paused == Some(true) {
            return self.sync_scale_only(&mut d, rs_list).await;
        }
        if self.is_scaling_event(&d, &rs_list) {
            tracing::debug!(deployment = key, "scaling event");
            return self.sync_scale_only(&mut d, rs_list).await;
        }
        tracing::debug!(deployment = key, generation = ?d.metadata.generation, "rollout");
        if is_rolling_update(&d) {
            self.rollout_rolling(&mut d, rs_list).await
        } else {
            self.rollout_recreate(&mut d, rs_list).await
        }
    }

    /// The new ReplicaSet (created when `create`; its annotations brought up to date) and
    /// the old ones (upstream `getAllReplicaSetsAndSyncRevision`).
    async fn get_all(
        &self,
        d: &mut Deployment,
        rs_list: Vec<ReplicaSet>,
        create: bool,
    ) -> Result<(Option<ReplicaSet>, Vec<ReplicaSet>), Error> {
        let new_idx = find_new(d, &rs_list);
        let mut old = Vec::new();
        let mut new = None;
        for (i, rs) in rs_list.into_iter().enumerate() {
            if Some(i) == new_idx {
                new = Some(rs);
            } else {
                old.push(rs);
            }
        }
        let new = self.get_new_replica_set(d, new, &old, create).await?;
        Ok((new, old))
    }

    /// Upstream `getNewReplicaSet`.
    async fn get_new_replica_set(
        &self,
        d: &mut Deployment,
        existing: Option<ReplicaSet>,
        old: &[ReplicaSet],
        create: bool,
    ) -> Result<Option<ReplicaSet>, Error> {
        let ns = d.metadata.namespace.clone().unwrap_or_default();
        let new_revision = old.iter().map(revision).max().unwrap_or(0) + 1;
        if let Some(mut rs) = existing {
            let mut changed = set_new_rs_annotations(d, &mut rs, new_revision, true);
            if rs.spec.min_ready_seconds != d.spec.min_ready_seconds {
                rs.spec.min_ready_seconds = d.spec.min_ready_seconds;
                changed = true;
            }
            if changed {
                let name = rs.metadata.name.clone().unwrap_or_default();
                rs = self
                    .rs_api(&ns)
                    .replace(&name, &PostParams::default(), &rs)
                    .await?;
            }
            self.sync_revision(d, &rs, false).await?;
            return Ok(Some(rs));
        }
        if !create {
            return Ok(None);
        }
        let collision = d.status.as_ref().and_then(|s| s.collision_count);
        let hash = compute_hash(&d.spec.template, collision);
        let mut template = d.spec.template.clone();
        template
            .metadata
            .get_or_insert_with(Default::default)
            .labels
            .get_or_insert_with(Default::default)
            .insert(POD_TEMPLATE_HASH_LABEL.to_owned(), hash.clone());
        let mut selector = d.spec.selector.clone();
        selector
            .match_labels
            .get_or_insert_with(Default::default)
            .insert(POD_TEMPLATE_HASH_LABEL.to_owned(), hash.clone());
        let d_name = d.metadata.name.clone().unwrap_or_default();
        let labels = template.metadata.as_ref().and_then(|m| m.labels.clone());
        let mut rs = ReplicaSet {
            metadata: ObjectMeta {
                name: Some(format!("{d_name}-{hash}")),
                namespace: Some(ns.clone()),
                labels,
                owner_references: Some(vec![controller_ref(&d.metadata, "apps/v1", "Deployment")]),
                ..Default::default()
            },
            spec: ReplicaSetSpec {
                replicas: Some(0),
                min_ready_seconds: d.spec.min_ready_seconds,
                selector,
                template: Some(template),
            },
            status: None,
        };
        let all: Vec<&ReplicaSet> = old.iter().chain(std::iter::once(&rs)).collect();
        let size = new_rs_new_replicas(d, &all, &rs);
        rs.spec.replicas = Some(size);
        set_new_rs_annotations(d, &mut rs, new_revision, false);
        set_replicas_annotations(&mut rs, replicas(d), replicas(d) + max_surge(d));
        let created = match self.rs_api(&ns).create(&PostParams::default(), &rs).await {
            Ok(c) => c,
            Err(kube::Error::Api(s)) if s.code == 409 => {
                let name = rs.metadata.name.clone().unwrap_or_default();
                let found = self.rs_api(&ns).get(&name).await?;
                let ours = controller_of(&found.metadata)
                    .is_some_and(|r| Some(&r.uid) == d.metadata.uid.as_ref());
                let same = found
                    .spec
                    .template
                    .as_ref()
                    .is_some_and(|t| equal_ignore_hash(t, &d.spec.template));
                if ours && same {
                    return Ok(Some(found));
                }
                // A hash collision: the next hash is tried on the next sync.
                let mut status = d.status.clone().unwrap_or_default();
                status.collision_count = Some(status.collision_count.unwrap_or(0) + 1);
                self.update_status(d, status).await?;
                return Err(Error::Invalid(format!(
                    "found a hash collision for deployment {d_name:?} - bumping collisionCount"
                )));
            }
            Err(e) => {
                let msg = format!(
                    "Failed to create new replica set {:?}: {e}",
                    rs.metadata.name.as_deref().unwrap_or("")
                );
                self.recorder.event(d, "Warning", "FailedCreate", &msg);
                return Err(e.into());
            }
        };
        if size > 0 {
            let note = format!(
                "Scaled up replica set {} from 0 to {size}",
                created.metadata.name.as_deref().unwrap_or("")
            );
            self.recorder.event(d, "Normal", "ScalingReplicaSet", &note);
        }
        self.sync_revision(d, &created, true).await?;
        Ok(Some(created))
    }

    /// Writes the new ReplicaSet's revision on the Deployment, and a Progressing
    /// condition naming the ReplicaSet when it was just `created`
    /// (`NewReplicaSetCreated`) or when there is none yet (`FoundNewReplicaSet`), with
    /// the status as upstream does (`getNewReplicaSet`).
    async fn sync_revision(
        &self,
        d: &mut Deployment,
        rs: &ReplicaSet,
        created: bool,
    ) -> Result<(), Error> {
        let rev = revision(rs).to_string();
        let annotations = d.metadata.annotations.get_or_insert_with(Default::default);
        let mut needs_update = annotations.get(REVISION_ANNOTATION) != Some(&rev);
        annotations.insert(REVISION_ANNOTATION.to_owned(), rev);
        let mut status = d.status.clone().unwrap_or_default();
        let has_deadline = d
            .spec
            .progress_deadline_seconds
            .is_some_and(|s| s != i32::MAX);
        let rs_name = rs.metadata.name.clone().unwrap_or_default();
        if has_deadline && created {
            let msg = format!("Created new replica set {rs_name:?}");
            set_condition(
                &mut status,
                new_condition(
                    PROGRESSING,
                    "True",
                    "NewReplicaSetCreated",
                    &msg,
                    Timestamp::now(),
                ),
            );
            needs_update = true;
        } else if has_deadline && condition(&status, PROGRESSING).is_none() {
            let msg = format!("Found new replica set {rs_name:?}");
            set_condition(
                &mut status,
                new_condition(
                    PROGRESSING,
                    "True",
                    "FoundNewReplicaSet",
                    &msg,
                    Timestamp::now(),
                ),
            );
            needs_update = true;
        }
        if !needs_update {
            return Ok(());
        }
        self.update_status(d, status).await
    }

    /// Scales `rs` to `size`, refreshing its replicas annotations; an event when the
    /// size changes (upstream `scaleReplicaSetAndRecordEvent`). The ReplicaSet as
    /// written, and whether it was scaled.
    async fn scale_rs(
        &self,
        d: &Deployment,
        rs: &ReplicaSet,
        size: i32,
    ) -> Result<(ReplicaSet, bool), Error> {
        let mut copy = rs.clone();
        let old = rs_replicas(rs);
        let annotated =
            set_replicas_annotations(&mut copy, replicas(d), replicas(d) + max_surge(d));
        if old == size && !annotated {
            return Ok((copy, false));
        }
        copy.spec.replicas = Some(size);
        let ns = rs.metadata.namespace.clone().unwrap_or_default();
        let name = rs.metadata.name.clone().unwrap_or_default();
        let written = self
            .rs_api(&ns)
            .replace(&name, &PostParams::default(), &copy)
            .await?;
        tracing::debug!(replicaset = %name, from = old, to = size, "scaling");
        if old != size {
            let op = if size > old { "up" } else { "down" };
            let note = format!("Scaled {op} replica set {name} from {old} to {size}");
            self.recorder.event(d, "Normal", "ScalingReplicaSet", &note);
        }
        Ok((written, old != size))
    }

    /// True when an active ReplicaSet was sized for another `spec.replicas` (upstream
    /// `isScalingEvent`).
    fn is_scaling_event(&self, d: &Deployment, rs_list: &[ReplicaSet]) -> bool {
        let want = replicas(d).to_string();
        let new_idx = find_new(d, rs_list);
        rs_list.iter().enumerate().any(|(i, rs)| {
            (rs_replicas(rs) > 0 || Some(i) == new_idx)
                && rs
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(DESIRED_REPLICAS_ANNOTATION))
                    .is_some_and(|v| *v != want)
        })
    }

    /// A paused Deployment, or a scaling event: scale, clean up when paused, status
    /// (upstream `sync`).
    async fn sync_scale_only(
        &self,
        d: &mut Deployment,
        rs_list: Vec<ReplicaSet>,
    ) -> Result<(), Error> {
        let (new, old) = self.get_all(d, rs_list, false).await?;
        let (new, old) = self.scale(d, new, old).await?;
        if d.spec.paused == Some(true) {
            self.cleanup(d, &old).await?;
        }
        let all: Vec<&ReplicaSet> = old.iter().chain(new.iter()).collect();
        let status = calculate_status(&all, new.as_ref(), d, Timestamp::now());
        if d.status.as_ref() != Some(&status) {
            self.update_status(d, status).await?;
        }
        Ok(())
    }

    /// A Deployment being deleted: only its status (upstream `syncStatusOnly`).
    async fn sync_status_only(
        &self,
        d: &mut Deployment,
        rs_list: Vec<ReplicaSet>,
    ) -> Result<(), Error> {
        let (new, old) = self.get_all(d, rs_list, false).await?;
        let all: Vec<&ReplicaSet> = old.iter().chain(new.iter()).collect();
        let status = calculate_status(&all, new.as_ref(), d, Timestamp::now());
        if d.status.as_ref() != Some(&status) {
            self.update_status(d, status).await?;
        }
        Ok(())
    }

    /// Upstream `scale`: the change of `spec.replicas` goes to the one active
    /// ReplicaSet, or is spread over the active ones in proportion to their size.
    async fn scale(
        &self,
        d: &Deployment,
        new: Option<ReplicaSet>,
        old: Vec<ReplicaSet>,
    ) -> Result<(Option<ReplicaSet>, Vec<ReplicaSet>), Error> {
        let want = replicas(d);
        let mut all: Vec<(bool, ReplicaSet)> = new
            .into_iter()
            .map(|rs| (true, rs))
            .chain(old.into_iter().map(|rs| (false, rs)))
            .collect();
        let active: Vec<usize> = (0..all.len())
            .filter(|i| rs_replicas(&all[*i].1) > 0)
            .collect();
        let target = match active.as_slice() {
            [] => {
                // The new one, else the latest old one.
                (0..all.len()).max_by_key(|i| (all[*i].0, creation(&all[*i].1)))
            }
            [one] => Some(*one),
            _ => None,
        };
        if let Some(i) = target {
            if rs_replicas(&all[i].1) != want {
                all[i].1 = self.scale_rs(d, &all[i].1, want).await?.0;
            }
            return Ok(split(all));
        }
        let new_rs = all.iter().find(|(n, _)| *n).map(|(_, rs)| rs);
        if is_saturated(d, new_rs) {
            for i in active {
                if !all[i].0 {
                    all[i].1 = self.scale_rs(d, &all[i].1, 0).await?.0;
                }
            }
            return Ok(split(all));
        }
        if is_rolling_update(d) {
            let total: i32 = active.iter().map(|i| rs_replicas(&all[*i].1)).sum();
            let allowed = if want > 0 { want + max_surge(d) } else { 0 };
            let to_add = allowed - total;
            let mut order = active.clone();
            // Larger first; ties: newer first when growing, older first when shrinking.
            order.sort_by(|a, b| {
                let (ra, rb) = (&all[*a].1, &all[*b].1);
                rs_replicas(rb).cmp(&rs_replicas(ra)).then_with(|| {
                    if to_add > 0 {
                        creation(rb).cmp(&creation(ra))
                    } else {
                        creation(ra).cmp(&creation(rb))
                    }
                })
            });
            let mut sizes: HashMap<usize, i32> = HashMap::new();
            let mut added = 0;
            for i in &order {
                let rs = &all[*i].1;
                let p = if to_add != 0 {
                    proportion(rs, d, to_add, added)
                } else {
                    0
                };
                sizes.insert(*i, rs_replicas(rs) + p);
                added += p;
            }
            if to_add != 0
                && added != to_add
                && let Some(first) = order.first()
                && let Some(s) = sizes.get_mut(first)
            {
                *s = (*s + to_add - added).max(0);
            }
            for i in order {
                let size = sizes.get(&i).copied().unwrap_or(0);
                all[i].1 = self.scale_rs(d, &all[i].1, size).await?.0;
            }
        }
        Ok(split(all))
    }

    /// Deletes the oldest empty ReplicaSets beyond `revisionHistoryLimit` (upstream
    /// `cleanupDeployment`).
    async fn cleanup(&self, d: &Deployment, old: &[ReplicaSet]) -> Result<(), Error> {
        let limit = d.spec.revision_history_limit.unwrap_or(10);
        let mut cleanable: Vec<&ReplicaSet> = old
            .iter()
            .filter(|rs| rs.metadata.deletion_timestamp.is_none())
            .collect();
        let diff = i32::try_from(cleanable.len()).unwrap_or(i32::MAX) - limit;
        if diff <= 0 {
            return Ok(());
        }
        cleanable.sort_by_key(|rs| (revision(rs), creation(rs)));
        for rs in cleanable
            .into_iter()
            .take(usize::try_from(diff).unwrap_or(0))
        {
            let status = rs.status.clone().unwrap_or_default();
            if status.replicas != 0
                || rs_replicas(rs) != 0
                || rs.metadata.generation > status.observed_generation
            {
                continue;
            }
            let ns = rs.metadata.namespace.as_deref().unwrap_or("");
            let name = rs.metadata.name.as_deref().unwrap_or("");
            match self.rs_api(ns).delete(name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Upstream `rolloutRolling`.
    async fn rollout_rolling(
        &self,
        d: &mut Deployment,
        rs_list: Vec<ReplicaSet>,
    ) -> Result<(), Error> {
        let (new, mut old) = self.get_all(d, rs_list, true).await?;
        let Some(mut new) = new else {
            return Err(Error::Invalid("no new ReplicaSet".into()));
        };
        // Grow the new ReplicaSet (upstream reconcileNewReplicaSet).
        let want = replicas(d);
        let target = if rs_replicas(&new) > want {
            Some(want)
        } else if rs_replicas(&new) < want {
            let all: Vec<&ReplicaSet> = old.iter().chain(std::iter::once(&new)).collect();
            Some(new_rs_new_replicas(d, &all, &new))
        } else {
            None
        };
        if let Some(size) = target {
            let (written, scaled) = self.scale_rs(d, &new, size).await?;
            new = written;
            if scaled {
                return self.sync_rollout_status(d, &old, Some(&new)).await;
            }
        }
        if self.reconcile_old(d, &mut old, &new).await? {
            return self.sync_rollout_status(d, &old, Some(&new)).await;
        }
        let current = d.status.clone().unwrap_or_default();
        if deployment_complete(d, &current) {
            self.cleanup(d, &old).await?;
        }
        self.sync_rollout_status(d, &old, Some(&new)).await
    }

    /// Shrinks the old ReplicaSets within maxUnavailable, unhealthy pods first
    /// (upstream `reconcileOldReplicaSets`); whether any was scaled.
    async fn reconcile_old(
        &self,
        d: &Deployment,
        old: &mut [ReplicaSet],
        new: &ReplicaSet,
    ) -> Result<bool, Error> {
        let old_count: i32 = old.iter().map(rs_replicas).sum();
        if old_count == 0 {
            return Ok(false);
        }
        let all_count = old_count + rs_replicas(new);
        let min_available = replicas(d) - max_unavailable(d);
        let new_unavailable = rs_replicas(new) - rs_available(new);
        let max_scaled_down = all_count - min_available - new_unavailable;
        if max_scaled_down <= 0 {
            return Ok(false);
        }
        old.sort_by_key(creation);
        // Unhealthy replicas first (upstream cleanupUnhealthyReplicas).
        let mut cleaned = 0;
        for rs in old.iter_mut() {
            if cleaned >= max_scaled_down {
                break;
            }
            let (size, available) = (rs_replicas(rs), rs_available(rs));
            // Healthy (a status still counting pods of a larger size included): never
            // scaled up here, as upstream refuses to.
            if size == 0 || available >= size {
                continue;
            }
            let down = (max_scaled_down - cleaned).min(size - available);
            *rs = self.scale_rs(d, rs, size - down).await?.0;
            cleaned += down;
        }
        // Then healthy ones while enough stay available (scaleDownOldReplicaSetsForRollingUpdate).
        let available: i32 = old.iter().map(rs_available).sum::<i32>() + rs_available(new);
        let mut scaled = 0;
        if available > min_available {
            let total = available - min_available;
            for rs in old.iter_mut() {
                if scaled >= total {
                    break;
                }
                let size = rs_replicas(rs);
                if size == 0 {
                    continue;
                }
                let down = size.min(total - scaled);
                *rs = self.scale_rs(d, rs, size - down).await?.0;
                scaled += down;
            }
        }
        Ok(cleaned + scaled > 0)
    }

    /// Upstream `rolloutRecreate`.
    async fn rollout_recreate(
        &self,
        d: &mut Deployment,
        rs_list: Vec<ReplicaSet>,
    ) -> Result<(), Error> {
        let (new, mut old) = self.get_all(d, rs_list, false).await?;
        let mut scaled_down = false;
        for rs in old.iter_mut() {
            if rs_replicas(rs) > 0 {
                let (written, scaled) = self.scale_rs(d, rs, 0).await?;
                *rs = written;
                scaled_down |= scaled;
            }
        }
        if scaled_down {
            return self.sync_rollout_status(d, &old, new.as_ref()).await;
        }
        if self.old_pods_running(new.as_ref(), &old) {
            return self.sync_rollout_status(d, &old, new.as_ref()).await;
        }
        let new = match new {
            Some(n) => n,
            None => {
                let (n, o) = self.get_all(d, old.clone(), true).await?;
                old = o;
                let Some(n) = n else {
                    return Err(Error::Invalid("no new ReplicaSet".into()));
                };
                n
            }
        };
        let (new, _) = self.scale_rs(d, &new, replicas(d)).await?;
        let current = d.status.clone().unwrap_or_default();
        if deployment_complete(d, &current) {
            self.cleanup(d, &old).await?;
        }
        self.sync_rollout_status(d, &old, Some(&new)).await
    }

    /// True while a pod of an old ReplicaSet may still run (upstream `oldPodsRunning`).
    fn old_pods_running(&self, new: Option<&ReplicaSet>, old: &[ReplicaSet]) -> bool {
        if old
            .iter()
            .any(|rs| rs.status.as_ref().is_some_and(|s| s.replicas > 0))
        {
            return true;
        }
        let old_uids: Vec<&str> = old
            .iter()
            .filter(|rs| new.is_none_or(|n| n.metadata.uid != rs.metadata.uid))
            .filter_map(|rs| rs.metadata.uid.as_deref())
            .collect();
        self.pods.store().list().iter().any(|p| {
            controller_of(&p.metadata).is_some_and(|r| old_uids.contains(&r.uid.as_str()))
                && !matches!(pod_phase(p), "Failed" | "Succeeded")
        })
    }

    /// Writes the Progressing condition as the rollout stands, and the status (upstream
    /// `syncRolloutStatus`); a rollout not complete is looked at again at its deadline.
    async fn sync_rollout_status(
        &self,
        d: &mut Deployment,
        old: &[ReplicaSet],
        new: Option<&ReplicaSet>,
    ) -> Result<(), Error> {
        let now = Timestamp::now();
        let all: Vec<&ReplicaSet> = old.iter().chain(new).collect();
        let mut status = calculate_status(&all, new, d, now);
        let deadline = d.spec.progress_deadline_seconds.filter(|s| *s != i32::MAX);
        if deadline.is_none() {
            remove_condition(&mut status, PROGRESSING);
        }
        let current = d
            .status
            .as_ref()
            .and_then(|s| condition(s, PROGRESSING))
            .cloned();
        let complete = deployment_complete(d, &status);
        let rs_name = new.and_then(|n| n.metadata.name.clone());
        let subject = |what: &str| match &rs_name {
            Some(n) => format!("ReplicaSet {n:?} {what}"),
            None => format!(
                "Deployment {:?} {what}",
                d.metadata.name.as_deref().unwrap_or("")
            ),
        };
        // Upstream checks progress unless the last rollout already completed; a
        // rollout that timed out is checked again, so that progress revives it.
        let already_complete = status.replicas == status.updated_replicas
            && current.as_ref().and_then(|c| c.reason.as_deref()) == Some("NewReplicaSetAvailable");
        if deadline.is_some() && !already_complete {
            if complete {
                set_condition(
                    &mut status,
                    new_condition(
                        PROGRESSING,
                        "True",
                        "NewReplicaSetAvailable",
                        &subject("has successfully progressed."),
                        now,
                    ),
                );
            } else if deployment_progressing(d, &status) {
                let mut c = new_condition(
                    PROGRESSING,
                    "True",
                    "ReplicaSetUpdated",
                    &subject("is progressing."),
                    now,
                );
                if let Some(cur) = &current {
                    if cur.status.as_deref() == Some("True") {
                        c.last_transition_time.clone_from(&cur.last_transition_time);
                    }
                    remove_condition(&mut status, PROGRESSING);
                }
                set_condition(&mut status, c);
            } else if deployment_timed_out(d, &status, now) {
                set_condition(
                    &mut status,
                    new_condition(
                        PROGRESSING,
                        "False",
                        TIMED_OUT_REASON,
                        &subject("has timed out progressing."),
                        now,
                    ),
                );
            }
        }
        // A ReplicaSet that fails to create or delete pods shows on its Deployment.
        match all.iter().find_map(|rs| {
            rs.status
                .as_ref()?
                .conditions
                .as_ref()?
                .iter()
                .find(|c| {
                    c.type_.as_deref() == Some("ReplicaFailure")
                        && c.status.as_deref() == Some("True")
                })
                .cloned()
        }) {
            Some(f) => set_condition(
                &mut status,
                new_condition(
                    "ReplicaFailure",
                    "True",
                    f.reason.as_deref().unwrap_or(""),
                    f.message.as_deref().unwrap_or(""),
                    now,
                ),
            ),
            None => remove_condition(&mut status, "ReplicaFailure"),
        }
        if d.status.as_ref() != Some(&status) {
            self.update_status(d, status.clone()).await?;
        }
        // Look again when the deadline passes (upstream requeueStuckDeployment).
        if let (Some(secs), Some(c)) = (deadline, condition(&status, PROGRESSING))
            && !complete
            && c.reason.as_deref() != Some(TIMED_OUT_REASON)
            && let Some(t) = &c.last_update_time
        {
            let until = t.0.as_second() + i64::from(secs) - now.as_second();
            let key = object_key(&*d);
            if until < 1 {
                self.queue.add_rate_limited(key);
            } else {
                self.queue.add_after(
                    key,
                    Duration::from_secs(u64::try_from(until).unwrap_or(0) + 1),
                );
            }
        }
        Ok(())
    }

    /// Upstream `checkPausedConditions`: Progressing says `DeploymentPaused` while
    /// paused and `DeploymentResumed` once resumed.
    async fn check_paused_conditions(&self, d: &mut Deployment) -> Result<(), Error> {
        if d.spec
            .progress_deadline_seconds
            .is_none_or(|s| s == i32::MAX)
        {
            return Ok(());
        }
        let mut status = d.status.clone().unwrap_or_default();
        let cur = condition(&status, PROGRESSING).and_then(|c| c.reason.clone());
        if cur.as_deref() == Some(TIMED_OUT_REASON) {
            return Ok(());
        }
        let paused_shown = cur.as_deref() == Some(PAUSED_REASON);
        let paused = d.spec.paused == Some(true);
        let now = Timestamp::now();
        let c = if paused && !paused_shown {
            new_condition(
                PROGRESSING,
                "Unknown",
                PAUSED_REASON,
                "Deployment is paused",
                now,
            )
        } else if !paused && paused_shown {
            new_condition(
                PROGRESSING,
                "Unknown",
                RESUMED_REASON,
                "Deployment is resumed",
                now,
            )
        } else {
            return Ok(());
        };
        set_condition(&mut status, c);
        self.update_status(d, status).await
    }

    async fn update_status(
        &self,
        d: &mut Deployment,
        status: DeploymentStatus,
    ) -> Result<(), Error> {
        let ns = d.metadata.namespace.clone().unwrap_or_default();
        let name = d.metadata.name.clone().unwrap_or_default();
        d.status = Some(status);
        let api: Api<Deployment> = Api::namespaced(self.client.clone(), &ns);
        *d = api.replace_status(&name, &PostParams::default(), d).await?;
        Ok(())
    }
}

fn creation(rs: &ReplicaSet) -> (Option<Timestamp>, String) {
    (
        rs.metadata.creation_timestamp.as_ref().map(|t| t.0),
        rs.metadata.name.clone().unwrap_or_default(),
    )
}

fn split(all: Vec<(bool, ReplicaSet)>) -> (Option<ReplicaSet>, Vec<ReplicaSet>) {
    let mut new = None;
    let mut old = Vec::new();
    for (is_new, rs) in all {
        if is_new {
            new = Some(rs);
        } else {
            old.push(rs);
        }
    }
    (new, old)
}

/// The index of the oldest ReplicaSet whose template is the Deployment's (upstream
/// `FindNewReplicaSet`).
fn find_new(d: &Deployment, rs_list: &[ReplicaSet]) -> Option<usize> {
    let mut idx: Vec<usize> = (0..rs_list.len()).collect();
    idx.sort_by_key(|i| creation(&rs_list[*i]));
    idx.into_iter().find(|i| {
        rs_list[*i]
            .spec
            .template
            .as_ref()
            .is_some_and(|t| equal_ignore_hash(t, &d.spec.template))
    })
}

/// Copies the Deployment's annotations (but its own) to the new ReplicaSet and raises
/// its revision to `new_revision` (upstream `SetNewReplicaSetAnnotations`); whether
/// anything changed.
fn set_new_rs_annotations(
    d: &Deployment,
    rs: &mut ReplicaSet,
    new_revision: i64,
    exists: bool,
) -> bool {
    let mut changed = false;
    let annotations = rs.metadata.annotations.get_or_insert_with(BTreeMap::new);
    for (k, v) in d.metadata.annotations.iter().flatten() {
        if skip_annotation(k) || annotations.get(k) == Some(v) {
            continue;
        }
        annotations.insert(k.clone(), v.clone());
        changed = true;
    }
    let old_text = annotations.get(REVISION_ANNOTATION).cloned();
    let old: i64 = old_text
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    if old < new_revision || (!exists && old == 0) {
        annotations.insert(REVISION_ANNOTATION.to_owned(), new_revision.to_string());
        changed = true;
    }
    // A ReplicaSet given a newer revision is a rollback to it: its old revisions are
    // kept in the history, at most 2,000 characters (upstream
    // `revHistoryLimitInChars`), oldest dropped first.
    if let Some(old_text) = old_text.filter(|_| old < new_revision) {
        let history = annotations
            .get(REVISION_HISTORY_ANNOTATION)
            .cloned()
            .unwrap_or_default();
        let mut revisions: Vec<&str> = history.split(',').filter(|r| !r.is_empty()).collect();
        revisions.push(&old_text);
        while revisions.iter().map(|r| r.len() + 1).sum::<usize>() - 1
            > REVISION_HISTORY_LIMIT_IN_CHARS
            && revisions.len() > 1
        {
            revisions.remove(0);
        }
        annotations.insert(REVISION_HISTORY_ANNOTATION.to_owned(), revisions.join(","));
    }
    changed
}

/// Sets the desired- and max-replicas annotations; whether they changed (upstream
/// `SetReplicasAnnotations`).
fn set_replicas_annotations(rs: &mut ReplicaSet, desired: i32, max: i32) -> bool {
    let annotations = rs.metadata.annotations.get_or_insert_with(BTreeMap::new);
    let mut changed = false;
    for (k, v) in [
        (DESIRED_REPLICAS_ANNOTATION, desired),
        (MAX_REPLICAS_ANNOTATION, max),
    ] {
        let v = v.to_string();
        if annotations.get(k) != Some(&v) {
            annotations.insert(k.to_owned(), v);
            changed = true;
        }
    }
    changed
}

/// How many of `to_add` (a change of the Deployment's size) the ReplicaSet takes
/// (upstream `GetProportion`).
fn proportion(rs: &ReplicaSet, d: &Deployment, to_add: i32, added: i32) -> i32 {
    if rs_replicas(rs) == 0 || to_add == 0 || to_add == added {
        return 0;
    }
    let fraction = replica_set_fraction(rs, d);
    let allowed = to_add - added;
    if to_add > 0 {
        fraction.min(allowed)
    } else {
        fraction.max(allowed)
    }
}

/// Upstream `getReplicaSetFraction`: the ReplicaSet's share of the new size, against
/// the size it was last scaled for.
fn replica_set_fraction(rs: &ReplicaSet, d: &Deployment) -> i32 {
    let want = replicas(d);
    if want == 0 {
        return -rs_replicas(rs);
    }
    let deployment_replicas = want + max_surge(d);
    let annotated = rs
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(MAX_REPLICAS_ANNOTATION))
        .and_then(|v| v.parse::<i32>().ok())
        .unwrap_or_else(|| d.status.as_ref().and_then(|s| s.replicas).unwrap_or(0));
    if annotated == 0 {
        return 0;
    }
    let new_size = (f64::from(rs_replicas(rs)) * f64::from(deployment_replicas)
        / f64::from(annotated))
    .round();
    #[allow(clippy::cast_possible_truncation)]
    let new_size = new_size as i32;
    new_size - rs_replicas(rs)
}

fn new_condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> DeploymentCondition {
    DeploymentCondition {
        type_: Some(type_.to_owned()),
        status: Some(status.to_owned()),
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
        last_update_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    }
}

/// Upstream `SetDeploymentCondition`: a condition with the same status and reason is
/// left as it is; the transition time is kept while the status does not change.
fn set_condition(status: &mut DeploymentStatus, mut c: DeploymentCondition) {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    if let Some(cur) = conditions.iter().find(|x| x.type_ == c.type_) {
        if cur.status == c.status && cur.reason == c.reason {
            return;
        }
        if cur.status == c.status {
            c.last_transition_time.clone_from(&cur.last_transition_time);
        }
    }
    conditions.retain(|x| x.type_ != c.type_);
    conditions.push(c);
}

fn remove_condition(status: &mut DeploymentStatus, type_: &str) {
    if let Some(c) = status.conditions.as_mut() {
        c.retain(|x| x.type_.as_deref() != Some(type_));
        if c.is_empty() {
            status.conditions = None;
        }
    }
}

/// The Deployment's status from its ReplicaSets (upstream `calculateStatus`).
fn calculate_status(
    all: &[&ReplicaSet],
    new: Option<&ReplicaSet>,
    d: &Deployment,
    now: Timestamp,
) -> DeploymentStatus {
    let status_of = |rs: &ReplicaSet| rs.status.clone().unwrap_or_default();
    let available: i32 = all.iter().map(|rs| rs_available(rs)).sum();
    let total: i32 = all.iter().map(|rs| rs_replicas(rs)).sum();
    let actual: i32 = all.iter().map(|rs| status_of(rs).replicas).sum();
    let ready: i32 = all
        .iter()
        .map(|rs| status_of(rs).ready_replicas.unwrap_or(0))
        .sum();
    let updated = new.map_or(0, |rs| status_of(rs).replicas);
    let old = d.status.clone().unwrap_or_default();
    let nonzero = |n: i32| (n != 0).then_some(n);
    let mut status = DeploymentStatus {
        observed_generation: d.metadata.generation,
        replicas: nonzero(actual),
        updated_replicas: nonzero(updated),
        ready_replicas: nonzero(ready),
        available_replicas: nonzero(available),
        unavailable_replicas: nonzero((total - available).max(0)),
        collision_count: old.collision_count,
        conditions: old.conditions.clone(),
        terminating_replicas: old.terminating_replicas,
    };
    if available >= replicas(d) - max_unavailable(d) {
        set_condition(
            &mut status,
            new_condition(
                AVAILABLE,
                "True",
                "MinimumReplicasAvailable",
                "Deployment has minimum availability.",
                now,
            ),
        );
    } else {
        set_condition(
            &mut status,
            new_condition(
                AVAILABLE,
                "False",
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.",
                now,
            ),
        );
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rollback_keeps_the_old_revisions_in_the_history() {
        let d = Deployment::default();
        let mut rs = ReplicaSet::default();
        assert!(set_new_rs_annotations(&d, &mut rs, 1, false));
        let get = |rs: &ReplicaSet, k: &str| {
            rs.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(k))
                .cloned()
        };
        assert_eq!(get(&rs, REVISION_ANNOTATION).as_deref(), Some("1"));
        assert_eq!(get(&rs, REVISION_HISTORY_ANNOTATION), None);
        // Rolled back to twice: revision 1 became 3, then 3 became 5.
        assert!(set_new_rs_annotations(&d, &mut rs, 3, true));
        assert!(set_new_rs_annotations(&d, &mut rs, 5, true));
        assert_eq!(get(&rs, REVISION_ANNOTATION).as_deref(), Some("5"));
        assert_eq!(
            get(&rs, REVISION_HISTORY_ANNOTATION).as_deref(),
            Some("1,3")
        );
        // Already the newest: nothing changes.
        assert!(!set_new_rs_annotations(&d, &mut rs, 5, true));
    }
}
