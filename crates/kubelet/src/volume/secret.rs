//! The secret plugin (upstream `pkg/volume/secret`): the keys of a Secret as files in a
//! memory-backed emptyDir (a tmpfs, so secret data never reaches the node's disk),
//! written with the [`AtomicWriter`] and refreshed on every pod sync.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{EmptyDirVolumeSource, KeyToPath, Pod, Secret, Volume};

use super::atomic_writer::{AtomicWriter, FileProjection};
use super::configmap::make_payload;
use super::empty_dir::EmptyDirPlugin;
use super::plugin::VolumePlugin;
use crate::error::{Error, Result};
use crate::objects::{ObjectError, ObjectSource};

/// Plugin name of secret volumes.
pub const SECRET_PLUGIN_NAME: &str = "kubernetes.io/secret";
/// tmpfs allocates whole pages: the space a file of `n` bytes takes.
const PAGE_SIZE: u64 = 4096;

/// secret volumes, reading Secrets through `objects`.
pub struct SecretPlugin {
    /// Where Secrets are read.
    pub objects: Arc<dyn ObjectSource>,
    /// Node allocatable memory in bytes: sizes the tmpfs with the pod's memory limit.
    pub node_allocatable_memory: i64,
}

/// A Secret's `data` (and `stringData`, which the API server normally folds into `data`)
/// as bytes by key.
pub(crate) fn secret_data(secret: Option<&Secret>) -> BTreeMap<String, Vec<u8>> {
    let Some(secret) = secret else {
        return BTreeMap::new();
    };
    let mut out: BTreeMap<String, Vec<u8>> = secret
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect();
    for (k, v) in secret.string_data.iter().flatten() {
        out.entry(k.clone())
            .or_insert_with(|| v.clone().into_bytes());
    }
    out
}

/// The upstream message of an item naming a key the Secret lacks.
pub(crate) fn missing_secret_key(key: &str) -> String {
    format!("references non-existent secret key: {key}")
}

/// Secret `name` of `namespace`; `Ok(None)` when it is missing and `optional`.
pub(crate) fn get_optional_secret(
    objects: &dyn ObjectSource,
    namespace: &str,
    name: &str,
    optional: bool,
) -> Result<Option<Arc<Secret>>, ObjectError> {
    crate::objects::optional_object(objects.get_secret(namespace, name), optional)
}

/// The payload of a secret volume (also the secret source of a projected volume).
pub(crate) fn secret_payload(
    objects: &dyn ObjectSource,
    namespace: &str,
    name: &str,
    items: &[KeyToPath],
    default_mode: Option<i32>,
    optional: bool,
) -> Result<BTreeMap<String, FileProjection>> {
    let secret = get_optional_secret(objects, namespace, name, optional)?;
    make_payload(
        items,
        &secret_data(secret.as_deref()),
        default_mode,
        optional,
        missing_secret_key,
    )
}

/// The tmpfs space `payload` needs: each file rounded up to whole pages.
pub(crate) fn payload_footprint(payload: &BTreeMap<String, FileProjection>) -> u64 {
    payload
        .values()
        .map(|f| (f.data.len() as u64).div_ceil(PAGE_SIZE).max(1) * PAGE_SIZE)
        .sum()
}

/// Errors with a clear message when `payload` cannot fit a tmpfs of `size` bytes
/// (`size <= 0`: unlimited).
pub(crate) fn check_fits(
    what: &str,
    payload: &BTreeMap<String, FileProjection>,
    size: i64,
) -> Result<()> {
    let needed = payload_footprint(payload);
    if size > 0 && needed > size as u64 {
        let bytes: usize = payload.values().map(|f| f.data.len()).sum();
        return Err(Error::Volume(format!(
            "{what} is too large for its memory-backed volume: {bytes} bytes of data need {needed} bytes, the volume's tmpfs has {size} bytes"
        )));
    }
    Ok(())
}

impl SecretPlugin {
    /// The tmpfs size of the pod's secret volumes (as a memory-backed emptyDir).
    fn tmpfs_size(&self, pod: &Pod) -> i64 {
        EmptyDirPlugin {
            node_allocatable_memory: self.node_allocatable_memory,
        }
        .memory_size(
            pod,
            &EmptyDirVolumeSource {
                medium: Some("Memory".into()),
                ..Default::default()
            },
        )
    }
}

impl VolumePlugin for SecretPlugin {
    fn name(&self) -> &'static str {
        SECRET_PLUGIN_NAME
    }

    fn can_support(&self, volume: &Volume) -> bool {
        volume.secret.is_some()
    }

    fn setup(&self, pod: &Pod, volume: &Volume, dir: &Path) -> Result<PathBuf> {
        let source = volume.secret.clone().unwrap_or_default();
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
        let name = source.secret_name.clone().unwrap_or_default();
        let payload = secret_payload(
            self.objects.as_ref(),
            namespace,
            &name,
            source.items.as_deref().unwrap_or_default(),
            source.default_mode,
            source.optional == Some(true),
        )?;
        let size = self.tmpfs_size(pod);
        check_fits(&format!("secret {namespace}/{name}"), &payload, size)?;
        EmptyDirPlugin::setup_tmpfs(dir, size)?;
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
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    pub(crate) fn secret(name: &str, data: &[(&str, &[u8])]) -> Secret {
        Secret {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            data: Some(
                data.iter()
                    .map(|(k, v)| ((*k).to_owned(), ByteString(v.to_vec())))
                    .collect(),
            ),
            ..Default::default()
        }
    }

    #[test]
    fn secret_payloads_follow_items_and_optional() {
        let fake = FakeObjects::with(|s| {
            s.secrets.insert(
                ("ns".into(), "s".into()),
                secret("s", &[("password", b"hunter2")]),
            );
        });
        let all = secret_payload(fake.as_ref(), "ns", "s", &[], None, false).unwrap();
        assert_eq!(all["password"].data, b"hunter2");
        assert_eq!(all["password"].mode, 0o644);
        let items = [KeyToPath {
            key: "user".into(),
            path: "user".into(),
            mode: None,
            ..Default::default()
        }];
        assert_eq!(
            secret_payload(fake.as_ref(), "ns", "s", &items, None, false)
                .unwrap_err()
                .to_string(),
            "references non-existent secret key: user"
        );
        assert!(
            secret_payload(fake.as_ref(), "ns", "s", &items, None, true)
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            secret_payload(fake.as_ref(), "ns", "gone", &[], None, false)
                .unwrap_err()
                .to_string(),
            "secret \"gone\" not found"
        );
        assert!(
            secret_payload(fake.as_ref(), "ns", "gone", &[], None, true)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn a_secret_larger_than_its_tmpfs_is_refused() {
        let fake = FakeObjects::with(|s| {
            s.secrets.insert(
                ("ns".into(), "big".into()),
                secret("big", &[("blob", &[7u8; 10_000])]),
            );
        });
        let plugin = SecretPlugin {
            objects: fake,
            node_allocatable_memory: 8192,
        };
        let pod = Pod {
            metadata: ObjectMeta {
                namespace: Some("ns".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let volume = Volume {
            name: "s".into(),
            secret: Some(k8s_openapi::api::core::v1::SecretVolumeSource {
                secret_name: Some("big".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(
            plugin
                .setup(&pod, &volume, tmp.path())
                .unwrap_err()
                .to_string(),
            "secret ns/big is too large for its memory-backed volume: 10000 bytes of data need 12288 bytes, the volume's tmpfs has 8192 bytes"
        );
        // Nothing was mounted or written.
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
    }
}
