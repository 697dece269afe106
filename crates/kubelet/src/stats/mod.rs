//! Node and pod resource usage (upstream `pkg/kubelet/stats` and the Summary API).
//!
//! [`SummaryProvider::summary`] builds the [`summary::Summary`] served at
//! `/stats/summary` and read by `/metrics/resource` (and usable by the eviction
//! manager): node figures from [`host`], pod and container figures from the runtime's
//! CRI `ListPodSandboxStats` / `ListContainerStats`, filesystems by `statvfs`.

pub mod host;
pub mod summary;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, SecondsFormat, Utc};
use k8s_cri::v1::{
    ContainerState, ContainerStats as CriContainerStats, CpuUsage, ImageFsInfoRequest,
    ListContainerStatsRequest, ListPodSandboxStatsRequest, MemoryUsage, NetworkUsage,
    PodSandboxStats,
};

use crate::cri::Cri;
use crate::kuberuntime::labels::{
    CONTAINER_NAME_LABEL, POD_NAME_LABEL, POD_NAMESPACE_LABEL, POD_UID_LABEL,
};
use crate::pod_dirs::PodDirs;
use host::HostPaths;
use summary::*;

/// A cumulative CPU usage (core-nanoseconds) and when it was read.
type CpuSample = (DateTime<Utc>, u64);

/// Builds summaries. Cheap to clone; keeps the previous node CPU sample to compute
/// `usageNanoCores`.
#[derive(Clone)]
pub struct SummaryProvider {
    cri: Arc<dyn Cri>,
    node_name: String,
    /// The kubelet root directory: its filesystem is nodefs.
    root_dir: PathBuf,
    /// `/var/log/pods`: containers' log usage.
    pod_logs_dir: PathBuf,
    host: HostPaths,
    /// The cgroup holding all pods (`/kubepods`), reported as system container `pods`.
    pods_cgroup: Option<PathBuf>,
    last_cpu: Arc<Mutex<Option<CpuSample>>>,
}

impl SummaryProvider {
    /// A provider over `cri` for the node `node_name`, reading the host's real files.
    pub fn new(
        cri: Arc<dyn Cri>,
        node_name: String,
        root_dir: PathBuf,
        pod_logs_dir: PathBuf,
    ) -> Self {
        Self {
            cri,
            node_name,
            root_dir,
            pod_logs_dir,
            host: HostPaths::default(),
            pods_cgroup: None,
            last_cpu: Arc::default(),
        }
    }

    /// Also reports the cgroup `path` (e.g. `/kubepods`) as the node's system container
    /// `pods` (upstream's `SystemContainerPods`).
    pub fn with_pods_cgroup(mut self, path: PathBuf) -> Self {
        self.pods_cgroup = Some(path);
        self
    }

    /// The `pods` system container: CPU and memory of the pods cgroup, when readable.
    fn pods_container(&self, time: &str, start_time: &str) -> Option<ContainerStats> {
        let path = self.pods_cgroup.as_deref()?;
        let memory = self.host.cgroup_memory(path)?;
        Some(ContainerStats {
            name: "pods".to_owned(),
            start_time: start_time.to_owned(),
            cpu: self.host.cgroup_cpu_usage(path).map(|usage| CpuStats {
                time: time.to_owned(),
                usage_nano_cores: None,
                usage_core_nano_seconds: Some(usage),
            }),
            memory: Some(MemoryStats {
                time: time.to_owned(),
                available_bytes: None,
                usage_bytes: Some(memory.usage),
                working_set_bytes: Some(memory.working_set),
                rss_bytes: Some(memory.rss),
                page_faults: Some(memory.page_faults),
                major_page_faults: Some(memory.major_page_faults),
            }),
            rootfs: None,
            logs: None,
        })
    }

    /// The summary now. Node figures the host cannot give are omitted; pods come from
    /// `ListPodSandboxStats`, or from `ListContainerStats` grouped by pod when the runtime
    /// lacks it.
    ///
    /// Errors when the runtime answers neither pod stats call nor ListPodSandbox.
    pub async fn summary(&self) -> Result<Summary, tonic::Status> {
        let now = Utc::now();
        let time = rfc3339(now);
        let runtime = self.runtime_stats(&time).await;
        let container_fs = runtime.container_fs.clone().unwrap_or_default();
        let node = self.node_stats(now, &time, runtime);
        let pods = self.pod_stats(&time, &container_fs).await?;
        Ok(Summary { node, pods })
    }

