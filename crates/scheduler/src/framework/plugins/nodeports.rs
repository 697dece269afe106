//! NodePorts (upstream `framework/plugins/nodeports`): filters out nodes where one of the
//! pod's host ports is already used.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{ContainerPort, Pod};
use skiff_api::core::scheduling_predicates::ERR_REASON_NODE_PORTS;
use skiff_api::core::scheduling_predicates::fit::{HostPortInfo, host_ports};

use crate::error::Error;
use crate::framework::cycle_state::CycleState;
use crate::framework::interface::{
    ActionType, ClusterEventWithHint, EventObject, EventResource, FilterPlugin, Plugin,
    PreFilterPlugin, PreFilterResult, QueueingHint,
};
use crate::framework::runtime::Handle;
use crate::framework::snapshot::Snapshot;
use crate::framework::status::Status;
use crate::framework::types::{NodeInfo, PodInfo};

/// The plugin's name (upstream `names.NodePorts`).
pub const NAME: &str = skiff_api::core::scheduling_predicates::NODE_PORTS;
/// Why a node is filtered out (upstream `nodeports.ErrReason`).
pub const ERR_REASON: &str = ERR_REASON_NODE_PORTS;
const PRE_FILTER_STATE_KEY: &str = "PreFilterNodePorts";

/// Host port conflicts (upstream `NodePorts`). Takes no args.
#[derive(Debug, Default)]
pub struct NodePorts;

/// The pod's host ports, computed at PreFilter.
#[derive(Debug, Clone)]
struct PreFilterState(Vec<ContainerPort>);

/// Builds the plugin; `args` are ignored.
pub fn new(
    _args: Option<&serde_json::Value>,
    _handle: &Arc<Handle>,
) -> Result<Arc<dyn Plugin>, Error> {
    Ok(Arc::new(NodePorts))
}

/// Whether none of `want` clashes with `used` (upstream `fitsPorts`).
fn fits_ports<'a>(want: impl IntoIterator<Item = &'a ContainerPort>, used: &HostPortInfo) -> bool {
    want.into_iter().all(|p| !used.check_conflict(p))
}

/// Queues when a deleted, assigned pod freed a host port the pod wants (upstream
/// `isSchedulableAfterPodDeleted`).
fn is_schedulable_after_pod_deleted(
    pod: &Pod,
    old: EventObject<'_>,
    _new: EventObject<'_>,
) -> QueueingHint {
    let EventObject::Pod(deleted) = old else {
        return QueueingHint::Queue;
    };
    let assigned = deleted
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    let nominated = deleted
        .status
        .as_ref()
        .and_then(|s| s.nominated_node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    if !assigned && !nominated {
        return QueueingHint::QueueSkip;
    }
    let freed = host_ports(deleted);
    if freed.is_empty() {
        return QueueingHint::QueueSkip;
    }
    let mut in_use = HostPortInfo::default();
    for p in freed {
        in_use.add(p);
    }
    if fits_ports(host_ports(pod), &in_use) {
        QueueingHint::QueueSkip
    } else {
        QueueingHint::Queue
    }
}

impl Plugin for NodePorts {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
    fn events_to_register(&self) -> Option<Vec<ClusterEventWithHint>> {
        Some(vec![
            // Ports are immutable: pod updates are ignored.
            ClusterEventWithHint::with_hint(
                EventResource::Pod,
                ActionType::DELETE,
                is_schedulable_after_pod_deleted,
            ),
            ClusterEventWithHint::always(EventResource::Node, ActionType::ADD),
        ])
    }
}

impl PreFilterPlugin for NodePorts {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        let ports: Vec<ContainerPort> = host_ports(&pod.pod).into_iter().cloned().collect();
        if ports.is_empty() {
            return (None, Status::skip());
        }
        state.write(PRE_FILTER_STATE_KEY, PreFilterState(ports));
        (None, Status::success())
    }
}

