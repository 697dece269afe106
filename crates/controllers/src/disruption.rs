//! The disruption controller (upstream `pkg/controller/disruption/disruption.go`): keeps
//! each PodDisruptionBudget's status current, which the API server's eviction
//! subresource reads (`disruptionsAllowed`) and writes (`disruptedPods`).
//!
//! For a budget selecting pods `P` it computes:
//! - `expectedPods` and `desiredHealthy`: with an integer `minAvailable`, `|P|` and that
//!   integer; with a percent `minAvailable` or any `maxUnavailable`, the summed scale of
//!   the pods' controllers ([`ExpectedScale`]: ReplicaSet, Deployment through its
//!   ReplicaSet, StatefulSet, ReplicationController from the informers, any other kind
//!   through its `/scale` subresource), and `ceil(percent × scale)` or
//!   `scale − maxUnavailable` (at least 0);
//! - `currentHealthy`: the pods that are Ready, not being deleted and not in
//!   `disruptedPods`;
//! - `disruptionsAllowed`: `currentHealthy − desiredHealthy`, 0 when negative or when no
//!   pod is expected;
//! - `disruptedPods`: the evictions the API server recorded, without pods now being
//!   deleted and without entries older than [`DELETION_TIMEOUT`] (the budget is synced
//!   again when the oldest expires);
//! - the `DisruptionAllowed` condition: `True`/`SufficientPods`, `False`/`InsufficientPods`,
//!   or `False`/`SyncFailed` with `disruptionsAllowed` 0 when the status cannot be
//!   computed (a pod whose controller cannot be found, a malformed percent).
//!
//! `unhealthyPodEvictionPolicy` is the eviction subresource's business; it does not change
//! the status. Upstream's clean-up of stale `DisruptionTarget` pod conditions is not
//! done here. Events: `NoPods`, `CalculateExpectedPodCountFailed`, `UnmanagedPods` on
//! the budget and `NotDeleted` on a pod whose eviction did not delete it in time.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use k8s_openapi::api::policy::v1::{
    PodDisruptionBudget, PodDisruptionBudgetSpec, PodDisruptionBudgetStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, OwnerReference, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use skiff_api::core::pod::conditions::is_pod_ready;
use skiff_api::selector::LabelSelector;
use skiff_client::cache::{Delta, SharedInformer, SharedInformerFactory, Store, object_key};
use skiff_client::events::EventRecorder;
use skiff_client::workqueue::{QueueMetrics, WorkQueue};
use tokio_util::sync::CancellationToken;

use crate::Error;
use crate::controller_utils::{controller_of, run_controller};

/// The controller's name (`--controllers`, the events' reporting controller).
pub const NAME: &str = "disruption-controller";

/// How long an eviction recorded in `disruptedPods` keeps its pod out of
/// `currentHealthy` while the pod is not deleted (upstream `DeletionTimeout`, 2 min).
pub const DELETION_TIMEOUT: Duration = Duration::from_secs(2 * 60);

/// The condition type the controller maintains.
pub const DISRUPTION_ALLOWED: &str = "DisruptionAllowed";
/// Reason of `DisruptionAllowed=True`.
pub const SUFFICIENT_PODS: &str = "SufficientPods";
/// Reason of `DisruptionAllowed=False` when too few pods are healthy.
pub const INSUFFICIENT_PODS: &str = "InsufficientPods";
/// Reason of `DisruptionAllowed=False` when the status could not be computed.
pub const SYNC_FAILED: &str = "SyncFailed";

/// The disruption controller; see the module doc.
pub struct DisruptionController {
    client: kube::Client,
    budgets: Arc<SharedInformer<PodDisruptionBudget>>,
    pods: Arc<SharedInformer<Pod>>,
    replica_sets: Arc<SharedInformer<ReplicaSet>>,
    deployments: Arc<SharedInformer<Deployment>>,
    stateful_sets: Arc<SharedInformer<StatefulSet>>,
    controllers: Arc<SharedInformer<ReplicationController>>,
    queue: Arc<WorkQueue<String>>,
    recorder: EventRecorder,
}

impl std::fmt::Debug for DisruptionController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DisruptionController")
            .finish_non_exhaustive()
    }
}

/// What the event handlers need.
#[derive(Clone)]
struct Handlers {
    budgets: Arc<SharedInformer<PodDisruptionBudget>>,
    queue: Arc<WorkQueue<String>>,
}

impl Handlers {
    /// Queues the budgets of the pod's namespace that select it (upstream
    /// `getPdbForPod`, which takes the first; a pod under several budgets is an error
    /// the eviction subresource reports).
    fn queue_budgets_of(&self, pod: &Pod) {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("");
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        for pdb in self.budgets.store().list() {
            if pdb.metadata.namespace.as_deref() == Some(ns) && selects(&pdb, &labels) {
                self.queue.add(object_key(pdb.as_ref()));
            }
        }
    }

