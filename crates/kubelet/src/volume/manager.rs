//! The volume manager (upstream `pkg/kubelet/volumemanager`): sets up a pod's volumes
//! before its containers start, remembers where they are, tears them down when the pod
//! is terminated, and removes the directories of pods nobody knows any more.
//!
//! Upstream runs a reconciler loop that SyncPod waits for (`WaitForAttachAndMount`);
//! here SyncPod does the setup itself, which gives the same ordering without the polling.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, PoisonError};

use k8s_openapi::api::core::v1::Pod;
use tracing::{info, warn};

use super::mount::{mounts_under, unmount_and_remove};
use super::plugin::VolumePluginMgr;
use crate::error::{Error, Result};
use crate::pod_dirs::PodDirs;

/// A set-up volume of a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountedVolume {
    /// The plugin that set it up (`kubernetes.io/empty-dir`, ...).
    pub plugin: &'static str,
    /// Host path bound into containers (upstream `Mounter.GetPath`).
    pub path: PathBuf,
    /// Containers must mount it read-only (upstream `GetAttributes().ReadOnly`).
    pub read_only: bool,
}

/// Setup failures of a pod's volumes (upstream `WaitForAttachAndMount` error plus the
/// `FailedMount` events of each volume).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeSetupError {
    /// Volumes whose plugin failed to set them up, with upstream's detailed message
    /// (`MountVolume.SetUp failed for volume "v" : <error>`).
    pub unmounted: Vec<(String, String)>,
    /// Volumes no plugin supports, with the reason.
    pub failed_to_process: Vec<(String, String)>,
}

impl std::fmt::Display for VolumeSetupError {
    /// `unmounted volumes=[a], unattached volumes=[], failed to process volumes=[b]:
    /// <each volume's error>`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = |list: &[(String, String)]| {
            list.iter()
                .map(|(n, _)| n.as_str())
                .collect::<Vec<_>>()
                .join(" ")
        };
        let details: Vec<&str> = self
            .unmounted
            .iter()
            .chain(&self.failed_to_process)
            .map(|(_, e)| e.as_str())
            .collect();
        write!(
            f,
            "unmounted volumes=[{}], unattached volumes=[], failed to process volumes=[{}]: {}",
            names(&self.unmounted),
            names(&self.failed_to_process),
            details.join("; ")
        )
    }
}

/// The volume manager of the node.
pub struct VolumeManager {
    dirs: PodDirs,
    plugins: VolumePluginMgr,
    /// Set-up volumes per pod UID, by volume name.
    mounted: Mutex<HashMap<String, HashMap<String, MountedVolume>>>,
}

fn uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or("")
}

