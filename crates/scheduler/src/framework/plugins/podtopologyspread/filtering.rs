//! PodTopologySpread's PreFilter, PreFilterExtensions and Filter (upstream
//! `podtopologyspread/filtering.go`): the `DoNotSchedule` constraints.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{Node, Pod};
use skiff_api::core::scheduling_predicates::node_affinity::get_required_node_affinity;

use super::PodTopologySpread;
use super::common::{
    Constraint, DO_NOT_SCHEDULE, count_pods_match_selector, node_label,
    node_labels_match_spread_constraints,
};
use crate::framework::cycle_state::CycleState;
use crate::framework::interface::{
    FilterPlugin, PreFilterExtensions, PreFilterPlugin, PreFilterResult,
};
use crate::framework::snapshot::Snapshot;
use crate::framework::status::Status;
use crate::framework::types::{NodeInfo, PodInfo};

/// The cycle-state key of the PreFilter results.
const PRE_FILTER_STATE_KEY: &str = "PreFilterPodTopologySpread";

/// Placing the pod would make a domain exceed `maxSkew`.
pub const ERR_REASON_CONSTRAINTS_NOT_MATCH: &str =
    "node(s) didn't match pod topology spread constraints";
/// The node lacks a constraint's topology key.
pub const ERR_REASON_NODE_LABEL_NOT_MATCH: &str =
    "node(s) didn't match pod topology spread constraints (missing required label)";

/// The two domains with the fewest matching pods (upstream `criticalPaths`):
/// `[0]` always holds the minimum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CriticalPaths([(String, i64); 2]);

impl CriticalPaths {
    fn new() -> Self {
        let max = i64::from(i32::MAX);
        Self([(String::new(), max), (String::new(), max)])
    }

    /// Records that domain `value` now has `num` matching pods (upstream `update`).
    fn update(&mut self, value: &str, num: i64) {
        let p = &mut self.0;
        let i = if value == p[0].0 {
            Some(0)
        } else if value == p[1].0 {
            Some(1)
        } else {
            None
        };
        match i {
            Some(i) => {
                p[i].1 = num;
                if p[0].1 > p[1].1 {
                    p.swap(0, 1);
                }
            }
            None => {
                if num < p[0].1 {
                    p[1] = p[0].clone();
                    p[0] = (value.to_owned(), num);
                } else if num < p[1].1 {
                    p[1] = (value.to_owned(), num);
                }
            }
        }
    }
}

/// What PreFilter computes for Filter (upstream `preFilterState`).
#[derive(Debug, Clone)]
pub(crate) struct PreFilterState {
    constraints: Vec<Constraint>,
    critical_paths: Vec<CriticalPaths>,
    /// Per constraint: matching pods per domain value.
    tp_value_to_match_num: Vec<HashMap<String, i64>>,
}

impl PreFilterState {
    /// The global minimum of constraint `i`, 0 when fewer than `min_domains` domains.
    fn min_match_num(&self, i: usize, min_domains: i32) -> i64 {
        let min = self.critical_paths.get(i).map_or(0, |p| p.0[0].1);
        let domains = self.tp_value_to_match_num.get(i).map_or(0, HashMap::len);
        if (domains as i64) < i64::from(min_domains) {
            0
        } else {
            min
        }
    }
}

fn missing_state() -> Status {
    Status::error(format!(
        "reading {PRE_FILTER_STATE_KEY:?} from cycleState: not found"
    ))
}

impl PodTopologySpread {
    /// Upstream `calPreFilterState`: counts matching pods per domain over the nodes that
    /// have every topology key and pass each constraint's inclusion policies.
    fn cal_pre_filter_state(
        &self,
        pod: &Pod,
        nodes: &[std::sync::Arc<NodeInfo>],
    ) -> Result<PreFilterState, String> {
        let constraints = self
            .inner
            .constraints(pod, DO_NOT_SCHEDULE)
            .map_err(|e| format!("get constraints from pod: {e}"))?;
        let mut tp_value_to_match_num = vec![HashMap::new(); constraints.len()];
        let mut critical_paths = Vec::with_capacity(constraints.len());
        if constraints.is_empty() {
            return Ok(PreFilterState {
                constraints,
                critical_paths,
                tp_value_to_match_num,
            });
        }
        let required = get_required_node_affinity(pod);
        let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
        for node_info in nodes {
            let node = node_info.node();
            if !node_labels_match_spread_constraints(node.metadata.labels.as_ref(), &constraints) {
                continue;
            }
            for (i, c) in constraints.iter().enumerate() {
                if !c.match_node_inclusion_policies(pod, node, &required) {
                    continue;
                }
                let value = node_label(node, &c.topology_key)
                    .cloned()
                    .unwrap_or_default();
                let count = count_pods_match_selector(node_info.pods(), &c.selector, ns);
                if let Some(m) = tp_value_to_match_num.get_mut(i) {
                    *m.entry(value).or_insert(0) += count;
                }
            }
        }
        for m in &tp_value_to_match_num {
            let mut paths = CriticalPaths::new();
            // Sorted for determinism; the minimum does not depend on the order.
            let sorted: BTreeMap<&String, &i64> = m.iter().collect();
            for (value, num) in sorted {
                paths.update(value, *num);
            }
            critical_paths.push(paths);
        }
        Ok(PreFilterState {
            constraints,
            critical_paths,
            tp_value_to_match_num,
        })
    }

