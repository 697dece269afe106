//! Helpers shared by the in-tree plugins (upstream `framework/plugins/helper`): score
//! normalization ([`default_normalize_score`]), the broken linear function of
//! RequestedToCapacityRatio ([`build_broken_linear_function`]) and plugin args parsing.

use serde::de::DeserializeOwned;

use crate::error::Error;
use crate::framework::status::Status;
use crate::framework::types::NodeScore;

/// Scales `scores` into `0..=max_priority` in proportion to the highest score (upstream
/// `helper.DefaultNormalizeScore`): `score * max_priority / highest`, then
/// `max_priority - score` when `reverse`. When every score is 0 they stay 0, or all
/// become `max_priority` when `reverse`. Always Success.
pub fn default_normalize_score(
    max_priority: i64,
    reverse: bool,
    scores: &mut [NodeScore],
) -> Status {
    let max_count = scores.iter().map(|s| s.score).fold(0, i64::max);
    if max_count == 0 {
        if reverse {
            for s in scores.iter_mut() {
                s.score = max_priority;
            }
        }
        return Status::success();
    }
    for s in scores.iter_mut() {
        let mut score = max_priority.saturating_mul(s.score) / max_count;
        if reverse {
            score = max_priority - score;
        }
        s.score = score;
    }
    Status::success()
}

/// One point of a broken linear function: at `utilization` (0..=100) the score is
/// `score` (upstream `helper.FunctionShapePoint`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FunctionShapePoint {
    /// The utilization, x.
    pub utilization: i64,
    /// The score, y.
    pub score: i64,
}

/// The function through `shape` (points sorted by increasing utilization), constant
/// before the first and after the last point (upstream `helper.BuildBrokenLinearFunction`).
/// An empty shape gives 0 everywhere.
pub fn build_broken_linear_function(
    shape: Vec<FunctionShapePoint>,
) -> impl Fn(i64) -> i64 + Send + Sync + 'static {
    move |p: i64| {
        let mut prev: Option<&FunctionShapePoint> = None;
        for point in &shape {
            if p <= point.utilization {
                return match prev {
                    None => point.score,
                    Some(prev) => {
                        let dx = point.utilization - prev.utilization;
                        if dx == 0 {
                            point.score
                        } else {
                            prev.score + (point.score - prev.score) * (p - prev.utilization) / dx
                        }
                    }
                };
            }
            prev = Some(point);
        }
        shape.last().map_or(0, |last| last.score)
    }
}

/// Decodes a plugin's `args` object (`kind` and `apiVersion` are ignored) into `T`; the
/// defaults when `args` is None. Errors: [`Error::Config`] naming `kind` and why.
pub fn parse_args<T: DeserializeOwned + Default>(
    kind: &str,
    args: Option<&serde_json::Value>,
) -> Result<T, Error> {
    match args {
        None | Some(serde_json::Value::Null) => Ok(T::default()),
        Some(v) => serde_json::from_value(v.clone())
            .map_err(|e| Error::Config(format!("decoding {kind}: {e}"))),
    }
}

/// Helpers for the plugins' unit tests: nodes, pods and a handle without a client.
#[cfg(test)]
pub(crate) mod testing {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::{
        Container, Node, NodeSpec, NodeStatus, Pod, PodSpec, ResourceRequirements,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use crate::framework::runtime::{Handle, LogRecorder, Nominator};
    use crate::framework::types::PodInfo;
    use crate::informers::Listers;

    struct NoNominator;

    impl Nominator for NoNominator {
        fn nominated_pods_for_node(&self, _: &str) -> Vec<Arc<PodInfo>> {
            Vec::new()
        }
        fn add_nominated_pod(&self, _: Arc<PodInfo>, _: &str) {}
        fn delete_nominated_pod(&self, _: &str) {}
    }

    /// A handle with no client.
    pub fn handle() -> Arc<Handle> {
        Arc::new(Handle::new(
            None,
            Arc::new(Listers::default()),
            Arc::new(NoNominator),
            Arc::new(LogRecorder),
        ))
    }

