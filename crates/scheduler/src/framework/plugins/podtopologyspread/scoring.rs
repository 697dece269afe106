//! PodTopologySpread's PreScore, Score and NormalizeScore (upstream
//! `podtopologyspread/scoring.go`): the `ScheduleAnyway` constraints.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use skiff_api::core::scheduling_predicates::node_affinity::get_required_node_affinity;

use super::PodTopologySpread;
use super::common::{
    Constraint, LABEL_HOSTNAME, SCHEDULE_ANYWAY, count_pods_match_selector, node_label,
    node_labels_match_spread_constraints,
};
use crate::framework::cycle_state::CycleState;
use crate::framework::interface::{PreScorePlugin, ScorePlugin};
use crate::framework::snapshot::Snapshot;
use crate::framework::status::Status;
use crate::framework::types::{MAX_NODE_SCORE, NodeInfo, NodeScore, PodInfo};

/// The cycle-state key of the PreScore results.
const PRE_SCORE_STATE_KEY: &str = "PreScorePodTopologySpread";

/// What PreScore computes for Score (upstream `preScoreState`).
#[derive(Debug, Clone, Default)]
pub(crate) struct PreScoreState {
    constraints: Vec<Constraint>,
    /// Nodes lacking a topology key (scored 0).
    ignored_nodes: HashSet<String>,
    /// Per constraint: matching pods per domain value of the candidate nodes (not for
    /// the hostname key, counted in Score).
    topology_value_to_pod_counts: Vec<HashMap<String, i64>>,
    /// Per constraint: `ln(domains + 2)`.
    topology_normalizing_weight: Vec<f64>,
}

/// `ln(size + 2)` (upstream `topologyNormalizingWeight`).
fn topology_normalizing_weight(size: usize) -> f64 {
    (size as f64 + 2.0).ln()
}

/// `count * weight + (maxSkew - 1)` (upstream `scoreForCount`).
fn score_for_count(count: i64, max_skew: i32, weight: f64) -> f64 {
    count as f64 * weight + f64::from(max_skew - 1)
}

fn missing_state() -> Status {
    Status::error(format!(
        "error reading {PRE_SCORE_STATE_KEY:?} from cycleState: not found"
    ))
}

impl PodTopologySpread {
    /// Upstream `initPreScoreState`.
    fn init_pre_score_state(
        &self,
        pod: &PodInfo,
        filtered: &[Arc<NodeInfo>],
        require_all_topologies: bool,
    ) -> Result<PreScoreState, String> {
        let mut s = PreScoreState {
            constraints: self.inner.constraints(&pod.pod, SCHEDULE_ANYWAY)?,
            ..Default::default()
        };
        if s.constraints.is_empty() {
            return Ok(s);
        }
        s.topology_value_to_pod_counts = vec![HashMap::new(); s.constraints.len()];
        let mut topo_size = vec![0_usize; s.constraints.len()];
        for n in filtered {
            let labels = n.node().metadata.labels.as_ref();
            if require_all_topologies
                && !node_labels_match_spread_constraints(labels, &s.constraints)
            {
                s.ignored_nodes.insert(n.name().to_owned());
                continue;
            }
            for (i, c) in s.constraints.iter().enumerate() {
                if c.topology_key == LABEL_HOSTNAME {
                    continue;
                }
                let value = node_label(n.node(), &c.topology_key)
                    .cloned()
                    .unwrap_or_default();
                if let (Some(m), Some(size)) = (
                    s.topology_value_to_pod_counts.get_mut(i),
                    topo_size.get_mut(i),
                ) && let std::collections::hash_map::Entry::Vacant(e) = m.entry(value)
                {
                    e.insert(0);
                    *size += 1;
                }
            }
        }
        s.topology_normalizing_weight = s
            .constraints
            .iter()
            .zip(&topo_size)
            .map(|(c, size)| {
                let size = if c.topology_key == LABEL_HOSTNAME {
                    filtered.len().saturating_sub(s.ignored_nodes.len())
                } else {
                    *size
                };
                topology_normalizing_weight(size)
            })
            .collect();
        Ok(s)
    }
}

