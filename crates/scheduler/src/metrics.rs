//! The scheduler's Prometheus metrics (upstream `pkg/scheduler/metrics/metrics.go`, and
//! client-go's `leader_election_*` metrics), with upstream's names, types, label names,
//! buckets and help texts (prefixed with the stability level, as component-base does).
//!
//! One [`Metrics`] per scheduler, shared as `Arc<Metrics>` by the scheduling loop, the
//! queue, the leader elector and the HTTP server, which serves [`Metrics::encode`] at
//! `/metrics` in the Prometheus text format 0.0.4 ([`CONTENT_TYPE`]).
//!
//! As upstream, a labelled family shows no sample until one of its label sets was used.

use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The content type of [`Metrics::encode`]'s output (Prometheus text format 0.0.4, as
/// upstream's `/metrics` answers by default).
pub use skiff_client::serving::CONTENT_TYPE;

/// Label pairs of one sample of a family.
type Labels = Vec<(&'static str, String)>;

/// The result of a scheduling attempt (label `result` of
/// `scheduler_schedule_attempts_total` and `scheduler_scheduling_attempt_duration_seconds`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptResult {
    /// The pod was bound (`scheduled`).
    Scheduled,
    /// No node fits the pod (`unschedulable`).
    Unschedulable,
    /// An internal error (`error`).
    Error,
}

impl AttemptResult {
    /// The label value: `scheduled`, `unschedulable` or `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptResult::Scheduled => "scheduled",
            AttemptResult::Unschedulable => "unschedulable",
            AttemptResult::Error => "error",
        }
    }
}