    /// A resource list from `(name, quantity)` pairs.
    pub fn list(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned())))
            .collect()
    }

    /// A node named `name` with `allocatable` (and capacity) from `pairs`.
    pub fn node(name: &str, pairs: &[(&str, &str)]) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: Some(NodeSpec::default()),
            status: Some(NodeStatus {
                allocatable: Some(list(pairs)),
                capacity: Some(list(pairs)),
                ..Default::default()
            }),
        }
    }

    /// A container with `requests`.
    pub fn container(name: &str, requests: &[(&str, &str)]) -> Container {
        Container {
            name: name.into(),
            resources: Some(ResourceRequirements {
                requests: (!requests.is_empty()).then(|| list(requests)),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// A pod `default/<name>` (uid `<name>`) with one container per entry of `requests`.
    pub fn pod(name: &str, requests: &[&[(&str, &str)]]) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                uid: Some(name.into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: requests
                    .iter()
                    .enumerate()
                    .map(|(i, r)| container(&format!("c{i}"), r))
                    .collect(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// Runs PreScore, Score and NormalizeScore of `plugin` for `pod` over `nodes` (in a
    /// snapshot of them) as the framework does; all 0 when PreScore skips.
    pub fn run_score(
        plugin: &dyn crate::framework::interface::Plugin,
        pod: &PodInfo,
        nodes: Vec<crate::framework::types::NodeInfo>,
    ) -> Vec<i64> {
        use crate::framework::cycle_state::CycleState;
        use crate::framework::snapshot::Snapshot;
        use crate::framework::types::NodeScore;
        let snapshot = Snapshot::from_node_infos(nodes);
        let nodes = snapshot.list();
        let mut state = CycleState::new();
        state.write(
            crate::framework::runtime::NUM_ALL_NODES_KEY,
            crate::framework::runtime::NumAllNodes(snapshot.num_nodes()),
        );
        if let Some(ps) = plugin.as_pre_score() {
            let s = ps.pre_score(&mut state, pod, &snapshot, nodes);
            if s.is_skip() {
                return vec![0; nodes.len()];
            }
            assert!(s.is_success(), "PreScore: {s}");
        }
        let sp = plugin.as_score().expect("a Score plugin");
        let mut scores: Vec<NodeScore> = nodes
            .iter()
            .map(|n| {
                let (score, s) = sp.score(&state, pod, n);
                assert!(s.is_success(), "Score: {s}");
                NodeScore {
                    name: n.name().to_owned(),
                    score,
                }
            })
            .collect();
        let s = sp.normalize_score(&state, pod, &mut scores);
        assert!(s.is_success(), "NormalizeScore: {s}");
        scores.into_iter().map(|s| s.score).collect()
    }

    /// `pod` placed on `node_name`.
    pub fn on_node(mut pod: Pod, node_name: &str) -> Pod {
        if let Some(spec) = pod.spec.as_mut() {
            spec.node_name = Some(node_name.into());
        }
        pod
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scores(values: &[i64]) -> Vec<NodeScore> {
        values
            .iter()
            .enumerate()
            .map(|(i, s)| NodeScore {
                name: format!("n{i}"),
                score: *s,
            })
            .collect()
    }

    fn values(scores: &[NodeScore]) -> Vec<i64> {
        scores.iter().map(|s| s.score).collect()
    }

    // Upstream normalize_score_test.go.
    #[test]
    fn default_normalize_score_table() {
        let cases: [(&[i64], bool, &[i64]); 6] = [
            (&[10, 20, 30], false, &[33, 66, 100]),
            (&[10, 20, 30], true, &[67, 34, 0]),
            (&[0, 0, 0], false, &[0, 0, 0]),
            (&[0, 0, 0], true, &[100, 100, 100]),
            (&[100, 80, 0], false, &[100, 80, 0]),
            (&[50, 50, 100], true, &[50, 50, 0]),
        ];
        for (input, reverse, want) in cases {
            let mut s = scores(input);
            assert!(default_normalize_score(100, reverse, &mut s).is_success());
            assert_eq!(values(&s), want, "{input:?} reverse={reverse}");
        }
    }

    // Upstream shape_score_test.go.
    #[test]
    fn broken_linear_function_table() {
        let shape = vec![
            FunctionShapePoint {
                utilization: 10,
                score: 1,
            },
            FunctionShapePoint {
                utilization: 90,
                score: 9,
            },
        ];
        let f = build_broken_linear_function(shape);
        for (p, want) in [
            (-10, 1),
            (0, 1),
            (9, 1),
            (10, 1),
            (15, 1),
            (20, 2),
            (50, 5),
            (89, 8),
            (90, 9),
            (99, 9),
            (100, 9),
            (110, 9),
        ] {
            assert_eq!(f(p), want, "p={p}");
        }
        let f = build_broken_linear_function(vec![
            FunctionShapePoint {
                utilization: 0,
                score: 0,
            },
            FunctionShapePoint {
                utilization: 100,
                score: 100,
            },
        ]);
        assert_eq!(f(37), 37);
        assert_eq!(build_broken_linear_function(Vec::new())(5), 0);
    }

    #[derive(serde::Deserialize, Default, Debug, PartialEq)]
    #[serde(rename_all = "camelCase")]
    struct Args {
        #[serde(default)]
        some_field: i32,
    }

    #[test]
    fn parse_args_defaults_and_errors() {
        assert_eq!(parse_args::<Args>("X", None).unwrap(), Args::default());
        let v = serde_json::json!({"kind": "X", "someField": 3});
        assert_eq!(parse_args::<Args>("X", Some(&v)).unwrap().some_field, 3);
        let bad = serde_json::json!({"someField": "no"});
        let err = parse_args::<Args>("XArgs", Some(&bad)).unwrap_err();
        assert!(err.to_string().contains("decoding XArgs"), "{err}");
    }
}
