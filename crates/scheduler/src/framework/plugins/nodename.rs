//! NodeName (upstream `framework/plugins/nodename`): a pod with `spec.nodeName` fits only
//! that node.

use std::sync::Arc;

use skiff_api::core::scheduling_predicates::{ERR_REASON_NODE_NAME, node_name_fits};

use crate::error::Error;
use crate::framework::cycle_state::CycleState;
use crate::framework::interface::{
    ActionType, ClusterEventWithHint, EventResource, FilterPlugin, Plugin,
};
use crate::framework::runtime::Handle;
use crate::framework::status::Status;
use crate::framework::types::{NodeInfo, PodInfo};

/// The plugin's name (upstream `names.NodeName`).
pub const NAME: &str = skiff_api::core::scheduling_predicates::NODE_NAME;
/// Why a node is filtered out (upstream `nodename.ErrReason`).
pub const ERR_REASON: &str = ERR_REASON_NODE_NAME;

/// Filters out every node but the one named by `spec.nodeName` (upstream `NodeName`).
/// Takes no args.
#[derive(Debug, Default)]
pub struct NodeName;

/// Builds the plugin; `args` are ignored.
pub fn new(
    _args: Option<&serde_json::Value>,
    _handle: &Arc<Handle>,
) -> Result<Arc<dyn Plugin>, Error> {
    Ok(Arc::new(NodeName))
}

impl Plugin for NodeName {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
    /// A node added (upstream registers no hint: the pod is always retried).
    fn events_to_register(&self) -> Option<Vec<ClusterEventWithHint>> {
        Some(vec![ClusterEventWithHint::always(
            EventResource::Node,
            ActionType::ADD,
        )])
    }
}

impl FilterPlugin for NodeName {
    fn filter(&self, _state: &CycleState, pod: &PodInfo, node_info: &NodeInfo) -> Status {
        if node_name_fits(&pod.pod, node_info.node()) {
            Status::success()
        } else {
            Status::unresolvable(ERR_REASON)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::plugins::helper::testing;
    use crate::framework::status::Code;

    // Upstream node_name_test.go.
    #[test]
    fn filter_table() {
        let plugin = new(None, &testing::handle()).unwrap();
        let f = plugin.as_filter().unwrap();
        let state = CycleState::new();
        let node = NodeInfo::new(testing::node("foo", &[]));
        let cases = [
            ("no host specified", testing::pod("p", &[]), true),
            (
                "host matches",
                testing::on_node(testing::pod("p", &[]), "foo"),
                true,
            ),
            (
                "host doesn't match",
                testing::on_node(testing::pod("p", &[]), "bar"),
                false,
            ),
        ];
        for (name, pod, fits) in cases {
            let s = f.filter(&state, &PodInfo::new(pod), &node);
            if fits {
                assert!(s.is_success(), "{name}: {s}");
            } else {
                assert_eq!(s.code(), Code::UnschedulableAndUnresolvable, "{name}");
                assert_eq!(s.message(), "node(s) didn't match the requested node name");
            }
        }
    }

    #[test]
    fn events_are_node_add_without_hint() {
        let plugin = new(None, &testing::handle()).unwrap();
        let events = plugin.events_to_register().unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].event.resource, EventResource::Node);
        assert_eq!(events[0].event.action, ActionType::ADD);
        assert!(events[0].hint.is_none());
    }
}
