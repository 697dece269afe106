//! NodeUnschedulable (upstream `framework/plugins/nodeunschedulable`): filters out nodes
//! with `spec.unschedulable` (cordoned), unless the pod tolerates the
//! `node.kubernetes.io/unschedulable:NoSchedule` taint.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod, Taint};
use skiff_api::core::scheduling_predicates::taints::TAINT_EFFECT_NO_SCHEDULE;
use skiff_api::core::scheduling_predicates::tolerations_tolerate_taint;

use crate::error::Error;
use crate::framework::cycle_state::CycleState;
use crate::framework::interface::{
    ActionType, ClusterEventWithHint, EventObject, EventResource, FilterPlugin, Plugin,
    QueueingHint,
};
use crate::framework::runtime::Handle;
use crate::framework::status::Status;
use crate::framework::types::{NodeInfo, PodInfo, pod_uid};

/// The plugin's name (upstream `names.NodeUnschedulable`).
pub const NAME: &str = "NodeUnschedulable";
/// Why a cordoned node is filtered out (upstream `ErrReasonUnschedulable`).
pub const ERR_REASON_UNSCHEDULABLE: &str = "node(s) were unschedulable";
/// The taint a pod tolerates to go to cordoned nodes (upstream `TaintNodeUnschedulable`).
pub const TAINT_NODE_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";

/// Filters out unschedulable nodes (upstream `NodeUnschedulable`). Takes no args.
#[derive(Debug, Default)]
pub struct NodeUnschedulable;

/// Builds the plugin; `args` are ignored.
pub fn new(
    _args: Option<&serde_json::Value>,
    _handle: &Arc<Handle>,
) -> Result<Arc<dyn Plugin>, Error> {
    Ok(Arc::new(NodeUnschedulable))
}

fn tolerates_unschedulable(pod: &Pod) -> bool {
    let taint = Taint {
        key: TAINT_NODE_UNSCHEDULABLE.to_owned(),
        effect: TAINT_EFFECT_NO_SCHEDULE.to_owned(),
        ..Default::default()
    };
    let tolerations = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or_default();
    tolerations_tolerate_taint(tolerations, &taint)
}

fn unschedulable(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false)
}

/// Queues when the node was added schedulable or became schedulable (upstream
/// `isSchedulableAfterNodeChange`).
fn is_schedulable_after_node_change(
    _pod: &Pod,
    old: EventObject<'_>,
    new: EventObject<'_>,
) -> QueueingHint {
    let EventObject::Node(modified) = new else {
        return QueueingHint::Queue;
    };
    let was_schedulable = match old {
        EventObject::Node(original) => !unschedulable(original),
        _ => false,
    };
    if !was_schedulable && !unschedulable(modified) {
        QueueingHint::Queue
    } else {
        QueueingHint::QueueSkip
    }
}

/// Queues the pod itself when its new tolerations tolerate the unschedulable taint
/// (upstream `isSchedulableAfterPodTolerationChange`).
fn is_schedulable_after_pod_toleration_change(
    pod: &Pod,
    _old: EventObject<'_>,
    new: EventObject<'_>,
) -> QueueingHint {
    match new {
        EventObject::Pod(modified)
            if pod_uid(modified) == pod_uid(pod) && tolerates_unschedulable(modified) =>
        {
            QueueingHint::Queue
        }
        _ => QueueingHint::QueueSkip,
    }
}

impl Plugin for NodeUnschedulable {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
    fn events_to_register(&self) -> Option<Vec<ClusterEventWithHint>> {
        Some(vec![
            ClusterEventWithHint::with_hint(
                EventResource::Node,
                ActionType::ADD | ActionType::UPDATE_NODE_TAINT,
                is_schedulable_after_node_change,
            ),
            ClusterEventWithHint::with_hint(
                EventResource::UnscheduledPod,
                ActionType::UPDATE_POD_TOLERATIONS,
                is_schedulable_after_pod_toleration_change,
            ),
        ])
    }
}

