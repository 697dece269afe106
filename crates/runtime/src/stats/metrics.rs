//! ListMetricDescriptors and ListPodSandboxMetrics: the cAdvisor metric names the kubelet
//! serves on `/metrics/cadvisor` when it takes pod and container stats from the CRI
//! (feature gate `PodAndContainerStatsFromCRI`), with containerd's label keys (`id`,
//! `name`, plus `interface` or `device`). Values come from the same readings as
//! ContainerStats and PodSandboxStats.

use k8s_cri::v1::{
    ContainerMetrics, ContainerStats, ListMetricDescriptorsResponse, ListPodSandboxMetricsResponse,
    Metric, MetricDescriptor, MetricType, PodSandboxMetrics, UInt64Value,
};

use super::network::Interface;
use crate::error::Result;
use crate::runtime::Runtime;

/// Label keys every metric has: the object's ID and its CRI metadata name.
const BASE_LABELS: [&str; 2] = ["id", "name"];

/// One metric family: its descriptor and how a value is read.
struct Family<T: ?Sized> {
    name: &'static str,
    help: &'static str,
    metric_type: MetricType,
    /// A label key after [`BASE_LABELS`] (`interface`, `device`), if any.
    extra_label: Option<&'static str>,
    value: fn(&T) -> Option<u64>,
}

/// What a container metric is computed from: its stats and its process count.
struct ContainerReading {
    stats: ContainerStats,
    processes: Option<u64>,
}

const NS_PER_SECOND: u64 = 1_000_000_000;

const CONTAINER_FAMILIES: &[Family<ContainerReading>] = &[
    Family {
        name: "container_cpu_usage_seconds_total",
        help: "Cumulative CPU time consumed in seconds.",
        metric_type: MetricType::Counter,
        extra_label: None,
        value: |r| {
            let cpu = r.stats.cpu.as_ref()?;
            Some(cpu.usage_core_nano_seconds.as_ref()?.value / NS_PER_SECOND)
        },
    },
    Family {
        name: "container_memory_usage_bytes",
        help: "Current memory usage in bytes, including all memory regardless of when it was accessed",
        metric_type: MetricType::Gauge,
        extra_label: None,
        value: |r| Some(r.stats.memory.as_ref()?.usage_bytes.as_ref()?.value),
    },
    Family {
        name: "container_memory_working_set_bytes",
        help: "Current working set in bytes.",
        metric_type: MetricType::Gauge,
        extra_label: None,
        value: |r| Some(r.stats.memory.as_ref()?.working_set_bytes.as_ref()?.value),
    },
    Family {
        name: "container_memory_rss",
        help: "Size of RSS in bytes.",
        metric_type: MetricType::Gauge,
        extra_label: None,
        value: |r| Some(r.stats.memory.as_ref()?.rss_bytes.as_ref()?.value),
    },
    Family {
        name: "container_processes",
        help: "Number of processes running inside the container.",
        metric_type: MetricType::Gauge,
        extra_label: None,
        value: |r| r.processes,
    },
    Family {
        name: "container_fs_usage_bytes",
        help: "Number of bytes that are consumed by the container on this filesystem.",
        metric_type: MetricType::Gauge,
        extra_label: Some("device"),
        value: |r| Some(r.stats.writable_layer.as_ref()?.used_bytes.as_ref()?.value),
    },
];

const NETWORK_FAMILIES: &[Family<Interface>] = &[
    Family {
        name: "container_network_receive_bytes_total",
        help: "Cumulative count of bytes received",
        metric_type: MetricType::Counter,
        extra_label: Some("interface"),
        value: |i| Some(i.rx_bytes),
    },
    Family {
        name: "container_network_receive_errors_total",
        help: "Cumulative count of errors encountered while receiving",
        metric_type: MetricType::Counter,
        extra_label: Some("interface"),
        value: |i| Some(i.rx_errors),
    },
    Family {
        name: "container_network_transmit_bytes_total",
        help: "Cumulative count of bytes transmitted",
        metric_type: MetricType::Counter,
        extra_label: Some("interface"),
        value: |i| Some(i.tx_bytes),
    },
    Family {
        name: "container_network_transmit_errors_total",
        help: "Cumulative count of errors encountered while transmitting",
        metric_type: MetricType::Counter,
        extra_label: Some("interface"),
        value: |i| Some(i.tx_errors),
    },
];

impl<T: ?Sized> Family<T> {
    fn descriptor(&self) -> MetricDescriptor {
        MetricDescriptor {
            name: self.name.into(),
            help: self.help.into(),
            label_keys: BASE_LABELS
                .iter()
                .chain(self.extra_label.as_ref())
                .map(|key| key.to_string())
                .collect(),
        }
    }

    /// The metric for `source`, labelled `[id, name, extra]`; `None` when the value is
    /// unknown.
    fn metric(&self, source: &T, timestamp: i64, labels: &[&str]) -> Option<Metric> {
        Some(Metric {
            name: self.name.into(),
            timestamp,
            metric_type: self.metric_type as i32,
            label_values: labels.iter().map(|l| l.to_string()).collect(),
            value: Some(UInt64Value {
                value: (self.value)(source)?,
            }),
        })
    }
}

/// Every metric family ListPodSandboxMetrics reports.
pub fn descriptors() -> ListMetricDescriptorsResponse {
    ListMetricDescriptorsResponse {
        descriptors: CONTAINER_FAMILIES
            .iter()
            .map(Family::descriptor)
            .chain(NETWORK_FAMILIES.iter().map(Family::descriptor))
            .collect(),
    }
}

