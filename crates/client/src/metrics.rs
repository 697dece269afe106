//! Metrics shared by components (component-base `metrics` and client-go's metrics
//! adapters), on `prometheus-client`: the Prometheus text format 0.0.4 that `/metrics`
//! serves ([`text_format`]), and the work queue metrics ([`WorkQueueMetrics`]).

use std::fmt::Write as _;
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::workqueue::QueueMetrics;

/// The registry's metrics in the Prometheus text format 0.0.4 (see
/// [`crate::serving::CONTENT_TYPE`]): every family with a sample, counters named with
/// their `_total` suffix, no `# EOF`.
pub fn text_format(registry: &Registry) -> String {
    let mut open_metrics = String::new();
    if encode(&mut open_metrics, registry).is_err() {
        return String::new();
    }
    to_text_format(&open_metrics)
}

/// Rewrites prometheus-client's OpenMetrics text as the Prometheus text format 0.0.4:
/// drops `# EOF` and families without samples, names counter families with their
/// `_total` suffix (as their samples), and removes the period the library appends to
/// every help text.
fn to_text_format(open_metrics: &str) -> String {
    struct Block<'a> {
        name: &'a str,
        help: &'a str,
        kind: &'a str,
        samples: Vec<&'a str>,
    }
    let mut blocks: Vec<Block<'_>> = Vec::new();
    for line in open_metrics.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            blocks.push(Block {
                name,
                help: help.strip_suffix('.').unwrap_or(help),
                kind: "untyped",
                samples: Vec::new(),
            });
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            if let (Some(block), Some((_, kind))) = (blocks.last_mut(), rest.split_once(' ')) {
                block.kind = kind;
            }
        } else if line.starts_with('#') || line.is_empty() {
            continue;
        } else if let Some(block) = blocks.last_mut() {
            block.samples.push(line);
        }
    }
    let mut out = String::new();
    for block in blocks.iter().filter(|b| !b.samples.is_empty()) {
        let name = if block.kind == "counter" {
            format!("{}_total", block.name)
        } else {
            block.name.to_owned()
        };
        let _ = writeln!(out, "# HELP {name} {}", block.help);
        let _ = writeln!(out, "# TYPE {name} {}", block.kind);
        for sample in &block.samples {
            out.push_str(sample);
            out.push('\n');
        }
    }
    out
}

type Labels = Vec<(&'static str, String)>;

fn name_label(name: &str) -> Labels {
    vec![("name", name.to_owned())]
}

/// client-go's work queue metrics (`workqueue_*{name}`), registered in a component's
/// registry; implements [`QueueMetrics`].
#[derive(Debug, Clone)]
pub struct WorkQueueMetrics {
    adds: Family<Labels, Counter>,
    depth: Family<Labels, Gauge>,
    queue_duration: Family<Labels, Histogram, fn() -> Histogram>,
    work_duration: Family<Labels, Histogram, fn() -> Histogram>,
    retries: Family<Labels, Counter>,
}

/// client-go's buckets for both durations: 10 ns to 10 s, by tens.
fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1e-8, 10.0, 10))
}

impl WorkQueueMetrics {
    /// The metrics, registered in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self {
            adds: Family::default(),
            depth: Family::default(),
            queue_duration: Family::new_with_constructor(duration_histogram),
            work_duration: Family::new_with_constructor(duration_histogram),
            retries: Family::default(),
        };
        registry.register(
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            m.adds.clone(),
        );
        registry.register(
            "workqueue_depth",
            "Current depth of workqueue",
            m.depth.clone(),
        );
        registry.register(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            m.queue_duration.clone(),
        );
        registry.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            m.work_duration.clone(),
        );
        registry.register(
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            m.retries.clone(),
        );
        m
    }
}

impl QueueMetrics for WorkQueueMetrics {
    fn new_queue(&self, name: &str) {
        let l = name_label(name);
        drop(self.adds.get_or_create(&l));
        drop(self.depth.get_or_create(&l));
        drop(self.queue_duration.get_or_create(&l));
        drop(self.work_duration.get_or_create(&l));
        drop(self.retries.get_or_create(&l));
    }

