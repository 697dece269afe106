//! NodeResourcesFit (upstream `noderesources/fit.go`): filters out nodes without room for
//! the pod's requests, and scores nodes by the configured strategy.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use serde::Deserialize;
use skiff_api::core::pod::requests::{ResourceAmounts, pod_requests};
use skiff_api::core::scheduling_predicates::fit::{
    NodeInfo as ResourceInfo, PODS, fits_requests, is_extended_resource_name,
    is_scalar_resource_name,
};

use super::resource_allocation::{MAX_CUSTOM_PRIORITY_SCORE, ResourceAllocationScorer, Strategy};
use super::{ResourceSpec, default_and_validate_resources};
use crate::error::Error;
use crate::framework::cycle_state::CycleState;
use crate::framework::interface::{
    ActionType, ClusterEventWithHint, EventObject, EventResource, FilterPlugin, Plugin,
    PreFilterPlugin, PreFilterResult, PreScorePlugin, QueueingHint, ScorePlugin,
};
use crate::framework::plugins::helper::parse_args;
use crate::framework::runtime::Handle;
use crate::framework::snapshot::Snapshot;
use crate::framework::status::{Code, Status};
use crate::framework::types::{NodeInfo, PodInfo, pod_node_name, pod_uid, resource_options};

/// The plugin's name (upstream `names.NodeResourcesFit`).
pub const NAME: &str = "NodeResourcesFit";
const PRE_FILTER_STATE_KEY: &str = "PreFilterNodeResourcesFit";
const PRE_SCORE_STATE_KEY: &str = "PreScoreNodeResourcesFit";

/// `LeastAllocated` (the default).
pub const LEAST_ALLOCATED: &str = "LeastAllocated";
/// `MostAllocated`.
pub const MOST_ALLOCATED: &str = "MostAllocated";
/// `RequestedToCapacityRatio`.
pub const REQUESTED_TO_CAPACITY_RATIO: &str = "RequestedToCapacityRatio";

/// One point of a RequestedToCapacityRatio shape (upstream `UtilizationShapePoint`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UtilizationShapePoint {
    /// The utilization, 0..=100, strictly increasing along the shape.
    #[serde(default)]
    pub utilization: i32,
    /// The score, 0..=10.
    #[serde(default)]
    pub score: i32,
}

/// The RequestedToCapacityRatio parameters (upstream `RequestedToCapacityRatioParam`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestedToCapacityRatioParam {
    /// The points of the function.
    #[serde(default)]
    pub shape: Vec<UtilizationShapePoint>,
}

/// How nodes are scored (upstream `ScoringStrategy`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScoringStrategy {
    /// `LeastAllocated`, `MostAllocated` or `RequestedToCapacityRatio`.
    #[serde(default, rename = "type")]
    pub type_: String,
    /// The resources scored (default `cpu` and `memory`, weight 1).
    #[serde(default)]
    pub resources: Vec<ResourceSpec>,
    /// The shape, for `RequestedToCapacityRatio`.
    #[serde(default)]
    pub requested_to_capacity_ratio: Option<RequestedToCapacityRatioParam>,
}

/// The plugin's args (upstream `NodeResourcesFitArgs`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeResourcesFitArgs {
    /// Extended resources the filter does not check.
    #[serde(default)]
    pub ignored_resources: Vec<String>,
    /// Extended resource groups (the part before `/`) the filter does not check.
    #[serde(default)]
    pub ignored_resource_groups: Vec<String>,
    /// The scoring strategy (default LeastAllocated over cpu and memory).
    #[serde(default)]
    pub scoring_strategy: Option<ScoringStrategy>,
}

/// Filter and Score on resources (upstream `Fit`).
#[derive(Debug)]
pub struct Fit {
    ignored_resources: BTreeSet<String>,
    ignored_resource_groups: BTreeSet<String>,
    scorer: ResourceAllocationScorer,
}

/// Builds the plugin from [`NodeResourcesFitArgs`]. Errors: [`Error::Config`] for args
/// that do not decode or do not validate.
pub fn new(
    args: Option<&serde_json::Value>,
    _handle: &Arc<Handle>,
) -> Result<Arc<dyn Plugin>, Error> {
    let args: NodeResourcesFitArgs = parse_args("NodeResourcesFitArgs", args)?;
    Ok(Arc::new(Fit::from_args(args)?))
}