    fn on_pod(&self, delta: &Delta<Pod>) {
        match delta {
            Delta::Added(pod) | Delta::Deleted(pod) => self.queue_budgets_of(pod),
            Delta::Updated(old, new) => {
                self.queue_budgets_of(new);
                if old.metadata.labels != new.metadata.labels {
                    self.queue_budgets_of(old);
                }
            }
        }
    }

    fn on_budget(&self, delta: &Delta<PodDisruptionBudget>) {
        match delta {
            Delta::Added(pdb) | Delta::Updated(_, pdb) | Delta::Deleted(pdb) => {
                self.queue.add(object_key(pdb.as_ref()));
            }
        }
    }
}

/// True when the budget's selector selects `labels` (a null selector selects nothing,
/// an empty one everything, as policy/v1).
fn selects(pdb: &PodDisruptionBudget, labels: &BTreeMap<String, String>) -> bool {
    let selector = pdb.spec.as_ref().and_then(|s| s.selector.as_ref());
    LabelSelector::from_meta_option(selector).is_ok_and(|s| s.matches(labels))
}

impl DisruptionController {
    /// The controller over the factory's PodDisruptionBudget, Pod, ReplicaSet,
    /// Deployment, StatefulSet and ReplicationController informers, its handlers
    /// registered.
    pub fn new(
        client: kube::Client,
        factory: &SharedInformerFactory,
        recorder: EventRecorder,
        queue_metrics: Arc<dyn QueueMetrics>,
    ) -> Arc<Self> {
        let handlers = Handlers {
            budgets: factory.informer::<PodDisruptionBudget>(),
            queue: Arc::new(WorkQueue::new("disruption").with_metrics(queue_metrics)),
        };
        let pods = factory.informer::<Pod>();
        let h = handlers.clone();
        handlers
            .budgets
            .add_event_handler(Box::new(move |d| h.on_budget(d)));
        let h = handlers.clone();
        pods.add_event_handler(Box::new(move |d| h.on_pod(d)));
        Arc::new(Self {
            client,
            budgets: handlers.budgets,
            pods,
            replica_sets: factory.informer::<ReplicaSet>(),
            deployments: factory.informer::<Deployment>(),
            stateful_sets: factory.informer::<StatefulSet>(),
            controllers: factory.informer::<ReplicationController>(),
            queue: handlers.queue,
            recorder,
        })
    }

    /// Waits for the informers, then syncs with `workers` workers until `cancel`
    /// (upstream runs one; there is no flag).
    pub async fn run(self: Arc<Self>, workers: usize, cancel: CancellationToken) {
        run_controller(
            NAME,
            &[
                &*self.budgets,
                &*self.pods,
                &*self.replica_sets,
                &*self.deployments,
                &*self.stateful_sets,
                &*self.controllers,
            ],
            &self.queue,
            workers,
            cancel,
            &self,
            |this, key| async move { this.sync(&key).await },
        )
        .await;
    }

    /// One sync of the budget `key` (upstream `sync`): a failure other than a conflict
    /// writes the fail-safe status (no disruption allowed, `SyncFailed`).
    async fn sync(&self, key: &str) -> Result<(), Error> {
        let Some(pdb) = self.budgets.store().get(key) else {
            return Ok(());
        };
        match self.try_sync(&pdb).await {
            Ok(()) => Ok(()),
            Err(e) if e.is_conflict() => Err(e),
            Err(e) => {
                tracing::warn!(budget = key, error = %e, "failed to sync the disruption budget");
                let status = fail_safe_status(&pdb, &e.to_string(), Timestamp::now());
                self.write_status(&pdb, status).await
            }
        }
    }

