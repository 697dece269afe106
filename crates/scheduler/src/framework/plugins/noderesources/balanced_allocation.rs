//! NodeResourcesBalancedAllocation (upstream `noderesources/balanced_allocation.go`):
//! prefers nodes whose resources would be used in the most even proportions.

use std::sync::Arc;

use serde::Deserialize;

use super::resource_allocation::{ResourceAllocationScorer, Strategy};
use super::{ResourceSpec, default_and_validate_resources};
use crate::error::Error;
use crate::framework::cycle_state::CycleState;
use crate::framework::interface::{Plugin, PreScorePlugin, ScorePlugin};
use crate::framework::plugins::helper::parse_args;
use crate::framework::runtime::Handle;
use crate::framework::snapshot::Snapshot;
use crate::framework::status::Status;
use crate::framework::types::{NodeInfo, PodInfo};

/// The plugin's name (upstream `names.NodeResourcesBalancedAllocation`).
pub const NAME: &str = "NodeResourcesBalancedAllocation";
const PRE_SCORE_STATE_KEY: &str = "PreScoreNodeResourcesBalancedAllocation";

/// The plugin's args (upstream `NodeResourcesBalancedAllocationArgs`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeResourcesBalancedAllocationArgs {
    /// The resources balanced (default `cpu` and `memory`).
    #[serde(default)]
    pub resources: Vec<ResourceSpec>,
}

/// Scores by the standard deviation of the utilization fractions (upstream
/// `BalancedAllocation`). Counts the pods' real requests, not the non-zero defaults.
#[derive(Debug)]
pub struct BalancedAllocation {
    scorer: ResourceAllocationScorer,
}

/// Builds the plugin from [`NodeResourcesBalancedAllocationArgs`]. Errors:
/// [`Error::Config`] for args that do not decode or a bad weight.
pub fn new(
    args: Option<&serde_json::Value>,
    _handle: &Arc<Handle>,
) -> Result<Arc<dyn Plugin>, Error> {
    let mut args: NodeResourcesBalancedAllocationArgs =
        parse_args("NodeResourcesBalancedAllocationArgs", args)?;
    default_and_validate_resources(&mut args.resources, "resources")
        .map_err(|e| Error::Config(format!("NodeResourcesBalancedAllocationArgs: {e}")))?;
    Ok(Arc::new(BalancedAllocation {
        scorer: ResourceAllocationScorer {
            resources: args.resources,
            use_requested: true,
            strategy: Strategy::Balanced,
        },
    }))
}

/// The pod's requests of the balanced resources, computed at PreScore.
#[derive(Debug, Clone)]
struct PreScoreState(Vec<i64>);

fn is_best_effort(requests: &[i64]) -> bool {
    requests.iter().all(|r| *r == 0)
}

impl Plugin for BalancedAllocation {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        Some(self)
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
}

impl PreScorePlugin for BalancedAllocation {
    /// Skips pods that request none of the resources, so that best-effort pods do not
    /// all pile onto one node (upstream issue 129138).
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _snapshot: &Snapshot,
        _nodes: &[Arc<NodeInfo>],
    ) -> Status {
        let requests = self.scorer.pod_request_list(pod);
        if is_best_effort(&requests) {
            return Status::skip();
        }
        state.write(PRE_SCORE_STATE_KEY, PreScoreState(requests));
        Status::success()
    }
}

impl ScorePlugin for BalancedAllocation {
    fn score(&self, state: &CycleState, pod: &PodInfo, node_info: &NodeInfo) -> (i64, Status) {
        match state.read::<PreScoreState>(PRE_SCORE_STATE_KEY) {
            Some(PreScoreState(requests)) => self.scorer.score(node_info, requests),
            None => {
                let requests = self.scorer.pod_request_list(pod);
                if is_best_effort(&requests) {
                    return (0, Status::success());
                }
                self.scorer.score(node_info, &requests)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::plugins::helper::testing;
    use crate::framework::plugins::noderesources::resource_allocation::tests::{
        cpu_and_memory, cpu_only, node,
    };

    fn scores(
        args: Option<serde_json::Value>,
        pod: k8s_openapi::api::core::v1::Pod,
        nodes: Vec<NodeInfo>,
    ) -> Vec<i64> {
        let plugin = new(args.as_ref(), &testing::handle()).unwrap();
        testing::run_score(plugin.as_ref(), &PodInfo::new(pod), nodes)
    }

    // Upstream balanced_allocation_test.go.
    #[test]
    fn score_table() {
        let cases: Vec<(
            &str,
            k8s_openapi::api::core::v1::Pod,
            Vec<NodeInfo>,
            Vec<i64>,
        )> = vec![
            (
                "best-effort pod: skipped",
                testing::pod("p", &[&[]]),
                vec![
                    node("n1", "4000m", "10000", vec![]),
                    node("n2", "4000m", "10000", vec![]),
                ],
                vec![0, 0],
            ),
            (
                // n1: cpu 3000/4000 = .75, memory 5000/10000 = .5, std .125 -> 87.
                "nothing scheduled, resources requested, differently sized nodes",
                cpu_and_memory("p"),
                vec![
                    node("n1", "4000m", "10000", vec![]),
                    node("n2", "6000m", "10000", vec![]),
                ],
                vec![87, 100],
            ),
            (
                // n1: cpu .6, memory 0, std .3 -> 70; n2: cpu .6, memory .25 -> 82.
                "resources requested, pods scheduled with resources",
                cpu_only("p"),
                vec![
                    node("n1", "10000m", "20000", vec![cpu_only("a")]),
                    node("n2", "10000m", "20000", vec![cpu_and_memory("b")]),
                ],
                vec![70, 82],
            ),
            (
                "resources requested, pods scheduled with resources, differently sized nodes",
                cpu_and_memory("p"),
                vec![
                    node("n1", "10000m", "20000", vec![cpu_only("a")]),
                    node("n2", "10000m", "50000", vec![cpu_and_memory("b")]),
                ],
                vec![82, 80],
            ),
            (
                "requested resources at node capacity",
                cpu_only("p"),
                vec![
                    node("n1", "6000m", "10000", vec![cpu_only("a")]),
                    node("n2", "6000m", "10000", vec![cpu_and_memory("b")]),
                ],
                vec![50, 75],
            ),
            (
                "zero node resources",
                cpu_only("p"),
                vec![node("n1", "0", "0", vec![cpu_only("a")])],
                vec![100],
            ),
        ];
        for (name, pod, nodes, want) in cases {
            assert_eq!(scores(None, pod, nodes), want, "{name}");
        }
    }

    #[test]
    fn three_resources_use_the_standard_deviation() {
        let args = serde_json::json!({"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": "nvidia.com/gpu", "weight": 1}]});
        let n = NodeInfo::new(testing::node(
            "n",
            &[
                ("cpu", "3000m"),
                ("memory", "5000"),
                ("nvidia.com/gpu", "4"),
                ("pods", "10"),
            ],
        ));
        let pod = testing::pod(
            "p",
            &[&[
                ("cpu", "1000m"),
                ("memory", "2000"),
                ("nvidia.com/gpu", "1"),
            ]],
        );
        // Fractions 1/3, .4, .25: std 0.0614 -> 93.
        assert_eq!(scores(Some(args), pod, vec![n]), [93]);
    }

    #[test]
    fn bad_weight_is_a_config_error() {
        let args = serde_json::json!({"resources": [{"name": "cpu", "weight": 101}]});
        let Err(err) = new(Some(&args), &testing::handle()) else {
            panic!("weight 101 accepted");
        };
        assert!(err.to_string().contains("resources[0].weight"), "{err}");
    }
}