    /// Upstream `updateWithPod`: `delta` (±1) for `updated` on `node`, for the constraints
    /// it matches.
    fn update_with_pod(
        s: &mut PreFilterState,
        updated: &Pod,
        preemptor: &Pod,
        node: &Node,
        delta: i64,
    ) {
        if updated.metadata.namespace != preemptor.metadata.namespace {
            return;
        }
        if !node_labels_match_spread_constraints(node.metadata.labels.as_ref(), &s.constraints) {
            return;
        }
        let required = get_required_node_affinity(preemptor);
        let empty = BTreeMap::new();
        let labels = updated.metadata.labels.as_ref().unwrap_or(&empty);
        for i in 0..s.constraints.len() {
            let Some(c) = s.constraints.get(i) else {
                continue;
            };
            if !c.selector.matches(labels)
                || !c.match_node_inclusion_policies(preemptor, node, &required)
            {
                continue;
            }
            let value = node_label(node, &c.topology_key)
                .cloned()
                .unwrap_or_default();
            let (Some(m), Some(paths)) = (
                s.tp_value_to_match_num.get_mut(i),
                s.critical_paths.get_mut(i),
            ) else {
                continue;
            };
            let n = m.entry(value.clone()).or_insert(0);
            *n += delta;
            paths.update(&value, *n);
        }
    }
}

impl PreFilterPlugin for PodTopologySpread {
    /// Skip when the pod has no `DoNotSchedule` constraint (its own or default).
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        match self.cal_pre_filter_state(&pod.pod, snapshot.list()) {
            Err(e) => (None, Status::error(e)),
            Ok(s) if s.constraints.is_empty() => (None, Status::skip()),
            Ok(s) => {
                state.write(PRE_FILTER_STATE_KEY, s);
                (None, Status::success())
            }
        }
    }

    fn pre_filter_extensions(&self) -> Option<&dyn PreFilterExtensions> {
        Some(self)
    }
}

impl PreFilterExtensions for PodTopologySpread {
    fn add_pod(
        &self,
        state: &mut CycleState,
        pod_to_schedule: &Pod,
        pod_to_add: &PodInfo,
        node_info: &NodeInfo,
    ) -> Status {
        let Some(s) = state.read_mut::<PreFilterState>(PRE_FILTER_STATE_KEY) else {
            return missing_state();
        };
        Self::update_with_pod(s, &pod_to_add.pod, pod_to_schedule, node_info.node(), 1);
        Status::success()
    }

    fn remove_pod(
        &self,
        state: &mut CycleState,
        pod_to_schedule: &Pod,
        pod_to_remove: &PodInfo,
        node_info: &NodeInfo,
    ) -> Status {
        let Some(s) = state.read_mut::<PreFilterState>(PRE_FILTER_STATE_KEY) else {
            return missing_state();
        };
        Self::update_with_pod(s, &pod_to_remove.pod, pod_to_schedule, node_info.node(), -1);
        Status::success()
    }
}

