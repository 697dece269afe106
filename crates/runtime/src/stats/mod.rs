//! Container and pod sandbox statistics (CRI ContainerStats, ListContainerStats,
//! PodSandboxStats, ListPodSandboxStats) and the cAdvisor-style metrics built from them
//! (ListMetricDescriptors, ListPodSandboxMetrics, see [`metrics`]).
//!
//! Sources, as containerd's CRI plugin uses them: the container's cgroup for CPU, memory
//! and process counts ([`cgroup`]), its overlay upper directory for the writable layer
//! ([`fs`]), the pod's pinned network namespace for traffic ([`network`]). Pod-level CPU,
//! memory and process counts come from the pod's parent cgroup.

pub mod cgroup;
pub mod fs;
pub mod metrics;
pub mod network;

use std::collections::HashMap;
use std::sync::Mutex;

use k8s_cri::v1::{
    ContainerAttributes, ContainerStats, ContainerStatsFilter, ContainerStatsRequest,
    ContainerStatsResponse, CpuUsage, FilesystemIdentifier, FilesystemUsage, LinuxPodSandboxStats,
    ListContainerStatsRequest, ListContainerStatsResponse, ListPodSandboxStatsRequest,
    ListPodSandboxStatsResponse, MemoryUsage, NetworkInterfaceUsage, NetworkUsage,
    PodSandboxAttributes, PodSandboxStats, PodSandboxStatsFilter, PodSandboxStatsRequest,
    PodSandboxStatsResponse, ProcessUsage, UInt64Value,
};

use crate::container::{Container, State};
use crate::error::Result;
use crate::runtime::Runtime;
use crate::sandbox::{Sandbox, ns};

/// Interface reported as a pod's `default_interface` (the one CNI attaches).
const DEFAULT_INTERFACE: &str = "eth0";

/// The statistics collector: the cgroup layout and the previous CPU reading of each
/// container and sandbox, from which `usage_nano_cores` is computed.
#[derive(Debug)]
pub struct Collector {
    layout: cgroup::Layout,
    previous_cpu: Mutex<HashMap<String, CpuPoint>>,
}

/// One cumulative CPU reading.
#[derive(Debug, Clone, Copy)]
struct CpuPoint {
    timestamp: i64,
    usage_ns: u64,
}

impl Collector {
    /// A collector for the node's cgroup layout ([`cgroup::Layout::detect`]).
    pub fn new() -> Self {
        Self::with_layout(cgroup::Layout::detect())
    }

    fn with_layout(layout: cgroup::Layout) -> Self {
        Self {
            layout,
            previous_cpu: Mutex::new(HashMap::new()),
        }
    }

    /// The CPU usage in nanocores of `id` since its previous reading, as containerd
    /// computes it: Δusage / Δtime × 10⁹. The first reading, or one not later than the
    /// previous, gives 0. The reading is remembered for the next call.
    fn nano_cores(&self, id: &str, timestamp: i64, usage_ns: u64) -> u64 {
        let mut previous = self
            .previous_cpu
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let current = CpuPoint {
            timestamp,
            usage_ns,
        };
        let Some(before) = previous.insert(id.to_string(), current) else {
            return 0;
        };
        let elapsed = timestamp - before.timestamp;
        if elapsed <= 0 {
            return 0;
        }
        let used = usage_ns.saturating_sub(before.usage_ns) as f64;
        (used / elapsed as f64 * 1e9) as u64
    }

    /// Forgets the readings of objects not in `live` (removed containers and sandboxes).
    fn retain(&self, live: impl Fn(&str) -> bool) {
        self.previous_cpu
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .retain(|id, _| live(id));
    }

    /// CPU usage of `id` from a cgroup sample taken at `timestamp`.
    fn cpu(&self, id: &str, timestamp: i64, sample: &cgroup::Sample) -> Option<CpuUsage> {
        sample.cpu_usage_ns.map(|usage_ns| CpuUsage {
            timestamp,
            usage_core_nano_seconds: Some(value(usage_ns)),
            usage_nano_cores: Some(value(self.nano_cores(id, timestamp, usage_ns))),
        })
    }
}

impl Default for Collector {
    fn default() -> Self {
        Self::new()
    }
}

fn value(value: u64) -> UInt64Value {
    UInt64Value { value }
}

fn memory(timestamp: i64, sample: &cgroup::Sample) -> Option<MemoryUsage> {
    sample.memory.as_ref().map(|m| MemoryUsage {
        timestamp,
        working_set_bytes: Some(value(m.working_set)),
        available_bytes: m.available().map(value),
        usage_bytes: Some(value(m.usage)),
        rss_bytes: Some(value(m.rss)),
        page_faults: Some(value(m.page_faults)),
        major_page_faults: Some(value(m.major_page_faults)),
    })
}

