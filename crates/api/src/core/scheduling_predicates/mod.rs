//! The scheduling predicates the kubelet's admission and the scheduler share, written
//! once: required node affinity and node selectors ([`node_affinity`]), taints and
//! tolerations ([`taints`]), resource, node name and host port fit ([`fit`]), and
//! upstream's `AdmissionCheck` (`pkg/scheduler/schedule_one.go`) over them.

pub mod fit;
pub mod node_affinity;
pub mod taints;

use k8s_openapi::api::core::v1::Pod;

pub use fit::{
    InsufficientResource, NodeInfo, fits, fits_requests, node_name_fits, node_ports_fit,
};
pub use node_affinity::{
    RequiredNodeAffinity, get_required_node_affinity, match_node_selector_terms,
};
pub use taints::{find_matching_untolerated_taint, tolerates_taint, tolerations_tolerate_taint};

/// The NodeAffinity plugin's name (upstream `names.NodeAffinity`).
pub const NODE_AFFINITY: &str = "NodeAffinity";
/// Why a pod does not match a node's labels (upstream `nodeaffinity.ErrReasonPod`).
pub const ERR_REASON_NODE_AFFINITY: &str = "node(s) didn't match Pod's node affinity/selector";
/// The NodeName plugin's name.
pub const NODE_NAME: &str = "NodeName";
/// Why a pod does not match a node's name (upstream `nodename.ErrReason`).
pub const ERR_REASON_NODE_NAME: &str = "node(s) didn't match the requested node name";
/// The NodePorts plugin's name.
pub const NODE_PORTS: &str = "NodePorts";
/// Why a pod's host ports do not fit (upstream `nodeports.ErrReason`).
pub const ERR_REASON_NODE_PORTS: &str =
    "node(s) didn't have free ports for the requested pod ports";
/// The TaintToleration plugin's name.
pub const TAINT_TOLERATION: &str = "TaintToleration";
/// Why a pod does not tolerate a node (upstream `tainttoleration.ErrReasonNotMatch`).
pub const ERR_REASON_TAINT_TOLERATION: &str = "node(s) had taints that the pod didn't tolerate";

/// One failed check of [`admission_check`] (upstream `AdmissionResult`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdmissionResult {
    /// The node lacks a resource.
    InsufficientResource(InsufficientResource),
    /// Another predicate failed: the plugin's `name` and its `reason`.
    Predicate {
        /// The plugin name ([`NODE_AFFINITY`], [`NODE_NAME`], [`NODE_PORTS`]).
        name: &'static str,
        /// The plugin's failure reason.
        reason: &'static str,
    },
}

/// Runs the resource fit, the required node affinity, the node name and the host port
/// checks of `pod` against `node_info`, in that order (upstream `AdmissionCheck`): every
/// failure with `include_all_failures`, else the first check's failures only. Taints are
/// not checked here: the kubelet and the scheduler filter them differently.
pub fn admission_check(
    pod: &Pod,
    node_info: &NodeInfo,
    include_all_failures: bool,
) -> Vec<AdmissionResult> {
    let mut results: Vec<AdmissionResult> = fits(pod, node_info)
        .into_iter()
        .map(AdmissionResult::InsufficientResource)
        .collect();
    if !results.is_empty() && !include_all_failures {
        return results;
    }
    let node = node_info.node();
    let checks: [(bool, &'static str, &'static str); 3] = [
        (
            get_required_node_affinity(pod)
                .matches(node)
                .unwrap_or(false),
            NODE_AFFINITY,
            ERR_REASON_NODE_AFFINITY,
        ),
        (node_name_fits(pod, node), NODE_NAME, ERR_REASON_NODE_NAME),
        (
            node_ports_fit(pod, node_info),
            NODE_PORTS,
            ERR_REASON_NODE_PORTS,
        ),
    ];
    for (ok, name, reason) in checks {
        if !ok {
            results.push(AdmissionResult::Predicate { name, reason });
            if !include_all_failures {
                return results;
            }
        }
    }
    results
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, Node, NodeStatus, PodSpec, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn node() -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some("n1".into()),
                labels: Some([("zone".to_owned(), "a".to_owned())].into()),
                ..Default::default()
            },
            status: Some(NodeStatus {
                allocatable: Some(
                    [
                        ("cpu".to_owned(), Quantity("1".into())),
                        ("pods".to_owned(), Quantity("10".into())),
                    ]
                    .into(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn pod(cpu: &str, zone: &str, node_name: &str) -> Pod {
        Pod {
            spec: Some(PodSpec {
                node_name: Some(node_name.into()),
                node_selector: Some([("zone".to_owned(), zone.to_owned())].into()),
                containers: vec![Container {
                    name: "c".into(),
                    resources: Some(ResourceRequirements {
                        requests: Some([("cpu".to_owned(), Quantity(cpu.into()))].into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn admission_check_orders_and_stops_at_the_first_failure() {
        let info = NodeInfo::new(node(), Default::default());
        assert!(admission_check(&pod("500m", "a", "n1"), &info, true).is_empty());
        let bad = pod("2", "b", "n2");
        let all = admission_check(&bad, &info, true);
        assert_eq!(all.len(), 3, "{all:?}");
        assert!(
            matches!(&all[0], AdmissionResult::InsufficientResource(r) if r.resource_name == "cpu")
        );
        assert_eq!(
            all[1..],
            [
                AdmissionResult::Predicate {
                    name: NODE_AFFINITY,
                    reason: ERR_REASON_NODE_AFFINITY
                },
                AdmissionResult::Predicate {
                    name: NODE_NAME,
                    reason: ERR_REASON_NODE_NAME
                },
            ]
        );
        assert_eq!(admission_check(&bad, &info, false).len(), 1);
        assert_eq!(
            admission_check(&pod("1", "b", "n1"), &info, false),
            [AdmissionResult::Predicate {
                name: NODE_AFFINITY,
                reason: ERR_REASON_NODE_AFFINITY
            }]
        );
    }
}
