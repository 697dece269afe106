//! The Summary API types (upstream `k8s.io/kubelet/pkg/apis/stats/v1alpha1`), served at
//! `/stats/summary`. Field names are the upstream JSON names; absent figures are
//! omitted (`omitempty`). Times are RFC 3339 strings, bytes and nanoseconds unsigned.

use serde::{Deserialize, Serialize};

/// The whole summary: the node and its pods.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    /// Node-level figures.
    pub node: NodeStats,
    /// One entry per pod with a sandbox.
    pub pods: Vec<PodStats>,
}

/// Node-level figures.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeStats {
    /// The node name.
    pub node_name: String,
    /// System containers (`kubelet`, `runtime`, `pods`, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub system_containers: Vec<ContainerStats>,
    /// When the node booted.
    pub start_time: String,
    /// Node CPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuStats>,
    /// Node memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStats>,
    /// Host network interfaces.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkStats>,
    /// The filesystem of the kubelet root directory (nodefs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fs: Option<FsStats>,
    /// The runtime's image and container filesystems.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime: Option<RuntimeStats>,
    /// Process limits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rlimit: Option<RlimitStats>,
}

/// The runtime's filesystems.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeStats {
    /// Where images are stored (imagefs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_fs: Option<FsStats>,
    /// Where container writable layers are stored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container_fs: Option<FsStats>,
}

/// Process limits of the node.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RlimitStats {
    /// Sample time.
    pub time: String,
    /// The maximum number of PIDs (`kernel.pid_max`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub maxpid: Option<i64>,
    /// Processes now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub curproc: Option<i64>,
}

/// CPU usage.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CpuStats {
    /// Sample time.
    pub time: String,
    /// Average usage over the last sampling interval, in nanocores.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage_nano_cores: Option<u64>,
    /// Cumulative usage, in core-nanoseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage_core_nano_seconds: Option<u64>,
}

/// Memory usage, in bytes.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MemoryStats {
    /// Sample time.
    pub time: String,
    /// Memory that can still be used (limit or capacity minus working set).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub available_bytes: Option<u64>,
    /// All memory in use, caches included.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage_bytes: Option<u64>,
    /// Usage minus inactive file cache: what the OOM killer and eviction look at.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub working_set_bytes: Option<u64>,
    /// Anonymous and swap cache memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rss_bytes: Option<u64>,
    /// Cumulative page faults.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page_faults: Option<u64>,
    /// Cumulative major page faults.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub major_page_faults: Option<u64>,
}

/// Network usage: the default interface inline, and all interfaces.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NetworkStats {
    /// Sample time.
    pub time: String,
    /// The default interface's figures (inline, as upstream).
    #[serde(flatten)]
    pub default: InterfaceStats,
    /// Every interface.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<InterfaceStats>,
}

/// One network interface, cumulative counters.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct InterfaceStats {
    /// Interface name.
    pub name: String,
    /// Bytes received.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx_bytes: Option<u64>,
    /// Receive errors.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx_errors: Option<u64>,
    /// Bytes sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_bytes: Option<u64>,
    /// Send errors.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_errors: Option<u64>,
}

/// A filesystem's capacity and usage.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FsStats {
    /// Sample time.
    pub time: String,
    /// Bytes available to non-root users.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub available_bytes: Option<u64>,
    /// Total size.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity_bytes: Option<u64>,
    /// Bytes used (by the subject: the filesystem, a container, a volume).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub used_bytes: Option<u64>,
    /// Free inodes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inodes_free: Option<u64>,
    /// Total inodes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inodes: Option<u64>,
    /// Inodes used (by the subject).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inodes_used: Option<u64>,
}

/// A pod's figures.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodStats {
    /// Which pod.
    pub pod_ref: PodReference,
    /// When its sandbox was created.
    pub start_time: String,
    /// Its containers (the latest instance of each).
    pub containers: Vec<ContainerStats>,
    /// Pod-level CPU (the pod cgroup).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuStats>,
    /// Pod-level memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStats>,
    /// The pod's network namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkStats>,
    /// Volumes (empty until the volume manager reports them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volume: Vec<VolumeStats>,
    /// Containers' writable layers and logs together.
    #[serde(rename = "ephemeral-storage", skip_serializing_if = "Option::is_none")]
    pub ephemeral_storage: Option<FsStats>,
    /// Processes in the pod.
    #[serde(rename = "process_stats", skip_serializing_if = "Option::is_none")]
    pub process_stats: Option<ProcessStats>,
}

