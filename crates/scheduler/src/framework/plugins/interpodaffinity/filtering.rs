//! InterPodAffinity's PreFilter, PreFilterExtensions and Filter (upstream
//! `interpodaffinity/filtering.go`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};

use super::{InterPodAffinity, no_labels, pod_matches_all_affinity_terms};
use crate::framework::cycle_state::CycleState;
use crate::framework::interface::{
    FilterPlugin, PreFilterExtensions, PreFilterPlugin, PreFilterResult,
};
use crate::framework::snapshot::Snapshot;
use crate::framework::status::{Code, Status};
use crate::framework::types::{AffinityTerm, NodeInfo, PodInfo};

/// The cycle-state key of the PreFilter results.
const PRE_FILTER_STATE_KEY: &str = "PreFilterInterPodAffinity";

/// The node would break the required anti-affinity of a pod already scheduled.
pub const ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH: &str =
    "node(s) didn't satisfy existing pods anti-affinity rules";
/// The node is in no topology domain holding pods the pod requires.
pub const ERR_REASON_AFFINITY_RULES_NOT_MATCH: &str = "node(s) didn't match pod affinity rules";
/// The node's topology domain holds pods the pod must avoid.
pub const ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH: &str =
    "node(s) didn't match pod anti-affinity rules";

/// Matching pods per topology pair `(key, value)`.
pub(crate) type TopologyCounts = HashMap<(String, String), i64>;

fn update_count(m: &mut TopologyCounts, node: &Node, key: &str, delta: i64) {
    let Some(value) = node.metadata.labels.as_ref().and_then(|l| l.get(key)) else {
        return;
    };
    let pair = (key.to_owned(), value.clone());
    let n = m.entry(pair.clone()).or_insert(0);
    *n += delta;
    if *n == 0 {
        m.remove(&pair);
    }
}

/// Counts `pod` once per term when it matches all `terms` (upstream
/// `updateWithAffinityTerms`).
fn update_with_affinity_terms(
    m: &mut TopologyCounts,
    terms: &[AffinityTerm],
    pod: &Pod,
    node: &Node,
    delta: i64,
) {
    if pod_matches_all_affinity_terms(terms, pod) {
        for t in terms {
            update_count(m, node, &t.topology_key, delta);
        }
    }
}

/// Counts `pod` for each term of `terms` it matches (upstream
/// `updateWithAntiAffinityTerms`).
fn update_with_anti_affinity_terms(
    m: &mut TopologyCounts,
    terms: &[AffinityTerm],
    pod: &Pod,
    ns_labels: &BTreeMap<String, String>,
    node: &Node,
    delta: i64,
) {
    for t in terms {
        if t.matches(pod, Some(ns_labels)) {
            update_count(m, node, &t.topology_key, delta);
        }
    }
}

/// What PreFilter computes for Filter (upstream `preFilterState`).
#[derive(Debug, Clone)]
pub(crate) struct PreFilterState {
    /// Existing pods whose required anti-affinity terms match the incoming pod.
    existing_anti_affinity_counts: TopologyCounts,
    /// Existing pods matching all the incoming pod's required affinity terms.
    affinity_counts: TopologyCounts,
    /// Existing pods matching the incoming pod's required anti-affinity terms.
    anti_affinity_counts: TopologyCounts,
    /// The incoming pod.
    pod: Arc<Pod>,
    /// Its required affinity terms, namespace selectors resolved.
    required_affinity_terms: Vec<AffinityTerm>,
    /// Its required anti-affinity terms, namespace selectors resolved.
    required_anti_affinity_terms: Vec<AffinityTerm>,
    /// The labels of its namespace.
    namespace_labels: BTreeMap<String, String>,
}

impl PreFilterState {
    /// Adds (`delta` 1) or removes (-1) `pod` on `node` (upstream `updateWithPod`).
    fn update_with_pod(&mut self, pod: &PodInfo, node: &Node, delta: i64) {
        update_with_anti_affinity_terms(
            &mut self.existing_anti_affinity_counts,
            &pod.required_anti_affinity_terms,
            &self.pod,
            &self.namespace_labels,
            node,
            delta,
        );
        update_with_affinity_terms(
            &mut self.affinity_counts,
            &self.required_affinity_terms,
            &pod.pod,
            node,
            delta,
        );
        update_with_anti_affinity_terms(
            &mut self.anti_affinity_counts,
            &self.required_anti_affinity_terms,
            &pod.pod,
            no_labels(),
            node,
            delta,
        );
    }
}

