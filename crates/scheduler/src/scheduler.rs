//! The scheduler (upstream `pkg/scheduler/scheduler.go` and `schedule_one.go`): one
//! scheduling cycle at a time over the queue's pods, each followed by a binding cycle
//! that runs on its own task, and the failure handling that reports a pod
//! `Unschedulable` and puts it back in the queue.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use tokio_util::sync::CancellationToken;

use crate::backend::api_dispatcher::{StatusPatch, StatusPatches};
use crate::backend::cache::{CLEAN_ASSUMED_PERIOD, Cache};
use crate::backend::queue::{QueueOptions, QueuedPodInfo, SchedulingQueue, events};
use crate::error::Error;
use crate::eventhandlers::{Handlers, scheduler_name, start_informers};
use crate::framework::fit_error::{Diagnosis, FitError};
use crate::framework::interface::EventObject;
use crate::framework::runtime::{Nominator, Recorder};
use crate::framework::types::{PodInfo, pod_key, pod_uid};
use crate::framework::{
    Code, CycleState, Framework, Handle, ProfileSpec, Registry, Snapshot, Status,
};
use crate::informers::Listers;
use crate::schedule_one::{Algorithm, ScheduleError};
use skiff_client::cache::Store;
use skiff_client::events::truncate_note;

/// What the scheduler reports to its metrics.
pub trait Observer: Send + Sync {
    /// One scheduling attempt of a pod of `profile` ended with `result`
    /// (`scheduled`, `unschedulable`, `error`) after `duration`.
    fn attempt(&self, result: &str, profile: &str, duration: Duration);
    /// The queue's sizes changed.
    fn pending(&self, active: usize, backoff: usize, unschedulable: usize, gated: usize);
    /// DefaultPreemption's PostFilter ran for a pod (upstream
    /// `scheduler_preemption_attempts_total`).
    fn preemption_attempt(&self) {}
    /// A preemption chose a node whose eviction takes `victims` pods (upstream
    /// `scheduler_preemption_victims`).
    fn preemption_victims(&self, _victims: usize) {}
}

/// An observer that records nothing.
#[derive(Debug, Default)]
pub struct NoObserver;

impl Observer for NoObserver {
    fn attempt(&self, _: &str, _: &str, _: Duration) {}
    fn pending(&self, _: usize, _: usize, _: usize, _: usize) {}
}

/// Forwards the nominator calls of the plugins to the queue once it exists (the queue is
/// built from the frameworks, whose handles need the nominator).
#[derive(Default)]
struct LateNominator(OnceLock<Arc<SchedulingQueue>>);

impl Nominator for LateNominator {
    fn has_nominated_pods(&self) -> bool {
        self.0.get().is_some_and(|q| q.has_nominated_pods())
    }
    fn nominated_pods_for_node(&self, node: &str) -> Vec<Arc<PodInfo>> {
        self.0
            .get()
            .map(|q| q.nominated_pods_for_node(node))
            .unwrap_or_default()
    }
    fn add_nominated_pod(&self, pod: Arc<PodInfo>, node: &str) {
        if let Some(q) = self.0.get() {
            q.add_nominated_pod(pod, node);
        }
    }
    fn delete_nominated_pod(&self, uid: &str) {
        if let Some(q) = self.0.get() {
            q.delete_nominated_pod(uid);
        }
    }
}

/// What a failed cycle does with the pod's `status.nominatedNodeName` (upstream
/// `NominatingInfo`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Nominating {
    /// Leave it.
    Keep,
    /// Set it to the node, or clear it with None.
    Set(Option<String>),
}

/// Gives the event recorder of a profile, by its schedulerName.
pub type RecorderFactory = Arc<dyn Fn(&str) -> Arc<dyn Recorder> + Send + Sync>;

