//! NodeAffinity (upstream `framework/plugins/nodeaffinity`): filters nodes by the pod's
//! `spec.nodeSelector` and required node affinity (and the profile's `addedAffinity`),
//! and scores them by the pod's preferred node affinity terms.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    Node, NodeSelector, NodeSelectorTerm, Pod, PreferredSchedulingTerm,
};
use serde::Deserialize;
use skiff_api::core::scheduling_predicates::{
    ERR_REASON_NODE_AFFINITY, get_required_node_affinity, match_node_selector_terms,
};

use super::helper::{default_normalize_score, parse_args};
use crate::error::Error;
use crate::framework::cycle_state::CycleState;
use crate::framework::interface::{
    ActionType, ClusterEventWithHint, EventObject, EventResource, FilterPlugin, Plugin,
    PreFilterPlugin, PreFilterResult, PreScorePlugin, QueueingHint, ScorePlugin,
};
use crate::framework::runtime::Handle;
use crate::framework::snapshot::Snapshot;
use crate::framework::status::Status;
use crate::framework::types::{MAX_NODE_SCORE, NodeInfo, NodeScore, PodInfo};

/// The plugin's name (upstream `names.NodeAffinity`).
pub const NAME: &str = skiff_api::core::scheduling_predicates::NODE_AFFINITY;
/// Why a node does not match the pod (upstream `ErrReasonPod`).
pub const ERR_REASON_POD: &str = ERR_REASON_NODE_AFFINITY;
/// Why a node does not match `addedAffinity` (upstream `errReasonEnforced`).
pub const ERR_REASON_ENFORCED: &str = "node(s) didn't match scheduler-enforced node affinity";
/// Why no node can match `metadata.name` terms (upstream `errReasonConflict`).
pub const ERR_REASON_CONFLICT: &str = "pod affinity terms conflict";
const PRE_SCORE_STATE_KEY: &str = "PreScoreNodeAffinity";
/// The node field `matchFields` may name.
const OBJECT_NAME_FIELD: &str = "metadata.name";

/// The plugin's args (upstream `NodeAffinityArgs`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeAffinityArgs {
    /// Node affinity ANDed with every pod's: its required terms filter, its preferred
    /// terms add to the score.
    #[serde(default)]
    pub added_affinity: Option<k8s_openapi::api::core::v1::NodeAffinity>,
}

/// Preferred terms with their weights (upstream `nodeaffinity.PreferredSchedulingTerms`):
/// each term as a one-term selector; terms of weight 0 are dropped.
#[derive(Debug, Clone, Default)]
struct PreferredTerms(Vec<(i64, NodeSelector)>);

impl PreferredTerms {
    /// Parses `terms`. Errors: the field errors of a malformed term.
    fn new(terms: &[PreferredSchedulingTerm]) -> Result<Self, String> {
        let mut out = Vec::new();
        let mut errs = Vec::new();
        for t in terms.iter().filter(|t| t.weight != 0) {
            let selector = one_term(&t.preference);
            if let Err(e) = match_node_selector_terms(&Node::default(), &selector) {
                errs.extend(e);
                continue;
            }
            out.push((i64::from(t.weight), selector));
        }
        if errs.is_empty() {
            Ok(Self(out))
        } else {
            Err(skiff_api::field::aggregate(&errs))
        }
    }

    /// The sum of the weights of the terms `node` matches (upstream `Score`).
    fn score(&self, node: &Node) -> i64 {
        self.0
            .iter()
            .filter(|(_, s)| match_node_selector_terms(node, s).unwrap_or(false))
            .map(|(w, _)| *w)
            .sum()
    }
}

fn one_term(term: &NodeSelectorTerm) -> NodeSelector {
    NodeSelector {
        node_selector_terms: vec![term.clone()],
    }
}

/// Checks every term of `selector` on its own, so that one matching term does not hide
/// another's errors.
fn validate_selector(selector: &NodeSelector) -> Result<(), String> {
    let mut errs = Vec::new();
    for t in &selector.node_selector_terms {
        if let Err(e) = match_node_selector_terms(&Node::default(), &one_term(t)) {
            errs.extend(e);
        }
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(skiff_api::field::aggregate(&errs))
    }
}

/// The Filter and Score of node affinity (upstream `NodeAffinity`).
#[derive(Debug, Default)]
pub struct NodeAffinity {
    added_node_selector: Option<NodeSelector>,
    added_pref_sched_terms: Option<PreferredTerms>,
}

