//! The Job controller (upstream `pkg/controller/job/job_controller.go`): runs a Job's
//! pods until `completions` of them succeed, or until the Job fails.
//!
//! - **Pods.** At most `parallelism` active pods, and never more than the completions
//!   still missing; created in slow-start batches under expectations, after the
//!   backoff that failures impose ([`backoff`]). `suspend` deletes the active pods; a
//!   resumed Job gets a new `startTime`. `Indexed` Jobs give each pod an index
//!   ([`indexed`]) and complete when every index has succeeded.
//! - **No lost result.** Every pod is created with the finalizer
//!   `batch.kubernetes.io/job-tracking` (KEP-2307). A terminated pod's UID goes first
//!   into `status.uncountedTerminatedPods`, which is written; then the finalizer is
//!   removed; then the UID moves into `succeeded` or `failed`, which is written. A crash
//!   between any two steps loses and doubles nothing. Pods of a deleted or finished Job
//!   lose the finalizer too.
//! - **Failure.** More failures than `backoffLimit` (`BackoffLimitExceeded`, "Job has
//!   reached the specified backoff limit"), restarts of `OnFailure` pods reaching it, an
//!   `activeDeadlineSeconds` passed (`DeadlineExceeded`), or a `FailJob` rule of
//!   `podFailurePolicy` ([`pod_failure_policy`]; `Ignore` rules do not count). As
//!   upstream since 1.31, the interim `FailureTarget` condition is written first, the
//!   active pods are deleted, and `Failed` follows once none is terminating; success
//!   likewise writes `SuccessCriteriaMet` and then `Complete` (reason
//!   `CompletionsReached`) with `completionTime`.
//! - **Per index** ([`backoff_limit_per_index`], KEP-3850). With `backoffLimitPerIndex`
//!   an Indexed Job counts failures per index (pod annotations
//!   `batch.kubernetes.io/job-index-failure-count` and `...-ignored-failure-count`), backs
//!   off per index, and marks an index that fails once more than the limit, or matches
//!   a `FailIndex` rule, in `status.failedIndexes` without running it again. More failed
//!   indexes than `maxFailedIndexes` fail the Job (`MaxFailedIndexesExceeded`), as does
//!   the end of every index with some failed (`FailedIndexes`).
//! - **Success policy** ([`success_policy`], KEP-3998). An Indexed Job whose succeeded
//!   indexes match a rule of `successPolicy` gets `SuccessCriteriaMet` with reason
//!   `SuccessPolicy` ("Matched rules at index N"); its remaining pods are deleted and
//!   `Complete` follows with the same reason.
//! - **Status**: `active`, `ready`, `terminating`, `succeeded`, `failed`, `startTime`,
//!   `completedIndexes`, `failedIndexes`, the `Suspended` condition. **Events**:
//!   `SuccessfulCreate`, `FailedCreate`, `SuccessfulDelete`, `Completed`, `Suspended`,
//!   `Resumed`, and the failure reason as a Warning.
//!
//! Not here yet: the metrics of `job_controller` (`job_sync_duration_seconds`,
//! `job_finished_indexes_total`, ...).

mod backoff;
mod backoff_limit_per_index;
mod indexed;
mod pod_failure_policy;
mod success_policy;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus, UncountedTerminatedPods};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use skiff_api::core::pod::conditions::{is_pod_active, is_pod_ready};
use skiff_api::selector::LabelSelector;
use skiff_client::cache::{Delta, SharedInformer, SharedInformerFactory, object_key};
use skiff_client::events::EventRecorder;
use skiff_client::workqueue::{QueueMetrics, WorkQueue};
use tokio_util::sync::CancellationToken;

use self::backoff::{BackoffRecord, BackoffStore};
use self::indexed::OrderedIntervals;
use crate::Error;
use crate::controller_utils::{
    Expectations, SLOW_START_INITIAL_BATCH_SIZE, claim_for, controller_of, controller_ref,
    pod_from_template, pod_key, pods_to_delete, resolve_controller_ref, run_workers,
    slow_start_batch,
};

/// The controller's name (`--controllers`, the events' reporting controller).
pub const NAME: &str = "job-controller";
/// The finalizer on every pod of a Job until its result is counted (KEP-2307).
pub const JOB_TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";
/// `spec.managedBy` of Jobs this controller syncs (KEP-4368); others are left alone.
pub const JOB_CONTROLLER_NAME: &str = "kubernetes.io/job-controller";
/// At most this many pods created or deleted per sync (upstream
/// `MaxPodCreateDeletePerSync`).
const MAX_POD_CREATE_DELETE_PER_SYNC: usize = 500;
/// At most this many UIDs in `uncountedTerminatedPods` (upstream `MaxUncountedPods`).
const MAX_UNCOUNTED_PODS: usize = 500;

/// The pods whose finalizer removal this controller issued and has not seen yet, by
/// Job key (upstream `uidTrackingExpectations` of `finalizerExpectations`).
#[derive(Debug, Default)]
struct FinalizerExpectations {
    by_key: Mutex<HashMap<String, HashSet<String>>>,
}

impl FinalizerExpectations {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, HashSet<String>>> {
        self.by_key.lock().unwrap_or_else(PoisonError::into_inner)
    }
    fn expect(&self, key: &str, uids: impl IntoIterator<Item = String>) {
        self.lock().entry(key.to_owned()).or_default().extend(uids);
    }
    fn observed(&self, key: &str, uid: &str) {
        let mut map = self.lock();
        if let Some(set) = map.get_mut(key) {
            set.remove(uid);
            if set.is_empty() {
                map.remove(key);
            }
        }
    }
    fn expected(&self, key: &str) -> HashSet<String> {
        self.lock().get(key).cloned().unwrap_or_default()
    }
    fn delete(&self, key: &str) {
        self.lock().remove(key);
    }
}

/// The Job controller; see the module doc.
pub struct JobController {
    client: kube::Client,
    jobs: Arc<SharedInformer<Job>>,
    pods: Arc<SharedInformer<Pod>>,
    queue: Arc<WorkQueue<String>>,
    /// Pod keys whose tracking finalizer may have to go (upstream `orphanQueue`).
    orphans: Arc<WorkQueue<String>>,
    expectations: Arc<Expectations>,
    finalizers: Arc<FinalizerExpectations>,
    backoff: BackoffStore,
    recorder: EventRecorder,
}

impl std::fmt::Debug for JobController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobController").finish_non_exhaustive()
    }
}

fn has_tracking_finalizer(pod: &Pod) -> bool {
    pod.metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == JOB_TRACKING_FINALIZER))
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

/// A condition of the Job's status with `type` and status True.
fn true_condition<'a>(job: &'a Job, type_: &str) -> Option<&'a JobCondition> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_ && c.status == "True")
}

/// Whether the Job has its terminal condition (upstream `IsJobFinished`).
pub fn is_job_finished(job: &Job) -> bool {
    true_condition(job, "Complete").is_some() || true_condition(job, "Failed").is_some()
}

fn new_condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> JobCondition {
    JobCondition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
        last_probe_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    }
}