impl VolumeManager {
    /// A manager keeping pod volumes under `dirs`, set up by `plugins`.
    pub fn new(dirs: PodDirs, plugins: VolumePluginMgr) -> Self {
        Self {
            dirs,
            plugins,
            mounted: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, HashMap<String, MountedVolume>>> {
        self.mounted.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sets up every volume of `pod` that is not set up yet, and refreshes those whose
    /// plugin requires it (upstream `WaitForAttachAndMount` plus the reconciler's
    /// remounts). Creates the pod directory first. Errors when any volume cannot be set
    /// up; the others stay set up.
    pub fn wait_for_attach_and_mount(&self, pod: &Pod) -> Result<(), VolumeSetupError> {
        let uid = uid(pod);
        let mut error = VolumeSetupError {
            unmounted: Vec::new(),
            failed_to_process: Vec::new(),
        };
        let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_ref());
        if volumes.is_some_and(|v| !v.is_empty())
            && let Err(e) = std::fs::create_dir_all(self.dirs.pod_volumes_dir(uid))
        {
            error.failed_to_process.push((
                String::new(),
                format!("creating pod volumes directory: {e}"),
            ));
            return Err(error);
        }
        for volume in volumes.into_iter().flatten() {
            let plugin = match self.plugins.find_plugin_by_spec(volume) {
                Ok(plugin) => plugin,
                Err(e) => {
                    let message = format!(
                        "failed to get Plugin from volumeSpec for volume {:?} err={e}",
                        volume.name
                    );
                    error.failed_to_process.push((volume.name.clone(), message));
                    continue;
                }
            };
            let set_up = self
                .lock()
                .get(uid)
                .is_some_and(|m| m.contains_key(&volume.name));
            if set_up && !plugin.requires_remount() {
                continue;
            }
            let dir = self.dirs.pod_volume_dir(uid, plugin.name(), &volume.name);
            match plugin.setup(pod, volume, &dir) {
                Ok(path) => {
                    if !set_up {
                        info!(pod = pod.metadata.name.as_deref().unwrap_or(""), volume = %volume.name, plugin = plugin.name(), "MountVolume.SetUp succeeded");
                    }
                    self.lock().entry(uid.to_owned()).or_default().insert(
                        volume.name.clone(),
                        MountedVolume {
                            plugin: plugin.name(),
                            path,
                            read_only: plugin.read_only(),
                        },
                    );
                }
                Err(e) => error.unmounted.push((
                    volume.name.clone(),
                    format!(
                        "MountVolume.SetUp failed for volume {:?} : {e}",
                        volume.name
                    ),
                )),
            }
        }
        if error.unmounted.is_empty() && error.failed_to_process.is_empty() {
            Ok(())
        } else {
            Err(error)
        }
    }

    /// The set-up volumes of pod `uid`, by volume name (upstream
    /// `GetMountedVolumesForPod`).
    pub fn get_mounted_volumes_for_pod(&self, uid: &str) -> HashMap<String, MountedVolume> {
        self.lock().get(uid).cloned().unwrap_or_default()
    }

    /// Tears down every volume of pod `uid` found in its volumes directory (known or
    /// left by an earlier kubelet) and forgets them. Errors name the volumes that could
    /// not be torn down; they stay on disk for housekeeping to retry.
    pub fn unmount_pod_volumes(&self, uid: &str) -> Result<()> {
        self.lock().remove(uid);
        let volumes_dir = self.dirs.pod_volumes_dir(uid);
        let Ok(plugin_dirs) = std::fs::read_dir(&volumes_dir) else {
            return Ok(());
        };
        let mut errors = Vec::new();
        for plugin_dir in plugin_dirs.flatten() {
            let escaped = plugin_dir.file_name().to_string_lossy().into_owned();
            let plugin = self.plugins.find_plugin_by_escaped_name(&escaped);
            for volume_dir in std::fs::read_dir(plugin_dir.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                let dir = volume_dir.path();
                let torn_down = match plugin {
                    Some(plugin) => plugin.teardown(&dir),
                    None => unmount_and_remove(&dir),
                };
                if let Err(e) = torn_down {
                    errors.push(format!(
                        "UnmountVolume.TearDown failed for volume {}: {e}",
                        dir.display()
                    ));
                }
            }
            let _ = std::fs::remove_dir(plugin_dir.path());
        }
        if errors.is_empty() {
            let _ = std::fs::remove_dir(&volumes_dir);
            Ok(())
        } else {
            Err(Error::Volume(errors.join("; ")))
        }
    }

    /// Removes the directories of pods for which `keep` is false (upstream
    /// `cleanupOrphanedPodDirs`, run by housekeeping): their volumes are torn down first,
    /// and a directory with something still mounted below it is left for the next round.
    pub fn cleanup_orphaned_pod_dirs(&self, keep: impl Fn(&str) -> bool) {
        let Ok(entries) = std::fs::read_dir(self.dirs.pods_dir()) else {
            return;
        };
        for entry in entries.flatten() {
            let uid = entry.file_name().to_string_lossy().into_owned();
            if keep(&uid) {
                continue;
            }
            if let Err(e) = self.unmount_pod_volumes(&uid) {
                warn!(uid = %uid, error = %e, "orphaned pod found, but volumes could not be torn down");
                continue;
            }
            let pod_dir = entry.path();
            if !mounts_under(&pod_dir).is_empty() {
                warn!(uid = %uid, "orphaned pod found, but volume paths are still mounted on disk");
                continue;
            }
            match std::fs::remove_dir_all(&pod_dir) {
                Ok(()) => info!(uid = %uid, "removed orphaned pod directory"),
                Err(e) => warn!(uid = %uid, error = %e, "cannot remove orphaned pod directory"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kuberuntime::env::NodeAllocatable;
    use crate::volume::probe_volume_plugins;
    use k8s_openapi::api::core::v1::{
        EmptyDirVolumeSource, HostPathVolumeSource, NFSVolumeSource, PodSpec, Volume,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn manager(root: &std::path::Path) -> VolumeManager {
        VolumeManager::new(
            PodDirs::new(root),
            probe_volume_plugins(NodeAllocatable::default()),
        )
    }

    fn pod(uid: &str, volumes: Vec<Volume>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                uid: Some(uid.into()),
                name: Some("p".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                volumes: Some(volumes),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn plugins_are_selected_by_volume_source_and_torn_down() {
        let tmp = tempfile::tempdir().unwrap();
        let vm = manager(tmp.path());
        let host = tmp.path().join("host");
        let volumes = vec![
            Volume {
                name: "scratch".into(),
                empty_dir: Some(EmptyDirVolumeSource::default()),
                ..Default::default()
            },
            Volume {
                name: "h".into(),
                host_path: Some(HostPathVolumeSource {
                    path: host.to_string_lossy().into_owned(),
                    type_: Some("DirectoryOrCreate".into()),
                }),
                ..Default::default()
            },
        ];
        vm.wait_for_attach_and_mount(&pod("u1", volumes)).unwrap();
        let mounted = vm.get_mounted_volumes_for_pod("u1");
        let scratch = &mounted["scratch"];
        assert_eq!(scratch.plugin, "kubernetes.io/empty-dir");
        assert_eq!(
            scratch.path,
            tmp.path()
                .join("pods/u1/volumes/kubernetes.io~empty-dir/scratch")
        );
        assert!(scratch.path.is_dir());
        assert_eq!(mounted["h"].plugin, "kubernetes.io/host-path");
        assert_eq!(mounted["h"].path, host);
        assert!(host.is_dir());

        vm.unmount_pod_volumes("u1").unwrap();
        assert!(vm.get_mounted_volumes_for_pod("u1").is_empty());
        assert!(!tmp.path().join("pods/u1/volumes").exists());
        assert!(host.is_dir(), "hostPath content is never removed");
        vm.cleanup_orphaned_pod_dirs(|_| false);
        assert!(!tmp.path().join("pods/u1").exists());
    }

    #[test]
    fn setup_failures_carry_upstream_messages() {
        let tmp = tempfile::tempdir().unwrap();
        let vm = manager(tmp.path());
        let missing = tmp.path().join("missing");
        let volumes = vec![
            Volume {
                name: "f".into(),
                host_path: Some(HostPathVolumeSource {
                    path: missing.to_string_lossy().into_owned(),
                    type_: Some("File".into()),
                }),
                ..Default::default()
            },
            Volume {
                name: "cm".into(),
                nfs: Some(NFSVolumeSource::default()),
                ..Default::default()
            },
            Volume {
                name: "ok".into(),
                empty_dir: Some(EmptyDirVolumeSource::default()),
                ..Default::default()
            },
        ];
        let err = vm
            .wait_for_attach_and_mount(&pod("u2", volumes))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "unmounted volumes=[f], unattached volumes=[], failed to process volumes=[cm]: \
                 MountVolume.SetUp failed for volume \"f\" : hostPath type check failed: {} is not a file; \
                 failed to get Plugin from volumeSpec for volume \"cm\" err=no volume plugin matched",
                missing.display()
            )
        );
        assert!(vm.get_mounted_volumes_for_pod("u2").contains_key("ok"));
        // Kept pods are left alone by housekeeping.
        vm.cleanup_orphaned_pod_dirs(|uid| uid == "u2");
        assert!(
            tmp.path()
                .join("pods/u2/volumes/kubernetes.io~empty-dir/ok")
                .is_dir()
        );
        vm.cleanup_orphaned_pod_dirs(|_| false);
        assert!(!tmp.path().join("pods/u2").exists());
    }
}