/// Identifies a pod.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct PodReference {
    /// Pod name.
    pub name: String,
    /// Pod namespace.
    pub namespace: String,
    /// Pod UID.
    pub uid: String,
}

/// A container's figures.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStats {
    /// Container name (from the pod spec).
    pub name: String,
    /// When the container was created.
    pub start_time: String,
    /// CPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuStats>,
    /// Memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStats>,
    /// The writable layer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rootfs: Option<FsStats>,
    /// The container's log files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logs: Option<FsStats>,
}

/// A volume's usage.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct VolumeStats {
    /// Volume name.
    pub name: String,
    /// Usage (inline).
    #[serde(flatten)]
    pub fs: FsStats,
}

/// Process count of a pod.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ProcessStats {
    /// Processes.
    #[serde(rename = "process_count", skip_serializing_if = "Option::is_none")]
    pub process_count: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_names_are_upstream() {
        let summary = Summary {
            node: NodeStats {
                node_name: "n".into(),
                start_time: "2026-01-01T00:00:00Z".into(),
                cpu: Some(CpuStats {
                    time: "t".into(),
                    usage_nano_cores: Some(1),
                    usage_core_nano_seconds: Some(2),
                }),
                memory: Some(MemoryStats {
                    working_set_bytes: Some(3),
                    ..Default::default()
                }),
                network: Some(NetworkStats {
                    default: InterfaceStats {
                        name: "eth0".into(),
                        rx_bytes: Some(4),
                        ..Default::default()
                    },
                    interfaces: vec![InterfaceStats {
                        name: "eth0".into(),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
                runtime: Some(RuntimeStats {
                    image_fs: Some(FsStats {
                        inodes_free: Some(5),
                        ..Default::default()
                    }),
                    container_fs: None,
                }),
                rlimit: Some(RlimitStats {
                    maxpid: Some(6),
                    curproc: Some(7),
                    ..Default::default()
                }),
                ..Default::default()
            },
            pods: vec![PodStats {
                pod_ref: PodReference {
                    name: "p".into(),
                    namespace: "ns".into(),
                    uid: "u".into(),
                },
                containers: vec![ContainerStats {
                    name: "c".into(),
                    rootfs: Some(FsStats::default()),
                    logs: Some(FsStats::default()),
                    ..Default::default()
                }],
                ephemeral_storage: Some(FsStats::default()),
                process_stats: Some(ProcessStats {
                    process_count: Some(1),
                }),
                ..Default::default()
            }],
        };
        let json = serde_json::to_value(&summary).unwrap();
        let node = &json["node"];
        assert_eq!(node["nodeName"], "n");
        assert_eq!(node["startTime"], "2026-01-01T00:00:00Z");
        assert_eq!(node["cpu"]["usageNanoCores"], 1);
        assert_eq!(node["cpu"]["usageCoreNanoSeconds"], 2);
        assert_eq!(node["memory"]["workingSetBytes"], 3);
        assert!(node["memory"].get("rssBytes").is_none(), "omitempty");
        assert_eq!(node["network"]["name"], "eth0");
        assert_eq!(node["network"]["rxBytes"], 4);
        assert_eq!(node["network"]["interfaces"][0]["name"], "eth0");
        assert_eq!(node["runtime"]["imageFs"]["inodesFree"], 5);
        assert_eq!(node["rlimit"]["maxpid"], 6);
        assert_eq!(node["rlimit"]["curproc"], 7);
        let pod = &json["pods"][0];
        assert_eq!(pod["podRef"]["namespace"], "ns");
        assert!(pod["containers"][0]["rootfs"].is_object());
        assert!(pod["containers"][0]["logs"].is_object());
        assert!(pod["ephemeral-storage"].is_object());
        assert_eq!(pod["process_stats"]["process_count"], 1);
        let back: Summary = serde_json::from_value(json).unwrap();
        assert_eq!(back, summary);
    }
}
