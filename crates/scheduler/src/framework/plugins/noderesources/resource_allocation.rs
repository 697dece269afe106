//! The scorer NodeResourcesFit and NodeResourcesBalancedAllocation share (upstream
//! `resource_allocation.go`, `least_allocated.go`, `most_allocated.go`,
//! `requested_to_capacity_ratio.go`).

use skiff_api::core::pod::requests::ResourceAmounts;
use skiff_api::core::scheduling_predicates::fit::is_scalar_resource_name;

use super::ResourceSpec;
use crate::framework::plugins::helper::{FunctionShapePoint, build_broken_linear_function};
use crate::framework::status::Status;
use crate::framework::types::{MAX_NODE_SCORE, NodeInfo, PodInfo};

/// The highest score of a RequestedToCapacityRatio shape point (upstream
/// `config.MaxCustomPriorityScore`).
pub const MAX_CUSTOM_PRIORITY_SCORE: i64 = 10;
/// The utilization of a full node, in percent (upstream `maxUtilization`).
const MAX_UTILIZATION: i64 = 100;

type ShapeFn = Box<dyn Fn(i64) -> i64 + Send + Sync>;

/// How the per-resource `(requested, allocatable)` amounts become a score.
pub enum Strategy {
    /// Favors nodes with more room left (upstream `leastResourceScorer`).
    LeastAllocated,
    /// Favors nodes with less room left (upstream `mostResourceScorer`).
    MostAllocated,
    /// The utilization mapped through a broken linear function (upstream
    /// `requestedToCapacityRatioScorer`).
    RequestedToCapacityRatio(ShapeFn),
    /// `(1 - std deviation of the utilization fractions) * 100` (upstream
    /// `balancedResourceScorer`).
    Balanced,
}

impl std::fmt::Debug for Strategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::LeastAllocated => "LeastAllocated",
            Self::MostAllocated => "MostAllocated",
            Self::RequestedToCapacityRatio(_) => "RequestedToCapacityRatio",
            Self::Balanced => "Balanced",
        })
    }
}

impl Strategy {
    /// RequestedToCapacityRatio over `(utilization, score)` points, scores 0..=10
    /// scaled to 0..=100.
    pub fn requested_to_capacity_ratio(shape: &[(i64, i64)]) -> Self {
        let points = shape
            .iter()
            .map(|&(utilization, score)| FunctionShapePoint {
                utilization,
                score: score * (MAX_NODE_SCORE / MAX_CUSTOM_PRIORITY_SCORE),
            })
            .collect();
        Self::RequestedToCapacityRatio(Box::new(build_broken_linear_function(points)))
    }
}

/// Scores a node from what the pod requests and what the node has (upstream
/// `resourceAllocationScorer`).
#[derive(Debug)]
pub struct ResourceAllocationScorer {
    /// The resources scored, with weights.
    pub resources: Vec<ResourceSpec>,
    /// Count the pods' real requests (true) or their non-zero requests (false, the
    /// scheduler's 100m / 200 MiB defaults for containers that request nothing).
    pub use_requested: bool,
    /// The formula.
    pub strategy: Strategy,
}

impl ResourceAllocationScorer {
    /// The pod's request of each of [`resources`](Self::resources), in order (upstream
    /// `calculatePodResourceRequestList`).
    pub fn pod_request_list(&self, pod: &PodInfo) -> Vec<i64> {
        let requests = if self.use_requested {
            &pod.requests
        } else {
            &pod.non_zero_requests
        };
        self.resources
            .iter()
            .map(|r| requests.get(&r.name).copied().unwrap_or(0))
            .collect()
    }

    /// `(allocatable, requested with the pod)` of one resource on the node; `(0, 0)` for
    /// a scalar resource the pod does not request or a resource the node lacks
    /// (upstream `calculateResourceAllocatableRequest`).
    fn allocatable_and_requested(
        &self,
        node: &NodeInfo,
        name: &str,
        pod_request: i64,
    ) -> (i64, i64) {
        if pod_request == 0 && is_scalar_resource_name(name) {
            return (0, 0);
        }
        let get = |m: &ResourceAmounts| m.get(name).copied().unwrap_or(0);
        let requested = match name {
            "cpu" | "memory" if !self.use_requested => get(node.non_zero_requested()),
            _ => get(node.requested()),
        };
        match node.allocatable().get(name) {
            Some(&alloc) => (alloc, requested.saturating_add(pod_request)),
            None => (0, 0),
        }
    }