impl FilterPlugin for PodTopologySpread {
    /// UnschedulableAndUnresolvable when the node lacks a topology key; Unschedulable when
    /// `matching + self - global minimum > maxSkew` for a constraint.
    fn filter(&self, state: &CycleState, pod: &PodInfo, node_info: &NodeInfo) -> Status {
        let Some(s) = state.read::<PreFilterState>(PRE_FILTER_STATE_KEY) else {
            return missing_state();
        };
        let node = node_info.node();
        let empty = BTreeMap::new();
        let pod_labels = pod.pod.metadata.labels.as_ref().unwrap_or(&empty);
        for (i, c) in s.constraints.iter().enumerate() {
            let Some(value) = node_label(node, &c.topology_key) else {
                return Status::unresolvable(ERR_REASON_NODE_LABEL_NOT_MATCH);
            };
            let min_match_num = s.min_match_num(i, c.min_domains);
            let self_match_num = i64::from(c.selector.matches(pod_labels));
            let match_num = s
                .tp_value_to_match_num
                .get(i)
                .and_then(|m| m.get(value))
                .copied()
                .unwrap_or(0);
            if match_num + self_match_num - min_match_num > i64::from(c.max_skew) {
                return Status::unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH);
            }
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::{Service, ServiceSpec, Taint};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    use super::super::testutil::{constraint, with_constraints};
    use super::super::{PodTopologySpread, PodTopologySpreadArgs};
    use super::*;
    use crate::framework::plugins::interpodaffinity::testutil::{
        labels, node, node_infos, on, pod,
    };
    use crate::framework::status::Code;
    use crate::informers::Listers;

    fn plugin() -> PodTopologySpread {
        PodTopologySpread::with_args(
            PodTopologySpreadArgs::default(),
            Arc::new(Listers::default()),
        )
    }

    fn run(pl: &PodTopologySpread, p: &Pod, nodes: &[Node], pods: &[Pod]) -> Vec<Status> {
        let snapshot = Snapshot::from_node_infos(node_infos(nodes, pods));
        let info = PodInfo::new(p.clone());
        let mut state = CycleState::new();
        let (_, s) = pl.pre_filter(&mut state, &info, &snapshot);
        assert!(s.is_success() || s.is_skip(), "{s}");
        snapshot
            .list()
            .iter()
            .map(|n| {
                if s.is_skip() {
                    Status::success()
                } else {
                    pl.filter(&state, &info, n)
                }
            })
            .collect()
    }

    fn ok() -> Status {
        Status::success()
    }
    fn skew() -> Status {
        Status::unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH)
    }
    fn label() -> Status {
        Status::new(
            Code::UnschedulableAndUnresolvable,
            [ERR_REASON_NODE_LABEL_NOT_MATCH],
        )
    }

    fn foo(name: &str, node: &str) -> Pod {
        on(pod(name, "default", &[("foo", "")]), node)
    }

    fn four_nodes() -> Vec<Node> {
        vec![
            node("node-a", &[("zone", "zone1"), ("node", "node-a")]),
            node("node-b", &[("zone", "zone1"), ("node", "node-b")]),
            node("node-x", &[("zone", "zone2"), ("node", "node-x")]),
            node("node-y", &[("zone", "zone2"), ("node", "node-y")]),
        ]
    }

