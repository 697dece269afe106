//! TaintToleration (upstream `framework/plugins/tainttoleration`): filters out nodes with
//! a NoSchedule or NoExecute taint the pod does not tolerate, and prefers nodes with
//! fewer PreferNoSchedule taints the pod does not tolerate.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod, Taint, Toleration};
use skiff_api::core::scheduling_predicates::taints::{
    TAINT_EFFECT_NO_EXECUTE, TAINT_EFFECT_NO_SCHEDULE,
};
use skiff_api::core::scheduling_predicates::{
    find_matching_untolerated_taint, tolerations_tolerate_taint,
};

use super::helper::default_normalize_score;
use crate::error::Error;
use crate::framework::cycle_state::CycleState;
use crate::framework::interface::{
    ActionType, ClusterEventWithHint, EventObject, EventResource, FilterPlugin, Plugin,
    PreScorePlugin, QueueingHint, ScorePlugin,
};
use crate::framework::runtime::Handle;
use crate::framework::snapshot::Snapshot;
use crate::framework::status::Status;
use crate::framework::types::{MAX_NODE_SCORE, NodeInfo, NodeScore, PodInfo, pod_uid};

/// The plugin's name (upstream `names.TaintToleration`).
pub const NAME: &str = skiff_api::core::scheduling_predicates::TAINT_TOLERATION;
/// The soft taint effect scored here.
pub const TAINT_EFFECT_PREFER_NO_SCHEDULE: &str = "PreferNoSchedule";
const PRE_SCORE_STATE_KEY: &str = "PreScoreTaintToleration";

/// The Filter, PreScore and Score of taints (upstream `TaintToleration`). Takes no args.
#[derive(Debug, Default)]
pub struct TaintToleration;

/// Builds the plugin; `args` are ignored.
pub fn new(
    _args: Option<&serde_json::Value>,
    _handle: &Arc<Handle>,
) -> Result<Arc<dyn Plugin>, Error> {
    Ok(Arc::new(TaintToleration))
}

fn tolerations(pod: &Pod) -> &[Toleration] {
    pod.spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or_default()
}

fn taints(node: &Node) -> &[Taint] {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default()
}

/// Upstream `helper.DoNotScheduleTaintsFilterFunc`.
fn do_not_schedule(t: &Taint) -> bool {
    t.effect == TAINT_EFFECT_NO_SCHEDULE || t.effect == TAINT_EFFECT_NO_EXECUTE
}

/// The first NoSchedule / NoExecute taint of `node` that `pod` does not tolerate.
fn untolerated<'a>(pod: &Pod, node: &'a Node) -> Option<&'a Taint> {
    find_matching_untolerated_taint(taints(node), tolerations(pod), do_not_schedule)
}

/// Queues when the node was added, or changed, so that the pod now tolerates it
/// (upstream `isSchedulableAfterNodeChange`).
fn is_schedulable_after_node_change(
    pod: &Pod,
    old: EventObject<'_>,
    new: EventObject<'_>,
) -> QueueingHint {
    let EventObject::Node(modified) = new else {
        return QueueingHint::Queue;
    };
    let was_untolerated = match old {
        EventObject::Node(original) => untolerated(pod, original).is_some(),
        _ => true,
    };
    if was_untolerated && untolerated(pod, modified).is_none() {
        QueueingHint::Queue
    } else {
        QueueingHint::QueueSkip
    }
}

/// Queues the pod itself when its tolerations changed (upstream
/// `isSchedulableAfterPodTolerationChange`).
fn is_schedulable_after_pod_toleration_change(
    pod: &Pod,
    _old: EventObject<'_>,
    new: EventObject<'_>,
) -> QueueingHint {
    match new {
        EventObject::Pod(modified) if pod_uid(modified) == pod_uid(pod) => QueueingHint::Queue,
        _ => QueueingHint::QueueSkip,
    }
}