    /// Computes and writes the status (upstream `trySync`).
    async fn try_sync(&self, pdb: &PodDisruptionBudget) -> Result<(), Error> {
        let ns = pdb.metadata.namespace.clone().unwrap_or_default();
        let spec = pdb.spec.clone().unwrap_or_default();
        let selector = LabelSelector::from_meta_option(spec.selector.as_ref())
            .map_err(|e| Error::Invalid(format!("invalid selector: {e}")))?;
        let pods: Vec<Arc<Pod>> = self
            .pods
            .store()
            .list()
            .into_iter()
            .filter(|p| {
                p.metadata.namespace.as_deref() == Some(ns.as_str())
                    && selector.matches(&p.metadata.labels.clone().unwrap_or_default())
            })
            .collect();
        if pods.is_empty() {
            self.recorder
                .event(pdb, "Normal", "NoPods", "No matching pods found");
        }
        let scale = if needs_scale(&spec) {
            match self.expected_scale(&pods).await {
                Ok(s) => Some(s),
                Err(e) => {
                    self.recorder.event(
                        pdb,
                        "Warning",
                        "CalculateExpectedPodCountFailed",
                        &format!("Failed to calculate the number of expected pods: {e}"),
                    );
                    return Err(e);
                }
            }
        } else {
            None
        };
        if let Some(s) = scale.as_ref().filter(|s| !s.unmanaged.is_empty()) {
            tracing::info!(budget = %object_key(pdb), pods = ?s.unmanaged, "pods without a controller");
            self.recorder.event(
                pdb,
                "Warning",
                "UnmanagedPods",
                "Some pods this budget selects have no controller, so its expected scale leaves \
                 them out; an integer .spec.minAvailable counts them",
            );
        }
        let counts = expected_and_desired(
            &spec,
            i32::try_from(pods.len()).unwrap_or(i32::MAX),
            scale.map(|s| s.total),
        )?;
        let now = Timestamp::now();
        let pod_refs: Vec<&Pod> = pods.iter().map(AsRef::as_ref).collect();
        let old = pdb.status.clone().unwrap_or_default();
        let disrupted =
            build_disrupted_pods(&pod_refs, old.disrupted_pods.as_ref(), now, |pod: &Pod| {
                self.recorder.event(
                    pod,
                    "Warning",
                    "NotDeleted",
                    &format!(
                        "Pod was expected by PDB {} to be deleted but it wasn't",
                        object_key(pdb)
                    ),
                );
            });
        let healthy = count_healthy(&pod_refs, &disrupted.pods, now);
        let status = compute_status(pdb, counts, healthy, disrupted.pods, now);
        if status_up_to_date(pdb, &status) {
            tracing::debug!(budget = %object_key(pdb), "status up to date");
        } else {
            self.write_status(pdb, status).await?;
        }
        if let Some(at) = disrupted.recheck {
            let delay = at.duration_since(now).unsigned_abs();
            self.queue.add_after(object_key(pdb), delay);
        }
        Ok(())
    }

    /// The summed scale of the pods' controllers (upstream `getExpectedScale`).
    ///
    /// Errors: a pod's controller is none of the known kinds and not found through its
    /// `/scale` subresource, or the subresource cannot be read.
    async fn expected_scale(&self, pods: &[Arc<Pod>]) -> Result<ExpectedScale, Error> {
        let mut scales: HashMap<String, i32> = HashMap::new();
        let mut unmanaged = Vec::new();
        for pod in pods {
            let Some(owner) = controller_of(&pod.metadata) else {
                unmanaged.push(pod.metadata.name.clone().unwrap_or_default());
                continue;
            };
            if scales.contains_key(&owner.uid) {
                continue;
            }
            let ns = pod.metadata.namespace.as_deref().unwrap_or("");
            let found = match self.cached_scale(owner, ns) {
                Some(found) => Some(found),
                None => self.scale_subresource(owner, ns).await?,
            };
            let Some((uid, replicas)) = found else {
                return Err(Error::Invalid(format!(
                    "found no controllers for pod {:?}",
                    pod.metadata.name.as_deref().unwrap_or("")
                )));
            };
            scales.insert(uid, replicas);
        }
        Ok(ExpectedScale {
            total: scales.values().fold(0i32, |a, b| a.saturating_add(*b)),
            unmanaged,
        })
    }

    /// The UID and replicas of `owner` from the informers (upstream's finders for
    /// ReplicationControllers, Deployments, ReplicaSets and StatefulSets, in that order).
    fn cached_scale(&self, owner: &OwnerReference, ns: &str) -> Option<(String, i32)> {
        find_cached_scale(
            owner,
            ns,
            &Stores {
                replica_sets: self.replica_sets.store(),
                deployments: self.deployments.store(),
                stateful_sets: self.stateful_sets.store(),
                controllers: self.controllers.store(),
            },
        )
    }

