//! OCI images built in memory: [`ImageBuilder`] assembles layers, configs, manifests and
//! an optional index into an [`Image`] for [`push`](crate::push) or for an OCI layout or
//! `docker save` archive (air-gapped import); [`busybox`] is the standard test image
//! built with it.

mod archive;
mod busybox;
mod layer;

use anyhow::bail;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

pub use archive::{ArchiveFile, archive_tar, write_files};
pub use busybox::{ImageOptions, busybox, busybox_configured, busybox_with, pause};
pub use layer::{Compression, Layer, TarEntry, layer_tar};

/// Which media types the manifests, configs and layers use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MediaTypes {
    /// `application/vnd.oci.image.*` (image-spec 1.0).
    #[default]
    Oci,
    /// `application/vnd.docker.distribution.manifest.v2+json` (Docker schema 2).
    Docker,
}

/// One platform's image (always `os: linux`): its layers, bottom first, and config.
#[derive(Debug, Clone, PartialEq)]
pub struct Platform {
    architecture: String,
    variant: Option<String>,
    layers: Vec<Layer>,
    config: Value,
    diff_ids: Option<Vec<String>>,
}

impl Platform {
    /// A linux/`architecture` image (GOARCH names: `amd64`, `arm64`) of `layers`, bottom
    /// first, with an empty execution config.
    pub fn new(architecture: &str, layers: Vec<Layer>) -> Platform {
        Platform {
            architecture: architecture.to_string(),
            variant: None,
            layers,
            config: json!({}),
            diff_ids: None,
        }
    }

    /// Sets the CPU variant (`v8`) of the config and of the index entry.
    pub fn variant(mut self, variant: &str) -> Platform {
        self.variant = Some(variant.to_string());
        self
    }

    /// Sets the image config's `config` object: the execution parameters (`User`, `Env`,
    /// `Entrypoint`, `Cmd`, `WorkingDir`, ... as in the OCI image-spec config).
    pub fn config(mut self, config: Value) -> Platform {
        self.config = config;
        self
    }

    /// Overrides the config's `rootfs.diff_ids` (by default the layers' diff IDs), to
    /// build images whose layers do not match their config.
    pub fn diff_ids(mut self, diff_ids: Vec<String>) -> Platform {
        self.diff_ids = Some(diff_ids);
        self
    }
}

/// Builds an [`Image`] from one or more [`Platform`]s.
///
/// Without [`ImageBuilder::index`] the tag points at the single platform's manifest; with
/// it, at an image index listing every platform's manifest in the order added.
#[derive(Debug, Clone, Default)]
pub struct ImageBuilder {
    media_types: MediaTypes,
    platforms: Vec<Platform>,
    index: bool,
}

impl ImageBuilder {
    /// An empty builder: OCI media types, no platforms, no index.
    pub fn new() -> ImageBuilder {
        ImageBuilder::default()
    }

    /// Uses `media_types` for every manifest, config and layer.
    pub fn media_types(mut self, media_types: MediaTypes) -> ImageBuilder {
        self.media_types = media_types;
        self
    }

    /// Adds a platform; the first one added is the image's primary platform.
    pub fn platform(mut self, platform: Platform) -> ImageBuilder {
        self.platforms.push(platform);
        self
    }

    /// Tags an image index (manifest list) instead of a manifest; per-platform manifests
    /// are pushed by digest.
    pub fn index(mut self) -> ImageBuilder {
        self.index = true;
        self
    }

    /// Compresses the layers and writes configs, manifests and the index.
    ///
    /// Errors: no platform, or several platforms without [`ImageBuilder::index`].
    pub fn build(&self) -> anyhow::Result<Image> {
        match (self.platforms.len(), self.index) {
            (0, _) => bail!("an image needs at least one platform"),
            (1, _) | (_, true) => {}
            (n, false) => bail!("{n} platforms need an index"),
        }
        let types = Types::new(self.media_types);
        let mut blobs = Vec::new();
        let mut children = Vec::new();
        let mut manifests = Vec::new();
        for platform in &self.platforms {
            let (manifest, built) = platform_manifest(&types, platform, &mut blobs)?;
            children.push(manifest);
            manifests.push(built);
        }
        if !self.index {
            let top = children.remove(0);
            return Ok(Image {
                blobs,
                children,
                top,
                manifests,
            });
        }
        let entries: Vec<Value> = children
            .iter()
            .zip(&self.platforms)
            .map(|(manifest, platform)| {
                let mut entry = manifest.descriptor();
                entry["platform"] = json!({"architecture": platform.architecture, "os": "linux"});
                if let Some(variant) = &platform.variant {
                    entry["platform"]["variant"] = json!(variant);
                }
                entry
            })
            .collect();
        let index = json!({"schemaVersion": 2, "mediaType": types.index, "manifests": entries});
        Ok(Image {
            blobs,
            children,
            top: Content::new(types.index, serde_json::to_vec(&index)?),
            manifests,
        })
    }
}

