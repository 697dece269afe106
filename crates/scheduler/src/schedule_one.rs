//! Choosing a node for one pod (upstream `pkg/scheduler/schedule_one.go`, `schedulePod`):
//! PreFilter, Filter over as many nodes as `percentageOfNodesToScore` asks (starting
//! where the previous pod stopped), PreScore and Score over the feasible nodes, and the
//! highest score, ties broken at random.

use std::sync::Arc;

use rand::Rng as _;

use crate::framework::fit_error::{Diagnosis, FitError};
use crate::framework::interface::rejects;
use crate::framework::{CycleState, Framework, NodeInfo, NodeScore, PodInfo, Snapshot, Status};

/// At least this many feasible nodes are looked for (upstream `minFeasibleNodesToFind`).
pub const MIN_FEASIBLE_NODES_TO_FIND: usize = 100;
/// The adaptive percentage never goes below this (upstream
/// `minFeasibleNodesPercentageToFind`).
pub const MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND: usize = 5;
/// The message when the cluster has no nodes (upstream `ErrNoNodesAvailable`).
pub const ERR_NO_NODES_AVAILABLE: &str = "no nodes available to schedule pods";
/// The absent-node status message when PreFilter limited the nodes.
pub const FILTERED_OUT_BY_PRE_FILTER: &str = "node is filtered out by the prefilter result";

/// Where a pod should go (upstream `ScheduleResult`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleResult {
    /// The chosen node.
    pub suggested_host: String,
    /// How many nodes were filtered (feasible or not).
    pub evaluated_nodes: usize,
    /// How many of them fit.
    pub feasible_nodes: usize,
}

/// Why no node was chosen.
#[derive(Debug, Clone)]
pub enum ScheduleError {
    /// The cluster has no nodes.
    NoNodesAvailable,
    /// No node fits: the message and the plugins that rejected the pod.
    Fit(Box<FitError>),
    /// A plugin failed with an error.
    Status(Status),
}

impl std::fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoNodesAvailable => f.write_str(ERR_NO_NODES_AVAILABLE),
            Self::Fit(e) => e.fmt(f),
            Self::Status(s) => f.write_str(&s.message()),
        }
    }
}

/// How many feasible nodes to look for among `num_all_nodes` (upstream
/// `numFeasibleNodesToFind`): all below 100 nodes; else `percentage` of them (0: the
/// adaptive `50 - nodes/125`, at least 5 %), at least 100.
pub fn num_feasible_nodes_to_find(percentage: i32, num_all_nodes: usize) -> usize {
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND {
        return num_all_nodes;
    }
    let mut percentage = usize::try_from(percentage.max(0)).unwrap_or(0);
    if percentage >= 100 {
        return num_all_nodes;
    }
    if percentage == 0 {
        percentage = 50usize
            .saturating_sub(num_all_nodes / 125)
            .max(MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND);
    }
    (num_all_nodes * percentage / 100).max(MIN_FEASIBLE_NODES_TO_FIND)
}

/// The node-choosing part of the scheduler: keeps where the next search starts.
#[derive(Debug, Default)]
pub struct Algorithm {
    next_start_node_index: usize,
    /// The global `percentageOfNodesToScore` (0: adaptive).
    pub percentage_of_nodes_to_score: i32,
}

impl Algorithm {
    /// An algorithm with the global `percentageOfNodesToScore`.
    pub fn new(percentage_of_nodes_to_score: i32) -> Self {
        Self {
            next_start_node_index: 0,
            percentage_of_nodes_to_score,
        }
    }

