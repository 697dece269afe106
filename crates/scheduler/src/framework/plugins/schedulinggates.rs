//! SchedulingGates (upstream `framework/plugins/schedulinggates`): keeps a pod out of
//! activeQ while `spec.schedulingGates` is not empty.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use crate::error::Error;
use crate::framework::interface::{
    ActionType, ClusterEventWithHint, EventObject, EventResource, Plugin, PreEnqueuePlugin,
    QueueingHint,
};
use crate::framework::runtime::Handle;
use crate::framework::status::Status;
use crate::framework::types::pod_uid;

/// The plugin's name (upstream `names.SchedulingGates`).
pub const NAME: &str = "SchedulingGates";

/// Gates pods with scheduling gates at PreEnqueue (upstream `SchedulingGates`). Takes no
/// args.
#[derive(Debug, Default)]
pub struct SchedulingGates;

/// Builds the plugin; `args` are ignored.
pub fn new(
    _args: Option<&serde_json::Value>,
    _handle: &Arc<Handle>,
) -> Result<Arc<dyn Plugin>, Error> {
    Ok(Arc::new(SchedulingGates))
}

impl Plugin for SchedulingGates {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_pre_enqueue(&self) -> Option<&dyn PreEnqueuePlugin> {
        Some(self)
    }
    /// The pod's own update that removes its last gate; the hint queues only that pod.
    fn events_to_register(&self) -> Option<Vec<ClusterEventWithHint>> {
        Some(vec![ClusterEventWithHint::with_hint(
            EventResource::UnscheduledPod,
            ActionType::UPDATE_POD_SCHEDULING_GATES_ELIMINATED,
            is_schedulable_after_gates_eliminated,
        )])
    }
}

fn is_schedulable_after_gates_eliminated(
    pod: &Pod,
    _old: EventObject<'_>,
    new: EventObject<'_>,
) -> QueueingHint {
    match new {
        EventObject::Pod(modified) if pod_uid(modified) == pod_uid(pod) => QueueingHint::Queue,
        _ => QueueingHint::QueueSkip,
    }
}

impl PreEnqueuePlugin for SchedulingGates {
    fn pre_enqueue(&self, pod: &Pod) -> Status {
        let gates: Vec<&str> = pod
            .spec
            .iter()
            .flat_map(|s| s.scheduling_gates.iter().flatten())
            .map(|g| g.name.as_str())
            .collect();
        if gates.is_empty() {
            return Status::success();
        }
        Status::unresolvable(format!(
            "waiting for scheduling gates: [{}]",
            gates.join(" ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::PodSchedulingGate;

    use super::*;
    use crate::framework::plugins::helper::testing;
    use crate::framework::status::Code;

    fn gated(name: &str, gates: &[&str]) -> Pod {
        let mut pod = testing::pod(name, &[]);
        if let Some(spec) = pod.spec.as_mut() {
            spec.scheduling_gates = Some(
                gates
                    .iter()
                    .map(|g| PodSchedulingGate {
                        name: (*g).to_owned(),
                    })
                    .collect(),
            );
        }
        pod
    }

    // Upstream scheduling_gates_test.go.
    #[test]
    fn pre_enqueue_table() {
        let plugin = new(None, &testing::handle()).unwrap();
        let pe = plugin.as_pre_enqueue().unwrap();
        assert!(pe.pre_enqueue(&testing::pod("p", &[])).is_success());
        assert!(pe.pre_enqueue(&gated("p", &[])).is_success());
        let s = pe.pre_enqueue(&gated("p", &["foo", "bar"]));
        assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
        assert_eq!(s.message(), "waiting for scheduling gates: [foo bar]");
    }

    #[test]
    fn hint_queues_only_the_same_pod() {
        let plugin = new(None, &testing::handle()).unwrap();
        let events = plugin.events_to_register().unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].event.resource, EventResource::UnscheduledPod);
        let hint = events[0].hint.as_ref().unwrap();
        let (p, other) = (gated("p", &["a"]), testing::pod("q", &[]));
        let p_new = testing::pod("p", &[]);
        assert_eq!(
            hint(&p, EventObject::Pod(&p), EventObject::Pod(&p_new)),
            QueueingHint::Queue
        );
        assert_eq!(
            hint(&p, EventObject::Pod(&other), EventObject::Pod(&other)),
            QueueingHint::QueueSkip
        );
    }
}
