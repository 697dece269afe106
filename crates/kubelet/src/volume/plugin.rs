//! The volume plugin interface and its registry (upstream `pkg/volume/plugins.go`
//! `VolumePlugin`, `VolumePluginMgr`). New volume types (configMap, secret, projected,
//! persistent volumes) plug in by implementing [`VolumePlugin`] and being listed in
//! [`super::probe_volume_plugins`].

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Pod, Volume};

use super::mount::unmount_and_remove;
use crate::error::{Error, Result};

/// One kind of volume: how a pod's volume of this kind is set up on the node and torn
/// down again.
pub trait VolumePlugin: Send + Sync {
    /// The plugin name, e.g. `kubernetes.io/empty-dir`; its escaped form
    /// (`kubernetes.io~empty-dir`) names the plugin's directory under the pod's volumes.
    fn name(&self) -> &'static str;

    /// True when this plugin handles `volume` (exactly one plugin may).
    fn can_support(&self, volume: &Volume) -> bool;

    /// Sets up `volume` of `pod`, using `dir` (the pod's volume directory
    /// `<root>/pods/<uid>/volumes/<escaped plugin>/<volume name>`) if the plugin keeps its
    /// data there, and returns the host path to bind into containers. Must be idempotent:
    /// it runs again on every pod sync when [`VolumePlugin::requires_remount`] holds.
    /// The error is the upstream `SetUp` error (e.g. `hostPath type check failed: /x is
    /// not a directory`).
    fn setup(&self, pod: &Pod, volume: &Volume, dir: &Path) -> Result<PathBuf>;

    /// Tears down the volume kept in `dir`: unmounts whatever is mounted at or below it and
    /// removes it. Called with the directory alone (the spec may be gone, e.g. after a
    /// kubelet restart), so it must work from what is on disk.
    fn teardown(&self, dir: &Path) -> Result<()> {
        unmount_and_remove(dir)
    }

    /// True when the volume's content follows the pod spec and must be refreshed on every
    /// sync (upstream `RequiresRemount`: downwardAPI, configMap, secret, projected).
    fn requires_remount(&self) -> bool {
        false
    }

    /// True when containers must see the volume read-only whatever the `volumeMount` says
    /// (upstream `GetAttributes().ReadOnly`).
    fn read_only(&self) -> bool {
        false
    }
}

/// The registered plugins (upstream `VolumePluginMgr`).
pub struct VolumePluginMgr {
    plugins: Vec<Box<dyn VolumePlugin>>,
}

impl VolumePluginMgr {
    /// A registry of `plugins`.
    pub fn new(plugins: Vec<Box<dyn VolumePlugin>>) -> Self {
        Self { plugins }
    }

    /// The one plugin that supports `volume` (upstream `FindPluginBySpec`); errors with
    /// `no volume plugin matched` or `multiple volume plugins matched: a,b`.
    pub fn find_plugin_by_spec(&self, volume: &Volume) -> Result<&dyn VolumePlugin> {
        let mut matches = self.plugins.iter().filter(|p| p.can_support(volume));
        match (matches.next(), matches.next()) {
            (Some(plugin), None) => Ok(plugin.as_ref()),
            (None, _) => Err(Error::Volume("no volume plugin matched".to_owned())),
            (Some(first), Some(second)) => {
                let names: Vec<&str> = [first, second]
                    .into_iter()
                    .chain(matches)
                    .map(|p| p.name())
                    .collect();
                Err(Error::Volume(format!(
                    "multiple volume plugins matched: {}",
                    names.join(",")
                )))
            }
        }
    }

    /// The plugin whose escaped name (`kubernetes.io~empty-dir`) is `escaped`, as found
    /// in a pod's volumes directory.
    pub fn find_plugin_by_escaped_name(&self, escaped: &str) -> Option<&dyn VolumePlugin> {
        self.plugins
            .iter()
            .find(|p| escape_plugin_name(p.name()) == escaped)
            .map(|p| p.as_ref())
    }
}

/// The on-disk form of a plugin name (upstream `EscapeQualifiedName`: `/` becomes `~`).
pub fn escape_plugin_name(name: &str) -> String {
    name.replace('/', "~")
}
