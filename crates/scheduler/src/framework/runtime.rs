//! One profile's plugins, run at each extension point (upstream
//! `pkg/scheduler/framework/runtime/framework.go`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, OnceLock, Weak};

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use skiff_client::events::{EventDetails, EventRecorder, reference};

use super::cycle_state::CycleState;
use super::interface::{
    ClusterEventWithHint, NodeToStatus, Plugin, PostFilterResult, PreFilterResult,
};
use super::snapshot::Snapshot;
use super::status::{Code, Status};
use super::types::{MAX_NODE_SCORE, MIN_NODE_SCORE, NodeInfo, NodeScore, PodInfo, pod_priority};
use crate::backend::queue::QueuedPodInfo;
use crate::error::Error;
use crate::informers::Listers;
use crate::scheduler::{NoObserver, Observer};

/// The cycle-state key under which the framework keeps [`NumAllNodes`] before PreScore.
pub const NUM_ALL_NODES_KEY: &str = "framework/NumAllNodes";

/// The number of nodes in the cycle's snapshot (what upstream's plugins read through
/// `SnapshotSharedLister().NodeInfos().List()`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NumAllNodes(pub usize);

/// The extension points a plugin can be enabled at, in cycle order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ExtensionPoint {
    /// PreEnqueue.
    PreEnqueue,
    /// QueueSort.
    QueueSort,
    /// PreFilter.
    PreFilter,
    /// Filter.
    Filter,
    /// PostFilter.
    PostFilter,
    /// PreScore.
    PreScore,
    /// Score.
    Score,
    /// Reserve.
    Reserve,
    /// Permit.
    Permit,
    /// PreBind.
    PreBind,
    /// Bind.
    Bind,
    /// PostBind.
    PostBind,
}

/// What a profile runs, after KubeSchedulerConfiguration's defaults, `multiPoint`
/// expansion and enable/disable lists are applied (see `crate::config`).
#[derive(Debug, Clone, Default)]
pub struct ProfileSpec {
    /// The `schedulerName` pods select the profile with.
    pub scheduler_name: String,
    /// The enabled plugins at each point, in order.
    pub points: BTreeMap<ExtensionPoint, Vec<String>>,
    /// Score weights by plugin (1 when absent).
    pub score_weights: HashMap<String, i64>,
    /// `pluginConfig` args by plugin name (the `args` object, JSON).
    pub plugin_args: HashMap<String, serde_json::Value>,
    /// The profile's `percentageOfNodesToScore` (None: the global one).
    pub percentage_of_nodes_to_score: Option<i32>,
}

/// Pods nominated to nodes by preemption, kept by the scheduling queue (upstream
/// `PodNominator`).
pub trait Nominator: Send + Sync {
    /// Whether any pod is nominated anywhere (checked once per cycle, so that Filter
    /// does not look the nominations up node by node when there are none).
    fn has_nominated_pods(&self) -> bool {
        true
    }
    /// The pods nominated to `node`.
    fn nominated_pods_for_node(&self, node: &str) -> Vec<Arc<PodInfo>>;
    /// Records that `pod` is nominated to `node`.
    fn add_nominated_pod(&self, pod: Arc<PodInfo>, node: &str);
    /// Forgets the nomination of the pod with `uid`.
    fn delete_nominated_pod(&self, uid: &str);
}

/// Records events about pods (the scheduler's events.k8s.io/v1 recorder).
pub trait Recorder: Send + Sync {
    /// An event of `type_` (`Normal`, `Warning`) with `reason`, `action` and `note` about
    /// `regarding`, related to the node named `related_node` when given.
    fn event(
        &self,
        regarding: &Pod,
        related_node: Option<&str>,
        type_: &str,
        reason: &str,
        action: &str,
        note: &str,
    );
}

/// A recorder that only logs.
#[derive(Debug, Default)]
pub struct LogRecorder;

impl Recorder for LogRecorder {
    fn event(
        &self,
        regarding: &Pod,
        _: Option<&str>,
        type_: &str,
        reason: &str,
        _: &str,
        note: &str,
    ) {
        tracing::info!(
            pod = %super::types::pod_key(regarding),
            type_,
            reason,
            "{note}"
        );
    }
}

