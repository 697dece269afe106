//! The scheduling queue (upstream `backend/queue/scheduling_queue.go`, `active_queue.go`,
//! `backoff_queue.go`, `unschedulable_pods.go`, `nominator.go`).
//!
//! Pending pods live in one of three places:
//! - activeQ, a heap ordered by the profile's QueueSort: the pods [`SchedulingQueue::pop`]
//!   hands to the scheduling cycle;
//! - backoffQ, ordered by the end of each pod's backoff (1 s doubled per attempt up to
//!   10 s by default): pods that failed and wait before their next try, those a plugin
//!   rejected apart from those that failed with an error;
//! - the unschedulable pool: pods rejected by plugins, waiting for a cluster event whose
//!   QueueingHint says it may help, and pods gated by a PreEnqueue plugin (scheduling
//!   gates).
//!
//! As upstream 1.33 with its default feature gates: QueueingHints decide moves out of the
//! unschedulable pool, and, for a pod that fails, which of the events received while it
//! was in flight may help it (see [`QueueOptions::queueing_hints`]; without hints, any
//! move request during its cycle sends it to backoffQ: upstream's `moveRequestCycle`,
//! tracked either way); `SchedulerPopFromBackoffQ` lets [`SchedulingQueue::pop`] take the
//! head of backoffQ when activeQ is empty, never a pod that failed with an error (see
//! [`QueueOptions::pop_from_backoff_q`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::error::Error;
use crate::framework::interface::{
    ActionType, ClusterEvent, ClusterEventWithHint, EventObject, EventResource, QueueingHint,
    QueueingHintFn,
};
use crate::framework::runtime::Nominator;
use crate::framework::status::Status;
use crate::framework::types::{PodInfo, pod_key, pod_uid};
use crate::informers::Listers;

/// A pod in the scheduling queue (upstream `QueuedPodInfo`).
#[derive(Debug, Clone)]
pub struct QueuedPodInfo {
    /// The pod.
    pub pod_info: Arc<PodInfo>,
    /// When the pod was last added to the queue (activeQ order among equal priorities).
    pub timestamp: Instant,
    /// How many times it was tried.
    pub attempts: u32,
    /// When it was first added (for latency metrics).
    pub initial_attempt_timestamp: Option<Instant>,
    /// The plugins that rejected it last time.
    pub unschedulable_plugins: BTreeSet<&'static str>,
    /// The plugins that answered Pending last time.
    pub pending_plugins: BTreeSet<&'static str>,
    /// The PreEnqueue plugin that keeps it out of activeQ (scheduling gates), if any.
    pub gating_plugin: Option<&'static str>,
}

impl QueuedPodInfo {
    /// A pod entering the queue now.
    pub fn new(pod_info: Arc<PodInfo>) -> Self {
        let now = Instant::now();
        Self {
            pod_info,
            timestamp: now,
            attempts: 0,
            initial_attempt_timestamp: Some(now),
            unschedulable_plugins: BTreeSet::new(),
            pending_plugins: BTreeSet::new(),
            gating_plugin: None,
        }
    }

    /// True when a PreEnqueue plugin keeps the pod out of activeQ.
    pub fn gated(&self) -> bool {
        self.gating_plugin.is_some()
    }

    fn uid(&self) -> &str {
        self.pod_info.uid()
    }
}

/// Upstream `DefaultPodInitialBackoffDuration` (`podInitialBackoffSeconds`).
pub const DEFAULT_POD_INITIAL_BACKOFF: Duration = Duration::from_secs(1);
/// Upstream `DefaultPodMaxBackoffDuration` (`podMaxBackoffSeconds`).
pub const DEFAULT_POD_MAX_BACKOFF: Duration = Duration::from_secs(10);
/// Upstream `DefaultPodMaxInUnschedulablePodsDuration`: a pod left this long in the
/// unschedulable pool is moved back by the periodic flush.
pub const DEFAULT_POD_MAX_IN_UNSCHEDULABLE_PODS_DURATION: Duration = Duration::from_secs(300);
/// How often [`SchedulingQueue::run`] flushes backoffQ.
pub const BACKOFF_FLUSH_PERIOD: Duration = Duration::from_secs(1);
/// How often [`SchedulingQueue::run`] flushes the unschedulable pool.
pub const UNSCHEDULABLE_FLUSH_PERIOD: Duration = Duration::from_secs(30);
/// The width of backoffQ's ordering windows: pods whose backoff ends in the same window
/// are ordered by QueueSort (upstream `backoffQOrderingWindowDuration`).
pub const BACKOFF_ORDERING_WINDOW: Duration = Duration::from_secs(1);

/// The cluster events the queue itself raises (upstream `framework/events.go`).
pub mod events {
    use super::{ActionType, ClusterEvent, EventResource};

    /// An assigned pod was added (upstream `EventAssignedPodAdd`).
    pub const ASSIGNED_POD_ADD: ClusterEvent = ClusterEvent {
        resource: EventResource::Pod,
        action: ActionType::ADD,
        label: "AssignedPodAdd",
    };
    /// An assigned pod was deleted (upstream `EventAssignedPodDelete`).
    pub const ASSIGNED_POD_DELETE: ClusterEvent = ClusterEvent {
        resource: EventResource::Pod,
        action: ActionType::DELETE,
        label: "AssignedPodDelete",
    };
    /// A pending pod was added (upstream `EventUnscheduledPodAdd`).
    pub const UNSCHEDULED_POD_ADD: ClusterEvent = ClusterEvent {
        resource: EventResource::UnscheduledPod,
        action: ActionType::ADD,
        label: "UnscheduledPodAdd",
    };
    /// A pending pod was updated (upstream `EventUnscheduledPodUpdate`).
    pub const UNSCHEDULED_POD_UPDATE: ClusterEvent = ClusterEvent {
        resource: EventResource::UnscheduledPod,
        action: ActionType::UPDATE,
        label: "UnscheduledPodUpdate",
    };
    /// A pod stayed too long in the unschedulable pool (upstream
    /// `EventUnschedulableTimeout`).
    pub const UNSCHEDULABLE_TIMEOUT: ClusterEvent = ClusterEvent {
        resource: EventResource::Wildcard,
        action: ActionType::ALL,
        label: "UnschedulableTimeout",
    };
    /// A plugin asked to activate pods (upstream `EventForceActivate`).
    pub const FORCE_ACTIVATE: ClusterEvent = ClusterEvent {
        resource: EventResource::Wildcard,
        action: ActionType::ALL,
        label: "ForceActivate",
    };
}

/// The label of the queue events raised when a scheduling attempt failed and when a
/// backoff completed (upstream `ScheduleAttemptFailure`, `BackoffComplete`).
const SCHEDULE_ATTEMPT_FAILURE: &str = "ScheduleAttemptFailure";
const BACKOFF_COMPLETE: &str = "BackoffComplete";

fn is_wildcard(e: &ClusterEvent) -> bool {
    e.resource == EventResource::Wildcard && e.action == ActionType::ALL
}

/// activeQ's order: true when the first pod goes first (the profile's QueueSort).
pub type LessFn = Arc<dyn Fn(&QueuedPodInfo, &QueuedPodInfo) -> bool + Send + Sync>;
/// The profile's PreEnqueue plugins (`Framework::run_pre_enqueue_plugins`): anything but
/// Success gates the pod, attributed to the status' plugin.
pub type PreEnqueueFn = Arc<dyn Fn(&Pod) -> Status + Send + Sync>;
/// The events each plugin registers, as `Framework::events_to_register` gives them.
pub type PluginEvents = Vec<(&'static str, Option<Vec<ClusterEventWithHint>>)>;
/// The queue's clock (tests pass a fake one).
pub type ClockFn = Arc<dyn Fn() -> Instant + Send + Sync>;

/// The queue's settings (KubeSchedulerConfiguration's `podInitialBackoffSeconds`,
/// `podMaxBackoffSeconds`; the rest as upstream's defaults).
#[derive(Clone)]
pub struct QueueOptions {
    /// The backoff after the first failed attempt.
    pub pod_initial_backoff: Duration,
    /// The longest backoff.
    pub pod_max_backoff: Duration,
    /// How long a pod may stay in the unschedulable pool before the periodic flush moves
    /// it back.
    pub pod_max_in_unschedulable_pods_duration: Duration,
    /// `SchedulerPopFromBackoffQ` (on by default in 1.33): pop takes the head of backoffQ
    /// when activeQ is empty, and PreEnqueue runs when a pod enters backoffQ. A pod that
    /// failed with an error (no plugin rejected it) still serves its whole backoff.
    pub pop_from_backoff_q: bool,
    /// `SchedulerQueueingHints` (on by default since 1.32): a failed pod is checked
    /// against the events received while it was in flight; off, any move request during
    /// its cycle sends it to backoffQ (upstream's `moveRequestCycle`).
    pub queueing_hints: bool,
    /// The informer caches, for the namespace labels of pod affinity terms; None: terms
    /// with a namespace selector match no namespace.
    pub listers: Option<Arc<Listers>>,
    /// The clock; None: `Instant::now`.
    pub clock: Option<ClockFn>,
}

impl Default for QueueOptions {
    fn default() -> Self {
        Self {
            pod_initial_backoff: DEFAULT_POD_INITIAL_BACKOFF,
            pod_max_backoff: DEFAULT_POD_MAX_BACKOFF,
            pod_max_in_unschedulable_pods_duration: DEFAULT_POD_MAX_IN_UNSCHEDULABLE_PODS_DURATION,
            pop_from_backoff_q: true,
            queueing_hints: true,
            listers: None,
            clock: None,
        }
    }
}

impl std::fmt::Debug for QueueOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueOptions")
            .field("pod_initial_backoff", &self.pod_initial_backoff)
            .field("pod_max_backoff", &self.pod_max_backoff)
            .field(
                "pod_max_in_unschedulable_pods_duration",
                &self.pod_max_in_unschedulable_pods_duration,
            )
            .field("pop_from_backoff_q", &self.pop_from_backoff_q)
            .field("queueing_hints", &self.queueing_hints)
            .finish_non_exhaustive()
    }
}

/// How many pods wait in each part of the queue (the `scheduler_pending_pods` gauge by
/// `queue` label).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PendingPods {
    /// activeQ.
    pub active: usize,
    /// backoffQ.
    pub backoff: usize,
    /// The unschedulable pool, gated pods excepted.
    pub unschedulable: usize,
    /// Pods gated by a PreEnqueue plugin.
    pub gated: usize,
}

/// A binary heap with lookup by key (upstream `backend/heap`). The order is passed to
/// each operation so that the heap needs no stored closure.
#[derive(Debug)]
struct KeyedHeap<T> {
    items: Vec<T>,
    index: HashMap<String, usize>,
}

impl<T> Default for KeyedHeap<T> {
    fn default() -> Self {
        Self {
            items: Vec::new(),
            index: HashMap::new(),
        }
    }
}