fn labels_match(labels: &HashMap<String, String>, selector: &HashMap<String, String>) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

impl Runtime {
    /// ContainerStats: the statistics of one container (ID or unique ID prefix);
    /// `NotFound` when unknown. A container that does not run has no CPU or memory
    /// figures (its cgroup is gone), only its writable layer.
    pub(crate) async fn container_stats(
        &self,
        req: ContainerStatsRequest,
    ) -> Result<ContainerStatsResponse> {
        let container = self.current_container(&req.container_id).await?.clone();
        Ok(ContainerStatsResponse {
            stats: Some(self.stats_of_container(&container)?),
        })
    }

    /// ListContainerStats: statistics of the RUNNING containers matching the filter (ID
    /// or ID prefix, sandbox ID or prefix, labels), as containerd lists the metrics of
    /// running tasks.
    pub(crate) async fn list_container_stats(
        &self,
        req: ListContainerStatsRequest,
    ) -> Result<ListContainerStatsResponse> {
        let filter = req.filter.unwrap_or_default();
        let mut stats = Vec::new();
        for container in self.running_containers().await? {
            if container_matches(&container, &filter) {
                stats.push(self.stats_of_container(&container)?);
            }
        }
        self.forget_removed();
        Ok(ListContainerStatsResponse { stats })
    }

    /// PodSandboxStats: the statistics of one sandbox (ID or unique ID prefix) and its
    /// running containers; `NotFound` when unknown.
    pub(crate) async fn pod_sandbox_stats(
        &self,
        req: PodSandboxStatsRequest,
    ) -> Result<PodSandboxStatsResponse> {
        let sandbox = self
            .sandboxes
            .require(&req.pod_sandbox_id)?
            .lock()
            .await
            .clone();
        let running = self.running_containers().await?;
        Ok(PodSandboxStatsResponse {
            stats: Some(self.stats_of_sandbox(&sandbox, &running).await?),
        })
    }

    /// ListPodSandboxStats: statistics of the READY sandboxes matching the filter (ID or
    /// ID prefix, labels).
    pub(crate) async fn list_pod_sandbox_stats(
        &self,
        req: ListPodSandboxStatsRequest,
    ) -> Result<ListPodSandboxStatsResponse> {
        let filter = req.filter.unwrap_or_default();
        let running = self.running_containers().await?;
        let mut stats = Vec::new();
        for sandbox in self.ready_sandboxes().await {
            if sandbox_matches(&sandbox, &filter) {
                stats.push(self.stats_of_sandbox(&sandbox, &running).await?);
            }
        }
        self.forget_removed();
        Ok(ListPodSandboxStatsResponse { stats })
    }

    /// Copies of the RUNNING containers' records, brought up to date.
    async fn running_containers(&self) -> Result<Vec<Container>> {
        let mut out = Vec::new();
        for entry in self.containers.all() {
            let mut container = entry.lock().await;
            self.refresh(&mut container)?;
            if container.state == State::Running {
                out.push(container.clone());
            }
        }
        out.sort_by_key(|c| c.created_at);
        Ok(out)
    }

    /// Copies of the READY sandboxes' records, oldest first.
    async fn ready_sandboxes(&self) -> Vec<Sandbox> {
        let mut out = Vec::new();
        for entry in self.sandboxes.all() {
            let sandbox = entry.lock().await;
            if sandbox.ready {
                out.push(sandbox.clone());
            }
        }
        out.sort_by_key(|s| s.created_at);
        out
    }

    fn forget_removed(&self) {
        self.stats
            .retain(|id| self.containers.get(id).is_some() || self.sandboxes.get(id).is_some());
    }

    /// The statistics of one container, read now.
    fn stats_of_container(&self, container: &Container) -> Result<ContainerStats> {
        Ok(self.read_container(container)?.0)
    }

    /// The statistics of one container and the cgroup sample they were made from.
    fn read_container(&self, container: &Container) -> Result<(ContainerStats, cgroup::Sample)> {
        let timestamp = crate::id::now_nanos();
        let sample = if container.state == State::Running {
            self.stats.layout.sample(&container.cgroups_path)
        } else {
            cgroup::Sample::default()
        };
        let snapshots = self.images.snapshotter();
        let layer = fs::usage(&snapshots.upper_dir(&container.id)?)?;
        let stats = ContainerStats {
            attributes: Some(ContainerAttributes {
                id: container.id.clone(),
                metadata: container.config.metadata.clone(),
                labels: container.config.labels.clone(),
                annotations: container.config.annotations.clone(),
            }),
            cpu: self.stats.cpu(&container.id, timestamp, &sample),
            memory: memory(timestamp, &sample),
            writable_layer: Some(FilesystemUsage {
                timestamp,
                fs_id: Some(FilesystemIdentifier {
                    mountpoint: snapshots.root().display().to_string(),
                }),
                used_bytes: Some(value(layer.used_bytes)),
                inodes_used: Some(value(layer.inodes_used)),
            }),
            swap: None,
        };
        Ok((stats, sample))
    }