    fn add(&self, name: &str) {
        self.adds.get_or_create(&name_label(name)).inc();
    }

    fn depth(&self, name: &str, depth: usize) {
        self.depth
            .get_or_create(&name_label(name))
            .set(i64::try_from(depth).unwrap_or(i64::MAX));
    }

    fn queue_duration(&self, name: &str, waited: Duration) {
        self.queue_duration
            .get_or_create(&name_label(name))
            .observe(waited.as_secs_f64());
    }

    fn work_duration(&self, name: &str, worked: Duration) {
        self.work_duration
            .get_or_create(&name_label(name))
            .observe(worked.as_secs_f64());
    }

    fn retry(&self, name: &str) {
        self.retries.get_or_create(&name_label(name)).inc();
    }
}

/// client-go's leader election metrics (`leader_election_master_status{name}`,
/// `leader_election_slowpath_total{name}`), registered in a component's registry.
#[derive(Debug, Clone, Default)]
pub struct LeaderElectionMetrics {
    master_status: Family<Labels, Gauge>,
    slowpath: Family<Labels, Counter>,
}

impl LeaderElectionMetrics {
    /// The metrics, registered in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        registry.register(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease. Please make sure to group by name",
            m.master_status.clone(),
        );
        registry.register(
            "leader_election_slowpath",
            "Total number of slow path exercised in renewing leader leases. 'name' is the string used to identify the lease. Please make sure to group by name",
            m.slowpath.clone(),
        );
        m
    }
}

impl crate::leaderelection::LeaderMetrics for LeaderElectionMetrics {
    fn set_leader(&self, name: &str, leading: bool) {
        self.master_status
            .get_or_create(&name_label(name))
            .set(i64::from(leading));
    }

    fn inc_leader_slowpath(&self, name: &str) {
        self.slowpath.get_or_create(&name_label(name)).inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::leaderelection::LeaderMetrics as _;

    #[test]
    fn text_format_conversion() {
        let open_metrics = "# HELP a_things Things.\n# TYPE a_things counter\na_things_total 1\n\
                            # HELP b Empty.\n# TYPE b gauge\n# EOF\n";
        assert_eq!(
            to_text_format(open_metrics),
            "# HELP a_things_total Things\n# TYPE a_things_total counter\na_things_total 1\n"
        );
    }

    #[test]
    fn work_queue_and_leader_metrics_in_the_text_format() {
        let mut registry = Registry::default();
        let q = WorkQueueMetrics::register(&mut registry);
        let l = LeaderElectionMetrics::register(&mut registry);
        assert_eq!(text_format(&registry), "", "no samples, no families");
        q.new_queue("deployment");
        assert!(
            text_format(&registry).contains("workqueue_retries_total{name=\"deployment\"} 0\n"),
            "a new queue's metrics show at zero"
        );
        q.add("replicaset");
        q.depth("replicaset", 3);
        q.work_duration("replicaset", Duration::from_millis(2));
        q.retry("replicaset");
        l.set_leader("kube-controller-manager", true);
        let text = text_format(&registry);
        for line in [
            "# TYPE workqueue_adds_total counter\n",
            "workqueue_adds_total{name=\"replicaset\"} 1\n",
            "workqueue_depth{name=\"replicaset\"} 3\n",
            "workqueue_work_duration_seconds_count{name=\"replicaset\"} 1\n",
            "workqueue_retries_total{name=\"replicaset\"} 1\n",
            "leader_election_master_status{name=\"kube-controller-manager\"} 1\n",
        ] {
            assert!(text.contains(line), "{line} missing from {text}");
        }
        assert!(!text.contains("# EOF"));
        assert!(
            !text.contains("workqueue_queue_duration_seconds_count{name=\"replicaset\"}"),
            "no sample yet: {text}"
        );
    }
}