/// A content-addressed document: a blob, a manifest or an index.
pub(crate) struct Content {
    pub media_type: String,
    pub digest: String,
    pub data: Vec<u8>,
}

impl Content {
    fn new(media_type: &str, data: Vec<u8>) -> Content {
        Content {
            media_type: media_type.to_string(),
            digest: sha256_digest(&data),
            data,
        }
    }

    fn descriptor(&self) -> Value {
        json!({"mediaType": self.media_type, "digest": self.digest, "size": self.data.len()})
    }
}

/// What one platform of an [`Image`] was built as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlatformManifest {
    /// The platform's architecture (`amd64`).
    pub architecture: String,
    /// Digest of its image manifest (`sha256:<hex>`).
    pub digest: String,
    /// Digest of its config blob: the image ID a runtime reports.
    pub config_digest: String,
    /// Total size in bytes of its (compressed) layer blobs.
    pub layers_size: u64,
}

/// An image held in memory, ready for [`push`](crate::push).
pub struct Image {
    /// Layers and configs of every platform.
    pub(crate) blobs: Vec<Content>,
    /// Per-platform manifests, pushed by digest before `top` (empty without an index).
    pub(crate) children: Vec<Content>,
    /// What the tag points to: the single manifest, or the index.
    pub(crate) top: Content,
    /// One per platform, in the order added; never empty.
    manifests: Vec<PlatformManifest>,
}

impl Image {
    /// Digest of what the tag resolves to (`sha256:<hex>`): the index when built with an
    /// index, else the manifest. This is the registry's `Docker-Content-Digest` for the tag.
    pub fn digest(&self) -> &str {
        &self.top.digest
    }

    /// Media type of what the tag resolves to (manifest or index).
    pub fn media_type(&self) -> &str {
        &self.top.media_type
    }

    /// Every platform's manifest, in the order the platforms were added.
    pub fn platforms(&self) -> &[PlatformManifest] {
        &self.manifests
    }

    /// Digest of the primary (first) platform's image manifest.
    pub fn manifest_digest(&self) -> &str {
        &self.primary().digest
    }

    /// Digest of the primary (first) platform's config blob: the image ID a runtime reports.
    pub fn config_digest(&self) -> &str {
        &self.primary().config_digest
    }

    fn primary(&self) -> &PlatformManifest {
        // `ImageBuilder::build` refuses images without platforms.
        &self.manifests[0]
    }
}

/// The media types for one [`MediaTypes`] choice.
struct Types {
    manifest: &'static str,
    index: &'static str,
    config: &'static str,
    media_types: MediaTypes,
}

impl Types {
    fn new(media_types: MediaTypes) -> Types {
        match media_types {
            MediaTypes::Oci => Types {
                manifest: "application/vnd.oci.image.manifest.v1+json",
                index: "application/vnd.oci.image.index.v1+json",
                config: "application/vnd.oci.image.config.v1+json",
                media_types,
            },
            MediaTypes::Docker => Types {
                manifest: "application/vnd.docker.distribution.manifest.v2+json",
                index: "application/vnd.docker.distribution.manifest.list.v2+json",
                config: "application/vnd.docker.container.image.v1+json",
                media_types,
            },
        }
    }

    fn layer(&self, compression: Compression) -> &'static str {
        match (self.media_types, compression) {
            (MediaTypes::Oci, Compression::Gzip) => "application/vnd.oci.image.layer.v1.tar+gzip",
            (MediaTypes::Oci, Compression::Zstd) => "application/vnd.oci.image.layer.v1.tar+zstd",
            (MediaTypes::Oci, Compression::None) => "application/vnd.oci.image.layer.v1.tar",
            (MediaTypes::Docker, Compression::Gzip) => {
                "application/vnd.docker.image.rootfs.diff.tar.gzip"
            }
            (MediaTypes::Docker, Compression::Zstd) => {
                "application/vnd.docker.image.rootfs.diff.tar.zstd"
            }
            (MediaTypes::Docker, Compression::None) => {
                "application/vnd.docker.image.rootfs.diff.tar"
            }
        }
    }
}

