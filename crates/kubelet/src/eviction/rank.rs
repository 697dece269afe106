//! Ranking pods for eviction and the eviction message (upstream
//! `pkg/kubelet/eviction/helpers.go`: `rankMemoryPressure`, `rankDiskPressureFunc`,
//! `evictionMessage`).

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use super::threshold::Signal;
use crate::cm::resources::pod_requests;
use skiff_api::quantity::format_binary_si;

/// Usage of one container.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerUsage {
    /// Container name.
    pub name: String,
    /// Memory working set, bytes.
    pub memory_working_set: Option<u64>,
    /// Writable layer usage, bytes and inodes.
    pub rootfs_bytes: Option<u64>,
    /// See `rootfs_bytes`.
    pub rootfs_inodes: Option<u64>,
    /// Log files usage, bytes and inodes.
    pub logs_bytes: Option<u64>,
    /// See `logs_bytes`.
    pub logs_inodes: Option<u64>,
}

/// Usage of one pod (upstream summary `PodStats`, the parts eviction reads).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodUsage {
    /// Its containers.
    pub containers: Vec<ContainerUsage>,
    /// Local (disk-backed) volumes, bytes and inodes.
    pub volume_bytes: u64,
    /// See `volume_bytes`.
    pub volume_inodes: u64,
}

/// Which filesystem usages count for a disk signal (upstream `fsStatsType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsStats {
    /// Container writable layers.
    Root,
    /// Container logs.
    Logs,
    /// Local volumes.
    LocalVolumes,
}

/// Usage per pod UID.
pub type PodUsages = HashMap<String, PodUsage>;

fn uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or("")
}

fn priority(pod: &Pod) -> i32 {
    pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0)
}

impl PodUsage {
    fn memory(&self) -> u64 {
        self.containers
            .iter()
            .filter_map(|c| c.memory_working_set)
            .sum()
    }

    fn disk(&self, measure: &[FsStats], inodes: bool) -> u64 {
        let mut total = 0;
        for m in measure {
            total += match (m, inodes) {
                (FsStats::Root, false) => {
                    self.containers.iter().filter_map(|c| c.rootfs_bytes).sum()
                }
                (FsStats::Root, true) => {
                    self.containers.iter().filter_map(|c| c.rootfs_inodes).sum()
                }
                (FsStats::Logs, false) => self.containers.iter().filter_map(|c| c.logs_bytes).sum(),
                (FsStats::Logs, true) => self.containers.iter().filter_map(|c| c.logs_inodes).sum(),
                (FsStats::LocalVolumes, false) => self.volume_bytes,
                (FsStats::LocalVolumes, true) => self.volume_inodes,
            };
        }
        total
    }
}

/// The usages a disk signal measures (upstream `buildSignalToRankFunc`): with a
/// dedicated image filesystem nodefs counts logs and local volumes and imagefs the
/// writable layers; on a shared filesystem both count everything.
pub fn fs_stats_for(signal: Signal, dedicated_image_fs: bool) -> &'static [FsStats] {
    const ALL: &[FsStats] = &[FsStats::Root, FsStats::Logs, FsStats::LocalVolumes];
    match (signal, dedicated_image_fs) {
        (Signal::NodeFsAvailable | Signal::NodeFsInodesFree, true) => {
            &[FsStats::Logs, FsStats::LocalVolumes]
        }
        (Signal::ImageFsAvailable | Signal::ImageFsInodesFree, true) => &[FsStats::Root],
        _ => ALL,
    }
}

/// Orders `pods` for eviction under pressure on `signal`, first to evict first:
/// memory signals by (usage above the memory request first, lower priority first, larger
/// usage above request first); disk signals likewise with ephemeral-storage (or inodes)
/// over the `fs_stats_for` usages. Pods without usage data go first, as upstream.
pub fn rank(pods: &mut [Arc<Pod>], signal: Signal, usages: &PodUsages, dedicated_image_fs: bool) {
    let resource = signal.resource();
    let measure = fs_stats_for(signal, dedicated_image_fs);
    // (has stats, usage, request) per pod.
    let key = |pod: &Pod| -> Option<(i128, i128)> {
        let usage = usages.get(uid(pod))?;
        let (used, request) = match resource {
            "memory" => (
                usage.memory(),
                pod_requests(pod, &Default::default())
                    .get("memory")
                    .copied()
                    .unwrap_or(0),
            ),
            "inodes" => (usage.disk(measure, true), 0),
            _ => (
                usage.disk(measure, false),
                pod_requests(pod, &Default::default())
                    .get("ephemeral-storage")
                    .copied()
                    .unwrap_or(0),
            ),
        };
        Some((i128::from(used), i128::from(request)))
    };
    pods.sort_by(|a, b| {
        let (ka, kb) = (key(a), key(b));
        let (Some((ua, ra)), Some((ub, rb))) = (ka, kb) else {
            // Pods without stats first.
            return ka.is_some().cmp(&kb.is_some());
        };
        let (ea, eb) = (ua > ra, ub > rb);
        eb.cmp(&ea)
            .then_with(|| priority(a).cmp(&priority(b)))
            .then_with(|| (ub - rb).cmp(&(ua - ra)))
    });
}

