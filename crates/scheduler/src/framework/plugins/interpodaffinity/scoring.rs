//! InterPodAffinity's PreScore, Score and NormalizeScore (upstream
//! `interpodaffinity/scoring.go`): the pod's preferred (anti-)affinity to the pods in each
//! topology domain, plus the existing pods' required affinity (weighted by
//! `hardPodAffinityWeight`) and preferred (anti-)affinity to the pod.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};

use super::InterPodAffinity;
use crate::framework::cycle_state::CycleState;
use crate::framework::interface::{PreScorePlugin, ScorePlugin};
use crate::framework::snapshot::Snapshot;
use crate::framework::status::Status;
use crate::framework::types::{
    AffinityTerm, MAX_NODE_SCORE, NodeInfo, NodeScore, PodInfo, WeightedAffinityTerm,
};

/// The cycle-state key of the PreScore results.
const PRE_SCORE_STATE_KEY: &str = "PreScoreInterPodAffinity";

/// Score per topology key, then per value.
type ScoreMap = HashMap<String, HashMap<String, i64>>;

/// What PreScore computes for Score (upstream `preScoreState`).
#[derive(Debug, Clone, Default)]
pub(crate) struct PreScoreState {
    topology_score: ScoreMap,
}

/// Adds `weight * multiplier` to the node's domain of `term` when `pod` matches it
/// (upstream `processTerm`).
fn process_term(
    m: &mut ScoreMap,
    term: &AffinityTerm,
    weight: i32,
    pod: &Pod,
    ns_labels: &BTreeMap<String, String>,
    node: &Node,
    multiplier: i64,
) {
    if !term.matches(pod, Some(ns_labels)) {
        return;
    }
    let Some(value) = node
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(&term.topology_key))
    else {
        return;
    };
    *m.entry(term.topology_key.clone())
        .or_default()
        .entry(value.clone())
        .or_insert(0) += i64::from(weight) * multiplier;
}

fn process_terms(
    m: &mut ScoreMap,
    terms: &[WeightedAffinityTerm],
    pod: &Pod,
    ns_labels: &BTreeMap<String, String>,
    node: &Node,
    multiplier: i64,
) {
    for t in terms {
        process_term(m, &t.term, t.weight, pod, ns_labels, node, multiplier);
    }
}