/// Builds the plugin from [`NodeAffinityArgs`]. Errors: [`Error::Config`] when the args
/// do not decode or `addedAffinity` has a malformed term.
pub fn new(
    args: Option<&serde_json::Value>,
    _handle: &Arc<Handle>,
) -> Result<Arc<dyn Plugin>, Error> {
    let args: NodeAffinityArgs = parse_args("NodeAffinityArgs", args)?;
    Ok(Arc::new(NodeAffinity::from_args(&args)?))
}

impl NodeAffinity {
    /// The plugin for `args`. Errors: as [`new`].
    pub fn from_args(args: &NodeAffinityArgs) -> Result<Self, Error> {
        let mut pl = Self::default();
        if let Some(added) = args.added_affinity.as_ref() {
            if let Some(ns) = added
                .required_during_scheduling_ignored_during_execution
                .as_ref()
            {
                validate_selector(ns).map_err(|e| {
                    Error::Config(format!(
                        "NodeAffinityArgs: addedAffinity.requiredDuringSchedulingIgnoredDuringExecution: {e}"
                    ))
                })?;
                pl.added_node_selector = Some(ns.clone());
            }
            if let Some(terms) = added
                .preferred_during_scheduling_ignored_during_execution
                .as_ref()
                .filter(|t| !t.is_empty())
            {
                pl.added_pref_sched_terms = Some(PreferredTerms::new(terms).map_err(|e| {
                    Error::Config(format!(
                        "NodeAffinityArgs: addedAffinity.preferredDuringSchedulingIgnoredDuringExecution: {e}"
                    ))
                })?);
            }
        }
        Ok(pl)
    }

    fn matches_added(&self, node: &Node) -> bool {
        self.added_node_selector
            .as_ref()
            .is_none_or(|s| match_node_selector_terms(node, s).unwrap_or(false))
    }

    /// Queues when the node now matches the pod's required affinity and did not before
    /// (upstream `isSchedulableAfterNodeChange`).
    fn is_schedulable_after_node_change(
        &self,
        pod: &Pod,
        old: EventObject<'_>,
        new: EventObject<'_>,
    ) -> QueueingHint {
        let EventObject::Node(modified) = new else {
            return QueueingHint::Queue;
        };
        if !self.matches_added(modified) {
            return QueueingHint::QueueSkip;
        }
        let required = get_required_node_affinity(pod);
        match required.matches(modified) {
            Err(_) => return QueueingHint::Queue,
            Ok(false) => return QueueingHint::QueueSkip,
            Ok(true) => {}
        }
        let EventObject::Node(original) = old else {
            return QueueingHint::Queue;
        };
        match required.matches(original) {
            Ok(true) => QueueingHint::QueueSkip,
            _ => QueueingHint::Queue,
        }
    }
}

fn required_terms(pod: &Pod) -> Option<&Vec<NodeSelectorTerm>> {
    pod.spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| {
            na.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|ns| &ns.node_selector_terms)
}

fn preferred_terms(pod: &Pod) -> Option<&Vec<PreferredSchedulingTerm>> {
    pod.spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| {
            na.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        })
}

/// The pod's preferred terms, parsed at PreScore.
#[derive(Debug, Clone)]
struct PreScoreState {
    preferred: Option<PreferredTerms>,
}

impl Plugin for NodeAffinity {
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
        let added = self.added_node_selector.clone();
        let pl = NodeAffinity {
            added_node_selector: added,
            added_pref_sched_terms: None,
        };
        Some(vec![ClusterEventWithHint::with_hint(
            EventResource::Node,
            ActionType::ADD | ActionType::UPDATE_NODE_LABEL,
            move |pod, old, new| pl.is_schedulable_after_node_change(pod, old, new),
        )])
    }
}