    /// The node's score for the pod's `pod_requests` (from
    /// [`pod_request_list`](Self::pod_request_list)). Error: no resources configured.
    pub fn score(&self, node: &NodeInfo, pod_requests: &[i64]) -> (i64, Status) {
        if self.resources.is_empty() {
            return (0, Status::error("resources not found"));
        }
        // Per node and pod: on the stack for the usual handful of resources.
        const INLINE: usize = 8;
        let n = self.resources.len();
        let (mut req_inline, mut alloc_inline) = ([0_i64; INLINE], [0_i64; INLINE]);
        let (mut req_heap, mut alloc_heap) = (Vec::new(), Vec::new());
        let (requested, allocatable): (&mut [i64], &mut [i64]) = if n <= INLINE {
            (&mut req_inline[..n], &mut alloc_inline[..n])
        } else {
            req_heap.resize(n, 0);
            alloc_heap.resize(n, 0);
            (&mut req_heap, &mut alloc_heap)
        };
        for (i, r) in self.resources.iter().enumerate() {
            let pod_request = pod_requests.get(i).copied().unwrap_or(0);
            let (alloc, req) = self.allocatable_and_requested(node, &r.name, pod_request);
            if alloc == 0 {
                continue;
            }
            allocatable[i] = alloc;
            requested[i] = req;
        }
        (
            self.score_amounts(requested, allocatable),
            Status::success(),
        )
    }

    fn weighted(
        &self,
        requested: &[i64],
        allocatable: &[i64],
        per_resource: impl Fn(i64, i64) -> i64,
        skip_zero: bool,
    ) -> (i64, i64) {
        let (mut node_score, mut weight_sum) = (0_i64, 0_i64);
        for ((r, &req), &alloc) in self.resources.iter().zip(requested).zip(allocatable) {
            if alloc == 0 {
                continue;
            }
            let score = per_resource(req, alloc);
            if skip_zero && score <= 0 {
                continue;
            }
            node_score += score * r.weight;
            weight_sum += r.weight;
        }
        (node_score, weight_sum)
    }

    /// The strategy's formula over per-resource amounts (resources with 0 allocatable are
    /// left out).
    pub fn score_amounts(&self, requested: &[i64], allocatable: &[i64]) -> i64 {
        match &self.strategy {
            Strategy::LeastAllocated => {
                let (s, w) = self.weighted(requested, allocatable, least_requested_score, false);
                if w == 0 { 0 } else { s / w }
            }
            Strategy::MostAllocated => {
                let (s, w) = self.weighted(requested, allocatable, most_requested_score, false);
                if w == 0 { 0 } else { s / w }
            }
            Strategy::RequestedToCapacityRatio(f) => {
                let per = |req: i64, cap: i64| {
                    if cap == 0 || req > cap {
                        f(MAX_UTILIZATION)
                    } else {
                        f(req * MAX_UTILIZATION / cap)
                    }
                };
                let (s, w) = self.weighted(requested, allocatable, per, true);
                if w == 0 {
                    0
                } else {
                    // Round half away from zero, as Go's math.Round.
                    (s as f64 / w as f64).round() as i64
                }
            }
            Strategy::Balanced => balanced_resource_score(requested, allocatable),
        }
    }
}

/// `(capacity - requested) * 100 / capacity`, 0 when over capacity (upstream
/// `leastRequestedScore`).
pub fn least_requested_score(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 || requested > capacity {
        return 0;
    }
    (capacity - requested) * MAX_NODE_SCORE / capacity
}

/// `requested * 100 / capacity`, requested capped at capacity (upstream
/// `mostRequestedScore`).
pub fn most_requested_score(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 {
        return 0;
    }
    requested.min(capacity) * MAX_NODE_SCORE / capacity
}

