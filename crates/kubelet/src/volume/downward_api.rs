//! The downwardAPI plugin (upstream `pkg/volume/downwardapi`): files holding pod fields
//! and container resources, in a memory-backed emptyDir, written with the
//! [`AtomicWriter`] and refreshed on every sync (labels and annotations may change).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{DownwardAPIVolumeFile, Pod, ResourceFieldSelector, Volume};

use super::atomic_writer::{AtomicWriter, FileProjection};
use super::empty_dir::EmptyDirPlugin;
use super::plugin::VolumePlugin;
use crate::error::{Error, Result};
use crate::kuberuntime::env::{self, NodeAllocatable};

/// Plugin name of downwardAPI volumes.
pub const DOWNWARD_API_PLUGIN_NAME: &str = "kubernetes.io/downward-api";
/// File mode when neither the item nor the volume sets one (upstream
/// `DownwardAPIVolumeSourceDefaultMode`).
const DEFAULT_MODE: i32 = 0o644;

/// downwardAPI volumes, wrapped in a memory-backed emptyDir as upstream.
pub struct DownwardApiPlugin {
    /// Sizes the wrapping tmpfs and fills in unset container limits.
    pub allocatable: NodeAllocatable,
}

/// Formats a map as upstream's `FormatMap`: sorted `key="value"` lines, values quoted
/// like Go's `%q`.
fn format_map(map: Option<&BTreeMap<String, String>>) -> String {
    map.into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", go_quote(v)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `s` as a double-quoted Go string literal (`strconv.Quote`).
fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\x07' => out.push_str("\\a"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            '\x0b' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A pod field as a volume file holds it (upstream `ExtractFieldPathAsString`).
pub fn field_path_value(pod: &Pod, field_path: &str) -> Result<String> {
    let meta = &pod.metadata;
    let subscript = |prefix: &str| {
        field_path
            .strip_prefix(prefix)?
            .strip_prefix("['")?
            .strip_suffix("']")
    };
    if let Some(key) = subscript("metadata.labels") {
        return Ok(meta
            .labels
            .as_ref()
            .and_then(|l| l.get(key))
            .cloned()
            .unwrap_or_default());
    }
    if let Some(key) = subscript("metadata.annotations") {
        return Ok(meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .cloned()
            .unwrap_or_default());
    }
    Ok(match field_path {
        "metadata.labels" => format_map(meta.labels.as_ref()),
        "metadata.annotations" => format_map(meta.annotations.as_ref()),
        "metadata.name" => meta.name.clone().unwrap_or_default(),
        "metadata.namespace" => meta.namespace.clone().unwrap_or_default(),
        "metadata.uid" => meta.uid.clone().unwrap_or_default(),
        other => return Err(Error::Volume(format!("unsupported fieldPath: {other}"))),
    })
}

/// A container resource as a volume file holds it (upstream
/// `ExtractResourceValueByContainerNameAndNodeAllocatable`): the container is found by
/// name among the pod's containers and init containers, then valued as in env vars.
pub fn resource_value(
    pod: &Pod,
    selector: &ResourceFieldSelector,
    allocatable: NodeAllocatable,
) -> Result<String> {
    let container_name = selector.container_name.as_deref().unwrap_or("");
    let container = pod
        .spec
        .iter()
        .flat_map(|s| {
            s.containers
                .iter()
                .chain(s.init_containers.iter().flatten())
        })
        .find(|c| c.name == container_name)
        .ok_or_else(|| Error::Volume(format!("container {container_name} not found")))?;
    env::resource_value(selector, container, allocatable)
}

/// The files of a downwardAPI volume (upstream `CollectData`): one per item, with the
/// item's mode or the volume's `defaultMode` (0644).
pub fn collect_data(
    pod: &Pod,
    items: &[DownwardAPIVolumeFile],
    default_mode: Option<i32>,
    allocatable: &NodeAllocatable,
) -> Result<BTreeMap<String, FileProjection>> {
    let default_mode = default_mode.unwrap_or(DEFAULT_MODE);
    let mut errors: HashMap<String, Error> = HashMap::new();
    let mut out = BTreeMap::new();
    for item in items {
        let value = match (&item.field_ref, &item.resource_field_ref) {
            (Some(field), _) => field_path_value(pod, &field.field_path),
            (None, Some(resource)) => resource_value(pod, resource, *allocatable),
            (None, None) => Err(Error::Volume(
                "neither fieldRef nor resourceFieldRef is set".to_owned(),
            )),
        };
        match value {
            Ok(v) => {
                out.insert(
                    item.path.trim_start_matches('/').to_owned(),
                    FileProjection {
                        data: v.into_bytes(),
                        mode: item.mode.unwrap_or(default_mode) as u32 & 0o7777,
                    },
                );
            }
            Err(e) => {
                errors.insert(item.path.clone(), e);
            }
        }
    }
    if errors.is_empty() {
        return Ok(out);
    }
    let mut messages: Vec<String> = errors
        .into_iter()
        .map(|(p, e)| format!("{p}: {e}"))
        .collect();
    messages.sort();
    Err(Error::Volume(messages.join(", ")))
}

impl VolumePlugin for DownwardApiPlugin {
    fn name(&self) -> &'static str {
        DOWNWARD_API_PLUGIN_NAME
    }

    fn can_support(&self, volume: &Volume) -> bool {
        volume.downward_api.is_some()
    }

    fn setup(&self, pod: &Pod, volume: &Volume, dir: &Path) -> Result<PathBuf> {
        let source = volume.downward_api.clone().unwrap_or_default();
        let payload = collect_data(
            pod,
            source.items.as_deref().unwrap_or_default(),
            source.default_mode,
            &self.allocatable,
        )?;
        let wrapper = EmptyDirPlugin {
            node_allocatable_memory: self.allocatable.memory,
        };
        EmptyDirPlugin::setup_tmpfs(dir, wrapper.memory_size(pod, &Default::default()))?;
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
    use k8s_openapi::api::core::v1::{
        Container, ObjectFieldSelector, PodSpec, ResourceRequirements,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod() -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("default".into()),
                uid: Some("u-1".into()),
                labels: Some(
                    [
                        ("tier".into(), "front".into()),
                        ("app".into(), "a\"b".into()),
                    ]
                    .into(),
                ),
                annotations: Some([("note".into(), "x\ny".into())].into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    resources: Some(ResourceRequirements {
                        limits: Some([("memory".to_owned(), Quantity("64Mi".into()))].into()),
                        requests: Some([("cpu".to_owned(), Quantity("250m".into()))].into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    const ALLOCATABLE: NodeAllocatable = NodeAllocatable {
        cpu_milli: 2000,
        memory: 1 << 30,
        ephemeral_storage: 0,
    };

    #[test]
    fn fields_format_like_upstream() {
        let p = pod();
        assert_eq!(
            field_path_value(&p, "metadata.labels").unwrap(),
            "app=\"a\\\"b\"\ntier=\"front\""
        );
        assert_eq!(
            field_path_value(&p, "metadata.annotations").unwrap(),
            "note=\"x\\ny\""
        );
        assert_eq!(
            field_path_value(&p, "metadata.labels['tier']").unwrap(),
            "front"
        );
        assert_eq!(field_path_value(&p, "metadata.uid").unwrap(), "u-1");
        assert_eq!(
            field_path_value(&p, "spec.nodeName")
                .unwrap_err()
                .to_string(),
            "unsupported fieldPath: spec.nodeName"
        );
    }

    #[test]
    fn resources_use_divisors_and_node_allocatable() {
        let p = pod();
        let sel = |r: &str, d: Option<&str>| ResourceFieldSelector {
            container_name: Some("c".into()),
            resource: r.into(),
            divisor: d.map(|d| Quantity(d.into())),
        };
        let value = |r, d| resource_value(&p, &sel(r, d), ALLOCATABLE);
        assert_eq!(
            value("limits.memory", None).unwrap(),
            (64u64 << 20).to_string()
        );
        assert_eq!(value("limits.memory", Some("1Mi")).unwrap(), "64");
        assert_eq!(value("limits.cpu", None).unwrap(), "2");
        assert_eq!(value("requests.cpu", None).unwrap(), "1");
        assert_eq!(value("requests.cpu", Some("1m")).unwrap(), "250");
        assert_eq!(value("requests.memory", None).unwrap(), "0");
        assert!(value("limits.gpu", None).is_err());
        let mut missing = sel("limits.cpu", None);
        missing.container_name = Some("nope".into());
        assert_eq!(
            resource_value(&p, &missing, ALLOCATABLE)
                .unwrap_err()
                .to_string(),
            "container nope not found"
        );
    }

    #[test]
    fn items_get_their_modes() {
        let item = |path: &str, field: &str, mode: Option<i32>| DownwardAPIVolumeFile {
            path: path.into(),
            field_ref: Some(ObjectFieldSelector {
                api_version: None,
                field_path: field.into(),
            }),
            mode,
            ..Default::default()
        };
        let data = collect_data(
            &pod(),
            &[
                item("name", "metadata.name", None),
                item("ns/namespace", "metadata.namespace", Some(0o400)),
            ],
            Some(0o640),
            &ALLOCATABLE,
        )
        .unwrap();
        assert_eq!(data["name"].mode, 0o640);
        assert_eq!(data["name"].data, b"web");
        assert_eq!(data["ns/namespace"].mode, 0o400);
        let err = collect_data(
            &pod(),
            &[item("bad", "status.podIP", None)],
            None,
            &ALLOCATABLE,
        )
        .unwrap_err()
        .to_string();
        assert_eq!(err, "bad: unsupported fieldPath: status.podIP");
    }
}