/// Metrics of one container.
fn container_metrics(reading: &ContainerReading) -> ContainerMetrics {
    let stats = &reading.stats;
    let id = stats
        .attributes
        .as_ref()
        .map(|a| a.id.clone())
        .unwrap_or_default();
    let name = stats
        .attributes
        .as_ref()
        .and_then(|a| a.metadata.as_ref())
        .map(|m| m.name.clone())
        .unwrap_or_default();
    let device = stats
        .writable_layer
        .as_ref()
        .and_then(|w| w.fs_id.as_ref())
        .map(|f| f.mountpoint.clone())
        .unwrap_or_default();
    let timestamp = crate::id::now_nanos();
    let metrics = CONTAINER_FAMILIES
        .iter()
        .filter_map(|family| {
            let labels: &[&str] = match family.extra_label {
                Some(_) => &[&id, &name, &device],
                None => &[&id, &name],
            };
            family.metric(reading, timestamp, labels)
        })
        .collect();
    ContainerMetrics {
        container_id: id,
        metrics,
    }
}

/// Pod-level metrics: one set of network families per interface.
fn network_metrics(id: &str, name: &str, interfaces: &[Interface]) -> Vec<Metric> {
    let timestamp = crate::id::now_nanos();
    interfaces
        .iter()
        .flat_map(|interface| {
            NETWORK_FAMILIES.iter().filter_map(move |family| {
                family.metric(interface, timestamp, &[id, name, &interface.name])
            })
        })
        .collect()
}

impl Runtime {
    /// ListPodSandboxMetrics: per READY sandbox, its network metrics and the metrics of
    /// its running containers.
    pub(crate) async fn list_pod_sandbox_metrics(&self) -> Result<ListPodSandboxMetricsResponse> {
        let running = self.running_containers().await?;
        let mut pod_metrics = Vec::new();
        for sandbox in self.ready_sandboxes().await {
            let mut container_metrics = Vec::new();
            for container in running.iter().filter(|c| c.sandbox_id == sandbox.id) {
                let (stats, sample) = self.read_container(container)?;
                container_metrics.push(self::container_metrics(&ContainerReading {
                    stats,
                    processes: sample.pids,
                }));
            }
            let name = sandbox
                .config
                .metadata
                .as_ref()
                .map(|m| m.name.clone())
                .unwrap_or_default();
            let interfaces = self.interfaces_of(&sandbox).await.unwrap_or_default();
            pod_metrics.push(PodSandboxMetrics {
                metrics: network_metrics(&sandbox.id, &name, &interfaces),
                pod_sandbox_id: sandbox.id,
                container_metrics,
            });
        }
        Ok(ListPodSandboxMetricsResponse { pod_metrics })
    }
}

#[cfg(test)]
mod tests {
    use k8s_cri::v1::{
        ContainerAttributes, ContainerMetadata, CpuUsage, FilesystemIdentifier, FilesystemUsage,
    };

    use super::*;

    fn value(value: u64) -> Option<UInt64Value> {
        Some(UInt64Value { value })
    }

    #[test]
    fn descriptors_name_their_label_keys() {
        let all = descriptors().descriptors;
        let find = |name: &str| all.iter().find(|d| d.name == name).unwrap().clone();
        assert_eq!(
            find("container_cpu_usage_seconds_total").label_keys,
            ["id", "name"]
        );
        assert_eq!(
            find("container_fs_usage_bytes").label_keys,
            ["id", "name", "device"]
        );
        assert_eq!(
            find("container_network_receive_bytes_total").label_keys,
            ["id", "name", "interface"]
        );
        assert_eq!(all.len(), CONTAINER_FAMILIES.len() + NETWORK_FAMILIES.len());
    }

    #[test]
    fn container_metrics_follow_their_descriptors() {
        let stats = ContainerStats {
            attributes: Some(ContainerAttributes {
                id: "c1".into(),
                metadata: Some(ContainerMetadata {
                    name: "web".into(),
                    attempt: 0,
                }),
                ..Default::default()
            }),
            cpu: Some(CpuUsage {
                usage_core_nano_seconds: value(3_500_000_000),
                ..Default::default()
            }),
            memory: None,
            writable_layer: Some(FilesystemUsage {
                fs_id: Some(FilesystemIdentifier {
                    mountpoint: "/var/lib/skiff/runtime/snapshots".into(),
                }),
                used_bytes: value(4096),
                ..Default::default()
            }),
            swap: None,
        };
        let metrics = container_metrics(&ContainerReading {
            stats,
            processes: Some(2),
        });
        assert_eq!(metrics.container_id, "c1");
        let find = |name: &str| metrics.metrics.iter().find(|m| m.name == name).cloned();
        let cpu = find("container_cpu_usage_seconds_total").unwrap();
        assert_eq!(cpu.value, value(3), "whole seconds");
        assert_eq!(cpu.metric_type, MetricType::Counter as i32);
        assert_eq!(cpu.label_values, ["c1", "web"]);
        let fs = find("container_fs_usage_bytes").unwrap();
        assert_eq!(
            fs.label_values,
            ["c1", "web", "/var/lib/skiff/runtime/snapshots"]
        );
        assert_eq!(find("container_processes").unwrap().value, value(2));
        assert!(find("container_memory_usage_bytes").is_none(), "unknown");
    }

    #[test]
    fn network_metrics_per_interface() {
        let eth0 = Interface {
            name: "eth0".into(),
            rx_bytes: 10,
            rx_errors: 1,
            tx_bytes: 20,
            tx_errors: 2,
        };
        let metrics = network_metrics("s1", "pod", &[eth0]);
        assert_eq!(metrics.len(), NETWORK_FAMILIES.len());
        let tx = metrics
            .iter()
            .find(|m| m.name == "container_network_transmit_bytes_total")
            .unwrap();
        assert_eq!(tx.label_values, ["s1", "pod", "eth0"]);
        assert_eq!(tx.value, value(20));
    }
}