impl PreFilterPlugin for NodeAffinity {
    fn pre_filter(
        &self,
        _state: &mut CycleState,
        pod: &PodInfo,
        _snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        let terms = required_terms(&pod.pod);
        let no_node_selector = pod
            .pod
            .spec
            .as_ref()
            .is_none_or(|s| s.node_selector.is_none());
        if terms.is_none() && self.added_node_selector.is_none() && no_node_selector {
            return (None, Status::skip());
        }
        let Some(terms) = terms.filter(|t| !t.is_empty()) else {
            return (None, Status::success());
        };
        // Terms are ORed: a term without a metadata.name requirement allows every node.
        let mut node_names: BTreeSet<String> = BTreeSet::new();
        for t in terms {
            let mut term_names: Option<BTreeSet<String>> = None;
            for r in t.match_fields.iter().flatten() {
                if r.key == OBJECT_NAME_FIELD && r.operator == "In" {
                    let s: BTreeSet<String> = r.values.iter().flatten().cloned().collect();
                    term_names = Some(match term_names {
                        None => s,
                        Some(prev) => prev.intersection(&s).cloned().collect(),
                    });
                }
            }
            let Some(term_names) = term_names else {
                return (None, Status::success());
            };
            node_names.extend(term_names);
        }
        if node_names.is_empty() {
            return (None, Status::unresolvable(ERR_REASON_CONFLICT));
        }
        (
            Some(PreFilterResult {
                node_names: Some(node_names),
            }),
            Status::success(),
        )
    }
}

impl FilterPlugin for NodeAffinity {
    fn filter(&self, _state: &CycleState, pod: &PodInfo, node_info: &NodeInfo) -> Status {
        let node = node_info.node();
        if !self.matches_added(node) {
            return Status::unresolvable(ERR_REASON_ENFORCED);
        }
        // Parse errors are ignored, as upstream does for backwards compatibility.
        if get_required_node_affinity(&pod.pod)
            .matches(node)
            .unwrap_or(false)
        {
            Status::success()
        } else {
            Status::unresolvable(ERR_REASON_POD)
        }
    }
}

fn pod_preferred(pod: &Pod) -> Result<Option<PreferredTerms>, Status> {
    preferred_terms(pod)
        .map(|t| PreferredTerms::new(t))
        .transpose()
        .map_err(Status::error)
}

impl PreScorePlugin for NodeAffinity {
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
        let preferred = match pod_preferred(&pod.pod) {
            Ok(p) => p,
            Err(s) => return s,
        };
        if preferred.is_none() && self.added_pref_sched_terms.is_none() {
            return Status::skip();
        }
        state.write(PRE_SCORE_STATE_KEY, PreScoreState { preferred });
        Status::success()
    }
}

impl ScorePlugin for NodeAffinity {
    fn score(&self, state: &CycleState, pod: &PodInfo, node_info: &NodeInfo) -> (i64, Status) {
        let node = node_info.node();
        let mut count = self
            .added_pref_sched_terms
            .as_ref()
            .map_or(0, |t| t.score(node));
        match state.read::<PreScoreState>(PRE_SCORE_STATE_KEY) {
            Some(s) => count += s.preferred.as_ref().map_or(0, |t| t.score(node)),
            None => match pod_preferred(&pod.pod) {
                Ok(p) => count += p.as_ref().map_or(0, |t| t.score(node)),
                Err(s) => return (0, s),
            },
        }
        (count, Status::success())
    }

