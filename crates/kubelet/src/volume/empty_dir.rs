//! The emptyDir plugin (upstream `pkg/volume/emptydir`): a directory on the node's disk,
//! or a tmpfs for `medium: Memory`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, EmptyDirVolumeSource, Pod, Volume};

use super::mount::{is_mount_point, mount_tmpfs};
use super::plugin::VolumePlugin;
use crate::error::{Error, Result};
use skiff_api::quantity;

/// Plugin name of emptyDir volumes.
pub const EMPTY_DIR_PLUGIN_NAME: &str = "kubernetes.io/empty-dir";
/// Mode of an emptyDir directory (upstream `perm`): writable by any container user.
const EMPTY_DIR_MODE: u32 = 0o777;

/// emptyDir volumes. Disk-backed ones are plain directories whose `sizeLimit` is enforced
/// by the eviction manager (see [`size_limit_bytes`]); memory-backed ones are tmpfs
/// mounts sized by [`EmptyDirPlugin::memory_size`].
pub struct EmptyDirPlugin {
    /// Node allocatable memory in bytes: the largest tmpfs a pod may get.
    pub node_allocatable_memory: i64,
}

/// An emptyDir's `sizeLimit` in bytes, if set and positive: for a disk-backed volume the
/// eviction manager evicts the pod when the directory grows beyond it.
pub fn size_limit_bytes(source: &EmptyDirVolumeSource) -> Option<i64> {
    source
        .size_limit
        .as_ref()
        .map(quantity::value)
        .filter(|v| *v > 0)
}

/// The pod's memory limit as its cgroup gets it (upstream `ResourceConfigForPod`): the sum
/// of the containers' limits, at least the largest init container limit; `None` unless
/// every container has one.
fn pod_memory_limit(pod: &Pod) -> Option<i64> {
    let spec = pod.spec.as_ref()?;
    let limit = |c: &Container| {
        c.resources
            .as_ref()?
            .limits
            .as_ref()?
            .get("memory")
            .map(quantity::value)
    };
    let mut sum = 0i64;
    for container in &spec.containers {
        sum = sum.saturating_add(limit(container)?);
    }
    for init in spec.init_containers.iter().flatten() {
        sum = sum.max(limit(init)?);
    }
    Some(sum)
}

impl EmptyDirPlugin {
    /// Size of a memory-backed emptyDir (upstream `calculateEmptyDirMemorySize`): node
    /// allocatable memory, lowered to the pod's memory limit and then to the volume's
    /// `sizeLimit` when those are positive and smaller. Bytes.
    pub fn memory_size(&self, pod: &Pod, source: &EmptyDirVolumeSource) -> i64 {
        let mut size = self.node_allocatable_memory;
        for candidate in [pod_memory_limit(pod), size_limit_bytes(source)]
            .into_iter()
            .flatten()
        {
            if candidate > 0 && (size <= 0 || candidate <= size) {
                size = candidate;
            }
        }
        size
    }

    /// Sets up `dir` as a memory-backed emptyDir of `size_bytes` (also the wrapper of
    /// downwardAPI volumes): the directory, then a tmpfs on it unless one is there.
    pub fn setup_tmpfs(dir: &Path, size_bytes: i64) -> Result<()> {
        setup_dir(dir)?;
        if is_mount_point(dir) {
            return Ok(());
        }
        mount_tmpfs(dir, size_bytes)
    }
}

/// Creates `dir` (and its parents) with mode 0777, as upstream's `setupDir`.
fn setup_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io("mkdir", dir, e))?;
    let mode = std::fs::metadata(dir)
        .map_err(|e| Error::io("stat", dir, e))?
        .permissions()
        .mode();
    if mode & 0o7777 != EMPTY_DIR_MODE {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(EMPTY_DIR_MODE))
            .map_err(|e| Error::io("chmod", dir, e))?;
    }
    Ok(())
}

impl VolumePlugin for EmptyDirPlugin {
    fn name(&self) -> &'static str {
        EMPTY_DIR_PLUGIN_NAME
    }

    fn can_support(&self, volume: &Volume) -> bool {
        volume.empty_dir.is_some()
    }

    fn setup(&self, pod: &Pod, volume: &Volume, dir: &Path) -> Result<PathBuf> {
        let source = volume.empty_dir.clone().unwrap_or_default();
        match source.medium.as_deref().unwrap_or("") {
            "" => setup_dir(dir)?,
            "Memory" => Self::setup_tmpfs(dir, self.memory_size(pod, &source))?,
            other => return Err(Error::Volume(format!("unknown storage medium {other:?}"))),
        }
        Ok(dir.to_path_buf())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_pods;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn pod_with_limits(limits: &[Option<&str>]) -> Pod {
        test_pods::pod(
            limits
                .iter()
                .map(|l| match l {
                    Some(l) => test_pods::container("", &[], &[("memory", l)]),
                    None => test_pods::container("", &[], &[]),
                })
                .collect(),
        )
    }

    #[test]
    fn memory_size_is_the_smallest_positive_bound() {
        let plugin = EmptyDirPlugin {
            node_allocatable_memory: 1 << 30,
        };
        let limited = |s: &str| EmptyDirVolumeSource {
            medium: Some("Memory".into()),
            size_limit: Some(Quantity(s.into())),
            ..Default::default()
        };
        let unlimited = EmptyDirVolumeSource::default();
        let no_limits = pod_with_limits(&[None]);
        assert_eq!(plugin.memory_size(&no_limits, &unlimited), 1 << 30);
        assert_eq!(plugin.memory_size(&no_limits, &limited("64Mi")), 64 << 20);
        assert_eq!(plugin.memory_size(&no_limits, &limited("2Gi")), 1 << 30);
        // Pod limit only counts when every container has one.
        let two = pod_with_limits(&[Some("100Mi"), Some("28Mi")]);
        assert_eq!(plugin.memory_size(&two, &unlimited), 128 << 20);
        assert_eq!(plugin.memory_size(&two, &limited("200Mi")), 128 << 20);
        let partial = pod_with_limits(&[Some("100Mi"), None]);
        assert_eq!(plugin.memory_size(&partial, &unlimited), 1 << 30);
        assert_eq!(plugin.memory_size(&no_limits, &limited("0")), 1 << 30);
    }

    #[test]
    fn disk_setup_makes_a_world_writable_dir_and_rejects_unknown_media() {
        let tmp = tempfile::tempdir().unwrap();
        let plugin = EmptyDirPlugin {
            node_allocatable_memory: 0,
        };
        let volume = |medium: Option<&str>| Volume {
            name: "v".into(),
            empty_dir: Some(EmptyDirVolumeSource {
                medium: medium.map(str::to_owned),
                ..Default::default()
            }),
            ..Default::default()
        };
        let dir = tmp.path().join("kubernetes.io~empty-dir/v");
        let path = plugin.setup(&Pod::default(), &volume(None), &dir).unwrap();
        assert_eq!(path, dir);
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o7777, 0o777);
        assert_eq!(
            plugin
                .setup(&Pod::default(), &volume(Some("Floppy")), &dir)
                .unwrap_err()
                .to_string(),
            "unknown storage medium \"Floppy\""
        );
        plugin.teardown(&dir).unwrap();
        assert!(!dir.exists());
    }
}