impl FilterPlugin for NodeUnschedulable {
    fn filter(&self, _state: &CycleState, pod: &PodInfo, node_info: &NodeInfo) -> Status {
        if unschedulable(node_info.node()) && !tolerates_unschedulable(&pod.pod) {
            return Status::unresolvable(ERR_REASON_UNSCHEDULABLE);
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{NodeSpec, Toleration};

    use super::*;
    use crate::framework::plugins::helper::testing;
    use crate::framework::status::Code;

    fn node(unschedulable: Option<bool>) -> Node {
        let mut n = testing::node("n", &[]);
        n.spec = Some(NodeSpec {
            unschedulable,
            ..Default::default()
        });
        n
    }

    fn tolerant_pod() -> Pod {
        let mut p = testing::pod("p", &[]);
        if let Some(spec) = p.spec.as_mut() {
            spec.tolerations = Some(vec![Toleration {
                key: Some(TAINT_NODE_UNSCHEDULABLE.into()),
                effect: Some("NoSchedule".into()),
                ..Default::default()
            }]);
        }
        p
    }

    // Upstream node_unschedulable_test.go.
    #[test]
    fn filter_table() {
        let plugin = new(None, &testing::handle()).unwrap();
        let f = plugin.as_filter().unwrap();
        let state = CycleState::new();
        let plain = PodInfo::new(testing::pod("p", &[]));
        let tolerant = PodInfo::new(tolerant_pod());
        let cases = [
            (
                "unschedulable node",
                &plain,
                node(Some(true)),
                Some(ERR_REASON_UNSCHEDULABLE),
            ),
            ("schedulable node", &plain, node(Some(false)), None),
            ("unset field", &plain, node(None), None),
            (
                "tolerating pod on unschedulable node",
                &tolerant,
                node(Some(true)),
                None,
            ),
        ];
        for (name, pod, n, want) in cases {
            let s = f.filter(&state, pod, &NodeInfo::new(n));
            match want {
                Some(reason) => {
                    assert_eq!(s.code(), Code::UnschedulableAndUnresolvable, "{name}");
                    assert_eq!(s.reasons(), [reason.to_owned()], "{name}");
                }
                None => assert!(s.is_success(), "{name}: {s}"),
            }
        }
    }

    #[test]
    fn hints() {
        let pod = testing::pod("p", &[]);
        let (cordoned, open) = (node(Some(true)), node(Some(false)));
        let cases = [
            (
                "add schedulable",
                EventObject::None,
                EventObject::Node(&open),
                QueueingHint::Queue,
            ),
            (
                "add unschedulable",
                EventObject::None,
                EventObject::Node(&cordoned),
                QueueingHint::QueueSkip,
            ),
            (
                "uncordoned",
                EventObject::Node(&cordoned),
                EventObject::Node(&open),
                QueueingHint::Queue,
            ),
            (
                "stays schedulable",
                EventObject::Node(&open),
                EventObject::Node(&open),
                QueueingHint::QueueSkip,
            ),
            (
                "cordoned",
                EventObject::Node(&open),
                EventObject::Node(&cordoned),
                QueueingHint::QueueSkip,
            ),
        ];
        for (name, old, new, want) in cases {
            assert_eq!(
                is_schedulable_after_node_change(&pod, old, new),
                want,
                "{name}"
            );
        }
        let tolerant = tolerant_pod();
        assert_eq!(
            is_schedulable_after_pod_toleration_change(
                &pod,
                EventObject::Pod(&pod),
                EventObject::Pod(&tolerant)
            ),
            QueueingHint::Queue
        );
        assert_eq!(
            is_schedulable_after_pod_toleration_change(
                &pod,
                EventObject::Pod(&pod),
                EventObject::Pod(&pod)
            ),
            QueueingHint::QueueSkip
        );
    }
}
