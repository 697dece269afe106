//! Volume manager (upstream `pkg/kubelet/volumemanager` and `pkg/volume`): sets up the
//! volumes of a pod under its pod directory before its containers start, turns
//! `volumeMounts` into CRI mounts, and tears the volumes down when the pod is removed.
//!
//! [`manager::VolumeManager`] drives [`plugin::VolumePlugin`]s found through the
//! [`plugin::VolumePluginMgr`]; [`probe_volume_plugins`] lists the built-in ones
//! (emptyDir, hostPath, downwardAPI, and configMap, secret, projected and
//! persistentVolumeClaim through an [`ObjectSource`]). [`mounts::make_mounts`] builds a
//! container's mounts.

pub mod atomic_writer;
pub mod configmap;
pub mod downward_api;
pub mod empty_dir;
pub mod host_path;
pub mod manager;
pub mod mount;
pub mod mounts;
pub mod plugin;
pub mod projected;
pub mod pvc;
pub mod secret;
pub mod subpath;

pub use manager::{MountedVolume, VolumeManager, VolumeSetupError};
pub use plugin::{VolumePlugin, VolumePluginMgr};

use std::sync::Arc;

use crate::kuberuntime::env::NodeAllocatable;
use crate::objects::ObjectSource;
use crate::objects::token::TokenManager;

/// The built-in volume plugins of a standalone kubelet: the API-backed ones fail with
/// upstream's standalone message.
pub fn probe_volume_plugins(allocatable: NodeAllocatable) -> VolumePluginMgr {
    probe_volume_plugins_with_objects(allocatable, Arc::new(crate::objects::Standalone))
}

/// The built-in volume plugins (upstream `ProbeVolumePlugins` of each plugin package),
/// reading ConfigMaps, Secrets, claims and tokens through `objects`.
pub fn probe_volume_plugins_with_objects(
    allocatable: NodeAllocatable,
    objects: Arc<dyn ObjectSource>,
) -> VolumePluginMgr {
    VolumePluginMgr::new(vec![
        Box::new(empty_dir::EmptyDirPlugin {
            node_allocatable_memory: allocatable.memory,
        }),
        Box::new(host_path::HostPathPlugin),
        Box::new(downward_api::DownwardApiPlugin { allocatable }),
        Box::new(configmap::ConfigMapPlugin {
            objects: objects.clone(),
        }),
        Box::new(secret::SecretPlugin {
            objects: objects.clone(),
            node_allocatable_memory: allocatable.memory,
        }),
        Box::new(projected::ProjectedPlugin {
            tokens: Arc::new(TokenManager::new(objects.clone())),
            objects: objects.clone(),
            allocatable,
        }),
        Box::new(pvc::PersistentVolumeClaimPlugin { objects }),
    ])
}