/// A profile's events.k8s.io/v1 recorder: `regarding` the pod, `related` its node
/// (kube-scheduler's `Eventf(pod, nil|node, ...)`).
impl Recorder for EventRecorder {
    fn event(
        &self,
        regarding: &Pod,
        related_node: Option<&str>,
        type_: &str,
        reason: &str,
        action: &str,
        note: &str,
    ) {
        let node = |name: &str| ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: Some("Node".to_owned()),
            name: Some(name.to_owned()),
            ..Default::default()
        };
        self.eventf(
            reference(regarding),
            related_node.map(node),
            EventDetails {
                type_,
                reason,
                action,
                note,
            },
        );
    }
}

/// What plugins may use beyond their arguments (upstream `framework.Handle`): the API
/// client, the listers of the informer caches, the nominator, the event recorder and the
/// profile's framework itself (for preemption's simulations).
pub struct Handle {
    /// The API client; None in unit tests.
    pub client: Option<kube::Client>,
    /// The informer caches.
    pub listers: Arc<Listers>,
    /// The nominated pods.
    pub nominator: Arc<dyn Nominator>,
    /// The event recorder.
    pub recorder: Arc<dyn Recorder>,
    /// Where plugins report metrics (DefaultPreemption's attempts and victims).
    pub observer: Arc<dyn Observer>,
    framework: OnceLock<Weak<Framework>>,
}

impl Handle {
    /// A handle; the framework is attached when it is built.
    pub fn new(
        client: Option<kube::Client>,
        listers: Arc<Listers>,
        nominator: Arc<dyn Nominator>,
        recorder: Arc<dyn Recorder>,
    ) -> Self {
        Self {
            client,
            listers,
            nominator,
            recorder,
            observer: Arc::new(NoObserver),
            framework: OnceLock::new(),
        }
    }

    /// This handle reporting its plugins' metrics to `observer` (a new handle reports
    /// nowhere).
    pub fn with_observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.observer = observer;
        self
    }

    /// The framework this handle belongs to (None before it is built or after it is
    /// dropped).
    pub fn framework(&self) -> Option<Arc<Framework>> {
        self.framework.get().and_then(Weak::upgrade)
    }
}

/// Builds a plugin from its `args` (None: the defaults).
pub type PluginFactory =
    fn(args: Option<&serde_json::Value>, handle: &Arc<Handle>) -> Result<Arc<dyn Plugin>, Error>;

/// Plugins by name (upstream `Registry`).
pub type Registry = HashMap<&'static str, PluginFactory>;

/// A profile's plugins at each extension point, and the runners.
pub struct Framework {
    scheduler_name: String,
    handle: Arc<Handle>,
    pre_enqueue: Vec<Arc<dyn Plugin>>,
    queue_sort: Option<Arc<dyn Plugin>>,
    pre_filter: Vec<Arc<dyn Plugin>>,
    filter: Vec<Arc<dyn Plugin>>,
    post_filter: Vec<Arc<dyn Plugin>>,
    pre_score: Vec<Arc<dyn Plugin>>,
    score: Vec<(Arc<dyn Plugin>, i64)>,
    reserve: Vec<Arc<dyn Plugin>>,
    permit: Vec<Arc<dyn Plugin>>,
    pre_bind: Vec<Arc<dyn Plugin>>,
    bind: Vec<Arc<dyn Plugin>>,
    post_bind: Vec<Arc<dyn Plugin>>,
    all: Vec<Arc<dyn Plugin>>,
    percentage_of_nodes_to_score: Option<i32>,
}

impl std::fmt::Debug for Framework {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Framework")
            .field("scheduler_name", &self.scheduler_name)
            .field(
                "plugins",
                &self.all.iter().map(|p| p.name()).collect::<Vec<_>>(),
            )
            .finish()
    }
}

