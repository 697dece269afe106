//! The scheduling framework's extension points (upstream
//! `pkg/scheduler/framework/interface.go`, KEP-624): a plugin implements [`Plugin`] and
//! returns itself from the `as_*` accessor of each point it takes part in.
//!
//! Order in one pod's cycle: PreEnqueue (before the pod enters activeQ), QueueSort,
//! PreFilter, Filter (per node), PostFilter (when no node fits: preemption), PreScore,
//! Score (per node) with NormalizeScore, Reserve, Permit; then, in the binding cycle,
//! PreBind, Bind and PostBind. Unreserve undoes Reserve when anything after it fails.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Node, Pod};

use super::cycle_state::CycleState;
use super::snapshot::Snapshot;
use super::status::{Code, Status};
use super::types::{NodeInfo, NodeScore, PodInfo};
use crate::backend::queue::QueuedPodInfo;

/// A plugin of a profile. Each `as_*` returns `Some(self)` for the extension points the
/// plugin implements.
pub trait Plugin: Send + Sync + 'static {
    /// The plugin's name, as in KubeSchedulerConfiguration (`NodeResourcesFit`).
    fn name(&self) -> &'static str;
    /// PreEnqueue.
    fn as_pre_enqueue(&self) -> Option<&dyn PreEnqueuePlugin> {
        None
    }
    /// QueueSort.
    fn as_queue_sort(&self) -> Option<&dyn QueueSortPlugin> {
        None
    }
    /// PreFilter.
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        None
    }
    /// Filter.
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        None
    }
    /// PostFilter.
    fn as_post_filter(&self) -> Option<&dyn PostFilterPlugin> {
        None
    }
    /// PreScore.
    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        None
    }
    /// Score.
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        None
    }
    /// Reserve.
    fn as_reserve(&self) -> Option<&dyn ReservePlugin> {
        None
    }
    /// Permit.
    fn as_permit(&self) -> Option<&dyn PermitPlugin> {
        None
    }
    /// PreBind.
    fn as_pre_bind(&self) -> Option<&dyn PreBindPlugin> {
        None
    }
    /// Bind.
    fn as_bind(&self) -> Option<&dyn BindPlugin> {
        None
    }
    /// PostBind.
    fn as_post_bind(&self) -> Option<&dyn PostBindPlugin> {
        None
    }
    /// The cluster events that may make a pod this plugin rejected schedulable, with a
    /// QueueingHint each (upstream `EnqueueExtensions.EventsToRegister`). None: every
    /// event moves such a pod.
    fn events_to_register(&self) -> Option<Vec<ClusterEventWithHint>> {
        None
    }
}

/// Decides whether a pod may enter activeQ (upstream `PreEnqueuePlugin`): anything but
/// Success keeps it in the unschedulable pool, gated.
pub trait PreEnqueuePlugin: Plugin {
    /// Success to let `pod` in.
    fn pre_enqueue(&self, pod: &Pod) -> Status;
}

/// Orders activeQ (upstream `QueueSortPlugin`); exactly one per profile.
pub trait QueueSortPlugin: Plugin {
    /// True when `a` is to be scheduled before `b`.
    fn less(&self, a: &QueuedPodInfo, b: &QueuedPodInfo) -> bool;
}

/// The nodes a PreFilter plugin limits the pod to (upstream `PreFilterResult`); `None`
/// means all nodes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PreFilterResult {
    /// The node names the pod may go to.
    pub node_names: Option<BTreeSet<String>>,
}

impl PreFilterResult {
    /// Every node.
    pub fn all_nodes(&self) -> bool {
        self.node_names.is_none()
    }

    /// The intersection of two results (upstream `Merge`).
    #[must_use]
    pub fn merge(self, other: Self) -> Self {
        match (self.node_names, other.node_names) {
            (None, n) | (n, None) => Self { node_names: n },
            (Some(a), Some(b)) => Self {
                node_names: Some(a.intersection(&b).cloned().collect()),
            },
        }
    }
}

/// Updates a PreFilter plugin's cycle state when preemption simulates adding or removing
/// a pod on a node (upstream `PreFilterExtensions`).
pub trait PreFilterExtensions: Send + Sync {
    /// `pod_to_add` is added to `node_info`.
    fn add_pod(
        &self,
        state: &mut CycleState,
        pod_to_schedule: &Pod,
        pod_to_add: &PodInfo,
        node_info: &NodeInfo,
    ) -> Status;
    /// `pod_to_remove` is removed from `node_info`.
    fn remove_pod(
        &self,
        state: &mut CycleState,
        pod_to_schedule: &Pod,
        pod_to_remove: &PodInfo,
        node_info: &NodeInfo,
    ) -> Status;
}