/// How to build a scheduler.
pub struct SchedulerOptions {
    /// The profiles, each with a distinct schedulerName.
    pub profiles: Vec<ProfileSpec>,
    /// The plugins by name.
    pub registry: Registry,
    /// The global `percentageOfNodesToScore` (0: adaptive).
    pub percentage_of_nodes_to_score: i32,
    /// The queue's backoffs.
    pub queue: QueueOptions,
    /// How long an assumed pod whose binding finished may wait for the informer's
    /// confirmation (zero: forever, upstream's default).
    pub assumed_pod_ttl: Duration,
    /// The event recorder of a profile, by its schedulerName.
    pub recorder: RecorderFactory,
    /// The metrics.
    pub observer: Arc<dyn Observer>,
}

/// A running scheduler's state.
pub struct Scheduler {
    /// Nodes, assigned and assumed pods.
    pub cache: Arc<Cache>,
    /// Pending pods.
    pub queue: Arc<SchedulingQueue>,
    /// The profiles by schedulerName.
    pub profiles: Arc<HashMap<String, Arc<Framework>>>,
    /// The informer caches of the other kinds.
    pub listers: Arc<Listers>,
    pods: Arc<Store<Pod>>,
    client: kube::Client,
    status_patches: Arc<StatusPatches>,
    percentage_of_nodes_to_score: i32,
    observer: Arc<dyn Observer>,
}

impl Scheduler {
    /// Builds the profiles' frameworks, the queue and the cache. Errors: a profile's
    /// plugins cannot be built (see [`Framework::new`]), no profile, or profiles that do
    /// not share one QueueSort.
    pub fn new(client: kube::Client, opts: SchedulerOptions) -> Result<Arc<Self>, Error> {
        let listers = Arc::new(Listers::default());
        let nominator = Arc::new(LateNominator::default());
        let mut profiles = HashMap::new();
        for spec in &opts.profiles {
            let handle = Handle::new(
                Some(client.clone()),
                Arc::clone(&listers),
                Arc::clone(&nominator) as Arc<dyn Nominator>,
                (opts.recorder)(&spec.scheduler_name),
            )
            .with_observer(Arc::clone(&opts.observer));
            let fwk = Framework::new(spec, &opts.registry, handle)?;
            if profiles.insert(spec.scheduler_name.clone(), fwk).is_some() {
                return Err(Error::Config(format!(
                    "duplicate profile with scheduler name {:?}",
                    spec.scheduler_name
                )));
            }
        }
        let first = opts
            .profiles
            .first()
            .and_then(|p| profiles.get(&p.scheduler_name))
            .cloned()
            .ok_or_else(|| Error::Config("at least one profile is required".into()))?;
        let profiles = Arc::new(profiles);
        let less_fwk = Arc::clone(&first);
        let enqueue_profiles = Arc::clone(&profiles);
        let mut events = Vec::new();
        for fwk in profiles.values() {
            events.extend(fwk.events_to_register());
        }
        let queue = Arc::new(SchedulingQueue::new(
            Arc::new(move |a, b| less_fwk.queue_sort_less(a, b)),
            Arc::new(move |pod| match enqueue_profiles.get(scheduler_name(pod)) {
                Some(fwk) => fwk.run_pre_enqueue_plugins(pod),
                None => Status::success(),
            }),
            events,
            QueueOptions {
                listers: Some(Arc::clone(&listers)),
                ..opts.queue
            },
        ));
        let _ = nominator.0.set(Arc::clone(&queue));
        Ok(Arc::new(Self {
            cache: Arc::new(Cache::new(opts.assumed_pod_ttl)),
            queue,
            profiles,
            listers,
            pods: Arc::new(Store::default()),
            status_patches: StatusPatches::new(client.clone()),
            client,
            percentage_of_nodes_to_score: opts.percentage_of_nodes_to_score,
            observer: opts.observer,
        }))
    }

    /// Starts the informers; resolves once all of them have listed once.
    pub async fn start_informers(self: &Arc<Self>, cancel: &CancellationToken) {
        let handlers = Handlers {
            cache: Arc::clone(&self.cache),
            queue: Arc::clone(&self.queue),
            listers: Arc::clone(&self.listers),
            pods: Arc::clone(&self.pods),
            scheduler_names: Arc::new(self.profiles.keys().cloned().collect::<BTreeSet<_>>()),
        };
        start_informers(&self.client, &handlers, cancel).await;
    }