fn at(
    point: ExtensionPoint,
    spec: &ProfileSpec,
    plugins: &HashMap<String, Arc<dyn Plugin>>,
    implements: impl Fn(&dyn Plugin) -> bool,
) -> Result<Vec<Arc<dyn Plugin>>, Error> {
    let mut out = Vec::new();
    for name in spec.points.get(&point).into_iter().flatten() {
        let Some(p) = plugins.get(name) else {
            continue;
        };
        if !implements(p.as_ref()) {
            return Err(Error::Config(format!(
                "plugin {name:?} does not extend {point:?} plugin"
            )));
        }
        out.push(Arc::clone(p));
    }
    Ok(out)
}

impl Framework {
    /// Builds the profile's plugins from `registry` (each plugin once, whatever the
    /// number of points it is enabled at). Errors: an unknown plugin, a plugin enabled
    /// at a point it does not implement, bad plugin args, no or several QueueSort plugins.
    pub fn new(
        spec: &ProfileSpec,
        registry: &Registry,
        handle: Handle,
    ) -> Result<Arc<Self>, Error> {
        let handle = Arc::new(handle);
        let mut plugins: HashMap<String, Arc<dyn Plugin>> = HashMap::new();
        let mut all = Vec::new();
        for name in spec.points.values().flatten() {
            if plugins.contains_key(name) {
                continue;
            }
            let factory = registry
                .get(name.as_str())
                .ok_or_else(|| Error::Config(format!("plugin {name:?} does not exist")))?;
            let plugin = factory(spec.plugin_args.get(name), &handle)?;
            all.push(Arc::clone(&plugin));
            plugins.insert(name.clone(), plugin);
        }
        use ExtensionPoint as P;
        let queue_sort = at(P::QueueSort, spec, &plugins, |p| {
            p.as_queue_sort().is_some()
        })?;
        if queue_sort.len() > 1 {
            return Err(Error::Config(
                "only one queue sort plugin can be enabled".into(),
            ));
        }
        let score = at(P::Score, spec, &plugins, |p| p.as_score().is_some())?
            .into_iter()
            .map(|p| {
                let w = spec.score_weights.get(p.name()).copied().unwrap_or(1);
                (p, w)
            })
            .collect();
        let framework = Arc::new(Self {
            scheduler_name: spec.scheduler_name.clone(),
            pre_enqueue: at(P::PreEnqueue, spec, &plugins, |p| {
                p.as_pre_enqueue().is_some()
            })?,
            queue_sort: queue_sort.into_iter().next(),
            pre_filter: at(P::PreFilter, spec, &plugins, |p| {
                p.as_pre_filter().is_some()
            })?,
            filter: at(P::Filter, spec, &plugins, |p| p.as_filter().is_some())?,
            post_filter: at(P::PostFilter, spec, &plugins, |p| {
                p.as_post_filter().is_some()
            })?,
            pre_score: at(P::PreScore, spec, &plugins, |p| p.as_pre_score().is_some())?,
            score,
            reserve: at(P::Reserve, spec, &plugins, |p| p.as_reserve().is_some())?,
            permit: at(P::Permit, spec, &plugins, |p| p.as_permit().is_some())?,
            pre_bind: at(P::PreBind, spec, &plugins, |p| p.as_pre_bind().is_some())?,
            bind: at(P::Bind, spec, &plugins, |p| p.as_bind().is_some())?,
            post_bind: at(P::PostBind, spec, &plugins, |p| p.as_post_bind().is_some())?,
            all,
            percentage_of_nodes_to_score: spec.percentage_of_nodes_to_score,
            handle: Arc::clone(&handle),
        });
        let _ = handle.framework.set(Arc::downgrade(&framework));
        Ok(framework)
    }

    /// The `schedulerName` of the profile.
    pub fn scheduler_name(&self) -> &str {
        &self.scheduler_name
    }

    /// The handle given to the plugins.
    pub fn handle(&self) -> &Arc<Handle> {
        &self.handle
    }

    /// The profile's `percentageOfNodesToScore`.
    pub fn percentage_of_nodes_to_score(&self) -> Option<i32> {
        self.percentage_of_nodes_to_score
    }

    /// Whether the profile has Filter plugins.
    pub fn has_filter_plugins(&self) -> bool {
        !self.filter.is_empty()
    }

    /// Whether the profile has Score plugins.
    pub fn has_score_plugins(&self) -> bool {
        !self.score.is_empty()
    }