    fn node_stats(&self, now: DateTime<Utc>, time: &str, runtime: RuntimeStats) -> NodeStats {
        let host = &self.host;
        let cpu = host.cpu_usage_core_nanoseconds().map(|usage| {
            let mut last = self.last_cpu.lock().unwrap_or_else(|e| e.into_inner());
            let nano_cores = last.and_then(|(t, u)| nano_cores(t, u, now, usage));
            *last = Some((now, usage));
            CpuStats {
                time: time.to_owned(),
                usage_nano_cores: nano_cores,
                usage_core_nano_seconds: Some(usage),
            }
        });
        let memory = host.memory().map(|m| MemoryStats {
            time: time.to_owned(),
            available_bytes: Some(m.capacity.saturating_sub(m.working_set)),
            usage_bytes: Some(m.usage),
            working_set_bytes: Some(m.working_set),
            rss_bytes: Some(m.rss),
            page_faults: Some(m.page_faults),
            major_page_faults: Some(m.major_page_faults),
        });
        let interfaces = host.interfaces();
        let network = (!interfaces.is_empty()).then(|| NetworkStats {
            time: time.to_owned(),
            default: interfaces
                .iter()
                .find(|i| i.name == "eth0")
                .unwrap_or(&interfaces[0])
                .clone(),
            interfaces,
        });
        let start_time = host
            .boot_time()
            .and_then(|s| DateTime::from_timestamp(s, 0))
            .map(rfc3339)
            .unwrap_or_default();
        NodeStats {
            node_name: self.node_name.clone(),
            system_containers: self.pods_container(time, &start_time).into_iter().collect(),
            start_time,
            cpu,
            memory,
            network,
            fs: host::filesystem(&self.root_dir, time),
            runtime: Some(runtime),
            rlimit: Some(RlimitStats {
                time: time.to_owned(),
                maxpid: host.max_pid(),
                curproc: host.process_count(),
            }),
        }
    }

    /// imagefs and containerfs: the runtime's usage (ImageFsInfo) on the filesystem
    /// capacity of its mountpoint.
    async fn runtime_stats(&self, time: &str) -> RuntimeStats {
        let Ok(info) = self.cri.image_fs_info(ImageFsInfoRequest {}).await else {
            return RuntimeStats::default();
        };
        let fs = |usage: Option<&k8s_cri::v1::FilesystemUsage>| {
            let usage = usage?;
            let mount = usage.fs_id.as_ref()?.mountpoint.clone();
            let mut fs = host::filesystem(std::path::Path::new(&mount), time)?;
            fs.used_bytes = usage.used_bytes.as_ref().map(|v| v.value);
            fs.inodes_used = usage.inodes_used.as_ref().map(|v| v.value);
            Some(fs)
        };
        let image_fs = fs(info.image_filesystems.first());
        let container_fs = fs(info.container_filesystems.first()).or_else(|| image_fs.clone());
        RuntimeStats {
            image_fs,
            container_fs,
        }
    }

    /// Usage of the pod's volumes set up under `<root>/pods/<uid>/volumes/<plugin>/<name>`
    /// (emptyDir, downwardAPI, ...; hostPath volumes have none, as upstream's metrics
    /// providers), each with the capacity of the filesystem holding it. Sorted by name.
    fn volume_stats(&self, uid: &str, time: &str) -> Vec<VolumeStats> {
        let plugins = PodDirs::new(&self.root_dir).pod_volumes_dir(uid);
        let mut volumes: Vec<VolumeStats> = std::fs::read_dir(plugins)
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .flat_map(|plugin| std::fs::read_dir(plugin.path()).into_iter().flatten())
            .filter_map(Result::ok)
            .filter_map(|volume| {
                let dir = volume.path();
                let (used_bytes, inodes_used) = host::disk_usage(&dir);
                Some(VolumeStats {
                    name: volume.file_name().into_string().ok()?,
                    fs: FsStats {
                        used_bytes: Some(used_bytes),
                        inodes_used: Some(inodes_used),
                        ..fs_capacity(&host::filesystem(&dir, time)?)
                    },
                })
            })
            .collect();
        volumes.sort_by(|a, b| a.name.cmp(&b.name));
        volumes
    }