/// Every scheduler metric. Cheap to share (`Arc<Metrics>`); every method takes `&self`.
pub struct Metrics {
    registry: Registry,
    schedule_attempts: Family<Labels, Counter>,
    scheduling_attempt_duration: Family<Labels, Histogram>,
    scheduling_algorithm_duration: Histogram,
    preemption_victims: Histogram,
    preemption_attempts: Counter,
    pending_pods: Family<Labels, Gauge>,
    pod_scheduling_sli_duration: Family<Labels, Histogram>,
    pod_scheduling_attempts: Histogram,
    framework_extension_point_duration: Family<Labels, Histogram>,
    plugin_execution_duration: Family<Labels, Histogram>,
    queue_incoming_pods: Family<Labels, Counter>,
    cache_size: Family<Labels, Gauge>,
    unschedulable_pods: Family<Labels, Gauge>,
    leader_election_master_status: Family<Labels, Gauge>,
    leader_election_slowpath: Family<Labels, Counter>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// `metrics.ExponentialBuckets(start, factor, count)`: `start * factor^i` for `i` in
/// `0..count`.
fn buckets(start: f64, factor: f64, count: u16) -> Vec<f64> {
    exponential_buckets(start, factor, count).collect()
}

/// 1 ms to ~16 s: scheduling attempts, the algorithm, permit waits.
fn attempt_histogram() -> Histogram {
    Histogram::new(buckets(0.001, 2.0, 15))
}

/// 10 ms to ~88 min: a pod's end-to-end scheduling.
fn sli_histogram() -> Histogram {
    Histogram::new(buckets(0.01, 2.0, 20))
}

/// 0.1 ms to ~200 ms: all plugins of one extension point.
fn extension_point_histogram() -> Histogram {
    Histogram::new(buckets(0.0001, 2.0, 12))
}

/// 10 µs to ~22 ms, factor 1.5: one plugin at one extension point.
fn plugin_histogram() -> Histogram {
    Histogram::new(buckets(0.00001, 1.5, 20))
}

fn labels<const N: usize>(pairs: [(&'static str, &str); N]) -> Labels {
    pairs.iter().map(|(k, v)| (*k, (*v).to_owned())).collect()
}

impl Metrics {
    /// Every metric at zero, registered under its upstream name.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let m = Self {
            schedule_attempts: Family::default(),
            scheduling_attempt_duration: Family::new_with_constructor(attempt_histogram),
            scheduling_algorithm_duration: attempt_histogram(),
            preemption_victims: Histogram::new(buckets(1.0, 2.0, 7)),
            preemption_attempts: Counter::default(),
            pending_pods: Family::default(),
            pod_scheduling_sli_duration: Family::new_with_constructor(sli_histogram),
            pod_scheduling_attempts: Histogram::new(buckets(1.0, 2.0, 5)),
            framework_extension_point_duration: Family::new_with_constructor(
                extension_point_histogram,
            ),
            plugin_execution_duration: Family::new_with_constructor(plugin_histogram),
            queue_incoming_pods: Family::default(),
            cache_size: Family::default(),
            unschedulable_pods: Family::default(),
            leader_election_master_status: Family::default(),
            leader_election_slowpath: Family::default(),
            registry: Registry::default(),
        };
        let r = &mut registry;
        // Counters are registered without `_total`: the encoder appends it.
        r.register(
            "scheduler_schedule_attempts",
            "[STABLE] Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be scheduled, while 'error' means an internal scheduler problem.",
            m.schedule_attempts.clone(),
        );
        r.register(
            "scheduler_scheduling_attempt_duration_seconds",
            "[STABLE] Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            m.scheduling_attempt_duration.clone(),
        );
        r.register(
            "scheduler_scheduling_algorithm_duration_seconds",
            "[ALPHA] Scheduling algorithm latency in seconds",
            m.scheduling_algorithm_duration.clone(),
        );
        r.register(
            "scheduler_preemption_victims",
            "[STABLE] Number of selected preemption victims",
            m.preemption_victims.clone(),
        );
        r.register(
            "scheduler_preemption_attempts",
            "[STABLE] Total preemption attempts in the cluster till now",
            m.preemption_attempts.clone(),
        );
        r.register(
            "scheduler_pending_pods",
            "[STABLE] Number of pending pods, by the queue type. 'active' means number of pods in activeQ; 'backoff' means number of pods in backoffQ; 'unschedulable' means number of pods in unschedulablePods that the scheduler attempted to schedule and failed; 'gated' is the number of unschedulable pods that the scheduler never attempted to schedule because they are gated.",
            m.pending_pods.clone(),
        );
        r.register(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "[BETA] E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue and might involve multiple scheduling attempts.",
            m.pod_scheduling_sli_duration.clone(),
        );
        r.register(
            "scheduler_pod_scheduling_attempts",
            "[STABLE] Number of attempts to successfully schedule a pod.",
            m.pod_scheduling_attempts.clone(),
        );
        r.register(
            "scheduler_framework_extension_point_duration_seconds",
            "[STABLE] Latency for running all plugins of a specific extension point.",
            m.framework_extension_point_duration.clone(),
        );
        r.register(
            "scheduler_plugin_execution_duration_seconds",
            "[ALPHA] Duration for running a plugin at a specific extension point.",
            m.plugin_execution_duration.clone(),
        );
        r.register(
            "scheduler_queue_incoming_pods",
            "[STABLE] Number of pods added to scheduling queues by event and queue type.",
            m.queue_incoming_pods.clone(),
        );
        r.register(
            "scheduler_scheduler_cache_size",
            "[ALPHA] Number of nodes, pods, and assumed (bound) pods in the scheduler cache.",
            m.cache_size.clone(),
        );
        r.register(
            "scheduler_unschedulable_pods",
            "[ALPHA] The number of unschedulable pods broken down by plugin name. A pod will increment the gauge for all plugins that caused it to not schedule and so this metric have meaning only when broken down by plugin.",
            m.unschedulable_pods.clone(),
        );
        r.register(
            "leader_election_master_status",
            "[ALPHA] Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease. Please make sure to group by name.",
            m.leader_election_master_status.clone(),
        );
        r.register(
            "leader_election_slowpath",
            "[ALPHA] Total number of slow path exercised in renewing leader leases. 'name' is the string used to identify the lease. Please make sure to group by name.",
            m.leader_election_slowpath.clone(),
        );
        Self { registry, ..m }
    }

    /// One scheduling attempt of a pod of `profile` ended with `result` after `duration`
    /// (scheduling algorithm and, when scheduled, binding): counts it in
    /// `scheduler_schedule_attempts_total` and observes
    /// `scheduler_scheduling_attempt_duration_seconds` (upstream `PodScheduled`,
    /// `PodUnschedulable`, `PodScheduleError`).
    pub fn observe_attempt(&self, result: AttemptResult, profile: &str, duration: Duration) {
        let labels = labels([("result", result.as_str()), ("profile", profile)]);
        self.schedule_attempts.get_or_create(&labels).inc();
        self.scheduling_attempt_duration
            .get_or_create(&labels)
            .observe(duration.as_secs_f64());
    }

    /// `scheduler_scheduling_algorithm_duration_seconds`: one run of the scheduling
    /// algorithm (filter and score).
    pub fn observe_scheduling_algorithm(&self, duration: Duration) {
        self.scheduling_algorithm_duration
            .observe(duration.as_secs_f64());
    }

    /// A pod was scheduled after `attempts` attempts, `since_first_queued` after it first
    /// entered the queue: `scheduler_pod_scheduling_sli_duration_seconds{attempts}` and
    /// `scheduler_pod_scheduling_attempts`.
    pub fn observe_pod_scheduled(&self, attempts: u32, since_first_queued: Duration) {
        self.pod_scheduling_sli_duration
            .get_or_create(&labels([("attempts", &attempts.to_string())]))
            .observe(since_first_queued.as_secs_f64());
        self.pod_scheduling_attempts.observe(f64::from(attempts));
    }

    /// `scheduler_preemption_attempts_total`: PostFilter tried to preempt for a pod.
    pub fn inc_preemption_attempts(&self) {
        self.preemption_attempts.inc();
    }

    /// `scheduler_preemption_victims`: the number of victims of the chosen candidate.
    pub fn observe_preemption_victims(&self, victims: usize) {
        self.preemption_victims.observe(victims as f64);
    }

    /// `scheduler_pending_pods{queue}`: the pods in activeQ, backoffQ, the unschedulable
    /// pool, and gated by PreEnqueue plugins.
    pub fn set_pending(&self, active: usize, backoff: usize, unschedulable: usize, gated: usize) {
        for (queue, n) in [
            ("active", active),
            ("backoff", backoff),
            ("unschedulable", unschedulable),
            ("gated", gated),
        ] {
            self.pending_pods
                .get_or_create(&labels([("queue", queue)]))
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }

    /// `scheduler_queue_incoming_pods_total{queue,event}`: a pod entered `queue`
    /// (`active`, `backoff`, `unschedulable`, `gated`) because of `event` (`PodAdd`,
    /// `ScheduleAttemptFailure`, `BackoffComplete`, `NodeAdd`, ...).
    pub fn inc_queue_incoming(&self, queue: &str, event: &str) {
        self.queue_incoming_pods
            .get_or_create(&labels([("queue", queue), ("event", event)]))
            .inc();
    }

    /// `scheduler_framework_extension_point_duration_seconds{extension_point,status,profile}`:
    /// all plugins of `extension_point` (`PreFilter`, `Filter`, ...) ran in `duration`
    /// and ended with `status` (the status code's name, `Success`, `Unschedulable`, ...).
    pub fn observe_extension_point(
        &self,
        extension_point: &str,
        status: &str,
        profile: &str,
        duration: Duration,
    ) {
        self.framework_extension_point_duration
            .get_or_create(&labels([
                ("extension_point", extension_point),
                ("status", status),
                ("profile", profile),
            ]))
            .observe(duration.as_secs_f64());
    }

    /// `scheduler_plugin_execution_duration_seconds{plugin,extension_point,status}`.
    pub fn observe_plugin_execution(
        &self,
        plugin: &str,
        extension_point: &str,
        status: &str,
        duration: Duration,
    ) {
        self.plugin_execution_duration
            .get_or_create(&labels([
                ("plugin", plugin),
                ("extension_point", extension_point),
                ("status", status),
            ]))
            .observe(duration.as_secs_f64());
    }

    /// `scheduler_scheduler_cache_size{type}`: nodes, pods and assumed pods in the cache.
    pub fn set_cache_size(&self, nodes: usize, pods: usize, assumed_pods: usize) {
        for (kind, n) in [
            ("nodes", nodes),
            ("pods", pods),
            ("assumed_pods", assumed_pods),
        ] {
            self.cache_size
                .get_or_create(&labels([("type", kind)]))
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }

    /// `scheduler_unschedulable_pods{plugin,profile}`: adds `delta` (+1 when a pod is
    /// rejected by `plugin`, -1 when it leaves the unschedulable pool).
    pub fn add_unschedulable_pods(&self, plugin: &str, profile: &str, delta: i64) {
        self.unschedulable_pods
            .get_or_create(&labels([("plugin", plugin), ("profile", profile)]))
            .inc_by(delta);
    }

    /// `leader_election_master_status{name}`: 1 while this process leads the lease
    /// `name` (`kube-scheduler`), 0 otherwise.
    pub fn set_leader(&self, name: &str, leading: bool) {
        self.leader_election_master_status
            .get_or_create(&labels([("name", name)]))
            .set(i64::from(leading));
    }

    /// `leader_election_slowpath_total{name}`: the leader had to re-read the lease to
    /// renew it.
    pub fn inc_leader_slowpath(&self, name: &str) {
        self.leader_election_slowpath
            .get_or_create(&labels([("name", name)]))
            .inc();
    }

    /// The text exposition (format 0.0.4, [`CONTENT_TYPE`]) of every metric that has a
    /// sample: counters named with their `_total` suffix, no `# EOF`, help texts as
    /// upstream's.
    pub fn encode(&self) -> String {
        skiff_client::metrics::text_format(&self.registry)
    }
}

impl skiff_client::serving::Exposition for Metrics {
    fn encode(&self) -> String {
        Metrics::encode(self)
    }
}

impl skiff_client::leaderelection::LeaderMetrics for Metrics {
    fn set_leader(&self, name: &str, leading: bool) {
        Metrics::set_leader(self, name, leading);
    }

    fn inc_leader_slowpath(&self, name: &str) {
        Metrics::inc_leader_slowpath(self, name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempts_are_counted_and_timed_by_result_and_profile() {
        let m = Metrics::new();
        m.observe_attempt(
            AttemptResult::Scheduled,
            "default-scheduler",
            Duration::from_millis(3),
        );
        m.observe_attempt(
            AttemptResult::Scheduled,
            "default-scheduler",
            Duration::from_millis(20),
        );
        m.observe_attempt(
            AttemptResult::Unschedulable,
            "default-scheduler",
            Duration::from_millis(1),
        );
        let text = m.encode();
        assert!(
            text.contains("# TYPE scheduler_schedule_attempts_total counter\n"),
            "{text}"
        );
        assert!(text.contains("# HELP scheduler_schedule_attempts_total [STABLE] Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be scheduled, while 'error' means an internal scheduler problem.\n"), "{text}");
        assert!(text.contains(
            "scheduler_schedule_attempts_total{result=\"scheduled\",profile=\"default-scheduler\"} 2\n"
        ), "{text}");
        assert!(text.contains(
            "scheduler_schedule_attempts_total{result=\"unschedulable\",profile=\"default-scheduler\"} 1\n"
        ), "{text}");
        assert!(!text.contains("result=\"error\""), "{text}");
        assert!(text.contains("# TYPE scheduler_scheduling_attempt_duration_seconds histogram\n"));
        // 3 ms falls in the 0.004 bucket, 20 ms in the 0.032 one.
        let bucket = |le: &str| {
            format!(
                "scheduler_scheduling_attempt_duration_seconds_bucket{{le=\"{le}\",result=\"scheduled\",profile=\"default-scheduler\"}} "
            )
        };
        let value = |le: &str| -> String {
            let prefix = bucket(le);
            text.lines()
                .find_map(|l| l.strip_prefix(prefix.as_str()))
                .unwrap_or_else(|| panic!("no {prefix} in {text}"))
                .to_owned()
        };
        assert_eq!(value("0.002"), "0");
        assert_eq!(value("0.004"), "1");
        assert_eq!(value("0.016"), "1");
        assert_eq!(value("0.032"), "2");
        assert_eq!(value("16.384"), "2");
        assert_eq!(value("+Inf"), "2");
        assert!(text.contains(
            "scheduler_scheduling_attempt_duration_seconds_count{result=\"scheduled\",profile=\"default-scheduler\"} 2\n"
        ));
        // Exactly 15 finite buckets (0.001 * 2^n, n < 15) and +Inf.
        let buckets = text
            .lines()
            .filter(|l| {
                l.starts_with("scheduler_scheduling_attempt_duration_seconds_bucket")
                    && l.contains("result=\"unschedulable\"")
            })
            .count();
        assert_eq!(buckets, 16);
        assert!(!text.contains("# EOF"));
    }

    #[test]
    fn pending_pods_by_queue() {
        let m = Metrics::new();
        m.set_pending(3, 1, 2, 0);
        let text = m.encode();
        assert!(text.contains("# TYPE scheduler_pending_pods gauge\n"));
        for line in [
            "scheduler_pending_pods{queue=\"active\"} 3\n",
            "scheduler_pending_pods{queue=\"backoff\"} 1\n",
            "scheduler_pending_pods{queue=\"unschedulable\"} 2\n",
            "scheduler_pending_pods{queue=\"gated\"} 0\n",
        ] {
            assert!(text.contains(line), "{line} missing from {text}");
        }
        m.set_pending(0, 0, 0, 1);
        assert!(
            m.encode()
                .contains("scheduler_pending_pods{queue=\"gated\"} 1\n")
        );
    }

    #[test]
    fn preemption_queue_and_leader_metrics() {
        let m = Metrics::new();
        m.inc_preemption_attempts();
        m.inc_preemption_attempts();
        m.observe_preemption_victims(3);
        m.inc_queue_incoming("active", "PodAdd");
        m.inc_queue_incoming("active", "PodAdd");
        m.inc_queue_incoming("unschedulable", "ScheduleAttemptFailure");
        m.set_leader("kube-scheduler", true);
        m.observe_extension_point("Filter", "Success", "default-scheduler", Duration::ZERO);
        let text = m.encode();
        for line in [
            "# TYPE scheduler_preemption_attempts_total counter\n",
            "scheduler_preemption_attempts_total 2\n",
            "# TYPE scheduler_preemption_victims histogram\n",
            "scheduler_preemption_victims_bucket{le=\"2.0\"} 0\n",
            "scheduler_preemption_victims_bucket{le=\"4.0\"} 1\n",
            "scheduler_preemption_victims_bucket{le=\"64.0\"} 1\n",
            "scheduler_preemption_victims_sum 3.0\n",
            "scheduler_queue_incoming_pods_total{queue=\"active\",event=\"PodAdd\"} 2\n",
            "scheduler_queue_incoming_pods_total{queue=\"unschedulable\",event=\"ScheduleAttemptFailure\"} 1\n",
            "# TYPE leader_election_master_status gauge\n",
            "leader_election_master_status{name=\"kube-scheduler\"} 1\n",
            "scheduler_framework_extension_point_duration_seconds_count{extension_point=\"Filter\",status=\"Success\",profile=\"default-scheduler\"} 1\n",
            "scheduler_framework_extension_point_duration_seconds_bucket{le=\"0.2048\",extension_point=\"Filter\",status=\"Success\",profile=\"default-scheduler\"} 1\n",
            "# HELP scheduler_pod_scheduling_attempts [STABLE] Number of attempts to successfully schedule a pod.\n",
        ] {
            assert!(text.contains(line), "{line} missing from {text}");
        }
        // Families without samples are left out, as upstream's vectors.
        assert!(!text.contains("scheduler_unschedulable_pods"), "{text}");
        assert!(!text.contains("leader_election_slowpath_total"), "{text}");
        m.set_leader("kube-scheduler", false);
        assert!(
            m.encode()
                .contains("leader_election_master_status{name=\"kube-scheduler\"} 0\n")
        );
    }
}
