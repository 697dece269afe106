//! Volume manager (upstream `pkg/kubelet/volumemanager` and `pkg/volume`): sets up the
//! volumes of a pod under its pod directory before its containers start, turns
//! `volumeMounts` into CRI mounts, and tears the volumes down when the pod is removed.
//!
//! [`manager::VolumeManager`] drives [`plugin::VolumePlugin`]s found through the
//! [`plugin::VolumePluginMgr`]; [`probe_volume_plugins`] lists the built-in ones
//! (emptyDir, hostPath, downwardAPI). [`mounts::make_mounts`] builds a container's mounts.

pub mod atomic_writer;
pub mod downward_api;
pub mod empty_dir;
pub mod host_path;
pub mod manager;
pub mod mount;
pub mod mounts;
pub mod plugin;
pub mod subpath;

pub use manager::{MountedVolume, VolumeManager, VolumeSetupError};
pub use plugin::{VolumePlugin, VolumePluginMgr};

use crate::kuberuntime::env::NodeAllocatable;

/// The built-in volume plugins (upstream `ProbeVolumePlugins` of each plugin package).
pub fn probe_volume_plugins(allocatable: NodeAllocatable) -> VolumePluginMgr {
    VolumePluginMgr::new(vec![
        Box::new(empty_dir::EmptyDirPlugin {
            node_allocatable_memory: allocatable.memory,
        }),
        Box::new(host_path::HostPathPlugin),
        Box::new(downward_api::DownwardApiPlugin { allocatable }),
    ])
}