    /// Every plugin with the events it registers (for the queue's hints).
    pub fn events_to_register(&self) -> Vec<(&'static str, Option<Vec<ClusterEventWithHint>>)> {
        self.all
            .iter()
            .map(|p| (p.name(), p.events_to_register()))
            .collect()
    }

    /// QueueSort's order; FIFO by queue timestamp without a QueueSort plugin.
    pub fn queue_sort_less(&self, a: &QueuedPodInfo, b: &QueuedPodInfo) -> bool {
        match self.queue_sort.as_ref().and_then(|p| p.as_queue_sort()) {
            Some(q) => q.less(a, b),
            None => a.timestamp < b.timestamp,
        }
    }

    /// Runs PreEnqueue; the first non-success status, with its plugin.
    pub fn run_pre_enqueue_plugins(&self, pod: &Pod) -> Status {
        for p in &self.pre_enqueue {
            if let Some(pe) = p.as_pre_enqueue() {
                let s = pe.pre_enqueue(pod);
                if !s.is_success() {
                    return s.with_plugin(p.name());
                }
            }
        }
        Status::success()
    }

    /// Runs PreFilter (upstream `RunPreFilterPlugins`): the merged node restriction, the
    /// first rejection or error, and the plugins that rejected.
    pub fn run_pre_filter_plugins(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status, BTreeSet<&'static str>) {
        let mut result: Option<PreFilterResult> = None;
        let mut rejected = BTreeSet::new();
        let mut returned_plugins = Vec::new();
        for p in &self.pre_filter {
            let Some(pf) = p.as_pre_filter() else {
                continue;
            };
            let (r, s) = pf.pre_filter(state, pod, snapshot);
            if s.is_skip() {
                state.skip_filter_plugins.insert(p.name());
                continue;
            }
            if !s.is_success() {
                let s = s.with_plugin(p.name());
                if s.is_rejected() {
                    rejected.insert(p.name());
                }
                return (None, s, rejected);
            }
            if let Some(r) = r.filter(|r| !r.all_nodes()) {
                returned_plugins.push(p.name());
                result = Some(match result {
                    None => r,
                    Some(prev) => prev.merge(r),
                });
                if result
                    .as_ref()
                    .and_then(|r| r.node_names.as_ref())
                    .is_some_and(BTreeSet::is_empty)
                {
                    let msg = format!(
                        "node(s) didn't satisfy plugin(s) {returned_plugins:?} simultaneously"
                    );
                    let msg = if returned_plugins.len() == 1 {
                        format!("node(s) didn't satisfy plugin {}", returned_plugins[0])
                    } else {
                        msg
                    };
                    for n in &returned_plugins {
                        rejected.insert(n);
                    }
                    return (None, Status::unresolvable(msg), rejected);
                }
            }
        }
        (result, Status::success(), rejected)
    }

    /// Runs every Filter plugin on one node, stopping at the first failure (upstream
    /// `RunFilterPlugins`).
    pub fn run_filter_plugins(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node_info: &NodeInfo,
    ) -> Status {
        for p in &self.filter {
            if state.skip_filter_plugins.contains(p.name()) {
                continue;
            }
            let Some(f) = p.as_filter() else {
                continue;
            };
            let s = f.filter(state, pod, node_info);
            if !s.is_success() {
                let s = if s.code() == Code::Error {
                    Status::error(format!(
                        "running {:?} filter plugin: {}",
                        p.name(),
                        s.message()
                    ))
                } else {
                    s
                };
                return s.with_plugin(p.name());
            }
        }
        Status::success()
    }

    /// Runs the PreFilter extensions' AddPod for `pod_to_add` (preemption and nominated
    /// pods).
    pub fn run_pre_filter_extension_add_pod(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        pod_to_add: &PodInfo,
        node_info: &NodeInfo,
    ) -> Status {
        for p in &self.pre_filter {
            if state.skip_filter_plugins.contains(p.name()) {
                continue;
            }
            if let Some(ext) = p.as_pre_filter().and_then(|pf| pf.pre_filter_extensions()) {
                let s = ext.add_pod(state, pod, pod_to_add, node_info);
                if !s.is_success() {
                    return s.with_plugin(p.name());
                }
            }
        }
        Status::success()
    }