fn missing_state() -> Status {
    Status::error(format!(
        "error reading {PRE_FILTER_STATE_KEY:?} from cycleState: not found"
    ))
}

impl PreFilterPlugin for InterPodAffinity {
    /// Counts, per topology pair, the existing pods matching the pod's required terms and
    /// the existing pods whose required anti-affinity matches the pod; Skip when the pod
    /// has no required terms and no existing pod's anti-affinity matches it. A pod whose
    /// terms do not parse is UnschedulableAndUnresolvable (`parsing pod: ...`).
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        if let Some(err) = pod.parse_error.as_ref() {
            return (
                None,
                Status::new(
                    Code::UnschedulableAndUnresolvable,
                    [format!("parsing pod: {err}")],
                ),
            );
        }
        let mut required_affinity_terms = pod.required_affinity_terms.clone();
        let mut required_anti_affinity_terms = pod.required_anti_affinity_terms.clone();
        for t in required_affinity_terms
            .iter_mut()
            .chain(required_anti_affinity_terms.iter_mut())
        {
            self.merge_affinity_term_namespaces(t);
        }
        let ns = pod.pod.metadata.namespace.as_deref().unwrap_or_default();
        let namespace_labels = self.namespace_labels(ns);

        let mut existing_anti_affinity_counts = TopologyCounts::new();
        for node_info in snapshot.have_pods_with_required_anti_affinity() {
            for existing in node_info.pods_with_required_anti_affinity() {
                update_with_anti_affinity_terms(
                    &mut existing_anti_affinity_counts,
                    &existing.required_anti_affinity_terms,
                    &pod.pod,
                    &namespace_labels,
                    node_info.node(),
                    1,
                );
            }
        }
        let mut affinity_counts = TopologyCounts::new();
        let mut anti_affinity_counts = TopologyCounts::new();
        if !required_affinity_terms.is_empty() || !required_anti_affinity_terms.is_empty() {
            for node_info in snapshot.list() {
                for existing in node_info.pods() {
                    update_with_affinity_terms(
                        &mut affinity_counts,
                        &required_affinity_terms,
                        &existing.pod,
                        node_info.node(),
                        1,
                    );
                    update_with_anti_affinity_terms(
                        &mut anti_affinity_counts,
                        &required_anti_affinity_terms,
                        &existing.pod,
                        no_labels(),
                        node_info.node(),
                        1,
                    );
                }
            }
        }
        if existing_anti_affinity_counts.is_empty()
            && required_affinity_terms.is_empty()
            && required_anti_affinity_terms.is_empty()
        {
            return (None, Status::skip());
        }
        state.write(
            PRE_FILTER_STATE_KEY,
            PreFilterState {
                existing_anti_affinity_counts,
                affinity_counts,
                anti_affinity_counts,
                pod: Arc::clone(&pod.pod),
                required_affinity_terms,
                required_anti_affinity_terms,
                namespace_labels,
            },
        );
        (None, Status::success())
    }

    fn pre_filter_extensions(&self) -> Option<&dyn PreFilterExtensions> {
        Some(self)
    }
}

impl PreFilterExtensions for InterPodAffinity {
    fn add_pod(
        &self,
        state: &mut CycleState,
        _: &Pod,
        pod_to_add: &PodInfo,
        node_info: &NodeInfo,
    ) -> Status {
        let Some(s) = state.read_mut::<PreFilterState>(PRE_FILTER_STATE_KEY) else {
            return missing_state();
        };
        s.update_with_pod(pod_to_add, node_info.node(), 1);
        Status::success()
    }

    fn remove_pod(
        &self,
        state: &mut CycleState,
        _: &Pod,
        pod_to_remove: &PodInfo,
        node_info: &NodeInfo,
    ) -> Status {
        let Some(s) = state.read_mut::<PreFilterState>(PRE_FILTER_STATE_KEY) else {
            return missing_state();
        };
        s.update_with_pod(pod_to_remove, node_info.node(), -1);
        Status::success()
    }
}

