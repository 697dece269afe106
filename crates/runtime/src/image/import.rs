//! Air-gapped import (`skiff image import`, the role of `ctr images import`): the images of
//! an OCI image layout or a `docker save` archive into the store.
//!
//! Everything is checked before anything is visible: blobs are copied into the content
//! store and verified against their digests, layers are unpacked and verified against the
//! config's diff IDs, and only then are the image records written. A broken archive
//! (missing blob, digest mismatch, path escape, malformed JSON) therefore adds no image;
//! verified blobs and layers it brought stay in the store for reuse.

use std::collections::BTreeMap;
use std::path::Path;

use oci_client::client::current_platform_resolver;
use oci_client::manifest::{OciDescriptor, OciImageIndex, OciImageManifest};
use oci_spec::image::ImageConfiguration;

use super::archive::Archive;
use super::content::ContentError;
use super::pull::check_layers;
use super::store::StoredImage;
use super::{Error, ImageManager, ImageRecord, reference};
use crate::snapshot::{chain_ids, sha256_hex};

/// Annotation naming an image in an OCI layout: a full reference, or a bare tag.
const REF_NAME: &str = "org.opencontainers.image.ref.name";
/// containerd's annotation with the full image name (written by `ctr export`).
const CONTAINERD_NAME: &str = "io.containerd.image.name";
/// Index media types (OCI and Docker manifest list), whose entries are per platform.
const INDEX_TYPES: [&str; 2] = [
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
];

/// One image found in an archive.
struct Found {
    /// Normalized tags (`docker.io/library/busybox:latest`).
    repo_tags: Vec<String>,
    /// `<repository>@<digest>` for each tag, when the archive has a manifest digest.
    repo_digests: Vec<String>,
    /// The config blob: archive name, and its digest when the archive states it.
    config: (String, Option<String>),
    /// The layer blobs, bottom first, as the config.
    layers: Vec<(String, Option<String>)>,
}

/// `docker save`'s `manifest.json` entries.
#[derive(serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct DockerEntry {
    config: String,
    #[serde(default)]
    repo_tags: Option<Vec<String>>,
    layers: Vec<String>,
}

impl ImageManager {
    /// Imports every image of the archive at `path`: a directory or a tar (plain or gzip)
    /// holding an OCI image layout (`index.json`, `blobs/sha256/...`; names from the
    /// `io.containerd.image.name` or `org.opencontainers.image.ref.name` annotations) or a
    /// `docker save` archive (`manifest.json` with `Config`, `RepoTags`, `Layers`, which
    /// wins when both are present, as in Docker 25+ archives). A ref name that is a bare
    /// tag (`v1`) names no repository, so such an image is imported untagged, known by
    /// its ID. Index entries resolve to the linux/amd64 (host) manifest.
    ///
    /// Returns the imported images. Errors ([`Error::InvalidContent`] naming the archive,
    /// [`Error::DigestMismatch`], [`Error::Layer`]) leave no new image visible. Does
    /// blocking file I/O; runs beside a running runtime (see [`ImageManager::attach`]).
    pub async fn import(&self, path: &Path) -> Result<Vec<ImageRecord>, Error> {
        let archive = Archive::open(path, &self.scratch)?;
        let found = if archive.has("manifest.json") {
            docker_images(&archive)?
        } else if archive.has("index.json") {
            oci_images(&archive)?
        } else {
            return Err(Error::InvalidContent {
                image: archive.source().to_string(),
                detail: "neither an OCI image layout (index.json) nor a docker save archive \
                         (manifest.json)"
                    .to_string(),
            });
        };
        let mut prepared = Vec::with_capacity(found.len());
        for image in found {
            prepared.push(self.store_blobs(&archive, image)?);
        }
        let _lease = self.leases.acquire(
            prepared
                .iter()
                .flat_map(|stored| stored.blobs.iter().chain(&stored.record.chain_ids))
                .cloned()
                .collect(),
        );
        for stored in &prepared {
            self.unpack_stored(archive.source(), stored).await?;
        }
        let mut records = Vec::with_capacity(prepared.len());
        for stored in prepared {
            let record = self.images.put(stored).map_err(|source| Error::Io {
                image: archive.source().to_string(),
                context: "write image record".to_string(),
                source,
            })?;
            tracing::info!(id = %record.id, tags = ?record.repo_tags, "imported image");
            records.push(record);
        }
        Ok(records)
    }

