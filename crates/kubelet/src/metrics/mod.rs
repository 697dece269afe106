//! The kubelet's Prometheus metrics (upstream `pkg/kubelet/metrics`), served at
//! `/metrics`, and the resource metrics of `/metrics/resource` ([`resource`]).
//!
//! Like upstream's global registry, the metrics live in one process-wide
//! [`KubeletMetrics`] ([`metrics()`]) so that the modules that observe them (PLEG, pod
//! workers, the CRI wrapper [`InstrumentedCri`]) need no plumbing. Gauges of the
//! runtime's current state (`kubelet_running_pods`, `kubelet_running_containers`) are
//! computed at scrape time ([`KubeletMetrics::encode`]).

pub mod resource;
mod runtime_ops;

pub use runtime_ops::InstrumentedCri;

use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Instant, UNIX_EPOCH};

use k8s_cri::v1::{ContainerState, ListContainersRequest, ListPodSandboxRequest, PodSandboxState};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::cri::Cri;
use crate::pleg::stats::{BUCKETS as PLEG_BUCKETS, Histogram as PlegHistogram};
use crate::pleg::{PlegHealth, RelistStats};

/// The content type of [`KubeletMetrics::encode`]'s output.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Label pairs of a metric family.
type Labels = Vec<(String, String)>;

/// Prometheus' default histogram buckets (seconds), used by upstream for most durations.
const DEFAULT_BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];
/// Upstream's `kubelet_pod_start_duration_seconds` buckets.
const POD_START_BUCKETS: [f64; 25] = [
    0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 20.0, 30.0, 45.0, 60.0, 120.0, 180.0, 240.0,
    300.0, 360.0, 480.0, 600.0, 900.0, 1200.0, 1800.0, 2700.0, 3600.0,
];

/// Every kubelet metric, by its upstream name.
pub struct KubeletMetrics {
    registry: Registry,
    node_name: Family<Labels, Gauge>,
    running_pods: Gauge,
    running_containers: Family<Labels, Gauge>,
    /// `kubelet_pod_start_duration_seconds`: from the pod's first sight by the kubelet to
    /// its first Running status.
    pub pod_start_duration: Histogram,
    /// `kubelet_pod_worker_duration_seconds{operation_type}`: one sync of a pod
    /// (`create`, `sync`, `kill`).
    pub pod_worker_duration: Family<Labels, Histogram>,
    /// `kubelet_runtime_operations_total{operation_type}`.
    pub runtime_operations: Family<Labels, Counter>,
    /// `kubelet_runtime_operations_errors_total{operation_type}`.
    pub runtime_operations_errors: Family<Labels, Counter>,
    /// `kubelet_runtime_operations_duration_seconds{operation_type}`.
    pub runtime_operations_duration: Family<Labels, Histogram>,
    /// `kubelet_started_pods_total`: sandboxes the kubelet asked for.
    pub started_pods: Counter,
    /// `kubelet_started_pods_errors_total`.
    pub started_pods_errors: Counter,
    /// `kubelet_started_containers_total{container_type}`.
    pub started_containers: Family<Labels, Counter>,
    /// `kubelet_started_containers_errors_total{container_type,code}`.
    pub started_containers_errors: Family<Labels, Counter>,
    /// The PLEG's relist timings and health, once the kubelet runs.
    pleg: Arc<PlegCollector>,
}

/// The process-wide metrics.
pub fn metrics() -> &'static KubeletMetrics {
    static METRICS: OnceLock<KubeletMetrics> = OnceLock::new();
    METRICS.get_or_init(KubeletMetrics::new)
}

/// One label pair.
pub fn label(name: &str, value: &str) -> Labels {
    vec![(name.to_owned(), value.to_owned())]
}