fn topology_value<'a>(node: &'a Node, key: &str) -> Option<&'a String> {
    node.metadata.labels.as_ref().and_then(|l| l.get(key))
}

fn count(m: &TopologyCounts, key: &str, value: &str) -> i64 {
    m.get(&(key.to_owned(), value.to_owned()))
        .copied()
        .unwrap_or(0)
}

/// Upstream `satisfyExistingPodsAntiAffinity`.
fn satisfy_existing_pods_anti_affinity(s: &PreFilterState, node: &Node) -> bool {
    if s.existing_anti_affinity_counts.is_empty() {
        return true;
    }
    !node
        .metadata
        .labels
        .iter()
        .flatten()
        .any(|(k, v)| count(&s.existing_anti_affinity_counts, k, v) > 0)
}

/// Upstream `satisfyPodAntiAffinity`.
fn satisfy_pod_anti_affinity(s: &PreFilterState, node: &Node) -> bool {
    if s.anti_affinity_counts.is_empty() {
        return true;
    }
    !s.required_anti_affinity_terms.iter().any(|t| {
        topology_value(node, &t.topology_key)
            .is_some_and(|v| count(&s.anti_affinity_counts, &t.topology_key, v) > 0)
    })
}

/// Upstream `satisfyPodAffinity`: every term's topology key on the node, each with a
/// matching pod in the node's domain; or, when no pod in the cluster matches and the pod
/// matches its own terms, any node with all the keys.
fn satisfy_pod_affinity(s: &PreFilterState, node: &Node) -> bool {
    let mut pods_exist = true;
    for t in &s.required_affinity_terms {
        let Some(v) = topology_value(node, &t.topology_key) else {
            return false;
        };
        if count(&s.affinity_counts, &t.topology_key, v) <= 0 {
            pods_exist = false;
        }
    }
    if !pods_exist {
        return s.affinity_counts.is_empty()
            && pod_matches_all_affinity_terms(&s.required_affinity_terms, &s.pod);
    }
    true
}