    /// Copies an image's config and layers into the content store (verified) and builds
    /// its record.
    fn store_blobs(&self, archive: &Archive, found: Found) -> Result<StoredImage, Error> {
        let source = archive.source();
        let (config_digest, _) = self.add_blob(archive, &found.config)?;
        let config: ImageConfiguration = archive.read_json(&found.config.0)?;
        let diff_ids = config.rootfs().diff_ids().clone();
        let mut layers = Vec::with_capacity(found.layers.len());
        let mut size = 0;
        for layer in &found.layers {
            let (digest, path) = self.add_blob(archive, layer)?;
            size += std::fs::metadata(&path).map(|meta| meta.len()).unwrap_or(0);
            layers.push(OciDescriptor {
                media_type: "application/vnd.oci.image.layer.v1.tar".to_string(),
                digest,
                ..Default::default()
            });
        }
        check_layers(&layers, &diff_ids).map_err(|detail| Error::InvalidContent {
            image: format!("{source}: {}", found.config.0),
            detail,
        })?;
        let mut blobs = vec![config_digest.clone()];
        blobs.extend(layers.into_iter().map(|layer| layer.digest));
        Ok(StoredImage {
            record: ImageRecord {
                id: config_digest,
                repo_tags: found.repo_tags,
                repo_digests: found.repo_digests,
                chain_ids: chain_ids(&diff_ids),
                size,
                config,
            },
            blobs,
        })
    }

    /// Copies the archive file `name` into the content store, checking it against the
    /// digest the archive states for it, if any.
    fn add_blob(
        &self,
        archive: &Archive,
        (name, expected): &(String, Option<String>),
    ) -> Result<(String, std::path::PathBuf), Error> {
        let path = archive.path(name)?;
        self.content
            .add_file(&path, expected.as_deref())
            .map_err(|err| match err {
                ContentError::Mismatch { .. } => Error::DigestMismatch {
                    image: archive.source().to_string(),
                    digest: expected.clone().unwrap_or_default(),
                    detail: format!("{name}: {err}"),
                },
                ContentError::InvalidDigest(_) => Error::InvalidContent {
                    image: archive.source().to_string(),
                    detail: format!("{name}: {err}"),
                },
                ContentError::Io { context, source } => Error::Io {
                    image: archive.source().to_string(),
                    context: format!("store {name}: {context}"),
                    source,
                },
                ContentError::Fetch(source) => Error::Io {
                    image: archive.source().to_string(),
                    context: format!("read {name}"),
                    source,
                },
            })
    }

    /// Unpacks the layers of a prepared image (already present ones are skipped).
    async fn unpack_stored(&self, source: &str, stored: &StoredImage) -> Result<(), Error> {
        let diff_ids = stored.record.config.rootfs().diff_ids();
        let layer_blobs = stored.blobs.iter().skip(1);
        for ((digest, diff_id), chain_id) in layer_blobs.zip(diff_ids).zip(&stored.record.chain_ids)
        {
            if self.snapshotter.has_layer(chain_id) {
                continue;
            }
            let blob = self
                .content
                .path(digest)
                .map_err(|err| Error::InvalidContent {
                    image: source.to_string(),
                    detail: err.to_string(),
                })?;
            self.snapshotter
                .commit_layer(chain_id, diff_id, &blob)
                .await
                .map_err(|err| Error::Layer {
                    image: source.to_string(),
                    digest: digest.clone(),
                    source: err,
                })?;
        }
        Ok(())
    }
}

