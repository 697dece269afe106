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

/// Node resources available to pods (capacity minus reservations and the hard eviction
/// threshold): the size bound of memory-backed volumes and the value of unset container
/// limits in downwardAPI files.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeAllocatable {
    /// CPU in millicores.
    pub cpu_millis: i64,
    /// Memory in bytes.
    pub memory_bytes: i64,
    /// Ephemeral storage in bytes (0 when unknown).
    pub ephemeral_storage_bytes: i64,
}

/// The built-in volume plugins (upstream `ProbeVolumePlugins` of each plugin package).
pub fn probe_volume_plugins(allocatable: NodeAllocatable) -> VolumePluginMgr {
    VolumePluginMgr::new(vec![
        Box::new(empty_dir::EmptyDirPlugin {
            node_allocatable_memory: allocatable.memory_bytes,
        }),
        Box::new(host_path::HostPathPlugin),
        Box::new(downward_api::DownwardApiPlugin { allocatable }),
    ])
}