/// Computes per-pod state before Filter (upstream `PreFilterPlugin`).
pub trait PreFilterPlugin: Plugin {
    /// Runs once per cycle; Skip disables the plugin's Filter for this pod; a rejection
    /// makes every node fail with it.
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status);
    /// The extensions used by preemption, if the plugin keeps state that depends on the
    /// pods of a node.
    fn pre_filter_extensions(&self) -> Option<&dyn PreFilterExtensions> {
        None
    }
}

/// Whether the pod fits a node (upstream `FilterPlugin`).
pub trait FilterPlugin: Plugin {
    /// Success when the pod fits `node_info`; else Unschedulable (preemption might help)
    /// or UnschedulableAndUnresolvable.
    fn filter(&self, state: &CycleState, pod: &PodInfo, node_info: &NodeInfo) -> Status;
}

/// What a PostFilter plugin found (upstream `PostFilterResult`): the node the pod is
/// nominated to after preemption.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PostFilterResult {
    /// The nominated node's name.
    pub nominated_node_name: Option<String>,
}

/// Why each node was rejected in Filter (upstream `NodeToStatus`): nodes absent from
/// the map have `absent` (UnschedulableAndUnresolvable when PreFilter limited the nodes).
#[derive(Debug, Clone, Default)]
pub struct NodeToStatus {
    /// The status of each node that was filtered out.
    pub statuses: HashMap<String, Status>,
    /// The status of every node not in `statuses`.
    pub absent: Option<Status>,
}

impl NodeToStatus {
    /// The status of `node`: its own, else the absent status, else Success.
    pub fn get(&self, node: &str) -> Status {
        self.statuses
            .get(node)
            .cloned()
            .or_else(|| self.absent.clone())
            .unwrap_or_default()
    }
}

/// Runs when no node fits the pod (upstream `PostFilterPlugin`): preemption.
#[async_trait]
pub trait PostFilterPlugin: Plugin {
    /// Success with a nominated node, or why nothing helps.
    async fn post_filter(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        filtered: &NodeToStatus,
    ) -> (Option<PostFilterResult>, Status);
}

/// Computes per-pod state before Score (upstream `PreScorePlugin`).
pub trait PreScorePlugin: Plugin {
    /// Skip disables the plugin's Score for this pod.
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        nodes: &[Arc<NodeInfo>],
    ) -> Status;
}

/// Ranks the nodes that passed Filter (upstream `ScorePlugin` and `ScoreExtensions`).
pub trait ScorePlugin: Plugin {
    /// The node's raw score.
    fn score(&self, state: &CycleState, pod: &PodInfo, node_info: &NodeInfo) -> (i64, Status);
    /// Brings the raw scores into `0..=MAX_NODE_SCORE`; the default leaves them.
    fn normalize_score(
        &self,
        _state: &CycleState,
        _pod: &PodInfo,
        _scores: &mut [NodeScore],
    ) -> Status {
        Status::success()
    }
}

/// Keeps resources for the pod on its node until it is bound (upstream `ReservePlugin`).
pub trait ReservePlugin: Plugin {
    /// Reserve for `pod` on `node`.
    fn reserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status;
    /// Undo [`reserve`](Self::reserve); must be idempotent.
    fn unreserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str);
}

/// Allows, rejects or delays the binding (upstream `PermitPlugin`).
pub trait PermitPlugin: Plugin {
    /// Success, a rejection, or Wait with the longest wait.
    fn permit(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        node: &str,
    ) -> (Status, std::time::Duration);
}

/// Runs before Bind, e.g. to bind volumes (upstream `PreBindPlugin`).
#[async_trait]
pub trait PreBindPlugin: Plugin {
    /// Success to go on to Bind.
    async fn pre_bind(&self, state: &CycleState, pod: &PodInfo, node: &str) -> Status;
}

/// Binds the pod (upstream `BindPlugin`): the first one that does not Skip binds.
#[async_trait]
pub trait BindPlugin: Plugin {
    /// Success once bound; Skip to leave the pod to the next Bind plugin.
    async fn bind(&self, state: &CycleState, pod: &PodInfo, node: &str) -> Status;
}

/// Informational, after a successful bind (upstream `PostBindPlugin`).
pub trait PostBindPlugin: Plugin {
    /// Called once the pod is bound to `node`.
    fn post_bind(&self, state: &CycleState, pod: &PodInfo, node: &str);
}

/// The kind of object a cluster event is about (upstream `EventResource`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventResource {
    /// A pod (assigned to a node: the events other pods care about).
    Pod,
    /// A pod that is itself waiting to be scheduled (its own updates).
    UnscheduledPod,
    /// A node.
    Node,
    /// A PersistentVolume.
    PersistentVolume,
    /// A PersistentVolumeClaim.
    PersistentVolumeClaim,
    /// A StorageClass.
    StorageClass,
    /// A CSINode.
    CsiNode,
    /// A CSIDriver.
    CsiDriver,
    /// A CSIStorageCapacity.
    CsiStorageCapacity,
    /// A Namespace.
    Namespace,
    /// A PodDisruptionBudget.
    PodDisruptionBudget,
    /// Any resource (the wildcard).
    Wildcard,
}