    /// The UID and replicas of `owner` through its `/scale` subresource (upstream
    /// `getScaleController`); `None` when it is gone or another object has its name.
    ///
    /// Errors: its kind is not served, does not have a `/scale` subresource, or the
    /// request fails.
    async fn scale_subresource(
        &self,
        owner: &OwnerReference,
        ns: &str,
    ) -> Result<Option<(String, i32)>, Error> {
        let (group, version) = match owner.api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", owner.api_version.as_str()),
        };
        let gvk = GroupVersionKind::gvk(group, version, &owner.kind);
        let (resource, caps) = kube::discovery::pinned_kind(&self.client, &gvk).await?;
        if !caps.subresources.iter().any(|(r, _)| r.plural == "scale") {
            let gr = if group.is_empty() {
                resource.plural.clone()
            } else {
                format!("{}.{group}", resource.plural)
            };
            return Err(Error::Invalid(format!(
                "{gr} does not implement the scale subresource"
            )));
        }
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), ns, &resource);
        match api.get_scale(&owner.name).await {
            Ok(scale) if scale.metadata.uid.as_deref() == Some(owner.uid.as_str()) => Ok(Some((
                owner.uid.clone(),
                scale.spec.and_then(|s| s.replicas).unwrap_or(0),
            ))),
            Ok(_) => Ok(None),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Writes `status` with the budget's resource version (a conflict is retried with
    /// the next sync).
    async fn write_status(
        &self,
        pdb: &PodDisruptionBudget,
        status: PodDisruptionBudgetStatus,
    ) -> Result<(), Error> {
        let api: Api<PodDisruptionBudget> = Api::namespaced(
            self.client.clone(),
            pdb.metadata.namespace.as_deref().unwrap_or(""),
        );
        let mut updated = pdb.clone();
        updated.status = Some(status);
        api.replace_status(
            pdb.metadata.name.as_deref().unwrap_or(""),
            &PostParams::default(),
            &updated,
        )
        .await?;
        Ok(())
    }
}

/// The informer stores the cached finders read.
pub(crate) struct Stores<'a> {
    pub(crate) replica_sets: &'a Store<ReplicaSet>,
    pub(crate) deployments: &'a Store<Deployment>,
    pub(crate) stateful_sets: &'a Store<StatefulSet>,
    pub(crate) controllers: &'a Store<ReplicationController>,
}

/// True when `api_version`'s group is one of `groups` (upstream `verifyGroupKind`).
fn group_is(api_version: &str, groups: &[&str]) -> bool {
    let group = api_version.split_once('/').map_or("", |(g, _)| g);
    groups.contains(&group)
}

/// The UID and `spec.replicas` (default 1) of the controller `owner` in namespace `ns`
/// from the caches, if it is one of the kinds upstream's finders know and the cached
/// object has the referenced UID: a ReplicationController; a Deployment through the
/// ReplicaSet it controls; a ReplicaSet no Deployment controls; a StatefulSet.
pub(crate) fn find_cached_scale(
    owner: &OwnerReference,
    ns: &str,
    stores: &Stores<'_>,
) -> Option<(String, i32)> {
    let key = format!("{ns}/{}", owner.name);
    let apps = ["apps", "extensions"];
    match owner.kind.as_str() {
        "ReplicationController" if group_is(&owner.api_version, &[""]) => {
            let rc = stores.controllers.get(&key)?;
            if rc.metadata.uid.as_deref() != Some(owner.uid.as_str()) {
                return None;
            }
            let replicas = rc.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
            Some((owner.uid.clone(), replicas))
        }
        "ReplicaSet" if group_is(&owner.api_version, &apps) => {
            let rs = stores.replica_sets.get(&key)?;
            if rs.metadata.uid.as_deref() != Some(owner.uid.as_str()) {
                return None;
            }
            match controller_of(&rs.metadata) {
                Some(d) if d.kind == "Deployment" => {
                    if !group_is(&d.api_version, &apps) {
                        return None;
                    }
                    let dep = stores.deployments.get(&format!("{ns}/{}", d.name))?;
                    (dep.metadata.uid.as_deref() == Some(d.uid.as_str()))
                        .then(|| (d.uid.clone(), dep.spec.replicas.unwrap_or(1)))
                }
                _ => Some((owner.uid.clone(), rs.spec.replicas.unwrap_or(1))),
            }
        }
        "StatefulSet" if group_is(&owner.api_version, &apps) => {
            let sts = stores.stateful_sets.get(&key)?;
            (sts.metadata.uid.as_deref() == Some(owner.uid.as_str()))
                .then(|| (owner.uid.clone(), sts.spec.replicas.unwrap_or(1)))
        }
        _ => None,
    }
}

/// The summed scale of the controllers of a budget's pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ExpectedScale {
    /// The sum of each distinct controller's replicas.
    pub(crate) total: i32,
    /// The names of the pods without a controller (left out of `total`).
    pub(crate) unmanaged: Vec<String>,
}

/// True when the budget's numbers depend on the controllers' scale: a `maxUnavailable`,
/// or a percent `minAvailable`.
pub(crate) fn needs_scale(spec: &PodDisruptionBudgetSpec) -> bool {
    spec.max_unavailable.is_some() || matches!(spec.min_available, Some(IntOrString::String(_)))
}

