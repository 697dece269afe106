//! The configMap plugin (upstream `pkg/volume/configmap`): the keys of a ConfigMap as
//! files in a disk-backed emptyDir, written with the [`AtomicWriter`] and refreshed on
//! every pod sync, so that updates of the ConfigMap land within the sync period.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, EmptyDirVolumeSource, KeyToPath, Pod, Volume};

use super::atomic_writer::{AtomicWriter, FileProjection};
use super::empty_dir::EmptyDirPlugin;
use super::plugin::VolumePlugin;
use crate::error::{Error, Result};
use crate::objects::{ObjectError, ObjectSource};

/// Plugin name of configMap volumes.
pub const CONFIG_MAP_PLUGIN_NAME: &str = "kubernetes.io/configmap";
/// File mode when neither the item nor the volume sets one (upstream
/// `ConfigMapVolumeSourceDefaultMode`, also the secret and projected default).
pub const DEFAULT_MODE: i32 = 0o644;

/// configMap volumes, reading ConfigMaps through `objects`.
pub struct ConfigMapPlugin {
    /// Where ConfigMaps are read.
    pub objects: Arc<dyn ObjectSource>,
}

/// The files of a volume projecting `data` (upstream `MakePayload` of the configmap and
/// secret plugins): every key with `default_mode` when `items` is empty, else each item's
/// key at its path with its mode (or `default_mode`). A missing key is skipped when
/// `optional`, else an error made by `missing_key`.
pub(crate) fn make_payload(
    items: &[KeyToPath],
    data: &BTreeMap<String, Vec<u8>>,
    default_mode: Option<i32>,
    optional: bool,
    missing_key: impl Fn(&str) -> String,
) -> Result<BTreeMap<String, FileProjection>> {
    let default_mode = default_mode.unwrap_or(DEFAULT_MODE);
    let mode = |m: i32| m as u32 & 0o7777;
    if items.is_empty() {
        return Ok(data
            .iter()
            .map(|(key, value)| {
                let file = FileProjection {
                    data: value.clone(),
                    mode: mode(default_mode),
                };
                (key.clone(), file)
            })
            .collect());
    }
    let mut payload = BTreeMap::new();
    for item in items {
        let Some(value) = data.get(&item.key) else {
            if optional {
                continue;
            }
            return Err(Error::Volume(missing_key(&item.key)));
        };
        payload.insert(
            item.path.clone(),
            FileProjection {
                data: value.clone(),
                mode: mode(item.mode.unwrap_or(default_mode)),
            },
        );
    }
    Ok(payload)
}

/// A ConfigMap's `data` and `binaryData` as bytes by key (`data` wins on a clash, as
/// upstream's `MakePayload` looks there first).
pub(crate) fn config_map_data(config_map: Option<&ConfigMap>) -> BTreeMap<String, Vec<u8>> {
    let Some(config_map) = config_map else {
        return BTreeMap::new();
    };
    let mut out: BTreeMap<String, Vec<u8>> = config_map
        .binary_data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect();
    for (k, v) in config_map.data.iter().flatten() {
        out.insert(k.clone(), v.clone().into_bytes());
    }
    out
}

/// The upstream message of an item naming a key the ConfigMap lacks.
pub(crate) fn missing_config_key(key: &str) -> String {
    format!("configmap references non-existent config key: {key}")
}

/// ConfigMap `name` of `namespace`; `Ok(None)` when it is missing and `optional`.
pub(crate) fn get_optional_config_map(
    objects: &dyn ObjectSource,
    namespace: &str,
    name: &str,
    optional: bool,
) -> Result<Option<Arc<ConfigMap>>, ObjectError> {
    crate::objects::optional_object(objects.get_config_map(namespace, name), optional)
}

/// The payload of a configMap volume of `pod` (also the configMap source of a projected
/// volume, whose default mode it then gets).
pub(crate) fn config_map_payload(
    objects: &dyn ObjectSource,
    namespace: &str,
    name: &str,
    items: &[KeyToPath],
    default_mode: Option<i32>,
    optional: bool,
) -> Result<BTreeMap<String, FileProjection>> {
    let config_map = get_optional_config_map(objects, namespace, name, optional)?;
    make_payload(
        items,
        &config_map_data(config_map.as_deref()),
        default_mode,
        optional,
        missing_config_key,
    )
}

/// Sets up `dir` as a disk-backed emptyDir (the wrapper of configMap volumes).
pub(crate) fn setup_disk_wrapper(pod: &Pod, dir: &Path) -> Result<()> {
    let wrapper = Volume {
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Default::default()
    };
    EmptyDirPlugin {
        node_allocatable_memory: 0,
    }
    .setup(pod, &wrapper, dir)
    .map(drop)
}