    /// Chooses a node for `pod` (upstream `schedulePod`).
    pub fn schedule_pod(
        &mut self,
        fwk: &Framework,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
    ) -> Result<ScheduleResult, ScheduleError> {
        if snapshot.num_nodes() == 0 {
            return Err(ScheduleError::NoNodesAvailable);
        }
        let (feasible, diagnosis) = self.find_nodes_that_fit_pod(fwk, state, pod, snapshot)?;
        if feasible.is_empty() {
            return Err(ScheduleError::Fit(Box::new(FitError {
                num_all_nodes: snapshot.num_nodes(),
                diagnosis,
            })));
        }
        let evaluated = feasible.len() + diagnosis.node_to_status.statuses.len();
        if feasible.len() == 1 {
            return Ok(ScheduleResult {
                suggested_host: feasible[0].name().to_owned(),
                evaluated_nodes: 1 + diagnosis.node_to_status.statuses.len(),
                feasible_nodes: 1,
            });
        }
        let scores = prioritize_nodes(fwk, state, pod, snapshot, &feasible)
            .map_err(ScheduleError::Status)?;
        let host = select_host(&scores).ok_or(ScheduleError::NoNodesAvailable)?;
        Ok(ScheduleResult {
            suggested_host: host,
            evaluated_nodes: evaluated,
            feasible_nodes: feasible.len(),
        })
    }

    /// PreFilter, the nominated node, then Filter (upstream `findNodesThatFitPod`).
    pub fn find_nodes_that_fit_pod(
        &mut self,
        fwk: &Framework,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
    ) -> Result<(Vec<Arc<NodeInfo>>, Diagnosis), ScheduleError> {
        let mut diagnosis = Diagnosis::default();
        let (pre_res, s, rejected) = fwk.run_pre_filter_plugins(state, pod, snapshot);
        diagnosis.unschedulable_plugins = rejected;
        if !s.is_success() {
            if !s.is_rejected() {
                return Err(ScheduleError::Status(s));
            }
            diagnosis.pre_filter_msg = s.message();
            if !s.plugin().is_empty() {
                add_plugin_status(&mut diagnosis, &s);
            }
            diagnosis.node_to_status.absent = Some(s);
            return Ok((Vec::new(), diagnosis));
        }
        let nominated = pod
            .pod
            .status
            .as_ref()
            .and_then(|s| s.nominated_node_name.as_deref())
            .filter(|n| !n.is_empty());
        if let Some(node) = nominated.and_then(|n| snapshot.get(n)) {
            let s = fwk.run_filter_plugins_with_nominated_pods(state, pod, node);
            if s.is_success() {
                return Ok((vec![Arc::clone(node)], diagnosis));
            }
        }
        let restricted: Vec<Arc<NodeInfo>>;
        let nodes: &[Arc<NodeInfo>] = match pre_res.and_then(|r| r.node_names) {
            None => snapshot.list(),
            Some(names) => {
                diagnosis.node_to_status.absent =
                    Some(Status::unresolvable(FILTERED_OUT_BY_PRE_FILTER));
                restricted = names
                    .iter()
                    .filter_map(|n| snapshot.get(n).cloned())
                    .collect();
                &restricted
            }
        };
        let feasible = self.find_nodes_that_pass_filters(fwk, state, pod, &mut diagnosis, nodes)?;
        let processed = feasible.len() + diagnosis.node_to_status.statuses.len();
        let all = snapshot.num_nodes().max(1);
        self.next_start_node_index = (self.next_start_node_index + processed) % all;
        Ok((feasible, diagnosis))
    }

    fn find_nodes_that_pass_filters(
        &self,
        fwk: &Framework,
        state: &CycleState,
        pod: &PodInfo,
        diagnosis: &mut Diagnosis,
        nodes: &[Arc<NodeInfo>],
    ) -> Result<Vec<Arc<NodeInfo>>, ScheduleError> {
        let n = nodes.len();
        if n == 0 {
            return Ok(Vec::new());
        }
        let percentage = fwk
            .percentage_of_nodes_to_score()
            .unwrap_or(self.percentage_of_nodes_to_score);
        let to_find = num_feasible_nodes_to_find(percentage, n);
        let start = self.next_start_node_index % n;
        let mut feasible = Vec::with_capacity(to_find.min(n));
        if !fwk.has_filter_plugins() {
            feasible.extend((0..to_find).map(|i| Arc::clone(&nodes[(start + i) % n])));
            return Ok(feasible);
        }
        let nominations = fwk.handle().nominator.has_nominated_pods();
        for i in 0..n {
            let node = &nodes[(start + i) % n];
            let s = if nominations {
                fwk.run_filter_plugins_with_nominated_pods(state, pod, node)
            } else {
                fwk.run_filter_plugins(state, pod, node)
            };
            if s.is_success() {
                feasible.push(Arc::clone(node));
                if feasible.len() >= to_find {
                    break;
                }
            } else if s.code() == crate::framework::Code::Error {
                return Err(ScheduleError::Status(s));
            } else {
                add_plugin_status(diagnosis, &s);
                diagnosis
                    .node_to_status
                    .statuses
                    .insert(node.name().to_owned(), s);
            }
        }
        Ok(feasible)
    }
}