    /// Runs the PreFilter extensions' RemovePod for `pod_to_remove` (preemption).
    pub fn run_pre_filter_extension_remove_pod(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        pod_to_remove: &PodInfo,
        node_info: &NodeInfo,
    ) -> Status {
        for p in &self.pre_filter {
            if state.skip_filter_plugins.contains(p.name()) {
                continue;
            }
            if let Some(ext) = p.as_pre_filter().and_then(|pf| pf.pre_filter_extensions()) {
                let s = ext.remove_pod(state, pod, pod_to_remove, node_info);
                if !s.is_success() {
                    return s.with_plugin(p.name());
                }
            }
        }
        Status::success()
    }

    /// Runs Filter with the pods nominated to the node that have at least the pod's
    /// priority counted as if they ran there, then, when there were any, without them
    /// (upstream `RunFilterPluginsWithNominatedPods`): the pod must fit both ways.
    pub fn run_filter_plugins_with_nominated_pods(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node_info: &NodeInfo,
    ) -> Status {
        let nominated: Vec<Arc<PodInfo>> = self
            .handle
            .nominator
            .nominated_pods_for_node(node_info.name())
            .into_iter()
            .filter(|p| pod_priority(&p.pod) >= pod_priority(&pod.pod) && p.uid() != pod.uid())
            .collect();
        if nominated.is_empty() {
            return self.run_filter_plugins(state, pod, node_info);
        }
        let mut state_with = state.clone();
        let mut info_with = node_info.clone();
        for n in &nominated {
            info_with.add_pod(Arc::clone(n));
            let s = self.run_pre_filter_extension_add_pod(&mut state_with, &pod.pod, n, &info_with);
            if !s.is_success() {
                return s;
            }
        }
        let s = self.run_filter_plugins(&state_with, pod, &info_with);
        if !s.is_success() {
            return s;
        }
        self.run_filter_plugins(state, pod, node_info)
    }

    /// Runs PostFilter until one succeeds or rejects unresolvably (upstream
    /// `RunPostFilterPlugins`); the statuses' messages are joined.
    pub async fn run_post_filter_plugins(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        filtered: &NodeToStatus,
    ) -> (Option<PostFilterResult>, Status) {
        let mut reasons = Vec::new();
        let mut result = None;
        for p in &self.post_filter {
            let Some(pf) = p.as_post_filter() else {
                continue;
            };
            let (r, s) = pf.post_filter(state, pod, snapshot, filtered).await;
            if s.is_success() {
                return (r, s.with_plugin(p.name()));
            }
            if s.code() == Code::UnschedulableAndUnresolvable {
                return (r, s.with_plugin(p.name()));
            }
            if !s.is_rejected() {
                return (None, s.with_plugin(p.name()));
            }
            if r.is_some() {
                result = r;
            }
            reasons.extend(s.reasons().iter().cloned());
        }
        (result, Status::new(Code::Unschedulable, reasons))
    }

    /// Runs PreScore; Skip disables that plugin's Score.
    pub fn run_pre_score_plugins(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        nodes: &[Arc<NodeInfo>],
    ) -> Status {
        state.write(NUM_ALL_NODES_KEY, NumAllNodes(snapshot.num_nodes()));
        for p in &self.pre_score {
            let Some(ps) = p.as_pre_score() else {
                continue;
            };
            let s = ps.pre_score(state, pod, snapshot, nodes);
            if s.is_skip() {
                state.skip_score_plugins.insert(p.name());
                continue;
            }
            if !s.is_success() {
                return Status::error(format!(
                    "running PreScore plugin {:?}: {}",
                    p.name(),
                    s.message()
                ))
                .with_plugin(p.name());
            }
        }
        Status::success()
    }