    /// Pods with a ready sandbox; `imagefs` gives the capacity of writable layers.
    async fn pod_stats(
        &self,
        time: &str,
        imagefs: &FsStats,
    ) -> Result<Vec<PodStats>, tonic::Status> {
        let (sandboxes, containers) = crate::cri::list_all(&*self.cri).await?;
        let by_sandbox: HashMap<String, PodSandboxStats> = match self
            .cri
            .list_pod_sandbox_stats(ListPodSandboxStatsRequest::default())
            .await
        {
            Ok(resp) => resp
                .stats
                .into_iter()
                .filter_map(|s| Some((s.attributes.as_ref()?.id.clone(), s)))
                .collect(),
            Err(_) => HashMap::new(),
        };
        let container_stats: HashMap<String, CriContainerStats> = self
            .cri
            .list_container_stats(ListContainerStatsRequest::default())
            .await
            .map(|r| r.stats)
            .unwrap_or_default()
            .into_iter()
            .chain(
                by_sandbox
                    .values()
                    .filter_map(|s| s.linux.as_ref())
                    .flat_map(|l| l.containers.clone()),
            )
            .filter_map(|s| Some((s.attributes.as_ref()?.id.clone(), s)))
            .collect();
        let logfs = host::filesystem(&self.pod_logs_dir, time).unwrap_or_default();

        let mut pods = Vec::new();
        for sandbox in sandboxes
            .iter()
            .filter(|s| s.state == k8s_cri::v1::PodSandboxState::SandboxReady as i32)
        {
            let label = |k: &str| sandbox.labels.get(k).cloned().unwrap_or_default();
            let pod_ref = PodReference {
                name: label(POD_NAME_LABEL),
                namespace: label(POD_NAMESPACE_LABEL),
                uid: label(POD_UID_LABEL),
            };
            // The latest instance of each container of this sandbox.
            let mut latest: HashMap<String, &k8s_cri::v1::Container> = HashMap::new();
            for c in containers.iter().filter(|c| c.pod_sandbox_id == sandbox.id) {
                let name = c
                    .labels
                    .get(CONTAINER_NAME_LABEL)
                    .cloned()
                    .unwrap_or_default();
                if latest
                    .get(&name)
                    .is_none_or(|l| l.created_at < c.created_at)
                {
                    latest.insert(name, c);
                }
            }
            let log_dir = self.pod_logs_dir.join(format!(
                "{}_{}_{}",
                pod_ref.namespace, pod_ref.name, pod_ref.uid
            ));
            let mut names: Vec<_> = latest.keys().cloned().collect();
            names.sort();
            let mut pod_containers = Vec::new();
            for name in names {
                let c = latest[&name];
                let stats = container_stats.get(&c.id);
                let running = c.state == ContainerState::ContainerRunning as i32;
                let rootfs = stats
                    .and_then(|s| s.writable_layer.as_ref())
                    .map(|w| FsStats {
                        time: time.to_owned(),
                        used_bytes: w.used_bytes.as_ref().map(|v| v.value),
                        inodes_used: w.inodes_used.as_ref().map(|v| v.value),
                        ..fs_capacity(imagefs)
                    });
                let (log_bytes, log_inodes) = host::disk_usage(&log_dir.join(&name));
                pod_containers.push(ContainerStats {
                    name,
                    start_time: rfc3339_nanos(c.created_at),
                    cpu: stats
                        .and_then(|s| s.cpu.as_ref())
                        .filter(|_| running)
                        .map(cpu),
                    memory: stats
                        .and_then(|s| s.memory.as_ref())
                        .filter(|_| running)
                        .map(memory),
                    rootfs,
                    logs: Some(FsStats {
                        time: time.to_owned(),
                        used_bytes: Some(log_bytes),
                        inodes_used: Some(log_inodes),
                        ..fs_capacity(&logfs)
                    }),
                });
            }
            let linux = by_sandbox.get(&sandbox.id).and_then(|s| s.linux.as_ref());
            let ephemeral = ephemeral_storage(&pod_containers, time, imagefs);
            let volume = self.volume_stats(&pod_ref.uid, time);
            pods.push(PodStats {
                pod_ref,
                start_time: rfc3339_nanos(sandbox.created_at),
                cpu: linux
                    .and_then(|l| l.cpu.as_ref())
                    .map(cpu)
                    .or_else(|| sum_cpu(&pod_containers, time)),
                memory: linux
                    .and_then(|l| l.memory.as_ref())
                    .map(memory)
                    .or_else(|| sum_memory(&pod_containers, time)),
                network: linux.and_then(|l| l.network.as_ref()).map(network),
                volume,
                ephemeral_storage: Some(ephemeral),
                process_stats: linux
                    .and_then(|l| l.process.as_ref())
                    .and_then(|p| p.process_count.as_ref())
                    .map(|c| ProcessStats {
                        process_count: Some(c.value),
                    }),
                containers: pod_containers,
            });
        }
        pods.sort_by(|a, b| {
            (&a.pod_ref.namespace, &a.pod_ref.name).cmp(&(&b.pod_ref.namespace, &b.pod_ref.name))
        });
        Ok(pods)
    }
}

/// A filesystem's capacity fields without its usage.
fn fs_capacity(fs: &FsStats) -> FsStats {
    FsStats {
        time: fs.time.clone(),
        available_bytes: fs.available_bytes,
        capacity_bytes: fs.capacity_bytes,
        inodes_free: fs.inodes_free,
        inodes: fs.inodes,
        ..Default::default()
    }
}

