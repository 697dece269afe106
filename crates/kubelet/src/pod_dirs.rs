//! The kubelet's per-pod directories (upstream `kubelet_getters.go`):
//! `<root>/pods/<uid>/{volumes,plugins,containers}`.

use std::path::{Path, PathBuf};

/// Paths under the kubelet root directory (`--root-dir`).
#[derive(Debug, Clone)]
pub struct PodDirs {
    root: PathBuf,
}

impl PodDirs {
    /// Directories under `root`; no I/O.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The kubelet root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `<root>/pods`: one directory per pod UID.
    pub fn pods_dir(&self) -> PathBuf {
        self.root.join("pods")
    }

    /// `<root>/pods/<uid>`.
    pub fn pod_dir(&self, uid: &str) -> PathBuf {
        self.pods_dir().join(uid)
    }

    /// `<root>/pods/<uid>/volumes`: volume directories as `<plugin>/<volume name>`, the
    /// plugin name escaped as upstream (`kubernetes.io/empty-dir` -> `kubernetes.io~empty-dir`).
    pub fn pod_volumes_dir(&self, uid: &str) -> PathBuf {
        self.pod_dir(uid).join("volumes")
    }

    /// `<root>/pods/<uid>/volumes/<escaped plugin>/<volume name>`.
    pub fn pod_volume_dir(&self, uid: &str, plugin: &str, volume: &str) -> PathBuf {
        self.pod_volumes_dir(uid)
            .join(plugin.replace('/', "~"))
            .join(volume)
    }

    /// `<root>/pods/<uid>/containers/<container name>`: per-container files such as the
    /// termination message file.
    pub fn pod_container_dir(&self, uid: &str, container: &str) -> PathBuf {
        self.pod_dir(uid).join("containers").join(container)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volume_dirs_escape_the_plugin_name() {
        let dirs = PodDirs::new("/var/lib/kubelet");
        assert_eq!(
            dirs.pod_volume_dir("u1", "kubernetes.io/empty-dir", "cache"),
            PathBuf::from("/var/lib/kubelet/pods/u1/volumes/kubernetes.io~empty-dir/cache")
        );
        assert_eq!(
            dirs.pod_container_dir("u1", "app"),
            PathBuf::from("/var/lib/kubelet/pods/u1/containers/app")
        );
    }
}