trait Keyed {
    fn key(&self) -> &str;
}

impl Keyed for QueuedPodInfo {
    fn key(&self) -> &str {
        self.uid()
    }
}

type Less<'a, T> = &'a dyn Fn(&T, &T) -> bool;

impl<T: Keyed> KeyedHeap<T> {
    fn len(&self) -> usize {
        self.items.len()
    }

    fn get(&self, key: &str) -> Option<&T> {
        self.index.get(key).and_then(|&i| self.items.get(i))
    }

    fn contains(&self, key: &str) -> bool {
        self.index.contains_key(key)
    }

    fn peek(&self) -> Option<&T> {
        self.items.first()
    }

    fn iter(&self) -> impl Iterator<Item = &T> {
        self.items.iter()
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.items.swap(a, b);
        for i in [a, b] {
            if let Some(item) = self.items.get(i) {
                let k = item.key().to_owned();
                self.index.insert(k, i);
            }
        }
    }

    fn less_at(&self, a: usize, b: usize, less: Less<'_, T>) -> bool {
        match (self.items.get(a), self.items.get(b)) {
            (Some(x), Some(y)) => less(x, y),
            _ => false,
        }
    }

    fn up(&mut self, mut i: usize, less: Less<'_, T>) {
        while i > 0 {
            let parent = (i - 1) / 2;
            if !self.less_at(i, parent, less) {
                break;
            }
            self.swap(i, parent);
            i = parent;
        }
    }

    fn down(&mut self, mut i: usize, less: Less<'_, T>) {
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut smallest = i;
            if l < self.items.len() && self.less_at(l, smallest, less) {
                smallest = l;
            }
            if r < self.items.len() && self.less_at(r, smallest, less) {
                smallest = r;
            }
            if smallest == i {
                break;
            }
            self.swap(i, smallest);
            i = smallest;
        }
    }

    fn add_or_update(&mut self, item: T, less: Less<'_, T>) {
        if let Some(&i) = self.index.get(item.key()) {
            if let Some(slot) = self.items.get_mut(i) {
                *slot = item;
            }
            self.up(i, less);
            self.down(i, less);
            return;
        }
        let i = self.items.len();
        self.index.insert(item.key().to_owned(), i);
        self.items.push(item);
        self.up(i, less);
    }

    fn remove(&mut self, key: &str, less: Less<'_, T>) -> Option<T> {
        let i = *self.index.get(key)?;
        let last = self.items.len().checked_sub(1)?;
        if i != last {
            self.swap(i, last);
        }
        let item = self.items.pop()?;
        self.index.remove(key);
        if i < self.items.len() {
            self.down(i, less);
            self.up(i, less);
        }
        Some(item)
    }

    fn pop(&mut self, less: Less<'_, T>) -> Option<T> {
        let key = self.items.first()?.key().to_owned();
        self.remove(&key, less)
    }
}

/// A pod in backoffQ with the end of its backoff.
#[derive(Debug, Clone)]
struct BackoffEntry {
    qpi: QueuedPodInfo,
    expiry: Instant,
    window: u128,
}

impl Keyed for BackoffEntry {
    fn key(&self) -> &str {
        self.qpi.uid()
    }
}

/// backoffQ (upstream `backoffQueue`): two heaps seen as one. A pod some plugin rejected
/// waits in `pods`, ordered by backoff window then QueueSort; a pod that failed with an
/// error (no plugin rejected it, e.g. no nodes yet) waits in `errors`, ordered by the end
/// of its backoff. Pop-from-backoffQ takes only from `pods`: an error pod always serves
/// its backoff (upstream `podErrorBackoffQ`, KEP-5142).
#[derive(Default)]
struct BackoffQueue {
    pods: KeyedHeap<BackoffEntry>,
    errors: KeyedHeap<BackoffEntry>,
}

/// The order of the error heap: the end of the backoff alone.
fn expiry_less(a: &BackoffEntry, b: &BackoffEntry) -> bool {
    a.expiry < b.expiry
}

impl BackoffQueue {
    fn len(&self) -> usize {
        self.pods.len() + self.errors.len()
    }

    fn contains(&self, uid: &str) -> bool {
        self.pods.contains(uid) || self.errors.contains(uid)
    }

    fn get(&self, uid: &str) -> Option<&BackoffEntry> {
        self.pods.get(uid).or_else(|| self.errors.get(uid))
    }

    fn iter(&self) -> impl Iterator<Item = &BackoffEntry> {
        self.pods.iter().chain(self.errors.iter())
    }

    /// Adds or replaces the entry in the heap its pod belongs to (upstream
    /// `backoffQueue.add`): `errors` when no plugin rejected it.
    fn add(&mut self, e: BackoffEntry, less: Less<'_, BackoffEntry>) {
        let uid = e.qpi.uid().to_owned();
        if e.qpi.unschedulable_plugins.is_empty() && e.qpi.pending_plugins.is_empty() {
            self.pods.remove(&uid, less);
            self.errors.add_or_update(e, &expiry_less);
        } else {
            self.errors.remove(&uid, &expiry_less);
            self.pods.add_or_update(e, less);
        }
    }

    fn remove(&mut self, uid: &str, less: Less<'_, BackoffEntry>) -> Option<BackoffEntry> {
        self.pods
            .remove(uid, less)
            .or_else(|| self.errors.remove(uid, &expiry_less))
    }

    /// The head of `pods`, whatever its backoff (upstream `popBackoff`); error pods are
    /// never taken here.
    fn pop_backoff(&mut self, less: Less<'_, BackoffEntry>) -> Option<BackoffEntry> {
        self.pods.pop(less)
    }

    /// Pops every pod of both heaps whose backoff ended by `now` (upstream
    /// `popAllBackoffCompleted`).
    fn pop_completed(&mut self, now: Instant, less: Less<'_, BackoffEntry>) -> Vec<BackoffEntry> {
        let mut done = Vec::new();
        for (heap, less) in [
            (&mut self.pods, less),
            (&mut self.errors, &expiry_less as Less<'_, BackoffEntry>),
        ] {
            while heap.peek().is_some_and(|head| head.expiry <= now) {
                let Some(e) = heap.pop(less) else { break };
                done.push(e);
            }
        }
        done
    }
}

/// One registration of the hint map: a plugin, an event it cares about, its hint.
struct Registration {
    /// The profile (`schedulerName`) whose pods it applies to; None: every pod.
    profile: Option<String>,
    plugin: &'static str,
    event: ClusterEvent,
    hint: Option<QueueingHintFn>,
}

/// How a pod leaves the unschedulable pool (upstream `queueingStrategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Strategy {
    Skip,
    AfterBackoff,
    Immediately,
}

#[derive(Default)]
struct NominatorState {
    by_node: HashMap<String, Vec<Arc<PodInfo>>>,
    node_of: HashMap<String, String>,
}

impl NominatorState {
    fn delete(&mut self, uid: &str) {
        let Some(node) = self.node_of.remove(uid) else {
            return;
        };
        if let Some(pods) = self.by_node.get_mut(&node) {
            pods.retain(|p| p.uid() != uid);
            if pods.is_empty() {
                self.by_node.remove(&node);
            }
        }
    }

    /// Upstream `addNominatedPodUnlocked`: `node` None takes the pod's
    /// `status.nominatedNodeName`.
    fn add(&mut self, pi: Arc<PodInfo>, node: Option<&str>) {
        self.delete(pi.uid());
        let node = match node {
            Some(n) => n.to_owned(),
            None => nominated_node_name(&pi.pod).to_owned(),
        };
        if node.is_empty() {
            return;
        }
        self.node_of.insert(pi.uid().to_owned(), node.clone());
        let pods = self.by_node.entry(node).or_default();
        if pods.iter().any(|p| p.uid() == pi.uid()) {
            return;
        }
        pods.push(pi);
    }

    /// Upstream `UpdateNominatedPod`: keeps an in-memory nomination when neither version
    /// of the pod carries one.
    fn update(&mut self, old: &Pod, new: Arc<PodInfo>) {
        let mut node = None;
        if nominated_node_name(old).is_empty() && nominated_node_name(&new.pod).is_empty() {
            node = self.node_of.get(pod_uid(old)).cloned();
        }
        self.delete(pod_uid(old));
        self.add(new, node.as_deref());
    }
}

/// The pod's `spec.schedulerName` (`default-scheduler` when unset, as defaulting does).
fn scheduler_name(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.scheduler_name.as_deref())
        .unwrap_or("default-scheduler")
}

fn nominated_node_name(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.nominated_node_name.as_deref())
        .unwrap_or_default()
}

/// An event object kept while pods are in flight.
#[derive(Debug, Clone)]
enum OwnedObject {
    None,
    Node(Arc<k8s_openapi::api::core::v1::Node>),
    Pod(Arc<Pod>),
    Other,
}

impl OwnedObject {
    fn of(o: EventObject<'_>) -> Self {
        match o {
            EventObject::None => Self::None,
            EventObject::Node(n) => Self::Node(Arc::new(n.clone())),
            EventObject::Pod(p) => Self::Pod(Arc::new(p.clone())),
            EventObject::Other => Self::Other,
        }
    }

    fn borrow(&self) -> EventObject<'_> {
        match self {
            Self::None => EventObject::None,
            Self::Node(n) => EventObject::Node(n),
            Self::Pod(p) => EventObject::Pod(p),
            Self::Other => EventObject::Other,
        }
    }
}

/// An entry of the in-flight log (upstream `inFlightEvents`): a pod popped (until it is
/// done), or an event received while pods were in flight.
#[derive(Debug)]
enum LogEntry {
    Pod,
    Done,
    Event(ClusterEvent, OwnedObject, OwnedObject),
}

#[derive(Default)]
struct InFlight {
    /// The log position of each pod in flight, by uid.
    pods: HashMap<String, u64>,
    /// The log; `first` is the position of its front.
    log: std::collections::VecDeque<LogEntry>,
    first: u64,
}

impl InFlight {
    fn push(&mut self, e: LogEntry) -> u64 {
        let seq = self.first + self.log.len() as u64;
        self.log.push_back(e);
        seq
    }

    fn pop(&mut self, uid: &str) {
        let seq = self.push(LogEntry::Pod);
        self.pods.insert(uid.to_owned(), seq);
    }

    /// Upstream `activeQueue.done`: forgets the pod and the events no pod in flight
    /// still needs.
    fn done(&mut self, uid: &str) {
        let Some(seq) = self.pods.remove(uid) else {
            return;
        };
        let idx = usize::try_from(seq.saturating_sub(self.first)).unwrap_or(usize::MAX);
        if let Some(e) = self.log.get_mut(idx) {
            *e = LogEntry::Done;
        }
        while matches!(self.log.front(), Some(LogEntry::Done | LogEntry::Event(..))) {
            self.log.pop_front();
            self.first += 1;
        }
    }