impl PreScorePlugin for PodTopologySpread {
    /// Counts matching pods per domain of the candidate nodes over all nodes; Skip when
    /// the pod has no `ScheduleAnyway` constraint.
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        nodes: &[Arc<NodeInfo>],
    ) -> Status {
        let all_nodes = snapshot.list();
        if all_nodes.is_empty() {
            return Status::skip();
        }
        let own = pod
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.topology_spread_constraints.as_ref())
            .is_some_and(|c| !c.is_empty());
        let require_all_topologies = own || !self.inner.system_defaulted;
        let mut s = match self.init_pre_score_state(pod, nodes, require_all_topologies) {
            Ok(s) => s,
            Err(e) => return Status::error(format!("calculating preScoreState: {e}")),
        };
        if s.constraints.is_empty() {
            return Status::skip();
        }
        let required = get_required_node_affinity(&pod.pod);
        let ns = pod.pod.metadata.namespace.as_deref().unwrap_or_default();
        for node_info in all_nodes {
            let node = node_info.node();
            if require_all_topologies
                && !node_labels_match_spread_constraints(
                    node.metadata.labels.as_ref(),
                    &s.constraints,
                )
            {
                continue;
            }
            for (i, c) in s.constraints.iter().enumerate() {
                if !c.match_node_inclusion_policies(&pod.pod, node, &required) {
                    continue;
                }
                let value = node_label(node, &c.topology_key)
                    .cloned()
                    .unwrap_or_default();
                let Some(count) = s
                    .topology_value_to_pod_counts
                    .get_mut(i)
                    .and_then(|m| m.get_mut(&value))
                else {
                    continue;
                };
                *count += count_pods_match_selector(node_info.pods(), &c.selector, ns);
            }
        }
        state.write(PRE_SCORE_STATE_KEY, s);
        Status::success()
    }
}

impl ScorePlugin for PodTopologySpread {
    /// `round(sum over constraints of count * weight + maxSkew - 1)`; 0 for ignored nodes.
    fn score(&self, state: &CycleState, pod: &PodInfo, node_info: &NodeInfo) -> (i64, Status) {
        let Some(s) = state.read::<PreScoreState>(PRE_SCORE_STATE_KEY) else {
            return (0, missing_state());
        };
        if s.ignored_nodes.contains(node_info.name()) {
            return (0, Status::success());
        }
        let ns = pod.pod.metadata.namespace.as_deref().unwrap_or_default();
        let mut score = 0.0;
        for (i, c) in s.constraints.iter().enumerate() {
            let Some(value) = node_label(node_info.node(), &c.topology_key) else {
                continue;
            };
            let count = if c.topology_key == LABEL_HOSTNAME {
                count_pods_match_selector(node_info.pods(), &c.selector, ns)
            } else {
                s.topology_value_to_pod_counts
                    .get(i)
                    .and_then(|m| m.get(value))
                    .copied()
                    .unwrap_or(0)
            };
            let weight = s.topology_normalizing_weight.get(i).copied().unwrap_or(0.0);
            score += score_for_count(count, c.max_skew, weight);
        }
        (score.round() as i64, Status::success())
    }

    /// Reversed: `100 * (max + min - score) / max` (all 100 when max is 0); ignored nodes
    /// get 0.
    fn normalize_score(&self, state: &CycleState, _: &PodInfo, scores: &mut [NodeScore]) -> Status {
        let Some(s) = state.read::<PreScoreState>(PRE_SCORE_STATE_KEY) else {
            return missing_state();
        };
        let mut min = i64::MAX;
        let mut max = 0_i64;
        for ns in scores.iter().filter(|n| !s.ignored_nodes.contains(&n.name)) {
            min = min.min(ns.score);
            max = max.max(ns.score);
        }
        for ns in scores.iter_mut() {
            if s.ignored_nodes.contains(&ns.name) {
                ns.score = 0;
            } else if max == 0 {
                ns.score = MAX_NODE_SCORE;
            } else {
                ns.score = MAX_NODE_SCORE * (max + min - ns.score) / max;
            }
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetSpec};
    use k8s_openapi::api::core::v1::{Node, Pod};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
        LabelSelector, ObjectMeta, OwnerReference,
    };