impl VolumePlugin for ConfigMapPlugin {
    fn name(&self) -> &'static str {
        CONFIG_MAP_PLUGIN_NAME
    }

    fn can_support(&self, volume: &Volume) -> bool {
        volume.config_map.is_some()
    }

    fn setup(&self, pod: &Pod, volume: &Volume, dir: &Path) -> Result<PathBuf> {
        let source = volume.config_map.clone().unwrap_or_default();
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
        let payload = config_map_payload(
            self.objects.as_ref(),
            namespace,
            &source.name,
            source.items.as_deref().unwrap_or_default(),
            source.default_mode,
            source.optional == Some(true),
        )?;
        setup_disk_wrapper(pod, dir)?;
        AtomicWriter::new(dir).write(&payload)?;
        Ok(dir.to_path_buf())
    }

    fn requires_remount(&self) -> bool {
        true
    }

    fn read_only(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::fake::FakeObjects;
    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::ConfigMapVolumeSource;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use std::os::unix::fs::PermissionsExt;

    pub(crate) fn config_map(name: &str, data: &[(&str, &str)]) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            data: Some(
                data.iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            ..Default::default()
        }
    }

    fn pod() -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns".into()),
                uid: Some("u".into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn volume(source: ConfigMapVolumeSource) -> Volume {
        Volume {
            name: "cfg".into(),
            config_map: Some(source),
            ..Default::default()
        }
    }

    fn item(key: &str, path: &str, mode: Option<i32>) -> KeyToPath {
        KeyToPath {
            key: key.into(),
            path: path.into(),
            mode,
            ..Default::default()
        }
    }

    #[test]
    fn all_keys_or_the_listed_items_with_their_modes() {
        let mut cm = config_map("x", &[("a", "1"), ("b", "2")]);
        cm.binary_data = Some([("bin".to_owned(), ByteString(vec![0, 1]))].into());
        let fake = FakeObjects::with(|s| {
            s.config_maps.insert(("ns".into(), "x".into()), cm);
        });
        let all = config_map_payload(fake.as_ref(), "ns", "x", &[], Some(0o600), false).unwrap();
        assert_eq!(all.keys().collect::<Vec<_>>(), ["a", "b", "bin"]);
        assert_eq!(all["a"].mode, 0o600);
        assert_eq!(all["bin"].data, vec![0, 1]);
        let items = [item("a", "dir/a.txt", Some(0o400)), item("b", "b", None)];
        let some = config_map_payload(fake.as_ref(), "ns", "x", &items, None, false).unwrap();
        assert_eq!(some["dir/a.txt"].mode, 0o400);
        assert_eq!(some["dir/a.txt"].data, b"1");
        assert_eq!(some["b"].mode, 0o644);
        assert_eq!(some.len(), 2);
    }

    #[test]
    fn missing_config_maps_and_keys_fail_unless_optional() {
        let fake = FakeObjects::with(|s| {
            s.config_maps
                .insert(("ns".into(), "x".into()), config_map("x", &[("a", "1")]));
        });
        assert_eq!(
            config_map_payload(fake.as_ref(), "ns", "y", &[], None, false)
                .unwrap_err()
                .to_string(),
            "configmap \"y\" not found"
        );
        assert!(
            config_map_payload(fake.as_ref(), "ns", "y", &[], None, true)
                .unwrap()
                .is_empty()
        );
        let items = [item("a", "a", None), item("nope", "nope", None)];
        assert_eq!(
            config_map_payload(fake.as_ref(), "ns", "x", &items, None, false)
                .unwrap_err()
                .to_string(),
            "configmap references non-existent config key: nope"
        );
        let optional = config_map_payload(fake.as_ref(), "ns", "x", &items, None, true).unwrap();
        assert_eq!(optional.keys().collect::<Vec<_>>(), ["a"]);
        let standalone = crate::objects::Standalone;
        assert_eq!(
            config_map_payload(&standalone, "ns", "x", &[], None, true)
                .unwrap_err()
                .to_string(),
            "not supported due to running kubelet in standalone mode"
        );
    }

    #[test]
    fn setup_writes_files_and_updates_land_on_the_next_sync() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("cfg");
        let fake = FakeObjects::with(|s| {
            s.config_maps
                .insert(("ns".into(), "x".into()), config_map("x", &[("a", "1")]));
        });
        let plugin = ConfigMapPlugin {
            objects: fake.clone(),
        };
        let v = volume(ConfigMapVolumeSource {
            name: "x".into(),
            default_mode: Some(0o640),
            ..Default::default()
        });
        assert_eq!(plugin.setup(&pod(), &v, &dir).unwrap(), dir);
        assert_eq!(std::fs::read_to_string(dir.join("a")).unwrap(), "1");
        let mode = std::fs::metadata(dir.join("a"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o640);
        fake.edit(|s| {
            s.config_maps.insert(
                ("ns".into(), "x".into()),
                config_map("x", &[("a", "2"), ("b", "3")]),
            );
        });
        plugin.setup(&pod(), &v, &dir).unwrap();
        assert_eq!(std::fs::read_to_string(dir.join("a")).unwrap(), "2");
        assert_eq!(std::fs::read_to_string(dir.join("b")).unwrap(), "3");
        assert!(plugin.requires_remount() && plugin.read_only());
    }
}