/// `expectedPods` and `desiredHealthy` of a budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) expected: i32,
    pub(crate) desired: i32,
}

/// `value` against `total` (upstream `GetScaledValueFromIntOrPercent` rounding up): an
/// integer as is, `"N%"` as `ceil(N × total / 100)`.
///
/// Errors: a string that is not an integer percent.
pub(crate) fn scaled_value(value: &IntOrString, total: i32) -> Result<i32, Error> {
    match value {
        IntOrString::Int(n) => Ok(*n),
        IntOrString::String(s) => {
            let percent: i64 = s
                .strip_suffix('%')
                .ok_or_else(|| {
                    Error::Invalid(
                        "invalid value for IntOrString: invalid type: string is not a percentage"
                            .to_owned(),
                    )
                })?
                .parse()
                .map_err(|e| Error::Invalid(format!("invalid value for IntOrString: {e}")))?;
            let scaled = (percent * i64::from(total) + 99).div_euclid(100);
            Ok(i32::try_from(scaled).unwrap_or(i32::MAX))
        }
    }
}

/// `expectedPods` and `desiredHealthy` (upstream `getExpectedPodCount`) for a budget
/// selecting `pod_count` pods whose controllers' summed scale is `scale` (`None` when
/// [`needs_scale`] is false).
///
/// Errors: a percent that does not parse, or a scale needed but not given.
pub(crate) fn expected_and_desired(
    spec: &PodDisruptionBudgetSpec,
    pod_count: i32,
    scale: Option<i32>,
) -> Result<Counts, Error> {
    let need_scale =
        || scale.ok_or_else(|| Error::Invalid("the controllers' scale is not known".to_owned()));
    if let Some(max_unavailable) = &spec.max_unavailable {
        let expected = need_scale()?;
        let unavailable = scaled_value(max_unavailable, expected)?;
        return Ok(Counts {
            expected,
            desired: expected.saturating_sub(unavailable).max(0),
        });
    }
    match &spec.min_available {
        Some(IntOrString::Int(n)) => Ok(Counts {
            expected: pod_count,
            desired: *n,
        }),
        Some(percent @ IntOrString::String(_)) => {
            let expected = need_scale()?;
            Ok(Counts {
                expected,
                desired: scaled_value(percent, expected)?,
            })
        }
        None => Ok(Counts {
            expected: 0,
            desired: 0,
        }),
    }
}

/// `disruptedPods` as kept by a sync, and when to look again.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Disrupted {
    /// The entries kept: pods still selected, not being deleted, recorded less than
    /// [`DELETION_TIMEOUT`] ago.
    pub(crate) pods: BTreeMap<String, Time>,
    /// When the oldest kept entry expires.
    pub(crate) recheck: Option<Timestamp>,
}

/// The expiry of an entry recorded at `at`.
fn expiry(at: &Time) -> Timestamp {
    let timeout = SignedDuration::try_from(DELETION_TIMEOUT).unwrap_or(SignedDuration::MAX);
    at.0.checked_add(timeout).unwrap_or(Timestamp::MAX)
}

/// Prunes the recorded evictions (upstream `buildDisruptedPodMap`); `expired` is called
/// for each pod whose entry timed out without the pod being deleted.
pub(crate) fn build_disrupted_pods(
    pods: &[&Pod],
    recorded: Option<&BTreeMap<String, Time>>,
    now: Timestamp,
    mut expired: impl FnMut(&Pod),
) -> Disrupted {
    let mut kept = BTreeMap::new();
    let mut recheck: Option<Timestamp> = None;
    let Some(recorded) = recorded else {
        return Disrupted {
            pods: kept,
            recheck,
        };
    };
    for pod in pods {
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let name = pod.metadata.name.as_deref().unwrap_or("");
        let Some(at) = recorded.get(name) else {
            continue;
        };
        let until = expiry(at);
        if until < now {
            expired(pod);
        } else {
            recheck = Some(recheck.map_or(until, |r| r.min(until)));
            kept.insert(name.to_owned(), at.clone());
        }
    }
    Disrupted {
        pods: kept,
        recheck,
    }
}

/// The pods that count as healthy (upstream `countHealthyPods`): Ready, not being
/// deleted and not recently evicted.
pub(crate) fn count_healthy(
    pods: &[&Pod],
    disrupted: &BTreeMap<String, Time>,
    now: Timestamp,
) -> i32 {
    let n = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            let name = p.metadata.name.as_deref().unwrap_or("");
            disrupted.get(name).is_none_or(|at| expiry(at) <= now)
        })
        .filter(|p| is_pod_ready(p))
        .count();
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// Sets the condition of `cond.type_` (upstream `meta.SetStatusCondition`): the
/// transition time changes only with the status.
fn set_condition(conditions: &mut Vec<Condition>, cond: Condition) {
    match conditions.iter_mut().find(|c| c.type_ == cond.type_) {
        Some(existing) => {
            if existing.status != cond.status {
                existing.status = cond.status;
                existing.last_transition_time = cond.last_transition_time;
            }
            existing.reason = cond.reason;
            existing.message = cond.message;
            existing.observed_generation = cond.observed_generation;
        }
        None => conditions.push(cond),
    }
}