    /// Schedules pods until `cancel` (upstream `Scheduler.Run`): the queue's flushes, the
    /// expiry of assumed pods and the scheduling loop.
    pub async fn run(self: Arc<Self>, cancel: CancellationToken) {
        tokio::spawn(Arc::clone(&self.queue).run(cancel.clone()));
        {
            let cache = Arc::clone(&self.cache);
            let cancel = cancel.clone();
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(CLEAN_ASSUMED_PERIOD);
                loop {
                    tokio::select! {
                        () = cancel.cancelled() => return,
                        _ = tick.tick() => {
                            for uid in cache.cleanup_expired_assumed_pods(Instant::now()) {
                                tracing::warn!(uid, "assumed pod expired before its binding was confirmed");
                            }
                        }
                    }
                }
            });
        }
        let mut algorithm = Algorithm::new(self.percentage_of_nodes_to_score);
        let mut snapshot = Snapshot::default();
        loop {
            let next = tokio::select! {
                () = cancel.cancelled() => break,
                next = self.queue.pop() => next,
            };
            let Some(qpi) = next else { break };
            self.schedule_one(&mut algorithm, &mut snapshot, qpi).await;
            let p = self.queue.pending_pods();
            self.observer
                .pending(p.active, p.backoff, p.unschedulable, p.gated);
        }
        self.queue.close();
    }

    /// One pod's scheduling cycle (upstream `ScheduleOne` and `schedulingCycle`); the
    /// binding cycle is spawned.
    async fn schedule_one(
        self: &Arc<Self>,
        algorithm: &mut Algorithm,
        snapshot: &mut Snapshot,
        qpi: QueuedPodInfo,
    ) {
        let pod = Arc::clone(&qpi.pod_info.pod);
        let uid = pod_uid(&pod).to_owned();
        let Some(fwk) = self.profiles.get(scheduler_name(&pod)).cloned() else {
            tracing::error!(pod = %pod_key(&pod), "no profile for the pod's schedulerName");
            self.queue.done(&uid);
            return;
        };
        // upstream skipPodSchedule: a pod being deleted, or already assumed.
        if pod.metadata.deletion_timestamp.is_some() || self.cache.is_assumed(&uid) {
            self.queue.done(&uid);
            return;
        }
        let start = Instant::now();
        if let Err(e) = self.cache.update_snapshot(snapshot) {
            self.fail(&fwk, qpi, Status::error(e), None, Nominating::Keep, start)
                .await;
            return;
        }
        let mut state = CycleState::new();
        let result = algorithm.schedule_pod(&fwk, &mut state, &qpi.pod_info, snapshot);
        let result = match result {
            Ok(r) => r,
            Err(ScheduleError::NoNodesAvailable) => {
                let s = Status::unresolvable(crate::schedule_one::ERR_NO_NODES_AVAILABLE);
                self.fail(&fwk, qpi, s, None, Nominating::Set(None), start)
                    .await;
                return;
            }
            Err(ScheduleError::Status(s)) => {
                self.fail(&fwk, qpi, s, None, Nominating::Keep, start).await;
                return;
            }
            Err(ScheduleError::Fit(mut fit)) => {
                let (res, s) = fwk
                    .run_post_filter_plugins(
                        &state,
                        &qpi.pod_info,
                        snapshot,
                        &fit.diagnosis.node_to_status,
                    )
                    .await;
                fit.diagnosis.post_filter_msg = s.message();
                if s.code() == Code::Error {
                    tracing::error!(pod = %pod_key(&pod), status = %s, "PostFilter failed");
                }
                // A PostFilter result names the node to nominate, or clears the
                // nomination; no result leaves it.
                let nominating = match res {
                    Some(r) => Nominating::Set(r.nominated_node_name),
                    None => Nominating::Keep,
                };
                let s = Status::new(Code::Unschedulable, [fit.to_string()]);
                let diagnosis = fit.diagnosis;
                self.fail(&fwk, qpi, s, Some(diagnosis), nominating, start)
                    .await;
                return;
            }
        };
        let host = result.suggested_host;
        // Assume: the pod counts on its node from now on.
        let mut assumed_pod = (*pod).clone();
        assumed_pod
            .spec
            .get_or_insert_with(Default::default)
            .node_name = Some(host.clone());
        let assumed = Arc::new(PodInfo {
            pod: Arc::new(assumed_pod),
            ..(*qpi.pod_info).clone()
        });
        if let Err(e) = self.cache.assume_pod(Arc::clone(&assumed)) {
            self.fail(
                &fwk,
                qpi,
                Status::error(e),
                None,
                Nominating::Set(None),
                start,
            )
            .await;
            return;
        }
        let s = fwk.run_reserve_plugins_reserve(&mut state, &assumed, &host);
        if !s.is_success() {
            fwk.run_reserve_plugins_unreserve(&mut state, &assumed, &host);
            if let Err(e) = self.cache.forget_pod(&uid) {
                tracing::error!(error = %e, "forgetting an assumed pod");
            }
            let (s, diagnosis) = single_node_fit_error(s, &host);
            self.fail(&fwk, qpi, s, diagnosis, Nominating::Set(None), start)
                .await;
            return;
        }
        let (s, _wait) = fwk.run_permit_plugins(&mut state, &assumed, &host);
        if !s.is_success() {
            fwk.run_reserve_plugins_unreserve(&mut state, &assumed, &host);
            if let Err(e) = self.cache.forget_pod(&uid) {
                tracing::error!(error = %e, "forgetting an assumed pod");
            }
            let s = if s.is_wait() {
                Status::error("Permit plugins asking pods to wait are not supported")
            } else {
                s
            };
            let (s, diagnosis) = single_node_fit_error(s, &host);
            self.fail(&fwk, qpi, s, diagnosis, Nominating::Set(None), start)
                .await;
            return;
        }
        self.observer
            .attempt("scheduled", fwk.scheduler_name(), start.elapsed());
        let this = Arc::clone(self);
        tokio::spawn(async move {
            this.binding_cycle(fwk, state, assumed, host, qpi, start)
                .await;
        });
    }

    /// PreBind, Bind and PostBind (upstream `bindingCycle`).
    async fn binding_cycle(
        self: Arc<Self>,
        fwk: Arc<Framework>,
        mut state: CycleState,
        assumed: Arc<PodInfo>,
        host: String,
        qpi: QueuedPodInfo,
        start: Instant,
    ) {
        let uid = assumed.uid().to_owned();
        let mut s = fwk.run_pre_bind_plugins(&state, &assumed, &host).await;
        if s.is_success() {
            s = fwk.run_bind_plugins(&state, &assumed, &host).await;
            if s.is_skip() {
                s = Status::error("no Bind plugin bound the pod");
            }
        }
        if !s.is_success() {
            // upstream handleBindingCycleError: undo, and give others the room back.
            fwk.run_reserve_plugins_unreserve(&mut state, &assumed, &host);
            if let Err(e) = self.cache.forget_pod(&uid) {
                tracing::error!(error = %e, "forgetting an assumed pod");
            }
            self.queue.move_all_to_active_or_backoff_queue(
                events::ASSIGNED_POD_DELETE,
                EventObject::Pod(&assumed.pod),
                EventObject::None,
            );
            let (s, diagnosis) = if s.is_rejected() {
                single_node_fit_error(s, &host)
            } else {
                (s, None)
            };
            self.fail(&fwk, qpi, s, diagnosis, Nominating::Set(None), start)
                .await;
            return;
        }
        self.cache.finish_binding(&uid);
        tracing::debug!(pod = %pod_key(&assumed.pod), node = %host, "bound");
        let note = format!("Successfully assigned {} to {host}", pod_key(&assumed.pod));
        fwk.handle().recorder.event(
            &qpi.pod_info.pod,
            Some(&host),
            "Normal",
            "Scheduled",
            "Binding",
            &note,
        );
        fwk.run_post_bind_plugins(&state, &assumed, &host);
        self.queue.done(&uid);
    }

    /// A failed attempt (upstream `handleSchedulingFailure`): the pod goes back to the
    /// queue (unless it was deleted or bound meanwhile), a FailedScheduling event is
    /// recorded, and its PodScheduled condition (and nominated node) is patched.
    async fn fail(
        &self,
        fwk: &Arc<Framework>,
        mut qpi: QueuedPodInfo,
        status: Status,
        diagnosis: Option<Diagnosis>,
        nominating: Nominating,
        start: Instant,
    ) {
        let pod = Arc::clone(&qpi.pod_info.pod);
        let uid = pod_uid(&pod).to_owned();
        let rejected = status.is_rejected();
        let reason = if rejected {
            "Unschedulable"
        } else {
            "SchedulerError"
        };
        self.observer.attempt(
            if rejected { "unschedulable" } else { "error" },
            fwk.scheduler_name(),
            start.elapsed(),
        );
        let message = status.message();
        if let Some(d) = diagnosis {
            qpi.unschedulable_plugins = d.unschedulable_plugins;
            qpi.pending_plugins = d.pending_plugins;
            tracing::info!(pod = %pod_key(&pod), "unable to schedule pod; no fit; waiting: {message}");
        } else if rejected {
            tracing::info!(pod = %pod_key(&pod), "unable to schedule pod: {message}");
        } else {
            tracing::error!(pod = %pod_key(&pod), "error scheduling pod; retrying: {message}");
        }
        // The informer's store is keyed as every informer key (`object_key`).
        let key = skiff_client::cache::object_key(pod.as_ref());
        let cached = self.pods.get(&key).filter(|p| pod_uid(p) == uid);
        match cached.as_ref() {
            None => {
                tracing::info!(pod = %key, "pod doesn't exist in informer cache");
            }
            Some(c) if !crate::framework::types::pod_node_name(c).is_empty() => {
                tracing::info!(pod = %key, "pod has been assigned to a node; not queued again");
            }
            Some(c) => {
                if !Arc::ptr_eq(c, &qpi.pod_info.pod) {
                    qpi.pod_info = Arc::new(PodInfo::new(Arc::clone(c)));
                }
                let cycle = self.queue.scheduling_cycle();
                if let Err(e) = self
                    .queue
                    .add_unschedulable_if_not_present(qpi.clone(), cycle)
                {
                    tracing::error!(error = %e, "requeueing a pod");
                }
            }
        }
        if let Nominating::Set(node) = &nominating {
            self.queue
                .add_nominated_pod(Arc::clone(&qpi.pod_info), node.as_deref().unwrap_or(""));
        }
        self.queue.done(&uid);
        let Some(current) = cached else { return };
        let note = truncate_note(&message);
        fwk.handle().recorder.event(
            &current,
            None,
            "Warning",
            "FailedScheduling",
            "Scheduling",
            &note,
        );
        self.status_patches.send(StatusPatch {
            pod: current,
            reason,
            message,
            nominating,
        });
    }
}

/// A rejection on the one chosen node as a FitError (upstream: Reserve, Permit and
/// binding rejections report `0/1 nodes are available: ...`).
fn single_node_fit_error(s: Status, host: &str) -> (Status, Option<Diagnosis>) {
    if !s.is_rejected() {
        return (s, None);
    }
    let mut d = Diagnosis::default();
    if !s.plugin().is_empty() {
        d.unschedulable_plugins.insert(s.plugin());
    }
    d.node_to_status.statuses.insert(host.to_owned(), s.clone());
    let fit = FitError {
        num_all_nodes: 1,
        diagnosis: d.clone(),
    };
    (Status::new(s.code(), [fit.to_string()]), Some(d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_node_rejections_read_like_upstream() {
        let s = Status::unschedulable("node(s) had volume node affinity conflict")
            .with_plugin("VolumeBinding");
        let (s, d) = single_node_fit_error(s, "n1");
        assert_eq!(
            s.message(),
            "0/1 nodes are available: 1 node(s) had volume node affinity conflict."
        );
        assert!(d.is_some_and(|d| d.unschedulable_plugins.contains("VolumeBinding")));
    }
}