    fn normalize_score(
        &self,
        _state: &CycleState,
        _pod: &PodInfo,
        scores: &mut [NodeScore],
    ) -> Status {
        default_normalize_score(MAX_NODE_SCORE, false, scores)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{Affinity, NodeSelectorRequirement};

    use super::*;
    use crate::framework::plugins::helper::testing;
    use crate::framework::status::Code;

    fn req(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| (*v).to_owned()).collect()),
        }
    }

    fn exprs(r: Vec<NodeSelectorRequirement>) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: Some(r),
            match_fields: None,
        }
    }

    fn fields(r: Vec<NodeSelectorRequirement>) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: None,
            match_fields: Some(r),
        }
    }

    fn name_in(names: &[&str]) -> NodeSelectorRequirement {
        req("metadata.name", "In", names)
    }

    fn node(name: &str, labels: &[(&str, &str)]) -> NodeInfo {
        let mut n = testing::node(name, &[]);
        n.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        NodeInfo::new(n)
    }

    fn pod(selector: &[(&str, &str)], required: Option<Vec<NodeSelectorTerm>>) -> PodInfo {
        let mut p = testing::pod("p", &[]);
        if let Some(spec) = p.spec.as_mut() {
            if !selector.is_empty() {
                spec.node_selector = Some(
                    selector
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect(),
                );
            }
            if let Some(terms) = required {
                spec.affinity = Some(Affinity {
                    node_affinity: Some(k8s_openapi::api::core::v1::NodeAffinity {
                        required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                            node_selector_terms: terms,
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                });
            }
        }
        PodInfo::new(p)
    }

    fn preferred_pod(terms: Vec<(i32, NodeSelectorTerm)>) -> PodInfo {
        let mut p = testing::pod("p", &[]);
        if let Some(spec) = p.spec.as_mut() {
            spec.affinity = Some(Affinity {
                node_affinity: Some(k8s_openapi::api::core::v1::NodeAffinity {
                    preferred_during_scheduling_ignored_during_execution: Some(
                        terms
                            .into_iter()
                            .map(|(weight, preference)| PreferredSchedulingTerm {
                                weight,
                                preference,
                            })
                            .collect(),
                    ),
                    ..Default::default()
                }),
                ..Default::default()
            });
        }
        PodInfo::new(p)
    }

    fn plugin(args: serde_json::Value) -> Arc<dyn Plugin> {
        new(Some(&args), &testing::handle()).unwrap()
    }

    /// Runs PreFilter then Filter as the framework does: PreFilter's rejection or Skip
    /// decides; the node restriction is returned.
    fn run_filter(
        pl: &dyn Plugin,
        pod: &PodInfo,
        node: &NodeInfo,
    ) -> (Option<BTreeSet<String>>, Status) {
        let mut state = CycleState::new();
        let (result, s) =
            pl.as_pre_filter()
                .unwrap()
                .pre_filter(&mut state, pod, &Snapshot::default());
        let names = result.and_then(|r| r.node_names);
        if s.is_skip() {
            return (names, Status::success());
        }
        if !s.is_success() {
            return (names, s);
        }
        (names, pl.as_filter().unwrap().filter(&state, pod, node))
    }

    // Upstream node_affinity_test.go, TestNodeAffinity.
    #[test]
    fn filter_table() {
        let none = serde_json::json!({});
        let added = serde_json::json!({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["foo"]}]}]}}});
        let names = |n: &[&str]| Some(n.iter().map(|s| (*s).to_owned()).collect::<BTreeSet<_>>());
        let gpu = [("GPU", "NVIDIA-GRID-K1")];
        type Case<'a> = (
            &'a str,
            PodInfo,
            NodeInfo,
            &'a serde_json::Value,
            Option<BTreeSet<String>>,
            Option<&'a str>,
        );
        let cases: Vec<Case<'_>> = vec![
            (
                "missing labels",
                pod(&[("foo", "bar")], None),
                node("n", &[]),
                &none,
                None,
                Some(ERR_REASON_POD),
            ),
            (
                "no selector",
                pod(&[], None),
                node("n", &[("foo", "bar")]),
                &none,
                None,
                None,
            ),
            (
                "same labels",
                pod(&[("foo", "bar")], None),
                node("n", &[("foo", "bar")]),
                &none,
                None,
                None,
            ),
            (
                "node labels are superset",
                pod(&[("foo", "bar")], None),
                node("n", &[("foo", "bar"), ("baz", "blah")]),
                &none,
                None,
                None,
            ),
            (
                "node labels are subset",
                pod(&[("foo", "bar"), ("baz", "blah")], None),
                node("n", &[("foo", "bar")]),
                &none,
                None,
                Some(ERR_REASON_POD),
            ),
            (
                "In matches",
                pod(
                    &[],
                    Some(vec![exprs(vec![req("foo", "In", &["bar", "value2"])])]),
                ),
                node("n", &[("foo", "bar")]),
                &none,
                None,
                None,
            ),
            (
                "Gt matches",
                pod(
                    &[],
                    Some(vec![exprs(vec![req("kernel-version", "Gt", &["0204"])])]),
                ),
                node("n", &[("kernel-version", "0206")]),
                &none,
                None,
                None,
            ),
            (
                "NotIn matches",
                pod(
                    &[],
                    Some(vec![exprs(vec![req(
                        "mem-type",
                        "NotIn",
                        &["DDR", "DDR2"],
                    )])]),
                ),
                node("n", &[("mem-type", "DDR3")]),
                &none,
                None,
                None,
            ),
            (
                "Exists matches",
                pod(&[], Some(vec![exprs(vec![req("GPU", "Exists", &[])])])),
                node("n", &gpu),
                &none,
                None,
                None,
            ),
            (
                "In does not match",
                pod(
                    &[],
                    Some(vec![exprs(vec![req("foo", "In", &["value1", "value2"])])]),
                ),
                node("n", &[("foo", "bar")]),
                &none,
                None,
                Some(ERR_REASON_POD),
            ),
            (
                "empty terms",
                pod(&[], Some(vec![])),
                node("n", &[("foo", "bar")]),
                &none,
                None,
                Some(ERR_REASON_POD),
            ),
            (
                "empty matchExpressions",
                pod(&[], Some(vec![exprs(vec![])])),
                node("n", &[("foo", "bar")]),
                &none,
                None,
                Some(ERR_REASON_POD),
            ),
            (
                "ANDed expressions match",
                pod(
                    &[],
                    Some(vec![exprs(vec![
                        req("GPU", "Exists", &[]),
                        req("GPU", "NotIn", &["AMD", "INTER"]),
                    ])]),
                ),
                node("n", &gpu),
                &none,
                None,
                None,
            ),
            (
                "ANDed expressions do not match",
                pod(
                    &[],
                    Some(vec![exprs(vec![
                        req("GPU", "Exists", &[]),
                        req("GPU", "In", &["AMD", "INTER"]),
                    ])]),
                ),
                node("n", &gpu),
                &none,
                None,
                Some(ERR_REASON_POD),
            ),
            (
                "ORed terms match",
                pod(
                    &[],
                    Some(vec![
                        exprs(vec![req("foo", "In", &["bar", "value2"])]),
                        exprs(vec![req("diffkey", "In", &["wrong", "value2"])]),
                    ]),
                ),
                node("n", &[("foo", "bar")]),
                &none,
                None,
                None,
            ),
            (
                "affinity and nodeSelector both satisfied",
                pod(
                    &[("foo", "bar")],
                    Some(vec![exprs(vec![req("foo", "Exists", &[])])]),
                ),
                node("n", &[("foo", "bar")]),
                &none,
                None,
                None,
            ),
            (
                "nodeSelector not satisfied",
                pod(
                    &[("foo", "bar")],
                    Some(vec![exprs(vec![req("foo", "Exists", &[])])]),
                ),
                node("n", &[("foo", "barrrrrr")]),
                &none,
                None,
                Some(ERR_REASON_POD),
            ),
            (
                "matchFields In matches",
                pod(&[], Some(vec![fields(vec![name_in(&["node_1"])])])),
                node("node_1", &[]),
                &none,
                names(&["node_1"]),
                None,
            ),
            (
                "matchFields In does not match",
                pod(&[], Some(vec![fields(vec![name_in(&["node_1"])])])),
                node("node_2", &[]),
                &none,
                names(&["node_1"]),
                Some(ERR_REASON_POD),
            ),
            (
                "two terms: fields miss, expressions match",
                pod(
                    &[],
                    Some(vec![
                        fields(vec![name_in(&["node_1"])]),
                        exprs(vec![req("foo", "In", &["bar"])]),
                    ]),
                ),
                node("node_2", &[("foo", "bar")]),
                &none,
                None,
                None,
            ),
            (
                "one term: fields miss, expressions match",
                pod(
                    &[],
                    Some(vec![NodeSelectorTerm {
                        match_fields: Some(vec![name_in(&["node_1"])]),
                        match_expressions: Some(vec![req("foo", "In", &["bar"])]),
                    }]),
                ),
                node("node_2", &[("foo", "bar")]),
                &none,
                names(&["node_1"]),
                Some(ERR_REASON_POD),
            ),
            (
                "one term: both match",
                pod(
                    &[],
                    Some(vec![NodeSelectorTerm {
                        match_fields: Some(vec![name_in(&["node_1"])]),
                        match_expressions: Some(vec![req("foo", "In", &["bar"])]),
                    }]),
                ),
                node("node_1", &[("foo", "bar")]),
                &none,
                names(&["node_1"]),
                None,
            ),
            (
                "two terms: neither matches",
                pod(
                    &[],
                    Some(vec![
                        fields(vec![name_in(&["node_1"])]),
                        exprs(vec![req("foo", "In", &["not-match-to-bar"])]),
                    ]),
                ),
                node("node_2", &[("foo", "bar")]),
                &none,
                None,
                Some(ERR_REASON_POD),
            ),
            (
                "two terms of node names",
                pod(
                    &[],
                    Some(vec![
                        fields(vec![name_in(&["node_1"])]),
                        fields(vec![name_in(&["node_2"])]),
                    ]),
                ),
                node("node_2", &[]),
                &none,
                names(&["node_1", "node_2"]),
                None,
            ),
            (
                "conflicting name requirements",
                pod(
                    &[],
                    Some(vec![fields(vec![
                        name_in(&["node_1"]),
                        name_in(&["node_2"]),
                    ])]),
                ),
                node("node_2", &[]),
                &none,
                None,
                Some(ERR_REASON_CONFLICT),
            ),
            (
                "matches added affinity and the pod's",
                pod(&[], Some(vec![exprs(vec![req("foo", "In", &["bar"])])])),
                node("n", &[("zone", "foo"), ("foo", "bar")]),
                &added,
                None,
                None,
            ),
            (
                "matches added affinity, not the pod's",
                pod(&[], Some(vec![exprs(vec![req("foo", "In", &["bar"])])])),
                node("n", &[("zone", "foo")]),
                &added,
                None,
                Some(ERR_REASON_POD),
            ),
            (
                "does not match added affinity",
                pod(&[], None),
                node("n", &[("zone", "bar")]),
                &added,
                None,
                Some(ERR_REASON_ENFORCED),
            ),
        ];
        for (name, pod, node, args, want_names, want) in cases {
            let pl = plugin(args.clone());
            let (got_names, s) = run_filter(pl.as_ref(), &pod, &node);
            assert_eq!(got_names, want_names, "{name}");
            match want {
                Some(reason) => {
                    assert_eq!(s.code(), Code::UnschedulableAndUnresolvable, "{name}");
                    assert_eq!(s.message(), reason, "{name}");
                }
                None => assert!(s.is_success(), "{name}: {s}"),
            }
        }
    }

    #[test]
    fn pre_filter_skips_without_constraints() {
        let pl = plugin(serde_json::json!({}));
        let mut state = CycleState::new();
        let (_, s) = pl.as_pre_filter().unwrap().pre_filter(
            &mut state,
            &pod(&[], None),
            &Snapshot::default(),
        );
        assert!(s.is_skip());
    }

    // Upstream node_affinity_test.go, TestNodeAffinityPriority.
    #[test]
    fn score_table() {
        let label1 = [("foo", "bar")];
        let label2 = [("key", "value")];
        let label3 = [("az", "az1")];
        let label4 = [("abc", "az11"), ("def", "az22")];
        let label5 = [("foo", "bar"), ("key", "value"), ("az", "az1")];
        let affinity1 = || vec![(2, exprs(vec![req("foo", "In", &["bar"])]))];
        let affinity2 = || {
            vec![
                (2, exprs(vec![req("foo", "In", &["bar"])])),
                (4, exprs(vec![req("key", "In", &["value"])])),
                (
                    5,
                    exprs(vec![
                        req("foo", "In", &["bar"]),
                        req("key", "In", &["value"]),
                        req("az", "In", &["az1"]),
                    ]),
                ),
            ]
        };
        let none = serde_json::json!({});
        let added = |w: i32, key: &str, value: &str| {
            serde_json::json!({"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": w, "preference": {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}}]}})
        };
        type Case<'a> = (
            &'a str,
            PodInfo,
            Vec<(&'a str, &'a [(&'a str, &'a str)])>,
            serde_json::Value,
            Vec<i64>,
        );
        let cases: Vec<Case<'_>> = vec![
            (
                "no affinity",
                pod(&[], None),
                vec![("m1", &label1), ("m2", &label2), ("m3", &label3)],
                none.clone(),
                vec![0, 0, 0],
            ),
            (
                "no node matches",
                preferred_pod(affinity1()),
                vec![("m1", &label4), ("m2", &label2), ("m3", &label3)],
                none.clone(),
                vec![0, 0, 0],
            ),
            (
                "only m1 matches",
                preferred_pod(affinity1()),
                vec![("m1", &label1), ("m2", &label2), ("m3", &label3)],
                none.clone(),
                vec![100, 0, 0],
            ),
            (
                "different priorities",
                preferred_pod(affinity2()),
                vec![("m1", &label1), ("m5", &label5), ("m2", &label2)],
                none.clone(),
                vec![18, 100, 36],
            ),
            (
                "added affinity",
                pod(&[], None),
                vec![("m1", &label1), ("m2", &label2)],
                added(2, "foo", "bar"),
                vec![100, 0],
            ),
            (
                "added affinity and the pod's",
                preferred_pod(affinity1()),
                vec![("m1", &label1), ("m2", &label2), ("m5", &label5)],
                added(3, "key", "value"),
                vec![40, 60, 100],
            ),
        ];
        for (name, pod, nodes, args, want) in cases {
            let pl = plugin(args);
            let nodes: Vec<Arc<NodeInfo>> = nodes
                .into_iter()
                .map(|(n, l)| Arc::new(node(n, l)))
                .collect();
            let mut state = CycleState::new();
            let s = pl.as_pre_score().unwrap().pre_score(
                &mut state,
                &pod,
                &Snapshot::default(),
                &nodes,
            );
            let mut scores: Vec<NodeScore> = nodes
                .iter()
                .map(|n| NodeScore {
                    name: n.name().to_owned(),
                    score: 0,
                })
                .collect();
            if !s.is_skip() {
                assert!(s.is_success(), "{name}: {s}");
                let sp = pl.as_score().unwrap();
                for (score, n) in scores.iter_mut().zip(&nodes) {
                    let (v, s) = sp.score(&state, &pod, n);
                    assert!(s.is_success(), "{name}: {s}");
                    score.score = v;
                }
                assert!(sp.normalize_score(&state, &pod, &mut scores).is_success());
            }
            let got: Vec<i64> = scores.iter().map(|s| s.score).collect();
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn bad_args_and_bad_preferred_terms() {
        let bad = serde_json::json!({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "Bogus", "values": ["foo"]}]}]}}});
        let Err(err) = new(Some(&bad), &testing::handle()) else {
            panic!("bad addedAffinity accepted");
        };
        assert!(matches!(err, Error::Config(_)), "{err}");
        assert!(
            err.to_string()
                .contains("addedAffinity.requiredDuringSchedulingIgnoredDuringExecution"),
            "{err}"
        );
        assert!(matches!(
            new(
                Some(&serde_json::json!({"addedAffinity": 3})),
                &testing::handle()
            ),
            Err(Error::Config(_))
        ));
        let pl = plugin(serde_json::json!({}));
        let p = preferred_pod(vec![(1, exprs(vec![req("foo", "Gt", &["x"])]))]);
        let nodes = vec![Arc::new(node("n", &[]))];
        let s = pl.as_pre_score().unwrap().pre_score(
            &mut CycleState::new(),
            &p,
            &Snapshot::default(),
            &nodes,
        );
        assert_eq!(s.code(), Code::Error);
    }

    // Upstream TestNodeAffinity_isSchedulableAfterNodeChange.
    #[test]
    fn node_change_hint() {
        let pl = NodeAffinity::default();
        let p = pod(&[("foo", "bar")], None).pod;
        let n = |labels: &[(&str, &str)]| {
            let mut n = testing::node("n", &[]);
            n.metadata.labels = Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            );
            n
        };
        let (matching, other) = (n(&[("foo", "bar")]), n(&[("foo", "baz")]));
        let cases = [
            (
                "added, matches",
                EventObject::None,
                EventObject::Node(&matching),
                QueueingHint::Queue,
            ),
            (
                "added, does not match",
                EventObject::None,
                EventObject::Node(&other),
                QueueingHint::QueueSkip,
            ),
            (
                "label now matches",
                EventObject::Node(&other),
                EventObject::Node(&matching),
                QueueingHint::Queue,
            ),
            (
                "matched already",
                EventObject::Node(&matching),
                EventObject::Node(&matching),
                QueueingHint::QueueSkip,
            ),
            (
                "no longer matches",
                EventObject::Node(&matching),
                EventObject::Node(&other),
                QueueingHint::QueueSkip,
            ),
        ];
        for (name, old, new, want) in cases {
            assert_eq!(
                pl.is_schedulable_after_node_change(&p, old, new),
                want,
                "{name}"
            );
        }
        let enforced = NodeAffinity::from_args(
            &serde_json::from_value(serde_json::json!({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}))
            .unwrap(),
        )
        .unwrap();
        assert_eq!(
            enforced.is_schedulable_after_node_change(
                &p,
                EventObject::None,
                EventObject::Node(&matching)
            ),
            QueueingHint::QueueSkip
        );
    }
}