fn validate_shape(shape: &[UtilizationShapePoint]) -> Result<(), String> {
    const PATH: &str = "scoringStrategy.requestedToCapacityRatio.shape";
    if shape.is_empty() {
        return Err(format!(
            "{PATH}: Required value: at least one point must be specified"
        ));
    }
    for (i, p) in shape.iter().enumerate() {
        if !(0..=100).contains(&p.utilization) {
            return Err(format!(
                "{PATH}[{i}].utilization: Invalid value: {}: not in valid range [0, 100]",
                p.utilization
            ));
        }
        if i > 0
            && shape
                .get(i - 1)
                .is_some_and(|prev| prev.utilization >= p.utilization)
        {
            return Err(format!(
                "{PATH}[{i}].utilization: Invalid value: {}: utilization values must be sorted in increasing order",
                p.utilization
            ));
        }
        if !(0..=MAX_CUSTOM_PRIORITY_SCORE).contains(&i64::from(p.score)) {
            return Err(format!(
                "{PATH}[{i}].score: Invalid value: {}: not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]",
                p.score
            ));
        }
    }
    Ok(())
}

impl Fit {
    /// The plugin for `args`, after upstream's defaults and validation. Errors: an
    /// unknown strategy, a bad weight, a bad shape, an ignored resource group with `/`.
    pub fn from_args(args: NodeResourcesFitArgs) -> Result<Self, Error> {
        let config = |msg: String| Error::Config(format!("NodeResourcesFitArgs: {msg}"));
        for (i, g) in args.ignored_resource_groups.iter().enumerate() {
            if g.contains('/') {
                return Err(config(format!(
                    "ignoredResourceGroups[{i}]: Invalid value: {g:?}: resource group name can't contain '/'"
                )));
            }
        }
        let mut strategy = args.scoring_strategy.unwrap_or_else(|| ScoringStrategy {
            type_: LEAST_ALLOCATED.to_owned(),
            ..Default::default()
        });
        default_and_validate_resources(&mut strategy.resources, "scoringStrategy.resources")
            .map_err(|e| config(e.to_string()))?;
        let kind = match strategy.type_.as_str() {
            LEAST_ALLOCATED => Strategy::LeastAllocated,
            MOST_ALLOCATED => Strategy::MostAllocated,
            REQUESTED_TO_CAPACITY_RATIO => {
                let shape = strategy
                    .requested_to_capacity_ratio
                    .as_ref()
                    .map(|p| p.shape.as_slice())
                    .unwrap_or_default();
                validate_shape(shape).map_err(config)?;
                let points: Vec<(i64, i64)> = shape
                    .iter()
                    .map(|p| (i64::from(p.utilization), i64::from(p.score)))
                    .collect();
                Strategy::requested_to_capacity_ratio(&points)
            }
            other => {
                return Err(config(format!(
                    "scoringStrategy.type: Unsupported value: {other:?}: supported values: \"LeastAllocated\", \"MostAllocated\", \"RequestedToCapacityRatio\""
                )));
            }
        };
        Ok(Self {
            ignored_resources: args.ignored_resources.into_iter().collect(),
            ignored_resource_groups: args.ignored_resource_groups.into_iter().collect(),
            scorer: ResourceAllocationScorer {
                resources: strategy.resources,
                use_requested: false,
                strategy: kind,
            },
        })
    }

    /// The pod's requests without the extended resources the filter ignores.
    fn checked_requests(&self, requests: &ResourceAmounts) -> ResourceAmounts {
        requests
            .iter()
            .filter(|(name, _)| {
                if !is_extended_resource_name(name) {
                    return true;
                }
                let group = name.split('/').next().unwrap_or_default();
                !self.ignored_resources.contains(name.as_str())
                    && !self.ignored_resource_groups.contains(group)
            })
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    }
}

/// The pod's requests that Filter checks, computed at PreFilter.
#[derive(Debug, Clone)]
struct PreFilterState(ResourceAmounts);

/// The pod's requests of the scored resources, computed at PreScore.
#[derive(Debug, Clone)]
struct PreScoreState(Vec<i64>);