/// Upstream's eviction message: `The node was low on resource: <resource>. Threshold
/// quantity: <q>, available: <a>. ` then, for memory and ephemeral-storage, `Container <c>
/// was using <u>, request is <r>, has larger consumption of <resource>. ` for each
/// container using more than its request (trailing spaces included, as upstream).
pub fn eviction_message(
    resource: &str,
    pod: &Pod,
    usage: Option<&PodUsage>,
    threshold_quantity: &str,
    available: i64,
) -> String {
    let mut message = format!(
        "The node was low on resource: {resource}. Threshold quantity: {threshold_quantity}, available: {}. ",
        format_binary_si(available)
    );
    let Some(usage) = usage else {
        return message;
    };
    let containers = pod.spec.iter().flat_map(|s| s.containers.iter());
    for container in containers {
        let Some(stats) = usage.containers.iter().find(|c| c.name == container.name) else {
            continue;
        };
        let used = match resource {
            "memory" => stats.memory_working_set,
            "ephemeral-storage" => stats.rootfs_bytes.zip(stats.logs_bytes).map(|(r, l)| r + l),
            _ => None,
        };
        let Some(used) = used else {
            continue;
        };
        let request = container
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get(resource));
        let request_value = request.map_or(0, skiff_api::quantity::value);
        if i128::from(used) > i128::from(request_value) {
            message.push_str(&format!(
                "Container {} was using {}, request is {}, has larger consumption of {resource}. ",
                container.name,
                format_binary_si(i64::try_from(used).unwrap_or(i64::MAX)),
                request.map_or_else(|| "0".to_owned(), |q| q.0.clone()),
            ));
        }
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_pods::{self, Pairs};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod(uid: &str, requests: Pairs<'_>, limits: Pairs<'_>, priority: i32) -> Arc<Pod> {
        let mut pod = test_pods::pod(vec![test_pods::container("c", requests, limits)]);
        pod.metadata = ObjectMeta {
            uid: Some(uid.into()),
            name: Some(uid.into()),
            ..Default::default()
        };
        if let Some(spec) = pod.spec.as_mut() {
            spec.priority = Some(priority);
        }
        Arc::new(pod)
    }

    fn usage(memory: u64, rootfs: u64, logs: u64) -> PodUsage {
        PodUsage {
            containers: vec![ContainerUsage {
                name: "c".into(),
                memory_working_set: Some(memory),
                rootfs_bytes: Some(rootfs),
                rootfs_inodes: Some(1),
                logs_bytes: Some(logs),
                logs_inodes: Some(1),
            }],
            volume_bytes: 0,
            volume_inodes: 0,
        }
    }

    fn names(pods: &[Arc<Pod>]) -> Vec<&str> {
        pods.iter().map(|p| uid(p)).collect()
    }

    #[test]
    fn memory_ranks_by_exceeding_requests_then_priority_then_usage() {
        let full = [("cpu", "1"), ("memory", "100Mi")];
        let mut pods = vec![
            pod("guaranteed", &full, &full, 0),
            pod("burstable", &[("memory", "10Mi")], &[], 0),
            pod("besteffort-small", &[], &[], 0),
            pod("besteffort-big", &[], &[], 0),
            pod("besteffort-important", &[], &[], 1000),
        ];
        let usages: PodUsages = [
            ("guaranteed", usage(90 << 20, 0, 0)),
            ("burstable", usage(50 << 20, 0, 0)),
            ("besteffort-small", usage(1 << 20, 0, 0)),
            ("besteffort-big", usage(30 << 20, 0, 0)),
            ("besteffort-important", usage(300 << 20, 0, 0)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        rank(&mut pods, Signal::MemoryAvailable, &usages, false);
        assert_eq!(
            names(&pods),
            [
                "burstable",
                "besteffort-big",
                "besteffort-small",
                "besteffort-important",
                "guaranteed"
            ]
        );
        // A pod without stats goes first.
        let mut pods = vec![pod("known", &[], &[], 0), pod("unknown", &[], &[], 0)];
        rank(
            &mut pods,
            Signal::MemoryAvailable,
            &usages_of("known"),
            false,
        );
        assert_eq!(names(&pods), ["unknown", "known"]);
    }

    fn usages_of(uid: &str) -> PodUsages {
        [(uid.to_owned(), usage(1, 1, 1))].into()
    }

    #[test]
    fn disk_ranks_by_measured_usage_above_ephemeral_storage_requests() {
        let mut pods = vec![
            pod("requested", &[("ephemeral-storage", "1Gi")], &[], 0),
            pod("logs", &[], &[], 0),
            pod("rootfs", &[], &[], 0),
        ];
        let usages: PodUsages = [
            ("requested", usage(0, 500 << 20, 100 << 20)),
            ("logs", usage(0, 0, 50 << 20)),
            ("rootfs", usage(0, 80 << 20, 0)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        rank(&mut pods, Signal::NodeFsAvailable, &usages, false);
        assert_eq!(names(&pods), ["rootfs", "logs", "requested"]);
        // With a dedicated image filesystem nodefs does not count the writable layers.
        rank(&mut pods, Signal::NodeFsAvailable, &usages, true);
        assert_eq!(names(&pods), ["logs", "rootfs", "requested"]);
        rank(&mut pods, Signal::ImageFsAvailable, &usages, true);
        assert_eq!(names(&pods), ["rootfs", "logs", "requested"]);
    }

    #[test]
    fn message_matches_upstream() {
        let p = pod("p", &[], &[], 0);
        let u = usage(5 << 20, 1 << 20, 1 << 20);
        assert_eq!(
            eviction_message("memory", &p, Some(&u), "100Mi", 90 << 20),
            "The node was low on resource: memory. Threshold quantity: 100Mi, available: 90Mi. Container c was using 5Mi, request is 0, has larger consumption of memory. "
        );
        assert_eq!(
            eviction_message("ephemeral-storage", &p, Some(&u), "1Gi", 1000),
            "The node was low on resource: ephemeral-storage. Threshold quantity: 1Gi, available: 1000. Container c was using 2Mi, request is 0, has larger consumption of ephemeral-storage. "
        );
        assert_eq!(
            eviction_message("inodes", &p, Some(&u), "100", 10),
            "The node was low on resource: inodes. Threshold quantity: 100, available: 10. "
        );
    }
}