/// The `DisruptionAllowed` condition `allowed` implies (upstream
/// `UpdateDisruptionAllowedCondition`), set in `status`.
pub(crate) fn set_allowed_condition(status: &mut PodDisruptionBudgetStatus, now: Timestamp) {
    let allowed = status.disruptions_allowed.unwrap_or(0) > 0;
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    set_condition(
        conditions,
        Condition {
            type_: DISRUPTION_ALLOWED.to_owned(),
            status: if allowed { "True" } else { "False" }.to_owned(),
            reason: if allowed {
                SUFFICIENT_PODS
            } else {
                INSUFFICIENT_PODS
            }
            .to_owned(),
            message: String::new(),
            observed_generation: status.observed_generation,
            last_transition_time: Time(now),
        },
    );
}

/// The status a sync writes (upstream `updatePdbStatus`): no disruption is allowed
/// while no pod is expected, so that a budget whose first pods just appeared is safe.
pub(crate) fn compute_status(
    pdb: &PodDisruptionBudget,
    counts: Counts,
    healthy: i32,
    disrupted: BTreeMap<String, Time>,
    now: Timestamp,
) -> PodDisruptionBudgetStatus {
    let mut allowed = healthy.saturating_sub(counts.desired);
    if counts.expected <= 0 || allowed <= 0 {
        allowed = 0;
    }
    let old = pdb.status.clone().unwrap_or_default();
    let mut status = PodDisruptionBudgetStatus {
        current_healthy: Some(healthy),
        desired_healthy: Some(counts.desired),
        expected_pods: Some(counts.expected),
        disruptions_allowed: Some(allowed),
        disrupted_pods: (!disrupted.is_empty()).then_some(disrupted),
        observed_generation: pdb.metadata.generation,
        conditions: old.conditions,
    };
    set_allowed_condition(&mut status, now);
    status
}

/// True when the budget already has `status` but the transition times (upstream
/// compares the numbers, `disruptedPods`, the generation and the condition).
pub(crate) fn status_up_to_date(
    pdb: &PodDisruptionBudget,
    status: &PodDisruptionBudgetStatus,
) -> bool {
    let Some(old) = pdb.status.as_ref() else {
        return false;
    };
    let strip = |s: &PodDisruptionBudgetStatus| {
        let mut s = s.clone();
        if s.disrupted_pods.as_ref().is_some_and(BTreeMap::is_empty) {
            s.disrupted_pods = None;
        }
        for c in s.conditions.iter_mut().flatten() {
            c.last_transition_time = Time(Timestamp::UNIX_EPOCH);
        }
        s
    };
    strip(old) == strip(status)
}

