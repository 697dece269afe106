//! PrioritySort (upstream `framework/plugins/queuesort`): orders activeQ by pod priority,
//! then by the time the pod entered the queue.

use std::sync::Arc;

use crate::backend::queue::QueuedPodInfo;
use crate::error::Error;
use crate::framework::interface::{Plugin, QueueSortPlugin};
use crate::framework::runtime::Handle;
use crate::framework::types::pod_priority;

/// The plugin's name (upstream `names.PrioritySort`).
pub const NAME: &str = "PrioritySort";

/// Higher `spec.priority` first; equal priorities in queue order (upstream
/// `PrioritySort`). Takes no args.
#[derive(Debug, Default)]
pub struct PrioritySort;

/// Builds the plugin; `args` are ignored.
pub fn new(
    _args: Option<&serde_json::Value>,
    _handle: &Arc<Handle>,
) -> Result<Arc<dyn Plugin>, Error> {
    Ok(Arc::new(PrioritySort))
}

impl Plugin for PrioritySort {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_queue_sort(&self) -> Option<&dyn QueueSortPlugin> {
        Some(self)
    }
}

impl QueueSortPlugin for PrioritySort {
    fn less(&self, a: &QueuedPodInfo, b: &QueuedPodInfo) -> bool {
        let (p1, p2) = (pod_priority(&a.pod_info.pod), pod_priority(&b.pod_info.pod));
        p1 > p2 || (p1 == p2 && a.timestamp < b.timestamp)
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::framework::plugins::helper::testing;
    use crate::framework::types::PodInfo;

    fn queued(priority: Option<i32>, at: Instant) -> QueuedPodInfo {
        let mut pod = testing::pod("p", &[]);
        if let Some(spec) = pod.spec.as_mut() {
            spec.priority = priority;
        }
        let mut q = QueuedPodInfo::new(Arc::new(PodInfo::new(pod)));
        q.timestamp = at;
        q
    }

    // Upstream priority_sort_test.go.
    #[test]
    fn less_table() {
        let plugin = new(None, &testing::handle()).unwrap();
        let sort = plugin.as_queue_sort().unwrap();
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_secs(1);
        let (low, high) = (Some(10), Some(100));
        let cases = [
            (
                "p1.priority less than p2.priority",
                queued(low, t0),
                queued(high, t0),
                false,
            ),
            (
                "p1.priority greater than p2.priority",
                queued(high, t0),
                queued(low, t0),
                true,
            ),
            (
                "equal priority, p1 added earlier",
                queued(high, t0),
                queued(high, t1),
                true,
            ),
            (
                "equal priority, p2 added earlier",
                queued(high, t1),
                queued(high, t0),
                false,
            ),
            (
                "unset priority is 0",
                queued(None, t0),
                queued(Some(-1), t0),
                true,
            ),
        ];
        for (name, a, b, want) in cases {
            assert_eq!(sort.less(&a, &b), want, "{name}");
        }
        assert_eq!(plugin.name(), "PrioritySort");
    }
}