/// The pod's ephemeral storage: its containers' writable layers and logs.
fn ephemeral_storage(containers: &[ContainerStats], time: &str, fs: &FsStats) -> FsStats {
    let sum = |f: fn(&FsStats) -> Option<u64>| {
        containers
            .iter()
            .flat_map(|c| [c.rootfs.as_ref(), c.logs.as_ref()])
            .flatten()
            .filter_map(f)
            .sum::<u64>()
    };
    FsStats {
        time: time.to_owned(),
        used_bytes: Some(sum(|f| f.used_bytes)),
        inodes_used: Some(sum(|f| f.inodes_used)),
        ..fs_capacity(fs)
    }
}

fn sum_cpu(containers: &[ContainerStats], time: &str) -> Option<CpuStats> {
    let cpus: Vec<_> = containers.iter().filter_map(|c| c.cpu.as_ref()).collect();
    (!cpus.is_empty()).then(|| CpuStats {
        time: time.to_owned(),
        usage_nano_cores: Some(cpus.iter().filter_map(|c| c.usage_nano_cores).sum()),
        usage_core_nano_seconds: Some(cpus.iter().filter_map(|c| c.usage_core_nano_seconds).sum()),
    })
}

fn sum_memory(containers: &[ContainerStats], time: &str) -> Option<MemoryStats> {
    let mems: Vec<_> = containers
        .iter()
        .filter_map(|c| c.memory.as_ref())
        .collect();
    let sum = |f: fn(&MemoryStats) -> Option<u64>| Some(mems.iter().filter_map(|m| f(m)).sum());
    (!mems.is_empty()).then(|| MemoryStats {
        time: time.to_owned(),
        available_bytes: None,
        usage_bytes: sum(|m| m.usage_bytes),
        working_set_bytes: sum(|m| m.working_set_bytes),
        rss_bytes: sum(|m| m.rss_bytes),
        page_faults: sum(|m| m.page_faults),
        major_page_faults: sum(|m| m.major_page_faults),
    })
}

fn cpu(c: &CpuUsage) -> CpuStats {
    CpuStats {
        time: rfc3339_nanos(c.timestamp),
        usage_nano_cores: c.usage_nano_cores.as_ref().map(|v| v.value),
        usage_core_nano_seconds: c.usage_core_nano_seconds.as_ref().map(|v| v.value),
    }
}

fn memory(m: &MemoryUsage) -> MemoryStats {
    let v = |x: &Option<k8s_cri::v1::UInt64Value>| x.as_ref().map(|v| v.value);
    MemoryStats {
        time: rfc3339_nanos(m.timestamp),
        available_bytes: v(&m.available_bytes),
        usage_bytes: v(&m.usage_bytes),
        working_set_bytes: v(&m.working_set_bytes),
        rss_bytes: v(&m.rss_bytes),
        page_faults: v(&m.page_faults),
        major_page_faults: v(&m.major_page_faults),
    }
}

fn network(n: &NetworkUsage) -> NetworkStats {
    let iface = |i: &k8s_cri::v1::NetworkInterfaceUsage| InterfaceStats {
        name: i.name.clone(),
        rx_bytes: i.rx_bytes.as_ref().map(|v| v.value),
        rx_errors: i.rx_errors.as_ref().map(|v| v.value),
        tx_bytes: i.tx_bytes.as_ref().map(|v| v.value),
        tx_errors: i.tx_errors.as_ref().map(|v| v.value),
    };
    NetworkStats {
        time: rfc3339_nanos(n.timestamp),
        default: n.default_interface.as_ref().map(iface).unwrap_or_default(),
        interfaces: n.interfaces.iter().map(iface).collect(),
    }
}

/// Average nanocores between two cumulative samples.
fn nano_cores(t0: DateTime<Utc>, u0: u64, t1: DateTime<Utc>, u1: u64) -> Option<u64> {
    let elapsed = (t1 - t0).num_nanoseconds().filter(|n| *n > 0)? as u128;
    let used = u128::from(u1.checked_sub(u0)?);
    u64::try_from(used * 1_000_000_000 / elapsed).ok()
}

/// A time as metav1.Time serializes it (RFC 3339, seconds, `Z`).
pub fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// A CRI timestamp (nanoseconds since the epoch) as [`rfc3339`].
fn rfc3339_nanos(nanos: i64) -> String {
    rfc3339(DateTime::from_timestamp_nanos(nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nano_cores_is_the_rate_of_usage() {
        let t0 = DateTime::from_timestamp(100, 0).unwrap();
        let t1 = DateTime::from_timestamp(102, 0).unwrap();
        assert_eq!(nano_cores(t0, 0, t1, 1_000_000_000), Some(500_000_000));
        assert_eq!(nano_cores(t0, 10, t1, 5), None, "counter reset");
        assert_eq!(nano_cores(t1, 0, t0, 5), None, "time went back");
    }
}