/// Builds the config and layer blobs of `platform` (appended to `blobs`) and returns its
/// manifest.
fn platform_manifest(
    types: &Types,
    platform: &Platform,
    blobs: &mut Vec<Content>,
) -> anyhow::Result<(Content, PlatformManifest)> {
    let mut layers = Vec::new();
    for layer in &platform.layers {
        layers.push(Content::new(types.layer(layer.compression), layer.blob()?));
    }
    let diff_ids = match &platform.diff_ids {
        Some(diff_ids) => diff_ids.clone(),
        None => platform.layers.iter().map(Layer::diff_id).collect(),
    };
    let mut config = json!({
        "architecture": platform.architecture,
        "os": "linux",
        "config": platform.config,
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    });
    if let Some(variant) = &platform.variant {
        config["variant"] = json!(variant);
    }
    let config = Content::new(types.config, serde_json::to_vec(&config)?);
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": types.manifest,
        "config": config.descriptor(),
        "layers": layers.iter().map(Content::descriptor).collect::<Vec<_>>(),
    });
    let manifest = Content::new(types.manifest, serde_json::to_vec(&manifest)?);
    let built = PlatformManifest {
        architecture: platform.architecture.clone(),
        digest: manifest.digest.clone(),
        config_digest: config.digest.clone(),
        layers_size: layers.iter().map(|l| l.data.len() as u64).sum(),
    };
    blobs.push(config);
    blobs.extend(layers);
    Ok((manifest, built))
}

/// `sha256:<hex>` of `data`.
pub(crate) fn sha256_digest(data: &[u8]) -> String {
    format!("sha256:{:x}", Sha256::digest(data))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer(compression: Compression) -> Layer {
        Layer::new(
            layer_tar(&[TarEntry::file("a", 0o644, b"a\n")]).unwrap(),
            compression,
        )
    }

    fn blob_json(image: &Image, digest: &str) -> Value {
        let blob = image.blobs.iter().find(|b| b.digest == digest).unwrap();
        serde_json::from_slice(&blob.data).unwrap()
    }

    #[test]
    fn builds_manifests_configs_and_an_ordered_index() {
        let bottom = layer(Compression::Gzip);
        let top = layer(Compression::Zstd);
        let image = ImageBuilder::new()
            .platform(
                Platform::new("arm64", vec![layer(Compression::None)])
                    .variant("v8")
                    .diff_ids(vec!["sha256:00".into()]),
            )
            .platform(
                Platform::new("amd64", vec![bottom.clone(), top.clone()])
                    .config(json!({"User": "1000:1000"})),
            )
            .index()
            .build()
            .unwrap();
        assert_eq!(
            image.media_type(),
            "application/vnd.oci.image.index.v1+json"
        );
        let index: Value = serde_json::from_slice(&image.top.data).unwrap();
        let platforms: Vec<&Value> = index["manifests"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| &m["platform"])
            .collect();
        assert_eq!(
            platforms,
            [
                &json!({"architecture": "arm64", "os": "linux", "variant": "v8"}),
                &json!({"architecture": "amd64", "os": "linux"}),
            ]
        );
        let [arm64, amd64] = image.platforms() else {
            panic!("two platforms expected");
        };
        assert_eq!(image.manifest_digest(), arm64.digest);
        assert_eq!(index["manifests"][1]["digest"], amd64.digest);
        assert_eq!(
            blob_json(&image, &arm64.config_digest)["rootfs"]["diff_ids"],
            json!(["sha256:00"])
        );

        let config = blob_json(&image, &amd64.config_digest);
        assert_eq!(config["config"]["User"], "1000:1000");
        assert_eq!(
            config["rootfs"]["diff_ids"],
            json!([bottom.diff_id(), top.diff_id()])
        );
        let manifest: Value = serde_json::from_slice(&image.children[1].data).unwrap();
        let layer_types: Vec<&str> = manifest["layers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["mediaType"].as_str().unwrap())
            .collect();
        assert_eq!(
            layer_types,
            [
                "application/vnd.oci.image.layer.v1.tar+gzip",
                "application/vnd.oci.image.layer.v1.tar+zstd"
            ]
        );
        let sizes: u64 = manifest["layers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["size"].as_u64().unwrap())
            .sum();
        assert_eq!(amd64.layers_size, sizes);
    }

    #[test]
    fn refuses_images_without_platforms_or_an_index() {
        assert!(ImageBuilder::new().build().is_err());
        let two = ImageBuilder::new()
            .platform(Platform::new("amd64", vec![]))
            .platform(Platform::new("arm64", vec![]));
        assert!(two.clone().build().is_err());
        assert_eq!(two.index().build().unwrap().children.len(), 2);
    }
}