fn add_plugin_status(diagnosis: &mut Diagnosis, s: &Status) {
    if s.plugin().is_empty() {
        return;
    }
    if rejects(s) {
        diagnosis.unschedulable_plugins.insert(s.plugin());
    } else if s.code() == crate::framework::Code::Pending {
        diagnosis.pending_plugins.insert(s.plugin());
    }
}

/// PreScore and Score over the feasible nodes (upstream `prioritizeNodes`); without Score
/// plugins every node scores 1.
pub fn prioritize_nodes(
    fwk: &Framework,
    state: &mut CycleState,
    pod: &PodInfo,
    snapshot: &Snapshot,
    nodes: &[Arc<NodeInfo>],
) -> Result<Vec<NodeScore>, Status> {
    if !fwk.has_score_plugins() {
        return Ok(nodes
            .iter()
            .map(|n| NodeScore {
                name: n.name().to_owned(),
                score: 1,
            })
            .collect());
    }
    let s = fwk.run_pre_score_plugins(state, pod, snapshot, nodes);
    if !s.is_success() {
        return Err(s);
    }
    fwk.run_score_plugins(state, pod, nodes)
}

/// The node with the highest score, a tie broken uniformly at random (reservoir sampling,
/// as upstream `selectHost`). None when `scores` is empty.
pub fn select_host(scores: &[NodeScore]) -> Option<String> {
    let mut rng = rand::rng();
    let mut best: Option<&NodeScore> = None;
    let mut ties = 0u32;
    for s in scores {
        match best {
            Some(b) if s.score < b.score => {}
            Some(b) if s.score == b.score => {
                ties += 1;
                if rng.random_range(0..ties) == 0 {
                    best = Some(s);
                }
            }
            _ => {
                best = Some(s);
                ties = 1;
            }
        }
    }
    best.map(|b| b.name.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feasible_nodes_to_find_as_upstream() {
        assert_eq!(num_feasible_nodes_to_find(0, 10), 10);
        assert_eq!(num_feasible_nodes_to_find(0, 99), 99);
        // 1000 nodes: 50 - 8 = 42 %.
        assert_eq!(num_feasible_nodes_to_find(0, 1000), 420);
        // 5000 nodes: 50 - 40 = 10 %.
        assert_eq!(num_feasible_nodes_to_find(0, 5000), 500);
        // 6000 nodes: 50 - 48 = 2 % -> at least 5 %.
        assert_eq!(num_feasible_nodes_to_find(0, 6000), 300);
        assert_eq!(num_feasible_nodes_to_find(1, 1000), 100);
        assert_eq!(num_feasible_nodes_to_find(100, 1000), 1000);
        assert_eq!(num_feasible_nodes_to_find(30, 1000), 300);
    }

    #[test]
    fn select_host_takes_the_best_and_spreads_ties() {
        let scores = |v: &[(&str, i64)]| -> Vec<NodeScore> {
            v.iter()
                .map(|(n, s)| NodeScore {
                    name: (*n).into(),
                    score: *s,
                })
                .collect()
        };
        assert_eq!(select_host(&[]), None);
        assert_eq!(
            select_host(&scores(&[("a", 1), ("b", 3), ("c", 2)])).as_deref(),
            Some("b")
        );
        let tie = scores(&[("a", 5), ("b", 5), ("c", 1)]);
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..200 {
            seen.insert(select_host(&tie).unwrap_or_default());
        }
        assert_eq!(seen, ["a".to_owned(), "b".to_owned()].into());
    }
}