/// `(1 - std) * 100` over the fractions `requested / allocatable` (capped at 1) of the
/// resources with allocatable; with two resources std is half their difference
/// (upstream `balancedResourceScorer`).
pub fn balanced_resource_score(requested: &[i64], allocatable: &[i64]) -> i64 {
    let fractions: Vec<f64> = requested
        .iter()
        .zip(allocatable)
        .filter(|(_, a)| **a != 0)
        .map(|(r, a)| (*r as f64 / *a as f64).min(1.0))
        .collect();
    let std = match fractions.as_slice() {
        [a, b] => ((a - b) / 2.0).abs(),
        f if f.len() > 2 => {
            let n = f.len() as f64;
            let mean = f.iter().sum::<f64>() / n;
            (f.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n).sqrt()
        }
        _ => 0.0,
    };
    ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::Pod;

    use crate::framework::plugins::helper::testing;
    use crate::framework::plugins::noderesources::fit;
    use crate::framework::types::{NodeInfo, PodInfo};

    /// Two containers, 1000m + 2000m cpu, memory explicitly 0 (upstream `cpuOnly`).
    pub fn cpu_only(name: &str) -> Pod {
        testing::pod(
            name,
            &[
                &[("cpu", "1000m"), ("memory", "0")],
                &[("cpu", "2000m"), ("memory", "0")],
            ],
        )
    }

    /// Two containers, 1000m + 2000m cpu, 2000 + 3000 memory (upstream `cpuAndMemory`).
    pub fn cpu_and_memory(name: &str) -> Pod {
        testing::pod(
            name,
            &[
                &[("cpu", "1000m"), ("memory", "2000")],
                &[("cpu", "2000m"), ("memory", "3000")],
            ],
        )
    }

    /// A node with `cpu` and `memory` allocatable, 110 pods, and `pods` on it.
    pub fn node(name: &str, cpu: &str, memory: &str, pods: Vec<Pod>) -> NodeInfo {
        let mut n = NodeInfo::new(testing::node(
            name,
            &[("cpu", cpu), ("memory", memory), ("pods", "110")],
        ));
        for p in pods {
            n.add_pod(Arc::new(PodInfo::new(testing::on_node(p, name))));
        }
        n
    }

    fn fit_scores(args: serde_json::Value, pod: Pod, nodes: Vec<NodeInfo>) -> Vec<i64> {
        let plugin = fit::new(Some(&args), &testing::handle()).unwrap();
        testing::run_score(plugin.as_ref(), &PodInfo::new(pod), nodes)
    }

    fn strategy(type_: &str) -> serde_json::Value {
        serde_json::json!({"scoringStrategy": {"type": type_, "resources": [
            {"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]}})
    }

    // Upstream least_allocated_test.go.
    #[test]
    fn least_allocated_table() {
        let empty = || testing::pod("p", &[]);
        let cases: Vec<(&str, Pod, Vec<NodeInfo>, Vec<i64>)> = vec![
            (
                "nothing scheduled, nothing requested",
                empty(),
                vec![
                    node("n1", "4000m", "10000", vec![]),
                    node("n2", "4000m", "10000", vec![]),
                ],
                vec![100, 100],
            ),
            (
                "nothing scheduled, resources requested, differently sized nodes",
                cpu_and_memory("p"),
                vec![
                    node("n1", "4000m", "10000", vec![]),
                    node("n2", "6000m", "10000", vec![]),
                ],
                vec![37, 50],
            ),
            (
                "no resources requested, pods scheduled",
                empty(),
                vec![
                    node("n1", "4000m", "10000", vec![empty(), empty()]),
                    node("n2", "4000m", "10000", vec![empty()]),
                ],
                vec![100, 100],
            ),
            (
                "no resources requested, pods scheduled with resources",
                empty(),
                vec![
                    node("n1", "10000m", "20000", vec![cpu_only("a"), cpu_only("b")]),
                    node(
                        "n2",
                        "10000m",
                        "20000",
                        vec![cpu_only("c"), cpu_and_memory("d")],
                    ),
                ],
                vec![70, 57],
            ),
            (
                "resources requested, pods scheduled with resources",
                cpu_and_memory("p"),
                vec![
                    node("n1", "10000m", "20000", vec![cpu_only("a")]),
                    node("n2", "10000m", "20000", vec![cpu_and_memory("b")]),
                ],
                vec![57, 45],
            ),
            (
                "resources requested, pods scheduled with resources, differently sized nodes",
                cpu_and_memory("p"),
                vec![
                    node("n1", "10000m", "20000", vec![cpu_only("a")]),
                    node("n2", "10000m", "50000", vec![cpu_and_memory("b")]),
                ],
                vec![57, 60],
            ),
            (
                "requested resources exceed node capacity",
                cpu_only("p"),
                vec![
                    node("n1", "4000m", "10000", vec![cpu_only("a")]),
                    node("n2", "4000m", "10000", vec![cpu_and_memory("b")]),
                ],
                vec![50, 25],
            ),
            (
                "zero node resources, pods scheduled with resources",
                empty(),
                vec![
                    node("n1", "0", "0", vec![cpu_only("a")]),
                    node("n2", "0", "0", vec![cpu_and_memory("b")]),
                ],
                vec![0, 0],
            ),
            (
                "container without requests counts 100m and 200Mi",
                testing::pod("p", &[&[]]),
                vec![node("n1", "1000m", "2000Mi", vec![])],
                vec![90],
            ),
        ];
        for (name, pod, nodes, want) in cases {
            assert_eq!(
                fit_scores(strategy("LeastAllocated"), pod, nodes),
                want,
                "{name}"
            );
        }
        // The default strategy is LeastAllocated over cpu and memory.
        let plugin = fit::new(None, &testing::handle()).unwrap();
        let got = testing::run_score(
            plugin.as_ref(),
            &PodInfo::new(cpu_and_memory("p")),
            vec![
                node("n1", "4000m", "10000", vec![]),
                node("n2", "6000m", "10000", vec![]),
            ],
        );
        assert_eq!(got, [37, 50]);
    }

    #[test]
    fn least_allocated_weights_and_extended_resources() {
        let weighted = serde_json::json!({"scoringStrategy": {"type": "LeastAllocated", "resources": [
            {"name": "cpu", "weight": 2}, {"name": "memory", "weight": 1}]}});
        // cpu (10000-3000)/10000 = 70 x2, memory (20000-5000)/20000 = 75: 215 / 3.
        assert_eq!(
            fit_scores(
                weighted,
                cpu_and_memory("p"),
                vec![node("n", "10000m", "20000", vec![])]
            ),
            [71]
        );
        let with_gpu = serde_json::json!({"scoringStrategy": {"type": "LeastAllocated", "resources": [
            {"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}, {"name": "abc.com/xyz", "weight": 1}]}});
        let gpu_node = || {
            NodeInfo::new(testing::node(
                "n",
                &[
                    ("cpu", "4000m"),
                    ("memory", "10000"),
                    ("abc.com/xyz", "4"),
                    ("pods", "10"),
                ],
            ))
        };
        let asks = testing::pod(
            "p",
            &[&[("cpu", "1000m"), ("memory", "2000"), ("abc.com/xyz", "2")]],
        );
        // cpu 75, memory 80, xyz 50.
        assert_eq!(fit_scores(with_gpu.clone(), asks, vec![gpu_node()]), [68]);
        // A scalar resource the pod does not request is left out.
        let no_gpu = testing::pod("p", &[&[("cpu", "1000m"), ("memory", "2000")]]);
        assert_eq!(fit_scores(with_gpu, no_gpu, vec![gpu_node()]), [77]);
    }

    // Upstream most_allocated_test.go.
    #[test]
    fn most_allocated_table() {
        let empty = || testing::pod("p", &[]);
        let cases: Vec<(&str, Pod, Vec<NodeInfo>, Vec<i64>)> = vec![
            (
                "nothing scheduled, nothing requested",
                empty(),
                vec![
                    node("n1", "4000m", "10000", vec![]),
                    node("n2", "4000m", "10000", vec![]),
                ],
                vec![0, 0],
            ),
            (
                "nothing scheduled, resources requested, differently sized nodes",
                cpu_and_memory("p"),
                vec![
                    node("n1", "4000m", "10000", vec![]),
                    node("n2", "6000m", "10000", vec![]),
                ],
                vec![62, 50],
            ),
            (
                "no resources requested, pods scheduled with resources",
                empty(),
                vec![
                    node("n1", "10000m", "20000", vec![cpu_only("a"), cpu_only("b")]),
                    node(
                        "n2",
                        "10000m",
                        "20000",
                        vec![cpu_only("c"), cpu_and_memory("d")],
                    ),
                ],
                vec![30, 42],
            ),
            (
                "resources requested, pods scheduled with resources",
                cpu_and_memory("p"),
                vec![
                    node("n1", "10000m", "20000", vec![cpu_only("a")]),
                    node("n2", "10000m", "20000", vec![cpu_and_memory("b")]),
                ],
                vec![42, 55],
            ),
            (
                "requested more than the node: capped at 100",
                testing::pod(
                    "p",
                    &[
                        &[("cpu", "2000m"), ("memory", "4000")],
                        &[("cpu", "3000m"), ("memory", "5000")],
                    ],
                ),
                vec![
                    node("n1", "4000m", "10000", vec![]),
                    node("n2", "6000m", "10000", vec![]),
                ],
                vec![95, 86],
            ),
        ];
        for (name, pod, nodes, want) in cases {
            assert_eq!(
                fit_scores(strategy("MostAllocated"), pod, nodes),
                want,
                "{name}"
            );
        }
    }

    // Upstream requested_to_capacity_ratio_test.go.
    #[test]
    fn requested_to_capacity_ratio_table() {
        let args = serde_json::json!({"scoringStrategy": {"type": "RequestedToCapacityRatio",
            "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}],
            "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}]}}});
        let empty = || testing::pod("p", &[]);
        let cases: Vec<(&str, Pod, Vec<NodeInfo>, Vec<i64>)> = vec![
            (
                "nothing scheduled, nothing requested",
                empty(),
                vec![
                    node("n1", "4000m", "10000", vec![]),
                    node("n2", "4000m", "10000", vec![]),
                ],
                vec![100, 100],
            ),
            (
                "nothing scheduled, resources requested, differently sized nodes",
                cpu_and_memory("p"),
                vec![
                    node("n1", "4000m", "10000", vec![]),
                    node("n2", "6000m", "10000", vec![]),
                ],
                vec![38, 50],
            ),
            (
                "no resources requested, pods scheduled with resources",
                empty(),
                vec![
                    node("n1", "10000m", "20000", vec![cpu_only("a"), cpu_only("b")]),
                    node(
                        "n2",
                        "10000m",
                        "20000",
                        vec![cpu_only("c"), cpu_and_memory("d")],
                    ),
                ],
                vec![70, 58],
            ),
        ];
        for (name, pod, nodes, want) in cases {
            assert_eq!(fit_scores(args.clone(), pod, nodes), want, "{name}");
        }
        // Bin packing: the fuller node wins.
        let packing = serde_json::json!({"scoringStrategy": {"type": "RequestedToCapacityRatio",
            "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}}});
        let got = fit_scores(
            packing,
            cpu_and_memory("p"),
            vec![
                node("n1", "4000m", "10000", vec![]),
                node("n2", "6000m", "10000", vec![]),
            ],
        );
        // n1: cpu 75, memory 50 -> 62.5 -> 63; n2: 50, 50.
        assert_eq!(got, [63, 50]);
    }

    #[test]
    fn scorer_formulas() {
        use super::*;
        assert_eq!(least_requested_score(3000, 4000), 25);
        assert_eq!(least_requested_score(5000, 4000), 0);
        assert_eq!(least_requested_score(1, 0), 0);
        assert_eq!(most_requested_score(3000, 4000), 75);
        assert_eq!(most_requested_score(5000, 4000), 100);
        assert_eq!(balanced_resource_score(&[3000, 5000], &[4000, 10000]), 87);
        assert_eq!(balanced_resource_score(&[1, 1], &[0, 0]), 100);
    }
}