/// The status written when a sync fails (upstream `failSafe`): no disruption allowed,
/// `DisruptionAllowed=False` with reason `SyncFailed` and the error as message, the
/// other fields as they were.
pub(crate) fn fail_safe_status(
    pdb: &PodDisruptionBudget,
    message: &str,
    now: Timestamp,
) -> PodDisruptionBudgetStatus {
    let mut status = pdb.status.clone().unwrap_or_default();
    status.disruptions_allowed = Some(0);
    let generation = status.observed_generation;
    set_condition(
        status.conditions.get_or_insert_with(Vec::new),
        Condition {
            type_: DISRUPTION_ALLOWED.to_owned(),
            status: "False".to_owned(),
            reason: SYNC_FAILED.to_owned(),
            message: message.to_owned(),
            observed_generation: generation,
            last_transition_time: Time(now),
        },
    );
    status
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn spec(min: Option<IntOrString>, max: Option<IntOrString>) -> PodDisruptionBudgetSpec {
        PodDisruptionBudgetSpec {
            min_available: min,
            max_unavailable: max,
            ..Default::default()
        }
    }

    fn pct(s: &str) -> Option<IntOrString> {
        Some(IntOrString::String(s.to_owned()))
    }

    fn int(n: i32) -> Option<IntOrString> {
        Some(IntOrString::Int(n))
    }

    fn counts(expected: i32, desired: i32) -> Counts {
        Counts { expected, desired }
    }

    #[test]
    fn int_min_available_counts_the_pods_without_a_scale() {
        let s = spec(int(2), None);
        assert!(!needs_scale(&s));
        assert_eq!(expected_and_desired(&s, 3, None).unwrap(), counts(3, 2));
        // More desired than there are pods: nothing allowed (see compute_status).
        assert_eq!(expected_and_desired(&s, 1, None).unwrap(), counts(1, 2));
    }

    #[test]
    fn percent_min_available_rounds_up_against_the_scale() {
        let s = spec(pct("50%"), None);
        assert!(needs_scale(&s));
        // 5 replicas wanted, 3 pods exist: 50 % of 5 is 2.5, rounded up.
        assert_eq!(expected_and_desired(&s, 3, Some(5)).unwrap(), counts(5, 3));
        assert_eq!(expected_and_desired(&s, 4, Some(4)).unwrap(), counts(4, 2));
        assert_eq!(expected_and_desired(&s, 0, Some(0)).unwrap(), counts(0, 0));
        assert!(expected_and_desired(&s, 3, None).is_err());
        let bad = spec(pct("half"), None);
        assert_eq!(
            expected_and_desired(&bad, 3, Some(4))
                .unwrap_err()
                .to_string(),
            "invalid value for IntOrString: invalid type: string is not a percentage"
        );
    }

    #[test]
    fn max_unavailable_needs_the_scale_as_int_and_percent() {
        let s = spec(None, int(1));
        assert!(needs_scale(&s));
        assert_eq!(expected_and_desired(&s, 2, Some(3)).unwrap(), counts(3, 2));
        // Never below zero.
        assert_eq!(
            expected_and_desired(&spec(None, int(5)), 2, Some(3)).unwrap(),
            counts(3, 0)
        );
        // 30 % of 10 is 3 unavailable; 25 % of 3 rounds up to 1.
        assert_eq!(
            expected_and_desired(&spec(None, pct("30%")), 10, Some(10)).unwrap(),
            counts(10, 7)
        );
        assert_eq!(
            expected_and_desired(&spec(None, pct("25%")), 3, Some(3)).unwrap(),
            counts(3, 2)
        );
        assert!(expected_and_desired(&s, 3, None).is_err());
    }

    fn pod(name: &str, ready: bool, deleting: bool) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                deletion_timestamp: deleting.then_some(Time(Timestamp::UNIX_EPOCH)),
                ..Default::default()
            },
            status: Some(PodStatus {
                conditions: Some(vec![PodCondition {
                    type_: "Ready".to_owned(),
                    status: if ready { "True" } else { "False" }.to_owned(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn disrupted_pods_expire_after_two_minutes_and_set_the_recheck() {
        let pods = [
            pod("a", true, false),
            pod("b", true, false),
            pod("c", true, true),
            pod("d", true, false),
        ];
        let refs: Vec<&Pod> = pods.iter().collect();
        let recorded: BTreeMap<String, Time> = [
            ("a", "2026-01-01T00:00:00Z"),
            ("b", "2026-01-01T00:01:30Z"),
            ("c", "2026-01-01T00:01:00Z"),
            ("gone", "2026-01-01T00:01:00Z"),
        ]
        .into_iter()
        .map(|(n, t)| (n.to_owned(), Time(at(t))))
        .collect();
        let now = at("2026-01-01T00:02:30Z");
        let mut expired = Vec::new();
        let d = build_disrupted_pods(&refs, Some(&recorded), now, |p| {
            expired.push(p.metadata.name.clone().unwrap_or_default())
        });
        // a is 2m30s old: expired; b kept until 00:03:30; c is being deleted; the
        // pod gone is no longer selected.
        assert_eq!(expired, ["a"]);
        assert_eq!(d.pods.keys().collect::<Vec<_>>(), ["b"]);
        assert_eq!(d.recheck, Some(at("2026-01-01T00:03:30Z")));
        // b is not healthy while disrupted, c is being deleted: a and d are.
        assert_eq!(count_healthy(&refs, &d.pods, now), 2);
        let none = build_disrupted_pods(&refs, None, now, |_| {});
        assert!(none.pods.is_empty() && none.recheck.is_none());
    }

    fn budget(generation: i64) -> PodDisruptionBudget {
        PodDisruptionBudget {
            metadata: ObjectMeta {
                name: Some("pdb".to_owned()),
                generation: Some(generation),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn condition(s: &PodDisruptionBudgetStatus) -> (String, String) {
        let c = s.conditions.as_ref().and_then(|c| c.first()).unwrap();
        (c.status.clone(), c.reason.clone())
    }

    #[test]
    fn status_allows_the_surplus_and_sets_the_condition() {
        let now = at("2026-01-01T00:00:00Z");
        let s = compute_status(&budget(2), counts(3, 2), 3, BTreeMap::new(), now);
        assert_eq!(s.disruptions_allowed, Some(1));
        assert_eq!(s.current_healthy, Some(3));
        assert_eq!(s.desired_healthy, Some(2));
        assert_eq!(s.expected_pods, Some(3));
        assert_eq!(s.observed_generation, Some(2));
        assert_eq!(condition(&s), ("True".into(), SUFFICIENT_PODS.into()));
        let short = compute_status(&budget(2), counts(3, 2), 1, BTreeMap::new(), now);
        assert_eq!(short.disruptions_allowed, Some(0));
        assert_eq!(
            condition(&short),
            ("False".into(), INSUFFICIENT_PODS.into())
        );
        // No pod expected: nothing allowed even with a surplus.
        let empty = compute_status(&budget(1), counts(0, -1), 0, BTreeMap::new(), now);
        assert_eq!(empty.disruptions_allowed, Some(0));

        let mut pdb = budget(2);
        pdb.status = Some(s.clone());
        let later = at("2026-01-01T00:05:00Z");
        let again = compute_status(&pdb, counts(3, 2), 3, BTreeMap::new(), later);
        assert!(status_up_to_date(&pdb, &again));
        // The transition time moves only with the status.
        let fewer = compute_status(&pdb, counts(3, 2), 2, BTreeMap::new(), later);
        assert!(!status_up_to_date(&pdb, &fewer));
        let t = &fewer.conditions.as_ref().unwrap()[0].last_transition_time;
        assert_eq!(t.0, later);
    }

    #[test]
    fn fail_safe_allows_nothing() {
        let now = at("2026-01-01T00:00:00Z");
        let mut pdb = budget(1);
        pdb.status = Some(compute_status(&pdb, counts(3, 1), 3, BTreeMap::new(), now));
        let s = fail_safe_status(&pdb, "found no controllers for pod \"x\"", now);
        assert_eq!(s.disruptions_allowed, Some(0));
        assert_eq!(s.current_healthy, Some(3));
        assert_eq!(condition(&s), ("False".into(), SYNC_FAILED.into()));
        assert_eq!(
            s.conditions.unwrap()[0].message,
            "found no controllers for pod \"x\""
        );
    }

    fn owner(api_version: &str, kind: &str, name: &str, uid: &str) -> OwnerReference {
        OwnerReference {
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
            name: name.to_owned(),
            uid: uid.to_owned(),
            controller: Some(true),
            ..Default::default()
        }
    }

    #[test]
    fn cached_scale_follows_replica_sets_to_their_deployment() {
        let (rs, dep, sts, rc) = (
            Store::<ReplicaSet>::default(),
            Store::<Deployment>::default(),
            Store::<StatefulSet>::default(),
            Store::<ReplicationController>::default(),
        );
        let meta = |name: &str, uid: &str, owner_ref: Option<OwnerReference>| ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some("ns".to_owned()),
            uid: Some(uid.to_owned()),
            owner_references: owner_ref.map(|o| vec![o]),
            ..Default::default()
        };
        let mut plain = ReplicaSet {
            metadata: meta("plain", "u1", None),
            ..Default::default()
        };
        plain.spec.replicas = Some(4);
        rs.insert("ns/plain".into(), Arc::new(plain));
        let mut owned = ReplicaSet {
            metadata: meta(
                "web-1",
                "u2",
                Some(owner("apps/v1", "Deployment", "web", "d1")),
            ),
            ..Default::default()
        };
        owned.spec.replicas = Some(1);
        rs.insert("ns/web-1".into(), Arc::new(owned));
        let mut d = Deployment {
            metadata: meta("web", "d1", None),
            ..Default::default()
        };
        d.spec.replicas = Some(6);
        dep.insert("ns/web".into(), Arc::new(d));
        let stores = Stores {
            replica_sets: &rs,
            deployments: &dep,
            stateful_sets: &sts,
            controllers: &rc,
        };
        let find = |o: OwnerReference| find_cached_scale(&o, "ns", &stores);
        assert_eq!(
            find(owner("apps/v1", "ReplicaSet", "plain", "u1")),
            Some(("u1".into(), 4))
        );
        assert_eq!(
            find(owner("apps/v1", "ReplicaSet", "web-1", "u2")),
            Some(("d1".into(), 6))
        );
        // Another UID under that name, an unknown kind: not from the caches.
        assert_eq!(find(owner("apps/v1", "ReplicaSet", "plain", "other")), None);
        assert_eq!(find(owner("example.com/v1", "Widget", "w", "u9")), None);
        assert_eq!(find(owner("apps/v1", "StatefulSet", "db", "s1")), None);
    }
}