impl FilterPlugin for InterPodAffinity {
    /// UnschedulableAndUnresolvable when the pod's affinity is not met; Unschedulable when
    /// its anti-affinity or an existing pod's anti-affinity is violated.
    fn filter(&self, state: &CycleState, _: &PodInfo, node_info: &NodeInfo) -> Status {
        let Some(s) = state.read::<PreFilterState>(PRE_FILTER_STATE_KEY) else {
            return missing_state();
        };
        let node = node_info.node();
        if !satisfy_pod_affinity(s, node) {
            return Status::unresolvable(ERR_REASON_AFFINITY_RULES_NOT_MATCH);
        }
        if !satisfy_pod_anti_affinity(s, node) {
            return Status::unschedulable(ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH);
        }
        if !satisfy_existing_pods_anti_affinity(s, node) {
            return Status::unschedulable(ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH);
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

    fn plugin(listers: Listers) -> InterPodAffinity {
        InterPodAffinity::with_args(InterPodAffinityArgs::default(), Arc::new(listers))
    }

    /// Runs PreFilter then Filter on every node; the statuses by node.
    fn run(pl: &InterPodAffinity, p: &Pod, nodes: &[Node], pods: &[Pod]) -> Vec<Status> {
        let snapshot = Snapshot::from_node_infos(node_infos(nodes, pods));
        let info = PodInfo::new(p.clone());
        let mut state = CycleState::new();
        let (_, s) = pl.pre_filter(&mut state, &info, &snapshot);
        snapshot
            .list()
            .iter()
            .map(|n| {
                if s.is_skip() {
                    Status::success()
                } else if !s.is_success() {
                    s.clone()
                } else {
                    pl.filter(&state, &info, n)
                }
            })
            .collect()
    }

    fn ok() -> Status {
        Status::success()
    }
    fn aff() -> Status {
        Status::unresolvable(ERR_REASON_AFFINITY_RULES_NOT_MATCH)
    }
    fn anti() -> Status {
        Status::unschedulable(ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH)
    }
    fn existing_anti() -> Status {
        existing()
    }
    fn existing() -> Status {
        Status::unschedulable(ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH)
    }

    // Upstream TestRequiredAffinitySingleNode (selected cases), on one node
    // `node1` labelled region=r1, zone=z11, hostname=h1.
    #[test]
    fn required_affinity_single_node() {
        let n = vec![node(
            "node1",
            &[("region", "r1"), ("zone", "z11"), ("hostname", "h1")],
        )];
        let sec = |name: &str| {
            on(
                pod(name, "default", &[("service", "securityscan")]),
                "node1",
            )
        };
        let cases: Vec<(&str, Pod, Vec<Pod>, Status)> = vec![
            (
                "no affinity: any node",
                pod("p", "default", &[]),
                vec![],
                ok(),
            ),
            (
                "In on region matches",
                with_affinity(
                    pod("p", "default", &[]),
                    vec![term("service", "In", &["securityscan", "value2"], "region")],
                    vec![],
                    vec![],
                    vec![],
                ),
                vec![sec("e")],
                ok(),
            ),
            (
                "NotIn matches",
                with_affinity(
                    pod("p", "default", &[]),
                    vec![term(
                        "service",
                        "NotIn",
                        &["securityscan3", "value3"],
                        "region",
                    )],
                    vec![],
                    vec![],
                    vec![],
                ),
                vec![sec("e")],
                ok(),
            ),
            (
                "namespace mismatch: affinity not met",
                with_affinity(
                    pod("p", "other", &[]),
                    vec![term("service", "In", &["securityscan", "value2"], "region")],
                    vec![],
                    vec![],
                    vec![],
                ),
                vec![sec("e")],
                aff(),
            ),
            (
                "selector mismatch: affinity not met",
                with_affinity(
                    pod("p", "default", &[]),
                    vec![term(
                        "service",
                        "In",
                        &["antivirusscan", "value2"],
                        "region",
                    )],
                    vec![],
                    vec![],
                    vec![],
                ),
                vec![sec("e")],
                aff(),
            ),
            (
                "affinity and anti-affinity both satisfied",
                with_affinity(
                    pod("p", "default", &[]),
                    vec![term("service", "In", &["securityscan", "value2"], "region")],
                    vec![term("service", "In", &["antivirusscan", "value2"], "node")],
                    vec![],
                    vec![],
                ),
                vec![sec("e")],
                ok(),
            ),
            (
                "anti-affinity violated",
                with_affinity(
                    pod("p", "default", &[]),
                    vec![term("service", "In", &["securityscan", "value2"], "region")],
                    vec![term("service", "In", &["securityscan", "value2"], "zone")],
                    vec![],
                    vec![],
                ),
                vec![sec("e")],
                anti(),
            ),
            (
                "existing pod's anti-affinity violated",
                pod("p", "default", &[("service", "securityscan")]),
                vec![with_affinity(
                    sec("e"),
                    vec![],
                    vec![term("service", "In", &["securityscan"], "zone")],
                    vec![],
                    vec![],
                )],
                existing(),
            ),
            (
                "existing pod's anti-affinity on a key the node lacks",
                pod("p", "default", &[("service", "securityscan")]),
                vec![with_affinity(
                    sec("e"),
                    vec![],
                    vec![term("service", "In", &["securityscan"], "rack")],
                    vec![],
                    vec![],
                )],
                ok(),
            ),
            (
                "affinity satisfied but node lacks a term's topology key",
                with_affinity(
                    pod("p", "default", &[]),
                    vec![
                        term("service", "In", &["securityscan"], "region"),
                        term("service", "In", &["securityscan"], "rack"),
                    ],
                    vec![],
                    vec![],
                    vec![],
                ),
                vec![sec("e")],
                aff(),
            ),
            (
                "no pod matches and the pod matches its own terms: first of a series",
                with_affinity(
                    pod("p", "default", &[("foo", "bar")]),
                    vec![term("foo", "In", &["bar"], "region")],
                    vec![],
                    vec![],
                    vec![],
                ),
                vec![],
                ok(),
            ),
            (
                "no pod matches and the pod does not match its own terms",
                with_affinity(
                    pod("p", "default", &[("foo", "baz")]),
                    vec![term("foo", "In", &["bar"], "region")],
                    vec![],
                    vec![],
                    vec![],
                ),
                vec![],
                aff(),
            ),
            (
                "self-match exception needs every topology key on the node",
                with_affinity(
                    pod("p", "default", &[("foo", "bar")]),
                    vec![term("foo", "In", &["bar"], "rack")],
                    vec![],
                    vec![],
                    vec![],
                ),
                vec![],
                aff(),
            ),
        ];
        for (name, p, pods, want) in cases {
            let got = run(&plugin(Listers::default()), &p, &n, &pods);
            assert_eq!(got, vec![want], "{name}");
        }
    }

    // Upstream TestRequiredAffinitySingleNode (more of its table), on `machine1` labelled
    // region=r1, zone=z11.
    #[test]
    fn upstream_required_affinity_single_node() {
        let n = vec![node("machine1", &[("region", "r1"), ("zone", "z11")])];
        let svc = [("service", "securityscan")];
        let s1 = [("security", "S1")];
        let existing = |anti: Vec<k8s_openapi::api::core::v1::PodAffinityTerm>| {
            with_affinity(
                on(pod("e", "default", &svc), "machine1"),
                vec![],
                anti,
                vec![],
                vec![],
            )
        };
        let cases: Vec<(&str, Pod, Vec<Pod>, Status)> = vec![
            (
                "satisfies the PodAffinity with different label Operators in multiple terms",
                with_affinity(
                    pod("p", "default", &s1),
                    vec![
                        term_multi(
                            &[
                                ("service", "Exists", &[]),
                                ("wrongkey", "DoesNotExist", &[]),
                            ],
                            "region",
                        ),
                        term_multi(
                            &[
                                ("service", "In", &["securityscan"]),
                                ("service", "NotIn", &["WrongValue"]),
                            ],
                            "region",
                        ),
                    ],
                    vec![],
                    vec![],
                    vec![],
                ),
                vec![on(pod("e", "default", &svc), "machine1")],
                ok(),
            ),
            (
                "the labelSelector requirements are ANDed: one expression does not match",
                with_affinity(
                    pod("p", "default", &s1),
                    vec![
                        term_multi(
                            &[
                                ("service", "Exists", &[]),
                                ("wrongkey", "DoesNotExist", &[]),
                            ],
                            "region",
                        ),
                        term_multi(
                            &[
                                ("service", "In", &["securityscan2"]),
                                ("service", "NotIn", &["WrongValue"]),
                            ],
                            "region",
                        ),
                    ],
                    vec![],
                    vec![],
                    vec![],
                ),
                vec![on(pod("e", "default", &svc), "machine1")],
                aff(),
            ),
            (
                "satisfies the PodAffinity and PodAntiAffinity and PodAntiAffinity symmetry with the existing pod",
                with_affinity(
                    pod("p", "default", &s1),
                    vec![term("service", "In", &["securityscan", "value2"], "region")],
                    vec![term("service", "In", &["antivirusscan", "value2"], "node")],
                    vec![],
                    vec![],
                ),
                vec![existing(vec![term(
                    "service",
                    "In",
                    &["antivirusscan", "value2"],
                    "node",
                )])],
                ok(),
            ),
            (
                "satisfies the PodAffinity and PodAntiAffinity but doesn't satisfy PodAntiAffinity symmetry with the existing pod",
                with_affinity(
                    pod("p", "default", &svc),
                    vec![term("service", "In", &["securityscan", "value2"], "region")],
                    vec![term("service", "In", &["antivirusscan", "value2"], "node")],
                    vec![],
                    vec![],
                ),
                vec![existing(vec![term(
                    "service",
                    "In",
                    &["securityscan", "value2"],
                    "zone",
                )])],
                existing_anti(),
            ),
            (
                "pod matches its own Label in PodAffinity and that matches the existing pod Labels",
                with_affinity(
                    pod("p", "default", &svc),
                    vec![term(
                        "service",
                        "NotIn",
                        &["securityscan", "value2"],
                        "region",
                    )],
                    vec![],
                    vec![],
                    vec![],
                ),
                vec![on(pod("e", "default", &svc), "machine2")],
                aff(),
            ),
            (
                "PodAntiAffinity from existing pod is respected when pod has no AntiAffinity constraints: violated",
                pod("p", "default", &svc),
                vec![existing(vec![term(
                    "service",
                    "In",
                    &["securityscan", "value2"],
                    "zone",
                )])],
                existing_anti(),
            ),
            (
                "PodAntiAffinity from existing pod is respected when pod has no AntiAffinity constraints: satisfied",
                pod("p", "default", &svc),
                vec![existing(vec![term(
                    "service",
                    "NotIn",
                    &["securityscan", "value2"],
                    "zone",
                )])],
                ok(),
            ),
            (
                "satisfies the PodAntiAffinity with existing pod but doesn't satisfy PodAntiAffinity symmetry with incoming pod",
                with_affinity(
                    pod("p", "default", &svc),
                    vec![],
                    vec![
                        term("service", "Exists", &[], "region"),
                        term("security", "Exists", &[], "region"),
                    ],
                    vec![],
                    vec![],
                ),
                vec![with_affinity(
                    on(pod("e", "default", &s1), "machine1"),
                    vec![],
                    vec![term("security", "Exists", &[], "zone")],
                    vec![],
                    vec![],
                )],
                anti(),
            ),
        ];
        for (name, p, pods, want) in cases {
            assert_eq!(
                run(&plugin(Listers::default()), &p, &n, &pods),
                vec![want],
                "{name}"
            );
        }
    }

    // Upstream TestRequiredAffinityMultipleNodes (selected cases).
    #[test]
    fn required_affinity_multiple_nodes() {
        let nodes = vec![
            node(
                "nodeA",
                &[("region", "r1"), ("zone", "z1"), ("hostname", "nodeA")],
            ),
            node(
                "nodeB",
                &[("region", "r1"), ("zone", "z2"), ("hostname", "nodeB")],
            ),
            node(
                "nodeC",
                &[("region", "r2"), ("zone", "z3"), ("hostname", "nodeC")],
            ),
        ];
        // An affinity to a pod on nodeA, by region: A and B pass, C fails.
        let p = with_affinity(
            pod("p", "default", &[]),
            vec![term("foo", "In", &["bar"], "region")],
            vec![],
            vec![],
            vec![],
        );
        let e = on(pod("e", "default", &[("foo", "bar")]), "nodeA");
        assert_eq!(
            run(
                &plugin(Listers::default()),
                &p,
                &nodes,
                std::slice::from_ref(&e)
            ),
            vec![ok(), ok(), aff()]
        );

        // Anti-affinity by zone to a pod on nodeA: only nodeA fails.
        let p = with_affinity(
            pod("p", "default", &[]),
            vec![],
            vec![term("foo", "In", &["bar"], "zone")],
            vec![],
            vec![],
        );
        assert_eq!(
            run(
                &plugin(Listers::default()),
                &p,
                &nodes,
                std::slice::from_ref(&e)
            ),
            vec![anti(), ok(), ok()]
        );

        // An existing pod on nodeA with anti-affinity by region to the incoming pod.
        let p = pod("p", "default", &[("foo", "bar")]);
        let e2 = with_affinity(
            on(pod("e2", "default", &[]), "nodeA"),
            vec![],
            vec![term("foo", "In", &["bar"], "region")],
            vec![],
            vec![],
        );
        assert_eq!(
            run(&plugin(Listers::default()), &p, &nodes, &[e2]),
            vec![existing(), existing(), ok()]
        );

        // The pod's own terms match itself but another pod matches: the exception does not
        // apply, only the region of that pod passes.
        let p = with_affinity(
            pod("p", "default", &[("foo", "bar")]),
            vec![term("foo", "In", &["bar"], "region")],
            vec![],
            vec![],
            vec![],
        );
        let on_c = on(pod("e", "default", &[("foo", "bar")]), "nodeC");
        assert_eq!(
            run(&plugin(Listers::default()), &p, &nodes, &[on_c]),
            vec![aff(), aff(), ok()]
        );

        // Affinity with two terms: both must be met by the same pod.
        let p = with_affinity(
            pod("p", "default", &[]),
            vec![
                term("foo", "In", &["bar"], "region"),
                term("baz", "Exists", &[], "zone"),
            ],
            vec![],
            vec![],
            vec![],
        );
        let both = on(
            pod("e", "default", &[("foo", "bar"), ("baz", "1")]),
            "nodeB",
        );
        assert_eq!(
            run(&plugin(Listers::default()), &p, &nodes, &[both]),
            vec![aff(), ok(), aff()]
        );
    }

    #[test]
    fn namespace_selector_resolved_from_lister() {
        use k8s_openapi::api::core::v1::Namespace;
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
        let listers = Listers::default();
        listers.namespaces.insert(
            "team".into(),
            Arc::new(Namespace {
                metadata: ObjectMeta {
                    name: Some("team".into()),
                    labels: Some(labels(&[("team", "a")])),
                    ..Default::default()
                },
                ..Default::default()
            }),
        );
        let nodes = vec![node("n1", &[("zone", "z1")]), node("n2", &[("zone", "z2")])];
        let mut t = term("foo", "In", &["bar"], "zone");
        t.namespace_selector = Some(LabelSelector {
            match_labels: Some([("team".to_owned(), "a".to_owned())].into()),
            ..Default::default()
        });
        let p = with_affinity(pod("p", "default", &[]), vec![], vec![t], vec![], vec![]);
        let e = on(pod("e", "team", &[("foo", "bar")]), "n1");
        assert_eq!(
            run(&plugin(listers), &p, &nodes, std::slice::from_ref(&e)),
            vec![anti(), ok()]
        );
        // Without the namespace known, the selector matches no namespace.
        assert_eq!(
            run(&plugin(Listers::default()), &p, &nodes, &[e]),
            vec![ok(), ok()]
        );
    }

    #[test]
    fn skip_parse_error_and_missing_state() {
        let pl = plugin(Listers::default());
        let snapshot = Snapshot::from_node_infos(node_infos(&[node("n1", &[])], &[]));
        let mut state = CycleState::new();
        let (_, s) = pl.pre_filter(
            &mut state,
            &PodInfo::new(pod("p", "default", &[])),
            &snapshot,
        );
        assert!(s.is_skip());
        let mut bad = term("foo", "Bogus", &["bar"], "zone");
        bad.topology_key = "zone".into();
        let p = with_affinity(pod("p", "default", &[]), vec![bad], vec![], vec![], vec![]);
        let (_, s) = pl.pre_filter(&mut state, &PodInfo::new(p), &snapshot);
        assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
        assert!(s.message().starts_with("parsing pod: "), "{}", s.message());
        let f = pl.filter(
            &CycleState::new(),
            &PodInfo::new(pod("p", "default", &[])),
            &snapshot.list()[0],
        );
        assert_eq!(f.code(), Code::Error);
    }

    // Upstream TestPreFilterStateAddRemovePod (in spirit): removing the pod that violates
    // the anti-affinity makes the node pass; adding it back fails it again.
    #[test]
    fn add_remove_pod() {
        let pl = plugin(Listers::default());
        let nodes = vec![node("n1", &[("zone", "z1")]), node("n2", &[("zone", "z2")])];
        let victim = on(pod("v", "default", &[("foo", "bar")]), "n1");
        let holder = with_affinity(
            on(pod("h", "default", &[]), "n2"),
            vec![],
            vec![term("app", "In", &["web"], "zone")],
            vec![],
            vec![],
        );
        let p = with_affinity(
            pod("p", "default", &[("app", "web")]),
            vec![],
            vec![term("foo", "In", &["bar"], "zone")],
            vec![],
            vec![],
        );
        let snapshot =
            Snapshot::from_node_infos(node_infos(&nodes, &[victim.clone(), holder.clone()]));
        let info = PodInfo::new(p.clone());
        let mut state = CycleState::new();
        assert!(pl.pre_filter(&mut state, &info, &snapshot).1.is_success());
        let n1 = Arc::clone(&snapshot.list()[0]);
        let n2 = Arc::clone(&snapshot.list()[1]);
        assert_eq!(pl.filter(&state, &info, &n1), anti());
        assert_eq!(pl.filter(&state, &info, &n2), existing());
        let mut copy = state.clone();
        let v = PodInfo::new(victim);
        let h = PodInfo::new(holder);
        assert!(pl.remove_pod(&mut copy, &p, &v, &n1).is_success());
        assert!(pl.remove_pod(&mut copy, &p, &h, &n2).is_success());
        assert_eq!(pl.filter(&copy, &info, &n1), ok());
        assert_eq!(pl.filter(&copy, &info, &n2), ok());
        assert!(pl.add_pod(&mut copy, &p, &v, &n1).is_success());
        assert_eq!(pl.filter(&copy, &info, &n1), anti());
        // The original state is untouched.
        assert_eq!(pl.filter(&state, &info, &n2), existing());
    }
}