/// Sets the condition `type_` (upstream `ensureJobConditionStatus`): updated when its
/// status, reason or message differ, appended unless it would be a new False one.
/// Whether the list changed.
fn ensure_condition(
    conditions: &mut Vec<JobCondition>,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> bool {
    if let Some(c) = conditions.iter_mut().find(|c| c.type_ == type_) {
        if c.status != status
            || c.reason.as_deref() != Some(reason)
            || c.message.as_deref() != Some(message)
        {
            *c = new_condition(type_, status, reason, message, now);
            return true;
        }
        return false;
    }
    if status != "False" {
        conditions.push(new_condition(type_, status, reason, message, now));
        return true;
    }
    false
}

/// Whether only failed pods are replaced, not terminating ones (upstream
/// `onlyReplaceFailedPods`: `podReplacementPolicy: Failed`, or a pod failure policy).
fn only_replace_failed(job: &Job) -> bool {
    let spec = job.spec.as_ref();
    spec.and_then(|s| s.pod_replacement_policy.as_deref()) == Some("Failed")
        || spec.is_some_and(|s| s.pod_failure_policy.is_some())
}

/// `backoffLimitPerIndex` of an Indexed Job (upstream `hasBackoffLimitPerIndex`); a
/// negative value, which validation refuses, reads as 0.
fn backoff_limit_per_index(job: &Job) -> Option<u32> {
    let spec = job.spec.as_ref()?;
    if spec.completion_mode.as_deref() != Some("Indexed") {
        return None;
    }
    spec.backoff_limit_per_index
        .map(|l| u32::try_from(l).unwrap_or(0))
}

/// `backoffLimit`, as defaulted when absent: 6, or 2147483647 with
/// `backoffLimitPerIndex` (upstream `SetDefaults_Job`).
fn backoff_limit(job: &Job) -> i64 {
    let spec = job.spec.as_ref();
    let default = if spec.is_some_and(|s| s.backoff_limit_per_index.is_some()) {
        i32::MAX
    } else {
        6
    };
    i64::from(spec.and_then(|s| s.backoff_limit).unwrap_or(default))
}

/// Whether a pod counts as failed (upstream `isPodFailed`): phase Failed, or deleted
/// before it succeeded unless only failed pods are replaced.
fn is_pod_failed(pod: &Pod, job: &Job) -> bool {
    if phase(pod) == "Failed" {
        return true;
    }
    if only_replace_failed(job) {
        return false;
    }
    pod.metadata.deletion_timestamp.is_some() && phase(pod) != "Succeeded"
}

/// Whether a pod is being deleted and has not terminated (upstream
/// `CountTerminatingPods`).
fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some() && !matches!(phase(pod), "Succeeded" | "Failed")
}

fn omit_zero(n: usize) -> Option<i32> {
    (n != 0).then(|| i32::try_from(n).unwrap_or(i32::MAX))
}

fn as_count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// What one sync knows of a Job (upstream `syncJobCtx`).
struct SyncCtx {
    key: String,
    job: Job,
    pods: Vec<Arc<Pod>>,
    active_pods: Vec<Arc<Pod>>,
    ready: usize,
    terminating: usize,
    succeeded: usize,
    failed: usize,
    uncounted_succeeded: HashSet<String>,
    uncounted_failed: HashSet<String>,
    expected_rm_finalizers: HashSet<String>,
    finished: Option<JobCondition>,
    new_backoff: BackoffRecord,
    prev_succeeded_indexes: OrderedIntervals,
    succeeded_indexes: OrderedIntervals,
    /// With `backoffLimitPerIndex`: the failed indexes (upstream `failedIndexes`).
    failed_indexes: Option<OrderedIntervals>,
    /// With `backoffLimitPerIndex`: by index, the failed pod whose finalizer stays until
    /// its replacement exists (upstream `podsWithDelayedDeletionPerIndex`).
    pods_with_delayed_deletion: HashMap<usize, Arc<Pod>>,
}

impl SyncCtx {
    /// The indexes no pod is created for any more: succeeded, and failed ones.
    fn finished_indexes(&self) -> OrderedIntervals {
        match &self.failed_indexes {
            Some(failed) => self.succeeded_indexes.merge(failed),
            None => self.succeeded_indexes.clone(),
        }
    }
}

/// What the event handlers need, apart from the controller.
#[derive(Clone)]
struct Handlers {
    jobs: Arc<SharedInformer<Job>>,
    queue: Arc<WorkQueue<String>>,
    orphans: Arc<WorkQueue<String>>,
    expectations: Arc<Expectations>,
    finalizers: Arc<FinalizerExpectations>,
}

impl Handlers {
    /// The key of the Job a controller reference of kind Job names, whether or not it
    /// is cached.
    fn referenced_job_key(pod: &Pod) -> Option<String> {
        let r = controller_of(&pod.metadata)?;
        (r.kind == "Job").then(|| {
            format!(
                "{}/{}",
                pod.metadata.namespace.as_deref().unwrap_or(""),
                r.name
            )
        })
    }

    fn queue_matching(&self, pod: &Pod) {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("");
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        for job in self.jobs.store().list() {
            if job.metadata.namespace.as_deref() != Some(ns) {
                continue;
            }
            let matches = job
                .spec
                .as_ref()
                .and_then(|s| s.selector.as_ref())
                .and_then(|s| LabelSelector::from_meta(s).ok())
                .is_some_and(|sel| !sel.is_empty() && sel.matches(&labels));
            if matches {
                self.queue.add(object_key(job.as_ref()));
            }
        }
    }

    fn on_pod(&self, delta: &Delta<Pod>) {
        match delta {
            Delta::Added(pod) => {
                if let Some(key) = Self::referenced_job_key(pod) {
                    if pod.metadata.deletion_timestamp.is_some() {
                        self.expectations.deletion_observed(&key, &pod_key(pod));
                    } else {
                        self.expectations.creation_observed(&key);
                    }
                }
                self.route(pod);
            }
            Delta::Updated(old, new) => {
                if let Some(key) = Self::referenced_job_key(new) {
                    if has_tracking_finalizer(old) && !has_tracking_finalizer(new) {
                        self.finalizers.observed(&key, &uid(new));
                    }
                    if new.metadata.deletion_timestamp.is_some() {
                        self.expectations.deletion_observed(&key, &pod_key(new));
                    }
                }
                if controller_of(&old.metadata) != controller_of(&new.metadata) {
                    self.route(old);
                }
                self.route(new);
            }
            Delta::Deleted(pod) => {
                if let Some(key) = Self::referenced_job_key(pod) {
                    self.expectations.deletion_observed(&key, &pod_key(pod));
                    self.finalizers.observed(&key, &uid(pod));
                    self.queue.add(key);
                }
            }
        }
    }

    /// Queues the pod's Job; a pod with the tracking finalizer and no live Job goes to
    /// the orphan queue; an orphan may be adopted by a Job whose selector matches.
    fn route(&self, pod: &Pod) {
        match resolve_controller_ref(self.jobs.store(), &pod.metadata) {
            Some(job) => self.queue.add(object_key(job.as_ref())),
            None => {
                if has_tracking_finalizer(pod) {
                    self.orphans.add(pod_key(pod));
                }
                if controller_of(&pod.metadata).is_none()
                    && pod.metadata.deletion_timestamp.is_none()
                {
                    self.queue_matching(pod);
                }
            }
        }
    }