/// The pod's tolerations of PreferNoSchedule taints (those with that effect or none),
/// computed at PreScore.
#[derive(Debug, Clone)]
struct PreScoreState {
    tolerations_prefer_no_schedule: Vec<Toleration>,
}

fn prefer_no_schedule_tolerations(pod: &Pod) -> Vec<Toleration> {
    tolerations(pod)
        .iter()
        .filter(|t| {
            matches!(
                t.effect.as_deref(),
                None | Some("") | Some(TAINT_EFFECT_PREFER_NO_SCHEDULE)
            )
        })
        .cloned()
        .collect()
}

/// How many PreferNoSchedule taints of `taints` none of `tolerations` tolerates
/// (upstream `countIntolerableTaintsPreferNoSchedule`).
fn count_intolerable_prefer_no_schedule(taints: &[Taint], tolerations: &[Toleration]) -> i64 {
    let n = taints
        .iter()
        .filter(|t| t.effect == TAINT_EFFECT_PREFER_NO_SCHEDULE)
        .filter(|t| !tolerations_tolerate_taint(tolerations, t))
        .count();
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Plugin for TaintToleration {
    fn name(&self) -> &'static str {
        NAME
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
                EventResource::Node,
                ActionType::ADD | ActionType::UPDATE_NODE_TAINT,
                is_schedulable_after_node_change,
            ),
            ClusterEventWithHint::with_hint(
                EventResource::UnscheduledPod,
                ActionType::UPDATE_POD_TOLERATIONS,
                is_schedulable_after_pod_toleration_change,
            ),
        ])
    }
}

impl FilterPlugin for TaintToleration {
    fn filter(&self, _state: &CycleState, pod: &PodInfo, node_info: &NodeInfo) -> Status {
        match untolerated(&pod.pod, node_info.node()) {
            None => Status::success(),
            Some(taint) => Status::unresolvable(format!(
                "node(s) had untolerated taint {{{}: {}}}",
                taint.key,
                taint.value.as_deref().unwrap_or_default()
            )),
        }
    }
}

impl PreScorePlugin for TaintToleration {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _snapshot: &Snapshot,
        nodes: &[Arc<NodeInfo>],
    ) -> Status {
        if nodes.is_empty() {
            return Status::success();
        }
        state.write(
            PRE_SCORE_STATE_KEY,
            PreScoreState {
                tolerations_prefer_no_schedule: prefer_no_schedule_tolerations(&pod.pod),
            },
        );
        Status::success()
    }
}

impl ScorePlugin for TaintToleration {
    fn score(&self, state: &CycleState, pod: &PodInfo, node_info: &NodeInfo) -> (i64, Status) {
        let count = match state.read::<PreScoreState>(PRE_SCORE_STATE_KEY) {
            Some(s) => count_intolerable_prefer_no_schedule(
                taints(node_info.node()),
                &s.tolerations_prefer_no_schedule,
            ),
            None => count_intolerable_prefer_no_schedule(
                taints(node_info.node()),
                &prefer_no_schedule_tolerations(&pod.pod),
            ),
        };
        (count, Status::success())
    }

    fn normalize_score(
        &self,
        _state: &CycleState,
        _pod: &PodInfo,
        scores: &mut [NodeScore],
    ) -> Status {
        default_normalize_score(MAX_NODE_SCORE, true, scores)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::NodeSpec;

    use super::*;
    use crate::framework::plugins::helper::testing;
    use crate::framework::status::Code;

    fn taint(key: &str, value: &str, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: Some(value.into()),
            effect: effect.into(),
            ..Default::default()
        }
    }

    fn tol(key: &str, op: &str, value: &str, effect: &str) -> Toleration {
        let opt = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        Toleration {
            key: opt(key),
            operator: opt(op),
            value: opt(value),
            effect: opt(effect),
            ..Default::default()
        }
    }

    fn node(name: &str, taints: Vec<Taint>) -> NodeInfo {
        let mut n = testing::node(name, &[]);
        n.spec = Some(NodeSpec {
            taints: Some(taints),
            ..Default::default()
        });
        NodeInfo::new(n)
    }