    /// The statistics of one sandbox, read now; `running` are the node's running
    /// containers (those of this sandbox are included).
    async fn stats_of_sandbox(
        &self,
        sandbox: &Sandbox,
        running: &[Container],
    ) -> Result<PodSandboxStats> {
        let timestamp = crate::id::now_nanos();
        let containers = running
            .iter()
            .filter(|c| c.sandbox_id == sandbox.id)
            .map(|c| self.stats_of_container(c))
            .collect::<Result<Vec<_>>>()?;
        // Without a parent cgroup the pod has no cgroup of its own (never the node's root).
        let sample = if sandbox.cgroup_parent.is_empty() {
            cgroup::Sample::default()
        } else {
            (self.stats.layout).sample(std::path::Path::new(&sandbox.cgroup_parent))
        };
        Ok(PodSandboxStats {
            attributes: Some(PodSandboxAttributes {
                id: sandbox.id.clone(),
                metadata: sandbox.config.metadata.clone(),
                labels: sandbox.config.labels.clone(),
                annotations: sandbox.config.annotations.clone(),
            }),
            linux: Some(LinuxPodSandboxStats {
                cpu: self.stats.cpu(&sandbox.id, timestamp, &sample),
                memory: memory(timestamp, &sample),
                network: self.network_of(sandbox, timestamp).await,
                process: sample.pids.map(|count| ProcessUsage {
                    timestamp,
                    process_count: Some(value(count)),
                }),
                containers,
            }),
            windows: None,
        })
    }

    /// Traffic of the sandbox's own network namespace (`eth0` as the default interface,
    /// the others, loopback aside, as `interfaces`); `None` for host-network pods and
    /// when the namespace cannot be read (logged).
    async fn network_of(&self, sandbox: &Sandbox, timestamp: i64) -> Option<NetworkUsage> {
        let interfaces = self.interfaces_of(sandbox).await?;
        let usage = |i: &network::Interface| NetworkInterfaceUsage {
            name: i.name.clone(),
            rx_bytes: Some(value(i.rx_bytes)),
            rx_errors: Some(value(i.rx_errors)),
            tx_bytes: Some(value(i.tx_bytes)),
            tx_errors: Some(value(i.tx_errors)),
        };
        Some(NetworkUsage {
            timestamp,
            default_interface: interfaces
                .iter()
                .find(|i| i.name == DEFAULT_INTERFACE)
                .map(usage),
            // The CRI lists the other interfaces here, "excluding the default".
            interfaces: interfaces
                .iter()
                .filter(|i| i.name != DEFAULT_INTERFACE)
                .map(usage)
                .collect(),
        })
    }

    /// The interfaces of the sandbox's pinned network namespace (see [`network_of`]).
    async fn interfaces_of(&self, sandbox: &Sandbox) -> Option<Vec<network::Interface>> {
        if !sandbox.pinned.contains(&ns::Kind::Net) {
            return None;
        }
        let netns = ns::pin_path(&self.sandbox_paths(&sandbox.id).ns, ns::Kind::Net);
        match tokio::task::spawn_blocking(move || network::interfaces(&netns)).await {
            Ok(Ok(interfaces)) => Some(interfaces),
            Ok(Err(err)) => {
                tracing::warn!(id = %sandbox.id, "pod network statistics: {err:#}");
                None
            }
            Err(err) => {
                tracing::warn!(id = %sandbox.id, "pod network statistics: {err}");
                None
            }
        }
    }
}

fn container_matches(container: &Container, filter: &ContainerStatsFilter) -> bool {
    container.id.starts_with(&filter.id)
        && container.sandbox_id.starts_with(&filter.pod_sandbox_id)
        && labels_match(&container.config.labels, &filter.label_selector)
}

fn sandbox_matches(sandbox: &Sandbox, filter: &PodSandboxStatsFilter) -> bool {
    sandbox.id.starts_with(&filter.id)
        && labels_match(&sandbox.config.labels, &filter.label_selector)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nano_cores_from_consecutive_readings() {
        let collector = Collector::with_layout(cgroup::Layout::detect());
        assert_eq!(collector.nano_cores("a", 1_000_000_000, 5_000), 0, "first");
        // 0.5 s of CPU over 2 s: a quarter of a core.
        assert_eq!(
            collector.nano_cores("a", 3_000_000_000, 500_005_000),
            250_000_000
        );
        assert_eq!(collector.nano_cores("a", 3_000_000_000, 600_000_000), 0);
        collector.retain(|id| id != "a");
        assert_eq!(collector.nano_cores("a", 4_000_000_000, 700_000_000), 0);
    }
}