/// Why the pod does not fit `node`, with the code (upstream `Filter`'s status):
/// UnschedulableAndUnresolvable when a request exceeds the node's whole allocatable.
fn fit_status(requests: &ResourceAmounts, node: &ResourceInfo) -> Status {
    let insufficient = fits_requests(requests, node);
    if insufficient.is_empty() {
        return Status::success();
    }
    let unresolvable = insufficient
        .iter()
        .any(|r| r.resource_name != PODS && r.requested > r.capacity);
    let code = if unresolvable {
        Code::UnschedulableAndUnresolvable
    } else {
        Code::Unschedulable
    };
    Status::new(code, insufficient.into_iter().map(|r| r.reason))
}

/// Whether the pod fits the empty `node` (upstream `isFit`).
fn is_fit(pod: &Pod, node: &Node) -> bool {
    let info = ResourceInfo::new(node.clone(), resource_options());
    fits_requests(&pod_requests(pod, &resource_options()), &info).is_empty()
}

/// Whether `modified` has more allocatable than `original` of a resource the pod
/// requests, or room for more pods (upstream `haveAnyRequestedResourcesIncreased`).
fn have_any_requested_resources_increased(pod: &Pod, original: &Node, modified: &Node) -> bool {
    let requests = pod_requests(pod, &resource_options());
    let original = ResourceInfo::new(original.clone(), resource_options());
    let modified = ResourceInfo::new(modified.clone(), resource_options());
    let alloc = |i: &ResourceInfo, name: &str| i.allocatable().get(name).copied().unwrap_or(0);
    if alloc(&modified, PODS) > alloc(&original, PODS) {
        return true;
    }
    requests
        .iter()
        .filter(|(name, v)| **v > 0 && name.as_str() != PODS)
        .any(|(name, _)| alloc(&modified, name) > alloc(&original, name))
}

/// Queues when the node now has room for the pod and did not before (upstream
/// `isSchedulableAfterNodeChange`).
fn is_schedulable_after_node_change(
    pod: &Pod,
    old: EventObject<'_>,
    new: EventObject<'_>,
) -> QueueingHint {
    let EventObject::Node(modified) = new else {
        return QueueingHint::Queue;
    };
    if !is_fit(pod, modified) {
        return QueueingHint::QueueSkip;
    }
    match old {
        EventObject::Node(original)
            if !have_any_requested_resources_increased(pod, original, modified) =>
        {
            QueueingHint::QueueSkip
        }
        _ => QueueingHint::Queue,
    }
}

/// Whether the scale-down may make `target` schedulable: it is `target` itself, or an
/// assigned pod now requesting less of a resource `target` requests (upstream
/// `isSchedulableAfterPodScaleDown`).
fn is_resource_scale_down(target: &Pod, original: &Pod, modified: &Pod) -> bool {
    if pod_uid(modified) == pod_uid(target) {
        return true;
    }
    if pod_node_name(modified).is_empty() {
        return false;
    }
    let opts = resource_options();
    let (before, after) = (pod_requests(original, &opts), pod_requests(modified, &opts));
    pod_requests(target, &opts)
        .iter()
        .filter(|(name, v)| {
            **v != 0
                && (matches!(name.as_str(), "cpu" | "memory" | "ephemeral-storage")
                    || is_scalar_resource_name(name))
        })
        .any(|(name, _)| {
            before.get(name).copied().unwrap_or(0) > after.get(name).copied().unwrap_or(0)
        })
}

/// Queues on the deletion of an assigned (or nominated) pod, or on a scale-down that
/// frees a resource the pod requests (upstream `isSchedulableAfterPodEvent`).
fn is_schedulable_after_pod_event(
    pod: &Pod,
    old: EventObject<'_>,
    new: EventObject<'_>,
) -> QueueingHint {
    match (old, new) {
        (EventObject::Pod(deleted), EventObject::None) => {
            let nominated = deleted
                .status
                .as_ref()
                .and_then(|s| s.nominated_node_name.as_deref())
                .is_some_and(|n| !n.is_empty());
            if pod_node_name(deleted).is_empty() && !nominated {
                QueueingHint::QueueSkip
            } else {
                QueueingHint::Queue
            }
        }
        (EventObject::Pod(original), EventObject::Pod(modified)) => {
            if is_resource_scale_down(pod, original, modified) {
                QueueingHint::Queue
            } else {
                QueueingHint::QueueSkip
            }
        }
        _ => QueueingHint::Queue,
    }
}