impl KubeletMetrics {
    fn new() -> Self {
        let mut registry = Registry::default();
        let metrics = Self {
            node_name: Family::default(),
            running_pods: Gauge::default(),
            running_containers: Family::default(),
            pod_start_duration: Histogram::new(POD_START_BUCKETS),
            pod_worker_duration: Family::new_with_constructor(|| Histogram::new(DEFAULT_BUCKETS)),
            runtime_operations: Family::default(),
            runtime_operations_errors: Family::default(),
            runtime_operations_duration: Family::new_with_constructor(|| {
                Histogram::new(DEFAULT_BUCKETS)
            }),
            started_pods: Counter::default(),
            started_pods_errors: Counter::default(),
            started_containers: Family::default(),
            started_containers_errors: Family::default(),
            registry: Registry::default(),
            pleg: Arc::default(),
        };
        let r = &mut registry;
        r.register(
            "kubelet_node_name",
            "The node's name. The count is always 1.",
            metrics.node_name.clone(),
        );
        r.register(
            "kubelet_running_pods",
            "Number of pods that have a running pod sandbox",
            metrics.running_pods.clone(),
        );
        r.register(
            "kubelet_running_containers",
            "Number of containers currently running",
            metrics.running_containers.clone(),
        );
        r.register("kubelet_pod_start_duration_seconds", "Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run", metrics.pod_start_duration.clone());
        r.register("kubelet_pod_worker_duration_seconds", "Duration in seconds to sync a single pod. Broken down by operation type: create, update, or sync", metrics.pod_worker_duration.clone());
        r.register_collector(Box::new(metrics.pleg.clone()));
        // Counters get their `_total` suffix from the encoder.
        r.register(
            "kubelet_runtime_operations",
            "Cumulative number of runtime operations by operation type.",
            metrics.runtime_operations.clone(),
        );
        r.register(
            "kubelet_runtime_operations_errors",
            "Cumulative number of runtime operation errors by operation type.",
            metrics.runtime_operations_errors.clone(),
        );
        r.register(
            "kubelet_runtime_operations_duration_seconds",
            "Duration in seconds of runtime operations. Broken down by operation type.",
            metrics.runtime_operations_duration.clone(),
        );
        r.register(
            "kubelet_started_pods",
            "Cumulative number of pods started",
            metrics.started_pods.clone(),
        );
        r.register(
            "kubelet_started_pods_errors",
            "Cumulative number of errors when starting pods",
            metrics.started_pods_errors.clone(),
        );
        r.register(
            "kubelet_started_containers",
            "Cumulative number of containers started",
            metrics.started_containers.clone(),
        );
        r.register(
            "kubelet_started_containers_errors",
            "Cumulative number of errors when starting containers",
            metrics.started_containers_errors.clone(),
        );
        Self {
            registry,
            ..metrics
        }
    }

    /// Exposes the PLEG's relist histograms (`kubelet_pleg_relist_duration_seconds`,
    /// `kubelet_pleg_relist_interval_seconds`) and `kubelet_pleg_last_seen_seconds`.
    pub fn set_pleg(&self, stats: RelistStats, health: PlegHealth) {
        *self.pleg.0.lock().unwrap_or_else(PoisonError::into_inner) = Some((stats, health));
    }

    /// Observes one pod worker sync (`kubelet_pod_worker_duration_seconds`) of
    /// `operation_type` `create` (the pod's first sync), `sync` or `kill`.
    pub fn observe_pod_worker(&self, operation_type: &str, started: Instant) {
        self.pod_worker_duration
            .get_or_create(&label("operation_type", operation_type))
            .observe(started.elapsed().as_secs_f64());
    }

    /// Sets `kubelet_node_name{node}` to 1.
    pub fn set_node_name(&self, node: &str) {
        self.node_name.get_or_create(&label("node", node)).set(1);
    }