    fn record(&mut self, event: ClusterEvent, old: OwnedObject, new: OwnedObject) {
        if !self.pods.is_empty() {
            self.push(LogEntry::Event(event, old, new));
        }
    }

    /// The events received since the pod was popped; None when it is not in flight.
    fn events_for(&self, uid: &str) -> Option<Vec<(&ClusterEvent, &OwnedObject, &OwnedObject)>> {
        let seq = *self.pods.get(uid)?;
        let idx = usize::try_from(seq.saturating_sub(self.first)).unwrap_or(usize::MAX);
        Some(
            self.log
                .iter()
                .skip(idx.saturating_add(1))
                .filter_map(|e| match e {
                    LogEntry::Event(ev, o, n) => Some((ev, o, n)),
                    _ => None,
                })
                .collect(),
        )
    }
}

#[derive(Default)]
struct Inner {
    active: KeyedHeap<QueuedPodInfo>,
    backoff: BackoffQueue,
    unschedulable: HashMap<String, QueuedPodInfo>,
    in_flight: InFlight,
    scheduling_cycle: i64,
    move_request_cycle: i64,
    closed: bool,
    nominator: NominatorState,
}

/// The scheduling queue of one scheduler (upstream `PriorityQueue`). Thread-safe; `pop`
/// is async and wakes when a pod arrives or the queue is closed.
pub struct SchedulingQueue {
    inner: Mutex<Inner>,
    notify: Notify,
    less: LessFn,
    pre_enqueue: PreEnqueueFn,
    registrations: Vec<Registration>,
    opts: QueueOptions,
    epoch: Instant,
}

impl std::fmt::Debug for SchedulingQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchedulingQueue")
            .field("pending", &self.pending_pods())
            .field("opts", &self.opts)
            .finish_non_exhaustive()
    }
}

/// Whether the update may make the pod schedulable: anything but its status (besides
/// `resourceClaimStatuses`), resourceVersion, generation, managedFields and finalizers
/// changed (upstream `isPodUpdated`).
pub fn is_pod_updated(old: &Pod, new: &Pod) -> bool {
    let strip = |p: &Pod| {
        let mut p = p.clone();
        p.metadata.resource_version = None;
        p.metadata.generation = None;
        p.metadata.managed_fields = None;
        p.metadata.finalizers = None;
        let claims = p
            .status
            .as_ref()
            .and_then(|s| s.resource_claim_statuses.clone());
        p.status = claims.map(|c| k8s_openapi::api::core::v1::PodStatus {
            resource_claim_statuses: Some(c),
            ..Default::default()
        });
        p
    };
    strip(old) != strip(new)
}

/// The events an update of a pending pod raises (upstream `PodSchedulingPropertiesChange`):
/// label change, scale-down of requests, new tolerations, scheduling gates removed;
/// `UPDATE_OTHER` when none of these.
pub fn pod_scheduling_properties_change(old: &Pod, new: &Pod) -> Vec<ClusterEvent> {
    let ev = |action, label| ClusterEvent {
        resource: EventResource::UnscheduledPod,
        action,
        label,
    };
    let mut out = Vec::new();
    if old.metadata.labels != new.metadata.labels {
        out.push(ev(
            ActionType::UPDATE_POD_LABEL,
            "UnscheduledPodUpdatePodLabel",
        ));
    }
    let (o, n) = (PodInfo::new(old.clone()), PodInfo::new(new.clone()));
    if o.requests
        .iter()
        .any(|(k, v)| n.requests.get(k).copied().unwrap_or_default() < *v)
    {
        out.push(ev(
            ActionType::UPDATE_POD_SCALE_DOWN,
            "UnscheduledPodUpdatePodScaleDown",
        ));
    }
    let gates = |p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.scheduling_gates.as_ref())
            .map_or(0, Vec::len)
    };
    if gates(old) > 0 && gates(new) == 0 {
        out.push(ev(
            ActionType::UPDATE_POD_SCHEDULING_GATES_ELIMINATED,
            "UnscheduledPodUpdatePodSchedulingGatesEliminated",
        ));
    }
    let tolerations = |p: &Pod| p.spec.as_ref().and_then(|s| s.tolerations.clone());
    if tolerations(old) != tolerations(new) {
        out.push(ev(
            ActionType::UPDATE_POD_TOLERATIONS,
            "UnscheduledPodUpdatePodToleration",
        ));
    }
    if out.is_empty() {
        out.push(ev(ActionType::UPDATE_OTHER, "UnscheduledPodUpdate"));
    }
    out
}

impl SchedulingQueue {
    /// A queue ordered by `less`, gating pods with `pre_enqueue`, moving pods out of the
    /// unschedulable pool with the hints of `events` (the profile's
    /// `Framework::events_to_register`: a plugin registering None cares about every
    /// event).
    pub fn new(
        less: LessFn,
        pre_enqueue: PreEnqueueFn,
        events: PluginEvents,
        opts: QueueOptions,
    ) -> Self {
        Self::with_profiles(less, pre_enqueue, vec![(None, events)], opts)
    }

    /// [`new`](Self::new) for several profiles: each profile's registrations (keyed by
    /// its `schedulerName`; None for all pods) apply only to the pods of that profile, as
    /// upstream's `QueueingHintMapPerProfile`. `less` and `pre_enqueue` dispatch on the
    /// pod's `schedulerName` themselves.
    pub fn with_profiles(
        less: LessFn,
        pre_enqueue: PreEnqueueFn,
        profiles: Vec<(Option<String>, PluginEvents)>,
        opts: QueueOptions,
    ) -> Self {
        let mut registrations = Vec::new();
        for (profile, events) in profiles {
            for (plugin, evs) in events {
                match evs {
                    None => registrations.push(Registration {
                        profile: profile.clone(),
                        plugin,
                        event: events::FORCE_ACTIVATE,
                        hint: None,
                    }),
                    Some(evs) => registrations.extend(evs.into_iter().map(|e| Registration {
                        profile: profile.clone(),
                        plugin,
                        event: e.event,
                        hint: e.hint,
                    })),
                }
            }
        }
        let epoch = opts.clock.as_ref().map_or_else(Instant::now, |c| c());
        Self {
            inner: Mutex::new(Inner {
                move_request_cycle: -1,
                ..Default::default()
            }),
            notify: Notify::new(),
            less,
            pre_enqueue,
            registrations,
            opts,
            epoch,
        }
    }

    fn now(&self) -> Instant {
        self.opts.clock.as_ref().map_or_else(Instant::now, |c| c())
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn active_less(&self) -> impl Fn(&QueuedPodInfo, &QueuedPodInfo) -> bool + '_ {
        move |a, b| (self.less)(a, b)
    }