    fn on_job(&self, delta: &Delta<Job>) {
        match delta {
            Delta::Added(job) | Delta::Updated(_, job) => self.queue.add(object_key(job.as_ref())),
            Delta::Deleted(job) => {
                let key = object_key(job.as_ref());
                self.expectations.delete(&key);
                self.finalizers.delete(&key);
                // Its pods lose the finalizer through the orphan queue (upstream
                // `cleanupPodFinalizers`), once the pod informer shows them.
                self.queue.add(key);
            }
        }
    }
}

impl JobController {
    /// The controller over the factory's Job and Pod informers, its handlers
    /// registered.
    pub fn new(
        client: kube::Client,
        factory: &SharedInformerFactory,
        recorder: EventRecorder,
        queue_metrics: Arc<dyn QueueMetrics>,
    ) -> Arc<Self> {
        let handlers = Handlers {
            jobs: factory.informer::<Job>(),
            queue: Arc::new(WorkQueue::new("job").with_metrics(Arc::clone(&queue_metrics))),
            orphans: Arc::new(WorkQueue::new("job_orphan_pod").with_metrics(queue_metrics)),
            expectations: Arc::new(Expectations::default()),
            finalizers: Arc::new(FinalizerExpectations::default()),
        };
        let pods = factory.informer::<Pod>();
        let h = handlers.clone();
        handlers
            .jobs
            .add_event_handler(Box::new(move |d| h.on_job(d)));
        let h = handlers.clone();
        pods.add_event_handler(Box::new(move |d| h.on_pod(d)));
        Arc::new(Self {
            client,
            jobs: handlers.jobs,
            pods,
            queue: handlers.queue,
            orphans: handlers.orphans,
            expectations: handlers.expectations,
            finalizers: handlers.finalizers,
            backoff: BackoffStore::default(),
            recorder,
        })
    }