    fn pod(tolerations: Vec<Toleration>) -> PodInfo {
        let mut p = testing::pod("p", &[]);
        if let Some(spec) = p.spec.as_mut() {
            spec.tolerations = Some(tolerations);
        }
        PodInfo::new(p)
    }

    // Upstream taint_toleration_test.go, TestTaintTolerationFilter.
    #[test]
    fn filter_table() {
        let plugin = new(None, &testing::handle()).unwrap();
        let f = plugin.as_filter().unwrap();
        let state = CycleState::new();
        let ns = "NoSchedule";
        type Case<'a> = (&'a str, Vec<Toleration>, Vec<Taint>, Option<&'a str>);
        let cases: Vec<Case<'_>> = vec![
            (
                "no tolerations, tainted node",
                vec![],
                vec![taint("dedicated", "user1", ns)],
                Some("node(s) had untolerated taint {dedicated: user1}"),
            ),
            (
                "tolerates the dedicated taint",
                vec![tol("dedicated", "Equal", "user1", ns)],
                vec![taint("dedicated", "user1", ns)],
                None,
            ),
            (
                "toleration for another user",
                vec![tol("dedicated", "Equal", "user2", ns)],
                vec![taint("dedicated", "user1", ns)],
                Some("node(s) had untolerated taint {dedicated: user1}"),
            ),
            (
                "Exists tolerates any value",
                vec![tol("foo", "Exists", "", ns)],
                vec![taint("foo", "bar", ns)],
                None,
            ),
            (
                "all taints tolerated",
                vec![
                    tol("dedicated", "Equal", "user2", ns),
                    tol("foo", "Exists", "", ns),
                ],
                vec![taint("dedicated", "user2", ns), taint("foo", "bar", ns)],
                None,
            ),
            (
                "effect does not match",
                vec![tol("foo", "Equal", "bar", "PreferNoSchedule")],
                vec![taint("foo", "bar", ns)],
                Some("node(s) had untolerated taint {foo: bar}"),
            ),
            (
                "empty toleration effect matches NoSchedule",
                vec![tol("foo", "Equal", "bar", "")],
                vec![taint("foo", "bar", ns)],
                None,
            ),
            (
                "PreferNoSchedule taint is not filtered",
                vec![tol("dedicated", "Equal", "user2", ns)],
                vec![taint("dedicated", "user1", "PreferNoSchedule")],
                None,
            ),
            (
                "no toleration, PreferNoSchedule taint",
                vec![],
                vec![taint("dedicated", "user1", "PreferNoSchedule")],
                None,
            ),
            (
                "NoExecute taint filtered",
                vec![],
                vec![taint("k", "v", "NoExecute")],
                Some("node(s) had untolerated taint {k: v}"),
            ),
        ];
        for (name, tols, taints, want) in cases {
            let s = f.filter(&state, &pod(tols), &node("n", taints));
            match want {
                Some(msg) => {
                    assert_eq!(s.code(), Code::UnschedulableAndUnresolvable, "{name}");
                    assert_eq!(s.message(), msg, "{name}");
                }
                None => assert!(s.is_success(), "{name}: {s}"),
            }
        }
    }

    // Upstream taint_toleration_test.go, TestTaintTolerationScore.
    #[test]
    fn score_table() {
        let plugin = new(None, &testing::handle()).unwrap();
        let pns = "PreferNoSchedule";
        type Case<'a> = (&'a str, Vec<Toleration>, Vec<Vec<Taint>>, Vec<i64>);
        let cases: Vec<Case<'_>> = vec![
            (
                "tolerated taints score higher",
                vec![tol("foo", "Equal", "bar", pns)],
                vec![
                    vec![taint("foo", "bar", pns)],
                    vec![taint("foo", "blah", pns)],
                ],
                vec![100, 0],
            ),
            (
                "all taints tolerated: same score",
                vec![
                    tol("cpu-type", "Equal", "arm64", pns),
                    tol("disk-type", "Equal", "ssd", pns),
                ],
                vec![
                    vec![],
                    vec![taint("cpu-type", "arm64", pns)],
                    vec![
                        taint("cpu-type", "arm64", pns),
                        taint("disk-type", "ssd", pns),
                    ],
                ],
                vec![100, 100, 100],
            ),
            (
                "more intolerable taints, lower score",
                vec![tol("foo", "Equal", "bar", pns)],
                vec![
                    vec![],
                    vec![taint("cpu-type", "arm64", pns)],
                    vec![
                        taint("cpu-type", "arm64", pns),
                        taint("disk-type", "ssd", pns),
                    ],
                ],
                vec![100, 50, 0],
            ),
            (
                "only PreferNoSchedule taints and tolerations count",
                vec![
                    tol("cpu-type", "Equal", "arm64", "NoSchedule"),
                    tol("disk-type", "Equal", "ssd", "NoSchedule"),
                ],
                vec![
                    vec![],
                    vec![taint("cpu-type", "arm64", "NoSchedule")],
                    vec![
                        taint("cpu-type", "arm64", pns),
                        taint("disk-type", "ssd", pns),
                    ],
                ],
                vec![100, 100, 0],
            ),
            (
                "no taints and tolerations",
                vec![],
                vec![vec![], vec![taint("cpu-type", "arm64", pns)]],
                vec![100, 0],
            ),
        ];
        for (name, tols, node_taints, want) in cases {
            let pod = pod(tols);
            let nodes: Vec<Arc<NodeInfo>> = node_taints
                .into_iter()
                .enumerate()
                .map(|(i, t)| Arc::new(node(&format!("n{i}"), t)))
                .collect();
            let snapshot = Snapshot::default();
            let mut state = CycleState::new();
            assert!(
                plugin
                    .as_pre_score()
                    .unwrap()
                    .pre_score(&mut state, &pod, &snapshot, &nodes)
                    .is_success()
            );
            let sp = plugin.as_score().unwrap();
            let mut scores: Vec<NodeScore> = nodes
                .iter()
                .map(|n| {
                    let (score, s) = sp.score(&state, &pod, n);
                    assert!(s.is_success());
                    NodeScore {
                        name: n.name().to_owned(),
                        score,
                    }
                })
                .collect();
            assert!(sp.normalize_score(&state, &pod, &mut scores).is_success());
            let got: Vec<i64> = scores.iter().map(|s| s.score).collect();
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn node_hint_queues_only_when_now_tolerated() {
        let p = pod(vec![tol("foo", "Equal", "bar", "NoSchedule")]).pod;
        let mk = |taints: Vec<Taint>| {
            let mut n = testing::node("n", &[]);
            n.spec = Some(NodeSpec {
                taints: Some(taints),
                ..Default::default()
            });
            n
        };
        let tolerated = mk(vec![taint("foo", "bar", "NoSchedule")]);
        let untolerated = mk(vec![taint("baz", "x", "NoSchedule")]);
        let cases = [
            (
                "added, tolerated",
                EventObject::None,
                EventObject::Node(&tolerated),
                QueueingHint::Queue,
            ),
            (
                "added, untolerated",
                EventObject::None,
                EventObject::Node(&untolerated),
                QueueingHint::QueueSkip,
            ),
            (
                "taint removed",
                EventObject::Node(&untolerated),
                EventObject::Node(&tolerated),
                QueueingHint::Queue,
            ),
            (
                "was tolerated already",
                EventObject::Node(&tolerated),
                EventObject::Node(&tolerated),
                QueueingHint::QueueSkip,
            ),
            (
                "now untolerated",
                EventObject::Node(&tolerated),
                EventObject::Node(&untolerated),
                QueueingHint::QueueSkip,
            ),
        ];
        for (name, old, new, want) in cases {
            assert_eq!(
                is_schedulable_after_node_change(&p, old, new),
                want,
                "{name}"
            );
        }
    }
}