/// The images of a `docker save` archive. The config's name is `<hex>.json` (or
/// `blobs/sha256/<hex>`), `<hex>` being the image ID, so it is verified; layers are
/// verified by their diff IDs when unpacked.
fn docker_images(archive: &Archive) -> Result<Vec<Found>, Error> {
    let entries: Vec<DockerEntry> = archive.read_json("manifest.json")?;
    let mut found = Vec::with_capacity(entries.len());
    for entry in entries {
        let stem = entry
            .config
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .trim_end_matches(".json");
        let expected = sha256_hex(&format!("sha256:{stem}")).map(|hex| format!("sha256:{hex}"));
        let mut repo_tags = Vec::new();
        for tag in entry.repo_tags.unwrap_or_default() {
            let parsed = reference::normalize(&tag)?;
            repo_tags.extend(reference::tag(&parsed));
        }
        found.push(Found {
            repo_tags,
            repo_digests: Vec::new(),
            config: (entry.config, expected),
            layers: entry.layers.into_iter().map(|name| (name, None)).collect(),
        });
    }
    Ok(found)
}

/// The images of an OCI image layout: one per `index.json` entry (an image index entry
/// resolves to this platform's manifest).
fn oci_images(archive: &Archive) -> Result<Vec<Found>, Error> {
    let index: OciImageIndex = archive.read_json("index.json")?;
    let mut found = Vec::with_capacity(index.manifests.len());
    for entry in &index.manifests {
        let annotations = entry.annotations.clone().unwrap_or_default();
        let mut manifest_digest = entry.digest.clone();
        if INDEX_TYPES.contains(&entry.media_type.as_str()) {
            let nested: OciImageIndex = archive.read_json(&blob_name(archive, &entry.digest)?)?;
            manifest_digest =
                current_platform_resolver(&nested.manifests).ok_or_else(|| Error::NotFound {
                    image: archive.source().to_string(),
                    detail: format!("index {} has no linux/amd64 manifest", entry.digest),
                })?;
        }
        let manifest: OciImageManifest =
            archive.read_json(&blob_name(archive, &manifest_digest)?)?;
        let (repo_tags, repo_digests) = names(&annotations, &entry.digest)?;
        let blob = |descriptor: &OciDescriptor| -> Result<(String, Option<String>), Error> {
            Ok((
                blob_name(archive, &descriptor.digest)?,
                Some(descriptor.digest.clone()),
            ))
        };
        found.push(Found {
            repo_tags,
            repo_digests,
            config: blob(&manifest.config)?,
            layers: manifest.layers.iter().map(blob).collect::<Result<_, _>>()?,
        });
    }
    Ok(found)
}

/// Tags and repo digests from an index entry's annotations. Only a full reference names a
/// repository; a bare tag (`v1`, `latest`) does not.
fn names(
    annotations: &BTreeMap<String, String>,
    digest: &str,
) -> Result<(Vec<String>, Vec<String>), Error> {
    let name = annotations
        .get(CONTAINERD_NAME)
        .or_else(|| annotations.get(REF_NAME))
        .filter(|name| name.contains('/') || name.contains(':'));
    let Some(name) = name else {
        return Ok((Vec::new(), Vec::new()));
    };
    let parsed = reference::normalize(name)?;
    let tags = reference::tag(&parsed).into_iter().collect();
    let digests = vec![format!("{}@{digest}", reference::repository(&parsed))];
    Ok((tags, digests))
}

/// `blobs/sha256/<hex>` for `digest`. Errors: not a sha256 digest.
fn blob_name(archive: &Archive, digest: &str) -> Result<String, Error> {
    sha256_hex(digest)
        .map(|hex| format!("blobs/sha256/{hex}"))
        .ok_or_else(|| Error::InvalidContent {
            image: archive.source().to_string(),
            detail: format!("unsupported digest {digest:?} (only sha256 is supported)"),
        })
}