impl FilterPlugin for NodePorts {
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node_info: &NodeInfo) -> Status {
        let Some(PreFilterState(want)) = state.read::<PreFilterState>(PRE_FILTER_STATE_KEY) else {
            return Status::error(format!(
                "reading {PRE_FILTER_STATE_KEY:?} from cycleState: not found"
            ));
        };
        if fits_ports(want, node_info.resources().used_ports()) {
            Status::success()
        } else {
            Status::unschedulable(ERR_REASON)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::plugins::helper::testing;
    use crate::framework::status::Code;

    /// A pod with one container per `protocol/ip/port` spec (upstream `newPod`).
    fn pod(name: &str, specs: &[&str]) -> Pod {
        let mut p = testing::pod(name, &[&[]]);
        let ports = specs
            .iter()
            .map(|s| {
                let parts: Vec<&str> = s.split('/').collect();
                ContainerPort {
                    protocol: Some(parts[0].to_owned()),
                    host_ip: Some(parts[1].to_owned()),
                    host_port: Some(parts[2].parse().unwrap()),
                    container_port: 8080,
                    ..Default::default()
                }
            })
            .collect();
        if let Some(spec) = p.spec.as_mut() {
            spec.containers[0].ports = Some(ports);
        }
        p
    }

    fn node_with(existing: &[&str]) -> NodeInfo {
        let mut n = NodeInfo::new(testing::node("n", &[("pods", "110")]));
        n.add_pod(Arc::new(PodInfo::new(testing::on_node(
            pod("existing", existing),
            "n",
        ))));
        n
    }

    // Upstream node_ports_test.go, TestNodePorts.
    #[test]
    fn filter_table() {
        let plugin = new(None, &testing::handle()).unwrap();
        let cases: Vec<(&str, &[&str], &[&str], bool)> = vec![
            ("nothing running", &["UDP/127.0.0.1/8080"], &[], true),
            (
                "other port",
                &["UDP/127.0.0.1/8080"],
                &["UDP/127.0.0.1/9090"],
                true,
            ),
            (
                "same udp port",
                &["UDP/127.0.0.1/8080"],
                &["UDP/127.0.0.1/8080"],
                false,
            ),
            (
                "same tcp port",
                &["TCP/127.0.0.1/8080"],
                &["TCP/127.0.0.1/8080"],
                false,
            ),
            (
                "different host ip",
                &["TCP/127.0.0.1/8080"],
                &["TCP/127.0.0.2/8080"],
                true,
            ),
            (
                "different protocol",
                &["UDP/127.0.0.1/8080"],
                &["TCP/127.0.0.1/8080"],
                true,
            ),
            (
                "second udp port conflict",
                &["UDP/127.0.0.1/8000", "UDP/127.0.0.1/8080"],
                &["UDP/127.0.0.1/8080"],
                false,
            ),
            (
                "first tcp port conflict",
                &["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8080"],
                &["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8081"],
                false,
            ),
            (
                "first tcp port conflict due to 0.0.0.0 hostIP",
                &["TCP/0.0.0.0/8001"],
                &["TCP/127.0.0.1/8001"],
                false,
            ),
            (
                "TCP hostPort conflict due to 0.0.0.0 hostIP",
                &["TCP/10.0.10.10/8001", "TCP/0.0.0.0/8001"],
                &["TCP/127.0.0.1/8001"],
                false,
            ),
            (
                "second tcp port conflict to 0.0.0.0 hostIP",
                &["TCP/127.0.0.1/8001"],
                &["TCP/0.0.0.0/8001"],
                false,
            ),
            (
                "second different protocol",
                &["UDP/127.0.0.1/8001"],
                &["TCP/0.0.0.0/8001"],
                true,
            ),
            (
                "UDP hostPort conflict due to 0.0.0.0 hostIP",
                &["UDP/127.0.0.1/8001"],
                &["TCP/0.0.0.0/8001", "UDP/0.0.0.0/8001"],
                false,
            ),
        ];
        for (name, want, existing, fits) in cases {
            let p = PodInfo::new(pod("p", want));
            let mut state = CycleState::new();
            let (_, s) =
                plugin
                    .as_pre_filter()
                    .unwrap()
                    .pre_filter(&mut state, &p, &Snapshot::default());
            assert!(s.is_success(), "{name}: {s}");
            let s = plugin
                .as_filter()
                .unwrap()
                .filter(&state, &p, &node_with(existing));
            if fits {
                assert!(s.is_success(), "{name}: {s}");
            } else {
                assert_eq!(s.code(), Code::Unschedulable, "{name}");
                assert_eq!(
                    s.message(),
                    "node(s) didn't have free ports for the requested pod ports"
                );
            }
        }
    }

    #[test]
    fn pre_filter_skips_without_host_ports_and_filter_needs_state() {
        let plugin = new(None, &testing::handle()).unwrap();
        let p = PodInfo::new(testing::pod("p", &[&[]]));
        let (_, s) = plugin.as_pre_filter().unwrap().pre_filter(
            &mut CycleState::new(),
            &p,
            &Snapshot::default(),
        );
        assert!(s.is_skip());
        let s = plugin
            .as_filter()
            .unwrap()
            .filter(&CycleState::new(), &p, &node_with(&[]));
        assert_eq!(s.code(), Code::Error);
    }

    // Upstream TestNodePorts_isSchedulableAfterPodDeleted.
    #[test]
    fn pod_deleted_hint() {
        let target = pod("p", &["TCP/0.0.0.0/8080"]);
        let scheduled = |ports: &[&str]| testing::on_node(pod("d", ports), "n");
        let cases = [
            (
                "same port freed",
                scheduled(&["TCP/0.0.0.0/8080"]),
                QueueingHint::Queue,
            ),
            (
                "other port freed",
                scheduled(&["TCP/0.0.0.0/8081"]),
                QueueingHint::QueueSkip,
            ),
            ("no ports", scheduled(&[]), QueueingHint::QueueSkip),
            (
                "unscheduled pod",
                pod("d", &["TCP/0.0.0.0/8080"]),
                QueueingHint::QueueSkip,
            ),
        ];
        for (name, deleted, want) in cases {
            assert_eq!(
                is_schedulable_after_pod_deleted(
                    &target,
                    EventObject::Pod(&deleted),
                    EventObject::None
                ),
                want,
                "{name}"
            );
        }
    }
}