impl Plugin for Fit {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        Some(self)
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
    fn events_to_register(&self) -> Option<Vec<ClusterEventWithHint>> {
        Some(vec![
            ClusterEventWithHint::with_hint(
                EventResource::Pod,
                ActionType::DELETE | ActionType::UPDATE_POD_SCALE_DOWN,
                is_schedulable_after_pod_event,
            ),
            // Upstream's Pod resource also covers the pod's own updates.
            ClusterEventWithHint::with_hint(
                EventResource::UnscheduledPod,
                ActionType::UPDATE_POD_SCALE_DOWN,
                is_schedulable_after_pod_event,
            ),
            ClusterEventWithHint::with_hint(
                EventResource::Node,
                ActionType::ADD | ActionType::UPDATE_NODE_ALLOCATABLE,
                is_schedulable_after_node_change,
            ),
        ])
    }
}

impl PreFilterPlugin for Fit {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        state.write(
            PRE_FILTER_STATE_KEY,
            PreFilterState(self.checked_requests(&pod.requests)),
        );
        (None, Status::success())
    }
}

impl FilterPlugin for Fit {
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node_info: &NodeInfo) -> Status {
        match state.read::<PreFilterState>(PRE_FILTER_STATE_KEY) {
            Some(PreFilterState(requests)) => fit_status(requests, node_info.resources()),
            None => Status::error(format!(
                "error reading {PRE_FILTER_STATE_KEY:?} from cycleState: not found"
            )),
        }
    }
}

impl PreScorePlugin for Fit {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _snapshot: &Snapshot,
        _nodes: &[Arc<NodeInfo>],
    ) -> Status {
        state.write(
            PRE_SCORE_STATE_KEY,
            PreScoreState(self.scorer.pod_request_list(pod)),
        );
        Status::success()
    }
}

