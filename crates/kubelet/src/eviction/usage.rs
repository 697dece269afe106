//! Per-pod usage for ranking (upstream reads it from the summary API): memory working set
//! and writable-layer usage from CRI ListContainerStats, log usage from the pod log
//! directories, local volume usage from the pod's volumes directory.

use std::path::Path;
use std::sync::Arc;

use k8s_cri::v1::ListContainerStatsRequest;
use k8s_openapi::api::core::v1::Pod;

use super::rank::{ContainerUsage, PodUsage, PodUsages};
use crate::cri::Cri;
use crate::kuberuntime::labels::{CONTAINER_NAME_LABEL, POD_UID_LABEL};
use crate::kuberuntime::sandbox::pod_log_directory;
use crate::pod_dirs::PodDirs;
pub use crate::stats::host::disk_usage;

/// The usage of each of `pods` (keyed by UID).
pub async fn pod_usages(
    cri: &dyn Cri,
    pods: &[Arc<Pod>],
    pod_logs_dir: &Path,
    pod_dirs: &PodDirs,
) -> PodUsages {
    let stats = cri
        .list_container_stats(ListContainerStatsRequest { filter: None })
        .await
        .map(|r| r.stats)
        .unwrap_or_default();
    let mut out = PodUsages::new();
    for pod in pods {
        let meta = &pod.metadata;
        let uid = meta.uid.clone().unwrap_or_default();
        let log_dir = pod_log_directory(
            pod_logs_dir,
            meta.namespace.as_deref().unwrap_or(""),
            meta.name.as_deref().unwrap_or(""),
            &uid,
        );
        let containers = stats
            .iter()
            .filter_map(|s| {
                let attrs = s.attributes.as_ref()?;
                (attrs.labels.get(POD_UID_LABEL) == Some(&uid)).then_some((s, attrs))
            })
            .map(|(s, attrs)| {
                let name = attrs
                    .labels
                    .get(CONTAINER_NAME_LABEL)
                    .cloned()
                    .unwrap_or_default();
                let layer = s.writable_layer.as_ref();
                let (logs_bytes, logs_inodes) = disk_usage(&log_dir.join(&name));
                ContainerUsage {
                    memory_working_set: s
                        .memory
                        .as_ref()
                        .and_then(|m| m.working_set_bytes.as_ref())
                        .map(|v| v.value),
                    rootfs_bytes: layer.and_then(|l| l.used_bytes.as_ref()).map(|v| v.value),
                    rootfs_inodes: layer.and_then(|l| l.inodes_used.as_ref()).map(|v| v.value),
                    logs_bytes: Some(logs_bytes),
                    logs_inodes: Some(logs_inodes),
                    name,
                }
            })
            .collect();
        let (volume_bytes, volume_inodes) = disk_usage(&pod_dirs.pod_volumes_dir(&uid));
        out.insert(
            uid,
            PodUsage {
                containers,
                volume_bytes,
                volume_inodes,
            },
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_usage_counts_files_and_directories() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/a"), vec![1u8; 64 * 1024]).unwrap();
        let (bytes, inodes) = disk_usage(dir.path());
        assert_eq!(inodes, 3);
        assert!(bytes >= 64 * 1024, "{bytes}");
        assert_eq!(disk_usage(&dir.path().join("absent")), (0, 0));
        // Every level of a deep tree counts.
        let mut deep = dir.path().join("deep");
        for _ in 0..100 {
            deep.push("d");
        }
        std::fs::create_dir_all(&deep).unwrap();
        assert_eq!(disk_usage(dir.path()).1, 3 + 101);
    }
}