    /// Runs Score and NormalizeScore of every plugin on `nodes` and sums the weighted
    /// scores per node (upstream `RunScorePlugins`). Errors: a plugin's error, or a
    /// normalized score outside `0..=100`.
    pub fn run_score_plugins(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
    ) -> Result<Vec<NodeScore>, Status> {
        let mut totals: Vec<NodeScore> = nodes
            .iter()
            .map(|n| NodeScore {
                name: n.name().to_owned(),
                score: 0,
            })
            .collect();
        // One vector of per-plugin scores, reused by every plugin (the names are cloned
        // once per cycle, not once per plugin).
        let mut scores = totals.clone();
        for (p, weight) in &self.score {
            if state.skip_score_plugins.contains(p.name()) {
                continue;
            }
            let Some(sp) = p.as_score() else {
                continue;
            };
            for (n, slot) in nodes.iter().zip(scores.iter_mut()) {
                let (score, s) = sp.score(state, pod, n);
                if !s.is_success() {
                    return Err(Status::error(format!(
                        "plugin {:?} failed with: {}",
                        p.name(),
                        s.message()
                    ))
                    .with_plugin(p.name()));
                }
                slot.score = score;
            }
            let s = sp.normalize_score(state, pod, &mut scores);
            if !s.is_success() {
                return Err(Status::error(format!(
                    "plugin {:?} failed with: {}",
                    p.name(),
                    s.message()
                ))
                .with_plugin(p.name()));
            }
            for (total, s) in totals.iter_mut().zip(&scores) {
                if !(MIN_NODE_SCORE..=MAX_NODE_SCORE).contains(&s.score) {
                    return Err(Status::error(format!(
                        "plugin {:?} returns an invalid score {}, it should in the range of [{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing",
                        p.name(),
                        s.score
                    )));
                }
                total.score += s.score * weight;
            }
        }
        Ok(totals)
    }

    /// Runs Reserve; on failure the caller runs Unreserve.
    pub fn run_reserve_plugins_reserve(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        node: &str,
    ) -> Status {
        for p in &self.reserve {
            if let Some(r) = p.as_reserve() {
                let s = r.reserve(state, pod, node);
                if !s.is_success() {
                    return s.with_plugin(p.name());
                }
            }
        }
        Status::success()
    }

    /// Runs Unreserve in reverse order.
    pub fn run_reserve_plugins_unreserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) {
        for p in self.reserve.iter().rev() {
            if let Some(r) = p.as_reserve() {
                r.unreserve(state, pod, node);
            }
        }
    }

    /// Runs Permit: the first rejection, else Wait with the shortest wait asked, else
    /// Success.
    pub fn run_permit_plugins(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        node: &str,
    ) -> (Status, Option<std::time::Duration>) {
        let mut wait: Option<std::time::Duration> = None;
        for p in &self.permit {
            if let Some(pp) = p.as_permit() {
                let (s, d) = pp.permit(state, pod, node);
                if s.is_wait() {
                    wait = Some(wait.map_or(d, |w| w.min(d)));
                } else if !s.is_success() {
                    return (s.with_plugin(p.name()), None);
                }
            }
        }
        match wait {
            Some(d) => (Status::new(Code::Wait, Vec::<String>::new()), Some(d)),
            None => (Status::success(), None),
        }
    }

    /// Runs PreBind.
    pub async fn run_pre_bind_plugins(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &str,
    ) -> Status {
        for p in &self.pre_bind {
            if let Some(pb) = p.as_pre_bind() {
                let s = pb.pre_bind(state, pod, node).await;
                if !s.is_success() {
                    return s.with_plugin(p.name());
                }
            }
        }
        Status::success()
    }

    /// Runs Bind until a plugin does not Skip.
    pub async fn run_bind_plugins(&self, state: &CycleState, pod: &PodInfo, node: &str) -> Status {
        for p in &self.bind {
            if let Some(b) = p.as_bind() {
                let s = b.bind(state, pod, node).await;
                if s.is_skip() {
                    continue;
                }
                return s.with_plugin(p.name());
            }
        }
        Status::skip()
    }

    /// Runs PostBind.
    pub fn run_post_bind_plugins(&self, state: &CycleState, pod: &PodInfo, node: &str) {
        for p in &self.post_bind {
            if let Some(pb) = p.as_post_bind() {
                pb.post_bind(state, pod, node);
            }
        }
    }
}