    fn backoff_less(&self) -> impl Fn(&BackoffEntry, &BackoffEntry) -> bool + '_ {
        move |a, b| {
            if a.window != b.window {
                return a.window < b.window;
            }
            (self.less)(&a.qpi, &b.qpi)
        }
    }

    /// The backoff a pod gets after `attempts` tries: none before the first, then the
    /// initial backoff doubled per further attempt, at most the max backoff (upstream
    /// `calculateBackoffDuration`).
    pub fn backoff_duration(&self, attempts: u32) -> Duration {
        if attempts == 0 {
            return Duration::ZERO;
        }
        let max = self.opts.pod_max_backoff;
        let mut d = self.opts.pod_initial_backoff;
        for _ in 1..attempts {
            if d > max.saturating_sub(d) {
                return max;
            }
            d += d;
        }
        d
    }

    /// When the pod's backoff ends (its timestamp plus its backoff).
    pub fn backoff_expiry(&self, qpi: &QueuedPodInfo) -> Instant {
        qpi.timestamp + self.backoff_duration(qpi.attempts)
    }

    fn is_backing_off(&self, qpi: &QueuedPodInfo, now: Instant) -> bool {
        self.backoff_expiry(qpi) > now
    }

    fn new_queued(&self, pod: Arc<Pod>) -> QueuedPodInfo {
        let mut q = QueuedPodInfo::new(Arc::new(PodInfo::new(pod)));
        q.timestamp = self.now();
        q.initial_attempt_timestamp = None;
        q
    }

    /// Runs PreEnqueue and records the gating plugin (upstream `runPreEnqueuePlugins`).
    fn run_pre_enqueue(&self, qpi: &mut QueuedPodInfo) {
        let s = (self.pre_enqueue)(&qpi.pod_info.pod);
        if s.is_success() {
            qpi.gating_plugin = None;
            return;
        }
        let plugin = if s.plugin().is_empty() {
            "PreEnqueue"
        } else {
            s.plugin()
        };
        if s.code() == crate::framework::status::Code::Error {
            tracing::error!(pod = %qpi.pod_info.key(), plugin, "unexpected error running PreEnqueue plugin: {}", s.message());
        } else {
            tracing::debug!(pod = %qpi.pod_info.key(), plugin, "status after running PreEnqueue plugin: {s}");
        }
        qpi.unschedulable_plugins.insert(plugin);
        qpi.gating_plugin = Some(plugin);
    }

    /// Upstream `moveToActiveQ`: true when the pod went to activeQ, false when it is
    /// gated (kept in the unschedulable pool).
    fn move_to_active(
        &self,
        inner: &mut Inner,
        mut qpi: QueuedPodInfo,
        event: &str,
        from_backoff: bool,
    ) -> bool {
        if !(self.opts.pop_from_backoff_q && from_backoff) {
            self.run_pre_enqueue(&mut qpi);
        }
        let uid = qpi.uid().to_owned();
        if qpi.gated() {
            if inner.active.contains(&uid) || inner.backoff.contains(&uid) {
                return false;
            }
            inner.unschedulable.insert(uid, qpi);
            return false;
        }
        if qpi.initial_attempt_timestamp.is_none() {
            qpi.initial_attempt_timestamp = Some(self.now());
        }
        inner.unschedulable.remove(&uid);
        inner.backoff.remove(&uid, &self.backoff_less());
        if event == events::UNSCHEDULED_POD_ADD.label
            || event == events::UNSCHEDULED_POD_UPDATE.label
        {
            inner.nominator.add(Arc::clone(&qpi.pod_info), None);
        }
        tracing::trace!(pod = %qpi.pod_info.key(), event, "pod moved to activeQ");
        inner.active.add_or_update(qpi, &self.active_less());
        true
    }

    /// Upstream `moveToBackoffQ`: true when the pod went to backoffQ.
    fn move_to_backoff(&self, inner: &mut Inner, mut qpi: QueuedPodInfo, event: &str) -> bool {
        let uid = qpi.uid().to_owned();
        if self.opts.pop_from_backoff_q {
            self.run_pre_enqueue(&mut qpi);
            if qpi.gated() {
                inner.unschedulable.entry(uid).or_insert(qpi);
                return false;
            }
        }
        inner.unschedulable.remove(&uid);
        let expiry = self.backoff_expiry(&qpi);
        let window = expiry.saturating_duration_since(self.epoch).as_nanos()
            / BACKOFF_ORDERING_WINDOW.as_nanos();
        tracing::trace!(pod = %qpi.pod_info.key(), event, "pod moved to backoffQ");
        inner.backoff.add(
            BackoffEntry {
                qpi,
                expiry,
                window,
            },
            &self.backoff_less(),
        );
        true
    }

    /// Adds a new pending pod (upstream `Add`): to activeQ, or to the unschedulable pool
    /// when a PreEnqueue plugin gates it.
    pub fn add(&self, pod: Arc<Pod>) {
        let qpi = self.new_queued(pod);
        let mut inner = self.lock();
        if self.move_to_active(&mut inner, qpi, events::UNSCHEDULED_POD_ADD.label, false) {
            drop(inner);
            self.notify.notify_waiters();
        }
    }

    /// The head of activeQ, waiting until there is one; with
    /// [`QueueOptions::pop_from_backoff_q`], the head of backoffQ when activeQ is empty.
    /// None once the queue is closed. Counts the attempt and a scheduling cycle; the pod
    /// is in flight until [`done`](Self::done) or
    /// [`add_unschedulable_if_not_present`](Self::add_unschedulable_if_not_present).
    pub async fn pop(&self) -> Option<QueuedPodInfo> {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(res) = self.try_pop() {
                return res;
            }
            notified.await;
        }
    }

    /// Pop without waiting: Some(None) when closed, None when nothing is there.
    fn try_pop(&self) -> Option<Option<QueuedPodInfo>> {
        let mut inner = self.lock();
        if inner.closed {
            return Some(None);
        }
        let mut qpi = match inner.active.pop(&self.active_less()) {
            Some(q) => q,
            None if self.opts.pop_from_backoff_q => {
                inner.backoff.pop_backoff(&self.backoff_less())?.qpi
            }
            None => return None,
        };
        qpi.attempts += 1;
        inner.scheduling_cycle += 1;
        inner.in_flight.pop(qpi.uid());
        Some(Some(qpi))
    }

    /// Closes the queue: waiting and later pops return None.
    pub fn close(&self) {
        self.lock().closed = true;
        self.notify.notify_waiters();
    }

    /// The number of pods popped so far (upstream `SchedulingCycle`).
    pub fn scheduling_cycle(&self) -> i64 {
        self.lock().scheduling_cycle
    }

    /// The scheduling cycle of the last move request (upstream `moveRequestCycle`; -1
    /// before any).
    pub fn move_request_cycle(&self) -> i64 {
        self.lock().move_request_cycle
    }

    /// Marks the pod with `uid` as no longer in flight (upstream `Done`).
    pub fn done(&self, uid: &str) {
        self.lock().in_flight.done(uid);
    }

    /// The uids of the pods popped and not yet done.
    pub fn in_flight_pods(&self) -> Vec<String> {
        self.lock().in_flight.pods.keys().cloned().collect()
    }

    /// Puts back a pod whose scheduling attempt (popped in `scheduling_cycle`) failed
    /// (upstream `AddUnschedulableIfNotPresent`) and marks it done. A pod no plugin
    /// rejected (an error) goes to backoffQ. Otherwise, with
    /// [`QueueOptions::queueing_hints`], the events received while it was in flight are
    /// checked with the hints of the plugins that rejected it: one saying Queue sends it
    /// to backoffQ (to activeQ for a Pending plugin), none to the unschedulable pool;
    /// without hints, any move request during or after its cycle sends it to backoffQ.
    /// Errors: the pod is already queued.
    pub fn add_unschedulable_if_not_present(
        &self,
        mut qpi: QueuedPodInfo,
        scheduling_cycle: i64,
    ) -> Result<(), Error> {
        let uid = qpi.uid().to_owned();
        let key = qpi.pod_info.key();
        let mut inner = self.lock();
        if inner.unschedulable.contains_key(&uid)
            || inner.active.contains(&uid)
            || inner.backoff.contains(&uid)
        {
            inner.in_flight.done(&uid);
        }
        if inner.unschedulable.contains_key(&uid) {
            return Err(Error::Queue(format!(
                "Pod {key} is already present in unschedulable queue"
            )));
        }
        if inner.active.contains(&uid) {
            return Err(Error::Queue(format!(
                "Pod {key} is already present in the active queue"
            )));
        }
        if inner.backoff.contains(&uid) {
            return Err(Error::Queue(format!(
                "Pod {key} is already present in the backoff queue"
            )));
        }
        qpi.timestamp = self.now();
        let no_rejectors = qpi.unschedulable_plugins.is_empty() && qpi.pending_plugins.is_empty();
        if self.opts.queueing_hints {
            let strategy = if no_rejectors {
                Strategy::AfterBackoff
            } else {
                self.hint_for_in_flight_pod(&inner, &qpi)
            };
            inner.in_flight.done(&uid);
            let notify = self.requeue(&mut inner, qpi, strategy, SCHEDULE_ATTEMPT_FAILURE);
            drop(inner);
            if notify {
                self.notify.notify_waiters();
            }
            return Ok(());
        }
        inner.in_flight.done(&uid);
        let mut notify = false;
        if inner.move_request_cycle >= scheduling_cycle || no_rejectors {
            notify = self.move_to_backoff(&mut inner, qpi, SCHEDULE_ATTEMPT_FAILURE)
                && self.opts.pop_from_backoff_q;
        } else {
            tracing::debug!(pod = %key, "pod moved to the unschedulable pool");
            inner.unschedulable.insert(uid, qpi);
        }
        drop(inner);
        if notify {
            self.notify.notify_waiters();
        }
        Ok(())
    }

    /// Moves the pods whose backoff has ended to activeQ (upstream
    /// `flushBackoffQCompleted`); the number moved.
    pub fn flush_backoff_completed(&self) -> usize {
        let now = self.now();
        let mut inner = self.lock();
        let mut moved = 0;
        for e in inner.backoff.pop_completed(now, &self.backoff_less()) {
            if self.move_to_active(&mut inner, e.qpi, BACKOFF_COMPLETE, true) {
                moved += 1;
            }
        }
        drop(inner);
        if moved > 0 {
            self.notify.notify_waiters();
        }
        moved
    }

    /// Moves the pods that stayed longer than
    /// [`QueueOptions::pod_max_in_unschedulable_pods_duration`] in the unschedulable pool
    /// (upstream `flushUnschedulablePodsLeftover`, event `UnschedulableTimeout`).
    pub fn flush_unschedulable_pods_leftover(&self) {
        let now = self.now();
        let mut inner = self.lock();
        let uids: Vec<String> = inner
            .unschedulable
            .values()
            .filter(|q| {
                now.saturating_duration_since(q.timestamp)
                    > self.opts.pod_max_in_unschedulable_pods_duration
            })
            .map(|q| q.uid().to_owned())
            .collect();
        if uids.is_empty() {
            return;
        }
        self.move_pods(
            &mut inner,
            uids,
            &events::UNSCHEDULABLE_TIMEOUT,
            EventObject::None,
            EventObject::None,
        );
    }

    /// Flushes backoffQ every second and the unschedulable pool every 30 s until
    /// `cancel` (upstream `Run`); closes the queue when cancelled.
    pub async fn run(self: Arc<Self>, cancel: CancellationToken) {
        let mut backoff = tokio::time::interval(BACKOFF_FLUSH_PERIOD);
        let mut leftover = tokio::time::interval(UNSCHEDULABLE_FLUSH_PERIOD);
        backoff.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        leftover.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = cancel.cancelled() => break,
                _ = backoff.tick() => {
                    self.flush_backoff_completed();
                }
                _ = leftover.tick() => self.flush_unschedulable_pods_leftover(),
            }
        }
        self.close();
    }

    fn is_event_of_interest(&self, event: &ClusterEvent) -> bool {
        is_wildcard(event) || self.registrations.iter().any(|r| r.event.matches(event))
    }

    /// Upstream `isPodWorthRequeuing`: the hints of the plugins that rejected the pod.
    fn worth_requeuing(
        &self,
        qpi: &QueuedPodInfo,
        event: &ClusterEvent,
        old: EventObject<'_>,
        new: EventObject<'_>,
    ) -> Strategy {
        let rejectors: BTreeSet<&str> = qpi
            .unschedulable_plugins
            .union(&qpi.pending_plugins)
            .copied()
            .collect();
        if rejectors.is_empty() {
            return Strategy::AfterBackoff;
        }
        if is_wildcard(event) {
            if let EventObject::Pod(p) = new
                && pod_uid(p) != qpi.uid()
            {
                return Strategy::Skip;
            }
            return Strategy::AfterBackoff;
        }
        let mut strategy = Strategy::Skip;
        let profile = scheduler_name(&qpi.pod_info.pod);
        for r in &self.registrations {
            if !rejectors.contains(r.plugin)
                || !r.event.matches(event)
                || r.profile.as_deref().is_some_and(|p| p != profile)
            {
                continue;
            }
            let hint = r
                .hint
                .as_ref()
                .map_or(QueueingHint::Queue, |h| h(&qpi.pod_info.pod, old, new));
            if hint == QueueingHint::QueueSkip {
                continue;
            }
            if qpi.pending_plugins.contains(r.plugin) {
                return Strategy::Immediately;
            }
            if qpi.pending_plugins.is_empty() {
                return Strategy::AfterBackoff;
            }
            strategy = Strategy::AfterBackoff;
        }
        strategy
    }

    /// Upstream `requeuePodWithQueueingStrategy`: true when the pod went to activeQ (or
    /// backoffQ, which pop reads too with `pop_from_backoff_q`).
    fn requeue(
        &self,
        inner: &mut Inner,
        qpi: QueuedPodInfo,
        strategy: Strategy,
        event: &str,
    ) -> bool {
        if strategy == Strategy::Skip {
            inner.unschedulable.insert(qpi.uid().to_owned(), qpi);
            return false;
        }
        if strategy == Strategy::AfterBackoff && self.is_backing_off(&qpi, self.now()) {
            return self.move_to_backoff(inner, qpi, event) && self.opts.pop_from_backoff_q;
        }
        self.move_to_active(inner, qpi, event, false)
    }

    /// Upstream `determineSchedulingHintForInFlightPod`.
    fn hint_for_in_flight_pod(&self, inner: &Inner, qpi: &QueuedPodInfo) -> Strategy {
        let Some(events) = inner.in_flight.events_for(qpi.uid()) else {
            return Strategy::AfterBackoff;
        };
        let mut strategy = Strategy::Skip;
        for (ev, old, new) in events {
            match self.worth_requeuing(qpi, ev, old.borrow(), new.borrow()) {
                Strategy::Skip => {}
                Strategy::Immediately => return Strategy::Immediately,
                Strategy::AfterBackoff => {
                    strategy = Strategy::AfterBackoff;
                    if qpi.pending_plugins.is_empty() {
                        return strategy;
                    }
                }
            }
        }
        strategy
    }

    fn gating_plugin_cares(&self, qpi: &QueuedPodInfo, event: &ClusterEvent) -> bool {
        let Some(g) = qpi.gating_plugin else {
            return true;
        };
        self.registrations.iter().any(|r| {
            r.plugin == g
                && r.event.matches(event)
                && r.profile
                    .as_deref()
                    .is_none_or(|p| p == scheduler_name(&qpi.pod_info.pod))
        })
    }

    /// Upstream `movePodsToActiveOrBackoffQueue` over the pool's pods `uids`.
    fn move_pods(
        &self,
        inner: &mut Inner,
        uids: Vec<String>,
        event: &ClusterEvent,
        old: EventObject<'_>,
        new: EventObject<'_>,
    ) {
        if !self.is_event_of_interest(event) {
            return;
        }
        let mut activated = false;
        for uid in uids {
            let Some(qpi) = inner.unschedulable.get(&uid) else {
                continue;
            };
            if qpi.gated() && !self.gating_plugin_cares(qpi, event) {
                continue;
            }
            let strategy = self.worth_requeuing(qpi, event, old, new);
            if strategy == Strategy::Skip {
                continue;
            }
            let Some(qpi) = inner.unschedulable.remove(&uid) else {
                continue;
            };
            activated |= self.requeue(inner, qpi, strategy, event.label);
        }
        inner.move_request_cycle = inner.scheduling_cycle;
        if self.opts.queueing_hints {
            inner
                .in_flight
                .record(*event, OwnedObject::of(old), OwnedObject::of(new));
        }
        if activated {
            self.notify.notify_waiters();
        }
    }

    /// Moves the pods of the unschedulable pool that `event` may help to activeQ or
    /// backoffQ (upstream `MoveAllToActiveOrBackoffQueue`): a pod moves when one of the
    /// plugins that rejected it registered a matching event whose hint (or its absence)
    /// says Queue; a pod no plugin rejected moves on any event of interest. Records the
    /// move request for the pods in flight.
    pub fn move_all_to_active_or_backoff_queue(
        &self,
        event: ClusterEvent,
        old: EventObject<'_>,
        new: EventObject<'_>,
    ) {
        let mut inner = self.lock();
        let uids = inner.unschedulable.keys().cloned().collect();
        self.move_pods(&mut inner, uids, &event, old, new);
    }

    /// The pods of the pool that an assigned pod may help: those rejected by
    /// PodTopologySpread in its namespace, and those with a required affinity term that
    /// matches it (upstream `getUnschedulablePodsWithCrossTopologyTerm`).
    fn pods_with_cross_topology_term(&self, inner: &Inner, pod: &Pod) -> Vec<String> {
        let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
        let ns_labels: Option<BTreeMap<String, String>> = self
            .opts
            .listers
            .as_ref()
            .and_then(|l| l.namespaces.get(ns))
            .and_then(|n| n.metadata.labels.clone());
        inner
            .unschedulable
            .values()
            .filter(|q| {
                (q.unschedulable_plugins.contains("PodTopologySpread")
                    && q.pod_info
                        .pod
                        .metadata
                        .namespace
                        .as_deref()
                        .unwrap_or_default()
                        == ns)
                    || q.pod_info
                        .required_affinity_terms
                        .iter()
                        .any(|t| t.matches(pod, ns_labels.as_ref()))
            })
            .map(|q| q.uid().to_owned())
            .collect()
    }

    /// An assigned pod was added (upstream `AssignedPodAdded`, event `AssignedPodAdd`):
    /// moves the pods it may help through pod affinity or topology spread.
    pub fn assigned_pod_added(&self, pod: &Pod) {
        let mut inner = self.lock();
        let uids = self.pods_with_cross_topology_term(&inner, pod);
        self.move_pods(
            &mut inner,
            uids,
            &events::ASSIGNED_POD_ADD,
            EventObject::None,
            EventObject::Pod(pod),
        );
    }

    /// An assigned pod was updated, raising `event` (upstream `AssignedPodUpdated`): a
    /// scale-down may help any pod; other updates only the pods with cross-topology
    /// terms.
    pub fn assigned_pod_updated(&self, old: &Pod, new: &Pod, event: ClusterEvent) {
        let mut inner = self.lock();
        let scale_down = ClusterEvent {
            resource: EventResource::Pod,
            action: ActionType::UPDATE_POD_SCALE_DOWN,
            label: "",
        };
        let uids = if scale_down.matches(&event) {
            inner.unschedulable.keys().cloned().collect()
        } else {
            self.pods_with_cross_topology_term(&inner, new)
        };
        self.move_pods(
            &mut inner,
            uids,
            &event,
            EventObject::Pod(old),
            EventObject::Pod(new),
        );
    }

    /// An assigned pod was deleted (event `AssignedPodDelete`, as upstream's
    /// `deletePodFromCache` raises it).
    pub fn assigned_pod_deleted(&self, pod: &Pod) {
        self.move_all_to_active_or_backoff_queue(
            events::ASSIGNED_POD_DELETE,
            EventObject::Pod(pod),
            EventObject::None,
        );
    }

    /// Moves the given pods from the pool or backoffQ to activeQ (upstream `Activate`);
    /// a pod in flight gets a move request so that it is retried after its failure.
    pub fn activate(&self, pods: &[Arc<Pod>]) {
        let mut inner = self.lock();
        let mut activated = false;
        for pod in pods {
            let uid = pod_uid(pod);
            let qpi = match inner.unschedulable.remove(uid) {
                Some(q) => Some((q, false)),
                None => inner
                    .backoff
                    .remove(uid, &self.backoff_less())
                    .map(|e| (e.qpi, true)),
            };
            match qpi {
                Some((q, from_backoff)) => {
                    activated |= self.move_to_active(
                        &mut inner,
                        q,
                        events::FORCE_ACTIVATE.label,
                        from_backoff,
                    );
                }
                None => {
                    if inner.in_flight.pods.contains_key(uid) {
                        inner.in_flight.record(
                            events::FORCE_ACTIVATE,
                            OwnedObject::None,
                            OwnedObject::Pod(Arc::clone(pod)),
                        );
                        inner.move_request_cycle = inner.scheduling_cycle;
                    }
                }
            }
        }
        drop(inner);
        if activated {
            self.notify.notify_waiters();
        }
    }

    /// A pending pod was updated (upstream `Update`): replaced where it is in activeQ or
    /// backoffQ; in the unschedulable pool, an update that may make it schedulable (see
    /// [`is_pod_updated`]) is checked with the hints of its events
    /// ([`pod_scheduling_properties_change`]) and PreEnqueue runs again (scheduling gates
    /// removed); a pod in flight gets a move request; an unknown pod is added.
    pub fn update(&self, old: &Pod, new: Arc<Pod>) {
        let uid = pod_uid(&new).to_owned();
        let mut inner = self.lock();
        if inner.in_flight.pods.contains_key(&uid) {
            if is_pod_updated(old, &new) {
                if self.opts.queueing_hints {
                    let old_obj = OwnedObject::Pod(Arc::new(old.clone()));
                    for ev in pod_scheduling_properties_change(old, &new) {
                        inner.in_flight.push(LogEntry::Event(
                            ev,
                            old_obj.clone(),
                            OwnedObject::Pod(Arc::clone(&new)),
                        ));
                    }
                } else {
                    inner.move_request_cycle = inner.scheduling_cycle;
                }
            }
            return;
        }
        let new_info = Arc::new(PodInfo::new(Arc::clone(&new)));
        if let Some(q) = inner.active.get(&uid) {
            let mut q = q.clone();
            q.pod_info = Arc::clone(&new_info);
            inner.active.add_or_update(q, &self.active_less());
            inner.nominator.update(old, new_info);
            return;
        }
        if let Some(e) = inner.backoff.get(&uid) {
            let mut e = e.clone();
            e.qpi.pod_info = Arc::clone(&new_info);
            inner.backoff.add(e, &self.backoff_less());
            inner.nominator.update(old, new_info);
            return;
        }
        if let Some(mut q) = inner.unschedulable.remove(&uid) {
            q.pod_info = Arc::clone(&new_info);
            inner.nominator.update(old, Arc::clone(&new_info));
            if !is_pod_updated(old, &new) {
                inner.unschedulable.insert(uid, q);
                return;
            }
            let mut activated = false;
            let mut q = Some(q);
            for ev in pod_scheduling_properties_change(old, &new) {
                let Some(cur) = q.take().or_else(|| inner.unschedulable.remove(&uid)) else {
                    break;
                };
                let strategy =
                    self.worth_requeuing(&cur, &ev, EventObject::Pod(old), EventObject::Pod(&new));
                if self.requeue(&mut inner, cur, strategy, ev.label) {
                    activated = true;
                    break;
                }
                if !inner.unschedulable.contains_key(&uid) {
                    // Moved to backoffQ.
                    break;
                }
            }
            if let Some(cur) = q {
                inner.unschedulable.insert(uid, cur);
            }
            drop(inner);
            if activated {
                self.notify.notify_waiters();
            }
            return;
        }
        let qpi = self.new_queued(new);
        if self.move_to_active(&mut inner, qpi, events::UNSCHEDULED_POD_UPDATE.label, false) {
            drop(inner);
            self.notify.notify_waiters();
        }
    }

    /// Removes a pending pod from wherever it is, and its nomination (upstream `Delete`).
    pub fn delete(&self, pod: &Pod) {
        let uid = pod_uid(pod);
        let mut inner = self.lock();
        inner.nominator.delete(uid);
        if inner.active.remove(uid, &self.active_less()).is_some() {
            return;
        }
        if inner.backoff.remove(uid, &self.backoff_less()).is_some() {
            return;
        }
        inner.unschedulable.remove(uid);
    }

    /// How many pods wait in each queue.
    pub fn pending_pods(&self) -> PendingPods {
        let inner = self.lock();
        let gated = inner.unschedulable.values().filter(|q| q.gated()).count();
        PendingPods {
            active: inner.active.len(),
            backoff: inner.backoff.len(),
            unschedulable: inner.unschedulable.len() - gated,
            gated,
        }
    }

    /// Every pending pod and a summary `activeQ:N; backoffQ:N; unschedulablePods:N`
    /// (upstream `PendingPods`, for debugging).
    pub fn pending_pod_list(&self) -> (Vec<Arc<Pod>>, String) {
        let inner = self.lock();
        let mut pods: Vec<Arc<Pod>> = inner
            .active
            .iter()
            .map(|q| Arc::clone(&q.pod_info.pod))
            .collect();
        pods.extend(
            inner
                .backoff
                .iter()
                .map(|e| Arc::clone(&e.qpi.pod_info.pod)),
        );
        pods.extend(
            inner
                .unschedulable
                .values()
                .map(|q| Arc::clone(&q.pod_info.pod)),
        );
        let summary = format!(
            "activeQ:{}; backoffQ:{}; unschedulablePods:{}",
            inner.active.len(),
            inner.backoff.len(),
            inner.unschedulable.len()
        );
        (pods, summary)
    }

    /// The queued copy of the pod with `uid` and the queue it is in (`"active"`,
    /// `"backoff"`, `"unschedulable"`, `"gated"`), for tests and debugging.
    pub fn get(&self, uid: &str) -> Option<(QueuedPodInfo, &'static str)> {
        let inner = self.lock();
        if let Some(q) = inner.active.get(uid) {
            return Some((q.clone(), "active"));
        }
        if let Some(e) = inner.backoff.get(uid) {
            return Some((e.qpi.clone(), "backoff"));
        }
        inner
            .unschedulable
            .get(uid)
            .map(|q| (q.clone(), if q.gated() { "gated" } else { "unschedulable" }))
    }

    /// The `namespace/name` of the pods in activeQ, in pop order (for tests and dumps).
    pub fn active_keys_in_order(&self) -> Vec<String> {
        let inner = self.lock();
        let mut items: Vec<QueuedPodInfo> = inner.active.iter().cloned().collect();
        drop(inner);
        let less = self.active_less();
        items.sort_by(|a, b| {
            if less(a, b) {
                std::cmp::Ordering::Less
            } else if less(b, a) {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        });
        items.iter().map(|q| pod_key(&q.pod_info.pod)).collect()
    }
}