    use super::super::testutil::{constraint, with_constraints};
    use super::super::{PodTopologySpread, PodTopologySpreadArgs};
    use super::*;
    use crate::framework::plugins::interpodaffinity::testutil::{
        labels, node, node_infos, on, pod,
    };
    use crate::informers::Listers;

    /// PreScore, Score and NormalizeScore over every node; None when PreScore skips.
    fn run(pl: &PodTopologySpread, p: &Pod, nodes: &[Node], pods: &[Pod]) -> Option<Vec<i64>> {
        let snapshot = Snapshot::from_node_infos(node_infos(nodes, pods));
        let info = PodInfo::new(p.clone());
        let mut state = CycleState::new();
        let s = pl.pre_score(&mut state, &info, &snapshot, snapshot.list());
        if s.is_skip() {
            return None;
        }
        assert!(s.is_success(), "{s}");
        let mut scores: Vec<NodeScore> = snapshot
            .list()
            .iter()
            .map(|n| NodeScore {
                name: n.name().to_owned(),
                score: pl.score(&state, &info, n).0,
            })
            .collect();
        assert!(pl.normalize_score(&state, &info, &mut scores).is_success());
        Some(scores.into_iter().map(|s| s.score).collect())
    }

    fn plugin() -> PodTopologySpread {
        PodTopologySpread::with_args(
            PodTopologySpreadArgs::default(),
            Arc::new(Listers::default()),
        )
    }

    fn foo(name: &str, node: &str) -> Pod {
        on(pod(name, "default", &[("foo", "")]), node)
    }

    fn soft(key: &str, skew: i32) -> k8s_openapi::api::core::v1::TopologySpreadConstraint {
        constraint(key, skew, SCHEDULE_ANYWAY)
    }

    fn host(name: &str, zone: Option<&str>) -> Node {
        match zone {
            Some(z) => node(name, &[(LABEL_HOSTNAME, name), ("zone", z)]),
            None => node(name, &[(LABEL_HOSTNAME, name)]),
        }
    }

    /// A `ScheduleAnyway` constraint over pods with label `sel` (None: a null selector).
    fn soft_on(
        key: &str,
        skew: i32,
        sel: Option<&str>,
    ) -> k8s_openapi::api::core::v1::TopologySpreadConstraint {
        let mut c = soft(key, skew);
        c.label_selector = sel.map(|k| LabelSelector {
            match_expressions: Some(vec![
                k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement {
                    key: k.into(),
                    operator: "Exists".into(),
                    values: None,
                },
            ]),
            ..Default::default()
        });
        c
    }

    /// A pod `default/<name>` on `node` with the label keys `keys` (empty values).
    fn lp(name: &str, node: &str, keys: &[&str]) -> Pod {
        let l: Vec<(&str, &str)> = keys.iter().map(|k| (*k, "")).collect();
        on(pod(name, "default", &l), node)
    }

    /// `n` pods `<prefix>1..=n` with label foo on `node`.
    fn many(prefix: &str, node: &str, n: usize) -> Vec<Pod> {
        (1..=n)
            .map(|i| lp(&format!("{prefix}{i}"), node, &["foo"]))
            .collect()
    }

    fn hosts(names: &[&str]) -> Vec<Node> {
        names.iter().map(|n| host(n, None)).collect()
    }

    fn zoned(pairs: &[(&str, &str)]) -> Vec<Node> {
        pairs.iter().map(|(n, z)| host(n, Some(z))).collect()
    }

    /// PreScore over `nodes` only, with `failed` nodes also in the snapshot.
    fn run_with_failed(
        pl: &PodTopologySpread,
        p: &Pod,
        nodes: &[Node],
        failed: &[Node],
        pods: &[Pod],
    ) -> Vec<i64> {
        let all: Vec<Node> = nodes.iter().chain(failed).cloned().collect();
        let snapshot = Snapshot::from_node_infos(node_infos(&all, pods));
        let info = PodInfo::new(p.clone());
        let mut state = CycleState::new();
        let filtered = snapshot.list().get(..nodes.len()).unwrap_or_default();
        let s = pl.pre_score(&mut state, &info, &snapshot, filtered);
        assert!(s.is_success(), "{s}");
        let mut scores: Vec<NodeScore> = filtered
            .iter()
            .map(|n| {
                let (score, st) = pl.score(&state, &info, n);
                assert!(st.is_success(), "{st}");
                NodeScore {
                    name: n.name().to_owned(),
                    score,
                }
            })
            .collect();
        assert!(pl.normalize_score(&state, &info, &mut scores).is_success());
        scores.into_iter().map(|s| s.score).collect()
    }