/// What happened to an object, as a bit set (upstream `ActionType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ActionType(pub u32);

impl ActionType {
    /// Created.
    pub const ADD: Self = Self(1);
    /// Deleted.
    pub const DELETE: Self = Self(1 << 1);
    /// A node's allocatable changed.
    pub const UPDATE_NODE_ALLOCATABLE: Self = Self(1 << 2);
    /// A node's labels changed.
    pub const UPDATE_NODE_LABEL: Self = Self(1 << 3);
    /// A node's taints changed.
    pub const UPDATE_NODE_TAINT: Self = Self(1 << 4);
    /// A node's conditions changed.
    pub const UPDATE_NODE_CONDITION: Self = Self(1 << 5);
    /// A node's annotations changed.
    pub const UPDATE_NODE_ANNOTATION: Self = Self(1 << 6);
    /// A pod's labels changed.
    pub const UPDATE_POD_LABEL: Self = Self(1 << 7);
    /// A pod's requests went down.
    pub const UPDATE_POD_SCALE_DOWN: Self = Self(1 << 8);
    /// A pod's tolerations changed.
    pub const UPDATE_POD_TOLERATIONS: Self = Self(1 << 9);
    /// A pod's scheduling gates were all removed.
    pub const UPDATE_POD_SCHEDULING_GATES_ELIMINATED: Self = Self(1 << 10);
    /// Any other update.
    pub const UPDATE_OTHER: Self = Self(1 << 11);
    /// Any update.
    pub const UPDATE: Self = Self(((1 << 12) - 1) & !3);
    /// Anything.
    pub const ALL: Self = Self((1 << 12) - 1);

    /// Whether the two sets share an action.
    pub fn intersects(self, other: Self) -> bool {
        self.0 & other.0 != 0
    }
}

impl std::ops::BitOr for ActionType {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

/// A change in the cluster that may make pending pods schedulable (upstream
/// `ClusterEvent`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClusterEvent {
    /// The kind of object.
    pub resource: EventResource,
    /// What happened to it.
    pub action: ActionType,
    /// A short name for logs and metrics (`NodeAdd`, `AssignedPodDelete`).
    pub label: &'static str,
}

impl ClusterEvent {
    /// Whether a registered event (`self`, possibly with wildcards) covers `incoming`.
    pub fn matches(&self, incoming: &ClusterEvent) -> bool {
        (self.resource == EventResource::Wildcard || self.resource == incoming.resource)
            && self.action.intersects(incoming.action)
    }
}

/// The old and new object of a cluster event.
#[derive(Debug, Clone, Copy)]
pub enum EventObject<'a> {
    /// Nothing (deletions have no new object, additions no old one).
    None,
    /// A node.
    Node(&'a Node),
    /// A pod.
    Pod(&'a Pod),
    /// Another kind, not inspected by hints.
    Other,
}

/// A QueueingHint's answer (upstream `QueueingHint`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueingHint {
    /// The event may make the pod schedulable: move it to activeQ or backoffQ.
    Queue,
    /// The event does not help the pod.
    QueueSkip,
}

/// Decides whether an event may make `pod` schedulable: `(pod, old, new)`.
pub type QueueingHintFn =
    Arc<dyn Fn(&Pod, EventObject<'_>, EventObject<'_>) -> QueueingHint + Send + Sync>;

/// A registered event and its hint; without a hint, the event always queues.
#[derive(Clone)]
pub struct ClusterEventWithHint {
    /// The event.
    pub event: ClusterEvent,
    /// The hint.
    pub hint: Option<QueueingHintFn>,
}

impl std::fmt::Debug for ClusterEventWithHint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterEventWithHint")
            .field("event", &self.event)
            .field("hint", &self.hint.is_some())
            .finish()
    }
}

impl ClusterEventWithHint {
    /// An event without a hint.
    pub fn always(resource: EventResource, action: ActionType) -> Self {
        Self {
            event: ClusterEvent {
                resource,
                action,
                label: "",
            },
            hint: None,
        }
    }

    /// An event with a hint.
    pub fn with_hint(
        resource: EventResource,
        action: ActionType,
        hint: impl Fn(&Pod, EventObject<'_>, EventObject<'_>) -> QueueingHint + Send + Sync + 'static,
    ) -> Self {
        Self {
            event: ClusterEvent {
                resource,
                action,
                label: "",
            },
            hint: Some(Arc::new(hint)),
        }
    }
}

/// The failure code of a plugin's status, used by the queue to decide between backoffQ
/// and the unschedulable pool.
pub fn rejects(status: &Status) -> bool {
    matches!(
        status.code(),
        Code::Unschedulable | Code::UnschedulableAndUnresolvable
    )
}