    /// Waits for the informers, then syncs Jobs with `workers` workers, and orphan
    /// pods with one, until `cancel` (`--concurrent-job-syncs`, default 5).
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        tokio::select! {
            () = cancel.cancelled() => return,
            () = async {
                self.jobs.wait_for_sync().await;
                self.pods.wait_for_sync().await;
            } => {}
        }
        let this = Arc::clone(&self);
        let jobs = run_workers(
            NAME,
            Arc::clone(&self.queue),
            workers,
            cancel.clone(),
            move |key| {
                let this = Arc::clone(&this);
                async move { this.sync(&key).await }
            },
        );
        let this = Arc::clone(&self);
        let orphans = run_workers(NAME, Arc::clone(&self.orphans), 1, cancel, move |key| {
            let this = Arc::clone(&this);
            async move { this.handle_orphan_pod(&key).await }
        });
        tokio::join!(jobs, orphans);
    }

    /// Removes the tracking finalizer of a pod whose Job is gone, replaced or
    /// finished (upstream `handleOrphanPod`).
    async fn handle_orphan_pod(&self, key: &str) -> Result<(), Error> {
        let Some(pod) = self.pods.store().get(key) else {
            return Ok(());
        };
        if !has_tracking_finalizer(&pod) {
            return Ok(());
        }
        if let Some(job) = resolve_controller_ref(self.jobs.store(), &pod.metadata)
            && !is_job_finished(&job)
        {
            // The Job's own sync counts this pod before it lets it go.
            return Ok(());
        }
        self.remove_finalizer(&pod).await
    }

    async fn remove_finalizer(&self, pod: &Pod) -> Result<(), Error> {
        let api: Api<Pod> = Api::namespaced(
            self.client.clone(),
            pod.metadata.namespace.as_deref().unwrap_or(""),
        );
        let patch = json!({"metadata": {
            "$deleteFromPrimitiveList/finalizers": [JOB_TRACKING_FINALIZER],
        }});
        match api
            .patch(
                pod.metadata.name.as_deref().unwrap_or(""),
                &PatchParams::default(),
                &Patch::Strategic(patch),
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// The pods of the Job after adoption and release (upstream `getPodsForJob`): every
    /// pod of the namespace is a candidate; an adopted pod gets the tracking finalizer.
    async fn pods_for_job(&self, job: &Job) -> Result<Vec<Arc<Pod>>, Error> {
        let ns = job.metadata.namespace.clone().unwrap_or_default();
        let selector = job
            .spec
            .as_ref()
            .and_then(|s| s.selector.as_ref())
            .map(LabelSelector::from_meta)
            .transpose()
            .map_err(|e| Error::Invalid(format!("couldn't convert Job selector: {e}")))?
            .unwrap_or_default();
        let candidates: Vec<Arc<Pod>> = self
            .pods
            .store()
            .list()
            .into_iter()
            .filter(|p| p.metadata.namespace.as_deref() == Some(ns.as_str()))
            .collect();
        claim_for(
            &self.client,
            job,
            Some(JOB_TRACKING_FINALIZER),
            &selector,
            candidates,
        )
        .await
    }

    /// One sync of the Job `key` (upstream `syncJob`).
    async fn sync(&self, key: &str) -> Result<(), Error> {
        let Some(shared) = self.jobs.store().get(key) else {
            self.expectations.delete(key);
            self.finalizers.delete(key);
            self.backoff.remove(key);
            self.release_pods_of_gone_job(key);
            return Ok(());
        };
        let spec = shared.spec.clone().unwrap_or_default();
        if spec
            .managed_by
            .as_deref()
            .is_some_and(|m| m != JOB_CONTROLLER_NAME)
        {
            return Ok(());
        }
        if is_job_finished(&shared) {
            self.backoff.remove(key);
            self.release_pods_of_finished_job(&shared);
            return Ok(());
        }
        let indexed = match spec.completion_mode.as_deref() {
            None | Some("NonIndexed") => false,
            Some("Indexed") => true,
            Some(_) => {
                self.recorder.event(
                    shared.as_ref(),
                    "Warning",
                    "UnknownCompletionMode",
                    "Skipped Job sync because completion mode is unknown",
                );
                return Ok(());
            }
        };
        let now = Timestamp::now();
        let mut job = (*shared).clone();
        let status = job.status.get_or_insert_with(JobStatus::default);
        let uncounted = status
            .uncounted_terminated_pods
            .get_or_insert_with(UncountedTerminatedPods::default);
        let uncounted_succeeded: HashSet<String> =
            uncounted.succeeded.iter().flatten().cloned().collect();
        let uncounted_failed: HashSet<String> =
            uncounted.failed.iter().flatten().cloned().collect();
        // Expectations are read before the pods, so that a pod arriving in between
        // defers the sync rather than being missed.
        let satisfied = self.expectations.satisfied(key);
        let pods = self.pods_for_job(&job).await?;
        let active_pods: Vec<Arc<Pod>> =
            pods.iter().filter(|p| is_pod_active(p)).cloned().collect();
        let expected_rm = self.finalizers.expected(key);
        let countable = |p: &Pod, uncounted: &HashSet<String>| {
            let id = uid(p);
            has_tracking_finalizer(p)
                && !uncounted.contains(&id)
                && !expected_rm.contains(&id)
                && (!indexed
                    || indexed::completion_index(p).is_some_and(|ix| {
                        ix < usize::try_from(spec.completions.unwrap_or(0)).unwrap_or(0)
                    }))
        };
        let new_succeeded: Vec<&Pod> = pods
            .iter()
            .map(AsRef::as_ref)
            .filter(|p| countable(p, &uncounted_succeeded) && phase(p) == "Succeeded")
            .collect();
        let new_failed: Vec<&Pod> = pods
            .iter()
            .map(AsRef::as_ref)
            .filter(|p| countable(p, &uncounted_failed) && is_pod_failed(p, &job))
            .collect();
        let non_ignored_failed = match &spec.pod_failure_policy {
            Some(policy) => new_failed
                .iter()
                .filter(|p| pod_failure_policy::match_policy(policy, p).count_failed)
                .count(),
            None => new_failed.len(),
        };
        let status = job.status.clone().unwrap_or_default();
        let count = |n: Option<i32>| usize::try_from(n.unwrap_or(0)).unwrap_or(0);
        let mut ctx = SyncCtx {
            key: key.to_owned(),
            ready: active_pods.iter().filter(|p| is_pod_ready(p)).count(),
            terminating: pods.iter().filter(|p| is_terminating(p)).count(),
            succeeded: count(status.succeeded) + new_succeeded.len() + uncounted_succeeded.len(),
            failed: count(status.failed) + non_ignored_failed + uncounted_failed.len(),
            new_backoff: self
                .backoff
                .new_record(key, &new_succeeded, &new_failed, now),
            uncounted_succeeded,
            uncounted_failed,
            expected_rm_finalizers: expected_rm.clone(),
            finished: None,
            prev_succeeded_indexes: OrderedIntervals::default(),
            succeeded_indexes: OrderedIntervals::default(),
            failed_indexes: None,
            pods_with_delayed_deletion: HashMap::new(),
            active_pods,
            pods: pods.clone(),
            job,
        };
        let suspended = spec.suspend == Some(true);
        if status.start_time.is_none() && !suspended {
            ctx.job
                .status
                .get_or_insert_with(JobStatus::default)
                .start_time = Some(Time(now));
        }
        let backoff_limit = backoff_limit(&ctx.job);
        ctx.finished = true_condition(&ctx.job, "SuccessCriteriaMet").cloned();
        if ctx.finished.is_none() {
            if let Some(target) = true_condition(&ctx.job, "FailureTarget") {
                ctx.finished = Some(new_condition(
                    "Failed",
                    "True",
                    target.reason.as_deref().unwrap_or(""),
                    target.message.as_deref().unwrap_or(""),
                    now,
                ));
            } else if let Some(message) = fail_job_message(&ctx.job, &ctx.pods) {
                ctx.finished = Some(new_condition(
                    "FailureTarget",
                    "True",
                    "PodFailurePolicy",
                    &message,
                    now,
                ));
            }
        }
        if ctx.finished.is_none() {
            let failed = i64::try_from(ctx.failed).unwrap_or(i64::MAX);
            if failed > backoff_limit || past_backoff_limit_on_failure(&ctx.job, &ctx.pods) {
                ctx.finished = Some(new_condition(
                    "FailureTarget",
                    "True",
                    "BackoffLimitExceeded",
                    "Job has reached the specified backoff limit",
                    now,
                ));
            } else if let Some(left) = active_deadline_left(&ctx.job, now) {
                if left.is_zero() {
                    ctx.finished = Some(new_condition(
                        "FailureTarget",
                        "True",
                        "DeadlineExceeded",
                        "Job was active longer than specified deadline",
                        now,
                    ));
                } else {
                    self.queue.add_after(key.to_owned(), left);
                }
            }
        }
        if indexed {
            let completions = usize::try_from(spec.completions.unwrap_or(0)).unwrap_or(0);
            let (prev, all) = indexed::succeeded_indexes(
                status.completed_indexes.as_deref(),
                completions,
                &ctx.pods,
                has_tracking_finalizer,
            );
            ctx.succeeded = all.total();
            ctx.prev_succeeded_indexes = prev;
            ctx.succeeded_indexes = all;
            if let Some(limit) = backoff_limit_per_index(&ctx.job) {
                let failed = backoff_limit_per_index::failed_indexes(
                    &ctx.job,
                    completions,
                    &ctx.pods,
                    limit,
                    &ctx.expected_rm_finalizers,
                    ctx.finished.is_some(),
                    &ctx.succeeded_indexes,
                );
                if ctx.finished.is_none()
                    && let Some((reason, message)) = backoff_limit_per_index::job_failure(
                        &spec,
                        &failed,
                        &ctx.succeeded_indexes,
                        completions,
                    )
                {
                    ctx.finished =
                        Some(new_condition("FailureTarget", "True", reason, message, now));
                }
                ctx.failed_indexes = Some(failed);
                ctx.pods_with_delayed_deletion =
                    backoff_limit_per_index::pods_with_delayed_deletion(
                        &ctx.job,
                        &ctx.pods,
                        &ctx.active_pods,
                        &ctx.finished_indexes(),
                        &ctx.expected_rm_finalizers,
                        completions,
                        now,
                    );
            }
            if ctx.finished.is_none()
                && let Some(message) = success_policy::match_success_policy(
                    spec.success_policy.as_ref(),
                    completions,
                    &ctx.succeeded_indexes,
                )
            {
                ctx.finished = Some(new_condition(
                    "SuccessCriteriaMet",
                    "True",
                    success_policy::REASON,
                    &message,
                    now,
                ));
            }
        }
        let mut active = ctx.active_pods.len();
        let mut suspend_changed = false;
        let mut manage_err = None;
        if ctx.finished.is_some() {
            let (deleted_ready, deleted, err) = self.delete_active_pods(&ctx).await;
            if deleted != active || !satisfied {
                // Pods may remain, or be unseen yet: finish on a later sync.
                ctx.finished = None;
            }
            active -= deleted;
            ctx.terminating += deleted;
            ctx.ready = ctx.ready.saturating_sub(deleted_ready);
            manage_err = err;
        } else {
            let mut managed = false;
            if satisfied && ctx.job.metadata.deletion_timestamp.is_none() {
                match self.manage_job(&mut ctx, now).await {
                    Ok(a) => active = a,
                    Err((a, e)) => {
                        active = a;
                        manage_err = Some(e);
                    }
                }
                managed = true;
            }
            let complete = match spec.completions {
                None => ctx.succeeded > 0 && active == 0,
                Some(c) => ctx.succeeded >= usize::try_from(c).unwrap_or(0) && active == 0,
            };
            if complete {
                ctx.finished = Some(new_condition(
                    "SuccessCriteriaMet",
                    "True",
                    "CompletionsReached",
                    "Reached expected number of succeeded pods",
                    now,
                ));
            } else if managed {
                let conditions = ctx
                    .job
                    .status
                    .get_or_insert_with(JobStatus::default)
                    .conditions
                    .get_or_insert_with(Vec::new);
                if suspended {
                    if ensure_condition(
                        conditions,
                        "Suspended",
                        "True",
                        "JobSuspended",
                        "Job suspended",
                        now,
                    ) {
                        suspend_changed = true;
                        self.recorder.event(
                            shared.as_ref(),
                            "Normal",
                            "Suspended",
                            "Job suspended",
                        );
                    }
                } else if ensure_condition(
                    conditions,
                    "Suspended",
                    "False",
                    "JobResumed",
                    "Job resumed",
                    now,
                ) {
                    suspend_changed = true;
                    self.recorder
                        .event(shared.as_ref(), "Normal", "Resumed", "Job resumed");
                    // activeDeadlineSeconds counts continuous activity: it restarts.
                    ctx.job
                        .status
                        .get_or_insert_with(JobStatus::default)
                        .start_time = Some(Time(now));
                }
            }
        }
        let st = ctx.job.status.get_or_insert_with(JobStatus::default);
        let needs_update = suspend_changed
            || omit_zero(active) != st.active
            || Some(as_count(ctx.ready)) != st.ready
            || Some(as_count(ctx.terminating)) != st.terminating;
        st.active = omit_zero(active);
        st.ready = Some(as_count(ctx.ready));
        st.terminating = Some(as_count(ctx.terminating));
        self.track_status_and_remove_finalizers(&mut ctx, needs_update, now)
            .await?;
        manage_err.map_or(Ok(()), Err)
    }

    /// Sends the pods that still carry the finalizer and name the gone Job to the
    /// orphan queue.
    fn release_pods_of_gone_job(&self, key: &str) {
        for pod in self.pods.store().list() {
            if has_tracking_finalizer(&pod)
                && Handlers::referenced_job_key(&pod).as_deref() == Some(key)
            {
                self.orphans.add(pod_key(&pod));
            }
        }
    }

    /// Sends a finished Job's pods that still carry the finalizer to the orphan queue
    /// (upstream `cleanupPodFinalizers`).
    fn release_pods_of_finished_job(&self, job: &Job) {
        let uid = job.metadata.uid.as_deref();
        for pod in self.pods.store().list() {
            if has_tracking_finalizer(&pod)
                && controller_of(&pod.metadata).is_some_and(|r| Some(r.uid.as_str()) == uid)
            {
                self.orphans.add(pod_key(&pod));
            }
        }
    }

    /// Deletes the active pods of a finishing Job, keeping their finalizers (upstream
    /// `deleteActivePods`): (deleted ready pods, deleted pods, first error).
    async fn delete_active_pods(&self, ctx: &SyncCtx) -> (usize, usize, Option<Error>) {
        let ns = ctx.job.metadata.namespace.as_deref().unwrap_or("");
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let results = futures::future::join_all(ctx.active_pods.iter().map(|p| {
            let api = api.clone();
            async move {
                let name = p.metadata.name.as_deref().unwrap_or("");
                match api.delete(name, &DeleteParams::default()).await {
                    Ok(_) => Ok(is_pod_ready(p)),
                    Err(kube::Error::Api(s)) if s.code == 404 => Ok(is_pod_ready(p)),
                    Err(e) => Err(Error::from(e)),
                }
            }
        }))
        .await;
        let mut ready = 0;
        let mut deleted = 0;
        let mut err = None;
        for r in results {
            match r {
                Ok(was_ready) => {
                    deleted += 1;
                    ready += usize::from(was_ready);
                }
                Err(e) => {
                    err.get_or_insert(e);
                }
            }
        }
        (ready, deleted, err)
    }

    /// Deletes pods of a running Job, finalizer first, under expectations (upstream
    /// `deleteJobPods`): (deleted ready pods, deleted pods, first error).
    async fn delete_job_pods(
        &self,
        job: &Job,
        key: &str,
        pods: &[Arc<Pod>],
    ) -> (usize, usize, Option<Error>) {
        self.expectations
            .expect_deletions(key, pods.iter().map(|p| pod_key(p)).collect());
        let ns = job.metadata.namespace.as_deref().unwrap_or("");
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let results = futures::future::join_all(pods.iter().map(|p| {
            let api = api.clone();
            async move {
                let name = p.metadata.name.as_deref().unwrap_or("");
                let res = async {
                    if has_tracking_finalizer(p) {
                        self.remove_finalizer(p).await?;
                    }
                    api.delete(name, &DeleteParams::default()).await?;
                    Ok::<(), Error>(())
                }
                .await;
                match res {
                    Ok(()) => {
                        self.recorder.event(
                            job,
                            "Normal",
                            "SuccessfulDelete",
                            &format!("Deleted pod: {name}"),
                        );
                        Ok(is_pod_ready(p))
                    }
                    Err(e) => {
                        self.expectations.deletion_observed(key, &pod_key(p));
                        if matches!(&e, Error::Api(kube::Error::Api(s)) if s.code == 404) {
                            return Ok(is_pod_ready(p));
                        }
                        self.recorder.event(
                            job,
                            "Warning",
                            "FailedDelete",
                            &format!("Error deleting: {}", e.message()),
                        );
                        Err(e)
                    }
                }
            }
        }))
        .await;
        let mut ready = 0;
        let mut deleted = 0;
        let mut err = None;
        for r in results {
            match r {
                Ok(was_ready) => {
                    deleted += 1;
                    ready += usize::from(was_ready);
                }
                Err(e) => {
                    err.get_or_insert(e);
                }
            }
        }
        (ready, deleted, err)
    }

    /// Creates or deletes pods toward the active count the Job wants (upstream
    /// `manageJob`): the active count afterwards, with the first error.
    async fn manage_job(&self, ctx: &mut SyncCtx, now: Timestamp) -> Result<usize, (usize, Error)> {
        let job = ctx.job.clone();
        let spec = job.spec.clone().unwrap_or_default();
        let key = ctx.key.clone();
        let mut active = ctx.active_pods.len();
        let indexed = spec.completion_mode.as_deref() == Some("Indexed");
        let completions = spec.completions.map(|c| usize::try_from(c).unwrap_or(0));
        if spec.suspend == Some(true) {
            let victims = pods_to_remove(&ctx.active_pods, active);
            let (ready, removed, err) = self.delete_job_pods(&job, &key, &victims).await;
            ctx.terminating += removed;
            ctx.ready = ctx.ready.saturating_sub(ready);
            return finish(active - removed, err);
        }
        let parallelism = usize::try_from(spec.parallelism.unwrap_or(1)).unwrap_or(0);
        let want = match completions {
            None if ctx.succeeded > 0 => active,
            None => parallelism,
            Some(c) => c.saturating_sub(ctx.succeeded).min(parallelism),
        };
        let mut victims = if indexed {
            indexed::duplicated_index_pods(&ctx.active_pods, completions.unwrap_or(0))
        } else {
            Vec::new()
        };
        let rm_at_least = active.saturating_sub(want);
        if victims.len() < rm_at_least {
            let rest: Vec<Arc<Pod>> = ctx
                .active_pods
                .iter()
                .filter(|p| !victims.iter().any(|v| Arc::ptr_eq(v, p)))
                .cloned()
                .collect();
            victims.extend(pods_to_remove(&rest, rm_at_least - victims.len()));
        }
        victims.truncate(MAX_POD_CREATE_DELETE_PER_SYNC);
        if !victims.is_empty() {
            tracing::debug!(job = %key, deleting = victims.len(), want, "too many pods running");
            let (ready, removed, err) = self.delete_job_pods(&job, &key, &victims).await;
            ctx.terminating += removed;
            ctx.ready = ctx.ready.saturating_sub(ready);
            return finish(active - removed, err);
        }
        let terminating = if only_replace_failed(&job) {
            ctx.terminating
        } else {
            0
        };
        let diff = want.saturating_sub(terminating + active);
        if diff == 0 {
            return Ok(active);
        }
        let per_index = backoff_limit_per_index(&job).is_some();
        // With backoffLimitPerIndex each index backs off on its own, below.
        let wait = if per_index {
            Duration::ZERO
        } else {
            ctx.new_backoff.remaining(now)
        };
        if !wait.is_zero() {
            tracing::debug!(job = %key, ?wait, "waiting out the pod failure backoff");
            self.queue.add_after(key, wait);
            return Ok(active);
        }
        let mut diff = diff.min(MAX_POD_CREATE_DELETE_PER_SYNC);
        let indexes = if indexed {
            let mut ix = indexed::first_pending_indexes(
                &ctx.finished_indexes(),
                &ctx.active_pods,
                diff,
                completions.unwrap_or(0),
            );
            if per_index {
                let (ready, wait) = backoff_limit_per_index::indexes_to_create_now(
                    ix,
                    &ctx.pods_with_delayed_deletion,
                    now,
                );
                if !wait.is_zero() {
                    tracing::debug!(job = %key, ?wait, "waiting out the backoff of the indexes");
                    self.queue.add_after(key, wait);
                    return Ok(active);
                }
                ix = ready;
            }
            diff = ix.len();
            ix
        } else {
            Vec::new()
        };
        if diff == 0 {
            return Ok(active);
        }
        self.expectations.expect_creations(&key, diff);
        tracing::debug!(job = %key, want, creating = diff, "too few pods running");
        let mut template = spec.template.clone();
        if indexed {
            indexed::add_completion_index_env(&mut template);
        }
        let meta = template.metadata.get_or_insert_with(Default::default);
        let finalizers = meta.finalizers.get_or_insert_with(Vec::new);
        if !finalizers.iter().any(|f| f == JOB_TRACKING_FINALIZER) {
            finalizers.push(JOB_TRACKING_FINALIZER.to_owned());
        }
        let ns = job.metadata.namespace.clone().unwrap_or_default();
        let name = job.metadata.name.clone().unwrap_or_default();
        let owner = controller_ref(&job.metadata, "batch/v1", "Job");
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
        let pending = Mutex::new(indexes.into_iter());
        let delayed = &ctx.pods_with_delayed_deletion;
        let (created, err) = slow_start_batch(diff, SLOW_START_INITIAL_BATCH_SIZE, || {
            let next = pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .next();
            let pod = match next {
                Some(ix) => {
                    let mut t = indexed::template_for_index(&template, &name, ix);
                    if per_index {
                        let replaced = delayed.get(&ix).map(AsRef::as_ref);
                        backoff_limit_per_index::add_index_failure_count_annotation(
                            &mut t, &job, replaced,
                        );
                    }
                    pod_from_template(&t, &ns, &format!("{name}-{ix}"), owner.clone())
                }
                None => pod_from_template(&template, &ns, &name, owner.clone()),
            };
            let api = api.clone();
            let job = &job;
            async move {
                match api.create(&PostParams::default(), &pod).await {
                    Ok(p) => {
                        let note =
                            format!("Created pod: {}", p.metadata.name.as_deref().unwrap_or(""));
                        self.recorder
                            .event(job, "Normal", "SuccessfulCreate", &note);
                        Ok(())
                    }
                    Err(e) => {
                        let e = Error::from(e);
                        self.recorder.event(
                            job,
                            "Warning",
                            "FailedCreate",
                            &format!("Error creating: {}", e.message()),
                        );
                        Err(e)
                    }
                }
            }
        })
        .await;
        for _ in created..diff {
            self.expectations.creation_observed(&key);
        }
        active += created;
        finish(active, err)
    }

    /// Counts terminated pods through `uncountedTerminatedPods`, removes their
    /// finalizers and finishes the Job when it may (upstream
    /// `trackJobStatusAndRemoveFinalizers`).
    async fn track_status_and_remove_finalizers(
        &self,
        ctx: &mut SyncCtx,
        mut needs_flush: bool,
        now: Timestamp,
    ) -> Result<(), Error> {
        let spec = ctx.job.spec.clone().unwrap_or_default();
        let indexed = spec.completion_mode.as_deref() == Some("Indexed");
        let completions = usize::try_from(spec.completions.unwrap_or(0)).unwrap_or(0);
        if indexed {
            ctx.pods.sort_by_key(|p| indexed::completion_index(p));
        }
        let mut with_finalizer: HashSet<String> = ctx
            .pods
            .iter()
            .filter(|p| has_tracking_finalizer(p) && !ctx.expected_rm_finalizers.contains(&uid(p)))
            .map(|p| uid(p))
            .collect();
        if clean_uncounted(
            ctx.job.status.get_or_insert_with(JobStatus::default),
            &with_finalizer,
        ) {
            needs_flush = true;
        }
        let finished_failing = ctx
            .finished
            .as_ref()
            .is_some_and(|c| c.type_ != "SuccessCriteriaMet");
        let mut to_release: Vec<Arc<Pod>> = Vec::new();
        let mut new_succeeded_indexes = Vec::new();
        let mut reached_max = false;
        for pod in &ctx.pods {
            let id = uid(pod);
            if !has_tracking_finalizer(pod) || ctx.expected_rm_finalizers.contains(&id) {
                continue;
            }
            let failed = is_pod_failed(pod, &ctx.job);
            // A failed pod whose index awaits its replacement keeps the finalizer, so
            // that the replacement can take over its failure counts (upstream
            // `canRemoveFinalizer`).
            let delayed = || {
                indexed::completion_index(pod)
                    .and_then(|ix| ctx.pods_with_delayed_deletion.get(&ix))
                    .is_some_and(|p| uid(p) == id)
            };
            let can_remove = ctx.job.metadata.deletion_timestamp.is_some()
                || ctx.finished.is_some()
                || phase(pod) == "Succeeded"
                || (failed && !delayed());
            if !can_remove {
                continue;
            }
            to_release.push(Arc::clone(pod));
            let uncounted = ctx
                .job
                .status
                .get_or_insert_with(JobStatus::default)
                .uncounted_terminated_pods
                .get_or_insert_with(UncountedTerminatedPods::default);
            let ix = indexed::completion_index(pod);
            if phase(pod) == "Succeeded" && !ctx.uncounted_failed.contains(&id) {
                if indexed {
                    if let Some(ix) = ix
                        && ix < completions
                        && !ctx.prev_succeeded_indexes.has(ix)
                    {
                        new_succeeded_indexes.push(ix);
                        needs_flush = true;
                    }
                } else if !ctx.uncounted_succeeded.contains(&id) {
                    uncounted
                        .succeeded
                        .get_or_insert_with(Vec::new)
                        .push(id.clone());
                    needs_flush = true;
                }
            } else if (failed || finished_failing)
                && !ctx.uncounted_failed.contains(&id)
                && (!indexed || ix.is_some_and(|ix| ix < completions))
            {
                let counts = spec
                    .pod_failure_policy
                    .as_ref()
                    .is_none_or(|p| pod_failure_policy::match_policy(p, pod).count_failed);
                if counts {
                    uncounted
                        .failed
                        .get_or_insert_with(Vec::new)
                        .push(id.clone());
                    needs_flush = true;
                }
            }
            let n = new_succeeded_indexes.len()
                + uncounted.succeeded.as_ref().map_or(0, Vec::len)
                + uncounted.failed.as_ref().map_or(0, Vec::len);
            if n >= MAX_UNCOUNTED_PODS {
                // The rest waits for the next sync, so that the status stays small.
                reached_max = true;
                break;
            }
        }
        let status = ctx.job.status.get_or_insert_with(JobStatus::default);
        if indexed {
            ctx.succeeded_indexes = ctx.succeeded_indexes.with(new_succeeded_indexes);
            let text = ctx.succeeded_indexes.to_string();
            let text = (!text.is_empty()).then_some(text);
            if text != status.completed_indexes {
                needs_flush = true;
            }
            status.succeeded = omit_zero(ctx.succeeded_indexes.total());
            status.completed_indexes = text;
            let failed_text = ctx.failed_indexes.as_ref().map(ToString::to_string);
            if failed_text != status.failed_indexes {
                status.failed_indexes = failed_text;
                needs_flush = true;
            }
        }
        let conditions = status.conditions.get_or_insert_with(Vec::new);
        if let Some(cond) = ctx.finished.clone() {
            if cond.type_ == "FailureTarget" {
                conditions.push(cond.clone());
                needs_flush = true;
                ctx.finished = Some(Self::terminal_from(&cond, "Failed", now));
            } else if cond.type_ == "SuccessCriteriaMet" {
                if !conditions
                    .iter()
                    .any(|c| c.type_ == "SuccessCriteriaMet" && c.status == "True")
                {
                    conditions.push(cond.clone());
                    needs_flush = true;
                }
                ctx.finished = Some(Self::terminal_from(&cond, "Complete", now));
            }
        }
        if needs_flush {
            self.update_status(ctx).await?;
            self.backoff.update(&ctx.key, ctx.new_backoff);
            needs_flush = false;
        }
        let mut release_err = None;
        if !to_release.is_empty() {
            self.finalizers
                .expect(&ctx.key, to_release.iter().map(|p| uid(p)));
            let results =
                futures::future::join_all(to_release.iter().map(|p| self.remove_finalizer(p)))
                    .await;
            for (p, r) in to_release.iter().zip(results) {
                match r {
                    Ok(()) => {
                        with_finalizer.remove(&uid(p));
                    }
                    Err(e) => {
                        self.finalizers.observed(&ctx.key, &uid(p));
                        release_err.get_or_insert(e);
                    }
                }
            }
        }
        if clean_uncounted(
            ctx.job.status.get_or_insert_with(JobStatus::default),
            &with_finalizer,
        ) {
            needs_flush = true;
        }
        if let Some(e) = release_err {
            if needs_flush {
                self.update_status(ctx).await?;
            }
            return Err(e);
        }
        let finished = !reached_max && self.enact_finished(ctx, now);
        if finished || needs_flush {
            self.update_status(ctx).await?;
            if finished && let Some(cond) = &ctx.finished {
                if cond.type_ == "Complete" {
                    let succeeded = ctx
                        .job
                        .status
                        .as_ref()
                        .and_then(|s| s.succeeded)
                        .unwrap_or(0);
                    if spec.completions.is_some_and(|c| succeeded > c) {
                        self.recorder.event(
                            &ctx.job,
                            "Warning",
                            "TooManySucceededPods",
                            "Too many succeeded pods running after completion count reached",
                        );
                    }
                    self.recorder
                        .event(&ctx.job, "Normal", "Completed", "Job completed");
                } else {
                    self.recorder.event(
                        &ctx.job,
                        "Warning",
                        cond.reason.as_deref().unwrap_or("Failed"),
                        cond.message.as_deref().unwrap_or(""),
                    );
                }
            }
        }
        Ok(())
    }

    fn terminal_from(interim: &JobCondition, type_: &str, now: Timestamp) -> JobCondition {
        new_condition(
            type_,
            "True",
            interim.reason.as_deref().unwrap_or(""),
            interim.message.as_deref().unwrap_or(""),
            now,
        )
    }

    /// Writes the terminal condition once no pod is uncounted or terminating
    /// (upstream `enactJobFinished`); whether it did.
    fn enact_finished(&self, ctx: &mut SyncCtx, now: Timestamp) -> bool {
        let Some(cond) = ctx.finished.clone() else {
            return false;
        };
        let status = ctx.job.status.get_or_insert_with(JobStatus::default);
        let uncounted = status.uncounted_terminated_pods.clone().unwrap_or_default();
        if !uncounted.succeeded.unwrap_or_default().is_empty()
            || !uncounted.failed.unwrap_or_default().is_empty()
            || ctx.terminating > 0
        {
            return false;
        }
        let conditions = status.conditions.get_or_insert_with(Vec::new);
        ensure_condition(
            conditions,
            &cond.type_,
            "True",
            cond.reason.as_deref().unwrap_or(""),
            cond.message.as_deref().unwrap_or(""),
            now,
        );
        if cond.type_ == "Complete" {
            status.completion_time = Some(Time(now));
        }
        true
    }

    /// Writes the Job's status (`replace_status` with the Job's resourceVersion: a
    /// stale cache conflicts and the sync is retried), keeping the written Job.
    async fn update_status(&self, ctx: &mut SyncCtx) -> Result<(), Error> {
        let ns = ctx.job.metadata.namespace.clone().unwrap_or_default();
        let name = ctx.job.metadata.name.clone().unwrap_or_default();
        let api: Api<Job> = Api::namespaced(self.client.clone(), &ns);
        // Go's `omitempty` leaves empty lists out of upstream's JSON: `conditions: []`
        // is never written, nor empty lists of uncounted pods.
        let mut sent = ctx.job.clone();
        if let Some(st) = sent.status.as_mut() {
            st.conditions = st.conditions.take().filter(|c| !c.is_empty());
            if let Some(u) = st.uncounted_terminated_pods.as_mut() {
                u.succeeded = u.succeeded.take().filter(|v| !v.is_empty());
                u.failed = u.failed.take().filter(|v| !v.is_empty());
            }
        }
        let written = api
            .replace_status(&name, &PostParams::default(), &sent)
            .await?;
        let status = ctx.job.status.take();
        ctx.job = written;
        // Keep the in-memory status (its empty lists included) for the next steps.
        ctx.job.status = status;
        Ok(())
    }
}

/// `Ok(active)` without an error, else the count with the error.
fn finish(active: usize, err: Option<Error>) -> Result<usize, (usize, Error)> {
    match err {
        None => Ok(active),
        Some(e) => Err((active, e)),
    }
}

/// The `n` active pods to delete first, in upstream's order (unassigned before
/// assigned, pending before running, not ready before ready, newer first).
fn pods_to_remove(active: &[Arc<Pod>], n: usize) -> Vec<Arc<Pod>> {
    let all: Vec<&Pod> = active.iter().map(AsRef::as_ref).collect();
    let chosen = pods_to_delete(&all, &all, n, Timestamp::now());
    active
        .iter()
        .filter(|p| chosen.iter().any(|c| std::ptr::eq(*c, p.as_ref())))
        .cloned()
        .collect()
}

/// Moves the UIDs of pods that no longer carry the finalizer from
/// `uncountedTerminatedPods` into the counts (upstream
/// `cleanUncountedPodsWithoutFinalizers`); whether anything moved.
fn clean_uncounted(status: &mut JobStatus, with_finalizer: &HashSet<String>) -> bool {
    let uncounted = status
        .uncounted_terminated_pods
        .get_or_insert_with(UncountedTerminatedPods::default);
    let mut changed = false;
    let mut moved = |list: &mut Option<Vec<String>>| {
        let before = list.as_ref().map_or(0, Vec::len);
        if let Some(l) = list.as_mut() {
            l.retain(|u| with_finalizer.contains(u));
        }
        let gone = before - list.as_ref().map_or(0, Vec::len);
        changed |= gone > 0;
        gone
    };
    let succeeded = moved(&mut uncounted.succeeded);
    let failed = moved(&mut uncounted.failed);
    let add = |n: Option<i32>, k: usize| {
        let total = usize::try_from(n.unwrap_or(0)).unwrap_or(0) + k;
        omit_zero(total)
    };
    status.succeeded = add(status.succeeded, succeeded);
    status.failed = add(status.failed, failed);
    changed
}

/// The `FailJob` message of the first failed pod a rule matches (upstream
/// `getFailJobMessage`).
fn fail_job_message(job: &Job, pods: &[Arc<Pod>]) -> Option<String> {
    let policy = job.spec.as_ref()?.pod_failure_policy.as_ref()?;
    pods.iter()
        .filter(|p| is_pod_failed(p, job))
        .find_map(|p| pod_failure_policy::match_policy(policy, p).fail_job)
}

/// Whether the restarts of a `restartPolicy: OnFailure` Job's running and pending
/// pods reach `backoffLimit` (upstream `pastBackoffLimitOnFailure`).
fn past_backoff_limit_on_failure(job: &Job, pods: &[Arc<Pod>]) -> bool {
    let Some(spec) = job.spec.as_ref() else {
        return false;
    };
    let restart_policy = spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref());
    if restart_policy != Some("OnFailure") {
        return false;
    }
    let restarts: i64 = pods
        .iter()
        .filter(|p| matches!(phase(p), "Running" | "Pending"))
        .filter_map(|p| p.status.as_ref())
        .flat_map(|s| {
            s.init_container_statuses
                .iter()
                .flatten()
                .chain(s.container_statuses.iter().flatten())
        })
        .map(|c| i64::from(c.restart_count))
        .sum();
    let limit = backoff_limit(job);
    if limit == 0 {
        return restarts > 0;
    }
    restarts >= limit
}