impl Nominator for SchedulingQueue {
    fn has_nominated_pods(&self) -> bool {
        !self.lock().nominator.by_node.is_empty()
    }

    fn nominated_pods_for_node(&self, node: &str) -> Vec<Arc<PodInfo>> {
        self.lock()
            .nominator
            .by_node
            .get(node)
            .cloned()
            .unwrap_or_default()
    }

    /// Records the nomination (upstream `AddNominatedPod` with `ModeOverride`); an empty
    /// `node` clears it.
    fn add_nominated_pod(&self, pod: Arc<PodInfo>, node: &str) {
        let mut inner = self.lock();
        if node.is_empty() {
            inner.nominator.delete(pod.uid());
            return;
        }
        inner.nominator.add(pod, Some(node));
    }

    fn delete_nominated_pod(&self, uid: &str) {
        self.lock().nominator.delete(uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::interface::ClusterEventWithHint;
    use k8s_openapi::api::core::v1::{Node, PodSchedulingGate, PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod(name: &str, priority: i32) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                uid: Some(format!("uid-{name}")),
                ..Default::default()
            },
            spec: Some(PodSpec {
                priority: Some(priority),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn gated_pod(name: &str) -> Pod {
        let mut p = pod(name, 0);
        if let Some(s) = p.spec.as_mut() {
            s.scheduling_gates = Some(vec![PodSchedulingGate { name: "g".into() }]);
        }
        p
    }

    /// PrioritySort's order.
    fn priority_less() -> LessFn {
        Arc::new(|a: &QueuedPodInfo, b: &QueuedPodInfo| {
            let (pa, pb) = (
                crate::framework::types::pod_priority(&a.pod_info.pod),
                crate::framework::types::pod_priority(&b.pod_info.pod),
            );
            pa > pb || (pa == pb && a.timestamp < b.timestamp)
        })
    }

    fn gates() -> PreEnqueueFn {
        Arc::new(|p: &Pod| {
            let gated = p
                .spec
                .as_ref()
                .and_then(|s| s.scheduling_gates.as_ref())
                .is_some_and(|g| !g.is_empty());
            if gated {
                Status::unresolvable("waiting for scheduling gates: [g]")
                    .with_plugin("SchedulingGates")
            } else {
                Status::success()
            }
        })
    }

    struct FakeClock(Mutex<Instant>);
    impl FakeClock {
        fn advance(&self, d: Duration) {
            let mut t = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            *t += d;
        }
    }

    fn node_hint(_: &Pod, _: EventObject<'_>, new: EventObject<'_>) -> QueueingHint {
        match new {
            EventObject::Node(n)
                if n.metadata
                    .labels
                    .as_ref()
                    .is_some_and(|l| l.contains_key("ok")) =>
            {
                QueueingHint::Queue
            }
            _ => QueueingHint::QueueSkip,
        }
    }

    fn registrations() -> Vec<(&'static str, Option<Vec<ClusterEventWithHint>>)> {
        vec![
            (
                "SchedulingGates",
                Some(vec![ClusterEventWithHint::with_hint(
                    EventResource::UnscheduledPod,
                    ActionType::UPDATE_POD_SCHEDULING_GATES_ELIMINATED,
                    |_, _, _| QueueingHint::Queue,
                )]),
            ),
            (
                "NodeAffinity",
                Some(vec![ClusterEventWithHint::with_hint(
                    EventResource::Node,
                    ActionType::ADD | ActionType::UPDATE_NODE_LABEL,
                    node_hint,
                )]),
            ),
            (
                "TaintToleration",
                Some(vec![ClusterEventWithHint::always(
                    EventResource::UnscheduledPod,
                    ActionType::UPDATE_POD_TOLERATIONS,
                )]),
            ),
            (
                "InterPodAffinity",
                Some(vec![ClusterEventWithHint::always(
                    EventResource::Pod,
                    ActionType::ADD,
                )]),
            ),
            (
                "NodeResourcesFit",
                Some(vec![ClusterEventWithHint::always(
                    EventResource::Pod,
                    ActionType::DELETE,
                )]),
            ),
        ]
    }

    fn queue_with(opts: QueueOptions) -> (Arc<SchedulingQueue>, Arc<FakeClock>) {
        let clock = Arc::new(FakeClock(Mutex::new(Instant::now())));
        let c = Arc::clone(&clock);
        let opts = QueueOptions {
            clock: Some(Arc::new(move || {
                *c.0.lock().unwrap_or_else(PoisonError::into_inner)
            })),
            ..opts
        };
        (
            Arc::new(SchedulingQueue::new(
                priority_less(),
                gates(),
                registrations(),
                opts,
            )),
            clock,
        )
    }

    fn queue() -> (Arc<SchedulingQueue>, Arc<FakeClock>) {
        queue_with(QueueOptions::default())
    }

    fn node(name: &str, ok: bool) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some(name.into());
        if ok {
            n.metadata.labels = Some([("ok".to_owned(), "1".to_owned())].into());
        }
        n
    }

    /// Adds, pops and fails `p` with `plugins`, returning the cycle it was popped in.
    async fn fail(q: &SchedulingQueue, p: Pod, plugins: &[&'static str]) -> i64 {
        let key = pod_key(&p);
        q.add(Arc::new(p));
        let mut qpi = q.pop().await.expect("popped");
        assert_eq!(
            qpi.pod_info.key(),
            key,
            "activeQ must be empty before fail()"
        );
        let cycle = q.scheduling_cycle();
        qpi.unschedulable_plugins = plugins.iter().copied().collect();
        q.add_unschedulable_if_not_present(qpi, cycle)
            .expect("requeued");
        cycle
    }

    fn place(q: &SchedulingQueue, name: &str) -> Option<&'static str> {
        q.get(&format!("uid-{name}")).map(|(_, w)| w)
    }

    #[tokio::test]
    async fn pops_by_priority_then_timestamp() {
        let (q, clock) = queue();
        for (name, prio) in [("low", 0), ("high1", 10), ("high2", 10), ("mid", 5)] {
            q.add(Arc::new(pod(name, prio)));
            clock.advance(Duration::from_millis(1));
        }
        assert_eq!(
            q.active_keys_in_order(),
            [
                "default/high1",
                "default/high2",
                "default/mid",
                "default/low"
            ]
        );
        let mut got = Vec::new();
        for _ in 0..4 {
            let p = q.pop().await.expect("pod");
            assert_eq!(p.attempts, 1);
            got.push(p.pod_info.key());
        }
        assert_eq!(
            got,
            [
                "default/high1",
                "default/high2",
                "default/mid",
                "default/low"
            ]
        );
        assert_eq!(q.scheduling_cycle(), 4);
        assert_eq!(q.in_flight_pods().len(), 4);
        q.done("uid-low");
        assert_eq!(q.in_flight_pods().len(), 3);
    }

    #[tokio::test]
    async fn pop_waits_for_a_pod_and_returns_none_after_close() {
        let (q, _) = queue();
        let q2 = Arc::clone(&q);
        let waiter = tokio::spawn(async move { q2.pop().await.map(|p| p.pod_info.key()) });
        tokio::task::yield_now().await;
        q.add(Arc::new(pod("a", 0)));
        assert_eq!(waiter.await.expect("join").as_deref(), Some("default/a"));
        let q3 = Arc::clone(&q);
        let waiter = tokio::spawn(async move { q3.pop().await.is_none() });
        tokio::task::yield_now().await;
        q.close();
        assert!(waiter.await.expect("join"));
    }

    #[test]
    fn backoff_doubles_up_to_the_max() {
        let (q, _) = queue();
        let table = [
            (0, 0),
            (1, 1),
            (2, 2),
            (3, 4),
            (4, 8),
            (5, 10),
            (6, 10),
            (40, 10),
        ];
        for (attempts, secs) in table {
            assert_eq!(
                q.backoff_duration(attempts),
                Duration::from_secs(secs),
                "attempts {attempts}"
            );
        }
        let (q, _) = queue_with(QueueOptions {
            pod_initial_backoff: Duration::from_secs(3),
            pod_max_backoff: Duration::from_secs(20),
            ..Default::default()
        });
        assert_eq!(q.backoff_duration(2), Duration::from_secs(6));
        assert_eq!(q.backoff_duration(4), Duration::from_secs(20));
    }

    #[tokio::test]
    async fn error_goes_to_backoff_and_flushes_when_done() {
        let (q, clock) = queue_with(QueueOptions {
            pop_from_backoff_q: false,
            ..Default::default()
        });
        fail(&q, pod("a", 0), &[]).await;
        assert_eq!(place(&q, "a"), Some("backoff"));
        assert_eq!(q.flush_backoff_completed(), 0);
        clock.advance(Duration::from_millis(999));
        assert_eq!(q.flush_backoff_completed(), 0);
        clock.advance(Duration::from_millis(1));
        assert_eq!(q.flush_backoff_completed(), 1);
        assert_eq!(place(&q, "a"), Some("active"));
        // Second failure: 2 s.
        let qpi = q.pop().await.expect("pod");
        assert_eq!(qpi.attempts, 2);
        q.add_unschedulable_if_not_present(qpi, q.scheduling_cycle())
            .expect("requeue");
        clock.advance(Duration::from_millis(1999));
        assert_eq!(q.flush_backoff_completed(), 0);
        clock.advance(Duration::from_millis(1));
        assert_eq!(q.flush_backoff_completed(), 1);
    }

    #[tokio::test]
    async fn pop_takes_backoff_head_when_active_is_empty() {
        let (q, clock) = queue();
        fail(&q, pod("a", 0), &["NodeAffinity"]).await;
        assert_eq!(place(&q, "a"), Some("unschedulable"));
        // An event for every pod moves it to backoffQ, where pop still finds it.
        q.move_all_to_active_or_backoff_queue(
            events::UNSCHEDULABLE_TIMEOUT,
            EventObject::None,
            EventObject::None,
        );
        assert_eq!(place(&q, "a"), Some("backoff"));
        let p = q.pop().await.expect("from backoffQ");
        assert_eq!(p.pod_info.key(), "default/a");
        assert_eq!(p.attempts, 2);
        // A pod that failed with an error is never popped before its backoff ends, the
        // way upstream keeps it in podErrorBackoffQ: no retry storm while, say, no
        // Node is known yet.
        q.done("uid-a");
        fail(&q, pod("e", 0), &[]).await;
        assert_eq!(place(&q, "e"), Some("backoff"));
        assert!(q.try_pop().is_none(), "error pod popped during its backoff");
        clock.advance(Duration::from_millis(999));
        assert_eq!(q.flush_backoff_completed(), 0);
        clock.advance(Duration::from_millis(1));
        assert_eq!(q.flush_backoff_completed(), 1);
        let p = q.pop().await.expect("after its backoff");
        assert_eq!(p.pod_info.key(), "default/e");
    }

    #[tokio::test]
    async fn requeueing_twice_is_an_error() {
        let (q, _) = queue();
        q.add(Arc::new(pod("a", 0)));
        let qpi = q.pop().await.expect("pod");
        q.add_unschedulable_if_not_present(qpi.clone(), 1)
            .expect("first");
        let err = q
            .add_unschedulable_if_not_present(qpi, 1)
            .expect_err("second");
        assert_eq!(
            err.to_string(),
            "scheduling queue: Pod default/a is already present in the backoff queue"
        );
    }

    #[tokio::test]
    async fn gated_pods_wait_until_their_gates_are_removed() {
        let (q, _) = queue();
        q.add(Arc::new(gated_pod("g")));
        assert_eq!(
            q.pending_pods(),
            PendingPods {
                gated: 1,
                ..Default::default()
            }
        );
        let (qpi, _) = q.get("uid-g").expect("queued");
        assert_eq!(qpi.gating_plugin, Some("SchedulingGates"));
        assert!(qpi.unschedulable_plugins.contains("SchedulingGates"));
        // Events the gating plugin does not care about leave it gated.
        let n = node("n", true);
        q.move_all_to_active_or_backoff_queue(
            ClusterEvent {
                resource: EventResource::Node,
                action: ActionType::ADD,
                label: "NodeAdd",
            },
            EventObject::None,
            EventObject::Node(&n),
        );
        q.flush_unschedulable_pods_leftover();
        assert_eq!(place(&q, "g"), Some("gated"));
        // A label change keeps the gates: still gated.
        let old = gated_pod("g");
        let mut relabeled = old.clone();
        relabeled.metadata.labels = Some([("a".to_owned(), "b".to_owned())].into());
        q.update(&old, Arc::new(relabeled.clone()));
        assert_eq!(place(&q, "g"), Some("gated"));
        // Gates removed: activeQ.
        let mut ungated = relabeled.clone();
        if let Some(s) = ungated.spec.as_mut() {
            s.scheduling_gates = None;
        }
        q.update(&relabeled, Arc::new(ungated));
        assert_eq!(
            q.pending_pods(),
            PendingPods {
                active: 1,
                ..Default::default()
            }
        );
        let (qpi, _) = q.get("uid-g").expect("queued");
        assert_eq!(qpi.gating_plugin, None);
        assert!(qpi.initial_attempt_timestamp.is_some());
    }

    #[tokio::test]
    async fn hints_decide_which_pods_move() {
        let (q, clock) = queue_with(QueueOptions {
            pop_from_backoff_q: false,
            ..Default::default()
        });
        fail(&q, pod("aff", 0), &["NodeAffinity"]).await;
        fail(&q, pod("fit", 0), &["NodeResourcesFit"]).await;
        assert_eq!(
            q.pending_pods(),
            PendingPods {
                unschedulable: 2,
                ..Default::default()
            }
        );
        let node_add = ClusterEvent {
            resource: EventResource::Node,
            action: ActionType::ADD,
            label: "NodeAdd",
        };
        // Hint says QueueSkip: nothing moves.
        let bad = node("bad", false);
        q.move_all_to_active_or_backoff_queue(node_add, EventObject::None, EventObject::Node(&bad));
        assert_eq!(place(&q, "aff"), Some("unschedulable"));
        // Hint says Queue: the NodeAffinity pod moves, still backing off -> backoffQ.
        let good = node("good", true);
        q.move_all_to_active_or_backoff_queue(
            node_add,
            EventObject::None,
            EventObject::Node(&good),
        );
        assert_eq!(place(&q, "aff"), Some("backoff"));
        assert_eq!(place(&q, "fit"), Some("unschedulable"));
        // A registration without a hint always queues; past its backoff -> activeQ.
        clock.advance(Duration::from_secs(2));
        let gone = pod("other", 0);
        q.assigned_pod_deleted(&gone);
        assert_eq!(place(&q, "fit"), Some("active"));
        assert_eq!(
            q.pop().await.map(|p| p.pod_info.key()).as_deref(),
            Some("default/fit")
        );
        // An event nobody registered moves nothing and records no move request.
        fail(&q, pod("aff2", 0), &["NodeAffinity"]).await;
        let before = q.move_request_cycle();
        q.move_all_to_active_or_backoff_queue(
            ClusterEvent {
                resource: EventResource::StorageClass,
                action: ActionType::ADD,
                label: "StorageClassAdd",
            },
            EventObject::None,
            EventObject::Other,
        );
        assert_eq!(place(&q, "aff2"), Some("unschedulable"));
        assert_eq!(q.move_request_cycle(), before);
    }

    #[tokio::test]
    async fn pending_plugin_queue_skips_backoff() {
        let (q, _) = queue_with(QueueOptions {
            pop_from_backoff_q: false,
            ..Default::default()
        });
        q.add(Arc::new(pod("p", 0)));
        let mut qpi = q.pop().await.expect("pod");
        qpi.pending_plugins.insert("NodeAffinity");
        q.add_unschedulable_if_not_present(qpi, 1).expect("requeue");
        let good = node("good", true);
        q.move_all_to_active_or_backoff_queue(
            ClusterEvent {
                resource: EventResource::Node,
                action: ActionType::ADD,
                label: "NodeAdd",
            },
            EventObject::None,
            EventObject::Node(&good),
        );
        assert_eq!(place(&q, "p"), Some("active"));
    }

    #[tokio::test]
    async fn move_request_during_the_cycle_sends_the_pod_to_backoff() {
        let (q, _) = queue_with(QueueOptions {
            pop_from_backoff_q: false,
            queueing_hints: false,
            ..Default::default()
        });
        q.add(Arc::new(pod("a", 0)));
        let mut qpi = q.pop().await.expect("pod");
        let cycle = q.scheduling_cycle();
        assert_eq!(q.move_request_cycle(), -1);
        // An event of interest arrives while "a" is in flight.
        let good = node("good", true);
        q.move_all_to_active_or_backoff_queue(
            ClusterEvent {
                resource: EventResource::Node,
                action: ActionType::ADD,
                label: "NodeAdd",
            },
            EventObject::None,
            EventObject::Node(&good),
        );
        assert_eq!(q.move_request_cycle(), cycle);
        qpi.unschedulable_plugins.insert("NodeResourcesFit");
        q.add_unschedulable_if_not_present(qpi, cycle)
            .expect("requeue");
        assert_eq!(place(&q, "a"), Some("backoff"));
        // Without a move request in its cycle, the next failure goes to the pool.
        fail(&q, pod("b", 0), &["NodeResourcesFit"]).await;
        assert_eq!(place(&q, "b"), Some("unschedulable"));
    }

    #[tokio::test]
    async fn leftover_pods_move_after_five_minutes() {
        let (q, clock) = queue();
        fail(&q, pod("a", 0), &["NodeResourcesFit"]).await;
        clock.advance(Duration::from_secs(300));
        q.flush_unschedulable_pods_leftover();
        assert_eq!(place(&q, "a"), Some("unschedulable"));
        clock.advance(Duration::from_secs(1));
        q.flush_unschedulable_pods_leftover();
        assert_eq!(place(&q, "a"), Some("active"));
    }

    #[tokio::test]
    async fn delete_from_each_queue() {
        let (q, _) = queue_with(QueueOptions {
            pop_from_backoff_q: false,
            ..Default::default()
        });
        fail(&q, pod("unsched", 0), &["NodeResourcesFit"]).await;
        fail(&q, pod("backoff", 0), &[]).await;
        q.add(Arc::new(pod("active", 0)));
        q.add(Arc::new(gated_pod("gated")));
        assert_eq!(
            q.pending_pods(),
            PendingPods {
                active: 1,
                backoff: 1,
                unschedulable: 1,
                gated: 1
            }
        );
        for name in ["active", "backoff", "unsched", "gated"] {
            q.delete(&pod(name, 0));
            assert_eq!(place(&q, name), None, "{name}");
        }
        assert_eq!(q.pending_pods(), PendingPods::default());
    }

    #[tokio::test]
    async fn update_replaces_and_status_only_updates_do_not_move() {
        let (q, _) = queue_with(QueueOptions {
            pop_from_backoff_q: false,
            ..Default::default()
        });
        q.add(Arc::new(pod("a", 0)));
        let mut newer = pod("a", 7);
        newer.metadata.labels = Some([("v".to_owned(), "2".to_owned())].into());
        q.update(&pod("a", 0), Arc::new(newer));
        let (qpi, where_) = q.get("uid-a").expect("queued");
        assert_eq!(
            (
                where_,
                crate::framework::types::pod_priority(&qpi.pod_info.pod)
            ),
            ("active", 7)
        );
        assert_eq!(
            q.pop().await.map(|p| p.pod_info.key()).as_deref(),
            Some("default/a")
        );
        // In the pool: a status-only change keeps it there; a label change is
        // UPDATE_POD_LABEL, which no rejector registered: it stays too; an unknown pod is
        // added.
        fail(&q, pod("b", 0), &["NodeResourcesFit"]).await;
        let mut status_only = pod("b", 0);
        status_only.status = Some(PodStatus {
            phase: Some("Pending".into()),
            ..Default::default()
        });
        q.update(&pod("b", 0), Arc::new(status_only));
        assert_eq!(place(&q, "b"), Some("unschedulable"));
        q.update(&pod("c", 0), Arc::new(pod("c", 0)));
        assert_eq!(place(&q, "c"), Some("active"));
    }

    #[test]
    fn pod_events_of_an_update() {
        let old = gated_pod("p");
        let mut new = old.clone();
        new.metadata.labels = Some([("a".to_owned(), "b".to_owned())].into());
        if let Some(s) = new.spec.as_mut() {
            s.scheduling_gates = Some(vec![]);
        }
        let actions: Vec<ActionType> = pod_scheduling_properties_change(&old, &new)
            .iter()
            .map(|e| e.action)
            .collect();
        assert_eq!(
            actions,
            [
                ActionType::UPDATE_POD_LABEL,
                ActionType::UPDATE_POD_SCHEDULING_GATES_ELIMINATED
            ]
        );
        let actions: Vec<ActionType> = pod_scheduling_properties_change(&old, &old)
            .iter()
            .map(|e| e.action)
            .collect();
        assert_eq!(actions, [ActionType::UPDATE_OTHER]);
        assert!(!is_pod_updated(&old, &old));
        assert!(is_pod_updated(&old, &new));
    }

    #[tokio::test]
    async fn nominator_tracks_status_and_overrides() {
        let (q, _) = queue();
        let mut p = pod("n", 5);
        p.status = Some(PodStatus {
            nominated_node_name: Some("node1".into()),
            ..Default::default()
        });
        q.add(Arc::new(p.clone()));
        let names = |node: &str| {
            q.nominated_pods_for_node(node)
                .iter()
                .map(|p| p.key())
                .collect::<Vec<_>>()
        };
        assert_eq!(names("node1"), ["default/n"]);
        // An update without nominatedNodeName on either side keeps an in-memory one.
        q.add_nominated_pod(Arc::new(PodInfo::new(pod("n", 5))), "node2");
        assert_eq!(names("node1"), Vec::<String>::new());
        assert_eq!(names("node2"), ["default/n"]);
        let mut relabeled = pod("n", 5);
        relabeled.metadata.labels = Some([("x".to_owned(), "y".to_owned())].into());
        q.update(&pod("n", 5), Arc::new(relabeled));
        assert_eq!(names("node2"), ["default/n"]);
        assert!(
            q.nominated_pods_for_node("node2")[0]
                .pod
                .metadata
                .labels
                .is_some()
        );
        q.delete_nominated_pod("uid-n");
        assert!(names("node2").is_empty());
        q.add_nominated_pod(Arc::new(PodInfo::new(pod("n", 5))), "node3");
        q.delete(&pod("n", 5));
        assert!(names("node3").is_empty());
    }

    #[tokio::test]
    async fn assigned_pod_add_moves_pods_with_matching_affinity() {
        use k8s_openapi::api::core::v1::{Affinity, PodAffinity, PodAffinityTerm};
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as MetaSelector;
        let (q, _) = queue_with(QueueOptions {
            pop_from_backoff_q: false,
            ..Default::default()
        });
        let mut p = pod("wants", 0);
        if let Some(s) = p.spec.as_mut() {
            s.affinity = Some(Affinity {
                pod_affinity: Some(PodAffinity {
                    required_during_scheduling_ignored_during_execution: Some(vec![
                        PodAffinityTerm {
                            label_selector: Some(MetaSelector {
                                match_labels: Some([("app".to_owned(), "db".to_owned())].into()),
                                ..Default::default()
                            }),
                            topology_key: "kubernetes.io/hostname".into(),
                            ..Default::default()
                        },
                    ]),
                    ..Default::default()
                }),
                ..Default::default()
            });
        }
        fail(&q, p, &["InterPodAffinity"]).await;
        fail(&q, pod("plain", 0), &["InterPodAffinity"]).await;
        let mut web = pod("web", 0);
        web.metadata.labels = Some([("app".to_owned(), "web".to_owned())].into());
        q.assigned_pod_added(&web);
        assert_eq!(place(&q, "wants"), Some("unschedulable"));
        let mut db = pod("db", 0);
        db.metadata.labels = Some([("app".to_owned(), "db".to_owned())].into());
        q.assigned_pod_added(&db);
        assert_eq!(place(&q, "wants"), Some("backoff"));
        assert_eq!(place(&q, "plain"), Some("unschedulable"));
    }
    #[tokio::test]
    async fn hints_apply_to_their_profile_only() {
        let q = SchedulingQueue::with_profiles(
            priority_less(),
            gates(),
            vec![
                (
                    Some("default-scheduler".to_owned()),
                    vec![("NodeAffinity", Some(vec![]))],
                ),
                (
                    Some("other".to_owned()),
                    vec![(
                        "NodeAffinity",
                        Some(vec![ClusterEventWithHint::always(
                            EventResource::Node,
                            ActionType::ADD,
                        )]),
                    )],
                ),
            ],
            QueueOptions {
                pop_from_backoff_q: false,
                ..Default::default()
            },
        );
        let mut other = pod("o", 0);
        if let Some(s) = other.spec.as_mut() {
            s.scheduler_name = Some("other".into());
        }
        fail(&q, pod("d", 0), &["NodeAffinity"]).await;
        fail(&q, other, &["NodeAffinity"]).await;
        let n = node("n", false);
        q.move_all_to_active_or_backoff_queue(
            ClusterEvent {
                resource: EventResource::Node,
                action: ActionType::ADD,
                label: "NodeAdd",
            },
            EventObject::None,
            EventObject::Node(&n),
        );
        assert_eq!(place(&q, "d"), Some("unschedulable"));
        assert_eq!(place(&q, "o"), Some("backoff"));
    }
    #[tokio::test]
    async fn events_during_the_cycle_are_checked_with_hints() {
        let (q, _) = queue_with(QueueOptions {
            pop_from_backoff_q: false,
            ..Default::default()
        });
        let node_add = ClusterEvent {
            resource: EventResource::Node,
            action: ActionType::ADD,
            label: "NodeAdd",
        };
        // "a" is in flight while a node the NodeAffinity hint rejects arrives, then one it
        // accepts; "b" (popped after both) saw neither.
        q.add(Arc::new(pod("a", 0)));
        let mut a = q.pop().await.expect("a");
        let bad = node("bad", false);
        q.move_all_to_active_or_backoff_queue(node_add, EventObject::None, EventObject::Node(&bad));
        q.add(Arc::new(pod("c", 0)));
        let mut c = q.pop().await.expect("c");
        let good = node("good", true);
        q.move_all_to_active_or_backoff_queue(
            node_add,
            EventObject::None,
            EventObject::Node(&good),
        );
        q.add(Arc::new(pod("b", 0)));
        let mut b = q.pop().await.expect("b");
        assert_eq!(q.in_flight_pods().len(), 3);
        a.unschedulable_plugins.insert("NodeAffinity");
        q.add_unschedulable_if_not_present(a, 1).expect("a");
        assert_eq!(place(&q, "a"), Some("backoff"));
        // NodeResourcesFit registered no Node event: the pool, whatever moved meanwhile.
        c.unschedulable_plugins.insert("NodeResourcesFit");
        q.add_unschedulable_if_not_present(c, 2).expect("c");
        assert_eq!(place(&q, "c"), Some("unschedulable"));
        b.unschedulable_plugins.insert("NodeAffinity");
        q.add_unschedulable_if_not_present(b, 3).expect("b");
        assert_eq!(place(&q, "b"), Some("unschedulable"));
        assert!(q.in_flight_pods().is_empty());
        assert!(q.lock().in_flight.log.is_empty());
    }

    #[tokio::test]
    async fn updates_while_in_flight_are_seen_on_failure() {
        let (q, _) = queue_with(QueueOptions {
            pop_from_backoff_q: false,
            ..Default::default()
        });
        let tolerant = |name: &str| {
            let mut p = pod(name, 0);
            if let Some(s) = p.spec.as_mut() {
                s.tolerations = Some(vec![k8s_openapi::api::core::v1::Toleration {
                    operator: Some("Exists".into()),
                    ..Default::default()
                }]);
            }
            p
        };
        for (name, plugin, changed, want) in [
            ("labels", "NodeAffinity", false, "unschedulable"),
            ("tolerations", "TaintToleration", true, "backoff"),
        ] {
            q.add(Arc::new(pod(name, 0)));
            let mut p = q.pop().await.expect("popped");
            let mut updated = if changed {
                tolerant(name)
            } else {
                pod(name, 0)
            };
            updated.metadata.labels = Some([("a".to_owned(), "b".to_owned())].into());
            q.update(&pod(name, 0), Arc::new(updated));
            // Recorded, not queued: the pod is in flight.
            assert_eq!(place(&q, name), None);
            p.unschedulable_plugins.insert(plugin);
            q.add_unschedulable_if_not_present(p, q.scheduling_cycle())
                .expect("requeue");
            assert_eq!(place(&q, name), Some(want), "{name}");
        }
    }
    #[test]
    fn keyed_heap_keeps_order_through_updates_and_removals() {
        let (q, clock) = queue();
        let less = q.active_less();
        let mut heap = KeyedHeap::default();
        let mut seed = 7u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as i32
        };
        for i in 0..300 {
            clock.advance(Duration::from_millis(1));
            let mut qpi = q.new_queued(Arc::new(pod(&format!("p{i}"), next() % 50)));
            qpi.timestamp = q.now();
            heap.add_or_update(qpi, &less);
        }
        for i in (0..300).step_by(3) {
            assert!(heap.remove(&format!("uid-p{i}"), &less).is_some());
        }
        for i in (1..300).step_by(7) {
            if let Some(mut e) = heap.get(&format!("uid-p{i}")).cloned() {
                e.pod_info = Arc::new(PodInfo::new(pod(&format!("p{i}"), next() % 50)));
                heap.add_or_update(e, &less);
            }
        }
        assert_eq!(heap.len(), 200);
        let mut popped = Vec::new();
        while let Some(x) = heap.pop(&less) {
            popped.push(x);
        }
        assert_eq!(popped.len(), 200);
        assert!(heap.index.is_empty());
        for w in popped.windows(2) {
            assert!(!less(&w[1], &w[0]), "heap order broken");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_poppers_get_each_pod_once() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<SchedulingQueue>();
        let (q, _) = queue();
        let mut workers = Vec::new();
        for _ in 0..4 {
            let q = Arc::clone(&q);
            workers.push(tokio::spawn(async move {
                let mut got = Vec::new();
                while let Some(p) = q.pop().await {
                    q.done(p.pod_info.uid());
                    got.push(p.pod_info.key());
                }
                got
            }));
        }
        for i in 0..200 {
            q.add(Arc::new(pod(&format!("p{i}"), i % 3)));
            if i % 50 == 0 {
                tokio::task::yield_now().await;
            }
        }
        while q.pending_pods().active > 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        q.close();
        let mut all = Vec::new();
        for w in workers {
            all.extend(w.await.expect("join"));
        }
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 200);
        assert!(q.in_flight_pods().is_empty());
    }
}