/// Whether the pod's spec has preferred pod affinity or anti-affinity terms (upstream
/// checks the spec, not the parsed terms).
fn has_preferred_terms(pod: &Pod) -> bool {
    let affinity = pod.spec.as_ref().and_then(|s| s.affinity.as_ref());
    let affinity_terms = affinity
        .and_then(|a| a.pod_affinity.as_ref())
        .and_then(|a| {
            a.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .is_some_and(|t| !t.is_empty());
    let anti_terms = affinity
        .and_then(|a| a.pod_anti_affinity.as_ref())
        .and_then(|a| {
            a.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .is_some_and(|t| !t.is_empty());
    affinity_terms || anti_terms
}

fn missing_state() -> Status {
    Status::error(format!(
        "error reading {PRE_SCORE_STATE_KEY:?} from cycleState: not found"
    ))
}

impl InterPodAffinity {
    /// Upstream `processExistingPod`.
    #[allow(clippy::too_many_arguments)]
    fn process_existing_pod(
        &self,
        preferred_affinity: &[WeightedAffinityTerm],
        preferred_anti_affinity: &[WeightedAffinityTerm],
        namespace_labels: &BTreeMap<String, String>,
        existing: &PodInfo,
        node: &Node,
        incoming: &Pod,
        m: &mut ScoreMap,
    ) {
        if node.metadata.labels.as_ref().is_none_or(BTreeMap::is_empty) {
            return;
        }
        let none = super::no_labels();
        process_terms(m, preferred_affinity, &existing.pod, none, node, 1);
        process_terms(m, preferred_anti_affinity, &existing.pod, none, node, -1);
        if self.args.hard_pod_affinity_weight > 0 {
            for t in &existing.required_affinity_terms {
                process_term(
                    m,
                    t,
                    self.args.hard_pod_affinity_weight,
                    incoming,
                    namespace_labels,
                    node,
                    1,
                );
            }
        }
        process_terms(
            m,
            &existing.preferred_affinity_terms,
            incoming,
            namespace_labels,
            node,
            1,
        );
        process_terms(
            m,
            &existing.preferred_anti_affinity_terms,
            incoming,
            namespace_labels,
            node,
            -1,
        );
    }
}

impl PreScorePlugin for InterPodAffinity {
    /// Sums, per topology domain, the weights of the matching terms on both sides; Skip
    /// when there is nothing to score.
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        nodes: &[Arc<NodeInfo>],
    ) -> Status {
        if nodes.is_empty() {
            return Status::skip();
        }
        let has_constraints = has_preferred_terms(&pod.pod);
        if self.args.ignore_preferred_terms_of_existing_pods && !has_constraints {
            return Status::skip();
        }
        if let Some(err) = pod.parse_error.as_ref() {
            return Status::error(format!("failed to parse pod: {err}"));
        }
        let mut preferred_affinity = pod.preferred_affinity_terms.clone();
        let mut preferred_anti_affinity = pod.preferred_anti_affinity_terms.clone();
        for t in preferred_affinity
            .iter_mut()
            .chain(preferred_anti_affinity.iter_mut())
        {
            self.merge_affinity_term_namespaces(&mut t.term);
        }
        let ns = pod.pod.metadata.namespace.as_deref().unwrap_or_default();
        let namespace_labels = self.namespace_labels(ns);

        let all_nodes = if has_constraints {
            snapshot.list()
        } else {
            snapshot.have_pods_with_affinity()
        };
        let mut topology_score = ScoreMap::new();
        for node_info in all_nodes {
            let node = node_info.node();
            let process = |existing: &PodInfo, m: &mut ScoreMap| {
                self.process_existing_pod(
                    &preferred_affinity,
                    &preferred_anti_affinity,
                    &namespace_labels,
                    existing,
                    node,
                    &pod.pod,
                    m,
                );
            };
            if has_constraints {
                for existing in node_info.pods() {
                    process(existing, &mut topology_score);
                }
            } else {
                for existing in node_info.pods_with_affinity() {
                    process(existing, &mut topology_score);
                }
            }
        }
        if topology_score.is_empty() {
            return Status::skip();
        }
        state.write(PRE_SCORE_STATE_KEY, PreScoreState { topology_score });
        Status::success()
    }
}

impl ScorePlugin for InterPodAffinity {
    /// The sum of the scores of the node's topology domains.
    fn score(&self, state: &CycleState, _: &PodInfo, node_info: &NodeInfo) -> (i64, Status) {
        let Some(s) = state.read::<PreScoreState>(PRE_SCORE_STATE_KEY) else {
            return (0, missing_state());
        };
        let labels = node_info.node().metadata.labels.as_ref();
        let score = s
            .topology_score
            .iter()
            .filter_map(|(key, values)| {
                let v = labels?.get(key)?;
                Some(values.get(v).copied().unwrap_or(0))
            })
            .sum();
        (score, Status::success())
    }

    /// Min-max scaling into `0..=100`: `100 * (score - min) / (max - min)`, all 0 when the
    /// scores are equal.
    fn normalize_score(&self, state: &CycleState, _: &PodInfo, scores: &mut [NodeScore]) -> Status {
        let Some(s) = state.read::<PreScoreState>(PRE_SCORE_STATE_KEY) else {
            return missing_state();
        };
        if s.topology_score.is_empty() {
            return Status::success();
        }
        let min = scores.iter().map(|s| s.score).min().unwrap_or(0);
        let max = scores.iter().map(|s| s.score).max().unwrap_or(0);
        let diff = max.saturating_sub(min);
        for s in scores.iter_mut() {
            let f = if diff > 0 {
                MAX_NODE_SCORE as f64 * ((s.score - min) as f64 / diff as f64)
            } else {
                0.0
            };
            s.score = f as i64;
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::{InterPodAffinity, InterPodAffinityArgs};
    use super::*;
    use crate::informers::Listers;

    /// PreScore, Score and NormalizeScore over every node; None when PreScore skips.
    fn run(args: InterPodAffinityArgs, p: &Pod, nodes: &[Node], pods: &[Pod]) -> Option<Vec<i64>> {
        let pl = InterPodAffinity::with_args(args, Arc::new(Listers::default()));
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
            .map(|n| {
                let (score, st) = pl.score(&state, &info, n);
                assert!(st.is_success());
                NodeScore {
                    name: n.name().to_owned(),
                    score,
                }
            })
            .collect();
        assert!(pl.normalize_score(&state, &info, &mut scores).is_success());
        Some(scores.into_iter().map(|s| s.score).collect())
    }

    fn s1(name: &str, node: &str) -> Pod {
        on(pod(name, "default", &[("security", "S1")]), node)
    }
    fn s2(name: &str, node: &str) -> Pod {
        on(pod(name, "default", &[("security", "S2")]), node)
    }

    // Upstream TestPreferredAffinity (cases of the same shapes).
    #[test]
    fn preferred_affinity() {
        let d = InterPodAffinityArgs::default;
        let regions = vec![
            node("m1", &[("region", "China")]),
            node("m2", &[("region", "India")]),
            node("m3", &[("az", "az1")]),
        ];
        let aff5 = with_affinity(
            pod("p", "default", &[]),
            vec![],
            vec![],
            vec![weighted(5, term("security", "In", &["S1"], "region"))],
            vec![],
        );
        // Nothing scheduled: no score (all zero).
        assert_eq!(run(d(), &aff5, &regions, &[]), None);
        // Matching pod in China: m1 gets all, m3 lacks the key.
        assert_eq!(
            run(
                d(),
                &aff5,
                &regions,
                &[s1("a", "m1"), s2("b", "m2"), s1("c", "m3")]
            ),
            Some(vec![100, 0, 0])
        );
        // Anti-affinity: the domain with the matching pod gets 0.
        let anti5 = with_affinity(
            pod("p", "default", &[]),
            vec![],
            vec![],
            vec![],
            vec![weighted(5, term("security", "In", &["S1"], "region"))],
        );
        assert_eq!(
            run(d(), &anti5, &regions, &[s1("a", "m1")]),
            Some(vec![0, 100, 100])
        );

        // Mixed preferred terms and an existing pod's preferred term to the incoming pod.
        let nodes = vec![
            node("m1", &[("region", "r1"), ("zone", "z1")]),
            node("m2", &[("region", "r1"), ("zone", "z2")]),
            node("m3", &[("region", "r2"), ("zone", "z3")]),
        ];
        let p = with_affinity(
            pod("p", "default", &[("foo", "bar")]),
            vec![],
            vec![],
            vec![weighted(8, term("security", "In", &["S1"], "region"))],
            vec![weighted(3, term("security", "In", &["S2"], "zone"))],
        );
        let e3 = with_affinity(
            on(pod("e3", "default", &[]), "m3"),
            vec![],
            vec![],
            vec![weighted(4, term("foo", "In", &["bar"], "region"))],
            vec![],
        );
        // m1: 8, m2: 8 - 3 = 5, m3: 4 -> (s - 4) * 100 / 4.
        assert_eq!(
            run(d(), &p, &nodes, &[s1("e1", "m1"), s2("e2", "m2"), e3]),
            Some(vec![100, 25, 0])
        );
        // Another namespace: the incoming pod's terms do not match.
        let e = on(pod("e", "other", &[("security", "S1")]), "m1");
        assert_eq!(run(d(), &aff5, &regions, &[e]), None);
    }

    #[test]
    fn existing_pods_terms_and_args() {
        let d = InterPodAffinityArgs::default;
        let nodes = vec![
            node("m1", &[("region", "China")]),
            node("m2", &[("region", "China")]),
            node("m3", &[("region", "India")]),
        ];
        let incoming = pod("p", "default", &[("security", "S1")]);
        let hard = with_affinity(
            on(pod("e", "default", &[]), "m1"),
            vec![term("security", "In", &["S1"], "region")],
            vec![],
            vec![],
            vec![],
        );
        // hardPodAffinityWeight 1: the existing pod's required affinity scores its region.
        assert_eq!(
            run(d(), &incoming, &nodes, std::slice::from_ref(&hard)),
            Some(vec![100, 100, 0])
        );
        // Weight 0: nothing to score.
        let zero = InterPodAffinityArgs {
            hard_pod_affinity_weight: 0,
            ..d()
        };
        assert_eq!(run(zero, &incoming, &nodes, &[hard]), None);
        // An existing pod's preferred anti-affinity to the incoming pod.
        let soft_anti = with_affinity(
            on(pod("e", "default", &[]), "m3"),
            vec![],
            vec![],
            vec![],
            vec![weighted(7, term("security", "In", &["S1"], "region"))],
        );
        assert_eq!(
            run(d(), &incoming, &nodes, std::slice::from_ref(&soft_anti)),
            Some(vec![100, 100, 0])
        );
        // ignorePreferredTermsOfExistingPods: an incoming pod without preferred terms skips.
        let ignore = InterPodAffinityArgs {
            ignore_preferred_terms_of_existing_pods: true,
            ..d()
        };
        assert_eq!(run(ignore, &incoming, &nodes, &[soft_anti]), None);
        // Scores of different magnitudes scale linearly: 10, 0, -5 -> 100, 33, 0.
        let p = with_affinity(
            pod("p", "default", &[]),
            vec![],
            vec![],
            vec![weighted(10, term("security", "In", &["S1"], "region"))],
            vec![weighted(5, term("security", "In", &["S2"], "region"))],
        );
        let nodes = vec![
            node("m1", &[("region", "a")]),
            node("m2", &[("region", "b")]),
            node("m3", &[("region", "c")]),
        ];
        assert_eq!(
            run(d(), &p, &nodes, &[s1("x", "m1"), s2("y", "m3")]),
            Some(vec![100, 33, 0])
        );
    }

    fn namespaces() -> Listers {
        use k8s_openapi::api::core::v1::Namespace;
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
        let l = Listers::default();
        for (name, team) in [
            ("subteam1.team1", "team1"),
            ("subteam2.team1", "team1"),
            ("subteam1.team2", "team2"),
            ("subteam2.team2", "team2"),
        ] {
            l.namespaces.insert(
                name.into(),
                Arc::new(Namespace {
                    metadata: ObjectMeta {
                        name: Some(name.into()),
                        labels: Some(labels(&[("team", team)])),
                        ..Default::default()
                    },
                    ..Default::default()
                }),
            );
        }
        l
    }

    /// Like `run`, with the upstream namespaces known.
    fn run_ns(
        args: InterPodAffinityArgs,
        p: &Pod,
        nodes: &[Node],
        pods: &[Pod],
    ) -> Result<Vec<i64>, Status> {
        let pl = InterPodAffinity::with_args(args, Arc::new(namespaces()));
        let snapshot = Snapshot::from_node_infos(node_infos(nodes, pods));
        let info = PodInfo::new(p.clone());
        let mut state = CycleState::new();
        let s = pl.pre_score(&mut state, &info, &snapshot, snapshot.list());
        if !s.is_success() {
            return Err(s);
        }
        let mut scores: Vec<NodeScore> = snapshot
            .list()
            .iter()
            .map(|n| NodeScore {
                name: n.name().to_owned(),
                score: pl.score(&state, &info, n).0,
            })
            .collect();
        assert!(pl.normalize_score(&state, &info, &mut scores).is_success());
        Ok(scores.into_iter().map(|s| s.score).collect())
    }

    /// Name, args, incoming pod, nodes, existing pods, normalized scores (None: Skip).
    type ScoreCase = (
        &'static str,
        InterPodAffinityArgs,
        Pod,
        Vec<Node>,
        Vec<Pod>,
        Option<Vec<i64>>,
    );

    // Upstream TestPreferredAffinity and TestPreferredAffinityWithHardPodAffinitySymmetricWeight
    // (their tables).
    #[test]
    fn upstream_preferred_affinity_table() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
            LabelSelector, LabelSelectorRequirement,
        };
        type W = k8s_openapi::api::core::v1::WeightedPodAffinityTerm;
        type T = k8s_openapi::api::core::v1::PodAffinityTerm;
        let s1 = [("security", "S1")];
        let s2 = [("security", "S2")];
        let china = [("region", "China")];
        let india = [("region", "India")];
        let az1 = [("az", "az1")];
        let az2 = [("az", "az2")];
        let china_az1 = [("region", "China"), ("az", "az1")];
        let stay_s1 = || vec![weighted(5, term("security", "In", &["S1"], "region"))];
        let stay_s2 = || vec![weighted(6, term("security", "In", &["S2"], "region"))];
        let affinity3 = || {
            vec![
                weighted(
                    8,
                    term_multi(
                        &[("security", "NotIn", &["S1"]), ("security", "In", &["S2"])],
                        "region",
                    ),
                ),
                weighted(
                    2,
                    term_multi(
                        &[
                            ("security", "Exists", &[]),
                            ("wrongkey", "DoesNotExist", &[]),
                        ],
                        "region",
                    ),
                ),
            ]
        };
        let hard = || {
            vec![
                term("security", "In", &["S1", "value2"], "region"),
                term_multi(
                    &[
                        ("security", "Exists", &[]),
                        ("wrongkey", "DoesNotExist", &[]),
                    ],
                    "region",
                ),
            ]
        };
        let away_s1 = || vec![weighted(5, term("security", "In", &["S1"], "az"))];
        let away_s2 = || vec![weighted(5, term("security", "In", &["S2"], "az"))];
        let stay_s1_8 = || vec![weighted(8, term("security", "In", &["S1"], "region"))];
        let ns_sel = || -> Vec<W> {
            let mut t = term("security", "In", &["S1"], "region");
            t.namespaces = Some(vec!["subteam2.team2".into()]);
            t.namespace_selector = Some(LabelSelector {
                match_expressions: Some(vec![LabelSelectorRequirement {
                    key: "team".into(),
                    operator: "In".into(),
                    values: Some(vec!["team1".into()]),
                }]),
                ..Default::default()
            });
            vec![weighted(5, t)]
        };
        // The pod builder: `(name, namespace, node, labels, pref, pref_anti, req)`.
        let mk = |name: &str,
                  ns: &str,
                  node: &str,
                  l: &[(&str, &str)],
                  pref: Vec<W>,
                  anti: Vec<W>,
                  req: Vec<T>| {
            let p = pod(name, ns, l);
            let p = if node.is_empty() { p } else { on(p, node) };
            if pref.is_empty() && anti.is_empty() && req.is_empty() {
                p
            } else {
                with_affinity(p, req, vec![], pref, anti)
            }
        };
        let plain = |name: &str, node: &str, l: &[(&str, &str)]| {
            mk(name, "", node, l, vec![], vec![], vec![])
        };
        let d = InterPodAffinityArgs::default;
        let cases: Vec<ScoreCase> = vec![
            (
                "all nodes are same priority as Affinity is nil",
                d(),
                plain("p", "", &s1),
                vec![
                    node("node1", &china),
                    node("node2", &india),
                    node("node3", &az1),
                ],
                vec![],
                None,
            ),
            (
                "Affinity: pod that matches topology key & pods in nodes will get high score",
                d(),
                mk("p", "", "", &s1, stay_s1(), vec![], vec![]),
                vec![
                    node("node1", &china),
                    node("node2", &india),
                    node("node3", &az1),
                ],
                vec![
                    plain("a", "node1", &s1),
                    plain("b", "node2", &s2),
                    plain("c", "node3", &s1),
                ],
                Some(vec![100, 0, 0]),
            ),
            (
                "All the nodes that have the same topology key & label value have the same score",
                d(),
                mk("p", "", "", &[], stay_s1(), vec![], vec![]),
                vec![
                    node("node1", &china),
                    node("node2", &china_az1),
                    node("node3", &india),
                ],
                vec![plain("a", "node1", &s1)],
                Some(vec![100, 100, 0]),
            ),
            (
                "Affinity: the region with more matches gets the high score",
                d(),
                mk("p", "", "", &s1, stay_s2(), vec![], vec![]),
                vec![
                    node("node1", &china),
                    node("node2", &india),
                    node("node3", &china),
                    node("node4", &china),
                    node("node5", &india),
                ],
                vec![
                    plain("a", "node1", &s2),
                    plain("b", "node1", &s2),
                    plain("c", "node2", &s2),
                    plain("d", "node3", &s2),
                    plain("e", "node4", &s2),
                    plain("f", "node5", &s2),
                ],
                Some(vec![100, 0, 100, 100, 0]),
            ),
            (
                "Affinity: different Label operators and values, including some match failures",
                d(),
                mk("p", "", "", &s1, affinity3(), vec![], vec![]),
                vec![
                    node("node1", &china),
                    node("node2", &india),
                    node("node3", &az1),
                ],
                vec![
                    plain("a", "node1", &s1),
                    plain("b", "node2", &s2),
                    plain("c", "node3", &s1),
                ],
                Some(vec![20, 100, 0]),
            ),
            (
                "Affinity symmetry: preferred terms of existing pods",
                d(),
                plain("p", "", &s2),
                vec![
                    node("node1", &china),
                    node("node2", &india),
                    node("node3", &az1),
                ],
                vec![
                    mk("a", "", "node1", &s1, stay_s1(), vec![], vec![]),
                    mk("b", "", "node2", &s2, stay_s2(), vec![], vec![]),
                ],
                Some(vec![0, 100, 0]),
            ),
            (
                "Affinity symmetry with namespace selector",
                d(),
                mk("p", "subteam1.team1", "", &s1, vec![], vec![], vec![]),
                vec![
                    node("node1", &china),
                    node("node2", &india),
                    node("node3", &az1),
                ],
                vec![
                    mk("a", "", "node1", &s1, ns_sel(), vec![], vec![]),
                    mk("b", "", "node2", &s2, stay_s2(), vec![], vec![]),
                ],
                Some(vec![100, 0, 0]),
            ),
            (
                "AntiAffinity symmetry with namespace selector",
                d(),
                mk("p", "subteam1.team1", "", &s1, vec![], vec![], vec![]),
                vec![
                    node("node1", &china),
                    node("node2", &india),
                    node("node3", &az1),
                ],
                vec![
                    mk("a", "", "node1", &s1, vec![], ns_sel(), vec![]),
                    mk("b", "", "node2", &s2, stay_s2(), vec![], vec![]),
                ],
                Some(vec![0, 100, 100]),
            ),
            (
                "Affinity symmetry: required terms of existing pods",
                d(),
                plain("p", "", &s1),
                vec![
                    node("node1", &china),
                    node("node2", &india),
                    node("node3", &az1),
                ],
                vec![
                    mk("a", "", "node1", &s1, vec![], vec![], hard()),
                    mk("b", "", "node2", &s2, vec![], vec![], hard()),
                ],
                Some(vec![100, 100, 0]),
            ),
            (
                "Anti Affinity: pod that does not match existing pods in node will get high score",
                d(),
                mk("p", "", "", &s1, vec![], away_s1(), vec![]),
                vec![node("node1", &az1), node("node2", &china)],
                vec![plain("a", "node1", &s1), plain("b", "node2", &s2)],
                Some(vec![0, 100]),
            ),
            (
                "Anti Affinity: pod that does not match topology key & match the pods in nodes will get higher score",
                d(),
                mk("p", "", "", &s1, vec![], away_s1(), vec![]),
                vec![node("node1", &az1), node("node2", &china)],
                vec![plain("a", "node1", &s1), plain("b", "node2", &s1)],
                Some(vec![0, 100]),
            ),
            (
                "Anti Affinity: the node with more unmatches gets the high score",
                d(),
                mk("p", "", "", &s1, vec![], away_s1(), vec![]),
                vec![node("node1", &az1), node("node2", &india)],
                vec![
                    plain("a", "node1", &s1),
                    plain("b", "node1", &s1),
                    plain("c", "node2", &s2),
                ],
                Some(vec![0, 100]),
            ),
            (
                "Anti Affinity symmetry",
                d(),
                plain("p", "", &s2),
                vec![node("node1", &az1), node("node2", &az2)],
                vec![
                    mk("a", "", "node1", &s1, vec![], away_s2(), vec![]),
                    mk("b", "", "node2", &s2, vec![], away_s1(), vec![]),
                ],
                Some(vec![0, 100]),
            ),
            (
                "Affinity and Anti Affinity",
                d(),
                mk("p", "", "", &s1, stay_s1_8(), away_s2(), vec![]),
                vec![node("node1", &china), node("node2", &az1)],
                vec![plain("a", "node1", &s1), plain("b", "node2", &s1)],
                Some(vec![100, 0]),
            ),
            (
                "Affinity and Anti Affinity: the pod and existing pods have the same labels",
                d(),
                mk("p", "", "", &s1, stay_s1_8(), away_s2(), vec![]),
                vec![
                    node("node1", &china_az1),
                    node("node2", &india),
                    node("node3", &china),
                    node("node4", &china),
                    node("node5", &india),
                ],
                vec![
                    plain("a", "node1", &s1),
                    plain("b", "node1", &s1),
                    plain("c", "node2", &s1),
                    plain("d", "node3", &s1),
                    plain("e", "node3", &s1),
                    plain("f", "node4", &s1),
                    plain("g", "node5", &s1),
                ],
                Some(vec![100, 0, 100, 100, 0]),
            ),
            (
                "Affinity and Anti Affinity and symmetry",
                d(),
                mk("p", "", "", &s1, stay_s1_8(), away_s2(), vec![]),
                vec![
                    node("node1", &china),
                    node("node2", &az1),
                    node("node3", &india),
                    node("node4", &az2),
                ],
                vec![
                    plain("a", "node1", &s1),
                    plain("b", "node2", &s2),
                    mk("c", "", "node3", &[], stay_s1_8(), away_s2(), vec![]),
                    mk("d", "", "node4", &[], vec![], away_s1(), vec![]),
                ],
                Some(vec![100, 0, 100, 0]),
            ),
            (
                "Avoid panic when partial nodes in a topology don't have pods with affinity",
                d(),
                plain("p", "", &s1),
                vec![node("node1", &china), node("node2", &china)],
                vec![
                    plain("a", "node1", &s1),
                    mk("b", "", "node2", &[], stay_s1_8(), away_s2(), vec![]),
                ],
                Some(vec![0, 0]),
            ),
            (
                "Affinity with pods matching NamespaceSelector",
                d(),
                mk("p", "subteam1.team1", "", &s1, ns_sel(), vec![], vec![]),
                vec![node("node1", &china), node("node2", &india)],
                vec![
                    mk("a", "subteam1.team1", "node1", &s1, vec![], vec![], vec![]),
                    mk("b", "subteam1.team1", "node1", &s1, vec![], vec![], vec![]),
                    mk("c", "subteam1.team2", "node1", &s1, vec![], vec![], vec![]),
                    mk("d", "subteam2.team1", "node2", &s1, vec![], vec![], vec![]),
                ],
                Some(vec![100, 0]),
            ),
            (
                "Affinity with pods matching both NamespaceSelector and Namespaces fields",
                d(),
                mk("p", "subteam1.team1", "", &s1, ns_sel(), vec![], vec![]),
                vec![node("node1", &china), node("node2", &india)],
                vec![
                    mk("a", "subteam1.team1", "node1", &s1, vec![], vec![], vec![]),
                    mk("b", "subteam1.team1", "node1", &s1, vec![], vec![], vec![]),
                    mk("c", "subteam2.team2", "node1", &s1, vec![], vec![], vec![]),
                    mk("d", "subteam2.team1", "node2", &s1, vec![], vec![], vec![]),
                ],
                Some(vec![100, 0]),
            ),
            (
                "Anti-affinity with pods matching NamespaceSelector",
                d(),
                mk("p", "subteam1.team1", "", &s1, vec![], ns_sel(), vec![]),
                vec![node("node1", &china), node("node2", &india)],
                vec![
                    mk("a", "subteam1.team1", "node1", &s1, vec![], vec![], vec![]),
                    mk("b", "subteam1.team1", "node1", &s1, vec![], vec![], vec![]),
                    mk("c", "subteam1.team2", "node1", &s1, vec![], vec![], vec![]),
                    mk("d", "subteam2.team1", "node2", &s1, vec![], vec![], vec![]),
                ],
                Some(vec![0, 100]),
            ),
            (
                "Ignore preferred terms of existing pods",
                InterPodAffinityArgs {
                    ignore_preferred_terms_of_existing_pods: true,
                    ..d()
                },
                plain("p", "", &s2),
                vec![node("node1", &china), node("node2", &india)],
                vec![
                    mk("a", "", "node1", &s1, stay_s1_8(), away_s2(), vec![]),
                    mk("b", "", "node2", &s2, stay_s2(), vec![], vec![]),
                ],
                None,
            ),
            (
                "Do not ignore preferred terms of existing pods",
                d(),
                plain("p", "", &s2),
                vec![node("node1", &china), node("node2", &india)],
                vec![
                    mk("a", "", "node1", &s1, stay_s1_8(), away_s2(), vec![]),
                    mk("b", "", "node2", &s2, stay_s2(), vec![], vec![]),
                ],
                Some(vec![0, 100]),
            ),
            (
                "No nodes to score",
                d(),
                plain("p", "", &s2),
                vec![],
                vec![],
                None,
            ),
        ];
        for (name, args, p, nodes, pods, want) in cases {
            match run_ns(args, &p, &nodes, &pods) {
                Ok(got) => assert_eq!(Some(got), want, "{name}"),
                Err(s) => {
                    assert!(s.is_skip(), "{name}: {s}");
                    assert_eq!(None, want, "{name}");
                }
            }
        }

        // TestPreferredAffinityWithHardPodAffinitySymmetricWeight.
        let mut hard_term = term("service", "In", &["S1"], "region");
        hard_term.namespaces = Some(vec![String::new(), "subteam2.team2".into()]);
        hard_term.namespace_selector = ns_sel()
            .first()
            .and_then(|w| w.pod_affinity_term.namespace_selector.clone());
        let existing = vec![
            mk(
                "a",
                "",
                "node1",
                &[],
                vec![],
                vec![],
                vec![hard_term.clone()],
            ),
            mk("b", "", "node2", &[], vec![], vec![], vec![hard_term]),
        ];
        let nodes = vec![
            node("node1", &china),
            node("node2", &india),
            node("node3", &az1),
        ];
        let svc = [("service", "S1")];
        let weight = |w| InterPodAffinityArgs {
            hard_pod_affinity_weight: w,
            ..d()
        };
        let cases: Vec<(&str, i32, &str, Option<Vec<i64>>)> = vec![
            ("with default weight", 1, "", Some(vec![100, 100, 0])),
            ("with zero weight", 0, "", None),
            ("with no matching namespace", 1, "subteam1.team2", None),
            (
                "with matching NamespaceSelector",
                1,
                "subteam1.team1",
                Some(vec![100, 100, 0]),
            ),
            (
                "with matching Namespaces",
                1,
                "subteam2.team2",
                Some(vec![100, 100, 0]),
            ),
        ];
        for (name, w, ns, want) in cases {
            let p = mk("p", ns, "", &svc, vec![], vec![], vec![]);
            match run_ns(weight(w), &p, &nodes, &existing) {
                Ok(got) => assert_eq!(Some(got), want, "{name}"),
                Err(s) => {
                    assert!(s.is_skip(), "{name}: {s}");
                    assert_eq!(None, want, "{name}");
                }
            }
        }
    }

    #[test]
    fn invalid_terms_fail_pre_score() {
        let bad = with_affinity(
            pod("p", "", &[]),
            vec![],
            vec![],
            vec![weighted(
                8,
                term("security", "In", &["{{.bad-value.}}"], "region"),
            )],
            vec![],
        );
        let err = run_ns(
            InterPodAffinityArgs::default(),
            &bad,
            &[node("node1", &[("region", "China")])],
            &[],
        )
        .unwrap_err();
        assert_eq!(err.code(), crate::framework::status::Code::Error);
        assert!(
            err.message().contains("{{.bad-value.}}"),
            "{}",
            err.message()
        );
    }
}