    /// Name, incoming pod, nodes, existing pods, statuses by node.
    type FilterCase = (&'static str, Pod, Vec<Node>, Vec<Pod>, Vec<Status>);

    // Upstream TestSingleConstraint / TestMultipleConstraints (cases of the same shapes).
    #[test]
    fn single_and_multiple_constraints() {
        let hard = |key: &str, skew: i32| constraint(key, skew, DO_NOT_SCHEDULE);
        let incoming = |cs| with_constraints(pod("p", "default", &[("foo", "")]), cs);
        let spread_3_2 = vec![
            foo("p-a1", "node-a"),
            foo("p-a2", "node-a"),
            foo("p-b1", "node-b"),
            foo("p-y1", "node-y"),
            foo("p-y2", "node-y"),
        ];
        let cases: Vec<FilterCase> = vec![
            (
                "no existing pods",
                incoming(vec![hard("zone", 1)]),
                four_nodes(),
                vec![],
                vec![ok(), ok(), ok(), ok()],
            ),
            (
                "3/2 across zones: zone1 would exceed maxSkew 1",
                incoming(vec![hard("zone", 1)]),
                four_nodes(),
                spread_3_2.clone(),
                vec![skew(), skew(), ok(), ok()],
            ),
            (
                "incoming pod does not match its own selector",
                with_constraints(pod("p", "default", &[]), vec![hard("zone", 1)]),
                four_nodes(),
                spread_3_2.clone(),
                vec![ok(), ok(), ok(), ok()],
            ),
            (
                "pods of another namespace do not count",
                incoming(vec![hard("zone", 1)]),
                four_nodes(),
                vec![
                    on(pod("o1", "other", &[("foo", "")]), "node-a"),
                    on(pod("o2", "other", &[("foo", "")]), "node-a"),
                ],
                vec![ok(), ok(), ok(), ok()],
            ),
            (
                "node without the topology key",
                incoming(vec![hard("zone", 1)]),
                vec![
                    node("node-a", &[("zone", "zone1")]),
                    node("node-b", &[("node", "node-b")]),
                ],
                vec![],
                vec![ok(), label()],
            ),
            (
                "maxSkew 2 tolerates 3/2",
                incoming(vec![hard("zone", 2)]),
                four_nodes(),
                spread_3_2.clone(),
                vec![ok(), ok(), ok(), ok()],
            ),
            (
                "per-node spreading",
                incoming(vec![hard("node", 1)]),
                four_nodes(),
                spread_3_2.clone(),
                // 2/1/0/2 with minimum 0: only node-x (0 + 1) fits.
                vec![skew(), skew(), ok(), skew()],
            ),
            (
                "two constraints: zone and node",
                incoming(vec![hard("zone", 1), hard("node", 1)]),
                vec![
                    node("node-a", &[("zone", "zone1"), ("node", "node-a")]),
                    node("node-b", &[("zone", "zone1"), ("node", "node-b")]),
                    node("node-x", &[("zone", "zone2"), ("node", "node-x")]),
                ],
                vec![foo("p-a1", "node-a"), foo("p-x1", "node-x")],
                vec![skew(), ok(), skew()],
            ),
            (
                "two constraints, a node lacking the second key",
                incoming(vec![hard("zone", 1), hard("node", 1)]),
                vec![
                    node("node-a", &[("zone", "zone1"), ("node", "node-a")]),
                    node("node-b", &[("zone", "zone1")]),
                ],
                vec![],
                vec![ok(), label()],
            ),
        ];
        for (name, p, nodes, pods, want) in cases {
            assert_eq!(run(&plugin(), &p, &nodes, &pods), want, "{name}");
        }
    }

    /// A DoNotSchedule constraint over pods with label `sel`.
    fn hard_on(
        key: &str,
        skew: i32,
        sel: &str,
    ) -> k8s_openapi::api::core::v1::TopologySpreadConstraint {
        let mut c = constraint(key, skew, DO_NOT_SCHEDULE);
        if let Some(e) = c
            .label_selector
            .as_mut()
            .and_then(|l| l.match_expressions.as_mut())
            .and_then(|m| m.first_mut())
        {
            e.key = sel.into();
        }
        c
    }

    fn zn(name: &str, zone_key: &str, zone: &str) -> Node {
        node(name, &[(zone_key, zone), ("node", name)])
    }

    fn abxy() -> Vec<Node> {
        vec![
            zn("node-a", "zone", "zone1"),
            zn("node-b", "zone", "zone1"),
            zn("node-x", "zone", "zone2"),
            zn("node-y", "zone", "zone2"),
        ]
    }

    /// `(pod name, node)` pairs of pods labelled foo.
    fn foos(pairs: &[(&str, &str)]) -> Vec<Pod> {
        pairs.iter().map(|(p, n)| foo(p, n)).collect()
    }

    /// The expected status per node, by code letter: S, U (skew), R (missing label).
    fn codes(c: &str) -> Vec<Status> {
        c.chars()
            .map(|ch| match ch {
                'U' => skew(),
                'R' => label(),
                _ => ok(),
            })
            .collect()
    }

    /// Name, incoming pod, nodes, existing pods, status letters per node (see `codes`).
    type CodeCase = (&'static str, Pod, Vec<Node>, Vec<Pod>, &'static str);

    // Upstream TestSingleConstraint (its table).
    #[test]
    fn upstream_single_constraint_table() {
        use k8s_openapi::api::core::v1::{
            Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
        };
        let p = |c| with_constraints(pod("p", "default", &[("foo", "")]), vec![c]);
        let spread_2_1_0_3 = || {
            foos(&[
                ("p-a1", "node-a"),
                ("p-a2", "node-a"),
                ("p-b1", "node-b"),
                ("p-y1", "node-y"),
                ("p-y2", "node-y"),
                ("p-y3", "node-y"),
            ])
        };
        let mut ns1 = foo("p-a1", "node-a");
        ns1.metadata.namespace = Some("ns1".into());
        let mut ns2 = foo("p-b1", "node-a");
        ns2.metadata.namespace = Some("ns2".into());
        let mut affinity = p(hard_on("node", 1, "foo"));
        if let Some(s) = affinity.spec.as_mut() {
            s.affinity = Some(Affinity {
                node_affinity: Some(NodeAffinity {
                    required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                        node_selector_terms: vec![NodeSelectorTerm {
                            match_expressions: Some(vec![NodeSelectorRequirement {
                                key: "node".into(),
                                operator: "In".into(),
                                values: Some(vec!["node-a".into(), "node-y".into()]),
                            }]),
                            ..Default::default()
                        }],
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            });
        }
        let mut terminating = foo("p-a", "node-a");
        terminating.metadata.deletion_timestamp = Some(Time(Default::default()));
        let cases: Vec<CodeCase> = vec![
            (
                "no existing pods",
                p(hard_on("zone", 1, "foo")),
                abxy(),
                vec![],
                "SSSS",
            ),
            (
                "no existing pods, incoming pod doesn't match itself",
                p(hard_on("zone", 1, "bar")),
                abxy(),
                vec![],
                "SSSS",
            ),
            (
                "existing pods in a different namespace do not count",
                p(hard_on("zone", 1, "foo")),
                abxy(),
                vec![ns1, ns2, foo("p-x1", "node-x"), foo("p-y1", "node-y")],
                "SSUU",
            ),
            (
                "pods spread across zones as 3/3, all nodes fit",
                p(hard_on("zone", 1, "foo")),
                abxy(),
                spread_2_1_0_3(),
                "SSSS",
            ),
            (
                "pods spread across zones as 1/2 due to absence of label 'zone' on node-b",
                p(hard_on("zone", 1, "foo")),
                vec![
                    zn("node-a", "zone", "zone1"),
                    zn("node-b", "zon", "zone1"),
                    zn("node-x", "zone", "zone2"),
                    zn("node-y", "zone", "zone2"),
                ],
                foos(&[
                    ("p-a1", "node-a"),
                    ("p-b1", "node-b"),
                    ("p-x1", "node-x"),
                    ("p-y1", "node-y"),
                ]),
                "SRUU",
            ),
            (
                "pod cannot be scheduled as all nodes don't have label 'rack'",
                p(hard_on("rack", 1, "foo")),
                vec![zn("node-a", "zone", "zone1"), zn("node-x", "zone", "zone2")],
                vec![],
                "RR",
            ),
            (
                "pods spread across nodes as 2/1/0/3, only node-x fits",
                p(hard_on("node", 1, "foo")),
                abxy(),
                spread_2_1_0_3(),
                "UUSU",
            ),
            (
                "pods spread across nodes as 2/1/0/3, maxSkew is 2, node-b and node-x fit",
                p(hard_on("node", 2, "foo")),
                abxy(),
                spread_2_1_0_3(),
                "USSU",
            ),
            (
                "pods spread across nodes as 2/1/0/3, but pod doesn't match itself",
                with_constraints(
                    pod("p", "default", &[("bar", "")]),
                    vec![hard_on("node", 1, "foo")],
                ),
                abxy(),
                spread_2_1_0_3(),
                "USSU",
            ),
            (
                "incoming pod has nodeAffinity, pods spread as 2/~1~/~0~/3, hence node-a fits",
                affinity,
                abxy(),
                spread_2_1_0_3(),
                "SSSU",
            ),
            (
                "terminating Pods should be excluded",
                p(hard_on("node", 1, "foo")),
                vec![
                    node("node-a", &[("node", "node-a")]),
                    node("node-b", &[("node", "node-b")]),
                ],
                vec![terminating, foo("p-b", "node-b")],
                "SU",
            ),
        ];
        for (name, p, nodes, pods, want) in cases {
            assert_eq!(run(&plugin(), &p, &nodes, &pods), codes(want), "{name}");
        }
    }

    // Upstream TestMultipleConstraints (its table).
    #[test]
    fn upstream_multiple_constraints_table() {
        let both = |labels: &[(&str, &str)], zone_sel: &str, node_sel: &str| {
            with_constraints(
                pod("p", "default", labels),
                vec![hard_on("zone", 1, zone_sel), hard_on("node", 1, node_sel)],
            )
        };
        let lp = |name: &str, node: &str, keys: &[&str]| {
            let l: Vec<(&str, &str)> = keys.iter().map(|k| (*k, "")).collect();
            on(pod(name, "default", &l), node)
        };
        let foo_only = [("foo", "")];
        let foo_bar = [("foo", ""), ("bar", "")];
        let cases: Vec<CodeCase> = vec![
            (
                "two Constraints on zone and node, spreads = [3/3, 2/1/0/3]",
                both(&foo_only, "foo", "foo"),
                abxy(),
                foos(&[
                    ("p-a1", "node-a"),
                    ("p-a2", "node-a"),
                    ("p-b1", "node-b"),
                    ("p-y1", "node-y"),
                    ("p-y2", "node-y"),
                    ("p-y3", "node-y"),
                ]),
                "UUSU",
            ),
            (
                "two Constraints on zone and node, spreads = [3/4, 2/1/0/4]",
                both(&foo_only, "foo", "foo"),
                abxy(),
                foos(&[
                    ("p-a1", "node-a"),
                    ("p-a2", "node-a"),
                    ("p-b1", "node-b"),
                    ("p-y1", "node-y"),
                    ("p-y2", "node-y"),
                    ("p-y3", "node-y"),
                    ("p-y4", "node-y"),
                ]),
                "UUUU",
            ),
            (
                "Constraints hold different labelSelectors, spreads = [1/0, 1/0/0/1]",
                both(&foo_bar, "foo", "bar"),
                abxy(),
                vec![
                    lp("p-a1", "node-a", &["foo"]),
                    lp("p-y1", "node-y", &["bar"]),
                ],
                "UUSU",
            ),
            (
                "Constraints hold different labelSelectors, spreads = [1/0, 0/0/1/1]",
                both(&foo_bar, "foo", "bar"),
                abxy(),
                vec![
                    lp("p-a1", "node-a", &["foo"]),
                    lp("p-x1", "node-x", &["bar"]),
                    lp("p-y1", "node-y", &["bar"]),
                ],
                "UUUU",
            ),
            (
                "Constraints hold different labelSelectors, spreads = [2/3, 1/0/0/1]",
                both(&foo_bar, "foo", "bar"),
                abxy(),
                vec![
                    lp("p-a1", "node-a", &["foo"]),
                    lp("p-a2", "node-a", &["foo", "bar"]),
                    lp("p-y1", "node-y", &["foo"]),
                    lp("p-y2", "node-y", &["foo", "bar"]),
                    lp("p-y3", "node-y", &["foo"]),
                ],
                "USUU",
            ),
            (
                "Constraints hold different labelSelectors but pod doesn't match itself on 'zone' constraint",
                both(&[("bar", "")], "foo", "bar"),
                abxy(),
                vec![
                    lp("p-a1", "node-a", &["foo"]),
                    lp("p-x1", "node-x", &["bar"]),
                    lp("p-y1", "node-y", &["bar"]),
                ],
                "SSUU",
            ),
            (
                "two Constraints on zone and node, absence of label 'node' on node-x, spreads = [1/1, 1/0/0/1]",
                both(&foo_only, "foo", "foo"),
                vec![
                    zn("node-a", "zone", "zone1"),
                    zn("node-b", "zone", "zone1"),
                    node("node-x", &[("zone", "zone2")]),
                    zn("node-y", "zone", "zone2"),
                ],
                foos(&[("p-a1", "node-a"), ("p-y3", "node-y")]),
                "USRU",
            ),
        ];
        for (name, p, nodes, pods, want) in cases {
            assert_eq!(run(&plugin(), &p, &nodes, &pods), codes(want), "{name}");
        }
    }

    #[test]
    fn terminating_pods_are_ignored() {
        let p = with_constraints(
            pod("p", "default", &[("foo", "")]),
            vec![constraint("zone", 1, DO_NOT_SCHEDULE)],
        );
        let nodes = vec![
            node("node-a", &[("zone", "zone1")]),
            node("node-x", &[("zone", "zone2")]),
        ];
        // Counted, the pod on node-x makes the minimum 1 and node-a fits.
        let pods = [foo("p-a1", "node-a"), foo("p-x1", "node-x")];
        assert_eq!(run(&plugin(), &p, &nodes, &pods), vec![ok(), ok()]);
        let mut terminating = foo("p-x1", "node-x");
        terminating.metadata.deletion_timestamp = Some(Time(Default::default()));
        // Terminating, it is not counted: minimum 0 and node-a gives 2 > 1.
        let pods = [foo("p-a1", "node-a"), terminating];
        assert_eq!(run(&plugin(), &p, &nodes, &pods), vec![skew(), ok()]);
    }

    #[test]
    fn min_domains() {
        let nodes = vec![
            node("node-a", &[("zone", "zone1")]),
            node("node-x", &[("zone", "zone2")]),
        ];
        let pods = vec![
            foo("p-a1", "node-a"),
            foo("p-a2", "node-a"),
            foo("p-x1", "node-x"),
        ];
        let mut c = constraint("zone", 2, DO_NOT_SCHEDULE);
        let p = with_constraints(pod("p", "default", &[("foo", "")]), vec![c.clone()]);
        // Global minimum 1: 2 + 1 - 1 = 2 <= 2.
        assert_eq!(run(&plugin(), &p, &nodes, &pods), vec![ok(), ok()]);
        c.min_domains = Some(3);
        let p = with_constraints(pod("p", "default", &[("foo", "")]), vec![c]);
        // Two domains < minDomains 3: global minimum 0, so zone1 gives 3 > 2.
        assert_eq!(run(&plugin(), &p, &nodes, &pods), vec![skew(), ok()]);
    }

    #[test]
    fn node_inclusion_policies() {
        let nodes = vec![
            node("node-a", &[("zone", "zone1"), ("ok", "1")]),
            node("node-b", &[("zone", "zone2"), ("ok", "1")]),
            node("node-c", &[("zone", "zone3")]),
        ];
        let pods = vec![foo("p-a1", "node-a"), foo("p-b1", "node-b")];
        let with_selector = |mut p: Pod| {
            if let Some(s) = p.spec.as_mut() {
                s.node_selector = Some(labels(&[("ok", "1")]));
            }
            p
        };
        let mut c = constraint("zone", 1, DO_NOT_SCHEDULE);
        // nodeAffinityPolicy Honor (default): zone3 is not a domain, minimum 1.
        let p = with_selector(with_constraints(
            pod("p", "default", &[("foo", "")]),
            vec![c.clone()],
        ));
        assert_eq!(run(&plugin(), &p, &nodes, &pods), vec![ok(), ok(), ok()]);
        // Ignore: zone3 counts with 0 pods.
        c.node_affinity_policy = Some("Ignore".into());
        let p = with_selector(with_constraints(
            pod("p", "default", &[("foo", "")]),
            vec![c],
        ));
        assert_eq!(
            run(&plugin(), &p, &nodes, &pods),
            vec![skew(), skew(), ok()]
        );

        // nodeTaintsPolicy: node-c tainted NoSchedule, not tolerated.
        let mut tainted = nodes.clone();
        if let Some(n) = tainted.get_mut(2) {
            n.spec = Some(k8s_openapi::api::core::v1::NodeSpec {
                taints: Some(vec![Taint {
                    key: "k".into(),
                    effect: "NoSchedule".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            });
        }
        let mut c = constraint("zone", 1, DO_NOT_SCHEDULE);
        let p = with_constraints(pod("p", "default", &[("foo", "")]), vec![c.clone()]);
        // Ignore (default): the tainted zone3 counts.
        assert_eq!(
            run(&plugin(), &p, &tainted, &pods),
            vec![skew(), skew(), ok()]
        );
        c.node_taints_policy = Some("Honor".into());
        let p = with_constraints(pod("p", "default", &[("foo", "")]), vec![c]);
        assert_eq!(run(&plugin(), &p, &tainted, &pods), vec![ok(), ok(), ok()]);
    }

    #[test]
    fn match_label_keys() {
        let nodes = vec![
            node("node-a", &[("zone", "zone1")]),
            node("node-x", &[("zone", "zone2")]),
        ];
        let pods = vec![
            on(pod("a1", "default", &[("foo", ""), ("app", "a")]), "node-a"),
            on(pod("x1", "default", &[("foo", ""), ("app", "b")]), "node-x"),
            on(pod("x2", "default", &[("foo", ""), ("app", "b")]), "node-x"),
        ];
        let mut c = constraint("zone", 1, DO_NOT_SCHEDULE);
        let p = with_constraints(
            pod("p", "default", &[("foo", ""), ("app", "a")]),
            vec![c.clone()],
        );
        assert_eq!(run(&plugin(), &p, &nodes, &pods), vec![ok(), skew()]);
        c.match_label_keys = Some(vec!["app".into()]);
        let p = with_constraints(pod("p", "default", &[("foo", ""), ("app", "a")]), vec![c]);
        assert_eq!(run(&plugin(), &p, &nodes, &pods), vec![skew(), ok()]);
    }

    #[test]
    fn list_defaulting_with_service_selector() {
        let listers = Listers::default();
        listers.services.insert(
            "default/web".into(),
            Arc::new(Service {
                metadata: ObjectMeta {
                    name: Some("web".into()),
                    namespace: Some("default".into()),
                    ..Default::default()
                },
                spec: Some(ServiceSpec {
                    selector: Some(labels(&[("app", "web")])),
                    ..Default::default()
                }),
                ..Default::default()
            }),
        );
        let mut c = constraint("zone", 1, DO_NOT_SCHEDULE);
        c.label_selector = None;
        let args = PodTopologySpreadArgs {
            default_constraints: vec![c],
            defaulting_type: "List".into(),
        };
        let pl = PodTopologySpread::with_args(args.clone(), Arc::new(listers));
        let nodes = vec![
            node("node-a", &[("zone", "zone1")]),
            node("node-x", &[("zone", "zone2")]),
        ];
        let web = |n: &str, node: &str| on(pod(n, "default", &[("app", "web")]), node);
        let p = pod("p", "default", &[("app", "web")]);
        assert_eq!(
            run(&pl, &p, &nodes, &[web("w1", "node-a"), web("w2", "node-a")]),
            vec![skew(), ok()]
        );
        // Without a Service, the default selector is empty: Skip.
        let pl = PodTopologySpread::with_args(args, Arc::new(Listers::default()));
        assert_eq!(
            run(&pl, &p, &nodes, &[web("w1", "node-a"), web("w2", "node-a")]),
            vec![ok(), ok()]
        );
        // System defaulting has no DoNotSchedule constraint.
        let snapshot = Snapshot::from_node_infos(node_infos(&nodes, &[]));
        let (_, s) = plugin().pre_filter(&mut CycleState::new(), &PodInfo::new(p), &snapshot);
        assert!(s.is_skip());
    }

    // Upstream TestPreFilterStateAddPod / RemovePod (in spirit).
    #[test]
    fn add_remove_pod_and_critical_paths() {
        let pl = plugin();
        let nodes = four_nodes();
        let pods = vec![
            foo("p-a1", "node-a"),
            foo("p-a2", "node-a"),
            foo("p-b1", "node-b"),
            foo("p-y1", "node-y"),
            foo("p-y2", "node-y"),
        ];
        let p = with_constraints(
            pod("p", "default", &[("foo", "")]),
            vec![constraint("zone", 1, DO_NOT_SCHEDULE)],
        );
        let snapshot = Snapshot::from_node_infos(node_infos(&nodes, &pods));
        let info = PodInfo::new(p.clone());
        let mut state = CycleState::new();
        assert!(pl.pre_filter(&mut state, &info, &snapshot).1.is_success());
        let s = state.read::<PreFilterState>(PRE_FILTER_STATE_KEY).unwrap();
        assert_eq!(
            s.critical_paths[0].0,
            [("zone2".to_owned(), 2), ("zone1".to_owned(), 3)]
        );
        let a = Arc::clone(&snapshot.list()[0]);
        assert_eq!(pl.filter(&state, &info, &a), skew());
        let victim = PodInfo::new(foo("p-a1", "node-a"));
        assert!(pl.remove_pod(&mut state, &p, &victim, &a).is_success());
        assert_eq!(pl.filter(&state, &info, &a), ok());
        let s = state.read::<PreFilterState>(PRE_FILTER_STATE_KEY).unwrap();
        assert_eq!(
            s.critical_paths[0].0,
            [("zone2".to_owned(), 2), ("zone1".to_owned(), 2)]
        );
        assert!(pl.add_pod(&mut state, &p, &victim, &a).is_success());
        assert_eq!(pl.filter(&state, &info, &a), skew());
        // A pod of another namespace changes nothing.
        let other = PodInfo::new(on(pod("o", "other", &[("foo", "")]), "node-a"));
        assert!(pl.remove_pod(&mut state, &p, &other, &a).is_success());
        assert_eq!(pl.filter(&state, &info, &a), skew());
        assert_eq!(pl.filter(&CycleState::new(), &info, &a).code(), Code::Error);
    }

    #[test]
    fn critical_paths_update() {
        let mut p = CriticalPaths::new();
        for (v, n) in [("z1", 3), ("z2", 1), ("z3", 2)] {
            p.update(v, n);
        }
        assert_eq!(p.0, [("z2".to_owned(), 1), ("z3".to_owned(), 2)]);
        p.update("z2", 4);
        assert_eq!(p.0, [("z3".to_owned(), 2), ("z2".to_owned(), 4)]);
    }
}