    /// Name, incoming pod, candidate nodes, failed nodes, existing pods, normalized scores.
    type ScoreCase = (&'static str, Pod, Vec<Node>, Vec<Node>, Vec<Pod>, Vec<i64>);

    // Upstream TestPodTopologySpreadScore (its table, with exact scores).
    #[test]
    fn upstream_score_table() {
        let p = |cs| with_constraints(pod("p", "default", &[("foo", "")]), cs);
        let pfb = |cs| with_constraints(pod("p", "default", &[("foo", ""), ("bar", "")]), cs);
        let h = LABEL_HOSTNAME;
        let abcd = || hosts(&["node-a", "node-b", "node-c", "node-d"]);
        let spread_2_1_0_3 = || {
            [
                many("p-a", "node-a", 2),
                many("p-b", "node-b", 1),
                many("p-d", "node-d", 3),
            ]
            .concat()
        };
        let spread_4_3_2_1 = || {
            [
                many("p-a", "node-a", 4),
                many("p-b", "node-b", 3),
                many("p-c", "node-c", 2),
                many("p-d", "node-d", 1),
            ]
            .concat()
        };
        let spread_4_2_1_3 = || {
            [
                many("p-a", "node-a", 4),
                many("p-b", "node-b", 2),
                many("p-x", "node-x", 1),
                many("p-y", "node-y", 3),
            ]
            .concat()
        };
        let mut other_ns = lp("p-a1", "node-a", &["foo"]);
        other_ns.metadata.namespace = Some("ns1".into());
        let mut terminating = lp("p-a", "node-a", &["foo"]);
        terminating.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default()),
        );
        let mut min_domains = soft_on("node", 2, Some("foo"));
        min_domains.min_domains = Some(10);
        let node_named = |n: &str| node(n, &[("node", n)]);
        let cases: Vec<ScoreCase> = vec![
            (
                "one constraint on node, no existing pods",
                p(vec![soft_on(h, 1, Some("foo"))]),
                hosts(&["node-a", "node-b"]),
                vec![],
                vec![],
                vec![100, 100],
            ),
            (
                "one constraint on node, only one node is candidate",
                p(vec![soft_on(h, 1, Some("foo"))]),
                hosts(&["node-a"]),
                hosts(&["node-b"]),
                [many("p-a", "node-a", 2), many("p-b", "node-b", 1)].concat(),
                vec![100],
            ),
            (
                "one constraint on node, all nodes have the same number of matching pods",
                p(vec![soft_on(h, 1, Some("foo"))]),
                hosts(&["node-a", "node-b"]),
                vec![],
                [many("p-a", "node-a", 1), many("p-b", "node-b", 1)].concat(),
                vec![100, 100],
            ),
            (
                "one constraint on node, all 4 nodes are candidates",
                p(vec![soft_on(h, 1, Some("foo"))]),
                abcd(),
                vec![],
                spread_2_1_0_3(),
                vec![20, 60, 100, 0],
            ),
            (
                "one constraint on node, null selector",
                p(vec![soft_on(h, 1, None)]),
                abcd(),
                vec![],
                spread_2_1_0_3(),
                vec![100, 100, 100, 100],
            ),
            (
                "one constraint on node, all 4 nodes are candidates, maxSkew=2",
                p(vec![soft_on(h, 2, Some("foo"))]),
                abcd(),
                vec![],
                spread_2_1_0_3(),
                vec![33, 66, 100, 16],
            ),
            (
                "one constraint on node, all 4 nodes are candidates, maxSkew=3",
                p(vec![soft_on(h, 3, Some("foo"))]),
                abcd(),
                vec![],
                spread_4_3_2_1(),
                vec![44, 66, 77, 100],
            ),
            (
                "one constraint on node, 3 out of 4 nodes are candidates",
                p(vec![soft_on(h, 1, Some("foo"))]),
                hosts(&["node-a", "node-b", "node-x"]),
                hosts(&["node-y"]),
                spread_4_2_1_3(),
                vec![33, 83, 100],
            ),
            (
                "one constraint on node, 3 out of 4 nodes are candidates, one node doesn't match topology key",
                p(vec![soft_on(h, 1, Some("foo"))]),
                vec![
                    host("node-a", None),
                    node("node-b", &[("n", "node-b")]),
                    host("node-x", None),
                ],
                hosts(&["node-y"]),
                spread_4_2_1_3(),
                vec![16, 0, 100],
            ),
            (
                "one constraint on zone, 3 out of 4 nodes are candidates",
                p(vec![soft_on("zone", 1, Some("foo"))]),
                zoned(&[
                    ("node-a", "zone1"),
                    ("node-b", "zone1"),
                    ("node-x", "zone2"),
                ]),
                zoned(&[("node-y", "zone2")]),
                spread_4_2_1_3(),
                vec![75, 75, 100],
            ),
            (
                "two Constraints on zone and node, 2 out of 4 nodes are candidates",
                p(vec![
                    soft_on("zone", 1, Some("foo")),
                    soft_on(h, 1, Some("foo")),
                ]),
                zoned(&[("node-a", "zone1"), ("node-x", "zone2")]),
                zoned(&[("node-b", "zone1"), ("node-y", "zone2")]),
                [
                    many("p-a", "node-a", 2),
                    many("p-b", "node-b", 1),
                    many("p-x", "node-x", 2),
                    many("p-y", "node-y", 4),
                ]
                .concat(),
                vec![100, 63],
            ),
            (
                "two Constraints on zone, 2 out of 4 nodes are candidates",
                pfb(vec![
                    soft_on("zone", 1, Some("foo")),
                    soft_on("zone", 1, Some("bar")),
                ]),
                vec![
                    node("node-a", &[("zone", "zone1")]),
                    node("node-x", &[("zone", "zone2")]),
                ],
                vec![
                    node("node-b", &[("zone", "zone1")]),
                    node("node-y", &[("zone", "zone2")]),
                ],
                vec![
                    lp("p-a1", "node-a", &["foo", "bar"]),
                    lp("p-a2", "node-a", &["foo"]),
                    lp("p-b1", "node-b", &["foo", "bar"]),
                    lp("p-y1", "node-y", &["foo"]),
                    lp("p-y2", "node-y", &["foo", "bar"]),
                    lp("p-y3", "node-y", &["foo"]),
                ],
                vec![85, 100],
            ),
            (
                "two Constraints on zone and node, with different labelSelectors",
                pfb(vec![
                    soft_on("zone", 1, Some("foo")),
                    soft_on(h, 1, Some("bar")),
                ]),
                zoned(&[
                    ("node-a", "zone1"),
                    ("node-b", "zone1"),
                    ("node-x", "zone2"),
                    ("node-y", "zone2"),
                ]),
                vec![],
                vec![
                    lp("p-a1", "node-a", &["foo"]),
                    lp("p-b1", "node-b", &["foo", "bar"]),
                    lp("p-y1", "node-y", &["foo"]),
                    lp("p-y2", "node-y", &["bar"]),
                ],
                vec![60, 20, 100, 60],
            ),
            (
                "two Constraints on zone and node, with different labelSelectors, some nodes have 0 pods",
                pfb(vec![
                    soft_on("zone", 1, Some("foo")),
                    soft_on(h, 1, Some("bar")),
                ]),
                zoned(&[
                    ("node-a", "zone1"),
                    ("node-b", "zone1"),
                    ("node-x", "zone2"),
                    ("node-y", "zone2"),
                ]),
                vec![],
                vec![
                    lp("p-b1", "node-b", &["bar"]),
                    lp("p-x1", "node-x", &["foo"]),
                    lp("p-y1", "node-y", &["foo", "bar"]),
                ],
                vec![100, 60, 40, 0],
            ),
            (
                "two Constraints on zone and node, with different labelSelectors, 3 out of 4 nodes are candidates",
                pfb(vec![
                    soft_on("zone", 1, Some("foo")),
                    soft_on(h, 1, Some("bar")),
                ]),
                zoned(&[
                    ("node-a", "zone1"),
                    ("node-b", "zone1"),
                    ("node-x", "zone2"),
                ]),
                zoned(&[("node-y", "zone2")]),
                vec![
                    lp("p-a1", "node-a", &["foo"]),
                    lp("p-b1", "node-b", &["foo", "bar"]),
                    lp("p-y1", "node-y", &["foo"]),
                    lp("p-y2", "node-y", &["bar"]),
                ],
                vec![50, 25, 100],
            ),
            (
                "existing pods in a different namespace do not count",
                p(vec![soft_on(h, 1, Some("foo"))]),
                hosts(&["node-a", "node-b"]),
                vec![],
                vec![
                    other_ns,
                    lp("p-a2", "node-a", &["foo"]),
                    lp("p-b1", "node-b", &["foo"]),
                    lp("p-b2", "node-b", &["foo"]),
                ],
                vec![100, 33],
            ),
            (
                "terminating Pods should be excluded",
                p(vec![soft_on(h, 1, Some("foo"))]),
                hosts(&["node-a", "node-b"]),
                vec![],
                vec![terminating, lp("p-b", "node-b", &["foo"])],
                vec![100, 0],
            ),
            (
                "minDomains has no effect when ScheduleAnyway",
                p(vec![min_domains]),
                vec![
                    node_named("node-a"),
                    node_named("node-b"),
                    node_named("node-c"),
                ],
                vec![],
                [
                    many("p-a", "node-a", 2),
                    many("p-b", "node-b", 2),
                    many("p-c", "node-c", 1),
                ]
                .concat(),
                vec![75, 75, 100],
            ),
            (
                "matchLabelKeys ANDed with LabelSelector when LabelSelector is empty",
                pfb(vec![
                    {
                        let mut c = soft_on("zone", 1, Some("x"));
                        c.label_selector = Some(LabelSelector::default());
                        c.match_label_keys = Some(vec!["foo".into()]);
                        c
                    },
                    {
                        let mut c = soft_on(h, 1, Some("x"));
                        c.label_selector = Some(LabelSelector::default());
                        c.match_label_keys = Some(vec!["bar".into()]);
                        c
                    },
                ]),
                zoned(&[
                    ("node-a", "zone1"),
                    ("node-b", "zone1"),
                    ("node-c", "zone2"),
                    ("node-d", "zone2"),
                ]),
                vec![],
                vec![
                    lp("p-a1", "node-a", &["foo"]),
                    lp("p-b1", "node-b", &["foo", "bar"]),
                    lp("p-y1", "node-c", &["foo"]),
                    lp("p-y2", "node-c", &["bar"]),
                ],
                vec![60, 20, 60, 100],
            ),
            (
                "matchLabelKeys ANDed with LabelSelector when LabelSelector isn't empty",
                with_constraints(
                    pod("p", "default", &[("foo", ""), ("bar", ""), ("baz", "")]),
                    vec![soft_on("zone", 1, Some("foo")), {
                        let mut c = soft_on(h, 1, Some("bar"));
                        c.match_label_keys = Some(vec!["baz".into()]);
                        c
                    }],
                ),
                zoned(&[
                    ("node-a", "zone1"),
                    ("node-b", "zone1"),
                    ("node-c", "zone2"),
                    ("node-d", "zone2"),
                ]),
                vec![],
                vec![
                    lp("p-a1", "node-a", &["foo"]),
                    lp("p-b1", "node-b", &["foo", "bar", "baz"]),
                    lp("p-c1", "node-c", &["foo"]),
                    lp("p-c2", "node-c", &["bar"]),
                    lp("p-d3", "node-c", &["bar", "baz"]),
                ],
                vec![60, 20, 60, 100],
            ),
        ];
        for (name, p, nodes, failed, pods, want) in cases {
            assert_eq!(
                run_with_failed(&plugin(), &p, &nodes, &failed, &pods),
                want,
                "{name}"
            );
        }
    }

    // Upstream TestPodTopologySpreadScore, node inclusion policy cases.
    #[test]
    fn upstream_node_inclusion_policy_scores() {
        use k8s_openapi::api::core::v1::{
            Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
            NodeSpec, Taint,
        };
        let pods = [
            many("p-a", "node-a", 2),
            many("p-b", "node-b", 1),
            many("p-c", "node-c", 1),
        ]
        .concat();
        let labelled = vec![
            node("node-a", &[("node", "node-a"), ("foo", "")]),
            node("node-b", &[("node", "node-b"), ("foo", "")]),
            node("node-c", &[("node", "node-c")]),
        ];
        let ignore = |mut c: k8s_openapi::api::core::v1::TopologySpreadConstraint| {
            c.node_affinity_policy = Some("Ignore".into());
            c
        };
        let with_node_selector = |mut p: Pod| {
            if let Some(s) = p.spec.as_mut() {
                s.node_selector = Some(labels(&[("foo", "")]));
            }
            p
        };
        let with_node_affinity = |mut p: Pod| {
            if let Some(s) = p.spec.as_mut() {
                s.affinity = Some(Affinity {
                    node_affinity: Some(NodeAffinity {
                        required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                            node_selector_terms: vec![NodeSelectorTerm {
                                match_expressions: Some(vec![NodeSelectorRequirement {
                                    key: "foo".into(),
                                    operator: "In".into(),
                                    values: Some(vec![String::new()]),
                                }]),
                                ..Default::default()
                            }],
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                });
            }
            p
        };
        let base = |c| with_constraints(pod("p", "default", &[("foo", "")]), vec![c]);
        let c = || soft_on("node", 1, Some("foo"));
        let cases: Vec<(&str, Pod, Vec<i64>)> = vec![
            (
                "NodeAffinityPolicy honored with labelSelectors",
                with_node_selector(base(c())),
                vec![0, 33, 100],
            ),
            (
                "NodeAffinityPolicy ignored with labelSelectors",
                with_node_selector(base(ignore(c()))),
                vec![66, 100, 100],
            ),
            (
                "NodeAffinityPolicy honored with nodeAffinity",
                with_node_affinity(base(c())),
                vec![0, 33, 100],
            ),
            (
                "NodeAffinityPolicy ignored with nodeAffinity",
                with_node_affinity(base(ignore(c()))),
                vec![66, 100, 100],
            ),
        ];
        for (name, p, want) in cases {
            assert_eq!(
                run_with_failed(&plugin(), &p, &labelled, &[], &pods),
                want,
                "{name}"
            );
        }

        let mut tainted = vec![
            node("node-a", &[("node", "node-a")]),
            node("node-b", &[("node", "node-b")]),
            node("node-c", &[("node", "node-c")]),
        ];
        if let Some(n) = tainted.get_mut(2) {
            n.spec = Some(NodeSpec {
                taints: Some(vec![Taint {
                    key: "foo".into(),
                    value: Some("bar".into()),
                    effect: "NoSchedule".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            });
        }
        let mut honor = c();
        honor.node_taints_policy = Some("Honor".into());
        assert_eq!(
            run_with_failed(&plugin(), &base(honor), &tainted, &[], &pods),
            vec![0, 33, 100],
            "NodeTaintsPolicy honored"
        );
        assert_eq!(
            run_with_failed(&plugin(), &base(c()), &tainted, &[], &pods),
            vec![66, 100, 100],
            "NodeTaintsPolicy ignored"
        );
    }

    // Upstream "system defaulting, nodes don't have zone, pods match service".
    #[test]
    fn system_defaults_from_service() {
        use k8s_openapi::api::core::v1::{Service, ServiceSpec};
        let listers = Listers::default();
        listers.services.insert(
            "default/svc".into(),
            Arc::new(Service {
                metadata: ObjectMeta {
                    name: Some("svc".into()),
                    namespace: Some("default".into()),
                    ..Default::default()
                },
                spec: Some(ServiceSpec {
                    selector: Some(labels(&[("foo", "")])),
                    ..Default::default()
                }),
                ..Default::default()
            }),
        );
        let pl = PodTopologySpread::with_args(PodTopologySpreadArgs::default(), Arc::new(listers));
        let pods = [
            many("p-a", "node-a", 4),
            many("p-b", "node-b", 3),
            many("p-c", "node-c", 2),
            many("p-d", "node-d", 1),
        ]
        .concat();
        let p = pod("p", "default", &[("foo", "")]);
        assert_eq!(
            run_with_failed(
                &pl,
                &p,
                &hosts(&["node-a", "node-b", "node-c", "node-d"]),
                &[],
                &pods
            ),
            vec![44, 66, 77, 100]
        );
        // The pod with no constraints and no Service or owner: nothing to score.
        let none = plugin();
        let snapshot = Snapshot::from_node_infos(node_infos(&hosts(&["node-a"]), &[]));
        let s = none.pre_score(
            &mut CycleState::new(),
            &PodInfo::new(p),
            &snapshot,
            snapshot.list(),
        );
        assert!(s.is_skip());
    }

    #[test]
    fn raw_scores_and_skips() {
        let incoming = |cs| with_constraints(pod("p", "default", &[("foo", "")]), cs);
        // DoNotSchedule constraints are not scored.
        let p = incoming(vec![constraint("zone", 1, "DoNotSchedule")]);
        assert_eq!(run(&plugin(), &p, &[host("node-a", Some("z1"))], &[]), None);
        // Raw: round(2 ln 5) = 3, round(ln 5) = 2, 0 -> 100 * (3 + 0 - s) / 3.
        let p = incoming(vec![soft(LABEL_HOSTNAME, 1)]);
        let nodes = vec![
            host("node-a", None),
            host("node-b", None),
            host("node-c", None),
        ];
        let pods = vec![
            foo("a1", "node-a"),
            foo("a2", "node-a"),
            foo("b1", "node-b"),
        ];
        assert_eq!(run(&plugin(), &p, &nodes, &pods), Some(vec![0, 33, 100]));
        let snapshot = Snapshot::from_node_infos(node_infos(&nodes, &pods));
        let info = PodInfo::new(p);
        let mut state = CycleState::new();
        assert!(
            plugin()
                .pre_score(&mut state, &info, &snapshot, snapshot.list())
                .is_success()
        );
        let raw: Vec<i64> = snapshot
            .list()
            .iter()
            .map(|n| plugin().score(&state, &info, n).0)
            .collect();
        assert_eq!(raw, vec![3, 2, 0]);
        assert_eq!(
            plugin()
                .score(&CycleState::new(), &info, &snapshot.list()[0])
                .1
                .code(),
            crate::framework::status::Code::Error
        );
    }

    #[test]
    fn system_defaults_from_replica_set() {
        let listers = Listers::default();
        listers.replica_sets.insert(
            "default/rs".into(),
            Arc::new(ReplicaSet {
                metadata: ObjectMeta {
                    name: Some("rs".into()),
                    namespace: Some("default".into()),
                    ..Default::default()
                },
                spec: ReplicaSetSpec {
                    selector: LabelSelector {
                        match_labels: Some(labels(&[("foo", "bar")])),
                        ..Default::default()
                    },
                    ..Default::default()
                },
                ..Default::default()
            }),
        );
        let pl = PodTopologySpread::with_args(PodTopologySpreadArgs::default(), Arc::new(listers));
        let mut p = pod("p", "default", &[("foo", "bar")]);
        p.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: "rs".into(),
            controller: Some(true),
            ..Default::default()
        }]);
        let nodes = vec![
            node(
                "node-a",
                &[
                    (LABEL_HOSTNAME, "node-a"),
                    (super::super::common::LABEL_TOPOLOGY_ZONE, "z1"),
                ],
            ),
            node(
                "node-b",
                &[
                    (LABEL_HOSTNAME, "node-b"),
                    (super::super::common::LABEL_TOPOLOGY_ZONE, "z1"),
                ],
            ),
            node("node-c", &[(LABEL_HOSTNAME, "node-c")]),
        ];
        let bar = |n: &str, node: &str| on(pod(n, "default", &[("foo", "bar")]), node);
        let pods = vec![
            bar("a1", "node-a"),
            bar("a2", "node-a"),
            bar("c1", "node-c"),
            on(pod("x", "default", &[("foo", "baz")]), "node-b"),
        ];
        // Hostname (maxSkew 3, ln 5) and zone (maxSkew 5, ln 4); node-c has no zone but is
        // still scored by hostname under system defaulting: raw 12, 9, 4.
        assert_eq!(run(&pl, &p, &nodes, &pods), Some(vec![33, 58, 100]));
        // Without the owner the default selector is empty: skip.
        p.metadata.owner_references = None;
        assert_eq!(run(&pl, &p, &nodes, &pods), None);
    }
}