impl ScorePlugin for Fit {
    fn score(&self, state: &CycleState, pod: &PodInfo, node_info: &NodeInfo) -> (i64, Status) {
        match state.read::<PreScoreState>(PRE_SCORE_STATE_KEY) {
            Some(PreScoreState(requests)) => self.scorer.score(node_info, requests),
            None => self
                .scorer
                .score(node_info, &self.scorer.pod_request_list(pod)),
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{NodeStatus, PodSpec};

    use super::*;
    use crate::framework::plugins::helper::testing;

    const EXT_A: &str = "example.com/aaa";
    const EXT_B: &str = "example.com/bbb";
    const K8S_IO_A: &str = "kubernetes.io/something";
    const HUGEPAGE_A: &str = "hugepages-2Mi";

    /// Upstream `makeAllocatableResources(10, 20, 32, 5, 20, 5)`: cpu 10m, memory 20,
    /// 32 pods, 5 example.com/aaa, 20 ephemeral-storage, 5 hugepages-2Mi.
    fn node_with(existing: Vec<Pod>) -> NodeInfo {
        let mut n = NodeInfo::new(testing::node(
            "n",
            &[
                ("cpu", "10m"),
                ("memory", "20"),
                ("pods", "32"),
                (EXT_A, "5"),
                ("ephemeral-storage", "20"),
                (HUGEPAGE_A, "5"),
            ],
        ));
        for p in existing {
            n.add_pod(Arc::new(PodInfo::new(testing::on_node(p, "n"))));
        }
        n
    }

    fn pod(reqs: &[&[(&str, &str)]]) -> Pod {
        testing::pod("p", reqs)
    }

    fn with_init(mut p: Pod, init: &[(&str, &str)]) -> Pod {
        if let Some(spec) = p.spec.as_mut() {
            spec.init_containers = Some(vec![testing::container("init", init)]);
        }
        p
    }

    fn run(args: serde_json::Value, p: Pod, node: &NodeInfo) -> Status {
        let plugin = new(Some(&args), &testing::handle()).unwrap();
        let p = PodInfo::new(p);
        let mut state = CycleState::new();
        let (_, s) =
            plugin
                .as_pre_filter()
                .unwrap()
                .pre_filter(&mut state, &p, &Snapshot::default());
        assert!(s.is_success());
        plugin.as_filter().unwrap().filter(&state, &p, node)
    }

    // Upstream fit_test.go, TestEnoughRequests.
    #[test]
    fn filter_table() {
        let none = serde_json::json!({});
        let c = |cpu: &str, mem: &str| -> Vec<(&str, String)> {
            vec![("cpu", cpu.to_owned()), ("memory", mem.to_owned())]
        };
        let _ = c;
        let u = Code::Unschedulable;
        let uu = Code::UnschedulableAndUnresolvable;
        type Case<'a> = (
            &'a str,
            Pod,
            Vec<Pod>,
            serde_json::Value,
            Option<(Code, Vec<&'a str>)>,
        );
        let cases: Vec<Case<'_>> = vec![
            (
                "no resources requested always fits",
                pod(&[&[]]),
                vec![pod(&[&[("cpu", "10m"), ("memory", "20")]])],
                none.clone(),
                None,
            ),
            (
                "too many resources fails",
                pod(&[&[("cpu", "1m"), ("memory", "1")]]),
                vec![pod(&[&[("cpu", "10m"), ("memory", "20")]])],
                none.clone(),
                Some((u, vec!["Insufficient cpu", "Insufficient memory"])),
            ),
            (
                "too many resources fails due to init container cpu",
                with_init(
                    pod(&[&[("cpu", "1m"), ("memory", "1")]]),
                    &[("cpu", "3m"), ("memory", "1")],
                ),
                vec![pod(&[&[("cpu", "8m"), ("memory", "19")]])],
                none.clone(),
                Some((u, vec!["Insufficient cpu"])),
            ),
            (
                "too many resources fails due to init container memory",
                with_init(
                    pod(&[&[("cpu", "1m"), ("memory", "1")]]),
                    &[("cpu", "1m"), ("memory", "3")],
                ),
                vec![pod(&[&[("cpu", "9m"), ("memory", "19")]])],
                none.clone(),
                Some((u, vec!["Insufficient memory"])),
            ),
            (
                "both resources fit",
                pod(&[&[("cpu", "1m"), ("memory", "1")]]),
                vec![pod(&[&[("cpu", "5m"), ("memory", "5")]])],
                none.clone(),
                None,
            ),
            (
                "one resource memory fits",
                pod(&[&[("cpu", "2m"), ("memory", "1")]]),
                vec![pod(&[&[("cpu", "9m"), ("memory", "5")]])],
                none.clone(),
                Some((u, vec!["Insufficient cpu"])),
            ),
            (
                "one resource cpu fits",
                pod(&[&[("cpu", "1m"), ("memory", "2")]]),
                vec![pod(&[&[("cpu", "5m"), ("memory", "19")]])],
                none.clone(),
                Some((u, vec!["Insufficient memory"])),
            ),
            (
                "equal edge case",
                pod(&[&[("cpu", "5m"), ("memory", "1")]]),
                vec![pod(&[&[("cpu", "5m"), ("memory", "19")]])],
                none.clone(),
                None,
            ),
            (
                "extended resource fits",
                pod(&[&[(EXT_A, "1")]]),
                vec![pod(&[&[]])],
                none.clone(),
                None,
            ),
            (
                "extended resource fits with used",
                pod(&[&[(EXT_A, "1")]]),
                vec![pod(&[&[(EXT_A, "2")]])],
                none.clone(),
                None,
            ),
            (
                "extended resource capacity enforced",
                pod(&[&[(EXT_A, "10")]]),
                vec![pod(&[&[]])],
                none.clone(),
                Some((uu, vec!["Insufficient example.com/aaa"])),
            ),
            (
                "extended resource allocatable enforced",
                pod(&[&[(EXT_A, "1")]]),
                vec![pod(&[&[(EXT_A, "5")]])],
                none.clone(),
                Some((u, vec!["Insufficient example.com/aaa"])),
            ),
            (
                "extended resource allocatable enforced for unknown resource",
                pod(&[&[(EXT_B, "1")]]),
                vec![pod(&[&[]])],
                none.clone(),
                Some((uu, vec!["Insufficient example.com/bbb"])),
            ),
            (
                "kubernetes.io resource capacity enforced",
                pod(&[&[(K8S_IO_A, "10")]]),
                vec![pod(&[&[]])],
                none.clone(),
                Some((uu, vec!["Insufficient kubernetes.io/something"])),
            ),
            (
                "hugepages resource allocatable enforced",
                pod(&[&[(HUGEPAGE_A, "3")]]),
                vec![pod(&[&[(HUGEPAGE_A, "3")]])],
                none.clone(),
                Some((u, vec!["Insufficient hugepages-2Mi"])),
            ),
            (
                "skip checking ignored extended resource",
                pod(&[&[(EXT_B, "1")]]),
                vec![pod(&[&[]])],
                serde_json::json!({"ignoredResources": [EXT_B]}),
                None,
            ),
            (
                "skip checking ignored extended resource via resource groups",
                pod(&[&[(EXT_B, "1")]]),
                vec![pod(&[&[]])],
                serde_json::json!({"ignoredResourceGroups": ["example.com"]}),
                None,
            ),
            (
                "ignored resource groups do not skip kubernetes.io resources",
                pod(&[&[(K8S_IO_A, "1")]]),
                vec![pod(&[&[]])],
                serde_json::json!({"ignoredResourceGroups": ["kubernetes.io"]}),
                Some((uu, vec!["Insufficient kubernetes.io/something"])),
            ),
            (
                "ephemeral storage request exceeds the node",
                pod(&[&[("ephemeral-storage", "25")]]),
                vec![pod(&[&[]])],
                none.clone(),
                Some((uu, vec!["Insufficient ephemeral-storage"])),
            ),
            (
                "ephemeral storage fits",
                pod(&[&[("ephemeral-storage", "10")]]),
                vec![pod(&[&[("ephemeral-storage", "2")]])],
                none.clone(),
                None,
            ),
            (
                "cpu over allocatable is unresolvable, memory is not",
                pod(&[&[("cpu", "11m"), ("memory", "1")]]),
                vec![pod(&[&[("memory", "20")]])],
                none.clone(),
                Some((uu, vec!["Insufficient cpu", "Insufficient memory"])),
            ),
        ];
        for (name, p, existing, args, want) in cases {
            let s = run(args, p, &node_with(existing));
            match want {
                None => assert!(s.is_success(), "{name}: {s}"),
                Some((code, reasons)) => {
                    assert_eq!(s.code(), code, "{name}: {s}");
                    assert_eq!(s.reasons(), reasons, "{name}");
                }
            }
        }
    }

    #[test]
    fn too_many_pods() {
        let mut n = NodeInfo::new(testing::node(
            "n",
            &[("cpu", "10"), ("memory", "20"), ("pods", "1")],
        ));
        n.add_pod(Arc::new(PodInfo::new(testing::on_node(pod(&[&[]]), "n"))));
        let s = run(
            serde_json::json!({}),
            pod(&[&[("cpu", "1m"), ("memory", "1")]]),
            &n,
        );
        assert_eq!(s.code(), Code::Unschedulable);
        assert_eq!(s.reasons(), ["Too many pods"]);
    }

    #[test]
    fn bad_args() {
        let cases = [
            (
                serde_json::json!({"scoringStrategy": {"type": "Bogus"}}),
                "scoringStrategy.type: Unsupported value: \"Bogus\"",
            ),
            (
                serde_json::json!({"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": "cpu", "weight": 200}]}}),
                "scoringStrategy.resources[0].weight",
            ),
            (
                serde_json::json!({"scoringStrategy": {"type": "RequestedToCapacityRatio"}}),
                "at least one point must be specified",
            ),
            (
                serde_json::json!({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": [{"utilization": 50, "score": 1}, {"utilization": 10, "score": 2}]}}}),
                "sorted in increasing order",
            ),
            (
                serde_json::json!({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": [{"utilization": 50, "score": 11}]}}}),
                "score: Invalid value: 11",
            ),
            (
                serde_json::json!({"ignoredResourceGroups": ["example.com/aaa"]}),
                "can't contain '/'",
            ),
            (
                serde_json::json!({"ignoredResources": "x"}),
                "decoding NodeResourcesFitArgs",
            ),
        ];
        for (args, want) in cases {
            let Err(err) = new(Some(&args), &testing::handle()) else {
                panic!("{args} accepted");
            };
            assert!(matches!(err, Error::Config(_)), "{err}");
            assert!(err.to_string().contains(want), "{args}: {err}");
        }
    }

    fn sized_node(cpu: &str, pods: &str) -> Node {
        let mut n = testing::node("n", &[("cpu", cpu), ("memory", "1Gi"), ("pods", pods)]);
        n.status = Some(NodeStatus {
            allocatable: Some(testing::list(&[
                ("cpu", cpu),
                ("memory", "1Gi"),
                ("pods", pods),
            ])),
            ..Default::default()
        });
        n
    }

    // Upstream TestFitScore... isSchedulableAfterNodeChange / isSchedulableAfterPodEvent.
    #[test]
    fn hints() {
        let p = pod(&[&[("cpu", "2")]]);
        let (small, big, big_more_pods) = (
            sized_node("1", "10"),
            sized_node("4", "10"),
            sized_node("4", "20"),
        );
        let node_cases = [
            (
                "added, fits",
                EventObject::None,
                EventObject::Node(&big),
                QueueingHint::Queue,
            ),
            (
                "added, too small",
                EventObject::None,
                EventObject::Node(&small),
                QueueingHint::QueueSkip,
            ),
            (
                "grew enough",
                EventObject::Node(&small),
                EventObject::Node(&big),
                QueueingHint::Queue,
            ),
            (
                "fit already, nothing the pod wants grew",
                EventObject::Node(&big),
                EventObject::Node(&big),
                QueueingHint::QueueSkip,
            ),
            (
                "fit already, more pods allowed",
                EventObject::Node(&big),
                EventObject::Node(&big_more_pods),
                QueueingHint::Queue,
            ),
        ];
        for (name, old, new, want) in node_cases {
            assert_eq!(
                is_schedulable_after_node_change(&p, old, new),
                want,
                "{name}"
            );
        }
        let other = |p: Pod| {
            let mut p = p;
            p.metadata.uid = Some("other".into());
            p
        };
        let assigned = other(testing::on_node(pod(&[&[("cpu", "2")]]), "n"));
        let unassigned = other(pod(&[&[("cpu", "2")]]));
        assert_eq!(
            is_schedulable_after_pod_event(&p, EventObject::Pod(&assigned), EventObject::None),
            QueueingHint::Queue
        );
        assert_eq!(
            is_schedulable_after_pod_event(&p, EventObject::Pod(&unassigned), EventObject::None),
            QueueingHint::QueueSkip
        );
        let mut scaled = testing::on_node(pod(&[&[("cpu", "1")]]), "n");
        scaled.metadata.uid = assigned.metadata.uid.clone();
        assert_eq!(
            is_schedulable_after_pod_event(
                &p,
                EventObject::Pod(&assigned),
                EventObject::Pod(&scaled)
            ),
            QueueingHint::Queue
        );
        let mut own_smaller = pod(&[&[("cpu", "1")]]);
        own_smaller.metadata.uid = p.metadata.uid.clone();
        assert_eq!(
            is_schedulable_after_pod_event(
                &p,
                EventObject::Pod(&p),
                EventObject::Pod(&own_smaller)
            ),
            QueueingHint::Queue
        );
        let other_unassigned = other(pod(&[&[("cpu", "1")]]));
        assert_eq!(
            is_schedulable_after_pod_event(
                &p,
                EventObject::Pod(&unassigned),
                EventObject::Pod(&other_unassigned)
            ),
            QueueingHint::QueueSkip
        );
        let mem_only = other(testing::on_node(pod(&[&[("memory", "1")]]), "n"));
        let mem_less = other(testing::on_node(pod(&[&[("memory", "0")]]), "n"));
        assert_eq!(
            is_schedulable_after_pod_event(
                &p,
                EventObject::Pod(&mem_only),
                EventObject::Pod(&mem_less)
            ),
            QueueingHint::QueueSkip
        );
        let _ = PodSpec::default();
    }
}