    /// The metrics in the OpenMetrics text format (the Prometheus text format with
    /// `# EOF`), after refreshing the runtime gauges from `cri` (left as they were if the
    /// runtime does not answer).
    pub async fn encode(&self, cri: &dyn Cri) -> String {
        if let Ok(sandboxes) = cri.list_pod_sandbox(ListPodSandboxRequest::default()).await {
            let ready = sandboxes
                .items
                .iter()
                .filter(|s| s.state == PodSandboxState::SandboxReady as i32)
                .count();
            self.running_pods.set(ready as i64);
        }
        if let Ok(containers) = cri.list_containers(ListContainersRequest::default()).await {
            for state in [
                ContainerState::ContainerCreated,
                ContainerState::ContainerRunning,
                ContainerState::ContainerExited,
                ContainerState::ContainerUnknown,
            ] {
                let count = containers
                    .containers
                    .iter()
                    .filter(|c| c.state == state as i32)
                    .count();
                self.running_containers
                    .get_or_create(&label("container_state", container_state_label(state)))
                    .set(count as i64);
            }
        }
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

/// Encodes the PLEG's own timings at scrape time.
#[derive(Debug, Default)]
struct PlegCollector(Mutex<Option<(RelistStats, PlegHealth)>>);

impl Collector for PlegCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some((stats, health)) = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
        else {
            return Ok(());
        };
        let snapshot = stats.snapshot();
        for (name, help, histogram) in [
            (
                "kubelet_pleg_relist_duration_seconds",
                "Duration in seconds for relisting pods in PLEG.",
                &snapshot.duration,
            ),
            (
                "kubelet_pleg_relist_interval_seconds",
                "Interval in seconds between relisting in PLEG.",
                &snapshot.interval,
            ),
        ] {
            let metric = encoder.encode_descriptor(
                name,
                help,
                None,
                prometheus_client::metrics::MetricType::Histogram,
            )?;
            encode_pleg_histogram(metric, histogram)?;
        }
        if let Some(seen) = health.last_seen() {
            let seconds = seen
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or_default();
            let gauge = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
            gauge.set(seconds);
            let metric = encoder.encode_descriptor(
                "kubelet_pleg_last_seen_seconds",
                "Timestamp in seconds when PLEG was last seen active.",
                None,
                gauge.metric_type(),
            )?;
            gauge.encode(metric)?;
        }
        Ok(())
    }
}

/// A PLEG histogram (per-bucket counts) in the encoder's form: per-bucket counts with
/// the `+Inf` overflow last.
fn encode_pleg_histogram(
    mut metric: prometheus_client::encoding::MetricEncoder<'_>,
    histogram: &PlegHistogram,
) -> Result<(), std::fmt::Error> {
    let mut buckets: Vec<(f64, u64)> = PLEG_BUCKETS
        .iter()
        .copied()
        .zip(histogram.bucket_counts)
        .collect();
    let within: u64 = histogram.bucket_counts.iter().sum();
    buckets.push((f64::MAX, histogram.count.saturating_sub(within)));
    metric.encode_histogram::<prometheus_client::encoding::NoLabelSet>(
        histogram.sum,
        histogram.count,
        &buckets,
        None,
    )
}

/// Upstream's `container_state` label values.
fn container_state_label(state: ContainerState) -> &'static str {
    match state {
        ContainerState::ContainerCreated => "created",
        ContainerState::ContainerRunning => "running",
        ContainerState::ContainerExited => "exited",
        ContainerState::ContainerUnknown => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cri::fake::FakeCri;

    #[tokio::test]
    async fn exposes_upstream_names() {
        let m = metrics();
        m.set_node_name("node-a");
        let mut pleg = crate::pleg::Pleg::new(std::sync::Arc::new(FakeCri::default()));
        pleg.relist().await.unwrap();
        pleg.relist().await.unwrap();
        m.set_pleg(pleg.relist_stats(), pleg.health());
        m.started_pods.inc();
        m.runtime_operations
            .get_or_create(&label("operation_type", "version"))
            .inc();
        m.pod_worker_duration
            .get_or_create(&label("operation_type", "sync"))
            .observe(0.2);
        let text = m.encode(&FakeCri::default()).await;
        for line in [
            "kubelet_node_name{node=\"node-a\"} 1",
            "kubelet_running_pods 0",
            "kubelet_running_containers{container_state=\"running\"} 0",
            "# TYPE kubelet_pleg_relist_duration_seconds histogram",
            "# TYPE kubelet_pleg_relist_interval_seconds histogram",
            "# TYPE kubelet_pod_start_duration_seconds histogram",
            "# TYPE kubelet_pleg_last_seen_seconds gauge",
            "kubelet_pleg_relist_interval_seconds_count 1",
            "kubelet_pleg_relist_duration_seconds_bucket{le=\"+Inf\"} 2",
            "kubelet_pleg_last_seen_seconds ",
            "# TYPE kubelet_runtime_operations_errors counter",
            "kubelet_runtime_operations_total{operation_type=\"version\"}",
            "kubelet_pod_worker_duration_seconds_count{operation_type=\"sync\"}",
            "kubelet_started_pods_total",
            "# EOF",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
    }
}