/// Time left before `activeDeadlineSeconds` passes (zero once it has); None without a
/// deadline, a start time, or while suspended (upstream `pastActiveDeadline`).
fn active_deadline_left(job: &Job, now: Timestamp) -> Option<Duration> {
    let spec = job.spec.as_ref()?;
    if spec.suspend == Some(true) {
        return None;
    }
    let deadline = u64::try_from(spec.active_deadline_seconds?).unwrap_or(0);
    let start = job.status.as_ref()?.start_time.as_ref()?.0;
    let elapsed: Duration = now
        .duration_since(start)
        .try_into()
        .unwrap_or(Duration::ZERO);
    Some(Duration::from_secs(deadline).saturating_sub(elapsed))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn job(spec: serde_json::Value, status: serde_json::Value) -> Job {
        serde_json::from_value(json!({
            "metadata": {"name": "j", "namespace": "ns", "uid": "u"},
            "spec": spec, "status": status,
        }))
        .expect("a Job")
    }

    #[test]
    fn uncounted_pods_move_into_counts_once_released() {
        let mut status: JobStatus = serde_json::from_value(json!({
            "succeeded": 2, "failed": 1,
            "uncountedTerminatedPods": {"succeeded": ["a", "b"], "failed": ["c"]},
        }))
        .expect("status");
        let held: HashSet<String> = ["b".to_owned()].into();
        assert!(clean_uncounted(&mut status, &held));
        assert_eq!((status.succeeded, status.failed), (Some(3), Some(2)));
        let u = status.uncounted_terminated_pods.clone().expect("uncounted");
        assert_eq!(u.succeeded, Some(vec!["b".to_owned()]));
        assert_eq!(u.failed, Some(vec![]));
        assert!(!clean_uncounted(&mut status, &held));
    }

    #[test]
    fn conditions_are_ensured_as_upstream() {
        let now = Timestamp::now();
        let mut c = Vec::new();
        assert!(!ensure_condition(
            &mut c,
            "Suspended",
            "False",
            "JobResumed",
            "Job resumed",
            now
        ));
        assert!(ensure_condition(
            &mut c,
            "Suspended",
            "True",
            "JobSuspended",
            "Job suspended",
            now
        ));
        assert!(!ensure_condition(
            &mut c,
            "Suspended",
            "True",
            "JobSuspended",
            "Job suspended",
            now
        ));
        assert!(ensure_condition(
            &mut c,
            "Suspended",
            "False",
            "JobResumed",
            "Job resumed",
            now
        ));
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].status, "False");
    }

    #[test]
    fn deleted_pods_count_as_failed_unless_only_failed_are_replaced() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "deletionTimestamp": "2026-01-01T00:00:00Z"},
            "status": {"phase": "Running"},
        }))
        .expect("a pod");
        let plain = job(json!({"template": {}}), json!({}));
        assert!(is_pod_failed(&pod, &plain) && is_terminating(&pod));
        let failed_only = job(
            json!({"template": {}, "podReplacementPolicy": "Failed"}),
            json!({}),
        );
        assert!(!is_pod_failed(&pod, &failed_only));
    }

    #[test]
    fn deadline_and_restart_limits() {
        let now: Timestamp = "2026-01-01T00:01:00Z".parse().expect("ts");
        let j = job(
            json!({"template": {}, "activeDeadlineSeconds": 90}),
            json!({"startTime": "2026-01-01T00:00:00Z"}),
        );
        assert_eq!(active_deadline_left(&j, now), Some(Duration::from_secs(30)));
        let late: Timestamp = "2026-01-01T00:05:00Z".parse().expect("ts");
        assert_eq!(active_deadline_left(&j, late), Some(Duration::ZERO));
        let on_failure = job(
            json!({"backoffLimit": 2, "template": {"spec": {"restartPolicy": "OnFailure",
                "containers": []}}}),
            json!({}),
        );
        let pod = |restarts: i32| -> Arc<Pod> {
            Arc::new(
                serde_json::from_value(json!({"status": {"phase": "Running",
                "containerStatuses": [{"name": "c", "image": "i", "imageID": "",
                    "ready": true, "restartCount": restarts}]}}))
                .expect("a pod"),
            )
        };
        assert!(!past_backoff_limit_on_failure(&on_failure, &[pod(1)]));
        assert!(past_backoff_limit_on_failure(
            &on_failure,
            &[pod(1), pod(1)]
        ));
    }
}
